/* ConvTranspose, GridSample, MaxUnpool and RoiAlign lowered
 * (codegen/lower_conv_t.c) against the reference interpreter: each test
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

#include "codegen/lower.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"

/* ---- Building graphs ---------------------------------------------------------*/
typedef struct model {
	tbc_module *m;
	tbc_tensor *in[8];
	int n_in;
	uint64_t seed;
} model;

static model model_new(void) { return (model){.m = tbc_module_new("test"), .seed = 12345}; }

static double rnd(model *md) {
	md->seed = md->seed * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(md->seed >> 11) / 9007199254740992.0;
}

static void fill(model *md, tbc_tensor *t, double lo, double hi) {
	for (int64_t i = 0; i < t->numel; i++) {
		double v = lo + (hi - lo) * rnd(md);
		if (!tbc_dtype_is_float(t->dtype)) v = floor(v);
		if (t->dtype == TBC_DT_BOOL) v = v > (lo + hi) / 2;
		tbc_store_f64(t->dtype, t->data, (size_t)i, v);
	}
}

/* A graph input whose dims are given as text: "2,3,N" (letters are symbolic);
 * the test tensor uses `sizes` for the symbolic dims. */
static tbc_value *input_sym(model *md, tbc_dtype dt, const char *dims, int64_t sym_size, double lo, double hi) {
	tbc_type ty;
	memset(&ty, 0, sizeof ty);
	ty.dtype = dt;
	int64_t concrete[TBC_MAX_RANK];
	int r = 0;
	for (const char *s = dims; *s;) {
		if (*s >= 'A' && *s <= 'Z') {
			char name[2] = {*s, 0};
			ty.dims[r].size = -1;
			ty.dims[r].sym = tbc_arena_strdup(md->m->arena, name);
			concrete[r++] = sym_size;
			s++;
		} else {
			char *end;
			ty.dims[r].size = strtoll(s, &end, 10);
			concrete[r] = ty.dims[r].size;
			r++;
			s = end;
		}
		if (*s == ',') s++;
	}
	ty.rank = r;
	char name[16];
	snprintf(name, sizeof name, "x%d", md->n_in);
	tbc_value *v = tbc_graph_add_input(md->m->main, name, &ty);
	tbc_tensor *t = tbc_tensor_create(dt, r, concrete);
	assert_non_null(t);
	fill(md, t, lo, hi);
	md->in[md->n_in++] = t;
	return v;
}
static tbc_value *input(model *md, tbc_dtype dt, const char *dims) { return input_sym(md, dt, dims, 3, -3, 3); }

__attribute__((unused)) static tbc_value *constant(model *md, tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	for (int64_t i = 0; i < t->numel; i++) tbc_store_f64(dt, t->data, (size_t)i, vals[i]);
	tbc_value *v = tbc_graph_add_const(md->m->main, NULL, t);
	tbc_tensor_destroy(t);
	return v;
}

static tbc_op *node(model *md, tbc_opcode code, int n, tbc_value *a, tbc_value *b, tbc_value *c) {
	tbc_value *ins[3] = {a, b, c};
	return tbc_op_new(md->m->main, code, "n", n, ins, 1);
}

/* ---- Checking ----------------------------------------------------------------*/
static void print_diags(tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[1024];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "  %s\n", buf);
	}
}

static void compare(const char *what, const tbc_tensor *want, const tbc_tensor *got, double rtol) {
	assert_int_equal(got->dtype, want->dtype);
	assert_int_equal(got->rank, want->rank);
	for (int d = 0; d < want->rank; d++) assert_int_equal(got->dims[d], want->dims[d]);
	for (int64_t i = 0; i < want->numel; i++) {
		if (tbc_dtype_is_float(want->dtype)) {
			double a = tbc_load_f64(want->dtype, want->data, (size_t)i), b = tbc_load_f64(got->dtype, got->data, (size_t)i);
			if (isnan(a) && isnan(b)) continue;
			if (!(fabs(a - b) <= 1e-6 + rtol * fabs(a)) && !(a == b)) {
				fprintf(stderr, "%s: element %lld: want %.9g got %.9g\n", what, (long long)i, a, b);
				fail();
			}
		} else {
			int64_t a = tbc_load_i64(want->dtype, want->data, (size_t)i), b = tbc_load_i64(got->dtype, got->data, (size_t)i);
			if (a != b) {
				fprintf(stderr, "%s: element %lld: want %lld got %lld\n", what, (long long)i, (long long)a, (long long)b);
				fail();
			}
		}
	}
}

/* Infers, then runs the interpreter, the evaluator and the JIT on the graph
 * whose outputs are outs; compares; frees the model. */
