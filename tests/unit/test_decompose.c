/* The decomposition pass (passes/decompose.c): every suite case holding an
 * Attention, RotaryEmbedding, SoftmaxCrossEntropyLoss or
 * NegativeLogLikelihoodLoss op is run through the pass (with the verifier)
 * and then through the interpreter, and must give the expected outputs
 * (rtol 1e-3, atol 1e-7, as the conformance harness).  Ops the pass leaves
 * alone are counted per op, and the counts of decomposed cases must not
 * fall below what the pass handles today.  Small graphs show the symbolic
 * batch kept and what is left alone. */
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
#include "tests/unit/support/close.h"
#include "tests/unit/support/need.h"
#include <sys/stat.h>

#include "ir/ir.h"
#include "passes/passes.h"

static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, i), msg, sizeof msg);
		print_error("%s\n", msg);
	}
}

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

/* The ops the pass rewrites. */
static const tbc_opcode targets[] = {TBC_OP_Attention,
				     TBC_OP_RotaryEmbedding,
				     TBC_OP_SoftmaxCrossEntropyLoss,
				     TBC_OP_NegativeLogLikelihoodLoss,
				     TBC_OP_Einsum,
				     TBC_OP_CausalConvWithState,
				     TBC_OP_Det};
#define N_TARGETS 7

static void count_ops(const tbc_graph *g, int *counts) {
	for (const tbc_op *op = g->first; op; op = op->next) {
		for (int k = 0; k < N_TARGETS; k++) counts[k] += op->code == targets[k];
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int i = 0; i < n; i++) count_ops(at->graphs[i], counts);
		}
	}
}

/* Reads test_data_set_0/<prefix>_N.pb; NULL-free array of *n tensors. */
static tbc_tensor **read_set(const char *dir, const char *prefix, size_t *n) {
	tbc_tensor **t = calloc(64, sizeof *t);
	*n = 0;
	for (int i = 0; i < 64; i++) {
		char name[64];
		snprintf(name, sizeof name, "test_data_set_0/%s_%d.pb", prefix, i);
		char *p = path_join(dir, name);
		if (!exists(p)) {
			free(p);
			break;
		}
		tbc_diags *d = tbc_diags_create();
		char *tname = NULL;
		tbc_code c = tbc_tensor_read_file(p, d, &t[*n], &tname);
		free(tname);
		free(p);
		tbc_diags_destroy(d);
		if (c != TBC_OK) break;
		(*n)++;
	}
	return t;
}

static void free_tensors(tbc_tensor **t, size_t n) {
	if (!t) return;
	for (size_t i = 0; i < n; i++) tbc_tensor_destroy(t[i]);
	free(t);
}

static bool close_to(const tbc_tensor *g, const tbc_tensor *w, const char *what) {
	if (g->dtype != w->dtype || g->rank != w->rank || memcmp(g->dims, w->dims, (size_t)g->rank * sizeof *g->dims)) {
		print_error("%s: dtype or shape differs\n", what);
		return false;
	}
	bool fl = tbc_dtype_is_float(g->dtype);
	for (int64_t i = 0; i < g->numel; i++) {
		if (fl) {
			double a = tbc_load_f64(g->dtype, g->data, (size_t)i), b = tbc_load_f64(w->dtype, w->data, (size_t)i);
			if (!tbc_test_close(a, b, 1e-7, 1e-3)) {
				print_error("%s[%lld]: %.9g, expected %.9g\n", what, (long long)i, a, b);
				return false;
			}
		} else if (tbc_load_i64(g->dtype, g->data, (size_t)i) != tbc_load_i64(w->dtype, w->data, (size_t)i)) {
			print_error("%s[%lld] differs\n", what, (long long)i);
			return false;
		}
	}
	return true;
}

typedef struct tally {
	int cases[N_TARGETS];       /* cases holding the op */
	int decomposed[N_TARGETS];  /* of those, cases where the pass removed every such op */
	int checked;                /* cases run and compared */
} tally;

