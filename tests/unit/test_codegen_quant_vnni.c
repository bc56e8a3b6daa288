/* Integer GEMMs made of kernel IR's byte dot product (kir_dot4,
 * codegen/lower/quant_vnni.c) against the reference interpreter, bit for
 * bit: MatMulInteger and QLinearMatMul with a constant B, every
 * combination of u8 and i8 operands (vpdpbusd multiplies u8 by i8: the
 * others are shifted by 128 and paid back from column and row sums), zero
 * points absent, per tensor, per row of A and per column of B, K not a
 * multiple of 4, N not a multiple of the tile's 32 columns, M below and
 * past the tile's rows, batches and symbolic rows.  The evaluator lowers
 * for a description declaring dot4 (so it runs kir_dot4's semantics and
 * parallel loops backwards); the JIT compiles for the host, which takes
 * the vpdpbusd path where it has AVX-512 VNNI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower.h"
#include "codegen/target.h"
#include "ir/kernels/kernels.h"
#include "tests/unit/support/codegen_check.h"

static tbc_target_desc g_vnni;

static int setup(void **state) {
	(void)state;
	g_vnni = tbc_target_desc_cpu_default();
	g_vnni.vector_bytes = 64, g_vnni.vector_regs = 32;
	g_vnni.dot4_u8s8 = true;
	g_target = &g_vnni;
	return 0;
}

static double lo_of(tbc_dtype t) { return t == TBC_DT_U8 ? 0 : -128; }
static double hi_of(tbc_dtype t) { return t == TBC_DT_U8 ? 255 : 127; }

/* A K x N constant of dt, random with every extreme value present. */
static tbc_value *weights(model *md, tbc_dtype dt, int64_t K, int64_t N) {
	int64_t dims[2] = {K, N};
	double *v = malloc((size_t)(K * N) * sizeof *v);
	for (int64_t i = 0; i < K * N; i++) v[i] = lo_of(dt) + (double)(int64_t)(rnd(md) * 256);
	v[0] = lo_of(dt), v[K * N - 1] = hi_of(dt);
	tbc_value *c = constant(md, dt, 2, dims, v);
	free(v);
	return c;
}

static tbc_value *scalar(model *md, tbc_dtype dt, double x) { return constant(md, dt, 0, NULL, &x); }

static tbc_value *per(model *md, tbc_dtype dt, int64_t n) {
	double *v = malloc((size_t)n * sizeof *v);
	for (int64_t i = 0; i < n; i++) v[i] = lo_of(dt) + (double)(int64_t)(rnd(md) * 256);
	int64_t dims[1] = {n};
	tbc_value *c = constant(md, dt, 1, dims, v);
	free(v);
	return c;
}

static const tbc_dtype types[2] = {TBC_DT_U8, TBC_DT_I8};

/* y = (a - a_zp)(b - b_zp) for every operand type and zero-point kind on
 * shapes that hit every edge of the tile (8 x 32) and of K's groups of 4. */
