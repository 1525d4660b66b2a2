"""Small and large faces in big photos with SCRFD (buffalo_s's SCRFD-500M, 5 keypoints).

SCRFD-500M finds faces from about 32 px up (full resolution: 63 % at 24 px, 96 % at
32 px), at about 0.05 µs per detector pixel on one core. So the photo is searched as
a pyramid of levels, each a factor `level_ratio` (3) smaller than the one before:

- the finest level is the photo at `fine_scale` (1x: 24 px faces stay 24 px), cut
  into overlapping tiles (at most 3072x2048 detector px), each scaled from the photo
  on its own, so memory stays bounded whatever the photo size;
- coarser levels (fine_scale / 3, / 9, ...) until the photo's long side is at most
  `overview_long_side`; a level small enough runs as one detector pass, a larger one
  is tiled the same way;
- the last level, the overview (long side 640), sees the whole photo and keeps
  every face, however large.

A tiled level keeps a face only when its box lies whole inside the tile (no inner
tile edge touched: the overlap holds that face whole in the neighbouring tile) and
its longer side is no larger than the overlap; anything larger is at least
overlap / 3 px tall (43 px for 128, a face about 33 px wide) at the next, 3x
coarser level, where SCRFD finds it. Tiles are fitted to the level (as few as the
maximum tile size allows, shrunk to a multiple of the stride), so the overlaps cost
about a quarter more detector pixels and no padding.

Candidates are taken from a low score (0.25). A sure one (>= 0.6) is a face; an
unsure one gets a second look: its surroundings (1.75 box sizes) scaled so that it is
64 px wide, and it is kept only if the detector scores it >= 0.5 there (then with that
look's box, landmarks and score). Blurred 24 px faces mostly score under 0.6 in the tiles and
over 0.5 at 64 px; textures mostly do not (docs/MEASUREMENTS.md, "Detector against
CenterFace": blurred-face recall and false positives). A second look costs a ~112²
pass. Then one cross-level NMS (IoU 0.4) plus a containment rule keeps one box per face.

The finest level is a cascade: its candidates start at 0.07, not 0.25, and the second
look decides. A 16-24 px face scores 0.07-0.25 at 1x and over 0.5 enlarged to 64 px, so
the finest level runs at 1x where the plan of before ran 1.5x (2.25x the pixels) and
finds more small faces (docs/MEASUREMENTS.md, "A cheaper first look: a cascade"). Only the faint candidates
at most 40 detector px wide get that second look (`cascade_max_width`): the cascade is for faces of 16-24 px (and
32 px faces seen sideways, whose boxes reach 40), and the wider faint candidates of a textured photo are textures
(docs/MEASUREMENTS.md, "Fewer second looks, fewer turned levels").

An edge pass runs the overview mirrored past the image's edges, so faces the edge cuts in
half are completed; only boxes that reach past the edge are kept.

Faces turned in the picture itself (90, 180, 270 degrees: a guest lying down, a child upside
down) are past what SCRFD finds (about 60 degrees): levels run again on the photo
turned each quarter (shrunk to the first of them, 1/2x, before it is turned; a pyramid of their own
from there, the finest taking its candidates from 0.15, and straight to the overview after a level that runs as one
pass, which drops no face for its size), and what they find is turned back. Their
landmarks keep their meaning. Upright first: a turned face adds a face only where
the upright levels found none; where they found the same face, it comes back as that face's turned
view, and the engine keeps the upright one unless the recogniser sees the turned one far better
(faces/engines/insightface.py, `upright_first`). A turned level may score an upright face higher than the
upright levels do, with its mouth above its eyes.

The cost is mostly the finest level: fine_scale² times the photo's pixels, plus the
tile overlaps and 1/9 for the coarser levels (about 1.2x the photo's pixels); the turned
levels add three times 1/4 and the second looks a few dozen ~112² passes (a 12 MP
photo: about 26 detector MP in all, against 44 before the cascade), so time grows with
the pixel count, and memory with the tile size only (the shrunk copies of the
photo for the coarser levels, each made once and kept for the detection, are about 0.3 of it). The
detector runs on the wrapper's onnxruntime session directly: insightface's
`SCRFD.detect` resizes, copies, and decodes boxes and keypoints of every anchor;
here one resize + RGB + normalise + NCHW goes straight into the detector's array and
only anchors above the threshold are decoded, with insightface's own
`distance2bbox` / `distance2kps` (and its anchor layout and NMS threshold).

`PyramidDetector(Passes(scrfd)).detect(bgr)`; `scrfd` is insightface's `SCRFD` built on the
engine's own session (faces/engines/insightface.py), its passes faces/engines/passes.py's. Without `small_faces` (a
reference selfie) only the overview level and the edge pass run. docs/ARCHITECTURE.md §6
says why; docs/MEASUREMENTS.md has the recall, cost and memory tables (bench/face_recall.py).
"""

