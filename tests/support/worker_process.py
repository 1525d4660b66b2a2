"""Run `run_worker` in its own process with the test handlers registered.

Usage: python tests/support/worker_process.py [run_worker options]; configuration
comes from the environment (DATABASE_URL, WORKER_*), as under systemd.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")

from jobqueue.cli import main


def run_worker_with_test_jobs(argv: list[str]) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    import tests.support.job_handlers  # noqa: F401  (registers the handlers)

    call_command("run_worker", *argv[2:])


main(["manage.py", "run_worker", *sys.argv[1:]], run=run_worker_with_test_jobs)
