"""Whether a face in a rendered frame is blurred or intact, measured against the same frame of the upload
(the figures and how they were calibrated: tests/test_media_e2e.py's docstring)."""

from dataclasses import dataclass

import cv2
import numpy as np

from momentlens.devservices.pixels import difference
from tests.support.media_clips import Box, read_video
from tests.support.stored_files import read_bytes

BLURRED_DETAIL, BLURRED_CHANGE = 0.4, 15.0
INTACT_DETAIL, INTACT_CHANGE = 0.5, 10.0


@dataclass(frozen=True)
class FaceReading:
    detail: float  # the region's Laplacian energy, as a ratio to the upload's
    change: float  # mean absolute difference from the upload, whole region
    quarters: tuple[float, ...]  # the same, per quarter of the region

    @property
    def blurred(self) -> bool:
        return self.detail < BLURRED_DETAIL and min(self.quarters) > BLURRED_CHANGE

    @property
    def intact(self) -> bool:
        return self.detail > INTACT_DETAIL and self.change < INTACT_CHANGE

    def __str__(self) -> str:
        quarters = "/".join(f"{q:.1f}" for q in self.quarters)
        return f"detail {self.detail:.3f}, change {self.change:.1f} (quarters {quarters})"


def core(image: np.ndarray, box: Box) -> np.ndarray:
    x1, y1, x2, y2 = box
    width, height = x2 - x1, y2 - y1
    return image[int(y1 + 0.2 * height) : int(y1 + 0.8 * height), int(x1 + 0.2 * width) : int(x1 + 0.8 * width)]


def laplacian_energy(region: np.ndarray) -> float:
    grey = cv2.cvtColor(region, cv2.COLOR_BGR2GRAY).astype(np.float32)
    return float(np.abs(cv2.Laplacian(grey, cv2.CV_32F)).mean())


def quarters(region: np.ndarray) -> list[np.ndarray]:
    height, width = region.shape[:2]
    return [region[:height // 2, :width // 2], region[:height // 2, width // 2 :],
            region[height // 2 :, :width // 2], region[height // 2 :, width // 2 :]]  # fmt: skip


def read_face(rendered: np.ndarray, upload: np.ndarray, box: Box) -> FaceReading:
    out, source = core(rendered, box), core(upload, box)
    return FaceReading(
        detail=laplacian_energy(out) / max(laplacian_energy(source), 1e-6),
        change=difference(out, source),
        quarters=tuple(difference(a, b) for a, b in zip(quarters(out), quarters(source), strict=True)),
    )


def unblurred_frames(photo, clip) -> list[str]:
    """Every frame where the clip's script (video_samples.Video) puts the DNP face and the photo's public file
    does not blur it."""
    upload, public = read_video(read_bytes(photo.upload_key)), read_video(read_bytes(photo.public_key))
    assert len(public.frames) == len(upload.frames) == len(clip.dnp)
    problems = []
    for index, (box, source, shown) in enumerate(zip(clip.dnp, upload.frames, public.frames, strict=True)):
        if box is not None and not (reading := read_face(shown, source, box)).blurred:
            problems.append(f"frame {index}: {reading}")
    return problems
