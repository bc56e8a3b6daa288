/* Lowering of reductions, softmaxes, normalizations and fused reductions
 * against the reference interpreter: each test builds a small graph, runs it
 * with tbc_interpret, with the kernel IR evaluator (kir_program_eval:
 * lowering alone) and JIT-compiled for the host (tbc_jit_compile + a serial
 * host), and compares all three.  Fused tests run the fusion pass after the
 * interpreter and want a Fused op holding the reduction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <unistd.h>

#include "codegen/lower/lower.h"
#include "passes/passes.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"

static void check_rtol(model *md, tbc_value *out, double rtol) { check_outputs(md, 1, &out, rtol); }

static tbc_value *axes(model *md, int n, const double *v) {
	int64_t dims[1] = {n};
	return constant(md, TBC_DT_I64, 1, dims, v);
}

/* Reduce op `code` over x; ax NULL: no axes input. */
static tbc_op *reduce(model *md, tbc_opcode code, tbc_value *x, tbc_value *ax, int keepdims) {
	tbc_op *o = node(md, code, ax ? 2 : 1, x, ax, NULL);
	if (keepdims >= 0) tbc_op_add_attr(o, "keepdims", TBC_ATTR_INT)->i = keepdims;
	return o;
}

static void set_int(tbc_op *o, const char *name, int64_t v) { tbc_op_add_attr(o, name, TBC_ATTR_INT)->i = v; }
static void set_float(tbc_op *o, const char *name, double v) { tbc_op_add_attr(o, name, TBC_ATTR_FLOAT)->f = v; }

/* ---- Reduce* ------------------------------------------------------------------*/
/* Every Reduce* kind over the middle axis of a 2x3x4 f32 tensor, keepdims. */
static void test_reduce_kinds_middle_axis_f32(void **state) {
	(void)state;
	const tbc_opcode codes[] = {TBC_OP_ReduceSum, TBC_OP_ReduceMean, TBC_OP_ReduceProd, TBC_OP_ReduceMax,
				    TBC_OP_ReduceMin, TBC_OP_ReduceL1, TBC_OP_ReduceL2, TBC_OP_ReduceSumSquare,
				    TBC_OP_ReduceLogSum, TBC_OP_ReduceLogSumExp};
	for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
		model md = model_new();
		bool positive = codes[i] == TBC_OP_ReduceLogSum;
		tbc_value *x = input_sym(&md, TBC_DT_F32, "2,3,4", 3, positive ? 0.5 : -3, 3);
		const double a[] = {1};
		check_rtol(&md, reduce(&md, codes[i], x, axes(&md, 1, a), -1)->outputs[0], 1e-5);
	}
}

/* ReduceSum over axes {0, 2} without keepdims, f64: out[j] = sum_{i,k} x[i,j,k]. */
static void test_reduce_sum_two_axes_no_keepdims_f64(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F64, "2,3,4");
	const double a[] = {0, -1};
	check(&md, reduce(&md, TBC_OP_ReduceSum, x, axes(&md, 2, a), 0)->outputs[0]);
}

/* No axes: everything reduces to one element. */
static void test_reduce_mean_all_axes(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "3,5");
	check(&md, reduce(&md, TBC_OP_ReduceMean, x, NULL, 0)->outputs[0]);
}

/* noop_with_empty_axes and no axes: nothing reduces, SumSquare still squares. */
static void test_reduce_sum_square_noop_with_empty_axes(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3");
	tbc_op *o = reduce(&md, TBC_OP_ReduceSumSquare, x, NULL, 1);
	set_int(o, "noop_with_empty_axes", 1);
	check(&md, o->outputs[0]);
}

