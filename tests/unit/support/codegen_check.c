/* See codegen_check.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "tests/unit/support/close.h"
#include "tests/unit/support/codegen_check.h"

/* ---- Building graphs ---------------------------------------------------------*/
model model_new(void) { return (model){.m = tbc_module_new("test"), .seed = 12345}; }

double rnd(model *md) {
	md->seed = md->seed * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(md->seed >> 11) / 9007199254740992.0;
}

void fill(model *md, tbc_tensor *t, double lo, double hi) {
	for (int64_t i = 0; i < t->numel; i++) {
		double v = lo + (hi - lo) * rnd(md);
		if (!tbc_dtype_is_float(t->dtype)) v = floor(v);
		if (t->dtype == TBC_DT_BOOL) v = v > (lo + hi) / 2;
		tbc_store_f64(t->dtype, t->data, (size_t)i, v);
	}
}

tbc_value *input_sym(model *md, tbc_dtype dt, const char *dims, int64_t sym_size, double lo, double hi) {
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
tbc_value *input(model *md, tbc_dtype dt, const char *dims) { return input_sym(md, dt, dims, 3, -3, 3); }

tbc_value *constant(model *md, tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	for (int64_t i = 0; i < t->numel; i++) tbc_store_f64(dt, t->data, (size_t)i, vals[i]);
	tbc_value *v = tbc_graph_add_const(md->m->main, NULL, t);
	tbc_tensor_destroy(t);
	return v;
}

tbc_op *node(model *md, tbc_opcode code, int n, tbc_value *a, tbc_value *b, tbc_value *c) {
	tbc_value *ins[3] = {a, b, c};
	return tbc_op_new(md->m->main, code, "n", n, ins, 1);
}
tbc_value *op1(model *md, tbc_opcode code, tbc_value *a) { return node(md, code, 1, a, NULL, NULL)->outputs[0]; }
tbc_value *op2(model *md, tbc_opcode code, tbc_value *a, tbc_value *b) {
	return node(md, code, 2, a, b, NULL)->outputs[0];
}

/* ---- Checking ----------------------------------------------------------------*/
void print_diags(tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[1024];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "  %s\n", buf);
	}
}

bool exact_bits;
double g_atol = 1e-6;
int g_fuse;
const tbc_target_desc *g_target;

const tbc_target_desc *lower_target(void) {
	static tbc_target_desc cpu;
	if (g_target) return g_target;
	cpu = tbc_target_desc_cpu_default();
	return &cpu;
}
bool g_fold;

