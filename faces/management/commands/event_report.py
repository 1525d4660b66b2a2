"""`python manage.py event_report EVENT_ID`: an event's photos by state, DNP members, clusters, archived jobs.

Read-only. The archived-jobs lookup scans the archive (pgmq.a_jobs has no index on
the message): an ops command, never on the worker's path.
"""

from collections import Counter

from django.core.management.base import BaseCommand
from django.db import connection

from faces.management.ids import row_by_id
from faces.models import Event

ARCHIVED_FOR_EVENT = """
    SELECT msg_id, archived_at, read_ct, message->>'job', headers->>'archived_reason', headers->>'error'
    FROM pgmq.a_jobs
    WHERE message->>'event_id' = %s OR message->>'photo_id' = ANY(%s)
    ORDER BY archived_at DESC
"""


class Command(BaseCommand):
    help = "Print an event's photos by state, its DNP members, its Unknown clusters and its archived jobs."

    def add_arguments(self, parser):
        parser.add_argument("event_id", help="the event's uuid, or a unique prefix of it")

    def handle(self, *args, event_id, **options):
        event = row_by_id(Event, event_id, "event")
        write = self.stdout.write
        photos = list(event.photos.order_by("created_at"))
        states = Counter(photo.state for photo in photos)
        by_state = " ".join(f"{state}={count}" for state, count in sorted(states.items()))
        write(f"event {event.id} ({event.name}) photos={len(photos)} {by_state}")
        for photo in photos:
            public = "upload" if photo.public_key == photo.upload_key else (photo.public_key or "-")
            write(
                f"  photo {photo.id} state={photo.state} v{photo.variant_version} faces={photo.faces.count()} "
                f"public={public} own_files={photo.variants.count()}"
            )
        members = list(event.members.order_by("user_id"))
        write(f"members={len(members)} active={sum(m.status == 'active' for m in members)}")
        for member in event.dnp_members().order_by("user_id"):
            references = member_references(member.user_id)
            write(f"  dnp {member.user_id} references={references or '-'}")
        clusters = list(event.unknown_clusters.order_by("-face_count"))
        write(f"unknown_clusters={len(clusters)}")
        for cluster in clusters:
            write(f"  cluster {cluster.id} faces={cluster.face_count}")
        with connection.cursor() as cursor:
            cursor.execute(ARCHIVED_FOR_EVENT, [str(event.id), [str(p.id) for p in photos]])
            archived = cursor.fetchall()
        write(f"archived_jobs={len(archived)}")
        for msg_id, at, tries, job, reason, error in archived:
            write(f"  msg_id={msg_id} at={at:%Y-%m-%dT%H:%M:%SZ} job={job} tries={tries} reason={reason} error={error}")


def member_references(user_id) -> str:
    from faces.models import SubjectReference

    counts = Counter(SubjectReference.objects.filter(user_id=user_id).values_list("status", flat=True))
    return " ".join(f"{status}={count}" for status, count in sorted(counts.items()))