static void test_matmul_integer_constant_b_every_edge(void **state) {
	(void)state;
	static const struct {
		const char *a;
		int64_t K, N, M; /* M: rows of a when per-row zero points apply, else 0 */
	} shapes[] = {
		/* K % 4 = 0, 1, 2, 3; M below 8, past it, batched, symbolic; N
		 * of one vector, not a multiple of 16, of 32, several panels */
		{"5,4", 4, 16, 5}, {"9,5", 5, 17, 9}, {"13,38", 38, 50, 13}, {"2,11,64", 64, 96, 11},
		{"N,S,39", 39, 40, 0}, {"17,7", 7, 64, 17}, {"8,6", 6, 32, 8},
	};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (int at = 0; at < 2; at++)
			for (int bt = 0; bt < 2; bt++) {
				model md = model_new();
				tbc_dtype ad = types[at], bd = types[bt];
				tbc_value *a = input_sym(&md, ad, shapes[i].a, 3, lo_of(ad), hi_of(ad) + 1);
				tbc_value *b = weights(&md, bd, shapes[i].K, shapes[i].N);
				tbc_value *outs[4];
				int n = 0;
				/* no zero points */
				outs[n++] = op2(&md, TBC_OP_MatMulInteger, a, b);
				/* per tensor (b's: the shift's own value too, 128 or 0) */
				tbc_value *ins[4] = {a, b, scalar(&md, ad, lo_of(ad) + 77), scalar(&md, bd, bd == TBC_DT_U8 ? 128 : 0)};
				outs[n++] = tbc_op_new(md.m->main, TBC_OP_MatMulInteger, "n", 4, ins, 1)->outputs[0];
				ins[3] = scalar(&md, bd, lo_of(bd) + 201);
				outs[n++] = tbc_op_new(md.m->main, TBC_OP_MatMulInteger, "n", 4, ins, 1)->outputs[0];
				/* per row of a (static rows) and per column of b */
				ins[2] = shapes[i].M ? per(&md, ad, shapes[i].M) : scalar(&md, ad, hi_of(ad));
				ins[3] = per(&md, bd, shapes[i].N);
				outs[n++] = tbc_op_new(md.m->main, TBC_OP_MatMulInteger, "n", 4, ins, 1)->outputs[0];
				check_outputs(&md, n, outs, 0);
			}
}

/* Long sums: K * 255 * 128 near 2^25, every product extreme. */
static void test_matmul_integer_constant_b_extreme_values(void **state) {
	(void)state;
	for (int at = 0; at < 2; at++)
		for (int bt = 0; bt < 2; bt++) {
			model md = model_new();
			tbc_dtype ad = types[at], bd = types[bt];
			int64_t K = 1027, N = 48;
			int64_t dims[2] = {K, N};
			double *v = malloc((size_t)(K * N) * sizeof *v);
			for (int64_t j = 0; j < K * N; j++) v[j] = (j / N) % 3 ? lo_of(bd) : hi_of(bd);
			tbc_value *b = constant(&md, bd, 2, dims, v);
			free(v);
			tbc_value *a = input_sym(&md, ad, "9,1027", 1, hi_of(ad), hi_of(ad) + 1);
			tbc_value *a2 = input_sym(&md, ad, "9,1027", 1, lo_of(ad), lo_of(ad) + 1);
			tbc_value *ins[4] = {a, b, scalar(&md, ad, lo_of(ad)), scalar(&md, bd, hi_of(bd))};
			tbc_value *outs[3] = {op2(&md, TBC_OP_MatMulInteger, a, b), op2(&md, TBC_OP_MatMulInteger, a2, b),
					      tbc_op_new(md.m->main, TBC_OP_MatMulInteger, "n", 4, ins, 1)->outputs[0]};
			check_outputs(&md, 3, outs, 0);
		}
}

/* QLinearMatMul's requantization after the dot products. */
static void test_qlinear_matmul_constant_b(void **state) {
	(void)state;
	for (int at = 0; at < 2; at++)
		for (int bt = 0; bt < 2; bt++) {
			model md = model_new();
			tbc_dtype ad = types[at], bd = types[bt];
			tbc_value *b = weights(&md, bd, 45, 40);
			tbc_value *ins[8] = {input_sym(&md, ad, "2,10,45", 1, lo_of(ad), hi_of(ad) + 1),
					     scalar(&md, TBC_DT_F32, 0.0066),
					     scalar(&md, ad, lo_of(ad) + 113),
					     b,
					     scalar(&md, TBC_DT_F32, 0.00705),
					     scalar(&md, bd, lo_of(bd) + 114),
					     scalar(&md, TBC_DT_F32, 0.0107),
					     scalar(&md, ad, lo_of(ad) + 118)};
			tbc_value *y0 = tbc_op_new(md.m->main, TBC_OP_QLinearMatMul, "n", 8, ins, 1)->outputs[0];
			ins[4] = scalar(&md, TBC_DT_F32, 0.003);
			ins[5] = per(&md, bd, 40);
			ins[7] = per(&md, ad, 40);
			tbc_value *y1 = tbc_op_new(md.m->main, TBC_OP_QLinearMatMul, "n", 8, ins, 1)->outputs[0];
			check_outputs(&md, 2, (tbc_value *[]){y0, y1}, 0);
		}
}

