"""A still's files are rendered side by side within MediaLimits.rendered_pixels_at_once (faces/media/still.py,
`Still.render`): the same files, in the painters' order, and never more pictures at once than the budget holds."""

import dataclasses
import threading
import time

import pytest

from faces.media.still import Still
from momentlens.devservices import samples


class CountingPainter:
    """Blacks out a square of its own; counts how many painters paint at the same moment."""

    spans = [(float("-inf"), float("inf"))]
    lock = threading.Lock()
    now = 0
    most = 0

    def __init__(self, corner: int):
        self.corner = corner

    def __call__(self, when: float, frame) -> None:
        with CountingPainter.lock:
            CountingPainter.now += 1
            CountingPainter.most = max(CountingPainter.most, CountingPainter.now)
        time.sleep(0.2)  # long enough for a second render to start beside this one, if the budget lets it
        frame[self.corner : self.corner + 40, self.corner : self.corner + 40] = 0
        with CountingPainter.lock:
            CountingPainter.now -= 1


@pytest.fixture
def still() -> Still:
    return Still(samples.encode_jpeg(samples.group_photo(), quality=95))


def _render(still: Still, pictures_at_once: float, painters: list) -> list:
    CountingPainter.most = 0
    still.limits = dataclasses.replace(
        still.limits, rendered_pixels_at_once=int(pictures_at_once * still.width * still.height)
    )
    return list(still.render(painters))


def test_files_rendered_side_by_side_are_those_rendered_one_at_a_time_in_order(still):
    painters = [CountingPainter(corner) for corner in (0, 60, 120)]

    one_at_a_time = _render(still, 1, painters)
    side_by_side = _render(still, 3, painters)

    assert [file.data for file in side_by_side] == [file.data for file in one_at_a_time]
    assert [file.poster for file in side_by_side] == [file.poster for file in one_at_a_time]
    assert len({file.data for file in side_by_side}) == 3  # each painter's own file, in its place


@pytest.mark.parametrize(("pictures_at_once", "most"), [(2, 2), (1, 1), (0.5, 1)])
def test_no_more_pictures_are_rendered_at_once_than_the_budget_holds(still, pictures_at_once, most):
    """0.5: a picture larger than the budget (a 48 MP photo) is still rendered, alone."""
    files = _render(still, pictures_at_once, [CountingPainter(corner) for corner in (0, 40, 80, 120, 160)])

    assert len(files) == 5
    assert CountingPainter.most == most
