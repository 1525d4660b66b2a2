"""How well a face can be judged: what the blur decision reads beside the similarity (docs/ARCHITECTURE.md §6).

A DNP guest's own face can fall far under every threshold against their reference when the recogniser saw
it poorly: a head turned away, a small or blurred face, sunglasses, low light. Three signals the engine
already gives say how poorly, each measured on real photos of real people (`manage.py measure_thresholds`):

- the face's width in pixels of the displayed image;
- the head turn, from the five landmarks: how far the nose sits from the eyes' midpoint along the line
  through the eyes, in eye distances (0 frontal; 0.5 a strong turn; about 1 a profile);
- the embedding norm, the recogniser's feature norm before normalisation (faces/engines/insightface.py): small
  when the crop hardly looks like a face to it.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FaceQuality:
    width_px: float | None  # None: the image's size is unknown
    head_turn: float | None  # None: no landmarks
    embedding_norm: float | None  # None: a face stored before the norm was kept

    @classmethod
    def of(cls, box_w: float, landmarks, embedding_norm: float | None, image_width: int | None) -> "FaceQuality":
        """`box_w` and `landmarks` as fractions of an image `image_width` px wide (None: unknown)."""
        width = None if image_width is None else box_w * image_width
        return cls(width, head_turn(landmarks), embedding_norm)

    @classmethod
    def of_detected(cls, face) -> "FaceQuality":
        """A face as the engine gives it (faces.engines.DetectedFace): box and landmarks in pixels."""
        return cls(float(face.box[2] - face.box[0]), head_turn(face.landmarks), face.embedding_norm)


def head_turn(landmarks) -> float | None:
    """The nose's offset from the eyes' midpoint along the eye line, in eye distances. Any scale and any
    rotation in the picture give the same value; None when the eyes coincide."""
    points = np.asarray(landmarks, dtype=np.float64).reshape(-1, 2)
    if len(points) < 3:
        return None
    left_eye, right_eye, nose = points[0], points[1], points[2]
    eye_line = right_eye - left_eye
    distance = float(np.linalg.norm(eye_line))
    if distance == 0.0:
        return None
    return abs(float(np.dot(nose - (left_eye + right_eye) / 2, eye_line))) / distance**2
