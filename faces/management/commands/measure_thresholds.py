"""`python manage.py measure_thresholds DIR`: how often the blur decision leaves a DNP member visible, and at what
price to strangers, on real photos of real people.

DIR holds one folder of photos per person (`scripts/make_real_faces_set.py` writes such a set); a folder
named `group_*` holds strangers only (every face there is its own person). Each photo gives its largest
face, seen as a job sees an upload; each person's most frontal large photo is their reference, as a DNP
member's selfie would be; then every person is the DNP member in turn (faces/measurement/).

It prints, for the committed thresholds and for the ones the written rule recommends: per condition (face
width, head turn, detector score, embedding norm, the face's light, and the same faces shrunk, blurred and
re-encoded, or darkened) the share of the members' own faces left visible and the share of strangers' faces
blurred; the ROC between them at flat thresholds; per member the mean and worst share of strangers blurred;
events with 1, 5 and 20 DNP members (strangers blurred per event, by condition too); one reference per
member against three; each decision with its blur bars calibrated per reference and without; the
recommended `Thresholds` line and a two-fold check of the rule. A set too small to recommend from gets its
tables and one line saying why there is no recommendation. Progress goes to stderr. Nothing is written, but
with `--population FILE`: the set's population (faces/population.py), which calibrates the bars.
docs/ARCHITECTURE.md §6 and docs/MEASUREMENTS.md cite the output.
"""

import functools
import itertools
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from faces.engines import resident_engine
from faces.measurement import people
from faces.measurement.calibration import compared
from faces.measurement.events import events_of
from faces.measurement.probes import (
    AS_TAKEN,
    PROBING,
    Condition,
    Missed,
    Probe,
    Probing,
    derived_probes,
    read_set,
    reference_sets,
    references,
)
from faces.measurement.recommend import (
    RULE,
    NoRecommendation,
    Rule,
    for_goals,
    highest_lead,
    highest_link_pair,
    two_fold,
)
from faces.measurement.verdicts import (
    Pairs,
    blurred,
    blurred_among_members,
    explained,
    set_population,
    verdict,
    verdict_of,
)
from faces.thresholds import Thresholds, for_engine


@dataclass(frozen=True)
class Report:
    """What the report measures and how it breaks the faces down, beside the rule it reports on."""

    rule: Rule = RULE  # the written rule: its recommendation, and the goals, draws and clusters it judges by
    probing: Probing = PROBING  # how the set's faces are read and seen again (--min-face sets its min_face)
    # The same faces as a guest at the back of a group shot, blurred and re-encoded by a phone, in a dim room.
    derived: tuple[Condition, ...] = (
        Condition("48 px", 48),
        Condition("32 px", 32),
        Condition("24 px", 24),
        Condition("24 px, blurred, JPEG q75", 24, sigma=1.2, jpeg=75),
        Condition("low light, JPEG q75", dark=True, jpeg=75),
    )
    derived_per_person: int = 3  # photos per person shown in each derived condition: a sample, each detected afresh
    # The ROC's flat thresholds: from under every poor-face blur tried to the committed match.
    roc_thresholds: tuple[float, ...] = (0.05, 0.08, 0.10, 0.12, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40)
    event_sizes: tuple[int, ...] = (1, 5, 20)  # DNP members per event: a guest who asked, a wedding with five, a school
    several_references: int = 3  # selfies per member against one: a member who gave a few
    calibration_visible: tuple[float, ...] = (0.01, 0.02)  # own faces left visible at which the scores are compared
    progress_every: int = 100  # photos between two progress lines: quiet on a set of thousands
    # Where the conditions' buckets split:
    width_edges: tuple[float, ...] = (32, 64, 128)  # face width (px): under small_face_px, then doubling
    turn_edges: tuple[float, ...] = (0.2, 0.35, 0.5)  # head turn: slight, then the grid's turned_faces
    score_edges: tuple[float, ...] = (0.7, 0.8)  # detector score: faint, middling, sure
    norm_edges: tuple[float, ...] = (17, 20, 23)  # embedding norm: across the grid's unsure and weak norms
    light_edges: tuple[float, ...] = (60, 100)  # the face's grey level: dark, dim, lit


