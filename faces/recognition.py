"""A photo's one detection pass, then matching and clustering of what it stored."""

import numpy as np
from django.utils import timezone

from faces.clustering import assign_clusters
from faces.detection_memory import detections_of
from faces.engines import DetectedFace, resident_engine
from faces.matching import PhotoMatch, record_matches
from faces.models import Face, Photo
from jobqueue.hangup import ensure_session


def detect_and_store(photo: Photo, image: np.ndarray) -> list[Face]:
    """Detect once, store every face with fractions of the stored image, stamp faces_detected_at.

    A retry of a try that failed after detecting reuses that detection (faces.detection_memory).
    """
    height, width = image.shape[:2]
    engine = resident_engine()
    # A try cut off from its session stops between two tiles (jobqueue/hangup.py): 48 MP take 9 s.
    found = detections_of(photo, image, engine.name, lambda: engine.analyze(image, between=ensure_session))
    rows = [face_row(photo, face, width, height) for face in found]
    Face.objects.bulk_create(rows)
    photo.faces_detected_at = timezone.now()
    photo.save(update_fields=["faces_detected_at"])
    return rows


def face_row(photo: Photo, found: DetectedFace, width: int, height: int) -> Face:
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
    )


def match_faces(photo: Photo, size: tuple[int, int]) -> PhotoMatch | None:
    """Re-match the photo's stored faces and record the result on them; None when it has no face."""
    match = match_of(photo, size)
    if match is not None:
        record_matches(match)
    return match


def match_of(photo: Photo, size: tuple[int, int] | None) -> PhotoMatch | None:
    """The photo's stored faces against its event's members now, recording nothing; None without a face."""
    faces = list(photo.faces.order_by("id"))
    if not faces:
        return None
    return PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)


def cluster_faces(match: PhotoMatch | None) -> None:
    """Cluster the matched photo's unmatched faces, under its event's cluster lock (faces.clustering).

    The lock is held until the transaction ends: the face path calls this last, after its files are
    uploaded, so a second reader waits only for the cluster writes and the commit.
    """
    if match is not None:
        assign_clusters(match.faces, match.limits.cluster)
