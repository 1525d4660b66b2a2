"""The blur decision of docs/ARCHITECTURE.md §6, on synthetic similarities: every branch of the rule."""

import dataclasses
import uuid
from types import SimpleNamespace

import numpy as np
import pytest

from faces.people import Candidates, PhotoMatch
from faces.thresholds import NOT_MEASURED, FaceQuality, FaceView, Thresholds

X, Y, GUEST = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
THRESHOLDS = Thresholds(match=0.9, blur=0.8, cluster=0.9)


def photo_match(
    similarity: list[list[float]],
    thresholds=THRESHOLDS,
    unidentifiable_dnp: int = 0,
    width_px: float | None = 100,
    hidden: float = 0.0,
    head_turn: float | None = 0.0,
    embedding_norm: float | None = 24.0,
) -> PhotoMatch:
    """Faces (rows) against candidates X (DNP), Y (DNP) and GUEST (not DNP)."""
    candidates = Candidates(
        user_ids=[X, Y, GUEST],
        dnp=np.array([True, True, False]),
        references=np.zeros((3, 512), dtype=np.float32),
        owners=np.array([0, 1, 2]),
        unidentifiable_dnp=unidentifiable_dnp,
    )
    faces = [SimpleNamespace(id=i) for i in range(len(similarity))]
    views = [FaceView(FaceQuality(width_px, head_turn, embedding_norm), hidden)] * len(faces)
    return PhotoMatch.of(faces, candidates, np.array(similarity, dtype=np.float32), thresholds.judge(views))


def test_a_face_matched_to_x_is_visible_only_in_x_own_file():
    match = photo_match([[0.95, 0.1, 0.1]])
    assert match.best() == [(X, pytest.approx(0.95))]
    assert match.blurred() == [True]
    assert match.blurred(viewer=X) == [False]
    assert match.blurred(viewer=Y) == [True]
    assert match.own_file_users() == [X]


def test_when_another_dnp_member_also_reaches_blur_the_face_is_blurred_in_x_file_too():
    match = photo_match([[0.95, 0.85, 0.1]])
    assert match.blurred(viewer=X) == [True]


def test_a_face_near_x_but_matched_to_nobody_is_blurred_even_in_x_file():
    match = photo_match([[0.85, 0.1, 0.1]])  # >= blur, < match: when unsure, blur
    assert match.best()[0][0] is None
    assert match.blurred() == [True]
    assert match.blurred(viewer=X) == [True]
    assert match.own_file_users() == []


def test_guests_and_non_dnp_matches_are_not_blurred():
    match = photo_match([[0.1, 0.2, 0.97], [0.3, 0.2, 0.1]])
    assert match.best()[0][0] == GUEST
    assert match.blurred() == [False, False]
    assert match.own_file_users() == []


def test_n_dnp_subjects_give_n_own_files():
    match = photo_match([[0.95, 0.1, 0.1], [0.1, 0.93, 0.1], [0.1, 0.1, 0.1]])
    assert match.own_file_users() == sorted([X, Y])
    assert match.blurred() == [True, True, False]
    assert match.blurred(viewer=X) == [False, True, False]
    assert match.blurred(viewer=Y) == [True, False, False]


def test_not_measured_blurs_every_face_everywhere_and_matches_nobody():
    match = photo_match([[0.99, 0.1, 0.1], [0.1, 0.1, 0.99]], thresholds=NOT_MEASURED)
    assert [user for user, _ in match.best()] == [None, None]
    assert match.blurred() == [True, True]
    assert match.blurred(viewer=X) == [True, True]
    assert match.own_file_users() == []


def test_blur_above_match_is_refused():
    with pytest.raises(ValueError, match="blur must not exceed match"):
        Thresholds(match=0.8, blur=0.9, cluster=0.8)


def test_a_dnp_member_nobody_can_recognise_blurs_every_face_but_each_member_keeps_their_own():
    match = photo_match([[0.95, 0.1, 0.1], [0.1, 0.1, 0.97], [0.1, 0.1, 0.1]], unidentifiable_dnp=1)
    assert match.blurred() == [True, True, True]
    assert match.blurred(viewer=X) == [False, True, True]
    assert match.own_file_users() == [X]


