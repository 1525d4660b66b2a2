"""A clip's one detection pass: which frames are looked at (the schedule), where the picture changed between looks
(the motion watch), the faces found, linked into tracks (faces/tracks.py) (docs/ARCHITECTURE.md §11). The numbers
are `CLIP_SCHEDULE`'s.

An animated image is looked at on every frame; a video on a cadence such that two looks are never more than the look
interval (faces.tracks.Tracking.look_interval_s) apart (unless two consecutive frames are), so a track that reaches
Painting.track_pad_s past its ends covers every frame between (faces/rendering/painters.py).

What the looks cannot see is a face that is only there between them: one that comes and goes within an interval,
one hidden on every look frame, one blurred by its own motion on the look frames. Each of them changes the picture
where it is. So every frame between looks is compared with the one before it on a small grey copy: after the
camera's own shift is taken out (phase correlation), the places that changed are the only places a face can have
come into view, and only those are searched, at the look's own scale, but where a person seen in the last interval
is (their face, grown to a body's size): their motion is theirs, and their face is covered by its track.

A hard cut changes the whole picture at once (its grey level, or, in a new layout of the same colours, its
content): it starts a new scene, whose faces are never linked to the faces of the scene before (tracks.link), and
whose first frame is looked at.

`reprocess` never comes here: it matches and renders again from the stored tracks (a track's reach
depends on its sightings alone).
"""

import contextlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import cv2
import numpy as np

from faces import thresholds
from faces.checkpoint import Checkpoint, never_stop
from faces.engines import DetectedFace, FaceEngine
from faces.engines.base import Plan, Watch
from faces.geometry import PixelBox, iou, near_edge
from faces.media.clip import Clip
from faces.media.read_ahead import read_ahead
from faces.tracks import TRACKING, Tracking, link


@dataclass(frozen=True)
class ClipSchedule:
    """A clip's looks and the searches between them: the plan a video frame is looked at on, where the motion
    watch sees a change, and how a changed place is searched. docs/MEASUREMENTS.md, "Media cost and coverage" and
    "Clips and photos against their floor", has the figures."""

    # A video frame's look: the photo plan, cascade included, without the turned levels and the looks at poorly seen
    # faces turned (five looks a second cannot pay for them: the latter cost the 1080p clip 1.08x, "Faces seen the
    # wrong way up"), its finest level at most 1.5x.
    look_plan: Plan = Plan(fine_scale=1.5, turns=(), reorient_looks=())  # noqa: RUF009 (frozen: one value for every schedule)
    # The detector pixels of a look's finest level, so its scale falls as the frame grows: 1.5x up to 720p, 1x at
    # 1080p (both 2.1 MP); with the cascade every look finds 24 px faces at every size (bench/media.py's coverage).
    look_detector_pixels: float = 1.5**2 * 1280 * 720
    # But never under this scale (4K: 4.7 MP, one pass): 24 px faces stay found.
    least_look_scale: float = 0.75
    # The most detector pixels a changed place between two looks is searched with (its finest level's): a larger
    # one (a dancing crowd) is shrunk first, so the search between looks stays cheap; its small faces are the looks'.
    region_detector_pixels: int = 1_200_000
    # Whether changes inside a person seen in the last interval are searched too: no, their face is covered by its
    # track, and searching there breaks the 1080p time goal ("Searching inside people between looks").
    search_inside_people: bool = False
    # Whether a changed place at the frame's edge makes its frame a whole look: no, the edge pass at the look's
    # scale costs less and finds more ("A face the frame's edge cuts, between looks"; bench/clip_edge_faces.py).
    whole_look_at_frame_edge: bool = False
    # Whether frames between looks are compared at all (False: no cut seen, nothing searched between looks, the
    # plan of before the watch: bench/media.py's baseline).
    watch_motion: bool = True
    # The grey copy the frames are compared on: this fraction of the frame's side (cheap, and codec noise averages).
    compare_scale: float = 0.25
    # A pixel changed when its grey level (0-255) moved this much, after a light blur: more than codec noise.
    changed_level: int = 20
    # A cut: the mean grey difference of the whole copy, without shift, is at least this.
    cut_level: float = 45.0
    # Or most of the copy changed and what is there now correlates (zero-mean, so a flash or a fade keeps it high)
    # under this with the picture before, moved: two scenes of the same colours in another layout tell apart.
    cut_correlation: float = 0.3
    # A changed region smaller than this share of the copy is noise.
    min_region_share: float = 2e-4
    # More of the frame than this changed (a shaky camera the shift did not explain, a flash): the whole frame is
    # looked at instead of its parts.
    whole_frame_share: float = 0.35
    # A changed region is grown by this share of its size on each side: the search must see the whole head around
    # a change at its edge.
    region_growth: float = 0.5
    # And by at least this many frame pixels, for the same reason.
    region_margin_px: int = 48
    # A face the searched region cuts is searched again this many of its sizes around it: a sliver's height is the
    # face's, its width is not.
    cut_face_reach: float = 1.5
    # A face within its size divided by this (and at least cut_margin_px) of a region's inner edge is cut by it: the
    # detector stops a little short of an edge that cuts a face.
    cut_margin_divisor: int = 6
    cut_margin_px: float = 2.0
    # The camera's shift between two grey copies is taken out only when phase correlation is this sure of it, and
    # it moves half a cell or more.
    least_shift_response: float = 0.1
    least_shift_cells: float = 0.5
    # The frames decoded, converted and compared ahead of the detector, on a thread of their own (each held: a
    # 1080p frame is 6 MB); 0: on the detector's thread (bench/read_ahead.py).
    frames_ahead: int = 4

    def look_plan_of(self, width: int, height: int) -> Plan:
        """A video frame's look plan (or a region of one's): look_plan at the budget above, its scale rounded down
        to an eighth so that a handful of plans serve every frame and region size."""
        budget = max(self.least_look_scale, math.sqrt(self.look_detector_pixels / (width * height)))
        return replace(self.look_plan, fine_scale=math.floor(min(self.look_plan.fine_scale, budget) * 8) / 8)


