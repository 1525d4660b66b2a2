"""Members found through their event's faces (docs/ARCHITECTURE.md §6, "Found through the event's faces").

A selfie is one picture, taken another day; a guest's faces at one event are more alike among themselves. So a face
that its member's references do not reach is matched to them through a *source* face of another photo of the same
event: one their references matched, seen clearly (two faces seen poorly, small and blurred or dark, are alike for
how they were seen), and never one matched through another face (a chain could drift from a face to a
look-alike). The face must be at least `link` similar to one of the member's source faces and to no other
member's, and a still may hold the member once. It is stored as matched to them, with its similarity to their
references and the source face's id (`Face.matched_through`).

A link decides only who is in a photo (`matched_user_id`, which the app's people features read). Every blur decision
reads the members' references alone (no reference is ever added automatically), so a link never blurs or unblurs a
face, and a file never depends on which photo came first.

Links are made under the event's cluster lock, after the photo's own matches are recorded and before its faces are
clustered: two readers linking photos of one event at once see each other's faces in turn. A photo matched again
(reprocess) first drops every link that rested on one of its faces; those faces are linked again or clustered.
"""

import itertools
import uuid

import numpy as np
from django.db import connection
from pgvector import Vector

from faces import people, queries, thresholds
from faces.models import Face
from faces.people import PhotoMatch, cluster_faces, identities


def name_and_cluster(match: PhotoMatch | None) -> None:
    """Who is in the photo, once its faces are matched by references: links, then Unknown clusters, under the
    event's cluster lock (faces.people.cluster_faces), which is held until the transaction ends."""
    if match is not None:
        cluster_faces(match, link_faces(match))


def link_faces(match: PhotoMatch) -> list[Face]:
    """Match what the photo's references left unmatched through the event's faces, and the event's unmatched faces
    through the photo's; returns the faces of other photos whose match changed (for the clusters to follow)."""
    rule = match.thresholds
    if rule.link is None or rule.match is None:
        return []
    first = match.faces[0]
    # The one lock of the event's clusters (faces.people), which clustering then holds on to.
    people.lock_event_clusters(first.event_id)
    freed = _unlink_resting_on(match.faces)
    users = _identifying(match)
    if not users:
        return freed
    sources = [face for face, clear in zip(match.faces, match.clear, strict=True) if clear and _by_references(face)]
    near = _unmatched_near(first, [face.embedding for face in sources], rule)
    own = [face for face, poor in zip(match.faces, match.too_poor, strict=True) if not poor]
    changed = {face.id: face for face in freed}
    for identity in identities([face for face in own if face.matched_user_id is None]) + identities(
        _whole_tracks(near + freed)
    ):
        if _link(identity, match, users, rule) and identity[0].photo_id != first.photo_id:
            changed.update((face.id, face) for face in identity)
    return list(changed.values())


def _identifying(match: PhotoMatch) -> list[uuid.UUID]:
    """The candidates who can be named: an ambiguous selfie's member identifies nobody."""
    candidates = match.candidates
    return [user for column, user in enumerate(candidates.user_ids) if column not in candidates.ambiguous]


def _by_references(face: Face) -> bool:
    return face.matched_user_id is not None and face.matched_through is None


def _unlink_resting_on(faces: list[Face]) -> list[Face]:
    """Drop the links of other photos' faces that rest on any of `faces` (matched again, they may name someone
    else now); the faces unlinked. A face another transaction holds is skipped, here and wherever this module
    writes another photo's face: that transaction is a job of its own photo, which has dropped the face's link
    already and links it itself once this one commits (waiting for it here, under the event's lock it waits for,
    would deadlock)."""
    resting = list(
        Face.objects.select_for_update(skip_locked=True).filter(matched_through__in=[face.id for face in faces])
    )
    for face in resting:
        face.matched_user_id, face.matched_through = None, None
    Face.objects.bulk_update(resting, ["matched_user_id", "matched_through"])
    return resting


def _unmatched_near(first: Face, embeddings: list, rule) -> list[Face]:
    """The event's unmatched faces of photos other than `first`'s within `link` of any of `embeddings`, locked (those
    another transaction holds skipped: `_unlink_resting_on`)."""
    if not embeddings:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            queries.UNMATCHED_NEAR,
            [_texts(embeddings), 1.0 - rule.link, first.event_id, first.engine, first.photo_id, rule.unsure_norm],
        )
        ids = [row[0] for row in cursor.fetchall()]
    return list(Face.objects.filter(id__in=ids)) if ids else []


def _whole_tracks(faces: list[Face]) -> list[Face]:
    """`faces`, each clip face with the rest of its track's unmatched faces (a track is one identity)."""
    whole = {face.id: face for face in faces}
    for photo_id, track in {(face.photo_id, face.track) for face in faces if face.track is not None}:
        track_faces = Face.objects.select_for_update(skip_locked=True).filter(photo_id=photo_id, track=track)
        whole.update((face.id, face) for face in track_faces)
    return [face for face in whole.values() if face.matched_user_id is None]


def _link(identity: list[Face], match: PhotoMatch, users: list[uuid.UUID], rule) -> bool:
    """Name `identity` after the one member whose source face seen clearly it comes within `link` of; whether it
    was."""
    near = _sources_near(identity, users, rule)
    members = {member for _, member in near}
    if len(members) != 1:
        return False  # nobody's face, or two members' (then it is not told which)
    source, member = near[0]
    first = identity[0]
    if first.track is None and _photo_holds(first, member):
        return False
    embeddings = np.array([face.embedding for face in identity], dtype=np.float32)
    column = match.candidates.user_ids.index(member)
    similarity = float(match.candidates.similarities(embeddings)[:, column].max())
    for face in identity:
        face.matched_user_id, face.matched_through, face.similarity = member, source, similarity
    Face.objects.bulk_update(identity, ["matched_user_id", "matched_through", "similarity"])
    return True


def _sources_near(identity: list[Face], users: list[uuid.UUID], rule) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(source face id, member) of the source faces within `link` of any face of `identity`, nearest first, those
    seen clearly only: two faces seen poorly alike (small, blurred, dark) are alike for how they were seen."""
    first = identity[0]
    with connection.cursor() as cursor:
        cursor.execute(
            queries.SOURCES_NEAR,
            [
                _texts([face.embedding for face in identity]),
                1.0 - rule.link,
                first.event_id,
                first.engine,
                users,
                first.photo_id,
            ],
        )
        near = [(source, member) for source, member, _ in cursor.fetchall()]
    clear = _seen_clearly([source for source, _ in near])
    return [(source, member) for source, member in near if source in clear]


def _seen_clearly(ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Those of the faces `ids` that their engine's thresholds see clearly (faces.thresholds.Judgement.clear)."""
    faces = list(Face.objects.filter(id__in=ids).select_related("photo").order_by("photo_id", "id"))
    clear = set()
    for _, group in itertools.groupby(faces, key=lambda face: face.photo_id):
        group = list(group)
        photo = group[0].photo
        size = None if photo.width is None or photo.height is None else (photo.width, photo.height)
        judgement = thresholds.judge_stored(group[0].engine, group, size)
        clear.update(face.id for face, seen in zip(group, judgement.clear, strict=True) if seen)
    return clear


def _photo_holds(face: Face, member: uuid.UUID) -> bool:
    """Whether another face of `face`'s still is already `member`'s: one guest is in a picture once."""
    return Face.objects.filter(photo_id=face.photo_id, matched_user_id=member).exclude(id=face.id).exists()


def _texts(embeddings: list) -> list[str]:
    return [Vector(np.asarray(embedding, dtype=np.float32)).to_text() for embedding in embeddings]
