"""The chaos run behind bench/chaos.py: services, seed, workers, faults, invariants."""

import hashlib
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from faces.geometry import iou
from jobqueue.messages import is_uuid
from momentlens.devservices.pixels import difference, face_core

ROOT = Path(__file__).resolve().parents[1]
FAULT_KINDS = ("kill", "terminate_backend", "pg_restart", "s3_outage", "second_worker", "sweep_orphans")
BUCKET, ACCESS_KEY, SECRET_KEY = "chaos", "chaos-access-key", "chaos-secret-key"
LOG_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
# A blurred face differs from the upload by far more than JPEG noise does.
BLURRED = 10.0
# In a multi-frame file (lossy WebP q85, H.264 crf 20) a face is blurred when each quarter of its middle differs
# from the upload's frame by at least this much (mean absolute difference). Calibrated by hand on the seed's
# clips rendered by the worker's own encoders: the codec alone (a face left intact, as in its DNP member's own
# file) moves a quarter by at most 3.7; the worker's blur by 9.7 and more (the least: t1's smooth face 4, 46 px
# wide in the 520x360 animations; 20 and more for most faces). A blur box that lags a moving face leaves some
# quarter nearly unchanged. Each run's note gives the figures again.
MEDIA_BLURRED = 6.0
# The file a multi-frame upload is rendered into, by photos.media_type: never the upload's own kind or key.
MEDIA_EXTENSIONS = {"animated": "webp", "video": "mp4"}
# Why a worker refuses an upload: a valid clip of the seed that ends so was not processed.
REFUSALS = ("unsupported_media", "undecodable_media", "media_too_large", "undecodable_image", "image_too_large")
MEDIA_SIDE = 360  # every clip of the seed is at most 640x360: small, so the run stays fast
WORKER_ALIVE = "5. worker alive (no exit the harness did not cause)"
# After the drain the workers get their full-sweep interval plus this to leave no orphan.
SWEEP_MARGIN_S = 20.0
# Where a crop cuts a face: one edge of the image or a corner.
CUT_SIDES = ("left", "right", "top", "bottom", "top_left", "top_right", "bottom_left", "bottom_right")
# A cut face counts (is expected to be seen) when at least this share of its box is on the image.
CUT_MIN_VISIBLE = 0.4
ONE_READER_AT_A_TIME = "6. no photo handled by two readers at once"
# What a reader's heartbeat connection says while a job runs (jobqueue/heartbeat.py).
HEARTBEAT = re.compile(r"^momentlens-worker heartbeat reader=(\d+) msg=(\d+) job=(\w+)")
# Jobs that run long enough (detection, rendering) for a kill to land mid-job rather than at its end.
LONG_JOBS = ("face_process", "reprocess")
# Log stamps (ms, truncated) against `ms` (rounded): two tries this close count as back to back.
CLOCK_SLACK_S = 0.005
# Faults that end every reader's database session at once: a try running then loses its photo's row lock.
SESSION_FAULTS = ("terminate_backend", "pg_restart")


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    events: int = 4
    photos_per_event: int = 20
    faults: int = 14
    fault_gap_s: tuple[float, float] = (2.0, 6.0)
    timeout_s: float = 1500.0
    # The workers' WORKER_SWEEP_RETRY_S and WORKER_FULL_SWEEP_S: short, so orphan lifetimes mean something.
    sweep_retry_s: float = 5.0
    full_sweep_s: float = 30.0
    # How often the storage monitor lists the bucket and reads the rows.
    sample_s: float = 0.5
    # Readers at once (WORKER_READER_SLOTS); 1: the one reader, the workers' defaults untouched.
    readers: int = 1
    # With more than one reader, their WORKER_VISIBILITY_TIMEOUT_S: how soon a killed reader's message comes back.
    visibility_s: int = 6


@dataclass
class Report:
    jobs: int = 0
    handled: int = 0
    faults: Counter = field(default_factory=Counter)
    retries: int = 0
    resent_from_archive: int = 0
    archived: Counter = field(default_factory=Counter)
    invariants: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sweep_settings: str = ""
    sample_s: float = 0.0
    orphans_seen: int = 0
    orphan_longest_s: float = 0.0
    final_wait_s: float = 0.0
    readers: str = ""
    # Per reader kill that left a message in flight: seconds until a reader read it again (None: never seen).
    abandoned_waits: list[float | None] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return sum(self.invariants.values())

    def worst_abandoned_wait(self) -> str:
        waits = [wait for wait in self.abandoned_waits if wait is not None]
        return f"{max(waits):.1f}" if waits else "-"

    def table(self, seconds: float) -> str:
        rows = ["| what | count |", "|---|---:|", f"| jobs enqueued by the seed | {self.jobs} |"]
        rows += [f"| jobs handled (fan-out and re-sends included; retries not) | {self.handled} |"]
        rows += [f"| fault: {kind} | {self.faults[kind]} |" for kind in FAULT_KINDS]
        rows += [
            f"| failed tries (retried) | {self.retries} |",
            f"| re-sent from archive | {self.resent_from_archive} |",
            f"| worker sweep settings | {self.sweep_settings} |",
            f"| orphans seen (rows read and bucket listed every {self.sample_s:g} s) | {self.orphans_seen} |",
            f"| orphan survived at most, s | {self.orphan_longest_s:.1f} |",
            f"| idle wait after the drain for the workers' sweeps, s | {self.final_wait_s:.1f} |",
            f"| readers at once | {self.readers} |",
            f"| reader kills that left a message in flight (read again) | {len(self.abandoned_waits)} "
            f"({sum(wait is not None for wait in self.abandoned_waits)}) |",
            f"| abandoned message waited at most before another read, s | {self.worst_abandoned_wait()} |",
        ]
        rows += [f"| archived: {reason} | {count} |" for reason, count in sorted(self.archived.items())]
        rows += ["", "| invariant | violations |", "|---|---:|"]
        rows += [f"| {name} | {count} |" for name, count in self.invariants.items()]
        rows += ["", f"total violations: {self.violations} in {seconds:.0f} s"]
        rows += [f"note: {note}" for note in self.notes]
        return "\n".join(rows)


@dataclass
class WorkerProcess:
    process: subprocess.Popen
    log: Path
    expected_exit: str | None = None  # "kill" or "term" once the harness acts on it

    def lock_backend(self) -> int | None:
        """The backend pid of its reader slot (its last `queue_lock outcome=taken`), which its heartbeat names."""
        taken = re.findall(r"event=queue_lock outcome=taken backend_pid=(\d+)", self.log.read_text(errors="replace"))
        return int(taken[-1]) if taken else None


@dataclass
class Try:
    """One reader's try of one message, from its start to its end (epoch seconds, this host's clock)."""

    worker: str  # the worker's log name: one process
    msg_id: str
    photo_id: str
    start: float
    end: float
    how: str  # job_done, job_retry, job_archived, db_lost (session lost mid-try), killed
    lost_session: bool = False  # its session (so its photo's row lock) ended before the try did


@dataclass
class Abandoned:
    """The message a killed reader had in flight: when it was killed, and when a reader read it again."""

    worker: str
    msg_id: int
    read_ct: int
    read_at: float  # when the killed reader read it (pgmq's last_read_at)
    photo_id: str | None
    killed_at: float
    read_again_at: float | None = None
    gone: bool = False  # deleted between two looks: the read is found in the logs afterwards


@dataclass
class SweepRun:
    process: subprocess.Popen
    log: Path
    mid_job: bool  # a worker held a photo's row lock when it started
    event: str | None  # --event: the event of the photo a worker had in flight; None: all of storage


@dataclass
class OrphanWatch:
    """Each orphan from the first sample that shows it to the first that does not."""

    log: Path | None = None  # each orphan's first and last sighting, for reading next to the workers' logs
    open: dict[str, float] = field(default_factory=dict)  # key -> first seen (monotonic)
    lifetimes: list[tuple[float, str]] = field(default_factory=list)
    samples: int = 0
    skipped: int = 0  # samples a fault made impossible (S3 or PostgreSQL down)
    first: float | None = None
    last: float | None = None

    def observe(self, orphans: set[str], now: float) -> None:
        self.samples += 1
        self.first, self.last = self.first or now, now
        lines = []
        for key in sorted(orphans - self.open.keys()):
            self.open[key] = now
            lines.append(f"orphan_seen key={key}")
        for key in [key for key in self.open if key not in orphans]:
            self.lifetimes.append((now - self.open.pop(key), key))
            lines.append(f"orphan_gone key={key} lived_s={self.lifetimes[-1][0]:.1f}")
        if self.log is not None and lines:
            stamp = wall_clock()
            with open(self.log, "a") as out:
                out.writelines(f"{stamp} {line}\n" for line in lines)

    def seen(self) -> int:
        return len(self.lifetimes) + len(self.open)

    def mean_interval(self) -> float:
        return (self.last - self.first) / (self.samples - 1) if self.samples > 1 else 0.0

    def longest(self, now: float) -> tuple[float, str]:
        """(seconds, key) of the longest-lived orphan, those still there counted up to `now`."""
        return max(self.lifetimes + [(now - first, key) for key, first in self.open.items()], default=(0.0, ""))


@dataclass
class DnpChange:
    """A member with a ready reference, seen in the event's photos, who turns on Do Not Publish mid-run (the
    API's update and reprocess_event), and what the photos of the event looked like from then on."""

    event_id: str
    user_id: uuid.UUID
    reference_id: str
    msg_id: int | None = None
    sent_at: float | None = None  # epoch seconds
    # (epoch seconds, {photo id: the face ids its public file blurs, or None when it is not published})
    samples: list = field(default_factory=list)


@dataclass(frozen=True)
class EdgeCut:
    """A DNP member's face of t1 that a crop cuts with the image's edge, in the crop's pixels."""

    photo_id: str
    owner: uuid.UUID
    face: int  # index in t1's faces, left to right
    side: str
    box: tuple[float, float, float, float]  # the whole face (x1, y1, x2, y2): part of it lies off the image
    size: tuple[int, int]  # the crop's width and height

    def visible(self) -> tuple[float, float, float, float]:
        x1, y1, x2, y2 = self.box
        return max(0.0, x1), max(0.0, y1), min(float(self.size[0]), x2), min(float(self.size[1]), y2)

    def visible_share(self) -> float:
        x1, y1, x2, y2 = self.box
        vx1, vy1, vx2, vy2 = self.visible()
        return (vx2 - vx1) * (vy2 - vy1) / ((x2 - x1) * (y2 - y1))

    def core(self) -> tuple[slice, slice]:
        """The middle of the whole face (eyes, nose, mouth), cut to the image: what must not survive."""
        x1, y1, x2, y2 = self.box
        width, height = self.size
        cx1, cx2 = max(0, int(x1 + 0.2 * (x2 - x1))), min(width, int(x1 + 0.8 * (x2 - x1)))
        cy1, cy2 = max(0, int(y1 + 0.2 * (y2 - y1))), min(height, int(y1 + 0.8 * (y2 - y1)))
        return slice(cy1, max(cy2, cy1 + 1)), slice(cx1, max(cx2, cx1 + 1))

    def stored_face(self, faces):
        """The face row the worker stored for it (its box is the visible part), by overlap; None if not detected."""
        vx1, vy1, vx2, vy2 = self.visible()
        width, height = self.size
        best, best_iou = None, 0.3
        for face in faces:
            fx1, fy1 = face.box_x * width, face.box_y * height
            fx2, fy2 = fx1 + face.box_w * width, fy1 + face.box_h * height
            inter = max(0.0, min(vx2, fx2) - max(vx1, fx1)) * max(0.0, min(vy2, fy2) - max(vy1, fy1))
            union = (vx2 - vx1) * (vy2 - vy1) + (fx2 - fx1) * (fy2 - fy1) - inter
            if union > 0 and inter / union >= best_iou:
                best, best_iou = face, inter / union
        return best


Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels


@dataclass(frozen=True)
class Scene:
    """A clip's frames and, per frame, each face of t1 pasted in it: (index in t1's faces, box in the frame)."""

    frames: list[np.ndarray]
    shown: list[list[tuple[int, Box]]]


@dataclass(frozen=True)
class MediaUpload:
    """A multi-frame upload of the seed and what the seed knows of it: the truth its files are held to."""

    name: str
    kind: str  # the photos.media_type it must get: "animated" or "video"
    frames: int  # how many frames the upload decodes to
    # Per frame: (DNP member, face box in pixels) of each DNP member's face the seed pasted into it.
    dnp: tuple[tuple[tuple[uuid.UUID, Box], ...], ...]


@dataclass(frozen=True)
class PhotoRow:
    version: int
    published: bool
    uploads: frozenset[str]
    named: frozenset[str]  # public_key, public_thumb_key and every variant's keys


@dataclass(frozen=True)
class Snapshot:
    """The photo rows, then the bucket listed: a key listed after the rows were read is judged against them."""

    rows: dict[str, PhotoRow]
    keys: list[str]
    taken: float
    etags: dict[str, str] = field(default_factory=dict)  # each listed key's ETag: its bytes' digest


class Chaos:
    def __init__(self, config: ChaosConfig, folder: Path):
        self.config = config
        self.folder = Path(folder)
        self.rng = random.Random(config.seed)
        self.report = Report()
        self.workers: list[WorkerProcess] = []
        self.s3_down = threading.Event()
        self.stop_monitor = threading.Event()
        self.upload_hashes: dict[str, str] = {}
        self.early_publications = 0
        self.readers: list[WorkerProcess] = []
        # Which reader a kill picks (readers > 1): its own random stream, so that the fault plan and gaps
        # drawn from `rng` do not depend on how many readers were busy at each kill.
        self.kill_rng = random.Random(f"kill-{config.seed}")
        self.abandoned: list[Abandoned] = []
        self.killed_tries: list[Try] = []
        # (kind, start, end) of each fault, epoch seconds.
        self.fault_windows: list[tuple[str, float, float]] = []
        self.sweeps: list[SweepRun] = []
        self.sweepers: list[threading.Thread] = []
        self.monitors: list[threading.Thread] = []
        self.orphan_watch = OrphanWatch(log=self.folder / "orphans.log")
        # Photos whose upload is an animation or a video, by id: what the seed made of each. Each is rendered
        # into files of its kind; those in `refused_media` (beyond a limit, undecodable, pages) never are.
        self.media_photos: dict[str, MediaUpload] = {}
        self.refused_media: dict[str, str] = {}
        # (photo id, why) of each multi-frame upload the storage monitor saw published as itself or rendered
        # into a file of another kind.
        self.media_exposed: set[tuple[str, str]] = set()
        self.edge_cuts: list[EdgeCut] = []
        # Stills whose bytes hold more than one plain picture, or show it turned, by photo id: their public file
        # is always rendered (faces/media/still.py), and no picture in any published file shows a DNP face.
        self.rendered_stills: dict[str, str] = {}
        # The member who turns on Do Not Publish halfway through the faults (seed, _change_dnp).
        self.dnp_change: DnpChange | None = None
        # The ETag of each derived object when a committed row was first seen naming it; the named objects whose
        # bytes changed since (a try cut off from its session, still uploading, over a committed render).
        self.named_etags: dict[str, str] = {}
        self.replaced_named: set[str] = set()
        self.report.sweep_settings = (
            f"WORKER_SWEEP_RETRY_S={config.sweep_retry_s:g}, WORKER_FULL_SWEEP_S={config.full_sweep_s:g}"
        )
        self.report.sample_s = config.sample_s
        self.report.readers = (
            "1 (one reader slot)"
            if config.readers == 1
            else f"{config.readers} (WORKER_READER_SLOTS={config.readers}, "
            f"WORKER_VISIBILITY_TIMEOUT_S={config.visibility_s})"
        )

    # -- the run ---------------------------------------------------------------

    def run(self) -> Report:
        from momentlens.devservices.postgres import EmbeddedPostgres
        from momentlens.devservices.seaweedfs import SeaweedS3

        self.pg = EmbeddedPostgres(self.folder / "pgdata").ensure_ready()
        self.s3 = SeaweedS3(self.folder / "s3", bucket=BUCKET, access_key=ACCESS_KEY, secret_key=SECRET_KEY).start()
        try:
            self._configure_django()
            self.report.jobs = seed(self)
            self._drain_under_faults()
            self._finish_sweeps()
            self._await_worker_sweeps()
            self._stop_workers()
            self._stop_monitors()
            check_invariants(self)
        finally:
            self.stop_monitor.set()
            for process in [worker.process for worker in self.workers] + [run.process for run in self.sweeps]:
                if process.poll() is None:
                    process.kill()
            self.s3.stop()
            self.pg.stop()
        return self.report

    def worker_env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "R2_", "SENTRY_"))}
        env.update(
            {
                "DATABASE_URL": self.pg.uri,
                "R2_ENDPOINT_URL": self.s3.endpoint_url,
                "R2_BUCKET": BUCKET,
                "R2_ACCESS_KEY_ID": ACCESS_KEY,
                "R2_SECRET_ACCESS_KEY": SECRET_KEY,
                "MOMENTLENS_VAR_DIR": str(self.folder / "var"),
                "WORKER_RETRY_BACKOFF_S": "0.3",
                "WORKER_LOCK_RETRY_S": "0.5",
                "WORKER_IDLE_POLL_S": "0.2",
                "WORKER_DB_RECOVERY_S": "120",
                "WORKER_SWEEP_RETRY_S": str(self.config.sweep_retry_s),
                "WORKER_FULL_SWEEP_S": str(self.config.full_sweep_s),
                "WORKER_HEALTH_PORT": "0",
                "ORT_INTRA_OP_THREADS": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.config.readers > 1:
            env["WORKER_READER_SLOTS"] = str(self.config.readers)
            env["WORKER_VISIBILITY_TIMEOUT_S"] = str(self.config.visibility_s)
        return env

    def _configure_django(self) -> None:
        os.environ.update({k: v for k, v in self.worker_env().items() if k.startswith(("DATABASE_URL", "R2_"))})
        os.environ["MOMENTLENS_VAR_DIR"] = str(self.folder / "var")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
        import django

        django.setup()
        import logging

        logging.disable(logging.INFO)

    def start_worker(self) -> WorkerProcess:
        log = self.folder / f"worker-{len(self.workers) + 1}.log"
        process = subprocess.Popen(
            [sys.executable, "manage.py", "run_worker", "--health-port", "0"],
            cwd=ROOT,
            env=self.worker_env(),
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
        )
        worker = WorkerProcess(process, log)
        self.workers.append(worker)
        return worker

    # -- draining under faults -------------------------------------------------

    def _drain_under_faults(self) -> None:
        plan = list(FAULT_KINDS) + [self.rng.choice(FAULT_KINDS) for _ in range(self.config.faults - len(FAULT_KINDS))]
        self.rng.shuffle(plan)
        self.readers = [self.start_worker() for _ in range(self.config.readers)]
        for monitor in (self._monitor_publications, self._monitor_storage, self._monitor_abandoned):
            self.monitors.append(threading.Thread(target=monitor, daemon=True))
            self.monitors[-1].start()
        deadline = time.monotonic() + self.config.timeout_s
        next_fault = time.monotonic() + self.rng.uniform(*self.config.fault_gap_s)
        resent = False
        change_when_left = len(plan) // 2
        while time.monotonic() < deadline:
            self._restart_if_dead()
            if plan and time.monotonic() >= next_fault:
                self._inject(plan.pop(0))
                next_fault = time.monotonic() + self.rng.uniform(*self.config.fault_gap_s)
            if self._change_due(len(plan) <= change_when_left):
                self._change_dnp()
            if not resent and archived_count(self) >= 3:
                self.report.resent_from_archive = resend_from_archive(self, 3)
                resent = True
            changed = self.dnp_change is None or self.dnp_change.sent_at is not None
            if changed and not plan and queue_length(self) == 0 and (resent or archived_count(self) < 3):
                time.sleep(1.0)  # a job in flight may still enqueue more (reprocess_event)
                if queue_length(self) == 0:
                    return
            time.sleep(0.2)
        self.report.invariants["drained before the timeout"] = 1

    def _change_due(self, halfway: bool) -> bool:
        """Halfway through the faults (or once they are all injected), once three photos of the event that show
        the member are published: the change must find published photos to hide."""
        change = self.dnp_change
        if change is None or change.sent_at is not None or not halfway:
            return False
        try:
            with db(self, attempts=1) as conn:
                published = conn.execute(PUBLISHED_IN_EVENT, [change.event_id]).fetchone()[0]
        except Exception:
            return False  # the database is being restarted by a fault
        return published >= 3

    def _change_dnp(self) -> None:
        """The API's part: the member turns on Do Not Publish, and one reprocess_event; then watch the event."""
        change = self.dnp_change
        with db(self) as conn:
            conn.execute(
                "UPDATE event_members SET do_not_publish = true WHERE event_id = %s AND user_id = %s",
                [change.event_id, change.user_id],
            )
            change.sent_at = time.time()
            message = json.dumps({"job": "reprocess_event", "event_id": change.event_id})
            change.msg_id = conn.execute("SELECT pgmq.send('jobs', %s::jsonb)", [message]).fetchone()[0]
        with open(self.folder / "faults.log", "a") as out:
            out.write(f"{wall_clock()} dnp_change user={change.user_id} msg={change.msg_id}\n")
        self.monitors.append(threading.Thread(target=self._monitor_dnp_change, daemon=True))
        self.monitors[-1].start()

    def _monitor_dnp_change(self) -> None:
        """Every 0.1 s: which photos of the event are published, and which faces their public file blurs."""
        change = self.dnp_change
        while not self.stop_monitor.wait(0.1):
            try:
                with db(self, attempts=1) as conn:
                    rows = conn.execute(DNP_CHANGE_ROWS, [change.event_id]).fetchall()
            except Exception:
                continue  # the database is being restarted by a fault
            change.samples.append((time.time(), {photo_id: blurred for photo_id, blurred in rows}))

    def _restart_if_dead(self) -> None:
        """Each reader that exited is replaced by a new worker (systemd's part)."""
        for worker in self.workers:
            code = worker.process.poll()
            if code is not None and worker.expected_exit is None:
                worker.expected_exit = f"unexpected exit {code}"
                self.report.invariants[WORKER_ALIVE] = self.report.invariants.get(WORKER_ALIVE, 0) + 1
                self.report.notes.append(f"{worker.log.name} exited {code} on its own")
        self.readers = [self.start_worker() if r.process.poll() is not None else r for r in self.readers]

    def _inject(self, kind: str) -> None:
        self.report.faults[kind] += 1
        with open(self.folder / "faults.log", "a") as out:
            out.write(f"{wall_clock()} fault={kind}\n")
        started = time.time()
        try:
            self._fault(kind)
        finally:
            self.fault_windows.append((kind, started, time.time()))

    def _fault(self, kind: str) -> None:
        if kind == "kill":
            self._kill_a_reader()
            return
        if kind == "terminate_backend":
            with db(self) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'momentlens-worker'"
                )
        elif kind == "pg_restart":
            self.pg.restart()
        elif kind == "s3_outage":
            self.s3_down.set()
            self.s3.stop()
            time.sleep(self.rng.uniform(1.5, 4.0))
            self.s3.start()
            self.s3_down.clear()
        elif kind == "second_worker":
            second = self.start_worker()
            threading.Timer(self.rng.uniform(3.0, 8.0), self._stop_second, args=(second,)).start()
        elif kind == "sweep_orphans":
            until = time.monotonic() + self.rng.uniform(3.0, 8.0)
            self.sweepers.append(threading.Thread(target=self._sweep_until, args=(until,), daemon=True))
            self.sweepers[-1].start()

    def _kill_a_reader(self) -> None:
        """SIGKILL a reader, then start a new worker in its place. With one reader, at once, as it always was;
        with several, preferably one running a long job (its heartbeat names the message and the job), waiting
        up to 3 s for one, else one running any job, else any.

        The message it had in flight is remembered: how long until another read takes it is measured."""
        if len(self.readers) == 1:
            victim = self.readers[0]
            busy = {name: msg_id for name, msg_id, _ in self._busy_readers()}
        else:
            waited_until, running = time.monotonic() + 3.0, []
            while True:
                running = self._busy_readers()
                if any(job in LONG_JOBS for _, _, job in running) or time.monotonic() >= waited_until:
                    break
                time.sleep(0.05)
            long_jobs = [name for name, _, job in running if job in LONG_JOBS]
            names = sorted(long_jobs) or sorted(name for name, _, _ in running)
            names = names or sorted(r.log.name for r in self.readers)
            chosen = self.kill_rng.choice(names)
            victim = next(r for r in self.readers if r.log.name == chosen)
            busy = {name: msg_id for name, msg_id, _ in running}
        msg_id = busy.get(victim.log.name)
        victim.expected_exit = "kill"
        killed_at = time.time()
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(30)
        with open(self.folder / "faults.log", "a") as out:
            out.write(f"{wall_clock()} killed={victim.log.name} in_flight_msg={msg_id}\n")
        if msg_id is not None:
            self._remember_abandoned(victim, msg_id, killed_at)
        self.readers = [self.start_worker() if r is victim else r for r in self.readers]

    def _busy_readers(self) -> list[tuple[str, int, str]]:
        """(worker log name, msg_id, job) of each live reader whose heartbeat names a message in flight."""
        try:
            with db(self, attempts=1) as conn:
                names = [row[0] for row in conn.execute("SELECT application_name FROM pg_stat_activity").fetchall()]
        except Exception:
            return []
        running = {int(found[1]): found for name in names if name and (found := HEARTBEAT.match(name))}
        busy = []
        for reader in self.readers:
            backend = reader.lock_backend()
            if reader.process.poll() is None and backend in running:
                busy.append((reader.log.name, int(running[backend][2]), running[backend][3]))
        return busy

    def _remember_abandoned(self, victim: WorkerProcess, msg_id: int, killed_at: float) -> None:
        """Still queued and hidden after the kill: abandoned (else the job ended just before the kill)."""
        try:
            with db(self, attempts=10) as conn:
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
        self.abandoned.append(Abandoned(victim.log.name, msg_id, read_ct, float(read_at), photo_id, killed_at))
        if photo_id and is_uuid(photo_id):
            self.killed_tries.append(
                Try(victim.log.name, str(msg_id), photo_id.lower(), float(read_at), killed_at, "killed")
            )

    def _monitor_abandoned(self) -> None:
        """Every 0.1 s, each abandoned message not yet read again: its read_ct and pgmq's last_read_at."""
        while not self.stop_monitor.wait(0.1):
            waiting = [entry for entry in self.abandoned if entry.read_again_at is None and not entry.gone]
            if not waiting:
                continue
            try:
                with db(self, attempts=1) as conn:
                    ids = [entry.msg_id for entry in waiting]
                    rows = conn.execute(
                        "SELECT msg_id, read_ct, extract(epoch FROM last_read_at) FROM pgmq.q_jobs "
                        "WHERE msg_id = ANY(%s) UNION ALL SELECT msg_id, read_ct, extract(epoch FROM last_read_at) "
                        "FROM pgmq.a_jobs WHERE msg_id = ANY(%s)",
                        [ids, ids],
                    ).fetchall()
            except Exception:
                continue  # a fault has the database down
            seen = {msg_id: (read_ct, read_at) for msg_id, read_ct, read_at in rows}
            for entry in waiting:
                if entry.msg_id not in seen:
                    entry.gone = True
                elif seen[entry.msg_id][0] > entry.read_ct:
                    # The first read after the kill, unless two reads fell between two looks (then the later one).
                    entry.read_again_at = float(seen[entry.msg_id][1])

    def _sweep_until(self, until: float) -> None:
        """`manage.py sweep_orphans` as an operator runs it, back to back until `until`, alongside the workers."""
        while not self.stop_monitor.is_set():
            run = self._start_sweep()
            try:
                run.process.wait(180)
            except subprocess.TimeoutExpired:
                run.process.kill()
            if time.monotonic() >= until:
                return

    def _start_sweep(self) -> "SweepRun":
        """One run, started once a worker is mid-job (holds a photo's row lock), or after 5 s.

        Every other run sweeps only the event of a photo in flight: a full sweep spends a few
        milliseconds per photo, so it seldom meets the one photo a job holds.
        """
        waited_until = time.monotonic() + 5.0
        mid_job = worker_holds_a_photo(self)
        while not mid_job and time.monotonic() < waited_until:
            time.sleep(0.05)
            mid_job = worker_holds_a_photo(self)
        event = event_in_flight(self) if len(self.sweeps) % 2 else None
        log = self.folder / f"sweep-{len(self.sweeps) + 1}.log"
        process = subprocess.Popen(
            [sys.executable, "manage.py", "sweep_orphans", *(["--event", event] if event else [])],
            cwd=ROOT,
            env=self.worker_env(),
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
        )
        self.sweeps.append(SweepRun(process, log, mid_job, event))
        return self.sweeps[-1]

    def _finish_sweeps(self) -> None:
        for sweeper in self.sweepers:
            sweeper.join(300)
        deleted = busy = 0
        for run in self.sweeps:
            try:
                code = run.process.wait(180)
            except subprocess.TimeoutExpired:
                run.process.kill()
                code = "killed after 180 s"
            text = run.log.read_text(errors="replace")
            found = re.search(r"sweep_orphans deleted=(\d+) busy=(\d+)", text)
            if code == 0 and found:
                deleted, busy = deleted + int(found[1]), busy + int(found[2])
            else:
                last = text.strip().splitlines()[-1:] or ["(no output)"]
                self.report.notes.append(f"{run.log.name} exited {code} (a fault at the same time?): {last[0][:200]}")
        if self.sweeps:
            mid_job = sum(run.mid_job for run in self.sweeps)
            targeted = sum(run.event is not None for run in self.sweeps)
            self.report.notes.append(
                f"sweep_orphans ran {len(self.sweeps)} times alongside the workers ({mid_job} started while a worker "
                f"held a photo's row lock, {targeted} with --event of the photo in flight): deleted {deleted} objects, "
                f"found a photo busy {busy} times"
            )

    def _await_worker_sweeps(self) -> None:
        """The queue is drained: give the idle workers their full-sweep interval (and a margin) to leave no orphan."""
        started = time.monotonic()
        deadline = started + self.config.full_sweep_s + SWEEP_MARGIN_S
        while time.monotonic() < deadline:
            self._restart_if_dead()
            try:
                if not orphan_keys(storage_snapshot(self, attempts=1)):
                    break
            except Exception:
                pass
            time.sleep(self.config.sample_s)
        self.report.final_wait_s = time.monotonic() - started

    def _stop_monitors(self) -> None:
        self.stop_monitor.set()
        for monitor in self.monitors:
            monitor.join(60)

    def _stop_second(self, worker: WorkerProcess) -> None:
        if worker.process.poll() is None:
            worker.expected_exit = "term"
            worker.process.send_signal(signal.SIGTERM)

    def _stop_workers(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.expected_exit = "term"
                worker.process.send_signal(signal.SIGTERM)
                code = worker.process.wait(120)
                if code != 0:
                    self.report.notes.append(f"{worker.log.name} exited {code} on SIGTERM")
                    self.report.invariants[WORKER_ALIVE] = self.report.invariants.get(WORKER_ALIVE, 0) + 1

    def _monitor_storage(self) -> None:
        """Read the rows and list the bucket every sample_s: how long each orphan lives; no multi-frame upload
        published as itself or rendered into a file of another kind."""
        client, due = self.s3.client(), time.monotonic()
        while not self.stop_monitor.wait(max(0.0, due - time.monotonic())):
            due = max(due + self.config.sample_s, time.monotonic())
            if self.s3_down.is_set():
                self.orphan_watch.skipped += 1
                continue
            try:
                snapshot = storage_snapshot(self, attempts=1, client=client)
            except Exception:
                self.orphan_watch.skipped += 1
                continue  # the database or S3 is being restarted by a fault
            self.orphan_watch.observe(orphan_keys(snapshot), snapshot.taken)
            self.media_exposed |= exposed_media(snapshot, self.media_photos, self.refused_media)
            self.replaced_named |= replaced_named_objects(snapshot, self.named_etags)

    def _monitor_publications(self) -> None:
        """Sample published photos while the run goes on: each key a row names must already exist."""
        while not self.stop_monitor.wait(1.0):
            if self.s3_down.is_set():
                continue
            try:
                self.early_publications += sample_published_keys(self)
            except Exception:
                continue  # the database or S3 is being restarted by a fault


def wall_clock() -> str:
    """The workers' log timestamp format, to read the harness's logs next to theirs."""
    now = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


# -- the database, outside Django: robust to the restarts this run causes ------


class db:
    def __init__(self, chaos: Chaos, attempts: int = 60):
        self.chaos = chaos
        self.attempts = attempts

    def __enter__(self):
        import psycopg

        for attempt in range(self.attempts):
            try:
                self.conn = psycopg.connect(self.chaos.pg.uri, autocommit=True)
                return self.conn
            except psycopg.OperationalError:
                time.sleep(0.5 if attempt < self.attempts - 1 else 0)
        raise RuntimeError("the chaos database did not come back")

    def __exit__(self, *exc):
        self.conn.close()


def queue_length(chaos: Chaos) -> int:
    try:
        with db(chaos) as conn:
            return conn.execute("SELECT count(*) FROM pgmq.q_jobs").fetchone()[0]
    except Exception:
        return -1


def archived_count(chaos: Chaos) -> int:
    try:
        with db(chaos) as conn:
            return conn.execute("SELECT count(*) FROM pgmq.a_jobs").fetchone()[0]
    except Exception:
        return 0


def resend_from_archive(chaos: Chaos, count: int) -> int:
    """What an operator does with requeue_archived: a copy of an archived message, sent again."""
    with db(chaos) as conn:
        rows = conn.execute("SELECT msg_id, message FROM pgmq.a_jobs ORDER BY msg_id LIMIT %s", [count]).fetchall()
        for msg_id, message in rows:
            conn.execute(
                "SELECT pgmq.send('jobs', %s::jsonb, %s::jsonb)",
                [json.dumps(message), json.dumps({"requeued_from": msg_id})],
            )
    return len(rows)


def sample_published_keys(chaos: Chaos) -> int:
    with db(chaos) as conn:
        rows = conn.execute(
            "SELECT p.id, k FROM photos p, LATERAL (SELECT unnest(ARRAY[p.public_key, p.public_thumb_key]) AS k "
            "UNION ALL SELECT unnest(ARRAY[v.key, v.thumb_key]) FROM photo_variants v WHERE v.photo_id = p.id) keys "
            "WHERE p.processed_at IS NOT NULL AND k IS NOT NULL ORDER BY random() LIMIT 12"
        ).fetchall()
        client = chaos.s3.client()
        missing = 0
        for photo_id, key in rows:
            if object_exists(client, key):
                continue
            still = conn.execute(
                "SELECT 1 FROM photos p LEFT JOIN photo_variants v ON v.photo_id = p.id WHERE p.id = %s "
                "AND p.processed_at IS NOT NULL AND (p.public_key = %s OR p.public_thumb_key = %s "
                "OR v.key = %s OR v.thumb_key = %s)",
                [photo_id, key, key, key, key],
            ).fetchone()
            if still and not chaos.s3_down.is_set() and not object_exists(client, key):
                missing += 1
        return missing


def object_exists(client, key: str) -> bool:
    import botocore.exceptions

    try:
        client.head_object(Bucket=BUCKET, Key=key)
        return True
    except botocore.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in {"404", "NoSuchKey", "NotFound"}:
            return False
        raise


def worker_holds_a_photo(chaos: Chaos) -> bool:
    """A worker's transaction holds a photo row (SELECT ... FOR UPDATE): it is mid-job."""
    try:
        with db(chaos, attempts=1) as conn:
            return bool(
                conn.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.relation = 'photos'::regclass AND l.mode = 'RowShareLock' "
                    "AND a.application_name = 'momentlens-worker'"
                ).fetchone()[0]
            )
    except Exception:
        return False


def event_in_flight(chaos: Chaos) -> str | None:
    """The event of a photo whose message a worker has read and not yet finished (or is backing off)."""
    try:
        with db(chaos, attempts=1) as conn:
            row = conn.execute(
                "SELECT p.event_id::text FROM pgmq.q_jobs q JOIN photos p ON p.id::text = q.message->>'photo_id' "
                "WHERE q.read_ct > 0 AND q.vt > now() ORDER BY q.vt DESC LIMIT 1"
            ).fetchone()
            return row[0] if row else None
    except Exception:
        return None


PUBLISHED_IN_EVENT = (
    "SELECT count(*) FROM photos WHERE event_id = %s AND processed_at IS NOT NULL AND variant_version > 0"
)
# A photo of the event: its id, and the face ids its public file blurs (None: not published).
DNP_CHANGE_ROWS = (
    "SELECT id::text, CASE WHEN processed_at IS NULL THEN NULL ELSE coalesce(render_plan->'public', '[]') END "
    "FROM photos WHERE event_id = %s"
)
SNAPSHOT_ROWS = (
    "SELECT p.id::text, p.variant_version, p.processed_at IS NOT NULL, p.upload_key, p.upload_thumb_key, "
    "p.public_key, p.public_thumb_key, "
    "ARRAY(SELECT unnest(ARRAY[v.key, v.thumb_key]) FROM photo_variants v WHERE v.photo_id = p.id) FROM photos p"
)


def storage_snapshot(chaos: Chaos, attempts: int = 60, client=None) -> Snapshot:
    with db(chaos, attempts) as conn:
        rows = conn.execute(SNAPSHOT_ROWS).fetchall()  # one statement: one snapshot of photos and variants
    client = client or chaos.s3.client()
    etags = {
        obj["Key"]: obj.get("ETag", "")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="events/")
        for obj in page.get("Contents", [])
    }
    keys = list(etags)
    photos = {
        photo_id: PhotoRow(
            version,
            published,
            frozenset({upload, upload_thumb}),
            frozenset(key for key in (public, public_thumb, *variants) if key),
        )
        for photo_id, version, published, upload, upload_thumb, public, public_thumb, variants in rows
    }
    return Snapshot(photos, keys, time.monotonic(), etags)


