/* Load-time values (docs/load-time.md): a weight that constant folding
 * leaves to the compiled code because it is too large (a Tile, a
 * ConstantOfShape and an Expand of small constants, added up) is computed
 * once, when a CPU session is created, and kept in the session's arena
 * while runs at growing batch sizes move it to larger arenas.  Outputs are
 * compared with the reference interpreter; the session's statistics say
 * how often init ran. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/host/program.h"
#include "codegen/lower/lower.h"
#include "codegen/target_desc.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tbc/abi.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_test.h"
#include "tests/unit/support/files.h"

/* y = Relu(x @ W) with W [64, 512] f32 = Tile(small [64, 16], [1, 32]) +
 * ConstantOfShape([64, 512], 0.25) + Expand(row [1, 512], [64, 512]):
 * 128 KiB each, over what folding stores (passes.h: TBC_FOLD_SMALL_BYTES)
 * and larger than what they read.  x [N, 64]: the batch is symbolic. */
static char *model_text(void) {
	size_t cap = 64 << 10, at = 0;
	char *s = malloc(cap);
	assert_non_null(s);
	at += (size_t)snprintf(s + at, cap - at, "graph main(%%x: f32[N,64]) {\n  %%small: f32[64,16] = const [");
	for (int i = 0; i < 64 * 16; i++)
		at += (size_t)snprintf(s + at, cap - at, "%s%d", i ? ", " : "", (i * 37) % 19 - 9);
	at += (size_t)snprintf(s + at, cap - at, "]\n  %%row: f32[1,512] = const [");
	for (int i = 0; i < 512; i++) at += (size_t)snprintf(s + at, cap - at, "%s%d", i ? ", " : "", i % 7 - 3);
	at += (size_t)snprintf(s + at, cap - at,
			       "]\n"
			       "  %%reps: i64[2] = const [1, 32]\n"
			       "  %%shape: i64[2] = const [64, 512]\n"
			       "  %%t: f32[64,512] = Tile(%%small, %%reps)\n"
			       "  %%c: f32[64,512] = ConstantOfShape(%%shape) {value = tensor f32[1] [0.25]}\n"
			       "  %%e: f32[64,512] = Expand(%%row, %%shape)\n"
			       "  %%te: f32[64,512] = Add(%%t, %%e)\n"
			       "  %%w: f32[64,512] = Add(%%te, %%c)\n"
			       "  %%m: f32[N,512] = MatMul(%%x, %%w)\n"
			       "  %%y: f32[N,512] = Relu(%%m)\n"
			       "  return %%y\n"
			       "}\n");
	assert_true(at < cap);
	return s;
}

static tbc_module *load_time_model(void) {
	char *text = model_text();
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "load_time.ir", d);
	if (!m) tbc_test_fail_with("load_time.ir", d);
	tbc_diags_destroy(d);
	free(text);
	return m;
}

/* m JIT-compiled, loaded on a context of `threads` threads, with a session. */
typedef struct jit_session {
	tbc_jit *jit;
	tbcrt_context *c;
	tbcrt_model *model;
	tbcrt_session *s;
} jit_session;

static jit_session jit_session_open(const tbc_module *m, int threads, tbc_diags *d) {
	jit_session j = {0};
	if (tbc_jit_compile(m, NULL, d, &j.jit) != TBC_OK) tbc_test_fail_with("jit", d);
	j.c = rt_context(threads);
	RT_OK(tbcrt_model_from_descriptor(j.c, tbc_jit_descriptor(j.jit), NULL, &j.model));
	RT_OK(tbcrt_session_create(j.model, &j.s));
	return j;
}

static void jit_session_close(jit_session *j) {
	tbcrt_session_destroy(j->s);
	tbcrt_model_destroy(j->model);
	tbcrt_context_destroy(j->c);
	tbc_jit_destroy(j->jit);
}

/* m through the default pipeline, lowered for the default CPU into arena. */
static kir_program *lowered_for(tbc_module *m, const tbc_target_desc *cpu, tbc_arena *arena, tbc_diags *d) {
	tbc_pipeline_options po = tbc_pipeline_defaults();
	assert_true(tbc_run_pipeline(m, &po, d));
	kir_program *p = NULL;
	assert_true(cpu->gemv_panels);
	assert_int_equal(kir_lower(m, cpu, arena, d, &p), TBC_OK);
	return p;
}

