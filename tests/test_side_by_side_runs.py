"""A model's runs side by side on a CPU's threads (faces/engines/lanes.py): with several onnxruntime threads the
engine runs a stage's small detector passes and its runs of faces side by side, one thread each; it finds the same
faces with the same embeddings as on one thread, and never runs a large pass side by side (the memory bound)."""

import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from faces.engines.insightface import CPU_SHAPES, InsightFaceEngine
from faces.engines.lanes import Lanes
from faces.engines.packs import BUFFALO_S, pack_folder
from momentlens.devservices import samples


def engine(threads: int) -> InsightFaceEngine:
    return InsightFaceEngine(BUFFALO_S, pack_folder(BUFFALO_S, Path("/nonexistent")), intra_op_threads=threads)


@pytest.fixture(scope="module")
def engines() -> tuple[InsightFaceEngine, InsightFaceEngine]:
    return engine(1), engine(2)


class Recorded:
    """A session that notes each run's input shape and thread, then runs it."""

    def __init__(self, session, runs: list):
        self._session, self._runs = session, runs

    def run(self, names, feed, *rest):
        self._runs.append((next(iter(feed.values())).shape, threading.current_thread().name))
        return self._session.run(names, feed, *rest)

    def __getattr__(self, name):
        return getattr(self._session, name)


def lane_runs(engine: InsightFaceEngine, monkeypatch) -> tuple[list, list]:
    """Every detector and recogniser run on a lane's one-thread session from now on."""
    detector, recogniser = [], []
    for passes in {engine._overview, engine._fine} - {None}:
        monkeypatch.setattr(passes, "_lane_session", Recorded(passes._lane_session, detector))
    monkeypatch.setattr(engine._lane_recognizer, "session", Recorded(engine._lane_recognizer.session, recogniser))
    return detector, recogniser


def test_lanes_keep_the_order_and_run_side_by_side_only_when_several_items_can():
    caller = threading.current_thread().name

    def run(item, side_by_side):
        return item * 10, side_by_side, threading.current_thread().name

    many = Lanes(2).map(run, list(range(6)))
    assert [result[0] for result in many] == [0, 10, 20, 30, 40, 50]
    assert all(side_by_side and thread != caller for _, side_by_side, thread in many)
    for alone in (Lanes(2).map(run, [7]), Lanes(1).map(run, [1, 2]), Lanes(2).map(run, [1, 2], in_turn=True)):
        assert all(not side_by_side and thread == caller for _, side_by_side, thread in alone)


def test_two_threads_find_the_same_faces_with_the_same_embeddings_running_side_by_side(engines, monkeypatch):
    """players.jpg, a team of 16: its second looks and its runs of faces go side by side, on two threads."""
    one, two = engines
    image = samples.read(samples.vectron_image("players.jpg"))
    detector, recogniser = lane_runs(two, monkeypatch)

    alone, beside = one.analyze(image), two.analyze(image)

    assert len(beside) == len(alone) >= 16
    for a, b in zip(alone, beside, strict=True):
        assert np.array_equal(a.box, b.box)
        assert np.array_equal(a.landmarks, b.landmarks)
        assert np.array_equal(a.embedding, b.embedding)
        assert a.embedding_norm == b.embedding_norm
    for runs in (detector, recogniser):
        assert len({thread for _, thread in runs}) == 2, "the lanes' runs come from two threads"


def test_a_large_pass_never_runs_side_by_side(engines, monkeypatch):
    """A 12 MP photo's tiles and turned levels run alone on both threads: two at once would hold two passes'
    activations, past what one thread's engine needs at 48 MP."""
    _, two = engines
    image = cv2.resize(samples.group_photo(), (4000, 3000))
    detector, _ = lane_runs(two, monkeypatch)

    two.detect(image)

    assert detector, "the small passes went side by side"
    # Its tiles are 2080x1568 and its turned levels 1504x2016: none of them, nor a coarse level, beside another.
    assert max(shape[2] * shape[3] for shape, _ in detector) <= CPU_SHAPES.lane_pass_pixels <= 1_000_000
