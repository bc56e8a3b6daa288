/* Resize lowered for the CPU (codegen/lower/resize.c): every mode,
 * nearest_mode, coordinate_transformation_mode, antialias, exclude_outside,
 * axes and keep_aspect_ratio_policy, with scales/sizes/roi as constants (the
 * ordinary case: no shape kernel) or given while running (output dims
 * computed), symbolic batches, and the dtypes the interpreter allows.  Each
 * case runs through the interpreter, the kernel IR evaluator and the JIT and
 * must agree; integers exactly.  The shape kernel's checks fail the run where
 * the interpreter reports an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "tests/unit/support/codegen_check.h"

#define VALS(...) ((const double[]){__VA_ARGS__})
#define NV(...) (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
/* A 1-D tensor the model reads while running, or a constant. */
#define RUN(md, dt, ...) values_input(md, dt, NV(__VA_ARGS__), VALS(__VA_ARGS__))
#define CONST(md, dt, ...) vec(md, dt, NV(__VA_ARGS__), VALS(__VA_ARGS__))

static tbc_value *vec(model *md, tbc_dtype dt, int n, const double *v) {
	int64_t d = n;
	return constant(md, dt, 1, &d, v);
}

static void set_str(tbc_op *o, const char *name, const char *v) {
	tbc_attr *at = tbc_op_add_attr(o, name, TBC_ATTR_STRING);
	at->s = v;
	at->s_len = strlen(v);
}
static void set_float(tbc_op *o, const char *name, double v) { tbc_op_add_attr(o, name, TBC_ATTR_FLOAT)->f = v; }
static void set_axes(model *md, tbc_op *o, int n, const int64_t *v) {
	tbc_attr *at = tbc_op_add_attr(o, "axes", TBC_ATTR_INTS);
	at->n = n;
	at->ints = tbc_arena_array(md->m->arena, (size_t)n + 1, sizeof *at->ints);
	memcpy(at->ints, v, (size_t)n * sizeof *v);
}

/* Resize(x, roi, scales, sizes), any of the last three NULL (omitted). */
static tbc_op *resize(model *md, tbc_value *x, tbc_value *roi, tbc_value *scales, tbc_value *sizes) {
	tbc_value *ins[4] = {x, roi, scales, sizes};
	return tbc_op_new(md->m->main, TBC_OP_Resize, "rz", sizes ? 4 : 3, ins, 1);
}

static tbc_op *with(tbc_op *o, const char *mode, const char *ctm) {
	if (mode) set_str(o, "mode", mode);
	if (ctm) set_str(o, "coordinate_transformation_mode", ctm);
	return o;
}

/* Whether the graph lowers with no shape kernel and no computed symbol (the
 * geometry all known at compile time); frees the model. */
static bool lowers_statically(model *md, tbc_value *out) {
	tbc_diags *d = tbc_diags_create();
	tbc_graph_add_output(md->m->main, out);
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md->m, lower_target(), arena, d, &p), TBC_OK);
	bool ok = p->syms_buf < 0;
	for (int i = 0; i < p->n_launches; i++) ok = ok && strncmp(p->launches[i].kernel->name, "shape", 5) != 0;
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
	return ok;
}

static const char *const modes[] = {"nearest", "linear", "cubic"};
static const char *const ctms[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
				   "align_corners", "asymmetric",           "tf_crop_and_resize"};

/* ---- Constant scales: the ordinary case in real models ------------------------------*/
/* Upsample x2 nearest (asymmetric, floor: Upsample's semantics) and a
 * fractional upsample, with constant scales: no shape kernel. */
static void test_resize_constant_scales_need_no_shape_kernel(void **state) {
	(void)state;
	model md = model_new();
	tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "1,2,3,4"), NULL, CONST(&md, TBC_DT_F32, 1, 1, 2, 2), NULL), NULL,
			 "asymmetric");
	set_str(o, "nearest_mode", "floor");
	check(&md, o->outputs[0]);
	md = model_new();
	o = with(resize(&md, input(&md, TBC_DT_F32, "1,2,3,4"), NULL, CONST(&md, TBC_DT_F32, 1, 1, 2, 2), NULL), NULL, "asymmetric");
	assert_true(lowers_statically(&md, o->outputs[0]));
	md = model_new();
	o = with(resize(&md, input(&md, TBC_DT_F32, "2,3,5,4"), NULL, CONST(&md, TBC_DT_F32, 1, 1, 1.5, 0.6), NULL), "linear", NULL);
	check(&md, o->outputs[0]);
	md = model_new();
	o = with(resize(&md, input(&md, TBC_DT_F32, "2,3,5,4"), NULL, CONST(&md, TBC_DT_F32, 1, 1, 1.5, 0.6), NULL), "linear", NULL);
	assert_true(lowers_statically(&md, o->outputs[0]));
	md = model_new(); /* sizes, antialias: the footprint known at compile time too */
	o = with(resize(&md, input(&md, TBC_DT_F32, "1,1,9,8"), NULL, NULL, CONST(&md, TBC_DT_I64, 1, 1, 3, 5)), "cubic", NULL);
	attr_int(o, "antialias", 1);
	assert_true(lowers_statically(&md, o->outputs[0]));
}

