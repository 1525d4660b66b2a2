"""The blur of one file, frame by frame: what a still or a clip (faces/media/) paints onto each frame, and where
a clip's track is blurred at every time, looked at or not.

A video is looked at so that two looks are never more than the look interval apart (faces.tracks.Tracking,
faces/detection/clips.py). So every frame that is not looked at lies less than that interval from a look on each
side, and a track that reaches Painting.track_pad_s (more than that) past its first and last sightings covers every
frame that either neighbouring look would have blurred, whatever the frame times (variable frame rates included),
without storing the schedule.

Between two sightings the face is blurred along its path from one to the other; past its ends it is
carried on at its track's velocity, and the boxes grow with the time from the sighting (faces enter
and leave at a walk or faster, between two looks).

The blur cannot be undone (docs/ARCHITECTURE.md §7). Downsampling to a few cells discards the face's
information; upsampling and a box blur on top remove the blocks' edges, which would otherwise keep a coarse
shape. A single light Gaussian would be partially invertible. Painting.blur_cells is the strength: chosen so that
a blurred DNP face no longer matches its owner's reference at the `blur` threshold (tests/test_rendering.py proves
it with the real buffalo_s engine).

How much is blurred, how hard, and how far a track reaches is one Painting (PAINTING), handed to each painter and
track; a bench varies it with `dataclasses.replace` and passes it in.
"""

import bisect
import math
from dataclasses import dataclass

import cv2
import numpy as np

from faces.geometry import FractionBox, FractionCorners, restored_face_box
from faces.models import Face
from faces.tracks import TRACKING, Seen

# When a file paints anything, as (from, to) times: always, for a still's faces and for blur regions.
ALWAYS = (-math.inf, math.inf)


@dataclass(frozen=True)
class Painting:
    """How a file's blur is painted: how much of a face it covers, how hard, and where a clip's track is blurred
    between and past its sightings (docs/ARCHITECTURE.md §7, §11)."""

    # A detection box is tight: grown by this fraction so hair, ears, jaw and neckline are covered.
    face_expansion: float = 0.35
    # The strength: the short side of a blurred area is reduced to this many cells before upsampling.
    blur_cells: int = 6
    # The box blur on top, as a fraction of the area's short side: it removes the cells' edges.
    box_blur_fraction: float = 0.25
    # A track reaches this far past its first and last sightings, in seconds: more than the look interval.
    track_pad_s: float = 0.25
    # Past a track's ends the face is carried on at the track's last velocity, with this many face sizes a second
    # more on every side for a change of pace.
    moving_slack: float = 1.0
    # A face seen once only may have gone this many face sizes a second any way.
    lone_speed: float = 10.0
    # Past an end, a box also grows by this many face sizes on every side.
    end_growth: float = 0.25
    # A face's path between two boxes is blurred in boxes this many face widths apart.
    path_step: float = 0.25


PAINTING = Painting()


@dataclass(frozen=True)
class Track:
    """One track's sightings, in time order, and how far it reaches before and after them."""

    times: list[float]
    boxes: list[FractionCorners]
    painting: Painting

    @property
    def start(self) -> float:
        return self.times[0] - self.painting.track_pad_s

    @property
    def end(self) -> float:
        return self.times[-1] + self.painting.track_pad_s

    def boxes_at(self, time: float) -> list[FractionCorners]:
        """Where to blur at `time` (an ellipse in each box): a sighting's box; between two sightings,
        the face's path from one to the other; past an end, where it may have come from or gone."""
        if time < self.start - 1e-6 or time > self.end + 1e-6:
            return []
        after = bisect.bisect_left(self.times, time - 1e-6)
        if after < len(self.times) and abs(self.times[after] - time) <= 1e-6:
            return [self.boxes[after]]
        last = len(self.times) - 1
        if after == 0:
            return self._beyond(0, 1, time)
        if after > last:
            return self._beyond(last, last - 1, time)
        between = self._path(self.boxes[after - 1], self.boxes[after])
        if self.times[after] - self.times[after - 1] <= TRACKING.look_interval_s + 1e-6:
            return between
        # Looks in between missed the face (it was hidden, or gone and back): it may have left from
        # one sighting and come back to the other by any way, so both ends reach into the gap.
        return between + self._beyond(after - 1, after - 2, time) + self._beyond(after, after + 1, time)

    def _beyond(self, end: int, inner: int, time: float) -> list[FractionCorners]:
        """Before or after the sighting `end` (with `inner` the one next to it inside the track, if
        any): where the face may have come from, or gone."""
        box, seconds, painting = self.boxes[end], abs(time - self.times[end]), self.painting
        if not 0 <= inner < len(self.times):
            return [_grown(box, painting.end_growth + painting.lone_speed * seconds)]
        velocity = (box - self.boxes[inner]) / (self.times[end] - self.times[inner])
        carried = box + velocity * (time - self.times[end])
        return [
            _grown(step, painting.end_growth + painting.moving_slack * seconds) for step in self._path(box, carried)
        ]

    def _path(self, a: FractionCorners, b: FractionCorners) -> list[FractionCorners]:
        """Boxes from `a` to `b`, the painting's path_step face widths apart: their ellipses cover every place
        between (one ellipse in the hull of both would leave the ends of a long stride uncovered)."""
        width = min(a[2] - a[0], b[2] - b[0])
        stride = float(np.linalg.norm((b[:2] + b[2:]) / 2 - (a[:2] + a[2:]) / 2))
        steps = max(1, math.ceil(stride / (self.painting.path_step * width))) if width > 0 else 1
        return [a + (b - a) * (step / steps) for step in range(steps + 1)]