QUALITY = Thresholds(
    match=0.4,
    blur=0.3,
    cluster=0.45,
    poor_face_blur=0.15,
    small_face_px=32,
    turned_face=0.35,
    weak_norm=21,
    unsure_norm=16,
)


@pytest.mark.parametrize(
    ("width_px", "similarity_to_x", "blurred"),
    [
        (100, 0.25, False),  # a large stranger's face under blur
        (32, 0.25, False),  # 32 px counts as large
        (31, 0.25, True),  # a small face embeds worse: the lower threshold blurs it
        (24, 0.16, True),
        (24, 0.14, False),
        (None, 0.16, True),  # width unknown: treated as small
    ],
)
def test_the_blur_threshold_follows_the_face_width(width_px, similarity_to_x, blurred):
    match = photo_match([[similarity_to_x, 0.0, 0.0]], thresholds=QUALITY, width_px=width_px)
    assert match.blurred() == [blurred]


@pytest.mark.parametrize(
    ("head_turn", "embedding_norm", "similarity_to_x", "blurred"),
    [
        (0.1, 24.0, 0.25, False),  # frontal, seen well: the blur threshold
        (0.35, 24.0, 0.25, True),  # a strong turn: the poorly seen face's lower threshold
        (0.34, 24.0, 0.25, False),
        (0.1, 20.9, 0.25, True),  # a weak embedding: the lower threshold too
        (0.1, 20.9, 0.14, False),
        (0.1, 15.9, 0.0, True),  # too poorly seen to judge: unsure, blurred whatever its similarity
        (0.1, 16.0, 0.0, False),
        (None, None, 0.25, False),  # a face stored before norms were kept, without landmarks: judged by size
    ],
)
def test_the_blur_threshold_follows_how_well_the_face_was_seen(head_turn, embedding_norm, similarity_to_x, blurred):
    match = photo_match(
        [[similarity_to_x, 0.0, 0.0]], thresholds=QUALITY, head_turn=head_turn, embedding_norm=embedding_norm
    )
    assert match.blurred() == [blurred]


def test_a_face_too_poorly_seen_to_judge_reaches_every_dnp_member_but_not_the_public_when_nobody_is_dnp():
    unsure = photo_match([[0.0, 0.0, 0.95]], thresholds=QUALITY, embedding_norm=12.0)
    assert unsure.blurred() == [True]
    assert unsure.blurred(viewer=X) == [True]
    assert unsure.too_poor.tolist() == [True]
    candidates = Candidates(
        user_ids=[GUEST], dnp=np.array([False]), references=np.zeros((1, 512), np.float32), owners=np.array([0])
    )
    view = FaceView(FaceQuality(100, 0.0, 12.0), 0.0)
    alone = PhotoMatch.of([SimpleNamespace(id=0)], candidates, np.array([[0.1]], np.float32), QUALITY.judge([view]))
    assert alone.blurred() == [False]


def test_poorly_seen_faces_may_not_get_a_higher_blur_threshold_than_faces_seen_well():
    with pytest.raises(ValueError, match="poorly seen faces"):
        Thresholds(match=0.4, blur=0.3, cluster=0.45, poor_face_blur=0.35)


def test_a_face_cut_by_the_edge_counts_as_reaching_every_dnp_member():
    """Half a face embeds as nobody: when unsure, blur (but its owner still sees it in their own file)."""
    stranger_like = photo_match([[0.05, 0.02, 0.0]], hidden=0.5)
    assert stranger_like.blurred() == [True]
    assert stranger_like.blurred(viewer=X) == [True], "Y's face, for all X can tell"
    matched_x = photo_match([[0.95, 0.02, 0.0]], hidden=0.5)
    assert matched_x.blurred(viewer=X) == [True], "Y could be this face too"
    assert photo_match([[0.05, 0.02, 0.0]], hidden=0.05).blurred() == [False], "a little cut changes nothing"


