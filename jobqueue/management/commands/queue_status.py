"""`python manage.py queue_status`: the queue at a glance. Read-only."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from jobqueue import queries
from jobqueue.privacy_lane import PRIVACY_RENDER_MARK, privacy_jobs
from jobqueue.worker import WAITING_PREFIX


class Command(BaseCommand):
    help = (
        "Print the jobs queue's length, visible/hidden counts, oldest age, the queue by class (privacy jobs, the "
        "renders they sent first, the rest: waiting, oldest waiting, hidden) with the privacy jobs running, the "
        "reader slots (who holds each and what it works on), the readers waiting out an outage and recent archive "
        "reasons."
    )

    def add_arguments(self, parser):
        parser.add_argument("--archived", type=int, default=10, help="how many recent archived messages to list")

    def handle(self, *args, archived=10, **options):
        if archived < 0:
            raise CommandError(f"--archived must be 0 or more, not {archived}")
        with connection.cursor() as cursor:
            metrics = queries.metrics(cursor)
            archive_total = queries.archive_count(cursor)
            recent = queries.recent_archived(cursor, archived)
            slots = queries.reader_slots(cursor, settings.WORKER_READER_SLOTS)
            classes = queries.queue_classes(cursor, privacy_jobs(), PRIVACY_RENDER_MARK)
            running, blocked = queries.privacy_running(cursor)
            waiting = queries.waiting_readers(cursor, WAITING_PREFIX)
        oldest = "-" if metrics.oldest_age_s is None else f"{metrics.oldest_age_s}s"
        readers = ",".join(str(slot.pid) for slot in slots if slot.pid) or "-"
        self.stdout.write(
            f"queue=jobs length={metrics.length} visible={metrics.visible} hidden={metrics.length - metrics.visible} "
            f"oldest_age={oldest} archived={archive_total} reader_pid={readers}"
        )
        for queued in classes:
            oldest = "-" if queued.oldest_waiting_s is None else f"{queued.oldest_waiting_s}s"
            line = f"class={queued.name} waiting={queued.waiting} oldest_waiting={oldest} hidden={queued.hidden}"
            lane = f" running={running} waiting_for_a_lock={blocked}" if queued.name == "privacy" else ""
            self.stdout.write(line + lane)
        for slot in slots:
            self.stdout.write(
                f"slot={slot.slot} reader_pid={slot.pid or '-'} working_on={slot.working_on or '-'}"
                if slot.pid
                else f"slot={slot.slot} reader_pid=- (free)"
            )
        for pid, what in waiting:
            self.stdout.write(f"reader_pid={pid} waiting_for={what}")
        for message in recent:
            self.stdout.write(
                f"archived msg_id={message.msg_id} at={message.archived_at:%Y-%m-%dT%H:%M:%SZ} "
                f"tries={message.read_ct} reason={message.reason or '-'} error={message.error or '-'} "
                f"message={message.body}"
            )
