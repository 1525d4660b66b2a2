"""The faults injected at seeded random moments, and the member who turns on Do Not Publish mid-run."""

import signal
import threading
import time

from jobqueue.messages import is_uuid
from jobqueue.queries import PRIVACY_APPLICATION_NAME
from jobqueue.session import APPLICATION_NAME
from tests.chaos.config import FAULT_KINDS
from tests.chaos.hide_checks import EXPOSURE_WINDOW_S
from tests.chaos.monitors import monitor_dnp_change
from tests.chaos.queue import application_names, send
from tests.chaos.state import Abandoned, Chaos
from tests.chaos.sweeps import sweep_until
from tests.chaos.worker_logs import Try
from tests.chaos.workers import WorkerProcess
from tests.support.log_helpers import parse
from tests.support.waiting import poll

# Jobs that run long enough (detection, rendering) for a kill to land mid-job rather than at its end.
LONG_JOBS = ("face_process", "reprocess")
# The sessions of one name ended: the workers' loops (jobqueue.session.APPLICATION_NAME), or a privacy job's try
# while it runs (jobqueue.queries.PRIVACY_APPLICATION_NAME).
TERMINATE_SESSIONS = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
# Faults after which no reader reads for seconds (a killed reader's replacement starting, the database coming
# back). The DNP change's window (hide_checks.EXPOSURE_WINDOW_S from its send) is kept clear of them, and the change
# waits for every reader to read: inside the window they would time a restart, not the privacy lane. The fault the
# window is for, a cut of the hide's own session, is made there anyway (cut_the_hide).
STOPPING_FAULTS = ("kill", "pg_restart")
PUBLISHED_IN_EVENT = (
    "SELECT count(*) FROM photos WHERE event_id = %s AND processed_at IS NOT NULL AND variant_version > 0"
)


def fault_plan(chaos: Chaos) -> list[str]:
    """Each kind once, the rest drawn at random, in a random order."""
    rng, count = chaos.rng, chaos.config.faults
    plan = list(FAULT_KINDS) + [rng.choice(FAULT_KINDS) for _ in range(count - len(FAULT_KINDS))]
    rng.shuffle(plan)
    return plan


def inject(chaos: Chaos, kind: str) -> None:
    chaos.report.faults[kind] += 1
    chaos.services.log(f"fault={kind}")
    started = time.time()
    try:
        FAULTS[kind](chaos)
    finally:
        chaos.faults.windows.append((kind, started, time.time()))


def terminate_backends(chaos: Chaos) -> None:
    with chaos.services.db() as conn:
        conn.execute(TERMINATE_SESSIONS, [APPLICATION_NAME])


def restart_postgres(chaos: Chaos) -> None:
    chaos.services.pg.restart()


def s3_outage(chaos: Chaos) -> None:
    services = chaos.services
    services.s3_down.set()
    services.s3.stop()
    time.sleep(chaos.rng.uniform(1.5, 4.0))
    services.s3.start()
    chaos.report.storage_returns.append(time.time())
    services.s3_down.clear()


def second_worker(chaos: Chaos) -> None:
    second = chaos.fleet.start_worker()
    threading.Timer(chaos.rng.uniform(3.0, 8.0), stop_second, args=(second,)).start()


def stop_second(worker: WorkerProcess) -> None:
    if worker.alive():
        worker.terminate()


def sweep_orphans(chaos: Chaos) -> None:
    until = time.monotonic() + chaos.rng.uniform(3.0, 8.0)
    chaos.faults.sweepers.append(threading.Thread(target=sweep_until, args=(chaos, until), daemon=True))
    chaos.faults.sweepers[-1].start()


def kill_a_reader(chaos: Chaos) -> None:
    """SIGKILL a reader, then start a new worker in its place (victim). The message it had in flight is
    remembered: how long until another read takes it is measured."""
    victim, busy = choose_victim(chaos)
    msg_id = busy.get(victim.name)
    victim.expected_exit = "kill"
    killed_at = time.time()
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait(30)
    chaos.services.log(f"killed={victim.name} in_flight_msg={msg_id}")
    if msg_id is not None:
        remember_abandoned(chaos, victim, msg_id, killed_at)
    chaos.fleet.replace(victim)


def choose_victim(chaos: Chaos) -> tuple[WorkerProcess, dict[str, int]]:
    """The reader to kill, and the message in flight of each busy reader by name. With one reader, at once, as
    it always was; with several, preferably one running a long job (its heartbeat names the message and the
    job), waiting up to 3 s for one, else one running any job, else any."""
    readers = chaos.fleet.readers
    if len(readers) == 1:
        return readers[0], {name: msg_id for name, msg_id, _ in busy_readers(chaos)}
    running = []

    def a_long_job_runs() -> bool:
        running[:] = busy_readers(chaos)
        return any(job in LONG_JOBS for _, _, job in running)

    poll(a_long_job_runs, timeout=3.0)
    long_jobs = [name for name, _, job in running if job in LONG_JOBS]
    names = sorted(long_jobs) or sorted(name for name, _, _ in running) or sorted(r.name for r in readers)
    chosen = chaos.faults.kill_rng.choice(names)
    return next(r for r in readers if r.name == chosen), {name: msg_id for name, msg_id, _ in running}


