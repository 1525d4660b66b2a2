"""`manage.py sweep_orphans` as an operator runs it, alongside the workers, while one is mid-job."""

import subprocess
import time

from tests.chaos.queue import event_in_flight, worker_holds_a_photo
from tests.chaos.state import Chaos, SweepRun
from tests.support.log_helpers import parse
from tests.support.waiting import poll


def sweep_until(chaos: Chaos, until: float) -> None:
    """Runs back to back until `until`."""
    while not chaos.watch.stop.is_set():
        run = start_sweep(chaos)
        try:
            run.process.wait(180)
        except subprocess.TimeoutExpired:
            run.process.kill()
        if time.monotonic() >= until:
            return


def start_sweep(chaos: Chaos) -> SweepRun:
    """One run, started once a worker is mid-job (holds a photo's row lock), or after 5 s.

    Every other run sweeps only the event of a photo in flight: a full sweep spends a few
    milliseconds per photo, so it seldom meets the one photo a job holds.
    """
    services, sweeps = chaos.services, chaos.faults.sweeps
    mid_job = poll(lambda: worker_holds_a_photo(services), timeout=5.0)
    event = event_in_flight(services) if len(sweeps) % 2 else None
    log = services.folder / f"sweep-{len(sweeps) + 1}.log"
    process = services.manage(log, "sweep_orphans", *(["--event", event] if event else []))
    sweeps.append(SweepRun(process, log, mid_job, event))
    return sweeps[-1]


def finish_sweeps(chaos: Chaos) -> None:
    """Wait for every run; a note says what they deleted, and why a run failed."""
    for sweeper in chaos.faults.sweepers:
        sweeper.join(300)
    sweeps, deleted, busy = chaos.faults.sweeps, 0, 0
    for run in sweeps:
        code, said = sweep_result(run)
        if code == 0 and "deleted" in said:
            deleted, busy = deleted + int(said["deleted"]), busy + int(said["busy"])
        else:
            chaos.report.notes.append(f"{run.log.name} exited {code} (a fault at the same time?): {said['last']}")
    if sweeps:
        mid_job = sum(run.mid_job for run in sweeps)
        targeted = sum(run.event is not None for run in sweeps)
        chaos.report.notes.append(
            f"sweep_orphans ran {len(sweeps)} times alongside the workers ({mid_job} started while a worker "
            f"held a photo's row lock, {targeted} with --event of the photo in flight): deleted {deleted} objects, "
            f"found a photo busy {busy} times"
        )


def sweep_result(run: SweepRun) -> tuple[int | str, dict]:
    """Its exit code, and its summary line's fields (`sweep_orphans deleted=N busy=N`) with its last line."""
    try:
        code = run.process.wait(180)
    except subprocess.TimeoutExpired:
        run.process.kill()
        code = "killed after 180 s"
    lines = run.log.read_text(errors="replace").strip().splitlines()
    summaries = [fields for fields in map(parse, lines) if fields.get("message") == "sweep_orphans"]
    return code, {**(summaries[-1] if summaries else {}), "last": (lines[-1:] or ["(no output)"])[0][:200]}
