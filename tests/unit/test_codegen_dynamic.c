/* Data-dependent shapes: output dims given by a tensor's values while
 * running (codegen/lower/shape.c).  Each case runs through the
 * interpreter, the kernel IR evaluator and the JIT; the shape kernel's
 * checks fail the run where the interpreter reports an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tests/unit/support/codegen_check.h"

#define VALS(...) ((const double[]){__VA_ARGS__})
#define NV(...) (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define SHAPE(md, ...) values_input(md, TBC_DT_I64, NV(__VA_ARGS__), VALS(__VA_ARGS__))

static tbc_value *reshape(model *md, tbc_value *x, tbc_value *shape, bool allowzero) {
	tbc_op *o = node(md, TBC_OP_Reshape, 2, x, shape, NULL);
	if (allowzero) attr_int(o, "allowzero", 1);
	return o->outputs[0];
}

/* Reshape to a shape given while running: -1 inferred, 0 copied. */
static void test_reshape_to_a_shape_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	check(&md, reshape(&md, input(&md, TBC_DT_F32, "2,3,4"), SHAPE(&md, 4, -1), false));
	md = model_new();
	check(&md, reshape(&md, input(&md, TBC_DT_I8, "2,3,4"), SHAPE(&md, 0, 2, -1, 1), false));
	md = model_new(); /* allowzero keeps the 0: an empty tensor */
	check(&md, reshape(&md, input(&md, TBC_DT_F16, "0,3"), SHAPE(&md, 3, 0), true));
}

/* The computed dims flow into later kernels: Reshape then Relu then
 * Reshape back, with a symbolic batch. */
static void test_computed_dims_feed_later_kernels(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,4,6", 5, -3, 3);
	tbc_value *flat = reshape(&md, x, SHAPE(&md, -1, 12), false);
	tbc_value *r = op1(&md, TBC_OP_Relu, flat);
	tbc_value *y = op2(&md, TBC_OP_Add, r, op1(&md, TBC_OP_Neg, r));
	check(&md, reshape(&md, y, SHAPE(&md, 2, -1, 3), false));
}

/* A constant shape with -1 and a dynamic batch: inference cannot know the
 * inferred dim (N * 24 / 12), the shape kernel computes it. */
static void test_reshape_of_a_dynamic_batch(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,4,6", 3, -3, 3);
	int64_t d1[1] = {2};
	tbc_value *shape = constant(&md, TBC_DT_I64, 1, d1, VALS(-1, 12));
	check(&md, op1(&md, TBC_OP_Relu, reshape(&md, x, shape, false)));
}

static void test_reshape_errors_fail_the_run(void **state) {
	(void)state;
	model md = model_new();
	check_run_fails(&md, reshape(&md, input(&md, TBC_DT_F32, "2,3"), SHAPE(&md, -1, -1), false));
	md = model_new();
	check_run_fails(&md, reshape(&md, input(&md, TBC_DT_F32, "2,3"), SHAPE(&md, 4, 2), false));
	md = model_new();
	check_run_fails(&md, reshape(&md, input(&md, TBC_DT_F32, "2,3"), SHAPE(&md, 4, -1), false));
	md = model_new();
	check_run_fails(&md, reshape(&md, input(&md, TBC_DT_F32, "2,3"), SHAPE(&md, 6, -2), false));
	md = model_new();
	check_run_fails(&md, reshape(&md, input(&md, TBC_DT_F32, "2,3"), SHAPE(&md, 0, -1), true));
}

static void test_unsqueeze_and_squeeze_with_axes_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	check(&md, node(&md, TBC_OP_Unsqueeze, 2, input(&md, TBC_DT_F32, "3,4"), SHAPE(&md, 2, 0, -1), NULL)->outputs[0]);
	md = model_new();
	check(&md, node(&md, TBC_OP_Squeeze, 2, input(&md, TBC_DT_I32, "1,3,1,4"), SHAPE(&md, -2, 0), NULL)->outputs[0]);
	md = model_new(); /* an axis repeated, an axis out of range, a dim that is not 1 */
	check_run_fails(&md, node(&md, TBC_OP_Unsqueeze, 2, input(&md, TBC_DT_F32, "3"), SHAPE(&md, 1, 1), NULL)->outputs[0]);
	md = model_new();
	check_run_fails(&md, node(&md, TBC_OP_Unsqueeze, 2, input(&md, TBC_DT_F32, "3"), SHAPE(&md, 2), NULL)->outputs[0]);
	md = model_new();
	check_run_fails(&md, node(&md, TBC_OP_Squeeze, 2, input(&md, TBC_DT_F32, "2,1"), SHAPE(&md, 0), NULL)->outputs[0]);
}

static void test_expand_to_a_shape_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	check(&md, node(&md, TBC_OP_Expand, 2, input(&md, TBC_DT_F32, "3,1"), SHAPE(&md, 2, 1, 6), NULL)->outputs[0]);
	md = model_new(); /* the shape shorter than the input; 1 keeps the input's dim */
	check(&md, node(&md, TBC_OP_Expand, 2, input(&md, TBC_DT_BF16, "2,3,1"), SHAPE(&md, 1, 4), NULL)->outputs[0]);
	md = model_new();
	check_run_fails(&md, node(&md, TBC_OP_Expand, 2, input(&md, TBC_DT_F32, "3"), SHAPE(&md, 2, 4), NULL)->outputs[0]);
}

