"""Could a cheaper first look choose where the finest level runs? A cascade, measured.

The finest level (the photo at 1.5x before the cascade) was two thirds of a 12 MP detection (bench/detector_time.py).
A cascade runs the finest level coarser, takes its candidates from a lower score, and gives every unsure one the
pyramid's second look (its surroundings scaled so that it is 64 px wide, kept at 0.5: faces/engines/pyramid.py, as the
default plan gives it) instead of searching the whole photo finely; the default plan has been one since it was
measured here. This bench measures that on bench/face_recall.py's scenes (its 8 real faces, its textured backgrounds,
its seed): the small faces the finest level is for (16 px, 20 px, and 24 px blurred with sigma 1.2; 12 a scene) and
face-free scenes, at 12 MP.

For each first look (`--scales`, the finest level's scale) and each candidate score (`--thresholds`): the faces
found (a kept detection with IoU >= 0.3, face_recall's rule) after the second looks, the false faces per face-free
scene, and what the face-free scenes cost: the level, the second looks their candidates need (run as the pyramid runs
them) and both together. The baseline, the finest level before the cascade, is the row at 1.5x and 0.25. Only this
level runs: the coarser levels find the larger faces whatever the finest level does, and their cost does not change.

Usage: python bench/first_look.py [--scales 1.0 1.25 1.5] [--thresholds 0.05 0.1 0.25] [--scenes 2]
       [--free-scenes 4] [--mp 12] [--seed 7]
"""

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import face_recall  # noqa: E402
from faces.checkpoint import never_stop  # noqa: E402
from faces.engines.pyramid import Shrinks  # noqa: E402
from faces.geometry import iou  # noqa: E402

BUCKETS = (face_recall.Bucket(16), face_recall.Bucket(20), face_recall.Bucket(24, 1.2))
BEFORE = (1.5, 0.25)  # the finest level before the cascade and its candidate score (the baseline)


@dataclass
class Row:
    """One first look (scale, threshold) over every scene."""

    found: dict = field(default_factory=dict)  # bucket label -> [found, faces]
    false_faces: int = 0
    looks: int = 0  # second looks on the face-free scenes
    level_s: float = 0.0  # the level on the face-free scenes
    looks_s: float = 0.0  # their second looks
    free_scenes: int = 0


def candidates(pyramid, image: np.ndarray, scale: float, floor: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The level at `scale` over the whole image, its tiles as the pyramid cuts them, every candidate from `floor`:
    (boxes, scores, seconds)."""
    started = time.perf_counter()
    chunks = list(
        pyramid._level(Shrinks(image), scale, floor, keep_all=False, passes=pyramid.passes, checkpoint=never_stop)
    )
    seconds = time.perf_counter() - started
    boxes = np.concatenate([chunk[0] for chunk in chunks]) if chunks else np.zeros((0, 4), np.float32)
    scores = np.concatenate([chunk[2] for chunk in chunks]) if chunks else np.zeros(0, np.float32)
    return boxes, scores, seconds


def kept(pyramid, image: np.ndarray, boxes: np.ndarray, scores: np.ndarray, threshold: float):
    """The candidates from `threshold` as the pyramid keeps them: the sure ones, and each unsure one its second look
    confirms. (kept boxes (n, 4), second looks run, their seconds)."""
    sure_score = pyramid.plan.sure_score
    chosen = scores >= threshold
    sure = boxes[chosen & (scores >= sure_score)]
    unsure = list(boxes[chosen & (scores < sure_score)])
    started = time.perf_counter()
    looked = pyramid._second_looks(image, unsure) if unsure else []
    seconds = time.perf_counter() - started
    confirmed = [face[0] for face in looked if face is not None]
    return np.array([*sure, *confirmed], np.float32).reshape(-1, 4), len(unsure), seconds


def measure(args) -> dict[tuple[float, float], Row]:
    engine = face_recall.load_engine(1)
    pyramid = engine.pyramid
    sources = face_recall.face_sources(engine)
    rng = np.random.default_rng(args.seed)
    specs = [bucket for bucket in BUCKETS for _ in range(args.scenes)] + [face_recall.Bucket(None)] * args.free_scenes
    firsts = sorted({(scale, threshold) for scale in args.scales for threshold in args.thresholds} | {BEFORE})
    rows = {first: Row() for first in firsts}
    floor = min(threshold for _, threshold in firsts)
    for index, bucket in enumerate(specs, 1):
        scene = face_recall.bucket_scene(rng, sources, args.mp, bucket)
        face_recall.log(f"scene {index}/{len(specs)}: {bucket.label()}")
        for scale in sorted({scale for scale, _ in firsts}):
            boxes, scores, level_s = candidates(pyramid, scene.image, scale, floor)
            for threshold in sorted({t for s, t in firsts if s == scale}):
                found, looks, looks_s = kept(pyramid, scene.image, boxes, scores, threshold)
                tally(rows[scale, threshold], scene, found, looks, level_s, looks_s)
    return rows


def tally(row: Row, scene, found: np.ndarray, looks: int, level_s: float, looks_s: float) -> None:
    overlaps = iou(scene.truth, found) if len(scene.truth) else np.zeros((0, len(found)))
    if scene.bucket.width is None:
        row.false_faces += len(found)
        row.looks += looks
        row.level_s += level_s
        row.looks_s += looks_s
        row.free_scenes += 1
        return
    cell = row.found.setdefault(scene.bucket.label(), [0, 0])
    cell[0] += int((overlaps.max(axis=1, initial=0.0) >= face_recall.MATCH_IOU).sum())
    cell[1] += len(scene.truth)


def print_table(rows: dict[tuple[float, float], Row]) -> None:
    labels = [bucket.label() for bucket in BUCKETS]
    before = rows[BEFORE]
    before_s = (before.level_s + before.looks_s) / max(before.free_scenes, 1)
    print(
        "\n| first look | candidates from | " + " | ".join(labels) + " | false faces per face-free scene "
        "| second looks per face-free scene | level ms | second looks ms | both ms | ratio vs before |"
    )
    print("|---|---:|" + "---:|" * len(labels) + "---:|---:|---:|---:|---:|---:|")
    for (scale, threshold), row in rows.items():
        scenes = max(row.free_scenes, 1)
        cells = [f"{row.found[label][0]}/{row.found[label][1]}" if label in row.found else "-" for label in labels]
        both = (row.level_s + row.looks_s) / scenes
        name = f"x{scale:g}" + (" (before the cascade)" if (scale, threshold) == BEFORE else "")
        print(
            f"| {name} | {threshold:g} | "
            + " | ".join(cells)
            + f" | {row.false_faces / scenes:.2f} | {row.looks / scenes:.0f} | {1000 * row.level_s / scenes:.0f}"
            f" | {1000 * row.looks_s / scenes:.0f} | {1000 * both:.0f} | {both / before_s:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 1.25, 1.5], help="the first look's scale")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.05, 0.1, 0.25], help="candidate scores")
    parser.add_argument("--scenes", type=int, default=2, help="scenes per small-face bucket (12 faces each)")
    parser.add_argument("--free-scenes", type=int, default=4, help="face-free scenes")
    parser.add_argument("--mp", type=int, default=12, choices=sorted(face_recall.SIZES))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print_table(measure(args))


if __name__ == "__main__":
    main()
