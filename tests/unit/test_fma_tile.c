/* kernel IR's float multiply-add tile (kir_fma_tile, codegen/kir/kir.h): a
 * GEMM's register tile as vector fused multiply-adds, which a CPU target
 * with FMA declares (tbc_target_desc.fma_tile) and the GEMM generator
 * uses for f32 and f64 operands whose tile columns are contiguous
 * (codegen/lower/matmul.c).
 *
 * - Lowering: the statement appears only where the target declares it
 *   (not for the stock AVX2 description, not for devices), for operands of
 *   the compute type (f16 storage keeps the scalar code), and
 *   TBC_FMA_TILE=0 takes it away from the CPU's description.
 * - Semantics, exactly: one rounding per product (2^-11 + 2^-24 where a
 *   product rounded first gives 2^-11), NaN from inf * 0 and inf - inf;
 *   compiled code on this CPU (when it has FMA) agrees with the evaluator
 *   bit for bit on partial tiles, odd sizes, K blocks (k ranges from klo >
 *   0, sums resumed from y), the overlapping last column tile, f64, and
 *   special values.
 * - The resume from y (K blocks) and a row's stores are vector loads,
 *   selects and stores in the IR the emitter writes; with
 *   TBC_FMA_TILE_Y=0 and TBC_ROW_STORES=0 the bits are the same.
 * - Against the interpreter, at a tolerance: MatMul, Gemm (transposed A
 *   and B, C), Conv, batches, a symbolic N. */
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
#include "tests/unit/support/files.h"

/* An AVX-512 machine with FMA, as describe reports this host's. */
static tbc_target_desc fma_desc(void) {
	tbc_target_desc t = tbc_target_desc_cpu_default();
	t.vector_bytes = 64, t.vector_regs = 32;
	t.fma_tile = true, t.fma_tile_y = true, t.gemm_row_stores = true;
	return t;
}

static bool host_desc(tbc_target_desc *t) {
	tbc_compile_options o;
	memset(&o, 0, sizeof o);
	tbc_diags *d = tbc_diags_create();
	bool ok = tbc_target_cpu.describe(&o, t, d) == TBC_OK;
	tbc_diags_destroy(d);
	return ok;
}

/* Whether code compiled for this host uses the tile (its CPU has FMA). */
static bool host_fma_tile(void) {
	tbc_target_desc t;
	return host_desc(&t) && t.fma_tile;
}

static char *lowered(model *md, tbc_value *y, const tbc_target_desc *t) {
	tbc_graph_add_output(md->m->main, y);
	g_target = t;
	char *text = lowered_text(md);
	g_target = NULL;
	return text;
}

static tbc_value *matmul(model *md, tbc_dtype dt, const char *a, const char *b) {
	return op2(md, TBC_OP_MatMul, input(md, dt, a), input(md, dt, b));
}

