/* Ops whose output size is known only after computing, and generators of a
 * size given while running (codegen/lower/select.c): NonZero, Compress,
 * Unique, NonMaxSuppression, the windows, MelWeightMatrix, STFT and
 * MaxUnpool with an output_shape input.  Each case runs through the
 * interpreter, the kernel IR evaluator and the JIT; the failing runs fail in
 * all three. */
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
#define VEC(md, dt, ...) values_input(md, dt, NV(__VA_ARGS__), VALS(__VA_ARGS__))

static tbc_value *scalar_in(model *md, tbc_dtype dt, double v) { return values_input(md, dt, 0, &v); }

/* An op with inputs ins[0..n) (NULL: omitted) and n_out outputs. */
static tbc_op *op_n(model *md, tbc_opcode code, int n, tbc_value *const *ins, int n_out) {
	return tbc_op_new(md->m->main, code, "n", n, (tbc_value **)ins, n_out);
}

static void set_int(tbc_op *o, const char *name, int64_t v) { tbc_op_add_attr(o, name, TBC_ATTR_INT)->i = v; }

/* ---- NonZero ---------------------------------------------------------------------*/
/* Coordinates of the non-zero elements, row-major; NaN counts, -0.0 does not. */
static void test_nonzero_of_every_kind(void **state) {
	(void)state;
	model md = model_new();
	check(&md, op1(&md, TBC_OP_NonZero, VEC(&md, TBC_DT_F32, 0, -0.0, NAN, 1.5, 0, -2)));
	static const tbc_dtype dts[] = {TBC_DT_BOOL, TBC_DT_I32, TBC_DT_U8, TBC_DT_I64, TBC_DT_F16, TBC_DT_BF16, TBC_DT_F64};
	for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
		md = model_new(); /* ints in [-1, 2): a third of them zero */
		tbc_value *x = input_sym(&md, dts[i], "2,3,4", 3, -1, 2);
		if (tbc_dtype_is_float(dts[i])) x = op1(&md, TBC_OP_Floor, x);
		check(&md, op1(&md, TBC_OP_NonZero, x));
	}
	md = model_new(); /* a scalar: one row */
	check(&md, op1(&md, TBC_OP_NonZero, scalar_in(&md, TBC_DT_I32, 7)));
	md = model_new(); /* nothing non-zero: [2, 0] */
	check(&md, op1(&md, TBC_OP_NonZero, input_sym(&md, TBC_DT_I8, "2,5", 3, 0, 1)));
}

/* A symbolic batch, and the count feeding a later kernel. */
static void test_nonzero_of_a_dynamic_batch_feeds_later_ops(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *nz = op1(&md, TBC_OP_NonZero, input_sym(&md, TBC_DT_I32, "N,3", 5, -1, 2));
	tbc_op *cast = node(&md, TBC_OP_Cast, 1, nz, NULL, NULL);
	set_int(cast, "to", TBC_DT_F32);
	check(&md, op2(&md, TBC_OP_Mul, cast->outputs[0], cast->outputs[0]));
}

/* ---- Compress ----------------------------------------------------------------------*/
static tbc_value *compress(model *md, tbc_value *x, tbc_value *cond, int axis, bool has_axis) {
	tbc_op *o = node(md, TBC_OP_Compress, 2, x, cond, NULL);
	if (has_axis) set_int(o, "axis", axis);
	return o->outputs[0];
}

static void test_compress_with_and_without_axis(void **state) {
	(void)state;
	model md = model_new(); /* flattened; a condition shorter than the input */
	check(&md, compress(&md, input(&md, TBC_DT_F32, "3,2"), VEC(&md, TBC_DT_BOOL, 0, 1, 0, 0, 1), 0, false));
	md = model_new();
	check(&md, compress(&md, input(&md, TBC_DT_I16, "3,4,2"), VEC(&md, TBC_DT_BOOL, 1, 0, 1), 0, true));
	md = model_new(); /* a middle axis, a condition of floats (NaN selects) */
	check(&md, compress(&md, input(&md, TBC_DT_F16, "2,4,3"), VEC(&md, TBC_DT_F32, 0, NAN, -0.0, 2), 1, true));
	md = model_new(); /* the last axis, counted from the end; an int condition */
	check(&md, compress(&md, input(&md, TBC_DT_U8, "3,5"), VEC(&md, TBC_DT_I64, 3, 0, 0), -1, true));
	md = model_new(); /* nothing selected */
	check(&md, compress(&md, input(&md, TBC_DT_F32, "3,2"), VEC(&md, TBC_DT_BOOL, 0, 0), 1, true));
	md = model_new(); /* a symbolic batch kept whole */
	check(&md, compress(&md, input_sym(&md, TBC_DT_F32, "N,4", 5, -3, 3), VEC(&md, TBC_DT_BOOL, 1, 0, 0, 1), 1, true));
	md = model_new(); /* a symbolic batch compressed */
	check(&md, compress(&md, input_sym(&md, TBC_DT_I32, "N,2", 3, -3, 3), VEC(&md, TBC_DT_BOOL, 0, 1, 1), 0, true));
}