import dataclasses
import itertools
import math
from dataclasses import dataclass

import cv2
import numpy as np

from faces.checkpoint import Checkpoint, never_stop
from faces.engines.passes import STRIDE, Detections, Passes
from faces.geometry import iou

# (box (4,) x1 y1 x2 y2, landmarks (5, 2), score), pixels of the image given to `detect`.
Found = tuple[np.ndarray, np.ndarray, float]
# A face as the upright levels (or, where they found none, a turned level) found it, and its turned view.
UprightAndTurned = tuple[Found, Found | None]


@dataclass(frozen=True)
class Plan:
    # The finest level: the photo at this scale (24 px faces stay 24 px); the cascade below finds the faint
    # small faces there (1.5x, the plan of before, finds fewer at 1.3x the cost: docs/MEASUREMENTS.md).
    fine_scale: float = 1.0
    # Each coarser level is this much smaller; a tiled level keeps faces up to
    # `tile_overlap`, which are >= tile_overlap / level_ratio px at the next level.
    level_ratio: float = 3.0
    # The overview: the whole photo at this long side; it keeps every face.
    overview_long_side: int = 640
    # Tiles as the detector sees them (after enlargement), width x height, and
    # their overlap. Larger tiles waste less on the overlap; memory grows with them
    # (a 48 MP photo peaks at 1059 MB with these; 1536x1024 tiles gave a 12 MP photo's finest
    # level 14 % more detector pixels: docs/MEASUREMENTS.md, "Where the detector's time goes").
    tile_width: int = 3072
    tile_height: int = 2048
    tile_overlap: int = 128
    # A level whose scaled photo has at most this many pixels (a tile's) runs as one pass.
    whole_max_pixels: int = 3072 * 2048
    # Candidates: anything scoring this much. At or above `sure_score` a candidate is
    # a face; below it, it is looked at again, enlarged or shrunk so that it is
    # `verify_width` px wide, and kept only when that second look scores
    # `verify_score`. Blurred small faces score 0.25-0.5 at first and 0.6-0.85 when
    # looked at closer; textures that scored as high mostly drop below 0.4.
    score_threshold: float = 0.25
    # The upright finest level's candidates from this score instead (None: score_threshold): a cascade, the
    # finest level run coarser with its faint candidates left to the second looks (bench/first_look.py).
    fine_score_threshold: float | None = 0.07
    sure_score: float = 0.6
    verify_width: int = 64
    verify_context: float = 1.75  # the second look's crop, in face-box sizes (2.5 before the cascade)
    verify_score: float = 0.5
    nms_iou: float = 0.4
    # A lower-scoring box mostly inside a higher-scoring one is the same face.
    containment: float = 0.7
    # A box this close (detector px) to an inner tile edge is cut by it.
    edge_margin: float = 2.0
    # The edge pass mirrors the overview this far past each edge (a fraction of its long side),
    # and keeps what scores this much there (mirrored half faces score 0.45-0.8). Off for a part of
    # a video frame that no frame edge bounds (faces/detection/clips.py): its edges cut no picture.
    edge_pass: bool = True
    edge_mirror: float = 0.25
    edge_score: float = 0.4
    # Whether an edge candidate below sure_score gets a second look, on the photo mirrored past its
    # edge. Off: it drops false faces at the edge but loses more cut faces (bench/edge_faces.py), and
    # a false face only blurs a patch while a lost one may be a DNP member's.
    edge_second_look: bool = False
    # Quarter turns (counter-clockwise) of the photo on which the coarser levels run again, for faces
    # turned in the picture: 1, 2, 3 find them at 90, 180 and 270 degrees.
    turns: tuple[int, ...] = (1, 2, 3)
    # The finest scale the turned passes run at, each coarser level level_ratio below it down to the
    # overview (None: the upright levels below the finest). At 1/2x a 12 MP photo's turned levels are 1/2x,
    # 1/6x and the overview; a finer one finds smaller turned faces at a higher cost.
    turned_scale: float | None = 0.5
    # The finest turned level's candidates from this score instead (None: score_threshold): its cascade,
    # which finds turned 32 px faces (16 px at 1/2x) that the upright 1.5x level of before found sideways.
    turned_score_threshold: float | None = 0.15
    # A cascade's candidate under score_threshold is kept only when its box is at most this wide (detector px;
    # None: any width): the faint first looks worth a second are the small faces the cascade is for.
    cascade_max_width: float | None = 40.0
    # The turned levels stop at the first that runs as one pass, then the overview (False: 3x steps down).
    turned_whole_then_overview: bool = True


