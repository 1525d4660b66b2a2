"""`reference_process`: one face in a subject's reference upload, or a recorded reason why not.

A reference is a selfie: its face is the dominant one. The small-face pass is skipped
(it finds faces in posters, crowds and patterns behind the subject), and a second face
only makes the reference ambiguous (`many_faces`) when it is comparably large and the frame does not tell which is
the subject: a selfie frames its subject whole, so when the largest face lies clear of the picture's border and
every other comparably large face runs into it (a neighbour the frame cuts, as in a cropped picture), the largest
is the subject. A face the
recogniser saw too poorly to judge (faces/thresholds.py, `too_poor`: eyes closed behind a hand,
dark, blurred) could not tell its owner from a stranger: it is no usable face (`no_face`), and
its DNP member stays fail-closed until a better reference is ready.

An ambiguous selfie still protects: its comparably large faces, one of which is the subject's, are kept
(`candidate_embeddings`), and matching blurs a face near any of them for a DNP member who has no ready reference.
It identifies nobody (faces/people.py). A face too poorly seen to judge is no candidate when one the recogniser
can judge is kept: a guest shows their face to their selfie, the one it cannot make out (dark, out of focus) is
someone behind them, as a much smaller face is. When every one of them is too poorly seen, none is kept:
fail-closed.
"""

from dataclasses import dataclass

from django.utils import timezone

from faces import thresholds
from faces.engines import FACE_ENGINE
from faces.exposure import hide_exposed
from faces.geometry import EDGE_CUTS, near_edge
from faces.media.still import Still
from faces.media.upload import read_object
from faces.models import EventMember, SubjectReference
from faces.thresholds import FaceQuality, head_turn
from jobqueue.api import JobContext, RowGone, enqueue, enqueue_unless_waiting, register


@dataclass(frozen=True)
class Selfie:
    """What makes a reference upload one person's selfie."""

    # The subject's face is at least this many times the next face's area: a face half its size is someone behind.
    dominance: float = 2.0
    # A face this close to the picture's border (a fraction of its side) runs into it: the frame may cut it. A
    # selfie's subject is framed whole, clear of it; a comparably large face there is someone beside them.
    border: float = EDGE_CUTS.near_border


SELFIE = Selfie()


def mark_failed(payload: dict) -> int:
    """The archive's hook: a reference whose job failed for good is `failed`, never `pending` forever."""
    return SubjectReference.objects.filter(id=payload["reference_id"]).update(
        status=SubjectReference.Status.FAILED,
        embedding=None,
        box=None,
        candidate_embeddings=None,
        processed_at=timezone.now(),
    )


@register("reference_process", id_field="reference_id", on_archive=mark_failed, first=True)
def reference_process(payload: dict, ctx: JobContext) -> dict:
    reference = SubjectReference.objects.select_for_update().filter(id=payload["reference_id"]).first()
    if reference is None:
        raise RowGone(f"reference {payload['reference_id']} does not exist")
    image = Still(read_object(reference.upload_key)).image
    found = ctx.resources[FACE_ENGINE].analyze(image, small_faces=False)
    chosen = framed_subject(comparably_large(found, SELFIE), image.shape[1], image.shape[0], SELFIE)
    judgeable = [face for face in chosen if not too_poor(face)]
    poor = len(judgeable) < len(chosen)
    if len(chosen) == 1 and poor:
        chosen = []
    record_reference(reference, chosen, width=image.shape[1], height=image.shape[0], candidates=judgeable)
    usable = reference.status == SubjectReference.Status.READY or reference.candidate_embeddings is not None
    hidden = hide_where_dnp(reference.user_id) if usable else 0
    events = reprocess_member_events(reference) if usable else []
    result = {"faces": len(found), "status": reference.status, "hidden": hidden, "reprocess_events": len(events)}
    if reference.candidate_embeddings is not None:
        result["candidates"] = len(reference.candidate_embeddings)
    return result | ({"detail": "face_too_poor"} if poor else {})


def hide_where_dnp(user_id) -> int:
    """A DNP member's reference became ready: in each event where they are an active DNP member, the photos
    that now show them unblurred are hidden in this transaction, and rendered first (faces/exposure.py)."""
    hidden = 0
    for event_id in EventMember.objects.dnp().filter(user_id=user_id).values_list("event_id", flat=True):
        photos = hide_exposed(event_id)
        enqueue_unless_waiting("reprocess", "photo_id", photos, first=True)
        hidden += len(photos)
    return hidden


def comparably_large(found: list, selfie: Selfie) -> list:
    """The faces that may be the selfie's subject, largest first: [the one] when it clearly dominates; none when
    nothing was found. A face whose area is under the largest's by `selfie.dominance` is never the subject."""
    by_area = sorted(found, key=_area, reverse=True)
    return [face for face in by_area if selfie.dominance * _area(face) > _area(by_area[0])]


def framed_subject(chosen: list, width: int, height: int, selfie: Selfie) -> list:
    """Of the comparably large faces (largest first), [the largest] when the frame tells it is the subject: it lies
    clear of the border and every other runs into it. Otherwise all of them, ambiguous: two whole faces, or a
    largest face the frame may cut (a close-up), are not told apart by the frame."""
    if len(chosen) > 1 and not near_edge(chosen[0].box, width, height, selfie.border):
        if all(near_edge(face.box, width, height, selfie.border) for face in chosen[1:]):
            return chosen[:1]
    return chosen


def too_poor(face) -> bool:
    """Whether the recogniser saw the reference's face too poorly to judge anyone against it."""
    quality = FaceQuality(float(face.box[2] - face.box[0]), head_turn(face.landmarks), face.embedding_norm)
    return thresholds.for_engine(face.engine).too_poor(quality)


def _area(face) -> float:
    x1, y1, x2, y2 = (float(v) for v in face.box)
    return (x2 - x1) * (y2 - y1)


def record_reference(reference: SubjectReference, found: list, *, width: int, height: int, candidates: list) -> None:
    """`found`: the faces that may be the subject's. When they are several, `candidates` (those of them the
    recogniser can judge) are kept."""
    reference.embedding, reference.box, reference.candidate_embeddings = None, None, None
    if len(found) == 1:
        face = found[0]
        x1, y1, x2, y2 = (float(v) for v in face.box)
        reference.status = SubjectReference.Status.READY
        reference.embedding = face.embedding
        reference.engine = face.engine
        reference.box = {"x": x1 / width, "y": y1 / height, "w": (x2 - x1) / width, "h": (y2 - y1) / height}
    else:
        reference.status = SubjectReference.Status.NO_FACE if not found else SubjectReference.Status.MANY_FACES
    if len(found) > 1 and candidates:
        reference.engine = found[0].engine
        reference.candidate_embeddings = [[float(v) for v in face.embedding] for face in candidates]
    reference.processed_at = timezone.now()
    fields = ["status", "embedding", "engine", "box", "candidate_embeddings", "processed_at"]
    reference.save(update_fields=fields)


def reprocess_member_events(reference: SubjectReference) -> list:
    """A new ready reference can change every photo of every event the user is active in."""
    events = list(EventMember.objects.active().filter(user_id=reference.user_id).values_list("event_id", flat=True))
    for event_id in events:
        enqueue({"job": "reprocess_event", "event_id": str(event_id)})
    return events
