"""The seed's clips, drawn frame by frame with the faces it knows the place of, and decoded back as the worker does."""

import io
import uuid
from dataclasses import dataclass
from fractions import Fraction

import cv2
import numpy as np

from tests.support.media_clips import read_animation
from tests.support.video_samples import encode

MEDIA_SIDE = 360  # every clip of the seed is at most 640x360: small, so the run stays fast
Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels


@dataclass(frozen=True)
class Scene:
    """A clip's frames and, per frame, each face of t1 pasted in it: (index in t1's faces, box in the frame)."""

    frames: list[np.ndarray]
    shown: list[list[tuple[int, Box]]]


def guest(group: np.ndarray, face_box, scale: float) -> tuple[np.ndarray, Box]:
    """The face at `face_box` (t1's pixels) with half its size around it, resized by `scale`; and its box there."""
    x1, y1, x2, y2 = (float(v) for v in face_box)
    height, width = group.shape[:2]
    left, top = max(0, int(x1 - (x2 - x1) / 2)), max(0, int(y1 - (y2 - y1) / 2))
    right, bottom = min(width, int(x2 + (x2 - x1) / 2)), min(height, int(y2 + (y2 - y1) / 2))
    size = (round((right - left) * scale), round((bottom - top) * scale))
    pixels = cv2.resize(group[top:bottom, left:right], size, interpolation=cv2.INTER_CUBIC)
    return pixels, ((x1 - left) * scale, (y1 - top) * scale, (x2 - left) * scale, (y2 - top) * scale)


def faceless_then(image: np.ndarray, faces: list[tuple[int, Box]], count: int = 4) -> Scene:
    """Frame 0 shows no one (a grey card); every later frame is `image`, with `faces` in it."""
    frames = [np.full_like(image, 128)] + [image.copy() for _ in range(count - 1)]
    return stamped(Scene(frames, [[]] + [list(faces) for _ in range(count - 1)]))


def stamped(scene: Scene) -> Scene:
    """Each frame's index as a row of black and white cells in its bottom-right corner, away from any face: no
    two neighbours alike (GIF and WebP encoders fold identical ones into one, which would change the count)."""
    for index, frame in enumerate(scene.frames):
        height, width = frame.shape[:2]
        for bit in range(7):
            right = width - 4 - bit * 8
            frame[height - 12 : height - 4, right - 8 : right] = 235 if index >> bit & 1 else 16
    return scene


def hard_cut_scene(group: np.ndarray, group_faces, dnp: dict[int, uuid.UUID], count: int = 40) -> Scene:
    """640x360, 40 frames: a guest who is no DNP member on the left of one wall of tiles, then, cut at frame 20 to
    another wall of the same tiles, a DNP member five face widths to the right (faces/tracks.py: one person per
    track, the cut seen from the picture's content)."""
    from tests.support.media_clips import tiles

    walker = min(dnp, default=0)
    other = next(i for i in range(len(group_faces)) if i not in dnp)
    frames, shown = [], []
    for frame in range(count):
        first = frame < count // 2
        canvas = tiles(640, MEDIA_SIDE, seed=1 if first else 2)
        index = other if first else walker
        pixels, (x1, y1, x2, y2) = guest(group, group_faces[index].box, scale=0.8)
        left = 20 if first else 20 + round(5 * (x2 - x1))
        left = min(left, 640 - pixels.shape[1])
        canvas[40 : 40 + pixels.shape[0], left : left + pixels.shape[1]] = pixels
        frames.append(canvas)
        shown.append([(index, (left + x1, 40 + y1, left + x2, 40 + y2))])
    return stamped(Scene(frames, shown))


