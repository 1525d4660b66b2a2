"""A model's runs side by side on a CPU's threads, one onnxruntime thread each.

onnxruntime's intra-op threads split one run's work between them. For the small inputs a job runs most (a 640x640
tile, a second look, four aligned faces) that split gains little, while runs side by side on sessions of one thread
each keep every core busy: `python bench/side_by_side_runs.py` has the table. So on a CPU with several threads the
engine runs a stage's inputs side by side on a one-thread session, and a lone input on the session with all the
threads (a whole video frame, the overview), whose own split pays. Each run is the same computation either way, so
the outputs do not depend on which way it ran (tests/test_side_by_side_runs.py). The price is a second, one-thread
session of the fine detector and of the recogniser: their weights twice (about 20 MB with buffalo_s).
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Lanes:
    """`threads` lanes; one lane runs everything in the caller's thread."""

    def __init__(self, threads: int):
        self.threads = threads
        # Shared by every caller of the engine (reader slots included): the lanes bound the cores it uses.
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="onnxruntime-lane") if threads > 1 else None

    def map(self, run: Callable[[Item, bool], Result], items: list[Item], *, in_turn: bool = False) -> list[Result]:
        """`run(item, side_by_side)` for each item, the results in order: side by side (one thread each) when there
        are several items and several lanes, else (or `in_turn`) one after another on the caller's thread
        (side_by_side False)."""
        if self._pool is None or len(items) < 2 or in_turn:
            return [run(item, False) for item in items]
        return list(self._pool.map(lambda item: run(item, True), items))
