"""The recogniser's graph as onnxruntime's CPU provider runs it fastest, computing the same numbers.

ArcFace recognisers put a PRelu after nearly every convolution (buffalo_s's MobileFaceNet has 34; buffalo_l's
ResNet-50 its own), and onnxruntime's CPU PRelu is a slow element-by-element broadcast. Where every slope of a PRelu
is at most 1, PRelu(x) = max(x, slope * x) exactly: for x >= 0 the larger is x, below 0 it is slope * x, and each is
the very product PRelu takes. Mul and Max are fast there, so the rewritten graph gives the same features bit for bit
in 0.63-0.71x the time on one thread (`python bench/recogniser_graph.py`, docs/MEASUREMENTS.md "The recogniser's
PRelu"). A PRelu with a slope above 1 (where the identity fails) or one not fixed in the file is left as it is.
"""

import onnx
from onnx import helper, numpy_helper


def with_prelu_as_max(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each PRelu whose slopes are fixed and at most 1 replaced by Mul and Max (in place)."""
    slopes = {tensor.name: tensor for tensor in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "PRelu" and _at_most_one(slopes.get(node.input[1])):
            scaled = f"{node.output[0]}/slope_times_x"
            nodes.append(helper.make_node("Mul", [node.input[0], node.input[1]], [scaled]))
            nodes.append(helper.make_node("Max", [node.input[0], scaled], list(node.output)))
        else:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def prelu_count(model: onnx.ModelProto) -> int:
    return sum(node.op_type == "PRelu" for node in model.graph.node)


def _at_most_one(slope) -> bool:
    return slope is not None and bool((numpy_helper.to_array(slope) <= 1.0).all())
