"""Fixed detector shapes and batches (faces/engines/pyramid.py, Passes), as a GPU reader runs them.

On a CPU the engine runs each pass at its own size; with `shapes=GPU_SHAPES` it runs the GPU's way here
too, so the rule is tested without a device: every pass at a shape bucket and a batch size the warm-up
ran, and the same faces found. The CUDA test runs only where onnxruntime has the CUDA provider.
"""

from pathlib import Path

import cv2
import numpy as np
import onnxruntime
import pytest

from faces.detection.clips import CLIP_SCHEDULE
from faces.engines.base import Plan
from faces.engines.insightface import GPU_SHAPES, InsightFaceEngine
from faces.engines.packs import BUFFALO_S, pack_folder
from momentlens.devservices import samples

HAS_CUDA = "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def engine(**options) -> InsightFaceEngine:
    return InsightFaceEngine(BUFFALO_S, pack_folder(BUFFALO_S, Path("/nonexistent")), **options)


@pytest.fixture(scope="module")
def cpu_engine():
    return engine()


@pytest.fixture(scope="module")
def gpu_way_engine():
    return engine(shapes=GPU_SHAPES)


def recorded_shapes(engine: InsightFaceEngine) -> list[tuple[int, ...]]:
    """Every detector input shape (batch, channels, height, width) from now on, whichever session ran it."""
    seen = []
    passes = {id(p): p for p in (engine._overview, engine._fine) if p is not None}.values()
    for one in passes:
        for session in {id(s): s for s in [one.scrfd.session, *one._sessions.values()]}.values():
            run = session.run

            def spy(names, feeds, *args, _run=run):
                seen.append(next(iter(feeds.values())).shape)
                return _run(names, feeds, *args)

            session.run = spy
    return seen


def group_at(width: int) -> np.ndarray:
    group = samples.group_photo()
    scale = width / group.shape[1]
    return cv2.resize(group, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)


def same_faces(ours, theirs) -> bool:
    from faces.engines.pyramid import iou

    if len(ours) != len(theirs):
        return False
    a = np.array([face.box for face in ours])
    b = np.array([face.box for face in theirs])
    return bool((iou(a, b).max(axis=1) > 0.85).all())


def test_the_warm_up_runs_every_bucket_at_each_batch_size(gpu_way_engine):
    assert set(GPU_SHAPES.detector_buckets) <= set(gpu_way_engine.warmed_up)
    assert {(112 * size, 112) for size in GPU_SHAPES.recogniser_batches} <= set(gpu_way_engine.warmed_up)
    assert engine().warmed_up == [], "a CPU engine warms nothing up: it has no shapes to learn"


@pytest.mark.parametrize("width", [640, 1600, 4000])
def test_every_pass_runs_at_a_warmed_up_shape_and_finds_the_same_faces(cpu_engine, gpu_way_engine, width):
    image = group_at(width)
    shapes = recorded_shapes(gpu_way_engine)
    bucketed = gpu_way_engine.analyze(image)
    warmed = {
        (size, 3, height, width)
        for width, height in GPU_SHAPES.detector_buckets
        for size in (1, GPU_SHAPES.detector_batch)
    }
    assert shapes, "the spy saw the passes"
    assert set(shapes) <= warmed, set(shapes) - warmed
    plain = cpu_engine.analyze(image)
    assert same_faces(bucketed, plain)
    # The guests' faces embed alike; a small face-like texture's landmarks move with the padding.
    for ours in (face for face in bucketed if face.box[2] - face.box[0] >= 64):
        theirs = max(plain, key=lambda face: float(np.dot(face.embedding, ours.embedding)))
        assert float(np.dot(theirs.embedding, ours.embedding)) > 0.95, "the same face, embedded alike"


def test_a_video_frame_s_passes_are_bucketed_too(gpu_way_engine):
    frame = group_at(1920)
    shapes = recorded_shapes(gpu_way_engine)
    gpu_way_engine.analyze(frame, plan=CLIP_SCHEDULE.look_plan_of(1920, frame.shape[0]))
    buckets = {(height, width) for width, height in GPU_SHAPES.detector_buckets}
    assert {shape[2:] for shape in shapes} <= buckets


def test_padded_embedding_batches_give_the_same_embeddings(cpu_engine, gpu_way_engine):
    image = group_at(1600)
    detections = cpu_engine.detect(image)
    assert len(detections) == 6
    for count in (1, 3, 6):  # batches of 1, 4 (3 + one copy) and 16 (6 + ten copies)
        plain = cpu_engine.embed_many(image, detections[:count])
        padded = gpu_way_engine.embed_many(image, detections[:count])
        assert padded.vectors.shape == plain.vectors.shape
        assert np.allclose(padded.vectors, plain.vectors, atol=1e-4)
        assert np.allclose(padded.norms, plain.norms, rtol=1e-4)


