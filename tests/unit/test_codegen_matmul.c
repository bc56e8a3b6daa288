/* MatMul, Gemm, Conv and the pools lowered (codegen/lower/matmul.c,
 * codegen/lower/conv.c) against the reference interpreter: each test
 * builds a small graph, runs it with tbc_interpret, with the kernel IR
 * evaluator (kir_program_eval: lowering alone) and JIT-compiled for the host
 * (tbc_jit_compile + a serial host), and compares all three. */
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
#include "codegen/target_desc.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"

static tbc_op *gemm_op(model *md, tbc_value *a, tbc_value *b, tbc_value *c, int ta, int tb, double alpha, double beta) {
	tbc_op *o = node(md, TBC_OP_Gemm, c ? 3 : 2, a, b, c);
	if (ta) tbc_op_add_attr(o, "transA", TBC_ATTR_INT)->i = 1;
	if (tb) tbc_op_add_attr(o, "transB", TBC_ATTR_INT)->i = 1;
	if (alpha != 1) tbc_op_add_attr(o, "alpha", TBC_ATTR_FLOAT)->f = alpha;
	if (beta != 1) tbc_op_add_attr(o, "beta", TBC_ATTR_FLOAT)->f = beta;
	return o;
}

/* ---- MatMul ----------------------------------------------------------------------*/
static void test_matmul_2d_sizes_around_the_tile(void **state) {
	(void)state;
	static const char *const shapes[][2] = {{"1,1", "1,1"},   {"6,16", "16,16"}, {"7,13", "13,19"},
						{"13,37", "37,50"}, {"5,3", "3,17"},  {"12,0", "0,4"},
						{"2,64", "64,1"}, {"1,300", "300,40"}, {"20,30", "30,200"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, shapes[i][0]), *b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
}

/* A dynamic batch with static rows and columns: over a rank-2 B the batch
 * folds into the rows (one GEMM of N x 203 rows, known only while
 * running); over a batched B each batch is a GEMM whose chunks group
 * several row tiles (the batch counts as one for the chunk shape).  The
 * last row tile and the last column tile are partial. */
static void test_matmul_dynamic_batch_static_matrix(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "N,203,24", 3, -1, 1), *b = input(&md, TBC_DT_F32, "24,50");
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	md = model_new(); /* both operands batched */
	a = input_sym(&md, TBC_DT_F32, "N,67,9", 2, -1, 1);
	b = input_sym(&md, TBC_DT_F32, "N,9,33", 2, -1, 1);
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
}

static void test_matmul_f64_and_integers(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F64, TBC_DT_I32, TBC_DT_I64, TBC_DT_U32, TBC_DT_U64};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, types[i], "9,11", 1, -50, 50), *b = input_sym(&md, types[i], "11,21", 1, -50, 50);
		check(&md, op2(&md, TBC_OP_MatMul, a, b));
	}
}

static void test_matmul_one_dimensional_operands(void **state) {
	(void)state;
	static const char *const shapes[][2] = {{"5", "5,7"}, {"4,5", "5"}, {"5", "5"}, {"3,4,5", "5"}, {"5", "2,5,3"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, shapes[i][0]), *b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
}

static void test_matmul_batch_broadcast(void **state) {
	(void)state;
	static const char *const shapes[][2] = {{"2,3,4", "2,4,5"}, {"2,1,3,4", "5,4,6"}, {"3,4", "2,2,4,5"}, {"1,3,4", "4,4,2"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, shapes[i][0]), *b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
}

static void test_matmul_symbolic_dims(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "N,7,9", 3, -1, 1), *b = input(&md, TBC_DT_F32, "9,20");
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	md = model_new();
	a = input_sym(&md, TBC_DT_F32, "N,9", 17, -1, 1);
	b = input_sym(&md, TBC_DT_F32, "9,N", 17, -1, 1);
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	md = model_new(); /* a symbolic N below the tile width: column by column */
	a = input_sym(&md, TBC_DT_F32, "N,9", 5, -1, 1);
	b = input_sym(&md, TBC_DT_F32, "9,N", 5, -1, 1);
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	md = model_new();
	a = input_sym(&md, TBC_DT_F32, "N,2,3", 1, -1, 1);
	b = input(&md, TBC_DT_F32, "4,3,5");
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
}

/* The 512-bit tiles (f32 8 x 32, f64 8 x 16) in the evaluator
 * (bounds-checked loads and stores): the checks lower for an AVX-512
 * description (check_outputs' JIT compile describes the host).  Sizes around the tile: M, N, K of 1, below, at and past
 * 8 and 32, symbolic batch and rows, N below the tile width. */
static const tbc_target_desc *wide(void) {
	static tbc_target_desc t;
	t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32;
	return &t;
}

static void test_gemm_wide_tile_edges(void **state) {
	(void)state;
	static const char *const shapes[][2] = {{"1,1", "1,1"},    {"8,32", "32,32"}, {"9,33", "33,65"}, {"17,5", "5,70"},
						{"1,40", "40,31"}, {"3,7", "7,33"},   {"16,1", "1,64"},  {"3,9,9", "3,9,40"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, shapes[i][0]), *b = input(&md, TBC_DT_F32, shapes[i][1]);
		g_target = wide();
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
	static const int64_t syms[] = {1, 5, 31, 40};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, TBC_DT_F32, "N,9", syms[i], -1, 1), *b = input_sym(&md, TBC_DT_F32, "9,N", syms[i], -1, 1);
		g_target = wide();
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
		md = model_new();
		a = input_sym(&md, TBC_DT_F32, "N,10,7", syms[i], -1, 1);
		b = input(&md, TBC_DT_F32, "7,35");
		g_target = wide();
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F64, "9,11"), *b = input(&md, TBC_DT_F64, "11,21");
	g_target = wide();
	check(&md, op2(&md, TBC_OP_MatMul, a, b));
	md = model_new();
	a = input(&md, TBC_DT_F32, "11,7");
	b = input(&md, TBC_DT_F32, "37,11");
	tbc_value *c = input(&md, TBC_DT_F32, "37");
	g_target = wide();
	check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 1, 1, 0.5, -2)->outputs[0]}, 1e-4);
	g_target = NULL;
}

/* The 256-bit tiles JIT-compiled: features without AVX-512 give the
 * default tuning (the code still runs on the host). */
static void test_gemm_narrow_tile_jit(void **state) {
	(void)state;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.features = "+avx2,+fma";
	static const char *const shapes[][2] = {{"7,13", "13,19"}, {"13,37", "37,50"}, {"1,300", "300,40"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, shapes[i][0]), *b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs_with(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4, &o);
	}
}

/* K blocks (K past a 32 KiB block of B's 4 column tiles: 128 for f32
 * 5 x 16, f64 and i32, 64 for the 512-bit f32 tile): each block resumes from the
 * partial sums the one before stored in y, the epilogue (Gemm's alpha,
 * beta and C, Conv's bias) only after the last one, and the overlapping
 * last column tile stores only its own columns.  M, N and K are chosen
 * around the tile and the block, with a batch, transposes and partial
 * tiles; the lowered text shows the blocks. */
static void test_gemm_k_blocks(void **state) {
	(void)state;
	double atol = g_atol;
	g_atol = 1e-4; /* sums of up to 1100 products */
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "7,600"), *b = input(&md, TBC_DT_F32, "600,37");
	op2(&md, TBC_OP_MatMul, a, b);
	tbc_graph_add_output(md.m->main, md.m->main->last->outputs[0]);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "for %kb = 0 .. 5 sequential"));
	free(text);
	static const char *const shapes[][2] = {{"7,600", "600,37"}, {"13,257", "257,16"}, {"2,11,513", "2,513,49"},
						{"1,1100", "1100,3"}, {"5,300", "300,16"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		md = model_new();
		a = input(&md, TBC_DT_F32, shapes[i][0]), b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
		md = model_new();
		a = input(&md, TBC_DT_F32, shapes[i][0]), b = input(&md, TBC_DT_F32, shapes[i][1]);
		g_target = wide();
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
		g_target = NULL;
	}
	md = model_new(); /* Gemm's epilogue, transposed operands */
	a = input(&md, TBC_DT_F32, "700,11");
	b = input(&md, TBC_DT_F32, "45,700");
	tbc_value *c = input(&md, TBC_DT_F32, "11,45");
	check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 1, 1, 0.5, -2)->outputs[0]}, 1e-4);
	md = model_new(); /* a dynamic batch of static matrices */
	a = input_sym(&md, TBC_DT_F32, "N,9,520", 3, -1, 1);
	b = input(&md, TBC_DT_F32, "520,40");
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	md = model_new();
	a = input(&md, TBC_DT_F64, "6,530");
	b = input(&md, TBC_DT_F64, "530,19");
	check(&md, op2(&md, TBC_OP_MatMul, a, b));
	md = model_new();
	a = input_sym(&md, TBC_DT_I32, "6,1100", 1, -9, 9), b = input_sym(&md, TBC_DT_I32, "1100,10", 1, -9, 9);
	c = input_sym(&md, TBC_DT_I32, "10", 1, -9, 9);
	check(&md, gemm_op(&md, a, b, c, 0, 0, 3, 2)->outputs[0]);
	g_atol = atol;
}

/* A random constant of dtype dt and the given dims (values in [-2, 2);
 * integers floored). */
static tbc_value *weights(model *md, tbc_dtype dt, int64_t rows, int64_t cols) {
	double *v = malloc((size_t)(rows * cols) * sizeof *v);
	assert_non_null(v);
	for (int64_t i = 0; i < rows * cols; i++) v[i] = tbc_dtype_is_float(dt) ? 4 * rnd(md) - 2 : floor(4 * rnd(md) - 2);
	tbc_value *w = constant(md, dt, 2, (int64_t[]){rows, cols}, v);
	free(v);
	return w;
}

/* Gemm(A, B^T) of an M x K input and constant weights stored N x K (C of
 * N values when with_c): the lowered program holds B as `layout`, and the
 * result agrees with the interpreter. */
static void gemm_transposed_b(int64_t M, int64_t N, int64_t K, bool with_c, const char *layout) {
	char ad[32], cd[16];
	snprintf(ad, sizeof ad, "%lld,%lld", (long long)M, (long long)K);
	snprintf(cd, sizeof cd, "%lld", (long long)N);
	for (int run = 0; run < 2; run++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, ad), *c = with_c ? input(&md, TBC_DT_F32, cd) : NULL;
		tbc_op *o = gemm_op(&md, a, weights(&md, TBC_DT_F32, N, K), c, 0, 1, with_c ? 0.5 : 1, with_c ? 2 : 1);
		if (run == 1) {
			check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
			continue;
		}
		tbc_graph_add_output(md.m->main, o->outputs[0]);
		char *text = lowered_text(&md);
		assert_non_null(strstr(text, layout));
		free(text);
	}
}