REPORT = Report()


class Command(BaseCommand):
    help = "How often the blur decision leaves a DNP member visible, and what it costs strangers, per condition."

    def add_arguments(self, parser):
        parser.add_argument("directory", type=Path)
        parser.add_argument(
            "--derived-per-person",
            type=int,
            default=REPORT.derived_per_person,
            help="photos per person shrunk, blurred, darkened",
        )
        parser.add_argument(
            "--min-face", type=float, default=REPORT.probing.min_face, help="group_ faces narrower (px) are ignored"
        )
        parser.add_argument(
            "--population",
            type=Path,
            help="write the set's population here (faces/populations/ENGINE.npz): what calibrates the blur bars",
        )
        parser.add_argument(
            "--also",
            type=thresholds_of,
            help="another decision to show beside them, as Thresholds fields: 'match=0.4,blur=0.3,cluster=0.45'",
        )

    def handle(self, *args, directory: Path, derived_per_person: int, min_face: float, also, population, **options):
        if not directory.is_dir():
            raise CommandError(f"{directory} is not a folder (it should hold one folder of photos per person)")
        if sum(1 for path in directory.iterdir() if path.is_dir()) < 2:
            raise CommandError(f"{directory} must hold at least two person folders")
        engine, started = resident_engine(), time.monotonic()
        probing = replace(REPORT.probing, min_face=min_face)
        probes = read_set(engine, directory, probing=probing, skipped=self._skipped, progress=self._progress)
        chosen = references(probes)
        if not chosen:
            raise CommandError("no person has two usable photos: nobody can be a DNP member with a reference")
        seen = self._derived(engine, probes, probing, derived_per_person)
        derived = [one for one in seen if isinstance(one, Probe)]
        pairs = Pairs.of(probes + derived, chosen)
        self._header(engine.name, probes, chosen, seen, pairs, time.monotonic() - started)
        made = set_population(probes, chosen)
        if population is not None:
            self._write_population(population, made, len(probes))
        decisions = {"committed": for_engine(engine.name)}
        try:
            recommended, _, budget = for_goals(pairs, REPORT.rule)
            decisions["recommended"] = recommended
        except NoRecommendation as why:
            recommended, budget = why, None
        decisions |= {"also": also} if also else {}
        decisions = {name: thresholds for name, thresholds in decisions.items() if thresholds.measured}
        self._roc(pairs)
        self._conditions(pairs, seen, decisions)
        self._members(pairs, decisions)
        self._events(pairs, decisions)
        self._others_members(pairs, chosen, decisions)
        self._calibrated_or_not(pairs, decisions, None if made is None else made[1])
        self._several_references(probes + derived, decisions)
        self._calibrations(pairs, chosen)
        self._found(pairs, decisions)
        self._clusters(probes, decisions)
        self._recommendation(pairs, recommended, budget)

    def _write_population(self, path: Path, made: tuple | None, faces: int) -> None:
        if made is None:
            raise CommandError("a population needs two people or more")
        population, _ = made
        population.save(path)
        self.stdout.write(f"population of {faces} faces written to {path} (centre {population.centre:.3f})")

    def _skipped(self, path: Path, reason: str) -> None:
        self.stderr.write(f"skipped {path}: {reason}")

    def _progress(self, done: int, total: int) -> None:
        if done % REPORT.progress_every == 0 or done == total:
            self.stderr.write(f"photos read: {done}/{total}")

    def _derived(self, engine, probes: list[Probe], probing: Probing, per_person: int) -> list:
        seen = []
        for one in derived_probes(engine, probes, list(REPORT.derived), per_person, probing):
            seen.append(one)
            if len(seen) % REPORT.progress_every == 0:
                self.stderr.write(f"derived faces seen: {len(seen)}")
        return seen

    def _header(self, engine: str, probes, chosen, seen, pairs: Pairs, seconds: float) -> None:
        people = {one.person for one in probes if not one.stranger}
        strangers = sum(1 for one in probes if one.stranger)
        missed = sum(1 for one in seen if isinstance(one, Missed))
        self.stdout.write(
            f"engine={engine} people={len(people)} photos={sum(1 for one in probes if not one.stranger)} "
            f"group_strangers={strangers} members={len(chosen)} derived={len(seen) - missed} derived_missed={missed} "
            f"own_faces={int(pairs.genuine.sum())} stranger_pairs={int(pairs.stranger.sum())} seconds={seconds:.0f}"
        )

    def _roc(self, pairs: Pairs) -> None:
        """Flat thresholds (no quality, nobody unsure), in the conditions where faces are hardest."""
        strong_turn, small = REPORT.rule.goals.strong_turn, REPORT.rule.small_face_px
        groups = {
            "all": np.ones(len(pairs.probes), dtype=bool),
            f"head turn >= {strong_turn}": pairs.head_turn >= strong_turn,
            f"narrower than {small} px": np.array([one.quality.width_px < small for one in pairs.probes]),
            "low light": np.array([one.condition.dark for one in pairs.probes]),
        }
        self.stdout.write(
            "\n## ROC: flat thresholds\n\nEach cell: the members' own faces left visible / strangers' faces blurred "
            "(all pairs).\n\n| threshold | " + " | ".join(groups) + " |\n|---|" + "---|" * len(groups)
        )
        for threshold in REPORT.roc_thresholds:
            cells = []
            for rows in groups.values():
                part = pairs.subset(rows)
                reached = part.similarity >= threshold
                visible, blurred = (
                    _share(part.genuine & ~reached, part.genuine),
                    _share(part.stranger & reached, part.stranger),
                )
                cells.append(f"{visible} / {blurred}")
            self.stdout.write(f"| {threshold:.2f} | " + " | ".join(cells) + " |")

    def _conditions(self, pairs: Pairs, seen, decisions: dict[str, Thresholds]) -> None:
        self.stdout.write(
            "\n## The blur decision by condition\n\nThe members' own faces left visible, and strangers' faces "
            "blurred (all pairs), under each decision; where each similarity distribution's edge lies (own faces: "
            "5th percentile, strangers: 97th).\n\n| condition | own faces | own p5 | "
            + " | ".join(f"visible ({name})" for name in decisions)
            + " | stranger pairs | strangers p97 | "
            + " | ".join(f"blurred ({name})" for name in decisions)
            + " |\n|---|---:|---:|"
            + "---:|" * len(decisions)
            + "---:|---:|"
            + "---:|" * len(decisions)
        )
        outcomes = {name: blurred(pairs, thresholds) for name, thresholds in decisions.items()}
        for label, rows in conditions(pairs):
            genuine, stranger = pairs.genuine[rows], pairs.stranger[rows]
            visible = [_share(genuine & ~blur[rows], genuine) for blur in outcomes.values()]
            strangers = [_share(stranger & blur[rows], stranger) for blur in outcomes.values()]
            own_p5 = _percentile(pairs.similarity[rows][genuine], 5)
            strangers_p97 = _percentile(pairs.similarity[rows][stranger], 97)
            self.stdout.write(
                f"| {label} | {int(genuine.sum())} | {own_p5} | "
                + " | ".join(visible)
                + f" | {int(stranger.sum())} | {strangers_p97} | "
                + " | ".join(strangers)
                + " |"
            )
        missed = [one for one in seen if isinstance(one, Missed)]
        for condition in REPORT.derived:
            count = sum(1 for one in missed if one.condition == condition)
            if count:
                self.stdout.write(f"not found again, {condition.label}: {count} (counted nowhere above)")

    def _members(self, pairs: Pairs, decisions: dict[str, Thresholds]) -> None:
        as_taken = pairs.subset(np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool))
        for label, part in (("as taken", as_taken), ("every condition", pairs)):
            self._members_of(label, part, decisions)

    def _members_of(self, label: str, pairs: Pairs, decisions: dict[str, Thresholds]) -> None:
        strong_turn = REPORT.rule.goals.strong_turn
        self.stdout.write(
            f"\n## Per DNP member, {label}\n\n| decision | own faces visible | at a head turn >= {strong_turn} "
            "| strangers blurred per member: mean | worst | the member most often visible |"
        )
        self.stdout.write("|---|---:|---:|---:|---|---|")
        turned = pairs.subset(pairs.head_turn >= strong_turn)
        for name, thresholds in decisions.items():
            blur = blurred(pairs, thresholds)
            found, at_turn = verdict_of(pairs, blur), verdict(turned, thresholds)
            worst = pairs.members[int(np.argmax(found.strangers_blurred))] if found.strangers_blurred.size else "-"
            self.stdout.write(
                f"| {name} | {found.visible}/{found.faces} ({found.visible_share:.2%}) "
                f"| {at_turn.visible}/{at_turn.faces} ({at_turn.visible_share:.2%}) | {found.strangers_mean:.2%} "
                f"| {found.strangers_worst:.2%} ({worst}) | {_most_visible(pairs, blur)} |"
            )

    def _events(self, pairs: Pairs, decisions: dict[str, Thresholds]) -> None:
        """Strangers' faces as taken (a derived copy is the same stranger again) blurred per event, and the DNP
        members' own faces left visible, in events of each size; then by condition."""
        as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
        draws = REPORT.rule.draws
        self.stdout.write(
            f"\n## Events with several DNP members\n\n{draws.count} events of each size drawn from the members "
            "(seeded); strangers' faces as taken blurred per event, and the DNP members' own faces left visible."
            "\n\n| decision | DNP members | strangers blurred per event: mean | worst | own faces visible |"
            "\n|---|---:|---:|---:|---:|"
        )
        outcomes = {name: blurred(pairs, thresholds) for name, thresholds in decisions.items()}
        for name, blur in outcomes.items():
            for size in REPORT.event_sizes:
                found = events_of(pairs, blur, size, as_taken, draws)
                if found is None:
                    self.stdout.write(f"| {name} | {size} | (fewer members than {size}) | - | - |")
                    continue
                self.stdout.write(
                    f"| {name} | {size} | {found.strangers_mean:.2%} | {found.strangers_worst:.2%} "
                    f"| {found.visible}/{found.faces} ({found.visible_share:.2%}) |"
                )
        self._events_by_condition(pairs, outcomes)

    def _others_members(self, pairs: Pairs, chosen: dict[str, Probe], decisions: dict[str, Thresholds]) -> None:
        """The same, where every other person of the set is a member of the event with their reference (not DNP): a
        face a member explains is blurred for no DNP member. Own faces every condition, strangers as taken, no
        reference photo counted as a stranger's face (it is no event's photo)."""
        sizes = [size for size in REPORT.event_sizes if size <= len(pairs.members)]
        references = sorted(str(one.image) for one in chosen.values())
        self.stdout.write(
            "\n## Strangers who are members of the event\n\nEvery other person of the set is a member of the "
            "event with their reference; a face matched to one of them ahead of every DNP member by "
            "`explained_lead` is theirs, blurred for no DNP member.\n\n| decision | others are members "
            "| own faces visible | strangers blurred per member: mean | worst | "
            + " | ".join(f"events of {size}: mean | worst" for size in sizes)
            + " |\n|---|---|---:|---:|---:|"
            + "---:|---:|" * len(sizes)
        )
        as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
        strangers = as_taken & ~np.isin([str(one.image) for one in pairs.probes], references)
        for name, thresholds in decisions.items():
            ways = {
                "no": (blurred(pairs, thresholds), None),
                "yes": (blurred_among_members(pairs, thresholds), functools.partial(explained, pairs, thresholds)),
            }
            for members, (blur, explains) in ways.items():
                found, per_member = verdict_of(pairs, blur), verdict_of(pairs.subset(strangers), blur[strangers])
                events = [events_of(pairs, blur, size, strangers, REPORT.rule.draws, explains) for size in sizes]
                self.stdout.write(
                    f"| {name} | {members} | {found.visible}/{found.faces} ({found.visible_share:.2%}) "
                    f"| {per_member.strangers_mean:.2%} | {per_member.strangers_worst:.2%} | "
                    + " | ".join(f"{one.strangers_mean:.2%} | {one.strangers_worst:.2%}" for one in events)
                    + " |"
                )

    def _calibrated_or_not(self, pairs: Pairs, decisions: dict[str, Thresholds], moves: np.ndarray | None) -> None:
        """Each decision with its blur bars calibrated per reference and with flat bars: own faces visible, strangers
        blurred per member and in events of five, on the faces as taken; own faces visible in every condition."""
        as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
        size = REPORT.rule.goals.event_size
        moved = "" if moves is None else f" (the references' bars move from {moves.min():+.3f} to {moves.max():+.3f})"
        self.stdout.write(
            "\n## Blur bars calibrated per reference\n\nEach reference's bars moved by the set's population "
            f"without the member's own faces (faces/population.py){moved}, or left flat; faces as taken, then own "
            f"faces in every condition.\n\n| decision | bars | own faces visible | strangers blurred per member: mean "
            f"| worst | events of {size}: mean | worst | own faces visible, every condition |"
            "\n|---|---|---:|---:|---:|---:|---:|---:|"
        )
        taken = pairs.subset(as_taken)
        for name, thresholds in decisions.items():
            for bars, calibrated in (("calibrated", True), ("flat", False)):
                # clear_match has no part in the blur decision: left out, a raised bar need not stay under it.
                blur = blurred(pairs, replace(thresholds, calibrated=calibrated, clear_match=None))
                found, everywhere = verdict_of(taken, blur[as_taken]), verdict_of(pairs, blur)
                event = events_of(pairs, blur, size, as_taken, REPORT.rule.draws)
                in_events = "- | -" if event is None else f"{event.strangers_mean:.2%} | {event.strangers_worst:.2%}"
                self.stdout.write(
                    f"| {name} | {bars} | {found.visible}/{found.faces} ({found.visible_share:.2%}) "
                    f"| {found.strangers_mean:.2%} | {found.strangers_worst:.2%} | {in_events} "
                    f"| {everywhere.visible}/{everywhere.faces} ({everywhere.visible_share:.2%}) |"
                )

    def _events_by_condition(self, pairs: Pairs, outcomes: dict[str, np.ndarray]) -> None:
        sizes = [size for size in REPORT.event_sizes if size <= len(pairs.members)]
        columns = [(name, size) for name in outcomes for size in sizes]
        self.stdout.write(
            "\nStrangers' faces blurred per event, mean, by condition:\n\n| condition | "
            + " | ".join(f"{name}, {size} DNP" for name, size in columns)
            + " |\n|---|"
            + "---:|" * len(columns)
        )
        for label, rows in conditions(pairs):
            cells = []
            for name, size in columns:
                found = events_of(pairs, outcomes[name], size, rows, REPORT.rule.draws)
                cells.append(f"{found.strangers_mean:.2%}" if found.strangers_blurred.size else "-")
            self.stdout.write(f"| {label} | " + " | ".join(cells) + " |")

    def _several_references(self, probes: list[Probe], decisions: dict[str, Thresholds]) -> None:
        """The same people, once with one reference each and once with several (the worker takes a member's best
        similarity over their references); none of the several photos counts as their own face in either."""
        many, event_size = REPORT.several_references, REPORT.rule.goals.event_size
        several = reference_sets(probes, many)
        self.stdout.write(
            f"\n## One reference per member, or {many}\n\n{len(several)} people with more than "
            f"{many} photos as taken.\n\n| decision | references | own faces visible "
            f"| strangers blurred per member: mean | worst | strangers blurred, events of {event_size} "
            "| own faces as taken matched |\n|---|---:|---:|---:|---:|---:|---:|"
        )
        if not several:
            self.stdout.write(f"(nobody has more than {many} photos)")
            return
        kept = {person: chosen[0] for person, chosen in several.items()}
        unseen = {one.image for chosen in several.values() for one in chosen}
        for count, chosen in ((1, kept), (many, several)):
            pairs = Pairs.of(probes, chosen).leaving_out(unseen)
            as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
            for name, thresholds in decisions.items():
                blur = blurred(pairs, thresholds)
                found = verdict(pairs, thresholds)
                events = events_of(pairs, blur, event_size, as_taken, REPORT.rule.draws)
                in_events = f"{events.strangers_mean:.2%}" if events is not None else "-"
                matched = people.found(pairs, thresholds, as_taken)
                self.stdout.write(
                    f"| {name} | {count} | {found.visible}/{found.faces} ({found.visible_share:.2%}) "
                    f"| {found.strangers_mean:.2%} | {found.strangers_worst:.2%} | {in_events} "
                    f"| {matched.own}/{matched.faces} ({matched.own / max(matched.faces, 1):.1%}) |"
                )

    def _calibrations(self, pairs: Pairs, chosen: dict[str, Probe]) -> None:
        self.stdout.write(
            "\n## Scores normalised by a cohort of strangers\n\nTwo-fold: each half of the people normalised by "
            "the other half's faces as taken (faces/measurement/calibration.py); a flat threshold on each score, "
            "at the same share of own faces left visible.\n\n| score | own faces visible "
            "| strangers blurred per member: mean | worst |\n|---|---:|---:|---:|"
        )
        for found in compared(pairs, chosen, REPORT.calibration_visible):
            self.stdout.write(
                f"| {found.kind} | {found.visible:.2%} | {found.strangers_mean:.2%} | {found.strangers_worst:.2%} |"
            )

    def _found(self, pairs: Pairs, decisions: dict[str, Thresholds]) -> None:
        """Members found in their own photos (faces/measurement/people.py), by condition; faces matched to a member
        they are not, which must stay none."""
        names = " | ".join(f"{name} ({_match_text(thresholds)})" for name, thresholds in decisions.items())
        self.stdout.write(
            "\n## Members found in their own photos\n\nEach face matched to the member it is most similar to, at "
            "or above its match threshold (`clear_match` for a face seen clearly, else `match`); one reference each. "
            'The rows "also through the set\'s faces" add the faces matched through a face of another photo that the '
            "member's reference matched, seen clearly (faces/links.py), the whole set one event."
            f"\n\n| condition | {names} |\n|---|" + "---:|" * len(decisions)
        )
        every = np.ones(len(pairs.probes), dtype=bool)
        for label, among in [*conditions(pairs), ("every condition", every)]:
            counts = [people.found(pairs, thresholds, among) for thresholds in decisions.values()]
            cells = " | ".join(f"{one.own}/{one.faces} ({one.own / max(one.faces, 1):.1%})" for one in counts)
            self.stdout.write(f"| {label} | {cells} |")
        wrong = [str(people.found(pairs, thresholds, every).wrong) for thresholds in decisions.values()]
        self.stdout.write(f"| faces matched to a member they are not, every condition | {' | '.join(wrong)} |")
        named = [str(people.strangers_named(pairs, thresholds)) for thresholds in decisions.values()]
        self.stdout.write(f"| stranger pairs at the face's match threshold, every condition | {' | '.join(named)} |")
        as_taken = np.array([one.condition == AS_TAKEN for one in pairs.probes], dtype=bool)
        for label, among in (("all, as taken", as_taken), ("every condition", every)):
            counts = [people.found(pairs, thresholds, among, through_faces=True) for thresholds in decisions.values()]
            cells = " | ".join(f"{one.own}/{one.faces} ({one.own / max(one.faces, 1):.1%})" for one in counts)
            self.stdout.write(f"| {label}, also through the set's faces (`link`) | {cells} |")
        wrong = [
            str(people.found(pairs, thresholds, every, through_faces=True).wrong) for thresholds in decisions.values()
        ]
        self.stdout.write(
            f"| faces matched to a member they are not, also through the set's faces | {' | '.join(wrong)} |"
        )

    def _clusters(self, probes: list[Probe], decisions: dict[str, Thresholds]) -> None:
        """Per decision, each event's Unknown clusters by the worker's rule at its `cluster`, beside Immich's DBSCAN
        on the same faces (those the decision judges): BCubed precision / recall / F1 (clusters) in the first
        arrival order, the worst F1 over every order after the slash."""
        arrival_orders = REPORT.rule.clusters.arrival_orders
        self.stdout.write(
            "\n## Unknown clusters\n\nBCubed precision / recall / F1 (clusters) in arrival order "
            f"{arrival_orders[0]}, the worst F1 over {len(arrival_orders)} orders after the slash; "
            "the faces as taken that the decision judges (faces/measurement/people.py)."
        )
        for name, thresholds in decisions.items():
            self.stdout.write(
                f"\n| {name}: event | people, faces | the worker (cluster {thresholds.cluster:.2f}, "
                f"merge {_or_never(thresholds.cluster_merge)}) "
                f"| Immich (DBSCAN {people.IMMICH_MAX_DISTANCE:g}, {people.IMMICH_MIN_FACES} faces) |"
                "\n|---|---:|---|---|"
            )
            orders = [people.cluster_events(probes, thresholds.unsure_norm, seed) for seed in arrival_orders]
            for events in zip(*orders, strict=True):
                worker = [
                    people.bcubed(
                        e.people, people.worker_clusters(e.embeddings, thresholds.cluster, thresholds.cluster_merge)
                    )
                    for e in events
                ]
                immich = [people.bcubed(e.people, people.immich_clusters(e.embeddings)) for e in events]
                self.stdout.write(
                    f"| {events[0].name} | {len(set(events[0].people))}, {len(events[0].people)} "
                    f"| {_scores(worker)} | {_scores(immich)} |"
                )

    def _recommendation(self, pairs: Pairs, recommended: Thresholds | NoRecommendation, budget) -> None:
        if isinstance(recommended, NoRecommendation):
            self.stdout.write(f"\nRecommended: nothing: {recommended}")
            return
        self.stdout.write(f"\nRecommended: {thresholds_line(recommended)}")
        rule, goals = REPORT.rule, REPORT.rule.goals
        lead = highest_lead(pairs, recommended)
        linked = highest_link_pair(pairs, recommended)
        self.stdout.write(
            f"rule: faces/measurement/recommend.py: the fewest own faces visible with strangers blurred <= "
            f"{budget:.1%} per member on average ({rule.budgets.small:.0%} for faces under {rule.small_face_px} px), "
            f"the budget that keeps strangers' faces blurred within {goals.event:.0%} in an event of "
            f"{goals.event_size} DNP members and {goals.worst:.0%} for the worst member, own faces visible within "
            f"{goals.turned:.0%} at a strong "
            f"turn; match above every stranger pair (the highest: "
            f"{pairs.similarity[pairs.stranger].max():.3f}); explained_lead above every lead of another member's "
            f"reference over a member's own, on their own faces (the highest: {_or_dash(lead)}); link above every "
            f"pair of a face with someone else's face seen clearly and matched by their reference (the "
            f"highest: {_or_dash(linked)})"
        )
        self.stdout.write(
            "\n## Two-fold check\n\n| chosen on one half, tried on the other | own faces visible "
            "| strangers blurred per member: mean | worst |\n|---|---:|---:|---:|"
        )
        try:
            checked = two_fold(pairs, REPORT.rule)
        except NoRecommendation as why:
            self.stdout.write(f"(a half recommends nothing: {why})")
            return
        if checked is None:
            self.stdout.write("(too few people: a half has no member)")
        for thresholds, found in checked or []:
            self.stdout.write(
                f"| {thresholds_line(thresholds)} | {found.visible}/{found.faces} ({found.visible_share:.2%}) "
                f"| {found.strangers_mean:.2%} | {found.strangers_worst:.2%} |"
            )


