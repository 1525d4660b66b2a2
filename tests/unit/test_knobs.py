"""Every knob lives in its stage's config object (docs/ARCHITECTURE.md §1, the glossary's "config"): a module-level
number in the worker's code is a fact, listed here with why it is one. A new knob joins its stage's frozen config."""

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("faces", "jobqueue", "momentlens")

# name -> why it is a fact and not a knob
FACTS = {
    "EMBEDDING_DIMENSIONS": "the recogniser's output: ArcFace embeds into 512 numbers",
    "ALIGNED_SIZE": "ArcFace's input: a 112 px aligned face",
    "ORT_LOG_ERRORS_ONLY": "onnxruntime's code for its error severity",
    "STRIDE": "SCRFD's coarsest stride: an input is padded to a multiple of it",
    "IMMICH_MAX_DISTANCE": "Immich's shipped DBSCAN distance: the outside way compared with",
    "IMMICH_MIN_FACES": "Immich's shipped DBSCAN minimum: the outside way compared with",
    "BACKGROUND": "a page's white, under a transparent picture",
    "ORIENTATION_TAG": "Exif's orientation tag",
    "SHORTEST_PLAYED_MS": "what browsers do with a frame this short",
    "PLAYED_INSTEAD_MS": "what browsers show such a frame for",
    "CLUSTER_LOCK": "an advisory lock's name",
    "TRANSACTION_POOLER_PORT": "Supabase's transaction pooler's port",
    "READER_LOCK_KEY": "an advisory lock's name",
    "FAN_OUT_LOCK": "an advisory lock's name",
    "SLOT_COUNT_LOCK": "an advisory lock's name",
    "PROVISION_LOCK_KEY": "an advisory lock's name",
    "_running": "a counter, not a setting",
    "_SOS": "JPEG's start-of-scan marker",
    "_EOI": "JPEG's end-of-image marker",
}

# The configs the glossary names: frozen, so that no stage tunes another's.
CONFIGS = (
    "faces.engines.base.Plan",
    "faces.detection.clips.ClipSchedule",
    "faces.detection.LookMemory",
    "faces.engines.insightface.Shapes",
    "faces.tracks.Tracking",
    "faces.thresholds.Thresholds",
    "faces.rendering.painters.Painting",
    "faces.geometry.EdgeCuts",
    "faces.media.upload.MediaLimits",
    "faces.rendering.files.Uploads",
    "faces.jobs.reference_process.Selfie",
    "jobqueue.worker.WorkerConfig",
    "jobqueue.privacy_lane.PrivacyLaneConfig",
    "jobqueue.outcome.Retries",
    "jobqueue.heartbeat.HeartbeatConfig",
    "jobqueue.outage.OutageProbe",
    "jobqueue.session.ReaderSessionConfig",
    "jobqueue.messages.MessageLimits",
)


def numeric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return numeric(node.left) and numeric(node.right)
    if isinstance(node, ast.Tuple | ast.List):
        return bool(node.elts) and all(numeric(element) for element in node.elts)
    return False


def named_numbers(tree: ast.Module):
    """(line, name) of each module-level name bound to a number (or numbers), unpacked tuples included."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and numeric(value):
                yield node.lineno, target.id
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for name, part in zip(target.elts, value.elts, strict=True):
                    if isinstance(name, ast.Name) and numeric(part):
                        yield node.lineno, name.id


def module_numbers() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for line, name in named_numbers(ast.parse(path.read_text())):
                found.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return found


def test_every_module_level_number_is_a_listed_fact():
    knobs = [where for where in module_numbers() if where.rsplit(" ", 1)[1] not in FACTS]
    assert not knobs, f"knobs outside a config object (put each in its stage's config): {knobs}"


def test_the_scan_sees_a_knob():
    tree = ast.parse("LOOK_EVERY_S = 0.2\nA, B = 1, 2\nNAME = 'x'\n")
    assert [name for _, name in named_numbers(tree)] == ["LOOK_EVERY_S", "A", "B"]


@pytest.mark.parametrize("dotted", CONFIGS)
def test_each_config_is_frozen(dotted):
    module, _, name = dotted.rpartition(".")
    config = getattr(importlib.import_module(module), name)
    assert dataclasses.is_dataclass(config)
    assert config.__dataclass_params__.frozen
