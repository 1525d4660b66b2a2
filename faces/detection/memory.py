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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# A retry comes right after its failed try: a few entries are enough, and bound the memory.
SIZE = 4
# A look is known by a digest of every STRIDE-th pixel of every STRIDE-th row (and the image's shape): frames
# of one clip differ there, and a 4K frame hashes in well under a millisecond.
STRIDE = 4


@dataclass
class Remembered:
    looks: dict = field(default_factory=dict)
    found: list | None = None


class RememberedLooks:
    """An engine whose `analyze` answers from memory what it already answered for this upload."""

    def __init__(self, engine, looks: dict):
        self._engine, self._looks = engine, looks
        self.name = engine.name

    def analyze(self, image: np.ndarray, **options) -> list:
        asked = {name: value for name, value in options.items() if name != "checkpoint"}
        key = (_digest(np.ascontiguousarray(image[::STRIDE, ::STRIDE])), image.shape, tuple(sorted(asked.items())))
        if key not in self._looks:
            self._looks[key] = self._engine.analyze(image, **options)
        return self._looks[key]


_remembered: OrderedDict[tuple, Remembered] = OrderedDict()


def detections_of(photo, data: bytes, engine, detect: Callable[[RememberedLooks], list]) -> list:
    """What `detect(engine)` finds in the upload `data`, from memory when this process already detected this
    photo's upload; `detect` is given the engine with the looks it already took."""
    key = (photo.id, photo.upload_key, engine.name, _digest(np.frombuffer(data, np.uint8)))
    remembered = _remembered.setdefault(key, Remembered())
    _remembered.move_to_end(key)
    while len(_remembered) > SIZE:
        _remembered.popitem(last=False)
    if remembered.found is None:
        remembered.found = detect(RememberedLooks(engine, remembered.looks))
    return remembered.found


def _digest(pixels: np.ndarray) -> bytes:
    return hashlib.blake2b(pixels.data, digest_size=16).digest()
