"""A photo's stored faces matched against its event's members now (faces/matching.py, docs/ARCHITECTURE.md §6)."""

from faces.matching import PhotoMatch, record_matches
from faces.models import Photo


def match_faces(photo: Photo, size: tuple[int, int]) -> PhotoMatch | None:
    """Re-match the photo's stored faces and record the result on them; None when it has no face."""
    match = match_of(photo, size)
    if match is not None:
        record_matches(match)
    return match


def match_of(photo: Photo, size: tuple[int, int] | None) -> PhotoMatch | None:
    """The photo's stored faces against its event's members now, recording nothing; None without a face."""
    faces = list(photo.faces.order_by("id"))
    if not faces:
        return None
    return PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)
