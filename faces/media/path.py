"""The face path of an animated image or a video: detect over time once, match track by track, render
every frame of every file (docs/ARCHITECTURE.md §11).

`reprocess` comes here too, with the faces already stored: it matches and renders again from the
stored tracks and never detects (a track's reach depends on its sightings alone, faces/media/tracks.py).
"""

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np
from django.utils import timezone

from faces.detection_memory import detections_of
from faces.engines import DetectedFace, FaceEngine, resident_engine
from faces.engines.pyramid import Plan, video_frame_plan
from faces.geometry import iou, restored_face_box
from faces.images import MediaKind
from faces.matching import PhotoMatch
from faces.media.animated import AnimatedImage
from faces.media.clip import Clip
from faces.media.motion import Change, MotionWatch
from faces.media.tracks import DETECT_INTERVAL_S, Look, Track, link, scheduled, tracks_of
from faces.media.video import Video
from faces.models import Face, Photo
from faces.recognition import face_row
from faces.rendering.blur import blur_ellipse, blur_rectangle, expanded_face_box, region_box
from faces.rendering.files import PlannedFile, plan_files, publish_files, start_version
from jobqueue.hangup import ensure_session


def open_clip(data: bytes, kind: MediaKind) -> Clip:
    """The clip, its limits checked (faces/media/limits.py) before any frame is decoded."""
    return AnimatedImage(data) if kind is MediaKind.ANIMATED else Video(data)


def detect_and_store_clip(photo: Photo, clip: Clip, data: bytes) -> list[Face]:
    """Detect on the schedule, link into tracks, store one row per detection; stamp faces_detected_at.

    A retry of a try that failed after detecting reuses that detection (faces.detection_memory).
    """
    engine = resident_engine()
    upload = np.frombuffer(data, np.uint8)
    found = detections_of(photo, upload, engine.name, lambda: detect_clip(clip, engine))
    rows = []
    for time, track, face in found:
        row = face_row(photo, face, clip.width, clip.height)
        row.frame_time, row.track = time, track
        rows.append(row)
    Face.objects.bulk_create(rows)
    photo.faces_detected_at = timezone.now()
    photo.save(update_fields=["faces_detected_at"])
    return rows


# The most detector pixels one region between two looks is searched with (its finest level's): a region
# larger than this at a photo's 1.5x is shrunk before it is searched.
REGION_DETECTOR_PIXELS = 1_200_000


def detect_clip(clip: Clip, engine: FaceEngine) -> list[tuple[float, int, DetectedFace]]:
    """(frame time, track, DetectedFace) for every face found: on every frame the schedule looks at, and on
    the frames between, wherever the picture changed where no recent sighting covers it (faces/media/motion.py:
    a face that comes and goes between two looks, or is hidden or blurred on them). Tracks never go on
    across a hard cut."""
    seen: list[tuple[float, DetectedFace]] = []
    changes: dict[float, Change] = {}
    cuts: list[float] = []
    searched: dict[float, list] = {}  # frames searched in parts only: those parts
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    for time, frame, look in scheduled(_watched(clip, changes, cuts), clip.every_frame, lambda time: time in cuts):
        ensure_session()  # a try cut off from its session stops within a frame (jobqueue/hangup.py)
        change = changes.pop(time)
        if look or change.whole_frame:
            plan = None if clip.every_frame else video_frame_plan(clip.width, clip.height, deep=look is Look.DEEP)
            seen += [(time, face) for face in engine.analyze(frame, plan=plan)]
            continue
        people = _people(seen, time)
        regions = change.regions_outside(people)
        seen += [(time, face) for region in regions for face in _analyze_region(engine, frame, region)]
        # Where a sighting here may continue a track: the regions searched, and the people who moved.
        moved = [person for person in people if change.touches(person)]
        searched[time] = [np.array(area) / scale for area in regions + moved]
    sightings = [(time, face.box / scale) for time, face in seen]
    tracks = link(sightings, cuts, searched, embeddings=[face.embedding for _, face in seen])
    return [(time, track, face) for (time, face), track in zip(seen, tracks, strict=True)]


def _watched(clip: Clip, changes: dict[float, Change], cuts: list[float]):
    """The clip's frames; how each differs from the one before goes into `changes` (by frame time), and the
    time of each scene's first frame into `cuts`. An animated image is looked at on every frame: no watch."""
    watch = MotionWatch()
    for time, frame in clip.frames():
        changes[time] = Change() if clip.every_frame else watch.see(frame)
        if changes[time].cut:
            cuts.append(time)
        yield time, frame


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


