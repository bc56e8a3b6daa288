/* ConvTranspose, GridSample, MaxUnpool and RoiAlign lowered
 * (codegen/lower/conv_more.c) against the reference interpreter: each test
 * builds a small graph, runs it with tbc_interpret, with the kernel IR
 * evaluator (lowering alone) and JIT-compiled for the host, and compares all
 * three. */
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
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"

static void set_str(tbc_op *o, const char *name, const char *v) {
	tbc_attr *at = tbc_op_add_attr(o, name, TBC_ATTR_STRING);
	at->s = v;
	at->s_len = strlen(v);
}


static void set_int(tbc_op *o, const char *name, int64_t v) { tbc_op_add_attr(o, name, TBC_ATTR_INT)->i = v; }
static void set_float(tbc_op *o, const char *name, double v) { tbc_op_add_attr(o, name, TBC_ATTR_FLOAT)->f = v; }

/* ---- ConvTranspose ------------------------------------------------------------*/
typedef struct tconv {
	const char *x, *w; /* shapes */
	int64_t group, nsp;
	int64_t strides[3], dil[3], pads[6], out_pad[3], out_shape[3];
	const char *auto_pad;
	bool bias;
} tconv;

static tbc_op *tconv_op(model *md, tbc_dtype dt, const tconv *c) {
	tbc_value *x = input_sym(md, dt, c->x, 2, -1, 1), *w = input_sym(md, dt, c->w, 2, -1, 1);
	tbc_value *b = NULL;
	if (c->bias) {
		/* W is (C, M/group, k...): the bias has M values. */
		const char *p = strchr(c->w, ',') + 1;
		char dims[16];
		snprintf(dims, sizeof dims, "%lld", atoll(p) * c->group);
		b = input(md, dt, dims);
	}
	tbc_op *o = node(md, TBC_OP_ConvTranspose, b ? 3 : 2, x, w, b);
	if (c->group != 1) set_int(o, "group", c->group);
	if (c->strides[0]) attr_ints(o, "strides", (int)c->nsp, c->strides);
	if (c->dil[0]) attr_ints(o, "dilations", (int)c->nsp, c->dil);
	if (c->pads[0] >= 0) attr_ints(o, "pads", 2 * (int)c->nsp, c->pads);
	if (c->out_pad[0]) attr_ints(o, "output_padding", (int)c->nsp, c->out_pad);
	if (c->out_shape[0]) attr_ints(o, "output_shape", (int)c->nsp, c->out_shape);
	if (c->auto_pad) set_str(o, "auto_pad", c->auto_pad);
	return o;
}

static void test_convtranspose_geometries(void **state) {
	(void)state;
	static const tconv cases[] = {
		{"1,1,3,3", "1,2,3,3", 1, 2, {0}, {0}, {-1}, {0}, {0}, NULL, false},               /* the spec's example */
		{"2,3,4,5", "3,4,3,3", 1, 2, {2, 2}, {0}, {-1}, {0}, {0}, NULL, true},             /* strides */
		{"1,3,4,5", "3,2,3,3", 1, 2, {3, 2}, {0}, {1, 2, 0, 1}, {1, 1}, {0}, NULL, true},  /* pads, output_padding */
		{"1,2,5,5", "2,2,2,2", 1, 2, {0}, {2, 3}, {-1}, {0}, {0}, NULL, false},            /* dilations */
		{"1,4,3,3", "4,2,3,3", 2, 2, {2, 2}, {0}, {-1}, {0}, {0}, NULL, true},             /* groups */
		{"1,6,4,4", "6,1,3,3", 6, 2, {2, 2}, {0}, {1, 1, 1, 1}, {0}, {0}, NULL, true},     /* depthwise */
		{"1,1,3,3", "1,2,3,3", 1, 2, {3, 2}, {0}, {-1}, {0}, {10, 8}, NULL, false},        /* output_shape */
		{"1,1,3,3", "1,2,3,3", 1, 2, {2, 2}, {0}, {-1}, {0}, {0}, "SAME_UPPER", true},
		{"1,1,3,4", "1,2,4,3", 1, 2, {2, 3}, {0}, {-1}, {0}, {0}, "SAME_LOWER", false},
		{"1,2,3,3", "2,3,1,1", 1, 2, {2, 2}, {0}, {-1}, {0}, {0}, NULL, false},            /* 1x1, gaps between taps */
		{"1,2,3,3", "2,1,2,2", 1, 2, {4, 4}, {0}, {-1}, {0}, {0}, NULL, false},            /* kernel smaller than stride */
		{"2,3,7", "3,2,3", 1, 1, {2}, {0}, {1, 0}, {1}, {0}, NULL, true},                  /* 1-D */
		{"1,2,3,4,3", "2,2,3,3,2", 1, 3, {2, 1, 2}, {0}, {-1}, {0}, {0}, NULL, true},       /* 3-D */
		{"1,8,9,9", "8,16,4,4", 1, 2, {2, 2}, {0}, {1, 1, 1, 1}, {0}, {0}, NULL, true},    /* a decoder upsampling step */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){tconv_op(&md, TBC_DT_F32, &cases[i])->outputs[0]}, 1e-4);
	}
}

