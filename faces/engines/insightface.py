"""The face engine: InsightFace's SCRFD detector and ArcFace recogniser, one model pack.

Both run in onnxruntime sessions built here, so that threads and providers are ours,
and are handed to insightface's own SCRFD and ArcFaceONNX classes for their pre- and
post-processing. The pack (faces/engines/packs.py) says which two files and checks
them before any session is built. Recognition embeds all of a photo's faces in one
batch.

Each face is embedded as the recogniser sees it and as it sees its mirror image, averaged: a face and its
mirror are the same person, and the average is nearer the person's other photos (docs/ARCHITECTURE.md §6,
"Recognition"). The recogniser's feature norm before normalisation is kept with it: it is small when the
aligned crop hardly looks like a face to the recogniser (a turned head, sunglasses, blur, darkness, the
wrong way up), and the blur decision reads it (faces/thresholds.py).
"""

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from faces.checkpoint import Checkpoint, never_stop
from faces.engines.base import (
    EMBEDDING_DIMENSIONS,
    PHOTO_PLAN,
    DetectedFace,
    Detection,
    Embedded,
    FaceEngine,
    ModelsMissing,
    Plan,
    ProviderUnavailable,
)
from faces.engines.graph import with_prelu_as_max
from faces.engines.lanes import Lanes
from faces.engines.packs import ModelFileRejected, ModelPack
from faces.engines.pyramid import Passes, PyramidDetector, Shape
from faces.geometry import bounds, near_edge

# ArcFace's aligned input.
ALIGNED_SIZE = 112
CPU = "CPUExecutionProvider"
# onnxruntime's own log: errors only. A batch of faces through a recogniser exported
# with batch size 1 runs correctly but warns on every call.
ORT_LOG_ERRORS_ONLY = 3


@dataclass(frozen=True)
class Shapes:
    """The input shapes the engine's sessions see. On a CPU a pass runs at its own size, which is cheaper, and
    alone; on a GPU a session spends 1.5-3 s of cuDNN search on every shape new to it, so there every shape a job
    can bring is fixed and run once at the start (docs/ARCHITECTURE.md §6, "On a GPU")."""

    # The detector's inputs are padded to the smallest of these (width, height) that holds them, a session each
    # (faces/engines/pyramid.py, Passes); (): each pass at its own size, padded to the stride.
    detector_buckets: tuple[Shape, ...] = ()
    # Same-shape detector passes of one image (a level's tiles, the second looks) run this many at a time.
    detector_batch: int = 1
    # Faces are embedded in batches of these sizes, the last filled with copies of a face; (): in runs of at most
    # recogniser_faces_per_run, side by side on several threads (faces/engines/lanes.py).
    recogniser_batches: tuple[int, ...] = ()
    # A larger run's activations leave the cache: on one thread a face costs 5.5 ms in runs of 2 and 7.5 ms in runs of
    # 24 (bench/recogniser_graph.py --batches "2 8 24").
    recogniser_faces_per_run: int = 4
    # On several CPU threads, a detector pass of at most this many pixels runs side by side with the others of its
    # stage (faces/engines/lanes.py); a larger one (a tile, a whole video frame) alone on all the threads, whose own
    # split of it pays and which would hold each lane's activations at once (bench/side_by_side_runs.py).
    lane_pass_pixels: int = 1_000_000


# A CPU's: every pass at its own size, alone; a photo's faces a few at a time.
CPU_SHAPES = Shapes()
# A GPU's. The buckets: a second look (a 64 px face in 1.75x its size, a video frame's in 2.5x; a photo's face the
# edge cuts at 128 px fills it), the overview (long side 640; a video frame's cut face's look), the edge pass (the
# overview mirrored 25 % past each edge) and a tile (a level larger than a tile is tiled); passes go 4 at a time; a
# photo's faces in batches of 1, 4, 16 or 64.
GPU_SHAPES = Shapes(
    detector_buckets=((224, 224), (640, 640), (960, 960), (PHOTO_PLAN.tile_width, PHOTO_PLAN.tile_height)),
    detector_batch=4,
    recogniser_batches=(1, 4, 16, 64),
)

