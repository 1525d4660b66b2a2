"""Capacity: what one reader does in an hour, what each job asks of PostgreSQL and of storage, and how many readers
one database holds before the queue itself is the bottleneck.

One reader is one worker process on one CPU thread (ORT_INTRA_OP_THREADS=1), through the real worker loop
(bench/pipeline.py's `upload` and `drain`: embedded PostgreSQL, SeaweedFS S3, buffalo_s):
- photos: t1 scaled to 3, 12, 24 and 48 MP with light noise, six guests, two DNP members (3 files + 3 thumbnails),
  --photos of each, in one drain: photos per hour;
- clips: bench/media.py's clip (a group of six walking, H.264 30 fps with sound), --clip-seconds long, at 720p, 1080p
  and 4K, one each: seconds of clip per hour.
Per job, every statement its two connections sent (the loop's and the heartbeat's), by kind, and every storage
call; a drain of an empty queue (the reader's start and stop) is measured too and taken off.

The queue: N threads, each on its own connection, read and delete no-op messages as a reader's loop does
(pgmq.read, then DELETE in a transaction) from a full queue for --queue-seconds: messages per second with N
readers at once, on the embedded server sharing this machine's cores with the threads.

The GPU row waits for a device: not measured here.

Usage: python bench/capacity.py [--mp 3 12 24 48] [--photos 2] [--clips 720p 1080p 4K] [--clip-seconds 5]
                                [--readers 1 2 4 8 16] [--queue-seconds 3]
"""

import argparse
import contextlib
import math
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import media, pipeline  # noqa: E402

