"""A matched photo's unmatched faces put into their event's Unknown clusters (faces/clustering.py,
docs/ARCHITECTURE.md §6)."""

from faces.clustering import assign_clusters
from faces.matching import PhotoMatch


def cluster_faces(match: PhotoMatch | None) -> None:
    """Cluster the matched photo's unmatched faces, under its event's cluster lock (faces.clustering).

    The lock is held until the transaction ends: the face pass calls this last, after its files are
    uploaded, so a second reader waits only for the cluster writes and the commit.
    """
    if match is not None:
        assign_clusters(match.faces, match.limits.cluster)
