"""How long a Do Not Publish change leaves a guest exposed: the baseline's worker beside this tree's, one run.

One event of --photos published photos (t1 at 640 px and recoloured copies: --affected of them show the
guest, t1's leftmost face; the others are crops without them), the guest an ordinary member with a ready
reference. Then --queued face_process messages for new uploads (crops without the guest) wait in the queue,
a worker starts on them, and once it has finished its first job the guest turns on Do Not Publish, as the
API does it: the member row, then one reprocess_event. A monitor reads the rows every 50 ms:

- (a) seconds from that send until no affected photo is public with files rendered before it;
- (b) seconds until every affected photo is public again with files rendered after it;
- (c) how many of the event's photos were rendered again (variant_version moved) once the queue is empty;
- the longest single job of the run, since (a) may have to wait for the job in flight.

The baseline is a git worktree of --baseline (by default the commit before this rule: today's main), run by
the same Python against a database provisioned by this tree (its extra column and index change nothing for
the baseline). Real embedded PostgreSQL, filesystem storage, the buffalo_s engine on one thread.

Usage: python bench/exposure.py [--photos 200] [--affected 40] [--queued 300] [--baseline f3d2325]
"""

import argparse
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baseline import beside_baseline, drain, empty_database, run_worker, send, worker_env  # noqa: E402

