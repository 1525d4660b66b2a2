"""The face-engine interface and the types it speaks: the detection plan it is asked to follow (`Plan`), the faces
it detected (`Detection`), their embeddings (`Embedded`) and both together (`DetectedFace`). An upright BGR image
in, faces with unit 512-d embeddings out. The one engine is faces/engines/insightface.py's; its pyramid
(faces/engines/pyramid.py) is what the plan's fields steer."""

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np

from faces.checkpoint import Checkpoint, never_stop

EMBEDDING_DIMENSIONS = 512

# A bench's clock: called with a step's name around each step of a detection (faces/engines/pyramid.py) or of a
# clip's detection pass (faces/detection/clips.py), it returns the context that times the step. The worker's is
# contextlib.nullcontext: nothing is timed.
Watch = Callable[[str], AbstractContextManager]


@dataclass(frozen=True)
class Plan:
    """How a picture is searched for faces: the pyramid's levels, tiles, scores, second looks, edge pass and turned
    levels (faces/engines/pyramid.py says how each is used). `PHOTO_PLAN` is a photo's; a video frame's look is the
    clip schedule's (faces.detection.clips.ClipSchedule.look_plan). docs/MEASUREMENTS.md has the figures."""

    # The finest level's scale: 24 px faces stay 24 px and the cascade finds the faint ones; 1.5x found fewer at 1.3x
    # the cost ("A cheaper first look: a cascade").
    fine_scale: float = 1.0
    # Each coarser level this much smaller: a tiled level keeps faces up to tile_overlap, >= tile_overlap / 3 px at
    # the next level, where SCRFD finds them.
    level_ratio: float = 3.0
    # A level is added only when the overview is more than level_ratio times this much coarser; and the last level
    # above the overview is dropped when it is within this of the overview: levels that close find the same faces.
    level_slack: float = 1.05
    # The overview: the whole photo at this long side, where it keeps every face, however large.
    overview_long_side: int = 640
    # A tile's width as the detector sees it: larger tiles waste less on the overlap, memory grows with them (a
    # 48 MP photo peaks at 1059 MB; 1536x1024 tiles cost a 12 MP photo 14 % more: "Where the detector's time goes").
    tile_width: int = 3072
    # A tile's height, likewise.
    tile_height: int = 2048
    # Tiles overlap this much (detector px), so a face up to this size lies whole in one of them.
    tile_overlap: int = 128
    # A level of at most this many pixels (a tile's) runs as one pass, with no overlap to pay for.
    whole_max_pixels: int = 3072 * 2048
    # Candidates: anything scoring this much; blurred small faces score 0.25-0.5 at first.
    score_threshold: float = 0.25
    # The upright finest level's candidates from this score (None: score_threshold): a cascade, its faint
    # candidates left to the second looks; a 16-24 px face scores 0.07-0.25 at 1x (bench/first_look.py).
    fine_score_threshold: float | None = 0.07
    # A candidate scoring this much is a face; below it, it gets a second look.
    sure_score: float = 0.6
    # A second look scales the candidate to this width, where blurred small faces score 0.6-0.85 and textures
    # mostly drop below 0.4.
    verify_width: int = 64
    # The second look's crop, in face-box sizes (2.5 before the cascade: "A cheaper first look: a cascade").
    verify_context: float = 1.75
    # A level's unsure candidate whose box reaches past the image's edge (a face the edge cuts) gets its second look
    # at this width (None: verify_width): at 64 px too little of a face cut at a corner is left for SCRFD (t1's
    # face 1 cut at the top right, 46 % of it visible, scored 0.51 at 1x and failed its look; bench/edge_faces.py).
    edge_verify_width: int | None = 128
    # A second look keeps its candidate when it scores this much there.
    verify_score: float = 0.5
    # A candidate whose upright second look failed is looked at again with its surroundings turned by each of these
    # angles (degrees, counter-clockwise): a head tilted about 45 degrees lies between the upright levels and the
    # turned ones, each of which SCRFD scores low ("Faces tilted between quarter turns").
    tilted_looks: tuple[float, ...] = (45.0, -45.0)
    # Only a candidate that scored this much: the cascade's faintest (0.07-0.15) are textures nearly always, and a
    # tilted face scores more.
    tilted_look_score: float = 0.15
    # The turned levels' failed candidates get tilted looks too: a face tilted past a quarter turn (135 degrees).
    tilted_looks_in_turns: bool = True
    # What only a turned level's tilted look found is a face of its own from this score: in textured 12 MP scenes
    # such finds scored 0.51-0.69 where no face was, 0.72-0.89 on 11 of 13 real faces ("Faces tilted between the
    # quarter turns").
    turned_tilted_score: float = 0.7
    # And when its detection overlaps the candidate this much (IoU): the same face, its box redrawn at 64 px.
    verify_iou: float = 0.3
    # Boxes overlapping more than this are one face (cross-level NMS).
    nms_iou: float = 0.4
    # A lower-scoring box this much inside a higher-scoring one is the same face.
    containment: float = 0.7
    # A box this close (detector px) to an inner tile edge is cut by it: the neighbouring tile holds it whole.
    edge_margin: float = 2.0
    # The edge pass finds faces the image edge cuts; off for a part of a video frame that no frame edge bounds
    # (faces/detection/clips.py): its edges cut no picture.
    edge_pass: bool = True
    # The edge pass mirrors the overview this far past each edge (a fraction of its long side): half a face.
    edge_mirror: float = 0.25
    # The edge pass keeps what scores this much: mirrored half faces score 0.45-0.8.
    edge_score: float = 0.4
    # No second look for an unsure edge candidate: it drops false faces but loses more cut faces
    # (bench/edge_faces.py), and a false face only blurs a patch while a lost one may be a DNP member's.
    edge_second_look: bool = False
    # Quarter turns (counter-clockwise) of the photo the levels run again on: faces turned 90, 180 and 270 degrees
    # in the picture are past the about 60 degrees SCRFD finds.
    turns: tuple[int, ...] = (1, 2, 3)
    # The finest turned level's scale (None: the upright levels below the finest): at 1/2x a 12 MP photo's turned
    # levels are 1/2x, 1/6x and the overview; finer finds smaller turned faces at a higher cost.
    turned_scale: float | None = 0.5
    # The finest turned level's candidates from this score (None: score_threshold): its cascade finds turned
    # 32 px faces (16 px at 1/2x), as the upright 1.5x level of before found them sideways.
    turned_score_threshold: float | None = 0.15
    # A cascade's candidate under score_threshold is kept only this wide (detector px; None: any width): the faint
    # wider ones of a textured photo are textures ("Fewer second looks, fewer turned levels").
    cascade_max_width: float | None = 40.0
    # The turned levels stop at the first that runs as one pass, then the overview: a whole pass drops no face
    # for its size (False: level_ratio steps down).
    turned_whole_then_overview: bool = True
    # A face both the upright and a turned level found is embedded as the upright levels saw it unless the turned
    # view's feature norm is at least this many times the upright one's: on real upright faces it is at most 1.04x
    # (bench/turned_views.py, "Upright first"; faces.engines.insightface.upright_first).
    turned_norm_margin: float = 1.1
    # A face the recogniser sees poorly (feature norm under reorient_norm) is looked at again with its surroundings
    # turned by each of these angles (degrees, counter-clockwise), and the best-scoring detection there, if it places
    # the landmarks elsewhere, is embedded too; the view kept is the one turned_norm_margin better: a face near 135
    # degrees that the upright levels found surely with its landmarks upside down, and no turned level saw, embedded
    # as nobody ("Faces seen the wrong way up").
    reorient_looks: tuple[float, ...] = (45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0)
    # Real faces seen the right way up have norms of 21-25 here; the wrong way up, 15-20.
    reorient_norm: float = 21.0
    # Only faces this wide (image px): a crowd's 10-17 px faces are nearly all under reorient_norm, and seven looks
    # each would cost a crowd photo dearly; the turned levels find no turned face narrower either.
    reorient_least_width: float = 32.0