/* An empty reduction gives the identity: 0 for a sum, -inf for a max, 1 for a product. */
static void test_reduce_empty_axis_gives_identity(void **state) {
	(void)state;
	const tbc_opcode codes[] = {TBC_OP_ReduceSum, TBC_OP_ReduceMax, TBC_OP_ReduceProd, TBC_OP_ReduceMean};
	for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,0,3");
		const double a[] = {1};
		check(&md, reduce(&md, codes[i], x, axes(&md, 1, a), 1)->outputs[0]);
		md = model_new(); /* no output points at all */
		x = input(&md, TBC_DT_F32, "0,3");
		check(&md, reduce(&md, codes[i], x, axes(&md, 1, a), 1)->outputs[0]);
	}
}

/* Integers: exact, in 64 bits, wrapping to the type on store. */
static void test_reduce_integers(void **state) {
	(void)state;
	const tbc_opcode codes[] = {TBC_OP_ReduceSum, TBC_OP_ReduceMax, TBC_OP_ReduceMin, TBC_OP_ReduceProd,
				    TBC_OP_ReduceMean, TBC_OP_ReduceL1, TBC_OP_ReduceSumSquare, TBC_OP_ReduceL2};
	const tbc_dtype types[] = {TBC_DT_I32, TBC_DT_I64, TBC_DT_U8, TBC_DT_I8};
	for (size_t t = 0; t < sizeof types / sizeof *types; t++)
		for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, types[t], "3,4", 3, types[t] == TBC_DT_U8 ? 0 : -100, 100);
			const double a[] = {1};
			check(&md, reduce(&md, codes[i], x, axes(&md, 1, a), 0)->outputs[0]);
		}
}

/* A symbolic batch stays symbolic: reduce the last axis of [N, 4, 5]. */
static void test_reduce_symbolic_batch(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,4,5", 3, -2, 2);
	const double a[] = {2};
	check(&md, reduce(&md, TBC_OP_ReduceMax, x, axes(&md, 1, a), 1)->outputs[0]);
}

/* ReduceMax and ReduceMin of bools (any / all) over constant axes: the bool
 * enters the integer accumulator through a cast of an i1. */
static void test_reduce_max_min_of_bools(void **state) {
	(void)state;
	const double a[] = {1};
	for (int k = 0; k < 2; k++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_BOOL, "3,4,2");
		check(&md, reduce(&md, k ? TBC_OP_ReduceMin : TBC_OP_ReduceMax, x, axes(&md, 1, a), k)->outputs[0]);
	}
}

/* Axes from a graph input are known only while running: the output's dims
 * are computed (codegen/lower/reduce.c; its cases in
 * test_codegen_dyn_reduce.c). */
static void test_reduce_runtime_axes(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3");
	tbc_value *a = input_sym(&md, TBC_DT_I64, "1", 1, 0, 1);
	check(&md, reduce(&md, TBC_OP_ReduceSum, x, a, 1)->outputs[0]);
}

/* ---- ArgMax / ArgMin ----------------------------------------------------------*/
static void test_argmax_argmin(void **state) {
	(void)state;
	for (int last = 0; last < 2; last++)
		for (int keep = 0; keep < 2; keep++) {
			model md = model_new();
			/* Few distinct values, so ties happen. */
			tbc_value *x = input_sym(&md, TBC_DT_I32, "3,4,5", 3, 0, 3);
			tbc_op *o = node(&md, last ? TBC_OP_ArgMin : TBC_OP_ArgMax, 1, x, NULL, NULL);
			set_int(o, "axis", 1);
			set_int(o, "keepdims", keep);
			set_int(o, "select_last_index", last);
			check(&md, o->outputs[0]);
			md = model_new();
			x = input(&md, TBC_DT_F32, "3,4");
			o = node(&md, last ? TBC_OP_ArgMax : TBC_OP_ArgMin, 1, x, NULL, NULL);
			set_int(o, "axis", -1);
			set_int(o, "keepdims", keep);
			check(&md, o->outputs[0]);
		}
}

