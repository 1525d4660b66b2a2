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


def identities() -> dict[str, np.ndarray]:
    """Every distinct person the shipped samples hold: t1's six, Tom Hanks, the astronaut."""
    return {
        **{f"t1_person_{i + 1}": face for i, face in enumerate(_t1_portraits())},
        "tom_hanks": tom_hanks(),
        "astronaut": astronaut(),
    }


def _t1_portraits() -> list[np.ndarray]:
    from faces.engines.portable import PortableEngine

    group = group_photo()
    found = sorted(PortableEngine().analyze(group), key=lambda face: face.box[0])
    return [derived_portrait(group, face.box, scale=1.0, hue_shift=0, gain=1.0) for face in found]


def variants(image: np.ndarray, count: int, seed: int) -> list[np.ndarray]:
    """`count` different images of the face in `image`: rescaled, recoloured, blurred, rotated, recompressed."""
    rng = np.random.default_rng(seed)
    result = []
    for _ in range(count):
        scale = rng.uniform(0.6, 1.8)
        out = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        out = recolour(out, hue_shift=int(rng.integers(-8, 9)), gain=float(rng.uniform(0.8, 1.2)))
        height, width = out.shape[:2]
        angle = float(rng.uniform(-10, 10))
        rotation = cv2.getRotationMatrix2D((width / 2, height / 2), angle, 1.0)
        out = cv2.warpAffine(out, rotation, (width, height), borderMode=cv2.BORDER_REFLECT)
        if rng.random() < 0.5:
            out = cv2.GaussianBlur(out, (0, 0), float(rng.uniform(0.5, 1.5)))
        if rng.random() < 0.5:
            out = out[:, ::-1]
        quality = int(rng.integers(50, 95))
        out = cv2.imdecode(np.frombuffer(encode_jpeg(np.ascontiguousarray(out), quality), np.uint8), cv2.IMREAD_COLOR)
        result.append(out)
    return result


def write_identity_set(out_dir: Path, per_person: int = 6, seed: int = 7) -> Path:
    """One folder per person, `per_person` images each: the input of `manage.py measure_thresholds`."""
    for index, (person, image) in enumerate(identities().items()):
        folder = Path(out_dir) / person
        folder.mkdir(parents=True, exist_ok=True)
        for number, variant in enumerate(variants(image, per_person, seed + index)):
            (folder / f"{number:02d}.jpg").write_bytes(encode_jpeg(variant))
    return Path(out_dir)


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


def png_with_orientation(image: np.ndarray, orientation: int) -> bytes:
    """A PNG carrying an EXIF orientation tag, which the worker must ignore."""
    import io

    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    Image.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)).save(buffer, format="PNG", exif=exif.tobytes())
    return buffer.getvalue()
