/* kernel IR's bf16 pair dot product (kir_dot2, codegen/kir/kir.h): x86's
 * vdpbf16ps, which a CPU target with AVX512_BF16 declares
 * (tbc_target_desc.dot_bf16) and the GEMM generator uses for bf16 operands
 * with a constant B (codegen/lower/matmul.c).
 *
 * - Lowering (with TBC_GEMM_DOT2=1, which turns the path on; by default
 *   only on AMD's cores and, for what AMX tiles do not take, AMX CPUs): dot2 appears
 *   only where the target declares it, the operands are bf16 and B is a
 *   constant (or Conv's im2col, laid out in pairs); without it, the scalar
 *   GEMM.
 * - Semantics, exactly: the evaluator gives the values the instruction
 *   gives (the odd element of a pair first, subnormal inputs read as zero,
 *   subnormal sums flushed, NaN from inf * 0 and inf - inf), which differ
 *   from the interpreter's on purpose (docs/decisions.md); and compiled
 *   code on this CPU (when it has AVX512_BF16) agrees with the evaluator
 *   bit for bit, special values included.
 * - Against the interpreter, within bf16's tolerance, on shapes that are
 *   not multiples of the tile, odd K, batches, Gemm with transB and C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/target.h"
#include "tests/unit/support/codegen_check.h"

static tbc_target_desc dot2_desc(void) {
	tbc_target_desc t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32;
	t.dot_bf16 = true;
	return t;
}

/* Whether code compiled for this host uses dot2 (its CPU has AVX512_BF16). */
static bool host_dot2(void) {
	tbc_compile_options o;
	memset(&o, 0, sizeof o);
	tbc_diags *d = tbc_diags_create();
	tbc_target_desc t;
	bool ok = tbc_target_cpu.describe(&o, &t, d) == TBC_OK && t.dot_bf16;
	tbc_diags_destroy(d);
	return ok;
}

static uint16_t bf16_bits(double v) {
	uint16_t b = 0;
	tbc_store_f64(TBC_DT_BF16, &b, 0, v);
	return b;
}

/* A constant of bf16 bit patterns. */
static tbc_value *const_bits(model *md, int64_t rows, int64_t cols, const uint16_t *bits) {
	int64_t dims[2] = {rows, cols};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_BF16, 2, dims);
	memcpy(t->data, bits, (size_t)(rows * cols) * 2);
	tbc_value *v = tbc_graph_add_const(md->m->main, NULL, t);
	tbc_tensor_destroy(t);
	return v;
}

static tbc_value *const_random(model *md, int64_t rows, int64_t cols) {
	uint16_t *bits = malloc((size_t)(rows * cols) * 2);
	for (int64_t i = 0; i < rows * cols; i++) bits[i] = bf16_bits(-1.5 + 3 * rnd(md));
	tbc_value *v = const_bits(md, rows, cols, bits);
	free(bits);
	return v;
}

/* ---- Lowering ------------------------------------------------------------------*/
static char *lowered(model *md, tbc_value *y, const tbc_target_desc *t) {
	tbc_graph_add_output(md->m->main, y);
	g_target = t;
	char *text = lowered_text(md);
	g_target = NULL;
	return text;
}

static tbc_value *matmul_const_b(model *md, tbc_dtype dt, const char *a, int64_t k, int64_t n) {
	tbc_value *x = input(md, dt, a);
	tbc_value *w = dt == TBC_DT_BF16 ? const_random(md, k, n) : NULL;
	if (!w) {
		double *vals = calloc((size_t)(k * n), sizeof *vals);
		w = constant(md, dt, 2, (int64_t[]){k, n}, vals);
		free(vals);
	}
	return op2(md, TBC_OP_MatMul, x, w);
}

