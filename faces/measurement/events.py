"""Events with several Do Not Publish members: what strangers pay when more than one guest asked.

A face is blurred in the public file when it reaches any of the event's DNP members, so the share of
strangers' faces blurred adds up over members: a school where a tenth of the children opt out, a wedding
with five guests who asked. An event of `size` DNP members is `size` people of the set drawn at random
(seeded: the same events on every run); a face of anyone else is a stranger's, blurred when the decision
blurs it because of any of them. A DNP member's own face is left visible when none of them reaches it.
"""

from dataclasses import dataclass

import numpy as np

from faces.measurement.verdicts import Pairs

# Events drawn per size: enough that the mean moves by less than a tenth of a point between seeds.
EVENTS = 200
SEED = 0


@dataclass(frozen=True)
class Events:
    size: int  # DNP members per event
    strangers_blurred: np.ndarray  # per event: the share of strangers' faces blurred
    visible: int  # the DNP members' own faces left visible, over every event
    faces: int  # the DNP members' own faces, over every event

    @property
    def mean(self) -> float:
        return float(self.strangers_blurred.mean()) if self.strangers_blurred.size else 0.0

    @property
    def worst(self) -> float:
        return float(self.strangers_blurred.max()) if self.strangers_blurred.size else 0.0

    @property
    def visible_share(self) -> float:
        return self.visible / self.faces if self.faces else 0.0


def drawn(members: int, size: int, count: int = EVENTS, seed: int = SEED) -> list[np.ndarray]:
    """`count` events of `size` of the `members` (column indexes), each without repeats."""
    rng = np.random.default_rng(seed)
    return [rng.choice(members, size, replace=False) for _ in range(count)]


def events_of(pairs: Pairs, blurred: np.ndarray, size: int, strangers: np.ndarray | None = None) -> Events | None:
    """What `blurred` ((P, M): the probe blurred because of the member) does in events of `size` DNP members;
    `strangers` (a bool mask over the probes) limits the faces counted as strangers'. None when the set has
    fewer members than `size`."""
    if len(pairs.members) < size:
        return None
    person = np.array([one.person for one in pairs.probes])
    counted = np.ones(len(pairs.probes), dtype=bool) if strangers is None else strangers
    shares, visible, faces = [], 0, 0
    for columns in drawn(len(pairs.members), size):
        reached = blurred[:, columns].any(axis=1)
        others = counted & ~np.isin(person, [pairs.members[column] for column in columns])
        if others.any():
            shares.append(float(reached[others].mean()))
        own = pairs.genuine[:, columns].any(axis=1)
        visible += int((own & ~reached).sum())
        faces += int(own.sum())
    return Events(size, np.array(shares), visible, faces)
