"""What the blur decision makes of a set: the DNP member's faces left visible, and strangers blurred.

Every person of the set is in turn the DNP member, with their reference (faces.measurement.probes). A
probe of that person other than the reference itself is one of the member's faces: left visible when the
decision does not blur it. A probe of anyone else is a stranger's face: blurred because of this member
when it reaches the member's reference at its own threshold or is too poorly seen to judge. The decision
is faces.thresholds' own (`blur_for`, `too_poor`), applied to each probe's quality.
"""

import zlib
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from faces.measurement.probes import AS_TAKEN, Probe
from faces.people import blur_scores
from faces.population import Moments, Population
from faces.thresholds import FaceView, Thresholds


@dataclass(frozen=True)
class Pairs:
    """Every probe against every member's reference."""

    probes: list[Probe]
    members: list[str]  # the people with a reference
    similarity: np.ndarray  # (P, M)
    genuine: np.ndarray  # (P, M) bool: the probe is the member, and not the member's reference photo
    stranger: np.ndarray  # (P, M) bool: the probe is someone else
    # (M, M): how near each member's references come to each other's (the best pair); None: not known (no member's
    # selfie is taken for another's: faces.people.Candidates.reaching_dnp).
    between: np.ndarray | None = None
    # (P, M): `similarity` less each reference's bar shift (faces/population.py), the population made of the set's
    # faces as taken without the member's own; what a calibrated blur decision compares. None: not known.
    calibrated: np.ndarray | None = None
    # (M,): how far each member's bars move down at most (0 where none does): a selfie that vouches is held to the
    # lowered bar (faces.people.Candidates.reaching_dnp). None: not known.
    lowered: np.ndarray | None = None

    @classmethod
    def of(cls, probes: list[Probe], references: dict[str, Probe | list[Probe]]) -> "Pairs":
        """Every probe against every member; a member with several references is matched as the worker matches
        one (faces/people.py): the best similarity over them."""
        members = sorted(references)
        chosen = {member: _listed(references[member]) for member in members}
        embeddings = np.array([one.embedding for one in probes], dtype=np.float32).reshape(-1, 512)
        similarity = np.full((len(probes), len(members)), -1.0, dtype=np.float32)
        for column, member in enumerate(members):
            own = np.array([one.embedding for one in chosen[member]], dtype=np.float32).reshape(-1, 512)
            similarity[:, column] = (embeddings @ own.T).max(axis=1)
        person = np.array([one.person for one in probes])[:, None]
        same = person == np.array(members)[None, :]
        images = [{one.image for one in chosen[member]} for member in members]
        is_reference = np.array([[one.image in own for own in images] for one in probes], dtype=bool).reshape(
            len(probes), len(members)
        )
        references = [np.array([one.embedding for one in chosen[member]], dtype=np.float32) for member in members]
        between = np.array([[float((a @ b.T).max()) for b in references] for a in references]).reshape(len(members), -1)
        calibrated, lowered = calibrated_similarity(embeddings, probes, dict(zip(members, references, strict=True)))
        return cls(probes, members, similarity, same & ~is_reference, ~same, between, calibrated, lowered)

    def subset(self, rows: np.ndarray) -> "Pairs":
        """The pairs of the probes `rows` selects (a bool mask over the probes)."""
        probes = [one for one, keep in zip(self.probes, rows, strict=True) if keep]
        calibrated = None if self.calibrated is None else self.calibrated[rows]
        parts = (self.similarity[rows], self.genuine[rows], self.stranger[rows])
        return Pairs(probes, self.members, *parts, self.between, calibrated, self.lowered)

    def leaving_out(self, images: set) -> "Pairs":
        """The pairs with no photo of `images` counted as a member's own face (every reference photo of a
        comparison, so that one and several references are tried on the same faces)."""
        kept = np.array([one.image not in images for one in self.probes], dtype=bool)
        return replace(self, genuine=self.genuine & kept[:, None])

    def within(self, people: set[str]) -> "Pairs":
        """The pairs among `people` alone (group_ strangers stay): for thresholds chosen on some people and
        tried on the others."""
        rows = np.array([one.stranger or one.person in people for one in self.probes], dtype=bool)
        columns = np.array([member in people for member in self.members], dtype=bool)
        kept = self.subset(rows)
        members = [member for member, keep in zip(self.members, columns, strict=True) if keep]
        between = None if self.between is None else self.between[columns][:, columns]
        calibrated = None if kept.calibrated is None else kept.calibrated[:, columns]
        lowered = None if kept.lowered is None else kept.lowered[columns]
        parts = (part[:, columns] for part in (kept.similarity, kept.genuine, kept.stranger))
        return Pairs(kept.probes, members, *parts, between, calibrated, lowered)

    @cached_property
    def head_turn(self) -> np.ndarray:
        return np.array([_or(one.quality.head_turn, 0.0) for one in self.probes], dtype=np.float32)


