"""The chaos run behind bench/chaos.py: services, seed, workers, faults, invariants."""

import hashlib
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from jobqueue.messages import is_uuid
from momentlens.devservices.pixels import difference, face_core

ROOT = Path(__file__).resolve().parents[1]
FAULT_KINDS = ("kill", "terminate_backend", "pg_restart", "s3_outage", "second_worker")
BUCKET, ACCESS_KEY, SECRET_KEY = "chaos", "chaos-access-key", "chaos-secret-key"
LOG_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
# A blurred face differs from the upload by far more than JPEG noise does.
BLURRED = 10.0
WORKER_ALIVE = "5. worker alive (no exit the harness did not cause)"


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    events: int = 4
    photos_per_event: int = 20
    faults: int = 14
    fault_gap_s: tuple[float, float] = (2.0, 6.0)
    timeout_s: float = 1500.0


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

    @property
    def violations(self) -> int:
        return sum(self.invariants.values())

    def table(self, seconds: float) -> str:
        rows = ["| what | count |", "|---|---:|", f"| jobs enqueued by the seed | {self.jobs} |"]
        rows += [f"| jobs handled (fan-out and re-sends included; retries not) | {self.handled} |"]
        rows += [f"| fault: {kind} | {self.faults[kind]} |" for kind in FAULT_KINDS]
        rows += [
            f"| failed tries (retried) | {self.retries} |",
            f"| re-sent from archive | {self.resent_from_archive} |",
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
            self._stop_workers()
            check_invariants(self)
        finally:
            self.stop_monitor.set()
            for worker in self.workers:
                if worker.process.poll() is None:
                    worker.process.kill()
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
                "WORKER_HEALTH_PORT": "0",
                "ORT_INTRA_OP_THREADS": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
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
        primary = self.start_worker()
        threading.Thread(target=self._monitor_publications, daemon=True).start()
        deadline = time.monotonic() + self.config.timeout_s
        next_fault = time.monotonic() + self.rng.uniform(*self.config.fault_gap_s)
        resent = False
        while time.monotonic() < deadline:
            primary = self._restart_if_dead(primary)
            if plan and time.monotonic() >= next_fault:
                primary = self._inject(plan.pop(0), primary)
                next_fault = time.monotonic() + self.rng.uniform(*self.config.fault_gap_s)
            if not resent and archived_count(self) >= 3:
                self.report.resent_from_archive = resend_from_archive(self, 3)
                resent = True
            if not plan and queue_length(self) == 0 and (resent or archived_count(self) < 3):
                time.sleep(1.0)  # a job in flight may still enqueue more (reprocess_event)
                if queue_length(self) == 0:
                    return
            time.sleep(0.2)
        self.report.invariants["drained before the timeout"] = 1

    def _restart_if_dead(self, primary: WorkerProcess) -> WorkerProcess:
        for worker in self.workers:
            code = worker.process.poll()
            if code is not None and worker.expected_exit is None:
                worker.expected_exit = f"unexpected exit {code}"
                self.report.invariants[WORKER_ALIVE] = self.report.invariants.get(WORKER_ALIVE, 0) + 1
                self.report.notes.append(f"{worker.log.name} exited {code} on its own")
        if primary.process.poll() is not None:
            return self.start_worker()
        return primary

    def _inject(self, kind: str, primary: WorkerProcess) -> WorkerProcess:
        self.report.faults[kind] += 1
        if kind == "kill":
            primary.expected_exit = "kill"
            primary.process.send_signal(signal.SIGKILL)
            primary.process.wait(30)
            return self.start_worker()
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
        return primary

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

    def _monitor_publications(self) -> None:
        """Sample published photos while the run goes on: each key a row names must already exist."""
        while not self.stop_monitor.wait(1.0):
            if self.s3_down.is_set():
                continue
            try:
                self.early_publications += sample_published_keys(self)
            except Exception:
                continue  # the database or S3 is being restarted by a fault


# -- the database, outside Django: robust to the restarts this run causes ------


class db:
    def __init__(self, chaos: Chaos):
        self.chaos = chaos

    def __enter__(self):
        import psycopg

        for attempt in range(60):
            try:
                self.conn = psycopg.connect(self.chaos.pg.uri, autocommit=True)
                return self.conn
            except psycopg.OperationalError:
                time.sleep(0.5 if attempt < 59 else 0)
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
    for number in range(chaos.config.events):
        event = Event.objects.create(name=f"chaos event {number}")
        for _ in range(2):
            EventMember.objects.create(event=event, user_id=uuid.uuid4())
        if number > 0:  # event 0 has no DNP member: thumbnail_dims publishes without a face pass there
            for face_index in rng.sample(range(len(group_faces)), 2):
                user = uuid.uuid4()
                EventMember.objects.create(event=event, user_id=user, do_not_publish=True)
                reference_id = uuid.uuid4()
                key = save(
                    f"users/{user}/references/{reference_id}.jpg",
                    samples.encode_jpeg(samples.derived_portrait(group, group_faces[face_index].box)),
                )
                SubjectReference.objects.create(id=reference_id, user_id=user, upload_key=key)
                messages.append({"job": "reference_process", "reference_id": str(reference_id)})
        for _ in range(chaos.config.photos_per_event):
            regions = [{"x": 0.02, "y": 0.8, "w": 0.15, "h": 0.15}] if rng.random() < 0.3 else []
            picture = rng.choice(pictures[:2] * 3 + pictures[2:])
            photos.append(photo(event, samples.encode_jpeg(picture), regions))
            job = "thumbnail_dims" if number == 0 or rng.random() < 0.2 else "face_process"
            messages.append({"job": job, "photo_id": str(photos[-1].id)})
    events = list(Event.objects.all())

    hostile_event = events[-1]
    bad_uploads = {
        "corrupt": b"\xff\xd8\xff\xe0" + bytes(rng.randrange(256) for _ in range(4000)),
        "truncated": samples.encode_jpeg(group)[:30000],
        "zero-byte": b"",
        "bomb": samples.png_promising(20_000, 20_000),
        "huge": samples.jpeg_promising(samples.tom_hanks(), 15_000, 12_000),
        "exif-rotated": samples.png_with_orientation(group, orientation=6),
    }
    for data in bad_uploads.values():
        messages.append({"job": "face_process", "photo_id": str(photo(hostile_event, data).id)})
    missing_upload = photo(hostile_event, None)
    messages.append({"job": "face_process", "photo_id": str(missing_upload.id)})
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


# -- invariants ----------------------------------------------------------------


def check_invariants(chaos: Chaos) -> None:
    from django.core.management import call_command
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
    report.invariants["2. no DNP face left unblurred in a published file"] = unblurred_published_faces(chaos)
    report.invariants["2. no photo published before its files existed"] = chaos.early_publications
    report.invariants["3. every key a row points at exists"] = missing_row_keys(chaos)
    call_command("sweep_orphans", stdout=open(os.devnull, "w"))
    report.invariants["3. no derived object without a row (after sweep_orphans)"] = orphaned_objects(chaos)
    report.invariants["3. no upload object modified or deleted"] = changed_uploads(chaos)
    report.invariants["4. archived photos unpublished, completed ones with N+1 files"] = outcome_mismatches(
        chaos, lines
    )
    report.invariants.setdefault(WORKER_ALIVE, 0)


def worker_log_lines(chaos: Chaos) -> list[dict]:
    lines = []
    for worker in chaos.workers:
        for text in worker.log.read_text(errors="replace").splitlines():
            if "event=" not in text:
                continue
            fields = {key: value.strip('"') for key, value in LOG_FIELD.findall(text)}
            fields["at"] = text[:23]
            lines.append(fields)
    return sorted(lines, key=lambda fields: fields["at"])


def published_photos():
    from faces.models import Photo

    return list(Photo.objects.published().select_related("event"))


def unblurred_published_faces(chaos: Chaos) -> int:
    """On the pixels: every face the blur decision marks, in every published file, differs strongly from the upload."""
    from faces.matching import faces_to_blur

    violations = 0
    for photo in published_photos():
        upload = read_image(photo.upload_key)
        files = [(None, photo.public_key)] + [(v.user_id, v.key) for v in photo.variants.all()]
        for viewer, key in files:
            marked = faces_to_blur(photo, viewer)
            if key == photo.upload_key:
                violations += len(marked)  # published as uploaded while a face had to be blurred
                continue
            rendered = read_image(key)
            kept = [face for face in marked if difference(face_core(rendered, face), face_core(upload, face)) < BLURRED]
            violations += len(kept)
    return violations


def missing_row_keys(chaos: Chaos) -> int:
    from faces.models import Photo, PhotoVariant

    client = chaos.s3.client()
    keys = [k for row in Photo.objects.values_list("public_key", "public_thumb_key") for k in row if k]
    keys += [k for row in PhotoVariant.objects.values_list("key", "thumb_key") for k in row]
    return sum(1 for key in keys if not object_exists(client, key))


def orphaned_objects(chaos: Chaos) -> int:
    from faces.rendering.sweep import referenced_keys

    client = chaos.s3.client()
    keys = [
        obj["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="events/")
        for obj in page.get("Contents", [])
    ]
    orphans = 0
    for key in keys:
        parts = key.split("/")
        if len(parts) > 3 and parts[2] == "photos" and key not in referenced_keys(parts[3]):
            orphans += 1
    return orphans


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
    for fields in lines:
        if "photo_id" in fields and fields.get("event") in {"job_done", "job_archived"}:
            if fields.get("outcome") in {"completed", "archived"}:
                last[fields["photo_id"]] = fields["outcome"]
    mismatches = 0
    for photo in Photo.objects.filter(id__in=[p for p in last if is_uuid(p)]):
        outcome = last[str(photo.id)]
        if outcome == "archived" and photo.processed_at is not None:
            mismatches += 1
        elif outcome == "completed" and (photo.processed_at is None or not expected_files_present(chaos, photo)):
            mismatches += 1
    return mismatches


def expected_files_present(chaos: Chaos, photo) -> bool:
    """N DNP subjects matched → N+1 files and thumbnails under the current version; none when nothing is blurred."""
    from faces.matching import faces_to_blur
    from faces.models import EventMember

    dnp = set(EventMember.objects.dnp().filter(event_id=photo.event_id).values_list("user_id", flat=True))
    own = {face.matched_user_id for face in photo.faces.all() if face.matched_user_id in dnp}
    needs_files = bool(photo.blur_regions) or bool(faces_to_blur(photo, None))
    prefix = f"events/{photo.event_id}/photos/{photo.id}/v{photo.variant_version}/"
    listed = chaos.s3.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("KeyCount", 0)
    if not needs_files:
        return listed == 0 and photo.public_key == photo.upload_key
    return listed == 2 * (1 + len(own))


def read_image(key: str) -> np.ndarray:
    from django.core.files.storage import default_storage

    with default_storage.open(key, "rb") as handle:
        data = handle.read()
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
