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
ReduceSum of rows, Softmax and LogSoftmax over 8192 x 8192.  GEMMs with few tiles
(split-K, codegen/lower/gemm_splitk.c): ResNet-50's last 3 x 3 convolution as a MatMul 49 x 4608 x 512 and
as the Conv itself (batch known only while running, 1 in the data; weights and bias inputs), 1 x 4096
x 4096 and 64 x 4096 x 4096, each beside the same model compiled with TBC_GEMM_SPLITK=1 (one pass:
<case>_onepass), or =4 (<case>_split4) where the default is one pass.

The memory-bound cases' goal (issue 12) is 70% of the copy bandwidth: share = torch's copy time of the
same bytes / tbc's kernel time (--profile), for the elementwise, bias and softmax cases (each reads and
writes its bytes once at best, as the copy does); for ReduceSum, which only reads, copy time / (2 x
kernel time).  TBC_GPU_INTERLEAVE=N in compile's environment changes how many iterations a work-item
runs with their loads first (docs/gpu.md), for comparing.

fp16 and bf16 MatMuls (A, B and Y of that type, f32 sums: tensor cores on cuda:sm_80 and later,
codegen/lower/gemm_mma.c): matmul_{fp16,bf16}_* of 4096^3, 1024^3, 128 x 512 x 2048 and 100 x 200 x 300
(M x K x N); each also as *_scalar, compiled with TBC_GEMM_MMA=0 (the scalar grouped GEMM, for the
comparison), and the 4096^3 fp16 one with other tiles as matmul_fp16_4096_t<MIxNI:TK>.  Their
expected outputs are numpy's (float64 sums of the low-precision inputs, rounded to the type once):
check them with --rtol 2e-2 --atol 2e-2 (a sum of f32 roundings differs from the float64 sum by
about an ulp of the type, and an output near zero by the f32 rounding of K products of ~1).
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
# fp16 and bf16 MatMuls (tensor cores): the square ones, the few-row one, and an odd one
LOW_MATMULS = ((1024, 1024, 1024), (4096, 4096, 4096), (128, 512, 2048), (100, 200, 300))
LOW_TYPES = ("fp16", "bf16")
# tiles of the tensor-core GEMM to measure on 4096^3 fp16 (TBC_GEMM_MMA=MIxNI:TK; the default is 4x4:16)
MMA_TILES = ("4x4:32", "2x2:16", "2x4:16", "4x2:16")
ELEMS = 64 << 20
ROWS = COLS = 8192


def mm_name(m, k, n):
    return f"matmul_{m}" if m == k == n else f"matmul_{m}x{k}x{n}"


def low_name(t, m, k, n):
    return "matmul_" + t + mm_name(m, k, n)[len("matmul"):]


def cases():
    """(name, model, environment of the compile: None for the default)"""
    from onnx import TensorProto, helper

    def graph(name, nodes, inputs, outputs, inits=(), elem=TensorProto.FLOAT, env=None):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, elem, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, elem, s) for n, s in outputs], list(inits))
        return name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=10), env

    elems = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
    for t in LOW_TYPES:
        for m, k, n in LOW_MATMULS:
            envs = [("", None), ("_scalar", {"TBC_GEMM_MMA": "0"})]
            if t == "fp16" and (m, k, n) == (4096, 4096, 4096):
                envs += [("_t" + v.replace(":", "_"), {"TBC_GEMM_MMA": v}) for v in MMA_TILES]
            for suffix, env in envs:
                yield graph(low_name(t, m, k, n) + suffix, [helper.make_node("MatMul", ["A", "B"], ["Y"])],
                            [("A", [m, k]), ("B", [k, n])], [("Y", [m, n])], elem=elems[t], env=env)

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
    # ResNet-50's last-stage 3 x 3 convolution with its bias, the batch symbolic as in the bench model;
    # the weights are inputs too (made with the data there: the bundle stays small)
    yield graph("conv_resnet_last", [helper.make_node("Conv", ["X", "W", "Bias"], ["Y"], pads=[1, 1, 1, 1])],
                [("X", ["N", 512, 7, 7]), ("W", [512, 512, 3, 3]), ("Bias", [512])], [("Y", ["N", 512, 7, 7])])