/* ---- CumSum / CumProd ----------------------------------------------------------*/
static void test_cumsum_cumprod(void **state) {
	(void)state;
	for (int v = 0; v < 8; v++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, v & 4 ? TBC_DT_I32 : TBC_DT_F32, "2,3,4", 3, -3, 3);
		const double a[] = {1};
		int64_t none[1] = {0};
		tbc_value *ax = constant(&md, TBC_DT_I64, 0, none, a);
		tbc_op *o = node(&md, v & 1 ? TBC_OP_CumProd : TBC_OP_CumSum, 2, x, ax, NULL);
		set_int(o, "exclusive", (v >> 1) & 1);
		set_int(o, "reverse", ((v >> 1) ^ v) & 1);
		check(&md, o->outputs[0]);
	}
}

/* ---- Softmax family ---------------------------------------------------------------*/
static void test_softmax_family(void **state) {
	(void)state;
	const tbc_opcode codes[] = {TBC_OP_Softmax, TBC_OP_LogSoftmax, TBC_OP_Hardmax};
	for (size_t i = 0; i < 3; i++)
		for (int axis = -1; axis < 2; axis++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, axis == 0 ? TBC_DT_F64 : TBC_DT_F32, "3,4,5", 3, -5, 5);
			tbc_op *o = node(&md, codes[i], 1, x, NULL, NULL);
			set_int(o, "axis", axis);
			check_rtol(&md, o->outputs[0], 1e-5);
		}
}

/* Large values: the max is subtracted first, so nothing overflows. */
static void test_softmax_large_values(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "2,6", 3, 500, 900);
	check(&md, op1(&md, TBC_OP_Softmax, x));
}

/* Softmax in its own type keeps each exp(x - max) in y between the sum's
 * pass and the last one: one exp in the kernel, not two.  An f16 softmax
 * computes in f32 and would round the kept values, so it computes exp in
 * both passes.  So does a device's (an OpenCL target), where the kept
 * exps would cost a store and a load more than the exp they save.  Rows of
 * 1, 7 and 300 (a vector loop and its remainder), f32 with values far
 * apart and f64, and f16, against the interpreter. */
static void test_softmax_one_exp_per_element(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_F16};
	static const char *const shapes[] = {"4,1", "3,7", "2,300"};
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	for (size_t t = 0; t < 3; t++) {
		for (int on_dev = 0; on_dev < 2; on_dev++) {
			g_target = on_dev ? &dev : NULL;
			model md = model_new();
			op1(&md, TBC_OP_Softmax, input_sym(&md, types[t], "2,300", 3, -5, 5));
			char *text = lowered_text(&md);
			assert_int_equal(text_count(text, "exp("), types[t] == TBC_DT_F16 || on_dev ? 2 : 1);
			free(text);
		}
		g_target = NULL;
		for (size_t v = 0; v < 3; v++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, types[t], shapes[v], 3, types[t] == TBC_DT_F16 ? -5 : -60, 5);
			check_rtol(&md, op1(&md, TBC_OP_Softmax, x), types[t] == TBC_DT_F16 ? 1e-2 : 1e-5);
		}
	}
}

/* ---- Normalizations -------------------------------------------------------------*/
/* LayerNormalization over the last two axes with Mean and InvStdDev outputs. */
static void test_layernorm_all_outputs(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,4"), *sc = input(&md, TBC_DT_F32, "3,4"), *b = input(&md, TBC_DT_F32, "4");
	tbc_value *ins[3] = {x, sc, b};
	tbc_op *o = tbc_op_new(md.m->main, TBC_OP_LayerNormalization, "ln", 3, ins, 3);
	set_int(o, "axis", 1);
	set_float(o, "epsilon", 1e-3);
	tbc_value *outs[3] = {o->outputs[0], o->outputs[1], o->outputs[2]};
	check_outputs(&md, 3, outs, 1e-5);
}

static void test_layernorm_no_bias_symbolic_f64(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F64, "N,5", 3, -2, 2), *sc = input(&md, TBC_DT_F64, "5");
	check(&md, op2(&md, TBC_OP_LayerNormalization, x, sc));
}