CLIP_SCHEDULE = ClipSchedule()


def detect_clip(
    clip: Clip,
    engine: FaceEngine,
    checkpoint: Checkpoint = never_stop,
    *,
    schedule: ClipSchedule = CLIP_SCHEDULE,
    tracking: Tracking = TRACKING,
    watch: Watch = contextlib.nullcontext,
) -> list[tuple[float, int, DetectedFace]]:
    """(frame time, track, DetectedFace) for every face found: on every frame the schedule looks at, and on
    the frames between, wherever the picture changed where no recent sighting covers it (a face that comes and goes
    between two looks, or is hidden or blurred on them). Tracks never go on across a hard cut. `checkpoint` is
    called before each frame and within each look (it may raise to stop the pass). `watch` is entered around the
    steps a bench times: "motion" (the watch), "search" (between looks), "link" (bench/media.py)."""
    seen: list[tuple[float, DetectedFace]] = []
    cuts: list[float] = []
    searched: dict[float, list] = {}  # frames searched in parts only: those parts
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    watching = schedule.watch_motion and not clip.every_frame
    watched = read_ahead(changes(clip.frames(), schedule, watching=watching, watch=watch), schedule.frames_ahead)
    # One plan for the clip's looks and the places searched between them: the frame's size decides it.
    plan = None if clip.every_frame else schedule.look_plan_of(clip.width, clip.height)
    interval = tracking.look_interval_s
    frames = ((t, (f, c), c.cut) for t, f, c in watched)
    # Closed as soon as the pass ends or is stopped: the reading ahead stops then, not when the pass's frames are freed.
    with contextlib.closing(watched):
        for time, (frame, change), look in scheduled(frames, clip.every_frame, interval):
            checkpoint()  # a try cut off from its session, or stopped for privacy work, stops within a frame
            if change.cut:
                cuts.append(time)
            if look or change.whole_frame:
                seen += [(time, face) for face in engine.analyze(frame, plan=plan, checkpoint=checkpoint)]
                continue
            people = [] if schedule.search_inside_people else _people(seen, time, interval)
            found, areas = _between_looks(engine, frame, change, people, plan, schedule, checkpoint, watch)
            seen += [(time, face) for face in found]
            searched[time] = [np.array(area) / scale for area in areas]
    sightings = [(time, face.box / scale) for time, face in seen]
    clear = _clearly_seen([face for _, face in seen], engine.name, clip.width, clip.height)
    with watch("link"):
        embeddings = [face.embedding for _, face in seen]
        tracks = link(sightings, cuts, searched, embeddings=embeddings, clear=clear, tracking=tracking)
    return [(time, track, face) for (time, face), track in zip(seen, tracks, strict=True)]