static void test_dot2_only_where_declared(void **state) {
	(void)state;
	tbc_target_desc dot = dot2_desc(), plain = tbc_target_desc_cpu_default(), cuda = tbc_target_desc_cuda(90);
	model md = model_new();
	char *t = lowered(&md, matmul_const_b(&md, TBC_DT_BF16, "40,64", 64, 96), &dot);
	assert_non_null(strstr(t, "dot2.bf16 [8 x 32]"));
	free(t);
	md = model_new(); /* 16 .. 31 columns: one vector */
	t = lowered(&md, matmul_const_b(&md, TBC_DT_BF16, "5,9", 9, 20), &dot);
	assert_non_null(strstr(t, "dot2.bf16 [5 x 16]"));
	free(t);
	md = model_new(); /* fewer than 16 columns: the scalar GEMM */
	t = lowered(&md, matmul_const_b(&md, TBC_DT_BF16, "5,9", 9, 15), &dot);
	assert_null(strstr(t, "dot2"));
	free(t);
	const tbc_target_desc *others[] = {&plain, &cuda};
	for (int i = 0; i < 2; i++) {
		md = model_new();
		t = lowered(&md, matmul_const_b(&md, TBC_DT_BF16, "40,64", 64, 96), others[i]);
		assert_null(strstr(t, "dot2"));
		free(t);
	}
	md = model_new(); /* f32 operands */
	t = lowered(&md, matmul_const_b(&md, TBC_DT_F32, "40,64", 64, 96), &dot);
	assert_null(strstr(t, "dot2"));
	free(t);
	md = model_new(); /* B not a constant (attention's products) */
	tbc_value *a = input(&md, TBC_DT_BF16, "40,64"), *b = input(&md, TBC_DT_BF16, "64,96");
	t = lowered(&md, op2(&md, TBC_OP_MatMul, a, b), &dot);
	assert_null(strstr(t, "dot2"));
	free(t);
	/* off by default, and with any other value than 1 */
	static const char *const off[] = {NULL, "0", "yes"};
	for (int i = 0; i < 3; i++) {
		if (off[i]) setenv("TBC_GEMM_DOT2", off[i], 1);
		else unsetenv("TBC_GEMM_DOT2");
		md = model_new();
		t = lowered(&md, matmul_const_b(&md, TBC_DT_BF16, "40,64", 64, 96), &dot);
		assert_null(strstr(t, "dot2"));
		free(t);
	}
	/* on by default where the description says so (AMD's cores), unless
	 * TBC_GEMM_DOT2=0 */
	tbc_target_desc amd = dot;
	amd.dot_bf16_default = true;
	for (int i = 0; i < 2; i++) {
		if (i) setenv("TBC_GEMM_DOT2", "0", 1);
		else unsetenv("TBC_GEMM_DOT2");
		md = model_new();
		t = lowered(&md, matmul_const_b(&md, TBC_DT_BF16, "40,64", 64, 96), &amd);
		assert_true((strstr(t, "dot2.bf16 [8 x 32]") != NULL) == (i == 0));
		free(t);
	}
	setenv("TBC_GEMM_DOT2", "1", 1);
	/* a target that does not declare it refuses a kernel holding one */
	assert_false(host_dot2() && !dot.dot_bf16);
}

/* Which CPUs declare it: AVX512_BF16 with 512-bit vectors, whether the CPU
 * is the host or named with --cpu (an artifact for it then lists
 * avx512bf16, and the runtime refuses it on a CPU without). */
static void test_dot2_declared_by_cpu(void **state) {
	(void)state;
	static const struct {
		const char *triple, *cpu;
		bool dot;
	} cpus[] = {{"x86_64-unknown-linux-gnu", "sapphirerapids", true}, {"x86_64-unknown-linux-gnu", "cooperlake", true},
		    {"x86_64-unknown-linux-gnu", "skylake-avx512", false}, {"x86_64-unknown-linux-gnu", "x86-64-v3", false},
		    {"x86_64-unknown-linux-gnu", "znver4", true},          {"aarch64-unknown-linux-gnu", "neoverse-v2", false}};
	for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
		tbc_compile_options o;
		memset(&o, 0, sizeof o);
		o.target_triple = cpus[i].triple, o.cpu = cpus[i].cpu;
		tbc_diags *d = tbc_diags_create();
		tbc_target_desc t;
		assert_int_equal(tbc_target_cpu.describe(&o, &t, d), TBC_OK);
		if (t.dot_bf16 != cpus[i].dot) fail_msg("--cpu %s: dot_bf16 %d", cpus[i].cpu, t.dot_bf16);
		/* dot2 without being asked: AMD's cores alone */
		bool amd = !strcmp(cpus[i].cpu, "znver4");
		if (t.dot_bf16_default != amd) fail_msg("--cpu %s: dot_bf16_default %d", cpus[i].cpu, t.dot_bf16_default);
		tbc_diags_destroy(d);
	}
	/* --features takes it away */
	tbc_compile_options o;
	memset(&o, 0, sizeof o);
	o.target_triple = "x86_64-unknown-linux-gnu", o.cpu = "sapphirerapids", o.features = "+avx512f,+avx512bw";
	tbc_diags *d = tbc_diags_create();
	tbc_target_desc t;
	assert_int_equal(tbc_target_cpu.describe(&o, &t, d), TBC_OK);
	assert_false(t.dot_bf16);
	tbc_diags_destroy(d);
}

