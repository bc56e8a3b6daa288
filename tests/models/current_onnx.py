"""Models as the onnx package of .venv writes them, as it is: onnx.helper's
defaults (IR version onnx.IR_VERSION, the newest opset it knows), compiled by
`tbc compile` to a shared object, run by `tbc run` and compared with
onnxruntime.  A model using IR 14's 6-bit floats is refused by name.
usage: current_onnx.py TBC WORK_DIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def run(*args, expect_ok=True):
    p = subprocess.run(args, capture_output=True, text=True)
    if (p.returncode == 0) != expect_ok:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def main():
    tbc, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Gelu", ["a"], ["y"])],
        "current_onnx",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph)  # the package's defaults, as exporters built on it write
    assert model.ir_version == onnx.IR_VERSION, (model.ir_version, onnx.IR_VERSION)
    onnx.checker.check_model(model)
    path = os.path.join(work, "current_onnx.onnx")
    onnx.save(model, path)
    print(f"onnx {onnx.__version__}: IR version {model.ir_version}, opset {model.opset_import[0].version}")

    so = os.path.join(work, "current_onnx.so")
    run(tbc, "compile", path, "-o", so)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    np.save(os.path.join(work, "current_onnx.x.npy"), x)
    out = os.path.join(work, "out-current-onnx")
    run(tbc, "run", so, "--input", f"x={work}/current_onnx.x.npy", "--output-dir", out)
    # onnxruntime 1.31 refuses IR version 14 ("max supported IR version: 13")
    # and opsets past 26: the oracle runs the same graph declared as IR 13,
    # opset 26 (MatMul, Add and Gelu are the same there).
    oracle = onnx.ModelProto()
    oracle.CopyFrom(model)
    oracle.ir_version = min(model.ir_version, 13)
    oracle.opset_import[0].version = min(oracle.opset_import[0].version, 26)
    sess = ort.InferenceSession(oracle.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    got = np.load(os.path.join(out, "y.npy"))
    err = float(np.max(np.abs(got - want)))
    print(f"compiled vs onnxruntime: max |diff| = {err:.3g}")
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        sys.exit("MISMATCH")

    # IR 14's 6-bit floats: known by name, refused clearly (not "unknown type").
    f6 = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "f6",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT6E2M3, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT6E2M3, [4])]))
    f6_path = os.path.join(work, "float6.onnx")
    onnx.save(f6, f6_path)
    p = run(tbc, "inspect", f6_path, expect_ok=False)
    if "f6e2m3 is not supported" not in p.stderr:
        sys.exit(f"float6 model: unexpected message:\n{p.stderr}")
    print("float6 model refused:", p.stderr.strip().splitlines()[0])


main()