/* Every mode with every coordinate transformation, up and down, constant
 * scales. */
static void test_resize_constant_scales_every_mode_and_coordinate_mode(void **state) {
	(void)state;
	for (int m = 0; m < 3; m++)
		for (int t = 0; t < 6; t++)
			for (int up = 0; up < 2; up++) {
				model md = model_new();
				tbc_value *sc = up ? CONST(&md, TBC_DT_F32, 1, 1, 2.5, 1.75) : CONST(&md, TBC_DT_F32, 1, 1, 0.6, 0.45);
				tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "2,2,5,7"), NULL, sc, NULL), modes[m], ctms[t]);
				check(&md, o->outputs[0]);
			}
}

/* ---- Symbolic batch ---------------------------------------------------------------*/
static void test_resize_symbolic_batch(void **state) {
	(void)state;
	/* constant scales: the batch keeps its symbol, H and W are known */
	model md = model_new();
	tbc_op *o = with(resize(&md, input_sym(&md, TBC_DT_F32, "N,3,5,6", 2, -3, 3), NULL, CONST(&md, TBC_DT_F32, 1, 1, 2, 1.5), NULL),
			 "linear", NULL);
	check(&md, o->outputs[0]);
	md = model_new();
	o = with(resize(&md, input_sym(&md, TBC_DT_F32, "N,3,5,6", 2, -3, 3), NULL, CONST(&md, TBC_DT_F32, 1, 1, 2, 1.5), NULL),
		 "linear", NULL);
	assert_true(lowers_statically(&md, o->outputs[0]));
	/* scales given while running, batch symbolic: every output dim computed */
	md = model_new();
	o = with(resize(&md, input_sym(&md, TBC_DT_F32, "N,2,4,4", 3, -3, 3), NULL, RUN(&md, TBC_DT_F32, 1, 1, 0.6, 1.7), NULL), "cubic",
		 NULL);
	check(&md, o->outputs[0]);
	/* sizes over axes 2, 3 with a symbolic batch and a symbolic H */
	md = model_new();
	o = with(resize(&md, input_sym(&md, TBC_DT_F32, "N,2,H,5", 4, -3, 3), NULL, NULL, CONST(&md, TBC_DT_I64, 7, 3)), "linear",
		 "align_corners");
	set_axes(&md, o, 2, (int64_t[]){2, 3});
	check(&md, o->outputs[0]);
	md = model_new();
	o = resize(&md, input_sym(&md, TBC_DT_I32, "N,2,3", 2, -50, 50), NULL, NULL, RUN(&md, TBC_DT_I64, 5, 7));
	set_axes(&md, o, 2, (int64_t[]){0, 2});
	check(&md, o->outputs[0]);
	/* a constant scale other than 1 on the symbolic batch itself */
	md = model_new();
	o = resize(&md, input_sym(&md, TBC_DT_F32, "N,3", 3, -3, 3), NULL, CONST(&md, TBC_DT_F32, 2, 1), NULL);
	check(&md, o->outputs[0]);
}

/* ---- Given while running ----------------------------------------------------------*/
static void test_resize_runtime_scales_every_mode_and_coordinate_mode(void **state) {
	(void)state;
	for (int m = 0; m < 3; m++)
		for (int t = 0; t < 6; t++) {
			model md = model_new();
			tbc_value *sc = RUN(&md, TBC_DT_F32, 1, 1, 2.3, 0.7);
			tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "1,2,4,6"), NULL, sc, NULL), modes[m], ctms[t]);
			check(&md, o->outputs[0]);
			md = model_new();
			tbc_value *sz = RUN(&md, TBC_DT_I64, 1, 3, 1, 9);
			o = with(resize(&md, input(&md, TBC_DT_F64, "1,2,4,6"), NULL, NULL, sz), modes[m], ctms[t]);
			check(&md, o->outputs[0]);
		}
}

