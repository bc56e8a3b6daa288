/* Data movement with parameters given while running (codegen/lower/data*.c):
 * Slice, Split, Pad, OneHot, TopK and CenterCropPad whose starts, sizes,
 * pads, depth, K or shape are graph inputs.  Each case runs through the
 * interpreter, the kernel IR evaluator and the JIT and compares; the shape
 * kernel's checks fail the run where the interpreter reports an error. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tests/unit/support/codegen_check.h"

#define VALS(...) ((const double[]){__VA_ARGS__})
#define NV(...) (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define I64S(md, ...) values_input(md, TBC_DT_I64, NV(__VA_ARGS__), VALS(__VA_ARGS__))
#define I32S(md, ...) values_input(md, TBC_DT_I32, NV(__VA_ARGS__), VALS(__VA_ARGS__))

static void set_str(tbc_op *o, const char *name, const char *v) {
	tbc_attr *at = tbc_op_add_attr(o, name, TBC_ATTR_STRING);
	at->s = v;
	at->s_len = strlen(v);
}


/* An op with inputs ins[0..n) (NULL: omitted) and n_out outputs. */
static tbc_op *opn(model *md, tbc_opcode code, int n, tbc_value *const *ins, int n_out) {
	return tbc_op_new(md->m->main, code, "n", n, ins, n_out);
}

static tbc_value *slice(model *md, tbc_value *x, tbc_value *starts, tbc_value *ends, tbc_value *axes, tbc_value *steps) {
	tbc_value *ins[5] = {x, starts, ends, axes, steps};
	return opn(md, TBC_OP_Slice, steps ? 5 : axes ? 4 : 3, ins, 1)->outputs[0];
}

/* ---- Slice ------------------------------------------------------------------------*/
/* starts, ends, axes and steps all given while running: negative starts and
 * steps, ends past the dim (clamped), a start past the dim (empty). */
static void test_slice_with_parameters_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	check(&md, slice(&md, input(&md, TBC_DT_F32, "20,10,5"), I64S(&md, 0, 0), I64S(&md, 3, 10), I64S(&md, 0, 1),
			 I64S(&md, 1, 1)));
	md = model_new(); /* x[-1:-4:-1, 20:0:-3] */
	check(&md, slice(&md, input(&md, TBC_DT_F32, "5,12,3"), I64S(&md, -1, 20), I64S(&md, -4, 0), I64S(&md, 0, 1),
			 I64S(&md, -1, -3)));
	md = model_new(); /* default axes and steps; an end past the dim */
	check(&md, slice(&md, input(&md, TBC_DT_I8, "6,7"), I64S(&md, 1, -3), I64S(&md, 1000, 7), NULL, NULL));
	md = model_new(); /* a start past the dim: an empty result */
	check(&md, slice(&md, input(&md, TBC_DT_F32, "4,3"), I64S(&md, 1000), I64S(&md, 1001), I64S(&md, 1), I64S(&md, 1)));
	md = model_new(); /* int32 parameters, negative axes, huge steps */
	check(&md, slice(&md, input(&md, TBC_DT_F16, "4,5,6"), I32S(&md, 5, 0), I32S(&md, -100, 6), I32S(&md, -1, -3),
			 I32S(&md, -2147483647, 2147483647)));
	md = model_new(); /* INT64 bounds as ONNX writes "to the end" */
	check(&md, slice(&md, input(&md, TBC_DT_U8, "9"), I64S(&md, 2), I64S(&md, 9.2e18), NULL, I64S(&md, 3)));
	md = model_new();
	check(&md, slice(&md, input(&md, TBC_DT_BOOL, "3,8"), I64S(&md, 7), I64S(&md, -9.2e18), I64S(&md, 1), I64S(&md, -2)));
}

/* Constant axes, starts while running: only those dims change; the computed
 * dims feed later kernels. */
