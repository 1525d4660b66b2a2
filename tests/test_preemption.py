"""Privacy work stops the try in flight (jobqueue/preemption.py, docs/ARCHITECTURE.md §4 "The privacy lane"): in
the loop, with the test handlers. The end-to-end cases, with clips through run_worker, are in
tests/test_privacy_lane.py."""

import threading
import time
import uuid

import pytest
from django.db import connection

from faces.models import Event
from tests.support import job_handlers
from tests.support.log_helpers import lines as log_lines
from tests.support.queue_helpers import archived, job, queue_rows, send
from tests.support.waiting import poll

pytestmark = pytest.mark.usefixtures("live_db")


@pytest.fixture(autouse=True)
def fresh_calls():
    job_handlers.calls.clear()
    job_handlers.flaky_failures.clear()


def send_once_running(photo_id: str, message: dict, sent: dict, after_s: float = 0.5) -> threading.Thread:
    """A thread (with its own connection) that sends `message` once the handler runs on `photo_id`."""

    def run():
        poll(lambda: any(called == photo_id for _, called in job_handlers.calls), timeout=30, interval=0.02)
        time.sleep(after_s)
        sent["at"] = time.time()
        send(message)
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_privacy_work_stops_a_long_try_which_runs_again_after_it_uncounted(fast_worker, caplog):
    long_id, change_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=4))
    sent = {}
    sender = send_once_running(long_id, job("test_first", change_id), sent)
    fast_worker(drain=True).run()
    sender.join()

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


def test_the_privacy_job_is_done_within_a_second_of_its_send_while_a_20_s_try_runs(fast_worker, caplog):
    long_id, change_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=20))
    sent = {}
    sender = send_once_running(long_id, job("test_first", change_id), sent, after_s=1.0)
    fast_worker(drain=True).run()
    sender.join()
    done = next(r for r in caplog.records if r.getMessage() == "job_done" and getattr(r, "job", None) == "test_first")
    assert done.created - sent["at"] < 1.0, "the watch (every 0.25 s) and the try's next checkpoint (50 ms)"
    assert job_handlers.calls.index(("test_first", change_id)) == 1


def test_ordinary_work_does_not_stop_the_try_in_flight(fast_worker, caplog):
    long_id, other_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=1.5))
    sender = send_once_running(long_id, job("test_record", other_id), {})
    fast_worker(drain=True).run()
    sender.join()
    assert log_lines(caplog, "job_preempted") == []
    assert [name for name, _ in job_handlers.calls] == ["test_long", "test_record"]


def test_the_renders_a_hide_sends_first_do_not_stop_the_try_in_flight(fast_worker, caplog):
    long_id, render_id = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_long", long_id, seconds=1.5))
    sender = send_once_running(long_id, job("test_record", render_id, first=True), {})
    fast_worker(drain=True).run()
    sender.join()
    assert log_lines(caplog, "job_preempted") == []


def test_renders_sent_first_yield_to_an_ordinary_message_after_four_in_a_row(fast_worker):
    """A big event's re-renders take at most four reads in five while uploads wait (RENDERS_IN_A_ROW)."""
    upload = str(uuid.uuid4())
    send(job("test_record", upload))
    renders = [str(uuid.uuid4()) for _ in range(6)]
    for render in renders:
        send(job("test_record", render, first=True))
    fast_worker(drain=True).run()
    assert [photo_id for _, photo_id in job_handlers.calls] == [*renders[:4], upload, *renders[4:]]
