"""SCRFD detector passes: each input resized to its detector size and padded, run alone or in batches.

A pass pads its input to the stride (32) by default. With shape buckets it pads to the smallest of a
fixed set of shapes that holds it instead, so a session sees only those shapes: the CUDA provider spends
1.5-3 s of cuDNN search on every input shape new to it and 5 ms on a known one, and a photo's tiles,
overview, edge pass and second looks would otherwise each bring new shapes (docs/ARCHITECTURE.md §6,
"On a GPU"). Padding is the detector's own black border either way, so a face finds the same
detections, within the padding's effect on the anchors at the content's edge. Same-shape inputs of one
image (a level's tiles, the second looks) may run as one batch: SCRFD's exports take a batch dimension.

A session of the CUDA provider keeps the set-up of the shape it ran last only, so each bucket gets a
session of its own (`new_session`), all built and run once at `warm_up()`.

`Passes(scrfd, buckets=..., batch=..., new_session=...)`; `run_many([(image, out_w, out_h), ...], threshold)`
returns each input's (boxes, keypoints, scores) in detector pixels, every anchor over the threshold (the pyramid
runs the detector's own NMS on them, faces/engines/pyramid.py);
`warm_up()` runs every bucket once, at every batch size a run can take, so that no job pays for a shape.
"""

import itertools

import cv2
import numpy as np

STRIDE = 32
Shape = tuple[int, int]  # (width, height) of a detector input
Detections = tuple[np.ndarray, np.ndarray, np.ndarray]  # boxes (n, 4), keypoints (n, 5, 2), scores (n,)