/* A constant B is laid out for the kernel (gemm_const_operand): rows of a
 * multiple of 512 bytes are padded by 64 (the program's weights hold B as
 * [K, N + 16] for f32, [K, N + 8] for f64), Gemm's transposed B is stored
 * transposed, (N, K) as [K, N]; one buffer per constant and layout.  Each
 * against the interpreter. */
static void test_gemm_constant_b_laid_out(void **state) {
	(void)state;
	double atol = g_atol;
	g_atol = 1e-4;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "7,300");
	tbc_value *w = weights(&md, TBC_DT_F32, 300, 128);
	tbc_value *y = op2(&md, TBC_OP_MatMul, a, w);
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_MatMul, y, weights(&md, TBC_DT_F32, 128, 40)));
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_MatMul, a, w)); /* w again: the same laid-out buffer */
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "const t4: f32[300, 144]"));
	assert_null(strstr(text, "f32[300, 128]")); /* no copy as it was */
	assert_non_null(strstr(text, "const t5: f32[128, 40]"));
	assert_non_null(strstr(text, "launch k0_matmul(weights+0,"));
	assert_non_null(strstr(text, "launch k1_matmul(arena+0, weights+172800,")); /* 300 x 144 x 4 bytes before */
	assert_non_null(strstr(text, "launch k2_matmul(weights+0,"));
	free(text);
	md = model_new();
	a = input(&md, TBC_DT_F32, "7,300");
	w = weights(&md, TBC_DT_F32, 300, 128);
	y = op2(&md, TBC_OP_MatMul, a, w);
	check_outputs(&md, 2, (tbc_value *[]){op2(&md, TBC_OP_MatMul, y, weights(&md, TBC_DT_F32, 128, 40)),
					      op2(&md, TBC_OP_MatMul, a, w)},
		      1e-4);
	md = model_new(); /* a dynamic batch, K blocks and an overlapping last tile */
	a = input_sym(&md, TBC_DT_F32, "N,13,600", 2, -1, 1);
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, weights(&md, TBC_DT_F32, 600, 384))}, 1e-4);
	md = model_new(); /* f64, 64 columns: 512 bytes a row */
	a = input(&md, TBC_DT_F64, "5,70");
	check(&md, op2(&md, TBC_OP_MatMul, a, weights(&md, TBC_DT_F64, 70, 64)));
	/* Gemm, B transposed: stored (N, K) = (45, 700), read as [700, 45]; and
	 * with N = 128 both transposed and padded. */
	gemm_transposed_b(9, 45, 700, true, "f32[700, 45]");
	gemm_transposed_b(7, 128, 256, false, "f32[256, 144]");
	gemm_transposed_b(9, 128, 256, false, "f32[256, 144]");
	md = model_new(); /* integers, transposed A and B */
	a = input_sym(&md, TBC_DT_I32, "20,6", 1, -9, 9);
	check(&md, gemm_op(&md, a, weights(&md, TBC_DT_I32, 128, 20), NULL, 1, 1, 2, 1)->outputs[0]);
	g_atol = atol;
}

/* ---- Gemm -------------------------------------------------------------------------*/
/* MatMul(A, W), or Gemm(A, W^T) with W stored (n, k), of an input A of
 * shape `a` (its symbolic dim `rows` long at run time, when rows > 0) and
 * constant weights: the lowered program holds W as `layout`, and the
 * result agrees with the interpreter. */
static void layout_then_outputs(size_t i, const char *a_shape, int64_t rows, bool gemm, int64_t k, int64_t n,
				const char *layout) {
	for (int run = 0; run < 2; run++) {
		model md = model_new();
		tbc_value *a = rows > 0 ? input_sym(&md, TBC_DT_F32, a_shape, rows, -1, 1) : input(&md, TBC_DT_F32, a_shape);
		tbc_value *y = gemm ? gemm_op(&md, a, weights(&md, TBC_DT_F32, n, k), NULL, 0, 1, 1, 1)->outputs[0]
				    : op2(&md, TBC_OP_MatMul, a, weights(&md, TBC_DT_F32, k, n));
		if (run == 1) {
			check_outputs(&md, 1, (tbc_value *[]){y}, 1e-4);
			continue;
		}
		tbc_graph_add_output(md.m->main, y);
		char *text = lowered_text(&md);
		if (!strstr(text, layout)) fail_msg("case %zu: no %s in\n%s", i, layout, text);
		free(text);
	}
}


/* A GEMM of one row tile (M at most the tile's rows: a matrix-vector
 * product) reads a constant B from column panels of the tile's width
 * (gemm_const_panels): [ceil(N / 16), K x 16] for the 256-bit f32 tile,
 * 64 bytes more a panel where its bytes are a multiple of 512 (K = 256:
 * 4096 -> 4112 elements); Gemm's transposed B too; the last tile, past
 * the whole panels, overlaps the one before.  Each against the
 * interpreter, also with two batches of one row and K blocks. */
static void test_gemv_constant_b_in_panels(void **state) {
	(void)state;
	double atol = g_atol;
	g_atol = 1e-4;
	gemm_transposed_b(1, 128, 256, false, "f32[8, 4112]");
	gemm_transposed_b(3, 100, 37, true, "f32[7, 592]");
	static const struct {
		const char *a;
		int64_t k, n;
		const char *layout;
	} cases[] = {{"1,300", 300, 100, "f32[7, 4800]"}, {"2,1,37", 37, 50, "f32[4, 592]"}, {"5,600", 600, 16, "f32[1, 9616]"},
		     {"1,2000", 2000, 40, "f32[3, 32016]"}, {"6,64", 64, 40, "f32[64, 40]"} /* M past the tile: rows */};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		layout_then_outputs(i, cases[i].a, 0, false, cases[i].k, cases[i].n, cases[i].layout);
	g_atol = atol;
}

static void test_gemm_transposes_alpha_beta(void **state) {
	(void)state;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			model md = model_new();
			tbc_value *a = input(&md, TBC_DT_F32, ta ? "11,7" : "7,11"), *b = input(&md, TBC_DT_F32, tb ? "19,11" : "11,19");
			tbc_value *c = input(&md, TBC_DT_F32, "19");
			check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, ta, tb, 0.5, -2)->outputs[0]}, 1e-4);
		}
}

static void test_gemm_c_broadcasts(void **state) {
	(void)state;
	static const char *const cs[] = {"", "1", "8", "5,1", "5,8", "1,8", NULL};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, "5,3"), *b = input(&md, TBC_DT_F32, "3,8");
		tbc_value *c = cs[i] ? input(&md, TBC_DT_F32, cs[i]) : NULL;
		check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 0, 0, 1, 1)->outputs[0]}, 1e-4);
	}
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F64, "5,3"), *b = input(&md, TBC_DT_F64, "3,8"), *c = input(&md, TBC_DT_F64, "8");
	check(&md, gemm_op(&md, a, b, c, 0, 0, 1, 0)->outputs[0]);
}

static void test_gemm_integer(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_I32, "4,6", 1, -9, 9), *b = input_sym(&md, TBC_DT_I32, "6,10", 1, -9, 9);
	tbc_value *c = input_sym(&md, TBC_DT_I32, "10", 1, -9, 9);
	check(&md, gemm_op(&md, a, b, c, 0, 1 - 1, 3, 2)->outputs[0]);
}

static void test_gemm_symbolic_rows(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "N,12", 9, -1, 1), *b = input(&md, TBC_DT_F32, "20,12");
	tbc_value *c = input(&md, TBC_DT_F32, "20");
	check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 0, 1, 1, 1)->outputs[0]}, 1e-4);
}


/* Rows known only while running (an exported model's batch or sequence)
 * read a constant B from column panels too (gemm_const_panels with
 * GEMM_M_RUNTIME), and M = 1 at run time takes the nest of a static single
 * row (gemm_rows_nest): MatMul and Gemm's transposed B at M = 1, 2 and 9,
 * and a decode step's shapes, batches of matrices of one row (folded into
 * the rows: 3 rows, and 1), and of 5 rows.  The layout in the lowered
 * program; each against the interpreter. */
static void test_gemm_runtime_rows_read_panels(void **state) {
	(void)state;
	double atol = g_atol;
	g_atol = 1e-4;
	static const struct {
		const char *a;
		int64_t rows; /* N at run time */
		bool gemm;    /* Gemm(A, B^T), B stored (n, k) */
		int64_t k, n;
		const char *layout;
	} cases[] = {{"N,37", 1, false, 37, 50, "f32[4, 592]"},      {"N,37", 2, false, 37, 50, "f32[4, 592]"},
		     {"N,37", 9, false, 37, 50, "f32[4, 592]"},      {"N,1,37", 3, false, 37, 50, "f32[4, 592]"},
		     {"N,1,37", 1, false, 37, 50, "f32[4, 592]"},   {"N,5,37", 2, false, 37, 50, "f32[4, 592]"},
		     {"N,700", 1, true, 700, 45, "f32[3, 11200]"}, {"N,700", 5, true, 700, 45, "f32[3, 11200]"}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		layout_then_outputs(i, cases[i].a, cases[i].rows, cases[i].gemm, cases[i].k, cases[i].n, cases[i].layout);
	g_atol = atol;
}

/* A GEMM whose rows are known only while running passes over K in blocks
 * too: its chunks are groups of row tiles, counted while running, that
 * reuse each block of B in turn (the general nest; the single row's nest
 * has K blocks of its own, the few rows' none: one row tile reuses
 * nothing).  The lowered text holds both nests' blocks; rows at run time
 * from 5 (the general nest's least) to several groups, columns a whole
 * number of tiles and not, B an input or a constant in panels, Gemm's
 * epilogue; each against the interpreter on both tile widths. */
static void test_gemm_runtime_rows_k_blocks(void **state) {
	(void)state;
	double atol = g_atol;
	g_atol = 1e-4;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "N,600", 9, -1, 1), *b = input(&md, TBC_DT_F32, "600,64");
	op2(&md, TBC_OP_MatMul, a, b);
	tbc_graph_add_output(md.m->main, md.m->main->last->outputs[0]);
	char *text = lowered_text(&md);
	assert_int_equal(text_count(text, "for %kb"), 2);
	free(text);
	static const int64_t rows[] = {5, 9, 37, 130};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		for (int w = 0; w < 2; w++) {
			g_target = w ? wide() : NULL;
			md = model_new();
			a = input_sym(&md, TBC_DT_F32, "N,600", rows[i], -1, 1), b = input(&md, TBC_DT_F32, "600,64");
			check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
			md = model_new(); /* a batch of row blocks folded into the rows, B in panels, 50 columns */
			a = input_sym(&md, TBC_DT_F32, "N,3,300", rows[i], -1, 1), b = weights(&md, TBC_DT_F32, 300, 50);
			check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
			md = model_new(); /* Gemm(A, B^T) + C, alpha and beta */
			a = input_sym(&md, TBC_DT_F32, "N,700", rows[i], -1, 1), b = weights(&md, TBC_DT_F32, 45, 700);
			tbc_value *c = input(&md, TBC_DT_F32, "45");
			check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 0, 1, 0.5, -2)->outputs[0]}, 1e-4);
			g_target = NULL;
		}
	g_atol = atol;
}

