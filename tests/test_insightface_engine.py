"""The insightface engine: exact geometry on small buffalo_l-format models with known weights, and
the refusal of missing, corrupted or swapped model files (buffalo_s's real files, copied).

The detector has det_10g's interface (input 1x3xHxW with dynamic H and W; per stride
8/16/32 and two anchors per cell: scores [N,1], distances [N,4], landmarks [N,10])
but constant outputs: one anchor scores 0.9, one scores under the threshold, and
every anchor predicts the same distances. The recogniser has w600k_r50's interface
(Nx3x112x112 -> Nx512): the channel means of its input times a known matrix. So the
expected box, landmarks and embedding follow from the constants below.
"""

import dataclasses
import shutil
import socket
import sys

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from faces.engines import build_engine
from faces.engines.base import EMBEDDING_DIMENSIONS, ModelsMissing, Plan
from faces.engines.insightface import InsightFaceEngine
from faces.engines.packs import BUFFALO_L, BUFFALO_S, ModelFileRejected, pack_folder
from faces.geometry import iou

STRIDES = (8, 16, 32)
ANCHORS = 2
WIDTH, HEIGHT = 200, 150  # neither is a multiple of 32: the engine pads to 224 x 160

# The face: stride 16, cell (x 5, y 4), second anchor.
FACE_STRIDE, FACE_CELL, FACE_ANCHOR = 16, (5, 4), 1
FACE_SCORE = 0.9
# A second anchor (stride 8) that scores just under the threshold.
WEAK_STRIDE, WEAK_INDEX, WEAK_SCORE = 8, 40, Plan().score_threshold - 0.05
# What every anchor predicts, in pixels; the model outputs them in units of its stride.
BOX_DISTANCES = np.array([32, 40, 32, 48], dtype=np.float32)  # left, top, right, bottom
LANDMARK_OFFSETS = np.array([[-14, -12], [14, -12], [0, 4], [-11, 18], [11, 18]], dtype=np.float32)

FACE_BGR = (40, 90, 200)
BACKGROUND_BGR = (230, 230, 230)
PROJECTION = np.random.default_rng(7).standard_normal((3, EMBEDDING_DIMENSIONS)).astype(np.float32)


def _padded(length: int) -> int:
    return -(-length // 32) * 32


def _face_centre() -> np.ndarray:
    return np.array(FACE_CELL, dtype=np.float32) * FACE_STRIDE


def _face_row() -> int:
    cells_per_row = _padded(WIDTH) // FACE_STRIDE
    x, y = FACE_CELL
    return (y * cells_per_row + x) * ANCHORS + FACE_ANCHOR


def _expected_box() -> np.ndarray:
    cx, cy = _face_centre()
    left, top, right, bottom = BOX_DISTANCES
    return np.array([cx - left, cy - top, cx + right, cy + bottom], dtype=np.float32)


def _expected_landmarks() -> np.ndarray:
    return _face_centre() + LANDMARK_OFFSETS


def _expected_embedding(bgr: tuple[int, int, int]) -> np.ndarray:
    # ArcFaceONNX feeds RGB, (pixel - 127.5) / 127.5.
    rgb = (np.array(bgr[::-1], dtype=np.float32) - 127.5) / 127.5
    vector = rgb @ PROJECTION
    return vector / np.linalg.norm(vector)


def _save(graph: onnx.GraphProto, path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _detector_graph(with_landmarks: bool = True) -> onnx.GraphProto:
    nodes, initializers, outputs = [], [], {"score": [], "bbox": [], "kps": []}
    initializers.append(numpy_helper.from_array(np.array([-1, 1], dtype=np.int64), "column_shape"))
    initializers.append(numpy_helper.from_array(np.array([ANCHORS, 1], dtype=np.int64), "anchor_repeats"))
    initializers.append(numpy_helper.from_array(np.zeros(1, dtype=np.float32), "zero"))
    nodes.append(helper.make_node("ReduceMean", ["input.1"], ["grey"], axes=[1], keepdims=1, name="grey"))
    for stride in STRIDES:
        # A zero per anchor, shaped by the input: [(H/s) * (W/s) * 2, 1].
        pool, cells, zeros = f"pool{stride}", f"cells{stride}", f"zeros{stride}"
        nodes += [
            helper.make_node("AveragePool", ["grey"], [pool], kernel_shape=[stride, stride], strides=[stride, stride]),
            helper.make_node("Reshape", [pool, "column_shape"], [cells]),
            helper.make_node("Tile", [cells, "anchor_repeats"], [f"tiled{stride}"]),
            helper.make_node("Mul", [f"tiled{stride}", "zero"], [zeros]),
        ]
        nodes.append(_score_node(stride, zeros, initializers))
        for kind, values in (("bbox", BOX_DISTANCES), ("kps", LANDMARK_OFFSETS.reshape(-1))):
            constant = f"{kind}_distances{stride}"
            initializers.append(numpy_helper.from_array((values / stride).reshape(1, -1), constant))
            nodes.append(helper.make_node("Add", [zeros, constant], [f"{kind}_{stride}"]))
        for kind, width in (("score", 1), ("bbox", 4), ("kps", 10)):
            outputs[kind].append(helper.make_tensor_value_info(f"{kind}_{stride}", TensorProto.FLOAT, [None, width]))
    graph_outputs = outputs["score"] + outputs["bbox"] + (outputs["kps"] if with_landmarks else [])
    image = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, "height", "width"])
    return helper.make_graph(nodes, "scrfd_test", [image], graph_outputs, initializers)


