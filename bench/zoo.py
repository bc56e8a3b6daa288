"""The CPU benchmark set beyond bench/make_models.py's models (issue 15): the
architectures users run, at their real sizes, with random weights.  Each is
written as torch.onnx.export writes the network in eval mode (batch norm folded
into the convolution's bias, ReLU6 as Clip with min/max inputs, channel shuffle
as Reshape/Transpose/Reshape), batch 1, 224x224 images:

  mobilenet_v2.onnx   MobileNetV2 1.0 (inverted residuals, depthwise 3x3 convolutions)
  shufflenet_v2.onnx  ShuffleNetV2 1.0x (channel split, depthwise convolutions, channel shuffle)
  densenet121.onnx    DenseNet-121 (growth 32, blocks 6/12/24/16: concatenations)
  inception_v2.onnx   GoogLeNet with batch norm and 3x3 pairs for 5x5 (Inception-v2 style:
                      parallel branches concatenated)
  bert_int8.onnx      bert_dynamic quantized by onnxruntime.quantization.quantize_dynamic
                      (MatMulInteger, DynamicQuantizeLinear), dynamic axes kept
  resnet50_qdq.onnx   ResNet-50 quantized by onnxruntime.quantization.quantize_static in the
                      QDQ format (int8 weights per channel, uint8 activations), calibrated on
                      8 random images

and the inputs compare.py feeds: NAME.image.npy, bert seq 128 (bert128.*.npy), a GPT prefill
of 128 tokens (gpt_prefill.*.npy) and a decode step after 127 (gpt_decode.*.npy).

usage: zoo.py OUT   (OUT must already hold make_models.py's models)"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import Builder  # noqa: E402

rng = np.random.default_rng(11)


class Net(Builder):
    """make_models.Builder with the layers these networks are made of."""

    def conv(self, x, cin, cout, k, stride=1, groups=1, act="relu", pad=None):
        """Conv with its batch norm folded into weights and bias, then act."""
        fan_in = cin // groups * k * k
        w = self.const("w", (rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32))
        bias = self.const("b", (rng.standard_normal(cout) * 0.05).astype(np.float32))
        p = k // 2 if pad is None else pad
        y = self.op("Conv", [x, w, bias], "conv", kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4,
                    group=groups)
        if act == "relu":
            return self.op("Relu", [y], "relu")
        if act == "relu6":
            return self.op("Clip", [y, self.const("min", np.float32(0)), self.const("max", np.float32(6))], "relu6")
        return y

    def bn_relu(self, x, c):
        """Batch norm and ReLU before a convolution (DenseNet's order: not foldable)."""
        scale = self.const("bn_scale", (rng.random(c) * 0.5 + 0.5).astype(np.float32))
        bias = self.const("bn_bias", (rng.standard_normal(c) * 0.1).astype(np.float32))
        mean = self.const("bn_mean", (rng.standard_normal(c) * 0.1).astype(np.float32))
        var = self.const("bn_var", (rng.random(c) + 0.5).astype(np.float32))
        return self.op("Relu", [self.op("BatchNormalization", [x, scale, bias, mean, var], "bn", epsilon=1e-5)], "relu")

    def head(self, x, c, classes=1000):
        x = self.op("Flatten", [self.op("GlobalAveragePool", [x], "gap")], "flatten")
        w = self.const("fc_w", (rng.standard_normal((classes, c)) / np.sqrt(c)).astype(np.float32))
        bias = self.const("fc_b", np.zeros(classes, np.float32))
        self.nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits"], name="fc", transB=1))

    def save(self, path, graph_name):
        graph = helper.make_graph(self.nodes, graph_name,
                                  [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
                                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tbc-bench")
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, path)
        print("wrote", path)


def mobilenet_v2(path):
    n = Net()
    x = n.conv("image", 3, 32, 3, 2, act="relu6")
    cin = 32
    for t, c, reps, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                          (6, 320, 1, 1)):
        for i in range(reps):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = n.conv(x, cin, hidden, 1, act="relu6") if t != 1 else x
            y = n.conv(y, hidden, hidden, 3, stride, groups=hidden, act="relu6")
            y = n.conv(y, hidden, c, 1, act=None)
            x = n.op("Add", [x, y], "add") if stride == 1 and cin == c else y
            cin = c
    x = n.conv(x, cin, 1280, 1, act="relu6")
    n.head(x, 1280)
    n.save(path, "mobilenet_v2")


def shufflenet_v2(path):
    n = Net()
    x = n.conv("image", 3, 24, 3, 2)
    x = n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, size = 24, 56

    def shuffle(x, c, hw):
        x = n.op("Reshape", [x, n.const("shape", np.array([1, 2, c // 2, hw, hw], np.int64))], "reshape")
        x = n.op("Transpose", [x], "transpose", perm=[0, 2, 1, 3, 4])
        return n.op("Reshape", [x, n.const("shape", np.array([1, c, hw, hw], np.int64))], "reshape")

    for cout, reps in ((116, 4), (232, 8), (464, 4)):
        half = cout // 2
        for i in range(reps):
            stride = 2 if i == 0 else 1
            if i == 0:  # downsampling: both branches see the whole input
                a = n.conv(x, cin, cin, 3, 2, groups=cin, act=None)
                a = n.conv(a, cin, half, 1)
                b = n.conv(x, cin, half, 1)
                size //= 2
            else:  # channel split: half passes through
                split = n.name("split")
                a, rest = split + "_a", split + "_b"
                n.nodes.append(helper.make_node("Split", [x, n.const("split", np.array([half, half], np.int64))],
                                                [a, rest], name=split, axis=1))
                b = n.conv(rest, half, half, 1)
            b = n.conv(b, half, half, 3, stride, groups=half, act=None)
            b = n.conv(b, half, half, 1)
            x = shuffle(n.op("Concat", [a, b], "concat", axis=1), cout, size)
            cin = cout
    x = n.conv(x, cin, 1024, 1)
    n.head(x, 1024)
    n.save(path, "shufflenet_v2")


def densenet121(path, growth=32, blocks=(6, 12, 24, 16)):
    n = Net()
    x = n.conv("image", 3, 64, 7, 2)
    x = n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for bi, layers in enumerate(blocks):
        for _ in range(layers):
            y = n.bn_relu(x, c)
            y = n.conv(y, c, 4 * growth, 1, act=None)
            y = n.bn_relu(y, 4 * growth)
            y = n.conv(y, 4 * growth, growth, 3, act=None)
            x = n.op("Concat", [x, y], "concat", axis=1)
            c += growth
        if bi != len(blocks) - 1:
            y = n.bn_relu(x, c)
            y = n.conv(y, c, c // 2, 1, act=None)
            x = n.op("AveragePool", [y], "avgpool", kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
    x = n.bn_relu(x, c)
    n.head(x, c)
    n.save(path, "densenet121")


def inception_v2(path):
    n = Net()
    x = n.conv("image", 3, 64, 7, 2)
    x = n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = n.conv(x, 64, 64, 1)
    x = n.conv(x, 64, 192, 3)
    x = n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 192

    def module(x, cin, c1, c3r, c3, c5r, c5, cp):
        a = n.conv(x, cin, c1, 1)
        b = n.conv(n.conv(x, cin, c3r, 1), c3r, c3, 3)
        d = n.conv(n.conv(n.conv(x, cin, c5r, 1), c5r, c5, 3), c5, c5, 3)  # 5x5 as two 3x3
        p = n.conv(n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]), cin, cp, 1)
        return n.op("Concat", [a, b, d, p], "concat", axis=1), c1 + c3 + c5 + cp

    for spec in ((64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64)):
        x, c = module(x, c, *spec)
    x = n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for spec in ((192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64),
                 (112, 144, 288, 32, 64, 64), (256, 160, 320, 32, 128, 128)):
        x, c = module(x, c, *spec)
    x = n.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for spec in ((256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128)):
        x, c = module(x, c, *spec)
    n.head(x, c)
    n.save(path, "inception_v2")


def bert_int8(out):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    path = os.path.join(out, "bert_int8.onnx")
    quantize_dynamic(os.path.join(out, "bert_dynamic.onnx"), path, weight_type=QuantType.QInt8)
    print("wrote", path)


def resnet50_qdq(out):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Images(CalibrationDataReader):
        def __init__(self):
            self.left = [{"image": rng.random((1, 3, 224, 224), dtype=np.float32)} for _ in range(8)]

        def get_next(self):
            return self.left.pop() if self.left else None

    pre = os.path.join(out, "resnet50_pre.onnx")
    quant_pre_process(os.path.join(out, "resnet50.onnx"), pre, skip_symbolic_shape=True)
    path = os.path.join(out, "resnet50_qdq.onnx")
    quantize_static(pre, path, Images(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)
    print("wrote", path)


def inputs(out):
    image = rng.random((1, 3, 224, 224), dtype=np.float32)
    np.save(os.path.join(out, "zoo.image.npy"), image)
    np.save(os.path.join(out, "bert128.input_ids.npy"), rng.integers(0, 1000, (1, 128), dtype=np.int64))
    np.save(os.path.join(out, "bert128.attention_mask.npy"), np.ones((1, 128), np.int64))
    for tag, (seq, past) in (("gpt_prefill", (128, 0)), ("gpt_decode", (1, 127))):
        np.save(os.path.join(out, f"{tag}.input_ids.npy"), rng.integers(0, 1000, (1, seq), dtype=np.int64))
        for i in range(4):
            for kv in ("key", "value"):
                np.save(os.path.join(out, f"{tag}.past.{i}.{kv}.npy"),
                        rng.standard_normal((1, 4, past, 64)).astype(np.float32))


if __name__ == "__main__":
    out = sys.argv[1]
    for f in ("bert_dynamic.onnx", "resnet50.onnx"):
        if not os.path.exists(os.path.join(out, f)):
            sys.exit(f"zoo.py: {out} has no {f}: run bench/make_models.py {out} first")
    mobilenet_v2(os.path.join(out, "mobilenet_v2.onnx"))
    shufflenet_v2(os.path.join(out, "shufflenet_v2.onnx"))
    densenet121(os.path.join(out, "densenet121.onnx"))
    inception_v2(os.path.join(out, "inception_v2.onnx"))
    bert_int8(out)
    resnet50_qdq(out)
    inputs(out)
