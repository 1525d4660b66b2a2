"""`python manage.py event_report EVENT_ID`: an event's photos by state, DNP members, members found in its photos,
clusters with their sizes, archived jobs.

Read-only. The archived-jobs lookup (jobqueue.api.archived_jobs_naming) scans the
archive (it has no index on the message): an ops command, never on the worker's path.
"""

from collections import Counter

from django.core.management.base import BaseCommand
from django.db.models import Count, Q

from faces.management.ids import row_by_id
from faces.models import Event, Face
from jobqueue.api import archived_jobs_naming


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
        for user_id, photo_count, face_count, linked in members_found(event):
            write(f"  found {user_id} photos={photo_count} faces={face_count} through_faces={linked}")
        clusters = list(event.unknown_clusters.order_by("-face_count"))
        write(f"unknown_clusters={len(clusters)}")
        for cluster in clusters:
            write(f"  cluster {cluster.id} faces={cluster.face_count}")
        # Its jobs name the event (reprocess_event) or one of its photos.
        archived = archived_jobs_naming([str(event.id), *(str(p.id) for p in photos)], ["event_id", "photo_id"])
        write(f"archived_jobs={len(archived)}")
        for entry in archived:
            write(
                f"  msg_id={entry.msg_id} at={entry.archived_at:%Y-%m-%dT%H:%M:%SZ} job={entry.job} "
                f"tries={entry.read_ct} reason={entry.reason} error={entry.error}"
            )


def members_found(event) -> list[tuple]:
    """(user, photos, faces, of those faces the ones matched through another face: faces/links.py) of each member
    matched in the event's faces: what the app shows as their photos."""
    found = (
        Face.objects.filter(event=event, matched_user_id__isnull=False)
        .values("matched_user_id")
        .annotate(
            photos=Count("photo", distinct=True),
            faces=Count("id"),
            linked=Count("id", filter=Q(matched_through__isnull=False)),
        )
        .order_by("matched_user_id")
    )
    return [(row["matched_user_id"], row["photos"], row["faces"], row["linked"]) for row in found]


def member_references(user_id) -> str:
    from faces.models import SubjectReference

    counts = Counter(SubjectReference.objects.filter(user_id=user_id).values_list("status", flat=True))
    return " ".join(f"{status}={count}" for status, count in sorted(counts.items()))
