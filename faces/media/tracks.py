"""Faces over time: which frames are detected, how detections link into tracks, and where a track is
blurred in every frame, detected or not.

An animated image is detected on every frame; a video on a cadence such that two detected frames are
never more than DETECT_INTERVAL_S apart (unless two consecutive frames are). So every frame that is
not detected lies less than DETECT_INTERVAL_S from a detected frame on each side, and a track that
reaches TRACK_PAD_S (more than that) past its first and last sightings covers every frame that
either neighbouring detection would have blurred, whatever the frame times (variable frame rates
included), without storing the schedule.

Between two sightings the box is the hull of both (wherever the face went in between, it went from
one to the other); past its ends it is the end box grown by END_GROWTH on every side.
"""

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

DETECT_INTERVAL_S = 0.2
TRACK_PAD_S = 0.25
# A face missed by this many seconds of detections in a row still continues its track.
MAX_GAP_S = 0.6
# Two sightings one detection apart are the same face when their centres are at most this many
# face widths apart (per DETECT_INTERVAL_S) and their widths within SIZE_RATIO of each other.
LINK_DISTANCE = 1.0
SIZE_RATIO = 2.0
END_GROWTH = 0.5

Box = np.ndarray  # (4,) x1, y1, x2, y2, fractions of the frame


def scheduled[Frame](frames: Iterable[tuple[float, Frame]], every_frame: bool) -> Iterator[tuple[float, Frame]]:
    """The (time, frame) pairs the detector looks at: every frame, or the first, the last, and each
    frame whose skipping would leave more than DETECT_INTERVAL_S between two looks (one frame of
    look-ahead, so a video is still streamed)."""
    last_look, pending = None, None
    for time, frame in frames:
        if pending is not None and (every_frame or last_look is None or time - last_look > DETECT_INTERVAL_S + 1e-6):
            yield pending
            last_look = pending[0]
        pending = (time, frame)
    if pending is not None:
        yield pending


def link(sightings: list[tuple[float, Box]]) -> list[int]:
    """A track number for each sighting (time, box), sightings in time order; greedy, nearest first."""
    tracks: list[tuple[float, Box]] = []  # per track: its last sighting
    by_time: dict[float, list[int]] = {}
    for index, (time, _) in enumerate(sightings):
        by_time.setdefault(time, []).append(index)
    result = [0] * len(sightings)
    for time, indices in by_time.items():
        open_tracks = [t for t, (last, _) in enumerate(tracks) if 0 < time - last <= MAX_GAP_S + 1e-6]
        pairs = sorted(
            (cost, index, track)
            for index in indices
            for track in open_tracks
            if (cost := _link_cost(tracks[track], (time, sightings[index][1]))) is not None
        )
        taken_sightings, taken_tracks = set(), set()
        for _, index, track in pairs:
            if index in taken_sightings or track in taken_tracks:
                continue
            taken_sightings.add(index)
            taken_tracks.add(track)
            result[index] = track
        for index in indices:
            if index not in taken_sightings:
                result[index] = len(tracks)
                tracks.append((time, sightings[index][1]))
        for index in taken_sightings:
            tracks[result[index]] = (time, sightings[index][1])
    return result


def _link_cost(last: tuple[float, Box], now: tuple[float, Box]) -> float | None:
    (then, a), (time, b) = last, now
    width_a, width_b = a[2] - a[0], b[2] - b[0]
    if min(width_a, width_b) <= 0 or max(width_a, width_b) > SIZE_RATIO * min(width_a, width_b):
        return None
    centre_a, centre_b = (a[:2] + a[2:]) / 2, (b[:2] + b[2:]) / 2
    steps = max(1.0, (time - then) / DETECT_INTERVAL_S)
    cost = float(np.linalg.norm(centre_b - centre_a)) / max(width_a, width_b) / steps
    return cost if cost <= LINK_DISTANCE else None


@dataclass(frozen=True)
class Track:
    """One track's sightings, in time order, and how far it reaches before and after them."""

    times: list[float]
    boxes: list[Box]
    start: float
    end: float

    def box_at(self, time: float) -> Box | None:
        """Where to blur at `time`: a sighting's box, the hull of the two around it, or a grown end box."""
        if time < self.start - 1e-6 or time > self.end + 1e-6:
            return None
        after = bisect.bisect_left(self.times, time - 1e-6)
        if after < len(self.times) and abs(self.times[after] - time) <= 1e-6:
            return self.boxes[after]
        if after == 0:
            return _grown(self.boxes[0])
        if after == len(self.times):
            return _grown(self.boxes[-1])
        a, b = self.boxes[after - 1], self.boxes[after]
        return np.concatenate([np.minimum(a[:2], b[:2]), np.maximum(a[2:], b[2:])])


def tracks_of(sightings: list[tuple[int, float, Box]]) -> dict[int, Track]:
    """Each track, from (track number, time, box) per sighting, reaching TRACK_PAD_S past both ends."""
    grouped: dict[int, list[tuple[float, Box]]] = {}
    for number, time, box in sorted(sightings, key=lambda s: (s[0], s[1])):
        grouped.setdefault(number, []).append((time, box))
    return {
        number: Track(
            [time for time, _ in seen], [box for _, box in seen], seen[0][0] - TRACK_PAD_S, seen[-1][0] + TRACK_PAD_S
        )
        for number, seen in grouped.items()
    }


def _grown(box: Box) -> Box:
    width, height = box[2] - box[0], box[3] - box[1]
    return box + np.array([-width, -height, width, height]) * END_GROWTH