/* ---- The devices' parallel form ---------------------------------------------------
 * Lowered for an OpenCL device (tbc_target_desc_opencl_default) every GEMM is
 * a grouped kernel: a work-group per output tile, tiles of a and b staged in
 * local memory, several outputs per work-item.  The evaluator runs the
 * groups (checking barriers and races) against the interpreter. */
static void test_gemm_as_work_groups(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	static const char *const shapes[][2] = {{"1,1", "1,1"}, {"7,13", "13,19"}, {"33,40", "40,65"},
						{"12,0", "0,4"}, {"2,64", "64,1"}, {"1,300", "300,40"},
						{"3,5,9", "9,6"}, {"2,1,4,7", "3,7,5"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, shapes[i][0]), *b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
	model md = model_new(); /* a symbolic batch, f64 */
	tbc_value *a = input_sym(&md, TBC_DT_F64, "N,37,9", 2, -1, 1), *b = input(&md, TBC_DT_F64, "9,35");
	check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-9);
	md = model_new(); /* Gemm: transposes, alpha, beta, C */
	a = input(&md, TBC_DT_F32, "11,7"), b = input(&md, TBC_DT_F32, "19,11");
	tbc_value *c = input(&md, TBC_DT_F32, "19");
	check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 1, 1, 0.5, -2)->outputs[0]}, 1e-4);
	md = model_new(); /* integers */
	a = input_sym(&md, TBC_DT_I32, "4,6", 1, -9, 9), b = input_sym(&md, TBC_DT_I32, "6,10", 1, -9, 9);
	c = input_sym(&md, TBC_DT_I32, "10", 1, -9, 9);
	check(&md, gemm_op(&md, a, b, c, 0, 0, 3, 2)->outputs[0]);
	md = model_new();
	a = input(&md, TBC_DT_F32, "33,40"), b = input(&md, TBC_DT_F32, "40,65");
	op2(&md, TBC_OP_MatMul, a, b);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "group(8, 8)"));
	assert_non_null(strstr(text, "local a_tile: f32[64, 16]"));
	free(text);
	/* items in lockstep (a GPU's subgroups): each item's outputs spread */
	dev.subgroup_size = 32;
	for (size_t i = 1; i < 4; i++) {
		md = model_new();
		a = input(&md, TBC_DT_F32, shapes[i][0]), b = input(&md, TBC_DT_F32, shapes[i][1]);
		check_outputs(&md, 1, (tbc_value *[]){op2(&md, TBC_OP_MatMul, a, b)}, 1e-4);
	}
	g_target = NULL;
}

/* ---- Tensor cores ----------------------------------------------------------------
 * Lowered for an NVIDIA GPU from sm_80 (tbc_target_desc_cuda(80)), a GEMM of
 * f16 or bf16 operands is made of kernel IR's warp matrix multiply-accumulate
 * (codegen/lower/gemm_mma.c): the evaluator runs it with the fragment layout
 * of mma.m16n8k16 (each item's sums) against the interpreter and the CPU's
 * scalar GEMM, on shapes that are not multiples of the tiles, batches,
 * broadcasts, transposed operands and an empty K.  Outputs of the low type
 * may differ in their last bit (the f32 sums are added in another order). */
typedef struct low_case {
	tbc_opcode op;
	const char *a, *b, *c; /* shapes; c: Gemm's C or Conv's bias */
} low_case;

static tbc_value *low_graph(model *md, const low_case *lc, tbc_dtype dt) {
	tbc_value *a = input(md, dt, lc->a), *b = input(md, dt, lc->b), *c = lc->c ? input(md, dt, lc->c) : NULL;
	if (lc->op == TBC_OP_Gemm) return gemm_op(md, a, b, c, 1, 1, 0.5, -2)->outputs[0]; /* both transposed */
	if (lc->op == TBC_OP_Conv) return node(md, TBC_OP_Conv, c ? 3 : 2, a, b, c)->outputs[0];
	return op2(md, TBC_OP_MatMul, a, b);
}

/* The case lowered has `expect` in its kernel IR's text (NULL: no mma at
 * all); when it has an mma, the evaluator agrees with the interpreter and
 * the CPU. */
static void check_low(const low_case *lc, tbc_dtype dt, const char *expect) {
	model md = model_new();
	tbc_graph_add_output(md.m->main, low_graph(&md, lc, dt));
	char *text = lowered_text(&md);
	if (expect ? !strstr(text, expect) : strstr(text, "mma") != NULL) fail_msg("%s %s in\n%s", expect ? "no" : "an mma, not", expect ? expect : "the scalar form", text);
	free(text);
	if (!expect) return;
	md = model_new();
	tbc_value *y = low_graph(&md, lc, dt);
	check_outputs(&md, 1, (tbc_value *[]){y}, dt == TBC_DT_BF16 ? 1e-2 : 2e-3);
}

static void test_gemm_tensor_cores_f16_bf16(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_cuda(80);
	g_target = &dev;
	double atol = g_atol;
	g_atol = 2e-2; /* sums of up to 300 products of values below 3, rounded to f16 or bf16 */
	static const low_case cases[] = {
		{TBC_OP_MatMul, "1,1", "1,1", NULL},          {TBC_OP_MatMul, "7,13", "13,19", NULL},
		{TBC_OP_MatMul, "33,40", "40,65", NULL},      {TBC_OP_MatMul, "100,300", "300,200", NULL},
		{TBC_OP_MatMul, "3,5,9", "9,6", NULL},        {TBC_OP_MatMul, "2,1,4,7", "3,7,5", NULL},
		{TBC_OP_MatMul, "129,17", "17,130", NULL},    {TBC_OP_Gemm, "37,21", "45,37", "45"},
		{TBC_OP_Conv, "1,5,9,9", "6,5,3,3", "6"},
	};
	static const tbc_dtype dts[] = {TBC_DT_F16, TBC_DT_BF16};
	for (int t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_low(&cases[i], dts[t], "mma.m16n8k16");
	/* an empty K: the sums are zeros (no k loop at all) */
	static const low_case empty_k = {TBC_OP_MatMul, "12,0", "0,4", NULL};
	check_low(&empty_k, TBC_DT_F16, "group(32, 8)");
	/* few tiles: 1 x 2 tiles a warp (32 x 64); TBC_GEMM_MMA picks others */
	check_low(&cases[7], TBC_DT_F16, "mma.m16n8k16 [1 x 2]");
	static const low_case batch = {TBC_OP_MatMul, "2,70,40", "2,40,150", NULL};
	setenv("TBC_GEMM_MMA", "4x4", 1);
	check_low(&batch, TBC_DT_F16, "mma.m16n8k16 [4 x 4]");
	setenv("TBC_GEMM_MMA", "3x1:32", 1);
	check_low(&batch, TBC_DT_BF16, "mma.m16n8k16 [3 x 1]");
	setenv("TBC_GEMM_MMA", "0", 1); /* the scalar form, for measuring one against the other */
	check_low(&cases[1], TBC_DT_F16, NULL);
	unsetenv("TBC_GEMM_MMA");
	/* sm_75 (no m16n8k16), f32 operands, other targets: the scalar form */
	dev = tbc_target_desc_cuda(75);
	check_low(&cases[1], TBC_DT_F16, NULL);
	dev = tbc_target_desc_cuda(90);
	check_low(&cases[1], TBC_DT_F32, NULL);
	dev = tbc_target_desc_rocm("gfx942");
	check_low(&cases[1], TBC_DT_BF16, NULL);
	g_atol = atol;
	g_target = NULL;
}

/* ---- Conv and pools ----------------------------------------------------------------*/
static void set_str(tbc_op *o, const char *name, const char *v) {
	tbc_attr *at = tbc_op_add_attr(o, name, TBC_ATTR_STRING);
	at->s = v;
	at->s_len = strlen(v);
}

typedef struct window {
	const char *x, *w; /* shapes */
	int64_t group, nsp;
	int64_t strides[3], dil[3], pads[6];
	const char *auto_pad;
	bool bias;
} window;

static tbc_op *conv_op(model *md, const window *c) {
	tbc_value *x = input(md, TBC_DT_F32, c->x), *w = input(md, TBC_DT_F32, c->w);
	tbc_value *b = NULL;
	if (c->bias) {
		char dims[16];
		snprintf(dims, sizeof dims, "%lld", atoll(c->w));
		b = input(md, TBC_DT_F32, dims);
	}
	tbc_op *o = node(md, TBC_OP_Conv, b ? 3 : 2, x, w, b);
	if (c->group != 1) tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = c->group;
	if (c->strides[0]) attr_ints(o, "strides", (int)c->nsp, c->strides);
	if (c->dil[0]) attr_ints(o, "dilations", (int)c->nsp, c->dil);
	if (c->pads[0] >= 0) attr_ints(o, "pads", 2 * (int)c->nsp, c->pads);
	if (c->auto_pad) set_str(o, "auto_pad", c->auto_pad);
	return o;
}

static void test_conv_2d_geometries(void **state) {
	(void)state;
	static const window cases[] = {
		{"1,3,7,7", "4,3,3,3", 1, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},
		{"2,3,9,8", "5,3,3,2", 1, 2, {2, 1}, {0}, {-1}, NULL, true},
		{"1,4,10,10", "8,4,1,1", 1, 2, {0}, {0}, {-1}, NULL, true},      /* 1x1: no im2col */
		{"1,4,10,10", "8,4,1,1", 1, 2, {2, 2}, {0}, {-1}, NULL, false},  /* 1x1 strided */
		{"1,6,8,8", "6,2,3,3", 3, 2, {0}, {0}, {1, 0, 2, 1}, NULL, true}, /* groups */
		{"1,5,9,9", "5,1,3,3", 5, 2, {2, 2}, {0}, {1, 1, 1, 1}, NULL, true}, /* depthwise (rows on the CPU) */
		{"2,4,9,10", "8,1,3,3", 4, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},  /* channel multiplier 2 */
		{"1,3,12,11", "3,1,3,3", 3, 2, {1, 2}, {2, 2}, {2, 1, 0, 3}, NULL, false}, /* dilated, uneven pads */
		{"1,6,13,13", "6,1,5,5", 6, 2, {2, 2}, {0}, {-1}, "SAME_UPPER", true},
		{"1,2,2,3", "2,1,5,5", 2, 2, {0}, {0}, {2, 2, 2, 2}, NULL, true},  /* windows wider than the input */
		{"1,4,7,7", "4,1,1,1", 4, 2, {2, 2}, {0}, {-1}, NULL, true},       /* 1x1 strided depthwise */
		{"1,2,11,11", "3,2,3,3", 1, 2, {0}, {2, 3}, {2, 2, 2, 2}, NULL, false}, /* dilations */
		{"1,2,7,6", "3,2,3,3", 1, 2, {2, 2}, {0}, {-1}, "SAME_UPPER", true},
		{"1,2,7,6", "3,2,4,4", 1, 2, {2, 2}, {0}, {-1}, "SAME_LOWER", false},
		{"1,2,7,6", "3,2,3,3", 1, 2, {0}, {0}, {-1}, "VALID", false},
		{"1,3,20,24", "20,3,7,7", 1, 2, {2, 2}, {0}, {3, 3, 3, 3}, NULL, true}, /* a ResNet stem, smaller */
	};
	/* Up to 147 products of inputs in [-3, 3) per output, accumulated in f32
	 * with fused multiply-adds against the interpreter's f64: about
	 * 147 * 9 * 6e-8 absolute, whatever the result's size. */
	g_atol = 1e-4;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){conv_op(&md, &cases[i])->outputs[0]}, 1e-4);
	}
	/* K = 288 per group: the GEMM runs in K blocks (test_gemm_k_blocks),
	 * the bias added after the last one; 81 columns, so the overlapping
	 * last tile stores one. */
	static const window blocked[] = {
		{"1,32,9,9", "10,32,3,3", 1, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},
		{"2,64,9,9", "6,32,3,3", 2, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},
	};
	g_atol = 5e-4;
	for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++) {
		model md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){conv_op(&md, &blocked[i])->outputs[0]}, 1e-4);
	}
	g_atol = 1e-6;
}