/* A selected position past the dim fails the run, as in the interpreter. */
static void test_compress_condition_past_the_dim_fails(void **state) {
	(void)state;
	model md = model_new();
	check_run_fails(&md, compress(&md, input(&md, TBC_DT_F32, "3,2"), VEC(&md, TBC_DT_BOOL, 0, 0, 1), 1, true));
	md = model_new();
	check_run_fails(&md, compress(&md, input(&md, TBC_DT_F32, "2"), VEC(&md, TBC_DT_BOOL, 1, 0, 0, 1), 0, false));
}

/* ---- Windows -------------------------------------------------------------------------*/
static tbc_value *window(model *md, tbc_opcode code, tbc_value *size, int periodic, int dt) {
	tbc_op *o = node(md, code, 1, size, NULL, NULL);
	if (periodic >= 0) set_int(o, "periodic", periodic);
	if (dt) set_int(o, "output_datatype", dt);
	return o->outputs[0];
}

static void test_windows_of_a_size_given_while_running(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_HannWindow, TBC_OP_HammingWindow, TBC_OP_BlackmanWindow};
	static const int dts[] = {0, TBC_DT_F64, TBC_DT_F16, TBC_DT_I32};
	for (int o = 0; o < 3; o++)
		for (int periodic = -1; periodic <= 1; periodic++)
			for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
				model md = model_new();
				check(&md, window(&md, ops[o], scalar_in(&md, t % 2 ? TBC_DT_I64 : TBC_DT_I32, 10 + (double)t), periodic, dts[t]));
			}
	model md = model_new(); /* one element, symmetric: N = 0 */
	check(&md, window(&md, TBC_OP_HannWindow, scalar_in(&md, TBC_DT_I64, 1), 0, 0));
	md = model_new(); /* empty */
	check(&md, window(&md, TBC_OP_BlackmanWindow, scalar_in(&md, TBC_DT_I32, 0), 1, 0));
	md = model_new(); /* the size as a one-element vector */
	check(&md, window(&md, TBC_OP_HammingWindow, VEC(&md, TBC_DT_I64, 7), 0, 0));
	md = model_new();
	check_run_fails(&md, window(&md, TBC_OP_HannWindow, scalar_in(&md, TBC_DT_I32, -3), 1, 0));
}

/* ---- MelWeightMatrix -------------------------------------------------------------------*/
static tbc_value *mel(model *md, double bins, double len, double rate, double lo, double hi, tbc_dtype edge, int dt) {
	tbc_value *ins[5] = {scalar_in(md, TBC_DT_I32, bins), scalar_in(md, TBC_DT_I64, len), scalar_in(md, TBC_DT_I32, rate),
			     scalar_in(md, edge, lo), scalar_in(md, edge, hi)};
	tbc_op *o = op_n(md, TBC_OP_MelWeightMatrix, 5, ins, 1);
	if (dt) set_int(o, "output_datatype", dt);
	return o->outputs[0];
}

static void test_mel_weight_matrix_while_running(void **state) {
	(void)state;
	model md = model_new(); /* the suite's case */
	check(&md, mel(&md, 8, 16, 8192, 0, 4096, TBC_DT_F32, 0));
	md = model_new();
	check(&md, mel(&md, 6, 64, 16000, 100, 4000, TBC_DT_F32, TBC_DT_F64));
	md = model_new();
	check(&md, mel(&md, 5, 128, 22050, 300, 8000, TBC_DT_F64, TBC_DT_F16));
	md = model_new(); /* upper edge above half the sample rate */
	check_run_fails(&md, mel(&md, 8, 16, 8000, 0, 4100, TBC_DT_F32, 0));
	md = model_new(); /* no bins */
	check_run_fails(&md, mel(&md, 0, 16, 8000, 0, 4000, TBC_DT_F32, 0));
}

