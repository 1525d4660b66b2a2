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

Faces tilted between the quarter turns (a head on a shoulder, a camera held askew: about 45 degrees) lie about 45
degrees off in every view, where SCRFD scores them low: many come up as candidates and fail their upright second
look. Such a candidate (from `tilted_look_score`) is looked at again with its surroundings turned by each of
`tilted_looks` (45 degrees each way), and what is found there is turned back: its landmarks exactly, its box the
upright bounds of the ellipse inscribed in the tilted box, which is what the blur paints (`TiltedLook`). The turned
levels do the same for a face tilted past a quarter turn (135 degrees: upside down and askew). What their tilted
looks find is the turned view of an upright face no turned level saw, or a face of its own from
`turned_tilted_score`, never in place of a turned level's view: scoring higher, it replaced a good turned view with
one the other way up (players.jpg turned 210 degrees). A selfie gets none.

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

`PyramidDetector(Passes(scrfd), plan).detect(bgr)`; `scrfd` is insightface's `SCRFD` built on the engine's own
session (faces/engines/insightface.py); the plan's fields (faces.engines.base.Plan) are the numbers above. Without
`small_faces` (a reference selfie) only the overview level and the edge pass run. docs/ARCHITECTURE.md §6 says why;
docs/MEASUREMENTS.md has the recall, cost and memory tables (bench/face_recall.py). A bench times the steps through
the `watch` it gives the detector (bench/detector_time.py).

