"""Detection, matching and clustering on real photos with the buffalo_s engine."""

import dataclasses
import uuid

import numpy as np
import pytest

from faces import thresholds
from faces.detection import detect_and_store
from faces.engines import resident_engine
from faces.geometry import iou
from faces.jobs.reference_process import reference_process
from faces.links import name_and_cluster
from faces.models import EventMember, Face, SubjectReference, UnknownCluster
from faces.people import Candidates, match_faces
from faces.publication import faces_blurred_in
from momentlens.devservices import samples
from tests.conftest import ENGINE
from tests.support import factories
from tests.support.queue_helpers import by_hand

pytestmark = pytest.mark.usefixtures("media_storage")


def match_and_cluster(photo, size):
    """What the face path does after detection, the render aside: match, then link and cluster."""
    match = match_faces(photo, size)
    name_and_cluster(match)
    return match


def t1_detected_and_matched(event, group):
    """t1 uploaded to the event, detected, matched and clustered as the face path does."""
    photo = factories.photo(event, group, width=group.shape[1], height=group.shape[0])
    detect_and_store(photo, factories.still_of(group), resident_engine())
    match_and_cluster(photo, (group.shape[1], group.shape[0]))
    return photo


def stored_faces(photo) -> list[Face]:
    return sorted(photo.faces.all(), key=lambda face: face.box_x)


@pytest.mark.django_db
def test_the_engine_finds_the_six_faces_of_t1(group):
    photo = factories.photo(factories.event(), group)
    faces = detect_and_store(photo, factories.still_of(group), resident_engine())
    assert len(faces) == 6
    photo.refresh_from_db()
    assert photo.faces_detected_at is not None
    height, width = group.shape[:2]
    for face in stored_faces(photo):
        box = np.array([face.box_x, face.box_y, face.box_x + face.box_w, face.box_y + face.box_h])
        assert ((box >= 0) & (box <= 1)).all()
        landmarks = np.array(face.landmarks)
        assert landmarks.shape == (5, 2)
        assert ((landmarks >= box[:2]) & (landmarks <= box[2:])).all(), "landmarks lie inside their box"
        # The box lands on a face: the detector, run on a crop around it alone, finds that face again.
        pixels = box * [width, height, width, height]
        pad = (pixels[2:] - pixels[:2]) * 0.5
        x1, y1 = np.maximum(pixels[:2] - pad, 0).astype(int)
        x2, y2 = np.minimum(pixels[2:] + pad, [width, height]).astype(int)
        again = resident_engine().detect(group[y1:y2, x1:x2])
        assert len(again) == 1
        assert iou(again[0].box + np.array([x1, y1, x1, y1]), pixels) > 0.6


def make_reference_for(user_id, group, face) -> SubjectReference:
    return factories.reference(user_id, samples.derived_portrait(group, face.box))


@pytest.mark.django_db
def test_a_reference_from_one_t1_face_matches_that_face_above_the_other_five(group, group_faces, test_thresholds):
    event = factories.event()
    user = factories.member(event, dnp=True)
    reference = make_reference_for(user, group, group_faces[2])
    reference_process({"job": "reference_process", "reference_id": str(reference.id)}, by_hand("reference_process"))
    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.READY

    photo = t1_detected_and_matched(event, group)

    faces = stored_faces(photo)
    assert [face.matched_user_id for face in faces] == [None, None, user, None, None, None]
    assert faces[2].similarity == max(face.similarity for face in faces)
    assert faces[2].similarity >= test_thresholds.match
    assert all(face.similarity < test_thresholds.blur for i, face in enumerate(faces) if i != 2)
    assert [face.id for face in faces_blurred_in(photo)] == [faces[2].id]
    assert faces_blurred_in(photo, viewer=user) == []


@pytest.mark.django_db
def test_with_thresholds_not_measured_nothing_matches_and_every_face_is_blurred(
    group, group_faces, unmeasured_thresholds
):
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, group_faces[2].embedding, ENGINE)
    photo = t1_detected_and_matched(event, group)

    faces = stored_faces(photo)
    assert all(face.matched_user_id is None for face in faces)
    assert all(face.unknown_cluster_id is None for face in faces)
    assert len(faces_blurred_in(photo)) == 6
    assert len(faces_blurred_in(photo, viewer=user)) == 6
    assert UnknownCluster.objects.count() == 0