def walking_scene(group: np.ndarray, group_faces, dnp: dict[int, uuid.UUID], count: int = 45) -> Scene:
    """640x360, 45 frames (1.5 s at 30 fps) on a plain gradient. Along the bottom stand a guest who is no DNP
    member and a DNP member (their face from frame 0). Along the top a DNP member walks in at frame 4 (0.133 s,
    between the detections at 0 and 0.2 s), walks right 8 px a frame to frame 19, is gone from frame 20 to 26,
    and comes back at frame 27 (0.9 s, again between two detections) further right, walking left."""
    dnp_indices = sorted(dnp) or [0, 1]
    walker = dnp_indices[0]
    standing = [next(i for i in range(len(group_faces)) if i not in dnp_indices), dnp_indices[-1]]  # two
    width, height = 640, MEDIA_SIDE
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    shade = 150 + 40 * xs + 20 * ys
    base = np.clip(np.dstack([shade - 10, shade, shade + 8]), 0, 255).astype(np.uint8)
    still = []
    for slot, index in enumerate(standing):
        pixels, (x1, y1, x2, y2) = guest(group, group_faces[index].box, scale=0.55)
        left, top = 30 + slot * 200, height - pixels.shape[0] - 16
        base[top : top + pixels.shape[0], left : left + pixels.shape[1]] = pixels
        still.append((index, (left + x1, top + y1, left + x2, top + y2)))
    pixels, (x1, y1, x2, y2) = guest(group, group_faces[walker].box, scale=0.55)
    frames, shown = [], []
    for frame in range(count):
        canvas, seen = base.copy(), list(still)
        if 4 <= frame < 20 or frame >= 27:
            left = 20 + 8 * (frame - 4) if frame < 20 else 500 - 8 * (frame - 27)
            canvas[4 : 4 + pixels.shape[0], left : left + pixels.shape[1]] = pixels
            seen.append((walker, (left + x1, 4 + y1, left + x2, 4 + y2)))
        frames.append(canvas)
        shown.append(seen)
    return stamped(Scene(frames, shown))


def h264(frames: list[np.ndarray], fps: int, times: list[float] | None = None) -> bytes:
    """An MP4 as a phone writes one: H.264 (libx264, yuv420p) at `fps`; with `times`, each frame at its own
    time in a 1/90000 time base (a variable frame rate)."""
    base = Fraction(1, fps) if times is None else Fraction(1, 90000)
    times = [index / fps for index in range(len(frames))] if times is None else times
    return encode(frames, times, rate=fps, base=base, codec_options={"crf": "18", "preset": "veryfast"})


def uhd_scene(group: np.ndarray, group_faces, count: int = 10) -> Scene:
    """3840x2160, t1 shrunk so that its faces are 30-35 px, drifting right 16 px a frame across a grey card."""
    scale = 0.3
    small = cv2.resize(group, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    frames, shown = [], []
    for index in range(count):
        canvas = np.full((2160, 3840, 3), 120, np.uint8)
        x, y = 1400 + 16 * index, 900
        canvas[y : y + small.shape[0], x : x + small.shape[1]] = small
        frames.append(canvas)
        boxes = [
            (i, tuple(float(v) * scale + o for v, o in zip(f.box, (x, y, x, y), strict=True)))
            for i, f in enumerate(group_faces)
        ]
        shown.append(boxes)
    return stamped(Scene(frames, shown))


def variable_rate_times(count: int) -> list[float]:
    """A low-light phone's clock: 30 fps, then 20, then 30 again."""
    third = count // 3
    times = [i / 30 for i in range(third)]
    times += [times[-1] + (i + 1) / 20 for i in range(third)]
    return times + [times[-1] + (i + 1) / 30 for i in range(count - 2 * third)]


def decode_media(data: bytes, kind: str) -> tuple[list[float], list[np.ndarray]]:
    """Every frame's time (seconds from the first, as the worker counts them) and BGR pixels: an animation as
    Pillow composes it, a video as PyAV decodes it."""
    if kind == "video":
        import av

        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            decoded = [(frame.pts, frame.to_ndarray(format="bgr24")) for frame in container.decode(stream)]
            first = min((pts for pts, _ in decoded if pts is not None), default=0)
            times = [float((pts - first) * stream.time_base) if pts is not None else 0.0 for pts, _ in decoded]
        return times, [pixels for _, pixels in decoded]
    animation = read_animation(data)
    starts = np.cumsum([0, *animation.durations_ms[:-1]])
    return [float(start) / 1000 for start in starts], animation.frames


def frame_at(times: list[float], time: float | None) -> int:
    """The index of the frame shown at `time` (the last one starting at or before it)."""
    if time is None:
        return 0
    return max((index for index, start in enumerate(times) if start <= time + 1e-3), default=0)