BASELINE = "f3d2325"  # main before "A DNP change takes effect in one job"
POLL_S = 0.05
SIDE = 640
JOB_MS = re.compile(r"event=job_done .*? ms=(\d+)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=200)
    parser.add_argument("--affected", type=int, default=40)
    parser.add_argument("--queued", type=int, default=300)
    parser.add_argument("--baseline", default=BASELINE, help="the git revision to compare with")
    args = parser.parse_args()
    runs = beside_baseline(args.baseline, lambda tree, uri, folder: measure(tree, uri, folder, args))
    print_table({name: results[0] for name, results in runs.items()}, args)


def measure(tree: Path, uri: str, folder: Path, args) -> dict:
    empty_database()
    event, guest, affected = seed(args)
    env = worker_env(uri, folder)
    drain(tree, env, folder / "publish.log")  # the event published, before anything is measured
    before = versions(event)
    queue_uploads(event, args.queued)
    log = folder / f"worker-{uuid.uuid4().hex[:6]}.log"
    worker = subprocess.Popen(run_worker(tree), cwd=tree, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    wait_for_first_job(log)
    watch = Watch(affected, before)
    monitor = threading.Thread(target=watch.run, daemon=True)
    monitor.start()
    watch.sent_at = change(event, guest)
    if worker.wait(timeout=3600) != 0:
        raise RuntimeError(f"the worker failed: {log.read_text()[-2000:]}")
    watch.stop.set()
    monitor.join()
    after = versions(event)
    jobs = [int(ms) for ms in JOB_MS.findall(log.read_text())]
    return {
        "hidden_s": watch.hidden_s,
        "blurred_s": watch.blurred_s,
        "rendered": sum(1 for photo_id, version in before.items() if after[photo_id] != version),
        "longest_job_s": max(jobs, default=0) / 1000,
        "jobs": len(jobs),
    }


def wait_for_first_job(log: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while "event=job_done" not in log.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker did no job: {log.read_text()[-2000:]}")
        time.sleep(0.05)


class Watch:
    """The affected photos' rows every POLL_S: when none is public with files from before the change (a), and
    when all are public with files from after it (b)."""

    def __init__(self, affected: list[uuid.UUID], before: dict):
        self.affected, self.before = affected, before
        self.sent_at: float | None = None
        self.hidden_s: float | None = None
        self.blurred_s: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from faces.models import Photo

        while not self.stop.wait(POLL_S):
            if self.sent_at is None:
                continue
            rows = Photo.objects.filter(id__in=self.affected).values_list("id", "processed_at", "variant_version")
            now = time.monotonic() - self.sent_at
            old = [pid for pid, published, version in rows if published and version == self.before[pid]]
            new = [pid for pid, published, version in rows if published and version > self.before[pid]]
            self.hidden_s = None if old else (self.hidden_s if self.hidden_s is not None else now)
            if len(new) == len(self.affected) and self.blurred_s is None:
                self.blurred_s = now
                connection.close()
                return


def seed(args) -> tuple:
    """The event, the guest (an ordinary member, reference ready) and the affected photos; every photo queued."""
    import cv2
    import numpy as np

    from faces.models import Event, EventMember, Photo, SubjectReference
    from momentlens.devservices import samples

    group = samples.group_photo()
    scale = SIDE / group.shape[1]
    small = cv2.resize(group, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    without = np.ascontiguousarray(small[:, round(200 * scale) :])
    event = Event.objects.create(name="bench exposure")
    guest = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=guest)
    faces = sorted(_engine().analyze(group), key=lambda face: face.box[0])
    reference = samples.derived_portrait(group, faces[0].box)
    SubjectReference.objects.create(
        user_id=guest, upload_key="users/bench/reference.jpg", status="ready", engine=faces[0].engine,
        embedding=_engine().analyze(reference, small_faces=False)[0].embedding,
    )  # fmt: skip
    affected = []
    for index in range(args.photos):
        shows_guest = index < args.affected
        picture = samples.recolour(small if shows_guest else without, hue_shift=index % 9, gain=1 + index % 5 / 50)
        photo = _photo(event, picture)
        affected += [photo.id] if shows_guest else []
        send({"job": "face_process", "photo_id": str(photo.id)})
    assert Photo.objects.filter(event=event).count() == args.photos
    return event, guest, affected


def queue_uploads(event, count: int) -> None:
    import numpy as np

    from momentlens.devservices import samples

    group = samples.group_photo()
    crop = np.ascontiguousarray(group[:443, 400:1040])
    for index in range(count):
        photo = _photo(event, samples.recolour(crop, hue_shift=index % 11, gain=1.0))
        send({"job": "face_process", "photo_id": str(photo.id)})


def change(event, guest) -> float:
    """The API's part: the member row, then reprocess_event; returns when it was sent (monotonic)."""
    from faces.models import EventMember

    EventMember.objects.filter(event=event, user_id=guest).update(do_not_publish=True)
    send({"job": "reprocess_event", "event_id": str(event.id)})
    return time.monotonic()


def versions(event) -> dict:
    from faces.models import Photo

    return dict(Photo.objects.filter(event=event).values_list("id", "variant_version"))


def _photo(event, picture):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from faces.models import Photo
    from momentlens.devservices import samples

    photo_id = uuid.uuid4()
    key = f"events/{event.id}/uploads/{photo_id}.jpg"
    default_storage.save(key, ContentFile(samples.encode_jpeg(picture)))
    return Photo.objects.create(
        id=photo_id, event=event, uploader_id=uuid.uuid4(), upload_key=key, upload_thumb_key=key + ".thumb"
    )


_ENGINE = []


def _engine():
    if not _ENGINE:
        from faces.engines import build_engine

        _ENGINE.append(build_engine("buffalo_s"))
    return _ENGINE[0]


def print_table(results: dict, args) -> None:
    print(f"\n## A Do Not Publish change: {args.photos} published photos, {args.affected} show the guest, ")
    print(f"{args.queued} face_process queued before the change (t1 at {SIDE} px, buffalo_s, 1 thread)\n")
    print("| worker | (a) no affected photo public unblurred, s | (b) all affected public again, blurred, s "
          "| (c) photos rendered again | longest job, s | jobs |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        hidden, blurred = (_s(result[key]) for key in ("hidden_s", "blurred_s"))
        counts = f"{result['rendered']} | {result['longest_job_s']:.2f} | {result['jobs']}"
        print(f"| {name} | {hidden} | {blurred} | {counts} |")
    base, new = results.values()
    if base["hidden_s"] and new["hidden_s"]:
        print(f"\n(a) this tree / baseline: {new['hidden_s'] / base['hidden_s']:.3f}")


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
