"""What a chaos run is given: its seed, its size, its fault plan's pace and the workers' settings."""

from dataclasses import dataclass

FAULT_KINDS = ("kill", "terminate_backend", "pg_restart", "s3_outage", "second_worker", "sweep_orphans")


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    events: int = 4
    photos_per_event: int = 20
    faults: int = 14
    fault_gap_s: tuple[float, float] = (2.0, 6.0)
    timeout_s: float = 1500.0
    # The workers' WORKER_SWEEP_RETRY_S and WORKER_FULL_SWEEP_S: short, so orphan lifetimes mean something.
    sweep_retry_s: float = 5.0
    full_sweep_s: float = 30.0
    # How often the storage monitor lists the bucket and reads the rows.
    sample_s: float = 0.5
    # Readers at once (WORKER_READER_SLOTS); 1: the one reader, the workers' defaults untouched.
    readers: int = 1
    # With more than one reader, their WORKER_VISIBILITY_TIMEOUT_S: how soon a killed reader's message comes back.
    visibility_s: int = 6
    # Each worker's ORT_INTRA_OP_THREADS: more than one runs a job's small passes and faces side by side.
    threads: int = 1