@pytest.mark.django_db
def test_other_events_members_who_left_and_other_engines_never_match(group, group_faces, test_thresholds):
    event, elsewhere = factories.event("here"), factories.event("elsewhere")
    in_other_event = factories.member(elsewhere, dnp=True)
    left = factories.member(event, dnp=True, status="left")
    other_engine = factories.member(event, dnp=True)
    factories.ready_reference(in_other_event, group_faces[0].embedding, ENGINE)
    factories.ready_reference(left, group_faces[1].embedding, ENGINE)
    factories.ready_reference(other_engine, group_faces[2].embedding, "insightface-buffalo_l")
    photo = t1_detected_and_matched(event, group)

    assert all(face.matched_user_id is None for face in photo.faces.all())
    assert all(face.similarity is None for face in photo.faces.all()), "no candidate, no comparison"
    # The active DNP member has no reference of this engine: any face could be theirs.
    assert len(faces_blurred_in(photo)) == 6
    EventMember.objects.filter(user_id=other_engine).update(do_not_publish=False)
    assert faces_blurred_in(photo) == [], "a DNP member of another event, or one who left, blurs nothing here"


@pytest.mark.django_db
def test_a_dnp_member_without_a_usable_reference_blurs_every_face_until_one_is_ready(
    group, group_faces, test_thresholds
):
    event = factories.event()
    user = factories.member(event, dnp=True)
    # t1's middle guest: no other face of t1 comes near their reference (under 0.06).
    pending = factories.reference(user, samples.derived_portrait(group, group_faces[2].box))
    photo = t1_detected_and_matched(event, group)
    assert len(faces_blurred_in(photo)) == 6, "pending reference: when unsure, blur"

    reference_process({"job": "reference_process", "reference_id": str(pending.id)}, by_hand("reference_process"))
    match_and_cluster(photo, (group.shape[1], group.shape[0]))
    blurred = faces_blurred_in(photo)
    assert [face.matched_user_id for face in blurred] == [user]


@pytest.mark.django_db
def test_an_ambiguous_selfie_blurs_only_the_faces_it_shows(group, group_faces, test_thresholds):
    """A DNP member whose selfie shows two comparably large faces (`many_faces`): a face near either is blurred,
    everyone else's stays visible (fail-closed blurred all six), and nobody is identified by it."""
    event = factories.event()
    user = factories.member(event, dnp=True)
    ambiguous = factories.reference(user, factories.pair_selfie(group, group_faces[2], group_faces[3]))
    reference_process({"job": "reference_process", "reference_id": str(ambiguous.id)}, by_hand("reference_process"))
    ambiguous.refresh_from_db()
    assert (ambiguous.status, len(ambiguous.candidate_embeddings)) == ("many_faces", 2)

    photo = t1_detected_and_matched(event, group)
    blurred = {face.id for face in faces_blurred_in(photo)}
    shown = stored_faces(photo)
    assert {shown[2].id, shown[3].id} <= blurred, "either candidate may be the member"
    # t1's two leftmost guests come near neither (under 0.03 in t1 itself).
    assert not blurred & {shown[0].id, shown[1].id}, "everyone else stays visible"
    assert not photo.faces.filter(matched_user_id__isnull=False).exists()


@pytest.mark.django_db
def test_a_neighbour_the_frame_cuts_leaves_the_selfie_its_subject(group, group_faces, test_thresholds):
    """The selfie frames t1's third guest whole; the fourth, beside them, runs into the right edge, still comparably
    large: the frame tells the subject, so the reference is `ready` with the whole face, and the member is found in
    t1. Without the rule it is `many_faces` and nobody is found."""
    event = factories.event()
    user = factories.member(event, dnp=False)
    selfie = factories.reference(user, factories.beside_the_frame(group, group_faces[2], group_faces[3]))
    result = reference_process(
        {"job": "reference_process", "reference_id": str(selfie.id)}, by_hand("reference_process")
    )
    selfie.refresh_from_db()
    assert (result["faces"], selfie.status, selfie.candidate_embeddings) == (2, "ready", None), result
    assert float(np.dot(selfie.embedding, group_faces[2].embedding)) > 0.9, "the whole face is the subject"

    photo = t1_detected_and_matched(event, group)
    assert [face.id for face in photo.faces.filter(matched_user_id=user)] == [stored_faces(photo)[2].id]