static kir_program *lowered_for_the_cpu(tbc_module *m, tbc_arena *arena, tbc_diags *d) {
	tbc_target_desc cpu = tbc_target_desc_cpu_default();
	return lowered_for(m, &cpu, arena, d);
}

/* The module of IR text (freed), named name for diagnostics. */
static tbc_module *parsed(char *text, const char *name, tbc_diags *d) {
	tbc_module *m = tbc_parse(text, name, d);
	free(text);
	if (!m) tbc_test_fail_with(name, d);
	return m;
}

/* One run at batch n, compared with the interpreter. */
static void run_batch(tbcrt_session *s, const tbc_module *m, int64_t n) {
	int64_t dims[2] = {n, 64};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
	float *xv = x->data;
	for (int64_t i = 0; i < n * 64; i++) xv[i] = (float)((i * 53 + n) % 29) / 14.0f - 1.0f;
	RT_OK(tbcrt_session_bind_input(s, 0, TBC_DT_F32, 2, dims, x->data, (size_t)(n * 64 * 4)));
	RT_OK(tbcrt_session_run(s));
	tbcrt_tensor y;
	RT_OK(tbcrt_session_output(s, 0, &y));
	assert_int_equal(y.dims[0], n);
	assert_int_equal(y.dims[1], 512);
	tbc_tensor *want = NULL;
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_interpret(m, &x, 1, &want, 1, d), TBC_OK);
	tbc_diags_destroy(d);
	const float *got = y.data, *w = want->data;
	for (int64_t i = 0; i < n * 512; i++)
		if (!(fabsf(got[i] - w[i]) <= 1e-4f + 1e-5f * fabsf(w[i])))
			fail_msg("batch %lld: y[%lld] = %.9g, expected %.9g", (long long)n, (long long)i, got[i], w[i]);
	tbc_tensor_destroy(want);
	tbc_tensor_destroy(x);
}

static void check_session(tbcrt_model *model, const tbc_module *m) {
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(model, &s));
	tbcrt_session_stats st;
	RT_OK(tbcrt_session_get_stats(s, &st));
	assert_int_equal(st.init_runs, 1); /* at creation, before any run */
	assert_int_equal(st.runs, 0);
	assert_true(st.init_bytes >= 64 * 512 * 4); /* at least W */
	/* Growing batches move the arena; the values move with it. */
	const int64_t batches[] = {1, 37, 200, 3, 0, 500};
	for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) run_batch(s, m, batches[b]);
	RT_OK(tbcrt_session_get_stats(s, &st));
	assert_int_equal(st.init_runs, 1);
	assert_int_equal(st.runs, 6);
	tbcrt_session_destroy(s);
}

static void large_constant_weight_is_computed_once_per_session(void **state) {
	(void)state;
	tbc_module *m = load_time_model();
	tbc_diags *d = tbc_diags_create();
	tbc_jit *jit = NULL;
	if (tbc_jit_compile(m, NULL, d, &jit) != TBC_OK) tbc_test_fail_with("jit", d);
	const tbc_abi_model *desc = tbc_jit_descriptor(jit);
	assert_int_equal(desc->abi_version, TBC_ABI_VERSION);
	assert_non_null(desc->init);
	assert_true(desc->init_end - desc->init_begin >= 64 * 512 * 4);
	assert_int_equal(desc->weights_size < 64 * 512 * 4, true); /* W is not in the weights */
	tbcrt_context *c = rt_context(2);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, desc, NULL, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_int_equal(info.load_time_bytes, desc->init_end - desc->init_begin);
	check_session(model, m);
	check_session(model, m); /* each session its own */
	RT_OK(tbcrt_context_set_thread_count(c, 1));
	check_session(model, m);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* The same through a shared object, and through the one-shot runner the
 * conformance suite uses (tbc_run_cpu: init, then run, on one arena). */
static void shared_object_and_one_shot_run_compute_them_too(void **state) {
	(void)state;
	tbc_module *m = load_time_model();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	char so[256];
	snprintf(so, sizeof so, "%s", tmp_path("load_time.so"));
	compile_to(m, &o, so);
	tbcrt_context *c = rt_context(2);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	check_session(model, m);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);

	int64_t dims[2] = {5, 64};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
	for (int64_t i = 0; i < x->numel; i++) ((float *)x->data)[i] = (float)(i % 13) / 6.0f - 1.0f;
	tbc_tensor *got = NULL, *want = NULL;
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_run_cpu(m, &x, 1, &got, 1, d), TBC_OK);
	assert_int_equal(tbc_interpret(m, &x, 1, &want, 1, d), TBC_OK);
	for (int64_t i = 0; i < want->numel; i++)
		assert_true(fabsf(((float *)got->data)[i] - ((float *)want->data)[i]) <= 1e-3f);
	tbc_tensor_destroy(got);
	tbc_tensor_destroy(want);
	tbc_tensor_destroy(x);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* A check failing on constants alone (an integer division by zero) fails
 * every run, as it did when run computed it, not the session. */