static void test_resize_nearest_modes(void **state) {
	(void)state;
	static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	for (int i = 0; i < 4; i++)
		for (int t = 0; t < 6; t++) {
			model md = model_new();
			tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "1,1,4,5"), NULL, NULL, RUN(&md, TBC_DT_I64, 1, 1, 8, 3)), NULL,
					 ctms[t]);
			set_str(o, "nearest_mode", nms[i]);
			check(&md, o->outputs[0]);
			md = model_new(); /* exclude_outside changes which neighbour nearest takes at the edge */
			o = with(resize(&md, input(&md, TBC_DT_F32, "1,1,4,5"), NULL, RUN(&md, TBC_DT_F32, 1, 1, 2.5, 0.5), NULL), NULL,
				 ctms[t]);
			set_str(o, "nearest_mode", nms[i]);
			attr_int(o, "exclude_outside", 1);
			check(&md, o->outputs[0]);
		}
}

static void test_resize_cubic_coeff_a_and_exclude_outside(void **state) {
	(void)state;
	for (int run = 0; run < 2; run++)
		for (int up = 0; up < 2; up++) {
			model md = model_new();
			tbc_value *sc = run ? RUN(&md, TBC_DT_F32, 1, 1, up ? 2 : 0.8, up ? 2 : 0.8)
					    : CONST(&md, TBC_DT_F32, 1, 1, up ? 2 : 0.8, up ? 2 : 0.8);
			tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "1,1,4,4"), NULL, sc, NULL), "cubic", NULL);
			set_float(o, "cubic_coeff_a", -0.5);
			attr_int(o, "exclude_outside", 1);
			check(&md, o->outputs[0]);
			md = model_new(); /* exclude_outside with linear too */
			sc = run ? RUN(&md, TBC_DT_F32, 1, 1, up ? 3 : 0.4, 1.3) : CONST(&md, TBC_DT_F32, 1, 1, up ? 3 : 0.4, 1.3);
			o = with(resize(&md, input(&md, TBC_DT_F32, "1,2,5,4"), NULL, sc, NULL), "linear", "asymmetric");
			attr_int(o, "exclude_outside", 1);
			check(&md, o->outputs[0]);
		}
}

/* Antialias widens the taps by 1/scale when downsampling: the footprint a
 * computed symbol when the scale is given while running. */
static void test_resize_antialias(void **state) {
	(void)state;
	for (int m = 1; m < 3; m++)
		for (int run = 0; run < 2; run++) {
			model md = model_new();
			tbc_value *sc = run ? RUN(&md, TBC_DT_F32, 1, 1, 0.6, 0.3) : CONST(&md, TBC_DT_F32, 1, 1, 0.6, 0.3);
			tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "1,2,7,11"), NULL, sc, NULL), modes[m], NULL);
			attr_int(o, "antialias", 1);
			check(&md, o->outputs[0]);
			md = model_new(); /* sizes; upsampling one axis (no widening there), exclude_outside */
			tbc_value *sz = run ? RUN(&md, TBC_DT_I64, 1, 1, 3, 13) : CONST(&md, TBC_DT_I64, 1, 1, 3, 13);
			o = with(resize(&md, input(&md, TBC_DT_F32, "1,1,8,6"), NULL, NULL, sz), modes[m], "align_corners");
			attr_int(o, "antialias", 1);
			attr_int(o, "exclude_outside", 1);
			check(&md, o->outputs[0]);
		}
}

static void test_resize_axes_and_keep_aspect_ratio_policy(void **state) {
	(void)state;
	static const char *const pols[] = {"stretch", "not_larger", "not_smaller"};
	for (int p = 0; p < 3; p++)
		for (int run = 0; run < 2; run++) {
			model md = model_new();
			tbc_value *sz = run ? RUN(&md, TBC_DT_I64, 7, 8) : CONST(&md, TBC_DT_I64, 7, 8);
			tbc_op *o = resize(&md, input(&md, TBC_DT_F32, "1,1,2,3"), NULL, NULL, sz);
			set_axes(&md, o, 2, (int64_t[]){3, 2});
			set_str(o, "keep_aspect_ratio_policy", pols[p]);
			check(&md, o->outputs[0]);
			md = model_new();
			sz = run ? RUN(&md, TBC_DT_I64, 3, 2) : CONST(&md, TBC_DT_I64, 3, 2);
			o = with(resize(&md, input(&md, TBC_DT_F32, "1,4,6,2"), NULL, NULL, sz), "linear", "pytorch_half_pixel");
			set_axes(&md, o, 2, (int64_t[]){-2, 1});
			set_str(o, "keep_aspect_ratio_policy", pols[p]);
			check(&md, o->outputs[0]);
		}
}

