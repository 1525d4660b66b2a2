"""Similarity thresholds per engine (cosine similarity of unit embeddings), and the quality they depend on.

What each value rests on is in docs/ARCHITECTURE.md §6. A threshold nobody
measured is None, and None fails closed: every detected face is blurred in
every file, nothing is matched, nothing is clustered. Tests set thresholds in
their own fixtures (patching THRESHOLDS), never through configuration.

A face the recogniser saw poorly (`FaceQuality`, below) reaches far lower similarities against its owner's
reference than a clear one, while strangers' similarities stay where they are. So the blur decision reads
the face's quality: a poorly seen face (small, turned, or with a weak embedding) is blurred from the lower
`poor_face_blur`, and a face too poorly seen to judge at all is unsure, blurred wherever an active DNP
member could be it, as a face cut by the image edge is (faces/people.py).

How well a face can be judged (`FaceQuality`): a DNP guest's own face can fall far under every threshold
against their reference when the recogniser saw it poorly: a head turned away, a small or blurred face,
sunglasses, low light. Three signals the engine already gives say how poorly, each measured on real photos of
real people (`manage.py measure_thresholds`):

- the face's width in pixels of the displayed image;
- the head turn, from the five landmarks: how far the nose sits from the eyes' midpoint along the line
  through the eyes, in eye distances (0 frontal; 0.5 a strong turn; about 1 a profile);
- the embedding norm, the recogniser's feature norm before normalisation (faces/engines/insightface.py): small
  when the crop hardly looks like a face to it.
"""

import math
from dataclasses import dataclass

import numpy as np

from faces import population
from faces.geometry import FractionBox, hidden_share
from faces.population import CALIBRATION


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


@dataclass(frozen=True)
class FaceView:
    """What the blur decision knows of a face beside its similarities: how well it was seen, and how much of it
    lies past the image edge (faces/geometry.py)."""

    quality: FaceQuality
    hidden_share: float  # of the face past the image edge (1.0: the image's size is unknown)

    @classmethod
    def of_stored(
        cls, box: FractionBox, landmarks, embedding_norm: float | None, size: tuple[int, int] | None
    ) -> "FaceView":
        """A stored face (box and landmarks as fractions) of an image of `size` (width, height); an unknown size
        (None) makes it small and wholly hidden."""
        quality = FaceQuality.of(box[2], landmarks, embedding_norm, None if size is None else size[0])
        return cls(quality, 1.0 if size is None else hidden_share(box, *size))

    @classmethod
    def of_detected(cls, face, width: int, height: int) -> "FaceView":
        """A face as the engine gives it (box and landmarks in pixels) in a width x height picture."""
        x1, y1, x2, y2 = (float(v) for v in face.box)
        box = (x1 / width, y1 / height, (x2 - x1) / width, (y2 - y1) / height)
        return cls(FaceQuality.of_detected(face), hidden_share(box, width, height))


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