static void a_failing_load_time_value_fails_each_run(void **state) {
	(void)state;
	static const char *const text = "graph main(%x: i32[3]) {\n"
					 "  %a: i32[3] = const [1, 2, 3]\n"
					 "  %b: i32[3] = const [1, 0, 1]\n"
					 "  %q: i32[3] = Div(%a, %b)\n"
					 "  %y: i32[6] = Concat(%x, %q) {axis = 0}\n"
					 "  return %y\n"
					 "}\n";
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "bad.ir", d);
	assert_non_null(m);
	jit_session j = jit_session_open(m, 1, d);
	tbcrt_session *s = j.s;
	int32_t x[3] = {1, 2, 3};
	int64_t dims[1] = {3};
	RT_OK(tbcrt_session_bind_input(s, 0, TBC_DT_I32, 1, dims, x, sizeof x));
	for (int i = 0; i < 2; i++) RT_ERR(tbcrt_session_run(s), TBCRT_ERR_RUN_FAILED, "integer division by zero");
	tbcrt_session_stats st;
	RT_OK(tbcrt_session_get_stats(s, &st));
	assert_int_equal(st.init_runs, 1); /* the Div is load-time */
	assert_int_equal(st.runs, 0);
	jit_session_close(&j);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* The lowered program: the weight's launches are marked init, the MatMul's
 * not; W sits in the region after everything else of part 0, and nothing
 * else does. */
