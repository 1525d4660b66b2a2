"""Faces cut by the image edge: how much of each is hidden, what the worker estimates from its box
(faces.geometry.hidden_share), and how like the whole face its embedding still is (cosine similarity to
the same face uncut).

Each of t1's six faces is cut by the left, right, top or bottom edge of a crop with 0-50 % of its box
past the edge (the crop saved as JPEG q90, as an upload), and detected with the resident engine. Per
true hidden share: faces detected, the estimate's range, the lowest similarity to the same face whole,
and how many count as unsure (faces.thresholds.Thresholds.unsure_hidden_share: reaching every DNP member).

Usage: python bench/edge_cuts.py [--faces N] [--hidden 0 0.05 ... 0.5]
"""

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from faces.geometry import iou  # noqa: E402

SIDES = ("left", "right", "top", "bottom")
HIDDEN = [round(0.05 * step, 2) for step in range(11)]
FOUND_IOU = 0.3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=int, help="the first this many of t1's faces, from the left (default: all)")
    parser.add_argument("--hidden", type=float, nargs="+", default=HIDDEN, help="true hidden shares")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    from faces.engines import resident_engine
    from faces.thresholds import for_engine
    from momentlens.devservices import samples

    started = time.perf_counter()
    engine, group = resident_engine(), samples.group_photo()
    unsure_share = for_engine(engine.name).unsure_hidden_share
    whole = sorted(engine.analyze(group), key=lambda face: face.box[0])[: args.faces]
    rows = defaultdict(list)  # true hidden share -> (estimate, similarity) per detected face; None: missed
    for face in whole:
        for side in SIDES:
            for hidden in args.hidden:
                rows[hidden].append(cut_and_detect(engine, group, face, side, hidden))
    print(f"\n## Faces cut by the edge: t1's {len(whole)} faces x {len(SIDES)} sides, JPEG q90, buffalo_s\n")
    print(f"Unsure (reaches every DNP member): estimated hidden share >= {unsure_share}.\n")
    print("| hidden (true) | detected | estimate min | estimate mean | estimate max | similarity, min | unsure |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for hidden, found in rows.items():
        seen = [row for row in found if row is not None]
        estimates, similarities = [e for e, _ in seen], [s for _, s in seen]
        unsure = sum(e >= unsure_share for e in estimates)
        print(
            f"| {hidden:.2f} | {len(seen)}/{len(found)} | {min(estimates):.2f} | {np.mean(estimates):.2f} | "
            f"{max(estimates):.2f} | {min(similarities):.2f} | {unsure}/{len(seen)} |"
        )
    print(f"\nTotal runtime {time.perf_counter() - started:.0f} s.")


def cut_and_detect(engine, image: np.ndarray, face, side: str, hidden: float) -> tuple[float, float] | None:
    """(estimated hidden share, similarity to the whole face) of the face once `hidden` of its box is cut
    away by `side`; None when no detection overlaps its visible part."""
    from faces.geometry import hidden_share

    height, width = image.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in face.box)
    left, top, right, bottom = 0, 0, width, height
    if side == "left":
        left = int(x1 + hidden * (x2 - x1))
    elif side == "right":
        right = int(x2 - hidden * (x2 - x1))
    elif side == "top":
        top = int(y1 + hidden * (y2 - y1))
    else:
        bottom = int(y2 - hidden * (y2 - y1))
    crop = cv2.imdecode(cv2.imencode(".jpg", image[top:bottom, left:right], [cv2.IMWRITE_JPEG_QUALITY, 90])[1], 1)
    size_h, size_w = crop.shape[:2]
    visible = np.clip([x1 - left, y1 - top, x2 - left, y2 - top], 0, [size_w, size_h, size_w, size_h])
    found = max(engine.analyze(crop), key=lambda other: iou(visible, other.box), default=None)
    if found is None or iou(visible, found.box) < FOUND_IOU:
        return None
    bx1, by1, bx2, by2 = (float(v) for v in found.box)
    box = (bx1 / size_w, by1 / size_h, (bx2 - bx1) / size_w, (by2 - by1) / size_h)
    return hidden_share(box, size_w, size_h), float(np.dot(found.embedding, face.embedding))


if __name__ == "__main__":
    main()
