"""Decode uploads exactly as stored, refusing what would hurt the worker."""

import io

import cv2
import numpy as np
from PIL import Image

from jobqueue.errors import PermanentJobError

# Larger than any camera's still (a 100 MP medium-format frame), far below a
# decompression bomb: a 20,000 x 20,000 image would need 1.2 GB as BGR.
MAX_PIXELS = 120_000_000
MAX_BYTES = 80 * 1024 * 1024


class UndecodableImage(PermanentJobError):
    reason = "undecodable_image"


class ImageTooLarge(PermanentJobError):
    reason = "image_too_large"


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
    """Width and height from the header alone, before any pixel is decoded."""
    if not data:
        raise UndecodableImage("zero bytes")
    try:
        with Image.open(io.BytesIO(data)) as header:
            width, height = header.size
    except Image.DecompressionBombError as error:
        raise ImageTooLarge(str(error)) from None
    except Exception as error:  # Pillow raises many types for bad headers
        raise UndecodableImage(f"not an image: {type(error).__name__}: {error}") from None
    if width <= 0 or height <= 0:
        raise UndecodableImage(f"image of size {width}x{height}")
    return width, height
