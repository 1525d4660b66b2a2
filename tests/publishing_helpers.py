"""What the publishing tests share: run the real worker, read files back, compare pixels."""

import cv2
import numpy as np
from django.core.files.storage import default_storage
from django.core.management import call_command

from faces.models import Face, Photo


def run_worker_drain() -> None:
    call_command("run_worker", "--drain", "--health-port", "0")


def read_image(key: str) -> np.ndarray:
    with default_storage.open(key, "rb") as handle:
        data = handle.read()
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None, key
    return image


def read_bytes(key: str) -> bytes:
    with default_storage.open(key, "rb") as handle:
        return handle.read()


def face_core(image: np.ndarray, face: Face) -> np.ndarray:
    """The middle of the face box: eyes, nose, mouth."""
    height, width = image.shape[:2]
    x1 = int((face.box_x + face.box_w * 0.2) * width)
    x2 = int((face.box_x + face.box_w * 0.8) * width)
    y1 = int((face.box_y + face.box_h * 0.2) * height)
    y2 = int((face.box_y + face.box_h * 0.8) * height)
    return image[y1:y2, x1:x2].astype(np.float32)


def difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute pixel difference."""
    return float(np.abs(a.astype(np.float32) - b.astype(np.float32)).mean())


def structure_lost(original: np.ndarray, blurred: np.ndarray) -> float:
    """How much of the original's high-frequency detail is gone (1.0 = all of it)."""

    def detail(img):
        gray = cv2.cvtColor(img.astype(np.uint8), cv2.COLOR_BGR2GRAY).astype(np.float32)
        return float(np.abs(cv2.Laplacian(gray, cv2.CV_32F)).mean())

    return 1.0 - detail(blurred) / max(detail(original), 1e-6)


def assert_every_row_key_exists(photo: Photo) -> None:
    keys = [photo.public_key, photo.public_thumb_key]
    keys += [k for variant in photo.variants.all() for k in (variant.key, variant.thumb_key)]
    for key in keys:
        if key:
            assert default_storage.exists(key), f"a row points at a missing object: {key}"


def thumbnail_matches(file_key: str, thumb_key: str) -> None:
    full, thumb = read_image(file_key), read_image(thumb_key)
    assert max(thumb.shape[:2]) <= 300
    downscaled = cv2.resize(full, (thumb.shape[1], thumb.shape[0]), interpolation=cv2.INTER_AREA)
    # Both went through JPEG: close at thumbnail size, closer still once the codec's noise averages out.
    assert difference(downscaled, thumb) < 6.0, "the thumbnail is its file, downscaled"
    quarter = (thumb.shape[1] // 4, thumb.shape[0] // 4)
    shrink = lambda image: cv2.resize(image, quarter, interpolation=cv2.INTER_AREA)  # noqa: E731
    assert difference(shrink(downscaled), shrink(thumb)) < 2.0


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header promises width x height pixels: what a decompression bomb looks like up front."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + 3 * min(width, 64)) * 4)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def jpeg_bytes(image: np.ndarray) -> bytes:
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes()