# insightface's norm_crop calls scikit-image's deprecated SimilarityTransform.estimate; the
# result is the same, and the warning would print on every face.
warnings.filterwarnings("ignore", category=FutureWarning, module="insightface.utils.face_align")


class InsightFaceEngine(FaceEngine):
    def __init__(
        self,
        pack: ModelPack,
        folder: Path,
        *,
        small_face_folder: Path | None = None,
        intra_op_threads: int = 1,
        providers: list[str] | None = None,
        shapes: Shapes | None = None,
        plan: Plan = PHOTO_PLAN,
    ):
        """`small_face_folder`: where pack.small_faces_from's files are, for a pack whose small-face
        levels run another pack's detector (buffalo_l: buffalo_s's). `shapes`: what the sessions see; None:
        GPU_SHAPES on a GPU, CPU_SHAPES on a CPU. `plan`: the detection plan `analyze` follows unless asked
        another."""
        detector_file, recognizer_file = (str(path) for path in pack.files(folder))
        small_detector_file = str(pack.small_faces_from.files(small_face_folder)[0]) if pack.small_faces_from else None
        from insightface.model_zoo.arcface_onnx import ArcFaceONNX
        from insightface.model_zoo.onnxruntime_utils import preload_cuda_libraries

        self.name = pack.engine_name
        self.pack = pack
        self._options = (intra_op_threads, list(providers or ["CPUExecutionProvider"]))
        # The provider the sessions run on (checked: never a silent fall-back).
        self.provider = self._options[1][0]
        preload_cuda_libraries(self._options[1])
        self.shapes = (GPU_SHAPES if self.provider != CPU else CPU_SHAPES) if shapes is None else shapes
        # On a CPU with several threads, a stage's runs go side by side, one thread each (faces/engines/lanes.py).
        self.lanes = Lanes(intra_op_threads if self.provider == CPU else 1)
        # The overview's own detector (buffalo_l's SCRFD-10G) runs one pass at a time: no lanes, no second session.
        self._overview = self._passes(detector_file, pack.name, lanes=not small_detector_file)
        self._fine = self._passes(small_detector_file, pack.small_faces_from.name) if small_detector_file else None
        # One pyramid on the engine's passes (its sessions); a clip's plans are its own, built there.
        self.pyramid = PyramidDetector(self._fine or self._overview, plan, overview_passes=self._overview)
        recogniser = _recogniser_model(recognizer_file, self.provider)
        self._recognizer = self._lane_recognizer = ArcFaceONNX(
            model_file=recognizer_file, session=_session(recognizer_file, *self._options, model=recogniser)
        )
        if self.lanes.threads > 1:
            session = _session(recognizer_file, *self._lane_options, model=recogniser)
            self._lane_recognizer = ArcFaceONNX(model_file=recognizer_file, session=session)
        if tuple(self._recognizer.input_size) != (ALIGNED_SIZE, ALIGNED_SIZE):
            raise ModelFileRejected(f"{recognizer_file} is not an ArcFace recogniser of 112 px faces")
        # Every shape a job's passes can take, run once now (nothing on a CPU): no job pays for one.
        passes = [self._overview] + ([self._fine] if self._fine else [])
        self.warmed_up = [shape for one in passes for shape in one.warm_up()] + self._warm_up_recogniser()

    def _passes(self, model_file: str, pack_name: str, *, lanes: bool = True) -> Passes:
        """The detector's passes, with the engine's shapes: on a GPU a session per shape bucket; with `lanes`, a
        one-thread session for passes side by side."""
        scrfd = self._scrfd(model_file, pack_name)
        buckets = self.shapes.detector_buckets
        new_session = (lambda: _session(model_file, *self._options)) if buckets else None
        lane_session = _session(model_file, *self._lane_options) if lanes and self.lanes.threads > 1 else None
        return Passes(
            scrfd,
            buckets=buckets,
            batch=self.shapes.detector_batch,
            new_session=new_session,
            lanes=self.lanes,
            lane_session=lane_session,
            lane_pass_pixels=self.shapes.lane_pass_pixels,
        )

    @property
    def _lane_options(self) -> tuple[int, list[str]]:
        """A lane's session: one onnxruntime thread, the engine's providers."""
        return 1, self._options[1]

    def _scrfd(self, model_file: str, pack_name: str):
        from insightface.model_zoo.scrfd import SCRFD

        # One session for every input size: by default insightface builds, and keeps,
        # a fixed-shape session for each new size, and photo sizes vary without bound.
        detector = SCRFD(
            model_file=model_file, session=_session(model_file, *self._options), static_shape_sessions=False
        )
        if not detector.use_kps:
            raise ModelFileRejected(f"{model_file} is not a SCRFD detector with landmarks: use {pack_name}'s file")
        return detector

    def analyze(
        self,
        image: np.ndarray,
        *,
        small_faces: bool = True,
        plan: Plan | None = None,
        checkpoint: Checkpoint = never_stop,
    ) -> list[DetectedFace]:
        plan = plan or self.pyramid.plan
        detections = self.detect(image, small_faces=small_faces, plan=plan, checkpoint=checkpoint)
        turned = [d.turned for d in detections if d.turned is not None]
        seen = self.embed_many(image, detections + turned)
        views = iter(range(len(detections), len(detections) + len(turned)))
        kept = []
        for row, detection in enumerate(detections):
            if detection.turned is not None:
                detection, row = upright_first(detection, row, next(views), seen.norms, plan.turned_norm_margin)
            kept.append(Seen(detection, seen.vectors[row], float(seen.norms[row])))
        if small_faces:  # a reference selfie is looked at upright only, as by no turned level
            kept = self._reoriented(image, kept, plan)
        return [face.as_detected(self.name) for face in kept]

    def _reoriented(self, image: np.ndarray, kept: list["Seen"], plan: Plan) -> list["Seen"]:
        """Each whole face the recogniser sees poorly (Plan.reorient_norm, reorient_least_width) looked at turned by
        Plan.reorient_looks; where that places its landmarks otherwise, the view the recogniser sees
        turned_norm_margin times better is kept."""
        # A face the picture's edge cuts is not looked at (as by no tilted look): its clipped box is a sliver, whose
        # look enlarged to a face's width would be megapixels; it is judged unsure by what the edge hides.
        height, width = image.shape[:2]
        poor = [
            index
            for index, face in enumerate(kept)
            if face.norm < plan.reorient_norm
            and _width(face.detection.box) >= plan.reorient_least_width
            and not near_edge(face.detection.box, width, height)
        ]
        boxes = [kept[index].detection.box for index in poor]
        found = self.pyramid.planned(plan).looks_turned(image, boxes, plan.reorient_looks)
        # The view's box grows to hold the face's first box too (the blur must cover at least what it covered), within
        # the picture, as every face's box.
        inside = np.array([width, height, width, height], np.float32)
        other_way = [
            (
                index,
                Detection(np.clip(bounds(view[0], kept[index].detection.box), 0, inside), view[1], view[2]),
            )
            for index, view in zip(poor, found, strict=True)
            if view is not None and placed_otherwise(kept[index].detection.landmarks, view[1], _width(view[0]))
        ]
        if not other_way:
            return kept
        seen = self.embed_many(image, [view for _, view in other_way])
        reoriented = list(kept)
        for (index, view), vector, norm in zip(other_way, seen.vectors, seen.norms, strict=True):
            if norm >= plan.turned_norm_margin * kept[index].norm:
                reoriented[index] = Seen(view, vector, float(norm))
        return reoriented

    def detect(
        self,
        image: np.ndarray,
        *,
        small_faces: bool = True,
        plan: Plan | None = None,
        checkpoint: Checkpoint = never_stop,
    ) -> list[Detection]:
        """Every face, large and small, in pixels of `image`; without `small_faces` only the large ones."""
        found = self.pyramid.detect(image, plan=plan, small_faces=small_faces, checkpoint=checkpoint)
        return [_detection(face, _detection(turned) if turned is not None else None) for face, turned in found]

    def embed_many(self, image: np.ndarray, detections: list[Detection]) -> Embedded:
        """Each detected face's unit-length embedding and feature norm, in one batch."""
        from insightface.utils.face_align import norm_crop

        if not detections:
            return Embedded(np.zeros((0, EMBEDDING_DIMENSIONS), np.float32), np.zeros(0, np.float32))
        aligned = [norm_crop(image, landmark=d.landmarks, image_size=ALIGNED_SIZE) for d in detections]
        mirrored = [np.ascontiguousarray(face[:, ::-1]) for face in aligned]
        features = self._embed(aligned + mirrored)
        return mirrored_average(features[: len(aligned)], features[len(aligned) :])

    def _embed(self, aligned: list[np.ndarray]) -> np.ndarray:
        """(N, dims) features, in runs of at most recogniser_faces_per_run, side by side on several lanes. With
        recogniser batches (a GPU's) the faces go in batches of those sizes (the last one filled with copies of a
        face, dropped after), so the session sees only those shapes."""
        batches = self.shapes.recogniser_batches
        run = batches[-1] if batches else self.shapes.recogniser_faces_per_run
        chunks = [aligned[start : start + run] for start in range(0, len(aligned), run)]

        def features(chunk: list[np.ndarray], side_by_side: bool) -> np.ndarray:
            filled = chunk + chunk[:1] * (_padded_count(len(chunk), batches) - len(chunk)) if batches else chunk
            recogniser = self._lane_recognizer if side_by_side else self._recognizer
            return recogniser.get_feat(filled).reshape(len(filled), -1)[: len(chunk)]

        return np.concatenate(self.lanes.map(features, chunks))

    def _warm_up_recogniser(self) -> list[tuple[int, int]]:
        for size in self.shapes.recogniser_batches:
            self._recognizer.get_feat([np.zeros((ALIGNED_SIZE, ALIGNED_SIZE, 3), np.uint8)] * size)
        return [(ALIGNED_SIZE * size, ALIGNED_SIZE) for size in self.shapes.recogniser_batches]


