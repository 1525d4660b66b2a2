"""A clip's one detection pass: which frames are looked at (the schedule), where the picture changed between
looks (faces/detection/motion.py), the faces found, linked into tracks (faces/tracks.py) (docs/ARCHITECTURE.md
§11).

An animated image is looked at on every frame; a video on a cadence such that two looks are never more than
DETECT_INTERVAL_S apart (unless two consecutive frames are), so a track that reaches Painting.track_pad_s past its ends
covers every frame between (faces/rendering/painters.py).

`reprocess` never comes here: it matches and renders again from the stored tracks (a track's reach
depends on its sightings alone).
"""

import math
from collections.abc import Iterable, Iterator
from dataclasses import replace

import cv2
import numpy as np

from faces import thresholds
from faces.checkpoint import Checkpoint, never_stop
from faces.detection import motion
from faces.engines import DetectedFace, FaceEngine
from faces.engines.pyramid import Plan, video_frame_plan
from faces.geometry import iou
from faces.media.clip import Clip
from faces.tracks import DETECT_INTERVAL_S, link

# The most detector pixels one region between two looks is searched with (its finest level's): a region
# larger than this at its frame's look scale is shrunk before it is searched.
REGION_DETECTOR_PIXELS = 1_200_000


def detect_clip(
    clip: Clip, engine: FaceEngine, checkpoint: Checkpoint = never_stop
) -> list[tuple[float, int, DetectedFace]]:
    """(frame time, track, DetectedFace) for every face found: on every frame the schedule looks at, and on
    the frames between, wherever the picture changed where no recent sighting covers it (faces/detection/motion.py:
    a face that comes and goes between two looks, or is hidden or blurred on them). Tracks never go on
    across a hard cut. `checkpoint` is called before each frame and within each look (it may raise to stop the
    pass)."""
    seen: list[tuple[float, DetectedFace]] = []
    cuts: list[float] = []
    searched: dict[float, list] = {}  # frames searched in parts only: those parts
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    watched = motion.changes(clip.frames(), watching=not clip.every_frame)
    # One plan for the clip's looks and the places searched between them: the frame's size decides it.
    plan = None if clip.every_frame else video_frame_plan(clip.width, clip.height)
    for time, (frame, change), look in scheduled(((t, (f, c), c.cut) for t, f, c in watched), clip.every_frame):
        checkpoint()  # a try cut off from its session, or stopped for privacy work, stops within a frame
        if change.cut:
            cuts.append(time)
        if look or change.whole_frame:
            seen += [(time, face) for face in engine.analyze(frame, plan=plan, checkpoint=checkpoint)]
            continue
        # Where a sighting here may continue a track: the regions searched, and the people who moved.
        regions, moved = motion.search_areas(change, _people(seen, time))
        seen += [(time, face) for area in regions for face in _analyze_region(engine, frame, area, plan, checkpoint)]
        searched[time] = [np.array(area) / scale for area in regions + moved]
    sightings = [(time, face.box / scale) for time, face in seen]
    clear = _clearly_seen([face for _, face in seen], engine.name, clip.width, clip.height)
    tracks = link(sightings, cuts, searched, embeddings=[face.embedding for _, face in seen], clear=clear)
    return [(time, track, face) for (time, face), track in zip(seen, tracks, strict=True)]


def scheduled[Frame](
    frames: Iterable[tuple[float, Frame, bool]], every_frame: bool
) -> Iterator[tuple[float, Frame, bool]]:
    """Every (time, frame, cut: a cut right before it) with whether the detector looks at the frame: at every
    frame, or at the first, the last, each frame whose skipping would leave more than DETECT_INTERVAL_S between
    two looks, and the last and first frames of a scene around a cut. One frame of look-ahead, so a video is
    still streamed."""
    last_look, pending = None, None
    for time, frame, cut in frames:
        if pending is not None:
            look = every_frame or cut or last_look is None or time - last_look > DETECT_INTERVAL_S + 1e-6
            last_look = pending[0] if look else last_look
            yield (*pending, look)
        last_look = None if cut else last_look
        pending = (time, frame)
    if pending is not None:
        yield (*pending, True)


