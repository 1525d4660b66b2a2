"""Who is in a photo, end to end: members found in their own photos, strangers named, and Unknown clusters against
the labels; the baseline's worker beside this tree's, one run.

The people of a labelled set (`scripts/make_real_faces_set.py`), in name order, make events of --members-per-event
members each (nobody DNP), each with their most frontal large photo as the reference
(faces.measurement.probes.references); up to --photos-per-person of each member's other photos are uploaded to their
event, and --strangers-per-event photos of people outside it. Then one event per source of the set (its folder
names' prefix) where nobody is a member: up to --cluster-photos-per-person photos of each of its people, every face
left to the Unknown clusters. Each worker runs `run_worker --drain` on its own copy of it all.

Then the rows the app reads: an upload's face is the stored face overlapping the set's box most (IoU at least
MIN_IOU). A member is found when that face's `matched_user_id` is theirs; a stranger is named when theirs is anyone's.
Clusters are scored with BCubed precision / recall / F1 against the labels (faces.measurement.people.bcubed; a face
in no cluster counts alone), beside DBSCAN as Immich runs it on the same stored embeddings.

Usage: python bench/people_found.py [SET_DIR] [--members-per-event K] [--photos-per-person M]
    [--strangers-per-event S] [--cluster-photos-per-person C] [--baseline REV]
"""

import argparse
import itertools
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.baseline import drain, empty_database, on_labelled_set, send_reference, upload_photo, worker_env  # noqa: E402

BASELINE = "3111500"  # main before clusters merged and clear faces matched from clear_match (issue 46)
MIN_IOU = 0.3  # a stored face is the upload's labelled face when it overlaps its box this much: shrunk boxes shift


@dataclass(frozen=True)
class Upload:
    person: str
    path: Path
    box: tuple  # the person's face: x1, y1, x2, y2 in pixels of the displayed upload
    event: str  # the event's name: "members N" or "clusters SOURCE"
    role: str  # "member", "stranger" (a guest of a members' event who is no member) or "cluster"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set_dir", nargs="?", type=Path, default=ROOT / "var" / "real-faces")
    parser.add_argument("--members-per-event", type=int, default=5)
    parser.add_argument("--photos-per-person", type=int, default=6, help="a member's photos uploaded to their event")
    parser.add_argument("--strangers-per-event", type=int, default=20, help="photos of people outside each event")
    parser.add_argument("--cluster-photos-per-person", type=int, default=8, help="each person's, to be clustered")
    parser.add_argument("--baseline", default=BASELINE, help="the git revision to compare with")
    on_labelled_set(parser.parse_args(), choose, measure, print_tables)


def choose(args) -> tuple[dict[str, tuple[Path, str]], list[Upload]]:
    """Each member's reference photo and event, and every event's uploads, read once with this tree's engine."""
    from faces.engines import resident_engine
    from faces.measurement.probes import read_set, references, spread

    probes = [one for one in read_set(resident_engine(), args.set_dir) if not one.stranger]
    chosen = references(probes)
    people = list(chosen)
    size = args.members_per_event
    groups = [people[i : i + size] for i in range(0, len(people) - size + 1, size)]
    photos = {
        person: [one for one in probes if one.image != chosen[person].image and one.person == person]
        for person in people
    }
    members, uploads = {}, []
    for index, group in enumerate(groups):
        event = f"members {index}"
        for person in group:
            members[person] = (chosen[person].image, event)
            uploads += [_upload(one, event, "member") for one in spread(photos[person], args.photos_per_person)]
        others = [one for person in people if person not in group for one in photos[person]]
        start = (index * 7919) % max(len(others), 1)  # each event its own strangers
        strangers = spread(others[start:] + others[:start], args.strangers_per_event)
        uploads += [_upload(one, event, "stranger") for one in strangers]
    by_person = {person: [one for one in probes if one.person == person] for person in {one.person for one in probes}}
    for person, own in sorted(by_person.items()):
        event = f"clusters {_source(person)}"
        uploads += [_upload(one, event, "cluster") for one in spread(own, args.cluster_photos_per_person)]
    return members, uploads


def _source(person: str) -> str:
    return person.split("-", 1)[0]


def _upload(one, event: str, role: str) -> Upload:
    return Upload(one.person, one.image, tuple(float(v) for v in one.box), event, role)


def measure(tree: Path, uri: str, folder: Path, members: dict[str, tuple], uploads: list[Upload]) -> dict:
    empty_database()
    photos, users = seed(members, uploads)
    drain(tree, worker_env(uri, folder), folder / f"worker-{uuid.uuid4().hex[:6]}.log")
    return {"faces": {upload: face_of(photo_id, upload) for photo_id, upload in photos.items()}, "users": users}