static void test_slice_with_constant_axes_feeds_later_kernels(void **state) {
	(void)state;
	model md = model_new();
	int64_t d1[1] = {1};
	tbc_value *axes = constant(&md, TBC_DT_I64, 1, d1, VALS(1));
	tbc_value *s = slice(&md, input(&md, TBC_DT_F32, "3,10,4"), I64S(&md, 2), I64S(&md, 9), axes, I64S(&md, 2));
	check(&md, op2(&md, TBC_OP_Add, op1(&md, TBC_OP_Relu, s), s));
}

/* A dynamic batch: the symbolic dim sliced with constant bounds (its size is
 * known only while running), and another dim with run-time bounds. */
static void test_slice_of_a_dynamic_batch(void **state) {
	(void)state;
	model md = model_new();
	int64_t d2[1] = {2};
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,6", 7, -3, 3);
	tbc_value *st = constant(&md, TBC_DT_I64, 1, d2, VALS(1, -2));
	tbc_value *en = constant(&md, TBC_DT_I64, 1, d2, VALS(-1, -7));
	tbc_value *sp = constant(&md, TBC_DT_I64, 1, d2, VALS(2, -1));
	check(&md, slice(&md, x, st, en, NULL, sp));
	md = model_new();
	x = input_sym(&md, TBC_DT_I32, "N,6", 5, -3, 3);
	check(&md, slice(&md, x, I64S(&md, 1, 4), I64S(&md, -1, 0), I64S(&md, 0, 1), I64S(&md, 1, -1)));
}

static void test_slice_errors_fail_the_run(void **state) {
	(void)state;
	model md = model_new(); /* a step of 0 */
	check_run_fails(&md, slice(&md, input(&md, TBC_DT_F32, "4,4"), I64S(&md, 0), I64S(&md, 2), I64S(&md, 0), I64S(&md, 0)));
	md = model_new(); /* an axis sliced twice */
	check_run_fails(&md, slice(&md, input(&md, TBC_DT_F32, "4,4"), I64S(&md, 0, 1), I64S(&md, 2, 3), I64S(&md, 1, -1), NULL));
	md = model_new(); /* an axis out of range */
	check_run_fails(&md, slice(&md, input(&md, TBC_DT_F32, "4,4"), I64S(&md, 0), I64S(&md, 2), I64S(&md, 2), NULL));
}

/* ---- Index ops --------------------------------------------------------------------
 * An index outside [-n, n) fails the compiled run naming the node, as the
 * interpreter's check fails it (the kernels clamp as well, so nothing is
 * read or written outside a buffer). */
static void index_op_fails(tbc_opcode code, const char *data, tbc_value *(*indices)(model *), const char *updates,
			   const char *text) {
	model md = model_new();
	tbc_value *ins[3] = {input(&md, TBC_DT_F32, data), indices(&md), updates ? input(&md, TBC_DT_F32, updates) : NULL};
	tbc_op *o = opn(&md, code, updates ? 3 : 2, ins, 1);
	check_run_fails_as(&md, o->outputs[0], "out of range", text);
}
static tbc_value *past_the_end(model *md) { return I64S(md, 1, 7); }
static tbc_value *before_the_front(model *md) { return I64S(md, 0, -4); }
static tbc_value *one_past(model *md) { return I64S(md, 3); }
static tbc_value *one_before(model *md) { return I64S(md, -4); }

static void test_index_out_of_range_fails_the_run(void **state) {
	(void)state;
	index_op_fails(TBC_OP_Gather, "3,2", past_the_end, NULL, "Gather 'n': an index is out of range for axis 0");
	index_op_fails(TBC_OP_Gather, "3,2", before_the_front, NULL, "an index is out of range");
	index_op_fails(TBC_OP_GatherElements, "3", past_the_end, NULL, "GatherElements");
	index_op_fails(TBC_OP_ScatterElements, "3", past_the_end, "2", "ScatterElements");
	index_op_fails(TBC_OP_GatherND, "3,2", one_past, NULL, "GatherND");
	index_op_fails(TBC_OP_ScatterND, "3,2", one_before, "2", "ScatterND");
	/* In range, negative counting from the end: no failure. */
	model md = model_new();
	tbc_value *ins[2] = {input(&md, TBC_DT_F32, "3,2"), I64S(&md, -3, 2, -1)};
	check(&md, opn(&md, TBC_OP_Gather, 2, ins, 1)->outputs[0]);
}

