"""The last detections of this process, so that a try run again does not detect again.

A try that fails after detecting rolls its face rows back with everything else, and the
retry (same message, same process, seconds later) would run the detector again: 1.8 s
for a 12 MP photo (docs/MEASUREMENTS.md, "Pipeline cost"), about 10 s for 48 MP (the whole
job: "The privacy lane" there), minutes for a long clip. A try stopped half-way for
privacy work (jobqueue/preemption.py) would start its detection over. So this process
remembers, per upload (keyed by the photo, its upload key, the engine and a digest of the
upload's bytes, so a replaced upload is detected afresh):

- what the whole detection found, once it finished: a retry reuses it;
- every look of the engine on the way (a clip's frames and changed places: `RememberedLooks`):
  a try run again after a preemption replays its frames and runs the detector only where it had
  not looked yet.

Only this process remembers: a retry in another process, or after a restart, detects again.
"""

import hashlib
from collections import OrderedDict

import numpy as np

# A retry comes right after its failed try: a few entries are enough, and bound the memory.
SIZE = 4
# A look is known by a digest of every STRIDE-th pixel of every STRIDE-th row (and the image's shape): frames
# of one clip differ there, and a 4K frame hashes in well under a millisecond.
STRIDE = 4


class RememberedLooks:
    """An engine whose `analyze` answers from memory what it already answered for this upload; `found` is
    what the whole detection found, once it finished (None until then)."""

    def __init__(self, engine):
        self._engine, self._looks = engine, {}
        self.name = engine.name
        self.found: list | None = None

    def analyze(self, image: np.ndarray, **options) -> list:
        asked = {name: value for name, value in options.items() if name != "checkpoint"}
        key = (_digest(np.ascontiguousarray(image[::STRIDE, ::STRIDE])), image.shape, tuple(sorted(asked.items())))
        if key not in self._looks:
            self._looks[key] = self._engine.analyze(image, **options)
        return self._looks[key]


_remembered: OrderedDict[tuple, RememberedLooks] = OrderedDict()


def remembered_looks(photo, data: bytes, engine) -> RememberedLooks:
    """`engine` with this process's memory of the photo's upload `data`: the looks it already took, and what
    the whole detection found if it finished."""
    key = (photo.id, photo.upload_key, engine.name, _digest(np.frombuffer(data, np.uint8)))
    looks = _remembered.setdefault(key, RememberedLooks(engine))
    _remembered.move_to_end(key)
    while len(_remembered) > SIZE:
        _remembered.popitem(last=False)
    return looks


def _digest(pixels: np.ndarray) -> bytes:
    return hashlib.blake2b(pixels.data, digest_size=16).digest()
