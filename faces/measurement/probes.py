"""The faces of a labelled set, as the worker's engine sees them, and each person's reference.

A set is a folder of person folders, each holding different photos of that person (a `group_*` folder holds
strangers only: every face in it is its own person). Every photo gives one probe, its largest face, seen
exactly as a job sees an upload (faces.media.still.Still, then the engine's `analyze`). Each person's
reference is their most frontal large photo, as a DNP member's selfie would be: among their photos whose
face is at least as wide as their median, the one with the least head turn.

Derived probes show the same faces in conditions the set's photos rarely have: the whole photo shrunk so
that the face is a given width (a guest at the back of a group shot), blurred and re-encoded as a phone's
JPEG, or darkened as a dim room leaves it. Each is detected afresh; a face the engine no longer finds there
is counted as missed, never faked.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from faces.geometry import iou
from faces.media.still import Still
from faces.thresholds import FaceQuality
from jobqueue.api import PermanentJobError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp"}
GROUP_PREFIX = "group_"


@dataclass(frozen=True)
class Probing:
    """How a set's faces are read, and seen again in a derived condition (a dim room: `darkened`)."""

    min_face: float = 20.0  # a group_ face narrower (px) is no probe: under the smallest derived size, 24 px
    min_iou: float = 0.3  # a face found again overlaps the expected box this much: loose, a shrunk face's box shifts
    dark_light: float = 0.15  # the share of the light that reaches the sensor in a dim room: about a sixth
    dark_noise: float = 2.0  # the sensor's noise, in levels of 255: what a dim room adds to a phone's photo
    dark_brightness: float = 0.35  # the phone's gain lifts a dark photo to this share of its own, not all the way
    dark_seed: int = 0  # the same noise on every run: a darkened probe is the same face every time


PROBING = Probing()


@dataclass(frozen=True)
class Condition:
    label: str
    size: int | None = None  # the face shrunk to this width (px); None: the photo as it is
    sigma: float | None = None  # then a Gaussian blur of this sigma
    jpeg: int | None = None  # then re-encoded as a JPEG of this quality
    dark: bool = False  # the photo as a dim room leaves it (`darkened`)


AS_TAKEN = Condition("as taken")


@dataclass(frozen=True)
class Probe:
    person: str  # the person folder, or "group_x/photo.jpg#3" for a stranger
    image: Path
    condition: Condition
    box: np.ndarray  # x1, y1, x2, y2 in pixels of the probed image
    score: float
    embedding: np.ndarray
    quality: FaceQuality
    stranger: bool = False
    light: float | None = None  # the face box's mean grey level (0-255) in the probed image: low light as taken


@dataclass(frozen=True)
class Missed:
    person: str
    image: Path
    condition: Condition


def read_set(engine, directory: Path, *, probing: Probing = PROBING, skipped=None, progress=None) -> list[Probe]:
    """One probe per photo of every person folder (its largest face); every face at least `probing.min_face` px
    wide of a group_ folder. `skipped(path, reason)` hears of photos that give no probe, `progress(done, total)` of
    each photo read."""
    probes = []
    photos = photo_paths(directory)
    for done, path in enumerate(photos, start=1):
        probes += read_photo(engine, path, probing.min_face, skipped)
        if progress is not None:
            progress(done, len(photos))
    return probes


def photo_paths(directory: Path) -> list[Path]:
    """Every photo of every folder of `directory`, in name order."""
    folders = sorted(path for path in directory.iterdir() if path.is_dir())
    return [path for folder in folders for path in sorted(folder.iterdir()) if path.suffix.lower() in IMAGE_SUFFIXES]


def read_photo(engine, path: Path, min_face: float, skipped) -> list[Probe]:
    """A person's photo gives its largest face; a group_ photo every face at least `min_face` px wide."""
    try:
        image = Still(path.read_bytes()).image
    except PermanentJobError as error:
        _tell(skipped, path, str(error))
        return []
    found = engine.analyze(image)
    if not found:
        _tell(skipped, path, "no face")
        return []
    folder = path.parent.name
    if not folder.startswith(GROUP_PREFIX):
        return [probe(folder, path, AS_TAKEN, max(found, key=_area), image)]
    wide = [face for face in found if face.box[2] - face.box[0] >= min_face]
    return [
        probe(f"{folder}/{path.name}#{i}", path, AS_TAKEN, face, image, stranger=True) for i, face in enumerate(wide)
    ]


def probe(person: str, image: Path, condition: Condition, face, pixels: np.ndarray, *, stranger: bool = False) -> Probe:
    quality = FaceQuality.of_detected(face)
    light = face_light(pixels, face.box)
    return Probe(person, image, condition, face.box, face.score, face.embedding, quality, stranger, light)


