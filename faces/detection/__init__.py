"""A photo's one detection pass, still or clip: which frames are looked at and where, every face found stored as
a row (docs/ARCHITECTURE.md §6, §11). A still is searched whole at once; a clip on its schedule and between
looks where the picture changed (faces/detection/clips.py), its sightings linked into tracks."""

import numpy as np
from django.utils import timezone

from faces.checkpoint import Checkpoint, never_stop
from faces.detection.clips import detect_clip
from faces.detection.memory import remembered_looks
from faces.engines import DetectedFace, FaceEngine
from faces.media import Media, Still
from faces.models import Face, Photo

# (frame time, track, face) of each face found; a still's have no time and no track.
Sighting = tuple[float | None, int | None, DetectedFace]


def detect_and_store(photo: Photo, media: Media, engine: FaceEngine, checkpoint: Checkpoint = never_stop) -> list[Face]:
    """Detect once, store every face with fractions of the displayed picture (a clip's with its frame time
    and track), stamp faces_detected_at; returns the stored rows, for the stages after. `checkpoint` is the try's: a
    try cut off from its session, or stopped for privacy work, stops within a tile or a frame.

    A retry of a try that failed after detecting reuses that detection, and a try stopped half-way for privacy
    work reuses the looks it took (faces.detection.memory).
    """
    looks = remembered_looks(photo, media.data, engine)
    if looks.found is None:
        looks.found = sightings(media, looks, checkpoint)
    rows = [face_row(photo, face, media.width, media.height, time, track) for time, track, face in looks.found]
    Face.objects.bulk_create(rows)
    photo.faces_detected_at = timezone.now()
    photo.save(update_fields=["faces_detected_at"])
    # In the order a read of the photo's faces gives (faces/matching.py, match_of): the same match either way.
    return sorted(rows, key=lambda face: face.id)


def sightings(media: Media, engine: FaceEngine, checkpoint: Checkpoint) -> list[Sighting]:
    """Every face of the upload: a still's whole picture at once (`checkpoint` between the detector's tiles: a
    48 MP photo takes about 10 s), a clip's frames as its schedule says."""
    if isinstance(media, Still):
        return [(None, None, face) for face in engine.analyze(media.image, checkpoint=checkpoint)]
    return detect_clip(media, engine, checkpoint)


def face_row(
    photo: Photo,
    found: DetectedFace,
    width: int,
    height: int,
    frame_time: float | None = None,
    track: int | None = None,
) -> Face:
    scale = np.array([width, height], dtype=np.float64)
    box = np.clip(found.box.reshape(2, 2) / scale, 0.0, 1.0)
    landmarks = np.clip(found.landmarks / scale, 0.0, 1.0)
    return Face(
        photo=photo,
        event_id=photo.event_id,
        box_x=float(box[0, 0]),
        box_y=float(box[0, 1]),
        box_w=float(box[1, 0] - box[0, 0]),
        box_h=float(box[1, 1] - box[0, 1]),
        landmarks=np.round(landmarks, 6).tolist(),
        det_score=float(found.score),
        embedding=found.embedding,
        engine=found.engine,
        frame_time=frame_time,
        track=track,
        embedding_norm=found.embedding_norm,
    )