void compare(const char *what, const tbc_tensor *want, const tbc_tensor *got, double rtol) {
	assert_int_equal(got->dtype, want->dtype);
	assert_int_equal(got->rank, want->rank);
	for (int d = 0; d < want->rank; d++) assert_int_equal(got->dims[d], want->dims[d]);
	size_t es = tbc_dtype_size(want->dtype);
	for (int64_t i = 0; exact_bits && i < want->numel; i++)
		if (memcmp((const char *)want->data + (size_t)i * es, (const char *)got->data + (size_t)i * es, es)) {
			uint64_t a = 0, b = 0;
			memcpy(&a, (const char *)want->data + (size_t)i * es, es);
			memcpy(&b, (const char *)got->data + (size_t)i * es, es);
			fprintf(stderr, "%s: element %lld: want bits %#llx got %#llx\n", what, (long long)i, (unsigned long long)a,
				(unsigned long long)b);
			fail();
		}
	for (int64_t i = 0; i < want->numel; i++) {
		if (tbc_dtype_is_float(want->dtype)) {
			double a = tbc_load_f64(want->dtype, want->data, (size_t)i), b = tbc_load_f64(got->dtype, got->data, (size_t)i);
			if (!tbc_test_close(b, a, g_atol, rtol)) {
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

/* Infers, then runs the interpreter, the evaluator and the JIT (compiled
 * with options o, NULL for the defaults) on the graph whose outputs are outs;
 * compares; frees the model. */
static bool eval_backwards(void *ctx, const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	(void)ctx;
	kir_eval_options o = {.reverse_parallel = true};
	return kir_eval_with(k, buffers, sizes, &o, d);
}

void check_outputs_with(model *md, int n_out, tbc_value **outs, double rtol, const tbc_compile_options *o) {
	tbc_diags *d = tbc_diags_create();
	tbc_value *own[8];
	if (n_out < 0) { /* the graph's own outputs */
		n_out = md->m->main->n_outputs;
		assert_true(n_out <= 8);
		for (int i = 0; i < n_out; i++) own[i] = md->m->main->outputs[i];
		outs = own;
	} else {
		for (int i = 0; i < n_out; i++) tbc_graph_add_output(md->m->main, outs[i]);
	}
	tbc_infer cx = {.module = md->m, .diags = d};
	if (!tbc_infer_graph(&cx, md->m->main)) print_diags(d);
	assert_int_equal(tbc_diags_count(d), 0);
	tbc_tensor *want[8] = {0}, *got[8] = {0}, *jit[8] = {0};
	tbc_code rc = tbc_interpret(md->m, md->in, (size_t)md->n_in, want, (size_t)n_out, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	if (g_fuse) {
		assert_true(tbc_pass_fusion(md->m, d));
		int n_fused = 0;
		for (const tbc_op *op = md->m->main->first; op; op = op->next) n_fused += op->code == TBC_OP_Fused;
		assert_int_equal(n_fused, g_fuse);
	}
	if (g_fold) assert_true(tbc_pass_fold(md->m, d));

	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	rc = kir_lower(md->m, lower_target(), arena, d, &p);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	/* A device's kernels run their independent loops backwards too: a
	 * race between iterations gives another result. */
	kir_kernel_runner backwards = {eval_backwards, NULL};
	rc = g_target ? kir_program_run(p, &backwards, md->in, (size_t)md->n_in, got, (size_t)n_out, d)
		      : kir_program_eval(p, md->in, (size_t)md->n_in, got, (size_t)n_out, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	for (int i = 0; i < n_out; i++) compare("kernel IR evaluator", want[i], got[i], rtol);

	tbc_jit *j = NULL;
	rc = tbc_jit_compile(md->m, o, d, &j);
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
void check_outputs(model *md, int n_out, tbc_value **outs, double rtol) {
	check_outputs_with(md, n_out, outs, rtol, NULL);
}
void check(model *md, tbc_value *out) { check_outputs(md, 1, &out, 1e-5); }

/* Lowering fails with `code` and a message containing `text`. */
void check_lowering_fails(model *md, tbc_value *out, tbc_code code, const char *text) {
	tbc_diags *d = tbc_diags_create();
	if (out) tbc_graph_add_output(md->m->main, out);
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md->m, lower_target(), arena, d, &p), code);
	assert_true(tbc_diags_count(d) > 0);
	const char *msg = tbc_diags_get(d, 0)->message;
	if (!strstr(msg, text)) fprintf(stderr, "message: %s\n", msg);
	assert_non_null(strstr(msg, text));
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}

/* The last diagnostic holds text (when text is given). */
static void last_holds(tbc_diags *d, size_t seen, const char *who, const char *text) {
	assert_true(tbc_diags_count(d) > seen);
	const char *msg = tbc_diags_get(d, tbc_diags_count(d) - 1)->message;
	if (!text) return;
	if (!strstr(msg, text)) fprintf(stderr, "%s: %s\n", who, msg);
	assert_non_null(strstr(msg, text));
}

/* The compiled runs (evaluator, JIT) fail with a message holding text; the
 * interpreter fails too (with interp_text) when interp_fails, else runs. */
static void runs_fail(model *md, bool interp_fails, const char *interp_text, const char *text) {
	tbc_diags *d = tbc_diags_create();
	size_t n_out = (size_t)md->m->main->n_outputs;
	assert_true(n_out <= 8);
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_tensor *want[8] = {0}, *got[8] = {0}, *jit[8] = {0};
	size_t seen = tbc_diags_count(d);
	tbc_code rc = tbc_interpret(md->m, md->in, (size_t)md->n_in, want, n_out, d);
	if (interp_fails) {
		assert_int_not_equal(rc, TBC_OK);
		last_holds(d, seen, "interpreter", interp_text);
	} else {
		if (rc) print_diags(d);
		assert_int_equal(rc, TBC_OK);
	}
	if (g_fold) assert_true(tbc_pass_fold(md->m, d));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md->m, lower_target(), arena, d, &p), TBC_OK);
	seen = tbc_diags_count(d);
	assert_int_not_equal(kir_program_eval(p, md->in, (size_t)md->n_in, got, n_out, d), TBC_OK);
	last_holds(d, seen, "evaluator", text);
	seen = tbc_diags_count(d);
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(md->m, NULL, d, &j), TBC_OK);
	assert_int_not_equal(tbc_abi_run_serial(tbc_jit_descriptor(j), md->in, (size_t)md->n_in, jit, n_out, d), TBC_OK);
	last_holds(d, seen, "JIT", text);
	tbc_jit_destroy(j);
	for (size_t i = 0; i < n_out; i++) {
		assert_null(got[i]); /* a failed run returns no output */
		assert_null(jit[i]);
		tbc_tensor_destroy(want[i]);
	}
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	tbc_module_destroy(md->m);
}

void check_run_fails_as(model *md, tbc_value *out, const char *interp_text, const char *text) {
	if (out) tbc_graph_add_output(md->m->main, out);
	runs_fail(md, true, interp_text, text);
}

void check_compiled_run_fails(model *md, const char *text) { runs_fail(md, false, NULL, text); }

void eval_and_jit(model *md, const tbc_target_desc *t, bool jit, tbc_tensor **eval_out, tbc_tensor **jit_out) {
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	tbc_code rc = kir_lower(md->m, t, arena, d, &p);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	rc = kir_program_eval(p, md->in, (size_t)md->n_in, eval_out, 1, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	*jit_out = NULL;
	if (jit) {
		tbc_jit *j = NULL;
		rc = tbc_jit_compile(md->m, NULL, d, &j);
		if (rc) print_diags(d);
		assert_int_equal(rc, TBC_OK);
		rc = tbc_abi_run_serial(tbc_jit_descriptor(j), md->in, (size_t)md->n_in, jit_out, 1, d);
		if (rc) print_diags(d);
		assert_int_equal(rc, TBC_OK);
		tbc_jit_destroy(j);
	}
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
}

int text_count(const char *text, const char *what) {
	int n = 0;
	for (const char *p = text; (p = strstr(p, what)); p++) n++;
	return n;
}

char *lowered_text(model *md) {
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	tbc_code rc = kir_lower(md->m, lower_target(), arena, d, &p);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	char *text = kir_program_print(p);
	assert_non_null(text);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
	return text;
}

void check_run_fails(model *md, tbc_value *out) { check_run_fails_as(md, out, NULL, NULL); }

tbc_value *values_input(model *md, tbc_dtype dt, int n, const double *v) {
	char dims[16] = "";
	if (n > 0) snprintf(dims, sizeof dims, "%d", n);
	tbc_value *x = input_sym(md, dt, dims, 0, 0, 1);
	tbc_tensor *t = md->in[md->n_in - 1];
	for (int i = 0; i < (n > 0 ? n : 1); i++) {
		if (tbc_dtype_is_float(dt)) tbc_set_f64(t, i, v[i]);
		else tbc_set_i64(t, i, (int64_t)v[i]);
	}
	return x;
}

void attr_int(tbc_op *op, const char *name, int64_t v) { tbc_op_add_attr(op, name, TBC_ATTR_INT)->i = v; }

void attr_ints(tbc_op *op, const char *name, int n, const int64_t *v) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_INTS);
	a->n = n;
	a->ints = tbc_arena_array(op->graph->module->arena, (size_t)n + 1, sizeof *a->ints);
	if (n > 0) memcpy(a->ints, v, (size_t)n * sizeof *v);
}
