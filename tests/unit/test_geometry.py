"""faces/geometry.py's `iou`: the one overlap measure of the worker, its benches and its tests."""

import numpy as np
import pytest

from faces.geometry import iou


def test_two_boxes_give_a_float():
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)


def test_boxes_apart_or_without_area_give_zero():
    assert iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0
    assert iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0


def test_arrays_of_boxes_give_every_pair():
    first = np.array([[0, 0, 10, 10], [0, 0, 20, 20]])
    second = np.array([[0, 0, 10, 10], [10, 10, 20, 20], [100, 100, 110, 110]])
    assert iou(first, second) == pytest.approx(np.array([[1.0, 0.0, 0.0], [0.25, 0.25, 0.0]]))


def test_one_box_against_many_is_a_row():
    assert iou(np.array([0, 0, 10, 10]), np.array([[0, 0, 10, 10], [5, 0, 15, 10]])).shape == (1, 2)