/* ---- STFT ---------------------------------------------------------------------------------*/
static tbc_value *stft(model *md, tbc_value *x, tbc_value *step, tbc_value *win, tbc_value *flen, int onesided) {
	tbc_value *ins[4] = {x, step, win, flen};
	tbc_op *o = op_n(md, TBC_OP_STFT, flen ? 4 : win ? 3 : 2, ins, 1);
	if (onesided >= 0) set_int(o, "onesided", onesided);
	return o->outputs[0];
}

static void test_stft_with_run_time_step_and_length(void **state) {
	(void)state;
	model md = model_new(); /* frame_step and frame_length while running */
	check_outputs(&md, 1,
		      (tbc_value *[]){stft(&md, input(&md, TBC_DT_F32, "1,64,1"), scalar_in(&md, TBC_DT_I64, 8), NULL,
					   scalar_in(&md, TBC_DT_I64, 16), -1)},
		      1e-4);
	md = model_new(); /* a window fixes the frame length; two-sided, complex, symbolic batch */
	check_outputs(&md, 1,
		      (tbc_value *[]){stft(&md, input_sym(&md, TBC_DT_F32, "N,40,2", 2, -1, 1), scalar_in(&md, TBC_DT_I32, 5),
					   input(&md, TBC_DT_F32, "12"), NULL, 0)},
		      1e-4);
	md = model_new(); /* a window and a length given; f64; a step that leaves a remainder */
	check_outputs(&md, 1,
		      (tbc_value *[]){stft(&md, input(&md, TBC_DT_F64, "2,30,1"), scalar_in(&md, TBC_DT_I64, 7),
					   input(&md, TBC_DT_F64, "9"), scalar_in(&md, TBC_DT_I64, 9), 1)},
		      1e-9);
	md = model_new(); /* no window, no length: one frame of the whole signal */
	check_outputs(&md, 1,
		      (tbc_value *[]){stft(&md, input(&md, TBC_DT_F32, "1,10,1"), scalar_in(&md, TBC_DT_I64, 3), NULL, NULL, 1)},
		      1e-4);
	md = model_new(); /* frames longer than the signal */
	check_run_fails(
		&md, stft(&md, input(&md, TBC_DT_F32, "1,8,1"), scalar_in(&md, TBC_DT_I64, 2), NULL, scalar_in(&md, TBC_DT_I64, 9), 1));
	md = model_new(); /* a zero step */
	check_run_fails(
		&md, stft(&md, input(&md, TBC_DT_F32, "1,8,1"), scalar_in(&md, TBC_DT_I64, 0), NULL, scalar_in(&md, TBC_DT_I64, 4), 1));
}

/* ---- Unique ---------------------------------------------------------------------------------*/
/* All four outputs (or the first only) compared with the interpreter. */
static void unique(model *md, tbc_value *x, int sorted, bool has_axis, int axis, int n_out) {
	tbc_op *o = op_n(md, TBC_OP_Unique, 1, &x, 4);
	if (sorted >= 0) set_int(o, "sorted", sorted);
	if (has_axis) set_int(o, "axis", axis);
	check_outputs(md, n_out, o->outputs, 1e-6);
}

static void test_unique_sorted_or_not_with_all_outputs(void **state) {
	(void)state;
	for (int sorted = -1; sorted <= 1; sorted++) {
		model md = model_new(); /* the suite's values */
		unique(&md, VEC(&md, TBC_DT_F32, 2, 1, 1, 3, 4, 3), sorted, false, 0, 4);
		md = model_new(); /* NaNs sort last and are one value; -0 equals 0 */
		unique(&md, VEC(&md, TBC_DT_F64, NAN, 1, -0.0, NAN, 0, -5, 1), sorted, false, 0, 4);
		md = model_new(); /* unsigned compare */
		unique(&md, VEC(&md, TBC_DT_U8, 200, 3, 255, 3, 0, 200), sorted, false, 0, 4);
		md = model_new();
		unique(&md, VEC(&md, TBC_DT_BOOL, 1, 0, 1, 1), sorted, false, 0, 4);
		md = model_new(); /* rank 3 flattened, many duplicates */
		unique(&md, input_sym(&md, TBC_DT_I32, "3,4,5", 3, -3, 3), sorted, false, 0, 4);
		md = model_new();
		unique(&md, input_sym(&md, TBC_DT_F16, "40", 3, -2, 2), sorted, false, 0, 4);
	}
	model md = model_new(); /* one element; only Y wanted */
	unique(&md, VEC(&md, TBC_DT_I64, 0), 1, false, 0, 1);
	md = model_new(); /* a longer input: several merge passes */
	unique(&md, input_sym(&md, TBC_DT_I16, "1000", 3, -50, 50), 0, false, 0, 4);
}

