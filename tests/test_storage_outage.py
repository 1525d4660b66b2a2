"""Storage down for minutes is waited out, not counted against the jobs (docs/ARCHITECTURE.md §9, "Outages").

The real SeaweedFS S3 server is stopped under a queue of stills and a clip, with the worker running (its own loop,
in this process, its /health on a loopback port); a thread watches /health, and starts the server again.
"""

import threading
import time
import uuid

import botocore.exceptions
import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from faces.models import EventMember, Photo
from faces.publication import probe_storage, storage_down, storage_unusable
from jobqueue import reporting
from momentlens.devservices import samples
from momentlens.devservices.pixels import difference, face_core
from momentlens.storage import PROBE_TIMEOUTS, STORAGE_TIMEOUTS
from tests.support import factories
from tests.support.media_samples import faceless_then, video
from tests.support.ports import free_port
from tests.support.publishing_helpers import read_image, run_worker_drain
from tests.support.queue_helpers import archived, queue_rows, send
from tests.support.waiting import poll
from tests.support.worker_health import health

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries", "test_thresholds")

OUTAGE_S = 120
# The server's secret while it refuses the worker's keys (revoked, mistyped).
ROTATED_SECRET = "a-rotated-secret"


class Outage(threading.Thread):
    """Keeps the S3 server stopped for `seconds` (from now), then starts it again; meanwhile reads /health once
    the worker says it waits, and runs `during` (a check made while storage is down). `refusing_keys`: the server
    runs meanwhile, refusing the worker's keys, as storage does once they are revoked or mistyped."""

    def __init__(self, seaweed, seconds: float, port: int, during=None, *, refusing_keys: bool = False):
        super().__init__(daemon=True)
        self.seaweed, self.seconds, self.port, self.during = seaweed, seconds, port, during
        self.health: tuple[int, dict] = (0, {})
        self.failure: BaseException | None = None
        self.back_at = 0.0
        self.workers_secret = seaweed.secret_key
        seaweed.stop()
        if refusing_keys:
            restarted_with(seaweed, ROTATED_SECRET)
        self.began = time.monotonic()

    def run(self) -> None:
        from django.db import connection

        try:
            poll(lambda: health(self.port)[1].get("waiting_for") == "storage", timeout=self.seconds, interval=0.2)
            self.health = health(self.port)
            if self.during is not None:
                self.during()
        except BaseException as error:
            self.failure = error
        finally:
            connection.close()
            time.sleep(max(0.0, self.began + self.seconds - time.monotonic()))
            restarted_with(self.seaweed, self.workers_secret)
            self.back_at = time.monotonic()


def restarted_with(seaweed, secret_key: str) -> None:
    """The S3 server (stopped or not) running again, accepting `secret_key` alone."""
    seaweed.stop()
    seaweed.secret_key = secret_key
    seaweed.start()


@pytest.fixture
def reports(monkeypatch) -> dict:
    """What the worker sends Sentry, by kind (the real transport: tests/test_worker_process.py)."""
    sent = {"outage": [], "final": []}
    monkeypatch.setattr(reporting, "report_outage", lambda error, **kw: sent["outage"].append(kw))
    monkeypatch.setattr(reporting, "report_final_failure", lambda error, **kw: sent["final"].append(kw))
    return sent


def drained_through(outage: Outage, port: int) -> float:
    """The queue drained by the worker (its /health on `port`) while `outage` runs its course; when it ended."""
    from django.core.management import call_command

    outage.start()
    call_command("run_worker", "--drain", "--health-port", str(port))
    drained_at = time.monotonic()
    outage.join(outage.seconds + 30)
    assert outage.failure is None, outage.failure
    return drained_at


def test_two_minutes_without_storage_archive_nothing_and_everything_is_published_after(
    seaweed, group, group_faces, reports
):
    event = factories.event()
    factories.member_with_reference(event, group, group_faces[0])  # a DNP guest: every photo is rendered
    pictures = [group, samples.recolour(group, hue_shift=4, gain=1.05), samples.tom_hanks()]
    photos = [factories.photo(event, picture) for picture in pictures]
    small = np.ascontiguousarray(group[::2, ::2])
    photos.append(factories.photo(event, data=video(faceless_then(small, 6), ".mp4")))
    for photo in photos:
        send({"job": "face_process", "photo_id": str(photo.id)})
    port = free_port()

    outage = Outage(seaweed, OUTAGE_S, port)
    drained_at = drained_through(outage, port)

    status, body = outage.health
    assert status == 503
    assert (body["status"], body["waiting_for"]) == ("waiting_for_storage", "storage")
    assert body["waiting_for_s"] is not None
    assert archived() == {}, "an outage is no failed try"
    assert queue_rows() == []
    assert all(Photo.objects.get(id=photo.id).processed_at is not None for photo in photos)
    assert len(reports["outage"]) == 1, "one Sentry event for the outage, not one per message"
    assert reports["final"] == []
    assert drained_at - outage.back_at < 60, "work resumes by itself once storage answers"