/* On a CPU im2col's rows start a whole number of vectors apart (their
 * pitch P rounded up to the target's lanes), so the GEMM's vector loads of
 * col never span two cache lines: 49 and 36 positions, a batch of two and
 * groups (col's matrices a pitch-sized block apart), K blocks (360 rows),
 * on both vector widths; the lowered program's col has the padded rows,
 * and the results agree with the interpreter. */
static void test_conv_im2col_rows_whole_vectors(void **state) {
	(void)state;
	static const struct {
		window w;
		int64_t batch, rows, pitch[2]; /* col's rows an image, its pitch at 8 and 16 lanes */
	} cases[] = {
		{{"1,3,17,17", "8,3,5,5", 1, 2, {2, 2}, {0}, {0, 0, 0, 0}, NULL, true}, 1, 75, {56, 64}},
		{{"2,6,11,11", "6,3,3,3", 2, 2, {2, 2}, {0}, {1, 1, 1, 1}, NULL, true}, 2, 2 * 27, {40, 48}},
		{{"1,40,13,13", "64,40,3,3", 1, 2, {2, 2}, {0}, {0, 0, 0, 0}, NULL, false}, 1, 360, {40, 48}},
	};
	g_atol = 1e-4;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int wide_target = 0; wide_target < 2; wide_target++) {
			g_target = wide_target ? wide() : NULL;
			model md = model_new();
			conv_op(&md, &cases[i].w);
			tbc_graph_add_output(md.m->main, md.m->main->last->outputs[0]);
			char *text = lowered_text(&md);
			char want[64];
			snprintf(want, sizeof want, "temp im2col: f32[%lld, %lld]", (long long)cases[i].batch,
				 (long long)(cases[i].rows * cases[i].pitch[wide_target]));
			if (!strstr(text, want)) fail_msg("case %zu: no %s in\n%s", i, want, text);
			free(text);
			md = model_new();
			check_outputs(&md, 1, (tbc_value *[]){conv_op(&md, &cases[i].w)->outputs[0]}, 1e-4);
			g_target = NULL;
		}
	g_atol = 1e-6;
}

static void test_conv_1d_and_3d(void **state) {
	(void)state;
	static const window cases[] = {
		{"2,3,17", "4,3,3", 1, 1, {2}, {0}, {1, 2}, NULL, true},
		{"1,2,5,6,7", "3,2,2,3,2", 1, 3, {1, 2, 1}, {0}, {0, 1, 1, 1, 0, 0}, NULL, true},
		{"2,4,17", "4,1,5", 4, 1, {2}, {0}, {2, 1}, NULL, true},                             /* depthwise 1-D */
		{"1,3,5,6,7", "6,1,3,3,3", 3, 3, {1, 2, 1}, {0}, {1, 1, 1, 0, 1, 1}, NULL, true}, /* depthwise 3-D */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){conv_op(&md, &cases[i])->outputs[0]}, 1e-4);
	}
}

static void test_conv_symbolic_batch_and_f64(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,3,6,6", 2, -1, 1), *w = input(&md, TBC_DT_F32, "4,3,3,3");
	tbc_op *o = node(&md, TBC_OP_Conv, 2, x, w, NULL);
	attr_ints(o, "pads", 4, (const int64_t[]){1, 1, 1, 1});
	check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
	md = model_new();
	x = input(&md, TBC_DT_F64, "1,2,5,5");
	w = input(&md, TBC_DT_F64, "3,2,2,2");
	check(&md, node(&md, TBC_OP_Conv, 2, x, w, NULL)->outputs[0]);
	/* Depthwise, a symbolic batch; and in f64. */
	md = model_new();
	x = input_sym(&md, TBC_DT_F32, "N,4,7,6", 3, -1, 1), w = input(&md, TBC_DT_F32, "4,1,3,3");
	o = node(&md, TBC_OP_Conv, 3, x, w, input(&md, TBC_DT_F32, "4"));
	tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = 4;
	attr_ints(o, "pads", 4, (const int64_t[]){1, 1, 1, 1});
	check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
	md = model_new();
	x = input(&md, TBC_DT_F64, "1,3,6,5"), w = input(&md, TBC_DT_F64, "3,1,3,2");
	o = node(&md, TBC_OP_Conv, 2, x, w, NULL);
	tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = 3;
	attr_ints(o, "strides", 2, (const int64_t[]){2, 1});
	check(&md, o->outputs[0]);
}

/* A depthwise convolution on the CPU has no im2col: a stride-1 2-D one
 * whose rows keep their width is one flat vector loop over a copy of each
 * plane with zeros either side (depthwise_masked: its scratch
 * `depthwise_pad` and its table of columns `depthwise_cols`), other
 * stride-1 2-D ones whose rows are at most 64 wide one over a padded copy
 * (depthwise_flat: the scratch alone), the others rows with a vector loop
 * (depthwise_rows). */
static void test_depthwise_conv_has_no_im2col_on_the_cpu(void **state) {
	(void)state;
	enum { ROWS, FLAT, MASKED };
	static const struct {
		const char *x;
		int64_t stride, pad;
		int form;
	} cases[] = {{"1,8,9,9", 1, 1, MASKED}, {"1,8,5,70", 1, 1, MASKED}, {"1,8,9,9", 1, 0, FLAT},
		     {"1,8,5,70", 1, 0, ROWS},   {"1,8,9,9", 2, 1, ROWS}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, cases[i].x), *w = input(&md, TBC_DT_F32, "8,1,3,3");
		tbc_op *o = node(&md, TBC_OP_Conv, 2, x, w, NULL);
		tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = 8;
		int64_t p = cases[i].pad;
		attr_ints(o, "pads", 4, (const int64_t[]){p, p, p, p});
		attr_ints(o, "strides", 2, (const int64_t[]){cases[i].stride, cases[i].stride});
		char *text = lowered_text(&md);
		assert_non_null(strstr(text, "depthwise"));
		assert_null(strstr(text, "im2col"));
		assert_non_null(strstr(text, " vector {"));
		int form = strstr(text, "depthwise_cols") ? MASKED : strstr(text, "depthwise_pad") ? FLAT : ROWS;
		if (form != cases[i].form) fail_msg("case %zu: form %d, not %d:\n%s", i, form, cases[i].form, text);
		free(text);
	}
}

/* A depthwise convolution over a symbolic batch with a bias, and one in
 * f64 with uneven pads, against the interpreter (a depthwise form's last
 * cases). */
static void depthwise_symbolic_batch_and_f64(void) {
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,3,5,6", 3, -1, 1), *w = input(&md, TBC_DT_F32, "3,1,3,3");
	tbc_op *o = node(&md, TBC_OP_Conv, 3, x, w, input(&md, TBC_DT_F32, "3"));
	tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = 3;
	attr_ints(o, "pads", 4, (const int64_t[]){1, 1, 1, 1});
	check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
	md = model_new();
	x = input(&md, TBC_DT_F64, "1,3,6,5"), w = input(&md, TBC_DT_F64, "3,1,3,2");
	o = node(&md, TBC_OP_Conv, 2, x, w, NULL);
	tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = 3;
	attr_ints(o, "pads", 4, (const int64_t[]){1, 0, 1, 1});
	check(&md, o->outputs[0]);
}

/* depthwise_masked's geometries against the interpreter: 3 x 3 as in
 * MobileNetV2, a channel multiplier over two images, SAME_LOWER /
 * SAME_UPPER's uneven pads, dilations with uneven pads and fewer output
 * rows than input rows, rows of 1 and of 112, a 7 x 7 kernel, padding only
 * above, whole rows of padding, planes of several bands, stride 2 (down,
 * across or both; pads after only; dilated; output rows short enough to
 * compute the rows between them, or long enough to go a loop a row), no
 * bias, a symbolic batch, f64.  A tap whose column leaves the row must add nothing (the element
 * beside it in memory is the row above's or below's). */