@pytest.mark.django_db
def test_a_whole_face_beside_a_subject_the_frame_cuts_stays_ambiguous(group, group_faces):
    """The largest face runs into the edge (t1's third guest, their forehead cut by the top edge: a close-up the
    frame may cut), the one beside them is whole. The frame does not tell which is the subject: `many_faces`, both
    kept, both protecting."""
    subject, neighbour = group_faces[2], group_faces[3]
    top, bottom = int(subject.box[1]) + 12, int(neighbour.box[3]) + 40
    cut_close_up = np.ascontiguousarray(group[top:bottom, int(subject.box[0]) - 60 : int(neighbour.box[2]) + 60])
    user = factories.member(factories.event(), dnp=True)
    selfie = factories.reference(user, cut_close_up)
    reference_process({"job": "reference_process", "reference_id": str(selfie.id)}, by_hand("reference_process"))
    selfie.refresh_from_db()
    assert (selfie.status, len(selfie.candidate_embeddings)) == ("many_faces", 2)


@pytest.mark.django_db
def test_an_ambiguous_selfie_keeps_only_the_face_it_shows_clearly(group, group_faces, test_thresholds, monkeypatch):
    """The selfie's second, comparably large face is someone in the dark behind the subject, too poorly seen to
    judge (norm 14.7, under an unsure_norm of 15, set here: the darkest such face the engine still finds): it is no
    candidate, so the clear face alone protects (keeping none, as before, blurred all six)."""
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, unsure_norm=15))
    event = factories.event()
    user = factories.member(event, dnp=True)
    selfie = factories.pair_selfie(group, group_faces[2], group_faces[3])
    clear, behind = sorted(resident_engine().analyze(selfie, small_faces=False), key=lambda face: face.box[0])
    reference = factories.reference(user, factories.in_the_dark_behind(selfie, behind.box))
    result = reference_process(
        {"job": "reference_process", "reference_id": str(reference.id)}, by_hand("reference_process")
    )
    reference.refresh_from_db()
    assert (reference.status, result.get("detail")) == ("many_faces", "face_too_poor"), result
    (kept,) = reference.candidate_embeddings
    assert float(np.dot(kept, clear.embedding)) > 0.9, "the clear face is the candidate"

    photo = t1_detected_and_matched(event, group)
    shown = stored_faces(photo)
    assert [face.id for face in faces_blurred_in(photo)] == [shown[2].id], "only the clear face's owner is blurred"
    assert not photo.faces.filter(matched_user_id__isnull=False).exists(), "nobody is identified by it"


@pytest.mark.django_db
def test_a_guest_who_resembles_a_dnp_member_stays_visible_once_their_own_reference_explains_them(
    group, group_faces, test_thresholds, monkeypatch
):
    """A player of players.jpg (at 741, 166) reaches the selfie of t1's fourth guest at 0.19, over a `blur` of 0.17
    (set here): with that guest DNP, the player was blurred. As a member of the event with a selfie of their own
    (0.95), the player's face is theirs, far ahead of the DNP member's (`explained_lead`), and their selfie is no
    look of the DNP member's (0.15 from it, under `blur`): it stays visible. Without the rule, or with the player no
    member, it is blurred (docs/ARCHITECTURE.md §6)."""
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, blur=0.17))
    players = samples.read(samples.vectron_image("players.jpg"))
    (player,) = [face for face in resident_engine().analyze(players) if face_at(face.box, 741, 166)]
    event = factories.event()
    dnp, guest = factories.member(event, dnp=True), factories.member(event)
    make_reference_for(dnp, group, group_faces[3])
    make_reference_for(guest, players, player)
    for reference in SubjectReference.objects.all():
        reference_process({"job": "reference_process", "reference_id": str(reference.id)}, by_hand("reference_process"))
    photo = t1_detected_and_matched(event, players)
    (theirs,) = [face for face in photo.faces.all() if face_at(box_in(face, players), 741, 166)]
    assert theirs.matched_user_id == guest
    selfie = SubjectReference.objects.get(user_id=dnp).embedding
    assert float(np.dot(theirs.embedding, selfie)) >= 0.17, "it reaches the DNP member"
    assert theirs.id not in {face.id for face in faces_blurred_in(photo)}

    monkeypatch.setitem(
        thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, blur=0.17, explained_lead=None)
    )
    assert theirs.id in {face.id for face in faces_blurred_in(photo)}, "without the rule"
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, blur=0.17))
    EventMember.objects.filter(user_id=guest).delete()
    assert theirs.id in {face.id for face in faces_blurred_in(photo)}, "nobody explains it"


