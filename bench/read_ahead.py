"""A clip's detection pass with its frames read ahead on a thread of their own, or on the detector's thread.

`faces.detection.clips.detect_clip` on bench/media.py's 1080p clips (--scenes, --seconds long), the worker's engine
on --threads onnxruntime threads: with ClipSchedule.frames_ahead at the worker's value (the frames decoded,
converted to BGR and compared on a thread of their own, that many ahead of the detector) and at 0 (all of it on the
detector's thread, as before). The two ways are taken in turn, --rounds times, so that a slower minute of the machine
falls on both; the table gives each way's median and the faces found, which must be the same.

Usage: python bench/read_ahead.py [--scenes walking group] [--seconds 6] [--rounds 5] [--threads 1]
"""

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import media  # noqa: E402


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", nargs="+", choices=media.SCENES, default=["walking", "group"])
    parser.add_argument("--seconds", type=float, default=6.0, help="each clip's length")
    parser.add_argument("--rounds", type=int, default=5, help="timings of each way, taken in turn")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    from faces.detection.clips import CLIP_SCHEDULE, detect_clip
    from faces.media.video import Video

    engine = media.load_engine(args.threads)
    ways = {
        f"read ahead ({CLIP_SCHEDULE.frames_ahead} frames)": CLIP_SCHEDULE,
        "on the detector's thread": replace(CLIP_SCHEDULE, frames_ahead=0),
    }
    print(f"\n## A 1080p clip's detection pass, its frames read ahead or not ({args.threads} onnxruntime thread(s))\n")
    print("| scene | frames | way | median s | ratio vs on the detector's thread | faces found |")
    print("|---|---:|---|---:|---:|---:|")
    for scene in args.scenes:
        data = media.video_clip(*media.SIZES["1080p"], args.seconds, scene)
        media.warm_up(engine, media.SIZES["1080p"], video_frame=True)
        seconds = {way: [] for way in ways}
        faces = {}
        for _ in range(args.rounds):
            for way, schedule in ways.items():
                began = time.perf_counter()
                faces[way] = len(detect_clip(Video(data), engine, schedule=schedule))
                seconds[way].append(time.perf_counter() - began)
        inline = statistics.median(seconds["on the detector's thread"])
        frames = Video(data).frame_count
        for way in ways:
            median = statistics.median(seconds[way])
            print(f"| {scene} | {frames} | {way} | {median:.2f} | {median / inline:.2f} | {faces[way]} |")


if __name__ == "__main__":
    main()
