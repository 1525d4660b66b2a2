"""What the consumer costs on top of pgmq, and whether the archive slows reads.

1. A raw pgmq read+delete loop vs `run_worker --drain` (the real Worker, a no-op
   handler, logging to a file) over the same number of messages.
2. pgmq.read latency with an empty archive vs 200,000 archived messages.

Both on a throwaway embedded PostgreSQL; every ratio is against a baseline
measured in the same run. Usage: python bench/queue_overhead.py [--messages 5000]
"""

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--archived", type=int, default=200_000)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from momentlens.devservices.postgres import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pgdata").ensure_ready()
        try:
            run(server.uri, Path(tmp), args)
        finally:
            server.stop()


def run(uri: str, tmp: Path, args) -> None:
    import psycopg

    os.environ["DATABASE_URL"] = uri
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    logging.getLogger().handlers = [logging.FileHandler(tmp / "worker.log")]

    from jobqueue.registry import register
    from jobqueue.worker import Worker, WorkerConfig

    register("bench_noop", id_field="photo_id")(lambda payload, ctx: None)
    config = WorkerConfig(visibility_timeout_s=30, retry_backoff_s=1, lock_retry_s=1, idle_poll_s=1, db_recovery_s=10)

    with psycopg.connect(uri, autocommit=True) as conn:
        raw, transactional, worker = [], [], []
        for _ in range(args.rounds):
            fill(conn, args.messages)
            raw.append(timed(lambda: raw_loop(conn)))
            fill(conn, args.messages)
            transactional.append(timed(lambda: transactional_loop(conn)))
            fill(conn, args.messages)
            worker.append(timed(lambda: Worker(config, drain=True).run()))
        raw_s, transactional_s, worker_s = min(raw), min(transactional), min(worker)

        fill(conn, args.reads)
        empty = read_latencies(conn, args.reads)
        conn.execute("DELETE FROM pgmq.q_jobs")
        fill_archive(conn, args.archived)
        fill(conn, args.reads)
        full = read_latencies(conn, args.reads)

    n = args.messages
    print(f"\n## Consumer overhead ({n} messages, best of {args.rounds})\n")
    print("| loop | total s | µs/message | ratio |")
    print("|---|---:|---:|---:|")
    for label, seconds in (
        ("raw pgmq read+delete (baseline)", raw_s),
        ("raw read, then delete in its own transaction (the floor a job transaction sets)", transactional_s),
        ("run_worker --drain, no-op handler", worker_s),
    ):
        print(f"| {label} | {seconds:.2f} | {seconds / n * 1e6:.0f} | {seconds / raw_s:.2f} |")
    print(f"\n## pgmq.read latency ({args.reads} reads each)\n")
    print("| archive | p50 µs | p99 µs | mean µs | ratio (mean) |")
    print("|---|---:|---:|---:|---:|")
    for label, values in (("empty (baseline)", empty), (f"{args.archived:,} archived", full)):
        print(
            f"| {label} | {percentile(values, 50):.0f} | {percentile(values, 99):.0f} | "
            f"{statistics.mean(values):.0f} | {statistics.mean(values) / statistics.mean(empty):.2f} |"
        )


def fill(conn, count: int) -> None:
    conn.execute(
        "SELECT pgmq.send_batch('jobs', array_agg(jsonb_build_object("
        "'job', 'bench_noop', 'photo_id', gen_random_uuid()::text))) FROM generate_series(1, %s)",
        [count],
    )


def fill_archive(conn, count: int) -> None:
    conn.execute(
        "INSERT INTO pgmq.a_jobs (msg_id, read_ct, enqueued_at, vt, message, headers) "
        "SELECT 1000000000 + i, 3, now(), now(), jsonb_build_object('job', 'face_process', 'photo_id', "
        'gen_random_uuid()::text), \'{"archived_reason": "failed"}\'::jsonb FROM generate_series(1, %s) i',
        [count],
    )
    conn.execute("VACUUM ANALYZE pgmq.a_jobs")


def raw_loop(conn) -> None:
    while True:
        row = conn.execute("SELECT msg_id FROM pgmq.read('jobs', 30, 1)").fetchone()
        if row is None:
            return
        conn.execute("SELECT pgmq.delete('jobs', %s::bigint)", [row[0]])


def transactional_loop(conn) -> None:
    while True:
        row = conn.execute("SELECT msg_id FROM pgmq.read('jobs', 30, 1)").fetchone()
        if row is None:
            return
        with conn.transaction():
            conn.execute("DELETE FROM pgmq.q_jobs WHERE msg_id = %s", [row[0]])


def read_latencies(conn, count: int) -> list[float]:
    values = []
    for _ in range(count):
        started = time.perf_counter()
        conn.execute("SELECT msg_id FROM pgmq.read('jobs', 30, 1)").fetchone()
        values.append((time.perf_counter() - started) * 1e6)
    return values


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def percentile(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100)[pct - 1] if pct < 100 else max(values)


if __name__ == "__main__":
    main()
