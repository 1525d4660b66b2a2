"""The thresholds a measurement recommends, by one written rule (docs/ARCHITECTURE.md §6).

- `blur`, `poor_face_blur`, `weak_norm`, `turned_face`, `unsure_norm`: of every combination of the grid (`Rule`),
  the one that leaves the fewest of the members' own faces visible while the strangers' faces blurred stay within a
  budget per member on average, faces at least `small_face_px` wide and smaller ones each within their own (ties:
  fewer strangers blurred, then the higher thresholds). The viewer's number is the first; the second is
  what a false blur costs the people beside a DNP guest.
- The budget for faces from `small_face_px` is not a guess: a false blur's price adds up over an event's DNP members
  (faces/measurement/events.py), so `for_goals` tries every budget of `budget_steps` and keeps the one whose
  recommendation leaves the fewest own faces visible while it meets the goals, stated in the viewer's terms:
  strangers' faces blurred in an event of five DNP members and because of the worst member alone, and the
  members' own faces left visible at a strong head turn.
- `match`: above every stranger pair of the measurement by `match_margin`, rounded up to `match_step` (a match
  names a person: it must not name a stranger).
- `explained_lead`: `match`'s rule on how far another member's reference ever leads a member's own on their own
  faces (`highest_lead`): a face explained by a member who is not DNP is blurred for no DNP member.
- `cluster`, then `cluster_merge`: measured on the clusters themselves (faces.measurement.people.recommended_cluster):
  the loosest threshold at which the worker's clusters of the set's events stay pure, one step stricter.

`two_fold` checks that the rule does not merely fit the set: it chooses on half the people and reports
what the choice does on the other half (the halves fixed by the people's names).

A set that cannot carry a recommendation (too few strangers to price a blur, or no combination within the
budgets) gets none: `NoRecommendation` says why in one line, and the command prints its tables all the same.
"""

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from faces.measurement import people
from faces.measurement.events import DRAWS, Draws, events_of
from faces.measurement.people import CLUSTER_RULE, ClusterRule, recommended_cluster
from faces.measurement.probes import AS_TAKEN
from faces.measurement.verdicts import (
    Pairs,
    Verdict,
    blur_similarity,
    blurred,
    half_of,
    probes_seen_clearly,
    probes_too_poor,
    verdict,
    verdict_of,
)
from faces.population import CALIBRATION
from faces.thresholds import Thresholds


@dataclass(frozen=True)
class Grid:
    """The combinations the rule tries (every one of them, `recommend`)."""

    # Norms under which a face is too poorly seen to judge: none, or where own faces' similarities collapse.
    unsure_norms: tuple[float, ...] = (0.0, 14.0, 15.0, 16.0, 17.0, 18.0)
    # Norms under which a face is seen poorly: none, or a step above the unsure ones, where own faces score lower.
    weak_norms: tuple[float, ...] = (0.0, 19.0, 20.0, 21.0, 22.0, 23.0)
    # Norms from which a face is seen clearly enough to be matched from its own, lower `clear_match`: the span
    # where own faces' similarities level off (docs/MEASUREMENTS.md, "Who is in a photo": by norm).
    clear_norms: tuple[float, ...] = (19.0, 20.0, 21.0, 22.0, 23.0, 24.0)
    # Head turns from which a face is seen poorly: a marked turn, a strong one, or none.
    turned_faces: tuple[float, ...] = (0.35, 0.5, math.inf)
    # A well seen face's blur thresholds, 0.15 .. 0.30: above strangers' edge (p97 about 0.13) to the old 0.30.
    blurs: tuple[float, ...] = tuple(round(0.15 + 0.01 * i, 2) for i in range(16))
    # A poorly seen face's, 0.06 .. 0.30: it scores lower, so lower (never above `blur`: `recommend` skips those).
    poor_blurs: tuple[float, ...] = tuple(round(0.06 + 0.01 * i, 2) for i in range(25))


@dataclass(frozen=True)
class Goals:
    """What a recommendation must do on the faces as taken, besides leaving the fewest own faces visible."""

    event_size: int = 5  # a wedding where five guests asked
    # The mean share of strangers' faces blurred in such an event: 5 % is the goal on photos the rule never saw, so
    # a point under it on the set the rule fits (hidden sets blurred strangers more than the set: MEASUREMENTS.md).
    event: float = 0.04
    worst: float = 0.05  # the share of strangers' faces blurred because of the worst member alone
    turned: float = 0.03  # the share of the members' own faces left visible at a head turn of strong_turn or more
    strong_turn: float = 0.5  # a strong head turn (faces.thresholds.head_turn): where own faces score lowest


