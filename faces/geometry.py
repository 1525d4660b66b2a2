"""Where a face is: a stored box (fractions of the image) in pixels, and the face a box cut by the edge belongs to.

A face cut by the image edge keeps only its visible part as its box. Its proportions
tell how much is missing: a detector's box around a whole face is about EdgeCuts.face_aspect
wide for its height, so a narrower box on the left or right edge (or a flatter one on
the top or bottom edge) is the visible part of a face that goes on past that edge.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EdgeCuts:
    """How a face the image's edge cuts is told, and restored past the edge."""

    # Width / height of a detector's box around a whole face (SCRFD's are about 0.75-0.85).
    face_aspect: float = 0.8
    # A box side this close to the image edge, in pixels, touches it.
    touching_px: float = 2.0
    # What a face in a corner of the image counts as having lost, at least: how much cannot be told there.
    corner_hidden_share: float = 0.5
    # Hide first's query takes a face this close to the border (a fraction of the image) as maybe cut by it: the
    # unsure rule then decides (faces/exposure.py).
    near_border: float = 0.02


EDGE_CUTS = EdgeCuts()

# A box is held in one of three ways, each named for what it holds:
# a face row's box (box_x, box_y, box_w, box_h): x, y, width, height, fractions of the picture;
FractionBox = tuple[float, float, float, float]
# a track's box: (4,) x1, y1, x2, y2, fractions of the frame;
FractionCorners = np.ndarray
# a box on the picture itself: x1, y1, x2, y2, pixels.
PixelBox = tuple[float, float, float, float]


def pixel_box(box: FractionBox, width: int, height: int) -> PixelBox:
    """(x, y, w, h) fractions -> (x1, y1, x2, y2) pixels."""
    x, y, w, h = box
    return x * width, y * height, (x + w) * width, (y + h) * height


def restored_face_box(box: FractionBox, width: int, height: int, edges: EdgeCuts = EDGE_CUTS) -> PixelBox:
    """The whole face's box in pixels: a side on the image edge is pushed past it until the box has a face's
    proportions. A box away from the edges is returned as it is."""
    x1, y1, x2, y2 = pixel_box(box, width, height)
    aspect = edges.face_aspect
    short_w, short_h = aspect * (y2 - y1) - (x2 - x1), (x2 - x1) / aspect - (y2 - y1)
    if short_w > 0:
        x1, x2 = _push_past_edges(x1, x2, width, short_w, edges.touching_px)
    elif short_h > 0:
        y1, y2 = _push_past_edges(y1, y2, height, short_h, edges.touching_px)
    return x1, y1, x2, y2


def hidden_share(box: FractionBox, width: int, height: int, edges: EdgeCuts = EDGE_CUTS) -> float:
    """How much of the face lies past the image edge (0: whole), by the area of its restored box.

    A box in a corner (on a side edge and on the top or bottom edge) may have lost width and
    height alike, keeping a face's proportions: how much is hidden cannot be told, so it
    counts as at least the edges' corner_hidden_share.
    """
    x1, y1, x2, y2 = pixel_box(box, width, height)
    r1, s1, r2, s2 = restored_face_box(box, width, height, edges)
    whole = (r2 - r1) * (s2 - s1)
    share = 0.0 if whole <= 0 else max(0.0, 1.0 - (x2 - x1) * (y2 - y1) / whole)
    touching = edges.touching_px
    on_side = x1 <= touching or x2 >= width - touching
    on_top_or_bottom = y1 <= touching or y2 >= height - touching
    return max(share, edges.corner_hidden_share) if on_side and on_top_or_bottom else share


def near_edge(box: PixelBox, width: int, height: int, margin: float = 0.0) -> bool:
    """Whether a box on the picture reaches within `margin` of its edge (a fraction of each side; 0: onto it or
    past it)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    margin_x, margin_y = margin * width, margin * height
    return x1 <= margin_x or y1 <= margin_y or x2 >= width - margin_x or y2 >= height - margin_y


def _push_past_edges(low: float, high: float, size: int, missing: float, touching_px: float) -> tuple[float, float]:
    at_low, at_high = low <= touching_px, high >= size - touching_px
    if at_low and at_high:
        return low - missing / 2, high + missing / 2
    if at_low:
        return low - missing, high
    if at_high:
        return low, high + missing
    return low, high


def bounds(a, b) -> tuple:
    """The smallest box (x1, y1, x2, y2) holding both boxes."""
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])


def iou(a, b):
    """Intersection over union of (x1, y1, x2, y2) boxes: of two boxes, a float; of (n, 4) and (m, 4)
    boxes, the (n, m) array of every pair. Boxes that do not overlap, or have no area, give 0."""
    first, second = np.atleast_2d(np.asarray(a, dtype=np.float64)), np.atleast_2d(np.asarray(b, dtype=np.float64))
    lt = np.maximum(first[:, None, :2], second[None, :, :2])
    rb = np.minimum(first[:, None, 2:], second[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area_a = np.prod(np.clip(first[:, 2:] - first[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(second[:, 2:] - second[:, :2], 0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    overlaps = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return float(overlaps[0, 0]) if np.ndim(a) == 1 and np.ndim(b) == 1 else overlaps