def _score_node(stride: int, zeros: str, initializers: list) -> onnx.NodeProto:
    rows = {FACE_STRIDE: (_face_row(), FACE_SCORE), WEAK_STRIDE: (WEAK_INDEX, WEAK_SCORE)}
    if stride not in rows:
        return helper.make_node("Identity", [zeros], [f"score_{stride}"])
    row, score = rows[stride]
    initializers.append(numpy_helper.from_array(np.array([[row]], dtype=np.int64), f"score_row{stride}"))
    initializers.append(numpy_helper.from_array(np.array([[score]], dtype=np.float32), f"score_value{stride}"))
    return helper.make_node("ScatterND", [zeros, f"score_row{stride}", f"score_value{stride}"], [f"score_{stride}"])


def _recognizer_graph() -> onnx.GraphProto:
    # No node named Sub*/Mul*: ArcFaceONNX takes such a graph for an mxnet export with its own normalisation.
    nodes = [
        helper.make_node("ReduceMean", ["input.1"], ["channel_means"], axes=[2, 3], keepdims=0, name="channel_means"),
        helper.make_node("MatMul", ["channel_means", "projection"], ["683"], name="projection"),
    ]
    image = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", 3, 112, 112])
    embedding = helper.make_tensor_value_info("683", TensorProto.FLOAT, ["batch", EMBEDDING_DIMENSIONS])
    return helper.make_graph(
        nodes, "arcface_test", [image], [embedding], [numpy_helper.from_array(PROJECTION, "projection")]
    )


def buffalo_l_engine(folder, **options):
    """buffalo_l from `folder`, its small-face levels on the installed buffalo_s detector."""
    small_faces = pack_folder(BUFFALO_S, folder / "elsewhere")
    return InsightFaceEngine(BUFFALO_L, folder, small_face_folder=small_faces, **options)


@pytest.fixture
def model_folder(tmp_path):
    folder = tmp_path / "buffalo_l"
    _save(_detector_graph(), folder / "det_10g.onnx")
    _save(_recognizer_graph(), folder / "w600k_r50.onnx")
    return folder


@pytest.fixture
def photo() -> np.ndarray:
    image = np.full((HEIGHT, WIDTH, 3), BACKGROUND_BGR, dtype=np.uint8)
    # Wider than the aligned 112 px crop reaches, so the crop is all face colour.
    image[0:HEIGHT, 10:160] = FACE_BGR
    return image


@pytest.fixture
def no_network(monkeypatch):
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


def test_name(model_folder):
    assert buffalo_l_engine(model_folder).name == "insightface-buffalo_l"