/* The description with dot4 makes the GEMM of it; without, the float form
 * (and a B that is not a constant keeps the float form too). */
static void test_lowering_takes_dot4_where_declared(void **state) {
	(void)state;
	for (int with = 0; with < 2; with++)
		for (int const_b = 0; const_b < 2; const_b++) {
			model md = model_new();
			tbc_value *a = input_sym(&md, TBC_DT_U8, "8,64", 1, 0, 256);
			tbc_value *b = const_b ? weights(&md, TBC_DT_I8, 64, 32) : input_sym(&md, TBC_DT_I8, "64,32", 1, -128, 128);
			tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_MatMulInteger, a, b));
			tbc_diags *d = tbc_diags_create();
			tbc_infer cx = {.module = md.m, .diags = d};
			assert_true(tbc_infer_graph(&cx, md.m->main));
			tbc_target_desc t = tbc_target_desc_cpu_default();
			if (with) t = g_vnni;
			tbc_arena *arena = tbc_arena_create();
			kir_program *p = NULL;
			assert_int_equal(kir_lower(md.m, &t, arena, d, &p), TBC_OK);
			char *text = kir_program_print(p);
			assert_non_null(text);
			assert_int_equal(strstr(text, "dot4 [8 x 32]") != NULL, with && const_b);
			free(text);
			tbc_arena_destroy(arena);
			tbc_diags_destroy(d);
			for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
			tbc_module_destroy(md.m);
		}
}

/* DynamicQuantizeLinear's range in parallel chunks of 16-lane partials:
 * sizes below one lane group, not a multiple of the chunks or lanes, and
 * NaN, -0 and the extremes anywhere: the same scale and zero point as the
 * interpreter's serial pass. */
static void test_dynamic_quantize_parallel_range(void **state) {
	(void)state;
	static const char *const shapes[] = {"1", "5", "17", "3,300", "N,7", "2,128,33", "4100"};
	static const double ranges[][2] = {{-3, 5}, {1, 9}, {-9, -1}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (size_t r = 0; r < 3; r++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, TBC_DT_F32, shapes[i], 37, ranges[r][0], ranges[r][1]);
			tbc_op *q = tbc_op_new(md.m->main, TBC_OP_DynamicQuantizeLinear, "n", 1, &x, 3);
			check_outputs(&md, 3, q->outputs, 0);
		}
	/* NaN never replaces, -0 never replaces +0: the extremes in any chunk. */
	for (int where = 0; where < 4; where++) {
		model md = model_new();
		int64_t n = 1000, dims[1] = {1000};
		double v[1000];
		for (int64_t j = 0; j < n; j++) v[j] = where == 3 ? -0.0 : 0.25 * (double)((j * 37) % 17) - 1.0;
		v[(where * 331 + 7) % n] = NAN;
		v[(where * 211 + 500) % n] = where == 3 ? -0.0 : 1e30;
		v[(where * 97 + 999) % n] = where == 3 ? -0.0 : -7.5;
		tbc_value *x = constant(&md, TBC_DT_F32, 1, dims, v);
		tbc_op *q = tbc_op_new(md.m->main, TBC_OP_DynamicQuantizeLinear, "n", 1, &x, 3);
		check_outputs(&md, 3, q->outputs, 0);
	}
}

/* Which CPUs declare dot4, and with how many vector registers (the tile
 * is chosen by them): AVX-512 VNNI (32 zmm), AVX-VNNI without AVX-512 (16
 * ymm), neither. */
