"""Unknown clusters: unmatched faces of one event grouped by similarity.

An event's clusters are read and written under its cluster lock, held until the transaction ends:
two readers clustering photos of one event at once would otherwise both read "no cluster yet" and
split one person into two clusters, or both add a face to a cluster from the same face_count.
"""

import numpy as np
from pgvector.django import CosineDistance

from faces.models import Face, UnknownCluster
from jobqueue.locks import hold_until_commit

# The advisory lock namespace of an event's clusters ("MLCL"; jobqueue.locks).
CLUSTER_LOCK = 0x4D4C434C


def assign_clusters(faces: list[Face], threshold: float | None) -> None:
    """Put each unmatched, unclustered face in its event's nearest cluster, or a new one.

    A face that is now matched leaves its cluster. With threshold None nothing is clustered.
    The event's cluster lock is taken first, when there is anything to do.
    """
    work = [face for face in faces if _cluster_change(face, threshold)]
    if not work:
        return
    lock_event_clusters(work[0].event_id)
    for face in work:
        if face.matched_user_id is not None:
            _leave_cluster(face)
        else:
            _join_nearest(face, threshold)


def lock_event_clusters(event_id) -> None:
    """Wait for, then hold until the transaction ends, the lock on the event's clusters."""
    hold_until_commit(CLUSTER_LOCK, str(event_id))


def _cluster_change(face: Face, threshold: float | None) -> bool:
    if face.matched_user_id is not None:
        return face.unknown_cluster_id is not None
    return face.unknown_cluster_id is None and threshold is not None


def nearest_cluster(event_id, embedding: np.ndarray) -> UnknownCluster | None:
    """The event's cluster whose centroid is nearest to `embedding` (pgvector `<=>`), with its `distance`."""
    return (
        UnknownCluster.objects.filter(event_id=event_id)
        .annotate(distance=CosineDistance("centroid", embedding.tolist()))
        .order_by("distance")
        .first()
    )


def _join_nearest(face: Face, threshold: float) -> None:
    embedding = np.asarray(face.embedding, dtype=np.float32)
    nearest = nearest_cluster(face.event_id, embedding)
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
    cluster = UnknownCluster.objects.select_for_update().get(id=face.unknown_cluster_id)
    cluster.face_count -= 1
    if cluster.face_count <= 0:
        cluster.delete()
    else:
        cluster.save(update_fields=["face_count"])
    face.unknown_cluster = None
    face.save(update_fields=["unknown_cluster"])
