/* Precision lowering (passes/precision.c, docs/precision.md): which ops move
 * to float16/bfloat16 and which stay float32, the Casts at the boundaries
 * (one per value, never a pair), weights stored in the low type, the
 * model's interface kept, exclusions, subgraph captures, and the results
 * against float32 through the reference interpreter. */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/dtype.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tbc/abi.h"

static tbc_module *parse(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	if (!m) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		print_error("parse failed: %s\n", msg);
	}
	assert_non_null(m);
	tbc_infer cx = {.module = m, .diags = d};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

/* A small transformer-like block: x @ w1 + b, Relu, Softmax (kept), @ w2,
 * a residual Add with the Relu, an Exp (kept) and a Div by a computed value
 * (kept). */
static char *block_text(void) {
	static char text[16384];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[4,8]) {\n");
	const char *names[] = {"w1", "w2"};
	for (int w = 0; w < 2; w++) {
		n += snprintf(text + n, sizeof text - (size_t)n, "  %%%s: f32[8,8] = const [", names[w]);
		for (int i = 0; i < 64; i++)
			n += snprintf(text + n, sizeof text - (size_t)n, "%s%.4f", i ? ", " : "", 0.05 * ((i * (w + 3)) % 17) - 0.4);
		n += snprintf(text + n, sizeof text - (size_t)n, "]\n");
	}
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%b: f32[8] = const [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8]\n"
		 "  %%a: f32[4,8] = MatMul(%%x, %%w1)\n"
		 "  %%ab: f32[4,8] = Add(%%a, %%b)\n"
		 "  %%h: f32[4,8] = Relu(%%ab)\n"
		 "  %%s: f32[4,8] = Softmax(%%h) {axis = 1}\n"
		 "  %%m: f32[4,8] = MatMul(%%s, %%w2)\n"
		 "  %%r: f32[4,8] = Add(%%m, %%h)\n"
		 "  %%e: f32[4,8] = Exp(%%r)\n"
		 "  %%q: f32[4,8] = Div(%%r, %%e)\n"
		 "  return %%r, %%q\n"
		 "}\n");
	return text;
}

static const tbc_op *op_named_output(const tbc_module *m, tbc_opcode code, int nth) {
	for (const tbc_op *op = m->main->first; op; op = op->next)
		if (op->code == code && nth-- == 0) return op;
	return NULL;
}

static tbc_module *lowered(const char *text, tbc_dtype low, bool keep_io, const char *exclude, tbc_precision_stats *st) {
	tbc_module *m = parse(text);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.verify = true;
	tbc_precision_options po = {.low = low, .keep_io_types = keep_io, .exclude = exclude};
	o.precision = &po;
	tbc_pipeline_stats pst;
	memset(&pst, 0, sizeof pst);
	o.stats = &pst;
	tbc_diags *d = tbc_diags_create();
	bool ok = tbc_run_pipeline(m, &o, d);
	if (!ok) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		print_error("%s\n", msg);
	}
	assert_true(ok);
	tbc_diags_destroy(d);
	if (st) *st = pst.precision;
	return m;
}

/* No Cast reads a Cast (the pass never leaves a pair), and no op reads a
 * value of another float type than its data needs (the verifier's). */
static void assert_no_cast_pairs(const tbc_module *m) {
	for (const tbc_op *op = m->main->first; op; op = op->next)
		if (op->code == TBC_OP_Cast && op->inputs[0]->kind == TBC_VALUE_RESULT)
			assert_int_not_equal(op->inputs[0]->def->code, TBC_OP_Cast);
}

static void run(const tbc_module *m, float *out0, float *out1) {
	float xs[32];
	for (int i = 0; i < 32; i++) xs[i] = (float)sin(0.7 * i) * 2.0f;
	int64_t dims[2] = {4, 8};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
	memcpy(x->data, xs, sizeof xs);
	tbc_tensor *out[2] = {NULL, NULL};
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_interpret(m, &x, 1, out, 2, d), TBC_OK);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(out[k]->dtype, TBC_DT_F32); /* the interface keeps its types */
		memcpy(k ? out1 : out0, out[k]->data, 32 * sizeof(float));
		tbc_tensor_destroy(out[k]);
	}
	tbc_tensor_destroy(x);
	tbc_diags_destroy(d);
}

