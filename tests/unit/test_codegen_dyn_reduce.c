/* Reduce* with axes given while running (codegen/lower/reduce.c): the
 * axes are a graph input, so which dims reduce, and the output's dims, are
 * known only from the data.  Each case runs through the interpreter, the
 * kernel IR evaluator and the JIT; bad axes fail the run as they fail the
 * interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/support/codegen_check.h"

#define VALS(...) ((const double[]){__VA_ARGS__})
#define NV(...) (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
/* Axes as a graph input of static length. */
#define AXES(md, ...) values_input(md, TBC_DT_I64, NV(__VA_ARGS__), VALS(__VA_ARGS__))

static const tbc_opcode all_kinds[] = {TBC_OP_ReduceSum, TBC_OP_ReduceMean, TBC_OP_ReduceProd, TBC_OP_ReduceMax,
				       TBC_OP_ReduceMin, TBC_OP_ReduceL1, TBC_OP_ReduceL2, TBC_OP_ReduceSumSquare,
				       TBC_OP_ReduceLogSum, TBC_OP_ReduceLogSumExp};
#define N_KINDS (sizeof all_kinds / sizeof *all_kinds)

/* Reduce op `code` over x with axes ax; keepdims/noop < 0: the default. */
static tbc_value *reduce(model *md, tbc_opcode code, tbc_value *x, tbc_value *ax, int keepdims, int noop) {
	tbc_op *o = node(md, code, 2, x, ax, NULL);
	if (keepdims >= 0) attr_int(o, "keepdims", keepdims);
	if (noop >= 0) attr_int(o, "noop_with_empty_axes", noop);
	return o->outputs[0];
}

/* Axes as a graph input of symbolic length M (n values while running). */
static tbc_value *axes_of_unknown_length(model *md, int n, const double *v) {
	tbc_value *a = input_sym(md, TBC_DT_I64, "M", n, 0, 1);
	tbc_tensor *t = md->in[md->n_in - 1];
	for (int i = 0; i < n; i++) tbc_set_i64(t, i, (int64_t)v[i]);
	return a;
}

static tbc_value *x_for(model *md, tbc_opcode code, tbc_dtype dt, const char *dims) {
	bool positive = code == TBC_OP_ReduceLogSum; /* log of a positive sum */
	return input_sym(md, dt, dims, 3, positive ? 0.5 : -3, 3);
}

static void check_rtol(model *md, tbc_value *out, double rtol) { check_outputs(md, 1, &out, rtol); }

/* Every kind, axes {1} of a 2x3x4 f32 tensor, with and without keepdims:
 * out[i,k] = reduce_j x[i,j,k]. */
static void test_every_kind_over_the_middle_axis(void **state) {
	(void)state;
	for (size_t i = 0; i < N_KINDS; i++)
		for (int keep = 0; keep <= 1; keep++) {
			model md = model_new();
			tbc_value *x = x_for(&md, all_kinds[i], TBC_DT_F32, "2,3,4");
			check_rtol(&md, reduce(&md, all_kinds[i], x, AXES(&md, 1), keep, -1), 1e-5);
		}
}

/* Negative axes, several axes in any order, keepdims or not. */
static void test_negative_and_several_axes(void **state) {
	(void)state;
	for (size_t i = 0; i < N_KINDS; i++) {
		model md = model_new();
		tbc_value *x = x_for(&md, all_kinds[i], TBC_DT_F32, "2,3,4,2");
		check_rtol(&md, reduce(&md, all_kinds[i], x, AXES(&md, -1, 1), 0, -1), 1e-5);
		md = model_new();
		x = x_for(&md, all_kinds[i], TBC_DT_F64, "3,2,4");
		check_rtol(&md, reduce(&md, all_kinds[i], x, AXES(&md, 2, -3), 1, -1), 1e-9);
	}
}

/* Every axis without keepdims: a scalar output, every dim known at compile
 * time, so the op reaches the constant-axes lowering, which hands it on. */
