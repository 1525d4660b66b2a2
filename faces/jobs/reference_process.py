"""`reference_process`: one face in a subject's reference upload, or a recorded reason why not.

A reference is a selfie: its face is the dominant one. The small-face pass is skipped
(it finds faces in posters, crowds and patterns behind the subject), and a second face
only makes the reference ambiguous (`many_faces`) when it is comparably large.
"""

from django.utils import timezone

from faces.engines import resident_engine
from faces.media.still import Still
from faces.models import EventMember, SubjectReference
from faces.storage_io import read_object
from jobqueue.enqueue import enqueue
from jobqueue.errors import RowGone
from jobqueue.registry import register

# The dominant face's area is at least this many times the next face's.
DOMINANCE = 2.0


def mark_failed(payload: dict) -> int:
    """The archive's hook: a reference whose job failed for good is `failed`, never `pending` forever."""
    return SubjectReference.objects.filter(id=payload["reference_id"]).update(
        status=SubjectReference.Status.FAILED, embedding=None, box=None, processed_at=timezone.now()
    )


@register("reference_process", id_field="reference_id", on_archive=mark_failed)
def reference_process(payload: dict) -> dict:
    reference = SubjectReference.objects.select_for_update().filter(id=payload["reference_id"]).first()
    if reference is None:
        raise RowGone(f"reference {payload['reference_id']} does not exist")
    image = Still(read_object(reference.upload_key)).image
    found = resident_engine().analyze(image, small_faces=False)
    record_reference(reference, dominant_face(found), width=image.shape[1], height=image.shape[0])
    events = reprocess_member_events(reference) if reference.status == SubjectReference.Status.READY else []
    return {"faces": len(found), "status": reference.status, "reprocess_events": len(events)}


def dominant_face(found: list) -> list:
    """[the selfie's face] when one face clearly dominates; else every face found (none, or several alike)."""
    by_area = sorted(found, key=_area, reverse=True)
    if len(by_area) >= 2 and _area(by_area[0]) < DOMINANCE * _area(by_area[1]):
        return by_area
    return by_area[:1]


def _area(face) -> float:
    x1, y1, x2, y2 = (float(v) for v in face.box)
    return (x2 - x1) * (y2 - y1)


def record_reference(reference: SubjectReference, found: list, *, width: int, height: int) -> None:
    if len(found) == 1:
        face = found[0]
        x1, y1, x2, y2 = (float(v) for v in face.box)
        reference.status = SubjectReference.Status.READY
        reference.embedding = face.embedding
        reference.engine = face.engine
        reference.box = {"x": x1 / width, "y": y1 / height, "w": (x2 - x1) / width, "h": (y2 - y1) / height}
    else:
        reference.status = SubjectReference.Status.NO_FACE if not found else SubjectReference.Status.MANY_FACES
        reference.embedding = None
        reference.box = None
    reference.processed_at = timezone.now()
    reference.save(update_fields=["status", "embedding", "engine", "box", "processed_at"])


def reprocess_member_events(reference: SubjectReference) -> list:
    """A new ready reference can change every photo of every event the user is active in."""
    events = list(EventMember.objects.active().filter(user_id=reference.user_id).values_list("event_id", flat=True))
    for event_id in events:
        enqueue({"job": "reprocess_event", "event_id": str(event_id)})
    return events
