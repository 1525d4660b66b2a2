"""A face the frame's edge cuts in a video: is it found between two looks as often as on a look, and what would
closing the gap cost (docs/ARCHITECTURE.md §11, "Edges and choices")?

Each of t1's six faces, at half its size (44-60 px wide), is pasted at a 1280x720 frame's left, right, top or
bottom edge with a share of its box past that edge, in a 13-frame 30 fps H.264 clip on a plain background. It
shows in frames 1-4 ("between looks": the schedule looks at frames 0, 6 and 12, so only the search of the
changed places can find it), or in frames 0-4 ("on a look": frame 0 is looked at whole). A frame is covered
when a track's box at its time holds the centre of the face's visible part. Variants of the search between
looks, on the same clips in the same run:

- `worker`: the worker's (a changed place at the frame's edge is searched with the edge pass at 1x);
- `edge-looks`: a frame whose changed place touches the frame's edge is looked at whole, at the look's scale
  (what closing the gap by looking would take).

Usage: python bench/clip_edge_faces.py [--faces N] [--sides left ...] [--shares 0.45 ...]
"""

import argparse
import io
import os
import sys
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIDES = ("left", "right", "top", "bottom")
SHARES = (0.35, 0.45, 0.55, 0.65)
VARIANTS = ("worker", "edge-looks")
SIZE, FPS, FRAMES, SCALE = (1280, 720), 30, 13, 0.5
SHOWN = {"between looks": range(1, 5), "on a look": range(0, 5)}


def cut_face(face: np.ndarray, box, side: str, share: float, canvas: np.ndarray):
    """Pastes `face` (its box in its pixels) at `side` of the canvas with `share` of the box past the edge;
    returns the visible part's box in the canvas."""
    x1, y1, x2, y2 = box
    height, width = canvas.shape[:2]
    fh, fw = face.shape[:2]
    # Where the face crop's top-left corner lands: past the edge by the share of the box, centred on the other axis.
    left = {"left": -(x1 + share * (x2 - x1)), "right": width - (x2 - share * (x2 - x1))}.get(side, (width - fw) / 2)
    top = {"top": -(y1 + share * (y2 - y1)), "bottom": height - (y2 - share * (y2 - y1))}.get(side, (height - fh) / 3)
    left, top = int(left), int(top)
    cx1, cy1, cx2, cy2 = max(0, left), max(0, top), min(width, left + fw), min(height, top + fh)
    canvas[cy1:cy2, cx1:cx2] = face[cy1 - top : cy2 - top, cx1 - left : cx2 - left]
    return max(0, left + x1), max(0, top + y1), min(width, left + x2), min(height, top + y2)


def clip_of(face: np.ndarray, box, side: str, share: float, shown: range) -> tuple[bytes, list]:
    """(MP4 bytes, the visible box per frame or None)."""
    import av

    width, height = SIZE
    shade = np.linspace(140, 190, width, dtype=np.float32)[None, :] + np.linspace(0, 20, height)[:, None]
    back = np.clip(np.dstack([shade - 10, shade, shade + 8]), 0, 255).astype(np.uint8)
    out, truth = io.BytesIO(), []
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=FPS, options={"crf": "20", "preset": "veryfast"})
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        for index in range(FRAMES):
            canvas = back.copy()
            truth.append(cut_face(face, box, side, share, canvas) if index in shown else None)
            frame = av.VideoFrame.from_ndarray(canvas, format="bgr24")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
    return out.getvalue(), truth


