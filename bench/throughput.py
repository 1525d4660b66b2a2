"""Photos per minute with 1 and 2 reader slots, against the loop before reader slots existed.

40 photos of about 4 MP (t1.jpg's six faces, enlarged, with light noise so each file
differs), 2 DNP members with ready references in their event: each photo is a full
face_process (detect, embed, match, cluster, render 3 files + 3 thumbnails, publish).
Every configuration gets its own 40 photo rows on the same uploads, in the same run,
on one embedded PostgreSQL and filesystem storage:

- "before reader slots": `run_worker --drain` of the repository at --baseline-rev
  (default: the last commit before WORKER_READER_SLOTS), extracted with `git archive`
  and run with this checkout's virtualenv: today's loop, one reader;
- 1 slot: this checkout's `run_worker --drain`, WORKER_READER_SLOTS=1;
- 2 slots: two such processes, WORKER_READER_SLOTS=2.

Each worker runs with ORT_INTRA_OP_THREADS=1. The time runs from the workers' start
until every message is gone (engine loading included: about half a second per
process). Goals: 2 slots >= 1.7x 1 slot; 1 slot no slower than the loop before slots.

Usage: python bench/throughput.py [--photos 40] [--baseline-rev e4db6be] [--repeats 1]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZE = (2309, 1732)  # 4.0 MP


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=40)
    parser.add_argument("--baseline-rev", default="e4db6be", help="the loop before reader slots (git revision)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration, best kept")
    args = parser.parse_args()

    from momentlens.devservices.postgres import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        tmp = Path(tmp)
        postgres = EmbeddedPostgres(tmp / "pgdata").ensure_ready()
        try:
            baseline_tree = extract(args.baseline_rev, tmp / "baseline")
            env = worker_env(postgres.uri, tmp)
            setup_django(env)
            event, uploads = seed(args.photos)
            configs = [
                ("before reader slots (baseline rev)", baseline_tree, 1),
                ("1 slot", ROOT, 1),
                ("2 slots", ROOT, 2),
            ]
            results = {}
            for _ in range(args.repeats):
                for label, tree, readers in configs:
                    seconds = run(tree, readers, env, event, uploads)
                    results[label] = min(results.get(label, seconds), seconds)
            print_table(results, args)
        finally:
            postgres.stop()


def extract(rev: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def worker_env(uri: str, tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R2_", "SENTRY_", "WORKER_"))}
    env.update(
        {
            "DATABASE_URL": uri,
            "MOMENTLENS_VAR_DIR": str(tmp / "var"),
            "ORT_INTRA_OP_THREADS": "1",
            "WORKER_HEALTH_PORT": "0",
            "WORKER_IDLE_POLL_S": "0.2",
            "WORKER_LOCK_RETRY_S": "0.5",
            "WORKER_FULL_SWEEP_S": "0",
            "DJANGO_SETTINGS_MODULE": "momentlens.settings",
            "LOG_LEVEL": "WARNING",
        }
    )
    return env


def setup_django(env: dict) -> None:
    os.environ.update(env)
    import django

    django.setup()


def seed(count: int):
    """bench/pipeline.py's event (two DNP members, references from two of t1's faces) and `count`
    distinct uploads."""
    import cv2
    import numpy as np
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from bench.pipeline import seed_event
    from faces.media.upload import encode_jpeg
    from momentlens.devservices import samples

    base = cv2.resize(samples.group_photo(), SIZE, interpolation=cv2.INTER_CUBIC)
    event = seed_event(base)
    rng = np.random.default_rng(0)
    uploads = []
    for index in range(count):
        noisy = np.clip(base + rng.normal(0, 5, base.shape), 0, 255).astype(np.uint8)
        key = f"events/{event.id}/uploads/bench-{index}.jpg"
        default_storage.save(key, ContentFile(encode_jpeg(noisy)))
        uploads.append(key)
    return event, uploads


def run(tree: Path, readers: int, env: dict, event, uploads: list[str]) -> float:
    """Fresh photo rows on the uploads, one face_process each; `readers` workers drain them."""
    from django.db import connection

    from faces.models import Photo
    from jobqueue import queries

    photo_ids = []
    for key in uploads:
        photo = Photo.objects.create(
            event=event, uploader_id=uuid.uuid4(), upload_key=key, upload_thumb_key=key.replace(".jpg", "_t.jpg")
        )
        photo_ids.append(photo.id)
        with connection.cursor() as cursor:
            queries.send(cursor, f'{{"job": "face_process", "photo_id": "{photo.id}"}}')
    worker_env = {**env, "WORKER_READER_SLOTS": str(readers)}
    started = time.perf_counter()
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "run_worker", "--drain"], cwd=tree, env=worker_env, stderr=subprocess.PIPE
        )
        for _ in range(readers)
    ]
    while queue_length() > 0:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    for worker in workers:
        _, errors = worker.communicate(timeout=120)
        if worker.returncode != 0:
            raise SystemExit(f"a worker of {tree} failed:\n{errors.decode()[-2000:]}")
    published = Photo.objects.filter(id__in=photo_ids, processed_at__isnull=False).count()
    if published != len(uploads):
        raise SystemExit(f"{published} of {len(uploads)} photos published by {tree}")
    return elapsed


def queue_length() -> int:
    from django.db import connection

    from jobqueue import queries

    with connection.cursor() as cursor:
        return queries.metrics(cursor).length


def print_table(results: dict, args) -> None:
    base = results["before reader slots (baseline rev)"]
    one = results["1 slot"]
    print(
        f"\n## face_process throughput, {args.photos} photos of 4.0 MP (6 faces, 2 DNP members), "
        "1 ORT thread per worker\n"
    )
    print("| loop | readers | seconds | photos per minute | ratio vs 1 slot | ratio vs before slots |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, seconds in results.items():
        readers = 2 if label == "2 slots" else 1
        print(
            f"| {label} | {readers} | {seconds:.1f} | {60 * args.photos / seconds:.1f} | {one / seconds:.2f} | "
            f"{base / seconds:.2f} |"
        )
    print(
        f"\nGoals: 2 slots >= 1.7x 1 slot: {one / results['2 slots']:.2f}x; 1 slot no slower than before: "
        f"{base / one:.2f}x (>= 1 is no slower; the run-to-run noise here is a few %)."
    )
    print(f"Machine: {os.cpu_count()} cores; the workers, PostgreSQL and this process share them.")


if __name__ == "__main__":
    main()
