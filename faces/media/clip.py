"""What an animated image and a video share: detected over time and linked into tracks, painted track by
track, never published as itself (docs/ARCHITECTURE.md §11)."""

import numpy as np

from faces.engines import FaceEngine
from faces.media.clip_detection import detect_clip
from faces.media.media import Checkpoint, Detection, Media, Painter
from faces.rendering.painters import BlurPainter, clip_tracks


class Clip(Media):
    # An animated image is detected on every frame; a video on a cadence (faces/media/tracks.py).
    every_frame: bool
    frame_count: int
    duration_ms: int
    _data: bytes

    @property
    def detection_key(self) -> np.ndarray:
        return np.frombuffer(self._data, np.uint8)

    def detect(self, engine: FaceEngine, between: Checkpoint) -> list[Detection]:
        return detect_clip(self, engine, between)

    def painters(self, planned: list, faces: list, regions: list) -> list[Painter]:
        tracks = clip_tracks(faces, self)
        return [BlurPainter.of(file, tracks, regions, self.width, self.height) for file in planned]
