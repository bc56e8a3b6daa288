"""Writes the training models of docs/memory.md into a folder (default bench/models/):

  resnet_train.onnx       a ResNet-style CNN: stem Conv, three stages of two residual blocks
                          (Conv-Relu-Conv + shortcut, 1x1 Conv where the shape changes),
                          channels 32/64/128 on 32x32 images, GlobalAveragePool, Gemm to 10
                          classes; batch 8, logits [8, 10] (train with cross-entropy:logits:label)
  transformer_train.onnx  bench/make_models.py's transformer encoder block (d=512, 8 heads,
                          ffn 2048, seq 128) with the batch fixed at 8 (train with mse:y:t)
  and for each an input batch: <name>.x.npy, <name>.label.npy

Weights are pseudo-random with a fixed seed.

usage: make_train_models.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models as mm  # noqa: E402

rng = np.random.default_rng(11)
N = 8


def conv(b, x, cin, cout, k, stride):
    w = b.const("w", (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32))
    bias = b.const("b", np.zeros(cout, np.float32))
    return b.op("Conv", [x, w, bias], "conv", kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)


def resnet(path, widths=(32, 64, 128), blocks=2, size=32, classes=10):
    b = mm.Builder()
    x = b.op("Relu", [conv(b, "x", 3, widths[0], 3, 1)], "relu")
    cin = widths[0]
    for si, width in enumerate(widths):
        for i in range(blocks):
            s = 2 if (i == 0 and si > 0) else 1
            y = b.op("Relu", [conv(b, x, cin, width, 3, s)], "relu")
            y = conv(b, y, width, width, 3, 1)
            short = conv(b, x, cin, width, 1, s) if (s != 1 or cin != width) else x
            x = b.op("Relu", [b.op("Add", [y, short], "add")], "relu")
            cin = width
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], "gap")], "flatten")
    w = b.const("fc_w", (rng.standard_normal((classes, cin)) * 0.05).astype(np.float32))
    bias = b.const("fc_b", np.zeros(classes, np.float32))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits"], name="fc", transB=1))
    g = helper.make_graph(b.nodes, "resnet_train",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, 3, size, size])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, classes])], b.inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    d = os.path.dirname(path)
    np.save(os.path.join(d, "resnet_train.x.npy"), rng.standard_normal((N, 3, size, size)).astype(np.float32))
    np.save(os.path.join(d, "resnet_train.label.npy"), rng.integers(0, classes, N).astype(np.int64))


def transformer(path):
    mm.transformer(path)
    m = onnx.load(path)
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[0].ClearField("dim_param")
        vi.type.tensor_type.shape.dim[0].dim_value = N
    onnx.save(m, path)
    d = os.path.dirname(path)
    np.save(os.path.join(d, "transformer_train.x.npy"), rng.standard_normal((N, 128, 512)).astype(np.float32))
    np.save(os.path.join(d, "transformer_train.t.npy"), rng.standard_normal((N, 128, 512)).astype(np.float32))


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out, exist_ok=True)
    resnet(os.path.join(out, "resnet_train.onnx"))
    transformer(os.path.join(out, "transformer_train.onnx"))
    print("wrote", out)
