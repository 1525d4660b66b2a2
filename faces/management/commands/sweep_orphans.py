"""`python manage.py sweep_orphans [--event ID]`: delete derived objects no row points at.

The worker does this for a photo after each of its jobs commits; this command
catches what a failed delete left behind. Upload keys are never touched.
"""

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand

from faces.models import Event
from faces.rendering.sweep import sweep_photo


class Command(BaseCommand):
    help = "Delete objects under each photo's derived prefix that no row points at."

    def add_arguments(self, parser):
        parser.add_argument("--event", help="only this event's photos")

    def handle(self, *args, event=None, **options):
        events = [event] if event else Event.objects.values_list("id", flat=True)
        total = 0
        for event_id in events:
            for photo_id in photo_folders(event_id):
                total += sweep_photo(event_id, photo_id)
        self.stdout.write(f"sweep_orphans deleted={total}")


def photo_folders(event_id) -> list[str]:
    """Every photo folder that exists in storage for the event: rows may be gone, objects not."""
    try:
        folders, _ = default_storage.listdir(f"events/{event_id}/photos/")
    except FileNotFoundError:
        return []
    return folders