def _between_looks(
    engine: FaceEngine,
    frame: np.ndarray,
    change: "Change",
    people: list[PixelBox],
    plan: Plan,
    schedule: ClipSchedule,
    checkpoint: Checkpoint,
    watch: Watch,
) -> tuple[list[DetectedFace], list[PixelBox]]:
    """A frame between looks: the faces in the places that changed, and where a sighting here may continue a track
    (the places searched, and the people who moved)."""
    with watch("motion"):
        regions, moved = search_areas(change, people, schedule)
    with watch("search"):
        found = [face for area in regions for face in _analyze_region(engine, frame, area, plan, schedule, checkpoint)]
    return found, regions + moved


def scheduled[Frame](
    frames: Iterable[tuple[float, Frame, bool]], every_frame: bool, interval_s: float
) -> Iterator[tuple[float, Frame, bool]]:
    """Every (time, frame, cut: a cut right before it) with whether the detector looks at the frame: at every
    frame, or at the first, the last, each frame whose skipping would leave more than `interval_s` between two
    looks, and the last and first frames of a scene around a cut. One frame of look-ahead, so a video is still
    streamed."""
    last_look, pending = None, None
    for time, frame, cut in frames:
        if pending is not None:
            look = every_frame or cut or last_look is None or time - last_look > interval_s + 1e-6
            last_look = pending[0] if look else last_look
            yield (*pending, look)
        last_look = None if cut else last_look
        pending = (time, frame)
    if pending is not None:
        yield (*pending, True)


def _clearly_seen(faces: list[DetectedFace], engine: str, width: int, height: int) -> list[bool]:
    """Which faces are witnesses of who they are, for linking (faces.tracks.Tracking.link_agreement): seen well
    (faces.thresholds) and not cut by the frame's edge, whose part of a face embeds unlike the whole face."""
    return thresholds.judge_detected(engine, faces, width, height).clear.tolist()


def _people(seen: list[tuple[float, DetectedFace]], time: float, within_s: float) -> list:
    """Where the people seen in the last `within_s` (a look interval) are: each face box grown to a body's (a face
    width on each side, half a face height above, three below). Their own motion needs no search: their faces are
    covered by their tracks."""
    people = []
    for then, face in reversed(seen):
        if time - then > within_s:
            break
        x1, y1, x2, y2 = (float(v) for v in face.box)
        width, height = x2 - x1, y2 - y1
        people.append((x1 - width, y1 - height / 2, x2 + width, y2 + 3 * height))
    return people


def _analyze_region(
    engine: FaceEngine, frame: np.ndarray, region, look: Plan, schedule: ClipSchedule, checkpoint: Checkpoint
) -> list[DetectedFace]:
    """The faces in one region of a frame, on its looks' plan `look`, in the frame's pixels. A face the region's
    edge cuts (only its leading part changed) is searched again in its own surroundings, so its sighting is the
    whole face."""
    height, width = frame.shape[:2]
    if schedule.whole_look_at_frame_edge and near_edge(region, width, height):
        return engine.analyze(frame, plan=look, checkpoint=checkpoint)
    found = []
    for face in _search(engine, frame, region, look, schedule, checkpoint):
        if _cut_by(face.box, region, width, height, schedule):
            x1, y1, x2, y2 = (float(v) for v in face.box)
            reach = schedule.cut_face_reach * max(x2 - x1, y2 - y1)
            around = (x1 - reach, y1 - reach, x2 + reach, y2 + reach)
            whole = _search(engine, frame, _clipped(around, width, height), look, schedule, checkpoint)
            face = max(whole, key=lambda other: iou(face.box, other.box), default=face)
        found.append(face)
    return found