# The shapes a GPU's detector passes run at (faces/engines/passes.py): a second look (a 64 px face in 1.75x
# its size, a video frame's in 2.5x), the overview (long side 640), the edge pass (the overview mirrored 25 %
# past each edge) and a tile (a level larger than a tile is tiled).
SHAPE_BUCKETS = ((224, 224), (640, 640), (960, 960), (Plan.tile_width, Plan.tile_height))


# A video frame is looked at five times a second (faces/tracks.py), so its finest level gets a
# budget of detector pixels that grows with the frame: 1.5x up to 720p (2.1 MP), 1x at 1080p (2.1 MP), and
# at least 0.75x above (4K: 4.7 MP, one pass). The cascade finds the faint 16-24 px faces at that scale, so
# every look finds 24 px faces at every size (bench/media.py's coverage table: every frame of a 24 px face
# covered at 1080p and 4K, as when one look in three searched at 1.5x for twice the detection's time). The
# scale is rounded down to an eighth, so a handful of plans serve every frame and region size.
VIDEO_FINE_SCALE = 1.5
# A video frame's plan is the photo plan, cascade included, without the turned levels: five looks a second
# cannot pay for them.
VIDEO_PLAN = Plan(fine_scale=VIDEO_FINE_SCALE, turns=())
VIDEO_FRAME_DETECTOR_PIXELS = VIDEO_FINE_SCALE**2 * 1280 * 720
VIDEO_MIN_SCALE = 0.75


def video_frame_plan(width: int, height: int) -> Plan:
    """A video frame's plan (or a region of one's): VIDEO_PLAN at the budget above."""
    budget = max(VIDEO_MIN_SCALE, math.sqrt(VIDEO_FRAME_DETECTOR_PIXELS / (width * height)))
    return dataclasses.replace(VIDEO_PLAN, fine_scale=math.floor(min(VIDEO_FINE_SCALE, budget) * 8) / 8)


# A quarter turn counter-clockwise (np.rot90's sense), by count.
_ROTATE = {1: cv2.ROTATE_90_COUNTERCLOCKWISE, 2: cv2.ROTATE_180, 3: cv2.ROTATE_90_CLOCKWISE}


