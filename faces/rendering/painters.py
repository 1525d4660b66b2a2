"""The blur of one file, frame by frame: what a still or a clip (faces/media/) paints onto each frame."""

from dataclasses import dataclass

import numpy as np

from faces.geometry import FractionBox, FractionCorners, restored_face_box
from faces.models import Face
from faces.rendering.blur import blur_face, blur_rectangle
from faces.tracks import Track, tracks_of


@dataclass(frozen=True)
class BlurPainter:
    """The blur of one planned file: an ellipse over each face it blurs (a still's where it was stored, a
    clip's tracks where they are at each time), then the regions."""

    tracks: list[Track]
    still_faces: list[FractionBox]
    regions: list
    width: int
    height: int

    @classmethod
    def of(cls, faces: list[Face], tracks: dict[int, Track], regions: list, width: int, height: int) -> "BlurPainter":
        """A clip's file: the tracks of the faces it blurs."""
        chosen = [tracks[number] for number in sorted({face.track for face in faces})]
        return cls(chosen, [], regions, width, height)

    @classmethod
    def of_still(cls, faces: list[Face], regions: list, width: int, height: int) -> "BlurPainter":
        """A still's file: the faces it blurs, where they were stored."""
        return cls([], [_box(face) for face in faces], regions, width, height)

    def touches(self, time: float) -> bool:
        return bool(self.regions or self.still_faces) or any(track.boxes_at(time) for track in self.tracks)

    def __call__(self, time: float, frame: np.ndarray) -> None:
        for box in self.still_faces + _track_faces(self.tracks, time):
            blur_face(frame, box, self.width, self.height)
        for region in self.regions:
            blur_rectangle(frame, region)


def painters_of(blurred: list[list[Face]], faces: list[Face], regions: list, width: int, height: int) -> list:
    """One painter per file, each blurring its list of `blurred` faces: a still's where they were stored, a
    clip's (faces with a track) along their tracks, made from all the photo's `faces`; and the blur regions
    (pixel boxes) in every file."""
    if not faces or faces[0].track is None:
        return [BlurPainter.of_still(chosen, regions, width, height) for chosen in blurred]
    tracks = clip_tracks(faces, width, height)
    return [BlurPainter.of(chosen, tracks, regions, width, height) for chosen in blurred]


def clip_tracks(faces: list[Face], width: int, height: int) -> dict[int, Track]:
    """The stored faces' tracks, each sighting's box restored past the frame's edge like a still's."""
    scale = np.array([width, height] * 2, dtype=np.float64)
    sightings = [
        (face.track, face.frame_time, np.array(restored_face_box(_box(face), width, height)) / scale) for face in faces
    ]
    return tracks_of(sightings)


def _track_faces(tracks: list[Track], time: float) -> list[FractionBox]:
    """Where the tracks' faces are at `time`, as (x, y, w, h) fractions."""
    return [(x1, y1, x2 - x1, y2 - y1) for track in tracks for x1, y1, x2, y2 in map(_floats, track.boxes_at(time))]


def _floats(box: FractionCorners) -> tuple[float, float, float, float]:
    return tuple(float(v) for v in box)


def _box(face: Face) -> FractionBox:
    return face.box_x, face.box_y, face.box_w, face.box_h
