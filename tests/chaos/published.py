"""The published photos and their files, as the invariants read them through Django."""

import uuid


def published_photos() -> list:
    from faces.models import Photo

    return list(Photo.objects.published().select_related("event"))


def published_files(photo) -> list[tuple[uuid.UUID | None, str]]:
    """(viewer, key) of a published photo's public file (viewer None) and each member's own file."""
    return [(None, photo.public_key)] + [(v.user_id, v.key) for v in photo.variants.all()]


def still_files(photo) -> list[tuple[uuid.UUID | None, str]]:
    """(viewer, key) of every file of a published still, thumbnails included; not the API's own thumbnail."""
    files = [(None, photo.public_key), (None, photo.public_thumb_key)]
    files += [(v.user_id, key) for v in photo.variants.all() for key in (v.key, v.thumb_key)]
    return [(viewer, key) for viewer, key in files if key != photo.upload_thumb_key]