class PyramidDetector:
    def __init__(self, passes: Passes, plan: Plan = Plan(), *, overview_passes: Passes | None = None):
        """`passes` run the fine levels and the second looks; `overview_passes` (default: the same) the
        overview level, which finds the large faces (buffalo_l's SCRFD-10G beside buffalo_s's SCRFD-500M)."""
        for detector in (passes.scrfd, (overview_passes or passes).scrfd):
            if not detector.use_kps:
                raise ValueError("PyramidDetector needs SCRFD models with keypoints")
        self.plan = plan
        self.passes = passes
        self.overview_passes = overview_passes or passes
        self._planned: dict[Plan, PyramidDetector] = {}

    # ---- the plan -------------------------------------------------------------

    def levels(self, width: int, height: int) -> list[float]:
        """Scales (detector px per photo px), finest first; the last is the overview. An image small enough that its
        finest level is no larger than an overview (most places of a video frame searched between looks) has that
        level alone: one pass holds every face there whole, however large, as the overview would."""
        overview = self.overview_scale(width, height)
        if (
            self.passes is self.overview_passes
            and self.plan.fine_scale * max(width, height) <= self.plan.overview_long_side
        ):
            return [max(self.plan.fine_scale, overview)]
        return self._down_to(self.plan.fine_scale, overview)

    def overview_scale(self, width: int, height: int) -> float:
        """The overview's scale: the whole image at overview_long_side, never enlarged."""
        return min(1.0, self.plan.overview_long_side / max(width, height))

    def _down_to(self, finest: float, overview: float) -> list[float]:
        """`finest`, then each level_ratio coarser, then the overview."""
        # Each level hands faces over to the next one at most level_ratio (+5 %) coarser.
        scales = [max(finest, overview)]
        while scales[-1] / overview > self.plan.level_ratio * 1.05:
            scales.append(scales[-1] / self.plan.level_ratio)
        if scales[-1] / overview < 1.05:
            scales.pop()
        return [*scales, overview]

    def planned(self, plan: Plan) -> "PyramidDetector":
        """This pyramid's passes (its sessions) on `plan`: itself on its own plan, else one built once per plan."""
        if plan == self.plan:
            return self
        if plan not in self._planned:
            self._planned[plan] = PyramidDetector(self.passes, plan, overview_passes=self.overview_passes)
        return self._planned[plan]

    def detect(
        self,
        image: np.ndarray,
        *,
        plan: Plan | None = None,
        small_faces: bool = True,
        checkpoint: Checkpoint = never_stop,
    ) -> list[UprightAndTurned]:
        """Every face with its turned view (None when no turned level found it too), on `plan` (default: the
        pyramid's own). `checkpoint` is called before each tile of each level: it may raise to stop a long
        detection."""
        if plan is not None and plan != self.plan:
            return self.planned(plan).detect(image, small_faces=small_faces, checkpoint=checkpoint)
        height, width = image.shape[:2]
        levels = self.levels(width, height) if small_faces else self.levels(width, height)[-1:]
        shrinks = Shrinks(image)
        faces = self._faces(shrinks, levels, checkpoint, self.plan.fine_score_threshold)
        if self.plan.edge_pass:
            faces += self._across_edges(shrinks, self.overview_scale(width, height))
        upright = self._finish(faces, width, height)
        if not (small_faces and self.plan.turns):
            return [(face, None) for face in upright]
        turned_levels = self._turned_levels(levels, width, height)
        turned = self._finish(self._turned_faces(shrinks, turned_levels, checkpoint), width, height)
        return self._upright_first(upright, turned)

    def _upright_first(self, upright: list[Found], turned: list[Found]) -> list[UprightAndTurned]:
        """Each turned face that is one of the upright faces (NMS's overlap or containment) becomes that face's
        turned view, the best-scoring one where several are; the others are faces of their own."""
        views: dict[int, Found] = {}
        alone = []
        boxes = np.array([face[0] for face in upright], np.float32).reshape(-1, 4)
        for face in sorted(turned, key=lambda found: -found[2]):
            same = _same_face(face[0], boxes, self.plan.nms_iou, self.plan.containment)
            if same is None:
                alone.append((face, None))
            else:
                views.setdefault(same, face)
        return [(face, views.get(index)) for index, face in enumerate(upright)] + alone

    def _turned_levels(self, levels: list[float], width: int, height: int) -> list[float]:
        """The upright levels below the finest, or a pyramid of their own from turned_scale down, so that a
        coarser upright finest level (a cascade) does not take the turned levels coarser with it. With
        turned_whole_then_overview, a turned level that runs as one pass (every turn) is followed by the
        overview only: a tile drops the faces past its overlap for the next level, a whole pass drops none, and the
        overview sees those too large for SCRFD there."""
        plan = self.plan
        if plan.turned_scale is None:
            return levels[1:] or levels
        turned = self._down_to(plan.turned_scale, levels[-1])
        if plan.turned_whole_then_overview:
            for index, scale in enumerate(turned[:-1]):
                scaled_w, scaled_h = round(width * scale), round(height * scale)
                if self._one_pass(scaled_w, scaled_h, self.passes) and self._one_pass(scaled_h, scaled_w, self.passes):
                    return [*turned[: index + 1], turned[-1]]
        return turned

    def _one_pass(self, scaled_w: int, scaled_h: int, passes: Passes) -> bool:
        """Whether a level of scaled_w x scaled_h runs as one pass (else it is tiled)."""
        return scaled_w * scaled_h <= self.plan.whole_max_pixels and passes.fits(scaled_w, scaled_h)

    def _faces(
        self, shrinks: "Shrinks", levels: list[float], checkpoint: Checkpoint, fine_threshold: float | None
    ) -> list[Found]:
        """Every level's candidates, one box per face across levels; the unsure ones after their second look.
        The finest level (unless it is the overview) takes its candidates from `fine_threshold` (None:
        score_threshold)."""
        plan = self.plan
        chunks = []
        for index, scale in enumerate(levels):
            last = index == len(levels) - 1
            passes = self.overview_passes if last else self.passes
            fine = index == 0 and not last and fine_threshold is not None
            threshold = fine_threshold if fine else plan.score_threshold
            chunks += self._level(shrinks, scale, threshold, keep_all=last, passes=passes, checkpoint=checkpoint)
        if not chunks:
            return []
        boxes, points, scores = (np.concatenate(parts) for parts in zip(*chunks, strict=True))
        # Unsure candidates get their second look before the containment rule runs:
        # a low-scoring texture box around a face must not take the face with it.
        kept = suppress(boxes, scores, self.plan.nms_iou, containment=None)
        sure = [(boxes[i], points[i], float(scores[i])) for i in kept if scores[i] >= self.plan.sure_score]
        unsure = [boxes[i] for i in kept if scores[i] < self.plan.sure_score]
        return sure + [face for face in self._second_looks(shrinks.image, unsure) if face is not None]

    def _turned_faces(self, shrinks: "Shrinks", levels: list[float], checkpoint: Checkpoint) -> list[Found]:
        """Faces turned in the picture itself (a guest lying down, a child upside down), which SCRFD misses
        past about 60 degrees: `levels` (the coarser ones) run on the photo turned by each of the plan's
        quarter turns, and what they find is turned back. The photo is shrunk once, to the first of them,
        before it is turned (the upright levels' shrink of that scale), so a turn costs a copy of that level,
        not of the photo."""
        top = levels[0]
        height, width = shrinks.image.shape[:2]
        size = (round(width * top), round(height * top))
        small = shrinks.at(*size)
        back = np.array([width / size[0], height / size[1]], np.float32)
        relative = [scale / top for scale in levels]
        fine_threshold = self.plan.turned_score_threshold
        faces = []
        for turn in self.plan.turns:
            turned = cv2.rotate(small, _ROTATE[turn % 4]) if turn % 4 else small
            for box, points, score in self._faces(Shrinks(turned), relative, checkpoint, fine_threshold):
                corners = turned_back(box.reshape(2, 2), turn, *size) * back
                box = np.concatenate([corners.min(axis=0), corners.max(axis=0)])
                faces.append((box, turned_back(points, turn, *size) * back, score))
        return faces

    def _finish(self, faces: list[Found], width: int, height: int) -> list[Found]:
        """One box per face (NMS plus containment), clipped to the image."""
        if not faces:
            return []
        boxes = np.array([f[0] for f in faces], np.float32)
        scores = np.array([f[2] for f in faces], np.float32)
        limit = np.array([width, height, width, height], np.float32)
        keep = suppress(boxes, scores, self.plan.nms_iou, self.plan.containment)
        return [(np.clip(faces[i][0], 0, limit), faces[i][1], faces[i][2]) for i in keep]

    def _across_edges(self, shrinks: "Shrinks", scale: float) -> list[Found]:
        """Faces cut by the image edge, at the overview's scale: the photo mirrored past its edges
        completes half a face enough for the detector, which misses many faces cut at 40-60 %.
        Only detections that reach past the edge are kept; the levels found the others."""
        plan = self.plan
        image = shrinks.image
        height, width = image.shape[:2]
        scaled_w, scaled_h = round(width * scale), round(height * scale)
        scaled = shrinks.at(scaled_w, scaled_h)
        pad = round(plan.edge_mirror * max(scaled_w, scaled_h))
        mirrored = cv2.copyMakeBorder(scaled, pad, pad, pad, pad, cv2.BORDER_REFLECT_101)
        ((b, k, s),) = _run(self.overview_passes, [(mirrored, scaled_w + 2 * pad, scaled_h + 2 * pad)], plan.edge_score)
        back = np.array([width / scaled_w, height / scaled_h], np.float32)
        b = ((b.reshape(-1, 2, 2) - pad) * back).reshape(-1, 4)
        k = (k - pad) * back
        past = (b[:, 0] < 0) | (b[:, 1] < 0) | (b[:, 2] > width) | (b[:, 3] > height)
        inside = (b[:, 2] > 0) & (b[:, 3] > 0) & (b[:, 0] < width) & (b[:, 1] < height)
        found = np.flatnonzero(past & inside)
        # An unsure one (a fork at a 24 MP edge scored 0.53) may be looked at again, mirrored the same way.
        unsure = [i for i in found if s[i] < plan.sure_score and plan.edge_second_look]
        faces = [(b[i], k[i], float(s[i])) for i in found if i not in unsure]
        looked = self._second_looks(image, [b[i] for i in unsure], mirrored=True)
        return faces + [face for face in looked if face is not None]

    def _second_looks(self, image: np.ndarray, boxes: list[np.ndarray], *, mirrored: bool = False) -> list:
        """Each candidate's surroundings, scaled so that the candidate is verify_width px wide: the best
        detection there that overlaps it (IoU >= 0.3), if it scores verify_score; else None. The looks run
        together (one batch per shape). `mirrored`: surroundings past the image's edge are the image
        mirrored there (a face the edge cuts)."""
        looks = [self._surroundings(image, box, mirrored) for box in boxes]
        found = _run(self.passes, [(look.crop, look.out_w, look.out_h) for look in looks], self.plan.verify_score)
        return [look.verdict(box, *result) for box, look, result in zip(boxes, looks, found, strict=True)]

    def _surroundings(self, image: np.ndarray, box: np.ndarray, mirrored: bool) -> "SecondLook":
        plan = self.plan
        height, width = image.shape[:2]
        x1, y1, x2, y2 = (float(v) for v in box)
        box_w = max(x2 - x1, 1.0)
        half = plan.verify_context * max(box_w, y2 - y1) / 2
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        left, top = math.floor(cx - half), math.floor(cy - half)
        right, bottom = math.ceil(cx + half), math.ceil(cy + half)
        if mirrored:
            crop = _mirrored(image, left, top, right, bottom)
        else:
            left, top, right, bottom = max(0, left), max(0, top), min(width, right), min(height, bottom)
            crop = image[top:bottom, left:right]
        factor = plan.verify_width / box_w
        out_w, out_h = max(1, round((right - left) * factor)), max(1, round((bottom - top) * factor))
        if factor < 1.0:  # shrinking: average, as the levels do
            crop = cv2.resize(crop, (out_w, out_h), interpolation=cv2.INTER_AREA)
        back = np.array([(right - left) / out_w, (bottom - top) / out_h], np.float32)
        return SecondLook(crop, out_w, out_h, back, np.array([left, top], np.float32))

    # ---- one level --------------------------------------------------------------

    def _level(
        self, shrinks: "Shrinks", scale: float, threshold: float, keep_all: bool, passes: Passes, checkpoint: Checkpoint
    ):
        """Detections of one level from `threshold`, in photo pixels, as (boxes, keypoints, scores) chunks."""
        plan = self.plan
        checkpoint()
        image = shrinks.image
        height, width = image.shape[:2]
        scaled_w, scaled_h = round(width * scale), round(height * scale)
        if keep_all or self._one_pass(scaled_w, scaled_h, passes):
            scaled = shrinks.at(scaled_w, scaled_h)
            (found,) = _run(passes, [(scaled, scaled_w, scaled_h)], threshold)
            b, k, s = self._worth_a_look(*found)
            back = np.array([width / scaled_w, height / scaled_h], np.float32)
            yield (b.reshape(-1, 2, 2) * back).reshape(-1, 4), k * back, s
            return
        # Tiles are cut from the photo when the level enlarges it (each tile
        # enlarged on its own: the enlarged photo is never held), and from the
        # photo scaled once when it shrinks it.
        source = image if scale >= 1.0 else shrinks.at(scaled_w, scaled_h)
        factor = scale if scale >= 1.0 else 1.0  # detector px per source px
        source_h, source_w = source.shape[:2]
        shrink_x, shrink_y = width / source_w, height / source_h  # photo px per source px
        out_w, tile_w = _fit_tile(source_w, factor, plan.tile_width, plan.tile_overlap)
        out_h, tile_h = _fit_tile(source_h, factor, plan.tile_height, plan.tile_overlap)
        overlap = plan.tile_overlap / factor
        origins = [(x, y) for y in _starts(source_h, tile_h, overlap) for x in _starts(source_w, tile_w, overlap)]
        # detector px -> source px (/ f) -> photo px (* shrink) + the tile's origin
        mul = np.array([shrink_x * tile_w / out_w, shrink_y * tile_h / out_h], np.float32)
        for group in itertools.batched(origins, passes.batch):
            checkpoint()
            crops = [(source[y : y + tile_h, x : x + tile_w], out_w, out_h) for x, y in group]
            for (x, y), found in zip(group, _run(passes, crops, threshold), strict=True):
                b, k, s = self._worth_a_look(*found)
                inner = (x > 0, y > 0, x + tile_w < source_w, y + tile_h < source_h)
                ok = _inside_and_small(b, out_w, out_h, inner, plan.tile_overlap, plan.edge_margin)
                off = np.array([x * shrink_x, y * shrink_y], np.float32)
                yield (b[ok].reshape(-1, 2, 2) * mul + off).reshape(-1, 4), k[ok] * mul + off, s[ok]

    def _worth_a_look(self, b: np.ndarray, k: np.ndarray, s: np.ndarray):
        """A pass's detections without the cascade's faint candidates wider than cascade_max_width."""
        plan = self.plan
        if plan.cascade_max_width is None:
            return b, k, s
        keep = (s >= plan.score_threshold) | (b[:, 2] - b[:, 0] <= plan.cascade_max_width)
        return b[keep], k[keep], s[keep]


