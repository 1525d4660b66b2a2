"""What becomes of a message, decided before anything is written.

The loop asks twice: before running a job (has the message crashed the worker
already, is it a job at all?) and after a try that raised. Each answer is an
Outcome the loop then carries out in one place. Nothing here touches the database,
so every rule of docs/ARCHITECTURE.md §4 that decides a message's fate is tested
without one (tests/unit/test_outcome.py).
"""

from dataclasses import dataclass
from enum import StrEnum

from jobqueue.errors import PermanentJobError, RowGone, causes
from jobqueue.outage import Dependency, dependency_down


@dataclass(frozen=True)
class Retries:
    # Three tries (§4): a passing fault has two more chances, a failing job is archived and reported soon after;
    # a message read more often than this crashed the worker.
    max_tries: int = 3
    # The reader waits out a failed try's backoff before it reads on (doubling from WORKER_RETRY_BACKOFF_S): at
    # most a minute of the queue's time per failure.
    max_backoff_s: float = 60.0
    # A try that lost a conflict with another transaction is read again after this: long enough for the
    # transaction that won to commit, short enough that nobody waits for it.
    conflict_delay_s: float = 0.5


# SQLSTATEs of a transaction PostgreSQL aborted to settle a conflict with another one: a deadlock (40P01), a
# serialization failure (40001). Neither says anything about the job: tried again, it goes through.
CONFLICTS = frozenset({"40P01", "40001"})


RETRIES = Retries()


class Action(StrEnum):
    RUN = "run"
    DELETE = "delete"  # nothing to do: the row it names is gone
    RETRY = "retry"  # visible again after `delay_s`, read before any newer message
    ARCHIVE = "archive"
    WAIT_OUT = "wait_out"  # an outage of `waiting_for`: given back uncounted, the reader waits (jobqueue/outage.py)
    GIVE_BACK = "give_back"  # lost a conflict with another transaction: visible again, uncounted, after `delay_s`


@dataclass(frozen=True)
class Outcome:
    action: Action
    # The archive's reason, or the log line's outcome for a delete.
    reason: str = ""
    detail: str = ""
    delay_s: float = 0.0
    # A final failure: reported to Sentry as well as logged.
    final: bool = False
    # With WAIT_OUT: the dependency that is down.
    waiting_for: Dependency | None = None


RUN = Outcome(Action.RUN)


def before_running(read_ct: int, problem: PermanentJobError | None, retries: Retries = RETRIES) -> Outcome:
    """`problem`: why the message is not a runnable job (not JSON, unknown job, bad id), if it is not."""
    if read_ct > retries.max_tries:
        # Read more often than it could have failed: it crashed the worker. Decided before
        # anything else about the message, so nothing in it can crash the worker again.
        return Outcome(Action.ARCHIVE, "crashed_worker", f"read {read_ct} times", final=True)
    if problem is not None:
        return Outcome(Action.ARCHIVE, problem.reason, str(problem))
    return RUN


def after_error(error: Exception, read_ct: int, retry_backoff_s: float, retries: Retries = RETRIES) -> Outcome:
    """The try numbered `read_ct` raised `error` (and was rolled back). An outage of something the job depends on
    is not its failure, whatever its try."""
    if isinstance(error, RowGone):
        return Outcome(Action.DELETE, "row_gone", str(error))
    if isinstance(error, PermanentJobError):
        return Outcome(Action.ARCHIVE, error.reason, str(error))
    summary = f"{type(error).__name__}: {error}"
    if (dependency := dependency_down(error)) is not None:
        return Outcome(Action.WAIT_OUT, "outage", summary, waiting_for=dependency)
    if lost_a_conflict(error):
        return Outcome(Action.GIVE_BACK, "conflict", summary, delay_s=retries.conflict_delay_s)
    if read_ct >= retries.max_tries:
        return Outcome(Action.ARCHIVE, "failed", summary, final=True)
    return Outcome(Action.RETRY, "failed_try", summary, delay_s=backoff(read_ct, retry_backoff_s, retries))


def lost_a_conflict(error: BaseException) -> bool:
    """Whether PostgreSQL aborted the try to settle a conflict with another transaction (`CONFLICTS`), looking
    through what caused `error` (Django wraps psycopg's error)."""
    return any(getattr(cause, "sqlstate", None) in CONFLICTS for cause in causes(error))


def backoff(tries: int, retry_backoff_s: float, retries: Retries = RETRIES) -> float:
    """Doubling from `retry_backoff_s` after each failed try, at most `retries.max_backoff_s`."""
    return min(retry_backoff_s * 2 ** (tries - 1), retries.max_backoff_s)