/* ---- Split ------------------------------------------------------------------------*/
static void check_split(model *md, tbc_value *x, tbc_value *sizes, int n, int64_t axis, int64_t num_outputs) {
	tbc_value *ins[2] = {x, sizes};
	tbc_op *o = opn(md, TBC_OP_Split, sizes ? 2 : 1, ins, n);
	attr_int(o, "axis", axis);
	if (num_outputs) attr_int(o, "num_outputs", num_outputs);
	check_outputs(md, n, o->outputs, 1e-6);
}

/* Sizes given while running, a zero-size part among them. */
static void test_split_with_sizes_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	check_split(&md, input(&md, TBC_DT_F32, "6"), I64S(&md, 2, 4), 2, 0, 0);
	md = model_new();
	check_split(&md, input(&md, TBC_DT_I16, "2,6"), I64S(&md, 1, 0, 5), 3, 1, 0);
	md = model_new();
	check_split(&md, input(&md, TBC_DT_BF16, "5,3,2"), I32S(&md, 0, 5), 2, -3, 0);
	md = model_new(); /* a dynamic batch split while running */
	check_split(&md, input_sym(&md, TBC_DT_F32, "N,2", 7, -3, 3), I64S(&md, 3, 4), 2, 0, 0);
}

/* No sizes: the parts of a dynamic batch, equal or (num_outputs) ceil-sized
 * with a smaller last one. */
static void test_split_of_a_dynamic_batch_into_parts(void **state) {
	(void)state;
	model md = model_new();
	check_split(&md, input_sym(&md, TBC_DT_F32, "N,3", 6, -3, 3), NULL, 3, 0, 0);
	md = model_new();
	check_split(&md, input_sym(&md, TBC_DT_U8, "2,N", 7, 0, 9), NULL, 3, 1, 3);
}

static void test_split_errors_fail_the_run(void **state) {
	(void)state;
	model md = model_new(); /* a negative size */
	tbc_value *ins[2] = {input(&md, TBC_DT_F32, "6"), I64S(&md, 7, -1)};
	check_run_fails(&md, opn(&md, TBC_OP_Split, 2, ins, 2)->outputs[0]);
	md = model_new(); /* sizes not summing to the dim */
	ins[0] = input(&md, TBC_DT_F32, "6");
	ins[1] = I64S(&md, 2, 3);
	check_run_fails(&md, opn(&md, TBC_OP_Split, 2, ins, 2)->outputs[0]);
	md = model_new(); /* a dynamic batch of 5 into 2 equal parts */
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N", 5, -3, 3);
	check_run_fails(&md, opn(&md, TBC_OP_Split, 1, &x, 2)->outputs[0]);
}

/* ---- Pad --------------------------------------------------------------------------*/
static tbc_value *pad(model *md, const char *mode, tbc_value *x, tbc_value *pads, tbc_value *value, tbc_value *axes) {
	tbc_value *ins[4] = {x, pads, value, axes};
	tbc_op *o = opn(md, TBC_OP_Pad, axes ? 4 : value ? 3 : 2, ins, 1);
	set_str(o, "mode", mode);
	return o->outputs[0];
}