/* ---- Semantics -------------------------------------------------------------------*/
/* Runs md (outputs set) through the evaluator lowered for dot2_desc and,
 * when this CPU has AVX512_BF16, through the JIT; *jit NULL otherwise. */
static void run_both(model *md, tbc_tensor **eval_out, tbc_tensor **jit_out, tbc_tensor **interp_out) {
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	assert_int_equal(tbc_interpret(md->m, md->in, (size_t)md->n_in, interp_out, 1, d), TBC_OK);
	tbc_diags_destroy(d);
	tbc_target_desc t = dot2_desc();
	eval_and_jit(md, &t, host_dot2(), eval_out, jit_out);
}

static uint16_t at(const tbc_tensor *t, int64_t i) { return ((const uint16_t *)t->data)[i]; }
static bool is_nan_bits(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

/* Compiled code and the evaluator: the same bits (NaN: any NaN). */
static void same_bits(const tbc_tensor *want, const tbc_tensor *got) {
	assert_int_equal(want->numel, got->numel);
	int bad = 0;
	for (int64_t i = 0; i < want->numel; i++) {
		uint16_t a = at(want, i), b = at(got, i);
		if (a == b || (is_nan_bits(a) && is_nan_bits(b))) continue;
		if (bad++ < 8) fprintf(stderr, "element %lld: evaluator %#06x, vdpbf16ps %#06x\n", (long long)i, a, b);
	}
	assert_int_equal(bad, 0);
}

static void free_model(model *md) {
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}

/* Rows of A (K = 4) against columns of B, each case one (row, column):
 * the products q0 .. q3 of k = 0 .. 3 are summed q1, q0, q3, q2. */
static void test_dot2_semantics_exact(void **state) {
	(void)state;
	enum { M = 6, K = 4, N = 16 };
	const double inf = INFINITY;
	static double A[M][K];
	double a_rows[M][K] = {
		{1, 0, -4096, 4096}, /* row 0: order */
		{0, 0, 0, 0},        /* row 1: a subnormal (set below) */
		{0x1p-70, 0, 0, 0},  /* row 2: a subnormal product */
		{0, 0, 0, 0},        /* row 3: inf * 0 */
		{1, 0, 0, 0},        /* row 4: inf, NaN */
		{1, 1, 0, 0},        /* row 5: inf - inf */
	};
	memcpy(A, a_rows, sizeof A);
	uint16_t B[K][N];
	for (int k = 0; k < K; k++)
		for (int n = 0; n < N; n++) B[k][n] = bf16_bits(k < 2 ? 1 : 4096);
	double col1[K] = {0x1p-60, 0, 0, 0}, col2[K] = {inf, 0, 0, 0}, col4[K] = {inf, -inf, 0, 0};
	for (int k = 0; k < K; k++) B[k][1] = bf16_bits(col1[k]), B[k][2] = bf16_bits(col2[k]), B[k][4] = bf16_bits(col4[k]);
	B[0][3] = 0x7fc1; /* a NaN */
	B[1][3] = 0;

	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_BF16, "6,4");
	for (int r = 0; r < M; r++)
		for (int k = 0; k < K; k++) ((uint16_t *)md.in[0]->data)[r * K + k] = bf16_bits(A[r][k]);
	((uint16_t *)md.in[0]->data)[1 * K + 0] = 0x0040; /* 2^-127, subnormal */
	tbc_value *y = op2(&md, TBC_OP_MatMul, x, const_bits(&md, K, N, &B[0][0]));
	tbc_graph_add_output(md.m->main, y);
	tbc_tensor *ev = NULL, *jit = NULL, *ref = NULL;
	run_both(&md, &ev, &jit, &ref);
	/* the odd element of each pair first: 0 + 0 + 1 = 1, 1 + 2^24 = 2^24
	 * (a tie, to even), - 2^24 = 0; in k order (the interpreter) 1 */
	assert_int_equal(at(ev, 0 * N + 0), 0x0000);
	assert_int_equal(at(ref, 0 * N + 0), bf16_bits(1));
	/* a subnormal operand reads as zero; the interpreter's 2^-127 stays */
	assert_int_equal(at(ev, 1 * N + 0), 0x0000);
	assert_int_equal(at(ref, 1 * N + 0), bf16_bits(0x1p-127));
	/* 2^-70 * 2^-60 = 2^-130: subnormal in f32, flushed to zero */
	assert_int_equal(at(ev, 2 * N + 1), 0x0000);
	assert_int_equal(at(ref, 2 * N + 1), bf16_bits(0x1p-130));
	/* inf * 0, a NaN operand, inf - inf: NaN; 1 * inf: inf */
	assert_true(is_nan_bits(at(ev, 3 * N + 2)) && is_nan_bits(at(ref, 3 * N + 2)));
	assert_int_equal(at(ev, 4 * N + 2), 0x7f80);
	assert_true(is_nan_bits(at(ev, 4 * N + 3)));
	assert_true(is_nan_bits(at(ev, 5 * N + 4)) && is_nan_bits(at(ref, 5 * N + 4)));
	/* elsewhere exact products: the interpreter's values */
	assert_int_equal(at(ev, 4 * N + 0), bf16_bits(1));
	if (jit) same_bits(ev, jit);
	else fprintf(stderr, "note: this CPU has no AVX512_BF16: compiled code not compared\n");
	tbc_tensor_destroy(ev);
	tbc_tensor_destroy(jit);
	tbc_tensor_destroy(ref);
	free_model(&md);
}

