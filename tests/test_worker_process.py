"""run_worker as a real process: crashes, a second worker, a killed connection, SIGTERM, Sentry."""

import gzip
import json
import signal
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from faces.models import Event
from tests.support.queue_helpers import (
    STARTUP_S,
    archived,
    done_by,
    in_handler,
    job,
    lock_waited,
    queue_rows,
    reader_lock_held,
    send,
    spawn_worker,
    terminate_reader_sessions,
    worker_env,
)
from tests.support.waiting import wait_for
from tests.support.worker_health import health

pytestmark = pytest.mark.usefixtures("live_db")


@pytest.fixture
def env(embedded_pg, tmp_path):
    return worker_env(embedded_pg, tmp_path)


def test_a_crash_counts_as_a_try_and_repeated_crashes_end_archived(env, tmp_path):
    log = tmp_path / "worker.log"
    survivor = send(job("test_crash", once_marker=str(tmp_path / "crashed-once")))
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == -signal.SIGKILL
    assert queue_rows() == [(survivor, 1)]
    # The next worker makes it visible again and reads it a second time.
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 0
    assert queue_rows() == []
    assert Event.objects.filter(name__startswith="survived").count() == 1
    assert f"msg_id={survivor} try=2" in log.read_text()

    killer = send(job("test_crash"))
    for expected_reads in (1, 2, 3):
        assert spawn_worker(env, "--drain", log_path=log).wait(60) == -signal.SIGKILL
        assert queue_rows() == [(killer, expected_reads)]
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 0
    assert archived() == {killer: (4, "crashed_worker")}


# Long enough that the first worker is still reading when the test kills it.
JOB_SECONDS = 0.4


def reading_then_second(env, tmp_path, jobs: int):
    """A first worker reading, a second one started and waiting for the lock, then the rest of `jobs` jobs of
    JOB_SECONDS sent: (first, second, its log). The rest is sent only once the second waits, so that the first is
    still reading however long the second took to start."""
    send(job("test_record", seconds=JOB_SECONDS))
    first = spawn_worker(env, log_path=tmp_path / "first.log")
    wait_for(lambda: done_by(first.pid) > 0, timeout=STARTUP_S)
    second_log = tmp_path / "second.log"
    second = spawn_worker(env, log_path=second_log)
    wait_for(lambda: lock_waited(second_log), timeout=STARTUP_S)
    for _ in range(jobs - 1):
        send(job("test_record", seconds=JOB_SECONDS))
    return first, second, second_log


def test_two_workers_one_reads_the_other_waits_then_takes_over(env, tmp_path):
    first, second, second_log = reading_then_second(env, tmp_path, jobs=40)
    try:
        wait_for(lambda: done_by(first.pid) > 1)
        assert done_by(second.pid) == 0
        assert "holder_backend_pid=" in second_log.read_text()

        first.send_signal(signal.SIGKILL)
        first.wait(30)
        killed_at = time.monotonic()
        wait_for(lambda: done_by(second.pid) > 0, timeout=15)
        took_over_s = time.monotonic() - killed_at
        wait_for(lambda: not queue_rows(), timeout=60)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    assert took_over_s < 5
    # Every job ran to completion exactly once, whoever ran it.
    assert Event.objects.filter(name__startswith="done ").count() == 40
    assert done_by(first.pid) + done_by(second.pid) == 40


def test_a_second_worker_on_the_same_machine_with_default_settings_waits(env, tmp_path):
    """Both want the same /health port: the second says so in one line and waits for the queue."""
    from momentlens.devservices.seaweedfs import free_port

    port = free_port()
    env = {**env, "WORKER_HEALTH_PORT": str(port)}
    first, second, second_log = reading_then_second(env, tmp_path, jobs=20)
    try:
        text = second_log.read_text()
        assert f"event=health_unavailable port={port}" in text
        assert "WORKER_HEALTH_PORT" in text
        assert f"event=worker_start pid={second.pid}" in text
        assert "Traceback" not in text
        assert second.poll() is None, "it waits, alive"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            assert json.loads(response.read())["phase"] == "running", "the first worker's /health"
    finally:
        for worker in (first, second):
            worker.send_signal(signal.SIGTERM)
        assert first.wait(30) == 0
        assert second.wait(30) == 0