/* Every mode with pads given while running; negative pads crop first. */
static void test_pad_in_every_mode_with_pads_given_while_running(void **state) {
	(void)state;
	static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
	static const tbc_dtype dts[] = {TBC_DT_F32, TBC_DT_I32, TBC_DT_F16, TBC_DT_U8};
	for (int m = 0; m < 4; m++) {
		model md = model_new();
		check(&md, pad(&md, modes[m], input(&md, dts[m], "1,3,4,5"), I64S(&md, 0, 0, 1, 3, 0, 0, 2, 4), NULL, NULL));
		md = model_new(); /* crop at the front, pad at the back */
		check(&md, pad(&md, modes[m], input(&md, TBC_DT_F32, "3,6"), I64S(&md, -1, 2, 1, -3), NULL, NULL));
		md = model_new(); /* a dim of one */
		check(&md, pad(&md, modes[m], input(&md, TBC_DT_I64, "1,4"), I64S(&md, 2, 0, 3, 1), NULL, NULL));
	}
}

/* constant_value and axes given while running; a dynamic batch left alone. */
static void test_pad_with_value_and_axes_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	double v = 2.5;
	tbc_value *value = values_input(&md, TBC_DT_F32, 0, &v);
	check(&md, pad(&md, "constant", input(&md, TBC_DT_F32, "1,3,4,5"), I64S(&md, 0, 3, 0, 4), value, I64S(&md, 1, 3)));
	md = model_new();
	value = values_input(&md, TBC_DT_F64, 0, &v);
	check(&md, pad(&md, "constant", input(&md, TBC_DT_F64, "2,3"), I64S(&md, 1, -1), value, I64S(&md, -1)));
	md = model_new();
	check(&md, pad(&md, "reflect", input_sym(&md, TBC_DT_F32, "N,5", 3, -3, 3), I32S(&md, 3, 2), NULL, I32S(&md, 1)));
	md = model_new(); /* constant axes: only dim 1 is computed */
	int64_t d1[1] = {1};
	tbc_value *axes = constant(&md, TBC_DT_I64, 1, d1, VALS(1));
	tbc_value *p = pad(&md, "edge", input_sym(&md, TBC_DT_F32, "N,4", 2, -3, 3), I64S(&md, 2, 1), NULL, axes);
	check(&md, op1(&md, TBC_OP_Neg, p));
}

static void test_pad_errors_fail_the_run(void **state) {
	(void)state;
	model md = model_new(); /* cropped below zero */
	check_run_fails(&md, pad(&md, "constant", input(&md, TBC_DT_F32, "2,3"), I64S(&md, 0, -2, 0, -2), NULL, NULL));
	md = model_new(); /* reflect of a dim cropped to nothing */
	check_run_fails(&md, pad(&md, "reflect", input(&md, TBC_DT_F32, "2,3"), I64S(&md, 0, -3, 1, 1), NULL, NULL));
	md = model_new(); /* an axis repeated */
	check_run_fails(&md, pad(&md, "edge", input(&md, TBC_DT_F32, "2,3"), I64S(&md, 1, 1, 1, 1), NULL, I64S(&md, 1, -1)));
}

/* ---- OneHot -----------------------------------------------------------------------*/
static tbc_value *onehot(model *md, tbc_value *idx, tbc_value *depth, tbc_value *values, int64_t axis) {
	tbc_op *o = node(md, TBC_OP_OneHot, 3, idx, depth, values);
	attr_int(o, "axis", axis);
	return o->outputs[0];
}

/* depth given while running, as a float (truncated) or an integer. */
static void test_onehot_with_depth_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	double depth = 10.7;
	check(&md, onehot(&md, I64S(&md, 1, 9, -1, 12), values_input(&md, TBC_DT_F32, 0, &depth),
			  values_input(&md, TBC_DT_F32, 2, VALS(0, 3)), 1));
	md = model_new();
	depth = 4;
	tbc_value *idx = input_sym(&md, TBC_DT_I32, "N,2", 3, -5, 5);
	check(&md, onehot(&md, idx, values_input(&md, TBC_DT_I64, 0, &depth), values_input(&md, TBC_DT_I8, 2, VALS(-1, 7)), 0));
	md = model_new(); /* a depth of 0 */
	depth = 0.5;
	check_run_fails(&md, onehot(&md, I64S(&md, 1, 2), values_input(&md, TBC_DT_F32, 0, &depth),
				    values_input(&md, TBC_DT_F32, 2, VALS(0, 1)), -1));
}

