"""Several onnxruntime threads on one run, or runs side by side on one thread each: the time per run, by input size.

The configured pack's models on the worker's own CPU sessions (faces.engines.insightface._session), in this run:
the detector at the input shapes a job runs (a second look, the overview, the edge pass, a coarse level, a 12 MP
photo's tile, a whole 1080p frame) and the recogniser on a run of four aligned faces
(Shapes.recogniser_faces_per_run). Each is timed three ways on --runs runs of the same input (the median of
--repeats): one run after another on one thread (the baseline); one after another on --threads intra-op threads; and
--threads at a time on one thread each (faces/engines/lanes.py). The inputs are noise: a network's time does not
depend on its pixels. The worker runs a pass side by side when it has at most Shapes.lane_pass_pixels pixels.

Usage: python bench/side_by_side_runs.py [--threads 2] [--runs 8] [--repeats 5]
"""

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (width, height): a second look, the overview, the edge pass, a coarse level, a 12 MP photo's tile, a 1080p frame.
DETECTOR_INPUTS = ((160, 160), (640, 640), (960, 800), (1344, 1024), (1920, 1088), (2080, 1568))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads, or lanes side by side")
    parser.add_argument("--runs", type=int, default=8, help="runs of one input in each timing")
    parser.add_argument("--repeats", type=int, default=5, help="timings of each way, the median kept")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    from django.conf import settings

    from faces.engines.insightface import CPU, CPU_SHAPES, _recogniser_model, _session
    from faces.engines.packs import pack_folder, pack_named

    pack = pack_named(settings.FACE_MODEL_PACK)
    detector_file, recogniser_file = (str(path) for path in pack.files(pack_folder(pack, settings.FACE_MODEL_ROOT)))
    recogniser = _recogniser_model(recogniser_file, CPU)
    models = {
        "detector": lambda threads: _session(detector_file, threads, [CPU]),
        "recogniser": lambda threads: _session(recogniser_file, threads, [CPU], model=recogniser),
    }
    inputs = [("detector", (1, 3, height, width), f"{width}x{height}") for width, height in DETECTOR_INPUTS]
    inputs.append(("recogniser", (4, 3, 112, 112), "4 faces of 112x112"))
    print(f"\n## One run on {args.threads} threads, or {args.threads} runs side by side: {pack.name}\n")
    print(f"The worker runs a detector pass side by side up to {CPU_SHAPES.lane_pass_pixels:,} pixels.\n")
    print(
        f"| model | input | one thread ms per run (baseline) | {args.threads} threads, in turn | ratio | "
        f"{args.threads} side by side, one thread each | ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    pool = ThreadPoolExecutor(args.threads)
    for model, shape, label in inputs:
        one, many = models[model](1), models[model](args.threads)
        feed = {one.get_inputs()[0].name: np.random.default_rng(0).standard_normal(shape, dtype=np.float32)}
        times = three_ways(one, many, feed, pool, args)
        print(
            f"| {model} | {label} | {times[0]:.1f} | {times[1]:.1f} | {times[0] / times[1]:.2f}x | "
            f"{times[2]:.1f} | {times[0] / times[2]:.2f}x |"
        )
    print("\nRatio: one thread's time over the way's (the speed-up).")


def three_ways(one, many, feed: dict, pool: ThreadPoolExecutor, args) -> list[float]:
    """ms per run: on one thread, on the many-thread session in turn, and side by side on one-thread runs."""
    return [
        per_run_ms(lambda: [one.run(None, feed) for _ in range(args.runs)], args),
        per_run_ms(lambda: [many.run(None, feed) for _ in range(args.runs)], args),
        per_run_ms(lambda: list(pool.map(lambda _: one.run(None, feed), range(args.runs))), args),
    ]


def per_run_ms(runs, args) -> float:
    runs()  # the session's first run of a shape allocates its buffers
    times = []
    for _ in range(args.repeats):
        began = time.perf_counter()
        runs()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000 / args.runs


if __name__ == "__main__":
    main()