@dataclass(frozen=True)
class Budgets:
    """The mean share of strangers' faces blurred per member that a recommendation may cost."""

    large: float = 0.025  # faces at least small_face_px wide (`for_goals` chooses it of Rule.budget_steps)
    small: float = 0.10  # smaller: a stranger at the back of a group shot; it keeps less of a face


@dataclass(frozen=True)
class Rule:
    """The written rule's knobs: what it tries, what it must meet and what it may cost; how `cluster` is measured
    and which events the goals are judged on."""

    grid: Grid = Grid()  # the combinations tried
    goals: Goals = Goals()  # what the chosen budget's recommendation must do
    budgets: Budgets = Budgets()  # what a recommendation may cost strangers
    # Budgets per member for faces from small_face_px that `for_goals` tries: 0.5 % to 3 % in steps of 0.1 point.
    budget_steps: tuple[float, ...] = tuple(round(0.005 + 0.001 * i, 3) for i in range(26))
    match_margin: float = 0.025  # `match` sits this far above the highest stranger pair: a match names a person
    match_step: float = 0.05  # then rounded up to a step of this: a round value, not one fitted to a pair
    small_face_px: int = 32  # never searched: the width under which a face is seen poorly and has its own budget
    clusters: ClusterRule = CLUSTER_RULE  # how `cluster` is chosen (faces.measurement.people)
    draws: Draws = DRAWS  # the events an event's goal is judged on (faces.measurement.events)
    # Each reference's blur bars move by the set's population (faces/population.py), as measured without the
    # member's own faces: fewer own faces visible and fewer strangers blurred than flat bars (docs/MEASUREMENTS.md).
    calibrated: bool = True


RULE = Rule()


class NoRecommendation(ValueError):
    """The set cannot carry a recommendation; the message says why, in one line."""


def recommend(
    pairs: Pairs, rule: Rule = RULE, cluster: Callable[[float], tuple[float, float]] | None = None
) -> tuple[Thresholds, Verdict]:
    """The recommended thresholds and what they do on `pairs`; NoRecommendation when there are none. `cluster`:
    the cluster and merge thresholds for an `unsure_norm` (else measured on the pairs' probes)."""
    grid, budgets = rule.grid, rule.budgets
    cluster = cluster or (lambda unsure: recommended_cluster(pairs.probes, unsure, rule.clusters))
    match = _match(pairs, rule)
    if match < min(grid.blurs):
        raise NoRecommendation(
            f"match would be {match:.2f} (the highest of {int(pairs.stranger.sum())} stranger pairs is "
            f"{_highest_stranger(pairs):.3f}), under every blur threshold of the grid: too few strangers to measure"
        )
    best, least = None, None
    calibrated = rule.calibrated and pairs.calibrated is not None
    raised = CALIBRATION.highest if calibrated else 0.0  # a bar raised for a reference stays under `match`
    for unsure, weak, turned in itertools.product(grid.unsure_norms, grid.weak_norms, grid.turned_faces):
        shape = Thresholds(match, None, None, None, rule.small_face_px, turned, weak, unsure, calibrated=calibrated)
        split = _Split(pairs, shape)
        for blur, poor_blur in itertools.product(grid.blurs, grid.poor_blurs):
            if poor_blur > blur or blur + raised > match:
                continue
            visible, shares = split.outcome(blur, poor_blur)
            least = shares["large"] if least is None else min(least, shares["large"])
            if shares["large"] > budgets.large or shares["small"] > budgets.small:
                continue
            key = (visible, shares["large"], shares["small"], -blur, -poor_blur, unsure, -weak, -turned)
            if best is None or key < best[0]:
                best = (key, (blur, poor_blur, turned, weak, unsure))
    if best is None:
        large_faces = f"faces from {rule.small_face_px} px"
        least_text = "" if least is None else f" (the least any combination blurs of {large_faces}: {least:.1%})"
        raise NoRecommendation(
            f"no combination of the grid keeps strangers blurred within {_budgets_text(rule)} per member{least_text}"
        )
    blur, poor_blur, turned, weak, unsure = best[1]
    join, merge = cluster(unsure)
    clear, clear_norm = clear_match(pairs, rule, match)
    clear = None if clear is not None and clear < blur + raised else clear  # a clear face matched to X reaches X's bar
    lead = explained_lead(pairs, rule, Thresholds(match, None, None, unsure_norm=unsure))
    seen = Thresholds(
        match, None, None, None, rule.small_face_px, turned, weak, unsure, clear_match=clear, clear_norm=clear_norm
    )
    linked = link(pairs, rule, seen)
    chosen = Thresholds(
        match,
        blur,
        join,
        poor_blur,
        rule.small_face_px,
        turned,
        weak,
        unsure,
        cluster_merge=merge,
        clear_match=clear,
        clear_norm=clear_norm,
        explained_lead=lead,
        calibrated=calibrated,
        link=linked,
    )
    return chosen, verdict(pairs, chosen)


