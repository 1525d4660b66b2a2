"""An upload as the face pass takes it (docs/ARCHITECTURE.md §5, §11): `read_object` reads it from storage, no
further than its limit; `open(data)` tells what the bytes are, never from the key's suffix, and opens them as the
class of their kind, each refusing what is beyond its limits before any pixel is decoded.

The kinds: a still (JPEG, PNG, WebP, HEIC/HEIF, AVIF; an MPO or Ultra HDR JPEG is a still shown from its primary
picture; faces/media/still.py), an animated image (more than one frame; faces/media/animated.py) or a video container
(faces/media/video.py). Each is a Media: its size, its frames, and files encoded from its frames with a painter's blur
on each, every file with a JPEG poster. Media decodes and encodes: which frames are looked at is detection's
(faces/detection/), what a frame gets blurred is rendering's (faces/rendering/painters.py). Adding a kind is adding
one class.

How much of an upload the worker takes on, and what it spends on writing its files, is one MediaLimits, built once
from the MEDIA_* settings (MEDIA_LIMITS) and handed by `open` to the upload's class. A refusal is a PermanentJobError:
the job is archived with its `reason`, never retried.
"""

import contextlib
import enum
import io
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Protocol

import botocore.exceptions
import cv2
import numpy as np
import pillow_heif
from django.conf import settings
from django.core.files.storage import default_storage
from PIL import Image

from faces.checkpoint import Checkpoint, never_stop
from jobqueue.api import MissingObject, PermanentJobError

# HEIC/HEIF stills (iPhones) open in Pillow like any other image; OpenCV cannot decode them.
pillow_heif.register_heif_opener()

# S3's codes for an object that is not there.
_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}
# ISO base media (MP4, MOV, 3GP, HEIF) starts with a box `....ftyp{brand}`; these
# brands are images Pillow opens (HEIF/AVIF); every other brand is a movie.
# An AVIF image sequence (`avis`) is an animation Pillow reads frame by frame with its timing,
# where FFmpeg reads its first image only.
STILL_FTYP_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"mif1", b"avif", b"avis"}
MATROSKA_MAGIC = b"\x1a\x45\xdf\xa3"  # WebM and MKV
# Multi-frame formats that are animations. Other multi-frame files (TIFF pages) have no
# timing to keep and no primary page: unsupported media.
ANIMATION_FORMATS = {"GIF", "WEBP", "PNG", "AVIF"}
# Several pictures, one of them primary (MPO: stereo pairs, previews, Ultra HDR gain maps; a HEIF
# collection): a still, shown and rendered from its primary picture (faces/media/still.py).
PRIMARY_PICTURE_FORMATS = {"MPO", "HEIF"}
# FFmpeg's demuxers of images, by name: what they read is an image for Pillow, never a video.
IMAGE_DEMUXERS = re.compile(r"pipe|image2|gif|apng|webp")


class MediaKind(enum.StrEnum):
    """`photos.media_type`."""

    IMAGE = "image"
    ANIMATED = "animated"
    VIDEO = "video"


class UndecodableImage(PermanentJobError):
    """No picture in the bytes, or a header whose pixels do not decode."""

    reason = "undecodable_image"


class ImageTooLarge(PermanentJobError):
    reason = "image_too_large"


class UnsupportedMedia(PermanentJobError):
    """Pages without timing (a TIFF), or frames where only a still will do (a reference selfie): shown from
    one frame, the others' faces would go unseen."""

    reason = "unsupported_media"


class MediaTooLarge(PermanentJobError):
    """Beyond a MEDIA_MAX_* setting; the message names it."""

    reason = "media_too_large"


class UndecodableMedia(PermanentJobError):
    reason = "undecodable_media"