/* ---- Lowering ------------------------------------------------------------------*/
static void test_fma_tile_only_where_declared(void **state) {
	(void)state;
	tbc_target_desc fma = fma_desc(), plain = tbc_target_desc_cpu_default(), cuda = tbc_target_desc_cuda(90);
	tbc_target_desc avx2 = plain;
	avx2.fma_tile = true;
	model md = model_new();
	char *t = lowered(&md, matmul(&md, TBC_DT_F32, "40,64", "64,96"), &fma);
	assert_non_null(strstr(t, "fma.f32 [8 x 32]"));
	free(t);
	md = model_new(); /* 256-bit vectors: 5 x 16 */
	t = lowered(&md, matmul(&md, TBC_DT_F32, "40,64", "64,96"), &avx2);
	assert_non_null(strstr(t, "fma.f32 [5 x 16]"));
	free(t);
	md = model_new(); /* f64: 8 x 16 */
	t = lowered(&md, matmul(&md, TBC_DT_F64, "40,64", "64,96"), &fma);
	assert_non_null(strstr(t, "fma.f64 [8 x 16]"));
	free(t);
	md = model_new(); /* a small tile: M and N below it */
	t = lowered(&md, matmul(&md, TBC_DT_F32, "3,5", "5,7"), &fma);
	assert_non_null(strstr(t, "fma.f32 [3 x 7]"));
	free(t);
	const tbc_target_desc *others[] = {&plain, &cuda};
	for (int i = 0; i < 2; i++) {
		md = model_new();
		t = lowered(&md, matmul(&md, TBC_DT_F32, "40,64", "64,96"), others[i]);
		assert_null(strstr(t, "fma."));
		free(t);
	}
	md = model_new(); /* K blocks: the tile resumes from y itself (vector loads) */
	t = lowered(&md, matmul(&md, TBC_DT_F32, "20,300", "300,70"), &fma);
	assert_non_null(strstr(t, " from "));
	free(t);
	tbc_target_desc no_y = fma;
	no_y.fma_tile_y = false;
	md = model_new(); /* unless the description says not to: scalar loads and selects */
	t = lowered(&md, matmul(&md, TBC_DT_F32, "20,300", "300,70"), &no_y);
	assert_non_null(strstr(t, "fma.f32 [8 x 32]"));
	assert_null(strstr(t, " from "));
	free(t);
	md = model_new(); /* f16 operands (converted as they load): the scalar tile */
	t = lowered(&md, matmul(&md, TBC_DT_F16, "40,64", "64,96"), &fma);
	assert_null(strstr(t, "fma."));
	free(t);
	md = model_new(); /* B's columns strided (B transposed, not a constant): scalar */
	tbc_op *g = node(&md, TBC_OP_Gemm, 2, input(&md, TBC_DT_F32, "40,64"), input(&md, TBC_DT_F32, "96,64"), NULL);
	attr_int(g, "transB", 1);
	t = lowered(&md, g->outputs[0], &fma);
	assert_null(strstr(t, "fma."));
	free(t);
	md = model_new(); /* A transposed: a's k step is M */
	g = node(&md, TBC_OP_Gemm, 2, input(&md, TBC_DT_F32, "64,40"), input(&md, TBC_DT_F32, "64,96"), NULL);
	attr_int(g, "transA", 1);
	t = lowered(&md, g->outputs[0], &fma);
	assert_non_null(strstr(t, "; step 40] * "));
	free(t);
}

/* Which CPUs declare it: those with FMA (AArch64 always), unless
 * TBC_FMA_TILE=0. */
static void test_fma_tile_declared_by_cpu(void **state) {
	(void)state;
	static const struct {
		const char *triple, *cpu;
		bool fma;
	} cpus[] = {{"x86_64-unknown-linux-gnu", "skylake-avx512", true}, {"x86_64-unknown-linux-gnu", "haswell", true},
		    {"x86_64-unknown-linux-gnu", "x86-64", false},        {"x86_64-unknown-linux-gnu", "sandybridge", false},
		    {"aarch64-unknown-linux-gnu", "neoverse-v2", true}};
	for (int off = 0; off < 2; off++) {
		if (off) setenv("TBC_FMA_TILE", "0", 1);
		for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
			tbc_compile_options o;
			memset(&o, 0, sizeof o);
			o.target_triple = cpus[i].triple, o.cpu = cpus[i].cpu;
			tbc_diags *d = tbc_diags_create();
			tbc_target_desc t;
			assert_int_equal(tbc_target_cpu.describe(&o, &t, d), TBC_OK);
			if (t.fma_tile != (cpus[i].fma && !off)) fail_msg("--cpu %s: fma_tile %d", cpus[i].cpu, t.fma_tile);
			tbc_diags_destroy(d);
		}
		unsetenv("TBC_FMA_TILE");
	}
}

/* ---- Semantics -------------------------------------------------------------------*/
static void free_model(model *md) {
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}

static double elem(const tbc_tensor *t, int64_t i) {
	return t->dtype == TBC_DT_F64 ? ((const double *)t->data)[i] : ((const float *)t->data)[i];
}