def test_a_dnp_change_hides_during_the_outage_and_renders_once_storage_is_back(seaweed, group, group_faces, reports):
    event = factories.event()
    guest = factories.member_with_reference(event, group, group_faces[0], dnp=False)
    photo = factories.photo(event, group)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    assert photo.public_key == photo.upload_key, "published as it was: nobody asked"
    EventMember.objects.filter(event=event, user_id=guest).update(do_not_publish=True)
    send({"job": "reprocess_event", "event_id": str(event.id)})
    hidden = []

    def hidden_while_storage_is_down():
        hidden.append(Photo.objects.get(id=photo.id).processed_at is None)

    port = free_port()
    drained_through(Outage(seaweed, 20, port, during=hidden_while_storage_is_down), port)

    assert hidden == [True], "the hide needs the database alone"
    photo.refresh_from_db()
    assert photo.processed_at is not None
    guest_face = min(photo.faces.all(), key=lambda face: face.box_x)
    public, upload = read_image(photo.public_key), read_image(photo.upload_key)
    assert difference(face_core(public, guest_face), face_core(upload, guest_face)) > 10, "blurred once back"
    assert archived() == {}


def test_storage_refusing_the_workers_keys_is_waited_out_and_archives_nothing(seaweed, group, reports):
    """Revoked or mistyped keys are no job's fault and every job would fail alike: a refusal that the probe meets too
    is waited out as an outage (faces.publication.storage_unusable), not three failed tries and an archive per job."""
    event = factories.event()
    photos = [factories.photo(event, picture) for picture in (group, samples.tom_hanks())]
    for photo in photos:
        send({"job": "face_process", "photo_id": str(photo.id)})
    port = free_port()

    outage = Outage(seaweed, 20, port, refusing_keys=True)
    drained_through(outage, port)

    status, body = outage.health
    assert (status, body["waiting_for"]) == (503, "storage")
    assert archived() == {}, "the worker's keys refused: no job's failed try"
    assert all(Photo.objects.get(id=photo.id).processed_at is not None for photo in photos)
    assert len(reports["outage"]) == 1
    assert reports["final"] == []


def test_a_refusal_of_one_object_while_the_probe_is_answered_stays_the_jobs_failure(seaweed):
    """A HEAD (a read's first request) refused gets a bare 403: only the probe tells a refused object from refused
    keys."""
    refused = botocore.exceptions.ClientError(
        {"Error": {"Code": "403", "Message": "Forbidden"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "HeadObject"
    )
    assert not storage_down(refused), "no outage by itself"
    assert not storage_unusable(refused), "the probe is answered: the object's refusal is the job's"
    workers_secret = seaweed.secret_key
    restarted_with(seaweed, ROTATED_SECRET)
    try:
        assert storage_unusable(refused), "the probe is refused too: storage refuses the worker"
    finally:
        restarted_with(seaweed, workers_secret)


def test_a_storage_that_hangs_is_an_outage_known_within_seconds(seaweed):
    """SeaweedFS stopped by SIGSTOP takes connections and answers nothing, as a storage that hangs does. The outage
    probe gives up within seconds (between two probes the reader reads privacy work), and any other call within its
    timeouts, both as an outage: botocore's defaults let one call wait minutes."""
    seaweed.hang()
    try:
        for call, timeouts in ((probe_storage, PROBE_TIMEOUTS), (save_a_file, STORAGE_TIMEOUTS)):
            started = time.monotonic()
            with pytest.raises(botocore.exceptions.BotoCoreError) as raised:
                call()
            # Each attempt: connect, wait up to a second for `100 Continue`, read.
            assert time.monotonic() - started < timeouts.attempts * (timeouts.connect_s + 1 + timeouts.read_s) + 1
            assert storage_down(raised.value), raised.value
    finally:
        seaweed.answer_again()
    save_a_file()


def save_a_file() -> None:
    default_storage.save(f"hang/{uuid.uuid4()}.txt", ContentFile(b"a file"))