class Shrinks:
    """One image at the sizes a detection asks for. Each shrink is made once, by averaging (INTER_AREA) the
    smallest one already made that is still larger: a 12 MP photo is read once for its coarser levels, its
    overview, its edge pass and its turned levels, not once for each."""

    def __init__(self, image: np.ndarray):
        self.image = image
        self._made: dict[tuple[int, int], np.ndarray] = {}

    def at(self, width: int, height: int) -> np.ndarray:
        """The image at width x height: itself at its own size; enlarged (bilinear, not kept: a level larger than
        the image is tiled, or small); else shrunk."""
        if (width, height) == (self.image.shape[1], self.image.shape[0]):
            return self.image
        if width > self.image.shape[1] or height > self.image.shape[0]:
            return cv2.resize(self.image, (width, height), interpolation=cv2.INTER_LINEAR)
        if (width, height) not in self._made:
            larger = [(w * h, made) for (w, h), made in self._made.items() if w >= width and h >= height]
            source = min(larger, key=lambda item: item[0])[1] if larger else self.image
            self._made[width, height] = cv2.resize(source, (width, height), interpolation=cv2.INTER_AREA)
        return self._made[width, height]


@dataclass(frozen=True)
class SecondLook:
    """A candidate's surroundings as the detector sees them, and the way back to the image's pixels."""

    crop: np.ndarray
    out_w: int
    out_h: int
    back: np.ndarray  # image px per detector px, (x, y)
    offset: np.ndarray  # the surroundings' origin in the image

    def verdict(self, box: np.ndarray, b: np.ndarray, k: np.ndarray, s: np.ndarray) -> Found | None:
        """The best detection overlapping the candidate (IoU >= 0.3), in image pixels; None if there is none."""
        if not len(s):
            return None
        b = (b.reshape(-1, 2, 2) * self.back + self.offset).reshape(-1, 4)
        overlaps = iou(box[None], b)[0]
        if overlaps.max() < 0.3:
            return None
        best = int(np.argmax(np.where(overlaps >= 0.3, s, -1.0)))
        return b[best], k[best] * self.back + self.offset, float(s[best])