class _Split:
    """The pairs split by how a shape of thresholds sees each probe: seen well, seen poorly, too poor. A
    combination's outcome is then sums over the first two at their own thresholds, plus the third."""

    def __init__(self, pairs: Pairs, shape: Thresholds):
        too_poor = probes_too_poor(pairs, shape)
        poorly = ~probes_seen_clearly(pairs, shape) & ~too_poor
        small = np.array([shape.small(one.quality) for one in pairs.probes], dtype=bool)
        self._pairs = pairs
        self._similarity = blur_similarity(pairs, shape)
        self._parts = {"well": ~poorly & ~too_poor, "poorly": poorly}
        # Strangers' faces are counted apart by size: each size has its own budget.
        self._sizes = {"small": small, "large": ~small}
        self._counts = {size: (pairs.stranger & rows[:, None]).sum(axis=0) for size, rows in self._sizes.items()}
        # Strangers too poorly seen are blurred at any threshold.
        self._always = {
            size: (pairs.stranger & (rows & too_poor)[:, None]).sum(axis=0) for size, rows in self._sizes.items()
        }
        self._at: dict[tuple[str, float], tuple[int, dict]] = {}

    def outcome(self, blur: float, poor_blur: float) -> tuple[int, dict[str, float]]:
        """(the members' faces left visible, per size the mean share of strangers blurred per member)."""
        visible_well, blurred_well = self._of("well", blur)
        visible_poorly, blurred_poorly = self._of("poorly", poor_blur)
        shares = {}
        for size, counts in self._counts.items():
            blurred = blurred_well[size] + blurred_poorly[size] + self._always[size]
            members = counts > 0
            shares[size] = float((blurred[members] / counts[members]).mean()) if members.any() else 0.0
        return visible_well + visible_poorly, shares

    def _of(self, part: str, threshold: float) -> tuple[int, dict]:
        """In one part: the members' faces under `threshold`, and per size and member the strangers at or
        above it."""
        if (part, threshold) not in self._at:
            rows = self._parts[part]
            reached = self._similarity >= threshold
            visible = int((self._pairs.genuine & ~reached)[rows].sum())
            blurred = {
                size: (self._pairs.stranger & reached & (rows & of_size)[:, None]).sum(axis=0)
                for size, of_size in self._sizes.items()
            }
            self._at[part, threshold] = visible, blurred
        return self._at[part, threshold]


def for_goals(pairs: Pairs, rule: Rule = RULE) -> tuple[Thresholds, Verdict, float]:
    """The recommendation, its verdict and its budget per member: of the budgets of `rule.budget_steps` whose
    recommendation meets `rule.goals`, the one that leaves the fewest own faces visible (ties: the smaller budget)."""
    best, reasons = None, []
    # Measured once per unsure_norm, whichever budget asks.
    cluster = functools.cache(lambda unsure: recommended_cluster(pairs.probes, unsure, rule.clusters))
    for large in rule.budget_steps:
        try:
            thresholds, found = recommend(pairs, replace(rule, budgets=replace(rule.budgets, large=large)), cluster)
        except NoRecommendation as why:
            reasons.append(str(why))
            continue
        if meets(pairs, thresholds, rule) and (best is None or found.visible < best[1].visible):
            best = (thresholds, found, large)
    if best is None:
        goals = rule.goals
        why = reasons[-1] if len(reasons) == len(rule.budget_steps) else "no budget's recommendation meets the goals"
        raise NoRecommendation(
            f"{why} (goals: strangers blurred within {goals.event:.0%} in an event of {goals.event_size} DNP "
            f"members and {goals.worst:.0%} for the worst member, own faces visible within {goals.turned:.0%} at "
            f"a head turn of {goals.strong_turn:g} or more)"
        )
    return best


def meets(pairs: Pairs, thresholds: Thresholds, rule: Rule) -> bool:
    """Whether `thresholds` meet the rule's goals on the faces as taken (an event too big for the set is not
    judged)."""
    goals = rule.goals
    as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
    blur = blurred(pairs, thresholds)
    turned = as_taken & (pairs.head_turn >= goals.strong_turn)
    if verdict_of(pairs.subset(turned), blur[turned]).visible_share > goals.turned:
        return False
    if verdict_of(pairs.subset(as_taken), blur[as_taken]).strangers_worst > goals.worst:
        return False
    event = events_of(pairs, blur, goals.event_size, as_taken, rule.draws)
    return event is None or event.strangers_mean <= goals.event


