"""Find small faces in big photos: a whole-image pass plus overlapping tiles.

A wedding group shot is 12-24 MP and faces can be 20-40 px wide. One pass at a
working resolution (long side 1280) finds the large faces; tiles of the image,
downscaled no further than the tile pass allows, find the small ones. Tiles
overlap by more than the largest face the tile pass is responsible for, so a
face cut by a tile edge is whole in a neighbour; detections touching an inner
tile edge are dropped, then everything goes through one cross-tile NMS.
docs/ARCHITECTURE.md §6 has the recall/cost table (bench/face_recall.py).
"""

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class TilingPlan:
    work_long_side: int = 1280
    tile_size: int = 1024
    tile_overlap: int = 160
    # The tile pass never runs on more pixels than this: a 24 MP photo is
    # scaled to it first, which bounds the cost at about 12 tiles.
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
    if plan.enabled and work_scale < 1.0 and max(height, width) * tile_scale > plan.work_long_side:
        found += _tile_pass(detect_once, _resize(image, tile_scale), tile_scale, plan)
    return suppress(found, plan)


def _tile_pass(detect_once: Callable, scaled: np.ndarray, scale: float, plan: TilingPlan) -> list:
    height, width = scaled.shape[:2]
    found = []
    for y in _starts(height, plan.tile_size, plan.tile_overlap):
        for x in _starts(width, plan.tile_size, plan.tile_overlap):
            tile = scaled[y : y + plan.tile_size, x : x + plan.tile_size]
            tile_h, tile_w = tile.shape[:2]
            inner = (x > 0, y > 0, x + tile_w < width, y + tile_h < height)
            for detection in detect_once(tile):
                if not _touches_inner_edge(detection.box, tile_w, tile_h, inner):
                    found.append(detection.shifted(x / scale, y / scale, scale))
    return found


def _starts(length: int, size: int, overlap: int) -> list[int]:
    if length <= size:
        return [0]
    step = size - overlap
    starts = list(range(0, length - size, step))
    return [*starts, length - size]


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
