"""Writes the example models (run once by a developer; the outputs are committed).

tiny_cnn.onnx: Conv-Relu-MaxPool-Conv-Relu-GlobalAveragePool-Flatten-Gemm-Softmax over a
1x3x32x32 image with a symbolic batch, fixed pseudo-random weights, and one input image.
"""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261122)

def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

inits = [w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8), w("conv2.w", 16, 8, 3, 3), w("conv2.b", 16),
         w("fc.w", 10, 16), w("fc.b", 10)]
nodes = [
    helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
    helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
    helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
]
graph = helper.make_graph(
    nodes, "tiny_cnn",
    [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 32, 32])],
    [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tbc-examples")
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
onnx.save(model, os.path.join(here, "tiny_cnn.onnx"))
np.save(os.path.join(here, "tiny_cnn.image.npy"), rng.random((2, 3, 32, 32), dtype=np.float32))
print("wrote tiny_cnn.onnx and tiny_cnn.image.npy")
