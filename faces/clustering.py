"""Unknown clusters: unmatched faces of one event grouped by similarity.

An event's clusters are read and written under its cluster lock, held until the transaction ends:
two readers clustering photos of one event at once would otherwise both read "no cluster yet" and
split one person into two clusters, or both add a face to a cluster from the same face_count.
"""

import numpy as np
from pgvector.django import CosineDistance

from faces.matching import PhotoMatch
from faces.models import Face, UnknownCluster
from jobqueue.api import hold_until_commit

# The advisory lock namespace of an event's clusters ("MLCL"; jobqueue.context.hold_until_commit).
CLUSTER_LOCK = 0x4D4C434C


def assign_clusters(faces: list[Face], threshold: float | None) -> None:
    """Put each unmatched, unclustered face in its event's nearest cluster, or a new one; a clip's
    track (one identity, docs/ARCHITECTURE.md §11) goes into one cluster whole.

    A face that is now matched leaves its cluster. With threshold None nothing is clustered.
    The event's cluster lock is taken first, when there is anything to do.
    """
    work = [face for face in faces if _cluster_change(face, threshold)]
    if not work:
        return
    lock_event_clusters(work[0].event_id)
    for identity in _identities(work):
        if identity[0].matched_user_id is not None:
            for face in identity:
                _leave_cluster(face)
        else:
            _join_nearest(identity, threshold)


def _identities(faces: list[Face]) -> list[list[Face]]:
    """The faces of one track together; a still's faces (no track) one by one."""
    tracks: dict[int, list[Face]] = {}
    alone = []
    for face in faces:
        if face.track is None:
            alone.append([face])
        else:
            tracks.setdefault(face.track, []).append(face)
    return alone + list(tracks.values())


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


def _join_nearest(faces: list[Face], threshold: float) -> None:
    """One identity's faces into the cluster nearest to its best-seen face (or a new one)."""
    surest = max(faces, key=lambda face: (face.embedding_norm or 0.0, face.det_score))
    embeddings = np.array([face.embedding for face in faces], dtype=np.float32)
    nearest = nearest_cluster(surest.event_id, np.asarray(surest.embedding, dtype=np.float32))
    if nearest is not None and 1.0 - nearest.distance >= threshold:
        centroid = np.asarray(nearest.centroid, dtype=np.float32)
        nearest.centroid = joined_centroid(centroid, nearest.face_count, embeddings)
        nearest.face_count += len(faces)
        nearest.save(update_fields=["centroid", "face_count"])
        cluster = nearest
    else:
        cluster = UnknownCluster.objects.create(
            event_id=surest.event_id, centroid=joined_centroid(None, 0, embeddings), face_count=len(faces)
        )
    for face in faces:
        face.unknown_cluster = cluster
    Face.objects.bulk_update(faces, ["unknown_cluster"])


def joined_centroid(centroid: np.ndarray | None, count: int, embeddings: np.ndarray) -> np.ndarray:
    """A cluster's unit centroid once `embeddings` join the `count` faces whose centroid it was (None: a new
    cluster). faces.measurement.people measures the clusters with this same arithmetic."""
    total = embeddings.sum(axis=0) if centroid is None else centroid * count + embeddings.sum(axis=0)
    return (total / np.linalg.norm(total)).astype(np.float32)


def _leave_cluster(face: Face) -> None:
    cluster = UnknownCluster.objects.select_for_update().get(id=face.unknown_cluster_id)
    cluster.face_count -= 1
    if cluster.face_count <= 0:
        cluster.delete()
    else:
        cluster.save(update_fields=["face_count"])
    face.unknown_cluster = None
    face.save(update_fields=["unknown_cluster"])


def cluster_faces(match: PhotoMatch | None) -> None:
    """Cluster the matched photo's unmatched faces, under its event's cluster lock. A face too poorly seen to
    judge (a track's: when all its faces are) joins no cluster: its embedding would pull a centroid anywhere.

    The lock is held until the transaction ends: the face pass calls this last, after its files are
    uploaded, so a second reader waits only for the cluster writes and the commit.
    """
    if match is not None:
        judged = [face for face, too_poor in zip(match.faces, match.too_poor, strict=True) if not too_poor]
        assign_clusters(judged, match.thresholds.cluster)
