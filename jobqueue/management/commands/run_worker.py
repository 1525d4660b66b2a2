"""`python manage.py run_worker`: the pgmq consumer, run by systemd (docs/ARCHITECTURE.md §4)."""

import logging
import os
import signal
import sys
import time

from django.conf import settings
from django.core import checks
from django.core.management.base import BaseCommand

from jobqueue import registry, reporting
from jobqueue.checks import WORKER_START
from jobqueue.cli import EARLY_STOP
from jobqueue.health import HealthServer, WorkerState
from jobqueue.worker import StopNow, Worker, WorkerConfig, WorkerDied

log = logging.getLogger("jobqueue.worker")


class Command(BaseCommand):
    help = "Consume the pgmq queue `jobs` until stopped (SIGTERM/SIGINT exit 0; a dead loop exits 1)."

    def add_arguments(self, parser):
        parser.add_argument("--drain", action="store_true", help="exit 0 once the queue is empty")
        parser.add_argument("--once", action="store_true", help="handle at most one message, then exit")
        parser.add_argument("--health-port", type=int, default=None, help="port of /health (0: none)")

    def handle(self, *args, drain=False, once=False, health_port=None, **options):
        reporting.init_sentry(settings.SENTRY_DSN)
        log.info("worker_start", extra={"pid": os.getpid(), "drain": drain, "once": once})
        state = WorkerState()
        port = settings.WORKER_HEALTH_PORT if health_port is None else health_port
        health = start_health(state, port) if port else None
        worker = Worker(WorkerConfig.from_settings(), state, drain=drain, once=once)
        previous = {
            sig: signal.signal(sig, lambda *_: worker.request_stop()) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            if EARLY_STOP.is_set():
                raise StopNow
            start_checks()
            worker.run(run_startup_work())
        except WorkerDied as died:
            log.error("worker_died", extra={"error": str(died).strip().splitlines()[0]})
            sys.exit(1)
        except StopNow:  # a signal before the handlers above, or a second one during the checks or the engine's build
            log.warning("worker_abandon", extra={"outcome": "stopped_before_the_loop"})
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if health:
                health.stop()
            reporting.flush()


def start_health(state: WorkerState, port: int) -> HealthServer | None:
    """/health on `port`; a port that cannot be used (another worker on this machine has it) is one log
    line, and the worker goes on without /health: taking the queue matters more than reporting on it."""
    try:
        return HealthServer(state, port).start()
    except OSError as error:
        log.warning(
            "health_unavailable",
            extra={"port": port, "error": f"{type(error).__name__}: {error}", "fix": "set WORKER_HEALTH_PORT"},
        )
        return None


def start_checks() -> None:
    """The checks tagged worker_start (the apps register them: the faces app's check its models and
    thresholds), in this process before the loop. An Error stops the worker (exit 1); a Warning is logged."""
    for message in checks.run_checks(tags=[WORKER_START], include_deployment_checks=True):
        if message.is_serious():
            log.error("worker_died", extra={"check": message.obj, "error": message.msg, "fix": message.hint})
            sys.exit(1)
        if message.level >= checks.WARNING:
            log.warning("check_warning", extra={"check": message.obj, "detail": message.msg, "fix": message.hint})


def run_startup_work() -> dict[str, object]:
    """The apps' startup work (registry.register_startup), in this process, once, after the checks passed
    and before the loop: what each built, by name, for the jobs' contexts. One that fails stops the worker
    (exit 1) with one line saying which and why."""
    resources = {}
    for name, work in registry.startup_work():
        started = time.monotonic()
        try:
            resources[name] = work()
        except Exception as error:  # any failure: the worker must not read without what its start built
            log.error("worker_died", extra={"startup": name, "error": f"{type(error).__name__}: {error}"})
            sys.exit(1)
        log.info("startup_done", extra={"startup": name, "ms": round((time.monotonic() - started) * 1000)})
    return resources