def upright_first(
    upright: Detection, row: int, turned_row: int, norms: np.ndarray, margin: float
) -> tuple[Detection, int]:
    """The view of one face to keep, and its row in `norms`: the upright one unless the recogniser sees the
    turned one `margin` times better (Plan.turned_norm_margin: a face upside down in the picture, which the
    upright levels found with landmarks that put its mouth above its eyes). `python bench/turned_views.py`: the
    recogniser's view with the larger norm is the one whose crop is upright in 537 of 540 faces turned 90, 180
    and 270 degrees, where the detector's scores pick the wrong one in 15 (a 180-degree face scores 0.04 more
    upright, garbage landmarks and all) and on upright faces they pick the turned view in 6 of 187
    (docs/MEASUREMENTS.md, "Upright first")."""
    if norms[turned_row] >= margin * norms[row]:
        return upright.turned, turned_row
    return upright, row


@dataclass(frozen=True)
class Seen:
    """A face's view the engine keeps, and what the recogniser made of it."""

    detection: Detection
    vector: np.ndarray
    norm: float

    def as_detected(self, engine_name: str) -> DetectedFace:
        found = self.detection
        return DetectedFace(found.box, found.landmarks, found.score, self.vector, engine_name, self.norm)


def placed_otherwise(landmarks: np.ndarray, other: np.ndarray, width: float) -> bool:
    """Whether two sets of five landmarks place a face's features apart, by more than a tenth of its width on
    average: another view of it (another way up, or the same way seen better), whose crop the recogniser sees
    differently."""
    return float(np.linalg.norm(landmarks - other, axis=1).mean()) > 0.1 * width


