/* kernel IR's bf16 dot-product tiles (kir_tile2, codegen/kir/kir.h): x86's
 * AMX tdpbf16ps, which a CPU target with amx-tile and amx-bf16 declares
 * (tbc_target_desc.tile_bf16) and the GEMM generator uses for bf16
 * operands with B in k pairs (codegen/lower/matmul.c), where M and N are
 * at least 16 and K is even (kir_dot2 elsewhere).
 *
 * - Lowering: tile2 only where the target declares it, and the shapes
 *   that take dot2 instead.
 * - Semantics, exactly: the evaluator gives the instruction's values (each
 *   chunk of 32 k values summed as even and odd products apart from zero,
 *   then added to the sum; subnormals read as zero and flushed), which
 *   differ from vdpbf16ps's and the interpreter's; compiled code on this
 *   CPU (when it has AMX) agrees with the evaluator bit for bit, special
 *   values included, on shapes with partial row and column tiles and K
 *   with and without a last partial chunk.
 * - Against the interpreter, within bf16's tolerance: MatMul with batches,
 *   Gemm with transB and C, Conv through im2col. */
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

static tbc_target_desc tile2_desc(void) {
	tbc_target_desc t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32;
	t.dot_bf16 = t.tile_bf16 = true;
	return t;
}

/* Whether code compiled for this host uses tile2 (its CPU has AMX-BF16). */
static bool host_tile2(void) {
	tbc_compile_options o;
	memset(&o, 0, sizeof o);
	tbc_diags *d = tbc_diags_create();
	tbc_target_desc t;
	bool ok = tbc_target_cpu.describe(&o, &t, d) == TBC_OK && t.tile_bf16;
	tbc_diags_destroy(d);
	return ok;
}

static uint16_t bf16_bits(double v) {
	uint16_t b = 0;
	tbc_store_f64(TBC_DT_BF16, &b, 0, v);
	return b;
}

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

static char *lowered(model *md, tbc_value *y, const tbc_target_desc *t) {
	tbc_graph_add_output(md->m->main, y);
	g_target = t;
	char *text = lowered_text(md);
	g_target = NULL;
	return text;
}

static char *lowered_matmul(const char *a, int64_t k, int64_t n, const tbc_target_desc *t) {
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_BF16, a);
	return lowered(&md, op2(&md, TBC_OP_MatMul, x, const_random(&md, k, n)), t);
}

static void test_tile2_where_it_fits(void **state) {
	(void)state;
	tbc_target_desc amx = tile2_desc(), dot = tile2_desc();
	dot.tile_bf16 = false;
	static const struct {
		const char *a;
		int64_t k, n;
		const char *want; /* the statement's line, or NULL: none */
	} cases[] = {
		{"40,64", 64, 96, "tile2.bf16 [16 x 16]"},
		{"20,64", 64, 20, "tile2.bf16 [16 x 16]"},
		{"3,40,30", 30, 40, "tile2.bf16 [16 x 16]"}, /* batches; K below one chunk */
		{"15,64", 64, 96, "dot2.bf16"},              /* M < 16 */
		{"40,63", 63, 96, "dot2.bf16"},              /* K odd */
		{"N,64", 64, 96, "tile2.bf16 [16 x 16]"},    /* M known while running: tiles where >= 16 ... */
		{"N,64", 64, 96, "dot2.bf16"},               /* ... and dot2 below */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *t = lowered_matmul(cases[i].a, cases[i].k, cases[i].n, &amx);
		if (!strstr(t, cases[i].want)) fail_msg("case %zu: no %s in\n%s", i, cases[i].want, t);
		if (strcmp(cases[i].want, "dot2.bf16") == 0 && cases[i].a[0] != 'N' && strstr(t, "tile2"))
			fail_msg("case %zu: tile2 in\n%s", i, t);
		free(t);
		t = lowered_matmul(cases[i].a, cases[i].k, cases[i].n, &dot);
		assert_null(strstr(t, "tile2"));
		free(t);
	}
}

/* Which CPUs declare it: amx-tile and amx-bf16, host or --cpu; TBC_AMX=0
 * turns it off. */
static void test_tile2_declared_by_cpu(void **state) {
	(void)state;
	static const struct {
		const char *cpu;
		bool tile;
	} cpus[] = {{"sapphirerapids", true}, {"graniterapids", true}, {"cooperlake", false}, {"znver4", false}};
	for (int off = 0; off < 2; off++) {
		if (off) setenv("TBC_AMX", "0", 1);
		for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
			tbc_compile_options o;
			memset(&o, 0, sizeof o);
			o.target_triple = "x86_64-unknown-linux-gnu", o.cpu = cpus[i].cpu;
			tbc_diags *d = tbc_diags_create();
			tbc_target_desc t;
			assert_int_equal(tbc_target_cpu.describe(&o, &t, d), TBC_OK);
			if (t.tile_bf16 != (cpus[i].tile && !off)) fail_msg("--cpu %s: tile_bf16 %d", cpus[i].cpu, t.tile_bf16);
			tbc_diags_destroy(d);
		}
		unsetenv("TBC_AMX");
	}
}