@dataclass(frozen=True)
class Verdict:
    """One decision over the pairs."""

    visible: int  # the members' own faces left unblurred
    faces: int  # the members' own faces
    # Per member: the share of strangers' faces blurred because of them.
    strangers_blurred: np.ndarray

    @property
    def visible_share(self) -> float:
        return self.visible / self.faces if self.faces else 0.0

    @property
    def strangers_mean(self) -> float:
        return float(self.strangers_blurred.mean()) if self.strangers_blurred.size else 0.0

    @property
    def strangers_worst(self) -> float:
        return float(self.strangers_blurred.max()) if self.strangers_blurred.size else 0.0


def blurred(pairs: Pairs, thresholds: Thresholds) -> np.ndarray:
    """(P, M) bool: the probe blurred because of the member (fail-closed thresholds blur every face)."""
    threshold = [thresholds.blur_for(one.quality) for one in pairs.probes]
    if None in threshold:
        return np.ones_like(pairs.similarity, dtype=bool)
    too_poor = probes_too_poor(pairs, thresholds)
    return decide(blur_similarity(pairs, thresholds), np.array(threshold, dtype=np.float32), too_poor)


def explained(pairs: Pairs, thresholds: Thresholds, dnp) -> np.ndarray:
    """(P,) bool: the probes that a member outside `dnp` (column indexes: the event's DNP members) explains, where
    every other person of the set is a member of the event with their reference: matched to one of them, and more
    similar to them than to any DNP member by `explained_lead`, their own selfie not reaching any DNP member's at
    `blur`, lowered by that member's shift where the bars are calibrated (faces.people.PhotoMatch.explained)."""
    lead = thresholds.explained_lead
    if lead is None or thresholds.match is None:
        return np.zeros(len(pairs.probes), dtype=bool)
    vouching = np.ones(len(pairs.members), dtype=bool)
    vouching[dnp] = False
    if pairs.between is not None:
        lowered = pairs.lowered if thresholds.calibrated and pairs.lowered is not None else np.zeros(len(pairs.members))
        vouching &= (pairs.between[:, dnp] - lowered[dnp][None, :]).max(axis=1) < thresholds.blur
    # As the worker: the member a probe is matched to is its most similar one, who must vouch.
    matched = pairs.similarity.argmax(axis=1)
    best = pairs.similarity.max(axis=1)
    match_at = np.array([thresholds.match_for(FaceView(one.quality, 0.0)) for one in pairs.probes], dtype=np.float32)
    too_poor = probes_too_poor(pairs, thresholds)
    lead_over_dnp = best - pairs.similarity[:, dnp].max(axis=1)
    return vouching[matched] & (best >= match_at) & (lead_over_dnp >= lead) & ~too_poor


def blurred_among_members(pairs: Pairs, thresholds: Thresholds) -> np.ndarray:
    """`blurred`, where every other person of the set is a member of the event with their reference: each member in
    turn the one DNP member, a face another member explains is not blurred because of them."""
    blur = blurred(pairs, thresholds)
    for column in range(len(pairs.members)):
        blur[:, column] &= ~explained(pairs, thresholds, [column])
    return blur


def blur_similarity(pairs: Pairs, thresholds: Thresholds) -> np.ndarray:
    """(P, M): what the blur decision compares with its thresholds: calibrated where the thresholds are (and the set
    can be: two people or more), as the worker calibrates it (faces.people.blur_scores), else the raw similarity."""
    if not thresholds.calibrated or pairs.calibrated is None:
        return pairs.similarity
    return blur_scores(pairs.similarity, pairs.calibrated, probes_seen_clearly(pairs, thresholds))


