"""The try's checkpoint: the one type every long stage of the face path takes (a detector's tiles, a clip's
frames, a render's frames, the uploads).

It is called between units of work and raises to stop the try: a try whose session the server closed, or one
stopped for privacy work (jobqueue/context.py, `JobContext.checkpoint`). Work outside a try (the reference
path, benches, measurement) passes `never_stop`.
"""

from collections.abc import Callable

Checkpoint = Callable[[], None]


def never_stop() -> None:
    """The checkpoint of work outside a try: nothing stops it."""
