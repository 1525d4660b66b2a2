"""Unknown clusters merging in the database (faces.people.merge_clusters), on embeddings made to order: the older id
kept, faces moved, counts summed, and a face that leaves a cluster in the same photo as a merge (the rule itself, on
real faces: tests/test_faces.py)."""

import uuid

import numpy as np
import pytest

from faces.models import Face, UnknownCluster
from faces.people import assign_clusters
from faces.thresholds import Thresholds
from tests.support import factories

pytestmark = pytest.mark.django_db

RULE = Thresholds(match=0.40, blur=0.18, cluster=0.35, cluster_merge=0.40)


def unit(*values: float) -> list[float]:
    vector = np.zeros(512, dtype=np.float32)
    vector[: len(values)] = values
    return (vector / np.linalg.norm(vector)).tolist()


# Y's face; Z's, 0.30 from it; a third, 0.64 from Y's and 0.46 from Z's: it joins Y, whose centroid then comes 0.42
# from Z's.
Y, Z, BRIDGE = unit(1, 0, 0), unit(0.30, 0.954, 0), unit(0.64, 0.281, 0.715)


def clustered_face(photo, embedding: list[float]) -> Face:
    face = unclustered_face(photo, embedding)
    cluster = UnknownCluster.objects.create(event_id=photo.event_id, centroid=embedding, face_count=1)
    face.unknown_cluster = cluster
    face.save(update_fields=["unknown_cluster"])
    return face


def unclustered_face(photo, embedding: list[float]) -> Face:
    return factories.face_row(photo, embedding, embedding_norm=24.0)


def test_a_cluster_that_came_near_an_older_one_merges_into_it():
    event = factories.event()
    photo = factories.photo_row(event)
    older, younger = clustered_face(photo, Y), clustered_face(photo, Z)
    bridge = unclustered_face(factories.photo_row(event), BRIDGE)

    assign_clusters([bridge], RULE)

    (kept,) = UnknownCluster.objects.filter(event=event)
    assert kept.id == older.unknown_cluster_id, "the older id stays"
    assert kept.face_count == 3 == Face.objects.filter(unknown_cluster=kept).count()
    assert not UnknownCluster.objects.filter(id=younger.unknown_cluster_id).exists()
    assert bridge.unknown_cluster_id == kept.id
    centroid = np.asarray(kept.centroid)
    assert np.linalg.norm(centroid) == pytest.approx(1.0, abs=1e-5)
    assert float(centroid @ np.asarray(Z)) > 0.5, "the mean of all three faces"


def test_without_cluster_merge_they_stay_apart():
    event = factories.event()
    photo = factories.photo_row(event)
    clustered_face(photo, Y), clustered_face(photo, Z)
    assign_clusters([unclustered_face(photo, BRIDGE)], Thresholds(match=0.40, blur=0.18, cluster=0.35))
    assert sorted(UnknownCluster.objects.filter(event=event).values_list("face_count", flat=True)) == [1, 2]


def test_a_face_now_matched_leaves_its_cluster_before_a_merge_could_remove_it():
    """Z's face is now matched (a reprocess: its member's reference became ready) and the bridge, in the same
    photo, joins Y: leaving first, the matched face empties Z, and nothing merges into a cluster it was read in."""
    event = factories.event()
    photo = factories.photo_row(event)
    clustered_face(factories.photo_row(event), Y)
    leaving = clustered_face(photo, Z)
    leaving.matched_user_id = uuid.uuid4()
    bridge = unclustered_face(photo, BRIDGE)

    assign_clusters([bridge, leaving], RULE)

    (kept,) = UnknownCluster.objects.filter(event=event)
    assert kept.face_count == 2 == Face.objects.filter(unknown_cluster=kept).count()
    leaving.refresh_from_db()
    assert leaving.unknown_cluster_id is None
