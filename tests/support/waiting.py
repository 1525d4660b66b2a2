"""Waiting for something another thread or process does: one poll loop for every test."""

import time


def poll(predicate, timeout: float, interval: float = 0.05):
    """`predicate()`'s first truthy value within `timeout` seconds (asked every `interval`), else its last one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    """`predicate()`'s first truthy value within `timeout` seconds; the test fails if none comes."""
    value = poll(predicate, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout}s waiting for {predicate.__name__}")
    return value
