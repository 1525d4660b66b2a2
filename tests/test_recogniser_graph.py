"""The recogniser's PRelu as Mul and Max (faces/engines/graph.py): the real buffalo_s recogniser gives the same
features bit for bit on real faces, a PRelu the identity does not hold for is left alone, and the engine runs the
rewritten graph on a CPU only, a photo's faces a few at a time."""

import dataclasses

import numpy as np
import onnx
import pytest
from django.conf import settings
from insightface.model_zoo.arcface_onnx import ArcFaceONNX
from insightface.utils.face_align import norm_crop
from onnx import TensorProto, helper, numpy_helper

from faces.engines import resident_engine
from faces.engines.graph import prelu_count, with_prelu_as_max
from faces.engines.insightface import CPU, _recogniser_model, _session, mirrored_average
from faces.engines.packs import BUFFALO_L, BUFFALO_S, ModelFileRejected, pack_folder
from momentlens.devservices import samples


def _recogniser_file() -> str:
    return str(BUFFALO_S.files(pack_folder(BUFFALO_S, settings.FACE_MODEL_ROOT))[1])


def _run(model, values: np.ndarray) -> np.ndarray:
    """`model`'s output for `values`, on the worker's kind of CPU session."""
    session = _session("a test model", 1, [CPU], model=model)
    return session.run(None, {session.get_inputs()[0].name: values})[0]


def _arcface(model) -> ArcFaceONNX:
    """insightface's ArcFace (its own pre-processing) running `model`: the recogniser file's graph or a rewrite."""
    return ArcFaceONNX(model_file=_recogniser_file(), session=_session(_recogniser_file(), 1, [CPU], model=model))


def _group_crops() -> list[np.ndarray]:
    """t1's six guests aligned as the engine aligns them, then their mirror images."""
    image = samples.group_photo()
    crops = [norm_crop(image, landmark=face.landmarks, image_size=112) for face in resident_engine().detect(image)]
    return crops + [np.ascontiguousarray(crop[:, ::-1]) for crop in crops]


def _prelu_model(slopes: list[float]) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, len(slopes), 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, len(slopes), 3])
    slope = numpy_helper.from_array(np.array(slopes, dtype=np.float32).reshape(-1, 1), "slope")
    graph = helper.make_graph([helper.make_node("PRelu", ["x", "slope"], ["y"])], "prelu", [x], [y], [slope])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)


def test_buffalo_s_recogniser_gives_the_same_features_bit_for_bit_without_a_prelu():
    recogniser = _recogniser_file()
    crops = _group_crops()
    rewritten = with_prelu_as_max(onnx.load(recogniser))

    assert prelu_count(onnx.load(recogniser)) == 34
    assert prelu_count(rewritten) == 0
    assert len(crops) == 12  # t1's six guests and their mirror images
    assert np.array_equal(_arcface(rewritten.SerializeToString()).get_feat(crops), _arcface(recogniser).get_feat(crops))


def test_a_prelu_with_slopes_at_most_one_computes_the_same_as_max():
    model = _prelu_model([0.25, -0.83, 1.0, 0.0])
    values = np.array([[[-2.5, 0.0, 3.0], [-1.0, -0.0, 0.5], [-7.0, 2.0, -0.1], [-3.0, 4.0, 0.0]]], dtype=np.float32)

    rewritten = with_prelu_as_max(onnx.load_from_string(model.SerializeToString()))

    assert prelu_count(rewritten) == 0
    assert np.array_equal(_run(rewritten.SerializeToString(), values), _run(model.SerializeToString(), values))


def test_a_prelu_with_a_slope_above_one_is_left_alone():
    """max(x, slope * x) is x * slope for a negative x only while the slope is at most 1: at 1.5 it would keep x."""
    model = _prelu_model([0.25, 1.5])

    assert prelu_count(with_prelu_as_max(model)) == 1


def test_the_engine_runs_the_rewritten_graph_on_a_cpu_and_the_file_elsewhere():
    recogniser = _recogniser_file()

    on_cpu = _recogniser_model(recogniser, "CPUExecutionProvider")
    elsewhere = _recogniser_model(recogniser, "CUDAExecutionProvider")

    assert prelu_count(onnx.load_from_string(on_cpu)) == 0
    assert elsewhere == recogniser


def test_a_truncated_recogniser_without_a_digest_is_refused(tmp_path):
    """buffalo_l's files have no digest here: a file that is no ONNX model is refused when its graph is read."""
    recogniser = tmp_path / BUFFALO_L.recognizer
    recogniser.write_bytes(b"\x08\x07\x12\x04not a model")

    with pytest.raises(ModelFileRejected, match="does not load as an ONNX model"):
        _recogniser_model(str(recogniser), "CPUExecutionProvider")


def test_the_resident_engine_embeds_as_the_files_graph_does():
    """The worker's own call, on the rewritten graph: the features ArcFace gives from the file's graph."""
    engine = resident_engine()
    image = samples.group_photo()
    detections = engine.detect(image)
    raw = _arcface(_recogniser_file()).get_feat(_group_crops())
    expected = mirrored_average(raw[: len(detections)], raw[len(detections) :])

    seen = engine.embed_many(image, detections)

    assert np.allclose(seen.vectors, expected.vectors, atol=1e-6)
    assert np.allclose(seen.norms, expected.norms, rtol=1e-6)


def test_a_cpu_engine_embeds_a_photos_faces_a_few_at_a_time(monkeypatch):
    """A larger run's activations leave the cache (Shapes.recogniser_faces_per_run): t1's six guests and their
    mirror images go in runs of at most four, with the features one run of twelve gives."""
    engine = resident_engine()
    image = samples.group_photo()
    detections = engine.detect(image)
    monkeypatch.setattr(engine, "shapes", dataclasses.replace(engine.shapes, recogniser_faces_per_run=12))
    at_once = engine.embed_many(image, detections)
    monkeypatch.setattr(engine, "shapes", dataclasses.replace(engine.shapes, recogniser_faces_per_run=4))
    runs = []
    get_feat = engine._recognizer.get_feat
    monkeypatch.setattr(engine._recognizer, "get_feat", lambda faces: runs.append(len(faces)) or get_feat(faces))

    seen = engine.embed_many(image, detections)

    assert runs == [4, 4, 4]
    assert np.allclose(seen.vectors, at_once.vectors, atol=1e-6)
    assert np.allclose(seen.norms, at_once.norms, rtol=1e-6)