static void test_rmsnorm(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,8"), *sc = input(&md, TBC_DT_F32, "8");
	check(&md, op2(&md, TBC_OP_RMSNormalization, x, sc));
}

static void test_batchnorm_inference(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,4,5");
	tbc_value *p[4];
	for (int i = 0; i < 4; i++) p[i] = input_sym(&md, TBC_DT_F32, "3", 3, i == 3 ? 0.5 : -1, 2);
	tbc_value *ins[5] = {x, p[0], p[1], p[2], p[3]};
	check(&md, tbc_op_new(md.m->main, TBC_OP_BatchNormalization, "bn", 5, ins, 1)->outputs[0]);
}

static void test_instance_and_group_norm(void **state) {
	(void)state;
	for (int g = 0; g < 3; g++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,4,3,2");
		const char *pd = g == 2 ? "2" : "4"; /* GroupNormalization-18: per group */
		tbc_value *sc = input(&md, TBC_DT_F32, pd), *b = input(&md, TBC_DT_F32, pd);
		tbc_op *o = node(&md, g ? TBC_OP_GroupNormalization : TBC_OP_InstanceNormalization, 3, x, sc, b);
		if (g) set_int(o, "num_groups", 2);
		check(&md, o->outputs[0]);
	}
}

static void test_lp_mvn_lrn(void **state) {
	(void)state;
	for (int p = 1; p <= 2; p++) {
		model md = model_new();
		tbc_op *o = node(&md, TBC_OP_LpNormalization, 1, input(&md, TBC_DT_F32, "3,4"), NULL, NULL);
		set_int(o, "p", p);
		set_int(o, "axis", 0);
		check(&md, o->outputs[0]);
	}
	model md = model_new();
	check(&md, op1(&md, TBC_OP_MeanVarianceNormalization, input(&md, TBC_DT_F32, "2,3,2,2")));
	md = model_new();
	tbc_op *o = node(&md, TBC_OP_LRN, 1, input(&md, TBC_DT_F32, "2,5,3"), NULL, NULL);
	set_int(o, "size", 3);
	set_float(o, "alpha", 0.01);
	check(&md, o->outputs[0]);
}

/* ---- Fused reductions ------------------------------------------------------------*/
/* log(ReduceSum(exp(x), axis 1)): prologue Exp, epilogue Log, one kernel. */
static void test_fused_exp_sum_log(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "3,4,5");
	const double a[] = {1};
	tbc_value *e = op1(&md, TBC_OP_Exp, x);
	tbc_value *r = reduce(&md, TBC_OP_ReduceSum, e, axes(&md, 1, a), 1)->outputs[0];
	g_fuse = 1;
	check(&md, op1(&md, TBC_OP_Log, r));
	g_fuse = 0;
}

/* sqrt(ReduceMean((x - b)^2, axis -1, keepdims 0)) + c: b broadcast into the
 * input, c into the result. */
static void test_fused_mean_square_with_broadcasts(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,3,4", 2, -3, 3), *b = input(&md, TBC_DT_F32, "4"),
		  *c = input(&md, TBC_DT_F32, "3");
	const double a[] = {-1};
	tbc_value *d = op2(&md, TBC_OP_Sub, x, b);
	tbc_value *sq = op2(&md, TBC_OP_Mul, d, d);
	tbc_value *m = reduce(&md, TBC_OP_ReduceMean, sq, axes(&md, 1, a), 0)->outputs[0];
	g_fuse = 1;
	check(&md, op2(&md, TBC_OP_Add, op1(&md, TBC_OP_Sqrt, m), c));
	g_fuse = 0;
}

/* A prologue value also read outside the region is stored from the reduction
 * loop: out0 = x * 2, out1 = ReduceMax(x * 2, axes {0, 2}). */