# A photo's plan, and the engine's own (faces/engines/__init__.py builds the engine on it).
PHOTO_PLAN = Plan()


@dataclass(frozen=True)
class Detection:
    """One face found by a detector, in pixels of the image it was given."""

    box: np.ndarray  # (4,) x1, y1, x2, y2
    landmarks: np.ndarray  # (5, 2): eyes, nose, mouth corners
    score: float
    # The same face as a turned level saw it, when the upright levels found it too (faces/engines/pyramid.py):
    # `analyze` embeds both and keeps the upright one unless the recogniser sees the turned one far better.
    turned: "Detection | None" = None


@dataclass(frozen=True)
class Embedded:
    vectors: np.ndarray  # (N, 512) float32, unit length: each face and its mirror image, averaged
    norms: np.ndarray  # (N,) the recogniser's feature norm before normalisation, face and mirror averaged


@dataclass(frozen=True)
class DetectedFace:
    box: np.ndarray  # (4,) x1, y1, x2, y2 in pixels of the stored image
    landmarks: np.ndarray  # (5, 2) pixels
    score: float
    embedding: np.ndarray  # (512,) float32, unit length
    engine: str
    embedding_norm: float  # how well the recogniser saw a face (Embedded.norms)


class FaceEngine(ABC):
    """Loaded once per worker process; `analyze` is its one call."""

    name: str

    @abstractmethod
    def analyze(
        self,
        image: np.ndarray,
        *,
        small_faces: bool = True,
        plan: Plan | None = None,
        checkpoint: Checkpoint = never_stop,
    ) -> list[DetectedFace]:
        """Every face in `image`, embedded; without `small_faces` only the overview pass runs (a selfie). `plan`:
        the search's (a video frame's look: faces.detection.clips.ClipSchedule.look_plan); None: the engine's own.
        `checkpoint` is called between the detector's passes and may raise to stop (faces/checkpoint.py)."""


class ModelsMissing(RuntimeError):
    """A model folder is missing or incomplete: the worker refuses to start, and says what to put where."""


class ProviderUnavailable(RuntimeError):
    """ORT_PROVIDERS names a provider onnxruntime cannot load here: the worker refuses to start rather than fall
    back to another in silence (a CUDA box running on its CPU is a slow box nobody knows about)."""
