"""`python manage.py measure_thresholds DIR`: genuine/impostor similarity of the configured engine.

DIR holds one folder of face images per person. Each image contributes its
largest detected face. Genuine pairs are two images of one person, impostor
pairs two images of different people. A folder named `group_*` holds group
photos of strangers: every face there (at least --min-face px wide) is its own
person, so it only ever makes impostor pairs.

Small faces embed worse, so a second section measures each face at the sizes in
--sizes: the whole image is downscaled so that the face is S px wide (never
upscaled), plus a variant blurred after scaling to --blur-size, and that variant once more
re-encoded as a JPEG of --jpeg-quality (what a phone's or a browser's re-encode leaves of a
small blurred face: the committed small-face threshold rests on it), and the engine's
full `analyze` runs on it. The detection overlapping the scaled box is compared
with the other images of the same person at full resolution (genuine) and with
every other person's full-resolution faces (impostor); a face the engine no
longer finds is counted as missed. Per size it prints the blur threshold that
>= 99 % of genuine pairs reach, what that threshold costs (strangers blurred),
and a recommended `Thresholds` line. docs/ARCHITECTURE.md §6 cites the output.
Nothing is written anywhere.
"""

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from django.core.management.base import BaseCommand, CommandError

from faces.engines import resident_engine
from faces.geometry import iou
from faces.media.still import Still
from faces.thresholds import Thresholds
from jobqueue.api import PermanentJobError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp"}
DEFAULT_CANDIDATES = "0.15,0.20,0.25,0.30,0.35,0.40,0.45,0.50,0.55,0.60"
GROUP_PREFIX = "group_"
# A re-detected face must overlap the scaled box this much (intersection over union).
MIN_IOU = 0.3
# Few identities are measured: blur sits this far below match (the bias is toward blurring).
BLUR_MARGIN = 0.10
STEP = 0.05  # recommended thresholds are multiples of this


@dataclass(frozen=True)
class Face:
    identity: str  # the person folder, or "group_x/photo.jpg#3" for a stranger
    image: Path
    box: np.ndarray
    embedding: np.ndarray
    stranger: bool

    @property
    def width(self) -> float:
        return float(self.box[2] - self.box[0])


@dataclass(frozen=True)
class Condition:
    label: str
    size: int | None = None  # face width in px; None: the image as it is
    sigma: float | None = None  # Gaussian blur after scaling
    jpeg: int | None = None  # then re-encoded as a JPEG of this quality


@dataclass
class Row:
    """Directed pairs: a probe face (at the condition's size) against full-resolution references."""

    condition: Condition
    probes: int = 0
    missed: int = 0
    genuine: list[float] = field(default_factory=list)
    impostor: list[float] = field(default_factory=list)
    # For each probe and each person it is not: its best similarity to that person's images.
    stranger_best: list[float] = field(default_factory=list)

    @property
    def floor(self) -> float | None:
        """The threshold >= 99 % of genuine pairs reach, rounded down to 0.01."""
        return math.floor(genuine_p1(self.genuine) * 100) / 100 if self.genuine else None