def _analyze_region(engine: FaceEngine, frame: np.ndarray, region) -> list[DetectedFace]:
    """The faces in one region of a frame, in the frame's pixels. A face the region's edge cuts (only its
    leading part changed) is searched again in its own surroundings, so its sighting is the whole face."""
    height, width = frame.shape[:2]
    found = []
    for face in _search(engine, frame, region):
        if _cut_by(face.box, region, width, height):
            x1, y1, x2, y2 = (float(v) for v in face.box)
            reach = 1.5 * max(x2 - x1, y2 - y1)  # a sliver's height is the face's: its width is not
            around = (x1 - reach, y1 - reach, x2 + reach, y2 + reach)
            whole = _search(engine, frame, _clipped(around, width, height))
            face = max(whole, key=lambda other: iou(face.box, other.box), default=face)
        found.append(face)
    return found


def _search(engine: FaceEngine, frame: np.ndarray, region) -> list[DetectedFace]:
    """One region searched at most at a video frame's scale and within REGION_DETECTOR_PIXELS: a large one (a
    dancing crowd) is shrunk first, so the search between looks stays cheap; its smaller faces are the looks'."""
    x1, y1, x2, y2 = region
    crop = frame[y1:y2, x1:x2]
    factor = min(1.0, math.sqrt(REGION_DETECTOR_PIXELS / (Plan().fine_scale ** 2 * crop.shape[0] * crop.shape[1])))
    if factor < 1.0:
        size = (max(1, round(crop.shape[1] * factor)), max(1, round(crop.shape[0] * factor)))
        crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
    # The edge pass (the crop mirrored past its edges, about three times its pixels) is for faces the frame's
    # edge cuts; one the region's own edge cuts is searched again in its surroundings (_analyze_region).
    on_frame_edge = x1 <= 0 or y1 <= 0 or x2 >= frame.shape[1] or y2 >= frame.shape[0]
    plan = replace(video_frame_plan(crop.shape[1], crop.shape[0]), edge_pass=on_frame_edge)
    found = engine.analyze(np.ascontiguousarray(crop), plan=plan)
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


def render_clip_and_publish(photo: Photo, clip: Clip, match: PhotoMatch | None) -> int:
    """Every file rendered from every frame (the public one always: a clip is never published as
    itself), uploaded, pointed at, published; returns how many files were written."""
    planned = plan_files(photo, match, always=True)
    token = start_version(photo, clip.width, clip.height, clip.kind, clip.duration_ms)
    tracks = clip_tracks(match.faces if match else [], clip)
    regions = [region_box(region, clip.width, clip.height) for region in photo.blur_regions]
    painters = [BlurPainter.of(file, tracks, regions, clip.width, clip.height) for file in planned]
    rendered = clip.render(painters, between_frames=ensure_session)
    return publish_files(photo, planned, ((file.data, file.poster) for file in rendered), clip.extension, token)


def clip_tracks(faces: list[Face], clip: Clip) -> dict[int, Track]:
    """The stored faces' tracks, each sighting's box restored past the frame's edge like a still's."""
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    sightings = [
        (face.track, face.frame_time, np.array(restored_face_box(_box(face), clip.width, clip.height)) / scale)
        for face in faces
    ]
    return tracks_of(sightings)


@dataclass(frozen=True)
class BlurPainter:
    """The blur of one planned file: its blurred tracks where they are at each time, and the regions."""

    tracks: list[Track]
    regions: list
    width: int
    height: int

    @classmethod
    def of(cls, file: PlannedFile, tracks: dict[int, Track], regions: list, width: int, height: int) -> "BlurPainter":
        """The painter of a planned file: the tracks of the faces it blurs."""
        return cls([tracks[number] for number in sorted({face.track for face in file.faces})], regions, width, height)

    def touches(self, time: float) -> bool:
        return bool(self.regions) or any(track.boxes_at(time) for track in self.tracks)

    def __call__(self, time: float, frame: np.ndarray) -> None:
        for track in self.tracks:
            for box in track.boxes_at(time):
                x1, y1, x2, y2 = (float(v) for v in box)
                blur_ellipse(frame, expanded_face_box((x1, y1, x2 - x1, y2 - y1), self.width, self.height))
        for region in self.regions:
            blur_rectangle(frame, region)


def _box(face: Face) -> tuple[float, float, float, float]:
    return face.box_x, face.box_y, face.box_w, face.box_h