# Storage calls counted (django-storages' S3Storage): each is one request or more.
STORAGE_CALLS = ("_save", "_open", "exists", "delete", "size", "listdir")
WIDTH_PER_MP = {3: (2000, 1500), 12: (4000, 3000), 24: (5656, 4242), 48: (8000, 6000)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mp", nargs="+", type=int, default=[3, 12, 24, 48], choices=sorted(WIDTH_PER_MP))
    parser.add_argument("--photos", type=int, default=2, help="photos of each size")
    parser.add_argument("--clips", nargs="+", default=["720p", "1080p", "4K"], choices=sorted(media.SIZES))
    parser.add_argument("--clip-seconds", type=float, default=5.0)
    parser.add_argument("--readers", nargs="+", type=int, default=[1, 2, 4, 8, 16], help="queue readers at once")
    parser.add_argument("--queue-seconds", type=float, default=3.0)
    args = parser.parse_args()
    os.environ["ORT_INTRA_OP_THREADS"] = "1"

    with pipeline.worker_services("bench-capacity-"):
        run(args)


def run(args) -> None:
    event = pipeline.seed_event(pipeline.scene(*WIDTH_PER_MP[12]))
    idle = measured(event, [])
    rows = []
    for mp in args.mp:
        from faces.media.upload import encode_jpeg

        data = encode_jpeg(pipeline.scene(*WIDTH_PER_MP[mp]))
        measured(event, [(data, "jpg")])  # the first job at a size pays onnxruntime's buffers: not timed
        rows.append((f"{mp} MP photo", "photos", 1.0, measured(event, [(data, "jpg")] * args.photos).less(idle)))
    for name in args.clips:
        data = media.video_clip(*media.SIZES[name], args.clip_seconds)
        rows.append((f"{name} clip", "s of clip", args.clip_seconds, measured(event, [(data, "mp4")]).less(idle)))
    print_jobs(rows, args)
    print_queue(queue_rates(args.readers, args.queue_seconds), rows, args)


class Tally:
    """What a drain did: seconds, jobs, statements by kind (both of a reader's connections), storage calls."""

    def __init__(self):
        self.seconds, self.jobs = 0.0, 0
        self.statements: Counter = Counter()
        self.storage: Counter = Counter()
        self._lock = threading.Lock()

    def statement(self, execute, sql, params, many, context):
        with self._lock:
            self.statements[statement_kind(sql)] += 1
        return execute(sql, params, many, context)

    def storage_call(self, name: str) -> None:
        with self._lock:
            self.storage[name] += 1

    def less(self, idle: "Tally") -> "Tally":
        """Per job: this drain less an empty one, divided by its jobs."""
        per_job = Tally()
        per_job.jobs = self.jobs
        per_job.seconds = (self.seconds - idle.seconds) / self.jobs
        per_job.statements = Counter({k: (v - idle.statements[k]) / self.jobs for k, v in self.statements.items()})
        per_job.storage = Counter({k: (v - idle.storage[k]) / self.jobs for k, v in self.storage.items()})
        return per_job


def statement_kind(sql: str) -> str:
    """queue: pgmq's tables and functions, the reader's advisory locks and names; rows: the photo's rows."""
    if "pgmq" in sql or "advisory" in sql or "application_name" in sql or "pg_backend_pid" in sql:
        return "queue"
    return "rows"


def measured(event, uploads: list[tuple[bytes, str]]) -> Tally:
    """Upload each, then one drain of the queue by the real worker, counted."""
    from faces.models import Photo

    ids = [pipeline.upload(event, data, ext) for data, ext in uploads]
    tally = Tally()
    with counted(tally):
        tally.seconds = pipeline.drain()
    tally.jobs = len(ids)
    published = Photo.objects.filter(id__in=ids, processed_at__isnull=False).count()
    assert published == len(ids), f"{len(ids) - published} bench uploads were not published"
    return tally


@contextlib.contextmanager
def counted(tally: Tally):
    """Every statement of the loop's connection and of the connections the reader opens (its heartbeat's), and
    every storage call, into `tally`."""
    from django.db import connection, connections
    from storages.backends.s3 import S3Storage

    create = connections.create_connection

    def create_counted(alias):
        opened = create(alias)
        opened.execute_wrappers.append(tally.statement)
        return opened

    originals = {name: getattr(S3Storage, name) for name in STORAGE_CALLS}

    def counting(name):
        def call(self, *args, **kwargs):
            tally.storage_call(name)
            return originals[name](self, *args, **kwargs)

        return call

    connections.create_connection = create_counted
    for name in STORAGE_CALLS:
        setattr(S3Storage, name, counting(name))
    try:
        with connection.execute_wrapper(tally.statement):
            yield
    finally:
        del connections.create_connection
        for name, original in originals.items():
            setattr(S3Storage, name, original)


def queue_rates(readers: list[int], seconds: float) -> dict[int, float]:
    """{N: messages read and deleted per second by N reader threads at once}."""
    import psycopg
    from django.db import connection

    uri = os.environ["DATABASE_URL"]
    rates = {}
    for count in readers:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("DELETE FROM pgmq.q_jobs")
            conn.execute(
                "SELECT pgmq.send_batch('jobs', array_agg(jsonb_build_object('job', 'bench_noop', 'photo_id', "
                "gen_random_uuid()::text))) FROM generate_series(1, %s)",
                [max(20_000, count * 4_000)],
            )
        done, stop = Counter(), threading.Event()
        threads = [threading.Thread(target=read_and_delete, args=(uri, done, index, stop)) for index in range(count)]
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        rates[count] = sum(done.values()) / seconds
    connection.close()
    return rates


def read_and_delete(uri: str, done: Counter, index: int, stop: threading.Event) -> None:
    """A reader's loop with a job that does nothing: read one message, delete it in a transaction."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute("SELECT msg_id FROM pgmq.read('jobs', 30, 1)").fetchone()
            if row is None:
                return
            with conn.transaction():
                conn.execute("DELETE FROM pgmq.q_jobs WHERE msg_id = %s", [row[0]])
            done[index] += 1


def print_jobs(rows: list[tuple[str, str, float, Tally]], args) -> None:
    print("\n## One reader (one worker process, one CPU thread), through the real worker\n")
    print(
        f"Photos: {args.photos} of each size in one drain, after one untimed; clips: {args.clip_seconds:g} s each. "
        "Per job, less an empty drain (the reader's start and stop).\n"
    )
    print(
        "| upload | seconds per job | per hour | queue statements | row statements | statements per second "
        "(PostgreSQL load) | storage calls |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, unit, length, tally in rows:
        per_hour = 3600 / tally.seconds * length
        calls = ", ".join(f"{name.strip('_')} {count:g}" for name, count in sorted(tally.storage.items()) if count)
        print(
            f"| {label} | {tally.seconds:.2f} | {per_hour:,.0f} {unit} | {tally.statements['queue']:.1f} | "
            f"{tally.statements['rows']:.1f} | {tally.statements.total() / tally.seconds:.1f} | {calls} |"
        )
    print("| GPU reader | waits for a device | | | | | |")


def print_queue(rates: dict[int, float], rows: list[tuple[str, str, float, Tally]], args) -> None:
    print(f"\n## The queue: read and delete by N readers at once ({args.queue_seconds:g} s each)\n")
    fastest = min(tally.seconds for *_, tally in rows)
    print(
        f"The busiest real reader here ends a job every {fastest:.2f} s: the queue's rate divided by that reader's "
        "jobs per second is how many such readers it serves before it is the bottleneck.\n"
    )
    print("| readers | messages per second | vs 1 reader | readers it serves at the busiest job rate |")
    print("|---:|---:|---:|---:|")
    base = rates[min(rates)]
    for count, rate in rates.items():
        print(f"| {count} | {rate:,.0f} | {rate / base:.2f} | {math.floor(rate * fastest):,} |")


if __name__ == "__main__":
    main()