static void matmuls_go_low_softmax_exp_and_div_stay_float32(void **state) {
	(void)state;
	const tbc_dtype lows[] = {TBC_DT_F16, TBC_DT_BF16};
	for (int l = 0; l < 2; l++) {
		tbc_precision_stats st;
		tbc_module *m = lowered(block_text(), lows[l], true, NULL, &st);
		assert_no_cast_pairs(m);
		const tbc_op *mm0 = op_named_output(m, TBC_OP_MatMul, 0), *mm1 = op_named_output(m, TBC_OP_MatMul, 1);
		assert_non_null(mm0);
		assert_non_null(mm1);
		/* Both products compute in the low type, their weights stored in it. */
		for (int i = 0; i < 2; i++) {
			assert_int_equal(mm0->inputs[i]->type.dtype, lows[l]);
			assert_int_equal(mm1->inputs[i]->type.dtype, lows[l]);
		}
		assert_int_equal(mm0->inputs[1]->kind, TBC_VALUE_CONST);
		assert_int_equal(mm0->outputs[0]->type.dtype, lows[l]);
		/* The kept ops read float32. */
		for (const tbc_op *op = m->main->first; op; op = op->next)
			if (op->code == TBC_OP_Softmax || op->code == TBC_OP_Exp || op->code == TBC_OP_Div)
				assert_int_equal(op->inputs[0]->type.dtype, TBC_DT_F32);
		/* The outputs are float32 under their names. */
		assert_int_equal(m->main->n_outputs, 2);
		assert_string_equal(m->main->outputs[0]->name, "r");
		assert_int_equal(m->main->outputs[0]->type.dtype, TBC_DT_F32);
		assert_true(st.ops_lowered >= 4 && st.casts_inserted >= 3);
		/* Close to float32: the products round to 11 (f16) or 8 (bf16) bits. */
		tbc_module *ref = parse(block_text());
		float want0[32], want1[32], got0[32], got1[32];
		run(ref, want0, want1);
		run(m, got0, got1);
		double tol = lows[l] == TBC_DT_F16 ? 4e-3 : 3e-2;
		for (int i = 0; i < 32; i++) {
			if (fabs(got0[i] - want0[i]) > tol * (1 + fabs(want0[i])))
				fail_msg("%s r[%d] = %g, float32 %g", tbc_dtype_name(lows[l]), i, got0[i], want0[i]);
			if (fabs(got1[i] - want1[i]) > tol * (1 + fabs(want1[i])))
				fail_msg("%s q[%d] = %g, float32 %g", tbc_dtype_name(lows[l]), i, got1[i], want1[i]);
		}
		tbc_module_destroy(ref);
		tbc_module_destroy(m);
	}
}

static void excluded_ops_and_nodes_stay_float32(void **state) {
	(void)state;
	tbc_precision_stats st;
	tbc_module *m = lowered(block_text(), TBC_DT_F16, true, "MatMul", &st);
	assert_int_equal(st.ops_lowered, 0);
	assert_int_equal(st.casts_inserted, 0);
	for (const tbc_op *op = m->main->first; op; op = op->next) assert_int_not_equal(op->code, TBC_OP_Cast);
	tbc_module_destroy(m);
}

static void without_keep_io_types_the_inputs_are_lowered(void **state) {
	(void)state;
	tbc_module *m = lowered(block_text(), TBC_DT_F16, false, NULL, NULL);
	assert_int_equal(m->main->inputs[0]->type.dtype, TBC_DT_F16);
	/* The first product reads the input itself: no Cast before it. */
	assert_ptr_equal(op_named_output(m, TBC_OP_MatMul, 0)->inputs[0], m->main->inputs[0]);
	assert_no_cast_pairs(m);
	tbc_module_destroy(m);
}

