"""What a handler raises to tell the consumer how a try ended.

Any other exception is a failed try: rolled back, retried after a backoff, and
archived on the third failure.
"""

from collections.abc import Iterator


def causes(error: BaseException | None) -> Iterator[BaseException]:
    """`error`, then what caused it, each once: what the consumer reads a try's end from (a library's error is
    often wrapped in Django's or in the job's own)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


class PermanentJobError(Exception):
    """Retrying cannot help: the message is archived on its first try."""

    reason = "permanent"


class BadMessage(PermanentJobError):
    reason = "bad_message"


class UnknownJob(PermanentJobError):
    reason = "unknown_job"


class MissingObject(PermanentJobError):
    """An upload object the job needs is not in storage."""

    reason = "missing_object"


class RowGone(Exception):
    """The row the message names no longer exists: nothing to do, the message is deleted."""
