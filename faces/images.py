"""Decode uploads exactly as stored, refusing what would hurt the worker or leak a face.

The kind of an upload is decided from its bytes, never from its key's suffix
(`media_kind`): a still (JPEG, PNG, WebP, HEIC/HEIF), an animated image (more than one
frame) or a video container. Stills are decoded here; animated images and videos go
through faces/media/. Where only a still will do (a reference selfie, the still path),
a multi-frame upload is refused with `unsupported_media`: rendering it from its first
frame would show every face in the frames the worker never looked at.
"""

import contextlib
import enum
import io

import cv2
import numpy as np
import pillow_heif
from PIL import Image

from jobqueue.errors import PermanentJobError

# HEIC/HEIF stills (iPhones) open in Pillow like any other image; OpenCV cannot decode them.
pillow_heif.register_heif_opener()

# Larger than any camera's still (a 100 MP medium-format frame), far below a
# decompression bomb: a 20,000 x 20,000 image would need 1.2 GB as BGR.
MAX_PIXELS = 120_000_000
MAX_BYTES = 80 * 1024 * 1024

# ISO base media (MP4, MOV, 3GP, HEIF) starts with a box `....ftyp{brand}`; these
# brands are images Pillow opens (HEIF/AVIF); every other brand is a movie.
# An AVIF image sequence (`avis`) is an animation Pillow reads frame by frame with its timing,
# where FFmpeg reads its first image only.
STILL_FTYP_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"mif1", b"avif", b"avis"}
MATROSKA_MAGIC = b"\x1a\x45\xdf\xa3"  # WebM and MKV
# Multi-frame formats that are animations. Other multi-frame files (TIFF pages, MPO's
# depth and preview pictures, HEIF collections) have no timing to keep: unsupported media.
ANIMATION_FORMATS = {"GIF", "WEBP", "PNG", "AVIF"}


class MediaKind(enum.StrEnum):
    """`photos.media_type`."""

    IMAGE = "image"
    ANIMATED = "animated"
    VIDEO = "video"


class UndecodableImage(PermanentJobError):
    reason = "undecodable_image"


class ImageTooLarge(PermanentJobError):
    reason = "image_too_large"


class UnsupportedMedia(PermanentJobError):
    reason = "unsupported_media"


def decode_upload(data: bytes) -> np.ndarray:
    """BGR pixels as stored. The upload is upright: EXIF orientation is never applied."""
    if len(data) > MAX_BYTES:
        raise ImageTooLarge(f"{len(data)} bytes, limit {MAX_BYTES}")
    width, height = image_size(data)
    if width * height > MAX_PIXELS:
        raise ImageTooLarge(f"{width}x{height} is {width * height} pixels, limit {MAX_PIXELS}")
    if _opened_by_pillow(data):
        image = _decode_with_pillow(data)
    else:
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if image is None or image.shape[:2] != (height, width):
        raise UndecodableImage(f"the {width}x{height} image header promises pixels that do not decode")
    return image


def media_kind(data: bytes) -> MediaKind:
    """What the bytes are, whatever the key says; UndecodableImage when they are none of them."""
    if not data:
        raise UndecodableImage("zero bytes")
    if video_container(data):
        return MediaKind.VIDEO
    with _header(data) as header:
        if not is_multi_frame(header):
            return MediaKind.IMAGE
        if header.format not in ANIMATION_FORMATS:
            raise UnsupportedMedia(f"a {header.format} with more than one frame (pages, not an animation)")
        return MediaKind.ANIMATED


def image_size(data: bytes) -> tuple[int, int]:
    """Width and height of a single-frame still, from its header, before any pixel is decoded."""
    if not data:
        raise UndecodableImage("zero bytes")
    container = video_container(data)
    if container:
        raise UnsupportedMedia(f"a video container ({container}), where only a still will do")
    with _header(data) as header:
        width, height = header.size
        if is_multi_frame(header):
            raise UnsupportedMedia(f"a {header.format} with more than one frame, where only a still will do")
    if width <= 0 or height <= 0:
        raise UndecodableImage(f"image of size {width}x{height}")
    return width, height


@contextlib.contextmanager
def _header(data: bytes):
    """The image, open; whatever Pillow raises while it is read (a GIF cut short fails only when its
    frames are counted) is a bad upload, never retried."""
    try:
        with Image.open(io.BytesIO(data)) as header:
            yield header
    except PermanentJobError:
        raise
    except Image.DecompressionBombError as error:
        raise ImageTooLarge(str(error)) from None
    except Exception as error:  # Pillow raises many types for bad headers
        raise UndecodableImage(f"not an image: {type(error).__name__}: {error}") from None


def video_container(data: bytes) -> str | None:
    """The container's name when the bytes are a video container (whatever the key says), else None."""
    if data[4:8] == b"ftyp" and data[8:12] not in STILL_FTYP_BRANDS:
        return f"ISO media, brand {data[8:12].decode('latin-1').strip()!r}"
    if data.startswith(MATROSKA_MAGIC):
        return "WebM/Matroska"
    if data.startswith(b"RIFF") and data[8:12] == b"AVI ":
        return "AVI"
    return None


def _opened_by_pillow(data: bytes) -> bool:
    return data[4:8] == b"ftyp" and data[8:12] in STILL_FTYP_BRANDS


def _decode_with_pillow(data: bytes) -> np.ndarray | None:
    try:
        with Image.open(io.BytesIO(data)) as image:
            return cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR)
    except Exception:  # a HEIF whose header reads but whose pixels do not
        return None


def is_multi_frame(header: Image.Image) -> bool:
    # is_animated looks no further than a second frame; n_frames covers multi-page formats without it.
    return bool(getattr(header, "is_animated", False)) or getattr(header, "n_frames", 1) > 1