def face_at(box, x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def box_in(face: Face, image: np.ndarray) -> tuple:
    """A stored face's box in pixels of `image`: x1, y1, x2, y2."""
    height, width = image.shape[:2]
    x, y = face.box_x * width, face.box_y * height
    return x, y, x + face.box_w * width, y + face.box_h * height


@pytest.mark.django_db
def test_a_selfie_of_a_dnp_member_sent_as_another_members_never_unblurs_them(
    group, group_faces, test_thresholds, monkeypatch
):
    """An attacker in the event sends t1's fourth guest's portrait as their own selfie, while that guest (DNP) gave a
    poor one (blurred, sigma 8: 0.48 from their face in t1). Matched to the attacker at 0.95, the DNP member's face
    leads their own selfie by far more than `explained_lead`; but the attacker's selfie reaches the DNP member's at
    `blur`, so it explains no face: the DNP member's stays blurred. Without that gate the attack works."""
    event = factories.event()
    dnp, attacker = factories.member(event, dnp=True), factories.member(event)
    portrait = samples.derived_portrait(group, group_faces[3].box)
    for user, image in ((dnp, samples.cv2.GaussianBlur(portrait, (0, 0), 8)), (attacker, portrait)):
        reference = factories.reference(user, image)
        reference_process({"job": "reference_process", "reference_id": str(reference.id)}, by_hand("reference_process"))
        reference.refresh_from_db()
        assert reference.status == SubjectReference.Status.READY
    photo = t1_detected_and_matched(event, group)
    theirs = stored_faces(photo)[3]
    assert theirs.matched_user_id == attacker, "the attacker's selfie is the better one"
    assert theirs.id in {face.id for face in faces_blurred_in(photo)}

    monkeypatch.setattr(Candidates, "reaching_dnp", lambda self, threshold: np.zeros(len(self.user_ids), dtype=bool))
    assert theirs.id not in {face.id for face in faces_blurred_in(photo)}, "without the gate it is unblurred"


@pytest.mark.django_db
def test_clustering_groups_the_same_person_across_photos_and_separates_people(group, test_thresholds):
    event = factories.event()
    first = factories.photo(event, group, width=group.shape[1], height=group.shape[0])
    detect_and_store(first, factories.still_of(group), resident_engine())
    match_and_cluster(first, (group.shape[1], group.shape[0]))
    smaller = samples.recolour(np.ascontiguousarray(group[:, ::1]), hue_shift=4, gain=1.05)
    smaller = samples.cv2.resize(smaller, None, fx=0.8, fy=0.8)
    second = factories.photo(event, smaller)
    detect_and_store(second, factories.still_of(smaller), resident_engine())
    match_and_cluster(second, (group.shape[1], group.shape[0]))

    assert UnknownCluster.objects.filter(event=event).count() == 6
    for a, b in zip(stored_faces(first), stored_faces(second), strict=True):
        assert a.unknown_cluster_id is not None
        assert a.unknown_cluster_id == b.unknown_cluster_id, "the same person, one cluster"
    assert set(UnknownCluster.objects.values_list("face_count", flat=True)) == {2}


def yao_ming_seen_three_ways() -> list:
    """Yao Ming in the 2008 team photo, in his own portrait, and that portrait shrunk to 48 px and blurred (a
    guest at the back, out of focus): the third reaches the first two's centroid at about 0.42."""
    engine = resident_engine()
    team = samples.read(samples.vectron_image("players.jpg"))
    portrait = samples.read(samples.vectron_image("yaoming.jpg"))
    (face,) = engine.analyze(portrait)
    scale = 48 / float(face.box[2] - face.box[0])
    small = samples.cv2.GaussianBlur(samples.cv2.resize(portrait, None, fx=scale, fy=scale), (0, 0), 2.5)
    canvas = np.full((400, 400, 3), 128, dtype=np.uint8)
    canvas[50 : 50 + small.shape[0], 50 : 50 + small.shape[1]] = small
    return [samples.crop_around(team, samples.yao_ming_box(engine)), portrait, canvas]


@pytest.mark.django_db
def test_one_unknown_guest_seen_well_and_poorly_is_one_cluster_and_another_is_not_in_it(test_thresholds):
    """The measured `cluster` (0.35, docs/ARCHITECTURE.md §6) holds the blurred view with the others; at 0.45 it
    was a cluster of its own. Tom Hanks, a stranger to all three, stays apart."""
    event = factories.event()
    photos = []
    for image in [*yao_ming_seen_three_ways(), samples.tom_hanks()]:
        photo = factories.photo(event, image, width=image.shape[1], height=image.shape[0])
        detect_and_store(photo, factories.still_of(image), resident_engine())
        match_and_cluster(photo, (image.shape[1], image.shape[0]))
        photos.append(photo)
    largest = [largest_face(photo) for photo in photos]
    assert all(face.unknown_cluster_id is not None for face in largest)
    assert len({face.unknown_cluster_id for face in largest[:3]}) == 1, "one person, one cluster"
    assert largest[3].unknown_cluster_id != largest[0].unknown_cluster_id


@pytest.mark.django_db
def test_two_clusters_of_one_guest_merge_into_the_older_once_a_photo_shows_they_agree(test_thresholds):
    """Yao Ming in the team photo, then small and blurred (0.30 from the first: a cluster of its own), then his
    portrait, which joins the first (0.64) and brings its centroid to 0.42 from the second's: at `cluster_merge`
    (0.40) the two are one person's. The older id stays; the younger is gone. Tom Hanks stays apart."""
    team, portrait, small = yao_ming_seen_three_ways()
    event = factories.event()
    photos = []
    for image in [team, small, portrait, samples.tom_hanks()]:
        photo = factories.photo(event, image, width=image.shape[1], height=image.shape[0])
        detect_and_store(photo, factories.still_of(image), resident_engine())
        match_and_cluster(photo, (image.shape[1], image.shape[0]))
        photos.append(photo)
        if len(photos) == 2:
            first, second = (largest_face(photo).unknown_cluster_id for photo in photos)
            assert first != second, "the small blurred view alone is too unlike the team photo to join it"
    clusters = [largest_face(photo).unknown_cluster_id for photo in photos]
    assert clusters[:3] == [first] * 3, "one person, one cluster: the older id"
    assert not UnknownCluster.objects.filter(id=second).exists(), "the younger id is deleted, never reused"
    assert UnknownCluster.objects.get(id=first).face_count == Face.objects.filter(unknown_cluster_id=first).count()
    assert clusters[3] != first


def largest_face(photo) -> Face:
    return max(photo.faces.all(), key=lambda face: face.box_w * face.box_h)


@pytest.mark.django_db
def test_a_members_face_seen_clearly_is_matched_from_the_lower_clear_match(test_thresholds, monkeypatch):
    """Yao Ming in the team photo, out of focus: still seen clearly (norm over `clear_norm`, 46 px), 0.36 from his
    portrait, under `match` (0.40) but over `clear_match` (0.35), where no clear face of a stranger reaches anyone
    measured (docs/ARCHITECTURE.md §6). He is found in his photo; with his norm (21.9) under `clear_norm` he would
    not be."""
    engine = resident_engine()
    event = factories.event()
    user = factories.member(event)
    (portrait,) = engine.analyze(samples.read(samples.vectron_image("yaoming.jpg")))
    factories.ready_reference(user, portrait.embedding, ENGINE)
    team = samples.read(samples.vectron_image("players.jpg"))
    blurred = samples.cv2.GaussianBlur(samples.crop_around(team, samples.yao_ming_box(engine)), (0, 0), 1.8)
    photo = factories.photo(event, blurred, width=blurred.shape[1], height=blurred.shape[0])
    detect_and_store(photo, factories.still_of(blurred), engine)
    match_and_cluster(photo, (blurred.shape[1], blurred.shape[0]))

    face = largest_face(photo)
    assert face.embedding_norm >= test_thresholds.clear_norm, face.embedding_norm
    assert test_thresholds.clear_match <= face.similarity < test_thresholds.match, face.similarity
    assert face.matched_user_id == user

    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, clear_norm=22.5))
    match_faces(photo, (blurred.shape[1], blurred.shape[0]))
    assert largest_face(photo).matched_user_id is None, "seen less clearly, `match` decides"


