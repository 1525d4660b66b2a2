"""The last detections of this process, so that a retry of the same job does not detect again.

A try that fails after detecting rolls its face rows back with everything else, and the
retry (same message, same process, seconds later) would run the detector again: 9 s
for a 12 MP photo. The retry reuses what the failed try found instead, keyed by the
photo, its upload key, the engine and a digest of the decoded pixels (a clip's: of the
upload's bytes), so a replaced upload is detected afresh. Only this process remembers: a retry in another process,
or after a restart, detects again.
"""

import hashlib
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

# A retry comes right after its failed try: a few entries are enough, and bound the memory.
SIZE = 4

_remembered: OrderedDict[tuple, list] = OrderedDict()


def detections_of(photo, image: np.ndarray, engine_name: str, detect: Callable[[], list]) -> list:
    """What `detect()` finds in `image`, from memory when this process already detected this photo's upload."""
    key = (photo.id, photo.upload_key, engine_name, hashlib.blake2b(image.data, digest_size=16).digest())
    if key in _remembered:
        _remembered.move_to_end(key)
        return _remembered[key]
    found = detect()
    _remembered[key] = found
    if len(_remembered) > SIZE:
        _remembered.popitem(last=False)
    return found
