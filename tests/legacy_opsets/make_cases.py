#!/usr/bin/env python3
"""Generates test cases for the older opset forms frontend/canon.c rewrites
(attributes that later became inputs, changed defaults, retired ops), in the
ONNX node-test layout (CASE/model.onnx, CASE/test_data_set_0/{input,output}_N.pb)
so tbc-conformance runs them:

    python3 tests/legacy_opsets/make_cases.py
    build/tests/conformance/tbc-conformance --cases tests/legacy_opsets

Expected outputs come from onnxruntime (opset 7 and later) or onnx's
reference evaluator (older opsets, which onnxruntime no longer loads).  The
generated folders are checked in.
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
F = TensorProto.FLOAT


def case(name, opset, nodes, inputs, outputs, feeds, ir=None, expected=None):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, dt, s) for n, dt, s in inputs],
                          [helper.make_tensor_value_info(n, dt, None) for n, dt in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir or (3 if opset < 7 else 4 if opset < 10 else 6 if opset < 13 else 7)
    feed = {n: feeds[i] for i, (n, _, _) in enumerate(inputs)}
    if expected is not None:  # neither runtime implements this version
        results = expected
    elif opset >= 7:
        sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        results = sess.run(None, feed)
    else:
        results = ReferenceEvaluator(m).run(None, feed)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    for i, ((n, _, _), v) in enumerate(zip(inputs, feeds)):
        onnx.save_tensor(numpy_helper.from_array(v, n), os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
    for i, ((n, _), v) in enumerate(zip(outputs, results)):
        onnx.save_tensor(numpy_helper.from_array(np.asarray(v), n),
                         os.path.join(d, "test_data_set_0", f"output_{i}.pb"))


def x(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def main():
    x234 = x(2, 3, 4)
    n = helper.make_node
    for op in ["ReduceMean", "ReduceMax", "ReduceSum", "ReduceL2", "ReduceLogSumExp", "ReduceProd"]:
        case(f"test_legacy_{op.lower()}_axes_attr_opset11", 11, [n(op, ["x"], ["y"], axes=[0, 2], keepdims=0)],
             [("x", F, (2, 3, 4))], [("y", F)], [x234])
    case("test_legacy_reducemean_axes_attr_opset17", 17, [n("ReduceMean", ["x"], ["y"], axes=[-1])],
         [("x", F, (2, 3, 4))], [("y", F)], [x234])
    case("test_legacy_reducesum_no_axes_opset11", 11, [n("ReduceSum", ["x"], ["y"])], [("x", F, (2, 3, 4))],
         [("y", F)], [x234])
    case("test_legacy_squeeze_axes_attr_opset11", 11, [n("Squeeze", ["x"], ["y"], axes=[1])],
         [("x", F, (2, 1, 4))], [("y", F)], [x(2, 1, 4)])
    case("test_legacy_unsqueeze_axes_attr_opset11", 11, [n("Unsqueeze", ["x"], ["y"], axes=[0, 3])],
         [("x", F, (2, 4))], [("y", F)], [x(2, 4)])
    case("test_legacy_split_attr_opset11", 11, [n("Split", ["x"], ["a", "b"], axis=2, split=[1, 3])],
         [("x", F, (2, 3, 4))], [("a", F), ("b", F)], [x234])
    case("test_legacy_split_equal_opset13", 13, [n("Split", ["x"], ["a", "b"], axis=2)],
         [("x", F, (2, 3, 4))], [("a", F), ("b", F)], [x234])
    case("test_legacy_slice_attrs_opset9", 9, [n("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1], axes=[2, 0])],
         [("x", F, (2, 3, 4))], [("y", F)], [x234])
    case("test_legacy_pad_attrs_opset10", 10, [n("Pad", ["x"], ["y"], pads=[0, 1, 2, 0, 0, 1], value=1.5)],
         [("x", F, (2, 3, 4))], [("y", F)], [x234])
    case("test_legacy_pad_reflect_opset2", 2, [n("Pad", ["x"], ["y"], pads=[0, 2, 0, 1], mode="reflect")],
         [("x", F, (3, 4))], [("y", F)], [x(3, 4)])
    case("test_legacy_clip_attrs_opset6", 6, [n("Clip", ["x"], ["y"], min=-0.5, max=0.25)],
         [("x", F, (2, 3, 4))], [("y", F)], [x234])
    case("test_legacy_clip_min_only_opset6", 6, [n("Clip", ["x"], ["y"], min=0.0)],
         [("x", F, (2, 3, 4))], [("y", F)], [x234])
    case("test_legacy_topk_k_attr_opset1", 1, [n("TopK", ["x"], ["v", "i"], k=2)],
         [("x", F, (3, 4))], [("v", F), ("i", TensorProto.INT64)], [x(3, 4)], ir=3)
    case("test_legacy_dropout_ratio_attr_opset10", 10, [n("Dropout", ["x"], ["y"], ratio=0.3)],
         [("x", F, (2, 3))], [("y", F)], [x(2, 3)])
    for op in ["Softmax", "LogSoftmax", "Hardmax"]:
        case(f"test_legacy_{op.lower()}_axis1_opset11", 11, [n(op, ["x"], ["y"])], [("x", F, (2, 3, 4))],
             [("y", F)], [x234])
    case("test_legacy_softmax_axis0_opset11", 11, [n("Softmax", ["x"], ["y"], axis=0)], [("x", F, (2, 3))],
         [("y", F)], [x(2, 3)])
    case("test_legacy_resize_opset10", 10, [n("Resize", ["x", "s"], ["y"], mode="nearest")],
         [("x", F, (1, 1, 2, 3)), ("s", F, (4,))], [("y", F)],
         [x(1, 1, 2, 3), np.array([1, 1, 2.5, 1.5], np.float32)])
    case("test_legacy_upsample_attr_opset7", 7, [n("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])],
         [("x", F, (1, 1, 2, 2))], [("y", F)], [x(1, 1, 2, 2)])
    case("test_legacy_batchnorm_opset7", 7, [n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
         [("x", F, (2, 3, 4)), ("s", F, (3,)), ("b", F, (3,)), ("m", F, (3,)), ("v", F, (3,))], [("y", F)],
         [x234, x(3), x(3), x(3), np.abs(x(3)) + 0.5])
    case("test_legacy_reshape_shape_attr_opset4", 4, [n("Reshape", ["x"], ["y"], shape=[4, 6])],
         [("x", F, (2, 3, 4))], [("y", F)], [x234], ir=3, expected=[x234.reshape(4, 6)])
    case("test_legacy_scatter_opset10", 10, [n("Scatter", ["x", "i", "u"], ["y"], axis=1)],
         [("x", F, (2, 3)), ("i", TensorProto.INT64, (2, 1)), ("u", F, (2, 1))], [("y", F)],
         [x(2, 3), np.array([[2], [0]], np.int64), x(2, 1)])
    b3 = x(3)
    case("test_legacy_add_broadcast_axis_opset6", 6, [n("Add", ["a", "b"], ["y"], broadcast=1, axis=1)],
         [("a", F, (2, 3, 4)), ("b", F, (3,))], [("y", F)], [x234, b3], ir=3,
         expected=[x234 + b3.reshape(3, 1)])
    case("test_legacy_groupnorm_opset18", 18,
         [n("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5)],
         [("x", F, (2, 4, 3)), ("s", F, (2,)), ("b", F, (2,))], [("y", F)], [x(2, 4, 3), x(2), x(2)])
    grid = (rng.random((1, 3, 2, 2)) * 2 - 1).astype(np.float32)
    for mode in ["bilinear", "bicubic"]:
        case(f"test_legacy_gridsample_{mode}_opset16", 16, [n("GridSample", ["x", "g"], ["y"], mode=mode)],
             [("x", F, (1, 1, 3, 4)), ("g", F, (1, 3, 2, 2))], [("y", F)], [x(1, 1, 3, 4), grid])
    # PRelu before opset 7 (Caffe2-era exporters): a slope of shape [C]
    # applies along axis 1 of X, not numpy's trailing axis.
    def prelu(v, slope):
        return np.where(v > 0, v, v * slope).astype(np.float32)
    x2345, s3 = x(2, 3, 4, 5), x(3)
    case("test_legacy_prelu_channel_slope_opset6", 6, [n("PRelu", ["x", "slope"], ["y"])],
         [("x", F, (2, 3, 4, 5)), ("slope", F, (3,))], [("y", F)], [x2345, s3], ir=3,
         expected=[prelu(x2345, s3.reshape(3, 1, 1))])
    x35, s5 = x(3, 5), x(5)
    case("test_legacy_prelu_channel_slope_2d_opset6", 6, [n("PRelu", ["x", "slope"], ["y"])],
         [("x", F, (3, 5)), ("slope", F, (5,))], [("y", F)], [x35, s5], ir=3, expected=[prelu(x35, s5)])
    x234b, s1 = x(2, 3, 4), x(1)
    case("test_legacy_prelu_shared_slope_opset1", 1, [n("PRelu", ["x", "slope"], ["y"])],
         [("x", F, (2, 3, 4)), ("slope", F, (1,))], [("y", F)], [x234b, s1], ir=3,
         expected=[prelu(x234b, s1)])


if __name__ == "__main__":
    main()
