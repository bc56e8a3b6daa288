"""Writes benchmark models into a folder (default bench/models/, git-ignored):

  resnet50.onnx      ResNet-50 v1.5 (torchvision layout), 224x224, symbolic batch, random weights
  transformer.onnx   one pre-norm transformer encoder block (d=512, 8 heads, ffn 2048, seq 128)
  bert_dynamic.onnx  a 4-layer BERT-style encoder (d=256, 4 heads) exported with dynamic axes
                     [batch, seq], in the form torch.onnx.export writes it
  gpt_dynamic.onnx   a 4-layer GPT-2-style decoder step with a KV cache (d=256, 4 heads):
                     input_ids [batch, seq], past.N.key/value [batch, 4, past_seq, 64]
  alexnet_consts.onnx AlexNet (torchvision layout), batch 1, whose weights come from constant
                     subgraphs (Tile of a small tensor, Range/Mod/Cast arithmetic) too large to
                     fold, as some exporters and test generators write them
  alexnet.onnx       the same network with the same weights as initializers

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


FLOAT_MIN = float(np.finfo(np.float32).min)


class Exported(Builder):
    """Writes the subgraphs torch.onnx.export emits for a module's Python-side
    shape arithmetic (x.size(i), view(...), arange, slicing a buffer)."""

    def i64(self, base, vals):
        return self.const(base, np.array(vals, np.int64))

    def size(self, x, i):
        """x.size(i): Shape -> Gather with a scalar index (a 0-d int64)."""
        return self.op("Gather", [self.op("Shape", [x], "shape"), self.const("idx", np.array(i, np.int64))],
                       "gather", axis=0)

    def unsq(self, x):
        return self.op("Unsqueeze", [x, self.i64("axes", [0])], "unsqueeze")

    def view(self, x, dims):
        """x.view(*dims): every int of dims a constant, every other a 0-d size
        unsqueezed, all concatenated into the Reshape's shape."""
        parts = [self.i64("dim", [d]) if isinstance(d, int) else self.unsq(d) for d in dims]
        return self.op("Reshape", [x, self.op("Concat", parts, "concat", axis=0)], "reshape")

    def linear(self, x, i, o):
        w = self.const("w", (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32))
        bias = self.const("b", (rng.standard_normal(o) * 0.02).astype(np.float32))
        return self.op("Add", [bias, self.op("MatMul", [x, w], "matmul")], "add")

    def layernorm(self, x, d):
        g = self.const("ln_g", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
        beta = self.const("ln_b", (0.1 * rng.standard_normal(d)).astype(np.float32))
        return self.op("LayerNormalization", [x, g, beta], "ln", axis=-1, epsilon=1e-12)

    def f32(self, base, v):
        return self.const(base, np.array(v, np.float32))


def bert_dynamic(path, layers=4, d=256, heads=4, ffn=1024, vocab=1000, max_pos=512):
    """BertModel's encoder as torch.onnx.export writes it with dynamic_axes
    {0: batch, 1: seq} on input_ids and attention_mask (opset 17)."""
    b = Exported()
    hd = d // heads
    seq = b.size("input_ids", 1)
    # position_ids = self.position_ids[:, 0:seq] (a registered buffer)
    pos_table = b.i64("position_ids", np.arange(max_pos)[None, :])
    pos = b.op("Slice", [pos_table, b.i64("starts", [0]), b.unsq(seq), b.i64("axes", [1]), b.i64("steps", [1])],
               "slice")
    # token_type_ids = self.token_type_ids[:, :seq].expand(batch, seq)
    tt_table = b.i64("token_type_ids", np.zeros((1, max_pos), np.int64))
    tt = b.op("Slice", [tt_table, b.i64("starts", [0]), b.unsq(seq), b.i64("axes", [1]), b.i64("steps", [1])],
              "slice")
    batch = b.size("input_ids", 0)
    tt = b.op("Expand", [tt, b.op("Concat", [b.unsq(batch), b.unsq(seq)], "concat", axis=0)], "expand")
    emb = lambda n, table: b.const(n, (rng.standard_normal((table, d)) * 0.05).astype(np.float32))
    x = b.op("Gather", [emb("word_embeddings", vocab), "input_ids"], "gather")
    x = b.op("Add", [x, b.op("Gather", [emb("token_type_embeddings", 2), tt], "gather")], "add")
    x = b.op("Add", [x, b.op("Gather", [emb("position_embeddings", max_pos), pos], "gather")], "add")
    x = b.layernorm(x, d)
    # extended mask: (1.0 - mask[:, None, None, :].to(float)) * finfo(float).min
    m = b.op("Unsqueeze", ["attention_mask", b.i64("axes", [1])], "unsqueeze")
    m = b.op("Unsqueeze", [m, b.i64("axes", [2])], "unsqueeze")
    m = b.op("Cast", [m], "cast", to=TensorProto.FLOAT)
    m = b.op("Sub", [b.f32("one", 1.0), m], "sub")
    mask = b.op("Mul", [m, b.f32("min", FLOAT_MIN)], "mul")
    for _ in range(layers):
        def heads_first(t, perm):
            # new_x_shape = t.size()[:-1] + (heads, hd); t.view(new_x_shape).permute(...)
            r = b.view(t, [b.size(t, 0), b.size(t, 1), heads, hd])
            return b.op("Transpose", [r], "transpose", perm=perm)
        q = heads_first(b.linear(x, d, d), [0, 2, 1, 3])
        kt = heads_first(b.linear(x, d, d), [0, 2, 3, 1])
        v = heads_first(b.linear(x, d, d), [0, 2, 1, 3])
        s = b.op("Div", [b.op("MatMul", [q, kt], "matmul"), b.f32("sqrt_hd", np.sqrt(hd))], "div")
        p = b.op("Softmax", [b.op("Add", [s, mask], "add")], "softmax", axis=-1)
        c = b.op("Transpose", [b.op("MatMul", [p, v], "matmul")], "transpose", perm=[0, 2, 1, 3])
        # context.size()[:-2] + (all_head_size,): Shape -> Slice -> Concat
        keep = b.op("Slice", [b.op("Shape", [c], "shape"), b.i64("starts", [0]), b.i64("ends", [-2]),
                              b.i64("axes", [0]), b.i64("steps", [1])], "slice")
        c = b.op("Reshape", [c, b.op("Concat", [keep, b.i64("dim", [d])], "concat", axis=0)], "reshape")
        x = b.layernorm(b.op("Add", [b.linear(c, d, d), x], "add"), d)
        f = b.linear(x, d, ffn)
        # erf GELU: x * 0.5 * (1 + erf(x / sqrt(2)))
        g = b.op("Erf", [b.op("Div", [f, b.f32("sqrt2", 1.4142135381698608)], "div")], "erf")
        g = b.op("Mul", [b.op("Mul", [f, b.op("Add", [g, b.f32("one", 1.0)], "add")], "mul"), b.f32("half", 0.5)],
                 "mul")
        x = b.layernorm(b.op("Add", [b.linear(g, ffn, d), x], "add"), d)
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    am = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", d])
    save(helper.make_graph(b.nodes, "bert_dynamic", [ids, am], [out], b.inits), path, opset=17)


def gpt_dynamic(path, layers=4, d=256, heads=4, vocab=1000, max_pos=128):
    """One GPT2LMHeadModel step with a KV cache as torch.onnx.export writes it
    with dynamic_axes: input_ids [batch, seq], past.N.key/value [batch, heads,
    past_seq, head_dim]; outputs logits and present.N.key/value (opset 17).
    past_seq may be 0 (prefill) or more (decode)."""
    b = Exported()
    hd = d // heads
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])]
    for i in range(layers):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past.{i}.{kv}", TensorProto.FLOAT,
                                                        ["batch", heads, "past_seq", hd]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", TensorProto.FLOAT,
                                                         ["batch", heads, "total_seq", hd]))
    # past_length = past[0][0].size(-2); position_ids = arange(past_length, seq + past_length).unsqueeze(0)
    past_len = b.size("past.0.key", 2)
    seq = b.size("input_ids", 1)
    pos = b.op("Range", [past_len, b.op("Add", [seq, past_len], "add"), b.const("delta", np.array(1, np.int64))],
               "range")
    pos = b.op("Unsqueeze", [pos, b.i64("axes", [0])], "unsqueeze")
    wte = b.const("wte", (rng.standard_normal((vocab, d)) * 0.05).astype(np.float32))
    wpe = b.const("wpe", (rng.standard_normal((max_pos, d)) * 0.02).astype(np.float32))
    x = b.op("Add", [b.op("Gather", [wte, "input_ids"], "gather"), b.op("Gather", [wpe, pos], "gather")], "add")
    causal = b.const("bias", np.tril(np.ones((max_pos, max_pos), np.uint8))[None, None].astype(bool))
    for i in range(layers):
        h = b.layernorm(x, d)
        qkv = b.linear(h, d, 3 * d)
        q, k, v = (b.name("split") for _ in range(3))
        b.nodes.append(helper.make_node("Split", [qkv, b.i64("split", [d, d, d])], [q, k, v], name=q, axis=2))

        def split_heads(t):
            r = b.view(t, [b.size(t, 0), b.size(t, 1), heads, hd])
            return b.op("Transpose", [r], "transpose", perm=[0, 2, 1, 3])
        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        pk, pv = f"present.{i}.key", f"present.{i}.value"
        b.nodes.append(helper.make_node("Concat", [f"past.{i}.key", k], [pk], name=pk, axis=-2))
        b.nodes.append(helper.make_node("Concat", [f"past.{i}.value", v], [pv], name=pv, axis=-2))
        kt = b.op("Transpose", [pk], "transpose", perm=[0, 1, 3, 2])
        w = b.op("Div", [b.op("MatMul", [q, kt], "matmul"), b.f32("scale", np.sqrt(hd))], "div")
        # nd, ns = w.size(-2), w.size(-1); mask = self.bias[:, :, ns - nd : ns, :ns]
        nd, ns = b.size(w, 2), b.size(w, 3)
        mk = b.op("Slice", [causal, b.unsq(b.op("Sub", [ns, nd], "sub")), b.unsq(ns), b.i64("axes", [2]),
                            b.i64("steps", [1])], "slice")
        mk = b.op("Slice", [mk, b.i64("starts", [0]), b.unsq(ns), b.i64("axes", [3]), b.i64("steps", [1])], "slice")
        w = b.op("Where", [mk, w, b.f32("masked", FLOAT_MIN)], "where")
        p = b.op("Softmax", [w], "softmax", axis=-1)
        a = b.op("Transpose", [b.op("MatMul", [p, pv], "matmul")], "transpose", perm=[0, 2, 1, 3])
        a = b.view(a, [b.size(a, 0), b.size(a, 1), d])
        x = b.op("Add", [x, b.linear(a, d, d)], "add")
        h = b.linear(b.layernorm(x, d), d, 4 * d)
        # gelu_new: 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * h^3)))
        t = b.op("Add", [h, b.op("Mul", [b.f32("c", 0.044715), b.op("Pow", [h, b.f32("three", 3.0)], "pow")], "mul")],
                 "add")
        t = b.op("Tanh", [b.op("Mul", [b.f32("c", np.sqrt(2 / np.pi)), t], "mul")], "tanh")
        g = b.op("Mul", [b.op("Mul", [b.f32("half", 0.5), h], "mul"), b.op("Add", [b.f32("one", 1.0), t], "add")],
                 "mul")
        x = b.op("Add", [x, b.linear(g, 4 * d, d)], "add")
    x = b.layernorm(x, d)
    b.nodes.append(helper.make_node("MatMul", [x, b.op("Transpose", [wte], "transpose", perm=[1, 0])], ["logits"],
                                    name="lm_head"))
    save(helper.make_graph(b.nodes, "gpt_dynamic", inputs, outputs, b.inits), path, opset=17)


