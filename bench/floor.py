"""Not a script: the floor of a job, what a re-encoding privacy worker with this detector cannot do without.

A still: decode the upload, one SCRFD-500M pass over the picture at 1x in 640x640 tiles (no overlap, no other
level, no second look, no embedding), encode the JPEG. A clip: every frame decoded, one such pass five times a
second (faces.tracks.Tracking.look_interval_s), every frame encoded once with x264 "veryfast". One onnxruntime thread,
buffalo_s's detector on a session of its own, measured in the bench's own process beside the worker's jobs, so a
job's cost reads as a multiple of its floor (bench/job_cost.py).
"""

import io
import time

import av
import cv2
import numpy as np

FLOOR_TILE = 640
# The floor's encoder: x264 "veryfast" at the worker's CRF, whatever the worker's own options are.
FLOOR_X264 = {"preset": "veryfast", "crf": "20"}


def detector_passes():
    """buffalo_s's SCRFD-500M on a one-thread session of its own, as faces/engines/pyramid.py's Passes run it."""
    import onnxruntime
    from django.conf import settings
    from insightface.model_zoo.scrfd import SCRFD

    from faces.engines.packs import pack_folder, pack_named
    from faces.engines.pyramid import Passes

    pack = pack_named("buffalo_s")
    detector_file = str(pack.files(pack_folder(pack, settings.FACE_MODEL_ROOT))[0])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(detector_file, options, providers=["CPUExecutionProvider"])
    return Passes(SCRFD(model_file=detector_file, session=session, static_shape_sessions=False))


def one_pass(passes, image: np.ndarray) -> None:
    """The picture at 1x, in FLOOR_TILE tiles (the last row and column smaller), each through the detector."""
    height, width = image.shape[:2]
    for top in range(0, height, FLOOR_TILE):
        for left in range(0, width, FLOOR_TILE):
            tile = image[top : top + FLOOR_TILE, left : left + FLOOR_TILE]
            passes.run_many([(tile, tile.shape[1], tile.shape[0])], 0.5)


def still_floor(upload: bytes, passes) -> float:
    """Seconds: decode, one pass, encode."""
    from faces.media.upload import encode_jpeg

    began = time.perf_counter()
    image = cv2.imdecode(np.frombuffer(upload, np.uint8), cv2.IMREAD_COLOR)
    one_pass(passes, image)
    encode_jpeg(image)
    return time.perf_counter() - began


def clip_floor(upload: bytes, passes) -> float:
    """Seconds: every frame decoded, a pass on a frame every look interval (the worker's), every frame encoded once."""
    from faces.tracks import TRACKING

    began = time.perf_counter()
    next_look = 0.0
    with av.open(io.BytesIO(upload)) as source, av.open(io.BytesIO(), "w", format="mp4") as output:
        video_in = source.streams.video[0]
        stream = output.add_stream("libx264", rate=video_in.average_rate, options=FLOOR_X264)
        stream.width, stream.height, stream.pix_fmt = video_in.width, video_in.height, "yuv420p"
        for index, frame in enumerate(source.decode(video_in)):
            when = float(frame.time) if frame.time is not None else index / float(video_in.average_rate)
            if when >= next_look - 1e-6:
                one_pass(passes, frame.to_ndarray(format="bgr24"))
                next_look = when + TRACKING.look_interval_s
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    return time.perf_counter() - began
