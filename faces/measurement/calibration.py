"""Similarity normalised by a cohort of strangers, measured against the raw similarity (docs/ARCHITECTURE.md §6).

Speaker and face verification often calibrate a score per reference (Z-norm: how strangers score against this
reference), per probe (T-norm: how this face scores against strangers) or both (S-norm, their mean), so that a
reference strangers reach easily gets a higher bar. Measured here two-fold: the people split in halves by their
names (as recommend.two_fold), each half's pairs normalised by a cohort of the other half's faces as taken, and
every decision compared at the same share of the members' own faces left visible.
"""

from dataclasses import dataclass

import numpy as np

from faces.measurement.probes import AS_TAKEN, Probe
from faces.measurement.verdicts import Pairs, half_of, verdict_of

KINDS = ("raw", "Z-norm", "T-norm", "S-norm")


@dataclass(frozen=True)
class Operating:
    kind: str
    visible: float  # the members' own faces left visible
    strangers_mean: float  # strangers' faces blurred per member, mean
    strangers_worst: float


def compared(pairs: Pairs, references: dict[str, Probe], visible_shares: tuple[float, ...]) -> list[Operating]:
    """Each kind of score at a flat threshold that leaves each of `visible_shares` of the own faces visible."""
    scores, within = normalised(pairs, references)
    scored = Pairs(pairs.probes, pairs.members, pairs.similarity, pairs.genuine & within, pairs.stranger & within)
    result = []
    for kind in KINDS:
        for share in visible_shares:
            found = verdict_of(scored, scores[kind] >= np.quantile(scores[kind][scored.genuine], share))
            result.append(Operating(kind, found.visible_share, found.strangers_mean, found.strangers_worst))
    return result


def normalised(pairs: Pairs, references: dict[str, Probe]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(every kind's (P, M) scores, the (P, M) mask of pairs inside one half, which alone are scored)."""
    embeddings = np.array([one.embedding for one in pairs.probes], dtype=np.float32).reshape(-1, 512)
    chosen = np.array([references[member].embedding for member in pairs.members], dtype=np.float32).reshape(-1, 512)
    probe_half = np.array([half_of(_owner(one)) for one in pairs.probes])
    member_half = np.array([half_of(member) for member in pairs.members])
    as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
    z, t = np.zeros_like(pairs.similarity), np.zeros_like(pairs.similarity)
    for half in (0, 1):
        cohort = embeddings[as_taken & (probe_half != half)]
        rows, columns = probe_half == half, member_half == half
        if not len(cohort) or not rows.any() or not columns.any():
            continue
        against_references = chosen[columns] @ cohort.T
        against_probes = embeddings[rows] @ cohort.T
        raw = pairs.similarity[np.ix_(rows, columns)]
        z[np.ix_(rows, columns)] = (raw - against_references.mean(axis=1)) / _spread(against_references)
        t[np.ix_(rows, columns)] = (raw - against_probes.mean(axis=1)[:, None]) / _spread(against_probes)[:, None]
    within = probe_half[:, None] == member_half[None, :]
    return {"raw": pairs.similarity, "Z-norm": z, "T-norm": t, "S-norm": (z + t) / 2}, within


def _spread(scores: np.ndarray) -> np.ndarray:
    return np.maximum(scores.std(axis=1), 1e-6)


def _owner(one: Probe) -> str:
    # A group_ stranger's face is named after its photo: its photo's folder decides its half.
    return one.person.split("/")[0]