@pytest.mark.django_db
def test_reference_process_outcomes(group, test_thresholds):
    from django.db import connection

    event_a, event_b, event_left = factories.event("a"), factories.event("b"), factories.event("c")
    user = factories.member(event_a, dnp=True)
    factories.member(event_b, user_id=user)
    factories.member(event_left, user_id=user, status="left")

    one = factories.reference(user, samples.tom_hanks())
    none = factories.reference(user, samples.face_free_scenes()[0])
    many = factories.reference(user, group)
    results = {
        name: reference_process({"job": "reference_process", "reference_id": str(ref.id)}, by_hand("reference_process"))
        for name, ref in (("one", one), ("none", none), ("many", many))
    }
    for ref in (one, none, many):
        ref.refresh_from_db()
    assert (one.status, none.status, many.status) == ("ready", "no_face", "many_faces")
    assert one.engine == ENGINE
    assert np.linalg.norm(one.embedding) == pytest.approx(1.0, abs=1e-5)
    assert none.embedding is None
    assert many.embedding is None
    assert all(ref.processed_at for ref in (one, none, many))
    assert results["many"]["faces"] == 6
    # The group's comparably large faces are kept, any of which may be the subject's; the others keep none.
    assert len(many.candidate_embeddings) == results["many"]["candidates"] >= 2
    assert all(np.linalg.norm(c) == pytest.approx(1.0, abs=1e-4) for c in many.candidate_embeddings)
    assert one.candidate_embeddings is None
    assert none.candidate_embeddings is None
    with connection.cursor() as cursor:
        cursor.execute("SELECT message FROM pgmq.q_jobs ORDER BY msg_id")
        sent = [row[0] for row in cursor.fetchall()]
    import json

    # The ready reference and the ambiguous one each re-render the events the user is active in; no_face none.
    assert sorted(json.loads(m)["event_id"] for m in sent) == sorted([str(event_a.id), str(event_b.id)] * 2)
    assert all(json.loads(m)["job"] == "reprocess_event" for m in sent)