static void test_depthwise_masked_geometries(void **state) {
	(void)state;
	static const window cases[] = {
		{"1,3,7,7", "3,1,3,3", 3, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},
		{"2,4,6,9", "8,1,3,3", 4, 2, {0}, {0}, {1, 1, 1, 1}, NULL, false},      /* multiplier 2 */
		{"1,3,9,8", "3,1,4,4", 3, 2, {0}, {0}, {-1}, "SAME_LOWER", true},      /* pads 2 before, 1 after */
		{"1,3,9,8", "3,1,2,4", 3, 2, {0}, {0}, {-1}, "SAME_UPPER", false},
		{"1,2,12,11", "2,1,3,3", 2, 2, {0}, {2, 3}, {2, 4, 0, 2}, NULL, true}, /* dilated: 10 rows of 11 */
		{"1,2,6,1", "2,1,3,3", 2, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},       /* rows of one output */
		{"1,2,5,112", "2,1,3,3", 2, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},     /* 112 wide */
		{"1,2,4,20", "2,1,7,7", 2, 2, {0}, {0}, {3, 3, 3, 3}, NULL, true},      /* 7 x 7 */
		{"1,2,3,4", "2,1,1,1", 2, 2, {0}, {0}, {1, 0, 0, 0}, NULL, true},       /* 1 x 1, a row of pads above */
		{"1,2,5,5", "2,1,3,3", 2, 2, {0}, {0}, {3, 1, 3, 1}, NULL, true},       /* rows wholly in the padding */
		{"1,2,150,112", "2,1,3,3", 2, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},   /* five bands, three in a loop */
		{"1,2,39,64", "2,1,5,5", 2, 2, {0}, {0}, {2, 2, 2, 2}, NULL, true},     /* a band's span past the plane */
		/* stride 2: the rows between the output rows computed and dropped */
		{"1,3,8,8", "3,1,3,3", 3, 2, {2, 2}, {0}, {1, 1, 1, 1}, NULL, true},
		{"2,4,9,8", "8,1,3,3", 4, 2, {2, 2}, {0}, {0, 0, 1, 1}, NULL, true},    /* pads after only, odd H */
		{"1,2,11,12", "2,1,5,5", 2, 2, {2, 2}, {0}, {2, 2, 2, 2}, NULL, false},
		{"1,2,10,12", "2,1,3,3", 2, 2, {2, 2}, {2, 2}, {2, 2, 1, 1}, NULL, true}, /* dilated */
		{"1,2,9,10", "2,1,3,3", 2, 2, {2, 1}, {0}, {1, 1, 1, 1}, NULL, true},   /* stride 2 down, 1 across */
		{"1,2,9,10", "2,1,3,3", 2, 2, {1, 2}, {0}, {1, 1, 1, 1}, NULL, true},   /* stride 1 down, 2 across */
		{"1,2,200,112", "2,1,3,3", 2, 2, {2, 2}, {0}, {1, 1, 1, 1}, NULL, true}, /* six bands of 17 output rows */
		{"2,4,9,40", "4,1,3,3", 4, 2, {2, 1}, {0}, {1, 1, 1, 1}, NULL, true},   /* rows of 40: a loop a row */
		{"1,2,9,34", "2,1,5,5", 2, 2, {2, 2}, {0}, {2, 2, 2, 2}, NULL, false},  /* rows of 17 */
	};
	double atol = g_atol;
	g_atol = 1e-4;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		conv_op(&md, &cases[i]);
		char *text = lowered_text(&md); /* frees md */
		if (!strstr(text, "depthwise_cols")) fail_msg("case %zu is not depthwise_masked:\n%s", i, text);
		/* the planes of five and six bands run their inner bands in a loop */
		if ((strstr(cases[i].x, ",150,") || strstr(cases[i].x, ",200,")) != (strstr(text, "%band") != NULL))
			fail_msg("case %zu: bands in a loop or not as expected:\n%s", i, text);
		free(text);
		md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){conv_op(&md, &cases[i])->outputs[0]}, 1e-4);
	}
	depthwise_symbolic_batch_and_f64();
	g_atol = atol;
}

/* depthwise_flat's geometries against the interpreter: kernels 1 to 7 wide,
 * even ones with SAME_LOWER / SAME_UPPER's uneven pads, pads on one side
 * only, dilations, a channel multiplier, no bias, rows of 1 and of 64, a
 * symbolic batch, f64.  depthwise_masked, which takes the ones whose rows
 * keep their width, is turned off. */
static void test_depthwise_flat_geometries(void **state) {
	(void)state;
	setenv("TBC_DEPTHWISE_MASKED", "0", 1);
	static const window cases[] = {
		{"1,3,7,7", "3,1,3,3", 3, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},
		{"2,4,6,9", "8,1,3,3", 4, 2, {0}, {0}, {1, 1, 1, 1}, NULL, false},     /* multiplier 2 */
		{"1,3,9,8", "3,1,4,4", 3, 2, {0}, {0}, {-1}, "SAME_LOWER", true},     /* pads 2 before, 1 after */
		{"1,3,9,8", "3,1,2,4", 3, 2, {0}, {0}, {-1}, "SAME_UPPER", false},
		{"1,2,12,11", "2,1,3,3", 2, 2, {0}, {2, 3}, {2, 0, 1, 3}, NULL, true}, /* dilated, uneven pads */
		{"1,2,10,10", "2,1,5,5", 2, 2, {0}, {0}, {0, 0, 0, 0}, NULL, true},    /* no padding */
		{"1,2,6,1", "2,1,3,3", 2, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true},      /* rows of one output */
		{"1,2,4,64", "2,1,7,7", 2, 2, {0}, {0}, {3, 3, 3, 3}, NULL, true},     /* 64 wide, 7 x 7 */
		{"1,2,3,4", "2,1,1,1", 2, 2, {0}, {0}, {0, 1, 0, 0}, NULL, true},      /* 1 x 1 with a pad */
	};
	double atol = g_atol;
	g_atol = 1e-4;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){conv_op(&md, &cases[i])->outputs[0]}, 1e-4);
	}
	depthwise_symbolic_batch_and_f64();
	g_atol = atol;
	unsetenv("TBC_DEPTHWISE_MASKED");
}

/* A Conv of input x (dims text) with constant random f32 weights [m, C /
 * group, kh, kw], group and, where asked, a bias that is a graph input. */
static tbc_op *const_weight_conv(model *md, const char *x, int64_t m, int64_t kh, int64_t kw, int64_t group, bool bias) {
	int64_t cg = atoll(strchr(x, ',') + 1) / group, n = m * cg * kh * kw;
	double *v = malloc((size_t)n * sizeof *v);
	assert_non_null(v);
	for (int64_t j = 0; j < n; j++) v[j] = 2 * rnd(md) - 1;
	tbc_value *w = constant(md, TBC_DT_F32, 4, (int64_t[]){m, cg, kh, kw}, v);
	free(v);
	char bd[16];
	snprintf(bd, sizeof bd, "%lld", (long long)m);
	tbc_value *b = bias ? input(md, TBC_DT_F32, bd) : NULL;
	tbc_op *o = node(md, TBC_OP_Conv, b ? 3 : 2, input(md, TBC_DT_F32, x), w, b);
	if (group > 1) tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = group;
	return o;
}

/* A 2-D convolution reads its taps as shifts over padded planes instead of
 * an im2col matrix (codegen/lower/conv.c, conv_direct) where the target has
 * the fma tile: a planes kernel, fma tiles a tap each, the junk columns
 * dropped by the kernel moving the rows out; transposed (few channels out,
 * whole panels) or as it is (rows of channels).  A stride above 1 splits
 * each padded plane into its phases (one plane per row and column phase),
 * where every tap is again a shift.  Against the interpreter: a bias,
 * uneven pads with dilation over two images, groups, a 1 x 3 kernel, a
 * 5 x 5 kernel without padding (its last rows read the slack past the
 * planes), channels not whole panels; strides of 2 (odd and even padded
 * sizes, with dilation, groups, a 7 x 7 stem of 3 channels, 7 x 7 outputs
 * transposed), 4 (an 11 x 11 kernel), and unequal ones (2 x 1, 1 x 3); and
 * shapes whose junk columns cost more than im2col keep im2col. */
static void test_conv_direct_taps_over_padded_planes(void **state) {
	(void)state;
	static const struct {
		const char *x;
		int64_t m, kh, kw, group, dil, pads[4];
		bool bias, direct;
		int64_t stride[2];
	} cases[] = {
		{"1,8,10,30", 32, 3, 3, 1, 1, {1, 1, 1, 1}, true, true, {1, 1}},
		{"2,6,9,40", 32, 3, 3, 1, 2, {2, 0, 1, 1}, false, true, {1, 1}},
		{"1,16,6,40", 64, 3, 3, 2, 1, {1, 1, 1, 1}, true, true, {1, 1}},
		{"1,4,5,60", 32, 1, 3, 1, 1, {0, 1, 0, 1}, true, true, {1, 1}},
		{"1,3,12,50", 32, 5, 5, 1, 1, {0, 0, 0, 0}, false, true, {1, 1}},
		{"1,16,7,7", 32, 3, 3, 1, 1, {1, 1, 1, 1}, true, false, {1, 1}},
		/* laid out as it is (channels not whole panels): rows of channels */
		{"1,5,6,30", 24, 3, 3, 1, 1, {1, 1, 1, 1}, true, true, {1, 1}},
		{"1,8,6,30", 40, 3, 3, 2, 1, {1, 1, 1, 1}, false, true, {1, 1}},
		{"2,3,8,29", 16, 3, 3, 1, 2, {2, 1, 0, 2}, true, true, {1, 1}},
		{"1,4,9,20", 24, 3, 3, 1, 1, {1, 1, 1, 1}, true, false, {1, 1}}, /* 22 wide: 224 columns for 180 */
		/* strided: phase planes */
		{"1,8,15,61", 32, 3, 3, 1, 1, {1, 1, 1, 1}, true, true, {2, 2}},
		{"2,6,16,62", 32, 3, 3, 1, 2, {2, 0, 1, 1}, false, true, {2, 2}},
		{"1,16,9,62", 64, 3, 3, 2, 1, {1, 1, 1, 1}, true, true, {2, 2}},
		{"1,3,23,61", 32, 7, 7, 1, 1, {3, 3, 3, 3}, true, true, {2, 2}},
		{"1,3,27,93", 24, 11, 11, 1, 1, {2, 2, 2, 2}, false, true, {4, 4}},
		{"1,8,13,13", 64, 3, 3, 1, 1, {1, 1, 1, 1}, true, true, {2, 2}}, /* 7 x 7 outputs: transposed */
		{"1,4,12,30", 32, 3, 3, 1, 1, {1, 1, 1, 1}, true, true, {2, 1}},
		{"1,8,15,63", 32, 3, 3, 1, 1, {1, 1, 1, 1}, true, false, {2, 2}}, /* 33 wide: 288 columns for 256 */
		{"1,4,12,95", 32, 3, 3, 1, 1, {0, 1, 0, 2}, false, true, {1, 3}},
		{"1,4,11,41", 32, 5, 5, 1, 1, {0, 0, 0, 0}, true, true, {2, 2}},
	};
	double atol = g_atol;
	g_atol = 1e-4;
	setenv("TBC_CONV_WINOGRAD", "0", 1); /* the 3x3 cases would take it (test_conv_winograd) */
	static tbc_target_desc t;
	t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32, t.fma_tile = true;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int run = 0; run < 2; run++) {
			g_target = &t;
			model md = model_new();
			tbc_op *o = const_weight_conv(&md, cases[i].x, cases[i].m, cases[i].kh, cases[i].kw, cases[i].group,
						      cases[i].bias);
			attr_ints(o, "pads", 4, cases[i].pads);
			int64_t d = cases[i].dil;
			attr_ints(o, "dilations", 2, (const int64_t[]){d, d});
			attr_ints(o, "strides", 2, cases[i].stride);
			if (run == 1) {
				check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
				continue;
			}
			tbc_graph_add_output(md.m->main, o->outputs[0]);
			char *text = lowered_text(&md);
			bool planes = strstr(text, "conv_planes") != NULL, im2col = strstr(text, "im2col") != NULL;
			if (planes != cases[i].direct || im2col == cases[i].direct)
				fail_msg("case %zu: planes %d, im2col %d; the direct form expected %d\n%s", i, planes, im2col,
					 cases[i].direct, text);
			free(text);
		}
	unsetenv("TBC_CONV_WINOGRAD");
	g_target = NULL;
	g_atol = atol;
}

