"""What the face pass needs of an upload, whatever its kind: its size, its frames, how it is detected,
and files rendered from it with each file's blur (docs/ARCHITECTURE.md §5, §11).

Adding a kind is adding one class: Still (faces/media/still.py), AnimatedImage and Video (clips,
faces/media/clip.py), each opened by `faces.media.open` from the bytes.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from faces.engines import DetectedFace, FaceEngine
from faces.media.kinds import MediaKind
from faces.rendering.codec import encode_jpeg, thumbnail

# Called between frames and before writes; it raises to stop the work (a try that lost its lease:
# jobqueue/context.py, `JobContext.checkpoint`).
Checkpoint = Callable[[], None]


def never_stop() -> None:
    """The default checkpoint: work outside a worker has no session to lose."""


class Painter(Protocol):
    """One output's blur."""

    def touches(self, time: float) -> bool:
        """Whether the frame shown at `time` gets any blur (if not, it can be encoded as decoded)."""

    def __call__(self, time: float, frame: np.ndarray) -> None:
        """Paint the blur onto the frame shown at `time` (BGR, in place)."""


@dataclass(frozen=True)
class RenderedFile:
    data: bytes
    poster: bytes  # the JPEG thumbnail, cut from the file's own first frame


# (frame time, track, face) of each face found; a still's have no time and no track.
Detection = tuple[float | None, int | None, DetectedFace]


class Media(ABC):
    """One upload, read from its header at once: size, kind and limits (faces/media/limits.py) before any
    pixel is decoded; its frames decoded on demand, the same frames with the same times on every pass."""

    kind: MediaKind
    extension: str  # of its rendered files
    width: int
    height: int
    duration_ms: int | None
    # Whether the upload's own bytes may be the public file; only a plain still's may.
    published_as_is: bool = False

    def why_rendered(self) -> list[str]:
        """For the job's log line: why the public file is rendered rather than the upload (a clip always is)."""
        return []

    @abstractmethod
    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        """(time in seconds from the first frame, BGR pixels) of every frame, in order."""

    @property
    @abstractmethod
    def detection_key(self) -> np.ndarray:
        """What a retry's remembered detection is keyed by (faces/detection_memory.py)."""

    @abstractmethod
    def detect(self, engine: FaceEngine, between: Checkpoint) -> list[Detection]:
        """Every face found; `between` is called between steps (it may raise to stop the detection)."""

    @abstractmethod
    def painters(self, planned: list, faces: list, regions: list) -> list[Painter]:
        """One painter per planned file (faces/rendering/files.py): the stored `faces` it blurs, and the
        blur regions (pixel boxes)."""

    @abstractmethod
    def render(self, painters: list[Painter], between_frames: Checkpoint = never_stop) -> Iterable[RenderedFile]:
        """One file per painter, each from every frame with that painter's blur; `between_frames` is
        called before each frame (it may raise to stop the render)."""


def poster(frame: np.ndarray) -> bytes:
    return encode_jpeg(thumbnail(frame))
