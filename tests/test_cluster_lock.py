"""An event's Unknown clusters are read and written under its lock (docs/ARCHITECTURE.md §6, "Clustering").

Two readers run face_process at once on two photos of one unknown person, each in its own thread,
connection and transaction. Each thread, once it has read the event's clusters, waits until the other
has read them too, or is waiting for the event's cluster lock: the interleaving where both read
"no cluster yet" before either writes happens whenever nothing stops it.
"""

import dataclasses
import threading

import cv2
import pytest

from faces import people, thresholds
from faces.detection import detect_and_store
from faces.engines import resident_engine
from faces.models import Face, UnknownCluster
from momentlens.devservices import samples
from tests.conftest import ENGINE
from tests.support import factories
from tests.support.queue_helpers import waiting_for_lock
from tests.support.readers import face_process_in_threads
from tests.support.waiting import poll

pytestmark = pytest.mark.usefixtures("live_db", "media_storage", "test_thresholds")


def two_photos_of_one_unknown_person():
    """Two uploads of one face, nobody in the event: its faces are detected (committed), not yet clustered."""
    tom = samples.tom_hanks()
    smaller = cv2.resize(tom, None, fx=0.8, fy=0.8, interpolation=cv2.INTER_AREA)
    other = samples.recolour(smaller, hue_shift=4, gain=1.05)
    event = factories.event()
    photos = []
    for image in (tom, other):
        photo = factories.photo(event, image)
        assert len(detect_and_store(photo, factories.still_of(image), resident_engine())) == 1
        photos.append(photo)
    return event, photos


def face_process_at_once(photos, monkeypatch) -> list[bool]:
    """Each photo's face_process in its own thread and transaction; whether each thread saw the other
    read, or wait for the lock, before it wrote."""
    real_nearest = people.nearest_cluster
    mine = threading.local()
    read = [threading.Event() for _ in photos]
    saw_the_other = [False] * len(photos)

    def nearest_then_wait(event_id, embedding):
        found = real_nearest(event_id, embedding)
        read[mine.index].set()
        other = read[1 - mine.index]
        saw_the_other[mine.index] = poll(
            lambda: other.is_set() or waiting_for_lock(people.CLUSTER_LOCK), timeout=20, interval=0.01
        )
        return found

    monkeypatch.setattr(people, "nearest_cluster", nearest_then_wait)

    face_process_in_threads(photos, mine)
    return saw_the_other


def test_two_readers_clustering_one_unknown_person_at_once_make_one_cluster_of_two(monkeypatch):
    event, photos = two_photos_of_one_unknown_person()
    assert face_process_at_once(photos, monkeypatch) == [True, True]

    clusters = list(UnknownCluster.objects.filter(event=event))
    assert [cluster.face_count for cluster in clusters] == [1 + 1], "one person, one cluster of two faces"
    assert set(Face.objects.filter(event=event).values_list("unknown_cluster_id", flat=True)) == {clusters[0].id}


def test_without_the_lock_the_same_interleaving_splits_the_person(monkeypatch, test_thresholds):
    """Not vacuous: with the lock taken out, both read "no cluster yet" and each starts one. Merging is off here:
    without the lock, a merge that mends the split would race the other reader's writes to the same rows."""
    monkeypatch.setattr(people, "lock_event_clusters", lambda event_id: None)
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, cluster_merge=None))
    event, photos = two_photos_of_one_unknown_person()
    assert face_process_at_once(photos, monkeypatch) == [True, True]

    clusters = UnknownCluster.objects.filter(event=event)
    assert sorted(clusters.values_list("face_count", flat=True)) == [1, 1], "split into two Unknown clusters"
