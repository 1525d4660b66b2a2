"""The member who turns on Do Not Publish mid-run: hidden in every photo from the hide's commit."""

from tests.chaos.seed import DnpChange
from tests.chaos.worker_logs import CLOCK_SLACK_S, ended, log_time

# From the change's send, how long a photo may still show the member unblurred: privacy work stops the try in
# flight (jobqueue/privacy_lane.py), whatever it is (docs/ARCHITECTURE.md §4, "The privacy lane").
EXPOSURE_WINDOW_S = 5.0


def exposed_after_hide(chaos, lines: list[dict]) -> int:
    """The member turned on Do Not Publish mid-run (DnpChange): their faces in each photo of the event are the
    ones that reach them at the end (the blur decision of the final state). From the commit of the change's
    reprocess_event (its job_done or job_archived line), no sample may show a photo published whose public
    file does not blur each of them. The note gives the commit's delay and the longest exposure from the send."""
    change = chaos.seeded.dnp_change
    if change is None or change.sent_at is None:
        chaos.report.notes.append("dnp change: not made (the run ended first)")
        return 0
    theirs = member_faces(change)
    commits = ended(lines, msg_id=str(change.msg_id))
    committed = log_time(commits[0]) + CLOCK_SLACK_S if commits else float("inf")
    exposed: dict[str, float] = {}
    violations: set[str] = set()
    for taken, photos in change.samples:
        for photo_id, blurred in photos.items():
            if blurred is not None and not theirs.get(photo_id, set()) <= {str(face) for face in blurred}:
                exposed[photo_id] = taken - change.sent_at
                if taken > committed + 0.001:
                    violations.add(photo_id)
    figures = chaos.report.figures
    figures.dnp_change_photos = sum(1 for faces in theirs.values() if faces)
    figures.dnp_hide_committed_s = round(committed - change.sent_at, 2) if commits else None
    figures.dnp_longest_exposure_s = round(max(exposed.values(), default=0.0), 2)
    figures.dnp_exposed_past_window = sum(1 for seconds in exposed.values() if seconds > EXPOSURE_WINDOW_S)
    delay = f"{committed - change.sent_at:.2f} s" if commits else "never"
    cut = sum(1 for fields in lines if fields["event"] == "db_lost" and fields.get("msg_id") == str(change.msg_id))
    chaos.report.notes.append(
        f"dnp change: {figures.dnp_change_photos} photos show the member; the hide committed {delay} after the "
        f"send ({cut} of its tries cut short by a lost session); longest exposure from the send "
        f"{figures.dnp_longest_exposure_s:.2f} s; {len(change.samples)} samples"
    )
    return len(violations)


def exposed_past_window(chaos) -> int:
    """Photos that still showed the changed member unblurred EXPOSURE_WINDOW_S after the send (counted by
    exposed_after_hide, which runs first)."""
    return chaos.report.figures.dnp_exposed_past_window


def member_faces(change: DnpChange) -> dict[str, set[str]]:
    """photo id -> ids of its faces that reach the member at their blur threshold (or are unsure), now."""
    from faces.models import Photo
    from faces.people import PhotoMatch

    theirs = {}
    for photo in Photo.objects.filter(event_id=change.event_id):
        faces = list(photo.faces.order_by("id"))
        if not faces:
            continue
        size = (photo.width, photo.height) if photo.width else None
        match = PhotoMatch.for_faces(faces, photo.event_id, faces[0].engine, size)
        if change.user_id not in match.candidates.user_ids:
            continue
        column = match.candidates.user_ids.index(change.user_id)
        reaches = match.similar[:, column] | match.unsure
        theirs[str(photo.id)] = {str(face.id) for face, hit in zip(faces, reaches, strict=True) if hit}
    return theirs