@dataclass(frozen=True)
class MediaLimits:
    """How much of an upload the worker takes on (the MEDIA_MAX_* settings), checked before any pixel is decoded,
    and what it spends on the files it writes."""

    # No upload larger than this is read (a minute of 4K video at 40 Mbit/s is 300 MB).
    upload_bytes: int
    # A still's file: larger than any camera's, far below what a decompression bomb needs.
    still_bytes: int
    # Larger than any camera's still (a 100 MP medium-format frame), far below a decompression bomb: a 20,000 x
    # 20,000 image would need 1.2 GB as BGR.
    still_pixels: int
    # A clip's frames, at most: clips, not films (every frame is decoded twice and encoded once per file).
    frames: int
    # A clip's length in seconds, at most: clips, not films.
    duration_s: float
    # A clip's frame, in pixels, at most (4K).
    frame_pixels: int
    # An animated image is held in memory whole (the WebP encoder takes every frame at once): all its frames
    # together, in pixels.
    animation_pixels: int
    # Every still file and every poster (libjpeg-turbo through OpenCV; bench/jpeg_codec.py compares simplejpeg).
    jpeg_quality: int = 88
    # A poster's long side, at most: cut from the already-blurred output.
    thumbnail_long_side: int = 300
    # An animated image's WebP (libwebp's lossy quality).
    webp_quality: int = 85
    # x264: "veryfast" with the diamond motion search: 0.90-0.95x veryfast's CPU for the same file and luma PSNR
    # (bench/video_encoder.py). Its cheaper sub-pixel refinement (subme 1) would save a quarter more but leaves coding
    # noise in a blurred smeared face (tests/test_video_coverage.py's smeared look frame: detail 0.49 where a blur
    # leaves under 0.4). CRF 20 keeps faces that are not blurred as sharp as the phone's upload looks.
    x264_options: Mapping[str, str] = MappingProxyType({"preset": "veryfast", "crf": "20", "x264-params": "me=dia"})
    # x264 holds about 70 bytes per pixel of an output (its lookahead and reference frames: some 600 MB for a 4K
    # one). At most this many output pixels are encoded at once; more outputs (more DNP members in a 4K clip) take
    # another pass over the upload, so memory stays within the unit's.
    encoded_pixels_at_once: int = 2 * 3840 * 2160
    # A still's files are rendered side by side, a copy of the picture each, at most this many pixels at once: two
    # 12 MP files (the second core encodes the next file's JPEG), one 24 or 48 MP file (memory as before).
    rendered_pixels_at_once: int = 2 * 4000 * 3000

    @classmethod
    def from_settings(cls) -> "MediaLimits":
        return cls(
            upload_bytes=settings.MEDIA_MAX_UPLOAD_BYTES,
            still_bytes=settings.MEDIA_MAX_STILL_BYTES,
            still_pixels=settings.MEDIA_MAX_STILL_PIXELS,
            frames=settings.MEDIA_MAX_FRAMES,
            duration_s=settings.MEDIA_MAX_DURATION_S,
            frame_pixels=settings.MEDIA_MAX_FRAME_PIXELS,
            animation_pixels=settings.MEDIA_MAX_ANIMATION_PIXELS,
        )

    def check_still(self, size: int, width: int, height: int) -> None:
        """Raise ImageTooLarge for a still of more than `still_bytes` (its `size`) or `still_pixels`,
        UndecodableImage for an empty picture."""
        if size > self.still_bytes:
            raise ImageTooLarge(f"{size} bytes, limit {self.still_bytes}")
        if width <= 0 or height <= 0:
            raise UndecodableImage(f"image of size {width}x{height}")
        if width * height > self.still_pixels:
            raise ImageTooLarge(f"{width}x{height} is {width * height} pixels, limit {self.still_pixels}")

    def check_clip(
        self, *, frames: int, duration_s: float, width: int, height: int, held_in_memory: bool = False
    ) -> None:
        """Raise MediaTooLarge, naming the setting, for a clip beyond any limit."""
        beyond = []
        if frames > self.frames:
            beyond.append(f"{frames} frames > MEDIA_MAX_FRAMES {self.frames}")
        if duration_s > self.duration_s:
            beyond.append(f"{duration_s:.1f} s > MEDIA_MAX_DURATION_S {self.duration_s:g}")
        if width * height > self.frame_pixels:
            beyond.append(f"{width}x{height} per frame > MEDIA_MAX_FRAME_PIXELS {self.frame_pixels}")
        if held_in_memory and frames * width * height > self.animation_pixels:
            most = self.animation_pixels
            beyond.append(f"{frames * width * height} pixels in all > MEDIA_MAX_ANIMATION_PIXELS {most}")
        if width <= 0 or height <= 0 or frames <= 0:
            raise UndecodableMedia(f"{frames} frames of {width}x{height}")
        if beyond:
            raise MediaTooLarge("; ".join(beyond))

    def check_frame(self, width: int, height: int) -> None:
        """A video's frame size beyond MEDIA_MAX_FRAME_PIXELS: its header's, before its first frame is decoded, and
        each decoded frame's (a resolution change mid-stream may make one larger than the header said)."""
        if width * height > self.frame_pixels:
            raise MediaTooLarge(f"a {width}x{height} frame > MEDIA_MAX_FRAME_PIXELS")


