"""A still upload: its one picture as a viewer sees it, and whether its bytes may be published as they are.

What a viewer sees is what the worker looks at (docs/ARCHITECTURE.md §5, rule 4):
- the display orientation: an Exif orientation (JPEG, PNG, WebP, AVIF's `irot`/`imir` as
  Pillow reports them) is applied, so detection, stored boxes (fractions of the displayed
  image), blur regions and every file are upright, and the files carry no tag. pillow-heif
  applies a HEIF's `irot`/`imir` itself while decoding;
- transparency flattened onto white, as a page shows it: a face drawn in the alpha channel
  is seen, and what lies under fully transparent pixels is never published;
- of a file with several pictures (MPO, Ultra HDR, a HEIF with thumbnails or more images),
  its primary picture alone.

`published_as_is` says whether the upload's own bytes may be the public file: a plain JPEG or
PNG (faces/media/attachments.py) with no orientation and no transparency that changes what
it shows. Anything else is never published as itself: its public file is rendered from
`image`, so the published bytes hold exactly what the worker saw.

Only one picture will do: a multi-frame upload opened as a still (a reference selfie) is refused with
`unsupported_media`, since rendering it from its first frame would show every face in the frames the
worker never looked at.
"""

import io
from collections.abc import Iterator
from functools import cached_property

import cv2
import numpy as np
from PIL import Image

from faces.checkpoint import Checkpoint, never_stop
from faces.media import limits
from faces.media.attachments import ORIENTATION_TAG, attachments
from faces.media.codec import jpeg_and_poster
from faces.media.kinds import MediaKind, still_header
from faces.media.media import Media, Painter, RenderedFile

# Formats decoded through Pillow (pillow-heif and Pillow's AVIF plugin); OpenCV decodes the rest.
PILLOW_FORMATS = {"HEIF", "AVIF"}
# Exif orientation -> what turns the stored pixels into the displayed ones (Pillow's exif_transpose).
TO_DISPLAY = {
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1],
    5: lambda a: a.transpose(1, 0, 2),
    6: lambda a: cv2.rotate(a, cv2.ROTATE_90_CLOCKWISE),
    7: lambda a: a[::-1, ::-1].transpose(1, 0, 2),
    8: lambda a: cv2.rotate(a, cv2.ROTATE_90_COUNTERCLOCKWISE),
}
TURNED_SIDEWAYS = {5, 6, 7, 8}
# What a transparent pixel shows: a page's white.
BACKGROUND = 255.0


class Still(Media):
    """Read from its header at once (size, limits, orientation, attachments); decoded on first use."""

    kind = MediaKind.IMAGE
    extension = "jpg"
    duration_ms = None

    def __init__(self, data: bytes):
        with still_header(data) as header:
            stored_width, stored_height = header.size
            self.format = header.format
            self.orientation = _orientation(header)
        limits.check_still(len(data), stored_width, stored_height)
        self.data = data
        self._stored_size = (stored_height, stored_width)
        sideways = self.orientation in TURNED_SIDEWAYS
        self.width, self.height = (stored_height, stored_width) if sideways else (stored_width, stored_height)
        # An orientation is one of them: a JPEG's Exif one, a PNG's eXIf chunk; no other format is plain.
        self.attachments = attachments(data, self.format)
        self._transparent = False

    @cached_property
    def image(self) -> np.ndarray:
        """BGR uint8, as a viewer sees it: upright, transparency on white, the primary picture."""
        pixels = _decoded(self.data, self.format)
        if pixels is None or pixels.shape[:2] != self._stored_size:
            height, width = self._stored_size
            raise limits.UndecodableImage(f"the {width}x{height} image header promises pixels that do not decode")
        if pixels.shape[2] == 4:
            pixels = self._flattened(pixels)
        turn = TO_DISPLAY.get(self.orientation)
        return np.ascontiguousarray(turn(pixels)) if turn else pixels

    @cached_property
    def published_as_is(self) -> bool:
        """Whether the upload's bytes may be the public file: exactly the one picture the worker saw."""
        if self.attachments:
            return False
        self.image  # noqa: B018  (decoding tells whether transparency changes what it shows)
        return not self._transparent

    @cached_property
    def why_rendered(self) -> tuple[str, ...]:
        """Why the public file is rendered rather than the upload itself (empty when it may be itself)."""
        if self.published_as_is:
            return ()
        return tuple(self.attachments) or ("transparency that hides or changes what a viewer sees",)

    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        yield 0.0, self.image

    def render(self, painters: list[Painter], checkpoint: Checkpoint = never_stop) -> Iterator[RenderedFile]:
        """A JPEG and its thumbnail per painter, each rendered when the one before is taken: its upload
        overlaps the next render (faces/rendering/files.py). One frame: its one checkpoint is when the files
        are first asked for, before any upload (even when there is none, so that a try whose session is gone
        writes no row either)."""
        checkpoint()
        for painter in painters:
            out = self.image.copy()
            painter(0.0, out)
            yield RenderedFile(*jpeg_and_poster(out))

    def _flattened(self, bgra: np.ndarray) -> np.ndarray:
        self._transparent = bool(bgra[..., 3].min() < 255)
        return over_white(bgra)


def over_white(pixels: np.ndarray) -> np.ndarray:
    """A picture with an alpha channel (last of four, colours in any order) as a page shows it: the three
    colour channels over white. An opaque one keeps its colours exactly."""
    alpha = pixels[..., 3:]
    if alpha.min() == 255:
        return np.ascontiguousarray(pixels[..., :3])
    shown = pixels[..., :3] * (alpha / 255.0) + BACKGROUND * (1.0 - alpha / 255.0)
    return np.rint(shown).astype(np.uint8)


def _orientation(header: Image.Image) -> int:
    try:
        value = header.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # Exif that does not parse: the file is shown as stored (and never published as itself)
        return 1
    return value if value in TO_DISPLAY else 1


def _decoded(data: bytes, image_format: str) -> np.ndarray | None:
    """The stored pixels of the primary picture, BGR or BGRA uint8, orientation not applied."""
    if image_format in PILLOW_FORMATS:
        pixels = _decoded_by_pillow(data)
    else:
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED | cv2.IMREAD_IGNORE_ORIENTATION)
    if pixels is None:
        return None
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)
    if pixels.dtype != np.uint8:
        return None
    if pixels.ndim == 2 or pixels.shape[2] == 1:
        return cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR)
    return pixels if pixels.shape[2] in (3, 4) else None


def _decoded_by_pillow(data: bytes) -> np.ndarray | None:
    try:
        with Image.open(io.BytesIO(data)) as image:
            transparent = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
            pixels = np.asarray(image.convert("RGBA" if transparent else "RGB"))
    except Exception:  # a HEIF whose header reads but whose pixels do not
        return None
    return cv2.cvtColor(pixels, cv2.COLOR_RGBA2BGRA if transparent else cv2.COLOR_RGB2BGR)
