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

With --in-flight clip|photo, no uploads are queued: one long job of another event is (a 20 s 1080p clip of
guests walking, or a 48 MP photo), and the change is sent --change-after seconds into it (once the worker's
heartbeat names it). Beside (a)-(c) the table then says how that job ended: its try number when it completed
(1: a try stopped for the change is given back uncounted), the failed tries of the run, and whether it was
published.

With --hide-photos N, nothing of that: one event of N published photos with six stored faces each (t1's
faces, their embeddings as the worker stored them), the guest turned DNP, and one reprocess_event read by a
worker: how long its job (the hide, and the fan-out) takes, per worker.

The baseline is a git worktree of --baseline (by default the commit before this rule: today's main), run by
the same Python against a database provisioned by this tree (its extra column and index change nothing for
the baseline). Real embedded PostgreSQL, filesystem storage, the buffalo_s engine on one thread.

Usage: python bench/exposure.py [--photos 200] [--affected 40] [--queued 300] [--baseline f3d2325]
       python bench/exposure.py --in-flight clip|photo [--change-after 2] [--baseline 04252a8]
       python bench/exposure.py --hide-photos 5000 [--baseline 04252a8]
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
    parser.add_argument("--in-flight", choices=sorted(IN_FLIGHT), help="instead of queued uploads, one long job")
    parser.add_argument("--change-after", type=float, default=2.0, help="seconds into the long job")
    parser.add_argument("--hide-photos", type=int, help="time the hide in an event of this many photos")
    args = parser.parse_args()
    if args.hide_photos:
        runs = beside_baseline(args.baseline, lambda tree, uri, folder: time_hide(tree, uri, folder, args))
        print_hide_table({name: results[0] for name, results in runs.items()}, args)
        return
    runs = beside_baseline(args.baseline, lambda tree, uri, folder: measure(tree, uri, folder, args))
    print_table({name: results[0] for name, results in runs.items()}, args)


def measure(tree: Path, uri: str, folder: Path, args) -> dict:
    empty_database()
    event, guest, affected = seed(args)
    env = worker_env(uri, folder)
    drain(tree, env, folder / "publish.log")  # the event published, before anything is measured
    before = versions(event)
    long_job = queue_long_job(args.in_flight) if args.in_flight else queue_uploads(event, args.queued)
    log = folder / f"worker-{uuid.uuid4().hex[:6]}.log"
    worker = subprocess.Popen(run_worker(tree), cwd=tree, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    if args.in_flight:
        wait_until_running("face_process", log)
        time.sleep(args.change_after)
    else:
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
    text = log.read_text()
    jobs = [int(ms) for ms in JOB_MS.findall(text)]
    return {
        "hidden_s": watch.hidden_s,
        "blurred_s": watch.blurred_s,
        "rendered": sum(1 for photo_id, version in before.items() if after[photo_id] != version),
        "longest_job_s": max(jobs, default=0) / 1000,
        "jobs": len(jobs),
        **(long_job_end(long_job, text) if args.in_flight else {}),
    }


# The long jobs of --in-flight: a 20 s 1080p clip of guests walking, or a 48 MP photo (t1 enlarged).
IN_FLIGHT = {"clip", "photo"}


def queue_long_job(kind: str):
    """The long job, in an event of its own; its photo id."""
    from bench.pipeline import scene
    from faces.media.upload import encode_jpeg
    from faces.models import Event

    event = Event.objects.create(name=f"bench exposure: a long {kind}")
    data = long_clip() if kind == "clip" else encode_jpeg(scene(8000, 6000))
    photo = _photo(event, None, data=data)
    send({"job": "face_process", "photo_id": str(photo.id)})
    return photo.id


def long_clip() -> bytes:
    """20 s of 1080p at 30 fps: t1's guests, one walking across, two standing (tests/support/video_samples.py)."""
    from faces.engines import resident_engine
    from momentlens.devservices import samples
    from tests.support.video_samples import scene

    group = samples.group_photo()
    faces = sorted(resident_engine().analyze(group), key=lambda face: face.box[0])
    walk = lambda i: (100 + (i * 3) % 1500, 300)  # noqa: E731
    return scene(group, faces, width=1920, height=1080, scale=1.0, dnp_at=walk, count=600, standing=(3, 5)).data


def wait_until_running(job: str, log: Path, timeout_s: float = 300.0) -> None:
    """Until a reader's heartbeat names `job` (it does once the job has run half a second; the name is cut at
    PostgreSQL's 63 characters, so only its start is matched)."""
    from django.db import connection

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s", [f"%job={job[:6]}%"])
            if cursor.fetchone()[0]:
                return
        time.sleep(0.05)
    raise RuntimeError(f"the worker never ran {job}: {log.read_text()[-2000:]}")


def long_job_end(photo_id, text: str) -> dict:
    """How the long job ended: the try it completed at, the run's failed tries, and whether it was published."""
    from faces.models import Photo

    done = re.search(rf"try=(\d+) photo_id={photo_id} job=face_process outcome=completed", text)
    published = Photo.objects.filter(id=photo_id, processed_at__isnull=False).exists()
    return {
        "long_try": int(done[1]) if done else None,
        "failed_tries": text.count("event=job_retry"),
        "published": published,
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
    """`count` face_process for crops of t1 without the guest."""
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


def _photo(event, picture, *, data: bytes | None = None):
    """A photo row and its upload: `picture` as a JPEG, or `data` as it is."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from faces.models import Photo
    from momentlens.devservices import samples

    photo_id = uuid.uuid4()
    key = f"events/{event.id}/uploads/{photo_id}.jpg"
    default_storage.save(key, ContentFile(samples.encode_jpeg(picture) if data is None else data))
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
    if args.in_flight:
        print(f"sent {args.change_after:g} s into a long job of another event (a {LONG[args.in_flight]})\n")
    else:
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
    if args.in_flight:
        print("\n| worker | the long job completed at try | failed tries in the run | published |\n|---|---:|---:|---|")
        for name, result in results.items():
            print(f"| {name} | {result['long_try']} | {result['failed_tries']} | {result['published']} |")


LONG = {"clip": "20 s 1080p clip", "photo": "48 MP photo"}


def time_hide(tree: Path, uri: str, folder: Path, args) -> dict:
    """One reprocess_event over an event of args.hide_photos published photos, timed by the worker's log."""
    empty_database()
    event, guest = seed_stored_faces(args.hide_photos)
    env = worker_env(uri, folder)
    change(event, guest)
    log = folder / f"hide-{uuid.uuid4().hex[:6]}.log"
    with open(log, "w") as out:
        once = [sys.executable, str(tree / "manage.py"), "run_worker", "--once", "--health-port", "0"]
        subprocess.run(once, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
    text = log.read_text()
    done = re.search(r"event=job_done .*?job=reprocess_event .*?ms=(\d+)(.*)", text)
    if done is None:
        raise RuntimeError(f"the reprocess_event did not complete: {text[-2000:]}")
    hidden = re.search(r"hidden=(\d+)", done[2])
    return {"ms": int(done[1]), "hidden": int(hidden[1]) if hidden else None}


def seed_stored_faces(count: int) -> tuple:
    """An event of `count` published photos, each t1 with its six faces stored (the guest's among them), rendered
    before with nothing blurred; the guest an ordinary member with a ready reference. Rows only: no files."""
    import numpy as np
    from django.utils import timezone

    from faces.models import Event, EventMember, Face, Photo, SubjectReference
    from momentlens.devservices import samples

    group = samples.group_photo()
    height, width = group.shape[:2]
    found = sorted(_engine().analyze(group), key=lambda face: face.box[0])
    event = Event.objects.create(name="bench exposure: the hide's cost")
    guest = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=guest)
    reference = _engine().analyze(samples.derived_portrait(group, found[0].box), small_faces=False)[0]
    SubjectReference.objects.create(
        user_id=guest,
        upload_key="users/bench/reference.jpg",
        status="ready",
        engine=reference.engine,
        embedding=reference.embedding,
    )
    now = timezone.now()
    photos = Photo.objects.bulk_create(
        Photo(event=event, uploader_id=guest, upload_key=f"events/{event.id}/uploads/{i}.jpg",
              upload_thumb_key=f"events/{event.id}/uploads/{i}_thumb.jpg", width=width, height=height,
              media_type="image", variant_version=1, public_key=f"events/{event.id}/uploads/{i}.jpg",
              public_thumb_key=f"events/{event.id}/uploads/{i}_thumb.jpg", render_plan={"regions": [], "public": []},
              faces_detected_at=now, processed_at=now)
        for i in range(count)
    )  # fmt: skip
    scale = np.array([width, height], dtype=np.float64)
    Face.objects.bulk_create(face_row(photo, face, scale) for photo in photos for face in found)
    return event, guest


def face_row(photo, found, scale):
    from faces.models import Face

    box = found.box.reshape(2, 2) / scale
    return Face(
        photo=photo, event_id=photo.event_id, box_x=float(box[0, 0]), box_y=float(box[0, 1]),
        box_w=float(box[1, 0] - box[0, 0]), box_h=float(box[1, 1] - box[0, 1]),
        landmarks=(found.landmarks / scale).round(6).tolist(), det_score=float(found.score),
        embedding=found.embedding, engine=found.engine, embedding_norm=found.embedding_norm,
    )  # fmt: skip


def print_hide_table(results: dict, args) -> None:
    print(f"\n## The hide: one reprocess_event over {args.hide_photos} published photos (six faces each, the guest in ")
    print("every one), through `run_worker --once`\n")
    print("| worker | job ms | photos hidden | ratio vs baseline |\n|---|---:|---:|---:|")
    base = None
    for name, result in results.items():
        base = base or result["ms"]
        print(f"| {name} | {result['ms']} | {result['hidden']} | {result['ms'] / base:.2f} |")


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
