"""The blur of one file, frame by frame: what a still or a clip (faces/media/) paints onto each frame."""

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

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class BlurPainter:
    """The blur of one planned file: an ellipse over each face it blurs (a still's where it was stored, a
    clip's tracks where they are at each time), then the regions."""

    tracks: list[Track]
    still_faces: list[Box]  # (x, y, w, h) fractions
    regions: list
    width: int
    height: int

    @classmethod
    def of(cls, file: "PlannedFile", tracks: dict[int, Track], regions: list, width: int, height: int) -> "BlurPainter":
        """A clip's file: the tracks of the faces it blurs."""
        chosen = [tracks[number] for number in sorted({face.track for face in file.faces})]
        return cls(chosen, [], regions, width, height)

    @classmethod
    def of_still(cls, file: "PlannedFile", regions: list, width: int, height: int) -> "BlurPainter":
        """A still's file: the faces it blurs, where they were stored."""
        return cls([], [_box(face) for face in file.faces], regions, width, height)

    def touches(self, time: float) -> bool:
        return bool(self.regions or self.still_faces) or any(track.boxes_at(time) for track in self.tracks)

    def __call__(self, time: float, frame: np.ndarray) -> None:
        for box in self.still_faces + _track_faces(self.tracks, time):
            blur_ellipse(frame, expanded_face_box(box, self.width, self.height))
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


def _track_faces(tracks: list[Track], time: float) -> list[Box]:
    """Where the tracks' faces are at `time`, as (x, y, w, h) fractions."""
    return [(x1, y1, x2 - x1, y2 - y1) for track in tracks for x1, y1, x2, y2 in map(_floats, track.boxes_at(time))]


def _floats(box) -> Box:
    return tuple(float(v) for v in box)


def _box(face: Face) -> tuple[float, float, float, float]:
    return face.box_x, face.box_y, face.box_w, face.box_h
