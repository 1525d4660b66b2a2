"""What changes between two frames of a video: hard cuts, and the places where something moved.

A video is looked at (detected) five times a second (faces/tracks.py), and tracks cover the frames
between looks. What the looks cannot see is a face that is only there between them: one that comes and
goes within 0.2 s, one hidden on every look frame, one blurred by its own motion on the look frames. Each
of them changes the picture where it is. So every frame between looks is compared with the one before it
on a small grey copy (a quarter of the frame's side): after the camera's own shift is taken out (phase
correlation), the places that changed are the only places a face can have come into view, and only those
are searched, at the look's own scale, but where a person seen in the last 0.2 s is (faces/detection/clips.py:
their face, grown to a body's size): their motion is theirs, and their face is covered by its track.

A hard cut changes the whole picture at once (its grey level, or, in a new layout of the same colours, its
content): it starts a new scene, whose faces are never linked to the
faces of the scene before (tracks.link), and whose first frame is looked at.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from faces.geometry import PixelBox

# The grey copy the frames are compared on: this fraction of the frame's side.
SMALL = 0.25
# A pixel changed when its grey level moved this much (0-255), after a light blur (codec noise).
CHANGED_LEVEL = 20
# A cut: the mean grey difference of the whole copy, without shift, is at least this;
CUT_LEVEL = 45.0
# or more than WHOLE_FRAME_SHARE of it changed and what is there now is not the picture before, moved or lit
# otherwise: their correlation (zero-mean, so a flash or a fade keeps it high) is under this. Two scenes of
# the same colours in another layout (the histogram and the mean level alike) are told apart by it.
CUT_CORRELATION = 0.3
# A changed region smaller than this share of the copy is noise.
MIN_REGION_SHARE = 2e-4
# More of the frame than this changed (a shaky camera the shift did not explain, a flash): the whole frame
# is looked at instead of its parts.
WHOLE_FRAME_SHARE = 0.35
# A region is grown by this share of its size on each side, and at least MARGIN_PX frame pixels: the search
# must see the whole head around a change at its edge.
GROWTH, MARGIN_PX = 0.5, 48


@dataclass
class Change:
    """How a frame differs from the one before it: a cut, most of the frame, or where (`changed`, a mask of
    the small grey copy; `search_areas` turns it into the regions to search)."""

    cut: bool = False
    whole_frame: bool = False
    changed: np.ndarray | None = None
    size: tuple[int, int] = (0, 0)  # the frame's width and height


def changes[Frame](
    frames: Iterable[tuple[float, Frame]], watching: bool = True
) -> Iterator[tuple[float, Frame, Change]]:
    """Every (time, frame) with how it differs from the frame before; unwatched (an animated image, looked at on
    every frame), none differs."""
    previous = None
    for time, frame in frames:
        if not watching:
            yield time, frame, Change()
            continue
        small = _grey(frame)
        yield time, frame, _change(previous, small, frame.shape[1], frame.shape[0])
        previous = small


def search_areas(change: Change, people: list[PixelBox]) -> tuple[list[PixelBox], list[PixelBox]]:
    """Where to search a frame between looks (frame pixels): the changed places, grown to hold a head, but for
    those inside `people` (where tracked people already are); and the people within whom something changed."""
    if change.changed is None:
        return [], []
    changed = change.changed.copy()
    for person in people:
        changed[_cells(person)] = 0
    moved = [person for person in people if change.changed[_cells(person)].any()]
    return _regions(changed, *change.size), moved


def _cells(box: PixelBox) -> tuple[slice, slice]:
    """The small grey copy's cells under a box (frame pixels)."""
    x1, y1, x2, y2 = (max(0, int(v * SMALL)) for v in box)
    return slice(y1, y2 + 1), slice(x1, x2 + 1)


def _change(previous: np.ndarray | None, small: np.ndarray, width: int, height: int) -> Change:
    if previous is None or previous.shape != small.shape:
        return Change()
    if float(cv2.absdiff(previous, small).mean()) >= CUT_LEVEL:
        return Change(cut=True, whole_frame=True)
    shifted = _shifted(previous, small)
    changed = _changed(shifted, small)
    share = float(np.count_nonzero(changed)) / changed.size
    if share > WHOLE_FRAME_SHARE:
        return Change(cut=_correlation(shifted, small) < CUT_CORRELATION, whole_frame=True)
    return Change(changed=changed if share else None, size=(width, height))


def _grey(frame: np.ndarray) -> np.ndarray:
    small = cv2.resize(frame, None, fx=SMALL, fy=SMALL, interpolation=cv2.INTER_AREA)
    return cv2.GaussianBlur(cv2.cvtColor(small, cv2.COLOR_BGR2GRAY), (3, 3), 0)


def _shifted(previous: np.ndarray, small: np.ndarray) -> np.ndarray:
    """The previous copy moved by the camera's shift between the two (none when it is not clear)."""
    (dx, dy), response = cv2.phaseCorrelate(np.float32(previous), np.float32(small))
    if response < 0.1 or (abs(dx) < 0.5 and abs(dy) < 0.5):
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


def _changed(previous: np.ndarray, small: np.ndarray) -> np.ndarray:
    mask = (cv2.absdiff(previous, small) >= CHANGED_LEVEL).astype(np.uint8)
    return cv2.dilate(cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((2, 2), np.uint8)), np.ones((5, 5), np.uint8))


def _regions(changed: np.ndarray, width: int, height: int) -> list[PixelBox]:
    count, _, stats, _ = cv2.connectedComponentsWithStats(changed, connectivity=8)
    least = MIN_REGION_SHARE * changed.size
    boxes = []
    for x, y, w, h, area in stats[1:count]:
        if area < least:
            continue
        grow_x, grow_y = max(GROWTH * w / SMALL, MARGIN_PX), max(GROWTH * h / SMALL, MARGIN_PX)
        boxes.append(
            (
                max(0, int(x / SMALL - grow_x)),
                max(0, int(y / SMALL - grow_y)),
                min(width, int((x + w) / SMALL + grow_x)),
                min(height, int((y + h) / SMALL + grow_y)),
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
