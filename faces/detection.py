"""A photo's one detection pass, still or clip: every face found stored as a row (docs/ARCHITECTURE.md §6, §11)."""

import numpy as np
from django.utils import timezone

from faces.detection_memory import detections_of
from faces.engines import DetectedFace, resident_engine
from faces.media.media import Checkpoint, Media, never_stop
from faces.models import Face, Photo


def detect_and_store(photo: Photo, media: Media, between: Checkpoint = never_stop) -> list[Face]:
    """Detect once, store every face with fractions of the displayed picture (a clip's with its frame time
    and track), stamp faces_detected_at. `between` is the try's checkpoint: a try cut off from its session
    stops within a tile or a frame.

    A retry of a try that failed after detecting reuses that detection, and a try stopped half-way for privacy
    work reuses the looks it took (faces.detection_memory).
    """
    engine = resident_engine()
    found = detections_of(photo, media.detection_key, engine, lambda looks: media.detect(looks, between))
    rows = [face_row(photo, face, media.width, media.height, time, track) for time, track, face in found]
    Face.objects.bulk_create(rows)
    photo.faces_detected_at = timezone.now()
    photo.save(update_fields=["faces_detected_at"])
    return rows


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
