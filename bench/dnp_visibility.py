"""How often a Do Not Publish guest is left visible, and a stranger blurred, end to end: the baseline's worker
beside this tree's, one run.

The people of a labelled set (`scripts/make_real_faces_set.py`) in events of --dnp-per-event each (in name
order), every one of them an active DNP member whose reference is their most frontal large photo
(faces.measurement.probes.references: chosen once, the same for both workers); up to --photos-per-person of
each one's other photos are uploaded to their event, and --strangers-per-event photos of people outside it
(guests who are nobody's DNP there); with --strangers-are-members each of those is a member of that event too
(not DNP), with their own most frontal large photo as their reference. Each worker runs `run_worker --drain` on
its own copy of it all: the reference_process jobs, then one face_process per photo, through the real queue,
database and storage.

Then a viewer's look at each photo: a photo not published shows nothing; a published one shows the
person when the middle of their face (the largest face of the upload, as the set labels it) in the public
file's bytes is within VISIBLE_DIFFERENCE of the upload's there (the public file may be the upload itself).
The table gives, per worker, the members' faces left visible, overall and at a strong head turn, and the
strangers' faces blurred; a second table splits the strangers by what their event's DNP members are known by
(ready references, an ambiguous selfie only, or no usable reference: every face blurred).

Usage: python bench/dnp_visibility.py [SET_DIR] [--people N] [--photos-per-person M] [--dnp-per-event K]
    [--strangers-per-event S] [--strangers-are-members] [--baseline REV]
"""

import argparse
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baseline import drain, empty_database, on_labelled_set, send_reference, upload_photo, worker_env  # noqa: E402

BASELINE = "ae6c4cb"  # main before "Recognise a Do Not Publish guest in real photos"
# Mean absolute difference (0-255) of the face's middle between upload and public file under which the face
# is shown as uploaded. A blurred face differs by 15 or more (tests/test_demo.py); a JPEG re-encode by 1-3.
VISIBLE_DIFFERENCE = 6.0


@dataclass(frozen=True)
class Member:
    reference: Path  # the photo sent as their reference
    event: int  # the index of their event
    dnp: bool = True


@dataclass(frozen=True)
class Upload:
    person: str
    path: Path
    box: tuple  # the person's face: x1, y1, x2, y2 in pixels of the displayed upload
    head_turn: float
    event: int  # the index of the event it is uploaded to
    stranger: bool = False  # a guest who is nobody's DNP in that event


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set_dir", nargs="?", type=Path, default=ROOT / "var" / "real-faces")
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--photos-per-person", type=int, default=12)
    parser.add_argument("--dnp-per-event", type=int, default=1, help="DNP members in each event")
    parser.add_argument("--strangers-per-event", type=int, default=0, help="photos of people outside each event")
    parser.add_argument(
        "--strangers-are-members", action="store_true", help="each stranger a member of the event, with a reference"
    )
    parser.add_argument("--baseline", default=BASELINE, help="the git revision to compare with")
    on_labelled_set(parser.parse_args(), choose, measure, print_table)


def choose(args) -> tuple[dict[str, Member], list[Upload]]:
    """Each member's reference photo, event and choice (DNP members by their name; with --strangers-are-members
    the strangers of each event too), and the uploads of every event, read once with this tree's engine."""
    from faces.engines import resident_engine
    from faces.measurement.probes import read_set, references, spread

    probes = read_set(resident_engine(), args.set_dir)
    chosen = dict(list(references(probes).items())[: args.people])
    people = list(chosen)
    groups = [people[i : i + args.dnp_per_event] for i in range(0, len(people), args.dnp_per_event)]
    groups = [group for group in groups if len(group) == args.dnp_per_event]
    photos = {
        person: [one for one in probes if one.person == person and one.image != chosen[person].image]
        for person in people
    }
    uploads = []
    for event, group in enumerate(groups):
        for person in group:
            uploads += [_upload(one, event) for one in spread(photos[person], args.photos_per_person)]
        others = [one for person in people if person not in group for one in photos[person]]
        start = (event * 7919) % max(len(others), 1)  # each event its own strangers
        uploads += [
            _upload(one, event, stranger=True)
            for one in spread(others[start:] + others[:start], args.strangers_per_event)
        ]
    members = {person: Member(chosen[person].image, event) for event, group in enumerate(groups) for person in group}
    if args.strangers_are_members:
        guests = {(upload.person, upload.event) for upload in uploads if upload.stranger}
        members |= {f"{who} in event {event}": Member(chosen[who].image, event, dnp=False) for who, event in guests}
    return members, uploads


def _upload(one, event: int, *, stranger: bool = False) -> Upload:
    box = tuple(float(v) for v in one.box)
    return Upload(one.person, one.image, box, one.quality.head_turn or 0.0, event, stranger)


def measure(tree: Path, uri: str, folder: Path, references: dict[str, Member], uploads: list[Upload]) -> dict:
    empty_database()
    photos = seed(references, uploads)
    started = time.monotonic()
    drain(tree, worker_env(uri, folder), folder / f"worker-{uuid.uuid4().hex[:6]}.log")
    seconds = time.monotonic() - started
    seen = [shown(photo_id, upload) for photo_id, upload in photos.items()]
    return {"seen": seen, "seconds": seconds, "known_by": reference_kinds(photos)}


# What an event's DNP members are known by, worst first: the split of strangers' faces blurred.
NO_USABLE, AMBIGUOUS, READY = "no usable reference", "an ambiguous selfie only", "ready references"


