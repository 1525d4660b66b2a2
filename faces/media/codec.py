"""JPEG out, and every file's poster: libjpeg-turbo through OpenCV (bench/jpeg_codec.py compares simplejpeg)."""

import cv2
import numpy as np

JPEG_QUALITY = 88
THUMBNAIL_LONG_SIDE = 300


def encode_jpeg(image: np.ndarray) -> bytes:
    """Baseline JPEG with no EXIF, GPS or any other metadata: OpenCV writes none."""
    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return data.tobytes()


def thumbnail(image: np.ndarray) -> np.ndarray:
    """At most THUMBNAIL_LONG_SIDE on the long side, cut from the already-blurred output."""
    height, width = image.shape[:2]
    scale = THUMBNAIL_LONG_SIDE / max(height, width)
    if scale >= 1:
        return image
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def poster(frame: np.ndarray) -> bytes:
    """A file's JPEG thumbnail, cut from its own (blurred) first frame."""
    return encode_jpeg(thumbnail(frame))


def jpeg_and_poster(image: np.ndarray) -> tuple[bytes, bytes]:
    """A still's file and its poster, both from the same (blurred) picture."""
    return encode_jpeg(image), poster(image)