/* ---- TopK -------------------------------------------------------------------------*/
static void check_topk(model *md, tbc_value *x, tbc_value *k, int64_t axis, int largest) {
	tbc_value *ins[2] = {x, k};
	tbc_op *o = opn(md, TBC_OP_TopK, 2, ins, 2);
	attr_int(o, "axis", axis);
	attr_int(o, "largest", largest);
	check_outputs(md, 2, o->outputs, 1e-6);
}

/* K given while running; largest and smallest; every axis position. */
static void test_topk_with_k_given_while_running(void **state) {
	(void)state;
	double k = 3;
	for (int largest = 0; largest < 2; largest++) {
		model md = model_new();
		check_topk(&md, input(&md, TBC_DT_F32, "3,7"), values_input(&md, TBC_DT_I64, 1, &k), 1, largest);
		md = model_new();
		check_topk(&md, input(&md, TBC_DT_F64, "5,2,3"), values_input(&md, TBC_DT_I64, 1, &k), 0, largest);
		md = model_new();
		check_topk(&md, input(&md, TBC_DT_I32, "2,6,3"), values_input(&md, TBC_DT_I64, 0, &k), -2, largest);
	}
}

/* Ties keep their index order (integers in [-3, 3) repeat a lot); uint64
 * and f16; K of 0 and of the whole axis. */
static void test_topk_ties_dtypes_and_edge_k(void **state) {
	(void)state;
	static const tbc_dtype dts[] = {TBC_DT_I8, TBC_DT_U64, TBC_DT_F16, TBC_DT_BF16, TBC_DT_U8};
	double k = 5;
	for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
		model md = model_new();
		check_topk(&md, input_sym(&md, dts[i], "4,9", 1, 0, 4), values_input(&md, TBC_DT_I64, 1, &k), 1, (int)(i % 2));
	}
	double zero = 0, all = 6;
	model md = model_new();
	check_topk(&md, input(&md, TBC_DT_F32, "2,6"), values_input(&md, TBC_DT_I64, 1, &zero), 1, 1);
	md = model_new();
	check_topk(&md, input(&md, TBC_DT_F32, "2,6"), values_input(&md, TBC_DT_I64, 1, &all), -1, 0);
}

/* NaN counts as the largest value. */
static void test_topk_orders_nan_as_largest(void **state) {
	(void)state;
	for (int largest = 0; largest < 2; largest++) {
		model md = model_new();
		tbc_value *x = values_input(&md, TBC_DT_F32, 6, VALS(1, NAN, -2, 5, NAN, 0));
		double k = 4;
		check_topk(&md, x, values_input(&md, TBC_DT_I64, 1, &k), 0, largest);
	}
}

/* A dynamic batch, and K as a constant (TopK's static lowering). */
static void test_topk_of_a_dynamic_batch_and_constant_k(void **state) {
	(void)state;
	double k = 2;
	model md = model_new();
	check_topk(&md, input_sym(&md, TBC_DT_F32, "N,5", 4, -3, 3), values_input(&md, TBC_DT_I64, 1, &k), 1, 1);
	md = model_new();
	int64_t d1[1] = {1};
	check_topk(&md, input_sym(&md, TBC_DT_I64, "N,8", 3, -9, 9), constant(&md, TBC_DT_I64, 1, d1, VALS(3)), -1, 0);
	md = model_new(); /* the values output omitted */
	tbc_value *ins[2] = {input(&md, TBC_DT_F32, "4,6"), values_input(&md, TBC_DT_I64, 1, &k)};
	tbc_op *o = opn(&md, TBC_OP_TopK, 2, ins, 2);
	check(&md, o->outputs[1]);
}

