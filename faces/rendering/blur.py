"""Blur that cannot be undone (SPEC §7).

Downsampling to a few cells discards the face's information; upsampling and a box
blur on top remove the blocks' edges, which would otherwise keep a coarse shape. A
single light Gaussian would be partially invertible. BLUR_CELLS is the strength:
chosen so that a blurred DNP face no longer matches its owner's reference at the
`blur` threshold (tests/test_rendering.py proves it with the real portable engine).
"""

import cv2
import numpy as np

# A detection box is tight: grow it so hair, ears, jaw and neckline are covered.
FACE_EXPANSION = 0.35
# How many cells the short side of a face is reduced to before upsampling.
BLUR_CELLS = 6
# The box blur on top, as a fraction of the region's short side.
BOX_BLUR_FRACTION = 0.25


def expanded_face_box(box: tuple[float, float, float, float], width: int, height: int) -> tuple[int, int, int, int]:
    """The face box (fractions x, y, w, h) grown by FACE_EXPANSION about its centre, in clipped pixels."""
    x, y, w, h = box
    cx, cy = (x + w / 2) * width, (y + h / 2) * height
    half_w, half_h = w * width * (1 + FACE_EXPANSION) / 2, h * height * (1 + FACE_EXPANSION) / 2
    return _clip(cx - half_w, cy - half_h, cx + half_w, cy + half_h, width, height)


def region_box(region: dict, width: int, height: int) -> tuple[int, int, int, int]:
    """A user-drawn blur region: exactly the rectangle drawn."""
    x, y, w, h = (float(region[k]) for k in ("x", "y", "w", "h"))
    return _clip(x * width, y * height, (x + w) * width, (y + h) * height, width, height)


def blur_ellipse(image: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """Blur, in place, the ellipse inscribed in `box`."""
    x1, y1, x2, y2 = box
    if x2 - x1 < 2 or y2 - y1 < 2:
        return
    roi = image[y1:y2, x1:x2]
    mask = np.zeros(roi.shape[:2], dtype=np.uint8)
    cv2.ellipse(mask, ((roi.shape[1] / 2, roi.shape[0] / 2), (roi.shape[1], roi.shape[0]), 0), 255, -1)
    np.copyto(roi, destroyed(roi), where=mask[..., None].astype(bool))


def blur_rectangle(image: np.ndarray, box: tuple[int, int, int, int]) -> None:
    x1, y1, x2, y2 = box
    if x2 - x1 < 2 or y2 - y1 < 2:
        return
    image[y1:y2, x1:x2] = destroyed(image[y1:y2, x1:x2])


def destroyed(roi: np.ndarray) -> np.ndarray:
    """Downsample hard, upsample, box-blur: the region with its detail gone."""
    height, width = roi.shape[:2]
    cell = max(1.0, min(height, width) / BLUR_CELLS)
    small = cv2.resize(roi, (max(1, round(width / cell)), max(1, round(height / cell))), interpolation=cv2.INTER_AREA)
    smooth = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
    kernel = max(3, int(min(height, width) * BOX_BLUR_FRACTION) | 1)
    return cv2.blur(smooth, (kernel, kernel))


def _clip(x1, y1, x2, y2, width, height) -> tuple[int, int, int, int]:
    return (
        int(np.clip(np.floor(x1), 0, width)),
        int(np.clip(np.floor(y1), 0, height)),
        int(np.clip(np.ceil(x2), 0, width)),
        int(np.clip(np.ceil(y2), 0, height)),
    )
