"""Members found through their event's faces (faces/links.py; docs/ARCHITECTURE.md §6, "Found through the event's
faces"), with real faces: Yao Ming a member, yaoming.jpg his selfie. His face in the team photo (players.jpg) reads
0.625 against the selfie; a recoloured copy of the selfie, uploaded as a photo of the event, reads 0.996, and 0.625
against the team photo's face. Each test sets `match` between the two (the team photo's face is not matched by his
reference) and `link` under 0.625 (it is, through the other photo's face), and checks what a link may rest on and
what it changes. The set's figures are in docs/MEASUREMENTS.md, "Members found through the event's faces"."""

import dataclasses
import threading
import uuid
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from faces import links, people, thresholds
from faces.detection import detect_and_store
from faces.engines import resident_engine
from faces.links import name_and_cluster
from faces.models import EventMember, Face, Photo, UnknownCluster
from faces.people import match_faces, match_of
from momentlens.devservices import samples
from tests.conftest import ENGINE
from tests.support import factories
from tests.support.readers import face_process_in_threads
from tests.support.waiting import poll

pytestmark = pytest.mark.usefixtures("media_storage")

TEAM_FACE = 0.625  # the team photo's face against the selfie, and against the selfie's copy


@pytest.fixture
def linking(monkeypatch, test_thresholds):
    """The committed thresholds with `match` between the two faces' similarities to the selfie and `link` under
    the two faces' similarity; nobody is matched from `clear_match`."""
    rule = dataclasses.replace(test_thresholds, match=TEAM_FACE + 0.05, clear_match=None, link=TEAM_FACE - 0.05)
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, rule)
    return rule


def _width(face) -> float:
    return face.box[2] - face.box[0]


def yao_ming_member(event, *, dnp: bool = False):
    """Yao Ming a member of `event`, yaoming.jpg his selfie: (his user id, the selfie's picture)."""
    picture = samples.read(samples.vectron_image("yaoming.jpg"))
    selfie = max(resident_engine().analyze(picture), key=_width)
    user = factories.member(event, dnp=dnp)
    factories.ready_reference(user, selfie.embedding, ENGINE)
    return user, picture


def the_team_photo() -> np.ndarray:
    team = samples.read(samples.vectron_image("players.jpg"))
    return samples.crop_around(team, samples.yao_ming_box(resident_engine()), margin=0.4)


def the_selfie_copy(picture: np.ndarray) -> np.ndarray:
    return samples.recolour(picture, hue_shift=6, gain=1.1)


def uploaded(event, image: np.ndarray):
    """A photo of `image` in `event`, its faces detected and stored (not matched): (photo, its one face)."""
    photo = factories.photo(event, image, width=image.shape[1], height=image.shape[0])
    faces = detect_and_store(photo, factories.still_of(image), resident_engine())
    assert len(faces) == 1
    return photo, faces[0]


def matched_and_placed(photo) -> None:
    """What the face path does after detection, the render aside: match by references, then link and cluster."""
    name_and_cluster(match_faces(photo, (photo.width, photo.height)))


@dataclasses.dataclass(frozen=True)
class Placed:
    user: uuid.UUID  # Yao Ming's
    copy: Photo  # the selfie's copy
    copy_face: Face
    team: Photo  # the team photo
    team_face: Face


def placed_in_turn(event, *, dnp: bool = False) -> Placed:
    """Yao Ming a member of `event`; the selfie's copy, then the team photo, uploaded, matched by his reference,
    linked and clustered."""
    user, picture = yao_ming_member(event, dnp=dnp)
    copy, copy_face = uploaded(event, the_selfie_copy(picture))
    matched_and_placed(copy)
    team, team_face = uploaded(event, the_team_photo())
    matched_and_placed(team)
    return Placed(user, copy, copy_face, team, team_face)


def report(command: str, target) -> str:
    out = StringIO()
    call_command(command, str(target), stdout=out)
    return out.getvalue()


