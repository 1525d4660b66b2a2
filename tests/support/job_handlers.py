"""Handlers the consumer tests register: each one a behaviour the loop must survive."""

import os
import signal
import threading
import time
from pathlib import Path

from django.db import connection, transaction

from faces.models import Event
from jobqueue.errors import MissingObject, RowGone
from jobqueue.registry import register

# In-process tests read this: (job, photo_id) per handler call, in order.
calls: list[tuple[str, str]] = []
# photo_id -> failures still to produce, for test_flaky.
flaky_failures: dict[str, int] = {}
# photo_id -> deadlocks still to lose, for test_deadlock; and the rival sessions it started, for the test to join.
deadlocks_to_lose: dict[str, int] = {}
rivals: list[threading.Thread] = []


def _called(name: str, payload: dict) -> None:
    calls.append((name, payload["photo_id"]))


@register("test_record", id_field="photo_id")
def record(payload, ctx):
    """Writes one committed row per success, named after the process that did it."""
    _called("test_record", payload)
    time.sleep(payload.get("seconds", 0))
    Event.objects.create(name=f"done {payload['photo_id']} pid={os.getpid()}")
    return {"files": 0}


@register("test_first", id_field="photo_id", first=True)
def first(payload, ctx):
    """A job registered first-class (a privacy job): read before ordinary messages. With `seconds`, it runs that
    long, then writes a row naming its try."""
    _called("test_first", payload)
    flaky(payload, ctx)
    if "seconds" in payload:
        time.sleep(payload["seconds"])
        Event.objects.create(name=f"first done {payload['photo_id']} try={ctx.try_number}")


@register("test_first_crash", id_field="photo_id", first=True)
def first_crash(payload, ctx):
    """A privacy job that kills its worker mid-try (test_crash)."""
    return crash(payload, ctx)


@register("test_long", id_field="photo_id")
def long(payload, ctx):
    """Runs `seconds`, calling its checkpoint every 50 ms as a clip's frames do; then writes a row naming its try."""
    _called("test_long", payload)
    deadline = time.monotonic() + payload.get("seconds", 1.0)
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.05)
    Event.objects.create(name=f"long done {payload['photo_id']} try={ctx.try_number}")


@register("test_fail", id_field="photo_id")
def fail(payload, ctx):
    _called("test_fail", payload)
    Event.objects.create(name="written by a failing try")
    raise RuntimeError("the handler failed on purpose")


@register("test_flaky", id_field="photo_id")
def flaky(payload, ctx):
    _called("test_flaky", payload)
    left = flaky_failures.get(payload["photo_id"], 0)
    if left:
        flaky_failures[payload["photo_id"]] = left - 1
        raise RuntimeError("not this time")


@register("test_deadlock", id_field="photo_id")
def deadlock(payload, ctx):
    """Loses a real deadlock (SQLSTATE 40P01) on each of its first `deadlocks_to_lose` tries: it locks one event's
    row, a rival session the other's, and each then asks for the other's. PostgreSQL aborts the session whose
    deadlock check runs first: the try's (a second after its wait begins), the rival's being put off (`_rival`).
    Then it records its try number."""
    _called("test_deadlock", payload)
    mine, theirs = payload["events"]
    if deadlocks_to_lose.get(payload["photo_id"], 0):
        deadlocks_to_lose[payload["photo_id"]] -= 1
        Event.objects.select_for_update().get(id=mine)
        holding = threading.Event()
        rivals.append(threading.Thread(target=_rival, args=(theirs, mine, holding)))
        rivals[-1].start()
        holding.wait()
        Event.objects.select_for_update().get(id=theirs)
    Event.objects.create(name=f"deadlocked {payload['photo_id']} try={ctx.try_number}")


def _rival(first: str, then: str, holding: threading.Event) -> None:
    """Another session: locks `first`, says so, and asks for `then`. Its own deadlock check put off for a minute,
    it is never the one aborted, however the two sessions are scheduled."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL deadlock_timeout = '60s'")
            Event.objects.select_for_update().get(id=first)
            holding.set()
            Event.objects.select_for_update().get(id=then)
    finally:
        connection.close()


@register("test_missing", id_field="photo_id")
def missing(payload, ctx):
    _called("test_missing", payload)
    raise MissingObject(f"no object events/x/uploads/{payload['photo_id']}.jpg")


@register("test_gone", id_field="photo_id")
def gone(payload, ctx):
    _called("test_gone", payload)
    raise RowGone(f"photo {payload['photo_id']} does not exist")


@register("test_crash", id_field="photo_id")
def crash(payload, ctx):
    """Kills the worker mid-job; with `once_marker`, only the first time."""
    marker = payload.get("once_marker")
    if marker and Path(marker).exists():
        Event.objects.create(name=f"survived {payload['photo_id']}")
        return None
    if marker:
        Path(marker).touch()
    os.kill(os.getpid(), signal.SIGKILL)
    return None


@register("test_fail_then_slow", id_field="photo_id")
def fail_then_slow(payload, ctx):
    """Fails its first try (`once_marker`); every later try runs `seconds`, then records who ran it."""
    marker = Path(payload["once_marker"])
    if not marker.exists():
        marker.touch()
        raise RuntimeError("the first try fails")
    time.sleep(payload.get("seconds", 0))
    Event.objects.create(name=f"done {payload['photo_id']} pid={os.getpid()}")
    return {"files": 0}


@register("test_photo_span", id_field="photo_id")
def photo_span(payload, ctx):
    """Takes the photo the way every photo job does (its row lock), then records when it held it."""
    from faces.jobs.photo_jobs import locked_photo

    locked_photo(payload["photo_id"])
    began = time.time()
    time.sleep(payload.get("seconds", 0))
    Event.objects.create(name=f"span {payload['photo_id']} {began} {time.time()} pid={os.getpid()}")