/* A 3x3 convolution of stride 1 and one group is computed by Winograd's
 * F(2x2, 3x3), or F(4x4, 3x3) where both output dims are 16 or more, where
 * the target has the fma tile and there are 16 tiles of 2 x 2 or more
 * (codegen/lower/conv_winograd.c): the planes of the input's row phases,
 * the input transform, 16 or 36 GEMMs over the channels (transposed where
 * the tiles are few and the channels whole panels), the output transform
 * and bias, the rows copied out.  Against the interpreter, each case in its
 * own form and in the other (TBC_CONV_WINOGRAD_TILE): a bias, output rows
 * and columns not multiples of the tile over two images (the last tiles'
 * rows and columns dropped), uneven and no pads, few tiles (transposed
 * GEMMs), channels not whole panels; forced (TBC_CONV_WINOGRAD=1) down to
 * one output position; and shapes that must not take it: too few tiles,
 * groups, dilation, stride 2, a 1 x 3 kernel. */
static void test_conv_winograd(void **state) {
	(void)state;
	static const struct {
		const char *x;
		int64_t m, kh, kw, group, dil, stride, pads[4];
		bool bias, force, wino, transposed;
	} cases[] = {
		{"1,8,10,30", 32, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false, true, true}, /* 80 tiles, transposed */
		{"2,6,9,12", 24, 3, 3, 1, 1, 1, {1, 0, 1, 2}, false, false, true, false}, /* 9 x 12 out */
		{"2,5,12,9", 7, 3, 3, 1, 1, 1, {0, 1, 2, 1}, true, false, true, false},   /* 12 x 9 out */
		{"1,64,7,7", 64, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false, true, true},  /* 20 tiles: transposed */
		{"1,16,14,14", 96, 3, 3, 1, 1, 1, {1, 1, 1, 1}, false, false, true, true},
		{"1,16,14,14", 40, 3, 3, 1, 1, 1, {1, 1, 1, 1}, true, false, true, false}, /* 40: not whole panels */
		{"1,3,20,20", 5, 3, 3, 1, 1, 1, {0, 0, 0, 0}, true, false, true, false},
		{"2,6,17,19", 24, 3, 3, 1, 1, 1, {1, 0, 1, 2}, true, false, true, false}, /* 17 x 19 out: F(4x4) */
		{"1,64,16,16", 64, 3, 3, 1, 1, 1, {1, 1, 1, 1}, false, false, true, true}, /* F(4x4), 20 tiles */
		{"1,4,3,3", 6, 3, 3, 1, 1, 1, {0, 0, 0, 0}, true, true, true, false},    /* one position */
		{"2,4,1,2", 6, 3, 3, 1, 1, 1, {1, 1, 1, 1}, false, true, true, false},   /* 1 x 2 */
		{"1,4,8,8", 6, 3, 3, 1, 1, 1, {1, 1, 1, 1}, false, false, true, false},  /* 16 tiles, the fewest taken */
		{"1,4,6,6", 6, 3, 3, 1, 1, 1, {1, 1, 1, 1}, false, false, false, false}, /* 9 tiles */
		{"1,8,16,16", 32, 3, 3, 2, 1, 1, {1, 1, 1, 1}, true, false, false, false},
		{"1,8,16,16", 32, 3, 3, 1, 2, 1, {2, 2, 2, 2}, true, false, false, false},
		{"1,8,16,16", 32, 3, 3, 1, 1, 2, {1, 1, 1, 1}, true, false, false, false},
		{"1,8,16,16", 32, 1, 3, 1, 1, 1, {0, 1, 0, 1}, true, false, false, false},
	};
	/* Winograd's rounding scales with the outputs' magnitude, not each
	 * output's: up to 1e-5 of the largest (|y| ~ 20 here) for F(4x4). */
	double atol = g_atol;
	g_atol = 1e-3;
	/* not left over from a test before that failed while it had them set */
	unsetenv("TBC_CONV_WINOGRAD");
	unsetenv("TBC_CONV_WINOGRAD_TILE");
	static tbc_target_desc t;
	t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32, t.fma_tile = true;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int other = 0; other < (cases[i].wino ? 2 : 1); other++) {
			const char *x = cases[i].x;
			int64_t h = atoll(strchr(strchr(x, ',') + 1, ',') + 1), w = atoll(strrchr(x, ',') + 1);
			const int64_t *p = cases[i].pads;
			bool f4 = h + p[0] + p[2] - 2 >= 16 && w + p[1] + p[3] - 2 >= 16;
			if (other) f4 = !f4, setenv("TBC_CONV_WINOGRAD_TILE", f4 ? "4" : "2", 1);
			if (cases[i].force) setenv("TBC_CONV_WINOGRAD", "1", 1);
			for (int run = 0; run < 2; run++) {
				g_target = &t;
				model md = model_new();
				tbc_op *o = const_weight_conv(&md, x, cases[i].m, cases[i].kh, cases[i].kw, cases[i].group, cases[i].bias);
				attr_ints(o, "pads", 4, p);
				int64_t d = cases[i].dil, st = cases[i].stride;
				attr_ints(o, "dilations", 2, (const int64_t[]){d, d});
				attr_ints(o, "strides", 2, (const int64_t[]){st, st});
				if (run == 1) {
					check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
					continue;
				}
				tbc_graph_add_output(md.m->main, o->outputs[0]);
				char *text = lowered_text(&md);
				bool taken = strstr(text, "wino_in") != NULL && strstr(text, "wino_rows") != NULL;
				if (taken != cases[i].wino) fail_msg("case %zu: Winograd %d, expected %d\n%s", i, taken, cases[i].wino, text);
				/* transposed: U^T in panels of 32 of its a^2 m columns, [a^2 m / 32, C 32 (+ 16)] */
				char layout[48];
				int64_t cin = atoll(strchr(x, ',') + 1), stride = cin * 32, xis = f4 ? 36 : 16;
				if (stride * 4 % 512 == 0) stride += 16;
				snprintf(layout, sizeof layout, "f32[%lld, %lld]", (long long)(xis * cases[i].m / 32), (long long)stride);
				if (!other && cases[i].transposed != (strstr(text, layout) != NULL))
					fail_msg("case %zu: %s expected %s\n%s", i, layout, cases[i].transposed ? "present" : "absent", text);
				free(text);
			}
			unsetenv("TBC_CONV_WINOGRAD");
			unsetenv("TBC_CONV_WINOGRAD_TILE");
		}
	g_target = NULL;
	g_atol = atol;
}

/* An elementwise op on a Conv's output alone, right after it (Relu, Clip
 * with constant bounds, LeakyRelu), is applied by the convolution's stores
 * (codegen/lower/conv.c, conv_activation): no kernel of its own.  Against
 * the interpreter, in every form a CPU convolution takes: the GEMM of a
 * 1x1, im2col, transposed, the direct form, Winograd, and the depthwise
 * ones (flat loops with masks at stride 1, at stride 2 by rows and by
 * virtual rows, the padded flat loop, the rows).  Not fused, and still
 * right: y also a graph output, y read twice, an op between the two, a
 * bound that is not a constant, an operand that is a tensor. */
enum { ACT_RELU, ACT_CLIP, ACT_LEAKY, ACT_N };

static tbc_value *activation(model *md, int act, tbc_value *y) {
	if (act == ACT_RELU) return op1(md, TBC_OP_Relu, y);
	if (act == ACT_LEAKY) {
		tbc_op *o = node(md, TBC_OP_LeakyRelu, 1, y, NULL, NULL);
		tbc_op_add_attr(o, "alpha", TBC_ATTR_FLOAT)->f = 0.1;
		return o->outputs[0];
	}
	tbc_value *lo = constant(md, TBC_DT_F32, 0, NULL, (const double[]){0}), *hi = constant(md, TBC_DT_F32, 0, NULL, (const double[]){1.5});
	return node(md, TBC_OP_Clip, 3, y, lo, hi)->outputs[0];
}