def stored(face) -> Face:
    return Face.objects.get(id=face.id)


@pytest.mark.django_db
def test_a_face_his_selfie_does_not_reach_is_found_through_his_face_in_a_later_photo(linking):
    event = factories.event()
    user, picture = yao_ming_member(event)
    team, team_face = uploaded(event, the_team_photo())
    matched_and_placed(team)
    assert stored(team_face).matched_user_id is None, "his selfie alone does not reach the team photo's face"
    assert stored(team_face).unknown_cluster_id is not None

    copy, copy_face = uploaded(event, the_selfie_copy(picture))
    matched_and_placed(copy)

    assert stored(copy_face).matched_user_id == user
    assert stored(copy_face).matched_through is None
    found = stored(team_face)
    assert (found.matched_user_id, found.matched_through) == (user, copy_face.id)
    assert found.similarity == pytest.approx(TEAM_FACE, abs=0.01), "its similarity to his references, as before"
    assert found.unknown_cluster_id is None
    assert not UnknownCluster.objects.filter(event=event).exists()
    assert f"found {user} photos=2 faces=2 through_faces=1" in report("event_report", event.id)
    assert f"through={copy_face.id}" in report("photo_report", team.id)


@pytest.mark.django_db
def test_a_face_arriving_after_his_matched_face_is_found_on_arrival(linking):
    event = factories.event()
    placed = placed_in_turn(event)

    found = stored(placed.team_face)
    assert (found.matched_user_id, found.matched_through) == (placed.user, placed.copy_face.id)
    assert found.unknown_cluster_id is None


@pytest.mark.django_db
def test_a_clips_track_is_found_whole_through_his_face_in_a_photo(linking):
    """A clip's track of him is one identity: two frames' rows read as his team photo's face, a third as he turns
    away reads like nobody near him (a t1 guest's embedding stands in for it). Once his matched photo arrives, the
    whole track is found, the third face with it, and it leaves its cluster whole."""
    event = factories.event()
    user, picture = yao_ming_member(event)
    team_face = max(resident_engine().analyze(the_team_photo()), key=_width)
    turned_away = resident_engine().analyze(samples.group_photo())[0]
    clip = factories.photo_row(event, width=1920, height=1080)
    track = [
        factories.face_row(clip, seen.embedding, track=1, frame_time=0.5 * n, embedding_norm=seen.embedding_norm)
        for n, seen in enumerate((team_face, team_face, turned_away))
    ]
    matched_and_placed(clip)
    assert {stored(face).unknown_cluster_id for face in track} != {None}

    copy, copy_face = uploaded(event, the_selfie_copy(picture))
    matched_and_placed(copy)

    assert {(stored(face).matched_user_id, stored(face).matched_through) for face in track} == {(user, copy_face.id)}
    assert {stored(face).unknown_cluster_id for face in track} == {None}


@pytest.mark.django_db
def test_without_links_the_team_photo_is_not_his(linking, monkeypatch):
    """Not vacuous: with `link` unmeasured, the same two photos leave his team photo unmatched, in a cluster."""
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(linking, link=None))
    event = factories.event()
    _, picture = yao_ming_member(event)
    for image in (the_selfie_copy(picture), the_team_photo()):
        photo, face = uploaded(event, image)
        matched_and_placed(photo)
    assert stored(face).matched_user_id is None
    assert stored(face).unknown_cluster_id is not None


@pytest.mark.django_db
def test_a_face_seen_poorly_is_no_source(linking, monkeypatch):
    """His matched face seen poorly (every face turned past `turned_face` here) lends nobody its name: two faces
    seen poorly alike are alike for how they were seen."""
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(linking, turned_face=0.0))
    event = factories.event()
    placed = placed_in_turn(event)
    assert stored(placed.copy_face).matched_user_id == placed.user
    assert stored(placed.team_face).matched_user_id is None