static void test_fused_prologue_output(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,4");
	const double two[] = {2}, a[] = {0, 2};
	int64_t none[1] = {0};
	tbc_value *t = op2(&md, TBC_OP_Mul, x, constant(&md, TBC_DT_F32, 0, none, two));
	tbc_value *r = reduce(&md, TBC_OP_ReduceMax, t, axes(&md, 2, a), 1)->outputs[0];
	tbc_value *outs[2] = {t, op1(&md, TBC_OP_Neg, r)};
	g_fuse = 1;
	check_outputs(&md, 2, outs, 1e-5);
	g_fuse = 0;
}


/* ---- The devices' parallel form ---------------------------------------------------
 * Lowered for an OpenCL device (tbc_target_desc_opencl_default), a reduction
 * over 256 elements or more is a work-group per output point: each item
 * sums a strided part, a tree in local memory combines them.  The evaluator
 * runs the groups (checking the barriers and races); results match the
 * interpreter within the rounding a different order of the sum makes. */
static void test_reduce_kinds_as_work_groups(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	const tbc_opcode codes[] = {TBC_OP_ReduceSum, TBC_OP_ReduceMean, TBC_OP_ReduceProd, TBC_OP_ReduceMax,
				    TBC_OP_ReduceMin, TBC_OP_ReduceL1, TBC_OP_ReduceL2, TBC_OP_ReduceSumSquare,
				    TBC_OP_ReduceLogSum, TBC_OP_ReduceLogSumExp};
	for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
		model md = model_new();
		bool positive = codes[i] == TBC_OP_ReduceLogSum, prod = codes[i] == TBC_OP_ReduceProd;
		tbc_value *x = input_sym(&md, TBC_DT_F32, "3,300,2", 3, positive || prod ? 0.9 : -3, positive || prod ? 1.1 : 3);
		const double a[] = {1};
		check_rtol(&md, reduce(&md, codes[i], x, axes(&md, 1, a), -1)->outputs[0], 1e-5);
	}
	/* every axis (one point), integers, a symbolic row length */
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_I32, "5,70", 3, -100, 100);
	check_rtol(&md, reduce(&md, TBC_OP_ReduceSum, x, NULL, 0)->outputs[0], 0);
	md = model_new();
	x = input_sym(&md, TBC_DT_F32, "4,N", 1000, -1, 1);
	const double a1[] = {1};
	check_rtol(&md, reduce(&md, TBC_OP_ReduceMax, x, axes(&md, 1, a1), 1)->outputs[0], 0);
	md = model_new();
	x = input_sym(&md, TBC_DT_F32, "2,300", 3, -1, 1);
	reduce(&md, TBC_OP_ReduceSum, x, axes(&md, 1, a1), 0);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "group(64)"));
	assert_non_null(strstr(text, " grid {"));
	assert_non_null(strstr(text, "barrier"));
	free(text);
	g_target = NULL;
}

/* Softmaxes, normalizations and fused reductions on a device: a long row
 * (256 elements or more, or of symbolic length) is a work-group's, its sums
 * and maxima combined by trees; shorter rows are one work-item each over a
 * flat grid.  Hardmax with a tied maximum and NaNs (the first wins).  Rows that do not divide the group (300), of one element (a
 * symbolic length of 1), long ones (1000) and strided ones (the middle
 * axis), against the interpreter. */
