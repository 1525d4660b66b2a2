"""photo_report and event_report print what an operator needs at 2am."""

from io import StringIO

import pytest
from django.core.management import call_command

from faces.engines import resident_engine
from faces.models import Photo, PhotoVariant
from momentlens.devservices import samples
from momentlens.devservices.samples import png_promising
from tests.support import factories
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import send

pytestmark = pytest.mark.usefixtures("live_db", "media_storage", "test_thresholds")


@pytest.fixture
def published_event(settings):
    """The demo's shape: a group photo with one DNP member and a blur region, plus a bad upload."""
    settings.WORKER_RETRY_BACKOFF_S = 0.01
    group = samples.group_photo()
    face = sorted(resident_engine().analyze(group), key=lambda f: f.box[0])[0]
    event = factories.event("Reunion")
    user = factories.member(event, dnp=True)
    factories.member(event)
    reference = factories.reference(user, samples.derived_portrait(group, face.box))
    send({"job": "reference_process", "reference_id": str(reference.id)})
    run_worker_drain()
    photo = factories.photo(event, group, blur_regions=[{"x": 0.02, "y": 0.75, "w": 0.2, "h": 0.2}])
    broken = factories.photo(event, data=png_promising(20_000, 20_000))
    send({"job": "face_process", "photo_id": str(photo.id)})
    send({"job": "face_process", "photo_id": str(broken.id)})
    run_worker_drain()
    return event, photo, broken, user


def report(command: str, target) -> str:
    out = StringIO()
    call_command(command, str(target), stdout=out)
    return out.getvalue()


def test_photo_report_shows_faces_matches_clusters_and_files(published_event):
    event, photo, _, user = published_event
    text = report("photo_report", photo.id)
    photo = Photo.objects.get(id=photo.id)
    assert f"photo {photo.id} event={event.id}" in text
    assert "state=published version=v1" in text
    assert "faces 6" in text
    assert len([row for row in text.splitlines() if row.startswith("  face ")]) == 6
    matched = next(row for row in text.splitlines() if f"matched={user}" in row)
    assert "similarity=0.9" in matched
    assert "through=-" in matched, "matched by the member's reference"
    assert text.count("cluster=-") == 1, "five unmatched faces sit in Unknown clusters, the match in none"
    variant = PhotoVariant.objects.get(photo=photo)
    assert f"public file {photo.public_key} exists=True" in text
    assert f"user {user} file {variant.key} exists=True" in text
    assert f"user {user} thumb {variant.thumb_key} exists=True" in text


def test_event_report_shows_states_dnp_members_clusters_and_archived_jobs(published_event):
    event, photo, broken, user = published_event
    text = report("event_report", event.id)
    assert f"event {event.id} (Reunion) photos=2 published=1 waiting=1" in text
    assert f"photo {photo.id} state=published v1 faces=6" in text
    assert "own_files=1" in text
    assert f"dnp {user} references=ready=1" in text
    assert f"found {user} photos=1 faces=1 through_faces=0" in text, "the DNP member matched in the group photo"
    assert "unknown_clusters=5" in text
    assert text.count(" faces=1\n") >= 5, "each cluster with its size"
    assert "archived_jobs=1" in text
    assert "job=face_process tries=1 reason=image_too_large" in text
    assert f"photo {broken.id} state=waiting" in text


def test_the_reports_take_the_short_ids_make_demo_prints(published_event):
    event, photo, _, _ = published_event
    assert f"photo {photo.id} event={event.id}" in report("photo_report", str(photo.id)[:8])
    assert f"event {event.id} (Reunion)" in report("event_report", str(event.id)[:8].upper())
