#!/usr/bin/env python3
"""Generates the malformed-model corpus: small models that are broken in one
way each, plus expected.txt (file, expected tbc_code, flags, a substring of
the expected message).  Run with a Python that has onnx installed:

    python3 tests/malformed/make_corpus.py

The generated files are checked in; test_malformed.c loads every one.
Flags: '-' none; 'noinfer' import without shape inference; 'rule' the error
comes from an op's shape rule (the message is checked, a mismatch is only
reported as pending until that rule exists).
"""
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = [helper.make_opsetid("", 18)]
expected = []


def save(name, model_or_bytes, code, msg, flags="-"):
    path = os.path.join(HERE, name)
    data = model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    expected.append(f"{name} {code} {flags} {msg}")


def vi(name, dt=TensorProto.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, dt, shape)


def model(nodes, inputs, outputs, inits=(), opset=None, ir=8, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=OPSET if opset is None else opset, **kw)
    m.ir_version = ir
    return m


def relu_model(**kw):
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], **kw)


def raw_tensor(name, dt, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = dt
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def with_init(t, out_dt=TensorProto.FLOAT):
    return model([helper.make_node("Identity", [t.name], ["y"])], [], [vi("y", out_dt, None)], inits=[t])


def external(name, location, offset=None, length=None, dims=(4,)):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return with_init(t)


# ---- Hand-written wire format (for nesting protobuf's Python code refuses) ----
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vint(num, n):
    return varint(num << 3) + varint(n)


def opset_bytes():
    return field(8, field(1, b"") + vint(2, 18))


def nested_type_model(depth):
    t = field(1, vint(1, 1))  # TypeProto.tensor_type{elem_type: FLOAT}
    for _ in range(depth):
        t = field(4, field(1, t))  # TypeProto.sequence_type{elem_type: t}
    graph = field(11, field(1, b"x") + field(2, t))
    return vint(1, 8) + opset_bytes() + field(7, graph)


def nested_graph_model(depth):
    g = b""
    for _ in range(depth):
        attr = field(1, b"then_branch") + vint(20, 5) + field(6, g)
        g = field(1, field(1, b"c") + field(2, b"o") + field(4, b"If") + field(5, attr))
    return vint(1, 8) + opset_bytes() + field(7, g)


def nested_if(depth):
    """A model whose If nodes nest `depth` subgraph levels below the main graph."""
    def leaf(level):
        return helper.make_graph([helper.make_node("Identity", ["v"], [f"e{level}"])], f"e{level}", [],
                                 [vi(f"e{level}", shape=(1,))])

    def branch(level):
        if level == depth:
            return helper.make_graph([helper.make_node("Identity", ["v"], [f"o{level}"])], f"b{level}", [],
                                     [vi(f"o{level}", shape=(1,))])
        node = helper.make_node("If", ["c"], [f"o{level}"], then_branch=branch(level + 1), else_branch=leaf(level))
        return helper.make_graph([node], f"b{level}", [], [vi(f"o{level}", shape=(1,))])
    top = helper.make_node("If", ["c"], ["y"], then_branch=branch(1), else_branch=leaf(0))
    return model([top], [vi("c", TensorProto.BOOL, ()), vi("v", shape=(1,))], [vi("y", shape=(1,))])


def main():
    ok = relu_model()
    good = ok.SerializeToString()
    save("empty.onnx", b"", 1, "empty")
    save("truncated.onnx", good[: len(good) // 2], 1, "not a valid ONNX protobuf")
    garbage = bytes((i * 151 + 7) & 0xFF for i in range(300))
    save("garbage.onnx", garbage, 1, "not a valid ONNX protobuf")
    save("garbage_wiretype.onnx", b"\x0f\x01\x02", 1, "invalid wire type")

    save("negative_dim_initializer.onnx", with_init(raw_tensor("w", TensorProto.FLOAT, [-1], b"")), 1,
         "dim 0 is negative")
    save("negative_dim_input.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", shape=(2, -3))],
                                          [vi("y")]), 1, "dim 1 is negative")
    save("dim_product_overflow.onnx", with_init(raw_tensor("w", TensorProto.FLOAT, [1 << 62, 8], b"\0" * 4)), 1,
         "product of its dims overflows")
    save("raw_data_short.onnx", with_init(raw_tensor("w", TensorProto.FLOAT, [4], b"\0" * 12)), 1,
         "raw_data has 12 bytes")
    save("raw_data_long.onnx", with_init(raw_tensor("w", TensorProto.FLOAT, [2], b"\0" * 12)), 1,
         "raw_data has 12 bytes")
    save("raw_data_int4_odd.onnx", with_init(raw_tensor("w", TensorProto.INT4, [3], b"\0"), TensorProto.INT4), 1,
         "needs 2")
    big = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1000000, 1000000], float_data=[1.0])
    save("declared_far_larger.onnx", with_init(big), 1, "float_data has 1 entries")
    nodata = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[100000, 100000, 100000])
    save("declared_no_data.onnx", with_init(nodata), 1, "carries no data")

    save("unknown_dtype_initializer.onnx", with_init(raw_tensor("w", 99, [1], b"\0")), 1, "unknown data type 99")
    save("unknown_dtype_input.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", 77)], [vi("y")]), 1,
         "unknown element type 77")
    save("string_initializer.onnx", with_init(helper.make_tensor("w", TensorProto.STRING, [1], [b"a"]),
                                              TensorProto.STRING), 2, "string are not supported")
    save("unknown_op.onnx", model([helper.make_node("FooBar", ["x"], ["y"])], [vi("x")], [vi("y")]), 2,
         "op 'FooBar' is not supported")
    save("unknown_domain.onnx", model([helper.make_node("Relu", ["x"], ["y"], domain="com.example")], [vi("x")],
                                      [vi("y")]), 2, "domain 'com.example' is not supported")
    save("missing_opset_import.onnx", relu_model(opset=[helper.make_opsetid("com.example", 1)]), 1,
         "no opset_import for the ai.onnx domain")
    save("opset_too_new.onnx", relu_model(opset=[helper.make_opsetid("", 99)]), 2, "opset 99 is not supported")
    save("ir_version_too_new.onnx", relu_model(ir=99), 2, "IR version 99 is not supported")
    m = relu_model()
    m.ClearField("graph")
    save("no_graph.onnx", m, 1, "no graph")

    save("cycle.onnx", model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                              helper.make_node("Relu", ["a"], ["b"], name="n2")], [vi("x")], [vi("b")]), 1,
         "produced by a later node")
    save("self_loop.onnx", model([helper.make_node("Add", ["x", "a"], ["a"])], [vi("x")], [vi("a")]), 1,
         "produced by a later node")
    save("undefined_input.onnx", model([helper.make_node("Add", ["x", "nope"], ["y"])], [vi("x")], [vi("y")]), 1,
         "input 'nope' is not defined")
    save("undefined_output.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("zz")]), 1,
         "graph output 'zz' is not defined")
    save("duplicate_node_outputs.onnx", model([helper.make_node("Relu", ["x"], ["y"]),
                                               helper.make_node("Neg", ["x"], ["y"])], [vi("x")], [vi("y")]), 1,
         "redefines a name")
    save("duplicate_input_names.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x"), vi("x")],
                                             [vi("y")]), 1, "redefines a name")
    save("node_output_shadows_input.onnx", model([helper.make_node("Relu", ["x"], ["x"])], [vi("x")], [vi("x")]), 1,
         "redefines a name")
    save("missing_required_input.onnx", model([helper.make_node("Add", ["x"], ["y"])], [vi("x")], [vi("y")]), 1,
         "needs at least 2 inputs")
    save("omitted_required_input.onnx", model([helper.make_node("Add", ["", "x"], ["y"])], [vi("x")], [vi("y")]), 1,
         "required input 0 is missing")
    save("omitted_middle_required_input.onnx",
         model([helper.make_node("Col2Im", ["x", "", "x"], ["y"])], [vi("x")], [vi("y", shape=None)]), 1,
         "required input 1 is missing")
    save("too_many_inputs.onnx", model([helper.make_node("Relu", ["x", "x"], ["y"])], [vi("x")], [vi("y")]), 1,
         "takes at most 1 inputs")
    save("constant_without_value.onnx", model([helper.make_node("Constant", [], ["y"])], [], [vi("y")]), 1,
         "exactly one value attribute")
    save("constant_string.onnx", model([helper.make_node("Constant", [], ["y"], value_string="a")], [],
                                       [vi("y", TensorProto.STRING, ())]), 2, "string constants")
    save("sequence_input.onnx", model([helper.make_node("Identity", ["x"], ["y"])],
                                      [helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, None)],
                                      [vi("y")]), 2, "only tensor types")
    save("rank_17.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[1] * 17)],
                               [vi("y", shape=[1] * 17)]), 2, "rank 17 exceeds the limit of 16")
    save("rank_16_ok.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[1] * 16)],
                                  [vi("y", shape=[1] * 16)]), 0, "-")
    sp = helper.make_sparse_tensor(helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0]),
                                   helper.make_tensor("wi", TensorProto.INT64, [1], [100]), [4])
    m = model([helper.make_node("Identity", ["w"], ["y"])], [], [vi("y", shape=None)])
    m.graph.sparse_initializer.append(sp)
    save("sparse_index_out_of_range.onnx", m, 1, "sparse index 0 is out of range")

    # Errors found by shape rules (ir/kernels/*): pending until each rule exists.
    save("shapes_disagree.onnx", model([helper.make_node("Add", ["x", "z"], ["y"])],
                                       [vi("x", shape=(2, 3)), vi("z", shape=(4, 5))], [vi("y")]), 1,
         "cannot broadcast")
    save("output_shape_contradicts.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")],
                                                [vi("y", shape=(4, 4))]), 1, "disagrees with the inferred", "rule")
    save("transpose_perm_out_of_range.onnx", model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5])],
                                                   [vi("x")], [vi("y", shape=None)]), 1, "perm", "rule")
    save("concat_axis_out_of_range.onnx", model([helper.make_node("Concat", ["x", "x"], ["y"], axis=7)],
                                                [vi("x")], [vi("y", shape=None)]), 1, "axis", "rule")
    save("cast_missing_to.onnx", model([helper.make_node("Cast", ["x"], ["y"])], [vi("x")], [vi("y", shape=None)]),
         1, "to", "rule")

    # External data, relative to this folder: weights.bin (64 bytes), link.bin
    # (a symbolic link to it) and ext_dir/ (a directory).
    with open(os.path.join(HERE, "weights.bin"), "wb") as f:
        f.write(struct.pack("<16f", *range(16)))
    link = os.path.join(HERE, "link.bin")
    if not os.path.islink(link):
        os.symlink("weights.bin", link)
    os.makedirs(os.path.join(HERE, "ext_dir"), exist_ok=True)
    with open(os.path.join(HERE, "ext_dir", "README"), "w") as f:
        f.write("A directory named as external data must be refused.\n")
    save("external_ok.onnx", external("w", "weights.bin", 16, 16), 0, "-")
    save("external_absolute.onnx", external("w", "/etc/passwd"), 1, "is an absolute path")
    save("external_dotdot.onnx", external("w", "../malformed/weights.bin"), 1, "contains '..'")
    save("external_dotdot_inner.onnx", external("w", "ext_dir/../weights.bin"), 1, "contains '..'")
    save("external_symlink.onnx", external("w", "link.bin", 0, 16), 1, "is a symbolic link")
    save("external_missing.onnx", external("w", "missing.bin"), 1, "cannot be opened")
    save("external_directory.onnx", external("w", "ext_dir"), 1, "is a directory")
    save("external_offset_outside.onnx", external("w", "weights.bin", 100000, 16), 1, "is outside")
    save("external_length_outside.onnx", external("w", "weights.bin", 16, 100000), 1, "is outside")
    save("external_offset_overflow.onnx", external("w", "weights.bin", 2**64 - 1, 16), 1, "is outside")
    save("external_offset_not_a_number.onnx", external("w", "weights.bin", "99999999999999999999999", 16), 1,
         "not a valid number")
    save("external_length_mismatch.onnx", external("w", "weights.bin", 0, 12), 1, "external data has 12 bytes")

    # Nesting: 32 subgraph levels load, 33 do not; absurd nesting on the wire
    # is refused before protobuf-c could overflow the stack.
    save("nesting_32_ok.onnx", nested_if(32), 0, "-", "noinfer")
    save("nesting_33.onnx", nested_graph_model(33), 2, "nested deeper than the limit")
    save("nesting_wire_graphs.onnx", nested_graph_model(2000), 2, "nested deeper than the limit")
    save("nesting_wire_types.onnx", nested_type_model(2000), 2, "type protos are nested too deeply")

    # Model-local functions.
    f = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])
    m = model([helper.make_node("F", ["x"], ["y"], domain="local")], [vi("x")], [vi("y")],
              opset=OPSET + [helper.make_opsetid("local", 1)])
    m.functions.append(f)
    save("function_recursion.onnx", m, 1, "calls itself")

    # A well-formed call chain: Twice(x) = Scale(Scale(x)), Scale multiplies
    # by its attribute alpha (default 2.0; the caller of the second call
    # passes alpha=3.0 through a reference to Twice's own attribute 'beta').
    scale_body = [helper.make_node("Constant", [], ["c"]), helper.make_node("Mul", ["a", "c"], ["b"])]
    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "value_float", "alpha", onnx.AttributeProto.FLOAT
    scale_body[0].attribute.append(ref)
    scale = helper.make_function("local", "Scale", ["a"], ["b"], scale_body, OPSET, attributes=[],
                                 attribute_protos=[helper.make_attribute("alpha", 2.0)])
    beta = onnx.AttributeProto()
    beta.name, beta.ref_attr_name, beta.type = "alpha", "beta", onnx.AttributeProto.FLOAT
    second = helper.make_node("Scale", ["t"], ["b"], domain="local")
    second.attribute.append(beta)
    twice = helper.make_function("local", "Twice", ["a"], ["b"],
                                 [helper.make_node("Scale", ["a"], ["t"], domain="local"), second],
                                 OPSET + [helper.make_opsetid("local", 1)], attributes=["beta"])
    m = model([helper.make_node("Twice", ["x"], ["y"], domain="local", beta=3.0)], [vi("x")], [vi("y")],
              opset=OPSET + [helper.make_opsetid("local", 1)])
    m.functions.extend([scale, twice])
    save("function_ok.onnx", m, 0, "-")
    clamp = helper.make_function("local", "Clamp", ["a", "lo", "hi"], ["b"],
                                 [helper.make_node("Clip", ["a", "lo", "hi"], ["b"])], OPSET)
    m = model([helper.make_node("Clamp", ["x", "", "m"], ["y"], domain="local")], [vi("x"), vi("m", shape=())],
              [vi("y")], opset=OPSET + [helper.make_opsetid("local", 1)])
    m.functions.append(clamp)
    save("function_omitted_input_ok.onnx", m, 0, "-")
    # F0 = Relu; Fk calls Fk-1 ten times: 10^8 nodes if it were inlined blindly.
    fns = [helper.make_function("local", "F0", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], OPSET)]
    for k in range(1, 9):
        chain = [helper.make_node(f"F{k-1}", ["a" if j == 0 else f"t{j-1}"], ["b" if j == 9 else f"t{j}"],
                                  domain="local") for j in range(10)]
        fns.append(helper.make_function("local", f"F{k}", ["a"], ["b"], chain,
                                        OPSET + [helper.make_opsetid("local", 1)]))
    m = model([helper.make_node("F8", ["x"], ["y"], domain="local")], [vi("x")], [vi("y")],
              opset=OPSET + [helper.make_opsetid("local", 1)])
    m.functions.extend(fns)
    save("function_exponential.onnx", m, 2, "would create more than")
    # A 64 KiB constant in a body inlined 10^4 times would copy 640 MiB.
    big = helper.make_function("local", "G0", ["a"], ["b"],
                               [helper.make_node("Constant", [], ["c"],
                                                 value=numpy_helper.from_array(np.zeros(1 << 14, np.float32))),
                                helper.make_node("Max", ["a", "c"], ["b"])], OPSET)
    gfns = [big]
    for k in range(1, 5):
        chain = [helper.make_node(f"G{k-1}", ["a" if j == 0 else f"t{j-1}"], ["b" if j == 9 else f"t{j}"],
                                  domain="local") for j in range(10)]
        gfns.append(helper.make_function("local", f"G{k}", ["a"], ["b"], chain,
                                         OPSET + [helper.make_opsetid("local", 1)]))
    m = model([helper.make_node("G4", ["x"], ["y"], domain="local")], [vi("x", shape=(1 << 14,))],
              [vi("y", shape=(1 << 14,))], opset=OPSET + [helper.make_opsetid("local", 1)])
    m.functions.extend(gfns)
    save("function_constant_amplification.onnx", m, 2, "would copy more than")
    save("omitted_required_output.onnx", model([helper.make_node("Add", ["x", "x"], [""])], [vi("x")], [vi("x")]),
         1, "required output 0 is omitted")

    with open(os.path.join(HERE, "expected.txt"), "w") as f:
        f.write("# file expected_tbc_code flags message-substring (generated by make_corpus.py)\n")
        f.write("\n".join(expected) + "\n")


if __name__ == "__main__":
    main()
