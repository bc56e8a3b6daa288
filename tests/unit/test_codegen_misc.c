/* Lowering of BitCast, CumSum/CumProd with the axis given at run time,
 * Dropout in training mode and BatchNormalization in training mode
 * (codegen/lower/misc.c, codegen/lower/reduce.c, codegen/lower/norm.c): each graph runs
 * through the interpreter, the kernel IR evaluator and the JIT, and the
 * three agree (bit for bit where the interpreter's arithmetic is
 * reproduced exactly). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/support/codegen_check.h"

static void set_int(tbc_op *o, const char *name, int64_t v) { tbc_op_add_attr(o, name, TBC_ATTR_INT)->i = v; }
static void set_float(tbc_op *o, const char *name, double v) { tbc_op_add_attr(o, name, TBC_ATTR_FLOAT)->f = v; }

/* A rank-0 graph input of dtype dt holding v in the test run. */
static tbc_value *scalar_input(model *md, tbc_dtype dt, double v) {
	tbc_value *x = input_sym(md, dt, "", 1, 0, 1);
	tbc_store_f64(dt, md->in[md->n_in - 1]->data, 0, v);
	return x;
}

static const tbc_dtype every_dtype[] = {
	TBC_DT_F32,     TBC_DT_F64,         TBC_DT_F16,     TBC_DT_BF16,       TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ,
	TBC_DT_F8E5M2,  TBC_DT_F8E5M2FNUZ,  TBC_DT_F8E8M0,  TBC_DT_F4E2M1,     TBC_DT_I8,       TBC_DT_I16,
	TBC_DT_I32,     TBC_DT_I64,         TBC_DT_U8,      TBC_DT_U16,        TBC_DT_U32,      TBC_DT_U64,
	TBC_DT_BOOL,    TBC_DT_I4,          TBC_DT_U4,      TBC_DT_I2,         TBC_DT_U2,
};
#define N_DTYPES (sizeof every_dtype / sizeof *every_dtype)

/* ---- BitCast ----------------------------------------------------------------------*/
/* Random bit patterns, made valid for the dtype as tbc_store_bits makes them
 * (bool 0/1, sub-byte types in their low bits): NaNs with payloads, -0,
 * infinities and subnormals all turn up. */
static void fill_bits(model *md, tbc_tensor *t) {
	for (int64_t i = 0; i < t->numel; i++) {
		uint64_t bits = (uint64_t)(rnd(md) * 4294967296.0) << 32 | (uint64_t)(rnd(md) * 4294967296.0);
		tbc_store_bits(t->dtype, t->data, (size_t)i, bits);
	}
}

/* Every pair of dtypes of one width, both ways, over a symbolic batch:
 * the output holds the input's bits (bool: bits != 0). */
static void test_bitcast_every_same_width_pair(void **state) {
	(void)state;
	exact_bits = true;
	int pairs = 0;
	for (size_t a = 0; a < N_DTYPES; a++)
		for (size_t b = 0; b < N_DTYPES; b++) {
			tbc_dtype from = every_dtype[a], to = every_dtype[b];
			if (tbc_dtype_bits(from) != tbc_dtype_bits(to)) continue;
			model md = model_new();
			tbc_value *x = input_sym(&md, from, "N,5", 7, 0, 1);
			fill_bits(&md, md.in[0]);
			tbc_op *o = node(&md, TBC_OP_BitCast, 1, x, NULL, NULL);
			set_int(o, "to", to);
			check(&md, o->outputs[0]);
			pairs++;
		}
	exact_bits = false;
	assert_true(pairs > 60);
}

/* float32 -> int32 of known values, a scalar and a 2-D tensor. */
static void test_bitcast_float32_to_int32_known_bits(void **state) {
	(void)state;
	exact_bits = true;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "", 1, 0, 1);
	((float *)md.in[0]->data)[0] = 1.0f; /* 0x3f800000 */
	tbc_op *o = node(&md, TBC_OP_BitCast, 1, x, NULL, NULL);
	set_int(o, "to", TBC_DT_I32);
	check(&md, o->outputs[0]);

	md = model_new();
	x = input_sym(&md, TBC_DT_F32, "2,2", 1, 0, 1);
	const float v[4] = {-0.0f, INFINITY, -2.5f, NAN};
	memcpy(md.in[0]->data, v, sizeof v);
	o = node(&md, TBC_OP_BitCast, 1, x, NULL, NULL);
	set_int(o, "to", TBC_DT_I32);
	tbc_value *y = o->outputs[0];
	/* And back: the same bits, NaN's included.  Compiled at -O0: fusion
	 * would join the two BitCasts into one region, and fused regions have
	 * no bit reinterpretation (docs/lower-misc.md). */
	tbc_op *back = node(&md, TBC_OP_BitCast, 1, y, NULL, NULL);
	set_int(back, "to", TBC_DT_F32);
	tbc_value *outs[2] = {y, back->outputs[0]};
	tbc_compile_options o0 = {.opt_level = 0};
	check_outputs_with(&md, 2, outs, 0, &o0);
	exact_bits = false;
}