def test_detect_returns_the_anchor_box_and_landmarks_in_image_pixels(model_folder, photo):
    # Without small faces, a photo this small is one pass at its own size (the overview level).
    detections = buffalo_l_engine(model_folder).detect(photo, small_faces=False)

    assert len(detections) == 1  # the under-threshold anchor is not a face
    (face,) = detections
    assert face.box.dtype == np.float32
    assert face.box.shape == (4,)
    assert face.landmarks.shape == (5, 2)
    np.testing.assert_allclose(face.box, _expected_box(), atol=1.0)
    np.testing.assert_allclose(face.landmarks, _expected_landmarks(), atol=1.0)
    assert face.score == pytest.approx(FACE_SCORE)
    fractions = face.box / [WIDTH, HEIGHT, WIDTH, HEIGHT]
    np.testing.assert_allclose(fractions, [48 / 200, 24 / 150, 112 / 200, 112 / 150], atol=0.01)


def test_embed_is_the_projection_of_the_aligned_face(model_folder, photo):
    engine = buffalo_l_engine(model_folder)
    (face,) = engine.detect(photo, small_faces=False)

    seen = engine.embed_many(photo, [face])
    (embedding,) = seen.vectors

    # A face of one colour is its own mirror image: the average of the two is the face's own projection, and
    # the norm kept is the projection's before normalisation.
    rgb = (np.array(FACE_BGR[::-1], dtype=np.float32) - 127.5) / 127.5
    assert seen.norms[0] == pytest.approx(float(np.linalg.norm(rgb @ PROJECTION)), rel=1e-4)
    assert embedding.shape == (EMBEDDING_DIMENSIONS,)
    assert np.linalg.norm(embedding) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(embedding, _expected_embedding(FACE_BGR), atol=1e-4)
    assert not np.allclose(embedding, _expected_embedding(FACE_BGR[::-1]), atol=1e-2)


def test_analyze_never_touches_the_network(model_folder, photo, no_network):
    engine = buffalo_l_engine(model_folder)
    (face,) = engine.analyze(photo, small_faces=False)

    assert no_network == []
    assert face.engine == "insightface-buffalo_l"
    np.testing.assert_allclose(face.box, _expected_box(), atol=1.0)
    np.testing.assert_allclose(face.landmarks, _expected_landmarks(), atol=1.0)
    np.testing.assert_allclose(face.embedding, _expected_embedding(FACE_BGR), atol=1e-4)


def test_one_detector_session_serves_every_image_size(model_folder, photo):
    """insightface would build and keep a session per input size; photo sizes vary without bound."""
    engine = buffalo_l_engine(model_folder)
    session = engine._overview.scrfd.session
    for size in ((WIDTH, HEIGHT), (320, 96), (64, 480), (1000, 700)):
        engine.detect(cv2.resize(photo, size))

    assert engine._overview.scrfd.session is session
    assert not engine._overview.scrfd.resolution_sessions