/* tf_crop_and_resize: a roi (float32, float64; constant or given while
 * running), points outside it take extrapolation_value. */
static void test_resize_tf_crop_and_resize(void **state) {
	(void)state;
	for (int run = 0; run < 2; run++)
		for (int m = 0; m < 3; m++) {
			model md = model_new();
			tbc_value *roi = run ? RUN(&md, TBC_DT_F32, 0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7) : CONST(&md, TBC_DT_F32, 0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7);
			tbc_op *o = with(resize(&md, input(&md, TBC_DT_F32, "1,1,4,4"), roi, NULL, RUN(&md, TBC_DT_I64, 1, 1, 3, 3)), modes[m],
					 "tf_crop_and_resize");
			set_float(o, "extrapolation_value", 10);
			check(&md, o->outputs[0]);
			md = model_new();
			roi = run ? RUN(&md, TBC_DT_F64, 0.6, 0.4, 0.8, 0.6) : CONST(&md, TBC_DT_F64, 0.6, 0.4, 0.8, 0.6);
			o = with(resize(&md, input(&md, TBC_DT_F32, "2,1,4,4"), roi, CONST(&md, TBC_DT_F32, 1.5, 0.75), NULL), modes[m],
				 "tf_crop_and_resize");
			set_axes(&md, o, 2, (int64_t[]){3, 2});
			check(&md, o->outputs[0]);
			md = model_new(); /* the identity roi: the axis is not resized */
			roi = run ? RUN(&md, TBC_DT_F32, 0, 1) : CONST(&md, TBC_DT_F32, 0, 1);
			o = with(resize(&md, input(&md, TBC_DT_I16, "3,5"), roi, CONST(&md, TBC_DT_F32, 1), NULL), modes[m],
				 "tf_crop_and_resize");
			set_axes(&md, o, 1, (int64_t[]){1});
			check(&md, o->outputs[0]);
		}
}

/* ---- Dtypes --------------------------------------------------------------------------*/
static void test_resize_dtypes(void **state) {
	(void)state;
	static const tbc_dtype dts[] = {TBC_DT_F16, TBC_DT_BF16, TBC_DT_F64, TBC_DT_F8E4M3FN, TBC_DT_U8, TBC_DT_I8, TBC_DT_I16,
					TBC_DT_U16,  TBC_DT_I32,  TBC_DT_U32, TBC_DT_I64,       TBC_DT_U64, TBC_DT_I4, TBC_DT_BOOL};
	for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
		for (int m = 0; m < 3; m++) {
			bool is_float = dts[i] == TBC_DT_F16 || dts[i] == TBC_DT_BF16 || dts[i] == TBC_DT_F64 || dts[i] == TBC_DT_F8E4M3FN;
			double lo = is_float ? -3 : dts[i] == TBC_DT_BOOL ? 0 : dts[i] == TBC_DT_I4 ? -8 : 0;
			double hi = is_float ? 3 : dts[i] == TBC_DT_BOOL ? 2 : dts[i] == TBC_DT_I4 ? 8 : 100;
			model md = model_new();
			tbc_op *o = with(resize(&md, input_sym(&md, dts[i], "1,2,3,4", 1, lo, hi), NULL, RUN(&md, TBC_DT_F32, 1, 1, 2.5, 1.5), NULL),
					 modes[m], NULL);
			check(&md, o->outputs[0]);
			md = model_new();
			o = with(resize(&md, input_sym(&md, dts[i], "2,5", 1, lo, hi), NULL, CONST(&md, TBC_DT_F16, 1, 0.6), NULL), modes[m], NULL);
			check(&md, o->outputs[0]);
		}
	/* cubic overshoots: u8 saturates at 0 and 255, f16 at its largest finite */
	model md = model_new();
	tbc_op *o = with(resize(&md, input_sym(&md, TBC_DT_U8, "6,6", 1, 0, 256), NULL, CONST(&md, TBC_DT_F32, 2.5, 2.5), NULL), "cubic", NULL);
	check(&md, o->outputs[0]);
	md = model_new();
	o = with(resize(&md, input_sym(&md, TBC_DT_F16, "6,6", 1, -65504, 65504), NULL, RUN(&md, TBC_DT_F32, 2.5, 2.5), NULL), "cubic", NULL);
	check(&md, o->outputs[0]);
	/* nearest copies int64 exactly (2^62 + 1 is no double) */
	md = model_new();
	tbc_value *x = input(&md, TBC_DT_I64, "3");
	tbc_set_i64(md.in[0], 1, ((int64_t)1 << 62) + 1);
	check(&md, resize(&md, x, NULL, RUN(&md, TBC_DT_F32, 3), NULL)->outputs[0]);
}

