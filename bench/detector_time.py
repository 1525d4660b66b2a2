"""Where the detector's time goes in a 12 and a 24 MP photo: by level, tile, turn, second look and edge pass.

bench/face_recall.py's timing scene (12 faces of 24-128 px on a textured background, its seed), detected with the
resident engine's plan on one thread (`engine.detect`: the detection of `face_process`, no embedding). The
pyramid's steps are timed by wrapping them (faces/engines/pyramid.py): each level of the upright pass (its tiles
counted), the edge pass, the upright second looks, and each quarter turn (its levels and second looks); the
detector's own inference (onnxruntime's session.run) is split out of each row (the rest is resizing, copying and
decoding), and so are its input pixels. "other" is the rest of `detect`: NMS, upright first. The fastest of
--repeats runs is shown. Each `--plan` variant (bench/plans.py: Plan overrides) gets a table of its own, on the same
scene, its runs interleaved with today's plan.

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


class Clock:
    """Seconds, inference seconds, detector pixels and calls per row; the row in force is a stack."""

    def __init__(self):
        self.rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])  # s, inference s, px, calls
        self.stack = ["other"]

    @contextlib.contextmanager
    def row(self, name: str, *, counted: bool = True):
        self.stack.append(name)
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self.stack.pop()
            self.rows[name][0] += elapsed
            self.rows[self.stack[-1]][0] -= elapsed  # the enclosing row keeps only its own time
            self.rows[name][3] += counted


def instrument(detector, clock: Clock) -> None:
    """Wraps the pyramid's steps on this detector instance (the class is untouched); its sessions: timed_session."""
    pyramid = type(detector)
    state = {"turns": None, "now": None}  # while the turned levels run: the plan's turns left, the one running

    def prefix() -> str:
        return f"turn {state['now']}: " if state["now"] is not None else ""

    def level(image, scale, threshold, keep_all, passes, checkpoint):
        name = prefix() + ("overview" if keep_all else f"level x{scale:.3g}")
        steps = pyramid._level(detector, image, scale, threshold, keep_all, passes, checkpoint)
        while True:
            with clock.row(name, counted=False):
                chunk = next(steps, None)
            if chunk is None:
                return
            clock.rows[name][3] += 1  # one pass's detections: a tile, or the whole level
            yield chunk

    def second_looks(image, boxes, *, mirrored=False):
        with clock.row(prefix() + f"second looks ({'edge' if mirrored else 'levels'})"):
            return pyramid._second_looks(detector, image, boxes, mirrored=mirrored)

    def across_edges(image, scale):
        with clock.row("edge pass"):
            return pyramid._across_edges(detector, image, scale)

    def faces(image, levels, checkpoint, fine_threshold):
        if state["turns"] is None:
            return pyramid._faces(detector, image, levels, checkpoint, fine_threshold)
        state["now"] = next(state["turns"]) * 90
        try:
            return pyramid._faces(detector, image, levels, checkpoint, fine_threshold)
        finally:
            state["now"] = None

    def turned_faces(image, levels, checkpoint):
        state["turns"] = iter(detector.plan.turns)
        try:
            with clock.row("turned: shrink, rotate, turn back"):
                return pyramid._turned_faces(detector, image, levels, checkpoint)
        finally:
            state["turns"] = None

    detector._level, detector._second_looks, detector._across_edges = level, second_looks, across_edges
    detector._faces, detector._turned_faces = faces, turned_faces


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
                row = clock.rows[clock.stack[-1]]
                row[1] += time.perf_counter() - started
                row[2] += blob.shape[0] * blob.shape[2] * blob.shape[3]

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

    from faces.engines.pyramid import Plan

    logging.disable(logging.INFO)
    sources = face_recall.face_sources(engine)
    rng = np.random.default_rng(args.seed + 1000)
    clock = Clock()
    plans = {"today's plan": Plan(), **{" ".join(items): replace(Plan(), **parse_plan(items)) for items in args.plan}}
    pyramids = {name: engine._pyramid.planned(plan) for name, plan in plans.items()}
    for pyramid in pyramids.values():
        instrument(pyramid, clock)
    for passes in {id(p): p for d in pyramids.values() for p in (d.passes, d.overview_passes)}.values():
        timed_session(passes, clock)
    for mp in args.mp:
        widths = [face_recall.TIMING_WIDTHS[i % len(face_recall.TIMING_WIDTHS)] for i in range(12)]
        image, _ = face_recall.pasted_scene(rng, sources, mp, widths)
        best = {}
        for plan in plans.values():
            engine.detect(image, plan=plan)  # onnxruntime's buffers for these shapes: not timed
        for _ in range(args.repeats):
            for name, plan in plans.items():
                timed = timed_detect(engine, image, plan, clock)
                if name not in best or timed[0] < best[name][0]:
                    best[name] = timed
        for name, (total, rows) in best.items():
            print_table(mp, name, total, rows)


def timed_detect(engine, image: np.ndarray, plan, clock: Clock) -> tuple[float, dict]:
    clock.rows.clear()
    started = time.perf_counter()
    engine.detect(image, plan=plan)
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