@pytest.mark.skipif(not HAS_CUDA, reason="onnxruntime here has no CUDA provider (requirements-gpu.txt on a GPU box)")
def test_on_cuda_the_faces_are_the_cpu_s_and_a_warm_photo_pays_no_shape(cpu_engine):
    import time

    cuda = engine(providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert cuda.provider == "CUDAExecutionProvider"
    image = group_at(4000)
    began = time.perf_counter()
    found = cuda.analyze(image)
    first = time.perf_counter() - began
    assert same_faces(found, cpu_engine.analyze(image))
    assert first < 2.0, "every shape was warmed up: no pass pays cuDNN's search"


def test_a_cascade_lowers_the_candidate_score_of_the_finest_levels_only(cpu_engine, monkeypatch):
    """Plan.fine_score_threshold (bench/first_look.py): the photo's finest level takes its candidates from it, and
    Plan.turned_score_threshold the finest turned level; the coarser levels, the overview, the edge pass and the
    second looks keep their own scores."""
    import dataclasses

    pyramid = cpu_engine.pyramid
    plan = dataclasses.replace(
        Plan(), fine_scale=1.0, fine_score_threshold=0.07, turned_scale=0.5, turned_score_threshold=0.1
    )
    image = group_at(2400)
    height, width = image.shape[:2]
    runs = []
    real = pyramid.passes.run_many

    def spy(inputs, threshold):
        runs.extend(((out_w, out_h), threshold) for _, out_w, out_h in inputs)
        return real(inputs, threshold)

    monkeypatch.setattr(pyramid.passes, "run_many", spy)
    cpu_engine.analyze(image, plan=plan)
    finest = (width, height)  # x1: one pass, the photo's own size
    turned = {(round(height / 2), round(width / 2)), (round(width / 2), round(height / 2))}
    assert {threshold for size, threshold in runs if size == finest} == {0.07}
    assert {threshold for size, threshold in runs if size in turned} == {0.1}
    assert len([size for size, _ in runs if size in turned]) == 3, "one finest turned level a quarter turn"
    others = {threshold for size, threshold in runs if size != finest and size not in turned}
    assert not others & {0.07, 0.1}
    assert {plan.score_threshold, plan.verify_score, plan.edge_score} <= others, others


def test_turned_levels_from_a_turned_scale_are_a_pyramid_of_their_own(cpu_engine, monkeypatch):
    """Plan.turned_scale: the turned passes run at that scale and each level_ratio below it, not at the upright
    levels, so a cascade's coarser finest level (1x, then 1/3x) leaves the turned levels at today's 1/2x."""
    import dataclasses

    pyramid = cpu_engine.pyramid
    plan = dataclasses.replace(Plan(), fine_scale=1.0, turned_scale=0.5)
    image = group_at(2400)
    height, width = image.shape[:2]
    sizes = []
    real = pyramid.passes.run_many

    def spy(inputs, threshold):
        sizes.extend((out_w, out_h) for _, out_w, out_h in inputs)
        return real(inputs, threshold)

    def passes_at(scale: float, *, turned: bool) -> int:
        """Passes within a pixel of the photo at `scale`, turned a quarter or not (rounding differs by path)."""
        want = (height * scale, width * scale) if turned else (width * scale, height * scale)
        return sum(abs(w - want[0]) <= 1 and abs(h - want[1]) <= 1 for w, h in sizes)

    monkeypatch.setattr(pyramid.passes, "run_many", spy)
    cpu_engine.analyze(image, plan=plan)
    assert passes_at(1 / 3, turned=False) == 1, "the upright level below the finest is 1/3x"
    assert passes_at(1 / 2, turned=True) == 2, "the turned passes start at 1/2x (90 and 270 degrees)"
    assert passes_at(1 / 2, turned=False) == 1, "half a turn at 1/2x, once; no upright level there"
    assert passes_at(1 / 3, turned=True) == 0, "no turned level at 1/3x"


def test_a_cascade_looks_again_only_at_its_small_faint_candidates(cpu_engine, monkeypatch):
    """Plan.cascade_max_width: the finest level's candidates under score_threshold wider than it get no second
    look; the photo's faces are the same, with fewer looks, and every look left out was at a wide box."""
    import collections
    import dataclasses

    image = group_at(2400)
    looked_at = {}
    found = {}
    for cap in (None, 40):
        plan = dataclasses.replace(Plan(), fine_scale=1.0, fine_score_threshold=0.07, cascade_max_width=cap)
        pyramid = cpu_engine.pyramid.planned(plan)
        widths = looked_at[cap] = []
        real = pyramid._second_looks

        def spy(image, boxes, *, mirrored=False, width=None, real=real, widths=widths):
            widths.extend(float(box[2] - box[0]) for box in boxes)
            return real(image, boxes, mirrored=mirrored, width=width)

        monkeypatch.setattr(pyramid, "_second_looks", spy)
        found[cap] = cpu_engine.detect(image, plan=plan)
    assert same_faces(found[40], found[None])
    left_out = collections.Counter(looked_at[None]) - collections.Counter(looked_at[40])
    assert left_out, "the plan without a cap looks again at wide faint candidates in this photo"
    assert min(left_out.elements()) > 40, left_out


def test_turned_levels_after_one_that_runs_whole_are_the_overview_only(cpu_engine, monkeypatch):
    """Plan.turned_whole_then_overview: a 4800 px photo's turned 1/2x level runs as one pass, so its turned
    levels are 1/2x and the overview, without the 1/6x level between; the faces are the same."""
    import dataclasses

    image = group_at(4800)
    height, width = image.shape[:2]
    sixth = {(round(width / 6), round(height / 6)), (round(height / 6), round(width / 6))}
    at_a_sixth, found = {}, {}
    for flag in (False, True):
        plan = dataclasses.replace(Plan(), turned_scale=0.5, turned_whole_then_overview=flag)
        pyramid = cpu_engine.pyramid.planned(plan)
        sizes = []
        real = pyramid.passes.run_many

        def spy(inputs, threshold, real=real, sizes=sizes):
            sizes.extend((out_w, out_h) for _, out_w, out_h in inputs)
            return real(inputs, threshold)

        monkeypatch.setattr(pyramid.passes, "run_many", spy)
        found[flag] = cpu_engine.detect(image, plan=plan)
        monkeypatch.undo()
        at_a_sixth[flag] = sum(any(abs(w - a) <= 1 and abs(h - b) <= 1 for a, b in sixth) for w, h in sizes)
    assert at_a_sixth == {False: 3, True: 0}, "a 1/6x level a quarter turn, or none"
    assert same_faces(found[True], found[False])
