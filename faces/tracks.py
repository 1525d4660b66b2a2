"""How a clip's sightings link into tracks: one track per person, across the frames the detection looked at
(faces/detection/clips.py); where a track is blurred between and past its sightings is rendering's
(faces/rendering/painters.py).
"""

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from faces.geometry import FractionCorners

# A face seen at a time: (seconds, where).
Seen = tuple[float, FractionCorners]

# Two looks at a video are never further apart than this (faces/detection/clips.py, `scheduled`).
DETECT_INTERVAL_S = 0.2
# A face missed by this many seconds of detections in a row still continues its track.
MAX_GAP_S = 0.6
# Two sightings may be the same face when its centre moved at most LINK_SPEED face widths a second
# (over at least one interval) and their widths are within SIZE_RATIO of each other. Among those, a
# face is linked to the one that looks most like it, nearness second: a wrong link is not harmless.
# Between its two sightings a track is blurred along one path, so linking a face to its neighbour's
# next sighting (a group walking a face's width in a fifth of a second) leaves both faces' own paths
# bare. LIKENESS_WEIGHT is what one unit of embedding distance (1 - cosine) costs in face widths a
# second: the same face, a look later, is far more alike than any neighbour.
LINK_SPEED = 30.0
SIZE_RATIO = 2.0
LIKENESS_WEIGHT = 30.0
# Over the real time between two sightings (however close), no face moves faster than JUMP_SPEED face widths
# a second: 3 widths from one frame to the next at 30 fps. A faster jump is two people (a cut the watch did not
# see, or two guests in turn at one place), never one.
JUMP_SPEED = 100.0
# Two clearly seen faces (wide, not turned, a strong embedding: faces.thresholds) less alike than this are two
# people: a track never links them, whatever their speed. A track is compared by its last clearly seen face, so
# poorly seen sightings between two people do not carry one track from the first to the second
# (`bench/track_links.py`, docs/MEASUREMENTS.md "One person per track").
LINK_AGREEMENT = 0.15


def link(
    sightings: list[Seen],
    cuts: Iterable[float] = (),
    searched: dict[float, list[FractionCorners]] | None = None,
    embeddings: list[np.ndarray] | None = None,
    clear: list[bool] | None = None,
) -> list[int]:
    """A track number for each sighting (time, box), sightings in time order; greedy, cheapest first: the
    face's speed, plus how unlike its track's last sighting it looks (`embeddings`, unit length, one per
    sighting). No track goes on across a cut (the time of a scene's first frame): a new scene's faces are
    new. At a time when only parts of the frame were searched (`searched[time]`: those regions), only a
    track last seen within one of them may go on there: the others were not looked for, and are not gone.
    A clearly seen sighting (`clear`) never joins a track whose last clearly seen face it does not agree with
    (LINK_AGREEMENT): a track holds one person."""
    linking = _Linking(
        sightings,
        sorted(cuts),
        searched or {},
        _unlikeness(embeddings) if embeddings is not None else lambda a, b: 0.0,
        clear or [False] * len(sightings),
        result=[0] * len(sightings),
    )
    by_time: dict[float, list[int]] = {}
    for index, (time, _) in enumerate(sightings):
        by_time.setdefault(time, []).append(index)
    for time, indices in by_time.items():
        linking.at(time, indices)
    return linking.result


@dataclass
class _Linking:
    """The tracks so far, while `link` goes through the sightings time by time."""

    sightings: list[Seen]
    cuts: list[float]
    searched: dict[float, list[FractionCorners]]
    unlike: Callable[[int, int], float]
    clear: list[bool]
    last_seen: list[int] = field(default_factory=list)  # per track: the index of its last sighting
    last_clear: list[int | None] = field(default_factory=list)  # per track: its last clearly seen one
    result: list[int] = field(default_factory=list)

    def at(self, time: float, indices: list[int]) -> None:
        """Link the sightings at `time`: each to the cheapest track it may continue, else a new track."""
        taken: dict[int, int] = {}  # sighting -> track
        for _, index, track in sorted(self._pairs(time, indices)):
            if index not in taken and track not in taken.values():
                taken[index] = track
        for index in indices:
            track = taken.get(index)
            if track is None:
                track = len(self.last_seen)
                self.last_seen.append(index)
                self.last_clear.append(None)
            self.result[index] = track
            self.last_seen[track] = index
            if self.clear[index]:
                self.last_clear[track] = index

    def _pairs(self, time: float, indices: list[int]) -> Iterator[tuple[float, int, int]]:
        """(cost, sighting, track) of every link the rules allow at `time`."""
        for track in self._open(time):
            last = self.sightings[self.last_seen[track]]
            for index in indices:
                if not _agree(self.clear[index], self.last_clear[track], index, self.unlike):
                    continue
                speed = _link_cost(last, (time, self.sightings[index][1]), partial=time in self.searched)
                if speed is not None:
                    yield speed + LIKENESS_WEIGHT * self.unlike(self.last_seen[track], index), index, track

    def _open(self, time: float) -> list[int]:
        """The tracks a sighting at `time` may continue: seen lately, in this scene, and looked for here."""
        return [
            track
            for track, index in enumerate(self.last_seen)
            if 0 < time - (last := self.sightings[index])[0] <= MAX_GAP_S + 1e-6
            and not _cut_between(self.cuts, last[0], time)
            and (time not in self.searched or any(_inside(last[1], region) for region in self.searched[time]))
        ]


def _agree(clear: bool, track_clear: int | None, index: int, unlike: Callable[[int, int], float]) -> bool:
    """Whether a sighting may join a track by their looks: unless both are clearly seen, always."""
    return not clear or track_clear is None or 1.0 - unlike(track_clear, index) >= LINK_AGREEMENT


def _unlikeness(embeddings: list[np.ndarray]) -> Callable[[int, int], float]:
    """1 - cosine similarity of two sightings' embeddings (0: the same look; about 1: strangers)."""
    return lambda a, b: 1.0 - float(np.dot(embeddings[a], embeddings[b]))


def _inside(box: FractionCorners, region: FractionCorners) -> bool:
    """Whether the box's centre lies within the region."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return region[0] <= cx <= region[2] and region[1] <= cy <= region[3]


def _cut_between(cuts: list[float], then: float, time: float) -> bool:
    """Whether a scene starts after `then` and at or before `time`."""
    index = bisect.bisect_right(cuts, then + 1e-9)
    return index < len(cuts) and cuts[index] <= time + 1e-9


def _link_cost(last: Seen, now: Seen, partial: bool = False) -> float | None:
    """The face's speed, in face widths a second, if the two sightings can be one face. Between looks the
    time counts as at least one interval; a sighting between looks (`partial`) is held to its real time
    since the last one: a few frames allow a few frames' travel."""
    (then, a), (time, b) = last, now
    width_a, width_b = a[2] - a[0], b[2] - b[0]
    if min(width_a, width_b) <= 0 or max(width_a, width_b) > SIZE_RATIO * min(width_a, width_b):
        return None
    centre_a, centre_b = (a[:2] + a[2:]) / 2, (b[:2] + b[2:]) / 2
    widths = float(np.linalg.norm(centre_b - centre_a)) / max(width_a, width_b)
    if widths / max(time - then, 1e-3) > JUMP_SPEED:
        return None
    speed = widths / max(time - then, 1e-3 if partial else DETECT_INTERVAL_S)
    return speed if speed <= LINK_SPEED else None