static void test_every_axis_to_a_scalar(void **state) {
	(void)state;
	model md = model_new();
	check(&md, reduce(&md, TBC_OP_ReduceSum, input(&md, TBC_DT_F32, "3,4"), AXES(&md, 1, 0), 0, -1));
	md = model_new(); /* dims of size 1 only: the output's dims are known too */
	check(&md, reduce(&md, TBC_OP_ReduceMax, input(&md, TBC_DT_I32, "1,1"), AXES(&md, 0), 1, -1));
}

/* Axes of a length known only while running: none (every dim reduces, or
 * with noop_with_empty_axes none does, SumSquare still squaring), or some. */
static void test_axes_of_unknown_length(void **state) {
	(void)state;
	for (size_t i = 0; i < N_KINDS; i++)
		for (int noop = 0; noop <= 1; noop++) {
			model md = model_new();
			tbc_value *x = x_for(&md, all_kinds[i], TBC_DT_F32, "2,3");
			check_rtol(&md, reduce(&md, all_kinds[i], x, axes_of_unknown_length(&md, 0, NULL), 1, noop), 1e-5);
		}
	model md = model_new();
	check(&md, reduce(&md, TBC_OP_ReduceL1, input(&md, TBC_DT_F32, "2,3,4"), axes_of_unknown_length(&md, 2, VALS(2, 0)), 1, 1));
	md = model_new(); /* a scalar input and no axes */
	check(&md, reduce(&md, TBC_OP_ReduceSumSquare, input(&md, TBC_DT_F32, ""), axes_of_unknown_length(&md, 0, NULL), 1, 1));
}

/* A dynamic batch, reduced or kept. */
static void test_symbolic_batch(void **state) {
	(void)state;
	model md = model_new();
	check(&md, reduce(&md, TBC_OP_ReduceMean, input_sym(&md, TBC_DT_F32, "N,3,4", 5, -3, 3), AXES(&md, 0), 0, -1));
	md = model_new();
	check(&md, reduce(&md, TBC_OP_ReduceLogSumExp, input_sym(&md, TBC_DT_F32, "N,3,4", 5, -3, 3), AXES(&md, -1, 1), 1, -1));
}

/* Empty tensors: an empty reduced dim gives the identity (sum 0, prod 1,
 * max -inf, mean NaN); an empty kept dim gives an empty output. */
static void test_empty_sets(void **state) {
	(void)state;
	for (size_t i = 0; i < N_KINDS; i++) {
		model md = model_new();
		check(&md, reduce(&md, all_kinds[i], input(&md, TBC_DT_F32, "2,0,4"), AXES(&md, 1), 1, -1));
		md = model_new();
		check(&md, reduce(&md, all_kinds[i], input(&md, TBC_DT_F32, "2,0,4"), AXES(&md, 2), 0, -1));
	}
}

/* Every dtype the reduction lowers: floats (narrow ones accumulate in f64
 * and round once), integers exactly in 64 bits (wrapping), bool for max/min. */
static void test_dtypes(void **state) {
	(void)state;
	static const tbc_dtype floats[] = {TBC_DT_F16, TBC_DT_BF16, TBC_DT_F64};
	for (size_t t = 0; t < sizeof floats / sizeof *floats; t++)
		for (size_t i = 0; i < N_KINDS; i++) {
			model md = model_new();
			tbc_value *x = x_for(&md, all_kinds[i], floats[t], "3,4");
			check_rtol(&md, reduce(&md, all_kinds[i], x, AXES(&md, 0), 1, -1), 1e-2);
		}
	static const tbc_dtype ints[] = {TBC_DT_I8, TBC_DT_I16, TBC_DT_I32, TBC_DT_I64,
					 TBC_DT_U8, TBC_DT_U16, TBC_DT_U32, TBC_DT_U64};
	static const tbc_opcode exact[] = {TBC_OP_ReduceSum, TBC_OP_ReduceMean, TBC_OP_ReduceProd, TBC_OP_ReduceMax,
					   TBC_OP_ReduceMin, TBC_OP_ReduceL1, TBC_OP_ReduceL2, TBC_OP_ReduceSumSquare};
	for (size_t t = 0; t < sizeof ints / sizeof *ints; t++)
		for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
			model md = model_new();
			bool sgn = ints[t] == TBC_DT_I8 || ints[t] == TBC_DT_I16 || ints[t] == TBC_DT_I32 || ints[t] == TBC_DT_I64;
			tbc_value *x = input_sym(&md, ints[t], "3,4", 3, sgn ? -100 : 0, 100);
			check(&md, reduce(&md, exact[i], x, AXES(&md, -1), 0, -1));
		}
	for (int max = 0; max <= 1; max++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_BOOL, "4,5", 3, 0, 1);
		check(&md, reduce(&md, max ? TBC_OP_ReduceMax : TBC_OP_ReduceMin, x, AXES(&md, 1), 1, -1));
	}
	model md = model_new(); /* axes as int32 */
	check(&md, reduce(&md, TBC_OP_ReduceSum, input(&md, TBC_DT_F32, "3,4"), values_input(&md, TBC_DT_I32, 1, VALS(1)), 0, -1));
}