static void test_topk_errors_fail_the_run(void **state) {
	(void)state;
	double k = 7;
	model md = model_new(); /* K past the axis */
	tbc_value *ins[2] = {input(&md, TBC_DT_F32, "2,6"), values_input(&md, TBC_DT_I64, 1, &k)};
	check_run_fails(&md, opn(&md, TBC_OP_TopK, 2, ins, 2)->outputs[0]);
	k = -1;
	md = model_new();
	ins[0] = input(&md, TBC_DT_F32, "2,6");
	ins[1] = values_input(&md, TBC_DT_I64, 1, &k);
	check_run_fails(&md, opn(&md, TBC_OP_TopK, 2, ins, 2)->outputs[0]);
}

/* ---- CenterCropPad --------------------------------------------------------------------*/
static tbc_value *center_crop_pad(model *md, tbc_value *x, tbc_value *shape, int n_axes, const int64_t *axes) {
	tbc_op *o = node(md, TBC_OP_CenterCropPad, 2, x, shape, NULL);
	if (axes) attr_ints(o, "axes", n_axes, axes);
	return o->outputs[0];
}

/* Crop one dim, pad another (odd differences: the extra element at the
 * end), given while running or constant; axes. */
static void test_center_crop_pad(void **state) {
	(void)state;
	model md = model_new();
	check(&md, center_crop_pad(&md, input(&md, TBC_DT_F32, "20,8,3"), I64S(&md, 10, 11, 3), 0, NULL));
	md = model_new();
	static const int64_t hw[2] = {-3, -2};
	check(&md, center_crop_pad(&md, input(&md, TBC_DT_I8, "7,9,3"), I64S(&md, 4, 12), 2, hw));
	md = model_new();
	int64_t d2[1] = {2};
	tbc_value *shape = constant(&md, TBC_DT_I64, 1, d2, VALS(5, 2));
	static const int64_t ax[2] = {0, 2};
	check(&md, center_crop_pad(&md, input_sym(&md, TBC_DT_F16, "2,N,6", 3, -3, 3), shape, 2, ax));
	md = model_new(); /* a negative size */
	check_run_fails(&md, center_crop_pad(&md, input(&md, TBC_DT_F32, "4,4"), I64S(&md, 2, -1), 0, NULL));
}

/* ---- AffineGrid -------------------------------------------------------------------*/
static tbc_value *affine_grid(model *md, tbc_value *theta, tbc_value *size, int align) {
	tbc_op *o = node(md, TBC_OP_AffineGrid, 2, theta, size, NULL);
	attr_int(o, "align_corners", align);
	return o->outputs[0];
}

/* 2-D and 3-D, both corner modes, a size of 1; size given while running or
 * constant. */
static void test_affine_grid(void **state) {
	(void)state;
	for (int align = 0; align < 2; align++) {
		model md = model_new();
		check(&md, affine_grid(&md, input(&md, TBC_DT_F32, "2,2,3"), I64S(&md, 2, 3, 5, 6), align));
		md = model_new();
		check(&md, affine_grid(&md, input(&md, TBC_DT_F64, "1,3,4"), I64S(&md, 1, 1, 3, 1, 4), align));
		md = model_new();
		int64_t d4[1] = {4};
		tbc_value *size = constant(&md, TBC_DT_I64, 1, d4, VALS(3, 2, 4, 5));
		check(&md, affine_grid(&md, input(&md, TBC_DT_F32, "3,2,3"), size, align));
	}
	model md = model_new(); /* N disagrees with theta's */
	check_run_fails(&md, affine_grid(&md, input(&md, TBC_DT_F32, "2,2,3"), I64S(&md, 3, 1, 4, 4), 0));
	md = model_new(); /* a size of 0 */
	check_run_fails(&md, affine_grid(&md, input(&md, TBC_DT_F32, "2,2,3"), I64S(&md, 2, 1, 0, 4), 0));
}

