"""The production engine: InsightFace's buffalo_l pack, detection and recognition only.

- Detector: SCRFD-10G (`det_10g.onnx`), five landmarks per face.
- Embedder: ArcFace ResNet-50 (`w600k_r50.onnx`), 512-d, on insightface's 112 px 5-point alignment.
Both run in onnxruntime sessions built here, so that threads and providers are ours,
and are handed to insightface's own SCRFD and ArcFaceONNX classes for their pre- and
post-processing. The worker never downloads buffalo_l: an operator puts the two files
in place, and a missing file stops the worker at startup with what to put where.
"""

from pathlib import Path

import numpy as np

from faces.engines.base import Detection, FaceEngine, ModelsMissing, pad_to_stride, to_unit_512

NAME = "insightface-buffalo_l"
DETECTOR_FILE = "det_10g.onnx"
RECOGNIZER_FILE = "w600k_r50.onnx"
MODEL_FILES = (DETECTOR_FILE, RECOGNIZER_FILE)
# insightface's own default for SCRFD; tiling's cross-pass NMS runs after it.
SCORE_THRESHOLD = 0.5
# SCRFD's largest stride: inputs are padded to a multiple of it.
STRIDE = 32


class InsightFaceEngine(FaceEngine):
    name = NAME

    def __init__(self, model_folder: Path, *, intra_op_threads: int = 1, providers: list[str] | None = None):
        model_folder = Path(model_folder)
        require_model_files(model_folder)
        from insightface.model_zoo.arcface_onnx import ArcFaceONNX
        from insightface.model_zoo.onnxruntime_utils import preload_cuda_libraries
        from insightface.model_zoo.scrfd import SCRFD

        providers = list(providers or ["CPUExecutionProvider"])
        preload_cuda_libraries(providers)
        detector_file, recognizer_file = (str(model_folder / name) for name in MODEL_FILES)
        # One session for every input size: by default insightface builds, and keeps,
        # a fixed-shape session for each new size, and photo sizes vary without bound.
        self._detector = SCRFD(
            model_file=detector_file,
            session=_session(detector_file, intra_op_threads, providers),
            static_shape_sessions=False,
        )
        if not self._detector.use_kps:
            raise ModelsMissing(
                f"{detector_file} is not a SCRFD detector with landmarks: use buffalo_l's {DETECTOR_FILE}"
            )
        self._recognizer = ArcFaceONNX(
            model_file=recognizer_file, session=_session(recognizer_file, intra_op_threads, providers)
        )

    def detect_once(self, image: np.ndarray) -> list[Detection]:
        height, width = image.shape[:2]
        # Padding rather than resizing to the stride keeps insightface's det_scale at 1:
        # faces are looked for at the size they have in `image`.
        padded = pad_to_stride(image, STRIDE)
        input_size = (padded.shape[1], padded.shape[0])
        found, landmarks = self._detector.detect(padded, input_size=input_size, det_thresh=SCORE_THRESHOLD)
        return [_detection(row, points, width, height) for row, points in zip(found, landmarks, strict=True)]

    def embed(self, image: np.ndarray, detection: Detection) -> np.ndarray:
        from insightface.utils.face_align import norm_crop

        aligned = norm_crop(image, landmark=detection.landmarks, image_size=self._recognizer.input_size[0])
        return to_unit_512(self._recognizer.get_feat(aligned).reshape(-1))


def require_model_files(folder: Path) -> None:
    """Refuse to start, saying what to put where, unless both buffalo_l files are in `folder`."""
    missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
    if not missing:
        return
    problem = "does not exist" if not folder.is_dir() else f"is missing {', '.join(missing)}"
    raise ModelsMissing(
        f"buffalo_l model folder {folder} {problem}. The insightface engine needs exactly "
        f"{DETECTOR_FILE} and {RECOGNIZER_FILE} from the buffalo_l pack in that folder; "
        "the worker never downloads buffalo_l, so copy those two files there (or use FACE_ENGINE=portable)."
    )


def _session(model_file: str, intra_op_threads: int, providers: list[str]):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model_file, options, providers=providers)


def _detection(row: np.ndarray, landmarks: np.ndarray, width: int, height: int) -> Detection:
    # A face cut by the image edge may reach into the padding; the box stays on the image.
    box = np.clip(row[:4], 0, [width, height, width, height]).astype(np.float32)
    return Detection(box, np.asarray(landmarks, dtype=np.float32).reshape(5, 2), float(row[4]))