@pytest.fixture
def nothing_judgeable(monkeypatch, test_thresholds):
    """The measured thresholds, but every face too poorly seen to judge (an unsure_norm above any norm)."""
    import dataclasses

    from faces import thresholds

    engine_thresholds = dataclasses.replace(test_thresholds, unsure_norm=1000.0)
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, engine_thresholds)
    return engine_thresholds


@pytest.mark.django_db
def test_faces_too_poorly_seen_to_judge_are_blurred_where_a_dnp_member_is_and_join_no_cluster(
    group, group_faces, nothing_judgeable
):
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, group_faces[2].embedding, ENGINE)
    photo = t1_detected_and_matched(event, group)

    faces = stored_faces(photo)
    assert all(face.embedding_norm > 15 for face in faces), "the norm is stored with each face"
    assert len(faces_blurred_in(photo)) == 6, "any of them could be the DNP member"
    assert faces[2].matched_user_id == user, "a face that reaches match is still matched"
    assert UnknownCluster.objects.count() == 0
    assert all(face.unknown_cluster_id is None for face in faces)


@pytest.mark.django_db
def test_a_reference_too_poorly_seen_to_judge_is_no_usable_face(group, group_faces, nothing_judgeable):
    user = uuid.uuid4()
    reference = make_reference_for(user, group, group_faces[2])
    result = reference_process(
        {"job": "reference_process", "reference_id": str(reference.id)}, by_hand("reference_process")
    )
    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.NO_FACE
    assert reference.embedding is None
    assert result["detail"] == "face_too_poor"