/* The computed output dims flow into later kernels. */
static void test_computed_dims_feed_later_ops(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,4");
	tbc_value *m = reduce(&md, TBC_OP_ReduceMax, x, AXES(&md, 2), 1, -1);
	tbc_value *e = op1(&md, TBC_OP_Exp, op2(&md, TBC_OP_Sub, x, m));
	check(&md, reduce(&md, TBC_OP_ReduceSum, e, AXES(&md, 2), 1, -1));
}

/* A repeated axis (either spelling) and an axis out of range fail the run;
 * the first bad axis in order decides the message. */
static void test_bad_axes_fail_the_run(void **state) {
	(void)state;
	model md = model_new();
	check_run_fails_as(&md, reduce(&md, TBC_OP_ReduceSum, input(&md, TBC_DT_F32, "2,3"), AXES(&md, 1, 1), 1, -1), "axis 1 is repeated",
		 "axis 1 is repeated");
	md = model_new();
	check_run_fails_as(&md, reduce(&md, TBC_OP_ReduceMax, input(&md, TBC_DT_F32, "2,3"), AXES(&md, 0, -2), 0, -1),
		 "axis -2 is repeated", "axis -2 is repeated");
	md = model_new();
	check_run_fails_as(&md, reduce(&md, TBC_OP_ReduceMean, input(&md, TBC_DT_F32, "2,3"), AXES(&md, 2), 1, -1),
		 "axis 2 is out of range for rank 2", "out of range for rank 2");
	md = model_new();
	check_run_fails_as(&md, reduce(&md, TBC_OP_ReduceL2, input(&md, TBC_DT_F32, "2,3"), AXES(&md, -3, 0), 0, -1),
		 "axis -3 is out of range for rank 2", "out of range for rank 2");
	md = model_new(); /* the repeat comes first */
	check_run_fails_as(&md, reduce(&md, TBC_OP_ReduceProd, input(&md, TBC_DT_F32, "2,3,4"), axes_of_unknown_length(&md, 3, VALS(-1, 2, 7)), 1, -1),
		 "axis 2 is repeated", "axis 2 is repeated");
}

/* Without keepdims, axes of unknown length leave the output's rank to the
 * data: refused at compile time (ranks are fixed when compiling). */
static void test_rank_given_by_the_data_is_refused(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *y = reduce(&md, TBC_OP_ReduceSum, input(&md, TBC_DT_F32, "2,3"), axes_of_unknown_length(&md, 1, VALS(0)), 0, -1);
	check_lowering_fails(&md, y, TBC_ERR_UNSUPPORTED, "no lowering yet");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_kind_over_the_middle_axis),
		cmocka_unit_test(test_negative_and_several_axes),
		cmocka_unit_test(test_every_axis_to_a_scalar),
		cmocka_unit_test(test_axes_of_unknown_length),
		cmocka_unit_test(test_symbolic_batch),
		cmocka_unit_test(test_empty_sets),
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_computed_dims_feed_later_ops),
		cmocka_unit_test(test_bad_axes_fail_the_run),
		cmocka_unit_test(test_rank_given_by_the_data_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
