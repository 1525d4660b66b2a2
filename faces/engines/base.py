"""The face-engine interface: an upright BGR image in, faces with unit 512-d embeddings out, and what it
gives: the faces it detected (`Detection`), their embeddings (`Embedded`) and both together (`DetectedFace`).
The one engine is faces/engines/insightface.py's."""

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

    @abstractmethod
    def analyze(
        self,
        image: np.ndarray,
        *,
        small_faces: bool = True,
        plan: Plan | None = None,
        checkpoint: Checkpoint = never_stop,
    ) -> list[DetectedFace]:
        """Every face in `image`, embedded; without `small_faces` only the overview pass runs (a selfie). `plan`:
        the search's (a video frame's: faces/engines/pyramid.py, video_frame_plan); None: a photo's.
        `checkpoint` is called between the detector's passes and may raise to stop (faces/checkpoint.py)."""


class ModelsMissing(RuntimeError):
    """A model folder is missing or incomplete: the worker refuses to start, and says what to put where."""


class ProviderUnavailable(RuntimeError):
    """ORT_PROVIDERS names a provider onnxruntime cannot load here: the worker refuses to start rather than fall
    back to another in silence (a CUDA box running on its CPU is a slow box nobody knows about)."""
