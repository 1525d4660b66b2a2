"""Privacy work stops the try in flight (jobqueue/privacy_lane.py, docs/ARCHITECTURE.md §4 "The privacy lane"): in
the loop, with the test handlers. The end-to-end cases, with clips through run_worker, are in
tests/test_privacy_lane.py."""

import threading
import time
import uuid

import pytest
from django.db import connection

from faces.models import Event
from jobqueue.heartbeat import Heartbeat
from tests.support import job_handlers
from tests.support.log_helpers import lines as log_lines
from tests.support.queue_helpers import archived, job, queue_rows, send

pytestmark = pytest.mark.usefixtures("live_db")


@pytest.fixture(autouse=True)
def fresh_calls():
    job_handlers.calls.clear()
    job_handlers.flaky_failures.clear()


class Watches:
    """The heartbeat's watches for privacy work (jobqueue/heartbeat.py, `_watch`), seen through a spy that calls the
    real one: `found_none` is set once a watch of the try in flight found nothing to stop for; `answers` holds
    (when, whether it asked the try to stop) for each watch, in order."""

    def __init__(self):
        self.found_none = threading.Event()
        self.answers: list[tuple[float, bool]] = []

    def after(self, at: float) -> list[bool]:
        """The answers of the watches that began after `at` (time.time())."""
        return [asked for began, asked in self.answers if began > at]


@pytest.fixture
def watches(monkeypatch):
    seen, real = Watches(), Heartbeat._watch

    def watch(heartbeat, job, reader_pid):
        began = time.time()
        asked = real(heartbeat, job, reader_pid)
        seen.answers.append((began, asked))
        if not asked:
            seen.found_none.set()
        return asked

    monkeypatch.setattr(Heartbeat, "_watch", watch)
    return seen


def send_once_watched(watches: Watches, message: dict, sent: dict) -> threading.Thread:
    """A thread (with its own connection) that sends `message` once the heartbeat has watched the try in flight
    and found nothing to stop for: the message comes in the middle of a try, under its watch."""

    def run():
        sent["watched"] = watches.found_none.wait(30)
        sent["at"] = time.time()
        send(message)
        sent["committed"] = time.time()
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_privacy_work_stops_a_long_try_which_runs_again_after_it_uncounted(fast_worker, caplog, watches):
    long_id, change_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=4))
    sent = {}
    sender = send_once_watched(watches, job("test_first", change_id), sent)
    fast_worker(drain=True).run()
    sender.join()
    assert sent["watched"]

    order = [(name, photo_id) for name, photo_id in job_handlers.calls if name != "test_flaky"]
    assert order == [("test_long", long_id), ("test_first", change_id), ("test_long", long_id)]
    preempted = log_lines(caplog, "job_preempted")
    assert len(preempted) == 1
    assert f"photo_id={long_id}" in preempted[0]
    assert "outcome=given_back" in preempted[0]
    done = log_lines(caplog, "job_done")
    assert "job=test_first" in done[0]
    assert f"photo_id={long_id}" in done[1]
    assert "try=1" in done[1], "a preempted read is no failed try"
    assert Event.objects.filter(name=f"long done {long_id} try=1").count() == 1
    assert queue_rows() == []
    assert archived() == {}


def test_the_privacy_job_is_done_within_a_second_of_its_send_while_a_20_s_try_runs(fast_worker, caplog, watches):
    long_id, change_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=20))
    sent = {}
    sender = send_once_watched(watches, job("test_first", change_id), sent)
    fast_worker(drain=True).run()
    sender.join()
    assert sent["watched"]
    done = next(r for r in caplog.records if r.getMessage() == "job_done" and getattr(r, "job", None) == "test_first")
    assert done.created - sent["at"] < 1.0, "the watch (every 0.25 s) and the try's next checkpoint (50 ms)"
    assert job_handlers.calls.index(("test_first", change_id)) == 1


def test_ordinary_work_does_not_stop_the_try_in_flight(fast_worker, caplog, watches):
    long_id, other_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=1.5))
    sent = {}
    sender = send_once_watched(watches, job("test_record", other_id), sent)
    fast_worker(drain=True).run()
    sender.join()
    assert sent["watched"]
    assert watches.after(sent["committed"]), "the try was watched after the send"
    assert not any(watches.after(sent["committed"])), "and never asked to stop"
    assert log_lines(caplog, "job_preempted") == []
    assert [name for name, _ in job_handlers.calls] == ["test_long", "test_record"]


def test_the_renders_a_hide_sends_first_do_not_stop_the_try_in_flight(fast_worker, caplog, watches):
    long_id, render_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=1.5))
    sent = {}
    sender = send_once_watched(watches, job("test_record", render_id, first=True), sent)
    fast_worker(drain=True).run()
    sender.join()
    assert sent["watched"]
    assert watches.after(sent["committed"]), "the try was watched after the send"
    assert not any(watches.after(sent["committed"])), "and never asked to stop"
    assert log_lines(caplog, "job_preempted") == []


def test_renders_sent_first_yield_to_an_ordinary_message_after_four_in_a_row(fast_worker):
    """A big event's re-renders take at most four reads in five while uploads wait (the privacy lane's
    renders_in_a_row)."""
    upload = str(uuid.uuid4())
    send(job("test_record", upload))
    renders = [str(uuid.uuid4()) for _ in range(6)]
    for render in renders:
        send(job("test_record", render, first=True))
    fast_worker(drain=True).run()
    assert [photo_id for _, photo_id in job_handlers.calls] == [*renders[:4], upload, *renders[4:]]
