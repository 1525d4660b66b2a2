"""What the publishing tests share: run the real worker, read files back as pixels, compare them."""

import cv2
import numpy as np
from django.core.management import call_command

from momentlens.devservices.pixels import difference
from tests.support.stored_files import read_bytes


def run_worker_drain() -> None:
    call_command("run_worker", "--drain", "--health-port", "0")


def read_image(key: str) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(read_bytes(key), np.uint8), cv2.IMREAD_COLOR)
    assert image is not None, key
    return image


def thumbnail_matches(file_key: str, thumb_key: str) -> None:
    full, thumb = read_image(file_key), read_image(thumb_key)
    assert max(thumb.shape[:2]) <= 300
    downscaled = cv2.resize(full, (thumb.shape[1], thumb.shape[0]), interpolation=cv2.INTER_AREA)
    # Both went through JPEG: close at thumbnail size, closer still once the codec's noise averages out.
    assert difference(downscaled, thumb) < 6.0, "the thumbnail is its file, downscaled"
    quarter = (thumb.shape[1] // 4, thumb.shape[0] // 4)
    shrink = lambda image: cv2.resize(image, quarter, interpolation=cv2.INTER_AREA)  # noqa: E731
    assert difference(shrink(downscaled), shrink(thumb)) < 2.0