/* Compiled code and the evaluator: the same bits (NaN: any NaN). */
static void same_bits(const char *what, const tbc_tensor *want, const tbc_tensor *got) {
	assert_int_equal(want->numel, got->numel);
	size_t es = tbc_dtype_size(want->dtype);
	int bad = 0;
	for (int64_t i = 0; i < want->numel; i++) {
		double a = elem(want, i), b = elem(got, i);
		if (!memcmp((const char *)want->data + i * (int64_t)es, (const char *)got->data + i * (int64_t)es, es) ||
		    (isnan(a) && isnan(b)))
			continue;
		if (bad++ < 8) fprintf(stderr, "%s, element %lld: evaluator %a, compiled %a\n", what, (long long)i, a, b);
	}
	assert_int_equal(bad, 0);
}

/* One rounding per product, in k order; IEEE's special values. */
static void test_fma_tile_semantics_exact(void **state) {
	(void)state;
	enum { M = 4, K = 2, N = 3 };
	const double e = 0x1p-12, inf = INFINITY;
	/* column 0 is (1, 1 + e); column 1 (inf, 1); column 2 (0, 1) */
	double A[M][K] = {
		{-1, 1 + e}, /* -1, then fma(1 + e, 1 + e, -1) = 2^-11 + 2^-24 exactly */
		{0, 1},      /* inf * 0: NaN */
		{1, -inf},   /* inf + -inf: NaN; 1 * 0 + -inf * 1 = -inf */
		{2, 3},
	};
	double B[K][N] = {{1, inf, 0}, {1 + e, 1, 1}};
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "4,2"), *b = input(&md, TBC_DT_F32, "2,3");
	for (int i = 0; i < M * K; i++) ((float *)md.in[0]->data)[i] = (float)A[i / K][i % K];
	for (int i = 0; i < K * N; i++) ((float *)md.in[1]->data)[i] = (float)B[i / N][i % N];
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_MatMul, a, b));
	tbc_target_desc t = fma_desc();
	tbc_tensor *ev = NULL, *jit = NULL;
	eval_and_jit(&md, &t, host_fma_tile(), &ev, &jit);
	const float *y = ev->data;
	assert_true(y[0 * N + 0] == 0x1p-11f + 0x1p-24f); /* rounded product first: 2^-11 */
	assert_true(isnan(y[1 * N + 1]));
	assert_true(isnan(y[2 * N + 1]));
	assert_true(y[2 * N + 2] == -inf);
	assert_true(y[3 * N + 0] == 2 + 3 * (1 + (float)e));
	if (jit) same_bits("special values", ev, jit);
	else fprintf(stderr, "note: this CPU has no FMA: compiled code not compared\n");
	tbc_tensor_destroy(ev);
	tbc_tensor_destroy(jit);
	free_model(&md);
}

/* One MatMul of random operands (special values sprinkled in when asked),
 * evaluated and compiled for this host; y_off: without the tile's resume
 * from y and the row stores (fma_tile_y and gemm_row_stores false,
 * TBC_FMA_TILE_Y=0 and TBC_ROW_STORES=0 for the host's description). */
static void random_matmul(tbc_dtype dt, const char *as, const char *bs, bool with_special, bool y_off, tbc_tensor **ev,
			  tbc_tensor **jit) {
	static const float special[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 0x1p-140f, 0x1p100f};
	tbc_target_desc t = fma_desc();
	t.fma_tile_y = t.gemm_row_stores = !y_off;
	model md = model_new();
	tbc_value *y = matmul(&md, dt, as, bs);
	for (int w = 0; w < 2 && with_special; w++)
		for (int64_t i = 0; i < md.in[w]->numel; i++) {
			if (rnd(&md) >= 0.02) continue;
			double v = special[(int)(rnd(&md) * 7)];
			if (dt == TBC_DT_F64) ((double *)md.in[w]->data)[i] = v;
			else ((float *)md.in[w]->data)[i] = (float)v;
		}
	tbc_graph_add_output(md.m->main, y);
	if (y_off) setenv("TBC_FMA_TILE_Y", "0", 1), setenv("TBC_ROW_STORES", "0", 1);
	eval_and_jit(&md, &t, host_fma_tile(), ev, jit);
	unsetenv("TBC_FMA_TILE_Y"), unsetenv("TBC_ROW_STORES");
	if (*jit) same_bits(as, *ev, *jit);
	free_model(&md);
}