def face_light(pixels: np.ndarray, box) -> float | None:
    """The mean grey level of the face's box (clipped to the picture); None when nothing of it is inside."""
    height, width = pixels.shape[:2]
    x1, y1, x2, y2 = (round(float(v)) for v in box)
    crop = pixels[max(0, y1) : min(height, y2), max(0, x1) : min(width, x2)]
    if crop.size == 0:
        return None
    grey = crop if crop.ndim == 2 else cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    return float(grey.mean())


def references(probes: list[Probe]) -> dict[str, Probe]:
    """Each person's most frontal large photo (people with two photos or more; strangers have none)."""
    return {person: chosen[0] for person, chosen in reference_sets(probes, 1).items()}


def reference_sets(probes: list[Probe], count: int) -> dict[str, list[Probe]]:
    """Each person's `count` most frontal large photos, as a member who gave `count` selfies (people with at
    least one photo more, so that a face of theirs is left to find)."""
    by_person: dict[str, list[Probe]] = {}
    for one in probes:
        if not one.stranger and one.condition == AS_TAKEN:
            by_person.setdefault(one.person, []).append(one)
    chosen = {}
    for person, photos in sorted(by_person.items()):
        if len(photos) <= count:
            continue
        median = float(np.median([one.quality.width_px for one in photos]))
        large = [one for one in photos if one.quality.width_px >= median]
        if len(large) < count:
            large = sorted(photos, key=lambda one: -one.quality.width_px)[:count]
        chosen[person] = sorted(large, key=lambda one: (one.quality.head_turn or 0.0, -one.quality.width_px))[:count]
    return chosen


def derived_probes(
    engine, probes: list[Probe], conditions: list[Condition], per_person: int, probing: Probing = PROBING
) -> Iterator[Probe | Missed]:
    """Up to `per_person` photos of each person (spread over their photos in name order), in each condition
    whose face width is no larger than the photo's own (never enlarged)."""
    by_person: dict[str, list[Probe]] = {}
    for one in probes:
        if not one.stranger:
            by_person.setdefault(one.person, []).append(one)
    for _, photos in sorted(by_person.items()):
        for one in spread(photos, per_person):
            pixels = Still(one.image.read_bytes()).image
            for condition in conditions:
                if condition.size is None or one.quality.width_px >= condition.size:
                    yield seen_in(engine, pixels, one, condition, probing)


def seen_in(engine, pixels: np.ndarray, one: Probe, condition: Condition, probing: Probing = PROBING) -> Probe | Missed:
    """The probe's face re-detected in `pixels` shown as `condition` says."""
    scale = 1.0 if condition.size is None else condition.size / one.quality.width_px
    height, width = pixels.shape[:2]
    shown = pixels
    if scale != 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        shown = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    if condition.dark:
        shown = darkened(shown, probing)
    if condition.sigma:
        shown = cv2.GaussianBlur(shown, (0, 0), condition.sigma)
    if condition.jpeg:
        shown = cv2.imdecode(
            cv2.imencode(".jpg", shown, [cv2.IMWRITE_JPEG_QUALITY, condition.jpeg])[1], cv2.IMREAD_COLOR
        )
    expected = np.asarray(one.box, dtype=np.float64) * scale
    found = [(iou(face.box, expected), face) for face in engine.analyze(shown)]
    overlap, face = max(found, key=lambda pair: pair[0], default=(0.0, None))
    if overlap < probing.min_iou:
        return Missed(one.person, one.image, condition)
    return probe(one.person, one.image, condition, face, shown)


def darkened(image: np.ndarray, probing: Probing = PROBING) -> np.ndarray:
    """`image` as a phone takes it in a dim room: `dark_light` of the light reaches the sensor (on linear values,
    gamma 2.2), which adds Gaussian noise of `dark_noise` levels (of 255), and the phone's gain lifts the result
    to `dark_brightness` of the photo's own, noise and all. Deterministic (seeded)."""
    light, noise, brightness = probing.dark_light, probing.dark_noise, probing.dark_brightness
    linear = (image.astype(np.float32) / 255.0) ** 2.2 * light
    linear += np.random.default_rng(probing.dark_seed).normal(0.0, noise / 255.0, image.shape).astype(np.float32)
    shown = np.clip(linear / light * brightness, 0.0, 1.0) ** (1 / 2.2)
    return (shown * 255.0).round().astype(np.uint8)


def spread(items: list, most: int) -> list:
    """At most `most` of `items`, evenly spaced, in order."""
    if len(items) <= most:
        return items
    if most < 2:
        return items[: max(most, 0)]
    return [items[round(i * (len(items) - 1) / (most - 1))] for i in range(most)]


def _area(face) -> float:
    return float((face.box[2] - face.box[0]) * (face.box[3] - face.box[1]))


def _tell(skipped, path: Path, reason: str) -> None:
    if skipped is not None:
        skipped(path, reason)