# ---- helpers ------------------------------------------------------------------------


def _run(passes: Passes, inputs: list[tuple[np.ndarray, int, int]], threshold: float) -> list[Detections]:
    """Each input's detections after the detector's own NMS (SCRFD's overlap, no containment)."""
    results = []
    for boxes, points, scores in passes.run_many(inputs, threshold):
        keep = suppress(boxes, scores, passes.scrfd.nms_thresh, containment=None)
        results.append((boxes[keep], points[keep], scores[keep]))
    return results


def _mirrored(image: np.ndarray, left: int, top: int, right: int, bottom: int) -> np.ndarray:
    """image[top:bottom, left:right], the part past the image's edges mirrored from the image (as the edge
    pass sees it)."""
    height, width = image.shape[:2]
    inner = image[max(0, top) : min(height, bottom), max(0, left) : min(width, right)]
    pads = (max(0, -top), max(0, bottom - height), max(0, -left), max(0, right - width))
    return cv2.copyMakeBorder(inner, *pads, cv2.BORDER_REFLECT_101) if any(pads) else inner


def _fit_tile(length: int, factor: float, most: int, overlap: int) -> tuple[int, int]:
    """(detector px, source px) of the tiles along one side: as few tiles as `most` px
    allow, shrunk to cover `length` with little beyond the overlaps, a multiple of the
    stride (no padding) when the side needs more than one tile."""
    seen = length * factor
    if seen <= most:
        return round(seen), length
    count = math.ceil((seen - overlap) / (most - overlap))
    out = min(most, math.ceil(((seen - overlap) / count + overlap) / STRIDE) * STRIDE)
    return out, min(length, round(out / factor))


