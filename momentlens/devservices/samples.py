"""Sample photos with real faces that ship inside registry packages, and images derived from them.

- insightface's wheel: `t1.jpg` (a group of six) and `Tom_Hanks_54745.png` (one face);
- scikit-image's data: `astronaut.png` (one face) and face-free scenes.
Dev, tests, benchmarks and the demo use these; production never does.
"""

from importlib.resources import files
from pathlib import Path

import cv2
import numpy as np

FACE_FREE = ("coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png", "horse.png", "brick.png")


def insightface_image(name: str) -> Path:
    return Path(str(files("insightface").joinpath("data", "images", name)))


def skimage_image(name: str) -> Path:
    return Path(str(files("skimage").joinpath("data", name)))


def read(path: Path) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise FileNotFoundError(path)
    return image


def group_photo() -> np.ndarray:
    return read(insightface_image("t1.jpg"))


def tom_hanks() -> np.ndarray:
    return read(insightface_image("Tom_Hanks_54745.png"))


def astronaut() -> np.ndarray:
    return read(skimage_image("astronaut.png"))


def face_free_scenes() -> list[np.ndarray]:
    return [read(skimage_image(name)) for name in FACE_FREE]


def derived_portrait(image: np.ndarray, box, *, scale: float = 1.6, hue_shift: int = 6, gain: float = 1.1):
    """A different image of one face: cropped around `box` (x1, y1, x2, y2), rescaled, lightly recoloured."""
    x1, y1, x2, y2 = (int(v) for v in box)
    width, height = x2 - x1, y2 - y1
    crop = image[max(0, y1 - height // 2) : y2 + height // 2, max(0, x1 - width // 2) : x2 + width // 2]
    crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    return recolour(crop, hue_shift=hue_shift, gain=gain)


def recolour(image: np.ndarray, *, hue_shift: int, gain: float) -> np.ndarray:
    hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV).astype(np.int16)
    hsv[..., 0] = (hsv[..., 0] + hue_shift) % 180
    hsv[..., 2] = np.clip(hsv[..., 2] * gain, 0, 255)
    return cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2BGR)


def encode_jpeg(image: np.ndarray, quality: int = 92) -> bytes:
    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("could not encode")
    return data.tobytes()