class ConstWeights:
    """Weights written as constant subgraphs: each weight is computed from small constants by ops
    whose results are larger than what they read (Tile, Range), so constant folding leaves them
    for the compiled code (docs/load-time.md).  value(...) gives the same numbers with numpy, for
    the twin model with initializers."""

    def __init__(self, b, as_initializers):
        self.b, self.init = b, as_initializers

    def tiled(self, shape, reps):
        """A small random tensor repeated reps times along dim 0 (Tile)."""
        small = (rng.standard_normal((shape[0] // reps,) + tuple(shape[1:])) *
                 np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)
        full = np.tile(small, (reps,) + (1,) * (len(shape) - 1))
        if self.init:
            return self.b.const("w", full)
        return self.b.op("Tile", [self.b.const("w_small", small),
                                  self.b.const("reps", np.array((reps,) + (1,) * (len(shape) - 1), np.int64))],
                         "w_tiled")

    def ramp(self, shape, period, scale):
        """((i mod period) / period - 0.5) * scale over the elements in order (Range, Mod, Cast)."""
        n = int(np.prod(shape))
        full = (((np.arange(n, dtype=np.int64) % period).astype(np.float32) / np.float32(period) - np.float32(0.5)) *
                np.float32(scale)).reshape(shape).astype(np.float32)
        if self.init:
            return self.b.const("w", full)
        b = self.b
        i = b.op("Range", [b.const("zero", np.array(0, np.int64)), b.const("n", np.array(n, np.int64)),
                           b.const("one", np.array(1, np.int64))], "w_index")
        f = b.op("Cast", [b.op("Mod", [i, b.const("period", np.array(period, np.int64))], "w_mod")], "w_f",
                 to=TensorProto.FLOAT)
        f = b.op("Div", [f, b.const("period_f", np.array(period, np.float32))], "w_div")
        f = b.op("Sub", [f, b.const("half", np.array(0.5, np.float32))], "w_sub")
        f = b.op("Mul", [f, b.const("scale", np.array(scale, np.float32))], "w_mul")
        return b.op("Reshape", [f, b.const("shape", np.array(shape, np.int64))], "w")


def alexnet(path, as_initializers):
    """AlexNet at batch 1 (torchvision's layout: five convolutions, three fully connected layers)."""
    b = Builder()
    w = ConstWeights(b, as_initializers)
    x = "image"
    for cin, cout, k, s, p, pool in ((3, 64, 11, 4, 2, True), (64, 192, 5, 1, 2, True), (192, 384, 3, 1, 1, False),
                                     (384, 256, 3, 1, 1, False), (256, 256, 3, 1, 1, True)):
        bias = b.const("b", (rng.standard_normal(cout) * 0.01).astype(np.float32))
        x = b.op("Conv", [x, w.tiled((cout, cin, k, k), 4), bias], "conv", kernel_shape=[k, k], strides=[s, s],
                 pads=[p] * 4)
        x = b.op("Relu", [x], "relu")
        if pool:
            x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2])
    x = b.op("Flatten", [x], "flatten")
    for i, (fin, fout) in enumerate(((256 * 6 * 6, 4096), (4096, 4096), (4096, 1000))):
        bias = b.const("fc_b", (rng.standard_normal(fout) * 0.01).astype(np.float32))
        out = "logits" if i == 2 else None
        y = w.ramp((fout, fin), 1009 + 2 * i, 2.0 / np.sqrt(fin))
        node = helper.make_node("Gemm", [x, y, bias], [out or b.name("fc")], name=b.name("fc"), transB=1)
        b.nodes.append(node)
        x = node.output[0]
        if i < 2:
            x = b.op("Relu", [x], "relu")
    name = "alexnet" if as_initializers else "alexnet_consts"
    graph = helper.make_graph(b.nodes, name,
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], b.inits)
    save(graph, path)


