"""`python manage.py measure_thresholds DIR`: genuine/impostor similarity of the configured engine.

DIR holds one folder of face images per person. Each image contributes its
largest detected face. Genuine pairs are two images of one person, impostor
pairs two images of different people. The output is what docs/ARCHITECTURE.md §6
cites: the distributions and the false-accept / false-reject rates at candidate
thresholds. Nothing is written anywhere.
"""

import itertools
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from faces.engines import resident_engine
from faces.images import decode_upload
from jobqueue.errors import PermanentJobError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp"}
DEFAULT_CANDIDATES = "0.80,0.84,0.86,0.88,0.90,0.91,0.92,0.93,0.94,0.95,0.96"


class Command(BaseCommand):
    help = "Print genuine/impostor similarity distributions and FAR/FRR at candidate thresholds."

    def add_arguments(self, parser):
        parser.add_argument("directory", type=Path)
        parser.add_argument("--candidates", default=DEFAULT_CANDIDATES, help="comma-separated thresholds")

    def handle(self, *args, directory: Path, candidates: str, **options):
        people = sorted(p for p in directory.iterdir() if p.is_dir()) if directory.is_dir() else []
        if len(people) < 2:
            raise CommandError(f"{directory} must hold at least two person folders")
        engine = resident_engine()
        embeddings = {person.name: self._embed_folder(engine, person) for person in people}
        genuine, impostor = pair_similarities(embeddings)
        if not genuine.size or not impostor.size:
            raise CommandError("need at least two usable images for one person and faces of two people")
        images = sum(len(v) for v in embeddings.values())
        self.stdout.write(f"engine={engine.name} people={len(embeddings)} images={images}")
        self.stdout.write(f"genuine_pairs={len(genuine)} impostor_pairs={len(impostor)}\n")
        self.stdout.write("| pairs | min | p1 | p5 | median | p95 | p99 | max |\n|---|---|---|---|---|---|---|---|")
        for label, values in (("genuine", genuine), ("impostor", impostor)):
            q = np.percentile(values, [0, 1, 5, 50, 95, 99, 100])
            self.stdout.write(f"| {label} | " + " | ".join(f"{v:.3f}" for v in q) + " |")
        self.stdout.write("\n| threshold | false accept (impostor >= t) | false reject (genuine < t) |\n|---|---|---|")
        for threshold in (float(t) for t in candidates.split(",")):
            far = int((impostor >= threshold).sum())
            frr = int((genuine < threshold).sum())
            self.stdout.write(
                f"| {threshold:.2f} | {far}/{len(impostor)} ({far / len(impostor):.2%}) "
                f"| {frr}/{len(genuine)} ({frr / len(genuine):.2%}) |"
            )

    def _embed_folder(self, engine, folder: Path) -> list[np.ndarray]:
        result = []
        for path in sorted(folder.iterdir()):
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            try:
                faces = engine.analyze(decode_upload(path.read_bytes()))
            except PermanentJobError as error:
                self.stderr.write(f"skipped {path}: {error}")
                continue
            if not faces:
                self.stderr.write(f"skipped {path}: no face")
                continue
            largest = max(faces, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]))
            result.append(largest.embedding)
        return result


def pair_similarities(embeddings: dict[str, list[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    genuine = [float(a @ b) for vectors in embeddings.values() for a, b in itertools.combinations(vectors, 2)]
    impostor = [
        float(a @ b)
        for (_, first), (_, second) in itertools.combinations(embeddings.items(), 2)
        for a in first
        for b in second
    ]
    return np.array(genuine), np.array(impostor)