def _clearly_seen(faces: list[DetectedFace], engine: str, width: int, height: int) -> list[bool]:
    """Which faces are witnesses of who they are, for linking (faces.tracks.LINK_AGREEMENT): seen well
    (faces.thresholds) and not cut by the frame's edge, whose part of a face embeds unlike the whole face."""
    return thresholds.judge_detected(engine, faces, width, height).clear.tolist()


def _people(seen: list[tuple[float, DetectedFace]], time: float) -> list:
    """Where the people seen in the last DETECT_INTERVAL_S are: each face box grown to a body's (a face
    width on each side, half a face height above, three below). Their own motion needs no search: their
    faces are covered by their tracks."""
    people = []
    for then, face in reversed(seen):
        if time - then > DETECT_INTERVAL_S:
            break
        x1, y1, x2, y2 = (float(v) for v in face.box)
        width, height = x2 - x1, y2 - y1
        people.append((x1 - width, y1 - height / 2, x2 + width, y2 + 3 * height))
    return people


def _analyze_region(
    engine: FaceEngine, frame: np.ndarray, region, look: Plan, checkpoint: Checkpoint
) -> list[DetectedFace]:
    """The faces in one region of a frame, on its looks' plan `look`, in the frame's pixels. A face the region's
    edge cuts (only its leading part changed) is searched again in its own surroundings, so its sighting is the
    whole face."""
    height, width = frame.shape[:2]
    found = []
    for face in _search(engine, frame, region, look, checkpoint):
        if _cut_by(face.box, region, width, height):
            x1, y1, x2, y2 = (float(v) for v in face.box)
            reach = 1.5 * max(x2 - x1, y2 - y1)  # a sliver's height is the face's: its width is not
            around = (x1 - reach, y1 - reach, x2 + reach, y2 + reach)
            whole = _search(engine, frame, _clipped(around, width, height), look, checkpoint)
            face = max(whole, key=lambda other: iou(face.box, other.box), default=face)
        found.append(face)
    return found


def _search(engine: FaceEngine, frame: np.ndarray, region, look: Plan, checkpoint: Checkpoint) -> list[DetectedFace]:
    """One region searched on its frame's looks' plan, at their scale (a face that comes into view there is as
    small as the looks find) and within REGION_DETECTOR_PIXELS: a large one (a dancing crowd) is shrunk first, so
    the search between looks stays cheap; its smaller faces are the looks'."""
    x1, y1, x2, y2 = region
    crop = frame[y1:y2, x1:x2]
    factor = min(1.0, math.sqrt(REGION_DETECTOR_PIXELS / (look.fine_scale**2 * crop.shape[0] * crop.shape[1])))
    if factor < 1.0:
        size = (max(1, round(crop.shape[1] * factor)), max(1, round(crop.shape[0] * factor)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
    # The edge pass (the crop mirrored past its edges, about three times its pixels) is for faces the frame's
    # edge cuts; one the region's own edge cuts is searched again in its surroundings (_analyze_region).
    on_frame_edge = x1 <= 0 or y1 <= 0 or x2 >= frame.shape[1] or y2 >= frame.shape[0]
    plan = replace(look, edge_pass=on_frame_edge)
    found = engine.analyze(np.ascontiguousarray(crop), plan=plan, checkpoint=checkpoint)
    offset = np.array([x1, y1], dtype=np.float32)
    return [
        replace(face, box=face.box / factor + np.tile(offset, 2), landmarks=face.landmarks / factor + offset)
        for face in found
    ]


def _cut_by(box, region, width: int, height: int) -> bool:
    """Whether the box comes near (a sixth of its size) an edge of the region that is not the frame's edge:
    the detector stops a little short of an edge that cuts a face."""
    x1, y1, x2, y2 = region
    bx1, by1, bx2, by2 = (float(v) for v in box)
    margin = max(2.0, max(bx2 - bx1, by2 - by1) / 6)
    return (
        (x1 > 0 and bx1 <= x1 + margin)
        or (y1 > 0 and by1 <= y1 + margin)
        or (x2 < width and bx2 >= x2 - margin)
        or (y2 < height and by2 >= y2 - margin)
    )


def _clipped(box, width: int, height: int) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = box
    return max(0, int(x1)), max(0, int(y1)), min(width, int(x2) + 1), min(height, int(y2) + 1)
