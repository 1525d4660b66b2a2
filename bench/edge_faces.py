"""Faces cut by the image edge: how many the detector finds, and how many false faces its edge pass keeps,
with and without a second look at the edge pass's unsure candidates (faces/engines/pyramid.py,
`edge_second_look`; off by default, because it loses cut faces: docs/ARCHITECTURE.md §6), and with a level's
unsure candidate that the edge cuts looked at again at 64 px as any other (before `Plan.edge_verify_width`).

Cuts: each of t1's six faces, cut by each edge and each corner, with 25 %, 35 %, 45 % and 55 % of its box
(per side) past the edge, in t1 as it is (1280x886) and enlarged 4.5x (about 23 MP, where faces are 400 px
and the photo's overview is what sees them). A cut face is found when a detection overlaps the visible
part of its box with IoU >= 0.3. False faces: detections touching the edge of the face-free sample scenes,
at their size and enlarged to 24 MP, where no face is. Both plans run on the same images in the same run.

Usage: python bench/edge_faces.py [--threads 1] [--faces N] [--sides left ...] [--shares 0.25 ...] [--scenes N]
"""

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from faces.geometry import EDGE_CUTS, iou  # noqa: E402

SIDES = ("left", "right", "top", "bottom", "top_left", "top_right", "bottom_left", "bottom_right")
CUT_SHARES = (0.25, 0.35, 0.45, 0.55)
ENLARGED = 4.5
FOUND_IOU = 0.3


def cut(image: np.ndarray, box: np.ndarray, side: str, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The crop of `image` whose `side` cuts `share` of the face box away; the box's visible part in the crop."""
    x1, y1, x2, y2 = box
    height, width = image.shape[:2]
    left, top, right, bottom = 0, 0, width, height
    if "left" in side:
        left = int(x1 + share * (x2 - x1))
    if "right" in side:
        right = int(x2 - share * (x2 - x1))
    if "top" in side:
        top = int(y1 + share * (y2 - y1))
    if "bottom" in side:
        bottom = int(y2 - share * (y2 - y1))
    crop = np.ascontiguousarray(image[top:bottom, left:right])
    visible = np.array([max(x1 - left, 0), max(y1 - top, 0), min(x2, right) - left, min(y2, bottom) - top])
    return crop, visible.astype(np.float32)


def touches_edge(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    """Which boxes touch the image's edge, as the worker tells it (faces.geometry.EdgeCuts.touching_px)."""
    touching = EDGE_CUTS.touching_px
    return (
        (boxes[:, 0] <= touching)
        | (boxes[:, 1] <= touching)
        | (boxes[:, 2] >= width - touching)
        | (boxes[:, 3] >= height - touching)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--faces", type=int, help="the first this many of t1's faces, from the left (default: all)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=SIDES, help="edges and corners that cut")
    parser.add_argument("--shares", type=float, nargs="+", default=CUT_SHARES, help="shares of the box cut away")
    parser.add_argument("--scenes", type=int, help="the first this many face-free scenes (default: all)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.ORT_INTRA_OP_THREADS = args.threads
    from faces.engines import build_engine
    from faces.engines.base import PHOTO_PLAN
    from momentlens.devservices import samples

    engine = build_engine("buffalo_s")
    plans = {
        "no second look (the default)": PHOTO_PLAN,
        "second look": dataclasses.replace(PHOTO_PLAN, edge_second_look=True),
        "a level's cut candidate looked at 64 px (before)": dataclasses.replace(PHOTO_PLAN, edge_verify_width=None),
    }
    group = samples.group_photo()
    faces = sorted((f.box for f in engine.detect(group) if f.score >= 0.6), key=lambda box: box[0])[: args.faces]
    found = {(name, size): [0, 0] for name in plans for size in ("t1", "t1 x4.5")}
    seconds = dict.fromkeys(plans, 0.0)
    for size, factor in (("t1", 1.0), ("t1 x4.5", ENLARGED)):
        image = group if factor == 1.0 else cv2.resize(group, None, fx=factor, fy=factor, interpolation=cv2.INTER_CUBIC)
        for box in faces:
            for side in args.sides:
                for share in args.shares:
                    crop, visible = cut(image, np.asarray(box) * factor, side, share)
                    for name, plan in plans.items():
                        began = time.perf_counter()
                        boxes = np.array([d.box for d in engine.detect(crop, plan=plan)], np.float32).reshape(-1, 4)
                        seconds[name] += time.perf_counter() - began
                        cell = found[name, size]
                        cell[0] += bool(len(boxes)) and iou(visible[None], boxes)[0].max() >= FOUND_IOU
                        cell[1] += 1
    false = dict.fromkeys(plans, 0)
    scenes = samples.face_free_scenes()[: args.scenes]
    for scene in scenes:
        for image in (scene, cv2.resize(scene, (5657, 4243), interpolation=cv2.INTER_CUBIC)):
            for name, plan in plans.items():
                boxes = np.array([d.box for d in engine.detect(image, plan=plan)], np.float32).reshape(-1, 4)
                false[name] += int(touches_edge(boxes, image.shape[1], image.shape[0]).sum())

    print("\n## Faces cut by the image edge (buffalo_s, one run)\n")
    print(f"Cut faces: t1's {len(faces)} faces x {len(args.sides)} sides x cut shares {tuple(args.shares)} per size.")
    print(f"False faces: detections touching the edge in {len(scenes)} face-free scenes, as they are and at 24 MP.\n")
    print("| plan | cut faces found, t1 | cut faces found, t1 x4.5 | false faces at the edge | detect s, cuts |")
    print("|---|---:|---:|---:|---:|")
    for name in plans:
        cells = [found[name, size] for size in ("t1", "t1 x4.5")]
        shown = " | ".join(f"{hit}/{total} ({hit / total:.0%})" for hit, total in cells)
        print(f"| {name} | {shown} | {false[name]} | {seconds[name]:.1f} |")


if __name__ == "__main__":
    main()