static void test_convtranspose_symbolic_batch_f64_f16(void **state) {
	(void)state;
	static const tconv c = {"N,3,4,4", "3,2,3,3", 1, 2, {2, 2}, {0}, {1, 1, 1, 1}, {1, 1}, {0}, NULL, true};
	model md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){tconv_op(&md, TBC_DT_F32, &c)->outputs[0]}, 1e-4);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){tconv_op(&md, TBC_DT_F64, &c)->outputs[0]}, 1e-12);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){tconv_op(&md, TBC_DT_F16, &c)->outputs[0]}, 2e-3);
}

/* ---- GridSample -----------------------------------------------------------------*/
static void test_gridsample_every_mode_padding_and_alignment(void **state) {
	(void)state;
	static const char *const modes[] = {"nearest", "linear", "cubic"};
	static const char *const pads[] = {"zeros", "border", "reflection"};
	for (int m = 0; m < 3; m++)
		for (int p = 0; p < 3; p++)
			for (int a = 0; a < 2; a++) {
				model md = model_new();
				tbc_value *x = input(&md, TBC_DT_F32, "2,3,5,4");
				/* grid points reach well outside [-1, 1] so padding matters */
				tbc_value *g = input_sym(&md, TBC_DT_F32, "2,6,7,2", 1, -1.7, 1.7);
				tbc_op *o = node(&md, TBC_OP_GridSample, 2, x, g, NULL);
				set_str(o, "mode", modes[m]);
				set_str(o, "padding_mode", pads[p]);
				set_int(o, "align_corners", a);
				check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-5);
			}
}

static void test_gridsample_1d_3d_symbolic_batch_f64(void **state) {
	(void)state;
	static const char *const shapes[][2] = {{"2,2,6", "2,5,1"}, {"1,2,3,4,5", "1,2,3,4,3"}, {"N,2,4,4", "N,3,3,2"}};
	static const char *const modes[] = {"nearest", "linear", "cubic"};
	for (size_t i = 0; i < 3; i++)
		for (int m = 0; m < 3; m++) {
			if (i == 1 && m == 2) continue; /* cubic is 2-D only in onnx's reference; the interpreter has it N-D */
			model md = model_new();
			tbc_value *x = input_sym(&md, TBC_DT_F64, shapes[i][0], 2, -3, 3);
			tbc_value *g = input_sym(&md, TBC_DT_F64, shapes[i][1], 2, -1.3, 1.3);
			tbc_op *o = node(&md, TBC_OP_GridSample, 2, x, g, NULL);
			set_str(o, "mode", modes[m]);
			set_str(o, "padding_mode", m == 0 ? "reflection" : "border");
			check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-12);
		}
}