static void test_cpus_declaring_dot4(void **state) {
	(void)state;
	static const struct {
		const char *cpu;
		bool dot4;
		int regs;
	} cpus[] = {{"icelake-server", true, 32}, {"sapphirerapids", true, 32}, {"alderlake", true, 16},
		    {"skylake-avx512", false, 32}, {"x86-64-v3", false, 16}};
	for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
		tbc_compile_options o;
		tbc_compile_options_init(&o);
		o.target_triple = "x86_64-unknown-linux-gnu", o.cpu = cpus[i].cpu;
		tbc_target_desc t;
		tbc_diags *d = tbc_diags_create();
		assert_int_equal(tbc_target_cpu.describe(&o, &t, d), TBC_OK);
		tbc_diags_destroy(d);
		if (t.dot4_u8s8 != cpus[i].dot4 || t.vector_regs != cpus[i].regs)
			fail_msg("%s: dot4 %d with %d registers, expected %d with %d", cpus[i].cpu, t.dot4_u8s8, t.vector_regs,
				 cpus[i].dot4, cpus[i].regs);
	}
}

/* AVX-VNNI's 256-bit vpdpbusd (a CPU with it and no AVX-512: alderlake,
 * 4 x 16 tiles), run here where the host has AVX-VNNI: the same bits as
 * the interpreter on the edges of its tile and of K. */
static void test_matmul_integer_avx_vnni(void **state) {
	(void)state;
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avxvnni")) {
		print_message("skipped: this CPU has no AVX-VNNI to run alderlake's code\n");
		skip();
	}
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.cpu = "alderlake";
	static const struct {
		const char *a;
		int64_t K, N;
	} shapes[] = {{"3,4", 4, 16}, {"5,5", 5, 17}, {"9,38", 38, 50}, {"2,7,64", 64, 96}, {"N,S,39", 39, 40}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (int at = 0; at < 2; at++)
			for (int bt = 0; bt < 2; bt++) {
				model md = model_new();
				tbc_dtype ad = types[at], bd = types[bt];
				tbc_value *a = input_sym(&md, ad, shapes[i].a, 3, lo_of(ad), hi_of(ad) + 1);
				tbc_value *b = weights(&md, bd, shapes[i].K, shapes[i].N);
				tbc_value *ins[4] = {a, b, scalar(&md, ad, lo_of(ad) + 77), per(&md, bd, shapes[i].N)};
				tbc_value *outs[2] = {op2(&md, TBC_OP_MatMulInteger, a, b),
						      tbc_op_new(md.m->main, TBC_OP_MatMulInteger, "n", 4, ins, 1)->outputs[0]};
				check_outputs_with(&md, 2, outs, 0, &o);
			}
}

/* ---- ConvInteger, QLinearConv: im2row and the dot4 GEMM ------------------------*/

/* A constant weight [M, Cg, kernel...] of dt, random with both extremes. */
static tbc_value *conv_weights(model *md, tbc_dtype dt, int rank, const int64_t *dims) {
	int64_t n = 1;
	for (int d = 0; d < rank; d++) n *= dims[d];
	double *v = malloc((size_t)n * sizeof *v);
	for (int64_t i = 0; i < n; i++) v[i] = lo_of(dt) + (double)(int64_t)(rnd(md) * 256);
	v[0] = lo_of(dt), v[n - 1] = hi_of(dt);
	tbc_value *c = constant(md, dt, rank, dims, v);
	free(v);
	return c;
}


/* The shapes: channels per group not a multiple of 4 (3, 5, 2: padded to
 * 4 in the dot4 form) and ones that are (16, 4), output channels (the
 * tile's rows) below, at and past its 8 (16, 17, 20, 40, 33, 34),
 * positions (its columns) not a multiple of 16 (42, 35, 20, 25, 21) and
 * one that is (32), the pack's blocks of positions across rows (42) and
 * of whole rows (120), groups, padding (with a nonzero x zero point: a tap in
 * the padding must add nothing), strides, dilations, 1-D and 3-D, a
 * symbolic batch; and fewer than 16 positions (4: the int16 form, W a
 * constant). */