def reference_kinds(photos: dict) -> dict:
    """Upload -> what its event's DNP members are known by, at worst: a member with no usable reference (no face,
    too poor, or a worker that keeps no candidates of a `many_faces` one) makes the worker blur every face there
    until a usable selfie comes; one known only by an ambiguous selfie blurs the faces near its candidates."""
    from faces.models import EventMember, Photo, SubjectReference

    ready = set(SubjectReference.objects.filter(status="ready").values_list("user_id", flat=True))
    ambiguous = set(
        SubjectReference.objects.filter(status="many_faces", candidate_embeddings__isnull=False).values_list(
            "user_id", flat=True
        )
    )
    worst: dict = {}
    for event, user in EventMember.objects.dnp().values_list("event_id", "user_id"):
        kind = READY if user in ready else AMBIGUOUS if user in ambiguous else NO_USABLE
        worst[event] = min(worst.get(event, READY), kind, key=[NO_USABLE, AMBIGUOUS, READY].index)
    events = dict(Photo.objects.filter(id__in=list(photos)).values_list("id", "event_id"))
    return {upload: worst.get(events[photo_id], READY) for photo_id, upload in photos.items()}


def seed(references: dict[str, Member], uploads: list[Upload]) -> dict:
    """Events, members, references and photos as the API makes them; every job sent. Photo id -> Upload."""
    from faces.models import Event, EventMember

    indexes = sorted({member.event for member in references.values()} | {upload.event for upload in uploads})
    events = {index: Event.objects.create(name=f"event {index}") for index in indexes}
    for member in references.values():
        user_id = uuid.uuid4()
        EventMember.objects.create(event=events[member.event], user_id=user_id, do_not_publish=member.dnp)
        send_reference(user_id, member.reference)
    return {upload_photo(events[upload.event], upload.path): upload for upload in uploads}


def shown(photo_id, upload: Upload) -> tuple[Upload, str]:
    """(the upload, what a viewer sees of its member: "unpublished", "blurred" or "visible")."""
    import numpy as np
    from django.core.files.storage import default_storage

    from faces.media.still import Still
    from faces.models import Photo
    from momentlens.devservices.pixels import difference

    photo = Photo.objects.get(id=photo_id)
    if photo.processed_at is None:
        return upload, "unpublished"
    with default_storage.open(photo.public_key, "rb") as handle:
        public = Still(handle.read()).image
    uploaded = Still(upload.path.read_bytes()).image
    x1, y1, x2, y2 = upload.box
    w, h = x2 - x1, y2 - y1
    core = np.s_[max(0, int(y1 + 0.2 * h)) : int(y1 + 0.8 * h) + 1, max(0, int(x1 + 0.2 * w)) : int(x1 + 0.8 * w) + 1]
    if public.shape != uploaded.shape:
        return upload, "blurred"  # a file of another size is not the upload: the worker rendered and blurred it
    return upload, "visible" if difference(public[core], uploaded[core]) < VISIBLE_DIFFERENCE else "blurred"


def print_table(results: dict, references: dict, uploads: list[Upload]) -> None:
    from faces.measurement.recommend import RULE

    strong_turn = RULE.goals.strong_turn  # the turn the thresholds' goals are stated at
    members = [upload for upload in uploads if not upload.stranger]
    strangers = len(uploads) - len(members)
    turned = sum(1 for upload in members if upload.head_turn >= strong_turn)
    events = len({upload.event for upload in uploads})
    dnp = sum(1 for member in references.values() if member.dnp)
    print(f"\n## End to end: {events} events of {dnp // max(events, 1)} DNP members (each one's most ")
    print(
        f"frontal large photo the reference), {len(members)} photos of them ({turned} at a head turn >= "
        f"{strong_turn:g}), "
    )
    guests = len(references) - dnp
    print(f"{strangers} photos of strangers" + (f", {guests} of them members with a reference\n" if guests else "\n"))
    print(
        "| worker | published | member's face visible | at a strong turn | ratio vs baseline "
        "| strangers' faces blurred | worker s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    base = None
    for name, result in results.items():
        seen = result["seen"]
        own = [(upload, what) for upload, what in seen if not upload.stranger]
        visible = sum(1 for _, what in own if what == "visible")
        strong = sum(1 for upload, what in own if what == "visible" and upload.head_turn >= strong_turn)
        blurred = sum(1 for upload, what in seen if upload.stranger and what == "blurred")
        published = sum(1 for _, what in seen if what != "unpublished")
        base = visible if base is None else base
        ratio = f"{visible / base:.2f}" if base else "-"
        print(
            f"| {name} | {published}/{len(seen)} | {visible}/{len(own)} ({visible / max(len(own), 1):.2%}) "
            f"| {strong}/{turned} | {ratio} | {blurred}/{strangers} ({blurred / max(strangers, 1):.2%}) "
            f"| {result['seconds']:.0f} |"
        )
        rows.append((name, seen, result["known_by"]))
    print_by_reference(rows)


def print_by_reference(rows: list) -> None:
    """Strangers' faces blurred apart by what their event's DNP members are known by (reference_kinds)."""
    kinds = (READY, AMBIGUOUS, NO_USABLE)
    print("\nStrangers' faces blurred, by what the event's DNP members are known by (events in brackets):\n")
    print(f"| worker | {' | '.join(kinds)} |")
    print("|---|" + "---:|" * len(kinds))
    for name, seen, known_by in rows:
        parts = []
        for kind in kinds:
            part = [(upload, what) for upload, what in seen if upload.stranger and known_by[upload] == kind]
            blurred = sum(1 for _, what in part if what == "blurred")
            events = len({upload.event for upload, _ in part})
            parts.append(f"{blurred}/{len(part)} ({blurred / max(len(part), 1):.2%}) [{events}]")
        print(f"| {name} | {' | '.join(parts)} |")


if __name__ == "__main__":
    main()