def _starts(length: int, size: int, overlap: float) -> list[int]:
    """Tile origins: fixed-size tiles, the last one flush with the end."""
    if length <= size:
        return [0]
    step = size - overlap
    count = math.ceil((length - size) / step) + 1
    # Spread evenly, so every overlap is at least `overlap`.
    return [round(i * (length - size) / (count - 1)) for i in range(count)]


def _inside_and_small(boxes, tile_w, tile_h, inner, overlap, margin) -> np.ndarray:
    left, top, right, bottom = inner
    x1, y1, x2, y2 = boxes.T
    cut = (
        (left & (x1 <= margin))
        | (top & (y1 <= margin))
        | (right & (x2 >= tile_w - margin))
        | (bottom & (y2 >= tile_h - margin))
    )
    size = np.maximum(x2 - x1, y2 - y1)
    return ~cut & (size <= overlap)


def turned_back(points: np.ndarray, turn: int, width: int, height: int) -> np.ndarray:
    """(n, 2) points of an image turned `turn` quarters counter-clockwise (np.rot90) -> the same points in
    the unturned image, which is width x height."""
    x, y = points[:, 0], points[:, 1]
    if turn % 4 == 1:
        return np.stack([width - y, x], axis=1)
    if turn % 4 == 2:
        return np.stack([width - x, height - y], axis=1)
    if turn % 4 == 3:
        return np.stack([y, height - x], axis=1)
    return points