/* Random operands with subnormals, zeros of both signs, infinities and
 * NaNs sprinkled in, odd and even K, a partial last tile: compiled code
 * agrees with the evaluator bit for bit. */
static void test_dot2_compiled_matches_evaluator(void **state) {
	(void)state;
	static const int64_t shapes[][3] = {{37, 147, 70}, {8, 2, 32}, {3, 1, 16}, {17, 64, 48}};
	static const uint16_t special[] = {0x0001, 0x8040, 0x007f, 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0080, 0x00ff};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
		for (int with_special = 0; with_special < 2; with_special++) {
			model md = model_new();
			char dims[32];
			snprintf(dims, sizeof dims, "%lld,%lld", (long long)M, (long long)K);
			tbc_value *x = input(&md, TBC_DT_BF16, dims);
			uint16_t *bits = malloc((size_t)(K * N) * 2);
			for (int64_t i = 0; i < K * N; i++) {
				double r = rnd(&md);
				bits[i] = with_special && r < 0.05 ? special[(int)(rnd(&md) * 10)] : bf16_bits(-2 + 4 * rnd(&md));
				/* tiny values: sums near the subnormal range */
				if (with_special && r > 0.9) bits[i] = bf16_bits((rnd(&md) - 0.5) * 0x1p-60);
			}
			uint16_t *ax = md.in[0]->data;
			for (int64_t i = 0; with_special && i < M * K; i++) {
				double r = rnd(&md);
				if (r < 0.03) ax[i] = special[(int)(rnd(&md) * 10)];
				else if (r > 0.9) ax[i] = bf16_bits((rnd(&md) - 0.5) * 0x1p-66);
			}
			tbc_value *y = op2(&md, TBC_OP_MatMul, x, const_bits(&md, K, N, bits));
			free(bits);
			tbc_graph_add_output(md.m->main, y);
			tbc_tensor *ev = NULL, *jit = NULL, *ref = NULL;
			run_both(&md, &ev, &jit, &ref);
			if (jit) same_bits(ev, jit);
			tbc_tensor_destroy(ev);
			tbc_tensor_destroy(jit);
			tbc_tensor_destroy(ref);
			free_model(&md);
		}
	}
}