static void test_softmax_norms_fused_as_work_groups(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	const tbc_opcode sm[] = {TBC_OP_Softmax, TBC_OP_LogSoftmax, TBC_OP_Hardmax};
	const char *shapes[] = {"3,300", "2,N", "2,N", "2,300,3", "2,5"};
	const int64_t syms[] = {3, 1, 1000, 3, 3};
	const int axes_of[] = {-1, -1, -1, 1, -1};
	for (size_t i = 0; i < 3; i++)
		for (size_t v = 0; v < 5; v++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, TBC_DT_F32, shapes[v], syms[v], -5, 5);
			tbc_tensor *t = md.in[md.n_in - 1];
			float *p = t->data;
			if (sm[i] == TBC_OP_Hardmax && v == 0) p[5] = p[200] = 100, p[300 + 250] = NAN, p[600 + 7] = p[600 + 9] = NAN;
			tbc_op *o = node(&md, sm[i], 1, x, NULL, NULL);
			set_int(o, "axis", axes_of[v]);
			check_rtol(&md, o->outputs[0], 1e-5);
		}
	model md = model_new();
	set_int(node(&md, TBC_OP_Softmax, 1, input_sym(&md, TBC_DT_F32, "2,300", 3, -1, 1), NULL, NULL), "axis", -1);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "group(64)"));
	assert_non_null(strstr(text, "barrier"));
	free(text);

	md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,100"), *sc = input(&md, TBC_DT_F32, "3,100"),
		  *b = input(&md, TBC_DT_F32, "100");
	tbc_value *ins[3] = {x, sc, b};
	tbc_op *o = tbc_op_new(md.m->main, TBC_OP_LayerNormalization, "ln", 3, ins, 3);
	set_int(o, "axis", 1);
	tbc_value *outs[3] = {o->outputs[0], o->outputs[1], o->outputs[2]};
	check_outputs(&md, 3, outs, 1e-5);
	for (int64_t n = 1; n <= 1000; n *= 10) {
		md = model_new();
		check(&md, op2(&md, TBC_OP_RMSNormalization, input_sym(&md, TBC_DT_F32, "3,N", n, -2, 2),
			       input_sym(&md, TBC_DT_F32, "N", n, -2, 2)));
	}
	for (int g = 0; g < 2; g++) {
		md = model_new();
		tbc_value *xi = input(&md, TBC_DT_F32, "2,4,20,20");
		tbc_value *si = input(&md, TBC_DT_F32, "4"), *bi = input(&md, TBC_DT_F32, "4");
		o = node(&md, g ? TBC_OP_GroupNormalization : TBC_OP_InstanceNormalization, 3, xi, si, bi);
		if (g) set_int(o, "num_groups", 2);
		check(&md, o->outputs[0]);
	}
	for (int p = 1; p <= 2; p++) {
		md = model_new();
		o = node(&md, TBC_OP_LpNormalization, 1, input(&md, TBC_DT_F32, "3,300"), NULL, NULL);
		set_int(o, "p", p);
		check(&md, o->outputs[0]);
	}
	md = model_new();
	check(&md, op1(&md, TBC_OP_MeanVarianceNormalization, input(&md, TBC_DT_F32, "2,3,16,16")));
	md = model_new();
	const double a[] = {1};
	tbc_value *e = op1(&md, TBC_OP_Exp, input(&md, TBC_DT_F32, "3,300,2"));
	tbc_value *r = reduce(&md, TBC_OP_ReduceSum, e, axes(&md, 1, a), 1)->outputs[0];
	g_fuse = 1;
	check(&md, op1(&md, TBC_OP_Log, r));
	g_fuse = 0;
	g_target = NULL;
}

/* ArgMax/ArgMin on a device: a long row is a work-group's, the items'
 * candidates combined by a tree that keeps the scan's rules (the first
 * extreme, or the last with select_last_index; NaN wins).  Few distinct
 * values make ties; NaNs are planted at both ends and in the middle. */
static void test_argmax_argmin_as_work_groups(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	const char *shapes[] = {"2,300", "2,N", "2,N", "2,300,3"};
	const int64_t syms[] = {3, 1, 1000, 3};
	const int axis[] = {-1, 1, 1, 1};
	for (int last = 0; last < 2; last++)
		for (int mx = 0; mx < 2; mx++)
			for (size_t v = 0; v < 4; v++)
				for (int f = 0; f < 2; f++) {
					model md = model_new();
					tbc_value *x = input_sym(&md, f ? TBC_DT_F32 : TBC_DT_I32, shapes[v], syms[v], 0, 3);
					tbc_tensor *t = md.in[md.n_in - 1];
					if (f && t->numel > 7) {
						float *p = t->data;
						p[1] = p[t->numel - 2] = p[t->numel / 2] = NAN;
					}
					tbc_op *o = node(&md, mx ? TBC_OP_ArgMax : TBC_OP_ArgMin, 1, x, NULL, NULL);
					set_int(o, "axis", axis[v]);
					set_int(o, "select_last_index", last);
					check(&md, o->outputs[0]);
				}
	model md = model_new();
	set_int(node(&md, TBC_OP_ArgMax, 1, input_sym(&md, TBC_DT_F32, "2,300", 3, -1, 1), NULL, NULL), "axis", 1);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "group(64)"));
	free(text);
	g_target = NULL;
}