/* A uint8 byte above 1 cast to bool is true, as tbc_store_bits stores it. */
static void test_bitcast_uint8_to_bool_normalizes(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_U8, "4", 1, 0, 1);
	const uint8_t v[4] = {0, 1, 2, 255};
	memcpy(md.in[0]->data, v, sizeof v);
	tbc_op *o = node(&md, TBC_OP_BitCast, 1, x, NULL, NULL);
	set_int(o, "to", TBC_DT_BOOL);
	exact_bits = true;
	check(&md, o->outputs[0]);
	exact_bits = false;
}

/* ---- CumSum / CumProd with the axis given at run time -----------------------------*/
static tbc_value *cum(model *md, bool prod, tbc_value *x, tbc_value *axis, int exclusive, int reverse) {
	tbc_op *o = node(md, prod ? TBC_OP_CumProd : TBC_OP_CumSum, 2, x, axis, NULL);
	if (exclusive) set_int(o, "exclusive", 1);
	if (reverse) set_int(o, "reverse", 1);
	return o->outputs[0];
}

/* Every axis of a [N, 3, 4] tensor, negative ones too, exclusive and
 * reverse, sums and products, the axis as int64 and int32. */
static void test_cumsum_cumprod_runtime_axis_every_axis(void **state) {
	(void)state;
	exact_bits = true;
	for (int axis = -3; axis < 3; axis++)
		for (int v = 0; v < 8; v++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, TBC_DT_F32, "N,3,4", 2, -2, 2);
			tbc_value *a = scalar_input(&md, v & 4 ? TBC_DT_I32 : TBC_DT_I64, axis);
			check(&md, cum(&md, v & 1, x, a, (v >> 1) & 1, ((v >> 1) ^ v) & 1));
		}
	exact_bits = false;
}

/* Every dtype the interpreter takes: floats accumulate in f64 and round per
 * store, integers wrap (int8 products overflow here), bool sums are != 0. */
static void test_cumsum_cumprod_runtime_axis_every_dtype(void **state) {
	(void)state;
	exact_bits = true;
	for (size_t t = 0; t < N_DTYPES; t++)
		for (int v = 0; v < 4; v++) {
			tbc_dtype dt = every_dtype[t];
			model md = model_new();
			double lo = tbc_dtype_is_unsigned(dt) || dt == TBC_DT_BOOL || dt == TBC_DT_F8E8M0 ? 0 : -4;
			tbc_value *x = input_sym(&md, dt, "2,6", 1, lo, 5);
			tbc_value *a = scalar_input(&md, TBC_DT_I64, v & 2 ? -1 : 0);
			check(&md, cum(&md, v & 1, x, a, v == 3, v == 2));
		}
	exact_bits = false;
}

/* The constant-axis path takes the same dtypes. */
static void test_cumsum_constant_axis_narrow_and_bool(void **state) {
	(void)state;
	const tbc_dtype dts[] = {TBC_DT_BOOL, TBC_DT_I4, TBC_DT_U4, TBC_DT_F8E4M3FN, TBC_DT_F16, TBC_DT_U64};
	exact_bits = true;
	for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, dts[t], "3,5", 1, 0, 3);
		const double one[1] = {1};
		int64_t none[1] = {0};
		tbc_value *a = constant(&md, TBC_DT_I64, 0, none, one);
		check(&md, cum(&md, t & 1, x, a, 0, t & 2));
	}
	exact_bits = false;
}