@dataclass(frozen=True)
class Thresholds:
    """One engine's blur decision, matching and clustering: what `measure_thresholds` measured for its recogniser
    (`THRESHOLDS`). A quality rule's default leaves it off (no face seen poorly by it) until it is measured."""

    # matched_user_id is the best candidate when its similarity reaches this: above every stranger pair measured.
    match: float | None
    # A face seen well this similar to any DNP member is blurred (<= match: when unsure, blur).
    blur: float | None
    # An unmatched face joins its event's nearest Unknown cluster at or above this: the loosest that keeps them pure.
    cluster: float | None
    # The blur threshold of a face seen poorly (the next three say when): seen poorly, own faces score lower.
    poor_face_blur: float | None = None
    # Narrower than this (pixels of the displayed image) a face is seen poorly: a fixed split the rule never searches.
    small_face_px: int = 32
    # A head turned at least this far (faces.thresholds.head_turn) is seen poorly; inf: no turn is, unmeasured.
    turned_face: float = math.inf
    # An embedding norm under this is seen poorly: the crop hardly looks like a face; 0: none is, unmeasured.
    weak_norm: float = 0.0
    # A face whose embedding norm is under this is too poorly seen to judge: unsure; 0: none is, unmeasured.
    unsure_norm: float = 0.0
    # Unsure past this share of its box beyond the image edge: a fifth cut away can embed at 0.11 against the whole
    # face, and the estimate runs up to 0.1 low (docs/MEASUREMENTS.md, "Faces cut by the edge").
    unsure_hidden_share: float = 0.08
    # Two of an event's clusters whose centroids are this similar are one person's: the younger merges into the
    # older (faces.people.merge_clusters); None: clusters never merge, unmeasured.
    cluster_merge: float | None = None
    # A face seen clearly (`clear_norm` and up, at least small_face_px wide, whole) is matched from this: strangers'
    # clear faces stay further from a reference than poorly seen ones, so a lower value still names nobody wrongly
    # (above every stranger pair of that class measured); None: `match` for every face, unmeasured.
    clear_match: float | None = None
    # The embedding norm from which a face is seen clearly enough for `clear_match`.
    clear_norm: float = math.inf
    # A face matched to a member who is not DNP is theirs, not blurred for a DNP member it also reaches, when its
    # similarity to them leads its best to any DNP member by this much: a guest who resembles a DNP guest stays
    # visible (`PhotoMatch.explained`). Above every lead another member's reference took over a member's own on
    # the set, so that a DNP face is kept blurred even where a match would name it wrongly; None: never.
    explained_lead: float | None = None
    # Each DNP reference's blur bars move by how near strangers come to it (faces/population.py: the engine's
    # population, within its bounds): down for a reference strangers rarely reach, up for one they often do. False:
    # no bar moves, unmeasured.
    calibrated: bool = False
    # A face its member's references do not reach is matched to them through the event's faces (faces/links.py):
    # when it is this similar to a face of another photo of the event that their references matched, seen clearly,
    # and to no other member's such face. Above every stranger pair of a face with such a face measured on the
    # set; None: never, unmeasured.
    link: float | None = None

    def __post_init__(self):
        if self.match is not None and self.blur is not None and self.blur > self.match:
            raise ValueError("blur must not exceed match: the bias is toward blurring")
        if None not in (self.blur, self.poor_face_blur) and self.poor_face_blur > self.blur:
            raise ValueError("poorly seen faces embed worse: their blur threshold must not exceed blur")
        if self.clear_match is not None and not (self.blur or 0.0) <= self.clear_match <= (self.match or 1.0):
            raise ValueError("clear_match lies between blur and match: a face matched to a DNP member reaches them")
        matched_from = self.match if self.clear_match is None else self.clear_match
        if self.calibrated and None not in (self.blur, matched_from) and self.blur + CALIBRATION.highest > matched_from:
            raise ValueError("a raised blur bar stays under the match thresholds: a face matched to X reaches X's bar")

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

    def match_for(self, view: "FaceView") -> float | None:
        """The similarity from which a face seen as `view` tells is matched: `clear_match` when it is seen clearly,
        else `match`."""
        quality = view.quality
        clear = (
            self.clear_match is not None
            and quality.embedding_norm is not None
            and quality.embedding_norm >= self.clear_norm
            and not self.small(quality)
            and view.hidden_share < self.unsure_hidden_share
        )
        return self.clear_match if clear else self.match

    def too_poor(self, quality: FaceQuality) -> bool:
        """Whether a face is too poorly seen to be told apart from a DNP member (then it is unsure)."""
        return quality.embedding_norm is not None and quality.embedding_norm < self.unsure_norm

    def small(self, quality: FaceQuality) -> bool:
        return quality.width_px is None or quality.width_px < self.small_face_px

    def judge(self, views: list[FaceView]) -> "Judgement":
        """What these thresholds make of each face seen as `views` say."""
        too_poor = np.array([self.too_poor(view.quality) for view in views], dtype=bool)
        cut = np.array([view.hidden_share >= self.unsure_hidden_share for view in views], dtype=bool)
        poorly = np.array([self.seen_poorly(view.quality) for view in views], dtype=bool)
        blur_at = [self.blur_for(view.quality) for view in views]
        match_at = [self.match_for(view) for view in views]
        return Judgement(self, blur_at, cut | too_poor, too_poor, ~poorly & ~cut, match_at)

    @property
    def lowest_blur(self) -> float | None:
        """The lowest blur threshold any face gets, before a reference moves it (hide-first's candidates reach it,
        moved by the lowest shift of the members it hides for: faces/exposure.py)."""
        values = [value for value in (self.blur, self.poor_face_blur) if value is not None]
        return min(values) if values else None

    @property
    def measured(self) -> bool:
        return None not in (self.match, self.blur, self.cluster)


