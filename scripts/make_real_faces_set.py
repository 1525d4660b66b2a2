"""Write the real-faces set: labelled photos of real people from public repositories, kept out of git.

Usage: python scripts/make_real_faces_set.py OUT_DIR [--sources DIR]

OUT_DIR gets one folder per person (`{source}-{name}/`), each holding several different photos of
that person, and `manifest.csv`: every file's person, source repository, commit, path in it and the
SHA-256 of the bytes written. `python manage.py measure_thresholds OUT_DIR` and
`python bench/dnp_visibility.py OUT_DIR` read it (docs/MEASUREMENTS.md, "Recognition on real people").

The photos come from git repositories at fixed commits (SOURCES below): press photos (LFW, in
CompreFace's history), film and TV stills of celebrities across decades (a Glint360k sample in
ElisonSherton/Face-Applications: aligned 112 px crops, padded here to twice their size with flat grey, as a
tight crop of a face reaches the worker), TV crops (face-api.js's Big Bang Theory cast), and the
labelled photos of deepface's, face_recognition's and go-face's tests. Each repository is read from
`--sources DIR/{owner}+{name}/repo` (a bare git directory, as a mirror or `git clone --mirror` leaves it)
when that exists, else cloned there from GitHub (network needed once). Nothing is downloaded twice.

Which photos: up to `--people` people of each source with enough photos, and up to a source's `most`
photos of each, spread evenly over the names in order (so the choice is the same on every machine). The
photos are the people's own, under their owners' terms: they are read for measurement here and never
committed. A name the set would give one person in two sources is merged (SAME_PERSON), and a label that
mixes two people is left out (NOT_ONE_PERSON).
"""

import argparse
import csv
import hashlib
import io
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# An aligned 112 px crop is the face and little else: padded to twice its size, flat grey, so a detector
# sees a face with something around it (how a tight crop reaches the worker).
PAD_GREY = 128


@dataclass(frozen=True)
class Source:
    name: str  # the folder prefix of its people
    repo: str  # owner/name on GitHub
    commit: str
    # Every (person, path) of the commit's files that belongs to the set, in name order.
    people: Callable[[list[str], "Source"], Iterator[tuple[str, str]]]
    padded: bool = False
    # Only people with at least this many photos (LFW holds thousands with one or two).
    min_photos: int = 2
    # At most this many photos of one person (spread over their files).
    most: int = 12


def _by_folder(prefix: str, depth: int = 1) -> Callable:
    """Files under `prefix`/PERSON/...: the person is the folder `depth` levels below it."""

    def people(paths: list[str], source: Source) -> Iterator[tuple[str, str]]:
        for path in paths:
            if path.startswith(prefix) and path.lower().endswith(IMAGE_SUFFIXES):
                parts = path[len(prefix) :].split("/")
                if len(parts) == depth + 1:
                    yield parts[depth - 1], path

    return people


def _by_file_stem(prefix: str) -> Callable:
    """Files `prefix`NAME[digits].jpg: the person is NAME (go-face: bona.jpg, bona2.jpg)."""

    def people(paths: list[str], source: Source) -> Iterator[tuple[str, str]]:
        for path in paths:
            if path.startswith(prefix) and "/" not in path[len(prefix) :] and path.lower().endswith(IMAGE_SUFFIXES):
                yield Path(path).stem.rstrip("0123456789"), path

    return people


def _deepface(paths: list[str], source: Source) -> Iterator[tuple[str, str]]:
    """deepface's tests/unit/dataset: people are the groups its master.csv joins with "Yes"."""
    folder = "tests/unit/dataset/"
    rows = csv.DictReader(io.StringIO(_show(source, folder + "master.csv").decode()))
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        parent.setdefault(name, name)
        while parent[name] != name:
            name = parent[name]
        return name

    for row in rows:
        if row["Decision"] == "Yes":
            parent[root(row["file_x"])] = root(row["file_y"])
    groups: dict[str, list[str]] = {}
    for name in list(parent):
        groups.setdefault(root(name), []).append(name)
    for names in groups.values():
        person = f"person{min(int(Path(n).stem[3:]) for n in names)}"
        yield from ((person, folder + name) for name in sorted(names))


def _by_number_prefix(prefix: str) -> Callable:
    """Files `prefix`NN_CONDITION.png: the person is NN (the Yale Face Database: 01_leftlight.png)."""

    def people(paths: list[str], source: Source) -> Iterator[tuple[str, str]]:
        for path in paths:
            name = path[len(prefix) :]
            if path.startswith(prefix) and "/" not in name and path.lower().endswith(IMAGE_SUFFIXES):
                yield f"subject{name.split('_')[0]}", path

    return people


