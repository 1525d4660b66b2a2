"""How long each orphan (a derived object no row points at) lives, sample by sample."""

from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.services import wall_clock


@dataclass
class OrphanWatch:
    """Each orphan from the first sample that shows it to the first that does not."""

    log: Path | None = None  # each orphan's first and last sighting, for reading next to the workers' logs
    open: dict[str, float] = field(default_factory=dict)  # key -> first seen (monotonic)
    lifetimes: list[tuple[float, str]] = field(default_factory=list)
    samples: int = 0
    skipped: int = 0  # samples a fault made impossible (S3 or PostgreSQL down)
    first: float | None = None
    last: float | None = None

    def observe(self, orphans: set[str], now: float) -> None:
        self.samples += 1
        self.first, self.last = self.first or now, now
        lines = []
        for key in sorted(orphans - self.open.keys()):
            self.open[key] = now
            lines.append(f"orphan_seen key={key}")
        for key in [key for key in self.open if key not in orphans]:
            self.lifetimes.append((now - self.open.pop(key), key))
            lines.append(f"orphan_gone key={key} lived_s={self.lifetimes[-1][0]:.1f}")
        if self.log is not None and lines:
            stamp = wall_clock()
            with open(self.log, "a") as out:
                out.writelines(f"{stamp} {line}\n" for line in lines)

    def seen(self) -> int:
        return len(self.lifetimes) + len(self.open)

    def mean_interval(self) -> float:
        return (self.last - self.first) / (self.samples - 1) if self.samples > 1 else 0.0

    def longest(self, now: float) -> tuple[float, str]:
        """(seconds, key) of the longest-lived orphan, those still there counted up to `now`."""
        return max(self.lifetimes + [(now - first, key) for key, first in self.open.items()], default=(0.0, ""))
