"""Decode uploads exactly as stored, refusing what would hurt the worker or leak a face.

The kind of an upload is decided from its bytes, never from its key's suffix. Only
stills are processed today: a multi-frame upload (animated GIF, WebP or APNG,
multi-page TIFF) or a video container is refused with `unsupported_media`, because
publishing it as itself, or rendering it from its first frame, would show every
face in the frames the worker never looked at.
"""

import io

import cv2
import numpy as np
from PIL import Image

from jobqueue.errors import PermanentJobError

# Larger than any camera's still (a 100 MP medium-format frame), far below a
# decompression bomb: a 20,000 x 20,000 image would need 1.2 GB as BGR.
MAX_PIXELS = 120_000_000
MAX_BYTES = 80 * 1024 * 1024

# ISO base media (MP4, MOV, 3GP, HEIF) starts with a box `....ftyp{brand}`; these
# brands are still images (HEIF/AVIF); every other brand is a movie.
STILL_FTYP_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"mif1", b"avif"}
MATROSKA_MAGIC = b"\x1a\x45\xdf\xa3"  # WebM and MKV


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
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if image is None or image.shape[:2] != (height, width):
        raise UndecodableImage(f"the {width}x{height} image header promises pixels that do not decode")
    return image


def image_size(data: bytes) -> tuple[int, int]:
    """Width and height of a single-frame still, from its header, before any pixel is decoded."""
    if not data:
        raise UndecodableImage("zero bytes")
    refuse_video(data)
    try:
        with Image.open(io.BytesIO(data)) as header:
            width, height = header.size
            animated = is_multi_frame(header)
    except Image.DecompressionBombError as error:
        raise ImageTooLarge(str(error)) from None
    except Exception as error:  # Pillow raises many types for bad headers
        raise UndecodableImage(f"not an image: {type(error).__name__}: {error}") from None
    if animated:
        raise UnsupportedMedia(f"a {header.format} with more than one frame: only single-frame stills are processed")
    if width <= 0 or height <= 0:
        raise UndecodableImage(f"image of size {width}x{height}")
    return width, height


def refuse_video(data: bytes) -> None:
    """A video container, whatever its key says, is unsupported media rather than a broken image."""
    if data[4:8] == b"ftyp" and data[8:12] not in STILL_FTYP_BRANDS:
        brand = data[8:12].decode("latin-1").strip()
        raise UnsupportedMedia(f"a video container (ISO media, brand {brand!r}): videos are not processed")
    if data.startswith(MATROSKA_MAGIC):
        raise UnsupportedMedia("a video container (WebM/Matroska): videos are not processed")
    if data.startswith(b"RIFF") and data[8:12] == b"AVI ":
        raise UnsupportedMedia("a video container (AVI): videos are not processed")


def is_multi_frame(header: Image.Image) -> bool:
    # is_animated looks no further than a second frame; n_frames covers multi-page formats without it.
    return bool(getattr(header, "is_animated", False)) or getattr(header, "n_frames", 1) > 1