@dataclass(frozen=True)
class Judgement:
    """What one engine's thresholds make of a photo's faces, one entry per face."""

    thresholds: Thresholds
    blur_at: list[float | None]  # its blur threshold (None: not measured, every face is blurred)
    # Cannot be told apart from a DNP member: cut by the image edge past unsure_hidden_share, or too poor.
    unsure: np.ndarray
    too_poor: np.ndarray  # too poorly seen to judge (Thresholds.too_poor)
    clear: np.ndarray  # seen well and whole: a witness of who it is (faces.tracks.Tracking.link_agreement)
    match_at: list[float | None]  # its match threshold (None: not measured, nobody is matched)


NOT_MEASURED = Thresholds(match=None, blur=None, cluster=None)

THRESHOLDS: dict[str, Thresholds] = {
    # manage.py measure_thresholds on the real-faces set (scripts/make_real_faces_set.py; §6), its recommended
    # line: the fewest DNP faces left visible while strangers blurred stay within the budget per DNP member,
    # set so that an event with five DNP members blurs about 5 % of everyone else; `cluster`, then `cluster_merge`,
    # the loosest at which the worker's clusters of the set's events stay pure, one step stricter
    # (faces/measurement/people.py).
    "insightface-buffalo_s": Thresholds(
        match=0.40,
        blur=0.18,
        cluster=0.35,
        poor_face_blur=0.09,
        small_face_px=32,
        turned_face=0.5,
        weak_norm=0,
        unsure_norm=14,
        cluster_merge=0.40,
        clear_match=0.35,
        clear_norm=21,
        explained_lead=0.30,
        calibrated=True,
        link=0.50,
    ),
    # buffalo_l: not measured here (its weights cannot be fetched here): fails closed
    # until an operator measures it on the server (docs/OPERATIONS.md).
    "insightface-buffalo_l": NOT_MEASURED,
}


def for_engine(engine: str) -> Thresholds:
    return THRESHOLDS.get(engine, NOT_MEASURED)


def bar_shifts(engine: str, references: np.ndarray) -> np.ndarray:
    """(R,): how far `engine`'s blur bars move for each reference (zeros where its thresholds are not calibrated)."""
    if not for_engine(engine).calibrated or not len(references):
        return np.zeros(len(references), dtype=np.float32)
    return population.for_engine(engine).shifts(references).astype(np.float32)


def judge_stored(engine: str, faces, size: tuple[int, int] | None) -> Judgement:
    """What `engine`'s thresholds make of a photo's stored faces (faces.models.Face) in a picture of `size`."""
    views = [
        FaceView.of_stored((face.box_x, face.box_y, face.box_w, face.box_h), face.landmarks, face.embedding_norm, size)
        for face in faces
    ]
    return for_engine(engine).judge(views)


def judge_detected(engine: str, faces, width: int, height: int) -> Judgement:
    """What `engine`'s thresholds make of faces as the engine gives them, in a width x height picture."""
    return for_engine(engine).judge([FaceView.of_detected(face, width, height) for face in faces])
