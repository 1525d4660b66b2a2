"""Find small faces in big photos: a whole-image pass plus overlapping, enlarged tiles.

A wedding group shot is 12-24 MP and faces can be 20-40 px wide. One pass at a
working resolution (long side 1280) finds the large faces. The tile pass finds the
small ones: the photo (scaled down to at most `tile_max_pixels` first, which bounds
the cost) is cut into overlapping tiles, and each tile is enlarged `tile_upscale`
times before the detector sees it, because the detectors find faces from about 40
px up. Tiles overlap by more than the largest face the tile pass is responsible
for, so a face cut by a tile edge is whole in a neighbour; detections touching an
inner tile edge are dropped, then everything goes through one cross-pass NMS.
docs/ARCHITECTURE.md §6 has the recall/cost table (bench/face_recall.py).
"""

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class TilingPlan:
    work_long_side: int = 1280
    # Size and overlap of a tile as the detector sees it, after enlargement.
    tile_size: int = 1024
    # More than the largest face the tile pass must find whole (the whole-image
    # pass finds faces above ~130 px of a 4000 px photo: 260 px once enlarged).
    tile_overlap: int = 320
    tile_upscale: float = 2.0
    # The tile pass never runs on more of the photo than this: a 24 MP photo is
    # scaled to it first, so a photo costs at most about 100 detector tiles.
    tile_max_pixels: int = 12_000_000
    nms_iou: float = 0.4
    # A lower-scoring box mostly inside a higher-scoring one is the same face.
    containment: float = 0.7
    enabled: bool = True


def detect_tiled(detect_once: Callable, image: np.ndarray, plan: TilingPlan) -> list:
    height, width = image.shape[:2]
    work_scale = min(1.0, plan.work_long_side / max(height, width))
    found = [d.shifted(0, 0, work_scale) for d in detect_once(_resize(image, work_scale))]
    tile_scale = min(1.0, (plan.tile_max_pixels / (height * width)) ** 0.5)
    if plan.enabled and work_scale < 1.0:
        found += _tile_pass(detect_once, _resize(image, tile_scale), tile_scale, plan)
    return suppress(found, plan)


def _tile_pass(detect_once: Callable, scaled: np.ndarray, scale: float, plan: TilingPlan) -> list:
    """Tiles of `scaled` (the photo times `scale`), each enlarged by plan.tile_upscale."""
    height, width = scaled.shape[:2]
    size = round(plan.tile_size / plan.tile_upscale)
    overlap = round(plan.tile_overlap / plan.tile_upscale)
    found = []
    for y in _starts(height, size, overlap):
        for x in _starts(width, size, overlap):
            tile = scaled[y : y + size, x : x + size]
            tile_h, tile_w = tile.shape[:2]
            enlarged = cv2.resize(
                tile, None, fx=plan.tile_upscale, fy=plan.tile_upscale, interpolation=cv2.INTER_LINEAR
            )
            inner = (x > 0, y > 0, x + tile_w < width, y + tile_h < height)
            total = scale * plan.tile_upscale
            for detection in detect_once(enlarged):
                if _belongs_to_tile_pass(detection.box / plan.tile_upscale, tile_w, tile_h, inner, overlap):
                    found.append(detection.shifted(x / scale, y / scale, total))
    return found


def _starts(length: int, size: int, overlap: int) -> list[int]:
    if length <= size:
        return [0]
    step = size - overlap
    starts = list(range(0, length - size, step))
    return [*starts, length - size]


def _belongs_to_tile_pass(box: np.ndarray, tile_w: int, tile_h: int, inner: tuple, overlap: int) -> bool:
    """Whole inside the tile, and small: a face wider than the overlap is the whole-image pass's to find,
    and the tile pass, seeing a tile enlarged, mistakes large textures for faces."""
    return not _touches_inner_edge(box, tile_w, tile_h, inner) and box[2] - box[0] <= overlap


def _touches_inner_edge(box: np.ndarray, tile_w: int, tile_h: int, inner: tuple, margin: float = 2.0) -> bool:
    left, top, right, bottom = inner
    x1, y1, x2, y2 = box
    return (
        (left and x1 <= margin)
        or (top and y1 <= margin)
        or (right and x2 >= tile_w - margin)
        or (bottom and y2 >= tile_h - margin)
    )


def suppress(detections: list, plan: TilingPlan) -> list:
    """Cross-pass NMS: keep the best-scoring box of each face."""
    if not detections:
        return []
    order = sorted(detections, key=lambda d: d.score, reverse=True)
    boxes = np.array([d.box for d in order], dtype=np.float32)
    xywh = np.column_stack([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]])
    kept = cv2.dnn.NMSBoxes(xywh.tolist(), [d.score for d in order], 0.0, plan.nms_iou)
    kept = sorted(int(i) for i in np.asarray(kept).reshape(-1))
    result = []
    for index in kept:
        if not any(_mostly_inside(boxes[index], boxes[other], plan.containment) for other in kept if other < index):
            result.append(order[index])
    return result


def _mostly_inside(inner: np.ndarray, outer: np.ndarray, fraction: float) -> bool:
    width = min(inner[2], outer[2]) - max(inner[0], outer[0])
    height = min(inner[3], outer[3]) - max(inner[1], outer[1])
    if width <= 0 or height <= 0:
        return False
    area = (inner[2] - inner[0]) * (inner[3] - inner[1])
    return area > 0 and width * height / area >= fraction


def _resize(image: np.ndarray, scale: float) -> np.ndarray:
    if scale >= 1.0:
        return image
    height, width = image.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)