def dynamic_inputs(out):
    """Inputs for bert_dynamic/gpt_dynamic at two shapes each, for one artifact
    run at both (tests/models/dynamic_vs_onnxruntime.sh): NAME.SHAPE.INPUT.npy."""
    for tag, (batch, seq) in (("a", (2, 7)), ("b", (3, 19))):
        ids = rng.integers(0, 1000, (batch, seq), dtype=np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[0, seq - 2:] = 0  # padding at the end of the first sequence
        np.save(os.path.join(out, f"bert_dynamic.{tag}.input_ids.npy"), ids)
        np.save(os.path.join(out, f"bert_dynamic.{tag}.attention_mask.npy"), mask)
    # decode steps (seq 1) after 5 and 11 cached tokens, and a prefill (no cache yet)
    for tag, (batch, seq, past) in (("a", (2, 1, 5)), ("b", (3, 1, 11)), ("c", (2, 6, 0))):
        np.save(os.path.join(out, f"gpt_dynamic.{tag}.input_ids.npy"),
                rng.integers(0, 1000, (batch, seq), dtype=np.int64))
        for i in range(4):
            for kv in ("key", "value"):
                np.save(os.path.join(out, f"gpt_dynamic.{tag}.past.{i}.{kv}.npy"),
                        rng.standard_normal((batch, 4, past, 64)).astype(np.float32))


def save(graph, path, opset=20):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tbc-bench")
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, path)
    print("wrote", path)


