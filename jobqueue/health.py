"""The /health endpoint, on a side thread: the worker's only HTTP surface."""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jobqueue import registry


@dataclass
class WorkerState:
    """What the loop tells /health. Written by the loop thread, read by the server thread."""

    phase: str = "starting"  # starting (loading) -> waiting_for_lock -> running -> stopped
    lock_held: bool = False
    # The reader slot held (0..slots-1) and what runs in it now ("msg=7 job=face_process").
    slot: int | None = None
    slots: int = 1
    working_on: str | None = None
    queue_length: int | None = None
    last_job_at: float | None = None
    jobs_done: int = 0
    # Tries stopped for privacy work (jobqueue/privacy_lane.py), and when the last one was.
    preemptions: int = 0
    last_preemption_at: float | None = None
    # The dependency whose outage the reader waits out (jobqueue/outage.py), and since when.
    waiting_for: str | None = None
    waiting_since: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, **changes) -> None:
        with self._lock:
            for name, value in changes.items():
                setattr(self, name, value)

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "status": "ok"
                if self.healthy
                else f"waiting_for_{self.waiting_for}"
                if self.waiting_for
                else self.phase,
                "phase": self.phase,
                "lock_held": self.lock_held,
                "slot": self.slot,
                "slots": self.slots,
                "working_on": self.working_on,
                "queue_length": self.queue_length,
                "last_job_age_s": _age(self.last_job_at),
                "jobs_done": self.jobs_done,
                "preemptions": self.preemptions,
                "last_preemption_age_s": _age(self.last_preemption_at),
                "waiting_for": self.waiting_for,
                "waiting_for_s": _age(self.waiting_since),
                **registry.health_fields(),
            }

    @property
    def healthy(self) -> bool:
        return self.phase == "running" and self.lock_held and self.waiting_for is None


def _age(at: float | None) -> float | None:
    return None if at is None else round(time.time() - at, 1)


class HealthServer:
    def __init__(self, state: WorkerState, port: int, host: str = "127.0.0.1"):
        self.state = state
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> "HealthServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self):
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = self._answer()
                if body is not None:
                    self.wfile.write(body)

            def do_HEAD(self):
                """The status alone (monitors and load balancers check with HEAD)."""
                self._answer()

            def _answer(self) -> bytes | None:
                if self.path.split("?")[0] != "/health":
                    self.send_error(404)
                    return None
                body = json.dumps(state.snapshot()).encode()
                self.send_response(200 if state.healthy else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return body

            def log_message(self, format, *args):
                # nginx pings every few seconds; those lines would drown the job log.
                pass

        return Handler
