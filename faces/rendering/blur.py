"""Blur that cannot be undone (docs/ARCHITECTURE.md §7).

Downsampling to a few cells discards the face's information; upsampling and a box
blur on top remove the blocks' edges, which would otherwise keep a coarse shape. A
single light Gaussian would be partially invertible. BLUR_CELLS is the strength:
chosen so that a blurred DNP face no longer matches its owner's reference at the
`blur` threshold (tests/test_rendering.py proves it with the real buffalo_s engine).
"""

import cv2
import numpy as np

from faces.geometry import restored_face_box

# A detection box is tight: grow it so hair, ears, jaw and neckline are covered.
FACE_EXPANSION = 0.35
# How many cells the short side of a face is reduced to before upsampling.
BLUR_CELLS = 6
# The box blur on top, as a fraction of the region's short side.
BOX_BLUR_FRACTION = 0.25


def expanded_face_box(box: tuple[float, float, float, float], width: int, height: int) -> tuple[int, int, int, int]:
    """The face box (fractions x, y, w, h) grown by FACE_EXPANSION about its centre, in pixels, NOT clipped.

    A face cut by the image edge keeps its whole ellipse: clipping first would shrink the
    expansion to nothing on the cut side and narrow the ellipse to a point at the border.
    Its stored box is only the visible part, so it is first restored past that edge to a
    face's proportions (faces/geometry.py).
    """
    x1, y1, x2, y2 = restored_face_box(box, width, height)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    half_w, half_h = (x2 - x1) * (1 + FACE_EXPANSION) / 2, (y2 - y1) * (1 + FACE_EXPANSION) / 2
    return (
        int(np.floor(cx - half_w)),
        int(np.floor(cy - half_h)),
        int(np.ceil(cx + half_w)),
        int(np.ceil(cy + half_h)),
    )


def region_box(region: dict, width: int, height: int) -> tuple[int, int, int, int]:
    """A user-drawn blur region: exactly the rectangle drawn."""
    x, y, w, h = (float(region[k]) for k in ("x", "y", "w", "h"))
    return _clip(x * width, y * height, (x + w) * width, (y + h) * height, width, height)


def blur_face(image: np.ndarray, box: tuple[float, float, float, float], width: int, height: int) -> None:
    """The face `box` (x, y, w, h fractions of the width x height image) blurred: an ellipse over it, grown by
    FACE_EXPANSION and restored past the image's edge (expanded_face_box)."""
    blur_ellipse(image, expanded_face_box(box, width, height))


def blur_ellipse(image: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """Blur, in place, the part inside the image of the ellipse inscribed in `box` (which may overhang the image).

    The strength comes from the whole ellipse, not from the visible part: a thin strip of a
    face at the border is destroyed as hard as the face would be.
    """
    x1, y1, x2, y2 = box
    height, width = image.shape[:2]
    cx1, cy1, cx2, cy2 = _clip(x1, y1, x2, y2, width, height)
    if x2 - x1 < 2 or y2 - y1 < 2 or cx2 <= cx1 or cy2 <= cy1:
        return
    roi = image[cy1:cy2, cx1:cx2]
    mask = np.zeros(roi.shape[:2], dtype=np.uint8)
    centre = ((x1 + x2) / 2 - cx1, (y1 + y2) / 2 - cy1)
    cv2.ellipse(mask, (centre, (x2 - x1, y2 - y1), 0), 255, -1)
    np.copyto(roi, destroyed(roi, strength_side=min(x2 - x1, y2 - y1)), where=mask[..., None].astype(bool))


def blur_rectangle(image: np.ndarray, box: tuple[int, int, int, int]) -> None:
    x1, y1, x2, y2 = box
    if x2 - x1 < 2 or y2 - y1 < 2:
        return
    roi = image[y1:y2, x1:x2]
    roi[...] = destroyed(roi, strength_side=min(x2 - x1, y2 - y1))


def destroyed(roi: np.ndarray, strength_side: int) -> np.ndarray:
    """Downsample hard, upsample, box-blur: the region with its detail gone.

    Cells and kernel are sized from `strength_side`, the short side of the whole region
    being blurred, even where only part of it lies on the image.
    """
    height, width = roi.shape[:2]
    cell = max(1.0, strength_side / BLUR_CELLS)
    small = cv2.resize(roi, (max(1, round(width / cell)), max(1, round(height / cell))), interpolation=cv2.INTER_AREA)
    smooth = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
    kernel = max(3, int(strength_side * BOX_BLUR_FRACTION) | 1)
    return cv2.blur(smooth, (kernel, kernel))


def _clip(x1, y1, x2, y2, width, height) -> tuple[int, int, int, int]:
    return (
        int(np.clip(np.floor(x1), 0, width)),
        int(np.clip(np.floor(y1), 0, height)),
        int(np.clip(np.ceil(x2), 0, width)),
        int(np.clip(np.ceil(y2), 0, height)),
    )