@pytest.mark.django_db
def test_strangers_are_not_found_through_his_face(linking):
    event = factories.event()
    _, picture = yao_ming_member(event)
    copy, _ = uploaded(event, the_selfie_copy(picture))
    matched_and_placed(copy)
    group = samples.group_photo()
    photo = factories.photo(event, group, width=group.shape[1], height=group.shape[0])
    strangers = detect_and_store(photo, factories.still_of(group), resident_engine())
    matched_and_placed(photo)
    assert len(strangers) == 6
    assert not Face.objects.filter(photo=photo, matched_user_id__isnull=False).exists()


@pytest.mark.django_db
def test_a_photo_matched_again_drops_the_links_resting_on_it(linking):
    """He leaves the event; his matched photo is matched again (its reprocess): the team photo's link, which
    rested on it, is dropped, and that face rejoins the Unknown clusters."""
    event = factories.event()
    placed = placed_in_turn(event)
    assert stored(placed.team_face).matched_user_id == placed.user

    EventMember.objects.filter(event=event, user_id=placed.user).update(status="left")
    matched_and_placed(placed.copy)

    unlinked = stored(placed.team_face)
    assert (unlinked.matched_user_id, unlinked.matched_through) == (None, None)
    assert unlinked.unknown_cluster_id is not None


@pytest.mark.django_db
def test_a_link_never_changes_what_a_file_blurs(linking):
    """He is DNP: his team photo's face reaches his blur bar, and is blurred in the public file before and after
    it is found through his other photo; he gets no file of his own for it (a file reads references alone)."""
    event = factories.event()
    placed = placed_in_turn(event, dnp=True)
    assert stored(placed.team_face).matched_user_id == placed.user
    assert match_of(placed.team, (placed.team.width, placed.team.height)).by_file == {None: [True]}


def face_process_at_once(photos, monkeypatch, *, commit_after_both_looked: bool = False) -> None:
    """Each photo's face_process in its own thread and transaction; each links only once the other has recorded its
    own matches (the interleaving where neither has committed yet), and with `commit_after_both_looked` commits only
    once the other has linked too."""
    real_link = links.link_faces
    arrived, looked = [threading.Event() for _ in photos], [threading.Event() for _ in photos]
    mine = threading.local()

    def link_after_the_other(match):
        arrived[mine.index].set()
        assert poll(lambda: arrived[1 - mine.index].is_set(), timeout=20, interval=0.01)
        changed = real_link(match)
        looked[mine.index].set()
        if commit_after_both_looked:
            assert poll(lambda: looked[1 - mine.index].is_set(), timeout=20, interval=0.01)
        return changed

    monkeypatch.setattr(links, "link_faces", link_after_the_other)

    face_process_in_threads(photos, mine)


def yao_ming_uploads(event):
    """Yao Ming a member of `event`; the selfie's copy and the team photo uploaded and detected (committed), not
    yet matched: (his user id, [(photo, face) of each])."""
    user, picture = yao_ming_member(event)
    return user, [uploaded(event, image) for image in (the_selfie_copy(picture), the_team_photo())]


@pytest.mark.usefixtures("live_db")
def test_two_readers_at_once_find_him_as_one_reader_does(linking, monkeypatch):
    event = factories.event()
    user, [(copy, copy_face), (team, team_face)] = yao_ming_uploads(event)
    face_process_at_once([copy, team], monkeypatch)
    assert (stored(team_face).matched_user_id, stored(team_face).matched_through) == (user, copy_face.id)
    assert not UnknownCluster.objects.filter(event=event).exists()


@pytest.mark.usefixtures("live_db")
def test_without_the_lock_two_readers_at_once_miss_him(linking, monkeypatch):
    """Not vacuous: with the event's lock taken out of linking, each reader looks before the other commits."""
    monkeypatch.setattr(people, "lock_event_clusters", lambda event_id: None)
    event = factories.event()
    _, [(copy, _), (team, team_face)] = yao_ming_uploads(event)
    face_process_at_once([copy, team], monkeypatch, commit_after_both_looked=True)
    assert stored(team_face).matched_user_id is None