static void lowering_marks_the_weights_launches(void **state) {
	(void)state;
	tbc_module *m = load_time_model();
	tbc_diags *d = tbc_diags_create();
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = lowered_for_the_cpu(m, arena, d);
	int n_init = 0, n_run = 0;
	for (int l = 0; l < p->n_launches; l++) {
		const kir_launch *la = &p->launches[l];
		if (!la->kernel) continue;
		if (la->init) n_init++;
		else n_run++;
		bool io = false; /* an init launch binds weights and temporaries only */
		for (int a = 0; a < la->kernel->n_buffers; a++) {
			kir_buffer_role r = p->bufs[la->args[a]]->role;
			io |= r == KIR_BUF_INPUT || r == KIR_BUF_OUTPUT || r == KIR_BUF_SYMS;
		}
		if (la->init) assert_false(io);
		if (io) assert_false(la->init);
	}
	assert_true(n_init >= 1);
	assert_true(n_run >= 1);
	assert_true(p->init_begin < p->init_end);
	assert_int_equal(p->init_begin % 64, 0);
	assert_int_equal(p->parts[0].bytes, (int64_t)p->init_end);
	for (int i = 0; i < p->n_bufs; i++) {
		const kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_TEMP || b->offset < (int64_t)p->init_begin) continue;
		bool stored_by_init = false; /* what lies in the region, only init launches write */
		for (int l = 0; l < p->n_launches; l++)
			for (int a = 0; p->launches[l].kernel && a < p->launches[l].kernel->n_buffers; a++)
				if (p->launches[l].args[a] == i) stored_by_init |= p->launches[l].init;
		assert_true(stored_by_init);
	}
	char *text = kir_program_print(p);
	assert_non_null(strstr(text, "\ninit "));
	free(text);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* Batch-1 products with load-time weights (a fully connected layer at
 * batch 1, AlexNet's three): B is laid out once in the column panels a
 * constant B gets (gemm_const_panels), by a load-time b_layout kernel --
 * MatMul's B [64, 528] as it is, Gemm's [300, 64] transposed (transB) --
 * widths that leave the last panel part full for 16- and 32-column panels.
 * Compiled, compared with the interpreter; the lowered program holds the
 * two layouts as panel buffers. */
static char *gemv_model_text(void) {
	size_t cap = 64 << 10, at = 0;
	char *s = malloc(cap);
	assert_non_null(s);
	at += (size_t)snprintf(s + at, cap - at, "graph main(%%x: f32[1,64]) {\n  %%small: f32[64,16] = const [");
	for (int i = 0; i < 64 * 16; i++)
		at += (size_t)snprintf(s + at, cap - at, "%s%d", i ? ", " : "", (i * 37) % 19 - 9);
	at += (size_t)snprintf(s + at, cap - at, "]\n  %%small2: f32[60,64] = const [");
	for (int i = 0; i < 60 * 64; i++)
		at += (size_t)snprintf(s + at, cap - at, "%s%d", i ? ", " : "", (i * 41) % 23 - 11);
	at += (size_t)snprintf(s + at, cap - at,
			       "]\n"
			       "  %%reps: i64[2] = const [1, 33]\n"
			       "  %%reps2: i64[2] = const [5, 1]\n"
			       "  %%shape: i64[2] = const [64, 528]\n"
			       "  %%shape2: i64[2] = const [300, 64]\n"
			       "  %%t: f32[64,528] = Tile(%%small, %%reps)\n"
			       "  %%c: f32[64,528] = ConstantOfShape(%%shape) {value = tensor f32[1] [0.25]}\n"
			       "  %%w: f32[64,528] = Add(%%t, %%c)\n"
			       "  %%t2: f32[300,64] = Tile(%%small2, %%reps2)\n"
			       "  %%c2: f32[300,64] = ConstantOfShape(%%shape2) {value = tensor f32[1] [-0.5]}\n"
			       "  %%w2: f32[300,64] = Add(%%t2, %%c2)\n"
			       "  %%m: f32[1,528] = MatMul(%%x, %%w)\n"
			       "  %%g: f32[1,300] = Gemm(%%x, %%w2) {transB = 1}\n"
			       "  return %%m, %%g\n"
			       "}\n");
	assert_true(at < cap);
	return s;
}

static void batch_one_products_read_load_time_panels(void **state) {
	(void)state;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = parsed(gemv_model_text(), "gemv_load_time.ir", d);

	/* Lowered for a CPU with gemv panels: two panel-shaped b_layout buffers. */
	tbc_module *lm = tbc_module_clone(m);
	assert_non_null(lm);
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = lowered_for_the_cpu(lm, arena, d);
	assert_int_equal(tbc_diags_count(d), 0); /* no kernel failed to verify on the way */
	int n_panels = 0;
	for (int i = 0; i < p->n_bufs; i++) {
		const kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_TEMP || !b->name || strncmp(b->name, "b_layout", 8)) continue;
		int64_t rows = b->type.dims[0].size, stride = b->type.dims[1].size;
		/* 528 or 300 columns in panels of 16 or 32, each K = 64 rows */
		bool is528 = rows == (528 + 15) / 16 || rows == (528 + 31) / 32;
		bool is300 = rows == (300 + 15) / 16 || rows == (300 + 31) / 32;
		assert_true(is528 || is300);
		assert_true(stride >= 64 * 16);
		n_panels++;
	}
	assert_int_equal(n_panels, 2);
	tbc_arena_destroy(arena);
	tbc_module_destroy(lm);

	/* Compiled and run, twice in one session: the interpreter's values. */
	jit_session j = jit_session_open(m, 2, d);
	tbcrt_session *s = j.s;
	int64_t dims[2] = {1, 64};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
	tbc_tensor *want[2] = {NULL, NULL};
	for (int r = 0; r < 2; r++) {
		for (int i = 0; i < 64; i++) ((float *)x->data)[i] = (float)((i * 7 + r * 5) % 17) / 8.0f - 1.0f;
		RT_OK(tbcrt_session_bind_input(s, 0, TBC_DT_F32, 2, dims, x->data, 64 * 4));
		RT_OK(tbcrt_session_run(s));
		assert_int_equal(tbc_interpret(m, &x, 1, want, 2, d), TBC_OK);
		for (int o = 0; o < 2; o++) {
			tbcrt_tensor y;
			RT_OK(tbcrt_session_output(s, o, &y));
			assert_int_equal(y.dims[1], want[o]->dims[1]);
			const float *got = y.data, *w = want[o]->data;
			for (int64_t i = 0; i < want[o]->numel; i++)
				if (!(fabsf(got[i] - w[i]) <= 1e-3f + 1e-5f * fabsf(w[i])))
					fail_msg("run %d output %d [%lld] = %.9g, expected %.9g", r, o, (long long)i, got[i], w[i]);
			tbc_tensor_destroy(want[o]);
			want[o] = NULL;
		}
	}
	tbcrt_session_stats st;
	RT_OK(tbcrt_session_get_stats(s, &st));
	assert_int_equal(st.init_runs, 1);
	tbc_tensor_destroy(x);
	jit_session_close(&j);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* 3x3 convolutions whose weights are computed when loading (Tile and
 * ConstantOfShape, as AlexNet's in bench/: alexnet_consts) take Winograd's
 * form as constant weights do: U = G g G^T by a load-time kernel of its own
 * (wino_weights, into the temporary wino_u) instead of when compiling.  One
 * convolution of 12 x 12 outputs (F(2x2)) and one of 16 x 16 (F(4x4)), with
 * a bias; lowered for a CPU with the fma tile, then compiled and run twice
 * in one session against the interpreter. */
static char *winograd_model_text(void) {
	size_t cap = 256 << 10, at = 0;
	char *s = malloc(cap);
	assert_non_null(s);
	at += (size_t)snprintf(s + at, cap - at,
			       "graph main(%%x: f32[1,32,12,12], %%x2: f32[1,32,16,16]) {\n  %%small: f32[8,32,3,3] = const [");
	for (int i = 0; i < 8 * 32 * 9; i++)
		at += (size_t)snprintf(s + at, cap - at, "%s%g", i ? ", " : "", (double)((i * 37) % 19 - 9) / 16.0);
	at += (size_t)snprintf(s + at, cap - at, "]\n  %%b: f32[64] = const [");
	for (int i = 0; i < 64; i++) at += (size_t)snprintf(s + at, cap - at, "%s%g", i ? ", " : "", (double)(i % 7) / 4.0 - 0.5);
	at += (size_t)snprintf(s + at, cap - at,
			       "]\n"
			       "  %%reps: i64[4] = const [8, 1, 1, 1]\n"
			       "  %%shape: i64[4] = const [64, 32, 3, 3]\n"
			       "  %%t: f32[64,32,3,3] = Tile(%%small, %%reps)\n"
			       "  %%c: f32[64,32,3,3] = ConstantOfShape(%%shape) {value = tensor f32[1] [0.125]}\n"
			       "  %%w: f32[64,32,3,3] = Add(%%t, %%c)\n"
			       "  %%y: f32[1,64,12,12] = Conv(%%x, %%w, %%b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}\n"
			       "  %%y2: f32[1,64,16,16] = Conv(%%x2, %%w, %%b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}\n"
			       "  return %%y, %%y2\n"
			       "}\n");
	assert_true(at < cap);
	return s;
}

static void conv_weights_computed_at_load_take_winograd(void **state) {
	(void)state;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = parsed(winograd_model_text(), "winograd_load_time.ir", d);

	/* Lowered for a CPU with the fma tile: two U temporaries, each written
	 * by a wino_weights launch that runs at load (init), each in U^T's
	 * panels (rows of many columns, not [a^2 64, 32]): 42 and 20 tiles for
	 * 64 channels take the transposed GEMM, as they would with constant
	 * weights. */
	tbc_module *lm = tbc_module_clone(m);
	assert_non_null(lm);
	tbc_arena *arena = tbc_arena_create();
	tbc_target_desc cpu = tbc_target_desc_cpu_default();
	cpu.vector_bytes = 64, cpu.vector_regs = 32, cpu.fma_tile = true;
	kir_program *p = lowered_for(lm, &cpu, arena, d);
	assert_int_equal(tbc_diags_count(d), 0);
	int n_u = 0, n_init = 0;
	for (int i = 0; i < p->n_bufs; i++)
		if (p->bufs[i]->role == KIR_BUF_TEMP && p->bufs[i]->name && !strncmp(p->bufs[i]->name, "wino_u", 6)) {
			const tbc_type *t = &p->bufs[i]->type;
			assert_int_equal(t->rank, 2);
			assert_null(t->dims[1].sym);
			int64_t cols = t->dims[1].size;
			if (cols <= 32) fail_msg("wino_u %d: rows of %lld, not U^T's panels", i, (long long)cols);
			n_u++;
		}
	for (int l = 0; l < p->n_launches; l++)
		if (p->launches[l].kernel && strstr(p->launches[l].kernel->name, "wino_weights")) {
			assert_true(p->launches[l].init);
			n_init++;
		}
	if (n_u != 2 || n_init != 2) {
		char *t = kir_program_print(p);
		fail_msg("%d wino_u temporaries, %d wino_weights launches at load:\n%s", n_u, n_init, t);
	}
	tbc_arena_destroy(arena);
	tbc_module_destroy(lm);

	/* Compiled and run, twice in one session: the interpreter's values
	 * (Winograd's rounding: within 1e-4 of the largest output). */
	jit_session j = jit_session_open(m, 2, d);
	tbcrt_session *s = j.s;
	int64_t d1[4] = {1, 32, 12, 12}, d2[4] = {1, 32, 16, 16};
	tbc_tensor *x[2] = {tbc_tensor_create(TBC_DT_F32, 4, d1), tbc_tensor_create(TBC_DT_F32, 4, d2)};
	tbc_tensor *want[2] = {NULL, NULL};
	for (int r = 0; r < 2; r++) {
		for (int in = 0; in < 2; in++) {
			for (int64_t i = 0; i < x[in]->numel; i++)
				((float *)x[in]->data)[i] = (float)((i * 7 + r * 5 + in) % 17) / 8.0f - 1.0f;
			RT_OK(tbcrt_session_bind_input(s, (uint32_t)in, TBC_DT_F32, 4, in ? d2 : d1, x[in]->data,
						       (size_t)x[in]->numel * 4));
		}
		RT_OK(tbcrt_session_run(s));
		assert_int_equal(tbc_interpret(m, x, 2, want, 2, d), TBC_OK);
		for (int o = 0; o < 2; o++) {
			tbcrt_tensor y;
			RT_OK(tbcrt_session_output(s, o, &y));
			const float *got = y.data, *w = want[o]->data;
			float big = 0;
			for (int64_t i = 0; i < want[o]->numel; i++) big = fabsf(w[i]) > big ? fabsf(w[i]) : big;
			for (int64_t i = 0; i < want[o]->numel; i++)
				if (!(fabsf(got[i] - w[i]) <= 1e-4f * big))
					fail_msg("run %d output %d [%lld] = %.9g, expected %.9g", r, o, (long long)i, got[i], w[i]);
			tbc_tensor_destroy(want[o]);
			want[o] = NULL;
		}
	}
	tbcrt_session_stats st;
	RT_OK(tbcrt_session_get_stats(s, &st));
	assert_int_equal(st.init_runs, 1);
	tbc_tensor_destroy(x[0]);
	tbc_tensor_destroy(x[1]);
	jit_session_close(&j);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lowering_marks_the_weights_launches),
		cmocka_unit_test(large_constant_weight_is_computed_once_per_session),
		cmocka_unit_test(shared_object_and_one_shot_run_compute_them_too),
		cmocka_unit_test(a_failing_load_time_value_fails_each_run),
		cmocka_unit_test(batch_one_products_read_load_time_panels),
		cmocka_unit_test(conv_weights_computed_at_load_take_winograd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