static void test_unique_slices_along_an_axis(void **state) {
	(void)state;
	for (int sorted = 0; sorted <= 1; sorted++) {
		model md = model_new(); /* rows of a matrix (ints in [-1, 1): many equal rows) */
		unique(&md, input_sym(&md, TBC_DT_I32, "8,2", 3, -1, 1), sorted, true, 0, 4);
		md = model_new(); /* columns, counted from the end */
		unique(&md, input_sym(&md, TBC_DT_I8, "2,7", 3, -1, 1), sorted, true, -1, 4);
		md = model_new(); /* the middle axis of a 3-D tensor (the suite's layout) */
		unique(&md, input_sym(&md, TBC_DT_F32, "2,6,2", 3, 0, 2), sorted, true, 1, 4);
		md = model_new(); /* a symbolic batch outside the axis */
		unique(&md, input_sym(&md, TBC_DT_I64, "N,5", 3, 0, 2), sorted, true, 1, 4);
	}
	model md = model_new(); /* a symbolic batch flattened: the inverse's length is computed too */
	unique(&md, input_sym(&md, TBC_DT_I32, "N,3", 4, -2, 2), 1, false, 0, 4);
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------*/
static tbc_value *nms(model *md, tbc_value *boxes, tbc_value *scores, double max_out, double iou, double score, int n_in, int center) {
	tbc_value *ins[5] = {boxes, scores, VEC(md, TBC_DT_I64, max_out), VEC(md, TBC_DT_F32, iou), NULL};
	if (n_in > 4) ins[4] = VEC(md, TBC_DT_F32, score);
	tbc_op *o = op_n(md, TBC_OP_NonMaxSuppression, n_in, ins, 1);
	if (center >= 0) set_int(o, "center_point_box", center);
	return o->outputs[0];
}

static tbc_value *suite_boxes(model *md, tbc_dtype dt) {
	return VEC(md, dt, 0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, -0.1, 1, 0.9, 0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100, 1, 101);
}

static tbc_value *as_shape(model *md, tbc_value *v, double a, double b, double c) {
	int64_t d1[1] = {3};
	tbc_value *shape = constant(md, TBC_DT_I64, 1, d1, VALS(a, b, c));
	return node(md, TBC_OP_Reshape, 2, v, shape, NULL)->outputs[0];
}

static void test_nms_orders_and_suppresses_as_the_interpreter(void **state) {
	(void)state;
	model md = model_new(); /* the suite's boxes: suppress by IoU, score threshold */
	tbc_value *boxes = as_shape(&md, suite_boxes(&md, TBC_DT_F32), 1, 6, 4);
	tbc_value *scores = as_shape(&md, VEC(&md, TBC_DT_F32, 0.9, 0.75, 0.6, 0.95, 0.5, 0.3), 1, 1, 6);
	check(&md, nms(&md, boxes, scores, 3, 0.5, 0.4, 5, -1));
	md = model_new(); /* no score threshold; a limit of 2 */
	boxes = as_shape(&md, suite_boxes(&md, TBC_DT_F32), 1, 6, 4);
	scores = as_shape(&md, VEC(&md, TBC_DT_F32, 0.9, 0.75, 0.6, 0.95, 0.5, 0.3), 1, 1, 6);
	check(&md, nms(&md, boxes, scores, 2, 0.5, 0, 4, 0));
	md = model_new(); /* center boxes; equal scores keep the lower index first */
	boxes = as_shape(&md, suite_boxes(&md, TBC_DT_F32), 1, 6, 4);
	scores = as_shape(&md, VEC(&md, TBC_DT_F32, 0.5, 0.5, 0.9, 0.5, 0.9, 0.1), 1, 1, 6);
	check(&md, nms(&md, boxes, scores, 10, 0.3, 0, 5, 1));
	md = model_new(); /* random boxes over two batches and three classes, in double */
	boxes = input_sym(&md, TBC_DT_F64, "2,30,4", 3, 0, 4);
	scores = input_sym(&md, TBC_DT_F64, "2,3,30", 3, 0, 1);
	check(&md, nms(&md, boxes, scores, 7, 0.2, 0.3, 5, 0));
	md = model_new(); /* float16 boxes and scores */
	boxes = input_sym(&md, TBC_DT_F16, "1,12,4", 3, 0, 3);
	scores = input_sym(&md, TBC_DT_F16, "1,2,12", 3, 0, 1);
	check(&md, nms(&md, boxes, scores, 5, 0.4, 0.2, 5, 1));
	md = model_new(); /* a symbolic batch; no limit given: nothing selected */
	boxes = input_sym(&md, TBC_DT_F32, "N,10,4", 2, 0, 4);
	scores = input_sym(&md, TBC_DT_F32, "N,2,10", 2, 0, 1);
	tbc_value *ins[2] = {boxes, scores};
	check(&md, op_n(&md, TBC_OP_NonMaxSuppression, 2, ins, 1)->outputs[0]);
	md = model_new(); /* a symbolic batch with a limit */
	boxes = input_sym(&md, TBC_DT_F32, "N,10,4", 2, 0, 4);
	scores = input_sym(&md, TBC_DT_F32, "N,2,10", 2, 0, 1);
	check(&md, nms(&md, boxes, scores, 4, 0.5, 0, 4, 0));
}

static void test_nms_iou_threshold_out_of_range_fails(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *boxes = as_shape(&md, suite_boxes(&md, TBC_DT_F32), 1, 6, 4);
	tbc_value *scores = as_shape(&md, VEC(&md, TBC_DT_F32, 0.9, 0.75, 0.6, 0.95, 0.5, 0.3), 1, 1, 6);
	check_run_fails(&md, nms(&md, boxes, scores, 3, 1.5, 0, 4, 0));
}

/* ---- MaxUnpool with output_shape -----------------------------------------------------------*/
static tbc_value *unpool(model *md, tbc_value *shape) {
	tbc_value *x = VEC(md, TBC_DT_F32, 5, 6, 7, 8), *ix = VEC(md, TBC_DT_I64, 5, 7, 13, 15);
	int64_t d4[1] = {4};
	tbc_value *s4 = constant(md, TBC_DT_I64, 1, d4, VALS(1, 1, 2, 2));
	x = node(md, TBC_OP_Reshape, 2, x, s4, NULL)->outputs[0];
	ix = node(md, TBC_OP_Reshape, 2, ix, s4, NULL)->outputs[0];
	tbc_op *o = node(md, TBC_OP_MaxUnpool, 3, x, ix, shape);
	int64_t k[2] = {2, 2};
	attr_ints(o, "kernel_shape", 2, k);
	attr_ints(o, "strides", 2, k);
	return o->outputs[0];
}

static void test_maxunpool_with_an_output_shape_given_while_running(void **state) {
	(void)state;
	model md = model_new();
	check(&md, unpool(&md, VEC(&md, TBC_DT_I64, 1, 1, 5, 5)));
	md = model_new(); /* larger batch and channel dims: the block stays at the origin */
	check(&md, unpool(&md, VEC(&md, TBC_DT_I64, 2, 3, 4, 6)));
	md = model_new(); /* smaller than the unpooled size */
	check_run_fails(&md, unpool(&md, VEC(&md, TBC_DT_I64, 1, 1, 3, 4)));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nonzero_of_every_kind),
		cmocka_unit_test(test_nonzero_of_a_dynamic_batch_feeds_later_ops),
		cmocka_unit_test(test_compress_with_and_without_axis),
		cmocka_unit_test(test_compress_condition_past_the_dim_fails),
		cmocka_unit_test(test_windows_of_a_size_given_while_running),
		cmocka_unit_test(test_mel_weight_matrix_while_running),
		cmocka_unit_test(test_stft_with_run_time_step_and_length),
		cmocka_unit_test(test_unique_sorted_or_not_with_all_outputs),
		cmocka_unit_test(test_unique_slices_along_an_axis),
		cmocka_unit_test(test_nms_orders_and_suppresses_as_the_interpreter),
		cmocka_unit_test(test_nms_iou_threshold_out_of_range_fails),
		cmocka_unit_test(test_maxunpool_with_an_output_shape_given_while_running),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