def conditions(pairs: Pairs) -> list[tuple[str, np.ndarray]]:
    """(label, rows) of every condition the report breaks the faces down by."""
    probes = pairs.probes
    as_taken = np.array([one.condition == AS_TAKEN for one in probes])
    width = np.array([one.quality.width_px for one in probes], dtype=np.float32)
    norm = np.array([_or(one.quality.embedding_norm, np.nan) for one in probes], dtype=np.float32)
    score = np.array([one.score for one in probes], dtype=np.float32)
    light = np.array([_or(one.light, np.nan) for one in probes], dtype=np.float32)
    rows = [("all, as taken", as_taken)]
    rows += _buckets("face width, px", width, REPORT.width_edges, as_taken)
    rows += _buckets("head turn", pairs.head_turn, REPORT.turn_edges, as_taken)
    rows += _buckets("detector score", score, REPORT.score_edges, as_taken)
    rows += _buckets("embedding norm", norm, REPORT.norm_edges, as_taken)
    rows += _buckets("face light (grey level)", light, REPORT.light_edges, as_taken)
    rows += [
        (f"shown as {condition.label}", np.array([one.condition == condition for one in probes]))
        for condition in REPORT.derived
    ]
    return rows


def _buckets(name: str, values: np.ndarray, edges: tuple, among: np.ndarray) -> list[tuple[str, np.ndarray]]:
    bounds = [-np.inf, *edges, np.inf]
    result = []
    for low, high in itertools.pairwise(bounds):
        label = (
            f"{name} < {high:g}"
            if low == -np.inf
            else f"{name} >= {low:g}"
            if high == np.inf
            else f"{name} {low:g}-{high:g}"
        )
        result.append((label, among & (values >= low) & (values < high)))
    return result


