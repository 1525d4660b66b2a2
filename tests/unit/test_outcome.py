"""The outcome of a message, decided without a database (jobqueue/outcome.py)."""

import pytest
from django.db import OperationalError

from jobqueue import outcome
from jobqueue.errors import BadMessage, MissingObject, PermanentJobError, RowGone, UnknownJob
from jobqueue.outcome import Action


def test_a_readable_job_on_its_first_tries_runs():
    for read_ct in (1, 2, 3):
        assert outcome.before_running(read_ct, None) is outcome.RUN


def test_a_message_read_more_than_three_times_is_archived_as_a_crasher_before_anything_else():
    # Even an unreadable one: nothing in it is looked at again.
    for problem in (None, BadMessage("not JSON")):
        decided = outcome.before_running(4, problem)
        assert (decided.action, decided.reason, decided.final) == (Action.ARCHIVE, "crashed_worker", True)
        assert decided.detail == "read 4 times"


@pytest.mark.parametrize(
    ("problem", "reason"), [(BadMessage("no 'job' string"), "bad_message"), (UnknownJob("unknown job"), "unknown_job")]
)
def test_what_is_not_a_job_is_archived_on_its_first_try_without_a_report(problem, reason):
    decided = outcome.before_running(1, problem)
    assert (decided.action, decided.reason, decided.detail, decided.final) == (
        Action.ARCHIVE,
        reason,
        str(problem),
        False,
    )


def test_a_missing_row_deletes_the_message():
    decided = outcome.after_error(RowGone("photo 7 does not exist"), 1, 5.0)
    assert (decided.action, decided.reason, decided.detail) == (Action.DELETE, "row_gone", "photo 7 does not exist")


@pytest.mark.parametrize("error", [MissingObject("no upload"), PermanentJobError("no"), BadMessage("bad id")])
def test_a_permanent_error_archives_on_any_try_with_its_own_reason(error):
    for read_ct in (1, 2):
        decided = outcome.after_error(error, read_ct, 5.0)
        assert (decided.action, decided.reason, decided.final) == (Action.ARCHIVE, error.reason, False)


def test_a_failed_try_is_retried_with_a_doubling_backoff():
    first = outcome.after_error(ValueError("boom"), 1, 5.0)
    second = outcome.after_error(OperationalError("statement timeout"), 2, 5.0)
    assert (first.action, first.delay_s, first.detail) == (Action.RETRY, 5.0, "ValueError: boom")
    assert (second.action, second.delay_s) == (Action.RETRY, 10.0)
    assert second.detail == "OperationalError: statement timeout"


def test_the_third_failure_archives_as_failed_and_is_reported():
    decided = outcome.after_error(ValueError("boom"), 3, 5.0)
    assert (decided.action, decided.reason, decided.detail, decided.final) == (
        Action.ARCHIVE,
        "failed",
        "ValueError: boom",
        True,
    )


def test_the_backoff_stops_growing_at_a_minute():
    assert [outcome.backoff(tries, 5.0) for tries in (1, 2, 3, 4, 5)] == [5.0, 10.0, 20.0, 40.0, 60.0]
    assert outcome.backoff(30, 5.0) == outcome.RETRIES.max_backoff_s


def test_an_outage_is_waited_out_whatever_the_try_and_a_job_s_own_error_is_not():
    import botocore.exceptions

    down = botocore.exceptions.EndpointConnectionError(endpoint_url="http://r2")
    for read_ct in (1, 3):
        decided = outcome.after_error(down, read_ct, 0.01)
        assert (decided.action, decided.reason, decided.final) == (Action.WAIT_OUT, "outage", False)
        assert decided.waiting_for.name == "storage"
    assert outcome.after_error(MissingObject("no object"), 1, 0.01).action is Action.ARCHIVE
    assert outcome.after_error(RuntimeError("a bug"), 3, 0.01).action is Action.ARCHIVE


def test_a_try_that_lost_a_conflict_is_given_back_uncounted_whatever_its_try():
    """A deadlock or a serialization failure, as Django raises it (psycopg's error its cause)."""
    import psycopg.errors

    for cause in (psycopg.errors.DeadlockDetected("deadlock detected"), psycopg.errors.SerializationFailure("no")):
        try:
            raise OperationalError(str(cause)) from cause
        except OperationalError as error:
            for read_ct in (1, 3):
                decided = outcome.after_error(error, read_ct, 5.0)
                assert (decided.action, decided.reason, decided.final) == (Action.GIVE_BACK, "conflict", False)
                assert decided.delay_s == outcome.RETRIES.conflict_delay_s
    assert outcome.after_error(OperationalError("statement timeout"), 3, 5.0).action is Action.ARCHIVE
