"""`python manage.py demo [--out DIR]` (`make demo`): the main job end to end on the embedded defaults.

Every run starts clean: it empties the embedded database's tables and queue and
the demo's storage folders, seeds one event from the sample photos that ship in
packages (demo/seed.py), sends the jobs the API would send, runs
`run_worker --drain`, and writes `report.html` and `contact_sheet.png` (default
`var/demo/`). It refuses any database given by DATABASE_URL and any storage other
than the filesystem: the demo owns the embedded `var/` data and nothing else.
"""

import logging
import shutil
import time
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.files.storage import FileSystemStorage, default_storage
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from demo import report, seed
from faces.models import EventMember
from jobqueue import queries
from jobqueue.logfmt import fields_of

# Top-level storage folders the demo's keys live under (docs/ARCHITECTURE.md §3).
STORAGE_FOLDERS = ("events", "users")
REPORT_NAME = "report.html"
SHEET_NAME = "contact_sheet.png"


class Command(BaseCommand):
    help = "Seed a demo event from the sample photos, run the worker on it, and write an HTML report."

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, default=None, help="report folder (default: VAR_DIR/demo)")

    def handle(self, *args, out=None, **options):
        started = time.monotonic()
        out_dir = Path(out) if out else Path(settings.VAR_DIR) / "demo"
        media_root = demo_media_root()

        self.say("1/5 clean: the demo's rows, queue, storage folders and report")
        clean(media_root, out_dir)

        self.say("2/5 seed: event, members, reference and photo uploads, as the API writes them")
        seeded = seed.seed_event()
        self.say(
            f"    event {seeded.event.id}: {len(seeded.photos)} photos, 1 DNP member "
            f"{report.short(seeded.dnp_user)}, {len(seeded.ordinary_members)} ordinary members"
        )

        progress = JobProgress(self)
        self.say("3/5 worker: the DNP member's reference (reference_process)")
        seed.send_reference_jobs(seeded)
        progress.run_worker()
        self.say("4/5 worker: the photos (face_process)")
        seed.send_photo_jobs(seeded)
        progress.run_worker()
        refuse_if_interrupted()

        self.say("5/5 report: reading the files back by the keys on the rows")
        reports = report.collect(seeded.photos)
        out_dir.mkdir(parents=True, exist_ok=True)
        with connection.cursor() as cursor:
            archived = queries.archive_count(cursor)
        elapsed = time.monotonic() - started
        rows = summary(reports, seeded, progress.done, archived, elapsed)
        title = f"MomentLens demo: event {report.short(seeded.event.id)}, DNP member {report.short(seeded.dnp_user)}"
        reference = report.read_image(seeded.reference.upload_key)
        report.write_png(out_dir / SHEET_NAME, report.contact_sheet(reports, title, reference, seeded.reference_name))
        report.write_html(out_dir / REPORT_NAME, reports, seeded=seeded, summary=rows, sheet_name=SHEET_NAME)

        self.say("")
        self.say(photo_table(reports))
        self.say("")
        for name, value in rows:
            self.say(f"{name:<16}{value}")
        self.say(f"report: {display(out_dir / REPORT_NAME)}")
        self.say(f"contact sheet: {display(out_dir / SHEET_NAME)}")
        if archived:
            raise CommandError(f"{archived} job(s) were archived instead of completing: see the worker's log above")

    def say(self, line: str) -> None:
        self.stdout.write(line)


def refuse_if_interrupted() -> None:
    """The worker stops early only when told to (Ctrl-C, SIGTERM): then there is no report to write."""
    with connection.cursor() as cursor:
        left = queries.metrics(cursor).length
    if left:
        raise CommandError(f"interrupted: {left} job(s) not done, no report written")