if __name__ == "__main__":
    # make_models.py [OUT [NAME ...]]: every model, or only those named (alexnet_consts alone
    # for tests/models/load_time_vs_onnxruntime.sh)
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    if only and only != {"alexnet_consts"}:
        sys.exit("make_models.py: a list of names may only be alexnet_consts for now")
    if not only:
        resnet50(os.path.join(out, "resnet50.onnx"))
        transformer(os.path.join(out, "transformer.onnx"))
        np.save(os.path.join(out, "resnet50.image.npy"), rng.random((1, 3, 224, 224), dtype=np.float32))
        np.save(os.path.join(out, "transformer.x.npy"), rng.standard_normal((1, 128, 512)).astype(np.float32))
        bert_dynamic(os.path.join(out, "bert_dynamic.onnx"))
        gpt_dynamic(os.path.join(out, "gpt_dynamic.onnx"))
        dynamic_inputs(out)
    state = rng.bit_generator.state  # both AlexNets draw the same weights
    alexnet(os.path.join(out, "alexnet_consts.onnx"), as_initializers=False)
    if not only:
        rng.bit_generator.state = state
        alexnet(os.path.join(out, "alexnet.onnx"), as_initializers=True)
    np.save(os.path.join(out, "alexnet.image.npy"), rng.random((1, 3, 224, 224), dtype=np.float32))