/* An axis past the rank fails the run, as the interpreter fails. */
static void test_cumsum_runtime_axis_out_of_range_fails_the_run(void **state) {
	(void)state;
	const int bad[] = {2, -3, 100};
	for (int i = 0; i < 3; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "3,4");
		tbc_value *a = scalar_input(&md, TBC_DT_I64, bad[i]);
		check_run_fails_as(&md, cum(&md, i == 1, x, a, 0, 0), NULL, "axis is out of range for rank 2");
	}
}

/* A one-element axis tensor [1] works like a scalar. */
static void test_cumsum_runtime_axis_one_element_tensor(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_I32, "3,4");
	tbc_value *a = input_sym(&md, TBC_DT_I32, "1", 1, 0, 1);
	((int32_t *)md.in[1]->data)[0] = 1;
	check(&md, cum(&md, false, x, a, 1, 1));
}

/* ---- Dropout in training mode -----------------------------------------------------*/
/* Dropout(x, ratio, training_mode) with both outputs; ratio NULL: absent. */
static tbc_op *dropout(model *md, tbc_value *x, tbc_value *ratio, tbc_value *training, int64_t seed) {
	tbc_value *ins[3] = {x, ratio, training};
	tbc_op *o = tbc_op_new(md->m->main, TBC_OP_Dropout, "drop", 3, ins, 2);
	if (seed >= 0) set_int(o, "seed", seed);
	return o;
}

static void check_dropout(model *md, tbc_op *o) {
	exact_bits = true;
	check_outputs(md, 2, o->outputs, 0);
	exact_bits = false;
}

/* 3 x 7 x 50 = 1050 elements: 2100 draws, so the state regenerates four
 * times and the last block is partial; the masks and outputs are the
 * interpreter's bit for bit (numpy's RandomState stream). */
static void test_dropout_training_spans_several_state_blocks(void **state) {
	(void)state;
	const int64_t seeds[] = {-1 /* none: 0 */, 0, 42, 4294967295};
	for (int s = 0; s < 4; s++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_F32, "N,7,50", 3, -3, 3);
		tbc_value *r = scalar_input(&md, TBC_DT_F32, 0.3);
		tbc_value *t = scalar_input(&md, TBC_DT_BOOL, 1);
		check_dropout(&md, dropout(&md, x, r, t, seeds[s]));
	}
}

/* The scale 1 / (1 - ratio) is rounded to ratio's type; x of every float width. */
static void test_dropout_training_dtypes(void **state) {
	(void)state;
	const tbc_dtype xs[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_F16, TBC_DT_BF16, TBC_DT_F8E4M3FN};
	const tbc_dtype rs[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_F16, TBC_DT_BF16};
	for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
		for (size_t j = 0; j < sizeof rs / sizeof *rs; j++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, xs[i], "5,130", 1, -3, 3);
			tbc_value *r = scalar_input(&md, rs[j], 0.7);
			tbc_value *t = scalar_input(&md, TBC_DT_BOOL, 1);
			check_dropout(&md, dropout(&md, x, r, t, 7));
		}
}

/* training_mode false at run time, or ratio 0: the identity, mask all true;
 * ratio absent: 0.5; training_mode a constant true. */
static void test_dropout_training_mode_and_ratio_at_run_time(void **state) {
	(void)state;
	for (int v = 0; v < 4; v++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "4,9");
		tbc_value *r = v == 2 ? NULL : scalar_input(&md, TBC_DT_F32, v == 1 ? 0 : 0.25);
		tbc_value *t;
		if (v == 3) {
			const double yes[1] = {1};
			int64_t none[1] = {0};
			t = constant(&md, TBC_DT_BOOL, 0, none, yes);
		} else {
			t = scalar_input(&md, TBC_DT_BOOL, v != 0);
		}
		check_dropout(&md, dropout(&md, x, r, t, 3));
	}
}

/* Only the output wanted, or only the mask. */
static void test_dropout_training_one_output(void **state) {
	(void)state;
	for (int which = 0; which < 2; which++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F64, "N,20");
		tbc_value *r = scalar_input(&md, TBC_DT_F64, 0.5);
		tbc_value *t = scalar_input(&md, TBC_DT_BOOL, 1);
		tbc_op *o = dropout(&md, x, r, t, 11);
		exact_bits = true;
		check(&md, o->outputs[which]);
		exact_bits = false;
	}
}