/* Random operands (special values sprinkled in) on shapes that are not
 * multiples of the tile, K blocks (K 300: blocks of 64, each resuming from
 * the sums stored in y), the overlapping last column tile, a symbolic N
 * below the tile (column by column), f64: compiled code agrees with the
 * evaluator bit for bit.  And the tile resuming from y itself and the
 * rows stored as vectors (K blocks from klo > 0, the overlapping last
 * tile's skipped columns, rows' last partial vectors) give the bits of
 * the scalar resume and stores, evaluated and compiled. */
static void test_fma_tile_compiled_matches_evaluator(void **state) {
	(void)state;
	static const struct {
		tbc_dtype dt;
		const char *a, *b;
	} cases[] = {{TBC_DT_F32, "37,147", "147,70"}, {TBC_DT_F32, "9,2", "2,32"},      {TBC_DT_F32, "3,1", "1,16"},
		     {TBC_DT_F32, "20,300", "300,70"}, {TBC_DT_F32, "17,513", "513,33"}, {TBC_DT_F32, "11,40", "40,N"},
		     {TBC_DT_F32, "2,13,7", "7,19"},   {TBC_DT_F64, "19,300", "300,37"}, {TBC_DT_F64, "5,3", "3,9"}};
	for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++)
		for (int with_special = 0; with_special < 2; with_special++) {
			tbc_tensor *ev[2], *jit[2];
			for (int y_off = 0; y_off < 2; y_off++)
				random_matmul(cases[s].dt, cases[s].a, cases[s].b, with_special, y_off, &ev[y_off], &jit[y_off]);
			same_bits("evaluator, resume from y on and off", ev[0], ev[1]);
			if (jit[0]) same_bits("compiled, resume from y on and off", jit[0], jit[1]);
			for (int i = 0; i < 2; i++) {
				tbc_tensor_destroy(ev[i]);
				tbc_tensor_destroy(jit[i]);
			}
		}
}

/* The LLVM IR of a K-blocked MatMul (20 x 300 by 300 x 70) for
 * skylake-avx512 at -O0 (what the emitter writes, before LLVM's passes);
 * off: TBC_FMA_TILE_Y=0 and TBC_ROW_STORES=0. */
static char *blocked_matmul_ir(bool off) {
	model md = model_new();
	tbc_graph_add_output(md.m->main, matmul(&md, TBC_DT_F32, "20,300", "300,70"));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.target_triple = "x86_64-unknown-linux-gnu", o.cpu = "skylake-avx512", o.opt_level = 0;
	if (off) setenv("TBC_FMA_TILE_Y", "0", 1), setenv("TBC_ROW_STORES", "0", 1);
	const char *path = tmp_path("blocked.ll");
	tbc_code rc = tbc_compile_to_file(md.m, &o, path, d);
	unsetenv("TBC_FMA_TILE_Y"), unsetenv("TBC_ROW_STORES");
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *ir = malloc((size_t)n + 1);
	assert_non_null(ir);
	assert_int_equal(fread(ir, 1, (size_t)n, f), (size_t)n);
	ir[n] = 0;
	fclose(f);
	tbc_diags_destroy(d);
	free_model(&md);
	return ir;
}