def thresholds_of(text: str) -> Thresholds:
    """'match=0.4,blur=0.3,cluster=0.45' -> Thresholds(match=0.4, blur=0.3, cluster=0.45)."""
    fields = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in Thresholds.__dataclass_fields__:
            raise CommandError(f"--also: {name.strip()!r} is no field of Thresholds")
        fields[name.strip()] = _value(value.strip())
    return Thresholds(**{"match": None, "blur": None, "cluster": None} | fields)


def _value(text: str) -> float | bool:
    """A field's value: a number, or True / False (`calibrated`)."""
    flags = {"true": True, "false": False}
    return flags[text.lower()] if text.lower() in flags else float(text)


def _scores(scores: list) -> str:
    """The first order's BCubed score, and the worst F1 over the orders."""
    first = scores[0]
    return (
        f"{first.precision:.3f} / {first.recall:.3f} / {first.f1:.3f} ({first.clusters}) "
        f"/ {min(one.f1 for one in scores):.3f}"
    )


def thresholds_line(thresholds: Thresholds) -> str:
    return (
        f"Thresholds(match={thresholds.match:.2f}, blur={thresholds.blur:.2f}, cluster={thresholds.cluster:.2f}, "
        f"poor_face_blur={thresholds.poor_face_blur:.2f}, small_face_px={thresholds.small_face_px}, "
        f"turned_face={thresholds.turned_face:g}, weak_norm={thresholds.weak_norm:g}, "
        f"unsure_norm={thresholds.unsure_norm:g}, cluster_merge={_or_never(thresholds.cluster_merge)}, "
        f"clear_match={_or_never(thresholds.clear_match)}, clear_norm={thresholds.clear_norm:g}, "
        f"explained_lead={_or_never(thresholds.explained_lead)}, calibrated={thresholds.calibrated}, "
        f"link={_or_never(thresholds.link)})"
    )


