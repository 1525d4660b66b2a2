"""On the pixels: every DNP face a published file must hide differs strongly from the upload there."""

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from faces.geometry import iou
from momentlens.devservices.pixels import difference, face_core
from tests.chaos.edge_cuts import CUT_MIN_VISIBLE, EdgeCut, face_box
from tests.chaos.published import published_files, published_photos
from tests.chaos.scenes import Box, decode_media, frame_at
from tests.chaos.storage import read_image
from tests.chaos.uploads import MediaUpload
from tests.support.stored_files import read_bytes

# In a still's file a face is blurred when its middle differs from the upload's by at least this much (mean
# absolute difference). Measured on seed 23 at 3x scale (2,373 faces in published stills): a face left intact (not
# marked, or the DNP member's own in their own file) moves by at most 2.0 (JPEG re-encoding); a blurred one by 8.2
# and more, the least being a smooth, cut-off chin at the image's corner and a 6 px sliver of a face at its edge:
# smooth skin has little for a blur to move. Each run's note gives both figures again.
BLURRED = 6.0
# In a multi-frame file (lossy WebP q85, H.264 crf 20) a face is blurred when each quarter of its middle differs
# from the upload's frame by at least this much (mean absolute difference). Calibrated by hand on the seed's
# clips rendered by the worker's own encoders: the codec alone (a face left intact, as in its DNP member's own
# file) moves a quarter by at most 3.7; the worker's blur by 9.7 and more (the least: t1's smooth face 4, 46 px
# wide in the 520x360 animations; 20 and more for most faces). A blur box that lags a moving face leaves some
# quarter nearly unchanged. Each run's note gives the figures again.
MEDIA_BLURRED = 6.0


@dataclass
class StillTally:
    """How much the middle of each stored face moved between a published still's file and its upload: the faces
    the file blurs, and those it leaves (the codec alone)."""

    blurred: list[tuple[float, str]] = field(default_factory=list)
    intact: list[float] = field(default_factory=list)

    def note(self) -> str:
        least = min(self.blurred, default=(float("nan"), "none"))
        intact = [change for change in self.intact if change < BLURRED]
        return (
            f"still DNP faces: {len(self.blurred)} (file, face) marked, threshold {BLURRED:g}; the least changed "
            f"{least[0]:.1f} ({least[1]}); faces not marked: {len(intact)} intact, changed at most "
            f"{max(intact, default=float('nan')):.1f} (the codec alone), {len(self.intact) - len(intact)} blurred "
            f"too (a marked neighbour's blur, a blur region)"
        )


def unblurred_stills(chaos) -> int:
    """Every face the blur decision marks, in every published still's file, differs strongly from the upload as
    a viewer sees it (its orientation applied). A file of another shape than that (a sideways render) counts as
    one violation at least. (A multi-frame upload's files: unblurred_clips.)"""
    from faces.publication import faces_blurred_in

    violations, tally = 0, StillTally()
    for photo in published_photos():
        if str(photo.id) in chaos.seeded.media_photos:
            continue
        upload, faces = read_image(photo.upload_key), list(photo.faces.all())
        for viewer, key in published_files(photo):
            marked = {face.id for face in faces_blurred_in(photo, viewer)}
            violations += unblurred_still_faces(chaos.report.notes, photo, upload, key, faces, marked, tally)
    chaos.report.notes.append(tally.note())
    return violations


def unblurred_still_faces(
    notes: list[str], photo, upload: np.ndarray, key: str, faces: list, marked: set, tally: StillTally
) -> int:
    """How many of the photo's `faces` whose ids are `marked` the file `key` leaves as in the upload; every face's
    change goes to `tally`."""
    if key == photo.upload_key:
        notes += [f"{key}: published as uploaded, face {face_id} marked" for face_id in marked]
        return len(marked)  # published as uploaded while a face had to be blurred
    rendered = read_image(key)
    if rendered.shape != upload.shape:
        notes.append(f"{key} is {rendered.shape[1::-1]}; its upload is seen {upload.shape[1::-1]}")
        return max(1, len(marked))
    kept = 0
    for face in faces:
        change = difference(face_core(rendered, face), face_core(upload, face))
        if face.id not in marked:
            tally.intact.append(change)
            continue
        tally.blurred.append((change, f"{key}: face {face.id}"))
        if change < BLURRED:
            notes.append(f"{key}: face {face.id} marked, not blurred (change {change:.1f})")
            kept += 1
    return kept