def _same_face(box: np.ndarray, boxes: np.ndarray, nms_iou: float, containment: float) -> int | None:
    """The index of the box in `boxes` that NMS would take `box` for (overlap over nms_iou, or either box
    `containment` inside the other), the most overlapping; None when there is none."""
    if not len(boxes):
        return None
    x1, y1 = np.maximum(boxes[:, 0], box[0]), np.maximum(boxes[:, 1], box[1])
    x2, y2 = np.minimum(boxes[:, 2], box[2]), np.minimum(boxes[:, 3], box[3])
    inter = np.maximum(0.0, x2 - x1) * np.maximum(0.0, y2 - y1)
    area = max(float((box[2] - box[0]) * (box[3] - box[1])), 1e-9)
    areas = np.maximum((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]), 1e-9)
    overlap = inter / (area + areas - inter)
    same = (overlap > nms_iou) | (inter / area >= containment) | (inter / areas >= containment)
    return int(np.argmax(np.where(same, overlap, -1.0))) if same.any() else None


def suppress(boxes: np.ndarray, scores: np.ndarray, iou: float, containment: float | None) -> list[int]:
    """Greedy NMS by score; with `containment`, a box that much inside a kept one also goes."""
    order = np.argsort(-scores, kind="stable")
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    areas = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    keep = []
    while order.size:
        i = order[0]
        keep.append(int(i))
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        overlap = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9)
        drop = overlap > iou
        if containment is not None:
            drop |= inter / np.maximum(areas[rest], 1e-9) >= containment
        order = rest[~drop]
    return keep
