"""`python manage.py sweep_orphans [--event ID]`: delete derived objects nothing points at.

The worker does this by itself (after each job, for failed sweeps when idle, and a
full sweep every WORKER_FULL_SWEEP_S); this command runs the full sweep now. It is
safe while workers run: a photo whose row a job holds is skipped and left to the
worker. Uploads are never touched.
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from faces.management.ids import row_by_id
from faces.models import Event
from faces.rendering.sweep import sweep_storage
from jobqueue.api import is_uuid


class Command(BaseCommand):
    help = "Delete derived objects no row points at: replaced versions, leftovers, deleted photos and events."

    def add_arguments(self, parser):
        parser.add_argument(
            "--event", help="only this event's folder: its id (the event may have been deleted) or its id's start"
        )

    def handle(self, *args, event=None, **options):
        connection.ensure_connection()  # a stopped database is said so, even with nothing in storage to sweep
        if event is not None and not is_uuid(event):
            event = str(row_by_id(Event, event, "event").id)
        try:
            deleted, busy = sweep_storage(event)
        except Exception as error:  # storage or database down: one line, exit 1, nothing half-claimed
            raise CommandError(f"sweep_orphans stopped: {type(error).__name__}: {str(error).strip()[:300]}") from None
        self.stdout.write(f"sweep_orphans deleted={deleted} busy={busy}")