The passes (`Passes`, below): each input resized to its detector size and padded, run alone or in batches. A pass
pads its input to the stride (32) by default. With shape buckets it pads to the smallest of a fixed set of shapes
that holds it instead, so a session sees only those shapes: the CUDA provider spends 1.5-3 s of cuDNN search on
every input shape new to it and 5 ms on a known one, and a photo's tiles, overview, edge pass and second looks would
otherwise each bring new shapes (docs/ARCHITECTURE.md §6, "On a GPU"). Padding is the detector's own black border
either way, so a face finds the same detections, within the padding's effect on the anchors at the content's edge.
Same-shape inputs of one image (a level's tiles, the second looks) may run as one batch: SCRFD's exports take a batch
dimension. A session of the CUDA provider keeps the set-up of the shape it ran last only, so each bucket gets a
session of its own (`new_session`), all built and run once at `warm_up()`, so that no job pays for a shape.
`run_many([(image, out_w, out_h), ...], threshold)` returns each input's (boxes, keypoints, scores) in detector
pixels, every anchor over the threshold (the pyramid runs the detector's own NMS on them).
"""

import contextlib
import itertools
import math
from dataclasses import dataclass

import cv2
import numpy as np

from faces.checkpoint import Checkpoint, never_stop
from faces.engines.base import PHOTO_PLAN, Plan, Watch
from faces.engines.lanes import Lanes
from faces.geometry import iou

# (box (4,) x1 y1 x2 y2, landmarks (5, 2), score), pixels of the image given to `detect`.
Found = tuple[np.ndarray, np.ndarray, float]
# A face as the upright levels (or, where they found none, a turned level) found it, and its turned view.
UprightAndTurned = tuple[Found, Found | None]
# SCRFD's coarsest feature stride: its input's sides are multiples of it.
STRIDE = 32
Shape = tuple[int, int]  # (width, height) of a detector input
Detections = tuple[np.ndarray, np.ndarray, np.ndarray]  # boxes (n, 4), keypoints (n, 5, 2), scores (n,)

# A quarter turn counter-clockwise (np.rot90's sense), by count.
_ROTATE = {1: cv2.ROTATE_90_COUNTERCLOCKWISE, 2: cv2.ROTATE_180, 3: cv2.ROTATE_90_CLOCKWISE}


class PyramidDetector:
    def __init__(
        self,
        passes: "Passes",
        plan: Plan = PHOTO_PLAN,
        *,
        overview_passes: "Passes | None" = None,
        watch: Watch = contextlib.nullcontext,
    ):
        """`passes` run the fine levels and the second looks; `overview_passes` (default: the same) the
        overview level, which finds the large faces (buffalo_l's SCRFD-10G beside buffalo_s's SCRFD-500M).
        `watch` is entered around each step (a level, the second looks, the edge pass, the turned levels and
        each turn), by its name: a bench's clock (bench/detector_time.py)."""
        for detector in (passes.scrfd, (overview_passes or passes).scrfd):
            if not detector.use_kps:
                raise ValueError("PyramidDetector needs SCRFD models with keypoints")
        self.plan = plan
        self.passes = passes
        self.overview_passes = overview_passes or passes
        self.watch = watch
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
        # Each level hands faces over to the next one at most level_ratio (+ level_slack) coarser.
        scales = [max(finest, overview)]
        while scales[-1] / overview > self.plan.level_ratio * self.plan.level_slack:
            scales.append(scales[-1] / self.plan.level_ratio)
        if scales[-1] / overview < self.plan.level_slack:
            scales.pop()
        return [*scales, overview]

    def planned(self, plan: Plan) -> "PyramidDetector":
        """This pyramid's passes (its sessions) on `plan`: itself on its own plan, else one built once per plan."""
        if plan == self.plan:
            return self
        if plan not in self._planned:
            self._planned[plan] = PyramidDetector(
                self.passes, plan, overview_passes=self.overview_passes, watch=self.watch
            )
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
        # A selfie gets no tilted looks, as no turned levels: a tilted false face must not become a reference.
        faces, tilted = self._faces(shrinks, levels, checkpoint, self.plan.fine_score_threshold, tilted=small_faces)
        faces += tilted
        if self.plan.edge_pass:
            with self.watch("edge pass"):
                faces += self._across_edges(shrinks, self.overview_scale(width, height))
        upright = self._finish(faces, width, height)
        if not (small_faces and self.plan.turns):
            return [(face, None) for face in upright]
        turned_levels = self._turned_levels(levels, width, height)
        with self.watch("turned levels"):
            turned_faces, turned_tilted = self._turned_faces(shrinks, turned_levels, checkpoint)
        turned = self._finish(turned_faces, width, height)
        return self._upright_first(upright, turned, self._finish(turned_tilted, width, height))

    def _upright_first(
        self, upright: list[Found], turned: list[Found], turned_tilted: list[Found]
    ) -> list[UprightAndTurned]:
        """Each turned face that is one of the upright faces (NMS's overlap or containment) becomes that face's
        turned view, the best-scoring one where several are; the others are faces of their own. A face a turned
        level's tilted look found is the turned view of an upright face that no turned level saw (the recogniser then
        picks the view), or one of its own from turned_tilted_score, never in place of a turned level's view: scoring
        higher, it replaced a good view with one the other way up (players.jpg turned 210 degrees)."""
        views: dict[int, Found] = {}
        alone = []
        boxes = np.array([face[0] for face in upright], np.float32).reshape(-1, 4)
        for face in sorted(turned, key=lambda found: -found[2]):
            same = _same_face(face[0], boxes, self.plan.nms_iou, self.plan.containment)
            if same is None:
                alone.append((face, None))
            else:
                views.setdefault(same, face)
        seen_turned = np.array([face[0] for face in turned], np.float32).reshape(-1, 4)
        for face in sorted(turned_tilted, key=lambda found: -found[2]):
            if _same_face(face[0], seen_turned, self.plan.nms_iou, self.plan.containment) is not None:
                continue
            same = _same_face(face[0], boxes, self.plan.nms_iou, self.plan.containment)
            if same is not None:
                views.setdefault(same, face)
            elif face[2] >= self.plan.turned_tilted_score:
                alone.append((face, None))
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

    def _one_pass(self, scaled_w: int, scaled_h: int, passes: "Passes") -> bool:
        """Whether a level of scaled_w x scaled_h runs as one pass (else it is tiled)."""
        return scaled_w * scaled_h <= self.plan.whole_max_pixels and passes.fits(scaled_w, scaled_h)

    def _faces(
        self,
        shrinks: "Shrinks",
        levels: list[float],
        checkpoint: Checkpoint,
        fine_threshold: float | None,
        *,
        tilted: bool,
    ) -> tuple[list[Found], list[Found]]:
        """Every level's candidates, one box per face across levels; the unsure ones after their second look; and,
        apart, with `tilted`, what the tilted looks found of those it failed. The finest level (unless it is the
        overview) takes its candidates from `fine_threshold` (None: score_threshold)."""
        plan = self.plan
        chunks = []
        for index, scale in enumerate(levels):
            last = index == len(levels) - 1
            passes = self.overview_passes if last else self.passes
            fine = index == 0 and not last and fine_threshold is not None
            threshold = fine_threshold if fine else plan.score_threshold
            with self.watch("overview" if last else f"level x{scale:.3g}"):
                chunks += self._level(shrinks, scale, threshold, keep_all=last, passes=passes, checkpoint=checkpoint)
        if not chunks:
            return [], []
        boxes, points, scores = (np.concatenate(parts) for parts in zip(*chunks, strict=True))
        # Unsure candidates get their second look before the containment rule runs:
        # a low-scoring texture box around a face must not take the face with it.
        kept = suppress(boxes, scores, self.plan.nms_iou, containment=None)
        sure = [(boxes[i], points[i], float(scores[i])) for i in kept if scores[i] >= self.plan.sure_score]
        unsure = [i for i in kept if scores[i] < self.plan.sure_score]
        height, width = shrinks.image.shape[:2]
        # Only a picture's own edges cut faces: a search's part of a video frame (no edge pass) has none.
        cut, whole = [], []
        for i in unsure:
            (cut if self.plan.edge_pass and _past_the_edge(boxes[i], width, height) else whole).append(i)
        looked = self._second_looks(shrinks.image, [boxes[i] for i in whole])
        failed = [i for i, face in zip(whole, looked, strict=True) if face is None]
        faint = [boxes[i] for i in failed if scores[i] >= plan.tilted_look_score] if tilted else []
        looked += self._second_looks(shrinks.image, [boxes[i] for i in cut], width=self.plan.edge_verify_width)
        found = sure + [face for face in looked if face is not None]
        return found, [face for face in self._tilted_looks(shrinks.image, faint) if face is not None]

    def _turned_faces(
        self, shrinks: "Shrinks", levels: list[float], checkpoint: Checkpoint
    ) -> tuple[list[Found], list[Found]]:
        """Faces turned in the picture itself (a guest lying down, a child upside down), which SCRFD misses
        past about 60 degrees: `levels` (the coarser ones) run on the photo turned by each of the plan's
        quarter turns, and what they find is turned back; apart, what their tilted looks found. The photo is shrunk
        once, to the first of them, before it is turned (the upright levels' shrink of that scale), so a turn
        costs a copy of that level, not of the photo."""
        top = levels[0]
        height, width = shrinks.image.shape[:2]
        size = (round(width * top), round(height * top))
        small = shrinks.at(*size)
        back = np.array([width / size[0], height / size[1]], np.float32)
        relative = [scale / top for scale in levels]
        fine_threshold = self.plan.turned_score_threshold
        faces, tilted = [], []
        for turn in self.plan.turns:
            with self.watch(f"turn {turn * 90}"):
                turned = cv2.rotate(small, _ROTATE[turn % 4]) if turn % 4 else small
                found, found_tilted = self._faces(
                    Shrinks(turned), relative, checkpoint, fine_threshold, tilted=self.plan.tilted_looks_in_turns
                )
                faces += [self._turned_back(face, turn, size, back) for face in found]
                tilted += [self._turned_back(face, turn, size, back) for face in found_tilted]
        return faces, tilted

    @staticmethod
    def _turned_back(face: Found, turn: int, size: tuple[int, int], back: np.ndarray) -> Found:
        """A face found in the shrunk photo (`size`) turned `turn` quarters, in the photo's pixels."""
        box, points, score = face
        corners = turned_back(box.reshape(2, 2), turn, *size) * back
        box = np.concatenate([corners.min(axis=0), corners.max(axis=0)])
        return box, turned_back(points, turn, *size) * back, score

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

    def _second_looks(
        self, image: np.ndarray, boxes: list[np.ndarray], *, mirrored: bool = False, width: int | None = None
    ) -> list:
        """Each candidate's surroundings, scaled so that the candidate is `width` px wide (None: verify_width): the
        best detection there that overlaps it (IoU >= verify_iou), if it scores verify_score; else None. The looks
        run together (one batch per shape). `mirrored`: surroundings past the image's edge are the image
        mirrored there (a face the edge cuts)."""
        if not boxes:
            return []
        with self.watch(f"second looks ({'edge' if mirrored else 'levels'})"):
            looks = [self._surroundings(image, box, mirrored, width or self.plan.verify_width) for box in boxes]
            found = _run(self.passes, [(look.crop, look.out_w, look.out_h) for look in looks], self.plan.verify_score)
            verdicts = zip(boxes, looks, found, strict=True)
            return [look.verdict(box, *result, least_iou=self.plan.verify_iou) for box, look, result in verdicts]

    def _tilted_looks(self, image: np.ndarray, boxes: list[np.ndarray]) -> list[Found | None]:
        """Each candidate seen by looks_turned at the plan's tilted_looks."""
        with self.watch("tilted looks"):
            return self.looks_turned(image, boxes, self.plan.tilted_looks)

    def looks_turned(self, image: np.ndarray, boxes: list[np.ndarray], angles: tuple[float, ...]) -> list[Found | None]:
        """Each face's (or candidate's) surroundings turned by each of `angles`, as a second look sees them
        (verify_width, verify_context): the best-scoring detection there that overlaps it, turned back
        (`TiltedLook.verdict`); None where no angle finds one. The looks run together."""
        plan = self.plan
        if not boxes or not angles:
            return [None] * len(boxes)
        looks = [(box, look) for box in boxes for look in TiltedLook.around(image, box, plan, angles)]
        seen = _run(self.passes, [(look.crop, look.size, look.size) for _, look in looks], plan.verify_score)
        paired = zip(looks, seen, strict=True)
        verdicts = [look.verdict(box, *found, least_iou=plan.verify_iou) for (box, look), found in paired]
        per_box = itertools.batched(verdicts, len(angles))
        return [max((v for v in group if v is not None), key=lambda v: v[2], default=None) for group in per_box]

    def _surroundings(self, image: np.ndarray, box: np.ndarray, mirrored: bool, look_width: int) -> "SecondLook":
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
        factor = look_width / box_w
        out_w, out_h = max(1, round((right - left) * factor)), max(1, round((bottom - top) * factor))
        if factor < 1.0:  # shrinking: average, as the levels do
            crop = cv2.resize(crop, (out_w, out_h), interpolation=cv2.INTER_AREA)
        back = np.array([(right - left) / out_w, (bottom - top) / out_h], np.float32)
        return SecondLook(crop, out_w, out_h, back, np.array([left, top], np.float32))

    # ---- one level --------------------------------------------------------------

    def _level(
        self,
        shrinks: "Shrinks",
        scale: float,
        threshold: float,
        keep_all: bool,
        passes: "Passes",
        checkpoint: Checkpoint,
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
        for group in itertools.batched(origins, passes.at_once(out_w, out_h)):
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

    def verdict(self, box: np.ndarray, b: np.ndarray, k: np.ndarray, s: np.ndarray, least_iou: float) -> Found | None:
        """The best detection overlapping the candidate (IoU >= least_iou), in image pixels; None if there is none."""
        if not len(s):
            return None
        b = (b.reshape(-1, 2, 2) * self.back + self.offset).reshape(-1, 4)
        best = _best_overlapping(box, b, s, least_iou)
        return None if best is None else (b[best], k[best] * self.back + self.offset, float(s[best]))


@dataclass(frozen=True)
class TiltedLook:
    """A candidate's surroundings turned about its centre, as the detector sees them, and the way back."""

    crop: np.ndarray  # size x size
    size: int
    back: np.ndarray  # (2, 3) affine: detector px -> image px

    @classmethod
    def around(cls, image: np.ndarray, box: np.ndarray, plan: Plan, angles: tuple[float, ...]) -> list["TiltedLook"]:
        """The square a second look would see (verify_context box sizes, the candidate verify_width wide), turned
        by each of `angles` (degrees counter-clockwise); past the image's edges, the image mirrored. The
        surroundings are cut and shrunk once for every angle."""
        x1, y1, x2, y2 = (float(v) for v in box)
        # A sliver (a box the image's edge clipped) is enlarged no more than a face's proportions allow: its look
        # would otherwise be megapixels.
        box_w = max(x2 - x1, (y2 - y1) / 2, 1.0)
        side = plan.verify_context * max(box_w, y2 - y1)
        factor = plan.verify_width / box_w
        size = max(1, round(side * factor))
        # The turned square's corners reach half its diagonal from the centre.
        reach = side * math.sqrt(0.5)
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        left, top = math.floor(cx - reach), math.floor(cy - reach)
        around = _mirrored(image, left, top, math.ceil(cx + reach) + 1, math.ceil(cy + reach) + 1)
        sx = sy = 1.0
        if factor < 1.0:  # shrinking: average first, as the levels do; warpAffine only interpolates
            height, width = around.shape[:2]
            shrunk = (max(1, round(width * factor)), max(1, round(height * factor)))
            around = cv2.resize(around, shrunk, interpolation=cv2.INTER_AREA)
            sx, sy = shrunk[0] / width, shrunk[1] / height
        # image px -> `around` px (a shift, then the shrink), then turned and scaled about the centre into the look.
        to_around = np.array([[sx, 0.0, -left * sx], [0.0, sy, -top * sy], [0.0, 0.0, 1.0]])
        centre = ((cx - left) * sx, (cy - top) * sy)
        looks = []
        for angle in angles:
            turn = cv2.getRotationMatrix2D(centre, angle, factor / sx)
            turn[:, 2] += [size / 2 - centre[0], size / 2 - centre[1]]
            crop = cv2.warpAffine(around, turn, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101)
            forward = np.vstack([turn, [0.0, 0.0, 1.0]]) @ to_around
            looks.append(cls(crop, size, np.linalg.inv(forward)[:2]))
        return looks

    def verdict(self, box: np.ndarray, b: np.ndarray, k: np.ndarray, s: np.ndarray, least_iou: float) -> Found | None:
        """The best detection whose box, turned back, overlaps the candidate (IoU >= least_iou), in image pixels:
        its box the upright bounds of the ellipse inscribed in the tilted one (the blur's ellipse, so a tilted face
        is no larger than an upright one of its size), its landmarks turned back."""
        if not len(s):
            return None
        linear, shift = self.back[:, :2], self.back[:, 2]
        centres = ((b[:, :2] + b[:, 2:]) / 2) @ linear.T + shift
        # The ellipse of semi-axes (a, b) mapped by `linear` reaches |row i of linear @ diag(a, b)| along axis i.
        axes = (b[:, 2:] - b[:, :2]) / 2
        reach = np.sqrt(((axes[:, None, :] * linear[None, :, :]) ** 2).sum(axis=2))
        bounds = np.concatenate([centres - reach, centres + reach], axis=1).astype(np.float32)
        best = _best_overlapping(box, bounds, s, least_iou)
        if best is None:
            return None
        return bounds[best], (k[best] @ linear.T + shift).astype(np.float32), float(s[best])


def _best_overlapping(box: np.ndarray, boxes: np.ndarray, scores: np.ndarray, least_iou: float) -> int | None:
    """The index of the best-scoring of `boxes` that overlaps `box` (IoU >= least_iou): a second look's verdict."""
    overlaps = iou(box[None], boxes)[0]
    if overlaps.max() < least_iou:
        return None
    return int(np.argmax(np.where(overlaps >= least_iou, scores, -1.0)))


# ---- the detector's passes -----------------------------------------------------------


class Passes:
    """SCRFD's passes: each input resized to its detector size, padded to the stride or to a shape bucket, and run
    alone or in batches (the module's docstring says why)."""

    def __init__(
        self,
        scrfd,
        *,
        buckets: tuple[Shape, ...] = (),
        batch: int = 1,
        new_session=None,
        lanes: Lanes | None = None,
        lane_session=None,
        lane_pass_pixels: int = 0,
    ):
        """`new_session()`: a session of the detector's model like scrfd.session, one per bucket (None: the
        buckets share scrfd's). `lanes` and `lane_session` (a one-thread session of the model): a stage's passes of
        at most `lane_pass_pixels` run side by side on it (faces/engines/lanes.py); None: one after another on
        scrfd's."""
        self.scrfd = scrfd
        self.lanes = lanes if lanes is not None and lane_session is not None else Lanes(1)
        self._lane_session = lane_session
        self.lane_pass_pixels = lane_pass_pixels
        self.buckets = tuple(sorted(buckets, key=lambda shape: shape[0] * shape[1]))
        # An export without a batch dimension (insightface's `batched` is False) runs one input at a time.
        self.batch = batch if getattr(scrfd, "batched", False) else 1
        self._sessions = {shape: new_session() for shape in self.buckets} if new_session else {}
        self._centers: dict = {}

    def input_shape(self, out_w: int, out_h: int) -> Shape:
        """The shape a pass of out_w x out_h runs at: the stride's multiple, or the smallest bucket holding it."""
        if not self.buckets:
            return -(-out_w // STRIDE) * STRIDE, -(-out_h // STRIDE) * STRIDE
        if (bucket := self._bucket_for(out_w, out_h)) is None:
            raise ValueError(f"a {out_w}x{out_h} pass fits no shape bucket: the plan must tile it")
        return bucket

    def fits(self, out_w: int, out_h: int) -> bool:
        """Whether one pass can take out_w x out_h (always, without buckets)."""
        return not self.buckets or self._bucket_for(out_w, out_h) is not None

    def _bucket_for(self, out_w: int, out_h: int) -> Shape | None:
        return next(((width, height) for width, height in self.buckets if width >= out_w and height >= out_h), None)

    def run_many(self, inputs: list[tuple[np.ndarray, int, int]], threshold: float) -> list[Detections]:
        """Each input's detections; inputs of one shape go through the session `batch` at a time."""
        results: list[Detections | None] = [None] * len(inputs)
        by_shape: dict[Shape, list[int]] = {}
        for index, (_, out_w, out_h) in enumerate(inputs):
            by_shape.setdefault(self.input_shape(out_w, out_h), []).append(index)
        groups = [
            (shape, group) for shape, indices in by_shape.items() for group in itertools.batched(indices, self.batch)
        ]

        def run(shape_group: tuple[Shape, tuple[int, ...]], side_by_side: bool) -> None:
            (in_w, in_h), group = shape_group
            blobs = [self._blob(*inputs[i], in_w, in_h) for i in group]
            if self.buckets and 1 < len(blobs) < self.batch:  # a batch size the warm-up ran: the full one
                blobs += [np.zeros_like(blobs[0])] * (self.batch - len(blobs))
            blob = np.concatenate(blobs)
            session = self._lane_session if side_by_side else self._sessions.get((in_w, in_h), self.scrfd.session)
            outputs = session.run(self.scrfd.output_names, {self.scrfd.input_name: blob})
            for position, index in enumerate(group):
                results[index] = self._decode(_one_of(outputs, position), in_w, in_h, threshold)

        widest = max((in_w * in_h for in_w, in_h in by_shape), default=0)
        self.lanes.map(run, groups, in_turn=widest > self.lane_pass_pixels)
        return results

    def at_once(self, out_w: int, out_h: int) -> int:
        """How many passes of out_w x out_h to hand run_many together: a batch, or one per lane when they are small
        enough to run side by side."""
        return self.batch * (self.lanes.threads if out_w * out_h <= self.lane_pass_pixels else 1)

    def warm_up(self) -> list[Shape]:
        """Every bucket, at batch 1 and at the full batch: the shapes (with their batch sizes) a job runs."""
        for (width, height), size in itertools.product(self.buckets, sorted({1, self.batch})):
            blank = np.zeros((height, width, 3), np.uint8)
            self.run_many([(blank, width, height)] * size, 1.0)
        return list(self.buckets)

    def _blob(self, image: np.ndarray, out_w: int, out_h: int, in_w: int, in_h: int) -> np.ndarray:
        """The detector's input: `image` resized to out_w x out_h, RGB, (x - mean) / std, NCHW, padded with
        black's value to in_w x in_h. The same numbers as OpenCV's blobFromImage, which resizes the same
        way (bilinear, on the 8-bit image); written into one array here, as it is ~25 % cheaper on a tile."""
        mean, std = self.scrfd.input_mean, self.scrfd.input_std
        if image.shape[1] != out_w or image.shape[0] != out_h:
            image = cv2.resize(image, (out_w, out_h), interpolation=cv2.INTER_LINEAR)
        blob = np.empty((1, 3, in_h, in_w), np.float32)
        blob[:, :, out_h:, :] = blob[:, :, :, out_w:] = -mean / std
        inside = blob[0, :, :out_h, :out_w]
        for channel, plane in enumerate(cv2.split(image)[::-1]):  # BGR -> RGB
            inside[channel] = plane
        inside -= mean
        inside *= 1.0 / std
        return blob

    def _decode(self, outputs, in_w: int, in_h: int, threshold: float) -> Detections:
        from insightface.model_zoo.scrfd import distance2bbox, distance2kps

        scrfd = self.scrfd
        fmc = scrfd.fmc
        boxes, points, scores = [], [], []
        for index, stride in enumerate(scrfd._feat_stride_fpn):
            level_scores = outputs[index].reshape(-1)
            hits = np.flatnonzero(level_scores >= threshold)
            if not len(hits):
                continue
            centers = self._anchor_centers(in_h // stride, in_w // stride, stride, scrfd._num_anchors)[hits]
            box_pred = outputs[index + fmc].reshape(-1, 4)[hits] * stride
            kps_pred = outputs[index + 2 * fmc].reshape(-1, 10)[hits] * stride
            boxes.append(distance2bbox(centers, box_pred))
            points.append(distance2kps(centers, kps_pred).reshape(-1, 5, 2))
            scores.append(level_scores[hits])
        if not scores:
            return np.zeros((0, 4), np.float32), np.zeros((0, 5, 2), np.float32), np.zeros(0, np.float32)
        return np.concatenate(boxes), np.concatenate(points), np.concatenate(scores)

    def _anchor_centers(self, rows: int, cols: int, stride: int, anchors: int) -> np.ndarray:
        key = (rows, cols, stride, anchors)
        centers = self._centers.get(key)
        if centers is None:
            # insightface's layout: row-major (x, y) * stride, each repeated per anchor.
            grid = np.stack(np.mgrid[:rows, :cols][::-1], axis=-1).astype(np.float32)
            centers = np.repeat((grid * stride).reshape(-1, 2), anchors, axis=0)
            if len(self._centers) < 64:
                self._centers[key] = centers
        return centers


# ---- helpers ------------------------------------------------------------------------


def _run(passes: "Passes", inputs: list[tuple[np.ndarray, int, int]], threshold: float) -> list[Detections]:
    """Each input's detections after the detector's own NMS (SCRFD's overlap, no containment)."""
    results = []
    for boxes, points, scores in passes.run_many(inputs, threshold):
        keep = suppress(boxes, scores, passes.scrfd.nms_thresh, containment=None)
        results.append((boxes[keep], points[keep], scores[keep]))
    return results


def _past_the_edge(box: np.ndarray, width: int, height: int) -> bool:
    """Whether a detection's box reaches past the image's edge: the detector saw a face the edge cuts."""
    return bool(box[0] < 0 or box[1] < 0 or box[2] > width or box[3] > height)


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


def _one_of(outputs: list[np.ndarray], position: int) -> list[np.ndarray]:
    """One input's outputs of a run: (batch, anchors, k) from an export with a batch dimension, (anchors, k)
    from one without (which only ever runs one input)."""
    if outputs[0].ndim == 2:
        return outputs
    return [output[position] for output in outputs]