def tracks_of(sightings: list[tuple[int, float, FractionCorners]], painting: Painting = PAINTING) -> dict[int, Track]:
    """Each track, from (track number, time, box) per sighting, reaching the painting's track_pad_s past both ends."""
    grouped: dict[int, list[Seen]] = {}
    for number, time, box in sorted(sightings, key=lambda s: (s[0], s[1])):
        grouped.setdefault(number, []).append((time, box))
    return {
        number: Track([time for time, _ in seen], [box for _, box in seen], painting)
        for number, seen in grouped.items()
    }


def _grown(box: FractionCorners, sizes: float) -> FractionCorners:
    """`box` grown by `sizes` face sizes on every side."""
    width, height = box[2] - box[0], box[3] - box[1]
    return box + np.array([-width, -height, width, height]) * sizes


@dataclass(frozen=True)
class BlurPainter:
    """The blur of one planned file: an ellipse over each face it blurs (a still's where it was stored, a
    clip's tracks where they are at each time), then the regions. `spans`: the times it paints at (a frame
    outside them is encoded as decoded)."""

    tracks: list[Track]
    still_faces: list[FractionBox]
    regions: list
    width: int
    height: int
    spans: list[tuple[float, float]]
    painting: Painting

    @classmethod
    def of(
        cls, faces: list[Face], tracks: dict[int, Track], regions: list, width: int, height: int, painting: Painting
    ) -> "BlurPainter":
        """A clip's file: the tracks of the faces it blurs."""
        chosen = [tracks[number] for number in sorted({face.track for face in faces})]
        spans = [ALWAYS] if regions else [(track.start - 1e-6, track.end + 1e-6) for track in chosen]
        return cls(chosen, [], regions, width, height, spans, painting)

    @classmethod
    def of_still(cls, faces: list[Face], regions: list, width: int, height: int, painting: Painting) -> "BlurPainter":
        """A still's file: the faces it blurs, where they were stored."""
        spans = [ALWAYS] if faces or regions else []
        return cls([], [_box(face) for face in faces], regions, width, height, spans, painting)

    def __call__(self, time: float, frame: np.ndarray) -> None:
        for stroke in self.strokes(time):
            stroke.paint(frame)

    def strokes(self, time: float) -> list["Stroke"]:
        """What it paints at `time`, in order: an ellipse over each face, then the regions."""
        faces = self.still_faces + _track_faces(self.tracks, time)
        return [face_stroke(box, self.width, self.height, self.painting) for box in faces] + [
            Stroke(region, False, self.painting) for region in self.regions
        ]


@dataclass(frozen=True)
class Stroke:
    """One area of a frame blurred: the ellipse inscribed in `box` (which may overhang the frame), or the rectangle
    `box`, in the frame's pixels. It reads and writes only `reach`, its part inside the frame, so strokes whose
    reaches are apart can be painted apart, each on a patch of the frame (faces/media/video.py)."""

    box: tuple[int, int, int, int]
    ellipse: bool
    painting: Painting

    def reach(self, width: int, height: int) -> tuple[int, int, int, int]:
        return _clip(*self.box, width, height)

    def paint(self, image: np.ndarray, origin: tuple[int, int] = (0, 0)) -> None:
        """Blur it, in place, into `image`: the frame, or a patch of it whose top left corner is at `origin` and
        which holds the stroke's whole reach."""
        x, y = origin
        x1, y1, x2, y2 = self.box
        shifted = (x1 - x, y1 - y, x2 - x, y2 - y)
        (blur_ellipse if self.ellipse else blur_rectangle)(image, shifted, self.painting)


def painters_of(
    blurred: list[list[Face]], faces: list[Face], regions: list, width: int, height: int, painting: Painting = PAINTING
) -> list:
    """One painter per file, each blurring its list of `blurred` faces: a still's where they were stored, a
    clip's (faces with a track) along their tracks, made from all the photo's `faces`; and the blur regions
    (pixel boxes) in every file."""
    if not faces or faces[0].track is None:
        return [BlurPainter.of_still(chosen, regions, width, height, painting) for chosen in blurred]
    tracks = clip_tracks(faces, width, height, painting)
    return [BlurPainter.of(chosen, tracks, regions, width, height, painting) for chosen in blurred]


def clip_tracks(faces: list[Face], width: int, height: int, painting: Painting = PAINTING) -> dict[int, Track]:
    """The stored faces' tracks, each sighting's box restored past the frame's edge like a still's."""
    scale = np.array([width, height] * 2, dtype=np.float64)
    sightings = [
        (face.track, face.frame_time, np.array(restored_face_box(_box(face), width, height)) / scale) for face in faces
    ]
    return tracks_of(sightings, painting)


