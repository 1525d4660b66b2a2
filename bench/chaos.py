"""Proof under faults: drain a hostile queue while crashing, cutting and restarting everything.

Seeds several events (DNP members with references, blur regions, ordinary members,
photos cropped so that the image edge or a corner cuts through a face, DNP members'
included) and a few hundred jobs of every kind, hostile ones included: malformed
messages, unknown jobs, missing rows, missing upload objects, corrupt / truncated /
zero-byte images, a decompression bomb, huge dimensions, a PNG with an EXIF
orientation tag, messages re-sent from the archive, and multi-frame uploads under .jpg
keys. Animated GIF / WebP / APNG and MP4 / WebM / MOV (at most 640x360) are processed
like photos: rendered frame by frame into an animated WebP or an MP4 (public and one
per DNP member matched), never published as themselves. Three show a DNP member's face
only after a faceless frame 0: two animations, and a 30 fps H.264 MP4 in which one
walks in between two detections (every 0.2 s), leaves and comes back elsewhere. A
multi-page TIFF, a GIF longer than MEDIA_MAX_DURATION_S and an MP4 cut before its index
must be refused (unsupported_media, media_too_large, undecodable_media). While real `run_worker` processes drain them,
faults are injected at seeded random moments: SIGKILL of the worker (then a
restart), `pg_terminate_backend` on its connection, a PostgreSQL restart, an S3
outage window (SeaweedFS stopped, then started), a second worker alongside, and
`manage.py sweep_orphans` run while a worker is mid-job. Halfway through, a member turns on
Do Not Publish, and whatever the seed, the session of the first privacy try after it (the
hide) is ended while it runs: still, no published photo of the event may show the member
unblurred after the hide's commit, nor 5 s after the send. A monitor lists the bucket
and reads the rows every half second: how long each orphan (a derived object no row
points at) lived. After the drain the idle workers get their full-sweep interval to
leave no orphan. Then the invariants are checked and a table is printed (goal: 0
violations).

In a still's files, the middle of each face the blur decision marks must differ from the
upload's by at least BLURRED; the note gives the least changed marked face and the most
changed intact one (the codec alone) each run.

A clip's files are checked against the seed's own truth, not only the worker's rows:
every frame of every published file and of the upload is decoded (Pillow for WebP,
PyAV for MP4), and in each frame where the seed pasted a DNP member's face, every file
but that member's own must have changed each quarter of the face's middle by at least
MEDIA_BLURRED (the codec alone: a few units; the member's own file shows it each run).
A clip's files must be of its kind (.webp, .mp4; JPEG posters), never its upload's
keys, with the upload's frame count; the monitor checks the keys every sample.

With `--readers N` (N > 1) N workers read the queue at once (WORKER_READER_SLOTS=N,
WORKER_VISIBILITY_TIMEOUT_S=--visibility-s), and the kill fault SIGKILLs one of them,
preferably while its heartbeat names a job in flight, then starts a new one: the run
measures how long that message waited before another reader read it. With any N, no
photo may be written by two readers at once (invariant 6: a try cut off from its session
may still run beside another reader's, but no row names what it uploaded, and the sweeps
delete it). With `--threads N` each worker runs onnxruntime on N threads (its runs side by
side, faces/engines/lanes.py) under the same faults.

Usage: python bench/chaos.py --seed N [--photos-per-event 20] [--events 4] [--faults 14]
           [--sweep-retry-s 5] [--full-sweep-s 30] [--readers 1] [--visibility-s 6] [--threads 1]
           [--report PATH] [--keep DIR]
--report writes the findings as JSON (invariants by name, faults, archived reasons, figures); with --keep, the
same goes to DIR/report.json. Without --keep, a run that finds a violation keeps its logs in a new folder under
the system's temporary folder, and says where. The code is in tests/chaos/; the reduced form runs in the test suite
(tests/test_chaos.py).
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chaos.config import ChaosConfig  # noqa: E402
from tests.chaos.run import run_chaos  # noqa: E402


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--events", type=int, default=4)
    parser.add_argument("--photos-per-event", type=int, default=20)
    parser.add_argument("--faults", type=int, default=14)
    parser.add_argument("--fault-gap", type=float, nargs=2, default=(2.0, 6.0), help="seconds between faults")
    parser.add_argument("--sweep-retry-s", type=float, default=5.0, help="the workers' WORKER_SWEEP_RETRY_S")
    parser.add_argument("--full-sweep-s", type=float, default=30.0, help="the workers' WORKER_FULL_SWEEP_S")
    parser.add_argument("--readers", type=int, default=1, help="workers reading at once (WORKER_READER_SLOTS)")
    parser.add_argument(
        "--visibility-s",
        type=int,
        default=6,
        help="with --readers > 1, the workers' WORKER_VISIBILITY_TIMEOUT_S (a killed reader's message comes back)",
    )
    parser.add_argument("--threads", type=int, default=1, help="each worker's ORT_INTRA_OP_THREADS")
    parser.add_argument("--keep", type=Path, help="keep the run's folder (logs, data, report.json) here")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    args = parser.parse_args()
    if min(args.readers, args.visibility_s, args.threads) < 1:
        parser.error("--readers, --visibility-s and --threads must be at least 1")
    return args


def main() -> int:
    args = arguments()
    config = ChaosConfig(
        seed=args.seed,
        events=args.events,
        photos_per_event=args.photos_per_event,
        faults=args.faults,
        fault_gap_s=tuple(args.fault_gap),
        sweep_retry_s=args.sweep_retry_s,
        full_sweep_s=args.full_sweep_s,
        readers=args.readers,
        visibility_s=args.visibility_s,
        threads=args.threads,
    )
    started = time.monotonic()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run_chaos(config, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="chaos-") as folder:
            report = run_chaos(config, Path(folder))
            if report.violations:
                keep_logs(Path(folder), args.seed)
    seconds = time.monotonic() - started
    for path in [args.report] + ([args.keep / "report.json"] if args.keep else []):
        if path is not None:
            report.write_json(path, seconds)
    print(report.table(seconds))
    return 0 if report.violations == 0 else 1


def keep_logs(folder: Path, seed: int) -> None:
    """A run that found a violation keeps its logs (not its data), so that what happened can be read: a timing
    that a rerun of the seed may not meet again."""
    kept = Path(tempfile.mkdtemp(prefix=f"chaos-seed{seed}-logs-"))
    for log in folder.glob("*.log"):
        shutil.copy2(log, kept)
    print(f"logs of the run kept in {kept}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
