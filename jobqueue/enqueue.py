"""Send a job from inside a handler: it commits with the handler's transaction."""

import json
from collections.abc import Iterable

from django.db import connection

from jobqueue import queries
from jobqueue.context import hold_until_commit
from jobqueue.privacy_lane import PRIVACY_RENDER_MARK


def enqueue(payload: dict) -> int:
    with connection.cursor() as cursor:
        return queries.send(cursor, json.dumps(payload))


def enqueue_unless_waiting(job: str, id_field: str, ids: Iterable, *, first: bool = False) -> int:
    """Send {"job": job, id_field: id} for each id (in order, once) unless one is already waiting; with
    `first`, marked to be read before ordinary messages (jobqueue.privacy_lane.PRIVACY_RENDER_MARK).

    A marked send is not kept back by an unmarked message waiting (it would be read too late); an
    unmarked one is by either.

    Waiting: in the queue and never read (read_ct = 0). A message already read does not count: it is
    in flight or hidden for a retry, and its handler may have read the state from before the change this
    send is for. One statement for the whole batch (queries.SEND_UNLESS_WAITING), served by the waiting
    index, never by a scan of the queue or its archive. Returns how many were sent.

    Two transactions fanning out over the same ids at once would each see nothing waiting: take
    `lock_fan_out` first.
    """
    unique = list(dict.fromkeys(str(value) for value in ids))
    if not unique:
        return 0
    with connection.cursor() as cursor:
        return queries.send_unless_waiting(cursor, job, id_field, unique, PRIVACY_RENDER_MARK if first else {})


def lock_fan_out(job: str, scope) -> None:
    """Serialize fan-outs of `job` over one scope (an event's photos, say) until this transaction ends.

    The second fan-out waits for the first to commit, then sees its messages waiting and skips them.
    """
    hold_until_commit(queries.FAN_OUT_LOCK, f"{job}:{scope}")