/* A value an If branch reads keeps its type: the branch was typed for it. */
static void values_read_by_subgraphs_keep_float32(void **state) {
	(void)state;
	static const char *const text =
		"module ir_version 8 opset 17\n"
		"graph main(%cond: bool[], %x: f32[2,2], %w: f32[2,2]) {\n"
		"  %a: f32[2,2] = MatMul(%x, %w)\n"
		"  %r: f32[2,2] = Relu(%a)\n"
		"  %y: f32[2,2] = If(%cond) {\n"
		"    then_branch = graph then_body() {\n"
		"      %t: f32[2,2] = Neg(%r)\n"
		"      return %t\n"
		"    },\n"
		"    else_branch = graph else_body() {\n"
		"      return %r\n"
		"    }\n"
		"  } @if\n"
		"  return %y\n"
		"}\n";
	tbc_module *m = lowered(text, TBC_DT_F16, true, NULL, NULL);
	const tbc_op *iff = op_named_output(m, TBC_OP_If, 0);
	assert_non_null(iff);
	const tbc_graph *then = tbc_attr_graph(iff, "then_branch"), *els = tbc_attr_graph(iff, "else_branch");
	assert_int_equal(then->first->inputs[0]->type.dtype, TBC_DT_F32); /* Neg(%r) */
	assert_int_equal(els->outputs[0]->type.dtype, TBC_DT_F32);
	assert_int_equal(op_named_output(m, TBC_OP_MatMul, 0)->outputs[0]->type.dtype, TBC_DT_F16);
	assert_no_cast_pairs(m);
	tbc_module_destroy(m);
}

/* Models already in float16, and integer models, are not the pass's. */
static void other_types_are_left_alone(void **state) {
	(void)state;
	static const char *const text = "module ir_version 8 opset 17\n"
					"graph main(%x: f16[2,2], %w: f16[2,2], %i: i32[2,2]) {\n"
					"  %a: f16[2,2] = MatMul(%x, %w)\n"
					"  %b: i32[2,2] = MatMul(%i, %i)\n"
					"  return %a, %b\n"
					"}\n";
	tbc_precision_stats st;
	tbc_module *m = lowered(text, TBC_DT_BF16, true, NULL, &st);
	assert_int_equal(st.ops_lowered, 0);
	assert_int_equal(st.casts_inserted, 0);
	tbc_module_destroy(m);
}

/* fp8: a weight larger than folding keeps (64 KiB) is stored as float8
 * e4m3 and read through DequantizeLinear with one scale per output
 * channel (MatMul: its columns; Gemm with transB: its rows; Conv: its
 * filters); small weights, excluded nodes and activations stay float32. */
static char *fp8_text(void) {
	static char text[1 << 22];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[2,128], %%im: f32[1,32,4,4]) {\n");
	/* w [128,160] (80 KiB), g [128,160] read transposed, k [24,32,5,5]
	 * (75 KiB), small [128,4] (2 KiB). */
	const struct {
		const char *name;
		int rank;
		int dims[4];
	} w[] = {{"w", 2, {128, 160}}, {"g", 2, {128, 160}}, {"k", 4, {24, 32, 5, 5}}, {"small", 2, {128, 4}}};
	for (int k = 0; k < 4; k++) {
		int numel = 1;
		n += snprintf(text + n, sizeof text - (size_t)n, "  %%%s: f32[", w[k].name);
		for (int d = 0; d < w[k].rank; d++) {
			n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", d ? "," : "", w[k].dims[d]);
			numel *= w[k].dims[d];
		}
		n += snprintf(text + n, sizeof text - (size_t)n, "] = const [");
		/* Channels of very different magnitudes: per-channel scales matter. */
		for (int i = 0; i < numel; i++)
			n += snprintf(text + n, sizeof text - (size_t)n, "%s%.5g", i ? "," : "",
				      sin(0.37 * i + k) * (1 + (i % 7) * 10.0) * 0.01);
		n += snprintf(text + n, sizeof text - (size_t)n, "]\n");
	}
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%a: f32[2,160] = MatMul(%%x, %%w) @mm\n"
		 "  %%b: f32[2,128] = Gemm(%%a, %%g) {transB = 1} @gemm\n"
		 "  %%c: f32[2,4] = MatMul(%%b, %%small) @mm_small\n"
		 "  %%y: f32[1,24,4,4] = Conv(%%im, %%k) {pads = [2, 2, 2, 2]} @conv\n"
		 "  return %%c, %%y\n"
		 "}\n");
	return text;
}

static const tbc_op *dq_reader(const tbc_module *m, tbc_opcode code, int input) {
	const tbc_op *op = op_named_output(m, code, 0);
	assert_non_null(op);
	const tbc_value *v = op->inputs[input];
	return v->kind == TBC_VALUE_RESULT && v->def->code == TBC_OP_DequantizeLinear ? v->def : NULL;
}

