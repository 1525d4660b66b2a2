"""Unknown clusters: unmatched faces of one event grouped by similarity."""

import numpy as np
from pgvector.django import CosineDistance

from faces.models import Face, UnknownCluster


def assign_clusters(faces: list[Face], threshold: float | None) -> None:
    """Put each unmatched, unclustered face in its event's nearest cluster, or a new one.

    A face that is now matched leaves its cluster. With threshold None nothing is clustered.
    """
    for face in faces:
        if face.matched_user_id is not None:
            _leave_cluster(face)
        elif face.unknown_cluster_id is None and threshold is not None:
            _join_nearest(face, threshold)


def _join_nearest(face: Face, threshold: float) -> None:
    embedding = np.asarray(face.embedding, dtype=np.float32)
    nearest = (
        UnknownCluster.objects.filter(event_id=face.event_id)
        .annotate(distance=CosineDistance("centroid", embedding.tolist()))
        .order_by("distance")
        .first()
    )
    if nearest is not None and 1.0 - nearest.distance >= threshold:
        total = np.asarray(nearest.centroid, dtype=np.float32) * nearest.face_count + embedding
        nearest.centroid = total / np.linalg.norm(total)
        nearest.face_count += 1
        nearest.save(update_fields=["centroid", "face_count"])
        cluster = nearest
    else:
        cluster = UnknownCluster.objects.create(event_id=face.event_id, centroid=embedding, face_count=1)
    face.unknown_cluster = cluster
    face.save(update_fields=["unknown_cluster"])


def _leave_cluster(face: Face) -> None:
    if face.unknown_cluster_id is None:
        return
    cluster = UnknownCluster.objects.select_for_update().get(id=face.unknown_cluster_id)
    cluster.face_count -= 1
    if cluster.face_count <= 0:
        cluster.delete()
    else:
        cluster.save(update_fields=["face_count"])
    face.unknown_cluster = None
    face.save(update_fields=["unknown_cluster"])
