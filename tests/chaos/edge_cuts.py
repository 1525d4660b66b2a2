"""Crops whose edge or corner cuts through a face, a DNP member's most of the time, and what the seed knows of each."""

import random
import uuid
from dataclasses import dataclass

import numpy as np

from faces.geometry import iou, pixel_box

# Where a crop cuts a face: one edge of the image or a corner.
CUT_SIDES = ("left", "right", "top", "bottom", "top_left", "top_right", "bottom_left", "bottom_right")
# A cut face counts (is expected to be seen) when at least this share of its box is on the image.
CUT_MIN_VISIBLE = 0.4


@dataclass(frozen=True)
class EdgeCut:
    """A DNP member's face of t1 that a crop cuts with the image's edge, in the crop's pixels."""

    photo_id: str
    owner: uuid.UUID
    face: int  # index in t1's faces, left to right
    side: str
    box: tuple[float, float, float, float]  # the whole face (x1, y1, x2, y2): part of it lies off the image
    size: tuple[int, int]  # the crop's width and height

    def visible(self) -> tuple[float, float, float, float]:
        x1, y1, x2, y2 = self.box
        return max(0.0, x1), max(0.0, y1), min(float(self.size[0]), x2), min(float(self.size[1]), y2)

    def visible_share(self) -> float:
        x1, y1, x2, y2 = self.box
        vx1, vy1, vx2, vy2 = self.visible()
        return (vx2 - vx1) * (vy2 - vy1) / ((x2 - x1) * (y2 - y1))

    def core(self) -> tuple[slice, slice]:
        """The middle of the whole face (eyes, nose, mouth), cut to the image: what must not survive."""
        x1, y1, x2, y2 = self.box
        width, height = self.size
        cx1, cx2 = max(0, int(x1 + 0.2 * (x2 - x1))), min(width, int(x1 + 0.8 * (x2 - x1)))
        cy1, cy2 = max(0, int(y1 + 0.2 * (y2 - y1))), min(height, int(y1 + 0.8 * (y2 - y1)))
        return slice(cy1, max(cy2, cy1 + 1)), slice(cx1, max(cx2, cx1 + 1))

    def stored_face(self, faces):
        """The face row the worker stored for it (its box is the visible part), by overlap; None if not detected."""
        visible = self.visible()
        best, best_iou = None, 0.3
        for face in faces:
            overlap = iou(visible, face_box(face, *self.size))
            if overlap >= best_iou:
                best, best_iou = face, overlap
        return best


def edge_cut(rng: random.Random, image: np.ndarray, faces, dnp: dict[int, uuid.UUID]):
    """A crop of `image` whose edge or corner cuts through a face, a DNP member's most of the time.

    Returns the crop, its (width, height) and, for each face the crop cuts with at least
    CUT_MIN_VISIBLE of its box still on it, (index in faces, side, whole box in the crop's pixels).
    """
    target = rng.choice(sorted(dnp)) if rng.random() < 0.7 else rng.randrange(len(faces))
    side = rng.choice(CUT_SIDES)
    share = rng.uniform(0.2, 0.4) if "_" in side else rng.uniform(0.25, 0.5)  # of the box, cut away per side
    height, width = image.shape[:2]
    left, top, right, bottom = crop_bounds(faces[target].box, side, share, width, height)
    crop = np.ascontiguousarray(image[top:bottom, left:right])
    size = (right - left, bottom - top)
    cut_faces = []
    for index, face in enumerate(faces):
        box = (face.box[0] - left, face.box[1] - top, face.box[2] - left, face.box[3] - top)
        visible_w = min(box[2], size[0]) - max(box[0], 0)
        visible_h = min(box[3], size[1]) - max(box[1], 0)
        whole = (box[2] - box[0]) * (box[3] - box[1])
        inside = box[0] >= 0 and box[1] >= 0 and box[2] <= size[0] and box[3] <= size[1]
        if not inside and visible_w > 0 and visible_h > 0 and visible_w * visible_h >= CUT_MIN_VISIBLE * whole:
            cut_faces.append((index, side, tuple(float(v) for v in box)))
    return crop, size, cut_faces


def crop_bounds(box, side: str, share: float, width: int, height: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the crop whose `side` (an edge, or a corner: two) cuts `share` of `box` away."""
    x1, y1, x2, y2 = box
    cut_x, cut_y = share * (x2 - x1), share * (y2 - y1)
    return (
        int(x1 + cut_x) if "left" in side else 0,
        int(y1 + cut_y) if "top" in side else 0,
        int(x2 - cut_x) if "right" in side else width,
        int(y2 - cut_y) if "bottom" in side else height,
    )


def face_box(face, width: int, height: int) -> tuple[float, float, float, float]:
    """A face row's box in the pixels of a picture `width` x `height`."""
    return pixel_box((face.box_x, face.box_y, face.box_w, face.box_h), width, height)