def test_the_worker_survives_pg_terminate_backend_and_finishes_the_queue(env, tmp_path):
    total = 30
    for _ in range(total):  # 9 s of work: the cut lands while the worker still reads
        send(job("test_record", seconds=0.3))
    log = tmp_path / "worker.log"
    worker = spawn_worker(env, "--drain", log_path=log)
    wait_for(lambda: Event.objects.count() >= 5, timeout=STARTUP_S)
    assert terminate_reader_sessions() == [(True,)]
    assert worker.wait(120) == 0
    text = log.read_text()
    assert "event=db_lost" in text
    assert "event=db_recovered" in text
    assert queue_rows() == []
    assert archived() == {}
    assert Event.objects.filter(name__startswith="done ").count() == total


def get_status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def healthy(port: int) -> dict | None:
    status, body = health(port)
    return body if status == 200 and body.get("phase") == "running" else None


def test_health_is_200_again_once_a_restarted_database_is_back(tmp_path):
    """A real PostgreSQL stop and start under a running worker: /health says so while it is down, and is
    200 `running` again once the worker has its reader lock back (it once stayed 503 for good)."""
    from momentlens.devservices.postgres import EmbeddedPostgres
    from momentlens.devservices.seaweedfs import free_port

    server = EmbeddedPostgres(tmp_path / "pg" / "data").ensure_ready()
    port = free_port()
    log = tmp_path / "worker.log"
    worker = spawn_worker(worker_env(server, tmp_path), "--health-port", str(port), log_path=log)
    try:
        wait_for(lambda: healthy(port), 90)
        assert health(port, "HEAD")[0] == 200, "HEAD /health answers like GET, without a body"
        assert health(port)[1]["engine"] == {"engine": "insightface-buffalo_s", "provider": "CPUExecutionProvider"}
        server.stop()
        wait_for(lambda: health(port)[0] == 503, 30)
        server.start()
        wait_for(lambda: "event=db_recovered" in log.read_text(), 60)
        body = wait_for(lambda: healthy(port), 30)
        assert body["lock_held"] is True
        assert worker.poll() is None, "the worker lives on"
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        server.stop()


def test_sigterm_exits_zero_and_releases_the_lock(env, tmp_path):
    from momentlens.devservices.seaweedfs import free_port

    port = free_port()
    worker = spawn_worker(env, "--health-port", str(port), log_path=tmp_path / "worker.log")
    wait_for(lambda: get_status(port) == 200)
    assert reader_lock_held()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert not reader_lock_held()