def demo_media_root() -> Path:
    """The filesystem folder of the storage; refuses a database or storage the demo does not own."""
    if not settings.DATABASES["default"].get("EMBEDDED_PGDATA"):
        raise CommandError(
            "the demo empties its database: it runs only on the embedded PostgreSQL under var/, "
            "never on a database given by DATABASE_URL (unset it, or run `make demo`)"
        )
    if not isinstance(default_storage, FileSystemStorage):
        raise CommandError(
            "the demo deletes its storage folders: it runs only on the filesystem storage under var/media, "
            "never on R2 (unset R2_ENDPOINT_URL, or run `make demo`)"
        )
    return Path(default_storage.location)


def clean(media_root: Path, out_dir: Path) -> None:
    """Every row of the API's tables, the queue and its archive; the demo's storage folders and report files."""
    tables = [model._meta.db_table for model in apps.get_app_config("faces").get_models()]
    names = ", ".join(
        [*(connection.ops.quote_name(table) for table in tables), queries.QUEUE_TABLE, queries.ARCHIVE_TABLE]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {names} RESTART IDENTITY")
    for folder in STORAGE_FOLDERS:
        shutil.rmtree(media_root / folder, ignore_errors=True)
    for name in (REPORT_NAME, SHEET_NAME):
        (out_dir / name).unlink(missing_ok=True)


class JobProgress(logging.Handler):
    """One line per job the worker finishes, from its `job_done` / `job_archived` log records' fields."""

    def __init__(self, command: Command):
        super().__init__(level=logging.INFO)
        self.command = command
        self.done = 0
        self.archived = 0

    def run_worker(self) -> None:
        logger = logging.getLogger("jobqueue.worker")
        level = logger.level
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        try:
            call_command("run_worker", "--drain", "--health-port", "0")
        finally:
            logger.removeHandler(self)
            logger.setLevel(level)

    def emit(self, record: logging.LogRecord) -> None:
        fields = {key: str(value) for key, value in fields_of(record).items()}
        fields["event"] = record.getMessage()
        if fields["event"] not in ("job_done", "job_archived"):
            return
        if fields["event"] == "job_done":
            self.done += 1
        else:
            self.archived += 1
        ident = next(
            (f"{name}={fields[name][:8]}" for name in ("photo_id", "reference_id", "event_id") if name in fields), ""
        )
        extra = " ".join(
            f"{name}={fields[name]}" for name in ("faces", "files", "status", "enqueued", "reason") if name in fields
        )
        ms = f"{fields['ms']} ms" if "ms" in fields else ""
        number = self.done + self.archived
        line = f"job {number}: {fields.get('job', '?')} {ident} {fields.get('outcome', '')} {ms} {extra}"
        self.command.say("    " + " ".join(line.split()))


def summary(reports, seeded, jobs_done: int, archived: int, elapsed: float) -> list[tuple[str, str]]:
    files = sum(r.files_written for r in reports)
    return [
        ("photos", str(len(reports))),
        ("faces", str(sum(len(r.faces) for r in reports))),
        ("DNP members", str(dnp_members(seeded.event))),
        ("files written", f"{files} (+{files} thumbnails)"),
        ("jobs done", str(jobs_done)),
        ("archived jobs", str(archived)),
        ("elapsed s", f"{elapsed:.1f}"),
    ]


def dnp_members(event) -> int:
    return EventMember.objects.filter(event=event, do_not_publish=True, status=EventMember.Status.ACTIVE).count()


def photo_table(reports) -> str:
    lines = [f"{'photo':<32}{'faces':>6}{'matched':>9}{'blurred':>9}{'files':>7}  which"]
    for r in reports:
        public = next(column for column in r.columns if column.header == "public")
        matched = sum(1 for face in r.faces if face.matched_user_id)
        blurred = public.decisions.count("blurred")
        what = ["public"] * int(r.photo.public_key != r.photo.upload_key) + [
            f"own:{report.short(v.user_id)}" for v in r.variants
        ]
        detail = " + ".join(what) if what else "none (public = upload)"
        lines.append(f"{r.name:<32}{len(r.faces):>6}{matched:>9}{blurred:>9}{r.files_written:>7}  {detail}")
    return "\n".join(lines)


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
