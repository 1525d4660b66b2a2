"""faces.media.read_ahead: a clip's frames produced on a thread of their own, ahead of the detector."""

import threading

import pytest

from faces.media.read_ahead import read_ahead


def _threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name == "read-ahead"]


def _numbers(count: int, makers: list[str]):
    """0 to count - 1, each noting in `makers` the thread that made it."""
    for number in range(count):
        makers.append(threading.current_thread().name)
        yield number


def test_items_come_in_order_and_are_made_off_the_takers_thread():
    makers = []
    assert list(read_ahead(_numbers(50, makers), 3)) == list(range(50))
    assert set(makers) == {"read-ahead"}
    assert not _threads()


def test_the_streams_error_is_raised_in_its_place():
    def items():
        yield from (1, 2)
        raise ValueError("the video breaks off")

    stream = read_ahead(items(), 4)
    assert [next(stream), next(stream)] == [1, 2]
    with pytest.raises(ValueError, match="breaks off"):
        next(stream)
    assert not _threads()


def test_taking_no_more_stops_the_thread_and_closes_the_stream():
    closed = threading.Event()

    def items():
        try:
            number = 0
            while True:
                yield number
                number += 1
        finally:
            closed.set()

    stream = read_ahead(items(), 2)
    assert [next(stream) for _ in range(5)] == [0, 1, 2, 3, 4]
    stream.close()

    assert closed.is_set()
    assert not _threads()


def test_the_takers_own_error_stops_the_thread():
    def items():
        yield from range(1000)

    def take_until_stopped():
        for number in read_ahead(items(), 2):
            if number == 3:
                raise RuntimeError("stopped for privacy work")

    with pytest.raises(RuntimeError, match="stopped for privacy work"):
        take_until_stopped()
    assert not _threads()


def test_no_depth_reads_on_the_takers_thread():
    makers = []
    assert list(read_ahead(_numbers(5, makers), 0)) == list(range(5))
    assert set(makers) == {threading.current_thread().name}
