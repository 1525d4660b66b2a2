"""manage.py's entry point: any command, and what a command that cannot run says.

A setting that does not parse, a database that cannot be reached, an output pipe closed by `head`: each is
one log line naming the problem (`event=worker_died` for run_worker, systemd's journal greps for it;
`event=command_failed` for the others) and a non-zero exit, never a traceback from a library.
"""

import faulthandler
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from jobqueue.logfmt import LogfmtFormatter, environment_secrets, redact

# A SIGTERM or SIGINT that reaches run_worker before its own handlers are set (Django's and the engine's imports
# take a second or two): the worker stops before its loop and exits 0, as it does later (systemd may stop a worker
# it has just started; Python's default would end it by the signal).
EARLY_STOP = threading.Event()


def main(argv: list[str], run: Callable[[list[str]], None] | None = None) -> None:
    """`run`: what runs the command line (default: Django's; the tests' worker adds its test jobs first)."""
    if argv[1:2] == ["run_worker"]:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: EARLY_STOP.set())
        # `kill -USR1 <pid>`: every thread's stack to stderr (the journal), the worker going on: where one that will
        # not stop, or no longer moves on, waits (docs/OPERATIONS.md, "A worker that does not stop"). Set first, so
        # that a worker stuck in its start-up says so too, where Python's default would end it.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    try:
        (run or execute_from_command_line)(argv)
    except BrokenPipeError:
        # The reader went away (`| head`): what was wanted was read.
        sys.exit(0)
    except (ImproperlyConfigured, DatabaseError) as error:
        command = argv[1] if len(argv) > 1 else "help"
        sys.stderr.write(failure_line(command, error) + "\n")
        sys.exit(2 if isinstance(error, ImproperlyConfigured) else 1)
    finally:
        flush_or_drop_stdout()


def flush_or_drop_stdout() -> None:
    """What is still buffered (`--help`'s text too) fails here, if the reader left, not in Python's own flush
    at exit, which would print a BrokenPipeError and exit 120: it is dropped instead."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def failure_line(command: str, error: Exception) -> str:
    """One log line, with the log's own prefix (logging may not be set up: the settings are what failed)."""
    from django.core.exceptions import ImproperlyConfigured

    what = "configuration" if isinstance(error, ImproperlyConfigured) else "database unreachable"
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    event = "worker_died" if command == "run_worker" else "command_failed"
    record = logging.makeLogRecord(
        {"name": "manage", "levelno": logging.ERROR, "levelname": "ERROR", "msg": event, "command": command}
    )
    # Settings that did not load cannot name the secrets: the environment does.
    known = environment_secrets() if isinstance(error, ImproperlyConfigured) else None
    record.error = redact(f"{what}: {detail}", known)
    return LogfmtFormatter().format(record)
