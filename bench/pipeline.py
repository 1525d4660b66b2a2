"""face_process end to end, stage by stage, through the real worker.

A 12 MP group photo (t1.jpg upscaled, light noise so the codec has texture), 6
faces, 2 DNP members with ready references: N+1 = 3 files. Each stage is timed by
wrapping the function that does it; "other" is the rest of the job (row writes,
commit, queue, Python). Then photos per minute at 1 MP and 12 MP, and the 12 MP job under
each detector plan, each on an engine built on it, interleaved in one run: the baseline without the turned levels
(faces turned in the picture: the plan before they were added), the default, and any `--plan`
variant (bench/plans.py). Real embedded PostgreSQL, real SeaweedFS S3, the buffalo_s engine.

With --engine, the same 12 MP job on engine variants beside today's (bench/engine_variants.py).

Usage: python bench/pipeline.py [--photos 3] [--threads 1] [--plan turned_scale=1.0] ... [--engine int8] ...
"""

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = ("detect", "embed")
CODEC = ("decode", "encode")
# What the worker's startup work built (the engine), handed to every drain's jobs as run_worker hands it.
RESOURCES: dict = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=3, help="photos per size for the throughput table")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    parser.add_argument(
        "--plan", nargs="+", action="append", default=[], metavar="KEY=VALUE", help="a detector plan variant"
    )
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        help="an engine variant beside today's (bench/engine_variants.py: batch 4, gpu shapes, int8); repeatable",
    )
    args = parser.parse_args()
    os.environ["ORT_INTRA_OP_THREADS"] = str(args.threads)

    with worker_services("bench-pipeline-"):
        run(args)


@contextlib.contextmanager
def worker_services(prefix: str):
    """A throwaway embedded PostgreSQL and SeaweedFS S3, Django set up on them (the worker's handlers registered,
    S3 as the default storage) and the resident engine loaded: what a reader in this process needs."""
    from momentlens.devservices.postgres import EmbeddedPostgres
    from momentlens.devservices.seaweedfs import SeaweedS3

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        tmp = Path(tmp)
        postgres = EmbeddedPostgres(tmp / "pgdata").ensure_ready()
        s3 = SeaweedS3(tmp / "s3", bucket="bench", access_key="bench-key", secret_key="bench-secret").start()
        try:
            setup_django(postgres.uri, s3)
            yield
        finally:
            s3.stop()
            postgres.stop()


def setup_django(uri: str, s3) -> None:
    os.environ["DATABASE_URL"] = uri
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django
    from django.conf import settings

    django.setup()
    import logging

    logging.disable(logging.INFO)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": s3.storage_options()},
    }
    import faces.jobs  # noqa: F401  (registers the handlers)
    from jobqueue.management.commands.run_worker import run_startup_work

    RESOURCES.update(run_startup_work())


def run(args) -> None:
    timer = StageTimer()
    timer.install()

    twelve = scene(4000, 3000)
    event = seed_event(twelve)
    timer.reset()
    total, faces = process(event, twelve)
    print_stages(timer.seconds, total, faces)

    print("\n## Throughput\n")
    print("| input | photos | seconds each | photos per minute | ratio vs 12 MP |")
    print("|---|---:|---:|---:|---:|")
    per_photo = {}
    for label, (width, height) in (("12 MP (4000x3000)", (4000, 3000)), ("1 MP (1155x866)", (1155, 866))):
        image = scene(width, height)
        started = time.perf_counter()
        for _ in range(args.photos):
            process(event, image)
        per_photo[label] = (time.perf_counter() - started) / args.photos
    base = per_photo["12 MP (4000x3000)"]
    for label, seconds in per_photo.items():
        print(f"| {label} | {args.photos} | {seconds:.2f} | {60 / seconds:.1f} | {base / seconds:.2f} |")
    compare_plans(event, twelve, args)
    if args.engine:
        compare_engines(event, twelve, args)


def compare_engines(event, image, args) -> None:
    """The 12 MP job on each engine variant, the engines taking turns photo by photo; the median of each."""
    from bench.engine_variants import build

    engines = {name: build(name, args.threads) for name in ["today", *args.engine]}
    seconds = on_engines(event, image, args.photos, engines)
    print_medians("engine variant", "engine", seconds, args.photos, against="today")


def compare_plans(event, image, args) -> None:
    """The 12 MP job under each plan, on an engine built on it as the worker builds its own on the photo plan, the
    plans taking turns photo by photo; the median of each."""
    import dataclasses

    from bench.plans import parse_plan
    from faces.engines import build_engine
    from faces.engines.base import PHOTO_PLAN

    plans = {"without turned levels (baseline)": {"turns": ()}, "default": {}}
    plans |= {" ".join(items): parse_plan(items) for items in args.plan}
    engines = {name: build_engine(plan=dataclasses.replace(PHOTO_PLAN, **o)) for name, o in plans.items()}
    seconds = on_engines(event, image, args.photos, engines)
    print_medians("detector plan", "plan", seconds, args.photos, against="baseline")


def on_engines(event, image, photos: int, engines: dict) -> dict[str, list[float]]:
    """Seconds of the job on each engine, the worker's for its turn, the engines taking turns photo by photo."""
    from faces.engines import FACE_ENGINE, resident_engine

    def use(name: str) -> None:
        RESOURCES[FACE_ENGINE] = engines[name]

    seconds = interleaved(event, image, photos, {name: partial(use, name) for name in engines})
    RESOURCES[FACE_ENGINE] = resident_engine()
    return seconds


def interleaved(event, image, photos: int, setups: dict) -> dict[str, list[float]]:
    """Seconds of the job per variant: each variant's setup() run before its turn, the variants taking turns."""
    seconds = {name: [] for name in setups}
    for _ in range(photos):
        for name, setup in setups.items():
            setup()
            seconds[name].append(process(event, image)[0])
    return seconds


