"""What the publishing tests share: run the real worker, read files back, compare pixels."""

import re

import cv2
import numpy as np
from django.core.files.storage import default_storage
from django.core.management import call_command

from faces.models import Photo
from momentlens.devservices.pixels import difference


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


def jpeg_bytes(image: np.ndarray) -> bytes:
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes()


def try_folder_files(photo) -> list[str]:
    """The objects in the folder of the try whose keys the photo row names (`…/v1.{token}/`)."""
    folder = photo.public_key.rsplit("/", 1)[0]
    assert untokened(folder + "/") != folder + "/", f"{photo.public_key} is not a derived key"
    return sorted(default_storage.listdir(folder + "/")[1])


def untokened(key: str) -> str:
    """A derived key without its try's token (faces/rendering/keys.py): `…/v1/public.jpg`, as tests name keys."""
    return re.sub(r"/v(\d+)\.[0-9a-f]{8}/", r"/v\1/", key)