/* A ratio outside [0, 1) fails a training run; at inference it is ignored. */
static void test_dropout_training_bad_ratio_fails_the_run(void **state) {
	(void)state;
	const double bad[] = {1.0, -0.5, 1.5};
	for (int i = 0; i < 3; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "3,4");
		tbc_value *r = scalar_input(&md, TBC_DT_F32, bad[i]);
		tbc_value *t = scalar_input(&md, TBC_DT_BOOL, 1);
		check_run_fails_as(&md, dropout(&md, x, r, t, 0)->outputs[0], NULL, "ratio must be in [0, 1)");
	}
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "3,4");
	tbc_value *r = scalar_input(&md, TBC_DT_F32, 1.5);
	tbc_value *t = scalar_input(&md, TBC_DT_BOOL, 0);
	check_dropout(&md, dropout(&md, x, r, t, 0));
}

/* ---- BatchNormalization in training mode ------------------------------------------*/
static tbc_op *batchnorm_training(model *md, tbc_dtype dt, tbc_dtype pt, const char *dims, const char *c) {
	tbc_value *ins[5];
	ins[0] = input_sym(md, dt, dims, 2, -3, 3);
	for (int i = 1; i < 5; i++) ins[i] = input_sym(md, pt, c, 2, i == 4 ? 0.5 : -1, 2);
	tbc_op *o = tbc_op_new(md->m->main, TBC_OP_BatchNormalization, "bn", 5, ins, 3);
	set_int(o, "training_mode", 1);
	return o;
}

/* Batch statistics, running mean and variance with momentum, and Y, in the
 * interpreter's f64 arithmetic: bit for bit. */
static void test_batchnorm_training_outputs(void **state) {
	(void)state;
	const char *shapes[] = {"2,3", "N,3,5", "2,3,4,5", "N,3,2,2,3"};
	exact_bits = true;
	for (int s = 0; s < 4; s++) {
		model md = model_new();
		tbc_op *o = batchnorm_training(&md, TBC_DT_F32, TBC_DT_F32, shapes[s], "3");
		if (s & 1) set_float(o, "momentum", 0.6);
		if (s == 2) set_float(o, "epsilon", 1e-2);
		check_outputs(&md, 3, o->outputs, 0);
	}
	exact_bits = false;
}

static void test_batchnorm_training_dtypes(void **state) {
	(void)state;
	const tbc_dtype xs[] = {TBC_DT_F64, TBC_DT_F16, TBC_DT_BF16, TBC_DT_F16};
	const tbc_dtype ps[] = {TBC_DT_F64, TBC_DT_F16, TBC_DT_F32, TBC_DT_F32};
	exact_bits = true;
	for (int i = 0; i < 4; i++) {
		model md = model_new();
		tbc_op *o = batchnorm_training(&md, xs[i], ps[i], "N,4,6", "4");
		check_outputs(&md, 3, o->outputs, 0);
	}
	exact_bits = false;
}

/* Only Y wanted (the running statistics unused). */
static void test_batchnorm_training_y_only(void **state) {
	(void)state;
	model md = model_new();
	tbc_op *o = batchnorm_training(&md, TBC_DT_F32, TBC_DT_F32, "N,2,7", "2");
	check(&md, o->outputs[0]);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bitcast_every_same_width_pair),
		cmocka_unit_test(test_bitcast_float32_to_int32_known_bits),
		cmocka_unit_test(test_bitcast_uint8_to_bool_normalizes),
		cmocka_unit_test(test_cumsum_cumprod_runtime_axis_every_axis),
		cmocka_unit_test(test_cumsum_cumprod_runtime_axis_every_dtype),
		cmocka_unit_test(test_cumsum_constant_axis_narrow_and_bool),
		cmocka_unit_test(test_cumsum_runtime_axis_out_of_range_fails_the_run),
		cmocka_unit_test(test_cumsum_runtime_axis_one_element_tensor),
		cmocka_unit_test(test_dropout_training_spans_several_state_blocks),
		cmocka_unit_test(test_dropout_training_dtypes),
		cmocka_unit_test(test_dropout_training_mode_and_ratio_at_run_time),
		cmocka_unit_test(test_dropout_training_one_output),
		cmocka_unit_test(test_dropout_training_bad_ratio_fails_the_run),
		cmocka_unit_test(test_batchnorm_training_outputs),
		cmocka_unit_test(test_batchnorm_training_dtypes),
		cmocka_unit_test(test_batchnorm_training_y_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
