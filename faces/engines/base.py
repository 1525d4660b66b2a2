"""The face-engine interface: an upright BGR image in, faces with unit 512-d embeddings out.

Each face is embedded as the recogniser sees it and as it sees its mirror image, averaged: a face and its
mirror are the same person, and the average is nearer the person's other photos (docs/ARCHITECTURE.md §6,
"Recognition"). The recogniser's feature norm before normalisation is kept with it: it is small when the
aligned crop hardly looks like a face to the recogniser (a turned head, sunglasses, blur, darkness, the
wrong way up), and the blur decision reads it (faces/quality.py).
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from faces.checkpoint import Checkpoint, never_stop
from faces.engines.pyramid import Plan

EMBEDDING_DIMENSIONS = 512


@dataclass(frozen=True)
class Detection:
    """One face found by a detector, in pixels of the image it was given."""

    box: np.ndarray  # (4,) x1, y1, x2, y2
    landmarks: np.ndarray  # (5, 2): eyes, nose, mouth corners
    score: float
    # The same face as a turned level saw it, when the upright levels found it too (faces/engines/pyramid.py):
    # `analyze` embeds both and keeps the upright one unless the recogniser sees the turned one far better.
    turned: "Detection | None" = None


@dataclass(frozen=True)
class Embedded:
    vectors: np.ndarray  # (N, 512) float32, unit length: each face and its mirror image, averaged
    norms: np.ndarray  # (N,) the recogniser's feature norm before normalisation, face and mirror averaged


@dataclass(frozen=True)
class DetectedFace:
    box: np.ndarray  # (4,) x1, y1, x2, y2 in pixels of the stored image
    landmarks: np.ndarray  # (5, 2) pixels
    score: float
    embedding: np.ndarray  # (512,) float32, unit length
    engine: str
    embedding_norm: float  # how well the recogniser saw a face (Embedded.norms)


class FaceEngine(ABC):
    """Loaded once per worker process; `analyze` is its one call."""

    name: str

    def analyze(
        self,
        image: np.ndarray,
        *,
        small_faces: bool = True,
        plan: Plan | None = None,
        checkpoint: Checkpoint = never_stop,
    ) -> list[DetectedFace]:
        """Every face in `image`; without `small_faces` only the overview pass runs (a selfie). `plan`: the
        search's (a video frame's: faces/engines/pyramid.py, video_frame_plan); None: a photo's.
        `checkpoint` is called between the detector's passes and may raise to stop (faces/checkpoint.py)."""
        detections = self.detect(image, small_faces=small_faces, plan=plan, checkpoint=checkpoint)
        turned = [d.turned for d in detections if d.turned is not None]
        seen = self.embed_many(image, detections + turned)
        views = iter(range(len(detections), len(detections) + len(turned)))
        faces = []
        for row, detection in enumerate(detections):
            if detection.turned is not None:
                detection, row = upright_first(detection, row, next(views), seen.norms)
            faces.append(self._face(detection, seen, row))
        return faces

    def _face(self, detection: "Detection", seen: Embedded, row: int) -> DetectedFace:
        box, landmarks, score = detection.box, detection.landmarks, detection.score
        return DetectedFace(box, landmarks, score, seen.vectors[row], self.name, float(seen.norms[row]))

    @abstractmethod
    def detect(
        self,
        image: np.ndarray,
        *,
        small_faces: bool = True,
        plan: Plan | None = None,
        checkpoint: Checkpoint = never_stop,
    ) -> list[Detection]:
        """Every face, large and small, in pixels of `image`; without `small_faces` only the large ones."""

    @abstractmethod
    def embed_many(self, image: np.ndarray, detections: list[Detection]) -> Embedded:
        """Each detected face's unit-length embedding and feature norm, in one batch."""


# A face both the upright and a turned level found is embedded as the upright levels saw it unless the turned
# view's feature norm is at least this many times the upright one's. `python bench/turned_views.py`: on real
# upright faces the turned view's norm is at most 1.04x the upright's, and the recogniser's view with the larger
# norm is the one whose crop is upright in 537 of 540 faces turned 90, 180 and 270 degrees, where the
# detector's scores pick the wrong one in 15 (a 180-degree face scores 0.04 more upright, garbage landmarks
# and all) and on upright faces they pick the turned view in 6 of 187 (docs/MEASUREMENTS.md, "Upright first").
TURNED_NORM_MARGIN = 1.1


def upright_first(upright: "Detection", row: int, turned_row: int, norms: np.ndarray) -> tuple["Detection", int]:
    """The view of one face to keep, and its row in `norms`: the upright one unless the recogniser sees the
    turned one TURNED_NORM_MARGIN times better (a face upside down in the picture, which the upright levels
    found with landmarks that put its mouth above its eyes)."""
    if norms[turned_row] >= TURNED_NORM_MARGIN * norms[row]:
        return upright.turned, turned_row
    return upright, row


def mirrored_average(features: np.ndarray, mirrored: np.ndarray) -> Embedded:
    """(N, d) features of faces and of their mirror images -> their Embedded: unit vectors of the averaged unit
    features, zero-padded to 512, and the mean feature norm."""
    norms = (np.linalg.norm(features, axis=1) + np.linalg.norm(mirrored, axis=1)) / 2
    vectors = [to_unit_512(to_unit(a) + to_unit(b)) for a, b in zip(features, mirrored, strict=True)]
    return Embedded(np.stack(vectors).astype(np.float32).reshape(-1, EMBEDDING_DIMENSIONS), norms.astype(np.float32))


def to_unit(vector: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(vector)
    if not np.isfinite(norm) or norm == 0:
        raise ValueError("the embedding is zero or not finite")
    return vector / norm


def to_unit_512(vector: np.ndarray) -> np.ndarray:
    """Zero-pad to 512 dimensions and normalise; padding leaves cosine similarity unchanged."""
    padded = np.zeros(EMBEDDING_DIMENSIONS, dtype=np.float32)
    padded[: vector.shape[0]] = vector
    return to_unit(padded)


class ModelsMissing(RuntimeError):
    """A model folder is missing or incomplete: the worker refuses to start, and says what to put where."""


class ProviderUnavailable(RuntimeError):
    """ORT_PROVIDERS names a provider onnxruntime cannot load here: the worker refuses to start rather than fall
    back to another in silence (a CUDA box running on its CPU is a slow box nobody knows about)."""
