"""manage.py's entry point: any command, and what a command that cannot run says.

A setting that does not parse, a database that cannot be reached, an output pipe closed by `head`: each is
one log line naming the problem (`event=worker_died` for run_worker, systemd's journal greps for it;
`event=command_failed` for the others) and a non-zero exit, never a traceback from a library.
"""

import logging
import os
import sys

from jobqueue.logfmt import LogfmtFormatter
from jobqueue.redaction import redact


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    try:
        execute_from_command_line(argv)
    except BrokenPipeError:
        # The reader went away (`| head`): what was wanted was read. Python must not complain at exit either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except (ImproperlyConfigured, DatabaseError) as error:
        command = argv[1] if len(argv) > 1 else "help"
        sys.stderr.write(failure_line(command, error) + "\n")
        sys.exit(2 if isinstance(error, ImproperlyConfigured) else 1)


def failure_line(command: str, error: Exception) -> str:
    """One log line, with the log's own prefix (logging may not be set up: the settings are what failed)."""
    from django.core.exceptions import ImproperlyConfigured

    what = "configuration" if isinstance(error, ImproperlyConfigured) else "database unreachable"
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    event = "worker_died" if command == "run_worker" else "command_failed"
    record = logging.makeLogRecord(
        {"name": "manage", "levelno": logging.ERROR, "levelname": "ERROR", "msg": event, "command": command}
    )
    record.error = redact(f"{what}: {detail}")
    return LogfmtFormatter().format(record)
