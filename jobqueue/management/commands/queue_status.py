"""`python manage.py queue_status`: the queue at a glance. Read-only."""

from django.core.management.base import BaseCommand
from django.db import connection

from jobqueue import queries


class Command(BaseCommand):
    help = "Print the jobs queue's length, visible/hidden counts, oldest age and recent archive reasons."

    def add_arguments(self, parser):
        parser.add_argument("--archived", type=int, default=10, help="how many recent archived messages to list")

    def handle(self, *args, archived=10, **options):
        with connection.cursor() as cursor:
            metrics = queries.metrics(cursor)
            archive_total = queries.archive_count(cursor)
            recent = queries.recent_archived(cursor, archived)
            holder = queries.reader_lock_holder(cursor)
        oldest = "-" if metrics.oldest_age_s is None else f"{metrics.oldest_age_s}s"
        self.stdout.write(
            f"queue=jobs length={metrics.length} visible={metrics.visible} hidden={metrics.length - metrics.visible} "
            f"oldest_age={oldest} archived={archive_total} reader_pid={holder or '-'}"
        )
        for message in recent:
            self.stdout.write(
                f"archived msg_id={message.msg_id} at={message.archived_at:%Y-%m-%dT%H:%M:%SZ} "
                f"tries={message.read_ct} reason={message.reason or '-'} error={message.error or '-'} "
                f"message={message.body}"
            )
