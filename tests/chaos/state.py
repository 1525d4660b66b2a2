"""What a chaos run keeps while it goes, grouped by who writes it: the faults, the monitors, the seed."""

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.config import ChaosConfig
from tests.chaos.orphans import OrphanWatch
from tests.chaos.report import Report
from tests.chaos.seed import Seeded
from tests.chaos.services import Services
from tests.chaos.worker_logs import Try
from tests.chaos.workers import Fleet


@dataclass
class Abandoned:
    """The message a killed reader had in flight: when it was killed, and when a reader read it again."""

    worker: str
    msg_id: int
    read_ct: int
    read_at: float  # when the killed reader read it (pgmq's last_read_at)
    photo_id: str | None
    killed_at: float
    read_again_at: float | None = None
    gone: bool = False  # deleted between two looks: the read is found in the logs afterwards


@dataclass
class SweepRun:
    process: object  # subprocess.Popen
    log: Path
    mid_job: bool  # a worker held a photo's row lock when it started
    event: str | None  # --event: the event of the photo a worker had in flight; None: all of storage


@dataclass
class FaultRecord:
    """The faults injected: when each ran (epoch seconds; how many: Report.faults), the messages kills left in
    flight, and the operator's sweep_orphans runs."""

    # Which reader a kill picks (readers > 1): its own random stream, so that the fault plan and gaps drawn
    # from the run's rng do not depend on how many readers were busy at each kill.
    kill_rng: random.Random
    windows: list[tuple[str, float, float]] = field(default_factory=list)
    abandoned: list[Abandoned] = field(default_factory=list)
    killed_tries: list[Try] = field(default_factory=list)
    sweeps: list[SweepRun] = field(default_factory=list)
    sweepers: list[threading.Thread] = field(default_factory=list)


@dataclass
class Watch:
    """What the monitors saw while the run went on."""

    orphans: OrphanWatch
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    early_publications: int = 0
    # (photo id, why) of each multi-frame upload seen published as itself or rendered into a file of another kind.
    media_exposed: set[tuple[str, str]] = field(default_factory=set)
    # The ETag of each derived object when a committed row was first seen naming it; the named objects whose
    # bytes changed since (a try cut off from its session, still uploading, over a committed render).
    named_etags: dict[str, str] = field(default_factory=dict)
    replaced_named: set[str] = field(default_factory=set)

    def start(self, target, *args) -> None:
        self.threads.append(threading.Thread(target=target, args=args, daemon=True))
        self.threads[-1].start()


@dataclass
class Chaos:
    """One run: its configuration and services, and the state each part of it keeps."""

    config: ChaosConfig
    services: Services
    fleet: Fleet
    rng: random.Random
    faults: FaultRecord
    watch: Watch
    report: Report
    seeded: Seeded = field(default_factory=Seeded)

    @classmethod
    def create(cls, config: ChaosConfig, folder: Path) -> "Chaos":
        services = Services(config, Path(folder))
        return cls(
            config,
            services,
            Fleet(services),
            random.Random(config.seed),
            FaultRecord(random.Random(f"kill-{config.seed}")),
            Watch(OrphanWatch(log=services.folder / "orphans.log")),
            Report(config),
        )
