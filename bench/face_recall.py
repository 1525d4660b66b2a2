"""Small-face recall in 12 MP photos: the single whole-image pass vs the tiled plan.

Eight real faces (the six of insightface's t1.jpg, cropped with a 40% margin around
the engine's own full-resolution detection, plus Tom Hanks and the astronaut) are
pasted, feathered, at face-box widths of 16-256 px into textured 4000x3000 scenes
(a mosaic of scikit-image's face-free photos, scaled up, plus mild noise). Each
scene goes through `detect_tiled` twice: `TilingPlan(enabled=False)` (one pass at
the working resolution, the baseline) and `TilingPlan()` (that pass plus tiles).
A pasted face counts as found when a detection overlaps its box with IoU >= 0.3;
a detection overlapping no pasted face is a false positive, and face-free scenes
built the same way measure false positives on their own. The goal: >= 95% recall
at >= 24 px, pooled over those widths and, stricter, in each of them.

Flags change things inside this run only: `--score-threshold` and the TilingPlan
fields (`--tile-upscale`, `--tile-max-pixels` ...); `--sweep` reports more score
thresholds from the same detector runs.
Usage: python bench/face_recall.py [--threads 1] [--seed 7] [--sweep 0.5 0.9] [--tile-upscale 1.5]
"""

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FACE_WIDTHS = (16, 20, 24, 32, 48, 64, 96, 128, 192, 256)
GOAL_WIDTH = 24
GOAL_RECALL = 0.95
MATCH_IOU = 0.3
SCENE_WIDTH, SCENE_HEIGHT = 4000, 3000
CROP_MARGIN = 0.4  # of the face box, on each side
FEATHER = 0.5  # the outer half of that margin fades into the scene
MOSAIC = (5, 4)  # background cells, columns x rows
NOISE_SIGMA = 4.0


@dataclass(frozen=True)
class FaceSource:
    name: str
    crop: np.ndarray  # BGR, the face with its margin
    box: np.ndarray  # (4,) the engine's face box in crop pixels


@dataclass
class Scene:
    image: np.ndarray
    truth: np.ndarray  # (n, 4) pasted face boxes
    sources: list[str]
    width: int | None  # the face width of the bucket; None for a face-free scene


@dataclass
class Result:
    seconds: list[float] = dataclasses.field(default_factory=list)
    found: dict = dataclasses.field(default_factory=dict)  # width -> [found, total]
    missed_by_source: dict = dataclasses.field(default_factory=dict)  # name -> [missed, total] at >= goal width
    false_pasted: int = 0
    false_free: int = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra_op_threads")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faces-per-scene", type=int, default=12)
    parser.add_argument("--scenes-per-width", type=int, default=4)
    parser.add_argument("--face-free-scenes", type=int, default=4)
    parser.add_argument("--widths", type=int, nargs="+", default=list(FACE_WIDTHS))
    parser.add_argument("--score-threshold", type=float, help="overrides portable.SCORE_THRESHOLD")
    parser.add_argument("--work-long-side", type=int, help="overrides TilingPlan.work_long_side (both modes)")
    parser.add_argument("--tile-size", type=int, help="overrides TilingPlan.tile_size")
    parser.add_argument("--tile-overlap", type=int, help="overrides TilingPlan.tile_overlap")
    parser.add_argument("--tile-max-pixels", type=int, help="overrides TilingPlan.tile_max_pixels")
    parser.add_argument("--tile-upscale", type=float, help="overrides TilingPlan.tile_upscale")
    parser.add_argument(
        "--sweep",
        type=float,
        nargs="+",
        default=[],
        help="also report these score thresholds (one detector run at the lowest, then filtered)",
    )
    parser.add_argument("--by-source", action="store_true", help="also print misses per face source")
    args = parser.parse_args()

    from faces.engines import portable
    from faces.engines.tiling import TilingPlan, detect_tiled

    threshold = portable.SCORE_THRESHOLD if args.score_threshold is None else args.score_threshold
    thresholds = sorted({threshold, *args.sweep})
    # Read by detect_once at call time. Greedy NMS keeps a box whatever the boxes scoring below it,
    # so filtering one run at the lowest threshold gives exactly what each higher threshold would.
    portable.SCORE_THRESHOLD = thresholds[0]
    overrides = {
        field: getattr(args, field)
        for field in ("work_long_side", "tile_size", "tile_overlap", "tile_max_pixels", "tile_upscale")
        if getattr(args, field) is not None
    }
    started = time.perf_counter()
    engine = portable.PortableEngine(intra_op_threads=args.threads)
    plan = TilingPlan(**overrides)
    modes = {
        "single pass": (engine.detect_once, TilingPlan(enabled=False, **overrides)),
        "tiled": (engine.detect_once, plan),
    }
    sources = face_sources(engine)
    rng = np.random.default_rng(args.seed)
    # Built one at a time: a scene is 36 MB.
    scenes = (
        pasted_scene(rng, sources, width, args.faces_per_scene) if width else face_free_scene(rng)
        for width in [w for w in args.widths for _ in range(args.scenes_per_width)] + [None] * args.face_free_scenes
    )
    results = {(mode, t): Result() for mode in modes for t in thresholds}
    for scene in scenes:
        for mode, (detect_once, mode_plan) in modes.items():
            began = time.perf_counter()
            detections = detect_tiled(detect_once, scene.image, mode_plan)
            elapsed = time.perf_counter() - began
            boxes = np.array([d.box for d in detections], np.float32).reshape(-1, 4)
            scores = np.array([d.score for d in detections], np.float32)
            for t in thresholds:
                results[mode, t].seconds.append(elapsed)
                score(results[mode, t], scene, boxes[scores >= t])

    report(args, plan, list(modes), results, threshold, thresholds, time.perf_counter() - started)


