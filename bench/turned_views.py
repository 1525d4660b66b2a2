"""Upright first: when the upright and a turned level both find a face, which view does the worker embed?

Real frontal faces from the real-faces set's press photos (LFW: `scripts/make_real_faces_set.py`), each
cut tight around its box, scaled to 150 px and padded to twice its size with flat grey (how a tight crop
reaches the worker), then turned 0, 90, 180 and 270 degrees. For every face both kinds of level find, the
engine has two views (faces.engines.base.Detection.turned); this counts, per rule, how often the view kept
embeds the face wrongly: under 0.5 against the same face upright (its embedding at 0 degrees). A face the
right way up in its aligned crop scores about 0.9-1.0 there; the wrong way up about 0.0.

Rules: the detector's score (what the merge did before: one NMS over both kinds of level), the score with a
margin for the upright view, and the recogniser's feature norm (the kept view's norm against the other's;
the worker's rule: faces.engines.base.Plan.turned_norm_margin).

Last, whether the turned view could go unembedded when both views stand the same way up (their eyes-to-mouth
directions within AGREE_DEGREES): how often the worker's rule keeps the turned view of such a pair anyway.

Usage: python bench/turned_views.py [SET_DIR] [--faces N] [--glob PATTERN]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WRONG = 0.5  # below this against the face upright, the kept view is the wrong way up
SCORE_MARGINS = (0.0, 0.03, 0.05, 0.1)
NORM_RATIOS = (1.0, 1.1, 1.2)
AGREE_DEGREES = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set_dir", nargs="?", type=Path, default=ROOT / "var" / "real-faces")
    parser.add_argument("--faces", type=int, default=200, help="press photos to take (in name order)")
    parser.add_argument("--glob", default="lfw-*/lfw-*.jpg", help="which photos of the set (the press photos)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    from faces.engines import resident_engine
    from faces.engines.base import PHOTO_PLAN

    started = time.perf_counter()
    engine = resident_engine()
    margin = PHOTO_PLAN.turned_norm_margin
    photos = sorted(args.set_dir.glob(args.glob))[: args.faces]
    if not photos:
        raise SystemExit(f"no press photos under {args.set_dir}: python scripts/make_real_faces_set.py {args.set_dir}")
    rows = {turn: [] for turn in range(4)}
    for path in photos:
        for turn, views in enumerate(turned_views(engine, tight_crop(engine, path))):
            if views is not None:
                rows[turn].append(views)
    print(f"\n## Upright first: {len(photos)} press photos, tight crops padded with grey, buffalo_s\n")
    print(f"Each cell: faces whose kept view embeds under {WRONG} against the same face upright.\n")
    rules = [f"score + {m:g}" for m in SCORE_MARGINS] + [f"norm x {r:g}" for r in NORM_RATIOS]
    print("| turn | both views | " + " | ".join(rules) + " | turned/upright norm: max |")
    print("|---:|---:|" + "---:|" * len(rules) + "---:|")
    for turn, found in rows.items():
        cells = [wrong(found, lambda v, m=m: v.turned_score > v.upright_score + m) for m in SCORE_MARGINS]
        cells += [wrong(found, lambda v, r=r: v.turned_norm >= r * v.upright_norm) for r in NORM_RATIOS]
        ratio = max((v.turned_norm / v.upright_norm for v in found), default=float("nan"))
        print(f"| {turn * 90}° | {len(found)} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    total = sum(len(found) for found in rows.values())
    chosen = sum(
        sum(1 for v in found if v.kept_sim(v.turned_norm >= margin * v.upright_norm) < WRONG) for found in rows.values()
    )
    agreeing = [v for found in rows.values() for v in found if v.disagreement <= AGREE_DEGREES]
    turned_kept = [v for v in agreeing if v.turned_norm >= margin * v.upright_norm]
    upright_wrong = sum(1 for v in turned_kept if v.kept_sim(False) < WRONG)
    seconds = time.perf_counter() - started
    print(f"\nthe worker's rule (norm x {margin:g}): {chosen}/{total} wrong; {seconds:.0f} s")
    print(
        f"views standing the same way up (within {AGREE_DEGREES:g} degrees): {len(agreeing)}/{total}; the rule keeps "
        f"the turned one of {len(turned_kept)}, {upright_wrong} of whose upright views embed wrongly"
    )


class Views:
    """One face's two views at one turn, against the face upright."""

    def __init__(self, upright, turned, seen, native: np.ndarray):
        self.upright_score, self.turned_score = float(upright.score), float(turned.score)
        self.upright_norm, self.turned_norm = float(seen.norms[0]), float(seen.norms[1])
        self.similarity = (float(seen.vectors[0] @ native), float(seen.vectors[1] @ native))
        # Degrees between the two views' eyes-to-mouth directions (0: they stand the same way up).
        turn = abs(_eyes_to_mouth(upright.landmarks) - _eyes_to_mouth(turned.landmarks)) % 360
        self.disagreement = min(turn, 360 - turn)

    def kept_sim(self, turned_kept: bool) -> float:
        return self.similarity[1] if turned_kept else self.similarity[0]


def wrong(found: list[Views], turned_kept) -> str:
    return f"{sum(1 for views in found if views.kept_sim(turned_kept(views)) < WRONG)}"


def tight_crop(engine, path: Path) -> np.ndarray:
    from faces.media.still import Still

    image = Still(path.read_bytes()).image
    height, width = image.shape[:2]
    face = min(engine.detect(image, small_faces=False), key=lambda d: _off_centre(d.box, width, height))
    x1, y1, x2, y2 = (int(v) for v in face.box)
    crop = image[max(0, y1) : y2, max(0, x1) : x2]
    scale = 150 / max(crop.shape[:2])
    crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    top, left = crop.shape[0] // 2, crop.shape[1] // 2
    return cv2.copyMakeBorder(crop, top, top, left, left, cv2.BORDER_CONSTANT, value=(128, 128, 128))


def turned_views(engine, upright: np.ndarray) -> list:
    """Per quarter turn of the picture: the largest face's Views, or None when it has only one view."""
    native = None
    result = []
    for turn in range(4):
        image = np.ascontiguousarray(np.rot90(upright, turn))
        faces = engine.detect(image)
        face = max(faces, key=lambda d: d.box[2] - d.box[0], default=None)
        if turn == 0:
            native = engine.embed_many(image, [face]).vectors[0] if face is not None else None
        if face is None or face.turned is None or native is None:
            result.append(None)
            continue
        seen = engine.embed_many(image, [face, face.turned])
        result.append(Views(face, face.turned, seen, native))
    return result


def _eyes_to_mouth(landmarks: np.ndarray) -> float:
    """The direction from the eyes' midpoint to the mouth's, in degrees (0: straight down the picture)."""
    down = landmarks[3:5].mean(axis=0) - landmarks[:2].mean(axis=0)
    return float(np.degrees(np.arctan2(down[0], down[1])))


def _off_centre(box, width: int, height: int) -> float:
    return ((box[0] + box[2]) / 2 - width / 2) ** 2 + ((box[1] + box[3]) / 2 - height / 2) ** 2


if __name__ == "__main__":
    main()
