"""The worker processes: `manage.py run_worker` as systemd runs it, restarted when one exits."""

import signal
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.services import Services
from tests.support.log_helpers import parse
from tests.support.waiting import poll

# How long a worker just started may take to reach its own code (its first log line) before the run's SIGTERM.
STARTING_S = 30.0


@dataclass
class WorkerProcess:
    process: object  # subprocess.Popen
    log: Path
    expected_exit: str | None = None  # "kill" or "term" once the harness acts on it

    @property
    def name(self) -> str:
        return self.log.name

    def alive(self) -> bool:
        return self.process.poll() is None

    def started(self) -> bool:
        """Exited, or running its own code: it logged a line."""
        return not self.alive() or self.log.stat().st_size > 0

    def reading(self) -> bool:
        """Alive and holding its reader slot: its last `queue_lock outcome=taken` comes after its last `db_lost`."""
        if not self.alive():
            return False
        events = [
            (fields.get("event"), fields.get("outcome"))
            for fields in map(parse, self.log.read_text(errors="replace").splitlines())
            if fields.get("event") in ("queue_lock", "db_lost")
        ]
        return bool(events) and events[-1] == ("queue_lock", "taken")

    def lock_backend(self) -> int | None:
        """The backend pid of its reader slot (its last `queue_lock outcome=taken`), which its heartbeat names."""
        taken = [
            fields["backend_pid"]
            for fields in map(parse, self.log.read_text(errors="replace").splitlines())
            if fields.get("event") == "queue_lock" and fields.get("outcome") == "taken"
        ]
        return int(taken[-1]) if taken else None

    def terminate(self) -> None:
        self.expected_exit = "term"
        self.process.send_signal(signal.SIGTERM)


@dataclass
class Fleet:
    """Every worker started, the readers now (one per reader slot of the run), and exits the harness did not cause."""

    services: Services
    workers: list[WorkerProcess] = field(default_factory=list)
    readers: list[WorkerProcess] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)

    def start_worker(self) -> WorkerProcess:
        log = self.services.folder / f"worker-{len(self.workers) + 1}.log"
        worker = WorkerProcess(self.services.manage(log, "run_worker", "--health-port", "0"), log)
        self.workers.append(worker)
        return worker

    def start_readers(self, count: int) -> None:
        self.readers = [self.start_worker() for _ in range(count)]

    def replace(self, gone: WorkerProcess) -> None:
        self.readers = [self.start_worker() if reader is gone else reader for reader in self.readers]

    def restart_if_dead(self) -> None:
        """Each reader that exited is replaced by a new worker (systemd's part)."""
        for worker in self.workers:
            code = worker.process.poll()
            if code is not None and worker.expected_exit is None:
                worker.expected_exit = f"unexpected exit {code}"
                self.unexpected_exits.append(f"{worker.name} exited {code} on its own")
        self.readers = [reader if reader.alive() else self.start_worker() for reader in self.readers]

    def stop(self) -> None:
        """SIGTERM to each worker still running, once (a second worker the faults stopped already has its own, and may
        still be exiting: systemd signals once too): each signalled worker must exit 0. One started just now (a reader
        replaced at the run's end) is first let reach its own code: before that the interpreter itself is starting,
        whose death by SIGTERM systemd counts as a clean stop (run_worker catches it from its first import:
        jobqueue.cli.EARLY_STOP)."""
        for worker in self.workers:
            poll(worker.started, timeout=STARTING_S)
            if worker.alive() and worker.expected_exit is None:
                worker.terminate()
            if worker.expected_exit == "term":
                code = worker.process.wait(120)
                if code != 0:
                    self.unexpected_exits.append(f"{worker.name} exited {code} on SIGTERM")

    def kill_all(self) -> None:
        for worker in self.workers:
            if worker.alive():
                worker.process.kill()