def _track_faces(tracks: list[Track], time: float) -> list[FractionBox]:
    """Where the tracks' faces are at `time`, as (x, y, w, h) fractions."""
    return [(x1, y1, x2 - x1, y2 - y1) for track in tracks for x1, y1, x2, y2 in map(_floats, track.boxes_at(time))]


def _floats(box: FractionCorners) -> tuple[float, float, float, float]:
    return tuple(float(v) for v in box)


def _box(face: Face) -> FractionBox:
    return face.box_x, face.box_y, face.box_w, face.box_h


def expanded_face_box(
    box: tuple[float, float, float, float], width: int, height: int, painting: Painting = PAINTING
) -> tuple[int, int, int, int]:
    """The face box (fractions x, y, w, h) grown by the painting's face_expansion about its centre, in pixels, NOT
    clipped.

    A face cut by the image edge keeps its whole ellipse: clipping first would shrink the
    expansion to nothing on the cut side and narrow the ellipse to a point at the border.
    Its stored box is only the visible part, so it is first restored past that edge to a
    face's proportions (faces/geometry.py).
    """
    x1, y1, x2, y2 = restored_face_box(box, width, height)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    grown = 1 + painting.face_expansion
    half_w, half_h = (x2 - x1) * grown / 2, (y2 - y1) * grown / 2
    return (
        int(np.floor(cx - half_w)),
        int(np.floor(cy - half_h)),
        int(np.ceil(cx + half_w)),
        int(np.ceil(cy + half_h)),
    )


def region_box(region: dict, width: int, height: int) -> tuple[int, int, int, int]:
    """A user-drawn blur region: exactly the rectangle drawn."""
    x, y, w, h = (float(region[k]) for k in ("x", "y", "w", "h"))
    return _clip(x * width, y * height, (x + w) * width, (y + h) * height, width, height)


def face_stroke(
    box: tuple[float, float, float, float], width: int, height: int, painting: Painting = PAINTING
) -> Stroke:
    """The blur of the face `box` (x, y, w, h fractions of the width x height image): an ellipse over it, grown by
    the painting's face_expansion and restored past the image's edge (expanded_face_box)."""
    return Stroke(expanded_face_box(box, width, height, painting), True, painting)


def blur_ellipse(image: np.ndarray, box: tuple[int, int, int, int], painting: Painting = PAINTING) -> None:
    """Blur, in place, the part inside the image of the ellipse inscribed in `box` (which may overhang the image).

    The strength comes from the whole ellipse, not from the visible part: a thin strip of a
    face at the border is destroyed as hard as the face would be.
    """
    x1, y1, x2, y2 = box
    height, width = image.shape[:2]
    cx1, cy1, cx2, cy2 = _clip(x1, y1, x2, y2, width, height)
    if x2 - x1 < 2 or y2 - y1 < 2 or cx2 <= cx1 or cy2 <= cy1:
        return
    roi = image[cy1:cy2, cx1:cx2]
    mask = np.zeros(roi.shape[:2], dtype=np.uint8)
    centre = ((x1 + x2) / 2 - cx1, (y1 + y2) / 2 - cy1)
    cv2.ellipse(mask, (centre, (x2 - x1, y2 - y1), 0), 255, -1)
    # OpenCV's masked copy writes into the frame's own pixels, without numpy's boolean mask of every channel.
    cv2.copyTo(destroyed(roi, min(x2 - x1, y2 - y1), painting), mask, roi)


def blur_rectangle(image: np.ndarray, box: tuple[int, int, int, int], painting: Painting = PAINTING) -> None:
    x1, y1, x2, y2 = box
    if x2 - x1 < 2 or y2 - y1 < 2:
        return
    roi = image[y1:y2, x1:x2]
    roi[...] = destroyed(roi, min(x2 - x1, y2 - y1), painting)


def destroyed(roi: np.ndarray, strength_side: int, painting: Painting = PAINTING) -> np.ndarray:
    """Downsample hard, upsample, box-blur: the region with its detail gone.

    Cells and kernel are sized from `strength_side`, the short side of the whole region
    being blurred, even where only part of it lies on the image.
    """
    height, width = roi.shape[:2]
    cell = max(1.0, strength_side / painting.blur_cells)
    small = cv2.resize(roi, (max(1, round(width / cell)), max(1, round(height / cell))), interpolation=cv2.INTER_AREA)
    smooth = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
    kernel = max(3, int(strength_side * painting.box_blur_fraction) | 1)
    return cv2.blur(smooth, (kernel, kernel))


def _clip(x1, y1, x2, y2, width, height) -> tuple[int, int, int, int]:
    return (
        int(np.clip(np.floor(x1), 0, width)),
        int(np.clip(np.floor(y1), 0, height)),
        int(np.clip(np.ceil(x2), 0, width)),
        int(np.clip(np.ceil(y2), 0, height)),
    )