static const struct qconv_case {
	const char *x;
	int rank;
	int64_t w[5];
	int64_t group, pads[6], strides[3], dil[3];
} qconv_cases[] = {
	{"1,3,7,6", 4, {17, 3, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}},
	{"N,6,9,8", 4, {40, 3, 3, 2}, 2, {2, 0, 1, 1}, {2, 1}, {1, 2}},
	{"2,5,4,5", 4, {20, 5, 1, 1}, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}},
	{"1,16,9,9", 4, {33, 16, 1, 1}, 1, {0, 0, 0, 0}, {2, 2}, {1, 1}},
	{"1,4,40", 3, {34, 2, 5}, 2, {3, 2}, {2}, {1}},
	{"1,2,4,5,3", 5, {16, 2, 3, 1, 3}, 1, {1, 0, 1, 1, 2, 0}, {1, 2, 1}, {1, 1, 1}},
	{"1,3,4,4", 4, {20, 3, 3, 3}, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}},
	/* 120 positions: the pack's blocks are whole rows (two 8-wide rows; the last one) */
	{"1,5,15,8", 4, {20, 5, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}},
};

static tbc_op *qconv_op(model *md, const struct qconv_case *c, tbc_opcode code, int n_in, tbc_value *const *ins) {
	tbc_op *op = tbc_op_new(md->m->main, code, "n", n_in, ins, 1);
	int nsp = c->rank - 2;
	tbc_op_add_attr(op, "group", TBC_ATTR_INT)->i = c->group;
	attr_ints(op, "pads", 2 * nsp, c->pads);
	attr_ints(op, "strides", nsp, c->strides);
	attr_ints(op, "dilations", nsp, c->dil);
	return op;
}

/* ConvInteger with a constant W, every operand type, zero points absent,
 * per tensor and per output channel: the interpreter's sums bit for bit. */
static void test_conv_integer_constant_w_every_edge(void **state) {
	(void)state;
	for (size_t i = 0; i < sizeof qconv_cases / sizeof qconv_cases[0]; i++)
		for (int xt = 0; xt < 2; xt++)
			for (int wt = 0; wt < 2; wt++) {
				const struct qconv_case *c = &qconv_cases[i];
				model md = model_new();
				tbc_dtype xd = types[xt], wd = types[wt];
				tbc_value *x = input_sym(&md, xd, c->x, 2, lo_of(xd), hi_of(xd) + 1);
				tbc_value *w = conv_weights(&md, wd, c->rank, c->w);
				tbc_value *outs[4];
				outs[0] = qconv_op(&md, c, TBC_OP_ConvInteger, 2, (tbc_value *[]){x, w})->outputs[0];
				tbc_value *ins[4] = {x, w, scalar(&md, xd, lo_of(xd) + 77), scalar(&md, wd, wd == TBC_DT_U8 ? 128 : 0)};
				outs[1] = qconv_op(&md, c, TBC_OP_ConvInteger, 4, ins)->outputs[0];
				ins[3] = scalar(&md, wd, lo_of(wd) + 201);
				outs[2] = qconv_op(&md, c, TBC_OP_ConvInteger, 4, ins)->outputs[0];
				ins[2] = scalar(&md, xd, hi_of(xd));
				ins[3] = per(&md, wd, c->w[0]);
				outs[3] = qconv_op(&md, c, TBC_OP_ConvInteger, 4, ins)->outputs[0];
				check_outputs(&md, 4, outs, 0);
			}
}

/* QLinearConv with a constant W and bias: the requantization, scales per
 * tensor and per channel, constant and graph inputs (the multiplier
 * computed when lowering or in the kernel); W's zero point one number per
 * tensor, per channel, and per channel but all one value (a number when
 * lowering), the bias added in int32 where no sum can leave it and in f64
 * where one could (biases near 2^31). */