# The worker's limits. A bench or a test that varies one opens the upload with `dataclasses.replace` of these.
MEDIA_LIMITS = MediaLimits.from_settings()


def read_object(key: str, limits: MediaLimits | None = None) -> bytes:
    """The object's bytes; MissingObject (archived at once) when it is not there, MediaTooLarge when it is larger
    than the limits' upload_bytes (None: MEDIA_LIMITS; never more than that is read into memory).

    Any other storage error propagates: an outage is retried by the consumer.
    """
    limit = (limits or MEDIA_LIMITS).upload_bytes
    try:
        with default_storage.open(key, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise MissingObject(f"no object at {key}") from None
    except botocore.exceptions.ClientError as error:
        if str(error.response.get("Error", {}).get("Code")) in _MISSING_CODES:
            raise MissingObject(f"no object at {key}") from None
        raise
    if len(data) > limit:
        raise MediaTooLarge(f"{key} is larger than MEDIA_MAX_UPLOAD_BYTES ({limit} bytes)")
    return data


def open(data: bytes, limits: MediaLimits | None = None) -> "Media":
    """The upload, as the class of its kind (Still, AnimatedImage or Video); each refuses what is beyond `limits`
    (None: MEDIA_LIMITS)."""
    return Media.opened_as[media_kind(data)](data, limits)


class Stroke(Protocol):
    """One area of a frame a painter blurs."""

    def reach(self, width: int, height: int) -> tuple[int, int, int, int]:
        """The pixels (x1, y1, x2, y2) of a width x height frame it reads and writes."""

    def paint(self, image: np.ndarray, origin: tuple[int, int] = (0, 0)) -> None:
        """Blur it into `image` (BGR, in place): the frame, or a patch of it at `origin` holding its whole reach."""


class Painter(Protocol):
    """One output's blur."""

    # The (from, to) times it paints at, ends included: a frame outside them can be encoded as decoded.
    spans: list[tuple[float, float]]

    def __call__(self, time: float, frame: np.ndarray) -> None:
        """Paint the blur onto the frame shown at `time` (BGR, in place)."""

    def strokes(self, time: float) -> list[Stroke]:
        """What it paints at `time`, in order: painting them is painting the frame."""


@dataclass(frozen=True)
class RenderedFile:
    data: bytes
    poster: bytes  # the JPEG thumbnail, cut from the file's own first frame


class Media(ABC):
    """One upload, read from its header at once: size, kind and limits before any pixel is decoded; its frames
    decoded on demand, the same frames with the same times on every pass."""

    # Each kind's class, by its kind (filled as each class is defined; faces/media/__init__.py defines them all):
    # what `open` makes of an upload.
    opened_as: ClassVar[dict[MediaKind, type["Media"]]] = {}

    kind: MediaKind
    data: bytes  # the upload's bytes
    limits: MediaLimits  # what it is held to, and what its files may spend
    extension: str  # of its rendered files
    width: int
    height: int
    duration_ms: int | None
    # Whether the upload's own bytes may be the public file; only a plain still's may.
    published_as_is: bool = False
    # For the job's log line: why a still's public file is rendered rather than its upload (a clip always is).
    why_rendered: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "kind" in vars(cls):
            Media.opened_as[cls.kind] = cls

    def __init__(self, data: bytes, limits: MediaLimits | None = None):
        self.data = data
        self.limits = limits or MEDIA_LIMITS

    @abstractmethod
    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        """(time in seconds from the first frame, BGR pixels) of every frame, in order."""

    @abstractmethod
    def render(self, painters: list[Painter], checkpoint: Checkpoint = never_stop) -> Iterable[RenderedFile]:
        """One file per painter, each from every frame with that painter's blur; `checkpoint` is called
        before each frame and once more before the files are given, so that nothing is uploaded after a
        try's session is gone (it may raise to stop the render)."""


def media_kind(data: bytes) -> MediaKind:
    """What the bytes are, whatever the key says; UndecodableImage when they are none of them (zero bytes too:
    `image_header`)."""
    if video_container(data):
        return MediaKind.VIDEO
    try:
        with image_header(data) as header:
            if not is_multi_frame(header):
                return MediaKind.IMAGE
            if header.format not in ANIMATION_FORMATS:
                raise UnsupportedMedia(f"a {header.format} with more than one frame (pages, not an animation)")
            return MediaKind.ANIMATED
    except UndecodableImage:
        if ffmpeg_video(data):
            return MediaKind.VIDEO
        raise


def ffmpeg_video(data: bytes) -> str | None:
    """The container's name when FFmpeg's probe reads a video stream in the bytes (MPEG-TS and camcorders'
    .MTS, MPEG-PS, ASF, FLV: every container it reads), else None. Its readers of images (`*_pipe`,
    `image2`, GIF, APNG, WebP) are not videos: an image Pillow could not read is an undecodable image."""
    import av

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            name = container.format.name
            if container.streams.video and not IMAGE_DEMUXERS.search(name):
                return name
    except (av.FFmpegError, ValueError, OSError):  # not a container FFmpeg reads
        return None
    return None


@contextlib.contextmanager
def image_header(data: bytes):
    """The image, open; whatever Pillow raises while it is read (a GIF cut short fails only when its
    frames are counted) is a bad upload, never retried."""
    if not data:
        raise UndecodableImage("zero bytes")
    with pillow_opened(data, ImageTooLarge, UndecodableImage, "not an image") as header:
        yield header


@contextlib.contextmanager
def pillow_opened(data: bytes, too_large: type[PermanentJobError], undecodable: type[PermanentJobError], what: str):
    """The bytes, open in Pillow; whatever Pillow raises while they are read is a refusal with a reason, never
    retried: `too_large` for a decompression bomb, else `undecodable` (its message begins with `what`). A crash in a
    decoder is a refusal, not three failed tries."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            yield image
    except PermanentJobError:
        raise
    except Image.DecompressionBombError as error:
        raise too_large(str(error)) from None
    except Exception as error:  # Pillow raises many types for bad files (KeyError, struct.error, zlib.error...)
        raise undecodable(f"{what}: {type(error).__name__}: {error}") from None


@contextlib.contextmanager
def still_header(data: bytes):
    """The header of an upload that must be one picture (a still); a video container or a multi-frame image
    is refused: unsupported_media."""
    container = video_container(data)
    if container:
        raise UnsupportedMedia(f"a video container ({container}), where only a still will do")
    with image_header(data) as header:
        if is_multi_frame(header):
            raise UnsupportedMedia(f"a {header.format} with more than one frame, where only a still will do")
        yield header


def video_container(data: bytes) -> str | None:
    """The container's name when the bytes are a video container (whatever the key says), else None."""
    if data[4:8] == b"ftyp" and data[8:12] not in STILL_FTYP_BRANDS:
        return f"ISO media, brand {data[8:12].decode('latin-1').strip()!r}"
    if data.startswith(MATROSKA_MAGIC):
        return "WebM/Matroska"
    if data.startswith(b"RIFF") and data[8:12] == b"AVI ":
        return "AVI"
    return None


def is_multi_frame(header: Image.Image) -> bool:
    """More than one frame to show in turn. A file of several pictures with a primary one (MPO, Ultra HDR,
    a HEIF collection) is a still: the primary picture is what a viewer is shown."""
    if header.format in PRIMARY_PICTURE_FORMATS:
        return False
    # is_animated looks no further than a second frame; n_frames covers multi-page formats without it.
    return bool(getattr(header, "is_animated", False)) or getattr(header, "n_frames", 1) > 1


def encode_jpeg(image: np.ndarray, limits: MediaLimits | None = None) -> bytes:
    """Baseline JPEG with no EXIF, GPS or any other metadata: OpenCV writes none."""
    quality = (limits or MEDIA_LIMITS).jpeg_quality
    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return data.tobytes()


def thumbnail(image: np.ndarray, limits: MediaLimits | None = None) -> np.ndarray:
    """At most the limits' thumbnail_long_side on the long side, cut from the already-blurred output."""
    height, width = image.shape[:2]
    scale = (limits or MEDIA_LIMITS).thumbnail_long_side / max(height, width)
    if scale >= 1:
        return image
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def poster(frame: np.ndarray, limits: MediaLimits | None = None) -> bytes:
    """A file's JPEG thumbnail, cut from its own (blurred) first frame."""
    return encode_jpeg(thumbnail(frame, limits), limits)


def jpeg_and_poster(image: np.ndarray, limits: MediaLimits | None = None) -> tuple[bytes, bytes]:
    """A still's file and its poster, both from the same (blurred) picture."""
    return encode_jpeg(image, limits), poster(image, limits)