static void check_case(const char *dir, const char *name, tally *t) {
	char *model = path_join(dir, "model.onnx");
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	if (!exists(model) || tbc_module_load_onnx(model, d, &m) != TBC_OK) {
		free(model);
		tbc_diags_destroy(d);
		return;
	}
	int before[N_TARGETS] = {0}, after[N_TARGETS] = {0};
	count_ops(m->main, before);
	bool any = false;
	for (int k = 0; k < N_TARGETS; k++) any |= before[k] > 0;
	if (any) {
		if (!tbc_pass_decompose(m, d) || !tbc_verify(m, d)) {
			print_error("%s: the pass failed or the result does not verify\n", name);
			print_diags(d);
			fail();
		}
		count_ops(m->main, after);
		for (int k = 0; k < N_TARGETS; k++) {
			t->cases[k] += before[k] > 0;
			t->decomposed[k] += before[k] > 0 && after[k] == 0;
		}
		size_t n_in = 0, n_want = 0, n_out = tbc_module_output_count(m);
		tbc_tensor **in = read_set(dir, "input", &n_in), **want = read_set(dir, "output", &n_want);
		tbc_tensor **got = calloc(n_out + 1, sizeof *got);
		tbc_code c = tbc_interpret(m, in, n_in, got, n_out, d);
		/* A case the interpreter itself fails on before the pass is not
		 * this test's business (the interpreter's expected-failure list). */
		if (c == TBC_OK) {
			bool ok = n_want == n_out;
			for (size_t i = 0; ok && i < n_out; i++) {
				char what[300];
				snprintf(what, sizeof what, "%s output %zu", name, i);
				ok = close_to(got[i], want[i], what);
			}
			if (!ok) print_error("%s: differs from the expected outputs after decomposition\n", name);
			assert_true(ok);
			t->checked++;
		} else {
			print_message("%s: the interpreter fails (%s)\n", name,
				      tbc_diags_count(d) ? tbc_diags_get(d, 0)->message : "?");
		}
		free_tensors(got, n_out);
		free_tensors(in, n_in);
		free_tensors(want, n_want);
	}
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	free(model);
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static void suite_cases_give_expected_outputs_after_decomposition(void **state) {
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
	tally t = {0};
	for (int i = 0; i < n; i++) {
		const char *nm = list[i]->d_name;
		if (nm[0] != '.' && (strstr(nm, "attention") || strstr(nm, "rotary") || strstr(nm, "sce") ||
				     strstr(nm, "nllloss") || strstr(nm, "einsum") || strstr(nm, "causal_conv") || strstr(nm, "test_det_"))) {
			char *dir = path_join(root, nm);
			check_case(dir, nm, &t);
			free(dir);
		}
		free(list[i]);
	}
	free(list);
	free(root);
	for (int k = 0; k < N_TARGETS; k++)
		print_message("%s: %d of %d cases decomposed\n", tbc_ops[targets[k]].name, t.decomposed[k], t.cases[k]);
	print_message("%d cases compared with their expected outputs\n", t.checked);
	/* What the pass handles today (a fall is a regression). */
	assert_true(t.decomposed[0] >= 76);
	assert_true(t.decomposed[1] >= 8);
	assert_true(t.decomposed[2] >= 34);
	assert_true(t.decomposed[3] >= 52);
	assert_true(t.decomposed[4] >= 6);
	assert_true(t.decomposed[5] >= 13);
	assert_true(t.decomposed[6] >= 2);
}

/* ---- Small graphs ---- */
static tbc_module *parse(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	if (!m) print_diags(d);
	assert_non_null(m);
	tbc_infer cx = {.module = m, .diags = d};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

static int count_code(const tbc_module *m, tbc_opcode c) {
	int n = 0;
	for (const tbc_op *op = m->main->first; op; op = op->next) n += op->code == c;
	return n;
}

static void attention_with_symbolic_batch_keeps_the_batch_symbolic(void **state) {
	(void)state;
	tbc_module *m = parse("module ir_version 10 opset 23\n"
			      "graph main(%q: f32[N,2,3,4], %k: f32[N,1,5,4], %v: f32[N,1,5,4]) {\n"
			      "  %y = Attention(%q, %k, %v) {is_causal = 1}\n"
			      "  return %y\n"
			      "}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_decompose(m, d));
	assert_true(tbc_verify(m, d));
	assert_int_equal(count_code(m, TBC_OP_Attention), 0);
	assert_int_equal(count_code(m, TBC_OP_Softmax), 1);
	const tbc_value *y = m->main->outputs[0];
	assert_string_equal(y->name, "y");
	assert_non_null(y->type.dims[0].sym);
	assert_string_equal(y->type.dims[0].sym, "N");
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void attention_with_symbolic_sequence_is_left_alone(void **state) {
	(void)state;
	tbc_module *m = parse("module ir_version 10 opset 23\n"
			      "graph main(%q: f32[1,2,S,4], %k: f32[1,1,S,4], %v: f32[1,1,S,4]) {\n"
			      "  %y = Attention(%q, %k, %v) {is_causal = 1}\n"
			      "  return %y\n"
			      "}\n");
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_decompose(m, d));
	assert_true(tbc_verify(m, d));
	assert_int_equal(count_code(m, TBC_OP_Attention), 1);
	assert_int_equal(tbc_diags_count(d), 0);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

/* Einsum: each equation, decomposed, gives the interpreter's Einsum result
 * on the same (pseudo-random) inputs; a symbolic diagonal stays Einsum. */
typedef struct ein_case {
	const char *eq, *inputs; /* inputs: the graph's parameter list */
	bool decomposed;
} ein_case;

static const ein_case ein_cases[] = {
	{"bij,bjk->bik", "%a: f32[2,3,4], %b: f32[2,4,5]", true},
	{"ij,jk", "%a: f32[3,4], %b: f32[4,5]", true},
	{"ij,jk->ki", "%a: f32[3,4], %b: f32[4,5]", true},
	{"i,j->ij", "%a: f32[3], %b: f32[4]", true},
	{"i,i", "%a: f32[5], %b: f32[5]", true},
	{"ij,ij->", "%a: f64[3,4], %b: f64[3,4]", true},
	{"ij,ij->ij", "%a: f32[3,4], %b: f32[3,4]", true},
	{"bhqd,bhkd->bhqk", "%a: f32[2,3,4,5], %b: f32[2,3,6,5]", true},
	{"abc,cd->dba", "%a: f32[2,3,4], %b: f32[4,5]", true},
	{"abcd,cbe->eda", "%a: f32[2,3,4,5], %b: f32[4,3,6]", true},
	{"...ij,...jk->...ik", "%a: f32[2,3,3,4], %b: f32[3,4,5]", true},
	{"...ij,...jk", "%a: f32[2,1,3,4], %b: f32[3,4,5]", true},
	{"ab,bc,cd->ad", "%a: f32[2,3], %b: f32[3,4], %c: f32[4,5]", true},
	{"ab,bc,cd->", "%a: f32[2,3], %b: f32[3,4], %c: f32[4,5]", true},
	{"ij,kl->", "%a: f32[2,3], %b: f32[4,5]", true},
	{"Ni,Ni->N", "%a: f32[N,3], %b: f32[N,3]", true},
	{"ij->", "%a: f32[3,4]", true},
	{"ij->j", "%a: i32[3,4]", true},
	{"ij->ij", "%a: f32[3,4]", true},
	{"ij,jk->ik", "%a: i64[3,4], %b: i64[4,5]", true},
	{"ii->i", "%a: f32[3,3]", true},
	{"ii", "%a: f32[3,3]", true},
	{"...ii->...i", "%a: f32[2,3,3]", true},
	{"iji->ij", "%a: f32[3,2,3]", true},
	{"iii->i", "%a: f32[3,3,3]", true},
	{"bii,bij->bj", "%a: f32[2,3,3], %b: f32[2,3,4]", true},
	{"Nii->N", "%a: f32[N,3,3]", true},
	{"ii->i", "%a: f32[N,N]", false},
};

/* Parses text (one op holding the output %y), decomposes it, checks whether
 * an op `code` is left (decomposed or not) and compares with the
 * interpreter on the untouched module (inputs: small integers). */
static void same_as_before(const char *text, tbc_opcode code, bool decomposed, const char *what) {
	tbc_module *ref = parse(text), *m = parse(text);
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_pass_decompose(m, d));
	assert_true(tbc_verify(m, d));
	if (count_code(m, code) != (decomposed ? 0 : 1)) {
		print_error("%s: decomposed %d, expected %d\n", what, !count_code(m, code), decomposed);
		fail();
	}
	assert_string_equal(m->main->outputs[0]->name, "y");
	size_t n_in = (size_t)m->main->n_inputs;
	tbc_tensor *in[3] = {0};
	for (size_t i = 0; i < n_in; i++) {
		tbc_type ty = m->main->inputs[i]->type;
		int64_t dims[TBC_MAX_RANK];
		for (int k = 0; k < ty.rank; k++) dims[k] = ty.dims[k].sym ? 3 : ty.dims[k].size;
		in[i] = tbc_tensor_create(ty.dtype, ty.rank, dims);
		for (int64_t k = 0; k < in[i]->numel; k++)
			tbc_store_f64(ty.dtype, in[i]->data, (size_t)k, (double)((k * 7 + (int64_t)i * 3) % 11) - 5.0);
	}
	tbc_tensor *want = NULL, *got = NULL;
	assert_int_equal(tbc_interpret(ref, in, n_in, &want, 1, d), TBC_OK);
	assert_int_equal(tbc_interpret(m, in, n_in, &got, 1, d), TBC_OK);
	if (!close_to(got, want, what)) fail();
	tbc_tensor_destroy(want);
	tbc_tensor_destroy(got);
	for (size_t i = 0; i < n_in; i++) tbc_tensor_destroy(in[i]);
	tbc_module_destroy(ref);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void einsum_equations_give_the_interpreters_results(void **state) {
	(void)state;
	for (size_t c = 0; c < sizeof ein_cases / sizeof *ein_cases; c++) {
		const ein_case *e = &ein_cases[c];
		static const char *const args[3] = {"%a", "%a, %b", "%a, %b, %c"};
		int n_args = 0;
		for (const char *p = e->inputs; *p; p++) n_args += *p == '%';
		char text[600];
		snprintf(text, sizeof text,
			 "module ir_version 10 opset 23\n"
			 "graph main(%s) {\n"
			 "  %%y = Einsum(%s) {equation = \"%s\"}\n"
			 "  return %%y\n"
			 "}\n",
			 e->inputs, args[n_args - 1], e->eq);
		same_as_before(text, TBC_OP_Einsum, e->decomposed, e->eq);
	}
}

/* Det: the cofactor expansion for n <= 3 (batched, symbolic batch); 4x4 stays. */
static void det_small_matrices_give_the_interpreters_results(void **state) {
	(void)state;
	static const struct {
		const char *type;
		bool decomposed;
	} cases[] = {{"f32[1,1]", true}, {"f64[2,2]", true}, {"f32[N,3,3]", true}, {"f32[2,2,3,3]", true}, {"f32[4,4]", false}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		char text[300];
		snprintf(text, sizeof text,
			 "module ir_version 10 opset 23\n"
			 "graph main(%%a: %s) {\n"
			 "  %%y = Det(%%a)\n"
			 "  return %%y\n"
			 "}\n",
			 cases[c].type);
		same_as_before(text, TBC_OP_Det, cases[c].decomposed, cases[c].type);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(attention_with_symbolic_batch_keeps_the_batch_symbolic),
		cmocka_unit_test(attention_with_symbolic_sequence_is_left_alone),
		cmocka_unit_test(einsum_equations_give_the_interpreters_results),
		cmocka_unit_test(det_small_matrices_give_the_interpreters_results),
		cmocka_unit_test(suite_cases_give_expected_outputs_after_decomposition),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