def test_sigusr1_dumps_every_thread_where_it_waits_and_the_job_goes_on(spawn_workers):
    """An operator's look inside a worker that seems stuck: SIGUSR1 writes each thread's stack to stderr (the
    journal), the job in flight among them, and changes nothing: the job ends and the worker stops as ever. From
    its first moment: one still starting (Django and the engine loading) dumps too, where Python would end it."""
    worker, log = spawn_workers("worker")
    wait_for(lambda: catches(worker.pid, signal.SIGUSR1), interval=0.005)
    worker.send_signal(signal.SIGUSR1)
    msg_id = send(job("test_long", seconds=6.0))
    wait_for(lambda: in_handler(msg_id))  # a dump before the handler would hold no job frame
    worker.send_signal(signal.SIGUSR1)
    wait_for(lambda: "in long" in log.read_text())
    dump = log.read_text()
    assert dump.lower().count("thread 0x") >= 2, "every thread, not only the one the signal landed on"
    assert 'job_handlers.py", line' in dump
    assert dump.count("Current thread 0x") == 2, "the dump during start-up, and the one during the job"
    wait_for(lambda: Event.objects.filter(name__startswith="long done").exists(), 30)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def catches(pid: int, sig: signal.Signals) -> bool:
    """Whether process `pid` has a handler for `sig` now (/proc's SigCgt mask)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line.split()[1] for line in status if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (sig - 1) & 1)


def test_sigterm_while_the_worker_still_imports_exits_zero(env, tmp_path):
    """systemd may stop a worker it has just started: a SIGTERM before run_worker's own handlers (Django, numpy and
    the engine still loading) stops it before its loop with exit 0, as later (Python's default: killed, -15)."""
    log = tmp_path / "worker.log"
    worker = spawn_worker(env, log_path=log)
    wait_for(lambda: catches(worker.pid, signal.SIGTERM), interval=0.005)
    assert "event=worker_start" not in log.read_text(), "still starting"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    assert "outcome=stopped_before_the_loop" in log.read_text()
    assert not reader_lock_held()


def test_a_database_that_never_comes_back_ends_the_process_non_zero(embedded_pg, tmp_path):
    env = worker_env(
        embedded_pg,
        tmp_path,
        DATABASE_URL="postgresql://postgres:pw-must-not-leak-77@/postgres?host=/nonexistent-socket-dir",
        WORKER_DB_RECOVERY_S="1",
    )
    log = tmp_path / "worker.log"
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 1
    text = log.read_text()
    assert "event=worker_died" in text
    assert "event=db_unreachable" in text
    assert "pw-must-not-leak-77" not in text


def test_a_database_that_accepts_and_never_answers_ends_the_process_non_zero(spawn_workers):
    """A host (or pooler) that takes the connection and says nothing, as a hung one does: each try to connect ends
    at the URL's bound connect_timeout (momentlens.database_url.CONNECTION_DEFAULTS), and the worker exits past
    WORKER_DB_RECOVERY_S as for a refused one, where libpq's own default would wait for ever."""
    silent = socket.create_server(("127.0.0.1", 0), backlog=16)  # the kernel accepts; nothing reads or answers
    with silent:
        url = f"postgresql://postgres:pw@127.0.0.1:{silent.getsockname()[1]}/postgres"
        # Through the fixture that stops its worker: one left hanging by a failure here must not outlive the test.
        worker, log = spawn_workers("worker", "--drain", DATABASE_URL=url, WORKER_DB_RECOVERY_S="1")
        assert worker.wait(90) == 1
    text = log.read_text()
    assert "event=worker_died" in text
    assert "timeout expired" in text


class SentryIngest:
    """A loopback HTTP endpoint standing in for Sentry's ingest: it keeps every envelope item."""

    def __init__(self):
        self.items: list[dict] = []
        ingest = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                for line in body.splitlines():
                    try:
                        ingest.items.append(json.loads(line))
                    except ValueError:
                        pass
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def dsn(self) -> str:
        return f"http://publickey@127.0.0.1:{self.server.server_address[1]}/1"

    def events(self) -> list[dict]:
        return [item for item in self.items if "contexts" in item]


def test_a_final_failure_reaches_sentry_with_its_context(embedded_pg, tmp_path):
    ingest = SentryIngest()
    env = worker_env(embedded_pg, tmp_path, SENTRY_DSN=ingest.dsn)
    payload = job("test_fail")
    msg_id = send(payload)
    try:
        assert spawn_worker(env, "--drain", log_path=tmp_path / "worker.log").wait(60) == 0
        events = wait_for(ingest.events, timeout=10)
    finally:
        ingest.server.shutdown()
    assert len(events) == 1
    context = events[0]["contexts"]["job"]
    assert context["msg_id"] == msg_id
    assert context["job"] == "test_fail"
    assert context["tries"] == 3
    assert context["photo_id"] == payload["photo_id"]
    assert events[0]["tags"]["job"] == "test_fail"
    assert "RuntimeError" in json.dumps(events[0]["exception"])