class Passes:
    def __init__(self, scrfd, *, buckets: tuple[Shape, ...] = (), batch: int = 1, new_session=None):
        """`new_session()`: a session of the detector's model like scrfd.session, one per bucket (None: the
        buckets share scrfd's)."""
        self.scrfd = scrfd
        self.buckets = tuple(sorted(buckets, key=lambda shape: shape[0] * shape[1]))
        # An export without a batch dimension (insightface's `batched` is False) runs one input at a time.
        self.batch = batch if getattr(scrfd, "batched", False) else 1
        self._sessions = {shape: new_session() for shape in self.buckets} if new_session else {}
        self._centers: dict = {}

    def input_shape(self, out_w: int, out_h: int) -> Shape:
        """The shape a pass of out_w x out_h runs at: the stride's multiple, or the smallest bucket holding it."""
        if not self.buckets:
            return -(-out_w // STRIDE) * STRIDE, -(-out_h // STRIDE) * STRIDE
        if (bucket := self._bucket_for(out_w, out_h)) is None:
            raise ValueError(f"a {out_w}x{out_h} pass fits no shape bucket: the plan must tile it")
        return bucket

    def fits(self, out_w: int, out_h: int) -> bool:
        """Whether one pass can take out_w x out_h (always, without buckets)."""
        return not self.buckets or self._bucket_for(out_w, out_h) is not None

    def _bucket_for(self, out_w: int, out_h: int) -> Shape | None:
        return next(((width, height) for width, height in self.buckets if width >= out_w and height >= out_h), None)

    def run_many(self, inputs: list[tuple[np.ndarray, int, int]], threshold: float) -> list[Detections]:
        """Each input's detections; inputs of one shape go through the session `batch` at a time."""
        results: list[Detections | None] = [None] * len(inputs)
        by_shape: dict[Shape, list[int]] = {}
        for index, (_, out_w, out_h) in enumerate(inputs):
            by_shape.setdefault(self.input_shape(out_w, out_h), []).append(index)
        for (in_w, in_h), indices in by_shape.items():
            for group in itertools.batched(indices, self.batch):
                blobs = [self._blob(*inputs[i], in_w, in_h) for i in group]
                if self.buckets and 1 < len(blobs) < self.batch:  # a batch size the warm-up ran: the full one
                    blobs += [np.zeros_like(blobs[0])] * (self.batch - len(blobs))
                blob = np.concatenate(blobs)
                session = self._sessions.get((in_w, in_h), self.scrfd.session)
                outputs = session.run(self.scrfd.output_names, {self.scrfd.input_name: blob})
                for position, index in enumerate(group):
                    results[index] = self._decode(_one_of(outputs, position), in_w, in_h, threshold)
        return results

    def warm_up(self) -> list[Shape]:
        """Every bucket, at batch 1 and at the full batch: the shapes (with their batch sizes) a job runs."""
        for (width, height), size in itertools.product(self.buckets, sorted({1, self.batch})):
            blank = np.zeros((height, width, 3), np.uint8)
            self.run_many([(blank, width, height)] * size, 1.0)
        return list(self.buckets)

    def _blob(self, image: np.ndarray, out_w: int, out_h: int, in_w: int, in_h: int) -> np.ndarray:
        """The detector's input: `image` resized to out_w x out_h, RGB, (x - mean) / std, NCHW, padded with
        black's value to in_w x in_h. The same numbers as OpenCV's blobFromImage, which resizes the same
        way (bilinear, on the 8-bit image); written into one array here, as it is ~25 % cheaper on a tile."""
        mean, std = self.scrfd.input_mean, self.scrfd.input_std
        if image.shape[1] != out_w or image.shape[0] != out_h:
            image = cv2.resize(image, (out_w, out_h), interpolation=cv2.INTER_LINEAR)
        blob = np.empty((1, 3, in_h, in_w), np.float32)
        blob[:, :, out_h:, :] = blob[:, :, :, out_w:] = -mean / std
        inside = blob[0, :, :out_h, :out_w]
        for channel, plane in enumerate(cv2.split(image)[::-1]):  # BGR -> RGB
            inside[channel] = plane
        inside -= mean
        inside *= 1.0 / std
        return blob

    def _decode(self, outputs, in_w: int, in_h: int, threshold: float) -> Detections:
        from insightface.model_zoo.scrfd import distance2bbox, distance2kps

        scrfd = self.scrfd
        fmc = scrfd.fmc
        boxes, points, scores = [], [], []
        for index, stride in enumerate(scrfd._feat_stride_fpn):
            level_scores = outputs[index].reshape(-1)
            hits = np.flatnonzero(level_scores >= threshold)
            if not len(hits):
                continue
            centers = self._anchor_centers(in_h // stride, in_w // stride, stride, scrfd._num_anchors)[hits]
            box_pred = outputs[index + fmc].reshape(-1, 4)[hits] * stride
            kps_pred = outputs[index + 2 * fmc].reshape(-1, 10)[hits] * stride
            boxes.append(distance2bbox(centers, box_pred))
            points.append(distance2kps(centers, kps_pred).reshape(-1, 5, 2))
            scores.append(level_scores[hits])
        if not scores:
            return np.zeros((0, 4), np.float32), np.zeros((0, 5, 2), np.float32), np.zeros(0, np.float32)
        return np.concatenate(boxes), np.concatenate(points), np.concatenate(scores)

    def _anchor_centers(self, rows: int, cols: int, stride: int, anchors: int) -> np.ndarray:
        key = (rows, cols, stride, anchors)
        centers = self._centers.get(key)
        if centers is None:
            # insightface's layout: row-major (x, y) * stride, each repeated per anchor.
            grid = np.stack(np.mgrid[:rows, :cols][::-1], axis=-1).astype(np.float32)
            centers = np.repeat((grid * stride).reshape(-1, 2), anchors, axis=0)
            if len(self._centers) < 64:
                self._centers[key] = centers
        return centers


def _one_of(outputs: list[np.ndarray], position: int) -> list[np.ndarray]:
    """One input's outputs of a run: (batch, anchors, k) from an export with a batch dimension, (anchors, k)
    from one without (which only ever runs one input)."""
    if outputs[0].ndim == 2:
        return outputs
    return [output[position] for output in outputs]
