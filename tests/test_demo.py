"""`manage.py demo` end to end: seed, worker, report, on the session's embedded PostgreSQL and a tmp folder."""

import ast
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from demo.seed import PLAYER_FACE_PX
from faces.models import Event, Photo, PhotoVariant
from faces.publication import faces_blurred_in
from momentlens.devservices.pixels import difference, face_core
from tests.support.publishing_helpers import read_image

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo_media(settings, tmp_path):
    media = tmp_path / "media"
    settings.MEDIA_ROOT = media
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": media, "allow_overwrite": True},
        },
    }
    return media


def run_demo(out_dir) -> str:
    out = StringIO()
    call_command("demo", "--out", str(out_dir), stdout=out)
    return out.getvalue()


@pytest.mark.usefixtures("live_db")
def test_demo_blurs_the_dnp_face_writes_the_report_and_starts_clean_each_run(demo_media, tmp_path):
    out_dir = tmp_path / "demo"
    run_demo(out_dir)
    first_event = Event.objects.get().id
    printed = run_demo(out_dir)  # a second run starts clean: one event, its objects only

    event = Event.objects.get()
    assert event.id != first_event
    assert sorted(p.name for p in (demo_media / "events").iterdir()) == [str(event.id)]
    assert len(list((demo_media / "users").iterdir())) == 1

    report, sheet = out_dir / "report.html", out_dir / "contact_sheet.png"
    assert report.stat().st_size > 5_000
    assert sheet.stat().st_size > 200_000
    assert sheet.read_bytes().startswith(b"\x89PNG")
    html = report.read_text()
    assert "contact_sheet.png" in html
    assert re.search(r"/v1\.[0-9a-f]{8}/public\.jpg", html)

    group = Photo.objects.exclude(blur_regions=[]).get(event=event)
    second = Photo.objects.exclude(id=group.id).get(event=event)
    variant = PhotoVariant.objects.get(photo=group)
    dnp_face = group.faces.get(matched_user_id=variant.user_id)
    upload, public, own = read_image(group.upload_key), read_image(group.public_key), read_image(variant.key)
    assert difference(face_core(public, dnp_face), face_core(upload, dnp_face)) > 15
    assert difference(face_core(own, dnp_face), face_core(upload, dnp_face)) < 4
    blurred = {face.id for face in faces_blurred_in(group, None)}
    assert dnp_face.id in blurred
    players = [face for face in group.faces.exclude(id__in=blurred) if face.box_w * group.width >= PLAYER_FACE_PX]
    assert len(players) == 15, "every other player is shown"
    for face in players:
        assert difference(face_core(public, face), face_core(upload, face)) < 4
    # The portrait: nobody to blur, no region: no file of its own, the public keys are the upload keys.
    assert second.faces.count() == 1
    assert second.public_key == second.upload_key
    assert not second.variants.exists()

    assert re.search(r"^photos\s+2$", printed, re.M)
    assert re.search(r"^DNP members\s+1$", printed, re.M)
    assert re.search(r"^files written\s+2 \(\+2 thumbnails\)$", printed, re.M)
    assert re.search(r"^archived jobs\s+0$", printed, re.M)
    # reference_process, its reprocess_event, two face_process: each named on its own progress line.
    assert re.search(r"^jobs done\s+4$", printed, re.M)
    assert re.search(r"^    job 3: face_process photo_id=\S{8} completed \d+ ms faces=\d+ files=2$", printed, re.M)
    assert re.search(r"^players\.jpg \(team\)\s+\d+\s+1\s+\d+\s+2\s+public \+ own:", printed, re.M)
    assert re.search(r"^Tom_Hanks\S* \(portrait\)\s+1\s+0\s+0\s+0\s+none", printed, re.M)


def test_demo_refuses_a_database_given_by_database_url(settings, monkeypatch):
    monkeypatch.setitem(settings.DATABASES["default"], "EMBEDDED_PGDATA", None)
    with pytest.raises(CommandError, match="DATABASE_URL"):
        call_command("demo", stdout=StringIO())


def test_demo_refuses_object_storage(settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {"bucket_name": "not-the-demos", "endpoint_url": "http://127.0.0.1:9"},
        },
    }
    with pytest.raises(CommandError, match="R2_ENDPOINT_URL"):
        call_command("demo", stdout=StringIO())


@pytest.mark.usefixtures("live_db")
def test_the_report_shows_the_reference_as_the_worker_left_it(demo_media, tmp_path):
    run_demo(tmp_path / "demo")
    html = (tmp_path / "demo" / "report.html").read_text()
    assert "(status ready): yaoming.jpg, another photo of them" in html
    assert "(status pending)" not in html


@pytest.mark.usefixtures("live_db")
def test_the_reference_is_another_photo_and_is_on_the_contact_sheet(demo_media, tmp_path):
    """Not a crop of the upload: no face of the group photo is as close to it as two crops of one photo."""
    import cv2
    import numpy as np

    from faces.models import SubjectReference
    from momentlens.devservices import samples

    run_demo(tmp_path / "demo")
    reference = SubjectReference.objects.get()
    with open(demo_media / reference.upload_key, "rb") as handle:
        data = handle.read()
    assert data == samples.vectron_image("yaoming.jpg").read_bytes()
    group = Photo.objects.exclude(blur_regions=[]).get()
    best = max(group.faces.all(), key=lambda face: face.similarity or -1)
    assert 0.5 < best.similarity < 0.8, "the same man in another photo: clearly him, not the same pixels"
    sheet = cv2.imread(str(tmp_path / "demo" / "contact_sheet.png"))
    shown = cv2.imread(str(samples.vectron_image("yaoming.jpg")))
    height = 200
    width = round(shown.shape[1] * height / shown.shape[0])
    expected = cv2.resize(shown, (width, height), interpolation=cv2.INTER_AREA).astype(np.float32)
    strip = sheet[94 : 94 + height, 12 : 12 + width].astype(np.float32)
    assert np.abs(strip - expected).mean() < 3, "the reference is drawn at the top of the sheet"


@pytest.mark.usefixtures("live_db")
def test_an_interrupted_demo_exits_non_zero_without_a_report(demo_media, tmp_path, monkeypatch):
    """Ctrl-C stops the worker after its current job; the demo then says so instead of reporting."""
    from demo.management.commands import demo

    real_run = demo.JobProgress.run_worker
    runs = []

    def stopped_before_the_photos(progress):
        runs.append(1)
        if len(runs) == 1:
            real_run(progress)

    monkeypatch.setattr(demo.JobProgress, "run_worker", stopped_before_the_photos)
    with pytest.raises(CommandError, match=r"interrupted: \d+ job\(s\) not done"):
        run_demo(tmp_path / "demo")
    assert not (tmp_path / "demo" / "report.html").exists()


def test_nothing_outside_the_demo_app_imports_it():
    """The demo is its own app, depended on by nothing: only demo/ itself and the tests import `demo`."""
    skip = {".git", ".venv", "var", "demo", "tests"}
    files = [path for path in ROOT.rglob("*.py") if not skip & set(path.relative_to(ROOT).parts)]
    assert len(files) > 20
    importers = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name == "demo" or name.startswith("demo.") for name in names):
                importers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert importers == []