/* The tile's resume loads y as vectors and selects per vector (8 rows of
 * 2 vectors in each of the two micro-tiles: 32 selects), and a row's
 * stores are vector stores (the 64 columns of the whole tiles: 8 rows of
 * 2 vectors of 16; the overlapping last tile stores the 6 columns past
 * them: 8 of 6 lanes), already in the IR the emitter writes; with the
 * switches off, neither. */
static void test_fma_tile_resume_and_stores_are_vectors(void **state) {
	(void)state;
	char *on = blocked_matmul_ir(false), *off = blocked_matmul_ir(true);
	assert_int_equal(text_count(on, ", <16 x float> %y"), 32);
	assert_int_equal(text_count(on, "store <16 x float>"), 16);
	assert_int_equal(text_count(on, "store <6 x float>"), 8);
	assert_int_equal(text_count(off, ", <16 x float> %y"), 0);
	assert_int_equal(text_count(off, "store <"), 0);
	free(on);
	free(off);
}

/* ---- Against the interpreter -------------------------------------------------------*/
static void test_fma_tile_matches_interpreter(void **state) {
	(void)state;
	static tbc_target_desc fma;
	fma = fma_desc();
	g_target = &fma;
	double atol = g_atol;
	g_atol = 1e-4; /* f32 sums of up to 600 products of values below 3 */
	static const struct {
		const char *a, *b;
	} cases[] = {{"7,13", "13,19"}, {"33,40", "40,65"}, {"100,300", "300,200"}, {"3,5,9", "9,40"},
		     {"1,147", "147,64"}, {"2,1,4,7", "7,33"}, {"129,17", "17,130"}, {"N,31", "31,48"}, {"6,8", "8,N"}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		model md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){matmul(&md, TBC_DT_F32, cases[i].a, cases[i].b)}, 1e-4);
	}
	/* Gemm: A and B transposed, C; alpha and beta */
	for (int ta = 0; ta < 2; ta++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, ta ? "21,37" : "37,21"), *c = input(&md, TBC_DT_F32, "45");
		tbc_op *g = node(&md, TBC_OP_Gemm, 3, a, input(&md, TBC_DT_F32, "45,21"), c);
		attr_int(g, "transA", ta);
		attr_int(g, "transB", 1);
		tbc_op_add_attr(g, "alpha", TBC_ATTR_FLOAT)->f = 0.5;
		tbc_op_add_attr(g, "beta", TBC_ATTR_FLOAT)->f = -2;
		check_outputs(&md, 1, (tbc_value *[]){g->outputs[0]}, 1e-4);
	}
	/* Conv (im2col and the 1x1 product), groups, a bias; f64 */
	static const struct {
		const char *x, *w, *bias;
		int group;
	} convs[] = {{"1,6,9,9", "8,6,3,3", "8", 1}, {"2,16,5,5", "20,16,1,1", "20", 1}, {"1,8,6,6", "12,4,3,3", "12", 2}};
	for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
		model md = model_new();
		tbc_op *cv = node(&md, TBC_OP_Conv, 3, input(&md, TBC_DT_F32, convs[i].x), input(&md, TBC_DT_F32, convs[i].w),
				  input(&md, TBC_DT_F32, convs[i].bias));
		if (convs[i].group > 1) attr_int(cv, "group", convs[i].group);
		check_outputs(&md, 1, (tbc_value *[]){cv->outputs[0]}, 1e-4);
	}
	model md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){matmul(&md, TBC_DT_F64, "23,70", "70,41")}, 1e-9);
	g_atol = atol;
	g_target = NULL;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fma_tile_only_where_declared),
		cmocka_unit_test(test_fma_tile_declared_by_cpu),
		cmocka_unit_test(test_fma_tile_semantics_exact),
		cmocka_unit_test(test_fma_tile_compiled_matches_evaluator),
		cmocka_unit_test(test_fma_tile_resume_and_stores_are_vectors),
		cmocka_unit_test(test_fma_tile_matches_interpreter),
	};
	return cmocka_run_group_tests(tests, NULL, tbc_test_remove_dir);
}
