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
floats (256 MiB in, 256 MiB out), and over 64 Mi + 7 (a length no launch divides: the tails of the
grid-stride loop's unrolled trips); a row bias added over 8192 x 8192 (broadcast index arithmetic);
ReduceSum of rows, Softmax and LogSoftmax over 8192 x 8192.

The memory-bound cases' goal (issue 12) is 70% of the copy bandwidth: share = torch's copy time of the
same bytes / tbc's kernel time (--profile), for the elementwise, bias and softmax cases (each reads and
writes its bytes once at best, as the copy does); for ReduceSum, which only reads, copy time / (2 x
kernel time).  TBC_GPU_INTERLEAVE=N in compile's environment changes how many iterations a work-item
runs with their loads first (docs/gpu.md), for comparing.
"""
import glob
import os
import subprocess
import sys
import time

import numpy as np

# (M, K, N): square ones, and one with few rows (a transformer's FFN at 128 tokens)
MATMULS = ((1024, 1024, 1024), (4096, 4096, 4096), (128, 512, 2048))
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
    for name, n in (("eltwise_64M", ELEMS), ("eltwise_64M_plus7", ELEMS + 7)):
        yield graph(name, [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Mul", ["r", "two"], ["m"]),
                           helper.make_node("Add", ["m", "one"], ["Y"])], [("X", [n])], [("Y", [n])], [two, one])
    yield graph("bias_add_8k", [helper.make_node("Add", ["X", "B"], ["Y"])], [("X", [ROWS, COLS]), ("B", [COLS])],
                [("Y", [ROWS, COLS])])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    yield graph("reducesum_8k", [helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)],
                [("X", [ROWS, COLS])], [("Y", [ROWS])], [axes])
    for op in ("Softmax", "LogSoftmax"):
        yield graph(op.lower() + "_8k", [helper.make_node(op, ["X"], ["Y"], axis=1)], [("X", [ROWS, COLS])],
                    [("Y", [ROWS, COLS])])


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
            case = os.path.join(out, name)
            os.makedirs(case, exist_ok=True)
            onnx.save(m, os.path.join(case, "model.onnx"))
            subprocess.run([os.path.join(build, "tbc"), "compile", os.path.join(case, "model.onnx"), "--target",
                            target, "--cpu", "x86-64-v3", "-o", os.path.join(case, "model.so")], check=True)
    elif mode == "data":
        import onnxruntime as ort
        from onnx import numpy_helper
        rng = np.random.default_rng(0)
        for case in case_dirs(rest[0]):
            data = os.path.join(case, "test_data_set_0")
            os.makedirs(data, exist_ok=True)
            sess = ort.InferenceSession(os.path.join(case, "model.onnx"), providers=["CPUExecutionProvider"])
            feeds = {i.name: rng.standard_normal(i.shape, dtype=np.float32) for i in sess.get_inputs()}
            for k, (name, v) in enumerate(feeds.items()):
                open(os.path.join(data, f"input_{k}.pb"), "wb").write(numpy_helper.from_array(v).SerializeToString())
            for k, v in enumerate(sess.run(None, feeds)):
                open(os.path.join(data, f"output_{k}.pb"), "wb").write(numpy_helper.from_array(v).SerializeToString())
    elif mode == "torch":
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False

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
        x = torch.randn(ROWS, COLS, device="cuda")
        b = torch.randn(COLS, device="cuda")
        print(f"torch softmax_8k: {timed(lambda: torch.softmax(x, 1)):.3f} ms; "
              f"logsoftmax_8k: {timed(lambda: torch.log_softmax(x, 1)):.3f} ms; "
              f"sum_8k: {timed(lambda: x.sum(1)):.3f} ms; "
              f"bias_add_8k: {timed(lambda: x + b):.3f} ms; "
              f"eltwise_64M: {timed(lambda: torch.relu(x.view(-1)[:ELEMS]) * 2 + 1):.3f} ms (3 kernels)")
    else:
        sys.exit(__doc__)


main()