static void test_tile_constant_of_shape_and_range_while_running(void **state) {
	(void)state;
	model md = model_new();
	check(&md, node(&md, TBC_OP_Tile, 2, input(&md, TBC_DT_U8, "2,3"), SHAPE(&md, 3, 2), NULL)->outputs[0]);
	md = model_new();
	check(&md, node(&md, TBC_OP_ConstantOfShape, 1, SHAPE(&md, 2, 0, 3), NULL, NULL)->outputs[0]);
	md = model_new();
	check(&md, node(&md, TBC_OP_ConstantOfShape, 1, SHAPE(&md, 4, 5), NULL, NULL)->outputs[0]);
	/* Range: integers (a negative delta, an inexact count), floats, empty. */
	static const struct {
		tbc_dtype dt;
		double start, limit, delta;
	} ranges[] = {{TBC_DT_I32, 10, 1, -4}, {TBC_DT_I64, -3, 7, 3}, {TBC_DT_F32, 0.5, 3.2, 0.7},
		      {TBC_DT_F64, 1, 1, 1},   {TBC_DT_F16, 1, 4, 0.5}, {TBC_DT_I16, 5, 0, 1}};
	for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
		md = model_new();
		tbc_value *a = values_input(&md, ranges[i].dt, 0, &ranges[i].start);
		tbc_value *b = values_input(&md, ranges[i].dt, 0, &ranges[i].limit);
		tbc_value *c = values_input(&md, ranges[i].dt, 0, &ranges[i].delta);
		check(&md, node(&md, TBC_OP_Range, 3, a, b, c)->outputs[0]);
	}
	md = model_new(); /* a zero delta */
	double z = 0, one = 1;
	tbc_value *a = values_input(&md, TBC_DT_I64, 0, &one), *b = values_input(&md, TBC_DT_I64, 0, &one);
	check_run_fails(&md, node(&md, TBC_OP_Range, 3, a, b, values_input(&md, TBC_DT_I64, 0, &z))->outputs[0]);
}

/* Elementwise ops over computed dims broadcast them while running. */
static void test_broadcast_of_computed_dims(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = reshape(&md, input(&md, TBC_DT_F32, "6"), SHAPE(&md, 3, 2), false);
	tbc_value *b = reshape(&md, input(&md, TBC_DT_F32, "2"), SHAPE(&md, 1, 2), false);
	check(&md, op2(&md, TBC_OP_Mul, a, b));
	md = model_new(); /* 3 against 2: the run fails */
	a = reshape(&md, input(&md, TBC_DT_F32, "6"), SHAPE(&md, 3, 2), false);
	b = reshape(&md, input(&md, TBC_DT_F32, "4"), SHAPE(&md, 2, 2), false);
	check_run_fails(&md, op2(&md, TBC_OP_Sub, a, b));
}

/* Squeeze without axes over a symbolic dim: compiled code fixes the rank
 * assuming the dim is not 1 (the fold pass infers with static ranks) and
 * checks that while running; the interpreter, which needs no fixed rank,
 * squeezes it. */
static void test_squeeze_without_axes_keeps_symbolic_dims(void **state) {
	(void)state;
	g_fold = true;
	model md = model_new();
	check(&md, op1(&md, TBC_OP_Relu, op1(&md, TBC_OP_Squeeze, input_sym(&md, TBC_DT_F32, "N,1,3,1", 2, -3, 3))));
	md = model_new(); /* a computed dim (a shape given while running) */
	tbc_value *r = reshape(&md, input(&md, TBC_DT_F32, "2,1,3"), SHAPE(&md, 2, 1, 3), false);
	tbc_value *y = op1(&md, TBC_OP_Squeeze, r);
	tbc_graph_add_output(md.m->main, y);
	check_compiled_run_fails(&md, "input dim 1 is 1 while running: Squeeze without axes drops it, but the compiled "
				      "code fixed the output's rank at 3");
	md = model_new();
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Squeeze, input_sym(&md, TBC_DT_F32, "N,1,3", 1, -3, 3)));
	check_compiled_run_fails(&md, "(Squeeze): input dim 0 is 1 while running");
	g_fold = false;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reshape_to_a_shape_given_while_running),
		cmocka_unit_test(test_computed_dims_feed_later_kernels),
		cmocka_unit_test(test_reshape_of_a_dynamic_batch),
		cmocka_unit_test(test_reshape_errors_fail_the_run),
		cmocka_unit_test(test_unsqueeze_and_squeeze_with_axes_given_while_running),
		cmocka_unit_test(test_expand_to_a_shape_given_while_running),
		cmocka_unit_test(test_tile_constant_of_shape_and_range_while_running),
		cmocka_unit_test(test_broadcast_of_computed_dims),
		cmocka_unit_test(test_squeeze_without_axes_keeps_symbolic_dims),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