def replaced_named_objects(snapshot: Snapshot, first_seen: dict[str, str]) -> set[str]:
    """Keys a committed row names whose bytes (ETag) differ from when a row was first seen naming them."""
    replaced = set()
    for row in snapshot.rows.values():
        for key in row.named - row.uploads:
            etag = snapshot.etags.get(key)
            if etag is None:
                continue
            if first_seen.setdefault(key, etag) != etag:
                replaced.add(key)
    return replaced


def orphan_keys(snapshot: Snapshot) -> set[str]:
    """Derived objects nothing points at: a key of a derived shape that no row names, whose photo row is gone
    or whose version is not newer than the row's committed variant_version (a newer one may be a job in flight).
    Upload keys are never orphans."""
    from faces.rendering.keys import DERIVED_KEY

    uploads = {key for row in snapshot.rows.values() for key in row.uploads}
    orphans = set()
    for key in snapshot.keys:
        found = DERIVED_KEY.match(key)
        if found is None or key in uploads:
            continue
        row = snapshot.rows.get(found["photo"].lower())
        if row is None or (key not in row.named and int(found["version"]) <= row.version):
            orphans.add(key)
    return orphans


def exposed_media(snapshot: Snapshot, media: dict[str, MediaUpload], refused: dict[str, str]) -> set[tuple[str, str]]:
    """(photo id, why) of each multi-frame upload published as itself or rendered from one frame: a row naming
    an upload object as a file, a file (named or only listed) of another kind than its clip's (an animation is
    rendered into .webp, a video into .mp4; thumbnails are JPEG posters; a .jpg file is one frame), or a refused
    one published or with any file."""
    from faces.rendering.keys import DERIVED_KEY

    exposed = set()
    for photo_id, upload in media.items():
        row = snapshot.rows.get(photo_id)
        if row is not None and row.named & row.uploads:
            exposed.add((photo_id, "a row names the upload object as a file"))
        for key in row.named if row is not None else ():
            if not media_file_kind_ok(key, upload.kind):
                exposed.add((photo_id, f"a row names a file of another kind: {key}"))
    for photo_id in refused:
        row = snapshot.rows.get(photo_id)
        if row is not None and (row.published or row.named & row.uploads):
            exposed.add((photo_id, "a refused upload is published"))
    for key in snapshot.keys:
        found = DERIVED_KEY.match(key)
        photo_id = found["photo"].lower() if found else None
        if photo_id in refused:
            exposed.add((photo_id, f"a refused upload has a file: {key}"))
        elif photo_id in media and not media_file_kind_ok(key, media[photo_id].kind):
            exposed.add((photo_id, f"a file of another kind: {key}"))
    return exposed