def covered(data: bytes, truth: list, engine, schedule) -> tuple[int, int, float]:
    """(frames covered, frames with the face, detection seconds) on the clip schedule `schedule`."""
    from faces.detection.clips import detect_clip
    from faces.media.video import Video
    from faces.rendering.painters import tracks_of

    clip = Video(data)
    started = time.perf_counter()
    found = detect_clip(clip, engine, schedule=schedule)
    seconds = time.perf_counter() - started
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    tracks = tracks_of([(track, when, face.box / scale) for when, track, face in found])
    hits = total = 0
    for index, visible in enumerate(truth):
        if visible is None:
            continue
        cx, cy = (visible[0] + visible[2]) / 2, (visible[1] + visible[3]) / 2
        boxes = [box * scale for track in tracks.values() for box in track.boxes_at(index / FPS)]
        hits += any(b[0] <= cx <= b[2] and b[1] <= cy <= b[3] for b in boxes)
        total += 1
    return hits, total, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=int, default=6, help="how many of t1's faces")
    parser.add_argument("--sides", nargs="+", default=list(SIDES))
    parser.add_argument("--shares", nargs="+", type=float, default=list(SHARES), help="share of the box past the edge")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)
    from django.conf import settings

    settings.ORT_INTRA_OP_THREADS = 1
    from faces.detection.clips import CLIP_SCHEDULE
    from faces.engines import resident_engine
    from momentlens.devservices import samples

    engine = resident_engine()
    # The `edge-looks` variant: a changed place at the frame's edge makes its frame a whole look.
    schedules = {"worker": CLIP_SCHEDULE, "edge-looks": replace(CLIP_SCHEDULE, whole_look_at_frame_edge=True)}
    group = samples.group_photo()
    faces = sorted(engine.analyze(group), key=lambda face: face.box[0])[: args.faces]
    pasted = [half_size(group, face.box) for face in faces]
    tally: dict[tuple, list] = {}
    started = time.perf_counter()
    for face, box in pasted:
        for side in args.sides:
            for share in args.shares:
                for when, shown in SHOWN.items():
                    data, truth = clip_of(face, box, side, share, shown)
                    for variant in VARIANTS if when == "between looks" else VARIANTS[:1]:
                        hits, total, seconds = covered(data, truth, engine, schedules[variant])
                        cell = tally.setdefault((share, when, variant), [0, 0, 0.0])
                        cell[0], cell[1], cell[2] = cell[0] + hits, cell[1] + total, cell[2] + seconds
    print_table(tally, args, len(pasted), time.perf_counter() - started)


def half_size(group: np.ndarray, box) -> tuple[np.ndarray, tuple]:
    """The face with a face's width around it, at SCALE; its box in the crop's pixels."""
    x1, y1, x2, y2 = (float(v) for v in box)
    pad_x, pad_y = x2 - x1, y2 - y1
    left, top = max(0, int(x1 - pad_x)), max(0, int(y1 - pad_y))
    right, bottom = min(group.shape[1], int(x2 + pad_x)), min(group.shape[0], int(y2 + pad_y))
    crop = group[top:bottom, left:right]
    size = (round((right - left) * SCALE), round((bottom - top) * SCALE))
    face = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
    return face, tuple(SCALE * v for v in (x1 - left, y1 - top, x2 - left, y2 - top))


def print_table(tally: dict, args, face_count: int, seconds: float) -> None:
    print(
        f"\n## A face the frame's edge cuts, in a clip: frames covered ({face_count} faces x {len(args.sides)} sides)\n"
    )
    print(
        f"{SIZE[0]}x{SIZE[1]} H.264 at {FPS} fps, faces {SCALE:g}x t1's; the face shows in frames 1-4 (between looks) "
        "or 0-4 (frame 0 is a look). Detection seconds: the clips' detection passes summed.\n"
    )
    print("| past the edge | on a look | between looks, worker | between looks, edge-looks | detection s, worker | "
          "detection s, edge-looks | edge-looks / worker |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for share in args.shares:
        look, worker, looks = (tally[share, when, variant] for when, variant in (
            ("on a look", "worker"), ("between looks", "worker"), ("between looks", "edge-looks")))  # fmt: skip
        cells = [f"{c[0] / c[1]:.1%} ({c[0]}/{c[1]})" for c in (look, worker, looks)]
        print(f"| {share:.0%} | " + " | ".join(cells) + f" | {worker[2]:.2f} | {looks[2]:.2f} | "
              f"{looks[2] / worker[2]:.2f} |")  # fmt: skip
    print(f"\n(total {seconds:.0f} s)")


if __name__ == "__main__":
    main()