def print_medians(what: str, column: str, seconds: dict[str, list[float]], photos: int, against: str) -> None:
    """Each variant's median, and its ratio to the first variant's (`against` names it in the header)."""
    import statistics

    base = statistics.median(next(iter(seconds.values())))
    print(f"\n## face_process at 12 MP by {what} (median of {photos}, {column}s interleaved)\n")
    print(f"| {column} | seconds each | ratio vs {against} |")
    print("|---|---:|---:|")
    for name, runs in seconds.items():
        print(f"| {name} | {statistics.median(runs):.2f} | {statistics.median(runs) / base:.2f} |")


class StageTimer:
    """Wraps the function behind each stage and adds up its wall time."""

    def __init__(self):
        self.seconds = defaultdict(float)

    def reset(self):
        self.seconds.clear()

    def install(self):
        from django.db import connections

        from faces.engines.insightface import InsightFaceEngine
        from faces.jobs import photo_jobs
        from faces.media import still
        from faces.rendering import files, painters

        self._wrap(photo_jobs, "read_object", "fetch")
        self._wrap(still, "_decoded", "decode")
        self._wrap(InsightFaceEngine, "detect", "detect")
        self._wrap(InsightFaceEngine, "embed_many", "embed")
        self._wrap(photo_jobs, "match_faces", "match")
        self._wrap(photo_jobs, "name_and_cluster", "match")
        self._wrap(files, "plan_files", "match")
        self._wrap(painters, "blur_ellipse", "blur")
        self._wrap(painters, "blur_rectangle", "blur")
        self._wrap(still, "jpeg_and_poster", "encode")
        # Uploads run in a pool beside the next file's render and encode; this is the wait
        # left after the last encode.
        self._wrap(files, "_wait_for_all", "upload")
        self._wrap(type(connections["default"]), "commit", "commit")

    def _wrap(self, owner, name, stage):
        original = getattr(owner, name)
        seconds = self.seconds

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[stage] += time.perf_counter() - started

        setattr(owner, name, timed)


def scene(width: int, height: int):
    import cv2
    import numpy as np

    from momentlens.devservices import samples

    image = cv2.resize(samples.group_photo(), (width, height), interpolation=cv2.INTER_CUBIC)
    noise = np.random.default_rng(0).normal(0, 6, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def seed_event(image):
    """An event whose two DNP members have references made from two of the photo's faces."""
    from faces.engines import resident_engine
    from faces.models import Event, EventMember, SubjectReference

    event = Event.objects.create(name="bench")
    found = sorted(resident_engine().analyze(image), key=lambda face: face.box[0])
    for face in (found[0], found[3]):
        user = uuid.uuid4()
        EventMember.objects.create(event=event, user_id=user, do_not_publish=True)
        SubjectReference.objects.create(
            user_id=user,
            upload_key=f"users/{user}/references/bench.jpg",
            status="ready",
            embedding=face.embedding,
            engine=face.engine,
        )
    return event


def process(event, image) -> tuple[float, int]:
    """Upload the image as a JPEG, as the API would, enqueue face_process, run the worker until the queue is
    empty; (seconds, faces stored)."""
    from faces.media.upload import encode_jpeg
    from faces.models import Photo

    photo_id = upload(event, encode_jpeg(image), "jpg")
    elapsed = drain()
    photo = Photo.objects.get(id=photo_id)
    assert photo.processed_at is not None, "the bench photo was not published"
    return elapsed, photo.faces.count()


def upload(event, data: bytes, ext: str) -> uuid.UUID:
    """As the API does: the upload's bytes in storage, its photo row, a face_process message; the photo's id."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.db import connection

    from faces.models import Photo
    from jobqueue import queries

    photo_id = uuid.uuid4()
    key = f"events/{event.id}/uploads/{photo_id}.{ext}"
    default_storage.save(key, ContentFile(data))
    Photo.objects.create(
        id=photo_id,
        event=event,
        uploader_id=uuid.uuid4(),
        upload_key=key,
        upload_thumb_key=f"events/{event.id}/uploads/{photo_id}_thumb.jpg",
    )
    with connection.cursor() as cursor:
        queries.send(cursor, f'{{"job": "face_process", "photo_id": "{photo_id}"}}')
    return photo_id


def drain() -> float:
    """The real worker loop (one reader, in this process) until the queue is empty; its seconds."""
    from jobqueue.worker import Worker, WorkerConfig

    config = WorkerConfig(visibility_timeout_s=600, retry_backoff_s=1, lock_retry_s=1, idle_poll_s=1, db_recovery_s=30)
    started = time.perf_counter()
    Worker(config, drain=True).run(RESOURCES)
    return time.perf_counter() - started


def print_stages(seconds: dict, total: float, faces: int) -> None:
    stages = ["fetch", "decode", "detect", "embed", "match", "blur", "encode", "upload", "commit"]
    other = total - sum(seconds[stage] for stage in stages)
    print(f"\n## face_process, 12 MP, {faces} faces detected (6 people), 2 DNP members (3 files + 3 thumbnails)\n")
    print("| stage | ms | share |")
    print("|---|---:|---:|")
    for stage in stages:
        print(f"| {stage} | {seconds[stage] * 1000:.0f} | {seconds[stage] / total:.1%} |")
    print(f"| other: queue read/delete, row writes, Python | {other * 1000:.0f} | {other / total:.1%} |")
    print(f"| **total** | {total * 1000:.0f} | 100% |")
    outside = total - sum(seconds[stage] for stage in MODEL + CODEC)
    print(f"\nNon-model, non-codec share (everything but detect, embed, decode, encode): {outside / total:.1%}")


if __name__ == "__main__":
    main()
