/* The pass pipeline and memory planning: the registry, --dump-after, the
 * per-pass times, the memory plan's checker on hand-made plans, and on every
 * model of the ONNX node suite and the benchmark models: the optimized
 * module verifies, its plan never overlaps two live values, and the
 * interpreter gives bit-identical results before and after the passes
 * (fused graphs included).  Golden tests of each pass are in tests/golden/. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/unit/support/need.h"
#include <sys/stat.h>

#include "ir/dtype.h"
#include "ir/ir.h"
#include "passes/passes.h"

static tbc_module *parse(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	if (!m) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		print_error("parse failed: %s\n", msg);
	}
	assert_non_null(m);
	tbc_infer cx = {.module = m, .diags = d};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, i), msg, sizeof msg);
		print_error("%s\n", msg);
	}
}

static const char *const chain =
	"module ir_version 8 opset 17\n"
	"graph main(%x: f32[4,8], %w: f32[8,8]) {\n"
	"  %one: f32[] = const [1]\n"
	"  %two: f32[] = const [2]\n"
	"  %three: f32[] = const [3]\n"
	"  %a = Add(%x, %one)\n"
	"  %h = Relu(%a)\n"
	"  %m = MatMul(%h, %w)\n"
	"  %e = Exp(%m)\n"
	"  %m2 = MatMul(%e, %w)\n"
	"  %s = Add(%m2, %h)\n"
	"  return %s\n"
	"}\n";

/* ---- registry and pipeline ---- */
static void registry_finds_every_pass_by_name(void **state) {
	(void)state;
	const char *names[] = {"decompose", "fold", "simplify", "cse", "dce", "fusion", "memplan", "qdq_fusion"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		const tbc_pass_info *p = tbc_pass_find(names[i]);
		assert_non_null(p);
		assert_string_equal(p->name, names[i]);
		assert_non_null(p->run);
	}
	assert_null(tbc_pass_find("nope"));
	assert_int_equal(tbc_pass_count, 8);
}

