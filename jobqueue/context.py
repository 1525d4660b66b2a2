"""What a handler gets beside its payload: the try it runs in (procrastinate's `pass_context`), and the locks it
may hold until that try's transaction ends.

A handler is `handler(payload, ctx)`. Long work calls `ctx.checkpoint()` between frames and before
it writes to storage: it raises DatabaseLost once the try's lease is no longer its own (the server
closed its session, so another reader may be on its message), and the try stops there instead of
finishing beside its successor. `ctx.fields` are the try's log fields (msg_id, try, job, the ids).
`ctx.resources` are what the apps' startup work built once for the worker (registry.register_startup), by
name: the faces app's engine is `ctx.resources["face_engine"]` (Immich's model cache: loaded once, handed to
every request).

Work on one scope (an event, say) from several readers takes `hold_until_commit`: a transaction-scoped advisory
lock (pg_advisory_xact_lock) on (namespace, hashtext(key)). The second transaction that asks waits for the first
to commit or roll back, then its next statement sees what the first committed. Each caller picks its own int4
namespace; jobqueue's are in jobqueue/queries.py.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from django.db import connection

from jobqueue import queries


def _nothing_to_lose() -> None:
    """The checkpoint of work outside a worker (a shell, a test, a bench): it holds no lease."""


@dataclass(frozen=True)
class JobContext:
    job: str
    msg_id: int | None = None
    # pgmq's read_ct: 1 on the first try.
    try_number: int = 1
    fields: Mapping = field(default_factory=lambda: MappingProxyType({}))
    resources: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    _checkpoint: Callable[[], None] = _nothing_to_lose

    def checkpoint(self) -> None:
        """DatabaseLost when the try's lease is gone; else nothing."""
        self._checkpoint()

    @classmethod
    def outside_worker(cls, job: str, **resources: object) -> "JobContext":
        """A context for running a handler by hand: no message, no lease to lose, the resources given."""
        return cls(job=job, resources=MappingProxyType(resources))


def hold_until_commit(namespace: int, key: str) -> None:
    """Wait for, then hold until the current transaction ends, the lock on `key` in `namespace`.

    Only inside a transaction (a handler runs in one): in autocommit the lock would end with its own statement.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("a transaction-scoped lock outside a transaction is released at once")
    with connection.cursor() as cursor:
        cursor.execute(queries.XACT_LOCK, [namespace, str(key)])