/* ---- Col2Im -------------------------------------------------------------------------*/
static tbc_value *col2im(model *md, tbc_value *x, tbc_value *image, tbc_value *block, const int64_t *strides,
			 const int64_t *pads, const int64_t *dil) {
	tbc_op *o = node(md, TBC_OP_Col2Im, 3, x, image, block);
	if (strides) attr_ints(o, "strides", 2, strides);
	if (pads) attr_ints(o, "pads", 4, pads);
	if (dil) attr_ints(o, "dilations", 2, dil);
	return o->outputs[0];
}

/* Overlapping blocks sum; strides, pads, dilations; shapes given while
 * running or constant; integers wrap exactly. */
static void test_col2im(void **state) {
	(void)state;
	static const int64_t s2[2] = {2, 1}, p1[4] = {1, 0, 0, 1}, d2[2] = {1, 2};
	model md = model_new(); /* 5x5 image, 2x2 blocks: 16 blocks */
	check(&md, col2im(&md, input(&md, TBC_DT_F32, "2,8,16"), I64S(&md, 5, 5), I64S(&md, 2, 2), NULL, NULL, NULL));
	md = model_new(); /* stride (2, 1), pads: (5+1-2)/2+1 = 3 by (4+1-3)/1+1 = 3 */
	check(&md, col2im(&md, input(&md, TBC_DT_F64, "1,6,9"), I64S(&md, 5, 4), I64S(&md, 2, 3), s2, p1, NULL));
	md = model_new(); /* dilation (1, 2): 4 by 6-2*2 = 2 blocks */
	check(&md, col2im(&md, input(&md, TBC_DT_I32, "1,6,8"), I64S(&md, 5, 6), I64S(&md, 2, 3), NULL, NULL, d2));
	md = model_new();
	int64_t d1[1] = {2};
	tbc_value *image = constant(&md, TBC_DT_I64, 1, d1, VALS(3, 4)), *block = constant(&md, TBC_DT_I64, 1, d1, VALS(2, 2));
	check(&md, col2im(&md, input_sym(&md, TBC_DT_F32, "N,4,6", 2, -3, 3), image, block, NULL, NULL, NULL));
	md = model_new(); /* 15 blocks given, the geometry makes 16 */
	check_run_fails(&md, col2im(&md, input(&md, TBC_DT_F32, "1,4,15"), I64S(&md, 5, 5), I64S(&md, 2, 2), NULL, NULL, NULL));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slice_with_parameters_given_while_running),
		cmocka_unit_test(test_slice_with_constant_axes_feeds_later_kernels),
		cmocka_unit_test(test_slice_of_a_dynamic_batch),
		cmocka_unit_test(test_slice_errors_fail_the_run),
		cmocka_unit_test(test_index_out_of_range_fails_the_run),
		cmocka_unit_test(test_split_with_sizes_given_while_running),
		cmocka_unit_test(test_split_of_a_dynamic_batch_into_parts),
		cmocka_unit_test(test_split_errors_fail_the_run),
		cmocka_unit_test(test_pad_in_every_mode_with_pads_given_while_running),
		cmocka_unit_test(test_pad_with_value_and_axes_given_while_running),
		cmocka_unit_test(test_pad_errors_fail_the_run),
		cmocka_unit_test(test_onehot_with_depth_given_while_running),
		cmocka_unit_test(test_topk_with_k_given_while_running),
		cmocka_unit_test(test_topk_ties_dtypes_and_edge_k),
		cmocka_unit_test(test_topk_orders_nan_as_largest),
		cmocka_unit_test(test_topk_of_a_dynamic_batch_and_constant_k),
		cmocka_unit_test(test_topk_errors_fail_the_run),
		cmocka_unit_test(test_center_crop_pad),
		cmocka_unit_test(test_affine_grid),
		cmocka_unit_test(test_col2im),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
