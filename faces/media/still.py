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
PNG (`attachments`, below) with no orientation and no transparency that changes what it shows.
Anything else is never published as itself: its public file is rendered from `image`, so the
published bytes hold exactly what the worker saw.

Only one picture will do: a multi-frame upload opened as a still (a reference selfie) is refused with
`unsupported_media`, since rendering it from its first frame would show every face in the frames the
worker never looked at.

What a still's bytes carry besides the one picture the worker decodes (`attachments`): an upload may be published as
itself only when its bytes hold exactly that picture. Files carry more than one all the time: a phone's motion photo
appends an MP4 after the JPEG's end, Ultra HDR appends a gain map behind an MPF index, Exif keeps a thumbnail (an
editor's crop often keeps the uncropped one), XMP embeds whole images (GImage, GDepth), Photoshop resources and
FlashPix segments hold previews, and any bytes may follow the image's end.

So this is an allow-list, not a hunt for known attachments: a JPEG is plain when it holds only the segments a
decoder needs (quantisation and Huffman tables, one baseline, extended or progressive frame, its scans), a JFIF
header without a thumbnail, an ICC profile, an Adobe colour marker and an Exif block that holds no second IFD (its
thumbnail), no embedded JPEG (maker-note previews) and no orientation, then nothing after its end. A PNG is plain
when it holds only the chunks that decide its pixels and colours, then nothing after IEND. A WebP is plain in its
simple format: one VP8 or VP8L bitstream and nothing else (the extended format's chunks hold Exif, XMP, frames).
Every other format is never plain: its container can hold pictures this scan does not read. `attachments` names what
it found; an empty list is a plain file. A file that is not plain is not refused: its public file is rendered from
the decoded picture, like any other file.
"""

import io
import re
import struct
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property

import cv2
import numpy as np
from PIL import Image

from faces.checkpoint import Checkpoint, never_stop
from faces.media.upload import (
    Media,
    MediaKind,
    MediaLimits,
    Painter,
    RenderedFile,
    UndecodableImage,
    jpeg_and_poster,
    still_header,
)

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
# Exif IFD0's orientation tag.
ORIENTATION_TAG = 0x0112
# JPEG markers a plain file may hold besides SOI, APPn and EOI: one frame (SOF0 baseline,
# SOF1 extended, SOF2 progressive), DHT, DQT, DRI; SOS is followed by entropy-coded data.
_SOF = {0xC0, 0xC1, 0xC2}
_TABLES = {0xC4, 0xDB, 0xDD}
_SOS, _EOI = 0xDA, 0xD9
# In entropy-coded data a 0xFF is followed by 0x00 (a stuffed byte) or a restart marker;
# anything else is the next marker.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7]")
_JPEG_START = b"\xff\xd8\xff"

# The APPn segments a plain JPEG may hold, by marker and signature. Exif is read further.
_JFIF, _EXIF, _ICC, _ADOBE = b"JFIF\x00", b"Exif\x00\x00", b"ICC_PROFILE\x00", b"Adobe"

# PNG chunks that decide the pixels and how they look, and nothing else.
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PLAIN_PNG_CHUNKS = {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"pHYs"}


class Still(Media):
    """Read from its header at once (size, limits, orientation, attachments); decoded on first use."""

    kind = MediaKind.IMAGE
    extension = "jpg"
    duration_ms = None

    def __init__(self, data: bytes, limits: MediaLimits | None = None):
        super().__init__(data, limits)
        with still_header(data) as header:
            stored_width, stored_height = header.size
            self.format = header.format
            self.orientation = _orientation(header)
        self.limits.check_still(len(data), stored_width, stored_height)
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
            raise UndecodableImage(f"the {width}x{height} image header promises pixels that do not decode")
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
        """A JPEG and its thumbnail per painter, in order, rendered side by side within the limits'
        rendered_pixels_at_once, each yielded once done: its upload overlaps the next renders
        (faces/rendering/files.py). One frame: its one checkpoint is when the files are first asked for, before
        any upload (even when there is none, so that a try whose session is gone writes no row either)."""
        checkpoint()
        image, at_once = self.image, max(1, self.limits.rendered_pixels_at_once // (self.width * self.height))
        with ThreadPoolExecutor(at_once, thread_name_prefix="render") as renders:
            pending: deque[Future] = deque()
            for painter in painters:
                pending.append(renders.submit(_rendered, image, painter, self.limits))
                if len(pending) == at_once:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def _flattened(self, bgra: np.ndarray) -> np.ndarray:
        self._transparent = bool(bgra[..., 3].min() < 255)
        return over_white(bgra)


def _rendered(image: np.ndarray, painter: Painter, limits: MediaLimits) -> RenderedFile:
    out = image.copy()
    painter(0.0, out)
    return RenderedFile(*jpeg_and_poster(out, limits))


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


def attachments(data: bytes, image_format: str) -> list[str]:
    """What the bytes hold besides the one picture a decoder shows; [] for a plain JPEG or PNG."""
    if image_format == "JPEG" and data.startswith(_JPEG_START):
        return _jpeg(data)
    if image_format == "PNG" and data.startswith(_PNG_SIGNATURE):
        return _png(data)
    if image_format == "WEBP" and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return [f"{image_format} (no such file is published as uploaded)"]


def _jpeg(data: bytes) -> list[str]:
    found, frames, exif_blocks, position = [], 0, 0, 2
    while True:
        while data[position : position + 2] == b"\xff\xff":
            position += 1  # fill bytes before a marker
        if position + 2 > len(data) or data[position] != 0xFF:
            return [*found, "a JPEG that ends before its end marker"]
        marker = data[position + 1]
        if marker == _EOI:
            break
        if position + 4 > len(data):
            return [*found, "a JPEG that ends before its end marker"]
        length = struct.unpack(">H", data[position + 2 : position + 4])[0]
        payload = data[position + 4 : position + 2 + length]
        position += 2 + length
        if marker == _SOS:
            after = _NEXT_MARKER.search(data, position)
            position = after.start() if after else len(data)
        elif marker in _SOF:
            frames += 1
            if frames == 2:
                found.append("a second frame")
        elif marker == 0xE1 and payload.startswith(_EXIF):
            exif_blocks += 1
            found += _exif(payload[len(_EXIF) :]) if exif_blocks == 1 else ["a second Exif block"]
        elif marker not in _TABLES:
            found += _app_segment(marker, payload)
    trailing = len(data) - (position + 2)
    return [*found, f"{trailing} bytes after the image's end"] if trailing else found


def _app_segment(marker: int, payload: bytes) -> list[str]:
    """[] for an APPn segment a plain JPEG may hold; else what it is."""
    if marker == 0xE0 and payload.startswith(_JFIF):
        return ["a JFIF thumbnail"] if payload[12:14] not in (b"", b"\x00\x00", b"\x00") else []
    if (marker == 0xE2 and payload.startswith(_ICC)) or (marker == 0xEE and payload.startswith(_ADOBE)):
        return []
    return [_named_segment(marker, payload)]


def _named_segment(marker: int, payload: bytes) -> str:
    if marker == 0xE1 and payload.startswith(b"http://ns.adobe.com/xap/1.0/"):
        return "an XMP packet (it may embed images: GImage, GDepth, a motion photo's or gain map's index)"
    if marker == 0xE1 and payload.startswith(b"http://ns.adobe.com/xmp/extension/"):
        return "an extended XMP packet"
    if marker == 0xE2 and payload.startswith(b"MPF\x00"):
        return "a multi-picture (MPF) index: further images follow"
    if marker == 0xE0 and payload.startswith(b"JFXX\x00"):
        return "a JFIF extension thumbnail"
    if marker == 0xED:
        return "Photoshop resources (they may hold a thumbnail)"
    if marker == 0xFE:
        return "a comment"
    if 0xE0 <= marker <= 0xEF:
        return f"an APP{marker - 0xE0} segment"
    return f"a 0x{marker:02X} segment"


def _exif(tiff: bytes) -> list[str]:
    """What an Exif block holds beyond tags: a thumbnail (a second IFD), embedded JPEGs, an orientation."""
    found = ["a JPEG inside the Exif block (a thumbnail or a maker note's preview)"] if b"\xff\xd8" in tiff else []
    try:
        order = {b"II": "<", b"MM": ">"}[tiff[:2]]
        first = struct.unpack(order + "I", tiff[4:8])[0]
        count = struct.unpack(order + "H", tiff[first : first + 2])[0]
        entries = tiff[first + 2 : first + 2 + 12 * count]
        following = struct.unpack(order + "I", tiff[first + 2 + 12 * count : first + 6 + 12 * count])[0]
    except (KeyError, struct.error):
        return [*found, "an Exif block that does not parse"]
    for index in range(count):
        tag, kind, _, value = struct.unpack(order + "HHI4s", entries[12 * index : 12 * index + 12])
        if tag == ORIENTATION_TAG:
            orientation = struct.unpack(order + "H", value[:2])[0] if kind == 3 else None
            if orientation != 1:
                found.append(f"an orientation (Exif {orientation})")
    if following:
        found.append("an Exif thumbnail (a second IFD)")
    return found


def _png(data: bytes) -> list[str]:
    found, position = [], len(_PNG_SIGNATURE)
    while True:
        if position + 8 > len(data):
            return [*found, "a PNG that ends before IEND"]
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        position += 12 + length
        if kind not in _PLAIN_PNG_CHUNKS:
            found.append(f"a PNG {kind.decode('latin-1')!r} chunk")
        if kind == b"IEND":
            break
    trailing = len(data) - position
    return [*found, f"{trailing} bytes after the image's end"] if trailing > 0 else found


def _webp(data: bytes) -> list[str]:
    riff_end = 8 + struct.unpack("<I", data[4:8])[0]
    kind = data[12:16]
    if kind not in (b"VP8 ", b"VP8L") or len(data) < 20:
        found = [f"a WebP {kind.decode('latin-1')!r} chunk (the extended format: Exif, XMP, alpha or frames)"]
    else:
        length = struct.unpack("<I", data[16:20])[0]
        found = ["further WebP chunks"] if 20 + length + (length & 1) < riff_end else []
    trailing = len(data) - riff_end
    return [*found, f"{trailing} bytes after the image's end"] if trailing > 0 else found
