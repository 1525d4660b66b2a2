"""Uploads of other kinds than a JPEG still, made from real pixels: animations and video containers."""

import io
import tempfile
from pathlib import Path

import cv2
import numpy as np
from PIL import Image


def animation(frames: list[np.ndarray], fmt: str) -> bytes:
    """An animated GIF, WebP or PNG (APNG) of BGR frames, 100 ms each, looping."""
    images = [Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)) for frame in frames]
    out = io.BytesIO()
    images[0].save(out, fmt, save_all=True, append_images=images[1:], duration=100, loop=0)
    return out.getvalue()


def video(frames: list[np.ndarray], suffix: str) -> bytes:
    """A real video file written by OpenCV's FFmpeg backend: .mp4 / .mov (MPEG-4), .webm / .mkv (VP8), .avi."""
    fourcc = {".mp4": "mp4v", ".mov": "mp4v", ".webm": "VP80", ".mkv": "VP80", ".avi": "MJPG"}[suffix]
    height, width = frames[0].shape[:2]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"clip{suffix}"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), 10, (width, height))
        assert writer.isOpened(), f"OpenCV cannot write {suffix}"
        for frame in frames:
            writer.write(frame)
        writer.release()
        return path.read_bytes()


def faceless_then(image: np.ndarray, count: int = 4) -> list[np.ndarray]:
    """Frame 0 shows no one (a grey card); every later frame is `image`."""
    blank = np.full_like(image, 128)
    return [blank] + [image.copy() for _ in range(count - 1)]
