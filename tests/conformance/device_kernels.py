"""Single-kernel models for timing a device with tbc-device-suite --profile
(docs/gpu.md, "Running on a GPU"), and PyTorch on the same GPU as the peer.

Here (the compiler):   device_kernels.py compile BUILD_DIR TARGET OUT
    OUT/<case>/model.onnx and model.so for each case below.
There (the device; numpy, onnx, onnxruntime, torch; no compiler):
    device_kernels.py data OUT    random inputs, onnxruntime's (CPU) outputs, as .pb
    device_kernels.py torch OUT   PyTorch's times for the same work: cuBLAS SGEMM (TF32
                                  off) for the MatMuls, a device-to-device copy of the
                                  same bytes for the memory-bound cases

Cases: fp32 MatMuls (A, B inputs): 1024^3, 4096^3 and 128 x 512 x 2048; a fused elementwise chain over 64 Mi
floats (256 MiB in, 256 MiB out); ReduceSum of rows and Softmax over 8192 x 8192.  GEMMs with few tiles
(split-K, codegen/lower/gemm_splitk.c): ResNet-50's last 3 x 3 convolution as a MatMul 49 x 4608 x 512 and
as the Conv itself (batch known only while running, 1 in the data; weights and bias inputs), 1 x 4096
x 4096 and 64 x 4096 x 4096, each beside the same model compiled with TBC_GEMM_SPLITK=1 (one pass:
<case>_onepass), or =4 (<case>_split4) where the default is one pass.
"""
import glob
import os
import subprocess
import sys
import time

import numpy as np

# (M, K, N): square ones, one with few rows (a transformer's FFN at 128 tokens), and those with few
# tiles (split-K): ResNet-50's last 3 x 3 convolution as a MatMul, a vector and 64 rows times 4096^2
MATMULS = ((1024, 1024, 1024), (4096, 4096, 4096), (128, 512, 2048), (49, 4608, 512), (1, 4096, 4096),
           (64, 4096, 4096))
# The same model again with TBC_GEMM_SPLITK set when compiling: case -> ((suffix, value), ...)
VARIANTS = {"matmul_49x4608x512": (("_onepass", "1"),), "conv_resnet_last": (("_onepass", "1"),),
            "matmul_1x4096x4096": (("_onepass", "1"),), "matmul_64x4096x4096": (("_split4", "4"),)}
ELEMS = 64 << 20
ROWS = COLS = 8192


def mm_name(m, k, n):
    return f"matmul_{m}" if m == k == n else f"matmul_{m}x{k}x{n}"


def cases():
    from onnx import TensorProto, helper

    def graph(name, nodes, inputs, outputs, inits=()):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              list(inits))
        return name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)

    for m, k, n in MATMULS:
        yield graph(mm_name(m, k, n), [helper.make_node("MatMul", ["A", "B"], ["Y"])], [("A", [m, k]), ("B", [k, n])],
                    [("Y", [m, n])])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    yield graph("eltwise_64M", [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Mul", ["r", "two"], ["m"]),
                                helper.make_node("Add", ["m", "one"], ["Y"])], [("X", [ELEMS])], [("Y", [ELEMS])],
                [two, one])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    yield graph("reducesum_8k", [helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)],
                [("X", [ROWS, COLS])], [("Y", [ROWS])], [axes])
    yield graph("softmax_8k", [helper.make_node("Softmax", ["X"], ["Y"], axis=1)], [("X", [ROWS, COLS])],
                [("Y", [ROWS, COLS])])
    # ResNet-50's last-stage 3 x 3 convolution with its bias, the batch symbolic as in the bench model;
    # the weights are inputs too (made with the data there: the bundle stays small)
    yield graph("conv_resnet_last", [helper.make_node("Conv", ["X", "W", "Bias"], ["Y"], pads=[1, 1, 1, 1])],
                [("X", ["N", 512, 7, 7]), ("W", [512, 512, 3, 3]), ("Bias", [512])], [("Y", ["N", 512, 7, 7])])


def case_dirs(out):
    return sorted(d for d in glob.glob(os.path.join(out, "*")) if os.path.exists(os.path.join(d, "model.onnx")))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "compile":
        import onnx
        build, target, out = rest[:3]
        for name, m in cases():
            for suffix, splitk in (("", None),) + VARIANTS.get(name, ()):
                case = os.path.join(out, name + suffix)
                os.makedirs(case, exist_ok=True)
                onnx.save(m, os.path.join(case, "model.onnx"))
                env = dict(os.environ)
                env.pop("TBC_GEMM_SPLITK", None)
                if splitk:
                    env["TBC_GEMM_SPLITK"] = splitk
                subprocess.run([os.path.join(build, "tbc"), "compile", os.path.join(case, "model.onnx"), "--target",
                                target, "--cpu", "x86-64-v3", "-o", os.path.join(case, "model.so")], check=True,
                               env=env)
    elif mode == "data":
        import onnxruntime as ort
        from onnx import numpy_helper
        rng = np.random.default_rng(0)
        for case in case_dirs(rest[0]):
            data = os.path.join(case, "test_data_set_0")
            os.makedirs(data, exist_ok=True)
            sess = ort.InferenceSession(os.path.join(case, "model.onnx"), providers=["CPUExecutionProvider"])
            # a symbolic dim (a batch) is 1
            feeds = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape], dtype=np.float32)
                     for i in sess.get_inputs()}
            for k, (name, v) in enumerate(feeds.items()):
                open(os.path.join(data, f"input_{k}.pb"), "wb").write(numpy_helper.from_array(v).SerializeToString())
            for k, v in enumerate(sess.run(None, feeds)):
                open(os.path.join(data, f"output_{k}.pb"), "wb").write(numpy_helper.from_array(v).SerializeToString())
    elif mode == "torch":
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

        def timed(f, runs=20):
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            ms = []
            for _ in range(runs):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                e.synchronize()
                ms.append(s.elapsed_time(e))
            return float(np.median(ms))

        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
        for m, k, n in MATMULS:
            a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
            t = timed(lambda: torch.matmul(a, b))
            print(f"torch {mm_name(m, k, n)}: {t:.3f} ms, {2 * m * k * n / t / 1e9:.1f} TFLOP/s (cuBLAS, TF32 off)")
        for name, nbytes in (("eltwise_64M", ELEMS * 4), ("rows_8k", ROWS * COLS * 4)):
            x = torch.empty(nbytes // 4, device="cuda")
            y = torch.empty_like(x)
            k = timed(lambda: y.copy_(x))
            print(f"torch copy of {nbytes >> 20} MiB ({name}): {k:.3f} ms, {2 * nbytes / k / 1e6:.0f} GB/s read+written")
        x, w, b = (torch.randn(1, 512, 7, 7, device="cuda"), torch.randn(512, 512, 3, 3, device="cuda"),
                   torch.randn(512, device="cuda"))
        t = timed(lambda: torch.nn.functional.conv2d(x, w, b, padding=1))
        print(f"torch conv_resnet_last: {t:.3f} ms (cuDNN, TF32 off)")
        x = torch.randn(ROWS, COLS, device="cuda")
        print(f"torch softmax_8k: {timed(lambda: torch.softmax(x, 1)):.3f} ms; "
              f"sum_8k: {timed(lambda: x.sum(1)):.3f} ms; "
              f"eltwise_64M: {timed(lambda: torch.relu(x.view(-1)[:ELEMS]) * 2 + 1):.3f} ms (3 kernels)")
    else:
        sys.exit(__doc__)


main()
