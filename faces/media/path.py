"""The face path of an animated image or a video: detect over time once, match track by track, render
every frame of every file (docs/ARCHITECTURE.md §11).

`reprocess` comes here too, with the faces already stored: it matches and renders again from the
stored tracks and never detects (a track's reach depends on its sightings alone, faces/media/tracks.py).
"""

from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from faces.detection_memory import detections_of
from faces.engines import DetectedFace, FaceEngine, resident_engine
from faces.geometry import restored_face_box
from faces.images import MediaKind
from faces.matching import PhotoMatch
from faces.media.animated import AnimatedImage
from faces.media.clip import Clip
from faces.media.tracks import Track, link, scheduled, tracks_of
from faces.media.video import Video
from faces.models import Face, Photo
from faces.recognition import face_row
from faces.rendering.blur import blur_ellipse, blur_rectangle, expanded_face_box, region_box
from faces.rendering.files import PlannedFile, plan_files, publish_files, start_version
from jobqueue.hangup import ensure_session


def open_clip(data: bytes, kind: MediaKind) -> Clip:
    """The clip, its limits checked (faces/media/limits.py) before any frame is decoded."""
    return AnimatedImage(data) if kind is MediaKind.ANIMATED else Video(data)


def detect_and_store_clip(photo: Photo, clip: Clip, data: bytes) -> list[Face]:
    """Detect on the schedule, link into tracks, store one row per detection; stamp faces_detected_at.

    A retry of a try that failed after detecting reuses that detection (faces.detection_memory).
    """
    engine = resident_engine()
    upload = np.frombuffer(data, np.uint8)
    found = detections_of(photo, upload, engine.name, lambda: detect_clip(clip, engine))
    rows = []
    for time, track, face in found:
        row = face_row(photo, face, clip.width, clip.height)
        row.frame_time, row.track = time, track
        rows.append(row)
    Face.objects.bulk_create(rows)
    photo.faces_detected_at = timezone.now()
    photo.save(update_fields=["faces_detected_at"])
    return rows


def detect_clip(clip: Clip, engine: FaceEngine) -> list[tuple[float, int, DetectedFace]]:
    """(frame time, track, DetectedFace) for every face on every frame the schedule looks at."""
    seen = []
    for time, frame in scheduled(clip.frames(), clip.every_frame):
        ensure_session()  # a try cut off from its session stops within a frame (jobqueue/hangup.py)
        seen += [(time, face) for face in engine.analyze(frame, video_frame=not clip.every_frame)]
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    tracks = link([(time, face.box / scale) for time, face in seen])
    return [(time, track, face) for (time, face), track in zip(seen, tracks, strict=True)]


def render_clip_and_publish(photo: Photo, clip: Clip, match: PhotoMatch | None) -> int:
    """Every file rendered from every frame (the public one always: a clip is never published as
    itself), uploaded, pointed at, published; returns how many files were written."""
    planned = plan_files(photo, match, always=True)
    start_version(photo, clip.width, clip.height, clip.kind, clip.duration_ms)
    tracks = clip_tracks(match.faces if match else [], clip)
    regions = [region_box(region, clip.width, clip.height) for region in photo.blur_regions]
    painters = [BlurPainter.of(file, tracks, regions, clip.width, clip.height) for file in planned]
    rendered = clip.render(painters, between_frames=ensure_session)
    return publish_files(photo, planned, ((file.data, file.poster) for file in rendered), clip.extension)


def clip_tracks(faces: list[Face], clip: Clip) -> dict[int, Track]:
    """The stored faces' tracks, each sighting's box restored past the frame's edge like a still's."""
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    sightings = [
        (face.track, face.frame_time, np.array(restored_face_box(_box(face), clip.width, clip.height)) / scale)
        for face in faces
    ]
    return tracks_of(sightings)


@dataclass(frozen=True)
class BlurPainter:
    """The blur of one planned file: its blurred tracks where they are at each time, and the regions."""

    tracks: list[Track]
    regions: list
    width: int
    height: int

    @classmethod
    def of(cls, file: PlannedFile, tracks: dict[int, Track], regions: list, width: int, height: int) -> "BlurPainter":
        """The painter of a planned file: the tracks of the faces it blurs."""
        return cls([tracks[number] for number in sorted({face.track for face in file.faces})], regions, width, height)

    def touches(self, time: float) -> bool:
        return bool(self.regions) or any(track.boxes_at(time) for track in self.tracks)

    def __call__(self, time: float, frame: np.ndarray) -> None:
        for track in self.tracks:
            for box in track.boxes_at(time):
                x1, y1, x2, y2 = (float(v) for v in box)
                blur_ellipse(frame, expanded_face_box((x1, y1, x2 - x1, y2 - y1), self.width, self.height))
        for region in self.regions:
            blur_rectangle(frame, region)


def _box(face: Face) -> tuple[float, float, float, float]:
    return face.box_x, face.box_y, face.box_w, face.box_h