def seed(members: dict[str, tuple[Path, str]], uploads: list[Upload]) -> tuple[dict, dict]:
    """Events, members (person -> reference photo and event), references and photos as the API makes them; every
    job sent. (photo id -> Upload, user id -> person)."""
    from faces.models import Event, EventMember

    events = {name: Event.objects.create(name=name) for name in sorted({upload.event for upload in uploads})}
    users = {}
    for person, (image, name) in members.items():
        user_id = uuid.uuid4()
        users[user_id] = person
        EventMember.objects.create(event=events[name], user_id=user_id, do_not_publish=False)
        send_reference(user_id, image)
    return {upload_photo(events[upload.event], upload.path): upload for upload in uploads}, users


def face_of(photo_id, upload: Upload):
    """The stored face that is the upload's labelled one (None: the worker stored none there, or did not publish
    the photo)."""
    from faces.geometry import iou
    from faces.models import Face, Photo

    size = Photo.objects.get(id=photo_id).shown_size  # what the worker recorded: the displayed upload's
    if size is None:
        return None
    width, height = size
    x1, y1, x2, y2 = upload.box
    labelled = (x1 / width, y1 / height, x2 / width, y2 / height)
    best, overlap = None, MIN_IOU
    for face in Face.objects.filter(photo_id=photo_id):
        box = (face.box_x, face.box_y, face.box_x + face.box_w, face.box_y + face.box_h)
        if (this := iou(labelled, box)) >= overlap:
            best, overlap = face, this
    return best


def print_tables(results: dict, members: dict, uploads: list[Upload]) -> None:
    roles = {role: sum(1 for upload in uploads if upload.role == role) for role in ("member", "stranger", "cluster")}
    events = len({upload.event for upload in uploads if upload.role != "cluster"})
    print(
        f"\n## End to end: {events} events of members ({len(members)} members, each one's most frontal large photo "
        f"the reference),\n{roles['member']} photos of them, {roles['stranger']} of strangers; "
        f"{roles['cluster']} photos in events of nobody, one per source\n"
    )
    print(
        "| worker | members found in their own photos | of them through another face | no face at the labelled box "
        "| matched to another member | strangers named |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        faces, users = result["faces"], result["users"]
        own = [(upload, faces[upload]) for upload in faces if upload.role == "member"]
        found_faces = [
            face for upload, face in own if face is not None and users.get(face.matched_user_id) == upload.person
        ]
        found = len(found_faces)
        linked = sum(1 for face in found_faces if getattr(face, "matched_through", None) is not None)
        unseen = sum(1 for _, face in own if face is None)
        wrong = sum(
            1
            for upload, face in own
            if face is not None and face.matched_user_id and users[face.matched_user_id] != upload.person
        )
        named = sum(
            1
            for upload, face in faces.items()
            if upload.role == "stranger" and face is not None and face.matched_user_id
        )
        print(
            f"| {name} | {found}/{len(own)} ({found / max(len(own), 1):.1%}) | {linked} | {unseen} | {wrong} "
            f"| {named}/{roles['stranger']} |"
        )
    print_clusters(results)


def print_clusters(results: dict) -> None:
    """Per event of nobody, BCubed P / R / F1 (clusters) of each worker's Unknown clusters and of Immich's DBSCAN on
    this tree's stored embeddings of the same faces."""
    import numpy as np

    from faces.measurement.people import bcubed, immich_clusters

    names = list(results)
    print("\nUnknown clusters, BCubed precision / recall / F1 (clusters), faces the worker stored:\n")
    print(f"| event | people, faces | {' | '.join(names)} | Immich (DBSCAN) on this tree's embeddings |")
    print("|---|---:|" + "---|" * (len(names) + 1))
    faces_of = {name: result["faces"] for name, result in results.items()}
    cluster_uploads = sorted(
        (upload for upload in faces_of[names[-1]] if upload.role == "cluster"), key=lambda upload: upload.event
    )
    for event, group in itertools.groupby(cluster_uploads, key=lambda upload: upload.event):
        group = [upload for upload in group if all(faces[upload] is not None for faces in faces_of.values())]
        people = np.array([upload.person for upload in group])
        cells = []
        for name in names:
            ids = [faces_of[name][upload].unknown_cluster_id or uuid.uuid4() for upload in group]
            cells.append(_score(bcubed(people, np.unique(ids, return_inverse=True)[1])))
        embeddings = np.array([faces_of[names[-1]][upload].embedding for upload in group], dtype=np.float32)
        cells.append(_score(bcubed(people, immich_clusters(embeddings))))
        print(f"| {event.removeprefix('clusters ')} | {len(set(people))}, {len(group)} | {' | '.join(cells)} |")


def _score(score) -> str:
    return f"{score.precision:.3f} / {score.recall:.3f} / {score.f1:.3f} ({score.clusters})"


if __name__ == "__main__":
    main()
