"""Writes benchmark models into a folder (default bench/models/, git-ignored):

  resnet50.onnx      ResNet-50 v1.5 (torchvision layout), 224x224, symbolic batch, random weights
  transformer.onnx   one pre-norm transformer encoder block (d=512, 8 heads, ffn 2048, seq 128)

Weights are pseudo-random with a fixed seed: the benchmarks measure speed and compare outputs
with onnxruntime, so trained weights are not needed.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base, arr):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, base=None, **attrs):
        out = self.name(base or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out


def conv_bn_relu(b, x, cin, cout, k, stride, relu=True):
    fan_in = cin * k * k
    w = b.const("w", (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32))
    y = b.op("Conv", [x, w], "conv", kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
    scale = b.const("bn_scale", (rng.random(cout) * 0.5 + 0.5).astype(np.float32))
    bias = b.const("bn_bias", (rng.standard_normal(cout) * 0.1).astype(np.float32))
    mean = b.const("bn_mean", (rng.standard_normal(cout) * 0.1).astype(np.float32))
    var = b.const("bn_var", (rng.random(cout) + 0.5).astype(np.float32))
    y = b.op("BatchNormalization", [y, scale, bias, mean, var], "bn", epsilon=1e-5)
    return b.op("Relu", [y], "relu") if relu else y


def resnet50(path):
    b = Builder()
    x = conv_bn_relu(b, "image", 3, 64, 7, 2)
    x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = conv_bn_relu(b, x, cin, width, 1, 1)
            y = conv_bn_relu(b, y, width, width, 3, s)
            y = conv_bn_relu(b, y, width, width * 4, 1, 1, relu=False)
            short = conv_bn_relu(b, x, cin, width * 4, 1, s, relu=False) if i == 0 else x
            x = b.op("Relu", [b.op("Add", [y, short], "add")], "relu")
            cin = width * 4
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Flatten", [x], "flatten")
    w = b.const("fc_w", (rng.standard_normal((1000, 2048)) * 0.01).astype(np.float32))
    bias = b.const("fc_b", np.zeros(1000, np.float32))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(b.nodes, "resnet50",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1000])], b.inits)
    save(graph, path)


def transformer(path, d=512, heads=8, ffn=2048, seq=128):
    b = Builder()
    hd = d // heads

    def lin(x, i, o):
        w = b.const("w", (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32))
        bias = b.const("b", (rng.standard_normal(o) * 0.02).astype(np.float32))
        return b.op("Add", [b.op("MatMul", [x, w], "matmul"), bias], "bias")

    def layernorm(x):
        g = b.const("ln_g", np.ones(d, np.float32))
        beta = b.const("ln_b", np.zeros(d, np.float32))
        return b.op("LayerNormalization", [x, g, beta], "ln", axis=-1, epsilon=1e-5)

    def heads_first(x):
        shape = b.const("shape", np.array([0, seq, heads, hd], np.int64))
        return b.op("Transpose", [b.op("Reshape", [x, shape], "reshape")], "transpose", perm=[0, 2, 1, 3])

    h = layernorm("x")
    q, k, v = (heads_first(lin(h, d, d)) for _ in range(3))
    kt = b.op("Transpose", [k], "transpose", perm=[0, 1, 3, 2])
    scores = b.op("Mul", [b.op("MatMul", [q, kt], "matmul"), b.const("scale", np.float32(1 / np.sqrt(hd)))], "scale")
    probs = b.op("Softmax", [scores], "softmax", axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v], "matmul")], "transpose", perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.const("shape", np.array([0, seq, d], np.int64))], "reshape")
    x1 = b.op("Add", ["x", lin(ctx, d, d)], "residual")
    h2 = layernorm(x1)
    f = b.op("Gelu", [lin(h2, d, ffn)], "gelu")
    b.nodes.append(helper.make_node("Add", [x1, lin(f, ffn, d)], ["y"], name="residual_out"))
    graph = helper.make_graph(b.nodes, "transformer_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", seq, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", seq, d])], b.inits)
    save(graph, path)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="tbc-bench")
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, path)
    print("wrote", path)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out, exist_ok=True)
    resnet50(os.path.join(out, "resnet50.onnx"))
    transformer(os.path.join(out, "transformer.onnx"))
    np.save(os.path.join(out, "resnet50.image.npy"), rng.random((1, 3, 224, 224), dtype=np.float32))
    np.save(os.path.join(out, "transformer.x.npy"), rng.standard_normal((1, 128, 512)).astype(np.float32))
