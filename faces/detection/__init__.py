"""A photo's one detection pass, still or clip: which frames are looked at and where, every face found stored as
a row (docs/ARCHITECTURE.md §6, §11). A still is searched whole at once; a clip on its schedule and between
looks where the picture changed (faces/detection/clips.py), its sightings linked into tracks.

What this process remembers, so that a try run again does not detect again. A try that fails after
detecting rolls its face rows back with everything else, and the retry (same message, same process, seconds
later) would run the detector again: 1.8 s for a 12 MP photo (docs/MEASUREMENTS.md, "Pipeline cost"), about
10 s for 48 MP (the whole job: "The privacy lane" there), minutes for a long clip. A try stopped half-way for
privacy work (jobqueue/privacy_lane.py) would start its detection over. So this process remembers, per upload
(keyed by the photo, its upload key, the engine and a digest of the upload's bytes, so a replaced upload is
detected afresh):

- what the whole detection found, once it finished: a retry reuses it;
- every look of the engine on the way (a clip's frames and changed places: `RememberedLooks`):
  a try run again after a preemption replays its frames and runs the detector only where it had
  not looked yet.

Only this process remembers: a retry in another process, or after a restart, detects again.
"""

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from faces.checkpoint import Checkpoint, never_stop
from faces.detection.clips import detect_clip
from faces.engines import DetectedFace, FaceEngine
from faces.media import Media, Still
from faces.models import Face, Photo

# (frame time, track, face) of each face found; a still's have no time and no track.
Sighting = tuple[float | None, int | None, DetectedFace]


def detect_and_store(photo: Photo, media: Media, engine: FaceEngine, checkpoint: Checkpoint = never_stop) -> list[Face]:
    """Detect once, store every face with fractions of the displayed picture (a clip's with its frame time
    and track), stamp faces_detected_at; returns the stored rows, for the stages after. `checkpoint` is the try's: a
    try cut off from its session, or stopped for privacy work, stops within a tile or a frame.

    A retry of a try that failed after detecting reuses that detection, and a try stopped half-way for privacy
    work reuses the looks it took (`RememberedLooks`).
    """
    looks = remembered_looks(photo, media.data, engine)
    if looks.found is None:
        looks.found = sightings(media, looks, checkpoint)
    rows = [face_row(photo, face, media.width, media.height, time, track) for time, track, face in looks.found]
    Face.objects.bulk_create(rows)
    photo.faces_detected_at = timezone.now()
    photo.save(update_fields=["faces_detected_at"])
    # In the order a read of the photo's faces gives (faces/people.py, match_of): the same match either way.
    return sorted(rows, key=lambda face: face.id)


def sightings(media: Media, engine: FaceEngine, checkpoint: Checkpoint) -> list[Sighting]:
    """Every face of the upload: a still's whole picture at once (`checkpoint` between the detector's tiles: a
    48 MP photo takes about 10 s), a clip's frames as its schedule says."""
    if isinstance(media, Still):
        return [(None, None, face) for face in engine.analyze(media.image, checkpoint=checkpoint)]
    return detect_clip(media, engine, checkpoint)


def face_row(
    photo: Photo,
    found: DetectedFace,
    width: int,
    height: int,
    frame_time: float | None = None,
    track: int | None = None,
) -> Face:
    scale = np.array([width, height], dtype=np.float64)
    box = np.clip(found.box.reshape(2, 2) / scale, 0.0, 1.0)
    landmarks = np.clip(found.landmarks / scale, 0.0, 1.0)
    return Face(
        photo=photo,
        event_id=photo.event_id,
        box_x=float(box[0, 0]),
        box_y=float(box[0, 1]),
        box_w=float(box[1, 0] - box[0, 0]),
        box_h=float(box[1, 1] - box[0, 1]),
        landmarks=np.round(landmarks, 6).tolist(),
        det_score=float(found.score),
        embedding=found.embedding,
        engine=found.engine,
        frame_time=frame_time,
        track=track,
        embedding_norm=found.embedding_norm,
    )


@dataclass(frozen=True)
class LookMemory:
    """What this process remembers of its detections, so that a try run again does not detect again."""

    # Uploads remembered: a retry comes right after its failed try, so a few are enough, and bound the memory.
    uploads: int = 4
    # A look is known by a digest of every this-many-th pixel of every this-many-th row (and the image's shape):
    # frames of one clip differ there, and a 4K frame hashes in well under a millisecond.
    digest_step: int = 4


LOOK_MEMORY = LookMemory()


class RememberedLooks:
    """An engine whose `analyze` answers from memory what it already answered for this upload; `found` is
    what the whole detection found, once it finished (None until then)."""

    def __init__(self, engine, digest_step: int):
        self._engine, self._looks = engine, {}
        self._digest_step = digest_step
        self.name = engine.name
        self.found: list | None = None

    def analyze(self, image: np.ndarray, **options) -> list:
        asked = {name: value for name, value in options.items() if name != "checkpoint"}
        step = self._digest_step
        sample = np.ascontiguousarray(image[::step, ::step])
        key = (_digest(sample), image.shape, tuple(sorted(asked.items())))
        if key not in self._looks:
            self._looks[key] = self._engine.analyze(image, **options)
        return self._looks[key]


_remembered: OrderedDict[tuple, RememberedLooks] = OrderedDict()


def remembered_looks(photo, data: bytes, engine, memory: LookMemory = LOOK_MEMORY) -> RememberedLooks:
    """`engine` with this process's memory of the photo's upload `data`: the looks it already took, and what
    the whole detection found if it finished."""
    key = (photo.id, photo.upload_key, engine.name, _digest(np.frombuffer(data, np.uint8)))
    looks = _remembered.setdefault(key, RememberedLooks(engine, memory.digest_step))
    _remembered.move_to_end(key)
    while len(_remembered) > memory.uploads:
        _remembered.popitem(last=False)
    return looks


def _digest(pixels: np.ndarray) -> bytes:
    return hashlib.blake2b(pixels.data, digest_size=16).digest()
