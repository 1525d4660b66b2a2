"""Every unmanaged model reads and writes its table in the real schema mirror."""

import uuid

import numpy as np
import pytest
from pgvector.django import CosineDistance

from faces.models import (
    Event,
    EventMember,
    Face,
    Photo,
    PhotoVariant,
    SubjectReference,
    UnknownCluster,
)
from tests.support import factories

pytestmark = pytest.mark.django_db


def unit(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).normal(size=512)
    return (vector / np.linalg.norm(vector)).tolist()


def make_photo(event: Event) -> Photo:
    return factories.photo_row(event, blur_regions=[{"x": 0.1, "y": 0.2, "w": 0.3, "h": 0.4}])


def test_event_and_member_round_trip():
    event = Event.objects.create(name="Wedding")
    user = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user, do_not_publish=True)
    member = EventMember.objects.get(event=event, user_id=user)
    assert member.status == EventMember.Status.ACTIVE
    assert member.do_not_publish is True
    assert list(event.members.values_list("user_id", flat=True)) == [user]
    assert "DNP" in str(member)
    assert "Wedding" in str(Event.objects.get(pk=event.pk))


def test_member_composite_key_is_unique():
    from django.db import IntegrityError, transaction

    event = Event.objects.create(name="Party")
    user = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user)
    with pytest.raises(IntegrityError), transaction.atomic():
        EventMember.objects.create(event=event, user_id=user)


def test_subject_reference_stores_embedding_and_box():
    embedding = unit(1)
    reference = SubjectReference.objects.create(
        user_id=uuid.uuid4(),
        upload_key="users/u/references/r.jpg",
        status=SubjectReference.Status.READY,
        embedding=embedding,
        engine="insightface-buffalo_s",
        box={"x": 0.2, "y": 0.1, "w": 0.5, "h": 0.6},
    )
    stored = SubjectReference.objects.get(pk=reference.pk)
    assert np.allclose(stored.embedding, embedding, atol=1e-6)
    assert stored.box == {"x": 0.2, "y": 0.1, "w": 0.5, "h": 0.6}
    assert stored.status == "ready"


def test_photo_variant_and_cluster_round_trip():
    event = Event.objects.create(name="Gala")
    photo = make_photo(event)
    user = uuid.uuid4()
    PhotoVariant.objects.create(
        photo=photo,
        user_id=user,
        variant_version=1,
        key=f"events/{event.id}/photos/{photo.id}/v1/user_{user}.jpg",
        thumb_key=f"events/{event.id}/photos/{photo.id}/v1/user_{user}_thumb.jpg",
    )
    cluster = UnknownCluster.objects.create(event=event, centroid=unit(2), face_count=1)
    face = factories.face_row(photo, unit(3), unknown_cluster=cluster, similarity=0.42)

    stored = Photo.objects.get(pk=photo.pk)
    assert stored.blur_regions == [{"x": 0.1, "y": 0.2, "w": 0.3, "h": 0.4}]
    assert stored.variant_version == 0
    assert stored.processed_at is None
    assert [v.user_id for v in stored.variants.all()] == [user]
    assert list(cluster.faces.all()) == [face]
    assert Face.objects.get(pk=face.pk).landmarks[0] == [0.11, 0.22]
    assert event.faces.count() == 1
    assert "unpublished" in str(stored)


def test_cosine_distance_query_returns_the_nearest_face():
    event = Event.objects.create(name="Reunion")
    photo = make_photo(event)
    faces = [factories.face_row(photo, unit(seed)) for seed in (10, 11, 12)]
    query = np.asarray(faces[1].embedding) + np.random.default_rng(99).normal(scale=0.01, size=512)

    nearest = (
        Face.objects.filter(event=event)
        .annotate(distance=CosineDistance("embedding", query.tolist()))
        .order_by("distance")
        .first()
    )
    expected = 1 - np.dot(query, faces[1].embedding) / np.linalg.norm(query)
    assert nearest.pk == faces[1].pk
    assert nearest.distance == pytest.approx(expected, abs=1e-5)
