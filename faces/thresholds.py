"""Similarity thresholds per engine (cosine similarity of unit embeddings), and the quality they depend on.

What each value rests on is in docs/ARCHITECTURE.md §6. A threshold nobody
measured is None, and None fails closed: every detected face is blurred in
every file, nothing is matched, nothing is clustered. Tests set thresholds in
their own fixtures (patching THRESHOLDS), never through configuration.

A face the recogniser saw poorly (faces/quality.py) reaches far lower similarities against its owner's
reference than a clear one, while strangers' similarities stay where they are. So the blur decision reads
the face's quality: a poorly seen face (small, turned, or with a weak embedding) is blurred from the lower
`poor_face_blur`, and a face too poorly seen to judge at all is unsure, blurred wherever an active DNP
member could be it, as a face cut by the image edge is (faces/matching.py).
"""

import math
from dataclasses import dataclass

from faces.quality import FaceQuality


@dataclass(frozen=True)
class Thresholds:
    # matched_user_id is the best candidate when its similarity reaches this.
    match: float | None
    # A face seen well this similar to any DNP member is blurred (<= match: when unsure, blur).
    blur: float | None
    # An unmatched face joins its event's nearest Unknown cluster at or above this.
    cluster: float | None
    # The blur threshold of a face seen poorly: narrower than small_face_px (pixels of the displayed image),
    # head turned at least turned_face, or an embedding norm under weak_norm.
    poor_face_blur: float | None = None
    small_face_px: int = 32
    turned_face: float = math.inf
    weak_norm: float = 0.0
    # A face whose embedding norm is under this is too poorly seen to judge: unsure.
    unsure_norm: float = 0.0

    def __post_init__(self):
        if self.match is not None and self.blur is not None and self.blur > self.match:
            raise ValueError("blur must not exceed match: the bias is toward blurring")
        if None not in (self.blur, self.poor_face_blur) and self.poor_face_blur > self.blur:
            raise ValueError("poorly seen faces embed worse: their blur threshold must not exceed blur")

    def blur_for(self, quality: FaceQuality) -> float | None:
        """The blur threshold of a face of this quality. An unknown width counts as small; a face stored
        without a norm is judged by its size and turn alone."""
        if self.poor_face_blur is not None and self.seen_poorly(quality):
            return self.poor_face_blur
        return self.blur

    def seen_poorly(self, quality: FaceQuality) -> bool:
        turned = quality.head_turn is not None and quality.head_turn >= self.turned_face
        weak = quality.embedding_norm is not None and quality.embedding_norm < self.weak_norm
        return self.small(quality) or turned or weak

    def too_poor(self, quality: FaceQuality) -> bool:
        """Whether a face is too poorly seen to be told apart from a DNP member (then it is unsure)."""
        return quality.embedding_norm is not None and quality.embedding_norm < self.unsure_norm

    def small(self, quality: FaceQuality) -> bool:
        return quality.width_px is None or quality.width_px < self.small_face_px

    @property
    def lowest_blur(self) -> float | None:
        """The lowest blur threshold any face gets (hide-first's candidates reach it: faces/exposure.py)."""
        values = [value for value in (self.blur, self.poor_face_blur) if value is not None]
        return min(values) if values else None

    @property
    def measured(self) -> bool:
        return None not in (self.match, self.blur, self.cluster)


NOT_MEASURED = Thresholds(match=None, blur=None, cluster=None)

THRESHOLDS: dict[str, Thresholds] = {
    # manage.py measure_thresholds on the real-faces set (scripts/make_real_faces_set.py; §6), its recommended
    # line: the fewest DNP faces left visible while strangers blurred stay within the budget per DNP member.
    "insightface-buffalo_s": Thresholds(
        match=0.45,
        blur=0.17,
        cluster=0.50,
        poor_face_blur=0.11,
        small_face_px=32,
        turned_face=0.35,
        weak_norm=21,
        unsure_norm=16,
    ),
    # buffalo_l: not measured here (its weights cannot be fetched here): fails closed
    # until an operator measures it on the server (docs/OPERATIONS.md).
    "insightface-buffalo_l": NOT_MEASURED,
}


def for_engine(engine: str) -> Thresholds:
    return THRESHOLDS.get(engine, NOT_MEASURED)