def two_fold(pairs: Pairs, rule: Rule = RULE) -> list[tuple[Thresholds, Verdict]] | None:
    """For each half of the people: the thresholds the rule chooses on the other half, and what they do on
    this one. None when a half has nobody in it."""
    halves = [{member for member in pairs.members if half_of(member) == half} for half in (0, 1)]
    if not all(halves):
        return None
    results = []
    for chosen_on, tried_on in (halves, halves[::-1]):
        thresholds, _, _ = for_goals(pairs.within(chosen_on), rule)  # NoRecommendation: the caller says why
        results.append((thresholds, verdict(pairs.within(tried_on), thresholds)))
    return results


def _match(pairs: Pairs, rule: Rule) -> float:
    if not pairs.stranger.any():
        raise NoRecommendation("no stranger pair: nothing to price a blur against (add people or group_ photos)")
    return _above(_highest_stranger(pairs), rule)


def _above(highest: float, rule: Rule) -> float:
    """A match threshold `rule.match_margin` above the highest stranger pair, rounded up to `rule.match_step`."""
    return round(math.ceil(round((highest + rule.match_margin) / rule.match_step, 6)) * rule.match_step, 2)


def clear_match(pairs: Pairs, rule: Rule, match: float) -> tuple[float | None, float]:
    """(`clear_match`, `clear_norm`): of `rule.grid.clear_norms`, the split whose clear faces' own match threshold
    (`match`'s rule on the stranger pairs of faces that clear alone) finds the most members' faces; (None, inf)
    when no split's is under `match`. Ties: the higher norm."""
    base = Thresholds(match, None, None, small_face_px=rule.small_face_px)
    norms = np.array([one.quality.embedding_norm or 0.0 for one in pairs.probes])
    wide = np.array([not base.small(one.quality) for one in pairs.probes], dtype=bool)
    every = np.ones(len(norms), dtype=bool)
    best, chosen = people.found(pairs, base, every).own, None
    for norm in sorted(rule.grid.clear_norms, reverse=True):
        clear = wide & (norms >= norm)
        if not (pairs.stranger & clear[:, None]).any():
            continue
        value = _above(float(pairs.similarity[pairs.stranger & clear[:, None]].max()), rule)
        if value >= match:
            continue
        own = people.found(pairs, replace(base, clear_match=value, clear_norm=norm), every).own
        if own > best:
            best, chosen = own, (value, norm)
    return chosen if chosen is not None else (None, math.inf)


def link(pairs: Pairs, rule: Rule, shape: Thresholds) -> float | None:
    """`link`: `match`'s rule on the pairs a link could name wrongly (`highest_link_pair`): above every one of them.
    None: no such pair."""
    highest = highest_link_pair(pairs, shape)
    return None if highest is None else _above(highest, rule)


def highest_link_pair(pairs: Pairs, shape: Thresholds) -> float | None:
    """The highest similarity of a face to a face of someone else that a link may rest on (`people.sources`, as
    `shape` matches and sees faces); None: no such pair."""
    reach = people.link_reach(pairs, people.sources(pairs, shape, people.matched(pairs, shape)))[pairs.stranger]
    return float(reach.max()) if (reach > -1.0).any() else None


def explained_lead(pairs: Pairs, rule: Rule, shape: Thresholds) -> float | None:
    """`explained_lead`: `match`'s rule on the leads that another member's reference takes over a member's own (
    `highest_lead`): above every one of them, so that no DNP member's face of the set would be explained away even
    by a wrong match. None: no own face."""
    highest = highest_lead(pairs, shape)
    return None if highest is None else _above(highest, rule)


def highest_lead(pairs: Pairs, shape: Thresholds) -> float | None:
    """The most that another member's reference leads a member's own, on the members' own faces that `shape` can
    judge (a face too poorly seen is never explained); None: no own face."""
    judgeable = ~probes_too_poor(pairs, shape)
    leads = []
    for column in range(len(pairs.members)):
        rows = pairs.genuine[:, column] & judgeable
        others = np.delete(pairs.similarity[rows], column, axis=1)
        if others.size:
            leads.append(float((others.max(axis=1) - pairs.similarity[rows, column]).max()))
    return max(leads) if leads else None


def _highest_stranger(pairs: Pairs) -> float:
    return float(pairs.similarity[pairs.stranger].max())


def _budgets_text(rule: Rule) -> str:
    return f"{rule.budgets.large:.1%} (faces from {rule.small_face_px} px) and {rule.budgets.small:.1%} (smaller)"