def busy_readers(chaos: Chaos) -> list[tuple[str, int, str]]:
    """(worker log name, msg_id, job) of each live reader whose heartbeat names a message in flight."""
    try:
        names = application_names(chaos.services)
    except Exception:
        return []
    beats = [parse(name) for name in names if name.startswith("momentlens-worker heartbeat ")]
    running = {int(beat["reader"]): beat for beat in beats if beat.get("reader", "").isdigit() and "msg" in beat}
    busy = []
    for reader in chaos.fleet.readers:
        backend = reader.lock_backend()
        if reader.alive() and backend in running:
            busy.append((reader.name, int(running[backend]["msg"]), running[backend]["job"]))
    return busy


def remember_abandoned(chaos: Chaos, victim: WorkerProcess, msg_id: int, killed_at: float) -> None:
    """Still queued and hidden after the kill: abandoned (else the job ended just before the kill)."""
    try:
        with chaos.services.db(attempts=10) as conn:
            row = conn.execute(
                "SELECT read_ct, extract(epoch FROM last_read_at), message->>'photo_id', vt > clock_timestamp() "
                "FROM pgmq.q_jobs WHERE msg_id = %s",
                [msg_id],
            ).fetchone()
    except Exception:
        return
    if row is None or not row[3]:
        return
    read_ct, read_at, photo_id, _ = row
    chaos.faults.abandoned.append(Abandoned(victim.name, msg_id, read_ct, float(read_at), photo_id, killed_at))
    if photo_id and is_uuid(photo_id):
        attempt = Try(victim.name, str(msg_id), photo_id.lower(), float(read_at), killed_at, "killed")
        chaos.faults.killed_tries.append(attempt)


FAULTS = {
    "kill": kill_a_reader,
    "terminate_backend": terminate_backends,
    "pg_restart": restart_postgres,
    "s3_outage": s3_outage,
    "second_worker": second_worker,
    "sweep_orphans": sweep_orphans,
}


def held_by_the_change(chaos: Chaos, kind: str) -> bool:
    """Whether the fault `kind` waits for the DNP change's window to end (STOPPING_FAULTS)."""
    change = chaos.seeded.dnp_change
    return (
        kind in STOPPING_FAULTS
        and change is not None
        and change.sent_at is not None
        and time.time() < change.sent_at + EXPOSURE_WINDOW_S
    )


def dnp_change_due(chaos: Chaos, halfway: bool) -> bool:
    """Halfway through the faults (or once they are all injected), once every reader reads (STOPPING_FAULTS) and
    three photos of the event that show the member are published: the change must find published photos to hide."""
    change = chaos.seeded.dnp_change
    if change is None or change.sent_at is not None or not halfway:
        return False
    if not all(reader.reading() for reader in chaos.fleet.readers):
        return False
    try:
        with chaos.services.db(attempts=1) as conn:
            published = conn.execute(PUBLISHED_IN_EVENT, [change.event_id]).fetchone()[0]
    except Exception:
        return False  # the database is being restarted by a fault
    return published >= 3


def change_dnp(chaos: Chaos) -> None:
    """The API's part: the member turns on Do Not Publish, and one reprocess_event; then watch the event."""
    change = chaos.seeded.dnp_change
    with chaos.services.db() as conn:
        conn.execute(
            "UPDATE event_members SET do_not_publish = true WHERE event_id = %s AND user_id = %s",
            [change.event_id, change.user_id],
        )
        change.sent_at = time.time()
        change.msg_id = send(conn, {"job": "reprocess_event", "event_id": change.event_id})
    chaos.services.log(f"dnp_change user={change.user_id} msg={change.msg_id}")
    chaos.watch.start(monitor_dnp_change, chaos)
    chaos.watch.start(cut_the_hide, chaos)


def cut_the_hide(chaos: Chaos) -> None:
    """Once, whatever the seed: the session of the first privacy try after the change's send (the hide, a few
    hundred ms) is ended while it runs. The change must still hide within the window (hide_checks): the reader
    gives the cut try's message back when it has a session again. It once waited out its visibility timeout."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not chaos.watch.stop.is_set():
        try:
            with chaos.services.db(attempts=1) as conn:
                while time.monotonic() < deadline and not chaos.watch.stop.wait(0.005):
                    if conn.execute(TERMINATE_SESSIONS, [PRIVACY_APPLICATION_NAME]).fetchall():
                        chaos.services.log("fault=cut_the_hide")
                        return
        except Exception:
            chaos.watch.stop.wait(0.1)  # a fault has the database down