static void pipeline_dump_after_prints_text_that_parses_back(void **state) {
	(void)state;
	tbc_module *m = parse(chain);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.verify = true;
	o.dump_after = "fusion";
	o.dump_file = f;
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_run_pipeline(m, &o, d));
	fclose(f);
	assert_non_null(strstr(buf, "# ---- IR after fusion ----\n"));
	assert_null(strstr(buf, "after fold"));
	assert_non_null(strstr(buf, "Fused("));
	tbc_module *back = tbc_parse(strchr(buf, '\n') + 1, "dump.ir", d);
	if (!back) print_diags(d);
	assert_non_null(back);
	tbc_module_destroy(back);
	free(buf);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void pipeline_dump_after_all_prints_after_each_pass(void **state) {
	(void)state;
	tbc_module *m = parse(chain);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.dump_after = "all";
	o.dump_file = f;
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_run_pipeline(m, &o, d));
	fclose(f);
	const char *order[] = {"fold", "cse", "dce", "fusion", "memplan"};
	const char *at = buf;
	for (size_t i = 0; i < 5; i++) {
		char head[64];
		snprintf(head, sizeof head, "# ---- IR after %s ----\n", order[i]);
		const char *p = strstr(at, head);
		assert_non_null(p);
		at = p + 1;
	}
	free(buf);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void pipeline_refuses_unknown_dump_pass(void **state) {
	(void)state;
	tbc_module *m = parse(chain);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.dump_after = "folding";
	tbc_diags *d = tbc_diags_create();
	assert_false(tbc_run_pipeline(m, &o, d));
	assert_int_equal(tbc_diags_first_code(d), TBC_ERR_INVALID_ARGUMENT);
	assert_non_null(strstr(tbc_diags_get(d, 0)->message, "folding"));
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void pipeline_records_time_per_pass_and_arena(void **state) {
	(void)state;
	tbc_module *m = parse(chain);
	tbc_pipeline_stats st;
	memset(&st, 0, sizeof st);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.stats = &st;
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_run_pipeline(m, &o, d));
	assert_int_equal(st.n_passes, 7);
	assert_string_equal(st.passes[0].name, "decompose");
	assert_string_equal(st.passes[1].name, "fold");
	assert_string_equal(st.passes[2].name, "simplify");
	assert_string_equal(st.passes[6].name, "memplan");
	for (int i = 0; i < st.n_passes; i++) assert_true(st.passes[i].seconds >= 0);
	/* Intermediates: %h (fused), %m, %e, %m2: 128 bytes each.  %h lives to
	 * the last op; %m dies where %e is written in place over it; %m2 needs
	 * its own place beside %h and %e. */
	assert_int_equal(st.memplan.n_placed, 4);
	assert_int_equal(st.memplan.n_in_place, 1);
	assert_int_equal(st.memplan.lower_bound, 3 * 128);
	assert_int_equal(st.memplan.arena_bytes, 3 * 128);
	assert_true(tbc_memplan_check(m, d));
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void pipeline_O0_runs_only_memory_planning(void **state) {
	(void)state;
	tbc_module *m = parse(chain);
	tbc_pipeline_stats st;
	memset(&st, 0, sizeof st);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.opt_level = 0;
	o.stats = &st;
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_run_pipeline(m, &o, d));
	assert_int_equal(st.n_passes, 2); /* decompose runs at every level: lowering needs it */
	assert_string_equal(st.passes[0].name, "decompose");
	assert_string_equal(st.passes[1].name, "memplan");
	char *text = tbc_print(m);
	assert_null(strstr(text, "Fused"));
	free(text);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

/* The QDQ fusion (onnxruntime's meaning, not the model's float one) runs
 * only when asked, right after decompose, before fold folds the weights'
 * DequantizeLinear into float constants. */
static void pipeline_qdq_fusion_only_when_asked(void **state) {
	(void)state;
	static const char qdq_conv[] = "module ir_version 8 opset 21\n"
				       "graph main(%x: u8[1,2,3,3]) {\n"
				       "  %xs: f32[] = const [0.5]\n"
				       "  %xz: u8[] = const [128]\n"
				       "  %w: i8[2,2,1,1] = const [1, -2, 3, -4]\n"
				       "  %ws: f32[] = const [0.25]\n"
				       "  %ys: f32[] = const [0.75]\n"
				       "  %dx: f32[1,2,3,3] = DequantizeLinear(%x, %xs, %xz)\n"
				       "  %dw: f32[2,2,1,1] = DequantizeLinear(%w, %ws)\n"
				       "  %c: f32[1,2,3,3] = Conv(%dx, %dw)\n"
				       "  %y: u8[1,2,3,3] = QuantizeLinear(%c, %ys)\n"
				       "  return %y\n"
				       "}\n";
	for (int asked = 0; asked < 2; asked++) {
		tbc_module *m = parse(qdq_conv);
		tbc_pipeline_stats st;
		memset(&st, 0, sizeof st);
		tbc_pipeline_options o = tbc_pipeline_defaults();
		o.stats = &st;
		o.qdq_fusion = asked;
		tbc_diags *d = tbc_diags_create();
		assert_true(tbc_run_pipeline(m, &o, d));
		char *text = tbc_print(m);
		assert_int_equal(strstr(text, "QLinearConv(%x, %xs, %xz, %w, %ws") != NULL, asked);
		assert_int_equal(strstr(text, "Conv(%dx") != NULL || strstr(text, "= Conv(") != NULL, !asked);
		assert_string_equal(st.passes[1].name, asked ? "qdq_fusion" : "fold");
		free(text);
		tbc_module_destroy(m);
		tbc_diags_destroy(d);
	}
}

/* ---- memory plans ---- */
static tbc_value *named(const tbc_module *m, const char *name) {
	for (const tbc_op *op = m->main->first; op; op = op->next)
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i] && op->outputs[i]->name && !strcmp(op->outputs[i]->name, name)) return op->outputs[i];
	fail_msg("no value %s", name);
	return NULL;
}

