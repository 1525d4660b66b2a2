"""The blur of one file, frame by frame: what a still or a clip (faces/media/) paints onto each frame."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from faces.geometry import restored_face_box
from faces.media.tracks import Track, tracks_of
from faces.models import Face
from faces.rendering.blur import blur_ellipse, blur_rectangle, expanded_face_box

if TYPE_CHECKING:
    from faces.media.clip import Clip
    from faces.rendering.files import PlannedFile

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class BlurPainter:
    """The blur of one planned file: the ellipses of its blurred faces where they are at each time, then
    the regions."""

    ellipses_at: Callable[[float], list[Box]]
    regions: list

    @classmethod
    def of(cls, file: "PlannedFile", tracks: dict[int, Track], regions: list, width: int, height: int) -> "BlurPainter":
        """A clip's file: the tracks of the faces it blurs."""
        chosen = [tracks[number] for number in sorted({face.track for face in file.faces})]
        return cls(lambda time: _track_ellipses(chosen, time, width, height), regions)

    @classmethod
    def of_still(cls, file: "PlannedFile", regions: list, width: int, height: int) -> "BlurPainter":
        """A still's file: the faces it blurs, where they were stored."""
        ellipses = [expanded_face_box(_box(face), width, height) for face in file.faces]
        return cls(lambda time: ellipses, regions)

    def touches(self, time: float) -> bool:
        return bool(self.regions) or bool(self.ellipses_at(time))

    def __call__(self, time: float, frame: np.ndarray) -> None:
        for box in self.ellipses_at(time):
            blur_ellipse(frame, box)
        for region in self.regions:
            blur_rectangle(frame, region)


def clip_tracks(faces: list[Face], clip: "Clip") -> dict[int, Track]:
    """The stored faces' tracks, each sighting's box restored past the frame's edge like a still's."""
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    sightings = [
        (face.track, face.frame_time, np.array(restored_face_box(_box(face), clip.width, clip.height)) / scale)
        for face in faces
    ]
    return tracks_of(sightings)


def _track_ellipses(tracks: list[Track], time: float, width: int, height: int) -> list[Box]:
    ellipses = []
    for track in tracks:
        for box in track.boxes_at(time):
            x1, y1, x2, y2 = (float(v) for v in box)
            ellipses.append(expanded_face_box((x1, y1, x2 - x1, y2 - y1), width, height))
    return ellipses


def _box(face: Face) -> tuple[float, float, float, float]:
    return face.box_x, face.box_y, face.box_w, face.box_h