/* CumSum/CumProd on a device: a long line is a work-group's (chunk totals,
 * then each chunk rescanned from the totals before it), every exclusive and
 * reverse combination, lines that do not divide the group, of one element
 * and long, contiguous and strided, integers (exact) and floats. */
static void test_cumsum_cumprod_as_work_groups(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	const char *shapes[] = {"2,300", "2,N", "2,N", "2,300,3"};
	const int64_t syms[] = {3, 1, 1000, 3};
	for (int v = 0; v < 8; v++)
		for (size_t sh = 0; sh < 4; sh++) {
			model md = model_new();
			bool prod = v & 1, ints = v & 4;
			tbc_value *x = input_sym(&md, ints ? TBC_DT_I32 : TBC_DT_F32, shapes[sh], syms[sh], prod ? 0.99 : -3,
						 prod ? 1.01 : 3);
			const double a[] = {1};
			int64_t none[1] = {0};
			tbc_op *o = node(&md, prod ? TBC_OP_CumProd : TBC_OP_CumSum, 2, x, constant(&md, TBC_DT_I64, 0, none, a), NULL);
			set_int(o, "exclusive", (v >> 1) & 1);
			set_int(o, "reverse", ((v >> 1) ^ v) & 1);
			check_rtol(&md, o->outputs[0], 1e-5);
		}
	model md = model_new();
	const double a[] = {1};
	int64_t none[1] = {0};
	node(&md, TBC_OP_CumSum, 2, input_sym(&md, TBC_DT_F32, "2,300", 3, -1, 1), constant(&md, TBC_DT_I64, 0, none, a), NULL);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "group(64)"));
	free(text);
	g_target = NULL;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reduce_kinds_middle_axis_f32),
		cmocka_unit_test(test_reduce_kinds_as_work_groups),
		cmocka_unit_test(test_softmax_norms_fused_as_work_groups),
		cmocka_unit_test(test_argmax_argmin_as_work_groups),
		cmocka_unit_test(test_cumsum_cumprod_as_work_groups),
		cmocka_unit_test(test_reduce_sum_two_axes_no_keepdims_f64),
		cmocka_unit_test(test_reduce_mean_all_axes),
		cmocka_unit_test(test_reduce_sum_square_noop_with_empty_axes),
		cmocka_unit_test(test_reduce_empty_axis_gives_identity),
		cmocka_unit_test(test_reduce_integers),
		cmocka_unit_test(test_reduce_symbolic_batch),
		cmocka_unit_test(test_reduce_max_min_of_bools),
		cmocka_unit_test(test_reduce_runtime_axes),
		cmocka_unit_test(test_argmax_argmin),
		cmocka_unit_test(test_cumsum_cumprod),
		cmocka_unit_test(test_softmax_family),
		cmocka_unit_test(test_softmax_large_values),
		cmocka_unit_test(test_softmax_one_exp_per_element),
		cmocka_unit_test(test_layernorm_all_outputs),
		cmocka_unit_test(test_layernorm_no_bias_symbolic_f64),
		cmocka_unit_test(test_rmsnorm),
		cmocka_unit_test(test_batchnorm_inference),
		cmocka_unit_test(test_instance_and_group_norm),
		cmocka_unit_test(test_lp_mvn_lrn),
		cmocka_unit_test(test_fused_exp_sum_log),
		cmocka_unit_test(test_fused_mean_square_with_broadcasts),
		cmocka_unit_test(test_fused_prologue_output),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
