"""The face-engine interface: an upright BGR image in, faces with unit 512-d embeddings out."""

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from faces.engines.pyramid import Plan

EMBEDDING_DIMENSIONS = 512


@dataclass(frozen=True)
class Detection:
    """One face found by a detector, in pixels of the image it was given."""

    box: np.ndarray  # (4,) x1, y1, x2, y2
    landmarks: np.ndarray  # (5, 2): eyes, nose, mouth corners
    score: float


@dataclass(frozen=True)
class DetectedFace:
    box: np.ndarray  # (4,) x1, y1, x2, y2 in pixels of the stored image
    landmarks: np.ndarray  # (5, 2) pixels
    score: float
    embedding: np.ndarray  # (512,) float32, unit length
    engine: str


class FaceEngine(ABC):
    """Loaded once per worker process; `analyze` is its one call."""

    name: str

    def analyze(
        self, image: np.ndarray, *, small_faces: bool = True, plan: Plan | None = None, between=None
    ) -> list[DetectedFace]:
        """Every face in `image`; without `small_faces` only the overview pass runs (a selfie). `plan`: the
        search's (a video frame's: faces/engines/pyramid.py, video_frame_plan); None: a photo's.
        `between`, if given, is called between the detector's passes and may raise to stop."""
        detections = self.detect(image, small_faces=small_faces, plan=plan, between=between)
        embeddings = self.embed_many(image, detections)
        return [
            DetectedFace(d.box, d.landmarks, d.score, embedding, self.name)
            for d, embedding in zip(detections, embeddings, strict=True)
        ]

    @abstractmethod
    def detect(
        self, image: np.ndarray, *, small_faces: bool = True, plan: Plan | None = None, between=None
    ) -> list[Detection]:
        """Every face, large and small, in pixels of `image`; without `small_faces` only the large ones."""

    @abstractmethod
    def embed_many(self, image: np.ndarray, detections: list[Detection]) -> np.ndarray:
        """(N, 512): the unit-length embedding of each detected face, in one batch."""


def to_unit_512(vector: np.ndarray) -> np.ndarray:
    """Zero-pad to 512 dimensions and normalise; padding leaves cosine similarity unchanged."""
    padded = np.zeros(EMBEDDING_DIMENSIONS, dtype=np.float32)
    padded[: vector.shape[0]] = vector
    norm = np.linalg.norm(padded)
    if not np.isfinite(norm) or norm == 0:
        raise ValueError("the embedding is zero or not finite")
    return padded / norm


class ModelsMissing(RuntimeError):
    """A model folder is missing or incomplete: the worker refuses to start, and says what to put where."""


class ProviderUnavailable(RuntimeError):
    """ORT_PROVIDERS names a provider onnxruntime cannot load here: the worker refuses to start rather than fall
    back to another in silence (a CUDA box running on its CPU is a slow box nobody knows about)."""