def probes_seen_clearly(pairs: Pairs, thresholds: Thresholds) -> np.ndarray:
    """(P,) bool: the probes `thresholds` see clearly (not poorly; a probe is a whole face)."""
    return np.array([not thresholds.seen_poorly(one.quality) for one in pairs.probes], dtype=bool)


def probes_too_poor(pairs: Pairs, thresholds: Thresholds) -> np.ndarray:
    """(P,) bool: the probes too poorly seen for `thresholds` to judge (Thresholds.too_poor)."""
    return np.array([thresholds.too_poor(one.quality) for one in pairs.probes], dtype=bool)


def calibrated_similarity(embeddings: np.ndarray, probes: list[Probe], references: dict) -> tuple:
    """((P, M): each probe's best similarity over each member's `references` ((R, 512) each) less that reference's
    bar shift; (M,): each member's lowest shift, never above 0), the population of the set's faces as taken without
    the member's own: a member of an event is not among the people who made the engine's population. (None, None)
    with fewer than two people (no stranger to make one of)."""
    calibrating = _calibrating(probes, references)
    if calibrating is None:
        return None, None
    _, populations = calibrating
    result = np.empty((len(probes), len(references)), dtype=np.float32)
    lowered = np.zeros(len(references), dtype=np.float32)
    for column, (member, own) in enumerate(references.items()):
        shifts = populations[member].shifts(own)
        result[:, column] = (embeddings @ own.T - shifts[None, :]).max(axis=1)
        lowered[column] = min(float(shifts.min()), 0.0)
    return result, lowered


def set_population(probes: list[Probe], references: dict[str, Probe | list[Probe]]) -> tuple | None:
    """(the population of the set's faces as taken, its centre the median reach of the members' references; and how
    far each reference moves its bars (R,), without its member's own faces, as `calibrated_similarity` measures
    it); None with fewer than two people."""
    chosen = _embeddings(references)
    calibrating = _calibrating(probes, chosen)
    if calibrating is None:
        return None
    moments, populations = calibrating
    moves = np.concatenate([populations[member].shifts(own) for member, own in chosen.items()])
    return moments.without(None, next(iter(populations.values())).centre), moves


def _embeddings(references: dict[str, Probe | list[Probe]]) -> dict[str, np.ndarray]:
    return {member: np.array([one.embedding for one in _listed(own)]) for member, own in references.items()}


def _calibrating(probes: list[Probe], references: dict) -> tuple[Moments, dict[str, Population]] | None:
    """The set's moments, and each member's population without them, centred on the median of their reaches."""
    as_taken = [one for one in probes if one.condition == AS_TAKEN]
    if len({one.person for one in as_taken}) < 2 or not references:
        return None
    moments = Moments.of(np.array([one.embedding for one in as_taken]), [one.person for one in as_taken])
    populations = {member: moments.without(member) for member in references}
    reach = np.concatenate([populations[member].reach(own) for member, own in references.items()])
    centre = float(np.median(reach))
    return moments, {member: replace(population, centre=centre) for member, population in populations.items()}


def decide(similarity: np.ndarray, threshold: np.ndarray, too_poor: np.ndarray) -> np.ndarray:
    return (similarity >= threshold.reshape(-1, 1)) | too_poor.reshape(-1, 1)


def verdict(pairs: Pairs, thresholds: Thresholds) -> Verdict:
    return verdict_of(pairs, blurred(pairs, thresholds))


def verdict_of(pairs: Pairs, blur: np.ndarray) -> Verdict:
    visible = int((pairs.genuine & ~blur).sum())
    counts = pairs.stranger.sum(axis=0)
    shares = (pairs.stranger & blur).sum(axis=0) / np.maximum(counts, 1)
    return Verdict(visible, int(pairs.genuine.sum()), shares[counts > 0])


def half_of(name: str) -> int:
    """Which half of the people a name falls in (0 or 1), fixed by the name: for two-fold checks."""
    return zlib.crc32(name.encode()) % 2


def _listed(references: "Probe | list[Probe]") -> list[Probe]:
    return references if isinstance(references, list) else [references]


def _or(value, default):
    return default if value is None else value