static void test_qlinear_conv_constant_w(void **state) {
	(void)state;
	for (size_t i = 0; i < sizeof qconv_cases / sizeof qconv_cases[0]; i++)
		for (int xt = 0; xt < 2; xt++)
			for (int wt = 0; wt < 2; wt++) {
				const struct qconv_case *c = &qconv_cases[i];
				model md = model_new();
				tbc_dtype xd = types[xt], wd = types[wt];
				int64_t M = c->w[0];
				double *bias = malloc((size_t)M * sizeof *bias);
				for (int64_t m = 0; m < M; m++) bias[m] = (double)(int64_t)(rnd(&md) * 20000) - 10000;
				int64_t bdims[1] = {M};
				tbc_value *ins[9] = {input_sym(&md, xd, c->x, 2, lo_of(xd), hi_of(xd) + 1),
						     scalar(&md, TBC_DT_F32, 0.0066),
						     scalar(&md, xd, lo_of(xd) + 113),
						     conv_weights(&md, wd, c->rank, c->w),
						     scalar(&md, TBC_DT_F32, 0.00705),
						     scalar(&md, wd, wd == TBC_DT_U8 ? 128 : 0),
						     scalar(&md, TBC_DT_F32, 0.107),
						     scalar(&md, xd, lo_of(xd) + 118),
						     constant(&md, TBC_DT_I32, 1, bdims, bias)};
				free(bias);
				tbc_value *y0 = qconv_op(&md, c, TBC_OP_QLinearConv, 9, ins)->outputs[0];
				double *ws = malloc((size_t)M * sizeof *ws);
				for (int64_t m = 0; m < M; m++) ws[m] = 0.001 + 0.004 * rnd(&md);
				ins[4] = constant(&md, TBC_DT_F32, 1, bdims, ws);
				free(ws);
				ins[5] = per(&md, wd, M);
				ins[6] = input_sym(&md, TBC_DT_F32, "", 1, 0.05, 0.2); /* y_scale known only when running */
				tbc_value *y1 = qconv_op(&md, c, TBC_OP_QLinearConv, 8, ins)->outputs[0];
				double *same = malloc((size_t)M * sizeof *same), *big = malloc((size_t)M * sizeof *big);
				for (int64_t m = 0; m < M; m++) {
					same[m] = wd == TBC_DT_U8 ? 131 : -3;
					big[m] = (m % 2 ? 1 : -1) * (2147483000.0 - (double)(int64_t)(rnd(&md) * 1000));
				}
				ins[5] = constant(&md, wd, 1, bdims, same);
				ins[8] = constant(&md, TBC_DT_I32, 1, bdims, big);
				ins[4] = scalar(&md, TBC_DT_F32, 7.05e-8); /* the big biases, requantized, within y's range */
				free(same);
				free(big);
				tbc_value *y2 = qconv_op(&md, c, TBC_OP_QLinearConv, 9, ins)->outputs[0];
				check_outputs(&md, 3, (tbc_value *[]){y0, y1, y2}, 0);
			}
}

/* The description with dot4 makes the integer convolutions of it where W
 * is a constant (W the tile's rows, 8, the positions its columns, 16
 * here); without, or with W a graph input, int16 operands. */
static void test_conv_lowering_takes_dot4_where_declared(void **state) {
	(void)state;
	for (int with = 0; with < 2; with++)
		for (int const_w = 0; const_w < 2; const_w++) {
			model md = model_new();
			int64_t wdims[4] = {32, 8, 3, 3};
			tbc_value *x = input_sym(&md, TBC_DT_U8, "1,8,6,6", 1, 0, 256);
			tbc_value *w = const_w ? conv_weights(&md, TBC_DT_I8, 4, wdims) : input_sym(&md, TBC_DT_I8, "32,8,3,3", 1, -128, 128);
			tbc_value *ins[2] = {x, w};
			tbc_graph_add_output(md.m->main, tbc_op_new(md.m->main, TBC_OP_ConvInteger, "n", 2, ins, 1)->outputs[0]);
			tbc_diags *d = tbc_diags_create();
			tbc_infer cx = {.module = md.m, .diags = d};
			assert_true(tbc_infer_graph(&cx, md.m->main));
			tbc_target_desc t = tbc_target_desc_cpu_default();
			if (with) t = g_vnni;
			tbc_arena *arena = tbc_arena_create();
			kir_program *p = NULL;
			assert_int_equal(kir_lower(md.m, &t, arena, d, &p), TBC_OK);
			char *text = kir_program_print(p);
			assert_non_null(text);
			assert_int_equal(strstr(text, "dot4 [8 x 16]") != NULL, with && const_w);
			free(text);
			tbc_arena_destroy(arena);
			tbc_diags_destroy(d);
			for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
			tbc_module_destroy(md.m);
		}
}

