"""Every picture a published file shows or carries, found the way someone who downloads it would look.

Not the worker's decoder: the file as a browser shows it (Pillow, the Exif orientation applied, every
frame, transparency over white and over black), then every JPEG and PNG that starts anywhere in the
bytes (thumbnails, previews, MPF pictures, appended images), every image in base64 inside them (XMP's
GImage and GDepth), and the frames of any video inside them (a motion photo's MP4).
"""

import base64
import io
import re

import av
import cv2
import numpy as np
from PIL import Image, ImageOps

JPEG_START = re.compile(rb"\xff\xd8\xff")
PNG_START = re.compile(rb"\x89PNG\r\n\x1a\n")
ISO_MEDIA = re.compile(rb"ftyp")
BASE64_RUN = re.compile(rb"[A-Za-z0-9+/]{400,}={0,2}")
VIDEO_FRAMES = 8  # from each video found, the first few frames and then every tenth


def pictures_in(data: bytes, depth: int = 0) -> list[tuple[str, np.ndarray]]:
    """(where, BGR pixels) of every picture found in `data`."""
    found = [(f"shown{suffix}", pixels) for suffix, pixels in _as_shown(data)]
    for match in JPEG_START.finditer(data, 1):
        pixels = cv2.imdecode(np.frombuffer(data[match.start() :], np.uint8), cv2.IMREAD_COLOR)
        if pixels is not None:
            found.append((f"JPEG at byte {match.start()}", pixels))
    for match in PNG_START.finditer(data, 1):
        found += [(f"PNG at byte {match.start()}{suffix}", p) for suffix, p in _as_shown(data[match.start() :])]
    for match in ISO_MEDIA.finditer(data, 4):
        found += [(f"video at byte {match.start() - 4}, {what}", p) for what, p in _frames(data[match.start() - 4 :])]
    if depth == 0:
        for match in BASE64_RUN.finditer(data):
            try:
                inner = base64.b64decode(match.group(), validate=True)
            except ValueError:
                continue
            found += [(f"base64 at byte {match.start()}: {where}", p) for where, p in pictures_in(inner, depth + 1)]
    return found


def _as_shown(data: bytes) -> list[tuple[str, np.ndarray]]:
    try:
        with Image.open(io.BytesIO(data)) as image:
            frames = []
            for index in range(getattr(image, "n_frames", 1)):
                image.seek(index)
                shown = _composites(ImageOps.exif_transpose(image))
                frames += [(f", frame {index}{how}", pixels) for how, pixels in shown]
            return frames
    except Exception:
        return []


def shown(data: bytes) -> np.ndarray:
    """The file's first picture as a page shows it: its orientation applied, transparency over white."""
    with Image.open(io.BytesIO(data)) as image:
        return _composites(ImageOps.exif_transpose(image))[0][1]


def _composites(image: Image.Image) -> list[tuple[str, np.ndarray]]:
    """Over white first (a page), then, for a transparent picture, its colour alone and over black."""
    rgba = np.asarray(image.convert("RGBA")).astype(np.float32)
    colour, alpha = rgba[..., :3], rgba[..., 3:] / 255.0
    shown = [("", colour * alpha + 255.0 * (1 - alpha))]
    if (alpha < 1.0).any():
        shown += [(" colour alone", colour), (" over black", colour * alpha)]
    return [(how, cv2.cvtColor(np.rint(pixels).astype(np.uint8), cv2.COLOR_RGB2BGR)) for how, pixels in shown]


def _frames(data: bytes) -> list[tuple[str, np.ndarray]]:
    try:
        with av.open(io.BytesIO(data)) as container:
            frames = []
            for index, frame in enumerate(container.decode(video=0)):
                if index < VIDEO_FRAMES or index % 10 == 0:
                    frames.append((f"frame {index}", frame.to_ndarray(format="bgr24")))
            return frames
    except (av.FFmpegError, IndexError, ValueError):
        return []


# A face in published bytes shows a DNP member when it reaches their reference at this. The blur thresholds sit
# far lower (faces/thresholds.py) and strangers' faces reach them now and then, unblurred by design when the
# worker saw them below; 0.30 is reached by 0.005 % of strangers' pairs and by 86 % of the members' own faces
# on real photos (docs/MEASUREMENTS.md, "Recognition on real people": the ROC at 0.30).
SHOWS_THE_MEMBER = 0.30


def dnp_faces_in(data: bytes, references: dict, threshold: float = SHOWS_THE_MEMBER) -> list[str]:
    """Every picture in `data` with a face whose similarity to one of `references` (name -> embedding) reaches
    `threshold`, as the real engine reads it."""
    from faces.engines import resident_engine

    engine = resident_engine()
    shown = []
    for where, pixels in pictures_in(data):
        for face in engine.analyze(np.ascontiguousarray(pixels)):
            for name, reference in references.items():
                similarity = float(face.embedding @ reference)
                if similarity >= threshold:
                    shown.append(f"{where}: {name}, similarity {similarity:.2f}")
    return shown
