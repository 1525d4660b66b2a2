"""The workers' own log lines, read back with tests.support.log_helpers.parse: every try that came to an end."""

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from jobqueue.messages import is_uuid
from tests.support.log_helpers import parse

# The lines that end a try; each carries `ms`, measured on the monotonic clock from just after the read.
TRY_ENDS = {"job_done", "job_retry", "job_archived", "db_lost"}
# Log stamps (ms, truncated) against `ms` (rounded): two tries this close count as back to back.
CLOCK_SLACK_S = 0.005
# Faults that end every reader's database session at once: a try running then loses its photo's row lock.
SESSION_FAULTS = ("terminate_backend", "pg_restart")


@dataclass
class Try:
    """One reader's try of one message, from its start to its end (epoch seconds, this host's clock)."""

    worker: str  # the worker's log name: one process
    msg_id: str
    photo_id: str
    start: float
    end: float
    how: str  # job_done, job_retry, job_archived, db_lost (session lost mid-try), killed
    lost_session: bool = False  # its session (so its photo's row lock) ended before the try did


def worker_log_lines(logs: list[Path]) -> list[dict]:
    """Every event line of every worker, each with its worker's log name as `worker`, in time order."""
    lines = []
    for log in logs:
        for text in log.read_text(errors="replace").splitlines():
            fields = parse(text)
            if "event" in fields and "asctime" in fields:
                lines.append({**fields, "worker": log.name})
    return sorted(lines, key=lambda fields: fields["asctime"])


def log_time(fields: dict) -> float:
    """A line's stamp (local time, ms truncated; time.time() in the worker) as epoch seconds."""
    return datetime.strptime(fields["asctime"], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def try_start(fields: dict) -> float:
    """When the try a line ends began: the line's stamp less its `ms`."""
    return log_time(fields) - int(fields["ms"]) / 1000


def ended(lines: list[dict], **match: str) -> list[dict]:
    """The job_done and job_archived lines whose fields hold `match`."""
    return [
        fields
        for fields in lines
        if fields["event"] in {"job_done", "job_archived"} and all(fields.get(k) == v for k, v in match.items())
    ]


def photo_tries(lines: list[dict], windows: list[tuple[str, float, float]]) -> list[Try]:
    """Every try on a photo that came to an end, from the workers' own end-of-try lines (the start is the line's
    stamp less `ms`). A try whose database session ended while it ran (a `db_lost` line naming it, or a try
    running across a terminate_backend or PostgreSQL restart in `windows`) lost its photo's row lock before it
    ended."""
    tries = []
    for fields in lines:
        if fields["event"] not in TRY_ENDS or "ms" not in fields or not is_uuid(fields.get("photo_id", "")):
            continue
        start, end = try_start(fields), log_time(fields)
        lost = fields["event"] == "db_lost" or any(
            kind in SESSION_FAULTS and start < fault_end and fault_start < end
            for kind, fault_start, fault_end in windows
        )
        photo_id = fields["photo_id"].lower()
        tries.append(Try(fields["worker"], fields["msg_id"], photo_id, start, end, fields["event"], lost))
    return tries
