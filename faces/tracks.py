"""How a clip's sightings link into tracks: one track per person, across the frames the detection looked at
(faces/detection/clips.py); where a track is blurred between and past its sightings is rendering's
(faces/rendering/painters.py). `TRACKING` holds the numbers; the detection hands it to `link`.
"""

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from faces.geometry import FractionCorners

# A face seen at a time: (seconds, where).
Seen = tuple[float, FractionCorners]


@dataclass(frozen=True)
class Tracking:
    """How sightings link into tracks. Among the links speed and size allow, a face is linked to the sighting that
    looks most like it, nearness second: a wrong link is not harmless. Between its two sightings a track is
    blurred along one path, so linking a face to its neighbour's next sighting (a group walking a face's width in a
    fifth of a second) leaves both faces' own paths bare."""

    # Two looks at a video are never further apart than this (faces/detection/clips.py, `scheduled`): five looks a
    # second cover the frames between them, and a link's speed counts at least this much time between two looks.
    look_interval_s: float = 0.2
    # A face missed by this many seconds of detections in a row (three looks) still continues its track.
    max_gap_s: float = 0.6
    # Two sightings may be one face when its centre moved at most this many face widths a second (over at least
    # one interval): a walking guest moves a few.
    link_speed: float = 30.0
    # Two sightings may be one face when their widths are within this ratio of each other.
    size_ratio: float = 2.0
    # What one unit of embedding distance (1 - cosine) costs, in face widths a second: the same face, a look later,
    # is far more alike than any neighbour.
    likeness_weight: float = 30.0
    # Over the real time between two sightings (however close), no face moves faster than this many face widths a
    # second (3 from one frame to the next at 30 fps): a faster jump is two people (a cut the watch did not see, or
    # two guests in turn at one place), never one.
    jump_speed: float = 100.0
    # Two clearly seen faces (wide, not turned, a strong embedding: faces.thresholds) less alike than this are two
    # people, whatever their speed; a track is compared by its last clearly seen face, so poorly seen sightings
    # between two people do not carry one track from the first to the second (`bench/track_links.py`,
    # docs/MEASUREMENTS.md "One person per track").
    link_agreement: float = 0.15


TRACKING = Tracking()


def link(
    sightings: list[Seen],
    cuts: Iterable[float] = (),
    searched: dict[float, list[FractionCorners]] | None = None,
    embeddings: list[np.ndarray] | None = None,
    clear: list[bool] | None = None,
    tracking: Tracking = TRACKING,
) -> list[int]:
    """A track number for each sighting (time, box), sightings in time order; greedy, cheapest first: the
    face's speed, plus how unlike its track's last sighting it looks (`embeddings`, unit length, one per
    sighting). No track goes on across a cut (the time of a scene's first frame): a new scene's faces are
    new. At a time when only parts of the frame were searched (`searched[time]`: those regions), only a
    track last seen within one of them may go on there: the others were not looked for, and are not gone.
    A clearly seen sighting (`clear`) never joins a track whose last clearly seen face it does not agree with
    (Tracking.link_agreement): a track holds one person."""
    linking = _Linking(
        tracking,
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

    tracking: Tracking
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
                if not self._agree(index, self.last_clear[track]):
                    continue
                speed = _link_cost(self.tracking, last, (time, self.sightings[index][1]), partial=time in self.searched)
                if speed is not None:
                    yield (
                        speed + self.tracking.likeness_weight * self.unlike(self.last_seen[track], index),
                        index,
                        track,
                    )

    def _agree(self, index: int, track_clear: int | None) -> bool:
        """Whether a sighting may join a track by their looks: unless both are clearly seen, always."""
        agreement = self.tracking.link_agreement
        return not self.clear[index] or track_clear is None or 1.0 - self.unlike(track_clear, index) >= agreement

    def _open(self, time: float) -> list[int]:
        """The tracks a sighting at `time` may continue: seen lately, in this scene, and looked for here."""
        return [
            track
            for track, index in enumerate(self.last_seen)
            if 0 < time - (last := self.sightings[index])[0] <= self.tracking.max_gap_s + 1e-6
            and not _cut_between(self.cuts, last[0], time)
            and (time not in self.searched or any(_inside(last[1], region) for region in self.searched[time]))
        ]


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


def _link_cost(tracking: Tracking, last: Seen, now: Seen, partial: bool = False) -> float | None:
    """The face's speed, in face widths a second, if the two sightings can be one face. Between looks the
    time counts as at least one interval; a sighting between looks (`partial`) is held to its real time
    since the last one: a few frames allow a few frames' travel."""
    (then, a), (time, b) = last, now
    width_a, width_b = a[2] - a[0], b[2] - b[0]
    if min(width_a, width_b) <= 0 or max(width_a, width_b) > tracking.size_ratio * min(width_a, width_b):
        return None
    centre_a, centre_b = (a[:2] + a[2:]) / 2, (b[:2] + b[2:]) / 2
    widths = float(np.linalg.norm(centre_b - centre_a)) / max(width_a, width_b)
    if widths / max(time - then, 1e-3) > tracking.jump_speed:
        return None
    speed = widths / max(time - then, 1e-3 if partial else tracking.look_interval_s)
    return speed if speed <= tracking.link_speed else None