def _most_visible(pairs: Pairs, blur: np.ndarray) -> str:
    """The member whose own faces `blur` (verdicts.blurred) leaves visible most often: "member (visible/faces)"; "-"
    if nobody's."""
    visible = (pairs.genuine & ~blur).sum(axis=0)
    if not visible.any():
        return "-"
    member = int(np.argmax(visible))
    return f"{pairs.members[member]} ({visible[member]}/{pairs.genuine[:, member].sum()})"


def _match_text(thresholds: Thresholds) -> str:
    clear = thresholds.clear_match
    link = "" if thresholds.link is None else f", link {thresholds.link:.2f}"
    return (
        f"match {thresholds.match:.2f}"
        + ("" if clear is None else f", {clear:.2f} from norm {thresholds.clear_norm:g}")
        + link
    )


def _or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _or_never(merge: float | None) -> str:
    return "None" if merge is None else f"{merge:.2f}"


def _percentile(values: np.ndarray, q: float) -> str:
    return f"{np.percentile(values, q):.3f}" if values.size else "-"


def _share(hits: np.ndarray, among: np.ndarray) -> str:
    total = int(among.sum())
    return f"{int(hits.sum())}/{total} ({hits.sum() / total:.2%})" if total else "-"


def _or(value, default):
    return default if value is None else value
