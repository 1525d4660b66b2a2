"""Job handlers, registered by job name.

A handler takes the parsed message and returns a dict of extra log fields
(faces, files, ...) or None. It runs inside the transaction that deletes the
message, so its row writes commit with that delete or not at all.
"""

from collections.abc import Callable
from dataclasses import dataclass

Handler = Callable[[dict], dict | None]


@dataclass(frozen=True)
class JobType:
    name: str
    handler: Handler
    # The message field that names the row the job acts on ("photo_id", ...).
    id_field: str


_jobs: dict[str, JobType] = {}


def register(name: str, *, id_field: str) -> Callable[[Handler], Handler]:
    def decorate(handler: Handler) -> Handler:
        _jobs[name] = JobType(name, handler, id_field)
        return handler

    return decorate


def lookup(name: str) -> JobType | None:
    return _jobs.get(name)