static void test_gridsample_symbolic_spatial_dims_are_refused(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "1,2,H,4"), *g = input(&md, TBC_DT_F32, "1,3,3,2");
	check_lowering_fails(&md, node(&md, TBC_OP_GridSample, 2, x, g, NULL)->outputs[0], TBC_ERR_UNSUPPORTED,
			     "no lowering yet");
}

/* ---- MaxUnpool ------------------------------------------------------------------*/
static void test_maxunpool_after_maxpool(void **state) {
	(void)state;
	/* MaxPool's indices feed MaxUnpool: every maximum lands where it came from. */
	static const int64_t k2[2] = {2, 2}, s2[2] = {2, 2}, k3[2] = {3, 3}, s1[2] = {1, 1};
	for (int v = 0; v < 2; v++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,3,6,8");
		tbc_op *mp = tbc_op_new(md.m->main, TBC_OP_MaxPool, "mp", 1, &x, 2);
		attr_ints(mp, "kernel_shape", 2, v ? k3 : k2);
		attr_ints(mp, "strides", 2, v ? s1 : s2); /* v = 1: overlapping windows, repeated indices */
		tbc_value *ins[2] = {mp->outputs[0], mp->outputs[1]};
		tbc_op *up = tbc_op_new(md.m->main, TBC_OP_MaxUnpool, "up", 2, ins, 1);
		attr_ints(up, "kernel_shape", 2, v ? k3 : k2);
		attr_ints(up, "strides", 2, v ? s1 : s2);
		check_outputs(&md, 1, (tbc_value *[]){up->outputs[0]}, 1e-6);
	}
}

static void test_maxunpool_constant_output_shape_and_bad_index(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "1,1,2,2");
	static const int64_t idx_dims[4] = {1, 1, 2, 2}, os_dims[1] = {4};
	tbc_value *ix = constant(&md, TBC_DT_I64, 4, idx_dims, (const double[]){1, 3, 8, 15});
	tbc_value *os = constant(&md, TBC_DT_I64, 1, os_dims, (const double[]){1, 1, 5, 5});
	tbc_op *up = node(&md, TBC_OP_MaxUnpool, 3, x, ix, os);
	attr_ints(up, "kernel_shape", 2, (const int64_t[]){2, 2});
	attr_ints(up, "strides", 2, (const int64_t[]){2, 2});
	check_outputs(&md, 1, (tbc_value *[]){up->outputs[0]}, 1e-6);
	/* An index past the unpooled 4x4 fails the run, as in the interpreter. */
	md = model_new();
	x = input(&md, TBC_DT_F32, "1,1,2,2");
	ix = constant(&md, TBC_DT_I64, 4, idx_dims, (const double[]){1, 3, 8, 16});
	up = node(&md, TBC_OP_MaxUnpool, 2, x, ix, NULL);
	attr_ints(up, "kernel_shape", 2, (const int64_t[]){2, 2});
	attr_ints(up, "strides", 2, (const int64_t[]){2, 2});
	tbc_value *y = up->outputs[0];
	tbc_diags *d = tbc_diags_create();
	tbc_graph_add_output(md.m->main, y);
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_tensor *got = NULL;
	assert_int_not_equal(tbc_run_cpu(md.m, md.in, (size_t)md.n_in, &got, 1, d), TBC_OK);
	assert_null(got);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
}