def _search(
    engine: FaceEngine, frame: np.ndarray, region, look: Plan, schedule: ClipSchedule, checkpoint: Checkpoint
) -> list[DetectedFace]:
    """One region searched on its frame's looks' plan, at their scale (a face that comes into view there is as
    small as the looks find) and within the schedule's region_detector_pixels: a large one is shrunk first."""
    x1, y1, x2, y2 = region
    crop = frame[y1:y2, x1:x2]
    budget = schedule.region_detector_pixels
    factor = min(1.0, math.sqrt(budget / (look.fine_scale**2 * crop.shape[0] * crop.shape[1])))
    if factor < 1.0:
        size = (max(1, round(crop.shape[1] * factor)), max(1, round(crop.shape[0] * factor)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
    # The edge pass (the crop mirrored past its edges, about three times its pixels) is for faces the frame's
    # edge cuts; one the region's own edge cuts is searched again in its surroundings (_analyze_region).
    plan = replace(look, edge_pass=near_edge(region, frame.shape[1], frame.shape[0]))
    found = engine.analyze(np.ascontiguousarray(crop), plan=plan, checkpoint=checkpoint)
    offset = np.array([x1, y1], dtype=np.float32)
    return [
        replace(face, box=face.box / factor + np.tile(offset, 2), landmarks=face.landmarks / factor + offset)
        for face in found
    ]


def _cut_by(box, region, width: int, height: int, schedule: ClipSchedule) -> bool:
    """Whether the box comes near (its size over ClipSchedule.cut_margin_divisor) an edge of the region that is not
    the frame's edge."""
    x1, y1, x2, y2 = region
    bx1, by1, bx2, by2 = (float(v) for v in box)
    margin = max(schedule.cut_margin_px, max(bx2 - bx1, by2 - by1) / schedule.cut_margin_divisor)
    return (
        (x1 > 0 and bx1 <= x1 + margin)
        or (y1 > 0 and by1 <= y1 + margin)
        or (x2 < width and bx2 >= x2 - margin)
        or (y2 < height and by2 >= y2 - margin)
    )


def _clipped(box, width: int, height: int) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = box
    return max(0, int(x1)), max(0, int(y1)), min(width, int(x2) + 1), min(height, int(y2) + 1)


# ---- the motion watch ------------------------------------------------------------------------


@dataclass
class Change:
    """How a frame differs from the one before it: a cut, most of the frame, or where (`changed`, a mask of
    the small grey copy; `search_areas` turns it into the regions to search)."""

    cut: bool = False
    whole_frame: bool = False
    changed: np.ndarray | None = None
    size: tuple[int, int] = (0, 0)  # the frame's width and height


def changes[Frame](
    frames: Iterable[tuple[float, Frame]],
    schedule: ClipSchedule = CLIP_SCHEDULE,
    watching: bool = True,
    watch: Watch = contextlib.nullcontext,
) -> Iterator[tuple[float, Frame, Change]]:
    """Every (time, frame) with how it differs from the frame before; unwatched (an animated image, looked at on
    every frame), none differs. `watch("motion")` is entered around each comparison."""
    previous = None
    for time, frame in frames:
        if not watching:
            yield time, frame, Change()
            continue
        small = _grey(frame, schedule.compare_scale)
        with watch("motion"):
            change = _change(previous, small, frame.shape[1], frame.shape[0], schedule)
        yield time, frame, change
        previous = small


def search_areas(
    change: Change, people: list[PixelBox], schedule: ClipSchedule = CLIP_SCHEDULE
) -> tuple[list[PixelBox], list[PixelBox]]:
    """Where to search a frame between looks (frame pixels): the changed places, grown to hold a head, but for
    those inside `people` (where tracked people already are); and the people within whom something changed."""
    if change.changed is None:
        return [], []
    changed = change.changed.copy()
    for person in people:
        changed[_cells(person, schedule.compare_scale)] = 0
    moved = [person for person in people if change.changed[_cells(person, schedule.compare_scale)].any()]
    return _regions(changed, *change.size, schedule), moved


def _cells(box: PixelBox, small: float) -> tuple[slice, slice]:
    """The small grey copy's cells under a box (frame pixels)."""
    x1, y1, x2, y2 = (max(0, int(v * small)) for v in box)
    return slice(y1, y2 + 1), slice(x1, x2 + 1)


def _change(previous: np.ndarray | None, small: np.ndarray, width: int, height: int, schedule: ClipSchedule) -> Change:
    if previous is None or previous.shape != small.shape:
        return Change()
    if float(cv2.absdiff(previous, small).mean()) >= schedule.cut_level:
        return Change(cut=True, whole_frame=True)
    shifted = _shifted(previous, small, schedule)
    changed = _changed(shifted, small, schedule.changed_level)
    share = float(np.count_nonzero(changed)) / changed.size
    if share > schedule.whole_frame_share:
        return Change(cut=_correlation(shifted, small) < schedule.cut_correlation, whole_frame=True)
    return Change(changed=changed if share else None, size=(width, height))


def _grey(frame: np.ndarray, small: float) -> np.ndarray:
    copy = cv2.resize(frame, None, fx=small, fy=small, interpolation=cv2.INTER_AREA)
    return cv2.GaussianBlur(cv2.cvtColor(copy, cv2.COLOR_BGR2GRAY), (3, 3), 0)


def _shifted(previous: np.ndarray, small: np.ndarray, schedule: ClipSchedule) -> np.ndarray:
    """The previous copy moved by the camera's shift between the two (none when it is not clear)."""
    (dx, dy), response = cv2.phaseCorrelate(np.float32(previous), np.float32(small))
    least = schedule.least_shift_cells
    if response < schedule.least_shift_response or (abs(dx) < least and abs(dy) < least):
        return previous
    shift = np.float32([[1, 0, dx], [0, 1, dy]])
    return cv2.warpAffine(previous, shift, previous.shape[::-1], borderMode=cv2.BORDER_REPLICATE)


def _correlation(previous: np.ndarray, small: np.ndarray) -> float:
    """Pearson correlation of the two copies' grey levels; a flat copy (nothing to compare) correlates with
    nothing: 0."""
    a, b = (np.float32(copy).ravel() for copy in (previous, small))
    a, b = a - a.mean(), b - b.mean()
    scale = float(np.sqrt(np.dot(a, a) * np.dot(b, b)))
    return float(np.dot(a, b)) / scale if scale > 1e-6 else 0.0


def _changed(previous: np.ndarray, small: np.ndarray, level: int) -> np.ndarray:
    mask = (cv2.absdiff(previous, small) >= level).astype(np.uint8)
    return cv2.dilate(cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((2, 2), np.uint8)), np.ones((5, 5), np.uint8))


def _regions(changed: np.ndarray, width: int, height: int, schedule: ClipSchedule) -> list[PixelBox]:
    count, _, stats, _ = cv2.connectedComponentsWithStats(changed, connectivity=8)
    least = schedule.min_region_share * changed.size
    small, growth, margin = schedule.compare_scale, schedule.region_growth, schedule.region_margin_px
    boxes = []
    for x, y, w, h, area in stats[1:count]:
        if area < least:
            continue
        grow_x, grow_y = max(growth * w / small, margin), max(growth * h / small, margin)
        boxes.append(
            (
                max(0, int(x / small - grow_x)),
                max(0, int(y / small - grow_y)),
                min(width, int((x + w) / small + grow_x)),
                min(height, int((y + h) / small + grow_y)),
            )
        )
    return _merged(boxes)


def _merged(boxes: list[PixelBox]) -> list[PixelBox]:
    """Overlapping boxes joined into one, until none overlap."""
    merged = list(boxes)
    joined = True
    while joined:
        joined = False
        for i in range(len(merged)):
            for j in range(i + 1, len(merged)):
                a, b = merged[i], merged[j]
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    merged[i] = (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
                    del merged[j]
                    joined = True
                    break
            if joined:
                break
    return merged
