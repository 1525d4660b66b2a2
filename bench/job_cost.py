"""What one face_process costs, the baseline revision's worker beside this tree's, through the real worker,
and both against the job's floor.

The 12 MP scene of bench/pipeline.py (t1.jpg upscaled, light noise, six guests) in an event with two DNP
members (references of two of its guests, made by each worker's own reference_process from portraits cut
out of t1), uploaded --photos times; with --clip, bench/media.py's clip of the same six guests drifting
(--clip-seconds long, 30 fps, with sound) instead, or with --scene walking its two guests walking (t1's faces 0
and 3, the two DNP members). Each worker drains its own copy, one job at a time on one
onnxruntime thread, in --rounds rounds taken in turn (baseline, this tree, baseline, ...) so that a slower
minute of the machine falls on both. The job's floor (bench/floor.py) is measured once a round, in this
process, between the two workers. The table gives the median `ms` of the workers' own `event=job_done
job=face_process` log lines. --two-threads runs each worker once more a round, on two onnxruntime threads, and
gives a second table: each worker's two-thread median against the baseline's, and against its own one thread.

Usage: python bench/job_cost.py [--photos 3] [--rounds 2] [--megapixels 12 | --clip 1080p] [--clip-seconds 6]
                                [--scene group | walking] [--two-threads] [--baseline REV]
"""

import argparse
import re
import statistics
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import floor, media  # noqa: E402
from bench.baseline import beside_baseline, drain, empty_database, send, worker_env  # noqa: E402
from bench.dnp_visibility import BASELINE  # noqa: E402

JOB_MS = re.compile(r"event=job_done .*?job=face_process .*?outcome=completed .*?ms=(\d+)")
SIDES = {1: (1155, 866), 12: (4000, 3000), 24: (5656, 4242)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=3, help="face_process jobs per worker per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--megapixels", type=int, choices=sorted(SIDES), default=12)
    parser.add_argument("--clip", choices=sorted(media.SIZES), help="a clip of this size instead of a photo")
    parser.add_argument("--clip-seconds", type=float, default=6.0)
    parser.add_argument("--scene", choices=media.SCENES, default=media.SCENES[0], help="the clip's scene")
    parser.add_argument("--two-threads", action="store_true", help="also each worker on two onnxruntime threads")
    parser.add_argument("--baseline", default=BASELINE, help="the git revision to compare with")
    args = parser.parse_args()
    upload, floors = {}, []
    extension = "mp4" if args.clip else "jpg"

    def measure(tree: Path, uri: str, folder: Path) -> dict[int, list[int]]:
        if tree == ROOT:  # once a round, between the two workers
            floors.append(1000 * floor_of(upload["bytes"], args.clip))
        return {
            threads: one_round(tree, uri, folder, upload["bytes"], args.photos, extension, threads=threads)
            for threads in ((1, 2) if args.two_threads else (1,))
        }

    runs = beside_baseline(
        args.baseline, measure, rounds=args.rounds, before=lambda: upload.setdefault("bytes", scene_upload(args))
    )
    times = {name: [ms for jobs in rounds for ms in jobs[1]] for name, rounds in runs.items()}
    print_table(times, statistics.median(floors), args)
    if args.two_threads:
        print_two_threads(times, {name: [ms for jobs in rounds for ms in jobs[2]] for name, rounds in runs.items()})


def scene_upload(args) -> bytes:
    from bench.pipeline import scene
    from faces.media.upload import encode_jpeg

    if args.clip:
        return media.video_clip(*media.SIZES[args.clip], args.clip_seconds, args.scene)
    return encode_jpeg(scene(*SIDES[args.megapixels]))


def floor_of(upload: bytes, clip: str | None) -> float:
    """The upload's floor, in seconds."""
    passes = floor.detector_passes()
    return floor.clip_floor(upload, passes) if clip else floor.still_floor(upload, passes)


def one_round(
    tree: Path, uri: str, folder: Path, upload: bytes, photos: int, extension: str, *, threads: int = 1
) -> list[int]:
    """The event seeded afresh, its references made and the photos processed by `tree`'s worker: each job's ms."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from faces.models import Event, EventMember, Photo, SubjectReference
    from momentlens.devservices import samples

    empty_database()
    event = Event.objects.create(name="bench job cost")
    group = samples.group_photo()
    for x1, y1, x2, y2 in ((55, 260, 168, 397), (745, 342, 847, 480)):  # t1's faces 0 and 3
        user = uuid.uuid4()
        EventMember.objects.create(event=event, user_id=user, do_not_publish=True)
        portrait = samples.encode_jpeg(samples.derived_portrait(group, (x1, y1, x2, y2)))
        key = default_storage.save(f"users/{user}/references/{uuid.uuid4()}.jpg", ContentFile(portrait))
        reference = SubjectReference.objects.create(user_id=user, upload_key=key)
        send({"job": "reference_process", "reference_id": str(reference.id)})
    for _ in range(photos):
        photo_id = uuid.uuid4()
        key = default_storage.save(f"events/{event.id}/uploads/{photo_id}.{extension}", ContentFile(upload))
        Photo.objects.create(id=photo_id, event=event, uploader_id=uuid.uuid4(), upload_key=key, upload_thumb_key=key)
        send({"job": "face_process", "photo_id": str(photo_id)})
    log = folder / f"worker-{uuid.uuid4().hex[:6]}.log"
    drain(tree, worker_env(uri, folder) | {"ORT_INTRA_OP_THREADS": str(threads)}, log)
    jobs = [int(ms) for ms in JOB_MS.findall(log.read_text())]
    if len(jobs) != photos:
        raise RuntimeError(f"{len(jobs)} of {photos} face_process jobs completed: {log.read_text()[-2000:]}")
    return jobs


def print_table(times: dict[str, list[int]], floor_ms: float, args) -> None:
    jobs = f"{args.photos} jobs x {args.rounds} rounds"
    guests = "2 guests walking" if args.clip and args.scene == "walking" else "6 guests"
    what = f"a {args.clip_seconds:g} s {args.clip} clip" if args.clip else f"{args.megapixels} MP"
    print(f"\n## face_process, {what}, {guests}, 2 DNP members: {jobs}\n")
    print("| worker | jobs | median ms | ratio vs baseline | ratio vs floor |")
    print("|---|---:|---:|---:|---:|")
    print(f"| floor (bench/floor.py) | {args.rounds} | {floor_ms:.0f} | | 1.00 |")
    base = None
    for name, jobs in times.items():
        median = statistics.median(jobs)
        base = base or median
        print(f"| {name} | {len(jobs)} | {median:.0f} | {median / base:.2f} | {median / floor_ms:.2f} |")


def print_two_threads(one_thread: dict[str, list[int]], two_threads: dict[str, list[int]]) -> None:
    print("\nOn two onnxruntime threads:\n")
    print("| worker | jobs | median ms | ratio vs baseline | speed vs its one thread |")
    print("|---|---:|---:|---:|---:|")
    base = None
    for name, jobs in two_threads.items():
        median = statistics.median(jobs)
        base = base or median
        speed = statistics.median(one_thread[name]) / median
        print(f"| {name} | {len(jobs)} | {median:.0f} | {median / base:.2f} | {speed:.2f}x |")


if __name__ == "__main__":
    main()
