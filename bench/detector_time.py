"""Where the detector's time goes in a 12 and a 24 MP photo: by level, tile, turn, second look and edge pass.

bench/face_recall.py's timing scene (12 faces of 24-128 px on a textured background, its seed), detected with the
resident engine's plan on one thread (the engine's `pyramid.detect`: the detection of `face_process`, no
embedding). The pyramid's steps are timed by the watch it is given (faces/engines/pyramid.py): each level of the
upright pass (its tiles counted), the edge pass, the upright second looks, and each quarter turn (its levels and
second looks); the detector's own inference (onnxruntime's session.run) is split out of each row (the rest is
resizing, copying and decoding), and so are its input pixels. "other" is the rest of `detect`: NMS, upright first.
The fastest of --repeats runs is shown. Each `--plan` variant (bench/plans.py: Plan overrides) gets a table of its
own, on the same scene, its runs interleaved with today's plan.

Usage: python bench/detector_time.py [--mp 12 24] [--repeats 3] [--seed 1] [--plan tile_width=3072 ...]
"""

import argparse
import contextlib
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import face_recall  # noqa: E402
from bench.plans import parse_plan  # noqa: E402

# The row of the turned levels' own work outside their levels and second looks: the shrink, and each turn's
# rotation and turning back (the detector's "turned levels" and "turn 90" steps).
TURNED = "turned: shrink, rotate, turn back"


class Clock:
    """Seconds, inference seconds, detector pixels and calls per row. It is the detector's watch (PyramidDetector's
    `watch`, faces/engines/pyramid.py): each step it names is a row that keeps its own time only, a step within a
    turn is that turn's ("turn 90: level x0.5"), and a turn's own time is TURNED's. A level's calls are its passes
    (`passes`: a tile, or the whole level), a turn's none, any other step's its entries."""

    def __init__(self):
        self.rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])  # s, inference s, px, calls
        self.steps = [("other", "other")]  # (step, row) in force, innermost last

    @contextlib.contextmanager
    def __call__(self, step: str):
        turn = next((name for name, _ in reversed(self.steps) if name.startswith("turn ")), None)
        if step == "turned levels" or step.startswith("turn "):
            row = TURNED
        else:
            row = f"{turn}: {step}" if turn else step
        self.steps.append((step, row))
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self.steps.pop()
            self.rows[row][0] += elapsed
            self.rows[self.row][0] -= elapsed  # the enclosing row keeps only its own time
            self.rows[row][3] += not (self.level(step) or step.startswith("turn "))

    @property
    def row(self) -> str:
        return self.steps[-1][1]

    def passes(self, count: int) -> None:
        """`count` detector passes ran in the row in force: a level's calls."""
        if self.level(self.steps[-1][0]):
            self.rows[self.row][3] += count

    @staticmethod
    def level(step: str) -> bool:
        return step == "overview" or step.startswith("level x")


def timed_session(passes, clock: Clock) -> None:
    """The detector's inference and input pixels, into the row in force."""
    session = passes.scrfd.session

    class Timed:
        def __getattr__(self, name):
            return getattr(session, name)

        def run(self, names, feeds):
            blob = next(iter(feeds.values()))
            started = time.perf_counter()
            try:
                return session.run(names, feeds)
            finally:
                row = clock.rows[clock.row]
                row[1] += time.perf_counter() - started
                row[2] += blob.shape[0] * blob.shape[2] * blob.shape[3]
                clock.passes(1)

    passes.scrfd.session = Timed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mp", nargs="+", type=int, default=[12, 24])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plan", nargs="+", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    engine = face_recall.load_engine(1)
    import logging

    from faces.engines.base import PHOTO_PLAN
    from faces.engines.pyramid import PyramidDetector

    logging.disable(logging.INFO)
    sources = face_recall.face_sources(engine)
    rng = np.random.default_rng(args.seed + 1000)
    clock = Clock()
    plans = {"today's plan": PHOTO_PLAN}
    plans |= {" ".join(items): replace(PHOTO_PLAN, **parse_plan(items)) for items in args.plan}
    # The engine's detector (its passes, their sessions) on each plan, watched by the clock.
    ours = engine.pyramid
    pyramids = {
        name: PyramidDetector(ours.passes, plan, overview_passes=ours.overview_passes, watch=clock)
        for name, plan in plans.items()
    }
    for passes in {id(p): p for p in (ours.passes, ours.overview_passes)}.values():
        timed_session(passes, clock)
    for mp in args.mp:
        widths = [face_recall.TIMING_WIDTHS[i % len(face_recall.TIMING_WIDTHS)] for i in range(12)]
        image, _ = face_recall.pasted_scene(rng, sources, mp, widths)
        best = {}
        for pyramid in pyramids.values():
            pyramid.detect(image)  # onnxruntime's buffers for these shapes: not timed
        for _ in range(args.repeats):
            for name, pyramid in pyramids.items():
                timed = timed_detect(pyramid, image, clock)
                if name not in best or timed[0] < best[name][0]:
                    best[name] = timed
        for name, (total, rows) in best.items():
            print_table(mp, name, total, rows)


def timed_detect(pyramid, image: np.ndarray, clock: Clock) -> tuple[float, dict]:
    clock.rows.clear()
    started = time.perf_counter()
    pyramid.detect(image)
    total = time.perf_counter() - started
    clock.rows["other"][0] += total
    return total, {name: list(row) for name, row in clock.rows.items()}


def print_table(mp: int, plan: str, total: float, rows: dict) -> None:
    pixels = sum(row[2] for row in rows.values()) / 1e6
    print(f"\n## {mp} MP, {plan}: detect {total * 1000:.0f} ms, {pixels:.1f} detector MP (one thread, best of runs)\n")
    print("| step | ms | share | of it, inference ms | detector MP | tiles or calls |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in sorted(rows, key=lambda row: (row == "other", row.startswith("turn"), row)):
        seconds, inference, pixels, calls = rows[name]
        print(
            f"| {name} | {seconds * 1000:.0f} | {seconds / total:.1%} | {inference * 1000:.0f} | "
            f"{pixels / 1e6:.1f} | {calls} |"
        )


if __name__ == "__main__":
    main()