def test_a_face_a_third_hidden_whose_box_looks_nearly_whole_is_unsure():
    """Chaos: a DNP face 36 % past the bottom edge, found by an upside-down look, its box 98x101 px (nearly a
    face's proportions), embedded at 0.06 against its own reference."""
    from faces.geometry import hidden_share

    box, size = (0.8737, 0.7153, 0.0822, 0.2847), (1190, 355)
    assert hidden_share(box, *size) >= THRESHOLDS.unsure_hidden_share
    assert photo_match([[0.06, 0.02, 0.0]], hidden=hidden_share(box, *size)).blurred() == [True]


def test_a_cut_face_is_not_blurred_when_the_event_has_no_dnp_member():
    candidates = Candidates(
        user_ids=[GUEST], dnp=np.array([False]), references=np.zeros((1, 512), np.float32), owners=np.array([0])
    )
    view = FaceView(FaceQuality(100, 0.0, 24.0), 0.6)
    match = PhotoMatch.of([SimpleNamespace(id=0)], candidates, np.array([[0.1]], np.float32), THRESHOLDS.judge([view]))
    assert match.blurred() == [False]


CLEAR = Thresholds(match=0.9, blur=0.5, cluster=0.9, clear_match=0.7, clear_norm=21.0)


@pytest.mark.parametrize(
    ("width_px", "embedding_norm", "hidden", "matched"),
    [
        (100, 21.0, 0.0, True),  # seen clearly and whole: matched from clear_match
        (100, 20.9, 0.0, False),  # a weaker embedding: match decides
        (31, 24.0, 0.0, False),  # small
        (100, 24.0, 0.2, False),  # cut by the edge
        (100, None, 0.0, False),  # stored before norms were kept
    ],
)
def test_a_face_seen_clearly_is_matched_from_clear_match_any_other_from_match(
    width_px, embedding_norm, hidden, matched
):
    match = photo_match(
        [[0.0, 0.0, 0.75]], thresholds=CLEAR, width_px=width_px, embedding_norm=embedding_norm, hidden=hidden
    )
    assert match.best()[0][0] == (GUEST if matched else None)


def test_clear_match_lies_between_blur_and_match():
    with pytest.raises(ValueError, match="clear_match"):
        Thresholds(match=0.4, blur=0.2, cluster=0.35, clear_match=0.45)
    with pytest.raises(ValueError, match="clear_match"):
        Thresholds(match=0.4, blur=0.2, cluster=0.35, clear_match=0.15)


EXPLAINED = Thresholds(match=0.9, blur=0.3, cluster=0.9, explained_lead=0.4)


@pytest.mark.parametrize(
    ("similarity", "blurred"),
    [
        ([0.35, 0.1, 0.95], False),  # matched to GUEST, 0.6 ahead of X: GUEST's face
        ([0.54, 0.1, 0.95], False),  # 0.41 ahead: still
        ([0.6, 0.1, 0.95], True),  # only 0.35 ahead of X: it could be X
        ([0.35, 0.6, 0.95], True),  # only 0.35 ahead of Y
        ([0.35, 0.1, 0.85], True),  # under match: nobody's, X may be it
    ],
)
def test_a_face_a_member_who_is_not_dnp_explains_by_the_lead_is_blurred_for_no_dnp_member(similarity, blurred):
    match = photo_match([similarity], thresholds=EXPLAINED)
    assert match.blurred() == [blurred]
    assert match.blurred(viewer=X) == [blurred]
    assert photo_match([similarity], thresholds=dataclasses.replace(EXPLAINED, explained_lead=None)).blurred() == [
        True
    ], "without the rule, reaching X blurs it"


def test_an_unsure_face_or_a_dnp_member_nobody_can_recognise_is_never_explained():
    assert photo_match([[0.35, 0.1, 0.95]], thresholds=EXPLAINED, hidden=0.3).blurred() == [True]
    assert photo_match([[0.35, 0.1, 0.95]], thresholds=EXPLAINED, unidentifiable_dnp=1).blurred() == [True]
