"""`python manage.py worker_check`: the preflight systemd runs before the worker (ExecStartPre).

One line per check; exit 1 when any fails, each failure naming its fix.
"""

import sys

from django.core.management.base import BaseCommand

from jobqueue.preflight import CHECKS, CheckFailed


class Command(BaseCommand):
    help = "Check database, pgvector, the jobs queue, the tables, storage, face models and thresholds."

    def handle(self, *args, **options):
        failed = []
        for check in CHECKS:
            if check.needs_database and "database" in failed:
                self.stdout.write(f'check={check.name} status=SKIP detail="the database is unreachable"')
                failed.append(check.name)
                continue
            try:
                detail = check.run()
            except CheckFailed as problem:
                failed.append(check.name)
                detail = " ".join(str(problem).split())  # one line per check, whatever the error says
                self.stdout.write(f'check={check.name} status=FAIL detail="{detail}" fix="{problem.fix}"')
            else:
                self.stdout.write(f'check={check.name} status=ok detail="{detail}"')
        if failed:
            self.stdout.write(f"worker_check failed: {', '.join(failed)}")
            sys.exit(1)
        self.stdout.write("worker_check passed")
