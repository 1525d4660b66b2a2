"""`python manage.py worker_check`: the preflight systemd runs before the worker (ExecStartPre).

It runs the system checks tagged `worker` (jobqueue/checks.py, faces/checks.py; the same
as `manage.py check --deploy --tag worker`) and prints one line per check:

    check=NAME status=ok|WARN|FAIL|SKIP detail="..." fix="..."

then `worker_check passed`, or `worker_check failed: NAME, ...` and exit 1 when any
check fails (an Error) or was skipped (the database is unreachable).

With `--start` (the unit's ExecStartPre) a dependency the running worker waits out (storage, down or refusing
its keys: DEPENDENCY_DOWN) is a warning: a worker kept from starting during a storage outage would not read the
Do Not Publish changes, which need the database alone, until it ended.
"""

import sys

from django.core import checks
from django.core.checks.registry import registry
from django.core.management.base import BaseCommand

from jobqueue.checks import DEPENDENCY_DOWN, SKIPPED, WORKER


def check_order() -> list[str]:
    """The worker checks' names: the consumer's first (the database leads), then each app's in source order."""
    found = [check for check in registry.get_checks(include_deployment_checks=True) if WORKER in check.tags]
    found.sort(key=lambda c: (c.__module__ != "jobqueue.checks", c.__module__, c.__code__.co_firstlineno))
    return [check.__name__ for check in found]


def status(message: checks.CheckMessage, *, start: bool = False) -> str:
    if message.id == SKIPPED:
        return "SKIP"
    if start and message.id == DEPENDENCY_DOWN:
        return "WARN"
    if message.is_serious():
        return "FAIL"
    if message.level >= checks.WARNING:
        return "WARN"
    return "ok"


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class Command(BaseCommand):
    help = (
        "Check the database (and that it keeps a session), the jobs queue, pgvector, the tables, storage, "
        "face models and thresholds: the system checks tagged 'worker'."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--start",
            action="store_true",
            help="the preflight of a start: a dependency the worker waits out (storage) may be down",
        )

    def handle(self, *args, start: bool, **options):
        messages = checks.run_checks(tags=[WORKER], include_deployment_checks=True)
        order = check_order()
        messages.sort(key=lambda m: order.index(m.obj) if m.obj in order else len(order))
        failed = []
        for message in messages:
            said = status(message, start=start)
            line = f'check={message.obj} status={said} detail="{one_line(message.msg)}"'
            if message.hint:
                line += f' fix="{one_line(message.hint)}"'
            self.stdout.write(line)
            if said in ("FAIL", "SKIP") and message.obj not in failed:
                failed.append(message.obj)
        if failed:
            self.stdout.write(f"worker_check failed: {', '.join(map(str, failed))}")
            sys.exit(1)
        self.stdout.write("worker_check passed")
