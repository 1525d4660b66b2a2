"""Stills: each published file holds the one picture it shows, and no picture in it shows a DNP face."""

import numpy as np

from tests.chaos.published import published_photos, still_files
from tests.support.stored_files import read_bytes


def extra_pictures(chaos) -> int:
    """Every published still's file holds one picture, and nothing else a downloader could find in its bytes
    (tests/support/published_pictures.py: thumbnails, previews, trailers, base64 images, transparency)."""
    from tests.support.published_pictures import pictures_in

    violations, checked = 0, 0
    for photo in published_photos():
        if str(photo.id) in chaos.seeded.media_photos:
            continue
        for _, key in still_files(photo):
            found = pictures_in(read_bytes(key))
            checked += 1
            if len(found) != 1:
                violations += 1
                chaos.report.notes.append(f"{key} holds {len(found)} pictures: {', '.join(w for w, _ in found)}")
    chaos.report.figures.still_files_one_picture = checked
    chaos.report.notes.append(f"published still files checked for one picture each: {checked}")
    return violations


def hidden_dnp_faces(chaos) -> int:
    """Each seeded still with more than one plain picture (or a turned one): every picture that any of its
    published files shows or carries, run through the engine, shows no DNP member of its event
    (tests.support.published_pictures.SHOWS_THE_MEMBER), but their own face in their own file."""
    from tests.support.published_pictures import dnp_faces_in

    rendered_stills, violations, files = chaos.seeded.rendered_stills, 0, 0
    for photo in (photo for photo in published_photos() if str(photo.id) in rendered_stills):
        references = dnp_references(photo.event_id)
        for viewer, key in still_files(photo):
            others = {str(user): embedding for user, _, embedding in references if user != viewer}
            shown = dnp_faces_in(read_bytes(key), others) if others else []
            files += 1
            violations += len(shown)
            chaos.report.notes += [f"{rendered_stills[str(photo.id)]}: {key}: {where}" for where in shown]
    chaos.report.figures.rendered_still_files = files
    chaos.report.notes.append(f"rendered stills: {files} published files run through the engine for DNP faces")
    return violations


def dnp_references(event_id) -> list[tuple[object, float, np.ndarray]]:
    """(member, their engine's blur threshold, embedding) of each ready reference of the event's DNP members."""
    from faces import thresholds
    from faces.models import EventMember, SubjectReference

    dnp = EventMember.objects.dnp().filter(event_id=event_id).values_list("user_id", flat=True)
    ready = SubjectReference.objects.filter(user_id__in=list(dnp), status=SubjectReference.Status.READY)
    return [
        (ref.user_id, thresholds.for_engine(ref.engine).blur or 0.0, np.asarray(ref.embedding, np.float32))
        for ref in ready
    ]