static void check_outputs(model *md, int n_out, tbc_value **outs, double rtol) {
	tbc_diags *d = tbc_diags_create();
	for (int i = 0; i < n_out; i++) tbc_graph_add_output(md->m->main, outs[i]);
	tbc_infer cx = {md->m, d};
	if (!tbc_infer_graph(&cx, md->m->main)) print_diags(d);
	assert_int_equal(tbc_diags_count(d), 0);
	tbc_tensor *want[8] = {0}, *got[8] = {0}, *jit[8] = {0};
	tbc_code rc = tbc_interpret(md->m, md->in, (size_t)md->n_in, want, (size_t)n_out, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);

	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	rc = kir_lower(md->m, arena, d, &p);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	rc = kir_program_eval(p, md->in, (size_t)md->n_in, got, (size_t)n_out, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	for (int i = 0; i < n_out; i++) compare("kernel IR evaluator", want[i], got[i], rtol);

	tbc_jit *j = NULL;
	rc = tbc_jit_compile(md->m, NULL, d, &j);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	rc = tbc_abi_run_serial(tbc_jit_descriptor(j), md->in, (size_t)md->n_in, jit, (size_t)n_out, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	for (int i = 0; i < n_out; i++) compare("JIT", want[i], jit[i], rtol);
	tbc_jit_destroy(j);

	for (int i = 0; i < n_out; i++) {
		tbc_tensor_destroy(want[i]);
		tbc_tensor_destroy(got[i]);
		tbc_tensor_destroy(jit[i]);
	}
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	tbc_module_destroy(md->m);
}

static void check_lowering_fails(model *md, tbc_value *out, tbc_code code, const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_graph_add_output(md->m->main, out);
	tbc_infer cx = {md->m, d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md->m, arena, d, &p), code);
	assert_true(tbc_diags_count(d) > 0);
	const char *msg = tbc_diags_get(d, 0)->message;
	if (!strstr(msg, text)) fprintf(stderr, "message: %s\n", msg);
	assert_non_null(strstr(msg, text));
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}



static void set_ints(model *md, tbc_op *o, const char *name, int n, const int64_t *v) {
	tbc_attr *at = tbc_op_add_attr(o, name, TBC_ATTR_INTS);
	at->n = n;
	at->ints = tbc_arena_array(md->m->arena, (size_t)n + 1, sizeof *at->ints);
	memcpy(at->ints, v, (size_t)n * sizeof *v);
}
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
	if (c->strides[0]) set_ints(md, o, "strides", (int)c->nsp, c->strides);
	if (c->dil[0]) set_ints(md, o, "dilations", (int)c->nsp, c->dil);
	if (c->pads[0] >= 0) set_ints(md, o, "pads", 2 * (int)c->nsp, c->pads);
	if (c->out_pad[0]) set_ints(md, o, "output_padding", (int)c->nsp, c->out_pad);
	if (c->out_shape[0]) set_ints(md, o, "output_shape", (int)c->nsp, c->out_shape);
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
			     "no CPU lowering yet");
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
		set_ints(&md, mp, "kernel_shape", 2, v ? k3 : k2);
		set_ints(&md, mp, "strides", 2, v ? s1 : s2); /* v = 1: overlapping windows, repeated indices */
		tbc_value *ins[2] = {mp->outputs[0], mp->outputs[1]};
		tbc_op *up = tbc_op_new(md.m->main, TBC_OP_MaxUnpool, "up", 2, ins, 1);
		set_ints(&md, up, "kernel_shape", 2, v ? k3 : k2);
		set_ints(&md, up, "strides", 2, v ? s1 : s2);
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
	set_ints(&md, up, "kernel_shape", 2, (const int64_t[]){2, 2});
	set_ints(&md, up, "strides", 2, (const int64_t[]){2, 2});
	check_outputs(&md, 1, (tbc_value *[]){up->outputs[0]}, 1e-6);
	/* An index past the unpooled 4x4 fails the run, as in the interpreter. */
	md = model_new();
	x = input(&md, TBC_DT_F32, "1,1,2,2");
	ix = constant(&md, TBC_DT_I64, 4, idx_dims, (const double[]){1, 3, 8, 16});
	up = node(&md, TBC_OP_MaxUnpool, 2, x, ix, NULL);
	set_ints(&md, up, "kernel_shape", 2, (const int64_t[]){2, 2});
	set_ints(&md, up, "strides", 2, (const int64_t[]){2, 2});
	tbc_value *y = up->outputs[0];
	tbc_diags *d = tbc_diags_create();
	tbc_graph_add_output(md.m->main, y);
	tbc_infer cx = {md.m, d};
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
		if (c->strides[0]) set_ints(&md, o, "strides", (int)c->nsp, c->strides);
		if (c->dil[0]) set_ints(&md, o, "dilations", (int)c->nsp, c->dil);
		if (c->pads[0] >= 0) set_ints(&md, o, "pads", 2 * (int)c->nsp, c->pads);
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
