"""JPEG encode/decode: OpenCV (libjpeg-turbo inside the wheel) vs simplejpeg (libjpeg-turbo binding).

The worker decodes one upload and encodes N+1 files and N+1 thumbnails per photo;
this says which binding to use. 12 MP and 1 MP images with camera-like noise,
quality 88, best of 5. Usage: python bench/jpeg_codec.py
"""

import sys
import time
from pathlib import Path

import cv2
import numpy as np
import simplejpeg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from momentlens.devservices import samples

QUALITY = 88


def best_of(action, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def photo(width: int, height: int) -> np.ndarray:
    image = cv2.resize(samples.group_photo(), (width, height), interpolation=cv2.INTER_CUBIC)
    return np.clip(image + np.random.default_rng(0).normal(0, 6, image.shape), 0, 255).astype(np.uint8)


def rows(label: str, image: np.ndarray) -> list[str]:
    cv_bytes = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])[1].tobytes()
    sj_bytes = simplejpeg.encode_jpeg(image, quality=QUALITY, colorspace="BGR", colorsubsampling="420")
    buffer = np.frombuffer(cv_bytes, np.uint8)
    encode = (
        best_of(lambda: cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])),
        best_of(lambda: simplejpeg.encode_jpeg(image, quality=QUALITY, colorspace="BGR", colorsubsampling="420")),
    )
    decode = (
        best_of(lambda: cv2.imdecode(buffer, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)),
        best_of(lambda: simplejpeg.decode_jpeg(cv_bytes, colorspace="BGR")),
    )
    return [
        f"| {label} | encode q{QUALITY} | {encode[0] * 1e3:.1f} | {encode[1] * 1e3:.1f} | "
        f"{encode[1] / encode[0]:.2f} | {len(cv_bytes):,} | {len(sj_bytes):,} |",
        f"| {label} | decode | {decode[0] * 1e3:.1f} | {decode[1] * 1e3:.1f} | {decode[1] / decode[0]:.2f} | - | - |",
    ]


def main() -> None:
    print("| image | operation | OpenCV ms (baseline) | simplejpeg ms | ratio | OpenCV bytes | simplejpeg bytes |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, (width, height) in (("12 MP", (4000, 3000)), ("1 MP", (1155, 866))):
        for row in rows(label, photo(width, height)):
            print(row)


if __name__ == "__main__":
    main()
