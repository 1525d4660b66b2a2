"""Similarity thresholds per engine (cosine similarity of unit embeddings).

What each value rests on is in docs/ARCHITECTURE.md §6. A threshold nobody
measured is None, and None fails closed: every detected face is blurred in
every file, nothing is matched, nothing is clustered. Tests set thresholds in
their own fixtures (patching THRESHOLDS), never through configuration.
"""

from dataclasses import dataclass

from faces.engines.portable import NAME as PORTABLE


@dataclass(frozen=True)
class Thresholds:
    # matched_user_id is the best candidate when its similarity reaches this.
    match: float | None
    # A face this similar to any DNP member is blurred (<= match: when unsure, blur).
    blur: float | None
    # An unmatched face joins its event's nearest Unknown cluster at or above this.
    cluster: float | None

    def __post_init__(self):
        if self.match is not None and self.blur is not None and self.blur > self.match:
            raise ValueError("blur must not exceed match: the bias is toward blurring")


NOT_MEASURED = Thresholds(match=None, blur=None, cluster=None)

THRESHOLDS: dict[str, Thresholds] = {
    # dlib's published operating point (Euclidean 0.6 on raw descriptors, 99.38% on
    # LFW) is cosine ~0.915 at the descriptor norms measured here; measure_thresholds
    # on 8 people x 6 images: impostors <= 0.922, genuine >= 0.955 (§6).
    PORTABLE: Thresholds(match=0.93, blur=0.90, cluster=0.93),
    # buffalo_l: not measured here (its weights cannot be fetched here): fails closed.
    "insightface-buffalo_l": NOT_MEASURED,
}


def for_engine(engine: str) -> Thresholds:
    return THRESHOLDS.get(engine, NOT_MEASURED)