def face_sources(engine) -> list[FaceSource]:
    from momentlens.devservices import samples

    group = samples.group_photo()
    # Sure faces only: a --sweep may have lowered the detector's threshold for this run.
    faces = sorted((d for d in engine.detect_once(group) if d.score >= 0.9), key=lambda d: d.box[0])
    sources = [face_source(engine, f"t1 face {i}", group, d.box) for i, d in enumerate(faces, 1)]
    for name, image in (("Tom Hanks", samples.tom_hanks()), ("astronaut", samples.astronaut())):
        best = max(engine.detect_once(image), key=lambda d: d.score)
        sources.append(face_source(engine, name, image, best.box))
    if len(sources) != 8:
        raise RuntimeError(f"expected 8 face sources, the engine found {len(sources)}")
    return sources


def face_source(engine, name: str, image: np.ndarray, box: np.ndarray) -> FaceSource:
    """The face with a margin around it (edge pixels repeated where the image ends), and its box re-detected there."""
    x1, y1, x2, y2 = box
    pad_x, pad_y = round((x2 - x1) * CROP_MARGIN), round((y2 - y1) * CROP_MARGIN)
    padded = cv2.copyMakeBorder(image, pad_y, pad_y, pad_x, pad_x, cv2.BORDER_REPLICATE)
    left, top = round(x1), round(y1)
    crop = padded[top : round(y2) + 2 * pad_y, left : round(x2) + 2 * pad_x].copy()
    expected = np.array([pad_x, pad_y, pad_x + x2 - x1, pad_y + y2 - y1], np.float32)
    boxes = [d.box for d in engine.detect_once(crop)]
    overlaps = [iou(expected[None], b[None])[0, 0] for b in boxes]
    if not overlaps or max(overlaps) < 0.5:
        raise RuntimeError(f"{name}: the engine does not find the face in its own crop")
    return FaceSource(name, crop, boxes[int(np.argmax(overlaps))])


def pasted_scene(rng: np.random.Generator, sources: list[FaceSource], width: int, count: int) -> Scene:
    image = background(rng).astype(np.float32)
    order = rng.permutation(len(sources))
    placed, truth, names = [], [], []
    for index in range(count):
        source = sources[order[index % len(sources)]]
        face, box = scaled_face(source, width, flip=rng.random() < 0.5)
        height, crop_width = face.shape[:2]
        x, y = free_spot(rng, placed, crop_width, height)
        placed.append((x, y, x + crop_width, y + height))
        alpha = feather_mask(crop_width, height, box)
        region = image[y : y + height, x : x + crop_width]
        region[:] = region * (1 - alpha) + face.astype(np.float32) * alpha
        truth.append(box + np.array([x, y, x, y], np.float32))
        names.append(source.name)
    return Scene(image.round().astype(np.uint8), np.array(truth, np.float32), names, width)


def face_free_scene(rng: np.random.Generator) -> Scene:
    return Scene(background(rng), np.zeros((0, 4), np.float32), [], None)