SOURCES = (
    Source(
        "lfw",
        "exadel-inc/CompreFace",
        "c2c15137c03eed96b101e48076d938ac0647191c",
        _by_folder("test_comp_models/lfw/"),
        min_photos=10,
    ),
    Source(
        "glint",
        "ElisonSherton/Face-Applications",
        "a575801921a3bbffd09129a959c24af04d447478",
        _by_folder("datasets/celebrity_images/"),
        padded=True,
        # Hundreds of photos each, decades apart, many turned: the most varied source.
        most=120,
    ),
    Source(
        "bbt",
        "justadudewhohacks/face-api.js",
        "a86f011d72124e5fb93e59d5c4ab98f699dd5c9c",
        _by_folder("examples/images/"),
    ),
    Source("deepface", "serengil/deepface", "243209fd7b46ecdecf72665cc25219f6e8181f25", _deepface),
    Source(
        "facerec",
        "ageitgey/face_recognition",
        "2e2dccea9dd0ce730c8d464d0f67c6eebb40c9d1",
        _by_folder("examples/knn_examples/train/"),
    ),
    Source("goface", "Kagami/go-face-testdata", "96ccafa591055ef57286ffed1c3d7e39d17140b7", _by_file_stem("images/")),
    # Grayscale studio photos of 15 people, each also lit by one lamp from the left and from the right: real
    # low light on half the face, not a darkened copy (the Yale Face Database, in a public repository).
    Source(
        "yale",
        "jessexuu/Twitter-Pride",
        "e190945938d9de7f37d2063799c7547a8a32b2ae",
        _by_number_prefix("analytics/faces_yale/original/"),
        most=10,
    ),
)


# One person in two sources: their photos go into one folder. Found by measuring (the folders' photos match
# at 0.46-0.66 on average, strangers' folders at most 0.22) and confirmed by looking.
SAME_PERSON = {
    "facerec-obama": "glint-barack_obama",
    "deepface-person1": "lfw-angelina_jolie",
    "deepface-person3": "glint-jennifer_aniston",
}
# A source's label that is not one person: the sample's "Gwyneth Paltrow" mixes her photos with her
# mother's (Blythe Danner), seen by looking at every photo. Measured as one person it would count their
# pairs as genuine misses.
NOT_ONE_PERSON = {"glint-gwyneth_paltrow"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--sources", type=Path, default=Path("var/cache/face_sources"))
    parser.add_argument("--people", type=int, default=24, help="most people of one source")
    args = parser.parse_args()
    rows = []
    for source in SOURCES:
        rows += write_source(source, args.sources, args.out_dir, args.people)
    with (args.out_dir / "manifest.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["person", "file", "repository", "commit", "path", "sha256"])
        writer.writerows(rows)
    people = len({row[0] for row in rows})
    print(f"{args.out_dir}: {len(rows)} photos of {people} people, manifest.csv")


def write_source(source: Source, sources: Path, out_dir: Path, most_people: int) -> list[list]:
    _ensure_repo(source, sources)
    paths = _git(source, "ls-tree", "-r", "--name-only", source.commit).decode().splitlines()
    by_person: dict[str, list[str]] = {}
    for person, path in source.people(sorted(paths), source):
        by_person.setdefault(person, []).append(path)
    eligible = sorted(person for person, files in by_person.items() if len(files) >= source.min_photos)
    rows = []
    for person in _spread(eligible, most_people):
        name = f"{source.name}-{_slug(person)}"
        if name in NOT_ONE_PERSON:
            continue
        folder = out_dir / SAME_PERSON.get(name, name)
        folder.mkdir(parents=True, exist_ok=True)
        for path in _spread(by_person[person], source.most):
            data = _prepared(_show(source, path), source.padded)
            target = folder / f"{source.name}-{Path(path).stem}{Path(path).suffix.lower()}"
            if target.exists():
                raise SystemExit(f"{target} written twice: two sources' files share a name")
            target.write_bytes(data)
            rows.append([folder.name, target.name, source.repo, source.commit, path, hashlib.sha256(data).hexdigest()])
    return rows


def _spread(items: list, most: int) -> list:
    """At most `most` of `items`, evenly spaced, in order."""
    if len(items) <= most:
        return items
    return [items[round(i * (len(items) - 1) / (most - 1))] for i in range(most)]


def _prepared(data: bytes, padded: bool) -> bytes:
    if not padded:
        return data
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    height, width = image.shape[:2]
    top, left = height // 2, width // 2
    canvas = cv2.copyMakeBorder(image, top, top, left, left, cv2.BORDER_CONSTANT, value=(PAD_GREY,) * 3)
    return cv2.imencode(".png", canvas)[1].tobytes()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


def _ensure_repo(source: Source, sources: Path) -> None:
    folder = _folder(source, sources)
    if not folder.exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--mirror", f"https://github.com/{source.repo}", str(folder)], check=True)
    _REPOS[source.repo] = folder


_REPOS: dict[str, Path] = {}


def _folder(source: Source, sources: Path) -> Path:
    return sources / source.repo.replace("/", "+") / "repo"


def _git(source: Source, *command: str) -> bytes:
    return subprocess.run(["git", "-C", str(_REPOS[source.repo]), *command], check=True, capture_output=True).stdout


def _show(source: Source, path: str) -> bytes:
    return _git(source, "show", f"{source.commit}:{path}")


if __name__ == "__main__":
    main()
