"""buffalo_s engines that differ only in how the detector and recogniser run, for benches to set side by side.

- `today`: as the worker builds it on a CPU: each detector pass at its own size, alone;
- `batch 4`: a level's tiles and the second looks of one shape 4 at a time (faces/engines/pyramid.py, Passes), faces
  embedded in the GPU's batch sizes;
- `gpu shapes`: as on a GPU (`GPU_SHAPES`): every pass padded to a shape bucket, 4 at a time, a session
  per bucket, faces embedded in fixed batch sizes; here on the CPU;
- `int8`: both models quantized with onnxruntime's dynamic quantization (weights int8, activations
  quantized at run time), written once to var/cache/int8/ and checked by structure (their digests are
  not buffalo_s's).
"""

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("today", "batch 4", "gpu shapes", "int8")
INT8_FOLDER = ROOT / "var" / "cache" / "int8" / "buffalo_s"


def build(name: str, threads: int = 1, providers: list[str] | None = None):
    from faces.engines.insightface import GPU_SHAPES, InsightFaceEngine
    from faces.engines.packs import BUFFALO_S, pack_folder

    installed = pack_folder(BUFFALO_S, ROOT / "var" / "no-operator-models")
    options = {"intra_op_threads": threads, "providers": providers}
    if name == "today":
        return InsightFaceEngine(BUFFALO_S, installed, **options)
    if name == "batch 4":
        return InsightFaceEngine(
            BUFFALO_S, installed, shapes=dataclasses.replace(GPU_SHAPES, detector_buckets=()), **options
        )
    if name == "gpu shapes":
        return InsightFaceEngine(BUFFALO_S, installed, shapes=GPU_SHAPES, **options)
    if name == "int8":
        quantized = dataclasses.replace(BUFFALO_S, sha256={})
        return InsightFaceEngine(quantized, quantized_folder(installed), **options)
    raise ValueError(f"no engine variant {name!r}: {', '.join(VARIANTS)}")


def quantized_folder(installed: Path) -> Path:
    """buffalo_s's two models quantized (dynamic, int8 weights), written once."""
    from faces.engines.packs import BUFFALO_S

    INT8_FOLDER.mkdir(parents=True, exist_ok=True)
    for name in (BUFFALO_S.detector, BUFFALO_S.recognizer):
        target = INT8_FOLDER / name
        if not target.exists():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(installed / name, target, weight_type=QuantType.QInt8)
    return INT8_FOLDER