def media_file_kind_ok(key: str, kind: str) -> bool:
    """A clip's file is of its kind (.webp, .mp4); its thumbnail a JPEG poster."""
    return key.endswith("_thumb.jpg") or key.endswith(f".{MEDIA_EXTENSIONS[kind]}")


# -- seeding -------------------------------------------------------------------


def seed(chaos: Chaos) -> int:
    """Events, members, references, photos and the queue, as the API would leave them."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from faces.engines import resident_engine
    from faces.models import Event, EventMember, Photo, SubjectReference
    from momentlens.devservices import samples

    rng = chaos.rng
    group = samples.group_photo()
    group_faces = sorted(resident_engine().analyze(group), key=lambda face: face.box[0])
    pictures = [
        group,
        cv2.resize(samples.recolour(group, hue_shift=5, gain=1.05), None, fx=0.85, fy=0.85),
        samples.tom_hanks(),
        samples.astronaut(),
        samples.face_free_scenes()[0],
    ]
    messages: list[dict | str] = []

    def save(key: str, data: bytes, remember: bool = True) -> str:
        default_storage.save(key, ContentFile(data))
        if remember:
            chaos.upload_hashes[key] = hashlib.sha256(data).hexdigest()
        return key

    def photo(event, data: bytes | None, regions=()) -> Photo:
        photo_id = uuid.uuid4()
        key, thumb = f"events/{event.id}/uploads/{photo_id}.jpg", f"events/{event.id}/uploads/{photo_id}_thumb.jpg"
        if data is not None:
            save(key, data)
            save(thumb, b"the API's thumbnail")
        return Photo.objects.create(
            id=photo_id,
            event=event,
            uploader_id=uuid.uuid4(),
            upload_key=key,
            upload_thumb_key=thumb,
            blur_regions=list(regions),
        )

    photos = []
    dnp_faces: dict[uuid.UUID, dict[int, uuid.UUID]] = {}  # event -> index in group_faces -> DNP member
    for number in range(chaos.config.events):
        event = Event.objects.create(name=f"chaos event {number}")
        dnp_faces[event.id] = {}
        for _ in range(2):
            EventMember.objects.create(event=event, user_id=uuid.uuid4())
        if number > 0:  # event 0 has no DNP member: thumbnail_dims publishes without a face pass there
            for face_index in rng.sample(range(len(group_faces)), 2):
                user = uuid.uuid4()
                dnp_faces[event.id][face_index] = user
                EventMember.objects.create(event=event, user_id=user, do_not_publish=True)
                reference_id = uuid.uuid4()
                key = save(
                    f"users/{user}/references/{reference_id}.jpg",
                    samples.encode_jpeg(samples.derived_portrait(group, group_faces[face_index].box)),
                )
                SubjectReference.objects.create(id=reference_id, user_id=user, upload_key=key)
                messages.append({"job": "reference_process", "reference_id": str(reference_id)})
        for index in range(chaos.config.photos_per_event):
            regions = [{"x": 0.02, "y": 0.8, "w": 0.15, "h": 0.15}] if rng.random() < 0.3 else []
            # In an event with DNP members, its first photo and about a third of the rest cut a face with the edge.
            cut = dnp_faces[event.id] and (index == 0 or rng.random() < 0.3)
            if cut:
                picture, size, cut_faces = edge_cut(rng, group, group_faces, dnp_faces[event.id])
            else:
                picture = rng.choice(pictures[:2] * 3 + pictures[2:])
            photos.append(photo(event, samples.encode_jpeg(picture), regions))
            if cut:
                chaos.edge_cuts += [
                    EdgeCut(str(photos[-1].id), dnp_faces[event.id][face_index], face_index, side, box, size)
                    for face_index, side, box in cut_faces
                    if face_index in dnp_faces[event.id]
                ]
            job = "thumbnail_dims" if number == 0 or rng.random() < 0.2 else "face_process"
            messages.append({"job": job, "photo_id": str(photos[-1].id)})
    events = list(Event.objects.all())

    hostile_event = events[-1]
    chaos.dnp_change = late_dnp_member(hostile_event, group_faces, dnp_faces[hostile_event.id], group, save)
    messages.append({"job": "reference_process", "reference_id": chaos.dnp_change.reference_id})
    bad_uploads = {
        "corrupt": b"\xff\xd8\xff\xe0" + bytes(rng.randrange(256) for _ in range(4000)),
        "truncated": samples.encode_jpeg(group)[:30000],
        "zero-byte": b"",
        "bomb": samples.png_promising(20_000, 20_000),
        "huge": samples.jpeg_promising(samples.tom_hanks(), 15_000, 12_000),
    }
    for data in bad_uploads.values():
        messages.append({"job": "face_process", "photo_id": str(photo(hostile_event, data).id)})
    # Stills that hold more than one plain picture, or show it turned: a rendered public file, never the upload.
    for name, data, job, event in still_uploads(
        group, group_faces, events[0], hostile_event, dnp_faces[hostile_event.id]
    ):
        still = photo(event, data)
        chaos.rendered_stills[str(still.id)] = name
        messages.append({"job": job, "photo_id": str(still.id)})
    missing_upload = photo(hostile_event, None)
    messages.append({"job": "face_process", "photo_id": str(missing_upload.id)})
    # Animations and videos under .jpg keys: rendered frame by frame into an animated WebP or an MP4, never
    # published as themselves, never rendered from one frame; and three the worker must refuse.
    for upload, data, job, event, regions in media_uploads(
        group, group_faces, events[0], hostile_event, dnp_faces[hostile_event.id]
    ):
        media = photo(event, data, regions)
        chaos.media_photos[str(media.id)] = upload
        messages.append({"job": job, "photo_id": str(media.id)})
        if upload.name.startswith(("animated WebP, DNP", "MP4 30 fps")):
            messages.append({"job": "reprocess", "photo_id": str(media.id)})  # from the stored tracks
    for name, data in refused_media(group).items():
        media = photo(hostile_event, data)
        chaos.refused_media[str(media.id)] = name
        messages.append({"job": "face_process", "photo_id": str(media.id)})
    messages += [
        "a string, not an object",
        [1, 2, 3],
        {"photo_id": str(uuid.uuid4())},
        {"job": "no_such_job", "photo_id": str(photos[0].id)},
        {"job": "face_process", "photo_id": "not-a-uuid"},
        {"job": "face_process", "photo_id": str(uuid.uuid4())},
        {"job": "reprocess_event", "event_id": str(uuid.uuid4())},
        {"job": "reference_process", "reference_id": str(uuid.uuid4())},
    ]
    for picked in rng.sample(photos, max(1, len(photos) // 5)):
        messages.append({"job": "reprocess", "photo_id": str(picked.id)})
    for picked in rng.sample(photos, max(1, len(photos) // 10)):
        messages.append({"job": "thumbnail_dims", "photo_id": str(picked.id)})  # re-sent after its face job
    messages += [{"job": "reprocess_event", "event_id": str(event.id)} for event in events]

    with db(chaos) as conn:
        for message in messages:
            conn.execute("SELECT pgmq.send('jobs', %s::jsonb)", [json.dumps(message)])
    return len(messages)


def late_dnp_member(event, group_faces, dnp: dict[int, uuid.UUID], group: np.ndarray, save) -> DnpChange:
    """A member who is no DNP member yet, with a reference of a t1 face no DNP member has: the t1 photos of the
    event show them. Turned on halfway through the faults (Chaos._change_dnp)."""
    from faces.models import EventMember, SubjectReference
    from momentlens.devservices import samples

    face = next(index for index in range(len(group_faces)) if index not in dnp)
    user, reference_id = uuid.uuid4(), uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user)
    key = f"users/{user}/references/{reference_id}.jpg"
    save(key, samples.encode_jpeg(samples.derived_portrait(group, group_faces[face].box)))
    SubjectReference.objects.create(id=reference_id, user_id=user, upload_key=key)
    return DnpChange(str(event.id), user, str(reference_id))


def edge_cut(rng: random.Random, image: np.ndarray, faces, dnp: dict[int, uuid.UUID]):
    """A crop of `image` whose edge or corner cuts through a face, a DNP member's most of the time.

    Returns the crop, its (width, height) and, for each face the crop cuts with at least
    CUT_MIN_VISIBLE of its box still on it, (index in faces, side, whole box in the crop's pixels).
    """
    target = rng.choice(sorted(dnp)) if rng.random() < 0.7 else rng.randrange(len(faces))
    x1, y1, x2, y2 = faces[target].box
    side = rng.choice(CUT_SIDES)
    share = rng.uniform(0.2, 0.4) if "_" in side else rng.uniform(0.25, 0.5)  # of the box, cut away per side
    height, width = image.shape[:2]
    left, top, right, bottom = 0, 0, width, height
    if "left" in side:
        left = int(x1 + share * (x2 - x1))
    if "right" in side:
        right = int(x2 - share * (x2 - x1))
    if "top" in side:
        top = int(y1 + share * (y2 - y1))
    if "bottom" in side:
        bottom = int(y2 - share * (y2 - y1))
    crop = np.ascontiguousarray(image[top:bottom, left:right])
    size = (right - left, bottom - top)
    cut_faces = []
    for index, face in enumerate(faces):
        box = (face.box[0] - left, face.box[1] - top, face.box[2] - left, face.box[3] - top)
        visible_w = min(box[2], size[0]) - max(box[0], 0)
        visible_h = min(box[3], size[1]) - max(box[1], 0)
        whole = (box[2] - box[0]) * (box[3] - box[1])
        inside = box[0] >= 0 and box[1] >= 0 and box[2] <= size[0] and box[3] <= size[1]
        if not inside and visible_w > 0 and visible_h > 0 and visible_w * visible_h >= CUT_MIN_VISIBLE * whole:
            cut_faces.append((index, side, tuple(float(v) for v in box)))
    return crop, size, cut_faces


def media_uploads(group: np.ndarray, group_faces, plain_event, hostile_event, dnp: dict[int, uuid.UUID]) -> list:
    """(MediaUpload, bytes, job, event, blur regions) of each multi-frame upload: animated GIF, WebP and APNG,
    MP4 (OpenCV's MPEG-4 part 2, 10 fps; PyAV's H.264, 30 fps), WebM and MOV, each at most 640x360. Some show a
    DNP member's face only after a faceless frame 0: two animations, and a 30 fps video in which one walks in
    between two detections (every 0.2 s), walks off and comes back elsewhere, while another DNP member stands."""
    from tests.media_samples import animation, video

    scale = MEDIA_SIDE / group.shape[0]
    small = cv2.resize(group, (round(group.shape[1] * scale), MEDIA_SIDE), interpolation=cv2.INTER_AREA)
    everyone = [(index, tuple(float(v) * scale for v in face.box)) for index, face in enumerate(group_faces)]
    walker = min(dnp, default=0)
    portrait, box = guest(group, group_faces[walker].box, scale=1.2)
    crowd = faceless_then(small, everyone)
    alone = faceless_then(portrait, [(walker, box)])
    walking = walking_scene(group, group_faces, dnp)
    uhd = uhd_scene(group, group_faces)
    variable_times = variable_rate_times(len(walking.frames))
    region = [{"x": 0.1, "y": 0.1, "w": 0.2, "h": 0.2}]

    def made(name: str, kind: str, scene: Scene, data: bytes, event) -> MediaUpload:
        frames = len(decode_media(data, kind)[1])
        assert frames == len(scene.frames), f"{name}: {frames} frames decoded of the {len(scene.frames)} encoded"
        faces = dnp if event is hostile_event else {}
        shown = [tuple((faces[index], box) for index, box in seen if index in faces) for seen in scene.shown]
        return MediaUpload(name, kind, frames, tuple(shown))

    # thumbnail_dims in the event without DNP members once published a still as the upload itself.
    uploads = [
        ("animated GIF", "animated", crowd, animation(crowd.frames, "GIF"), "thumbnail_dims", plain_event, []),
        ("APNG", "animated", crowd, animation(crowd.frames, "PNG"), "thumbnail_dims", plain_event, []),
        ("MP4", "video", crowd, video(crowd.frames, ".mp4"), "thumbnail_dims", plain_event, []),
        ("MP4 with a blur region", "video", crowd, video(crowd.frames, ".mp4"), "thumbnail_dims", plain_event,
         region),
        ("animated WebP", "animated", crowd, animation(crowd.frames, "WEBP"), "face_process", hostile_event, []),
        ("WebM", "video", crowd, video(crowd.frames, ".webm"), "face_process", hostile_event, []),
        ("MOV", "video", crowd, video(crowd.frames, ".mov"), "thumbnail_dims", hostile_event, []),
        ("animated WebP, DNP face after a faceless frame 0", "animated", alone, animation(alone.frames, "WEBP"),
         "face_process", hostile_event, []),
        ("animated GIF, DNP face after a faceless frame 0", "animated", alone, animation(alone.frames, "GIF"),
         "thumbnail_dims", hostile_event, []),
        ("MP4 30 fps H.264, DNP face walks in after frame 0", "video", walking, h264(walking.frames, fps=30),
         "face_process", hostile_event, []),
        ("MP4, variable frame rate 30-20-30 fps", "video", walking, h264(walking.frames, 30, variable_times),
         "face_process", hostile_event, []),
        ("MP4 4K, faces 30-35 px", "video", uhd, h264(uhd.frames, fps=30), "face_process", hostile_event, []),
    ]  # fmt: skip
    return [
        (made(name, kind, scene, data, event), data, job, event, regions)
        for name, kind, scene, data, job, event, regions in uploads
    ]


def still_uploads(group: np.ndarray, group_faces, plain_event, hostile_event, dnp: dict[int, uuid.UUID]) -> list:
    """(name, bytes, job, event) of each still whose bytes hold more than the one picture shown, or show it
    turned (tests/still_samples.py). Those with a picture hidden in the bytes show a guest who is no DNP
    member and hide t1 (or a DNP member's portrait) elsewhere: an MP4 after the end, an Exif thumbnail, XMP's
    GImage:Data, a JPEG after the end, an MPO picture behind an Ultra HDR marker or not. The others show t1
    with an Exif or irot orientation, in a PNG's alpha channel, or turned in the picture itself."""
    from tests import still_samples as made
    from tests.media_samples import video

    plain_guest = next((i for i in range(len(group_faces)) if i not in dnp), 0)
    shown = np.ascontiguousarray(guest(group, group_faces[plain_guest].box, scale=1.0)[0])
    portrait = made.jpeg(guest(group, group_faces[min(dnp, default=0)].box, scale=1.0)[0])
    return [
        ("motion photo", made.motion_photo(shown, video([group] * 4, ".mp4")), "face_process", hostile_event),
        ("Exif thumbnail", made.with_segments(shown, made.exif(thumbnail=portrait)), "thumbnail_dims", hostile_event),
        ("XMP GImage:Data", made.with_segments(shown, made.gimage(portrait)), "face_process", hostile_event),
        ("JPEG after the end", made.with_segments(shown, after=made.jpeg(group)), "thumbnail_dims", hostile_event),
        ("JPEG after the end, no DNP member", made.with_segments(shown, after=made.jpeg(group)), "thumbnail_dims",
         plain_event),
        ("Ultra HDR MPO", made.mpo(shown, group, ultra_hdr=True), "face_process", hostile_event),
        ("MPO", made.mpo(shown, group), "thumbnail_dims", hostile_event),
        ("JPEG, Exif orientation 6", made.oriented_jpeg(group, 6), "face_process", hostile_event),
        ("JPEG, Exif orientation 3", made.oriented_jpeg(group, 3), "thumbnail_dims", hostile_event),
        ("PNG, Exif orientation 6", made.oriented_png(group, 6), "face_process", hostile_event),
        ("HEIC, irot", made.turned_heif(group, 8, "HEIF"), "face_process", hostile_event),
        ("AVIF, irot, no DNP member", made.turned_heif(group, 6, "AVIF"), "thumbnail_dims", plain_event),
        ("PNG, t1 in its alpha channel", made.face_in_alpha(group), "face_process", hostile_event),
        ("t1 turned 90 degrees, no tag", made.jpeg(np.rot90(group, 1)), "face_process", hostile_event),
        ("t1 upside down, no tag", made.jpeg(np.rot90(group, 2)), "thumbnail_dims", hostile_event),
    ]  # fmt: skip


def guest(group: np.ndarray, face_box, scale: float) -> tuple[np.ndarray, Box]:
    """The face at `face_box` (t1's pixels) with half its size around it, resized by `scale`; and its box there."""
    x1, y1, x2, y2 = (float(v) for v in face_box)
    height, width = group.shape[:2]
    left, top = max(0, int(x1 - (x2 - x1) / 2)), max(0, int(y1 - (y2 - y1) / 2))
    right, bottom = min(width, int(x2 + (x2 - x1) / 2)), min(height, int(y2 + (y2 - y1) / 2))
    size = (round((right - left) * scale), round((bottom - top) * scale))
    pixels = cv2.resize(group[top:bottom, left:right], size, interpolation=cv2.INTER_CUBIC)
    return pixels, ((x1 - left) * scale, (y1 - top) * scale, (x2 - left) * scale, (y2 - top) * scale)


def faceless_then(image: np.ndarray, faces: list[tuple[int, Box]], count: int = 4) -> Scene:
    """Frame 0 shows no one (a grey card); every later frame is `image`, with `faces` in it."""
    frames = [np.full_like(image, 128)] + [image.copy() for _ in range(count - 1)]
    return stamped(Scene(frames, [[]] + [list(faces) for _ in range(count - 1)]))


def stamped(scene: Scene) -> Scene:
    """Each frame's index as a row of black and white cells in its bottom-right corner, away from any face: no
    two neighbours alike (GIF and WebP encoders fold identical ones into one, which would change the count)."""
    for index, frame in enumerate(scene.frames):
        height, width = frame.shape[:2]
        for bit in range(7):
            right = width - 4 - bit * 8
            frame[height - 12 : height - 4, right - 8 : right] = 235 if index >> bit & 1 else 16
    return scene


def walking_scene(group: np.ndarray, group_faces, dnp: dict[int, uuid.UUID], count: int = 45) -> Scene:
    """640x360, 45 frames (1.5 s at 30 fps) on a plain gradient. Along the bottom stand a guest who is no DNP
    member and a DNP member (their face from frame 0). Along the top a DNP member walks in at frame 4 (0.133 s,
    between the detections at 0 and 0.2 s), walks right 8 px a frame to frame 19, is gone from frame 20 to 26,
    and comes back at frame 27 (0.9 s, again between two detections) further right, walking left."""
    dnp_indices = sorted(dnp) or [0, 1]
    walker = dnp_indices[0]
    standing = [next(i for i in range(len(group_faces)) if i not in dnp_indices), dnp_indices[-1]]  # two
    width, height = 640, MEDIA_SIDE
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    shade = 150 + 40 * xs + 20 * ys
    base = np.clip(np.dstack([shade - 10, shade, shade + 8]), 0, 255).astype(np.uint8)
    still = []
    for slot, index in enumerate(standing):
        pixels, (x1, y1, x2, y2) = guest(group, group_faces[index].box, scale=0.55)
        left, top = 30 + slot * 200, height - pixels.shape[0] - 16
        base[top : top + pixels.shape[0], left : left + pixels.shape[1]] = pixels
        still.append((index, (left + x1, top + y1, left + x2, top + y2)))
    pixels, (x1, y1, x2, y2) = guest(group, group_faces[walker].box, scale=0.55)
    frames, shown = [], []
    for frame in range(count):
        canvas, seen = base.copy(), list(still)
        if 4 <= frame < 20 or frame >= 27:
            left = 20 + 8 * (frame - 4) if frame < 20 else 500 - 8 * (frame - 27)
            canvas[4 : 4 + pixels.shape[0], left : left + pixels.shape[1]] = pixels
            seen.append((walker, (left + x1, 4 + y1, left + x2, 4 + y2)))
        frames.append(canvas)
        shown.append(seen)
    return stamped(Scene(frames, shown))


def h264(frames: list[np.ndarray], fps: int, times: list[float] | None = None) -> bytes:
    """An MP4 as a phone writes one: H.264 (libx264, yuv420p) at `fps`, through PyAV; with `times`, each
    frame at its own time in a 1/90000 time base (a variable frame rate)."""
    import av

    out = io.BytesIO()
    height, width = frames[0].shape[:2]
    base = Fraction(1, fps) if times is None else Fraction(1, 90000)
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = stream.codec_context.time_base = base
        stream.options = {"crf": "18", "preset": "veryfast"}
        for index, pixels in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts = index if times is None else round(times[index] / base)
            frame.time_base = base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return out.getvalue()


def uhd_scene(group: np.ndarray, group_faces, count: int = 10) -> Scene:
    """3840x2160, t1 shrunk so that its faces are 30-35 px, drifting right 16 px a frame across a grey card."""
    scale = 0.3
    small = cv2.resize(group, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    frames, shown = [], []
    for index in range(count):
        canvas = np.full((2160, 3840, 3), 120, np.uint8)
        x, y = 1400 + 16 * index, 900
        canvas[y : y + small.shape[0], x : x + small.shape[1]] = small
        frames.append(canvas)
        boxes = [
            (i, tuple(float(v) * scale + o for v, o in zip(f.box, (x, y, x, y), strict=True)))
            for i, f in enumerate(group_faces)
        ]
        shown.append(boxes)
    return stamped(Scene(frames, shown))


def variable_rate_times(count: int) -> list[float]:
    """A low-light phone's clock: 30 fps, then 20, then 30 again."""
    third = count // 3
    times = [i / 30 for i in range(third)]
    times += [times[-1] + (i + 1) / 20 for i in range(third)]
    return times + [times[-1] + (i + 1) / 30 for i in range(count - 2 * third)]


def refused_media(group: np.ndarray) -> dict[str, bytes]:
    """Multi-frame uploads the worker must archive: pages (unsupported_media), a GIF longer than
    MEDIA_MAX_DURATION_S (media_too_large), an MP4 cut before its index (undecodable_media)."""
    from django.conf import settings
    from PIL import Image

    small = cv2.resize(group, (160, 111), interpolation=cv2.INTER_AREA)
    pages = [Image.fromarray(cv2.cvtColor(small, cv2.COLOR_BGR2RGB)), Image.fromarray(np.full_like(small, 90))]
    tiff, gif = io.BytesIO(), io.BytesIO()
    pages[0].save(tiff, "TIFF", save_all=True, append_images=pages[1:])
    # Two frames, each three quarters of the longest duration allowed.
    pages[0].save(gif, "GIF", save_all=True, append_images=pages[1:], duration=int(settings.MEDIA_MAX_DURATION_S * 750))
    clip = h264([small[:110], small[:110, ::-1]] * 5, fps=10)  # the moov box comes last: cut, there is none
    return {"multi-page TIFF": tiff.getvalue(), "GIF too long": gif.getvalue(), "MP4 cut short": clip[: len(clip) // 2]}


# -- invariants ----------------------------------------------------------------


def check_invariants(chaos: Chaos) -> None:
    from django.db import connection

    connection.close()
    report = chaos.report
    with db(chaos) as conn:
        left = conn.execute("SELECT count(*) FROM pgmq.q_jobs").fetchone()[0]
        unexplained = conn.execute(
            "SELECT count(*) FROM pgmq.a_jobs WHERE headers->>'archived_reason' IS NULL"
        ).fetchone()[0]
        report.archived = Counter(
            dict(conn.execute("SELECT headers->>'archived_reason', count(*) FROM pgmq.a_jobs GROUP BY 1").fetchall())
        )
    lines = worker_log_lines(chaos)
    report.retries = sum(1 for fields in lines if fields.get("event") == "job_retry")
    report.handled = sum(1 for fields in lines if fields.get("event") in {"job_done", "job_archived"})
    report.invariants["1. every message deleted or archived, with a reason"] = left + unexplained
    snapshot = storage_snapshot(chaos)
    unblurred = unblurred_published_faces(chaos) + unblurred_media_faces(chaos)  # stills, then every clip's frame
    report.invariants["2. no DNP face left unblurred in a published file"] = unblurred
    report.invariants["2. no DNP face cut by the image edge left unblurred to that edge"] = unblurred_edge_cuts(chaos)
    report.invariants["2. no multi-frame upload published as itself"] = media_published_as_itself(chaos, snapshot)
    report.invariants["2. no published still carries more than the one picture it shows"] = extra_pictures(chaos)
    report.invariants["2. no picture in a published still's bytes shows a DNP face"] = hidden_dnp_faces(chaos)
    report.invariants["2. from the hide's commit, no photo public with the changed member's face unblurred"] = (
        exposed_after_hide(chaos, lines)
    )
    report.invariants["2. no photo published before its files existed"] = chaos.early_publications
    report.invariants["3. every key a row points at exists"] = missing_row_keys(chaos)
    report.invariants["3. no orphan left after the workers' own sweeps"] = orphans_left(chaos, snapshot)
    report.invariants["3. no upload object modified or deleted"] = changed_uploads(chaos)
    chaos.replaced_named |= replaced_named_objects(snapshot, chaos.named_etags)
    report.invariants["3. no object a committed row names replaced by another try"] = len(chaos.replaced_named)
    chaos.report.notes += [f"replaced after a row named it: {key}" for key in sorted(chaos.replaced_named)[:5]]
    report.invariants["4. archived photos unpublished, completed ones with N+1 files"] = outcome_mismatches(
        chaos, lines
    )
    report.invariants.setdefault(WORKER_ALIVE, 0)
    report.invariants[ONE_READER_AT_A_TIME] = readers_at_once(chaos, lines)
    report.abandoned_waits = abandoned_waits(chaos, lines)
    report.notes += [sweep_summary(lines), media_summary(chaos, lines)]


def worker_log_lines(chaos: Chaos) -> list[dict]:
    lines = []
    for worker in chaos.workers:
        for text in worker.log.read_text(errors="replace").splitlines():
            if "event=" not in text:
                continue
            fields = {key: value.strip('"') for key, value in LOG_FIELD.findall(text)}
            fields["at"] = text[:23]
            fields["worker"] = worker.log.name
            lines.append(fields)
    return sorted(lines, key=lambda fields: fields["at"])


def log_time(at: str) -> float:
    """A log line's stamp (local time, ms truncated; time.time() in the worker) as epoch seconds."""
    return datetime.strptime(at, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def photo_tries(chaos: Chaos, lines: list[dict]) -> list[Try]:
    """Every try on a photo that came to an end: from the workers' own end-of-try lines (each carries `ms`,
    measured on the monotonic clock from just after the read; the start is the line's stamp less `ms`), and
    the tries the harness cut short by SIGKILL (from pgmq's last_read_at to the kill).

    A try whose database session ended while it ran (a `db_lost` line naming it, or a try running across a
    terminate_backend or PostgreSQL restart) lost its photo's row lock before it ended."""
    tries = list(chaos.killed_tries)
    for fields in lines:
        event = fields.get("event")
        if event not in {"job_done", "job_retry", "job_archived", "db_lost"} or "ms" not in fields:
            continue
        if not is_uuid(fields.get("photo_id", "")):
            continue
        end = log_time(fields["at"])
        start = end - int(fields["ms"]) / 1000
        lost = event == "db_lost" or any(
            kind in SESSION_FAULTS and start < fault_end and fault_start < end
            for kind, fault_start, fault_end in chaos.fault_windows
        )
        tries.append(Try(fields["worker"], fields["msg_id"], fields["photo_id"].lower(), start, end, event, lost))
    return tries


def readers_at_once(chaos: Chaos, lines: list[dict]) -> int:
    """Pairs of tries on one photo by two worker processes whose times overlap (beyond the clock slack), where
    the photo's row lock cannot have kept them apart: the same message twice at once (a reader read a message
    another still ran), or a try that lost its session (its row lock) while it ran.

    Two tries of different messages on one photo, each holding its session to its end, may overlap: every
    photo job starts by locking the photo's row (SELECT ... FOR UPDATE), so the later one waits, inside its
    try, until the earlier one commits or rolls back. Those are counted in a note, not as violations."""
    by_photo: dict[str, list[Try]] = defaultdict(list)
    for attempt in photo_tries(chaos, lines):
        by_photo[attempt.photo_id].append(attempt)
    violations, serialised, pairs = 0, 0, 0
    for tries in by_photo.values():
        tries.sort(key=lambda attempt: attempt.start)
        for index, first in enumerate(tries):
            for second in tries[index + 1 :]:
                if second.start >= first.end - CLOCK_SLACK_S:
                    break
                if second.worker == first.worker:
                    continue
                pairs += 1
                overlap = min(first.end, second.end) - second.start
                if first.msg_id == second.msg_id or first.lost_session or second.lost_session:
                    violations += 1
                    why = "same message" if first.msg_id == second.msg_id else "a try lost its session"
                    chaos.report.notes.append(
                        f"two readers at once on photo {first.photo_id} ({why}, {overlap * 1000:.0f} ms): "
                        f"{first.worker} msg {first.msg_id} ({first.how}) and {second.worker} msg {second.msg_id} "
                        f"({second.how})"
                    )
                else:
                    serialised += 1
    tried = sum(len(tries) for tries in by_photo.values())
    chaos.report.notes.append(
        f"readers at once: {tried} tries on {len(by_photo)} photos (ends from the workers' log lines, starts = end "
        f"- ms, kills from the harness; one host clock, {CLOCK_SLACK_S * 1000:.0f} ms slack); {pairs} pairs by two "
        f"processes overlapped, {serialised} of them different messages kept apart by the photo's row lock"
    )
    return violations


def abandoned_waits(chaos: Chaos, lines: list[dict]) -> list[float | None]:
    """Per abandoned message, seconds from the kill to its next read: pgmq's last_read_at as the monitor saw it;
    for one deleted between two looks, the start of its next try in the workers' lines (end - ms)."""
    waits = []
    for entry in chaos.abandoned:
        read_again = entry.read_again_at
        if read_again is None:
            starts = [
                log_time(fields["at"]) - int(fields["ms"]) / 1000
                for fields in lines
                if fields.get("msg_id") == str(entry.msg_id)
                and fields.get("try") == str(entry.read_ct + 1)
                and "ms" in fields
            ]
            read_again = min(starts, default=None)
        waits.append(None if read_again is None else read_again - entry.killed_at)
        chaos.report.notes.append(
            f"kill of {entry.worker} mid-job: msg {entry.msg_id} (try {entry.read_ct}) "
            + ("never read again" if read_again is None else f"read again {read_again - entry.killed_at:.1f} s later")
        )
    return waits


def published_photos():
    from faces.models import Photo

    return list(Photo.objects.published().select_related("event"))


def unblurred_published_faces(chaos: Chaos) -> int:
    """On the pixels: every face the blur decision marks, in every published still's file, differs strongly from
    the upload as a viewer sees it (its orientation applied). A file of another shape than that (a sideways
    render) counts as one violation at least. (A multi-frame upload's files: unblurred_media_faces.)"""
    from faces.matching import faces_to_blur

    violations = 0
    for photo in published_photos():
        if str(photo.id) in chaos.media_photos:
            continue
        upload = read_image(photo.upload_key)
        files = [(None, photo.public_key)] + [(v.user_id, v.key) for v in photo.variants.all()]
        for viewer, key in files:
            marked = faces_to_blur(photo, viewer)
            if key == photo.upload_key:
                violations += len(marked)  # published as uploaded while a face had to be blurred
                chaos.report.notes += [f"{key}: published as uploaded, face {face.id} marked" for face in marked]
                continue
            rendered = read_image(key)
            if rendered.shape != upload.shape:
                violations += max(1, len(marked))
                chaos.report.notes.append(f"{key} is {rendered.shape[1::-1]}; its upload is seen {upload.shape[1::-1]}")
                continue
            kept = [face for face in marked if difference(face_core(rendered, face), face_core(upload, face)) < BLURRED]
            violations += len(kept)
            chaos.report.notes += [f"{key}: face {face.id} marked, not blurred" for face in kept]
    return violations


def exposed_after_hide(chaos: Chaos, lines: list[dict]) -> int:
    """The member turned on Do Not Publish mid-run (DnpChange): their faces in each photo of the event are the
    ones that reach them at the end (the blur decision of the final state). From the commit of the change's
    reprocess_event (its job_done or job_archived line), no sample may show a photo published whose public
    file does not blur each of them. The note gives the commit's delay and the longest exposure from the send."""
    change = chaos.dnp_change
    if change is None or change.sent_at is None:
        chaos.report.notes.append("dnp change: not made (the run ended first)")
        return 0
    theirs = member_faces(change)
    ended = [fields for fields in lines if fields.get("msg_id") == str(change.msg_id)]
    ended = [f for f in ended if f.get("event") in {"job_done", "job_archived"}]
    committed = log_time(ended[0]["at"]) + CLOCK_SLACK_S if ended else float("inf")
    exposed: dict[str, float] = {}
    violations: set[str] = set()
    for taken, photos in change.samples:
        for photo_id, blurred in photos.items():
            if blurred is not None and not theirs.get(photo_id, set()) <= {str(face) for face in blurred}:
                exposed[photo_id] = taken - change.sent_at
                if taken > committed + 0.001:
                    violations.add(photo_id)
    delay = f"{committed - change.sent_at:.2f} s" if ended else "never"
    chaos.report.notes.append(
        f"dnp change: {sum(1 for faces in theirs.values() if faces)} photos show the member; the hide committed "
        f"{delay} after the send; longest exposure from the send {max(exposed.values(), default=0.0):.2f} s; "
        f"{len(change.samples)} samples"
    )
    return len(violations)


def member_faces(change: DnpChange) -> dict[str, set[str]]:
    """photo id -> ids of its faces that reach the member at their blur threshold (or are unsure), now."""
    from faces.matching import PhotoMatch
    from faces.models import Photo

    theirs = {}
    for photo in Photo.objects.filter(event_id=change.event_id):
        faces = list(photo.faces.order_by("id"))
        if not faces:
            continue
        size = (photo.width, photo.height) if photo.width else None
        match = PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)
        if change.user_id not in match.candidates.user_ids:
            continue
        column = match.candidates.user_ids.index(change.user_id)
        reaches = (match.similarity[:, column] >= match.blur_at) | match.unsure
        theirs[str(photo.id)] = {str(face.id) for face, hit in zip(faces, reaches, strict=True) if hit}
    return theirs


def still_files(photo) -> list[tuple[uuid.UUID | None, str]]:
    """(viewer, key) of every file of a published still, thumbnails included; not the API's own thumbnail."""
    files = [(None, photo.public_key), (None, photo.public_thumb_key)]
    files += [(v.user_id, key) for v in photo.variants.all() for key in (v.key, v.thumb_key)]
    return [(viewer, key) for viewer, key in files if key != photo.upload_thumb_key]


def extra_pictures(chaos: Chaos) -> int:
    """Every published still's file holds one picture, and nothing else a downloader could find in its bytes
    (tests/published_pictures.py: thumbnails, previews, trailers, base64 images, transparency)."""
    from tests.published_pictures import pictures_in

    violations, checked = 0, 0
    for photo in published_photos():
        if str(photo.id) in chaos.media_photos:
            continue
        for _, key in still_files(photo):
            found = pictures_in(read_bytes(key))
            checked += 1
            if len(found) != 1:
                violations += 1
                chaos.report.notes.append(f"{key} holds {len(found)} pictures: {', '.join(w for w, _ in found)}")
    chaos.report.notes.append(f"published still files checked for one picture each: {checked}")
    return violations


def hidden_dnp_faces(chaos: Chaos) -> int:
    """Each seeded still with more than one plain picture (or a turned one): every picture that any of its
    published files shows or carries, run through the engine, shows no DNP member of its event at the blur
    threshold, but their own face in their own file."""
    from faces import thresholds
    from faces.models import EventMember, SubjectReference
    from tests.published_pictures import dnp_faces_in

    violations, files = 0, 0
    for photo in (photo for photo in published_photos() if str(photo.id) in chaos.rendered_stills):
        dnp = EventMember.objects.dnp().filter(event_id=photo.event_id).values_list("user_id", flat=True)
        ready = SubjectReference.objects.filter(user_id__in=list(dnp), status=SubjectReference.Status.READY)
        references = [(ref.user_id, ref.engine, np.asarray(ref.embedding, np.float32)) for ref in ready]
        for viewer, key in still_files(photo):
            others = {str(user): emb for user, _, emb in references if user != viewer}
            blur = min((thresholds.for_engine(engine).blur or 0.0 for _, engine, _ in references), default=0.0)
            shown = dnp_faces_in(read_bytes(key), others, blur) if others else []
            files += 1
            violations += len(shown)
            chaos.report.notes += [f"{chaos.rendered_stills[str(photo.id)]}: {key}: {where}" for where in shown]
    chaos.report.notes.append(f"rendered stills: {files} published files run through the engine for DNP faces")
    return violations


def missing_row_keys(chaos: Chaos) -> int:
    from faces.models import Photo, PhotoVariant

    client = chaos.s3.client()
    keys = [k for row in Photo.objects.values_list("public_key", "public_thumb_key") for k in row if k]
    keys += [k for row in PhotoVariant.objects.values_list("key", "thumb_key") for k in row]
    return sum(1 for key in keys if not object_exists(client, key))


def orphans_left(chaos: Chaos, snapshot: Snapshot) -> int:
    """Orphans still there once the workers had their sweep intervals; and how long any orphan lived."""
    watch, now = chaos.orphan_watch, time.monotonic()
    left = orphan_keys(snapshot)
    watch.observe(left, snapshot.taken)
    chaos.report.orphans_seen = watch.seen()
    chaos.report.orphan_longest_s, key = watch.longest(now)
    chaos.report.notes.append(
        f"storage monitor: {watch.samples} samples, one every {watch.mean_interval():.2f} s on average, "
        f"{watch.skipped} skipped during faults"
        + (f"; longest-lived orphan: {key} ({chaos.report.orphan_longest_s:.1f} s)" if key else "")
    )
    for key in sorted(left)[:5]:
        chaos.report.notes.append(f"orphan left: {key}, first seen {now - watch.open[key]:.1f} s ago")
    return len(left)


def media_published_as_itself(chaos: Chaos, snapshot: Snapshot) -> int:
    """Photos with a multi-frame upload published as themselves or not rendered frame by frame: what the monitor
    saw while the run went on, the end's rows and bucket, and each published clip's files (named as the upload, of
    another kind than .webp for an animation or .mp4 for a video, another frame count than the upload's, a
    thumbnail that is no JPEG, a media_type other than the clip's or no duration)."""
    from faces.models import Photo

    exposed: dict[str, set[str]] = defaultdict(set)
    for photo_id, why in chaos.media_exposed | exposed_media(snapshot, chaos.media_photos, chaos.refused_media):
        exposed[photo_id].add(why)
    checked = 0
    for photo in Photo.objects.published().filter(id__in=list(chaos.media_photos)):
        upload, problems = chaos.media_photos[str(photo.id)], exposed[str(photo.id)]
        if photo.media_type != upload.kind or not photo.duration_ms:
            problems.add(f"media_type {photo.media_type}, duration_ms {photo.duration_ms}")
        files = [(photo.public_key, photo.public_thumb_key)] + [(v.key, v.thumb_key) for v in photo.variants.all()]
        for key, thumb in files:
            checked += 1
            if {key, thumb} & {photo.upload_key, photo.upload_thumb_key}:
                problems.add(f"published as itself: {key}, {thumb}")
                continue
            if not key.endswith(f".{MEDIA_EXTENSIONS[upload.kind]}") or not thumb.endswith("_thumb.jpg"):
                problems.add(f"a file of another kind: {key}, {thumb}")
            if not read_bytes(thumb).startswith(b"\xff\xd8\xff"):
                problems.add(f"a thumbnail that is no JPEG: {thumb}")
            frames = len(decode_media(read_bytes(key), upload.kind)[1])
            if frames != upload.frames:
                problems.add(f"{frames} frames in {key}, {upload.frames} in the upload")
    named = {**{pid: upload.name for pid, upload in chaos.media_photos.items()}, **chaos.refused_media}
    for photo_id in sorted(photo_id for photo_id, problems in exposed.items() if problems):
        chaos.report.notes.append(
            f"multi-frame upload published as itself: photo {photo_id} ({named[photo_id]}): "
            + "; ".join(sorted(exposed[photo_id])[:3])
        )
    chaos.report.notes.append(
        f"multi-frame files: {checked} published files of {len(chaos.media_photos)} clips checked against their "
        f"uploads (kind, frame count, JPEG poster); {len(chaos.refused_media)} refused uploads never published"
    )
    return sum(1 for problems in exposed.values() if problems)


def unblurred_media_faces(chaos: Chaos) -> int:
    """On the pixels, frame by frame: in every published file of a multi-frame upload, each DNP member's face the
    seed pasted into a frame (its owner's own file aside), and each face row the blur decision marks for that file
    (at the frame of its frame_time), differs strongly from the upload's frame in each quarter of its middle.

    The seed's truth comes first: a DNP face the worker did not detect, or whose track did not reach a frame
    between two detections, is a violation. The owner's own file, where their face stays, shows what the codecs
    alone change: the note gives its largest figure next to the blurred faces' smallest (MEDIA_BLURRED between).
    """
    from faces.matching import faces_to_blur
    from faces.models import Photo

    violations, checked = 0, 0
    own: list[float] = []  # a DNP member's face in their own file: intact, unless a neighbour's blur reaches it
    blurred: list[tuple[float, str]] = []
    missed: list[str] = []
    for photo in Photo.objects.published().filter(id__in=list(chaos.media_photos)):
        upload = chaos.media_photos[str(photo.id)]
        times, source = decode_media(read_bytes(photo.upload_key), upload.kind)
        files = [(None, photo.public_key)] + [(v.user_id, v.key) for v in photo.variants.all()]
        for viewer, key in files:
            rendered = decode_media(read_bytes(key), upload.kind)[1]
            height, width = source[0].shape[:2]
            to_check: list[tuple[int, Box, str]] = []
            for frame, shown in enumerate(upload.dnp):
                for owner, box in shown:
                    if owner == viewer:
                        if frame < len(rendered):
                            own.append(face_change(rendered[frame][:height, :width], source[frame], box))
                        continue
                    to_check.append((frame, box, f"DNP member {str(owner)[:8]}'s face (seed)"))
            for face in faces_to_blur(photo, viewer):
                frame = frame_at(times, face.frame_time)
                box = (face.box_x * width, face.box_y * height, (face.box_x + face.box_w) * width,
                       (face.box_y + face.box_h) * height)  # fmt: skip
                if not any(f == frame and iou(box, b) >= 0.3 for f, b, _ in to_check):
                    to_check.append((frame, box, f"face row track {face.track} (marked)"))
            for frame, box, what in to_check:
                checked += 1
                if frame >= len(rendered):
                    violations += 1  # frames missing: the frame-count check names it
                    continue
                change = face_change(rendered[frame][:height, :width], source[frame], box)
                where = (
                    f"{upload.name}, {'public' if viewer is None else 'own'} file {key.rsplit('/', 1)[-1]}, "
                    f"frame {frame} ({times[frame]:.3f} s): {what} at {tuple(round(v) for v in box)}, "
                    f"change {change:.1f}"
                )
                if change < MEDIA_BLURRED:
                    violations += 1
                    missed.append(where)
                else:
                    blurred.append((change, where))
    intact = [change for change in own if change < MEDIA_BLURRED]
    note = (
        f"multi-frame DNP faces: {checked} (file, frame, face) checked, threshold {MEDIA_BLURRED:g} per quarter; "
        f"least blurred: {min(blurred, default=(0.0, 'none'))[1]}; DNP members' own faces in their own files: "
        f"{len(intact)} intact (codec alone), changed at most {max(intact, default=float('nan')):.1f}, "
        f"{len(own) - len(intact)} blurred there too (fail-closed: a neighbour's track, an unidentifiable DNP member)"
    )
    if missed:
        note += f"; NOT blurred: {'; '.join(missed[:8])}" + (
            f" (and {len(missed) - 8} more)" if len(missed) > 8 else ""
        )
    chaos.report.notes.append(note)
    return violations


def decode_media(data: bytes, kind: str) -> tuple[list[float], list[np.ndarray]]:
    """Every frame's time (seconds from the first, as the worker counts them) and BGR pixels: an animation as
    Pillow composes it (seek, convert("RGB")), a video as PyAV decodes it."""
    if kind == "video":
        import av

        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            decoded = [(frame.pts, frame.to_ndarray(format="bgr24")) for frame in container.decode(stream)]
            first = min((pts for pts, _ in decoded if pts is not None), default=0)
            times = [float((pts - first) * stream.time_base) if pts is not None else 0.0 for pts, _ in decoded]
        return times, [pixels for _, pixels in decoded]
    from PIL import Image

    times, frames, start = [], [], 0
    with Image.open(io.BytesIO(data)) as image:
        for index in range(getattr(image, "n_frames", 1)):
            image.seek(index)
            frames.append(cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR))
            times.append(start / 1000)
            start += int(image.info.get("duration", 0) or 0)
    return times, frames


def frame_at(times: list[float], time: float | None) -> int:
    """The index of the frame shown at `time` (the last one starting at or before it)."""
    if time is None:
        return 0
    return max((index for index, start in enumerate(times) if start <= time + 1e-3), default=0)


def face_change(rendered: np.ndarray, source: np.ndarray, box: Box) -> float:
    """The smallest mean absolute difference over the four quarters of a face's middle (60 % of its box): a blur
    changes all four; a codec, or a blur box that lags a moving face, leaves one nearly as it was."""
    height, width = source.shape[:2]
    x1, y1, x2, y2 = box
    cx1, cx2 = max(0, int(x1 + 0.2 * (x2 - x1))), min(width, int(x1 + 0.8 * (x2 - x1)))
    cy1, cy2 = max(0, int(y1 + 0.2 * (y2 - y1))), min(height, int(y1 + 0.8 * (y2 - y1)))
    mx, my = (cx1 + cx2) // 2, (cy1 + cy2) // 2
    quarters = [(slice(cy1, my), slice(cx1, mx)), (slice(cy1, my), slice(mx, cx2)),
                (slice(my, cy2), slice(cx1, mx)), (slice(my, cy2), slice(mx, cx2))]  # fmt: skip
    return min(difference(rendered[rows, columns], source[rows, columns]) for rows, columns in quarters)


def unblurred_edge_cuts(chaos: Chaos) -> int:
    """On the pixels, each DNP face a crop cuts with the image edge: over the whole visible middle of the face,
    up to the edge, every published file but its owner's differs strongly from the upload.

    The face rows hold only the visible part of such a face; the harness knows the whole box, so the check does
    not depend on the worker's decisions: a cut DNP face that was not detected, or not matched, is a violation.
    The note says which it was.
    """
    from faces.matching import faces_to_blur
    from faces.models import Photo

    by_photo: dict[str, list[EdgeCut]] = defaultdict(list)
    for cut in chaos.edge_cuts:
        by_photo[cut.photo_id].append(cut)
    violations, checked = 0, 0
    seen: Counter = Counter()
    missed: list[str] = []
    for photo in Photo.objects.published().filter(id__in=list(by_photo)):
        upload = read_image(photo.upload_key)
        stored = list(photo.faces.all())
        files = [(None, photo.public_key)] + [(v.user_id, v.key) for v in photo.variants.all()]
        marked = {viewer: {face.id for face in faces_to_blur(photo, viewer)} for viewer, _ in files}
        for cut in by_photo[str(photo.id)]:
            face = cut.stored_face(stored)
            seen["placed"] += 1
            if face is None or face.id not in marked[None]:
                seen["not detected" if face is None else "detected, not marked"] += 1
                similarity = "" if face is None or face.similarity is None else f", similarity {face.similarity:.3f}"
                what = "not detected" if face is None else "not marked"
                missed.append(
                    f"t1 face {cut.face}, {cut.side} cut, {cut.visible_share():.0%} visible, {what}{similarity}"
                )
            for viewer, key in files:
                if viewer == cut.owner:
                    continue
                checked += 1
                if key == photo.upload_key:
                    violations += 1
                    continue
                rows, columns = cut.core()
                violations += difference(read_image(key)[rows, columns], upload[rows, columns]) < BLURRED
    chaos.report.notes.append(
        f"edge-cut DNP faces in published photos: {seen['placed']} (>= {CUT_MIN_VISIBLE:.0%} of the box visible); "
        f"checked to the edge in {checked} files; not blurred in the public file: {seen['not detected']} not "
        f"detected, {seen['detected, not marked']} detected below the blur threshold"
        + (f" ({'; '.join(missed)})" if missed else "")
    )
    return violations


def sweep_summary(lines: list[dict]) -> str:
    """What the workers' own sweeps did, from their log lines."""
    count: Counter = Counter(fields.get("event") for fields in lines)
    deleted = sum(int(f.get("deleted", 0)) for f in lines if f.get("event") in {"sweep", "sweep_storage"})
    pending = [float(f.get("pending_s", 0)) for f in lines if f.get("event") == "sweep_retried"]
    return (
        f"workers' sweeps: {count['sweep']} photo sweeps deleted objects, {count['sweep_failed']} failed "
        f"(remembered), {count['sweep_retried']} retried when idle (pending at most {max(pending, default=0):.1f} s), "
        f"{count['sweep_storage']} full storage sweeps; {deleted} objects deleted in all"
    )


def media_summary(chaos: Chaos, lines: list[dict]) -> str:
    """How each multi-frame upload's jobs ended, from the workers' log lines: the clips, and those refused."""

    def ended(photos) -> str:
        ends = Counter(
            fields.get("reason") or fields.get("outcome")
            for fields in lines
            if fields.get("photo_id") in photos and fields.get("event") in {"job_done", "job_archived"}
        )
        return ", ".join(f"{what} {count}" for what, count in sorted(ends.items())) or "never"

    return (
        f"multi-frame uploads: {len(chaos.media_photos)} clips, their jobs ended: {ended(chaos.media_photos)}; "
        f"{len(chaos.refused_media)} to refuse, their jobs ended: {ended(chaos.refused_media)}"
    )


def changed_uploads(chaos: Chaos) -> int:
    client = chaos.s3.client()
    changed = 0
    for key, digest in chaos.upload_hashes.items():
        try:
            body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except Exception:
            changed += 1
            continue
        changed += hashlib.sha256(body).hexdigest() != digest
    return changed


def outcome_mismatches(chaos: Chaos, lines: list[dict]) -> int:
    """The last outcome of each photo's jobs, from the worker's own log lines, against the rows and files."""
    from faces.models import Photo

    last: dict[str, str] = {}
    refused: dict[str, str] = {}
    for fields in lines:
        if fields.get("detail") == "already_rendered":
            continue  # a thumbnail_dims after a render changes nothing: the photo is as the job before left it
        if "photo_id" in fields and fields.get("event") in {"job_done", "job_archived"}:
            if fields.get("outcome") in {"completed", "archived"}:
                last[fields["photo_id"]] = fields["outcome"]
            if fields.get("reason") in REFUSALS and fields["photo_id"] in chaos.media_photos:
                refused[fields["photo_id"]] = fields["reason"]
    mismatches = 0
    for photo in Photo.objects.filter(id__in=[p for p in last if is_uuid(p)]):
        outcome = last[str(photo.id)]
        if outcome == "archived" and photo.processed_at is not None:
            mismatches += 1
        elif outcome == "completed" and (photo.processed_at is None or not expected_files_present(chaos, photo)):
            mismatches += 1
            chaos.report.notes.append(f"photo {photo.id} completed without its files")
    # A clip of the seed is processed like a photo: the worker refusing one (as it once refused them all) is not.
    for photo_id, reason in sorted(refused.items()):
        mismatches += 1
        chaos.report.notes.append(f"clip refused: photo {photo_id} ({chaos.media_photos[photo_id].name}): {reason}")
    return mismatches


def expected_files_present(chaos: Chaos, photo) -> bool:
    """N DNP subjects matched → N+1 files and thumbnails under the current version; none when nothing is blurred,
    unless the upload is an animation or a video (it is never published as itself: its N+1 files always)."""
    from faces.matching import faces_to_blur
    from faces.models import EventMember
    from faces.rendering.keys import photo_prefix

    dnp = set(EventMember.objects.dnp().filter(event_id=photo.event_id).values_list("user_id", flat=True))
    own = {face.matched_user_id for face in photo.faces.all() if face.matched_user_id in dnp}
    needs_files = bool(photo.blur_regions) or bool(faces_to_blur(photo, None))
    # The committed try's folder (v{version}.{try}/); any try's folder of the version when nothing was rendered.
    rendered = photo.public_key != photo.upload_key
    version_folders = f"{photo_prefix(photo.event_id, photo.id)}v{photo.variant_version}."
    prefix = photo.public_key.rsplit("/", 1)[0] + "/" if rendered else version_folders
    listed = chaos.s3.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("KeyCount", 0)
    if not needs_files and str(photo.id) not in chaos.media_photos and str(photo.id) not in chaos.rendered_stills:
        return listed == 0 and not rendered
    return rendered and listed == 2 * (1 + len(own))


def read_bytes(key: str) -> bytes:
    from django.core.files.storage import default_storage

    with default_storage.open(key, "rb") as handle:
        return handle.read()


def read_image(key: str) -> np.ndarray:
    """The file as a viewer sees it: its orientation applied, transparency over white."""
    from tests.published_pictures import shown

    return shown(read_bytes(key))