@dataclass
class ClipTally:
    """The faces checked in clips' files: DNP members' own faces in their own files (intact, unless a
    neighbour's blur reaches them), the blurred ones and those not blurred."""

    checked: int = 0
    violations: int = 0
    own: list[float] = field(default_factory=list)
    blurred: list[tuple[float, str]] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    def note(self) -> str:
        intact = [change for change in self.own if change < MEDIA_BLURRED]
        note = (
            f"multi-frame DNP faces: {self.checked} (file, frame, face) checked, threshold {MEDIA_BLURRED:g} per "
            f"quarter; least blurred: {min(self.blurred, default=(0.0, 'none'))[1]}; DNP members' own faces in "
            f"their own files: {len(intact)} intact (codec alone), changed at most "
            f"{max(intact, default=float('nan')):.1f}, {len(self.own) - len(intact)} blurred there too "
            f"(fail-closed: a neighbour's track, an unidentifiable DNP member)"
        )
        if self.missed:
            more = f" (and {len(self.missed) - 8} more)" if len(self.missed) > 8 else ""
            note += f"; NOT blurred: {'; '.join(self.missed[:8])}{more}"
        return note


@dataclass(frozen=True)
class ClipFile:
    """One published file of a clip, decoded, beside its upload's frames."""

    upload: MediaUpload
    viewer: object  # the member whose own file it is; None: the public file
    key: str
    times: list[float]
    source: list[np.ndarray]
    rendered: list[np.ndarray]

    def change(self, frame: int, box: Box) -> float:
        height, width = self.source[0].shape[:2]
        return face_change(self.rendered[frame][:height, :width], self.source[frame], box)


def unblurred_clips(chaos) -> int:
    """Frame by frame: in every published file of a multi-frame upload, each DNP member's face the seed pasted
    into a frame (its owner's own file aside), and each face row the blur decision marks for that file (at the
    frame of its frame_time), differs strongly from the upload's frame in each quarter of its middle.

    The seed's truth comes first: a DNP face the worker did not detect, or whose track did not reach a frame
    between two detections, is a violation. The owner's own file, where their face stays, shows what the codecs
    alone change: the note gives its largest figure next to the blurred faces' smallest (MEDIA_BLURRED between).
    """
    from faces.models import Photo

    tally = ClipTally()
    for photo in Photo.objects.published().filter(id__in=list(chaos.seeded.media_photos)):
        upload = chaos.seeded.media_photos[str(photo.id)]
        times, source = decode_media(read_bytes(photo.upload_key), upload.kind)
        for viewer, key in published_files(photo):
            clip = ClipFile(upload, viewer, key, times, source, decode_media(read_bytes(key), upload.kind)[1])
            for frame, box, what in faces_to_check(clip, photo, tally):
                check_clip_face(clip, frame, box, what, tally)
    chaos.report.notes.append(tally.note())
    chaos.report.figures.media_faces_checked = tally.checked
    return tally.violations


def faces_to_check(clip: ClipFile, photo, tally: ClipTally) -> list[tuple[int, Box, str]]:
    """(frame, box, what) of each face the file must hide: the seed's DNP faces but the viewer's own (whose
    change goes to tally.own), then each face row the blur decision marks that no seed face already covers."""
    from faces.publication import faces_blurred_in

    to_check = []
    for frame, shown in enumerate(clip.upload.dnp):
        for owner, box in shown:
            if owner != clip.viewer:
                to_check.append((frame, box, f"DNP member {str(owner)[:8]}'s face (seed)"))
            elif frame < len(clip.rendered):
                tally.own.append(clip.change(frame, box))
    height, width = clip.source[0].shape[:2]
    for face in faces_blurred_in(photo, clip.viewer):
        frame, box = frame_at(clip.times, face.frame_time), face_box(face, width, height)
        if not any(f == frame and iou(box, b) >= 0.3 for f, b, _ in to_check):
            to_check.append((frame, box, f"face row track {face.track} (marked)"))
    return to_check


