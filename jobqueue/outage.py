"""An outage is not the job's failure (docs/ARCHITECTURE.md §9, "Outages").

A try that fails because something it depends on cannot be reached (object storage down, answering with a
server error, timing out) says nothing about the job: its message goes back uncounted, as a preempted try's
does, and the reader waits the outage out. While it waits it probes the dependency with a doubling backoff
and reads privacy work only (a hide needs the database alone, jobqueue/privacy_lane.py); when the probe
answers it reads on, and the try runs again reusing the detection it had done. Each outage is one log line
when it begins, one when it ends and one Sentry event, however many messages meet it. /health and
queue_status say what the reader waits for and since when.

Apps register what they depend on (`register_dependency`): how to recognise its outage in an exception, and
how to probe it. A job's own error (undecodable media, a missing object, a bug) is no outage: it keeps its
three tries (jobqueue/outcome.py).
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from jobqueue import reporting
from jobqueue.errors import causes
from jobqueue.health import WorkerState

log = logging.getLogger("jobqueue.worker")


@dataclass(frozen=True)
class OutageProbe:
    # The first probe's delay: the reader reads on within seconds of storage's return.
    first_s: float = 1.0
    # Doubled after each failed probe up to this: one small write every few seconds, during an outage only, costs
    # nothing.
    max_s: float = 5.0


OUTAGE_PROBE = OutageProbe()


@dataclass(frozen=True)
class Dependency:
    name: str  # "storage": what /health and the log lines say the reader waits for
    recognises: Callable[[BaseException], bool]  # whether an exception is this dependency's outage
    probe: Callable[[], object]  # raises while the dependency is down


_dependencies: dict[str, Dependency] = {}


def register_dependency(name: str, recognises: Callable[[BaseException], bool], probe: Callable[[], object]) -> None:
    _dependencies[name] = Dependency(name, recognises, probe)


def dependency_down(error: BaseException) -> Dependency | None:
    """The dependency whose outage `error` is, looking through what caused it; None for a job's own error."""
    for cause in causes(error):
        for dependency in _dependencies.values():
            if dependency.recognises(cause):
                return dependency
    return None


class OutageWait:
    """The outage the reader waits out, if any: when it began, and when to probe next."""

    def __init__(
        self, state: WorkerState, on_change: Callable[[str | None], None], probing: OutageProbe = OUTAGE_PROBE
    ):
        self._state = state
        self._on_change = on_change  # told "storage since ..." when a wait begins, None when it ends
        self._probing = probing
        self.dependency: Dependency | None = None
        self._since = 0.0
        self._delay = probing.first_s
        self._next_probe = 0.0

    @property
    def active(self) -> bool:
        return self.dependency is not None

    @property
    def probe_in_s(self) -> float:
        """Seconds until the next probe (0 when there is no outage)."""
        return max(0.0, self._next_probe - time.monotonic()) if self.active else 0.0

    def begin(self, dependency: Dependency, error: BaseException, fields: dict) -> None:
        """A try met `dependency`'s outage: the wait begins (once per outage, however many tries meet it)."""
        if self.dependency is not None:
            return
        self.dependency, self._since = dependency, time.time()
        first_s = self._probing.first_s
        self._delay, self._next_probe = first_s, time.monotonic() + first_s
        summary = f"{type(error).__name__}: {error}"
        self._state.update(waiting_for=dependency.name, waiting_since=self._since)
        self._on_change(f"{dependency.name} since={time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime(self._since))}")
        log.warning("outage_begins", extra={**fields, "waiting_for": dependency.name, "error": summary})
        reporting.report_outage(error, dependency=dependency.name, context={**fields, "error": summary})

    def over(self) -> bool:
        """True when there is no outage, or its probe (when due) answers; the wait then ends."""
        if self.dependency is None:
            return True
        if time.monotonic() < self._next_probe:
            return False
        try:
            self.dependency.probe()
        except Exception as error:
            self._delay = min(self._delay * 2, self._probing.max_s)
            self._next_probe = time.monotonic() + self._delay
            log.info(
                "outage_probe",
                extra={"waiting_for": self.dependency.name, "error": str(error)[:200], "retry_s": self._delay},
            )
            return False
        log.info("outage_ends", extra={"waiting_for": self.dependency.name, "s": round(time.time() - self._since, 1)})
        self.dependency = None
        self._state.update(waiting_for=None, waiting_since=None)
        self._on_change(None)
        return True