def scaled_face(source: FaceSource, width: int, *, flip: bool) -> tuple[np.ndarray, np.ndarray]:
    """The crop resized so that its face box (not the crop) is `width` px wide, and that box."""
    scale = width / (source.box[2] - source.box[0])
    height, crop_width = source.crop.shape[:2]
    size = (max(1, round(crop_width * scale)), max(1, round(height * scale)))
    face = cv2.resize(source.crop, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
    sx, sy = size[0] / crop_width, size[1] / height
    box = source.box * [sx, sy, sx, sy]
    if flip:
        face = face[:, ::-1]
        box = np.array([size[0] - box[2], box[1], size[0] - box[0], box[3]], np.float32)
    return face, box.astype(np.float32)


def feather_mask(width: int, height: int, box: np.ndarray) -> np.ndarray:
    """1 over the face and the inner half of its margin, fading linearly to 0 at the crop edge."""
    fade_x = max(1.0, (box[2] - box[0]) * CROP_MARGIN * FEATHER)
    fade_y = max(1.0, (box[3] - box[1]) * CROP_MARGIN * FEATHER)
    xs, ys = np.arange(width) + 0.5, np.arange(height) + 0.5
    ramp_x = np.clip(np.minimum(xs, width - xs) / fade_x, 0, 1)
    ramp_y = np.clip(np.minimum(ys, height - ys) / fade_y, 0, 1)
    return (ramp_y[:, None] * ramp_x[None, :])[..., None].astype(np.float32)


def free_spot(rng: np.random.Generator, placed: list, width: int, height: int, gap: int = 8) -> tuple[int, int]:
    for _ in range(20_000):
        x = int(rng.integers(0, SCENE_WIDTH - width + 1))
        y = int(rng.integers(0, SCENE_HEIGHT - height + 1))
        if all(
            x + width + gap <= px1 or px2 + gap <= x or y + height + gap <= py1 or py2 + gap <= y
            for px1, py1, px2, py2 in placed
        ):
            return x, y
    raise RuntimeError(f"no room for another {width}x{height} face: lower --faces-per-scene")


def background(rng: np.random.Generator) -> np.ndarray:
    """A textured face-free 4000x3000 scene: a mosaic of scaled-up face-free photos plus mild noise."""
    from momentlens.devservices import samples

    photos = _face_free_photos(samples)
    columns, rows = MOSAIC
    cell_w, cell_h = SCENE_WIDTH // columns, SCENE_HEIGHT // rows
    canvas = np.empty((SCENE_HEIGHT, SCENE_WIDTH, 3), np.uint8)
    for row in range(rows):
        for column in range(columns):
            photo = photos[int(rng.integers(len(photos)))]
            if rng.random() < 0.5:
                photo = photo[:, ::-1]
            canvas[row * cell_h : (row + 1) * cell_h, column * cell_w : (column + 1) * cell_w] = cover(
                rng, photo, cell_w, cell_h
            )
    noise = rng.standard_normal(canvas.shape, dtype=np.float32) * NOISE_SIGMA
    return np.clip(canvas + noise, 0, 255).astype(np.uint8)


_PHOTOS: list[np.ndarray] = []


def _face_free_photos(samples) -> list[np.ndarray]:
    if not _PHOTOS:
        _PHOTOS.extend(samples.face_free_scenes())
    return _PHOTOS


def cover(rng: np.random.Generator, photo: np.ndarray, width: int, height: int) -> np.ndarray:
    """`photo` scaled (a little beyond) to cover width x height, cropped at a random offset."""
    photo_h, photo_w = photo.shape[:2]
    scale = max(width / photo_w, height / photo_h) * rng.uniform(1.0, 1.4)
    size = (max(width, round(photo_w * scale)), max(height, round(photo_h * scale)))
    scaled = cv2.resize(np.ascontiguousarray(photo), size, interpolation=cv2.INTER_CUBIC)
    x = int(rng.integers(0, size[0] - width + 1))
    y = int(rng.integers(0, size[1] - height + 1))
    return scaled[y : y + height, x : x + width]


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, m) IoU of boxes a (n, 4) and b (m, 4)."""
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-9), 0.0)


def score(result: Result, scene: Scene, detections: np.ndarray) -> None:
    overlaps = iou(scene.truth, detections)
    false = int((overlaps.max(axis=0, initial=0.0) < MATCH_IOU).sum()) if len(detections) else 0
    if scene.width is None:
        result.false_free += false
        return
    result.false_pasted += false
    found = overlaps.max(axis=1, initial=0.0) >= MATCH_IOU
    tally = result.found.setdefault(scene.width, [0, 0])
    tally[0] += int(found.sum())
    tally[1] += len(found)
    if scene.width >= GOAL_WIDTH:
        for name, hit in zip(scene.sources, found, strict=True):
            missed = result.missed_by_source.setdefault(name, [0, 0])
            missed[0] += int(not hit)
            missed[1] += 1


def report(args, plan, modes: list, results: dict, threshold: float, thresholds: list, total_s: float) -> None:
    pasted = len(args.widths) * args.scenes_per_width
    print(
        f"\n## Face recall in {SCENE_WIDTH}x{SCENE_HEIGHT} scenes ({args.faces_per_scene} faces x "
        f"{args.scenes_per_width} scenes per width, {args.face_free_scenes} face-free scenes, "
        f"seed {args.seed}, {args.threads} thread(s))\n"
    )
    print(
        f"Found = a detection with IoU >= {MATCH_IOU} against the pasted face box; a detection matching no "
        f"pasted face is a false positive. SCORE_THRESHOLD {threshold}; plan: work_long_side "
        f"{plan.work_long_side}, tile_size {plan.tile_size}, tile_overlap {plan.tile_overlap}, "
        f"tile_upscale {plan.tile_upscale:g}, "
        f"tile_max_pixels {plan.tile_max_pixels:,}."
    )
    for mode in modes:
        result = results[mode, threshold]
        print(f"\n### {mode}\n")
        print("| face width px | faces | found | recall % |")
        print("|---:|---:|---:|---:|")
        for width in args.widths:
            found, total = result.found[width]
            print(f"| {width} | {total} | {found} | {100 * found / total:.1f} |")

    base_s = float(np.mean(results[modes[0], threshold].seconds))
    print(f"\n### Summary (goal: >= {GOAL_RECALL:.0%} recall at >= {GOAL_WIDTH} px)\n")
    print(
        f"| mode | mean s per 12 MP scene | ratio | recall at >= {GOAL_WIDTH} px (pooled) | lowest bucket "
        f">= {GOAL_WIDTH} px | false positives on pasted scenes (per scene) | false positives per face-free scene "
        "| goal |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for index, mode in enumerate(modes):
        result = results[mode, threshold]
        seconds = float(np.mean(result.seconds))
        found, total, recall = goal_recall(result)
        print(
            f"| {mode}{' (baseline)' if index == 0 else ''} | {seconds:.2f} | {seconds / base_s:.2f} | "
            f"{100 * recall:.1f}% ({found}/{total}) | {lowest_bucket(result)} | {result.false_pasted} "
            f"({result.false_pasted / pasted:.2f}) | {false_per_free(args, result)} | {goal(result)} |"
        )
    if len(thresholds) > 1:
        small = [w for w in args.widths if w < 64]
        print("\n### Score threshold sweep (same detections, filtered)\n")
        print(
            "| mode | score threshold | "
            + " | ".join(f"recall {w} px" for w in small)
            + f" | recall at >= {GOAL_WIDTH} px | false positives per pasted scene | "
            "false positives per face-free scene | goal |"
        )
        print("|---|---:|" + "---:|" * (len(small) + 3) + "---|")
        for mode in modes:
            for t in thresholds:
                result = results[mode, t]
                cells = " | ".join(f"{100 * result.found[w][0] / result.found[w][1]:.1f}%" for w in small)
                _, _, recall = goal_recall(result)
                print(
                    f"| {mode} | {t:g} | {cells} | {100 * recall:.1f}% | {result.false_pasted / pasted:.2f} | "
                    f"{false_per_free(args, result)} | {goal(result)} |"
                )
    if args.by_source:
        print(f"\n### Misses by face source at >= {GOAL_WIDTH} px\n")
        print("| source | " + " | ".join(f"{mode} missed" for mode in modes) + " |")
        print("|---|" + "---:|" * len(modes))
        for name in sorted(results[modes[0], threshold].missed_by_source):
            cells = " | ".join("{}/{}".format(*results[mode, threshold].missed_by_source[name]) for mode in modes)
            print(f"| {name} | {cells} |")
    print(f"\nTotal runtime {total_s:.0f} s.")


def goal_recall(result: Result) -> tuple[int, int, float]:
    found = sum(f for w, (f, _) in result.found.items() if w >= GOAL_WIDTH)
    total = sum(t for w, (_, t) in result.found.items() if w >= GOAL_WIDTH)
    return found, total, found / total if total else float("nan")


def lowest_bucket(result: Result) -> str:
    buckets = [(f / t, w) for w, (f, t) in result.found.items() if w >= GOAL_WIDTH]
    if not buckets:
        return "-"
    recall, width = min(buckets)
    return f"{100 * recall:.1f}% ({width} px)"


def goal(result: Result) -> str:
    """'met': pooled and in every bucket >= GOAL_WIDTH; 'pooled only': the smallest buckets fall short."""
    if goal_recall(result)[2] < GOAL_RECALL:
        return "missed"
    if all(f / t >= GOAL_RECALL for w, (f, t) in result.found.items() if w >= GOAL_WIDTH):
        return "met"
    return "pooled only"


def false_per_free(args, result: Result) -> str:
    return f"{result.false_free / args.face_free_scenes:.2f}" if args.face_free_scenes else "-"


if __name__ == "__main__":
    main()