static void memplan_reuses_dead_memory_and_writes_in_place(void **state) {
	(void)state;
	tbc_module *m = parse(
		"module ir_version 8 opset 17\n"
		"graph main(%x: f32[16]) {\n"
		"  %a: f32[16] = Exp(%x)\n"
		"  %b: f32[16] = Neg(%a)\n"
		"  %c: f32[16] = Abs(%b)\n"
		"  %d: f32[16] = Add(%a, %c)\n"
		"  %e: f32[16] = Sin(%d)\n"
		"  return %e\n"
		"}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_memplan(m, d));
	/* %b is written over... nothing: %a lives on to %d.  %c over %b; %d over
	 * %a or %c; %e is a model output (caller memory). */
	tbc_value *a = named(m, "a"), *b = named(m, "b"), *c = named(m, "c"), *dd = named(m, "d"), *e = named(m, "e");
	assert_int_equal(e->mem_offset, -1);
	assert_int_not_equal(a->mem_offset, b->mem_offset);
	assert_int_equal(c->mem_offset, b->mem_offset);
	assert_true(dd->mem_offset == a->mem_offset || dd->mem_offset == c->mem_offset);
	assert_int_equal(a->mem_offset % TBC_ARENA_ALIGN, 0);
	assert_int_equal(b->mem_offset % TBC_ARENA_ALIGN, 0);
	tbc_memplan_stats st;
	assert_true(tbc_memplan_measure(m, &st, d));
	assert_int_equal(st.arena_bytes, 128);
	assert_int_equal(st.lower_bound, 128);
	assert_int_equal(st.n_in_place, 2);
	assert_true(tbc_memplan_check(m, d));
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

/* A Reshape is a view (lowering aliases it): it shares its input's buffer,
 * which lives as long as either is read; an in-place writer keeps off it
 * while the view is still read. */
static void memplan_places_a_view_in_its_input_buffer(void **state) {
	(void)state;
	tbc_module *m = parse(
		"module ir_version 8 opset 17\n"
		"graph main(%x: f32[4,16]) {\n"
		"  %s: i64[1] = const [64]\n"
		"  %a: f32[4,16] = Exp(%x)\n"
		"  %r: f32[64] = Reshape(%a, %s)\n"
		"  %b: f32[4,16] = Neg(%a)\n"
		"  %c: f32[64] = Abs(%r)\n"
		"  %t: f32[64] = Reshape(%b, %s)\n"
		"  %y: f32[64] = Add(%c, %t)\n"
		"  return %y\n"
		"}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_memplan(m, d));
	tbc_value *a = named(m, "a"), *r = named(m, "r"), *b = named(m, "b"), *c = named(m, "c"), *t = named(m, "t");
	assert_int_equal(r->mem_offset, a->mem_offset);
	assert_int_equal(t->mem_offset, b->mem_offset);
	/* %b is not written over %a: %r, the same bytes, is read after it. */
	assert_int_not_equal(b->mem_offset, a->mem_offset);
	/* %c may go over %r (the buffer's last read), never over %b. */
	assert_int_not_equal(c->mem_offset, b->mem_offset);
	tbc_memplan_stats st;
	assert_true(tbc_memplan_measure(m, &st, d));
	assert_int_equal(st.arena_bytes, 2 * 256);
	assert_int_equal(st.lower_bound, 2 * 256);
	assert_true(tbc_memplan_check(m, d));
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void memplan_check_catches_overlap_of_live_values(void **state) {
	(void)state;
	tbc_module *m = parse(
		"module ir_version 8 opset 17\n"
		"graph main(%x: f32[16], %w: f32[16,16]) {\n"
		"  %a: f32[16] = Exp(%x)\n"
		"  %b: f32[16] = MatMul(%a, %w)\n"
		"  %c: f32[16] = Add(%a, %b)\n"
		"  return %c\n"
		"}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_memplan(m, d));
	assert_true(tbc_memplan_check(m, d));
	/* MatMul may not write over its input, however the sizes match. */
	tbc_value *a = named(m, "a"), *b = named(m, "b");
	b->mem_offset = a->mem_offset;
	assert_false(tbc_memplan_check(m, d));
	assert_int_equal(tbc_diags_first_code(d), TBC_ERR_INTERNAL);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void memplan_check_catches_misalignment_and_missing_places(void **state) {
	(void)state;
	tbc_module *m = parse(
		"module ir_version 8 opset 17\n"
		"graph main(%x: f32[16]) {\n"
		"  %a: f32[16] = Exp(%x)\n"
		"  %b: f32[16] = Neg(%a)\n"
		"  return %b\n"
		"}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_memplan(m, d));
	tbc_value *a = named(m, "a");
	a->mem_offset = 8;
	assert_false(tbc_memplan_check(m, d));
	a->mem_offset = -1;
	assert_false(tbc_memplan_check(m, d));
	a->mem_offset = 0;
	m->main->inputs[0]->mem_offset = 0;
	assert_false(tbc_memplan_check(m, d));
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void memplan_leaves_symbolic_values_and_fused_bodies_unplaced(void **state) {
	(void)state;
	tbc_module *m = parse(
		"module ir_version 8 opset 17\n"
		"graph main(%x: f32[N,4], %y: f32[4]) {\n"
		"  %a: f32[N,4] = Exp(%x)\n"
		"  %b: f32[N,4] = Neg(%a)\n"
		"  %p: f32[4] = Exp(%y)\n"
		"  %q: f32[4] = Neg(%p)\n"
		"  %r: f32[4] = Abs(%q)\n"
		"  %w: f32[4,4] = MatMul(%r, %r)\n"
		"  return %b, %w\n"
		"}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_fusion(m, d));
	assert_true(tbc_pass_memplan(m, d));
	assert_true(tbc_verify(m, d));
	tbc_memplan_stats st;
	assert_true(tbc_memplan_measure(m, &st, d));
	/* %b's group is a model output; %r's group gives %r, placed; %a, %p, %q
	 * live inside Fused bodies. */
	assert_int_equal(st.n_placed, 1);
	assert_int_equal(st.n_unplaced, 0);
	for (const tbc_op *op = m->main->first; op; op = op->next)
		if (op->code == TBC_OP_Fused)
			for (const tbc_op *in = tbc_attr_graph(op, "body")->first; in; in = in->next)
				assert_int_equal(in->outputs[0]->mem_offset, -1);
	assert_true(tbc_memplan_check(m, d));
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void memplan_plans_symbolic_sizes_in_parts_scaled_by_their_symbols(void **state) {
	(void)state;
	tbc_module *m = parse(
		"module ir_version 8 opset 17\n"
		"graph main(%x: f32[N,4], %w: f32[4,4]) {\n"
		"  %k: f32[4,4] = MatMul(%w, %w)\n"
		"  %a: f32[N,4] = MatMul(%x, %k)\n"
		"  %b: f32[N,4] = MatMul(%a, %w)\n"
		"  %c: f32[N,4] = MatMul(%b, %w)\n"
		"  %nz: i64[2,_d0] = NonZero(%c)\n"
		"  %t: i64[_d0,2] = Transpose(%nz) {perm = [1, 0]}\n"
		"  return %t\n"
		"}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_memplan(m, d));
	assert_true(tbc_memplan_check(m, d));
	tbc_memplan_part parts[4];
	assert_int_equal(tbc_memplan_layout(m, parts, 4), 2);
	/* Part 0: %k, 64 bytes.  Part "N": 16 bytes per N, aligned to 64; %c
	 * reuses %a's place, dead before %c starts. */
	assert_int_equal(parts[0].n_syms, 0);
	assert_int_equal(parts[0].bytes, 64);
	assert_int_equal(parts[1].n_syms, 1);
	assert_string_equal(parts[1].syms[0], "N");
	assert_int_equal(parts[1].bytes, 128);
	tbc_value *a = named(m, "a"), *c = named(m, "c"), *nz = named(m, "nz");
	assert_int_equal(a->mem_offset, c->mem_offset);
	assert_int_equal(tbc_memplan_part_of(parts, 2, a), 1);
	assert_int_equal(tbc_memplan_part_of(parts, 2, named(m, "k")), 0);
	/* NonZero's count is known only while running. */
	assert_int_equal(nz->mem_offset, -1);
	assert_int_equal(tbc_memplan_part_of(parts, 2, nz), -1);
	tbc_memplan_stats st;
	assert_true(tbc_memplan_measure(m, &st, d));
	assert_int_equal(st.n_parts, 2);
	assert_int_equal(st.n_placed, 4);
	assert_int_equal(st.n_unplaced, 1);
	assert_int_equal(st.arena_bytes, 64 + 128);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

/* ---- whole models ---- */
static char *path_join(const char *a, const char *b) {
	size_t n = strlen(a) + strlen(b) + 2;
	char *s = malloc(n);
	snprintf(s, n, "%s/%s", a, b);
	return s;
}

static bool exists(const char *p) {
	struct stat st;
	return stat(p, &st) == 0;
}

/* Runs the interpreter; NULL-terminated outputs, or NULL when it fails. */
static tbc_tensor **interpret(const tbc_module *m, tbc_tensor **in, size_t n_in) {
	size_t n_out = tbc_module_output_count(m);
	tbc_tensor **out = calloc(n_out + 1, sizeof *out);
	tbc_diags *d = tbc_diags_create();
	tbc_code c = tbc_interpret(m, in, n_in, out, n_out, d);
	tbc_diags_destroy(d);
	if (c != TBC_OK) {
		free(out);
		return NULL;
	}
	return out;
}

static void free_tensors(tbc_tensor **t, size_t n) {
	if (!t) return;
	for (size_t i = 0; i < n; i++) tbc_tensor_destroy(t[i]);
	free(t);
}

typedef struct model_result {
	bool loaded, ran;
	tbc_memplan_stats plan;
	size_t n_fused;
} model_result;

static size_t count_fused(const tbc_graph *g) {
	size_t n = 0;
	for (const tbc_op *op = g->first; op; op = op->next) n += op->code == TBC_OP_Fused;
	return n;
}

/* Loads path, runs the interpreter on inputs (if any), runs the pipeline
 * with the verifier, checks the plan, runs the interpreter again and wants
 * the same bits. */
static model_result check_model(const char *path, tbc_tensor **in, size_t n_in, bool run_interp) {
	model_result r = {0};
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	if (tbc_module_load_onnx(path, d, &m) != TBC_OK) {
		tbc_diags_destroy(d);
		return r;
	}
	r.loaded = true;
	size_t n_out = tbc_module_output_count(m);
	/* Ops that passes/decompose.c rewrites are computed in the graph's float
	 * type afterwards, not in double as their kernels do: such models are
	 * compared with their expected outputs within tolerance by
	 * tests/unit/test_decompose.c instead. */
	for (const tbc_op *op = m->main->first; op; op = op->next)
		if (op->code == TBC_OP_Attention || op->code == TBC_OP_RotaryEmbedding ||
		    op->code == TBC_OP_SoftmaxCrossEntropyLoss || op->code == TBC_OP_NegativeLogLikelihoodLoss ||
		    op->code == TBC_OP_Einsum || op->code == TBC_OP_CausalConvWithState || op->code == TBC_OP_Det)
			run_interp = false;
	/* passes/simplify.c folds a BatchNormalization into the Conv it reads:
	 * the same values within rounding, not the same bits. */
	bool exact = true;
	for (const tbc_op *op = m->main->first; op; op = op->next)
		if (op->code == TBC_OP_BatchNormalization && op->inputs[0]->def && op->inputs[0]->def->code == TBC_OP_Conv)
			exact = false;
	tbc_tensor **before = run_interp ? interpret(m, in, n_in) : NULL;
	tbc_pipeline_stats st;
	memset(&st, 0, sizeof st);
	tbc_pipeline_options o = tbc_pipeline_defaults();
	o.verify = true;
	o.stats = &st;
	if (!tbc_run_pipeline(m, &o, d)) {
		print_error("%s: pipeline failed\n", path);
		print_diags(d);
		fail();
	}
	if (!tbc_memplan_check(m, d)) {
		print_error("%s: memory plan is wrong\n", path);
		print_diags(d);
		fail();
	}
	r.plan = st.memplan;
	r.n_fused = count_fused(m->main);
	if (before) {
		tbc_tensor **after = interpret(m, in, n_in);
		if (!after) print_error("%s: the optimized module fails in the interpreter\n", path);
		assert_non_null(after);
		for (size_t i = 0; i < n_out; i++) {
			const tbc_tensor *a = before[i], *b = after[i];
			bool same = a->dtype == b->dtype && a->rank == b->rank &&
				    !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims);
			if (same && exact) same = !memcmp(a->data, b->data, (size_t)a->numel * tbc_dtype_size(a->dtype));
			for (int64_t e = 0; same && !exact && e < a->numel; e++) {
				double x = tbc_load_f64(a->dtype, a->data, (size_t)e), y = tbc_load_f64(b->dtype, b->data, (size_t)e);
				same = fabs(x - y) <= 1e-5 + 1e-4 * fabs(x);
			}
			if (!same) print_error("%s: output %zu differs after the passes\n", path, i);
			assert_true(same);
		}
		r.ran = true;
		free_tensors(after, n_out);
	}
	free_tensors(before, n_out);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return r;
}

static tbc_tensor **read_inputs(const char *dir, size_t *n) {
	tbc_tensor **in = calloc(64, sizeof *in);
	*n = 0;
	for (int i = 0; i < 64; i++) {
		char name[64];
		snprintf(name, sizeof name, "test_data_set_0/input_%d.pb", i);
		char *p = path_join(dir, name);
		if (!exists(p)) {
			free(p);
			break;
		}
		tbc_diags *d = tbc_diags_create();
		char *tname = NULL;
		tbc_code c = tbc_tensor_read_file(p, d, &in[*n], &tname);
		free(tname);
		free(p);
		tbc_diags_destroy(d);
		if (c != TBC_OK) break;
		(*n)++;
	}
	return in;
}

/* Cases run through the interpreter before and after: the decomposed
 * ("expanded") functions are chains of elementwise ops and reductions,
 * which is what fusion works on; the others are a few plain ops. */
static bool compare_case(const char *name) {
	static const char *const plain[] = {"test_relu", "test_add_bcast", "test_softmax_axis_1", "test_gelu_tanh_1",
					    "test_reduce_sum_square_default_axes_keepdims_random", "test_shape"};
	if (strstr(name, "expanded")) return true;
	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
		if (!strcmp(name, plain[i])) return true;
	return false;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void every_suite_model_verifies_and_plans_without_overlap(void **state) {
	(void)state;
	const char *src = getenv("TBC_SOURCE_DIR");
	char *root = path_join(src ? src : ".", "../shared/onnx-tests/node");
	struct dirent **list = NULL;
	int n = scandir(root, &list, NULL, by_name);
	if (n < 0) {
		print_message("no suite at %s\n", root);
		free(root);
		TBC_TEST_NEEDS("the ONNX node suite");
	}
	int loaded = 0, compared = 0, fused = 0, compared_fused = 0;
	for (int i = 0; i < n; i++) {
		if (list[i]->d_name[0] != '.') {
			char *dir = path_join(root, list[i]->d_name);
			char *model = path_join(dir, "model.onnx");
			if (exists(model)) {
				size_t n_in = 0;
				bool cmp = compare_case(list[i]->d_name);
				tbc_tensor **in = cmp ? read_inputs(dir, &n_in) : NULL;
				model_result r = check_model(model, in, n_in, cmp);
				loaded += r.loaded;
				compared += r.ran;
				fused += r.n_fused > 0;
				compared_fused += r.ran && r.n_fused > 0;
				free_tensors(in, n_in);
			}
			free(model);
			free(dir);
		}
		free(list[i]);
	}
	free(list);
	free(root);
	print_message("suite: %d models through the pipeline, %d with Fused ops; %d compared in the interpreter, "
		      "%d of them fused\n", loaded, fused, compared, compared_fused);
	assert_true(loaded > 1500);
	assert_true(compared > 300);
	assert_true(compared_fused > 100);
}

/* ResNet-50 and the transformer block of bench/make_models.py, where the
 * models test (or `make_models.py DIR` with TBC_BENCH_MODELS=DIR) wrote them. */
static void bench_models_plan_without_overlap_and_compute_the_same(void **state) {
	(void)state;
	const char *dir = getenv("TBC_BENCH_MODELS");
	char *fallback = NULL;
	if (!dir) {
		const char *bin = getenv("TBC_BINARY_DIR");
		dir = fallback = path_join(bin ? bin : ".", "models");
	}
	const char *names[][3] = {{"resnet50.onnx", "resnet50.image.npy", "ResNet-50"},
				  {"transformer.onnx", "transformer.x.npy", "transformer block"}};
	int done = 0;
	for (int k = 0; k < 2; k++) {
		char *model = path_join(dir, names[k][0]), *input = path_join(dir, names[k][1]);
		if (exists(model) && exists(input)) {
			tbc_tensor *in[1] = {NULL};
			tbc_diags *d = tbc_diags_create();
			char *tname = NULL;
			assert_int_equal(tbc_tensor_read_file(input, d, &in[0], &tname), TBC_OK);
			free(tname);
			tbc_diags_destroy(d);
			model_result r = check_model(model, in, 1, true);
			assert_true(r.loaded && r.ran);
			print_message("%s (batch 1): arena %lld bytes, lower bound %lld (%.3fx), without reuse %lld; "
				      "%lld values placed (%lld in place), %lld left out, %zu Fused ops\n",
				      names[k][2], (long long)r.plan.arena_bytes, (long long)r.plan.lower_bound,
				      r.plan.lower_bound ? (double)r.plan.arena_bytes / (double)r.plan.lower_bound : 0.0,
				      (long long)r.plan.total_bytes,
				      (long long)r.plan.n_placed, (long long)r.plan.n_in_place, (long long)r.plan.n_unplaced,
				      r.n_fused);
			assert_true(r.plan.arena_bytes >= r.plan.lower_bound);
			tbc_tensor_destroy(in[0]);
			done++;
		}
		free(model);
		free(input);
	}
	free(fallback);
	if (!done) {
		TBC_TEST_NEEDS("the bench models (run bench/make_models.py DIR and set TBC_BENCH_MODELS=DIR)");
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(registry_finds_every_pass_by_name),
		cmocka_unit_test(pipeline_dump_after_prints_text_that_parses_back),
		cmocka_unit_test(pipeline_dump_after_all_prints_after_each_pass),
		cmocka_unit_test(pipeline_refuses_unknown_dump_pass),
		cmocka_unit_test(pipeline_records_time_per_pass_and_arena),
		cmocka_unit_test(pipeline_O0_runs_only_memory_planning),
		cmocka_unit_test(pipeline_qdq_fusion_only_when_asked),
		cmocka_unit_test(memplan_reuses_dead_memory_and_writes_in_place),
		cmocka_unit_test(memplan_places_a_view_in_its_input_buffer),
		cmocka_unit_test(memplan_check_catches_overlap_of_live_values),
		cmocka_unit_test(memplan_check_catches_misalignment_and_missing_places),
		cmocka_unit_test(memplan_leaves_symbolic_values_and_fused_bodies_unplaced),
		cmocka_unit_test(memplan_plans_symbolic_sizes_in_parts_scaled_by_their_symbols),
		cmocka_unit_test(every_suite_model_verifies_and_plans_without_overlap),
		cmocka_unit_test(bench_models_plan_without_overlap_and_compute_the_same),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