def test_missing_folder_is_refused_before_loading_anything(tmp_path, monkeypatch):
    # Nothing heavy is imported before the check: these imports would fail.
    monkeypatch.setitem(sys.modules, "insightface", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    folder = tmp_path / "models" / "buffalo_l"

    with pytest.raises(ModelsMissing) as refused:
        InsightFaceEngine(BUFFALO_L, folder)

    message = str(refused.value)
    assert str(folder) in message
    assert "does not exist" in message
    assert "det_10g.onnx" in message
    assert "w600k_r50.onnx" in message


@pytest.mark.parametrize(
    ("present", "missing"), [("det_10g.onnx", "w600k_r50.onnx"), ("w600k_r50.onnx", "det_10g.onnx")]
)
def test_folder_with_one_file_names_the_other(model_folder, present, missing):
    (model_folder / missing).unlink()

    with pytest.raises(ModelsMissing) as refused:
        buffalo_l_engine(model_folder)

    message = str(refused.value)
    assert str(model_folder) in message
    assert f"is missing {missing}." in message
    assert present in message  # the message still says both files belong there


def test_detector_without_landmarks_is_refused(model_folder):
    _save(_detector_graph(with_landmarks=False), model_folder / "det_10g.onnx")

    with pytest.raises(ModelFileRejected, match="landmarks"):
        buffalo_l_engine(model_folder)


def test_build_engine_fails_fast_without_buffalo_l(settings, tmp_path):
    settings.FACE_MODEL_ROOT = tmp_path

    with pytest.raises(ModelsMissing, match="buffalo_l"):
        build_engine("buffalo_l")


@pytest.fixture
def buffalo_s_copy(tmp_path):
    """buffalo_s's real files, copied where FACE_MODEL_ROOT/buffalo_s would hold them."""
    folder = tmp_path / "buffalo_s"
    folder.mkdir()
    installed = pack_folder(BUFFALO_S, tmp_path / "elsewhere")
    for name in (BUFFALO_S.detector, BUFFALO_S.recognizer):
        shutil.copy(installed / name, folder / name)
    return folder


def test_buffalo_s_files_are_checked_by_digest(buffalo_s_copy):
    assert BUFFALO_S.files(buffalo_s_copy) == (
        buffalo_s_copy / "scrfd_500m_bnkps.onnx",
        buffalo_s_copy / "w600k_mbf.onnx",
    )


def test_a_corrupted_model_file_is_refused_before_any_session(buffalo_s_copy, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # refused before onnxruntime is touched
    recognizer = buffalo_s_copy / "w600k_mbf.onnx"
    recognizer.write_bytes(recognizer.read_bytes()[:-1024])

    with pytest.raises(ModelFileRejected) as refused:
        InsightFaceEngine(BUFFALO_S, buffalo_s_copy)
    assert str(recognizer) in str(refused.value)
    assert "9cc6e4a75f0e2bf0b1aed94578f144d15175f357bdc05e815e5c4a02b319eb4f" in str(refused.value)


def test_swapped_model_files_are_refused(buffalo_s_copy):
    detector, recognizer = buffalo_s_copy / "scrfd_500m_bnkps.onnx", buffalo_s_copy / "w600k_mbf.onnx"
    detector_bytes = detector.read_bytes()
    detector.write_bytes(recognizer.read_bytes())
    recognizer.write_bytes(detector_bytes)

    with pytest.raises(ModelFileRejected, match=r"is not buffalo_s's scrfd_500m_bnkps\.onnx"):
        InsightFaceEngine(BUFFALO_S, buffalo_s_copy)


def test_swapped_buffalo_l_files_are_refused_by_structure(model_folder):
    detector, recognizer = model_folder / "det_10g.onnx", model_folder / "w600k_r50.onnx"
    detector_bytes = detector.read_bytes()
    detector.write_bytes(recognizer.read_bytes())
    recognizer.write_bytes(detector_bytes)

    with pytest.raises(ModelFileRejected):
        buffalo_l_engine(model_folder)


def test_buffalo_l_merges_its_own_large_faces_with_buffalo_s_small_faces(model_folder, group_faces):
    """The production plan: buffalo_l's detector keeps the overview, buffalo_s's runs the finer levels.

    The generated det_10g finds exactly one face, scoring FACE_SCORE, in whatever it sees; the real
    SCRFD-500M finds t1's six guests on the enlarged levels. One NMS keeps both kinds.
    """
    from momentlens.devservices import samples

    group = cv2.resize(samples.group_photo(), None, fx=2.0, fy=2.0, interpolation=cv2.INTER_CUBIC)
    engine = buffalo_l_engine(model_folder)
    assert engine.pyramid.passes is not engine.pyramid.overview_passes
    # The generated det_10g would also find its one face in each turned copy of the overview.
    found = engine.detect(group, plan=dataclasses.replace(engine.pyramid.plan, turns=()))

    from_overview = [d for d in found if d.score == pytest.approx(FACE_SCORE)]
    from_fine_levels = [d for d in found if d.score != pytest.approx(FACE_SCORE)]
    assert len(from_overview) == 1, "buffalo_l's own detection is kept"
    assert len(group_faces) == 6
    for face in group_faces:  # buffalo_s's reading of t1 at its own size, boxes doubled
        assert any(iou(face.box * 2, other.box) > 0.6 for other in from_fine_levels), "buffalo_s's faces are kept"


def test_on_two_threads_buffalo_l_runs_only_its_fine_detector_side_by_side(model_folder):
    """Its SCRFD-10G runs one pass at a time (the overview, the edge pass): no second session of it is held."""
    engine = buffalo_l_engine(model_folder, intra_op_threads=2)

    assert engine.lanes.threads == 2
    assert engine._overview._lane_session is None
    assert engine._fine._lane_session is not None
