"""Locks a handler holds until its transaction ends: work on one scope (an event, say) from several readers.

A transaction-scoped advisory lock (pg_advisory_xact_lock) on (namespace, hashtext(key)): the second
transaction that asks waits for the first to commit or roll back, then its next statement sees what the
first committed. Each caller picks its own int4 namespace; jobqueue's are in jobqueue/queries.py.
"""

from django.db import connection

from jobqueue import queries


def hold_until_commit(namespace: int, key: str) -> None:
    """Wait for, then hold until the current transaction ends, the lock on `key` in `namespace`.

    Only inside a transaction (a handler runs in one): in autocommit the lock would end with its own statement.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("a transaction-scoped lock outside a transaction is released at once")
    with connection.cursor() as cursor:
        cursor.execute(queries.XACT_LOCK, [namespace, str(key)])