/* AMX-INT8 tiles (kir_tile2's 8-bit form, tbc_target_desc.tile_i8): where
 * M is static and at least 16, the integer GEMMs are tiles (tile2.u8 for a
 * u8 a, tile2.i8 -- tdpbssd -- for an i8 one), dot4 elsewhere; and every
 * case above again with the target declaring them, the same bits as the
 * interpreter, in the evaluator and compiled (this CPU's code takes tiles
 * when it has AMX-INT8). */
static void test_amx_tiles(void **state) {
	tbc_target_desc amx = g_vnni;
	amx.tile_i8 = true;
	static const struct {
		tbc_dtype a;
		const char *dims, *want, *not;
	} cases[] = {{TBC_DT_U8, "40,64", "tile2.u8 [16 x 16]", "dot4"},
		     {TBC_DT_I8, "16,64", "tile2.i8 [16 x 16]", "dot4"},
		     {TBC_DT_U8, "15,64", "dot4 [", "tile2"},
		     {TBC_DT_U8, "N,64", "dot4 [", "tile2"}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, cases[i].a, cases[i].dims, 20, lo_of(cases[i].a), hi_of(cases[i].a) + 1);
		tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_MatMulInteger, a, weights(&md, TBC_DT_I8, 64, 32)));
		g_target = &amx;
		char *text = lowered_text(&md);
		if (!strstr(text, cases[i].want) || strstr(text, cases[i].not)) fail_msg("case %zu:\n%s", i, text);
		free(text);
	}
	/* 16 rows, a last row tile overlapping the one before, K past one
	 * chunk of 64 with a tail of 2, N past 32; zero points per row of a
	 * and per column of b (the corrections tiles share with dot4) */
	g_target = &amx;
	static const struct {
		const char *a;
		int64_t K, N, M;
	} shapes[] = {{"16,4", 4, 16, 16}, {"40,130", 130, 96, 40}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (int at = 0; at < 2; at++) {
			model md = model_new();
			tbc_dtype ad = types[at], bd = TBC_DT_I8;
			tbc_value *a = input_sym(&md, ad, shapes[i].a, 3, lo_of(ad), hi_of(ad) + 1);
			tbc_value *b = weights(&md, bd, shapes[i].K, shapes[i].N);
			tbc_value *ins[4] = {a, b, per(&md, ad, shapes[i].M), per(&md, bd, shapes[i].N)};
			tbc_value *outs[2] = {op2(&md, TBC_OP_MatMulInteger, a, b),
					      tbc_op_new(md.m->main, TBC_OP_MatMulInteger, "n", 4, ins, 1)->outputs[0]};
			check_outputs(&md, 2, outs, 0);
		}
	/* a convolution's GEMM: 33 channels (2 row tiles, overlapping), one of
	 * two groups of 20 */
	for (size_t i = 1; i <= 3; i += 2) {
		const struct qconv_case *c = &qconv_cases[i];
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_U8, c->x, 2, 0, 256);
		tbc_value *w = conv_weights(&md, TBC_DT_I8, c->rank, c->w);
		tbc_value *ins[4] = {x, w, scalar(&md, TBC_DT_U8, 77), per(&md, TBC_DT_I8, c->w[0])};
		tbc_value *outs[1] = {qconv_op(&md, c, TBC_OP_ConvInteger, 4, ins)->outputs[0]};
		check_outputs(&md, 1, outs, 0);
	}
	g_target = &g_vnni;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lowering_takes_dot4_where_declared),
		cmocka_unit_test(test_matmul_integer_constant_b_every_edge),
		cmocka_unit_test(test_matmul_integer_constant_b_extreme_values),
		cmocka_unit_test(test_qlinear_matmul_constant_b),
		cmocka_unit_test(test_dynamic_quantize_parallel_range),
		cmocka_unit_test(test_cpus_declaring_dot4),
		cmocka_unit_test(test_matmul_integer_avx_vnni),
		cmocka_unit_test(test_conv_lowering_takes_dot4_where_declared),
		cmocka_unit_test(test_conv_integer_constant_w_every_edge),
		cmocka_unit_test(test_qlinear_conv_constant_w),
		cmocka_unit_test(test_amx_tiles),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