/* Scales of exactly 1 given while running leave an axis as it is (the
 * interpreter skips it): an infinity stays, no 0 * inf from a neighbour. */
static void test_resize_axes_not_resized_while_running(void **state) {
	(void)state;
	for (int m = 0; m < 3; m++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,3,4");
		tbc_set_f64(md.in[0], 5, INFINITY);
		tbc_set_f64(md.in[0], 14, -INFINITY);
		tbc_op *o = with(resize(&md, x, NULL, RUN(&md, TBC_DT_F32, 1, 1, 2), NULL), modes[m], NULL);
		check(&md, o->outputs[0]);
	}
}

/* ---- Errors while running ---------------------------------------------------------------*/
static void test_resize_errors_fail_the_run(void **state) {
	(void)state;
	model md = model_new(); /* a negative size */
	check_run_fails(&md, resize(&md, input(&md, TBC_DT_F32, "2,3"), NULL, NULL, RUN(&md, TBC_DT_I64, 2, -1))->outputs[0]);
	md = model_new(); /* a zero, a negative and a NaN scale */
	check_run_fails(&md, resize(&md, input(&md, TBC_DT_F32, "2,3"), NULL, RUN(&md, TBC_DT_F32, 1, 0), NULL)->outputs[0]);
	md = model_new();
	check_run_fails(&md, resize(&md, input(&md, TBC_DT_F32, "2,3"), NULL, RUN(&md, TBC_DT_F32, -2, 1), NULL)->outputs[0]);
	md = model_new();
	check_run_fails(&md, resize(&md, input(&md, TBC_DT_F32, "2,3"), NULL, RUN(&md, TBC_DT_F32, 1, NAN), NULL)->outputs[0]);
	md = model_new(); /* an infinite scale */
	check_run_fails(&md, resize(&md, input(&md, TBC_DT_F32, "2,3"), NULL, RUN(&md, TBC_DT_F32, INFINITY, 1), NULL)->outputs[0]);
	md = model_new(); /* an empty dim cannot grow */
	check_run_fails(&md, resize(&md, input(&md, TBC_DT_F32, "0,3"), NULL, NULL, RUN(&md, TBC_DT_I64, 2, 6))->outputs[0]);
	md = model_new(); /* but may stay empty, and a size of 0 empties the output */
	check(&md, resize(&md, input(&md, TBC_DT_F32, "0,3"), NULL, NULL, RUN(&md, TBC_DT_I64, 0, 6))->outputs[0]);
	md = model_new();
	check(&md, with(resize(&md, input(&md, TBC_DT_F32, "2,3"), NULL, NULL, RUN(&md, TBC_DT_I64, 2, 0)), "cubic", NULL)->outputs[0]);
	md = model_new(); /* a symbolic batch of 0 with a size for it */
	tbc_op *o = resize(&md, input_sym(&md, TBC_DT_F32, "N,3", 0, -3, 3), NULL, NULL, CONST(&md, TBC_DT_I64, 2, 6));
	check_run_fails(&md, o->outputs[0]);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resize_constant_scales_need_no_shape_kernel),
		cmocka_unit_test(test_resize_constant_scales_every_mode_and_coordinate_mode),
		cmocka_unit_test(test_resize_symbolic_batch),
		cmocka_unit_test(test_resize_runtime_scales_every_mode_and_coordinate_mode),
		cmocka_unit_test(test_resize_nearest_modes),
		cmocka_unit_test(test_resize_cubic_coeff_a_and_exclude_outside),
		cmocka_unit_test(test_resize_antialias),
		cmocka_unit_test(test_resize_axes_and_keep_aspect_ratio_policy),
		cmocka_unit_test(test_resize_tf_crop_and_resize),
		cmocka_unit_test(test_resize_dtypes),
		cmocka_unit_test(test_resize_axes_not_resized_while_running),
		cmocka_unit_test(test_resize_errors_fail_the_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
