"""The face-engine interface: an upright BGR image in, faces with unit 512-d embeddings out."""

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

import cv2
import numpy as np

from faces.engines.tiling import TilingPlan, detect_tiled

EMBEDDING_DIMENSIONS = 512


@dataclass(frozen=True)
class Detection:
    """One face found by a detector, in pixels of the image it was given."""

    box: np.ndarray  # (4,) x1, y1, x2, y2
    landmarks: np.ndarray  # (5, 2): eyes, nose, mouth corners
    score: float

    def shifted(self, dx: float, dy: float, scale: float) -> "Detection":
        """This detection in the coordinates of a larger image: (p / scale) + offset."""
        offset = np.array([dx, dy], dtype=np.float32)
        box = self.box.reshape(2, 2) / scale + offset
        return Detection(box.reshape(4), self.landmarks / scale + offset, self.score)


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
    tiling: TilingPlan = TilingPlan()

    def analyze(self, image: np.ndarray, *, small_faces: bool = True) -> list[DetectedFace]:
        """Every face in `image`; without `small_faces` only the whole-image pass runs (a selfie)."""
        detections = self.detect(image, small_faces=small_faces)
        embeddings = self.embed_many(image, detections)
        return [
            DetectedFace(d.box, d.landmarks, d.score, embedding, self.name)
            for d, embedding in zip(detections, embeddings, strict=True)
        ]

    def detect(self, image: np.ndarray, *, small_faces: bool = True) -> list[Detection]:
        """Every face, large and small (faces/engines/tiling.py), in pixels of `image`."""
        plan = self.tiling if small_faces else replace(self.tiling, enabled=False)
        return detect_tiled(self.detect_once, image, plan)

    @abstractmethod
    def detect_once(self, image: np.ndarray) -> list[Detection]:
        """One detector pass over the whole of `image`, at its size."""

    @abstractmethod
    def embed_many(self, image: np.ndarray, detections: list[Detection]) -> np.ndarray:
        """(N, 512): the unit-length embedding of each detected face, in one batch."""


def pad_to_stride(image: np.ndarray, stride: int) -> np.ndarray:
    """Pad right and bottom with black to a multiple of the detector's stride; never rescale."""
    height, width = image.shape[:2]
    return cv2.copyMakeBorder(image, 0, -height % stride, 0, -width % stride, cv2.BORDER_CONSTANT, value=(0, 0, 0))


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
