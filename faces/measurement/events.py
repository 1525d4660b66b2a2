"""Events with several Do Not Publish members: what strangers pay when more than one guest asked.

A face is blurred in the public file when it reaches any of the event's DNP members, so the share of
strangers' faces blurred adds up over members: a school where a tenth of the children opt out, a wedding
with five guests who asked. An event of `size` DNP members is `size` people of the set drawn at random
(seeded: the same events on every run); a face of anyone else is a stranger's, blurred when the decision
blurs it because of any of them. A DNP member's own face is left visible when none of them reaches it.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from faces.measurement.verdicts import Pairs, Verdict


@dataclass(frozen=True)
class Draws:
    """Which events of DNP members are drawn from a set's members."""

    count: int = 200  # events drawn per size: a share averaged over many casts of guests, not one lucky event
    seed: int = 0  # one seed: two runs (and two decisions in one run) are judged on the same events


DRAWS = Draws()


@dataclass(frozen=True)
class Events(Verdict):
    """What a decision does in events of `size` DNP members: `strangers_blurred` per event, and the DNP members'
    own faces (`visible` of `faces`) over every event."""

    size: int = 0


def drawn(members: int, size: int, draws: Draws = DRAWS) -> list[np.ndarray]:
    """`draws.count` events of `size` of the `members` (column indexes), each without repeats."""
    rng = np.random.default_rng(draws.seed)
    return [rng.choice(members, size, replace=False) for _ in range(draws.count)]


def events_of(
    pairs: Pairs,
    blurred: np.ndarray,
    size: int,
    strangers: np.ndarray | None = None,
    draws: Draws = DRAWS,
    explained: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Events | None:
    """What `blurred` ((P, M): the probe blurred because of the member) does in the events of `size` DNP members
    that `draws` draws; `strangers` (a bool mask over the probes) limits the faces counted as strangers'. None when
    the set has fewer members than `size`. `explained(columns)`: the probes that the event's other members explain
    when `columns` are its DNP members (faces.measurement.verdicts.explained), blurred nowhere."""
    if len(pairs.members) < size:
        return None
    person = np.array([one.person for one in pairs.probes])
    counted = np.ones(len(pairs.probes), dtype=bool) if strangers is None else strangers
    shares, visible, faces = [], 0, 0
    for columns in drawn(len(pairs.members), size, draws):
        reached = blurred[:, columns].any(axis=1)
        if explained is not None:
            reached &= ~explained(columns)
        others = counted & ~np.isin(person, [pairs.members[column] for column in columns])
        if others.any():
            shares.append(float(reached[others].mean()))
        own = pairs.genuine[:, columns].any(axis=1)
        visible += int((own & ~reached).sum())
        faces += int(own.sum())
    return Events(visible, faces, np.array(shares), size)
