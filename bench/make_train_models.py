"""Writes the training models of docs/memory.md into a folder (default bench/models/):

  resnet_train.onnx       a ResNet-style CNN: stem Conv, three stages of two residual blocks
                          (Conv-Relu-Conv + shortcut, 1x1 Conv where the shape changes),
                          channels 32/64/128 on 32x32 images, GlobalAveragePool, Gemm to 10
                          classes; batch 8, logits [8, 10] (train with cross-entropy:logits:label)
  transformer_train.onnx  bench/make_models.py's transformer encoder block (d=512, 8 heads,
                          ffn 2048, seq 128) with the batch fixed at 8 (train with mse:y:t)
  encoder4_train.onnx     four such blocks stacked, smaller (d=256, 4 heads, ffn 1024, seq 128),
                          batch 8 (train with mse:y:t): the depth sqrt(n) checkpointing is about
  dropout_train.onnx      an MLP 256 -> 512 -> 256 with Dropout in training mode after each layer
                          (ratio 0.2 with a seed, 0.1 without), batch 32 (train with mse:y:t):
                          every step draws new masks (docs/training.md)
  and for each an input batch: <name>.x.npy and <name>.label.npy or <name>.t.npy

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


def encoder_stack(path, layers=4, d=256, heads=4, ffn=1024, seq=128):
    b = mm.Builder()
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

    x = "x"
    for layer in range(layers):
        h = layernorm(x)
        q, k, v = (heads_first(lin(h, d, d)) for _ in range(3))
        kt = b.op("Transpose", [k], "transpose", perm=[0, 1, 3, 2])
        scores = b.op("Mul", [b.op("MatMul", [q, kt], "matmul"), b.const("scale", np.float32(1 / np.sqrt(hd)))],
                      "scale")
        probs = b.op("Softmax", [scores], "softmax", axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v], "matmul")], "transpose", perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, b.const("shape", np.array([0, seq, d], np.int64))], "reshape")
        x1 = b.op("Add", [x, lin(ctx, d, d)], "residual")
        f = b.op("Gelu", [lin(layernorm(x1), d, ffn)], "gelu")
        x = b.op("Add", [x1, lin(f, ffn, d)], "residual")
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    g = helper.make_graph(b.nodes, "encoder_stack",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, seq, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, seq, d])], b.inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), path)
    dd = os.path.dirname(path)
    np.save(os.path.join(dd, "encoder4_train.x.npy"), rng.standard_normal((N, seq, d)).astype(np.float32))
    np.save(os.path.join(dd, "encoder4_train.t.npy"), rng.standard_normal((N, seq, d)).astype(np.float32))


def dropout_mlp(path, n=32, d=256, h=512):
    r = np.random.default_rng(13)  # its own stream: the other models' weights stay as they were
    W = {"w1": r.standard_normal((d, h)) / np.sqrt(d), "b1": np.zeros(h), "w2": r.standard_normal((h, d)) / np.sqrt(h),
         "b2": np.zeros(d)}
    inits = [helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.astype(np.float32).ravel()) for k, v in W.items()]
    inits += [helper.make_tensor("r1", TensorProto.FLOAT, [], [0.2]), helper.make_tensor("r2", TensorProto.FLOAT, [], [0.1]),
              helper.make_tensor("training", TensorProto.BOOL, [], [True])]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Dropout", ["r", "r1", "training"], ["d"], name="drop1", seed=3),
             helper.make_node("Gemm", ["d", "w2", "b2"], ["o"], name="fc2"),
             helper.make_node("Dropout", ["o", "r2", "training"], ["y"], name="drop2")]
    g = helper.make_graph(nodes, "dropout_train", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, d])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    dd = os.path.dirname(path)
    np.save(os.path.join(dd, "dropout_train.x.npy"), r.standard_normal((n, d)).astype(np.float32))
    np.save(os.path.join(dd, "dropout_train.t.npy"), r.standard_normal((n, d)).astype(np.float32))


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out, exist_ok=True)
    resnet(os.path.join(out, "resnet_train.onnx"))
    transformer(os.path.join(out, "transformer_train.onnx"))
    encoder_stack(os.path.join(out, "encoder4_train.onnx"))
    dropout_mlp(os.path.join(out, "dropout_train.onnx"))
    print("wrote", out)