static void fp8_stores_large_weights_as_e4m3_with_a_scale_per_output_channel(void **state) {
	(void)state;
	tbc_precision_stats st;
	tbc_module *m = lowered(fp8_text(), TBC_DT_F8E4M3FN, true, NULL, &st);
	const struct {
		tbc_opcode code;
		int64_t axis, channels;
	} want[] = {{TBC_OP_MatMul, 1, 160}, {TBC_OP_Gemm, 0, 128}, {TBC_OP_Conv, 0, 24}};
	for (int k = 0; k < 3; k++) {
		const tbc_op *dq = dq_reader(m, want[k].code, 1);
		assert_non_null(dq);
		assert_int_equal(dq->inputs[0]->kind, TBC_VALUE_CONST);
		assert_int_equal(dq->inputs[0]->type.dtype, TBC_DT_F8E4M3FN);
		assert_int_equal(dq->inputs[1]->type.dtype, TBC_DT_F32);
		assert_int_equal(dq->inputs[1]->constant->numel, want[k].channels);
		assert_int_equal(tbc_attr_int(dq, "axis", -1), want[k].axis);
		assert_int_equal(dq->outputs[0]->type.dtype, TBC_DT_F32);
	}
	assert_int_equal(st.ops_lowered, 3);
	/* The 2 KiB weight is not worth it (folding would make it float32). */
	const tbc_op *small = NULL;
	for (const tbc_op *op = m->main->first; op; op = op->next)
		if (op->code == TBC_OP_MatMul && !strcmp(op->name, "mm_small")) small = op;
	assert_non_null(small);
	assert_int_equal(small->inputs[1]->kind, TBC_VALUE_CONST);
	assert_int_equal(small->inputs[1]->type.dtype, TBC_DT_F32);
	/* Every weight is read within e4m3's rounding: the outputs stay close. */
	tbc_module *ref = parse(fp8_text());
	tbc_tensor *in[2];
	int64_t xd[2] = {2, 128}, id[4] = {1, 32, 4, 4};
	in[0] = tbc_tensor_create(TBC_DT_F32, 2, xd);
	in[1] = tbc_tensor_create(TBC_DT_F32, 4, id);
	for (int k = 0; k < 2; k++)
		for (int64_t i = 0; i < in[k]->numel; i++) /* uniform-ish in [-1, 1), no pattern the weights share */
			((float *)in[k]->data)[i] = (float)((uint32_t)(i * 2654435761u + (uint32_t)k * 97u) % 1000u) / 500.0f - 1.0f;
	tbc_tensor *got[2], *exp[2];
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_interpret(m, in, 2, got, 2, d), TBC_OK);
	assert_int_equal(tbc_interpret(ref, in, 2, exp, 2, d), TBC_OK);
	for (int k = 0; k < 2; k++) {
		double dot = 0, ng = 0, ne = 0;
		for (int64_t i = 0; i < exp[k]->numel; i++) {
			double g = ((float *)got[k]->data)[i], e = ((float *)exp[k]->data)[i];
			dot += g * e, ng += g * g, ne += e * e;
		}
		double cosine = dot / sqrt(ng * ne);
		if (cosine < 0.995) fail_msg("output %d: cosine %.6f", k, cosine);
		tbc_tensor_destroy(got[k]);
		tbc_tensor_destroy(exp[k]);
		tbc_tensor_destroy(in[k]);
	}
	tbc_diags_destroy(d);
	tbc_module_destroy(ref);
	tbc_module_destroy(m);
	/* An excluded node keeps its float32 weight. */
	m = lowered(fp8_text(), TBC_DT_F8E4M3FN, true, "gemm,Conv", &st);
	assert_int_equal(st.ops_lowered, 1);
	assert_non_null(dq_reader(m, TBC_OP_MatMul, 1));
	assert_null(dq_reader(m, TBC_OP_Gemm, 1));
	assert_null(dq_reader(m, TBC_OP_Conv, 1));
	tbc_module_destroy(m);
}

/* A model that carries its own DequantizeLinear (QDQ) keeps it: fp8 only
 * stores float32 constants, and a weight computed by DequantizeLinear is
 * not one. */
