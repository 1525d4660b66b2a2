"""What a chaos run found: the table bench/chaos.py prints, and the same as JSON."""

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.chaos.config import FAULT_KINDS, ChaosConfig
from tests.chaos.invariants import Invariant

# The row a run that did not drain the queue before its timeout adds to the invariants.
DRAIN_TIMEOUT = "drained before the timeout"


@dataclass
class Figures:
    """The run's measured figures, each also said in a note (the notes' words: see where each is set)."""

    clips: int = 0
    clip_jobs_ended: dict[str, int] = field(default_factory=dict)
    refused_clips: int = 0
    refused_jobs_ended: dict[str, int] = field(default_factory=dict)
    media_faces_checked: int = 0
    media_files_checked: int = 0
    still_files_one_picture: int = 0
    rendered_still_files: int = 0
    dnp_change_photos: int | None = None  # None: the change was not made
    dnp_hide_committed_s: float | None = None  # from the send; None: never
    dnp_longest_exposure_s: float = 0.0
    dnp_exposed_past_window: int = 0
    readers_at_once_tries: int = 0
    readers_at_once_photos: int = 0
    overlapping_pairs: int = 0
    serialised_pairs: int = 0
    cut_off_pairs: int = 0  # overlapping pairs one of whose tries had lost its session
    cut_off_folders: int = 0  # the render folders those tries wrote in
    edge_cut_faces: int = 0
    edge_cut_files_checked: int = 0
    edge_cut_not_detected: int = 0
    edge_cut_not_marked: int = 0
    storage_samples: int = 0
    storage_samples_skipped: int = 0


@dataclass
class Report:
    config: ChaosConfig
    jobs: int = 0
    handled: int = 0
    faults: Counter = field(default_factory=Counter)
    retries: int = 0
    resent_from_archive: int = 0
    archived: Counter = field(default_factory=Counter)
    # Of them, archived because storage or the database was down (none, since jobqueue/outage.py).
    archived_for_outage: int = 0
    # When each S3 outage of the run ended (epoch seconds): the server answering again.
    storage_returns: list[float] = field(default_factory=list)
    invariants: dict[Invariant, int] = field(default_factory=dict)
    drain_timed_out: bool = False
    notes: list[str] = field(default_factory=list)
    figures: Figures = field(default_factory=Figures)
    orphans_seen: int = 0
    orphan_longest_s: float = 0.0
    final_wait_s: float = 0.0
    # Per reader kill that left a message in flight: seconds until a reader read it again (None: never seen).
    abandoned_waits: list[float | None] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return sum(self.invariants.values()) + self.drain_timed_out

    def worst_abandoned_wait(self) -> str:
        waits = [wait for wait in self.abandoned_waits if wait is not None]
        return f"{max(waits):.1f}" if waits else "-"

    def sweep_settings(self) -> str:
        return f"WORKER_SWEEP_RETRY_S={self.config.sweep_retry_s:g}, WORKER_FULL_SWEEP_S={self.config.full_sweep_s:g}"

    def readers(self) -> str:
        readers = self.config.readers
        if readers == 1:
            return "1 (one reader slot)"
        return f"{readers} (WORKER_READER_SLOTS={readers}, WORKER_VISIBILITY_TIMEOUT_S={self.config.visibility_s})"

    def table(self, seconds: float) -> str:
        rows = self.counts_rows()
        rows += [f"| archived: {reason} | {count} |" for reason, count in sorted(self.archived.items())]
        rows += [f"| archived because of an outage | {self.archived_for_outage} |"]
        rows += ["", "| invariant | violations |", "|---|---:|"]
        rows += [f"| {DRAIN_TIMEOUT} | 1 |"] if self.drain_timed_out else []
        rows += [f"| {invariant.value} | {count} |" for invariant, count in self.invariants.items()]
        rows += ["", f"total violations: {self.violations} in {seconds:.0f} s"]
        rows += [f"note: {note}" for note in self.notes]
        return "\n".join(rows)

    def counts_rows(self) -> list[str]:
        return [
            "| what | count |",
            "|---|---:|",
            f"| jobs enqueued by the seed | {self.jobs} |",
            f"| jobs handled (fan-out and re-sends included; retries not) | {self.handled} |",
            *(f"| fault: {kind} | {self.faults[kind]} |" for kind in FAULT_KINDS),
            f"| failed tries (retried) | {self.retries} |",
            f"| re-sent from archive | {self.resent_from_archive} |",
            f"| worker sweep settings | {self.sweep_settings()} |",
            f"| orphans seen (rows read and bucket listed every {self.config.sample_s:g} s) | {self.orphans_seen} |",
            f"| orphan survived at most, s | {self.orphan_longest_s:.1f} |",
            f"| idle wait after the drain for the workers' sweeps, s | {self.final_wait_s:.1f} |",
            f"| readers at once | {self.readers()} |",
            f"| reader kills that left a message in flight (read again) | {len(self.abandoned_waits)} "
            f"({sum(wait is not None for wait in self.abandoned_waits)}) |",
            f"| abandoned message waited at most before another read, s | {self.worst_abandoned_wait()} |",
        ]

    def as_json(self, seconds: float) -> dict:
        return {
            "seed": self.config.seed,
            "config": asdict(self.config),
            "seconds": round(seconds, 1),
            "total_violations": self.violations,
            "drained_before_timeout": not self.drain_timed_out,
            "invariants": {
                invariant.name: {"display": invariant.value, "violations": count}
                for invariant, count in self.invariants.items()
            },
            "faults": {kind: self.faults[kind] for kind in FAULT_KINDS},
            "archived": dict(sorted(self.archived.items())),
            "archived_for_outage": self.archived_for_outage,
            "jobs": {"seeded": self.jobs, "handled": self.handled, "retried": self.retries},
            "resent_from_archive": self.resent_from_archive,
            "orphans": {"seen": self.orphans_seen, "survived_at_most_s": round(self.orphan_longest_s, 1)},
            "idle_wait_after_drain_s": round(self.final_wait_s, 1),
            "abandoned_waits_s": self.abandoned_waits,
            "figures": asdict(self.figures),
            "notes": self.notes,
        }

    def write_json(self, path: Path, seconds: float) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.as_json(seconds), indent=2) + "\n")
