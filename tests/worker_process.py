"""Run `run_worker` in its own process with the test handlers registered.

Usage: python tests/worker_process.py [run_worker options]; configuration
comes from the environment (DATABASE_URL, WORKER_*), as under systemd.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402

import tests.job_handlers  # noqa: E402, F401  (registers the handlers)

call_command("run_worker", *sys.argv[1:])