def mirrored_average(features: np.ndarray, mirrored: np.ndarray) -> Embedded:
    """(N, d) features of faces and of their mirror images -> their Embedded: unit vectors of the averaged unit
    features, zero-padded to 512, and the mean feature norm."""
    norms = (np.linalg.norm(features, axis=1) + np.linalg.norm(mirrored, axis=1)) / 2
    vectors = [to_unit_512(to_unit(a) + to_unit(b)) for a, b in zip(features, mirrored, strict=True)]
    return Embedded(np.stack(vectors).astype(np.float32).reshape(-1, EMBEDDING_DIMENSIONS), norms.astype(np.float32))


def to_unit(vector: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(vector)
    if not np.isfinite(norm) or norm == 0:
        raise ValueError("the embedding is zero or not finite")
    return vector / norm


def to_unit_512(vector: np.ndarray) -> np.ndarray:
    """Zero-pad to 512 dimensions and normalise; padding leaves cosine similarity unchanged."""
    padded = np.zeros(EMBEDDING_DIMENSIONS, dtype=np.float32)
    padded[: vector.shape[0]] = vector
    return to_unit(padded)


def _detection(found, turned: Detection | None = None) -> Detection:
    box, points, score = found
    return Detection(box.astype(np.float32), points.astype(np.float32), score, turned)


def _width(box: np.ndarray) -> float:
    return float(box[2] - box[0])


def _padded_count(count: int, sizes: tuple[int, ...]) -> int:
    """The smallest batch size of `sizes` that holds `count` (the largest, for a count beyond it)."""
    return next((size for size in sizes if size >= count), sizes[-1])


def _recogniser_model(model_file: str, provider: str) -> str | bytes:
    """The recogniser as its session loads it: on a CPU its graph with each PRelu as Mul and Max, the same features
    in 0.63-0.71x the time (faces/engines/graph.py); on another provider the file as it is."""
    if provider != CPU:
        return model_file
    try:
        model = onnx.load(model_file)
    except Exception as error:  # protobuf raises its own types for a file that is no model
        raise ModelFileRejected(f"{model_file} does not load as an ONNX model: {error}") from None
    return with_prelu_as_max(model).SerializeToString()


def _session(model_file: str, intra_op_threads: int, providers: list[str], model: str | bytes | None = None):
    """A session on `model_file`, or on `model` (its graph rewritten: bytes) where given."""
    import onnxruntime

    available = onnxruntime.get_available_providers()
    missing = [provider for provider in providers if provider not in available]
    if missing:
        raise ProviderUnavailable(
            f"ORT_PROVIDERS names {', '.join(missing)}, which this onnxruntime cannot load "
            f"(it has {', '.join(available)})"
        )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.log_severity_level = ORT_LOG_ERRORS_ONLY
    # A pool thread that has done its part sleeps rather than spins: spinning took the cores x264's and the video
    # decoder's threads need, and two threads ran a clip slower than one (bench/media.py --threads "1 2").
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = onnxruntime.InferenceSession(
            model or model_file, options, providers=[_with_options(p) for p in providers]
        )
    except Exception as error:  # onnxruntime raises its own types for files that are not models
        raise ModelFileRejected(f"{model_file} does not load as an ONNX model: {error}") from None
    if session.get_providers()[0] != providers[0]:
        # onnxruntime falls back to the next provider when one fails to start (no driver, no device).
        raise ProviderUnavailable(
            f"{providers[0]} did not start for {model_file}: running on {session.get_providers()[0]}"
        )
    return session


def _with_options(provider: str):
    """CUDA: cuDNN's heuristic choice of convolution algorithm rather than its default exhaustive
    search. Either way a pass of a shape new to a session costs 1.5-3 s on an H200 and a pass of a
    known shape 5 ms; this engine's passes change shape with every tile size and second look, so
    on a GPU it is slower than on one CPU core today (docs/ARCHITECTURE.md §6, "On a GPU")."""
    if provider == "CUDAExecutionProvider":
        return (provider, {"cudnn_conv_algo_search": "HEURISTIC"})
    return provider


__all__ = ["InsightFaceEngine", "ModelsMissing"]