class Command(BaseCommand):
    help = "Print genuine/impostor similarity distributions, FAR/FRR at candidate thresholds, and per face size."

    def add_arguments(self, parser):
        parser.add_argument("directory", type=Path)
        parser.add_argument("--candidates", default=DEFAULT_CANDIDATES, help="comma-separated thresholds")
        parser.add_argument("--sizes", default="24,32,48,64,96", help="face widths (px) to downscale to")
        parser.add_argument("--blur-size", type=int, default=24, help="face width of the blurred variant")
        parser.add_argument("--blur-sigma", type=float, default=1.2, help="Gaussian sigma after scaling")
        parser.add_argument(
            "--jpeg-quality", type=int, default=75, help="the blurred variant re-encoded as a JPEG of this quality"
        )
        parser.add_argument("--min-face", type=float, default=20.0, help="group_ faces narrower (px) are ignored")

    def handle(self, *args, directory: Path, candidates: str, **options):
        if not directory.is_dir():
            raise CommandError(f"{directory} is not a folder (it should hold one folder of photos per person)")
        folders = sorted(p for p in directory.iterdir() if p.is_dir())
        if len(folders) < 2:
            raise CommandError(f"{directory} must hold at least two person folders")
        engine = resident_engine()
        faces = [face for folder in folders for face in self._faces(engine, folder, options["min_face"])]
        people = [folder.name for folder in folders if not folder.name.startswith(GROUP_PREFIX)]
        embeddings = {name: [f.embedding for f in faces if f.identity == name] for name in people}
        embeddings |= {f.identity: [f.embedding] for f in faces if f.stranger}
        genuine, impostor = pair_similarities(embeddings)
        if not genuine.size or not impostor.size:
            raise CommandError("need at least two usable images for one person and faces of two people")
        images = sum(1 for f in faces if not f.stranger)
        self.stdout.write(f"engine={engine.name} people={len(people)} images={images}")
        if strangers := [f for f in faces if f.stranger]:
            photos = len({f.image for f in strangers})
            self.stdout.write(f"group_photos={photos} strangers={len(strangers)} (every group_ face, impostor only)")
        self.stdout.write(f"genuine_pairs={len(genuine)} impostor_pairs={len(impostor)}\n")
        self._write_distributions(genuine, impostor)
        self._write_rates(genuine, impostor, [float(t) for t in candidates.split(",")])
        rows = measure_sizes(engine, faces, conditions(options))
        self._write_sizes(rows)
        self._write_recommendation(rows)

    def _faces(self, engine, folder: Path, min_face: float) -> list[Face]:
        stranger = folder.name.startswith(GROUP_PREFIX)
        result = []
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            try:
                found = engine.analyze(Still(path.read_bytes()).image)
            except PermanentJobError as error:
                self.stderr.write(f"skipped {path}: {error}")
                continue
            if not found:
                self.stderr.write(f"skipped {path}: no face")
                continue
            if stranger:
                wide = [f for f in found if f.box[2] - f.box[0] >= min_face]
                name = f"{folder.name}/{path.name}"
                result += [Face(f"{name}#{i}", path, f.box, f.embedding, True) for i, f in enumerate(wide)]
            else:
                largest = max(found, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]))
                result.append(Face(folder.name, path, largest.box, largest.embedding, False))
        return result

    def _write_distributions(self, genuine: np.ndarray, impostor: np.ndarray) -> None:
        self.stdout.write("| pairs | min | p1 | p5 | median | p95 | p99 | max |\n|---|---|---|---|---|---|---|---|")
        for label, values in (("genuine", genuine), ("impostor", impostor)):
            q = np.percentile(values, [0, 1, 5, 50, 95, 99, 100])
            self.stdout.write(f"| {label} | " + " | ".join(f"{v:.3f}" for v in q) + " |")

    def _write_rates(self, genuine: np.ndarray, impostor: np.ndarray, thresholds: list[float]) -> None:
        self.stdout.write("\n| threshold | false accept (impostor >= t) | false reject (genuine < t) |\n|---|---|---|")
        for threshold in thresholds:
            far = int((impostor >= threshold).sum())
            frr = int((genuine < threshold).sum())
            self.stdout.write(
                f"| {threshold:.2f} | {far}/{len(impostor)} ({far / len(impostor):.2%}) "
                f"| {frr}/{len(genuine)} ({frr / len(genuine):.2%}) |"
            )

    def _write_sizes(self, rows: list[Row]) -> None:
        self.stdout.write(
            "\n## Per face size\n\nEach face downscaled (whole image) to the width, re-detected, and compared with "
            "full-resolution faces: genuine = the same person's other images, impostor = everyone else's "
            "(directed pairs). blur = the 1st percentile of genuine, rounded down: >= 99 % of genuine pairs reach "
            "it. Stranger faces blurred: a face at that size against one person's images (best of them), for every "
            "person it is not.\n\n"
            "| face width | faces | missed | genuine n | min | p1 | median | impostor n | p99 | max | blur "
            "| impostor pairs >= blur | stranger faces blurred |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        )
        for row in rows:
            self.stdout.write(size_line(row, row.floor))

    def _write_recommendation(self, rows: list[Row]) -> None:
        recommended, notes = recommend(rows)
        self.stdout.write(
            f"\nRecommended: Thresholds(match={recommended.match:.2f}, blur={recommended.blur:.2f}, "
            f"cluster={recommended.cluster:.2f}, small_face_blur={recommended.small_face_blur:.2f}, "
            f"small_face_px={recommended.small_face_px})"
        )
        for note in notes:
            self.stdout.write(note)
        self.stdout.write(
            "\n### Price of the recommended blur\n\n| face width | blur | genuine pairs below (missed DNP faces) "
            "| impostor pairs >= blur | stranger faces blurred |\n|---|---|---|---|---|"
        )
        for row in rows:
            # Full resolution counts as wide (blur_for(None) would treat it as small).
            self.stdout.write(price_line(row, recommended.blur_for(row.condition.size or math.inf)))


def pair_similarities(embeddings: dict[str, list[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    genuine = [float(a @ b) for vectors in embeddings.values() for a, b in itertools.combinations(vectors, 2)]
    impostor = [
        float(a @ b)
        for (_, first), (_, second) in itertools.combinations(embeddings.items(), 2)
        for a in first
        for b in second
    ]
    return np.array(genuine), np.array(impostor)


# -- per face size -------------------------------------------------------------


def conditions(options: dict) -> list[Condition]:
    sizes = sorted((int(s) for s in options["sizes"].split(",")), reverse=True)
    size, sigma, quality = options["blur_size"], options["blur_sigma"], options["jpeg_quality"]
    return [
        Condition("full res"),
        *(Condition(f"{s} px", s) for s in sizes),
        Condition(f"{size} px + blur sigma {sigma:g}", size, sigma),
        Condition(f"{size} px + blur sigma {sigma:g} + JPEG q{quality}", size, sigma, quality),
    ]


def measure_sizes(engine, faces: list[Face], wanted: list[Condition]) -> list[Row]:
    rows = [Row(condition) for condition in wanted]
    for path in dict.fromkeys(face.image for face in faces):
        pixels = Still(path.read_bytes()).image
        for probe in (face for face in faces if face.image == path):
            for row in rows:
                if row.condition.size is None:
                    add_probe(row, probe, probe.embedding, faces)
                elif probe.width >= row.condition.size:  # never upscale
                    add_probe(row, probe, embed_at(engine, pixels, probe.box, row.condition), faces)
    return rows


def embed_at(engine, pixels: np.ndarray, box: np.ndarray, condition: Condition) -> np.ndarray | None:
    """The embedding of the face in `box` once the whole image is scaled (and blurred) as `condition` says;
    None when the engine does not find it there."""
    scale = condition.size / float(box[2] - box[0])
    height, width = pixels.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    small = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    if condition.sigma:
        small = cv2.GaussianBlur(small, (0, 0), condition.sigma)
    if condition.jpeg:
        encoded = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, condition.jpeg])[1]
        small = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
    expected = np.asarray(box, dtype=np.float64) * scale
    found = [(iou(face.box, expected), face) for face in engine.analyze(small)]
    overlap, face = max(found, key=lambda pair: pair[0], default=(0.0, None))
    return face.embedding if overlap >= MIN_IOU else None


def add_probe(row: Row, probe: Face, embedding: np.ndarray | None, faces: list[Face]) -> None:
    row.probes += 1
    if embedding is None:
        row.missed += 1
        return
    for reference in faces:
        if reference.identity != probe.identity:
            row.impostor.append(float(embedding @ reference.embedding))
        elif reference.image != probe.image:
            row.genuine.append(float(embedding @ reference.embedding))
    people = {face.identity for face in faces if not face.stranger and face.identity != probe.identity}
    for person in sorted(people):
        row.stranger_best.append(max(float(embedding @ f.embedding) for f in faces if f.identity == person))


def genuine_p1(values: list[float]) -> float:
    """The 1st percentile taken as an observed value at or below it, so >= 99 % of values reach it."""
    return float(np.percentile(values, 1, method="lower"))


def size_line(row: Row, threshold: float | None) -> str:
    gen, imp, best = np.array(row.genuine), np.array(row.impostor), np.array(row.stranger_best)
    cells = [row.condition.label, str(row.probes), str(row.missed), str(gen.size)]
    cells += [f"{gen.min():.3f}", f"{genuine_p1(row.genuine):.3f}", f"{np.median(gen):.3f}"] if gen.size else ["-"] * 3
    cells += [str(imp.size)] + ([f"{np.percentile(imp, 99):.3f}", f"{imp.max():.3f}"] if imp.size else ["-"] * 2)
    if threshold is None:
        cells += ["-", "-", "-"]
    else:
        cells += [f"{threshold:.2f}", share(imp >= threshold), share(best >= threshold)]
    return "| " + " | ".join(cells) + " |"


def price_line(row: Row, threshold: float) -> str:
    gen, imp, best = np.array(row.genuine), np.array(row.impostor), np.array(row.stranger_best)
    cells = [row.condition.label, f"{threshold:.2f}", share(gen < threshold), share(imp >= threshold)]
    return "| " + " | ".join([*cells, share(best >= threshold)]) + " |"


def share(hits: np.ndarray) -> str:
    return f"{int(hits.sum())}/{hits.size} ({hits.mean():.2%})" if hits.size else "-"


# -- recommendation --------------------------------------------------------------


def recommend(rows: list[Row], small_face_px: int = Thresholds.small_face_px) -> tuple[Thresholds, list[str]]:
    """match at least STEP/2 above every impostor pair at every size; cluster one step stricter; blur
    BLUR_MARGIN below match for faces >= small_face_px, capped at their genuine floor; small_face_blur at the
    genuine floor of smaller faces (the blurred variant included). Both floors are rounded down to STEP."""
    impostor_max = max(max(row.impostor) for row in rows if row.impostor)
    large_floor, small_floor = genuine_floors(rows, small_face_px)
    match = round(math.ceil(round((impostor_max + STEP / 2) / STEP, 6)) * STEP, 2)
    blur = round(min(match - BLUR_MARGIN, _step_down(large_floor)), 2)
    recommended = Thresholds(
        match=match,
        blur=blur,
        cluster=round(match + STEP, 2),
        small_face_blur=round(min(blur, _step_down(small_floor)), 2),
        small_face_px=small_face_px,
    )
    rule = (
        f"rule: match = highest impostor pair at any size ({impostor_max:.3f}) + {STEP / 2}, rounded up to {STEP}; "
        f"cluster = match + {STEP}; blur = min(match - {BLUR_MARGIN}, genuine floor >= {small_face_px} px "
        f"({large_floor:.2f}) rounded down to {STEP}); small_face_blur = min(blur, genuine floor "
        f"< {small_face_px} px ({small_floor:.2f}) rounded down to {STEP})"
    )
    return recommended, [rule, *warnings(rows, recommended)]


def genuine_floors(rows: list[Row], small_face_px: int) -> tuple[float, float]:
    """The lowest per-size genuine floor of faces at least small_face_px wide (full res included), and below."""
    measured = [row for row in rows if row.floor is not None]
    large = [row.floor for row in measured if (row.condition.size or math.inf) >= small_face_px]
    small = [row.floor for row in measured if (row.condition.size or math.inf) < small_face_px]
    large_floor = min(large, default=0.0)
    return large_floor, min(small, default=large_floor)


def warnings(rows: list[Row], recommended: Thresholds) -> list[str]:
    """Where sharp genuine pairs would not reach match, or faces >= small_face_px would not reach cluster."""
    result = []
    for row in (row for row in rows if row.floor is not None and not row.condition.sigma):
        if row.floor < recommended.match:
            result.append(f"note: {row.condition.label}: genuine floor {row.floor:.2f} is below match: not matched")
        if row.floor < recommended.cluster and (row.condition.size or math.inf) >= recommended.small_face_px:
            result.append(f"note: {row.condition.label}: genuine floor {row.floor:.2f} is below cluster")
    return result


def _step_down(value: float) -> float:
    return math.floor(round(value / STEP, 6)) * STEP
