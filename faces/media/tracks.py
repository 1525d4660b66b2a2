"""Faces over time: which frames are detected, how detections link into tracks, and where a track is
blurred in every frame, detected or not.

A video is detected on a cadence (every DETECT_INTERVAL_S), an animated image on every frame. The
schedule is a function of the frame times alone, so the render pass (and a later `reprocess`, which
never detects) knows which frames were looked at without storing them.

A track covers every frame from the detected frame before its first sighting to the detected frame
after its last one (at least TRACK_PAD_S either side), so a frame between two detections never shows
a face that either neighbour's detection would have blurred. Between two sightings the box is the
hull of both (wherever the face went in between, it went from one to the other); past its ends it
is the end box grown by END_GROWTH on every side.
"""

import bisect
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


def detection_times(frame_times: list[float], every_frame: bool) -> list[float]:
    """The times of the frames the detector looks at: every frame, or the first, then each frame at
    least DETECT_INTERVAL_S after the last one looked at, and always the last frame."""
    if every_frame:
        return list(frame_times)
    chosen = []
    for time in frame_times:
        if not chosen or time - chosen[-1] >= DETECT_INTERVAL_S - 1e-6:
            chosen.append(time)
    if frame_times and chosen[-1] != frame_times[-1]:
        chosen.append(frame_times[-1])
    return chosen


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


def tracks_of(sightings: list[tuple[int, float, Box]], detected: list[float]) -> dict[int, Track]:
    """Each track (track number, time, box per sighting) with its reach in time, from the detection times."""
    grouped: dict[int, list[tuple[float, Box]]] = {}
    for number, time, box in sorted(sightings, key=lambda s: (s[0], s[1])):
        grouped.setdefault(number, []).append((time, box))
    result = {}
    for number, seen in grouped.items():
        times = [time for time, _ in seen]
        before = _neighbour(detected, times[0], -1)
        after = _neighbour(detected, times[-1], +1)
        start = min(times[0] - TRACK_PAD_S, before if before is not None else times[0])
        end = max(times[-1] + TRACK_PAD_S, after if after is not None else times[-1])
        result[number] = Track(times, [box for _, box in seen], start, end)
    return result


def _neighbour(detected: list[float], time: float, direction: int) -> float | None:
    """The detection time just before (-1) or after (+1) `time`, if any."""
    index = bisect.bisect_left(detected, time - 1e-6)
    if direction < 0:
        return detected[index - 1] if index > 0 else None
    index = bisect.bisect_right(detected, time + 1e-6)
    return detected[index] if index < len(detected) else None


def _grown(box: Box) -> Box:
    width, height = box[2] - box[0], box[3] - box[1]
    return box + np.array([-width, -height, width, height]) * END_GROWTH
