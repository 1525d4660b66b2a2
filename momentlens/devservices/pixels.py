"""Pixel comparisons the tests and the chaos run use to check blurring on the files themselves."""

import numpy as np


def face_core(image: np.ndarray, face) -> np.ndarray:
    """The middle of a stored face box (fractions): eyes, nose, mouth."""
    height, width = image.shape[:2]
    x1, x2 = int((face.box_x + face.box_w * 0.2) * width), int((face.box_x + face.box_w * 0.8) * width)
    y1, y2 = int((face.box_y + face.box_h * 0.2) * height), int((face.box_y + face.box_h * 0.8) * height)
    return image[y1 : max(y2, y1 + 1), x1 : max(x2, x1 + 1)].astype(np.float32)


def difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute pixel difference."""
    return float(np.abs(a.astype(np.float32) - b.astype(np.float32)).mean())