/* ---- Against the interpreter -------------------------------------------------------*/
static void test_dot2_matches_interpreter(void **state) {
	(void)state;
	static tbc_target_desc dot;
	dot = dot2_desc();
	g_target = &dot;
	double atol = g_atol;
	g_atol = 3e-2; /* sums of up to 300 products of values below 3, rounded to bf16 */
	static const struct {
		const char *a;
		int64_t k, n;
	} cases[] = {{"7,13", 13, 19},   {"33,40", 40, 65},   {"100,300", 300, 200}, {"3,5,9", 9, 40},
		     {"1,147", 147, 64}, {"2,1,4,7", 7, 33},  {"129,17", 17, 130},   {"N,31", 31, 48}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_BF16, cases[i].a);
		tbc_value *y = op2(&md, TBC_OP_MatMul, x, const_random(&md, cases[i].k, cases[i].n));
		check_outputs(&md, 1, (tbc_value *[]){y}, 1e-2);
	}
	/* Gemm: B transposed (N x K) and C; alpha and beta */
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_BF16, "37,21"), *c = input(&md, TBC_DT_BF16, "45");
	tbc_op *g = node(&md, TBC_OP_Gemm, 3, a, const_random(&md, 45, 21), c);
	attr_int(g, "transB", 1);
	tbc_op_add_attr(g, "alpha", TBC_ATTR_FLOAT)->f = 0.5;
	tbc_op_add_attr(g, "beta", TBC_ATTR_FLOAT)->f = -2;
	check_outputs(&md, 1, (tbc_value *[]){g->outputs[0]}, 1e-2);
	/* Conv: im2col in k pairs (a 1x1 convolution too), groups, a bias;
	 * an odd Kg (3 x 3 x 3 = 27) keeps the scalar GEMM */
	static const struct {
		const char *x;
		int64_t w[4];
		int group;
		bool dot2;
	} convs[] = {{"1,6,9,9", {8, 6, 3, 3}, 1, true},
		     {"2,16,5,5", {20, 16, 1, 1}, 1, true},
		     {"1,8,6,6", {12, 4, 3, 3}, 2, true},
		     {"1,3,8,8", {16, 3, 3, 3}, 1, false}};
	for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
		for (int pass = 0; pass < 2; pass++) {
			md = model_new();
			tbc_value *x = input(&md, TBC_DT_BF16, convs[i].x);
			int64_t n = convs[i].w[0] * convs[i].w[1] * convs[i].w[2] * convs[i].w[3];
			uint16_t *bits = malloc((size_t)n * 2);
			for (int64_t e = 0; e < n; e++) bits[e] = bf16_bits(-1 + 2 * rnd(&md));
			tbc_tensor *wt = tbc_tensor_create(TBC_DT_BF16, 4, convs[i].w);
			memcpy(wt->data, bits, (size_t)n * 2);
			free(bits);
			tbc_value *w = tbc_graph_add_const(md.m->main, NULL, wt);
			tbc_tensor_destroy(wt);
			tbc_value *bias = input(&md, TBC_DT_BF16, convs[i].w[0] == 8 ? "8" : convs[i].w[0] == 20 ? "20" : convs[i].w[0] == 12 ? "12" : "16");
			tbc_op *cv = node(&md, TBC_OP_Conv, 3, x, w, bias);
			if (convs[i].group > 1) attr_int(cv, "group", convs[i].group);
			if (pass == 0) {
				char *t = lowered(&md, cv->outputs[0], &dot);
				g_target = &dot;
				if ((strstr(t, "dot2.bf16") != NULL) != convs[i].dot2) fail_msg("conv %zu:\n%s", i, t);
				free(t);
			} else {
				check_outputs(&md, 1, (tbc_value *[]){cv->outputs[0]}, 1e-2);
			}
		}
	g_atol = atol;
	g_target = NULL;
}

int main(void) {
	setenv("TBC_GEMM_DOT2", "1", 1); /* the path is off by default */
	setenv("TBC_AMX", "0", 1);       /* AMX tiles would take the GEMMs (unit.test_tile2) */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dot2_only_where_declared),
		cmocka_unit_test(test_dot2_declared_by_cpu),
		cmocka_unit_test(test_dot2_semantics_exact),
		cmocka_unit_test(test_dot2_compiled_matches_evaluator),
		cmocka_unit_test(test_dot2_matches_interpreter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