/* Code compiled for an AMX host lists amx-tile and amx-bf16, so the
 * runtime refuses it on a CPU without them and asks for the tile state
 * before running it (runtime/cpu.c). */
static void test_tile2_artifact_lists_amx(void **state) {
	(void)state;
	if (!host_tile2()) {
		fprintf(stderr, "note: this CPU has no AMX-BF16: the feature list is not checked\n");
		return;
	}
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_BF16, "32,64");
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_MatMul, x, const_random(&md, 64, 32)));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(md.m, NULL, d, &j), TBC_OK);
	const char *f = tbc_jit_descriptor(j)->cpu_features;
	if (!strstr(f, "+amx-tile") || !strstr(f, "+amx-bf16")) fail_msg("features: %s", f);
	tbc_jit_destroy(j);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
}

/* ---- Semantics -------------------------------------------------------------------*/
static void run_both(model *md, tbc_tensor **eval_out, tbc_tensor **jit_out) {
	tbc_target_desc t = tile2_desc();
	eval_and_jit(md, &t, host_tile2(), eval_out, jit_out);
}

static uint16_t at(const tbc_tensor *t, int64_t i) { return ((const uint16_t *)t->data)[i]; }
static bool is_nan_bits(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

static void free_model(model *md) {
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}

/* One row of A against B's columns, K = 4: what the arithmetic is. */
static void test_tile2_semantics_exact(void **state) {
	(void)state;
	enum { M = 16, K = 4, N = 16 };
	uint16_t B[K][N];
	for (int k = 0; k < K; k++)
		for (int n = 0; n < N; n++) B[k][n] = bf16_bits(1);
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_BF16, "16,4");
	uint16_t *a = md.in[0]->data;
	for (int i = 0; i < M * K; i++) a[i] = 0;
	/* row 0: even products 1, -2^24 (k = 0, 2), odd 2^24 .. wait: k = 1, 3
	 * odd: e = fma(-4096*4096) ... */
	double r0[K] = {1, 4096, 0x1p24 / 4096, -4096};
	for (int k = 0; k < K; k++) a[0 * K + k] = bf16_bits(r0[k]);
	for (int k = 0; k < K; k++) B[k][0] = bf16_bits(k == 3 ? 4096 : k == 2 ? 4096 : k == 1 ? 4096 : 1);
	/* row 1: a subnormal operand */
	a[1 * K + 0] = 0x0040;
	tbc_value *y = op2(&md, TBC_OP_MatMul, x, const_bits(&md, K, N, &B[0][0]));
	tbc_graph_add_output(md.m->main, y);
	tbc_tensor *ev = NULL, *jit = NULL;
	run_both(&md, &ev, &jit);
	/* (0,0): e = 1 * 1 + 2^24 * 4096 ... computed: e = fma(a0 b0, 0) = 1,
	 * e = fma(a2 b2 = 2^24, 1) = 2^24 (1 lost to rounding: tie to even);
	 * o = 4096 * 4096 - 4096 * 4096 = 0; sum 2^24.  In k order (the
	 * interpreter): 1 + 2^24 - 2^24 + 2^24 ... */
	float e = fmaf(0x1p24f / 4096 * 4096, 1.0f, 1.0f), o = fmaf(-4096.0f, 4096.0f, 4096.0f * 4096.0f);
	assert_int_equal(at(ev, 0), bf16_bits((double)(e + o)));
	/* the subnormal reads as zero */
	assert_int_equal(at(ev, 1 * N + 0), 0x0000);
	if (jit)
		for (int i = 0; i < M * N; i++) assert_int_equal(at(jit, i), at(ev, i));
	else fprintf(stderr, "note: this CPU has no AMX-BF16: compiled code not compared\n");
	tbc_tensor_destroy(ev);
	tbc_tensor_destroy(jit);
	free_model(&md);
}

/* Random operands with subnormals, zeros of both signs, infinities and
 * NaNs sprinkled in; partial row and column tiles; K in whole chunks, with
 * a partial last chunk, and below one chunk: compiled code agrees with the
 * evaluator bit for bit. */
