"""What the face pass needs of an upload, whatever its kind: its size, its frames, and files encoded from
its frames with a painter's blur on each (docs/ARCHITECTURE.md §5, §11). Media decodes and encodes: which
frames are looked at is detection's (faces/detection/), what a frame gets blurred is rendering's
(faces/rendering/painters.py).

Adding a kind is adding one class: Still (faces/media/still.py), AnimatedImage and Video (clips,
faces/media/clip.py), each opened by `faces.media.open` from the bytes.
"""

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from faces.checkpoint import Checkpoint, never_stop
from faces.media.kinds import MediaKind


class Painter(Protocol):
    """One output's blur."""

    # The (from, to) times it paints at, ends included: a frame outside them can be encoded as decoded.
    spans: list[tuple[float, float]]

    def __call__(self, time: float, frame: np.ndarray) -> None:
        """Paint the blur onto the frame shown at `time` (BGR, in place)."""


@dataclass(frozen=True)
class RenderedFile:
    data: bytes
    poster: bytes  # the JPEG thumbnail, cut from the file's own first frame


class Media(ABC):
    """One upload, read from its header at once: size, kind and limits (faces/media/limits.py) before any
    pixel is decoded; its frames decoded on demand, the same frames with the same times on every pass."""

    kind: MediaKind
    data: bytes  # the upload's bytes
    extension: str  # of its rendered files
    width: int
    height: int
    duration_ms: int | None
    # Whether the upload's own bytes may be the public file; only a plain still's may.
    published_as_is: bool = False
    # For the job's log line: why a still's public file is rendered rather than its upload (a clip always is).
    why_rendered: tuple[str, ...] = ()

    @abstractmethod
    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        """(time in seconds from the first frame, BGR pixels) of every frame, in order."""

    @abstractmethod
    def render(self, painters: list[Painter], checkpoint: Checkpoint = never_stop) -> Iterable[RenderedFile]:
        """One file per painter, each from every frame with that painter's blur; `checkpoint` is called
        before each frame and once more before the files are given, so that nothing is uploaded after a
        try's session is gone (it may raise to stop the render)."""
