"""The published photos and their files, as the invariants read them through Django."""

import uuid

from tests.support.stored_files import photo_files


def published_photos() -> list:
    from faces.models import Photo

    return list(Photo.objects.published().select_related("event"))


def published_files(photo) -> list[tuple[uuid.UUID | None, str]]:
    """(viewer, key) of a published photo's public file (viewer None) and each member's own file."""
    return [(viewer, key) for viewer, key, _ in photo_files(photo)]


def still_files(photo) -> list[tuple[uuid.UUID | None, str]]:
    """(viewer, key) of every file of a published still, thumbnails included; not the API's own thumbnail."""
    files = [(viewer, key) for viewer, file, thumb in photo_files(photo) for key in (file, thumb)]
    return [(viewer, key) for viewer, key in files if key != photo.upload_thumb_key]