static void fp8_leaves_a_qdq_model_as_it_is(void **state) {
	(void)state;
	static char text[1 << 18];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 19\ngraph main(%%x: f32[2,128]) {\n"
					    "  %%q: i8[128,160] = const [");
	for (int i = 0; i < 128 * 160; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", i ? "," : "", i % 255 - 127);
	snprintf(text + n, sizeof text - (size_t)n,
		 "]\n"
		 "  %%s: f32[] = const [0.01]\n"
		 "  %%w: f32[128,160] = DequantizeLinear(%%q, %%s) @dq\n"
		 "  %%y: f32[2,160] = MatMul(%%x, %%w) @mm\n"
		 "  return %%y\n"
		 "}\n");
	tbc_precision_stats st;
	tbc_module *m = lowered(text, TBC_DT_F8E4M3FN, true, NULL, &st);
	assert_int_equal(st.ops_lowered, 0);
	const tbc_op *dq = dq_reader(m, TBC_OP_MatMul, 1);
	assert_non_null(dq);
	assert_int_equal(dq->inputs[0]->type.dtype, TBC_DT_I8);
	tbc_module_destroy(m);
}

/* Compiled, the fp8 model computes what the interpreter computes for the
 * lowered graph, and its artifact holds about a quarter of the bytes. */
static void fp8_compiled_agrees_with_the_interpreter_and_stores_a_quarter(void **state) {
	(void)state;
	tbc_module *m = parse(fp8_text());
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	tbc_compile_stats st32, st8;
	o.stats_out = &st32;
	tbc_diags *d = tbc_diags_create();
	tbc_jit *j32 = NULL, *j8 = NULL;
	assert_int_equal(tbc_jit_compile(m, &o, d, &j32), TBC_OK);
	o.precision = TBC_DT_F8E4M3FN;
	o.stats_out = &st8;
	assert_int_equal(tbc_jit_compile(m, &o, d, &j8), TBC_OK);
	/* The three large weights are a quarter; the small one stays. */
	double ratio = (double)st8.weights_bytes / (double)st32.weights_bytes;
	if (ratio > 0.27) fail_msg("weights %" PRIu64 " -> %" PRIu64 " bytes", st32.weights_bytes, st8.weights_bytes);
	tbc_module *low = lowered(fp8_text(), TBC_DT_F8E4M3FN, true, NULL, NULL);
	tbc_tensor *in[2];
	int64_t xd[2] = {2, 128}, id[4] = {1, 32, 4, 4};
	in[0] = tbc_tensor_create(TBC_DT_F32, 2, xd);
	in[1] = tbc_tensor_create(TBC_DT_F32, 4, id);
	for (int k = 0; k < 2; k++)
		for (int64_t i = 0; i < in[k]->numel; i++) ((float *)in[k]->data)[i] = (float)sin(0.3 * (double)i + k);
	tbc_tensor *got[2], *want[2];
	assert_int_equal(tbc_abi_run_serial(tbc_jit_descriptor(j8), in, 2, got, 2, d), TBC_OK);
	assert_int_equal(tbc_interpret(low, in, 2, want, 2, d), TBC_OK);
	for (int k = 0; k < 2; k++) {
		tbc_compare_result r;
		tbc_tensor_compare(got[k], want[k], 1e-4, 1e-5, &r);
		if (r.n_mismatched) fail_msg("output %d: %" PRId64 " elements differ (max abs diff %g)", k, r.n_mismatched, r.max_abs_diff);
		tbc_tensor_destroy(got[k]);
		tbc_tensor_destroy(want[k]);
		tbc_tensor_destroy(in[k]);
	}
	tbc_jit_destroy(j32);
	tbc_jit_destroy(j8);
	tbc_diags_destroy(d);
	tbc_module_destroy(low);
	tbc_module_destroy(m);
}

/* e5m2 where it holds a weight closer: every column of w has one entry of
 * magnitude 1 and the rest near 1e-5 of it -- below e4m3's smallest
 * subnormal at the channel's scale (2^-9 / 448), inside e5m2's range.
 * That weight is stored as e5m2, the ordinary one beside it as e4m3, and
 * compiled code computes what the interpreter computes for the lowered
 * graph. */
static void fp8_stores_a_weight_of_wide_range_as_e5m2(void **state) {
	(void)state;
	static char text[1 << 22];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 19\ngraph main(%%x: f32[2,128]) {\n");
	for (int k = 0; k < 2; k++) {
		n += snprintf(text + n, sizeof text - (size_t)n, "  %%w%d: f32[128,160] = const [", k);
		for (int i = 0; i < 128 * 160; i++) {
			/* uniform-ish in [-1, 1), no pattern the input shares */
			double u = (double)((uint32_t)((uint32_t)i * 2654435761u + (uint32_t)k * 97u) % 1000u) / 500.0 - 1.0;
			double v = u * (k == 0 ? 1.0 : (i / 160 == (i % 160) % 128 ? 1.0 : 1e-5));
			n += snprintf(text + n, sizeof text - (size_t)n, "%s%.6g", i ? "," : "", v);
		}
		n += snprintf(text + n, sizeof text - (size_t)n, "]\n");
	}
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%a: f32[2,160] = MatMul(%%x, %%w0) @ordinary\n"
		 "  %%b: f32[2,160] = MatMul(%%x, %%w1) @wide\n"
		 "  return %%a, %%b\n"
		 "}\n");
	tbc_precision_stats st;
	tbc_module *low = lowered(text, TBC_DT_F8E4M3FN, true, NULL, &st);
	assert_int_equal(st.ops_lowered, 2);
	assert_int_equal(st.weights_e5m2, 1);
	const tbc_op *mm[2] = {NULL, NULL};
	for (const tbc_op *op = low->main->first; op; op = op->next)
		if (op->code == TBC_OP_MatMul) mm[strcmp(op->name, "wide") == 0] = op;
	for (int k = 0; k < 2; k++) {
		assert_non_null(mm[k]);
		const tbc_value *w = mm[k]->inputs[1];
		assert_int_equal(w->kind, TBC_VALUE_RESULT);
		assert_int_equal(w->def->code, TBC_OP_DequantizeLinear);
		assert_int_equal(w->def->inputs[0]->type.dtype, k ? TBC_DT_F8E5M2 : TBC_DT_F8E4M3FN);
	}
	tbc_module *m = parse(text);
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.precision = TBC_DT_F8E4M3FN;
	tbc_diags *d = tbc_diags_create();
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(m, &o, d, &j), TBC_OK);
	int64_t xd[2] = {2, 128};
	tbc_tensor *in = tbc_tensor_create(TBC_DT_F32, 2, xd);
	for (int64_t i = 0; i < in->numel; i++) ((float *)in->data)[i] = (float)sin(0.3 * (double)i);
	tbc_tensor *got[2], *want[2], *exact[2]; /* the wide one: the outliers' rows of x dominate */
	assert_int_equal(tbc_abi_run_serial(tbc_jit_descriptor(j), &in, 1, got, 2, d), TBC_OK);
	assert_int_equal(tbc_interpret(low, &in, 1, want, 2, d), TBC_OK);
	assert_int_equal(tbc_interpret(m, &in, 1, exact, 2, d), TBC_OK);
	for (int k = 0; k < 2; k++) {
		tbc_compare_result r;
		tbc_tensor_compare(got[k], want[k], 1e-4, 1e-5, &r);
		if (r.n_mismatched) fail_msg("output %d: %" PRId64 " elements differ (max abs diff %g)", k, r.n_mismatched, r.max_abs_diff);
		/* and close to float32's */
		double dot = 0, ng = 0, ne = 0;
		for (int64_t i = 0; i < exact[k]->numel; i++) {
			double g = ((float *)got[k]->data)[i], e = ((float *)exact[k]->data)[i];
			dot += g * e, ng += g * g, ne += e * e;
		}
		if (dot / sqrt(ng * ne) < 0.995) fail_msg("output %d against float32: cosine %.6f", k, dot / sqrt(ng * ne));
		tbc_tensor_destroy(got[k]);
		tbc_tensor_destroy(want[k]);
		tbc_tensor_destroy(exact[k]);
	}
	tbc_tensor_destroy(in);
	tbc_jit_destroy(j);
	tbc_diags_destroy(d);
	tbc_module_destroy(low);
	tbc_module_destroy(m);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(matmuls_go_low_softmax_exp_and_div_stay_float32),
		cmocka_unit_test(excluded_ops_and_nodes_stay_float32),
		cmocka_unit_test(without_keep_io_types_the_inputs_are_lowered),
		cmocka_unit_test(values_read_by_subgraphs_keep_float32),
		cmocka_unit_test(other_types_are_left_alone),
		cmocka_unit_test(fp8_stores_large_weights_as_e4m3_with_a_scale_per_output_channel),
		cmocka_unit_test(fp8_compiled_agrees_with_the_interpreter_and_stores_a_quarter),
		cmocka_unit_test(fp8_leaves_a_qdq_model_as_it_is),
		cmocka_unit_test(fp8_stores_a_weight_of_wide_range_as_e5m2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
