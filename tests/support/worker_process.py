"""Run `run_worker` in its own process with the test handlers registered.

Usage: python tests/support/worker_process.py [run_worker options]; configuration
comes from the environment (DATABASE_URL, WORKER_*), as under systemd.

With FIRST_LOOK_MARK=<path> in the environment, the worker touches that file once the detector has looked at a
clip's frame: a test's sign that the clip's detection is under way (`mark_clip_looks`).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")

from jobqueue.cli import main


def mark_clip_looks(mark: Path) -> None:
    """A clip's detection (faces.detection.detect_clip) runs as ever, with an engine that touches `mark` after each
    look of the detector (the real engine's answer returned unchanged)."""
    from faces import detection

    real = detection.detect_clip

    class Marking:
        def __init__(self, engine):
            self._engine = engine

        def __getattr__(self, name):
            return getattr(self._engine, name)

        def analyze(self, image, **options):
            found = self._engine.analyze(image, **options)
            mark.touch()
            return found

    def detect_clip(clip, engine, *args, **kwargs):
        return real(clip, Marking(engine), *args, **kwargs)

    detection.detect_clip = detect_clip


def run_worker_with_test_jobs(argv: list[str]) -> None:
    import django
    from django.core.management import call_command

    django.setup()
    import tests.support.job_handlers  # noqa: F401  (registers the handlers)

    if os.environ.get("FIRST_LOOK_MARK"):
        mark_clip_looks(Path(os.environ["FIRST_LOOK_MARK"]))
    call_command("run_worker", *argv[2:])


main(["manage.py", "run_worker", *sys.argv[1:]], run=run_worker_with_test_jobs)