static void test_tile2_compiled_matches_evaluator(void **state) {
	(void)state;
	static const int64_t shapes[][3] = {{37, 64, 70}, {16, 2, 16}, {48, 40, 33}, {17, 150, 48}, {40, 30, 100}};
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
			tbc_tensor *ev = NULL, *jit = NULL;
			run_both(&md, &ev, &jit);
			if (jit) {
				int bad = 0;
				for (int64_t i = 0; i < ev->numel; i++) {
					uint16_t p = at(ev, i), q = at(jit, i);
					if (p == q || (is_nan_bits(p) && is_nan_bits(q))) continue;
					if (bad++ < 8) fprintf(stderr, "shape %zu element %lld: evaluator %#06x, AMX %#06x\n", s, (long long)i, p, q);
				}
				assert_int_equal(bad, 0);
			}
			tbc_tensor_destroy(ev);
			tbc_tensor_destroy(jit);
			free_model(&md);
		}
	}
}

/* ---- Against the interpreter -------------------------------------------------------*/
static void test_tile2_matches_interpreter(void **state) {
	(void)state;
	static tbc_target_desc amx;
	amx = tile2_desc();
	g_target = &amx;
	double atol = g_atol;
	g_atol = 3e-2;
	static const struct {
		const char *a;
		int64_t k, n;
	} cases[] = {{"33,40", 40, 65}, {"100,300", 300, 200}, {"3,17,10", 10, 40}, {"2,1,40,32", 32, 33}, {"129,18", 18, 130},
		     {"N,40", 40, 48}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		/* a symbolic M of 37 at run time: the tiles' nest; of 3: dot2's */
		for (int64_t sym = 3; sym <= (cases[i].a[0] == 'N' ? 37 : 3); sym += 34) {
			model md = model_new();
			tbc_value *x = input_sym(&md, TBC_DT_BF16, cases[i].a, sym, -3, 3);
			tbc_value *y = op2(&md, TBC_OP_MatMul, x, const_random(&md, cases[i].k, cases[i].n));
			check_outputs(&md, 1, (tbc_value *[]){y}, 1e-2);
		}
	}
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_BF16, "37,22"), *c = input(&md, TBC_DT_BF16, "45");
	tbc_op *g = node(&md, TBC_OP_Gemm, 3, a, const_random(&md, 45, 22), c);
	attr_int(g, "transB", 1);
	tbc_op_add_attr(g, "alpha", TBC_ATTR_FLOAT)->f = 0.5;
	tbc_op_add_attr(g, "beta", TBC_ATTR_FLOAT)->f = -2;
	check_outputs(&md, 1, (tbc_value *[]){g->outputs[0]}, 1e-2);
	/* Conv: the weights are A (M = output channels), im2col B in pairs */
	static const struct {
		const char *x;
		int64_t w[4];
		int group;
		const char *bias;
	} convs[] = {{"1,16,9,9", {32, 16, 3, 3}, 1, "32"}, {"2,16,5,5", {20, 16, 1, 1}, 1, "20"}, {"1,8,6,6", {32, 4, 3, 3}, 2, "32"}};
	for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
		for (int pass = 0; pass < 2; pass++) {
			md = model_new();
			tbc_value *x = input(&md, TBC_DT_BF16, convs[i].x);
			int64_t n = convs[i].w[0] * convs[i].w[1] * convs[i].w[2] * convs[i].w[3];
			tbc_tensor *wt = tbc_tensor_create(TBC_DT_BF16, 4, convs[i].w);
			for (int64_t e = 0; e < n; e++) ((uint16_t *)wt->data)[e] = bf16_bits(-1 + 2 * rnd(&md));
			tbc_value *w = tbc_graph_add_const(md.m->main, NULL, wt);
			tbc_tensor_destroy(wt);
			tbc_op *cv = node(&md, TBC_OP_Conv, 3, x, w, input(&md, TBC_DT_BF16, convs[i].bias));
			if (convs[i].group > 1) attr_int(cv, "group", convs[i].group);
			if (pass == 0) {
				char *t = lowered(&md, cv->outputs[0], &amx);
				g_target = &amx;
				if (!strstr(t, "tile2.bf16")) fail_msg("conv %zu:\n%s", i, t);
				free(t);
			} else {
				check_outputs(&md, 1, (tbc_value *[]){cv->outputs[0]}, 1e-2);
			}
		}
	g_atol = atol;
	g_target = NULL;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tile2_where_it_fits),
		cmocka_unit_test(test_tile2_declared_by_cpu),
		cmocka_unit_test(test_tile2_artifact_lists_amx),
		cmocka_unit_test(test_tile2_semantics_exact),
		cmocka_unit_test(test_tile2_compiled_matches_evaluator),
		cmocka_unit_test(test_tile2_matches_interpreter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