def bf16_bits(x):
    """float32 values rounded to bfloat16 (to nearest even), as uint16 bits"""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def low_tensor(bits_or_f16, elem):
    """a TensorProto of FLOAT16 (from float16 values) or BFLOAT16 (from uint16 bits)"""
    from onnx import TensorProto
    t = TensorProto()
    t.data_type = elem
    t.dims.extend(bits_or_f16.shape)
    t.raw_data = np.ascontiguousarray(bits_or_f16).tobytes()
    return t


def low_data(case, model, rng):
    """inputs of the model's low type and numpy's outputs: the products summed in float64 from the
    inputs as stored, rounded to the type once"""
    from onnx import TensorProto
    elem = model.graph.input[0].type.tensor_type.elem_type
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    vals, protos = [], []
    for shape in shapes:
        x = rng.standard_normal(shape, dtype=np.float32)
        if elem == TensorProto.FLOAT16:
            h = x.astype(np.float16)
            vals.append(h.astype(np.float64))
            protos.append(low_tensor(h, elem))
        else:
            b = bf16_bits(x)
            vals.append((b.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
            protos.append(low_tensor(b, elem))
    y = (vals[0] @ vals[1]).astype(np.float32)
    out = low_tensor(y.astype(np.float16) if elem == TensorProto.FLOAT16 else bf16_bits(y), elem)
    return protos, [out]


def case_dirs(out):
    return sorted(d for d in glob.glob(os.path.join(out, "*")) if os.path.exists(os.path.join(d, "model.onnx")))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "compile":
        import onnx
        build, target, out = rest[:3]
        only = rest[3:]  # case names (prefixes) to compile; all without
        for name, m, env in cases():
            if only and not any(name.startswith(o) for o in only):
                continue
            for suffix, splitk in (("", None),) + VARIANTS.get(name, ()):
                case = os.path.join(out, name + suffix)
                os.makedirs(case, exist_ok=True)
                onnx.save(m, os.path.join(case, "model.onnx"))
                e = dict(os.environ, **(env or {}))
                e.pop("TBC_GEMM_SPLITK", None)
                if splitk:
                    e["TBC_GEMM_SPLITK"] = splitk
                subprocess.run([os.path.join(build, "tbc"), "compile", os.path.join(case, "model.onnx"), "--target",
                                target, "--cpu", "x86-64-v3", "-o", os.path.join(case, "model.so")], check=True, env=e)
    elif mode == "data":
        import onnxruntime as ort
        from onnx import numpy_helper
        rng = np.random.default_rng(0)
        import onnx
        for case in case_dirs(rest[0]):
            data = os.path.join(case, "test_data_set_0")
            os.makedirs(data, exist_ok=True)
            model = onnx.load(os.path.join(case, "model.onnx"))
            if model.graph.input[0].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
                ins, outs = low_data(case, model, rng)
                for k, t in enumerate(ins):
                    open(os.path.join(data, f"input_{k}.pb"), "wb").write(t.SerializeToString())
                for k, t in enumerate(outs):
                    open(os.path.join(data, f"output_{k}.pb"), "wb").write(t.SerializeToString())
                continue
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
        for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
            for m, k, n in LOW_MATMULS:
                a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
                t = timed(lambda: torch.matmul(a, b))
                print(f"torch {low_name(name, m, k, n)}: {t:.3f} ms, {2 * m * k * n / t / 1e9:.1f} TFLOP/s (cuBLAS)")
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
        b = torch.randn(COLS, device="cuda")
        print(f"torch softmax_8k: {timed(lambda: torch.softmax(x, 1)):.3f} ms; "
              f"logsoftmax_8k: {timed(lambda: torch.log_softmax(x, 1)):.3f} ms; "
              f"sum_8k: {timed(lambda: x.sum(1)):.3f} ms; "
              f"bias_add_8k: {timed(lambda: x + b):.3f} ms; "
              f"eltwise_64M: {timed(lambda: torch.relu(x.view(-1)[:ELEMS]) * 2 + 1):.3f} ms (3 kernels)")
    else:
        sys.exit(__doc__)


main()
