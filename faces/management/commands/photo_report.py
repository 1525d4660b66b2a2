"""`python manage.py photo_report PHOTO_ID`: one photo's faces, matches, clusters, files and keys. Read-only."""

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand

from faces.management.ids import row_by_id
from faces.models import Photo


class Command(BaseCommand):
    help = "Print a photo's state, faces (box, score, match, similarity, cluster) and files (key, in storage?)."

    def add_arguments(self, parser):
        parser.add_argument(
            "photo_id",
            help=(
                "the photo uuid, or a unique prefix of it (make demo prints them; the demo's database is the one of "
                "MOMENTLENS_VAR_DIR=var/demo)"
            ),
        )

    def handle(self, *args, photo_id, **options):
        photo = row_by_id(Photo, photo_id, "photo", Photo.objects.select_related("event"))
        write = self.stdout.write
        write(
            f"photo {photo.id} event={photo.event_id} ({photo.event.name}) state={photo.state} "
            f"version=v{photo.variant_version} size={photo.width}x{photo.height} "
            f"media={photo.media_type or '-'} duration_ms={photo.duration_ms or '-'} "
            f"faces_detected_at={photo.faces_detected_at or '-'} processed_at={photo.processed_at or '-'}"
        )
        write(f"upload {photo.upload_key} exists={default_storage.exists(photo.upload_key)}")
        write(f"blur_regions {photo.blur_regions}")
        faces = list(photo.faces.order_by("track", "frame_time", "box_x"))
        write(f"faces {len(faces)}")
        if faces and faces[0].track is not None:
            self.write_tracks(faces)
        else:
            self.write_faces(faces)
        write("files")
        for viewer, key, thumb_key in photo.current_files():
            for kind, value in (("file", key), ("thumb", thumb_key)):
                exists = default_storage.exists(value) if value else False
                write(f"  {viewer} {kind} {value or '-'} exists={exists}")

    def write_faces(self, faces):
        for face in faces:
            similarity = "-" if face.similarity is None else f"{face.similarity:.3f}"
            self.stdout.write(
                f"  face {face.id} box=({face.box_x:.3f},{face.box_y:.3f},{face.box_w:.3f},{face.box_h:.3f}) "
                f"score={face.det_score:.2f} engine={face.engine} matched={face.matched_user_id or '-'} "
                f"similarity={similarity} through={face.matched_through or '-'} "
                f"cluster={face.unknown_cluster_id or '-'}"
            )

    def write_tracks(self, faces):
        """A clip's faces, one line per track: one identity each (docs/ARCHITECTURE.md §11)."""
        tracks = {}
        for face in faces:
            tracks.setdefault(face.track, []).append(face)
        for number, seen in tracks.items():
            first = seen[0]
            similarity = "-" if first.similarity is None else f"{first.similarity:.3f}"
            self.stdout.write(
                f"  track {number} faces={len(seen)} from={seen[0].frame_time:.3f}s to={seen[-1].frame_time:.3f}s "
                f"matched={first.matched_user_id or '-'} similarity={similarity} through={first.matched_through or '-'}"
            )
