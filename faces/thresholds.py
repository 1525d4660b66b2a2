"""Similarity thresholds per engine (cosine similarity of unit embeddings).

What each value rests on is in docs/ARCHITECTURE.md §6. A threshold nobody
measured is None, and None fails closed: every detected face is blurred in
every file, nothing is matched, nothing is clustered. Tests set thresholds in
their own fixtures (patching THRESHOLDS), never through configuration.

Small faces embed worse (fewer pixels, often out of focus): a DNP member's own face
at 24 px reaches far lower similarities than at 96 px, so the `blur` threshold for
faces narrower than `small_face_px` is lower (the bias is toward blurring).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    # matched_user_id is the best candidate when its similarity reaches this.
    match: float | None
    # A face at least small_face_px wide this similar to any DNP member is blurred
    # (<= match: when unsure, blur).
    blur: float | None
    # An unmatched face joins its event's nearest Unknown cluster at or above this.
    cluster: float | None
    # The blur threshold for faces narrower than small_face_px (in pixels of the stored image).
    small_face_blur: float | None = None
    small_face_px: int = 32

    def __post_init__(self):
        if self.match is not None and self.blur is not None and self.blur > self.match:
            raise ValueError("blur must not exceed match: the bias is toward blurring")
        if None not in (self.blur, self.small_face_blur) and self.small_face_blur > self.blur:
            raise ValueError("small faces embed worse: their blur threshold must not exceed blur")

    def blur_for(self, width_px: float | None) -> float | None:
        """The blur threshold for a face this wide; an unknown width counts as small."""
        small = width_px is None or width_px < self.small_face_px
        if small and self.small_face_blur is not None:
            return self.small_face_blur
        return self.blur

    @property
    def measured(self) -> bool:
        return None not in (self.match, self.blur, self.cluster)


NOT_MEASURED = Thresholds(match=None, blur=None, cluster=None)

THRESHOLDS: dict[str, Thresholds] = {
    # manage.py measure_thresholds on real, different photos of the same people
    # (scripts/make_identity_set.py; §6), its recommended line: genuine >= 0.59 from 32 px up,
    # >= 0.27 at 24 px blurred (>= 0.19 once re-encoded as JPEG q75); strangers <= 0.366 at every size.
    "insightface-buffalo_s": Thresholds(match=0.40, blur=0.30, cluster=0.45, small_face_blur=0.15),
    # buffalo_l: not measured here (its weights cannot be fetched here): fails closed
    # until an operator measures it on the server (docs/OPERATIONS.md).
    "insightface-buffalo_l": NOT_MEASURED,
}


def for_engine(engine: str) -> Thresholds:
    return THRESHOLDS.get(engine, NOT_MEASURED)