static void test_conv_activation_fused(void **state) {
	(void)state;
	static const char *const kernel[ACT_N] = {"_relu", "_clip", "_leakyrelu"};
	static const struct {
		const char *x;
		int64_t m, k, group, stride, pad;
		bool const_w;
		const char *form, *env; /* a kernel name the form has; an env var turning another form off */
	} cases[] = {
		{"1,8,6,6", 16, 1, 1, 1, 0, true, "conv", NULL},                            /* 1x1: the GEMM */
		{"1,4,9,9", 8, 3, 1, 2, 1, false, "im2col", NULL},                          /* im2col */
		{"1,16,7,7", 32, 3, 1, 1, 1, true, "conv", "TBC_CONV_WINOGRAD"},            /* transposed */
		{"1,4,16,16", 32, 3, 1, 1, 1, true, "conv_planes", "TBC_CONV_WINOGRAD"},    /* direct */
		{"1,16,16,16", 32, 3, 1, 1, 1, true, "wino_out", NULL},                      /* Winograd */
		{"1,8,14,14", 8, 3, 8, 1, 1, true, "depthwise", NULL},                        /* masked, stride 1 */
		{"1,8,28,28", 8, 3, 8, 2, 1, true, "depthwise", NULL},                        /* virtual rows */
		{"1,8,8,64", 8, 3, 8, 2, 1, true, "depthwise", NULL},                         /* by rows */
		{"1,8,9,9", 8, 3, 8, 1, 0, true, "depthwise", NULL},                          /* padded flat */
		{"1,8,9,9", 8, 3, 8, 2, 1, true, "depthwise", NULL},                          /* rows */
	};
	static tbc_target_desc t;
	t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32, t.fma_tile = true;
	double atol = g_atol;
	g_atol = 1e-3;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		for (int act = 0; act < ACT_N; act++)
			for (int run = 0; run < 2; run++) {
				if (cases[i].env) setenv(cases[i].env, "0", 1);
				g_target = &t;
				model md = model_new();
				tbc_op *o;
				if (cases[i].const_w) {
					o = const_weight_conv(&md, cases[i].x, cases[i].m, cases[i].k, cases[i].k, cases[i].group, true);
				} else {
					char w[32];
					snprintf(w, sizeof w, "%lld,%lld,%lld,%lld", (long long)cases[i].m,
						 (long long)(atoll(strchr(cases[i].x, ',') + 1) / cases[i].group), (long long)cases[i].k,
						 (long long)cases[i].k);
					o = node(&md, TBC_OP_Conv, 2, input(&md, TBC_DT_F32, cases[i].x), input(&md, TBC_DT_F32, w), NULL);
					if (cases[i].group > 1) tbc_op_add_attr(o, "group", TBC_ATTR_INT)->i = cases[i].group;
				}
				int64_t p = cases[i].pad, st = cases[i].stride;
				attr_ints(o, "pads", 4, (const int64_t[]){p, p, p, p});
				attr_ints(o, "strides", 2, (const int64_t[]){st, st});
				tbc_value *y = activation(&md, act, o->outputs[0]);
				if (run == 1) {
					check_outputs(&md, 1, (tbc_value *[]){y}, 1e-4);
				} else {
					tbc_graph_add_output(md.m->main, y);
					char *text = lowered_text(&md);
					if (!strstr(text, cases[i].form) || strstr(text, kernel[act]))
						fail_msg("case %zu, activation %d: not fused into the %s form\n%s", i, act, cases[i].form, text);
					free(text);
				}
				if (cases[i].env) unsetenv(cases[i].env);
			}
	/* Not fused: each still its own kernel, and right. */
	for (int c = 0; c < 5; c++)
		for (int run = 0; run < 2; run++) {
			g_target = &t;
			model md = model_new();
			tbc_op *o = const_weight_conv(&md, "1,4,8,8", 8, 3, 3, 1, true);
			attr_ints(o, "pads", 4, (const int64_t[]){1, 1, 1, 1});
			tbc_value *y = o->outputs[0], *z, *outs[2] = {NULL, NULL};
			int n = 1;
			if (c == 2) op1(&md, TBC_OP_Neg, input(&md, TBC_DT_F32, "3")); /* an op between */
			if (c == 3) {
				tbc_value *hi = constant(&md, TBC_DT_F32, 0, NULL, (const double[]){1});
				z = node(&md, TBC_OP_Clip, 3, y, input(&md, TBC_DT_F32, ""), hi)->outputs[0];
			} else if (c == 4) {
				z = op2(&md, TBC_OP_Add, y, input(&md, TBC_DT_F32, "8,1,1"));
			} else {
				z = op1(&md, TBC_OP_Relu, y);
			}
			outs[0] = z;
			if (c == 0) outs[n++] = y;                                      /* y an output too */
			if (c == 1) outs[0] = op2(&md, TBC_OP_Add, z, op1(&md, TBC_OP_Neg, y)); /* y read twice */
			if (run == 1) {
				check_outputs(&md, n, outs, 1e-4);
				continue;
			}
			for (int j = 0; j < n; j++) tbc_graph_add_output(md.m->main, outs[j]);
			char *text = lowered_text(&md);
			if (!strstr(text, c == 3 ? "_clip" : c == 4 ? "_add" : "_relu") && !(c == 1 && strstr(text, "_fused")))
				fail_msg("case %d: the activation was fused\n%s", c, text);
			free(text);
		}
	g_target = NULL;
	g_atol = atol;
}

/* A convolution whose positions fill the register tile's columns badly
 * (7 x 7 of them in 64 columns, or one position) is computed transposed
 * when its weights are constant and its output channels whole panels
 * (codegen/lower/conv.c, conv_transposed_rows): the positions its rows, in
 * tiles of fewer rows where that count divides them, the channels its
 * columns, the weights W^T in column panels, y stored with strided
 * columns and no K blocks.  Against the interpreter, for the default
 * 256-bit tile (5 x 16, no fma tile) and AVX-512's (8 x 32, the fma
 * tile): 3x3 with a bias, a 1x1 over two images, groups, one position,
 * stride 2, a deep K, f64; and a shape laid out as it is. */
static void test_conv_transposed_where_positions_waste_the_tile(void **state) {
	(void)state;
	static const struct {
		const char *x;
		int64_t m, kh, group, stride, pad;
		bool bias, transposed_narrow, transposed_wide;
	} cases[] = {
		{"1,16,7,7", 32, 3, 1, 1, 1, true, true, true},    /* 49 positions */
		{"2,24,5,5", 64, 1, 1, 1, 0, false, true, true},   /* 1x1, 25 positions, 2 images */
		{"1,32,3,3", 64, 3, 2, 1, 1, true, true, true},    /* groups of 32 channels */
		{"2,64,1,1", 32, 1, 1, 1, 0, true, true, true},    /* one position (a squeeze-excite block) */
		{"1,8,9,9", 32, 3, 1, 2, 1, true, true, true},     /* stride 2: 25 positions */
		{"1,80,7,7", 64, 3, 1, 1, 1, false, true, true},   /* K = 720 */
		{"1,4,16,16", 32, 3, 1, 1, 1, true, false, true},  /* 256 positions: whole tiles (wide: the direct form's panels) */
		{"1,8,6,6", 24, 1, 1, 1, 0, true, false, false},   /* 24 channels: not whole panels */
	};
	double atol = g_atol;
	g_atol = 1e-4;
	setenv("TBC_CONV_WINOGRAD", "0", 1); /* the 3x3 cases would take it (test_conv_winograd) */
	for (int wide_tile = 0; wide_tile < 2; wide_tile++)
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			static tbc_target_desc t;
			t = tbc_target_desc_cpu_default();
			if (wide_tile) t.vector_bytes = 64, t.vector_regs = 32, t.fma_tile = true;
			bool transposed = wide_tile ? cases[i].transposed_wide : cases[i].transposed_narrow;
			for (int run = 0; run < 2; run++) {
				g_target = &t;
				model md = model_new();
				int64_t cin = atoll(strchr(cases[i].x, ',') + 1), cg = cin / cases[i].group, kk = cases[i].kh;
				tbc_op *o = const_weight_conv(&md, cases[i].x, cases[i].m, kk, kk, cases[i].group, cases[i].bias);
				int64_t p = cases[i].pad, s = cases[i].stride;
				attr_ints(o, "pads", 4, (const int64_t[]){p, p, p, p});
				attr_ints(o, "strides", 2, (const int64_t[]){s, s});
				if (run == 1) {
					check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
					continue;
				}
				tbc_graph_add_output(md.m->main, o->outputs[0]);
				char *text = lowered_text(&md);
				/* W^T in panels: [channels / nr, K nr (+ 64 bytes)] */
				int nr = wide_tile ? 32 : 16;
				int64_t stride = cg * kk * kk * nr;
				if (stride * 4 % 512 == 0) stride += 16;
				char layout[48];
				snprintf(layout, sizeof layout, "f32[%lld, %lld]", (long long)(cases[i].m / nr), (long long)stride);
				if (transposed != (strstr(text, layout) != NULL))
					fail_msg("case %zu (%s tile): %s expected %s\n%s", i, wide_tile ? "wide" : "narrow", layout,
						 transposed ? "present" : "absent", text);
				free(text);
			}
		}
	unsetenv("TBC_CONV_WINOGRAD");
	/* f64: a tile of 8 columns */
	g_target = NULL;
	model md = model_new();
	double v[16 * 4];
	for (int j = 0; j < 64; j++) v[j] = 2 * rnd(&md) - 1;
	tbc_value *w = constant(&md, TBC_DT_F64, 4, (int64_t[]){16, 4, 1, 1}, v);
	check(&md, node(&md, TBC_OP_Conv, 2, input(&md, TBC_DT_F64, "1,4,3,3"), w, NULL)->outputs[0]);
	g_atol = atol;
}

/* On a device im2col is one flat grid over the matrix (codegen/lower/conv.c,
 * im2col_flat) before the grouped GEMM: the same geometries, 1-3 spatial
 * dims, groups, dilations, padding, a symbolic batch. */
static void test_conv_on_a_device(void **state) {
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	test_conv_2d_geometries(state);
	test_conv_1d_and_3d(state);
	test_conv_symbolic_batch_and_f64(state);
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "1,3,9,9"), *w = input(&md, TBC_DT_F32, "4,3,3,3");
	node(&md, TBC_OP_Conv, 2, x, w, NULL);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "im2col"));
	assert_null(strstr(text, " vector {"));
	free(text);
	g_target = NULL;
}

static tbc_op *pool_op(model *md, tbc_opcode code, tbc_dtype dt, const char *x, int nsp, const int64_t *kernel,
		       const int64_t *strides, const int64_t *pads, int n_out) {
	tbc_value *xv = input_sym(md, dt, x, 1, -100, 100);
	tbc_op *o = tbc_op_new(md->m->main, code, "n", 1, &xv, n_out);
	attr_ints(o, "kernel_shape", nsp, kernel);
	if (strides) attr_ints(o, "strides", nsp, strides);
	if (pads) attr_ints(o, "pads", 2 * nsp, pads);
	return o;
}

static void test_maxpool_pads_strides_ceil_and_indices(void **state) {
	(void)state;
	model md = model_new();
	tbc_op *o = pool_op(&md, TBC_OP_MaxPool, TBC_DT_F32, "1,3,9,9", 2, (const int64_t[]){3, 3}, (const int64_t[]){2, 2},
			    (const int64_t[]){1, 1, 1, 1}, 1);
	check(&md, o->outputs[0]);
	md = model_new();
	o = pool_op(&md, TBC_OP_MaxPool, TBC_DT_F32, "2,2,8,7", 2, (const int64_t[]){2, 3}, (const int64_t[]){2, 2}, NULL, 2);
	tbc_op_add_attr(o, "ceil_mode", TBC_ATTR_INT)->i = 1;
	check_outputs(&md, 2, (tbc_value *[]){o->outputs[0], o->outputs[1]}, 1e-6);
	md = model_new();
	o = pool_op(&md, TBC_OP_MaxPool, TBC_DT_F32, "1,1,6,6", 2, (const int64_t[]){2, 2}, NULL, NULL, 2);
	tbc_op_add_attr(o, "storage_order", TBC_ATTR_INT)->i = 1;
	attr_ints(o, "dilations", 2, (const int64_t[]){2, 2});
	check_outputs(&md, 2, (tbc_value *[]){o->outputs[0], o->outputs[1]}, 1e-6);
	md = model_new();
	o = pool_op(&md, TBC_OP_MaxPool, TBC_DT_U8, "1,2,5", 1, (const int64_t[]){2}, NULL, (const int64_t[]){1, 1}, 1);
	check(&md, o->outputs[0]);
}

/* MaxPool without Indices runs a row at a time (codegen/lower/conv.c,
 * maxpool_rows): a vector loop over the positions whose window lies inside
 * the row, per-position tap ranges at the borders.  Geometries with wide
 * and empty interiors, windows wholly in the padding (0), 1-3 spatial dims,
 * dilation, ceil mode, i8, u8 and f16, and NaN (skipped unless a window
 * holds nothing else). */
