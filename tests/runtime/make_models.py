"""Writes the ONNX models tests/unit/test_runtime_compiled.c compiles and runs
through libtbcrt.  Run with a Python that has onnx and numpy:
    python tests/runtime/make_models.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def dense_relu():
    # y = Relu(x * W + b), x [N, 64] with a symbolic batch; W and b [64] are
    # weights (elementwise, so it compiles with the first codegen slice).
    rng = np.random.RandomState(3)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (64,)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.uniform(-1, 1, (64,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("Mul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "dense_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tbc-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "dense_relu.onnx"))


if __name__ == "__main__":
    dense_relu()
