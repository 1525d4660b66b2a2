"""A Do Not Publish change takes effect within seconds whatever the worker is in the middle of
(docs/ARCHITECTURE.md §4, "The privacy lane"): through `run_worker` as a real process, on real PostgreSQL,
filesystem storage and the buffalo_s engine.

Event A: a published photo (t1) showing guest G (its middle face), an ordinary member with a ready reference.
Event B: a 1080p clip of its DNP member (t1's leftmost face, walking) beside other guests. While the worker
detects or renders B's clip, G turns on Do Not Publish: A's photo is hidden within the window, the clip's try is
given back uncounted and publishes afterwards, blurred where it must be.
"""

import re
import signal
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from faces.models import EventMember, Photo
from momentlens.devservices.pixels import difference, face_core
from tests.support import factories
from tests.support.face_readings import unblurred_frames
from tests.support.publishing_helpers import read_image, run_worker_drain
from tests.support.queue_helpers import (
    STARTUP_S,
    archived,
    lock_taken,
    lock_waited,
    queue_rows,
    send,
    spawn_worker,
    worker_env,
)
from tests.support.video_samples import scene
from tests.support.waiting import wait_for

pytestmark = pytest.mark.usefixtures("live_db", "media_storage", "fast_retries", "test_thresholds")

# From the change's send until no photo it affects is public unblurred (the goal).
WINDOW_S = 5.0
G = 2  # t1's middle guest: no other face of t1 comes near their reference
LONG_S = 120.0  # how long the worker may take to reach a given point in a job
# Photos of orphans in storage: a full sweep of them takes the worker longer than the window.
SWEPT_PHOTOS = 8000


@pytest.fixture
def events(group, group_faces):
    """(A's photo, G, B's clip photo, B's clip script), all set up and A's photo published."""
    event_a, event_b = factories.event("A"), factories.event("B")
    guest = factories.member_with_reference(event_a, group, group_faces[G], dnp=False)
    factories.member_with_reference(event_b, group, group_faces[0])
    photo_a = factories.photo(event_a, group)
    send({"job": "face_process", "photo_id": str(photo_a.id)})
    run_worker_drain()
    photo_a.refresh_from_db()
    assert photo_a.processed_at is not None
    assert photo_a.public_key == photo_a.upload_key, "nothing to blur yet"
    clip = scene(group, group_faces, width=1920, height=1080, scale=1.0, dnp_at=lambda i: (200 + 8 * i, 300), count=75)
    photo_b = factories.photo(event_b, data=clip.data)
    return photo_a, guest, photo_b, clip


@pytest.fixture
def env(embedded_pg, tmp_path):
    return worker_env(embedded_pg, tmp_path)  # its files where media_storage reads them


def working_on(job: str) -> bool:
    """A reader's heartbeat names this job (it does once the job has run half a second; the name is cut at
    PostgreSQL's 63 characters, so only its start is matched)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s", [f"%heartbeat%job={job[:6]}%"]
        )
        return cursor.fetchone()[0] > 0


def turn_on_dnp(photo_a: Photo, guest) -> float:
    """The API's part: the member row, then one reprocess_event; when it was sent (monotonic)."""
    EventMember.objects.filter(event_id=photo_a.event_id, user_id=guest).update(do_not_publish=True)
    send({"job": "reprocess_event", "event_id": str(photo_a.event_id)})
    return time.monotonic()


def hidden(photo: Photo):
    """Hidden, or hidden and already published again, rendered anew (newer than `photo` as the test holds it): the
    render the hide sends can follow it within milliseconds, between two polls of a loaded machine."""

    def is_hidden() -> bool:
        now = Photo.objects.get(id=photo.id)
        return now.processed_at is None or now.variant_version > photo.variant_version

    return is_hidden


def assert_g_blurred_and_clip_published(photo_a: Photo, photo_b: Photo, clip, group) -> None:
    photo_a.refresh_from_db()
    assert photo_a.processed_at is not None, "A's photo is published again, rendered"
    theirs = sorted(photo_a.faces.all(), key=lambda face: face.box_x)[G]
    assert difference(face_core(read_image(photo_a.public_key), theirs), face_core(group, theirs)) > 15
    photo_b.refresh_from_db()
    assert photo_b.processed_at is not None
    assert photo_b.media_type == "video"
    assert unblurred_frames(photo_b, clip) == []


def test_a_change_during_a_clips_detection_is_applied_within_seconds(events, env, tmp_path, group):
    photo_a, guest, photo_b, clip = events
    send({"job": "face_process", "photo_id": str(photo_b.id)})
    log, looked = tmp_path / "worker.log", tmp_path / "first-look"
    # tests/support/worker_process.py touches the FIRST_LOOK_MARK file after each look at one of the clip's frames.
    worker = spawn_worker({**env, "FIRST_LOOK_MARK": str(looked)}, "--drain", log_path=log)
    second_log = tmp_path / "second.log"
    second = None
    try:
        wait_for(lambda: lock_taken(log), timeout=STARTUP_S)
        # Started while the first holds the lock, and found waiting before the first's drain ends: a second worker
        # whose start-up outlasted the clip would take the freed lock, and show nothing.
        second = spawn_worker(env, log_path=second_log)
        # The detector has looked at a frame of the clip: inside its detection (about 10 s on one core).
        wait_for(looked.exists, timeout=LONG_S)
        sent = turn_on_dnp(photo_a, guest)
        wait_for(hidden(photo_a), timeout=30)
        assert time.monotonic() - sent <= WINDOW_S
        wait_for(lambda: lock_waited(second_log), timeout=LONG_S)
        assert worker.wait(300) == 0
    finally:
        worker.kill()
    text = log.read_text()
    assert "event=job_preempted" in text
    assert re.search(r"job=reprocess_event outcome=completed .*hidden=1", text), "the change hid the photo first"
    assert f"try=1 photo_id={photo_b.id} job=face_process outcome=completed" in text, "the given-back read counts not"
    assert "outcome=failed_try" not in text
    assert queue_rows() == []
    assert archived() == {}
    assert_g_blurred_and_clip_published(photo_a, photo_b, clip, group)
    second.send_signal(signal.SIGTERM)
    assert second.wait(60) == 0
    assert "event=job_done" not in second_log.read_text(), "the second worker waited"