/* ---- RoiAlign -------------------------------------------------------------------*/
static void test_roialign_modes_and_sampling(void **state) {
	(void)state;
	static const char *const modes[] = {"avg", "max"}, *const ctms[] = {"half_pixel", "output_half_pixel"};
	static const int64_t rd[2] = {4, 4}, bd[1] = {4};
	static const double rois[16] = {0, 0, 9, 9, 0.5, 2.25, 4, 7.5, 6, 1, 12, 3, -2, -1, 3, 14};
	for (int m = 0; m < 2; m++)
		for (int c = 0; c < 2; c++)
			for (int ratio = 0; ratio <= 2; ratio += 2)
				for (int wide = 0; wide < 2; wide++) {
					tbc_dtype dt = wide ? TBC_DT_F64 : TBC_DT_F32;
					model md = model_new();
					tbc_value *x = input(&md, dt, "2,3,10,10");
					tbc_value *r = constant(&md, dt, 2, rd, rois);
					tbc_value *b = constant(&md, TBC_DT_I64, 1, bd, (const double[]){0, 1, 1, 0});
					tbc_op *o = node(&md, TBC_OP_RoiAlign, 3, x, r, b);
					set_str(o, "mode", modes[m]);
					set_str(o, "coordinate_transformation_mode", ctms[c]);
					set_int(o, "output_height", 3);
					set_int(o, "output_width", 4);
					set_float(o, "spatial_scale", 0.75);
					if (ratio) set_int(o, "sampling_ratio", ratio);
					check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-6);
				}
}

/* ---- DeformConv -----------------------------------------------------------------*/
typedef struct dconv {
	const char *x, *w, *off, *mask; /* shapes; mask NULL: none */
	int64_t group, offset_group, nsp;
	int64_t strides[3], pads[6], dil[3];
	bool bias;
} dconv;

static void test_deformconv_groups_masks_and_offsets_outside(void **state) {
	(void)state;
	static const dconv cases[] = {
		{"1,1,3,3", "1,1,2,2", "1,8,2,2", NULL, 1, 1, 2, {0}, {-1}, {0}, false},
		{"2,4,6,5", "6,2,3,3", "2,36,6,5", "2,18,6,5", 2, 2, 2, {0}, {1, 1, 1, 1}, {0}, true},
		{"1,3,7,7", "4,3,3,3", "1,18,3,3", "1,9,3,3", 1, 1, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
		{"1,2,9,8", "2,2,2,3", "1,24,4,3", NULL, 1, 2, 2, {2, 2}, {0, 0, 0, 0}, {2, 1}, false},
		{"2,2,10", "3,2,3", "2,3,8", "2,3,8", 1, 1, 1, {0}, {-1}, {0}, true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const dconv *c = &cases[i];
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, c->x), *w = input(&md, TBC_DT_F32, c->w);
		/* offsets up to +-3 pixels: some taps sample outside X */
		tbc_value *off = input_sym(&md, TBC_DT_F32, c->off, 1, -3, 3);
		tbc_value *b = NULL, *mask = NULL;
		if (c->bias) {
			char dims[16];
			snprintf(dims, sizeof dims, "%lld", atoll(c->w));
			b = input(&md, TBC_DT_F32, dims);
		}
		if (c->mask) mask = input_sym(&md, TBC_DT_F32, c->mask, 1, 0, 1);
		tbc_value *ins[5] = {x, w, off, b, mask};
		tbc_op *o = tbc_op_new(md.m->main, TBC_OP_DeformConv, "n", mask ? 5 : b ? 4 : 3, ins, 1);
		if (c->group != 1) set_int(o, "group", c->group);
		if (c->offset_group != 1) set_int(o, "offset_group", c->offset_group);
		if (c->strides[0]) attr_ints(o, "strides", (int)c->nsp, c->strides);
		if (c->dil[0]) attr_ints(o, "dilations", (int)c->nsp, c->dil);
		if (c->pads[0] >= 0) attr_ints(o, "pads", 2 * (int)c->nsp, c->pads);
		check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_convtranspose_geometries),
		cmocka_unit_test(test_convtranspose_symbolic_batch_f64_f16),
		cmocka_unit_test(test_gridsample_every_mode_padding_and_alignment),
		cmocka_unit_test(test_gridsample_1d_3d_symbolic_batch_f64),
		cmocka_unit_test(test_gridsample_symbolic_spatial_dims_are_refused),
		cmocka_unit_test(test_maxunpool_after_maxpool),
		cmocka_unit_test(test_maxunpool_constant_output_shape_and_bad_index),
		cmocka_unit_test(test_roialign_modes_and_sampling),
		cmocka_unit_test(test_deformconv_groups_masks_and_offsets_outside),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
