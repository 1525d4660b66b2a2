"""What the media path needs of an animated image or a video: its frames, twice, and files rendered from them."""

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from faces.images import MediaKind
from faces.rendering.codec import encode_jpeg, thumbnail


def never_stop() -> None:
    """The default between frames: a render outside a worker has no session to lose."""


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


class Clip(ABC):
    """Frames with their times (seconds from the first frame), decoded on demand (never all at once
    for a video), the same frames with the same times on every pass. Size, frame count and duration
    are read, and the limits checked, before any frame is decoded."""

    kind: MediaKind
    extension: str
    # An animated image is detected on every frame; a video on a cadence (faces/media/tracks.py).
    every_frame: bool
    width: int
    height: int
    frame_count: int
    duration_ms: int

    @abstractmethod
    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        """(time, BGR pixels) of every frame, in order."""

    @abstractmethod
    def render(self, painters: list[Painter], between_frames: Callable[[], None] = never_stop) -> list[RenderedFile]:
        """One file per painter, each from every frame with that painter's blur; `between_frames` is
        called before each frame (it may raise to stop the render)."""


def poster(frame: np.ndarray) -> bytes:
    return encode_jpeg(thumbnail(frame))