def check_clip_face(clip: ClipFile, frame: int, box: Box, what: str, tally: ClipTally) -> None:
    tally.checked += 1
    if frame >= len(clip.rendered):
        tally.violations += 1  # frames missing: the frame-count check names it
        return
    change = clip.change(frame, box)
    where = (
        f"{clip.upload.name}, {'public' if clip.viewer is None else 'own'} file {clip.key.rsplit('/', 1)[-1]}, "
        f"frame {frame} ({clip.times[frame]:.3f} s): {what} at {tuple(round(v) for v in box)}, change {change:.1f}"
    )
    if change < MEDIA_BLURRED:
        tally.violations += 1
        tally.missed.append(where)
    else:
        tally.blurred.append((change, where))


def face_change(rendered: np.ndarray, source: np.ndarray, box: Box) -> float:
    """The smallest mean absolute difference over the four quarters of a face's middle (60 % of its box): a blur
    changes all four; a codec, or a blur box that lags a moving face, leaves one nearly as it was."""
    height, width = source.shape[:2]
    x1, y1, x2, y2 = box
    cx1, cx2 = max(0, int(x1 + 0.2 * (x2 - x1))), min(width, int(x1 + 0.8 * (x2 - x1)))
    cy1, cy2 = max(0, int(y1 + 0.2 * (y2 - y1))), min(height, int(y1 + 0.8 * (y2 - y1)))
    mx, my = (cx1 + cx2) // 2, (cy1 + cy2) // 2
    quarters = [(slice(cy1, my), slice(cx1, mx)), (slice(cy1, my), slice(mx, cx2)),
                (slice(my, cy2), slice(cx1, mx)), (slice(my, cy2), slice(mx, cx2))]  # fmt: skip
    return min(difference(rendered[rows, columns], source[rows, columns]) for rows, columns in quarters)


def unblurred_edge_cuts(chaos) -> int:
    """Each DNP face a crop cuts with the image edge: over the whole visible middle of the face, up to the edge,
    every published file but its owner's differs strongly from the upload.

    The face rows hold only the visible part of such a face; the harness knows the whole box, so the check does
    not depend on the worker's decisions: a cut DNP face that was not detected, or not matched, is a violation.
    The note says which it was.
    """
    from faces.models import Photo

    by_photo: dict[str, list[EdgeCut]] = defaultdict(list)
    for cut in chaos.seeded.edge_cuts:
        by_photo[cut.photo_id].append(cut)
    violations, checked, seen, missed = 0, 0, Counter(), []
    for photo in Photo.objects.published().filter(id__in=list(by_photo)):
        upload, files = read_image(photo.upload_key), published_files(photo)
        for cut in by_photo[str(photo.id)]:
            seen["placed"] += 1
            missed += edge_cut_missed(cut, photo, seen)
            for viewer, key in files:
                if viewer != cut.owner:
                    checked += 1
                    violations += key == photo.upload_key or edge_cut_kept(cut, read_image(key), upload)
    figures = chaos.report.figures
    figures.edge_cut_faces, figures.edge_cut_files_checked = seen["placed"], checked
    figures.edge_cut_not_detected, figures.edge_cut_not_marked = seen["not detected"], seen["detected, not marked"]
    chaos.report.notes.append(
        f"edge-cut DNP faces in published photos: {seen['placed']} (>= {CUT_MIN_VISIBLE:.0%} of the box visible); "
        f"checked to the edge in {checked} files; not blurred in the public file: {seen['not detected']} not "
        f"detected, {seen['detected, not marked']} detected below the blur threshold"
        + (f" ({'; '.join(missed)})" if missed else "")
    )
    return violations


def edge_cut_kept(cut: EdgeCut, rendered: np.ndarray, upload: np.ndarray) -> bool:
    rows, columns = cut.core()
    return difference(rendered[rows, columns], upload[rows, columns]) < BLURRED


def edge_cut_missed(cut: EdgeCut, photo, seen: Counter) -> list[str]:
    """Why the public file's blur decision left the cut face out, if it did: not detected, or not marked."""
    from faces.publication import faces_blurred_in

    face = cut.stored_face(list(photo.faces.all()))
    if face is not None and face.id in {marked.id for marked in faces_blurred_in(photo, None)}:
        return []
    seen["not detected" if face is None else "detected, not marked"] += 1
    similarity = "" if face is None or face.similarity is None else f", similarity {face.similarity:.3f}"
    what = "not detected" if face is None else "not marked"
    return [f"t1 face {cut.face}, {cut.side} cut, {cut.visible_share():.0%} visible, {what}{similarity}"]