static void maxpool_rows_cases(void) {
	static const struct {
		tbc_dtype dt;
		const char *x;
		int nsp;
		int64_t kernel[3], strides[3], pads[6], dil[3];
		int ceil;
	} cases[] = {
		{TBC_DT_F32, "1,4,20,21", 2, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
		{TBC_DT_F32, "2,2,3,3", 2, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0},
		{TBC_DT_F32, "1,1,3,4", 2, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0},
		{TBC_DT_F32, "1,1,3,4", 2, {2, 2}, {1, 1}, {2, 0, 2, 3}, {1, 1}, 0}, /* windows wholly in the pads */
		{TBC_DT_F32, "1,1,8,8", 2, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
		{TBC_DT_F32, "1,2,4,5", 2, {5, 6}, {1, 1}, {2, 2, 2, 3}, {1, 1}, 0},
		{TBC_DT_F32, "2,3,17", 1, {3}, {2}, {1, 2}, {2}, 0},
		{TBC_DT_F32, "1,2,5,6,7", 3, {2, 3, 3}, {1, 2, 2}, {1, 1, 1, 1, 0, 1}, {1, 1, 2}, 0},
		{TBC_DT_I8, "1,2,9,9", 2, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
		{TBC_DT_U8, "1,2,9,10", 2, {2, 3}, {1, 2}, {0, 1, 1, 1}, {1, 1}, 0},
		{TBC_DT_F16, "1,2,9,9", 2, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		int nsp = cases[i].nsp;
		tbc_op *o = pool_op(&md, TBC_OP_MaxPool, cases[i].dt, cases[i].x, nsp, cases[i].kernel, cases[i].strides,
				    cases[i].pads, 1);
		attr_ints(o, "dilations", nsp, cases[i].dil);
		if (cases[i].ceil) tbc_op_add_attr(o, "ceil_mode", TBC_ATTR_INT)->i = 1;
		check(&md, o->outputs[0]);
	}
	/* NaN: one tap of the first window, a whole interior window, and a tap
	 * of the last window. */
	model md = model_new();
	tbc_op *o = pool_op(&md, TBC_OP_MaxPool, TBC_DT_F32, "1,1,6,9", 2, (const int64_t[]){2, 2}, (const int64_t[]){2, 2},
			    (const int64_t[]){1, 1, 1, 1}, 1);
	float *x = md.in[0]->data;
	x[0] = NAN;
	x[1 * 9 + 3] = x[1 * 9 + 4] = x[2 * 9 + 3] = x[2 * 9 + 4] = NAN;
	x[5 * 9 + 8] = NAN;
	check(&md, o->outputs[0]);
	/* Pools read with clamped indices (maxpool_clampable: 3x3 stride 1
	 * and 2 with pads, 5x6 over pads of up to 3, 1x1 pads under a 2x2
	 * kernel), the same bits as the interpreter's taps in order: NaN in a
	 * corner window, a window all NaN but its clamped repeats, maxima of
	 * +0 and -0 tied in one window (the first of them kept), and -0
	 * repeated by the clamp at the border. */
	static const struct {
		const char *x;
		int64_t kernel[2], strides[2], pads[4];
	} clamped[] = {
		{"1,2,7,9", {3, 3}, {1, 1}, {1, 1, 1, 1}},
		{"1,2,7,9", {3, 3}, {2, 2}, {1, 1, 1, 1}},
		{"1,2,7,9", {5, 6}, {1, 1}, {2, 3, 2, 2}},
		{"1,2,7,9", {2, 2}, {1, 1}, {1, 1, 1, 1}},
	};
	bool bits = exact_bits;
	exact_bits = true;
	for (size_t i = 0; i < sizeof clamped / sizeof clamped[0]; i++) {
		md = model_new();
		o = pool_op(&md, TBC_OP_MaxPool, TBC_DT_F32, clamped[i].x, 2, clamped[i].kernel, clamped[i].strides,
			    clamped[i].pads, 1);
		x = md.in[0]->data;
		for (int64_t j = 0; j < 2 * 7 * 9; j++) x[j] = -1 - (float)(j % 5); /* negative: zeros are maxima */
		x[0] = NAN, x[1] = -0.0f;                                        /* a corner: NaN, then -0 */
		x[3 * 9 + 4] = 0.0f, x[3 * 9 + 5] = -0.0f, x[4 * 9 + 4] = -0.0f; /* +0 first, -0 after */
		x[5 * 9 + 2] = -0.0f, x[5 * 9 + 3] = 0.0f;                       /* -0 first, +0 after */
		x[63 + 8] = x[63 + 7] = x[63 + 9 + 8] = x[63 + 9 + 7] = NAN;     /* plane 1's top-right corner */
		x[63 + 6 * 9] = -0.0f;                                           /* its bottom-left, repeated */
		check(&md, o->outputs[0]);
	}
	exact_bits = bits;
}

static void test_maxpool_rows(void **state) {
	(void)state;
	maxpool_rows_cases();
}

/* On a device every output is a work-item's (the generic window loop, the
 * nest flattened): the same cases, against the interpreter. */
static void test_maxpool_on_a_device(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	maxpool_rows_cases();
	g_target = NULL;
}

static void test_averagepool_count_include_pad_and_lppool(void **state) {
	(void)state;
	for (int inc = 0; inc < 2; inc++) {
		model md = model_new();
		tbc_op *o = pool_op(&md, TBC_OP_AveragePool, TBC_DT_F32, "1,2,7,8", 2, (const int64_t[]){3, 3},
				    (const int64_t[]){2, 2}, (const int64_t[]){1, 1, 2, 1}, 1);
		tbc_op_add_attr(o, "count_include_pad", TBC_ATTR_INT)->i = inc;
		tbc_op_add_attr(o, "ceil_mode", TBC_ATTR_INT)->i = 1;
		check(&md, o->outputs[0]);
	}
	model md = model_new();
	tbc_op *o = pool_op(&md, TBC_OP_AveragePool, TBC_DT_F32, "1,2,6,6,6", 3, (const int64_t[]){2, 2, 2}, NULL, NULL, 1);
	set_str(o, "auto_pad", "SAME_UPPER");
	check(&md, o->outputs[0]);
	md = model_new();
	o = pool_op(&md, TBC_OP_LpPool, TBC_DT_F32, "1,2,6,6", 2, (const int64_t[]){2, 2}, NULL, NULL, 1);
	tbc_op_add_attr(o, "p", TBC_ATTR_INT)->i = 3;
	check_outputs(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4);
}

static void test_global_pools(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_GlobalAveragePool, TBC_OP_GlobalMaxPool, TBC_OP_GlobalLpPool};
	for (size_t i = 0; i < 3; i++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_F32, "N,5,7,7", 2, -3, 3);
		check_outputs(&md, 1, (tbc_value *[]){op1(&md, ops[i], x)}, 1e-4);
	}
}

/* A small CNN: conv, relu, maxpool, conv 1x1, global pool, flatten, gemm. */
static void test_small_cnn_end_to_end(void **state) {
	(void)state;
	model md = model_new();
	window c1 = {"1,3,16,16", "8,3,3,3", 1, 2, {0}, {0}, {1, 1, 1, 1}, NULL, true};
	tbc_value *y = op1(&md, TBC_OP_Relu, conv_op(&md, &c1)->outputs[0]);
	tbc_op *mp = tbc_op_new(md.m->main, TBC_OP_MaxPool, "mp", 1, &y, 1);
	attr_ints(mp, "kernel_shape", 2, (const int64_t[]){3, 3});
	attr_ints(mp, "strides", 2, (const int64_t[]){2, 2});
	attr_ints(mp, "pads", 4, (const int64_t[]){1, 1, 1, 1});
	tbc_value *w2 = input(&md, TBC_DT_F32, "16,8,1,1");
	y = op2(&md, TBC_OP_Conv, mp->outputs[0], w2);
	y = op1(&md, TBC_OP_Flatten, op1(&md, TBC_OP_GlobalAveragePool, y));
	tbc_value *fw = input(&md, TBC_DT_F32, "10,16"), *fb = input(&md, TBC_DT_F32, "10");
	check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, y, fw, fb, 0, 1, 1, 1)->outputs[0]}, 1e-4);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matmul_2d_sizes_around_the_tile),
		cmocka_unit_test(test_matmul_dynamic_batch_static_matrix),
		cmocka_unit_test(test_matmul_f64_and_integers),
		cmocka_unit_test(test_matmul_one_dimensional_operands),
		cmocka_unit_test(test_matmul_batch_broadcast),
		cmocka_unit_test(test_matmul_symbolic_dims),
		cmocka_unit_test(test_gemm_wide_tile_edges),
		cmocka_unit_test(test_gemm_narrow_tile_jit),
		cmocka_unit_test(test_gemm_k_blocks),
		cmocka_unit_test(test_gemm_constant_b_laid_out),
		cmocka_unit_test(test_gemv_constant_b_in_panels),
		cmocka_unit_test(test_gemm_transposes_alpha_beta),
		cmocka_unit_test(test_gemm_c_broadcasts),
		cmocka_unit_test(test_gemm_integer),
		cmocka_unit_test(test_gemm_symbolic_rows),
		cmocka_unit_test(test_gemm_runtime_rows_read_panels),
		cmocka_unit_test(test_gemm_runtime_rows_k_blocks),
		cmocka_unit_test(test_gemm_as_work_groups),
		cmocka_unit_test(test_gemm_tensor_cores_f16_bf16),
		cmocka_unit_test(test_conv_2d_geometries),
		cmocka_unit_test(test_conv_im2col_rows_whole_vectors),
		cmocka_unit_test(test_conv_1d_and_3d),
		cmocka_unit_test(test_conv_symbolic_batch_and_f64),
		cmocka_unit_test(test_maxpool_pads_strides_ceil_and_indices),
		cmocka_unit_test(test_maxpool_rows),
		cmocka_unit_test(test_maxpool_on_a_device),
		cmocka_unit_test(test_depthwise_conv_has_no_im2col_on_the_cpu),
		cmocka_unit_test(test_conv_transposed_where_positions_waste_the_tile),
		cmocka_unit_test(test_conv_direct_taps_over_padded_planes),
		cmocka_unit_test(test_conv_winograd),
		cmocka_unit_test(test_conv_activation_fused),
		cmocka_unit_test(test_depthwise_flat_geometries),
		cmocka_unit_test(test_depthwise_masked_geometries),
		cmocka_unit_test(test_conv_on_a_device),
		cmocka_unit_test(test_averagepool_count_include_pad_and_lppool),
		cmocka_unit_test(test_global_pools),
		cmocka_unit_test(test_small_cnn_end_to_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