def test_a_change_during_a_clips_render_is_applied_within_seconds(events, env, tmp_path, group):
    photo_a, guest, photo_b, clip = events
    send({"job": "face_process", "photo_id": str(photo_b.id)})
    run_worker_drain()  # detected and published; its re-render below is a render alone
    Photo.objects.filter(id=photo_b.id).update(blur_regions=[{"x": 0.0, "y": 0.0, "w": 0.1, "h": 0.1}])
    send({"job": "reprocess", "photo_id": str(photo_b.id)})
    log = tmp_path / "worker.log"
    worker = spawn_worker(env, "--drain", log_path=log)
    try:
        wait_for(lambda: working_on("reprocess"), timeout=LONG_S, interval=0.02)
        sent = turn_on_dnp(photo_a, guest)
        wait_for(hidden(photo_a), timeout=30)
        assert time.monotonic() - sent <= WINDOW_S
        assert worker.wait(300) == 0
    finally:
        worker.kill()
    text = log.read_text()
    assert "event=job_preempted" in text
    assert re.search(r"job=reprocess_event outcome=completed .*hidden=1", text), "the change hid the photo first"
    assert f"try=1 photo_id={photo_b.id} job=reprocess outcome=completed" in text
    assert queue_rows() == []
    assert archived() == {}
    assert_g_blurred_and_clip_published(photo_a, photo_b, clip, group)
    photo_b.refresh_from_db()
    assert photo_b.blur_regions
    assert photo_b.render_plan["regions"] == photo_b.blur_regions


def test_a_worker_killed_mid_hide_loses_nothing(events, env, tmp_path, group):
    photo_a, guest, photo_b, clip = events
    send({"job": "face_process", "photo_id": str(photo_b.id)})
    log = tmp_path / "worker.log"
    worker = spawn_worker(env, "--drain", log_path=log)
    try:
        wait_for(lambda: working_on("face_process"), timeout=LONG_S)
        turn_on_dnp(photo_a, guest)
        wait_for(lambda: "event=job_preempted" in log.read_text(), timeout=LONG_S, interval=0.005)
        worker.send_signal(signal.SIGKILL)  # the hide has begun or is about to: either way, its try is lost
        worker.wait(30)
    finally:
        worker.kill()
    assert spawn_worker(env, "--drain", log_path=log).wait(300) == 0
    assert queue_rows() == []
    assert archived() == {}
    assert_g_blurred_and_clip_published(photo_a, photo_b, clip, group)


def orphans_in_storage(media: Path, photos: int) -> list[Path]:
    """`photos` photos' derived files that no row names, as a crash between commit and sweep, or a deleted event,
    leaves them: what the full sweep of storage deletes, one photo at a time."""
    event = uuid.uuid4()
    made = []
    for _ in range(photos):
        folder = media / "events" / str(event) / "photos" / str(uuid.uuid4()) / "v1"
        folder.mkdir(parents=True)
        for name in ("public.jpg", "public_thumb.jpg"):
            (folder / name).write_bytes(b"left behind")
            made.append(folder / name)
    return made


def test_a_change_while_the_worker_sweeps_storage_is_applied_within_seconds(group, group_faces, env, tmp_path):
    """The full sweep of storage runs when the queue is empty, first at the worker's start, and over a bucket of many
    photos it takes minutes. It stops for a message at its next photo and goes on once the queue is empty again: the
    change is applied within the window, and every orphan still goes."""
    event_a = factories.event("A")
    guest = factories.member_with_reference(event_a, group, group_faces[G], dnp=False)
    photo_a = factories.photo(event_a, group)
    send({"job": "face_process", "photo_id": str(photo_a.id)})
    run_worker_drain()
    photo_a.refresh_from_db()
    assert photo_a.processed_at is not None
    orphans = orphans_in_storage(tmp_path / "var" / "media", SWEPT_PHOTOS)
    log = tmp_path / "worker.log"
    worker = spawn_worker(env, log_path=log)
    try:
        wait_for(lambda: "event=sweep " in log.read_text(), timeout=LONG_S)
        sent = turn_on_dnp(photo_a, guest)
        wait_for(hidden(photo_a), timeout=LONG_S)
        assert time.monotonic() - sent <= WINDOW_S
        wait_for(lambda: "event=sweep_storage " in log.read_text(), timeout=LONG_S)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    assert not [path for path in orphans if path.exists()], "the sweep went on after the change"
    text = log.read_text()
    assert "event=sweep_storage_stopped" in text, "the sweep stopped for the change"
    assert re.search(r"job=reprocess_event outcome=completed .*hidden=1", text)
    assert text.index("job=reprocess_event") < text.index("event=sweep_storage "), "the change did not wait for it"
