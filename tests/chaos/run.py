"""A chaos run from start to end: services up, seed, drain under faults, the workers' sweeps, the invariants."""

import time
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.config import ChaosConfig
from tests.chaos.faults import change_dnp, dnp_change_due, fault_plan, held_by_the_change, inject
from tests.chaos.invariants import check_invariants
from tests.chaos.monitors import start_monitors, stop_monitors
from tests.chaos.queue import archived_count, queue_length, resend_from_archive
from tests.chaos.report import Report
from tests.chaos.seed import seed
from tests.chaos.state import Chaos
from tests.chaos.storage import orphan_keys, storage_snapshot
from tests.chaos.sweeps import finish_sweeps

# After the drain the workers get their full-sweep interval plus this to leave no orphan.
SWEEP_MARGIN_S = 20.0
# Archived messages an operator sends again (requeue_archived), once that many are archived.
RESENT = 3


@dataclass
class Drain:
    """The faults still to inject and when the next one is due; the DNP change once fewer are left than
    `change_when_left`; whether archived messages were sent again."""

    plan: list[str]
    next_fault: float
    change_when_left: int
    resent: bool = False


def run_chaos(config: ChaosConfig, folder: Path) -> Report:
    chaos = Chaos.create(config, folder)
    chaos.services.start()
    try:
        chaos.services.configure_django()
        chaos.seeded = seed(chaos.services, chaos.rng, config.events, config.photos_per_event)
        chaos.report.jobs = chaos.seeded.jobs
        drain_under_faults(chaos)
        finish_sweeps(chaos)
        await_worker_sweeps(chaos)
        chaos.fleet.stop()
        stop_monitors(chaos)
        chaos.report.notes += chaos.fleet.unexpected_exits
        check_invariants(chaos)
    finally:
        chaos.watch.stop.set()
        chaos.fleet.kill_all()
        for run in chaos.faults.sweeps:
            if run.process.poll() is None:
                run.process.kill()
        chaos.services.stop()
    return chaos.report


def drain_under_faults(chaos: Chaos) -> None:
    """The readers drain the queue while the faults are injected at random gaps; the DNP change halfway; a few
    archived messages sent again. Done when the plan is spent and the queue stays empty."""
    plan = fault_plan(chaos)
    drain = Drain(plan, time.monotonic() + chaos.rng.uniform(*chaos.config.fault_gap_s), len(plan) // 2)
    chaos.fleet.start_readers(chaos.config.readers)
    start_monitors(chaos)
    deadline = time.monotonic() + chaos.config.timeout_s
    while time.monotonic() < deadline:
        drain_step(chaos, drain)
        if drained(chaos, drain):
            return
        time.sleep(0.2)
    chaos.report.drain_timed_out = True


def drain_step(chaos: Chaos, drain: Drain) -> None:
    chaos.fleet.restart_if_dead()
    if drain.plan and time.monotonic() >= drain.next_fault and not held_by_the_change(chaos, drain.plan[0]):
        inject(chaos, drain.plan.pop(0))
        drain.next_fault = time.monotonic() + chaos.rng.uniform(*chaos.config.fault_gap_s)
    if dnp_change_due(chaos, len(drain.plan) <= drain.change_when_left):
        change_dnp(chaos)
    if not drain.resent and archived_count(chaos.services) >= RESENT:
        chaos.report.resent_from_archive = resend_from_archive(chaos.services, RESENT)
        drain.resent = True


def drained(chaos: Chaos, drain: Drain) -> bool:
    """The plan spent, the DNP change made, archived messages sent again (or too few to), and the queue empty.

    An empty queue stays empty: a message in flight is still in it (hidden), and whatever its handler enqueues
    (reprocess_event, say) commits in the transaction that deletes it (jobqueue/enqueue.py)."""
    change = chaos.seeded.dnp_change
    if drain.plan or (change is not None and change.sent_at is None) or queue_length(chaos.services) != 0:
        return False
    return drain.resent or archived_count(chaos.services) < RESENT


def await_worker_sweeps(chaos: Chaos) -> None:
    """The queue is drained: give the idle workers their full-sweep interval (and a margin) to leave no orphan."""
    started = time.monotonic()
    deadline = started + chaos.config.full_sweep_s + SWEEP_MARGIN_S
    while time.monotonic() < deadline:
        chaos.fleet.restart_if_dead()
        try:
            if not orphan_keys(storage_snapshot(chaos.services, attempts=1)):
                break
        except Exception:
            pass  # the database or S3 is not back yet
        time.sleep(chaos.config.sample_s)
    chaos.report.final_wait_s = time.monotonic() - started
