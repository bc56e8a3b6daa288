/* Reverse-mode differentiation (passes/autodiff.c): every gradient rule
 * against central finite differences in float64 through the reference
 * interpreter, on small shapes.  Each case is a graph returning one value y;
 * the test makes loss = sum(y * r) with a fixed random r, differentiates it
 * by every float input (and every float initializer named w...), and
 * compares each element of each gradient with (L(x + h) - L(x - h)) / 2h.
 * Then the errors: an op without a rule, a loss that is not a float
 * scalar, a value that cannot be differentiated by. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/dtype.h"
#include "ir/ir.h"
#include "passes/passes.h"

#define MAX_WRT 8

static uint64_t rng_state;
static double uniform(void) { /* [0, 1) */
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void fail_diags(const char *what, tbc_diags *d) {
	char msg[1200] = "";
	if (tbc_diags_count(d)) tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
	print_error("%s: %s\n", what, msg);
	fail();
}

static tbc_module *parse(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	if (!m) fail_diags("parse", d);
	tbc_infer cx = {.module = m, .diags = d, .static_ranks = true};
	if (!tbc_infer_graph(&cx, m->main)) fail_diags("infer", d);
	tbc_diags_destroy(d);
	return m;
}

static tbc_value *append(tbc_module *m, tbc_opcode code, int n, tbc_value *a, tbc_value *b) {
	tbc_value *in[2] = {a, b};
	tbc_op *op = tbc_op_new(m->main, code, "", n, in, 1);
	assert_non_null(op);
	tbc_infer cx = {.module = m, .static_ranks = true};
	tbc_diags *d = tbc_diags_create();
	cx.diags = d;
	if (!tbc_infer_op(&cx, op)) fail_diags("infer", d);
	tbc_diags_destroy(d);
	return op->outputs[0];
}

/* loss = sum(y * r), r fixed and random: every element of y matters with
 * its own weight. */
static tbc_value *weighted_sum(tbc_module *m, tbc_value *y) {
	tbc_tensor t = {.dtype = y->type.dtype, .rank = y->type.rank};
	for (int i = 0; i < t.rank; i++) t.dims[i] = y->type.dims[i].size;
	tbc_tensor *r = tbc_tensor_create(t.dtype, t.rank, t.dims);
	assert_non_null(r);
	for (int64_t i = 0; i < r->numel; i++) tbc_store_f64(r->dtype, r->data, (size_t)i, uniform() * 2 - 1);
	tbc_value *rv = tbc_graph_add_const(m->main, NULL, r);
	tbc_tensor_destroy(r);
	tbc_value *p = append(m, TBC_OP_Mul, 2, y, rv);
	tbc_op *s = tbc_op_new(m->main, TBC_OP_ReduceSum, "", 1, &p, 1);
	tbc_attr *a = tbc_op_add_attr(s, "keepdims", TBC_ATTR_INT);
	a->i = 0;
	tbc_infer cx = {.module = m, .static_ranks = true, .diags = tbc_diags_create()};
	assert_true(tbc_infer_op(&cx, s));
	tbc_diags_destroy(cx.diags);
	return s->outputs[0];
}

static double run_loss(const tbc_module *m, tbc_tensor **in, int n_in, tbc_tensor **out, int n_out) {
	tbc_diags *d = tbc_diags_create();
	if (tbc_interpret(m, in, (size_t)n_in, out, (size_t)n_out, d) != TBC_OK) fail_diags("interpret", d);
	tbc_diags_destroy(d);
	return tbc_load_f64(out[0]->dtype, out[0]->data, 0);
}

static bool is_float(tbc_dtype dt) { return dt == TBC_DT_F64 || dt == TBC_DT_F32; }

/* Inputs named p... are positive (Log, Sqrt, a divisor); bools are random. */
static tbc_tensor *make_input(const tbc_value *v) {
	int64_t dims[TBC_MAX_RANK];
	for (int i = 0; i < v->type.rank; i++) dims[i] = v->type.dims[i].size;
	tbc_tensor *t = tbc_tensor_create(v->type.dtype, v->type.rank, dims);
	assert_non_null(t);
	bool pos = v->name && v->name[0] == 'p';
	for (int64_t i = 0; i < t->numel; i++) {
		double u = uniform();
		double x = t->dtype == TBC_DT_BOOL ? (u < 0.5) : pos ? 0.5 + u : 2 * u - 1;
		tbc_store_f64(t->dtype, t->data, (size_t)i, x);
	}
	return t;
}

/* Differentiates the case's loss and checks every gradient element. */
static void check_grads(const char *text) {
	rng_state = 12345;
	tbc_module *m = parse(text);
	tbc_graph *g = m->main;
	assert_int_equal(g->n_outputs, 1);
	tbc_value *loss = weighted_sum(m, g->outputs[0]);
	tbc_value *wrt[MAX_WRT], *grads[MAX_WRT];
	tbc_tensor *data[MAX_WRT]; /* the tensor each wrt value reads */
	tbc_tensor *in[MAX_WRT];
	int n_wrt = 0;
	for (int i = 0; i < g->n_inputs; i++) {
		in[i] = make_input(g->inputs[i]);
		if (is_float(g->inputs[i]->type.dtype)) {
			data[n_wrt] = in[i];
			wrt[n_wrt++] = g->inputs[i];
		}
	}
	for (int i = 0; i < g->n_consts; i++)
		if (g->consts[i]->name && g->consts[i]->name[0] == 'w' && is_float(g->consts[i]->type.dtype)) {
			data[n_wrt] = g->consts[i]->constant;
			wrt[n_wrt++] = g->consts[i];
		}
	assert_true(n_wrt > 0);
	tbc_diags *d = tbc_diags_create();
	if (!tbc_autodiff(m, loss, n_wrt, wrt, grads, d)) fail_diags("autodiff", d);
	g->n_outputs = 0;
	assert_true(tbc_graph_add_output(g, loss));
	for (int k = 0; k < n_wrt; k++) assert_true(tbc_graph_add_output(g, grads[k]));
	if (!tbc_verify(m, d)) fail_diags("verify", d);
	tbc_diags_destroy(d);

	tbc_tensor *out[MAX_WRT + 1] = {NULL};
	run_loss(m, in, g->n_inputs, out, g->n_outputs);
	const double h = 1e-6;
	for (int k = 0; k < n_wrt; k++) {
		tbc_tensor *t = data[k], *gr = out[k + 1];
		assert_int_equal(gr->numel, t->numel);
		for (int64_t e = 0; e < t->numel; e++) {
			double x0 = tbc_load_f64(t->dtype, t->data, (size_t)e);
			tbc_tensor *o2[MAX_WRT + 1];
			tbc_store_f64(t->dtype, t->data, (size_t)e, x0 + h);
			double lp = run_loss(m, in, g->n_inputs, o2, g->n_outputs);
			for (int i = 0; i < g->n_outputs; i++) tbc_tensor_destroy(o2[i]);
			tbc_store_f64(t->dtype, t->data, (size_t)e, x0 - h);
			double lm = run_loss(m, in, g->n_inputs, o2, g->n_outputs);
			for (int i = 0; i < g->n_outputs; i++) tbc_tensor_destroy(o2[i]);
			tbc_store_f64(t->dtype, t->data, (size_t)e, x0);
			double fd = (lp - lm) / (2 * h), an = tbc_load_f64(gr->dtype, gr->data, (size_t)e);
			if (!(fabs(fd - an) <= 1e-6 + 1e-5 * fabs(fd))) {
				char name[64];
				print_error("d loss / d %s[%lld]: analytic %.9g, finite differences %.9g\n",
					    tbc_value_display_name(wrt[k], name, sizeof name), (long long)e, an, fd);
				fail();
			}
		}
	}
	for (int i = 0; i < g->n_outputs; i++) tbc_tensor_destroy(out[i]);
	for (int i = 0; i < g->n_inputs; i++) tbc_tensor_destroy(in[i]);
	tbc_module_destroy(m);
}

#define HEAD "module ir_version 8 opset 21\n"

/* ---- Elementwise, with broadcasting ------------------------------------------ */
static void add_sub_mul_broadcast_both_ways(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%a: f64[2,1,3], %b: f64[4,1]) {\n  %y = Add(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[3], %b: f64[2,3]) {\n  %y = Sub(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3], %b: f64[]) {\n  %y = Mul(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3]) {\n  %y = Mul(%a, %a)\n  return %y\n}\n");
}

static void div_and_pow(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%a: f64[2,3], %pb: f64[1,3]) {\n  %y = Div(%a, %pb)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%pa: f64[2,3], %b: f64[3]) {\n  %y = Pow(%pa, %b)\n  return %y\n}\n");
}

static void activations(void **state) {
	(void)state;
	const char *ops[] = {"Relu", "Sigmoid", "Tanh", "Neg", "Exp", "Erf", "Identity", "Gelu", "Abs", "Sin",
			     "Cos", "Softplus", "Softsign", "Elu", "HardSigmoid", "Swish"};
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		char text[512];
		snprintf(text, sizeof text, HEAD "graph main(%%x: f64[3,4]) {\n  %%y = %s(%%x)\n  return %%y\n}\n", ops[i]);
		check_grads(text);
	}
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %y = LeakyRelu(%x) {alpha = 0.2}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %y = Gelu(%x) {approximate = \"tanh\"}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%px: f64[3,4]) {\n  %y = Log(%px)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%px: f64[3,4]) {\n  %y = Sqrt(%px)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%px: f64[3,4]) {\n  %y = Reciprocal(%px)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %y = Elu(%x) {alpha = 0.7}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %y = HardSigmoid(%x) {alpha = 0.6, beta = 0.4}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4], %s: f64[3,1]) {\n  %y = PRelu(%x, %s)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %lo: f64[] = const [-0.5]\n  %hi: f64[] = const [0.3]\n"
			 "  %y = Clip(%x, %lo, %hi)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %hi: f64[] = const [0.3]\n  %y = Clip(%x, _, %hi)\n  return %y\n}\n");
}

static void variadic_sum_mean_max_min(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%a: f64[2,3], %b: f64[3], %c: f64[2,1]) {\n  %y = Sum(%a, %b, %c)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3], %b: f64[3], %c: f64[2,1]) {\n  %y = Mean(%a, %b, %c)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3], %b: f64[3]) {\n  %y = Max(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3], %b: f64[2,3]) {\n  %y = Min(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3]) {\n  %p: i64[4] = const [1, 0, 2, 2]\n  %y = Pad(%x, %p)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,2]) {\n  %p: i64[2] = const [1, 3]\n  %ax: i64[1] = const [-2]\n"
			 "  %y = Pad(%x, %p, _, %ax)\n  return %y\n}\n");
}

static void softmax_and_log_softmax_over_each_axis(void **state) {
	(void)state;
	const char *ops[] = {"Softmax", "LogSoftmax"};
	for (int i = 0; i < 2; i++)
		for (int axis = -1; axis < 3; axis++) {
			char text[512];
			snprintf(text, sizeof text,
				 HEAD "graph main(%%x: f64[2,3,4]) {\n  %%y = %s(%%x) {axis = %d}\n  return %%y\n}\n", ops[i], axis);
			check_grads(text);
		}
}

static void where_selects_the_gradient(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%c: bool[2,3], %a: f64[2,3], %b: f64[3]) {\n  %y = Where(%c, %a, %b)\n  return %y\n}\n");
}

/* ---- Data movement ------------------------------------------------------------ */
static void reshape_flatten_squeeze_transpose_expand_concat(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %s: i64[2] = const [4, 6]\n  %y = Reshape(%x, %s)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %y = Flatten(%x) {axis = 2}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,1,4]) {\n  %a: i64[1] = const [1]\n  %y = Squeeze(%x, %a)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,4]) {\n  %a: i64[1] = const [0]\n  %y = Unsqueeze(%x, %a)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %y = Transpose(%x) {perm = [2, 0, 1]}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3]) {\n  %y = Transpose(%x)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,1]) {\n  %s: i64[3] = const [2, 3, 4]\n  %y = Expand(%x, %s)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3], %b: f64[2,1]) {\n  %y = Concat(%a, %b, %a) {axis = 1}\n  return %y\n}\n");
}

static void split_slice_gather(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[2,5]) {\n  %s: i64[2] = const [2, 3]\n  %a, %b = Split(%x, %s) {axis = 1}\n"
			 "  %y = Mul(%a, %a)\n  return %y\n}\n"); /* b unread: zeros */
	check_grads(HEAD "graph main(%x: f64[4,6]) {\n  %s: i64[2] = const [2, 2]\n  %a, %b = Split(%x, %s) {axis = 0}\n"
			 "  %y = Sub(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[4,6]) {\n  %st: i64[2] = const [1, -4]\n  %en: i64[2] = const [3, 100]\n"
			 "  %ax: i64[2] = const [0, 1]\n  %y = Slice(%x, %st, %en, %ax)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[3,4,5]) {\n  %st: i64[1] = const [1]\n  %en: i64[1] = const [-1]\n"
			 "  %ax: i64[1] = const [-1]\n  %sp: i64[1] = const [1]\n  %y = Slice(%x, %st, %en, %ax, %sp)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%e: f64[5,3]) {\n  %i: i64[2,3] = const [0, 4, 2, -1, 0, 0]\n  %y = Gather(%e, %i)\n"
			 "  return %y\n}\n"); /* rows read twice add up; -1 is row 4 */
	/* steps other than 1: 2 and 3 forwards, -1 and -2 backwards, on two axes at once */
	check_grads(HEAD "graph main(%x: f64[7,9]) {\n  %st: i64[2] = const [1, 8]\n  %en: i64[2] = const [100, -100]\n"
			 "  %ax: i64[2] = const [0, 1]\n  %sp: i64[2] = const [2, -3]\n  %y = Slice(%x, %st, %en, %ax, %sp)\n"
			 "  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,8,3]) {\n  %st: i64[2] = const [-1, 0]\n  %en: i64[2] = const [-9, 3]\n"
			 "  %ax: i64[2] = const [1, 2]\n  %sp: i64[2] = const [-1, 2]\n  %y = Slice(%x, %st, %en, %ax, %sp)\n"
			 "  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[6]) {\n  %st: i64[1] = const [0]\n  %en: i64[1] = const [6]\n"
			 "  %ax: i64[1] = const [0]\n  %sp: i64[1] = const [3]\n  %y = Slice(%x, %st, %en, %ax, %sp)\n"
			 "  return %y\n}\n");
	/* Gather along other axes: 1 of 3 with 2-D indices (repeats, a negative), the last */
	check_grads(HEAD "graph main(%e: f64[2,5,3]) {\n  %i: i64[2,2] = const [0, 4, -1, 0]\n"
			 "  %y = Gather(%e, %i) {axis = 1}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%e: f64[4,3]) {\n  %i: i64[3] = const [2, 2, -3]\n"
			 "  %y = Gather(%e, %i) {axis = -1}\n  return %y\n}\n");
}

static void layer_normalization(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[2,3,4], %s: f64[4], %b: f64[4]) {\n"
			 "  %y = LayerNormalization(%x, %s, %b) {epsilon = 0.001}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4], %s: f64[3,4]) {\n"
			 "  %y = LayerNormalization(%x, %s) {axis = 1}\n  return %y\n}\n");
}

static void reduce_sum_and_mean(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %a: i64[1] = const [1]\n  %y = ReduceSum(%x, %a) {keepdims = 0}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %a: i64[2] = const [-1, 0]\n  %y = ReduceSum(%x, %a)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %y = ReduceMean(%x) {keepdims = 0}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4]) {\n  %a: i64[2] = const [0, 2]\n  %y = ReduceMean(%x, %a) {keepdims = 0}\n  return %y\n}\n");
}

/* ---- Contractions ------------------------------------------------------------- */
static void matmul_batched_broadcast_and_vectors(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%a: f64[3,4], %b: f64[4,5]) {\n  %y = MatMul(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3,4], %b: f64[4,5]) {\n  %y = MatMul(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,2,3,4], %b: f64[4,5]) {\n  %y = MatMul(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,1,3,4], %b: f64[3,4,2]) {\n  %y = MatMul(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[4], %b: f64[2,4,5]) {\n  %y = MatMul(%a, %b)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%a: f64[2,3,4], %b: f64[4]) {\n  %y = MatMul(%a, %b)\n  return %y\n}\n");
}

static void gemm_every_transpose_alpha_beta_and_bias_shape(void **state) {
	(void)state;
	const char *c_types[] = {"f64[5]", "f64[3,1]", "f64[3,5]", "f64[]"};
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int c = 0; c < 4; c++) {
				char text[1024];
				snprintf(text, sizeof text,
					 HEAD "graph main(%%a: f64[%s], %%b: f64[%s], %%c: %s) {\n"
					      "  %%y = Gemm(%%a, %%b, %%c) {alpha = 0.7, beta = 1.3, transA = %d, transB = %d}\n"
					      "  return %%y\n}\n",
					 ta ? "4,3" : "3,4", tb ? "5,4" : "4,5", c_types[c], ta, tb);
				check_grads(text);
			}
	check_grads(HEAD "graph main(%a: f64[3,4], %b: f64[4,5]) {\n  %y = Gemm(%a, %b)\n  return %y\n}\n");
}

static void conv_strides_dilations_pads_groups(void **state) {
	(void)state;
	const struct {
		const char *x, *w, *b, *attrs;
	} cases[] = {
		{"1,2,5,5", "3,2,3,3", "3", ""},
		{"2,2,6,5", "3,2,3,2", "3", "{strides = [2, 2], pads = [1, 0, 1, 1]}"},
		{"1,2,7,7", "2,2,3,3", NULL, "{dilations = [2, 2], pads = [1, 1, 1, 1]}"},
		{"2,4,5,5", "4,2,3,3", "4", "{group = 2, strides = [2, 1], pads = [1, 1, 0, 0]}"},
		{"1,3,5,5", "3,1,3,3", NULL, "{group = 3, pads = [1, 1, 1, 1]}"},
		{"2,2,7", "3,2,3", "3", "{strides = [2], dilations = [2], pads = [2, 1]}"},
		{"1,2,6,6", "2,2,3,3", NULL, "{auto_pad = \"SAME_UPPER\", strides = [2, 2]}"},
		{"1,2,6,6", "2,2,2,2", NULL, "{auto_pad = \"SAME_LOWER\"}"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char text[1024];
		if (cases[i].b)
			snprintf(text, sizeof text,
				 HEAD "graph main(%%x: f64[%s], %%w: f64[%s], %%b: f64[%s]) {\n  %%y = Conv(%%x, %%w, %%b) %s\n  return %%y\n}\n",
				 cases[i].x, cases[i].w, cases[i].b, cases[i].attrs);
		else
			snprintf(text, sizeof text,
				 HEAD "graph main(%%x: f64[%s], %%w: f64[%s]) {\n  %%y = Conv(%%x, %%w) %s\n  return %%y\n}\n",
				 cases[i].x, cases[i].w, cases[i].attrs);
		check_grads(text);
	}
}

/* ConvTranspose, the adjoint of Conv: strides with output_padding, pads,
 * dilations, groups, 1-D. */
static void conv_transpose_strides_pads_output_padding_groups(void **state) {
	(void)state;
	const struct {
		const char *x, *w, *b, *attrs;
	} cases[] = {
		{"1,2,3,3", "2,3,3,3", "3", ""},
		{"2,2,3,4", "2,2,3,2", "2", "{strides = [2, 2], pads = [1, 0, 1, 1]}"},
		{"1,2,3,3", "2,2,3,3", NULL, "{strides = [2, 3], output_padding = [1, 2]}"},
		{"1,2,4,4", "2,1,3,3", NULL, "{dilations = [2, 2], pads = [1, 1, 1, 1]}"},
		{"2,4,3,3", "4,1,3,3", "2", "{group = 2, strides = [2, 1], pads = [1, 1, 0, 0]}"},
		{"2,2,4", "2,3,3", "3", "{strides = [2], dilations = [2], pads = [2, 1], output_padding = [1]}"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char text[1024];
		if (cases[i].b)
			snprintf(text, sizeof text,
				 HEAD "graph main(%%x: f64[%s], %%w: f64[%s], %%b: f64[%s]) {\n  %%y = ConvTranspose(%%x, %%w, %%b) %s\n"
				      "  return %%y\n}\n",
				 cases[i].x, cases[i].w, cases[i].b, cases[i].attrs);
		else
			snprintf(text, sizeof text,
				 HEAD "graph main(%%x: f64[%s], %%w: f64[%s]) {\n  %%y = ConvTranspose(%%x, %%w) %s\n  return %%y\n}\n",
				 cases[i].x, cases[i].w, cases[i].attrs);
		check_grads(text);
	}
}

/* BatchNormalization with the batch's statistics (training_mode) and with
 * the running ones; the running statistics are inputs here (%p...: drawn
 * positive) but not differentiated: constants. */
static void batch_normalization_training_and_inference(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[3,2,2,2], %s: f64[2], %b: f64[2]) {\n"
			 "  %m: f64[2] = const [0.1, -0.2]\n  %v: f64[2] = const [0.5, 1.5]\n"
			 "  %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.001, training_mode = 1}\n"
			 "  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[4,3], %s: f64[3], %b: f64[3]) {\n"
			 "  %m: f64[3] = const [0.1, -0.2, 0.3]\n  %v: f64[3] = const [0.5, 1.5, 2]\n"
			 "  %y = BatchNormalization(%x, %s, %b, %m, %v) {training_mode = 1}\n"
			 "  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,2,3], %s: f64[2], %b: f64[2]) {\n"
			 "  %m: f64[2] = const [0.1, -0.2]\n  %v: f64[2] = const [0.5, 1.5]\n"
			 "  %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.01}\n"
			 "  return %y\n}\n");
}

/* ---- Windows -------------------------------------------------------------------- */
static void max_average_and_global_average_pool(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[1,2,4,4]) {\n  %y = MaxPool(%x) {kernel_shape = [2, 2], strides = [2, 2]}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,1,5,5]) {\n  %y = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,2,5,4]) {\n  %y, %i = MaxPool(%x) {kernel_shape = [2, 2], strides = [2, 1]}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,2,4,4]) {\n  %y = AveragePool(%x) {kernel_shape = [2, 2], strides = [2, 2]}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,2,5,5]) {\n  %y = AveragePool(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,2,5,5]) {\n  %y = AveragePool(%x) {kernel_shape = [3, 2], pads = [1, 0, 1, 1], count_include_pad = 1}\n  return %y\n}\n");
	/* ceil_mode: the last window overhangs the end (5 and 6 wide, windows of 2 or 3 by 2) */
	check_grads(HEAD "graph main(%x: f64[1,2,5,6]) {\n  %y = MaxPool(%x) {kernel_shape = [2, 3], strides = [2, 2], ceil_mode = 1}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,2,5,6]) {\n  %y = AveragePool(%x) {kernel_shape = [2, 3], strides = [2, 2], ceil_mode = 1}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,1,7,5]) {\n  %y = AveragePool(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1, count_include_pad = 1}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[1,1,7,5]) {\n  %y = AveragePool(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[2,3,4,5]) {\n  %y = GlobalAveragePool(%x)\n  return %y\n}\n");
}

/* ---- Whole models ------------------------------------------------------------- */
static void mlp_with_initializers(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[4,3]) {\n"
			 "  %w1: f64[3,2] = const [0.5, -0.3, 0.8, 0.1, -0.6, 0.4]\n"
			 "  %w2: f64[2] = const [0.2, -0.1]\n"
			 "  %w3: f64[2,3] = const [0.3, -0.7, 0.2, 0.9, 0.1, -0.4]\n"
			 "  %h = Gemm(%x, %w1, %w2)\n"
			 "  %r = Tanh(%h)\n"
			 "  %o = MatMul(%r, %w3)\n"
			 "  %y = LogSoftmax(%o) {axis = 1}\n"
			 "  return %y\n}\n");
}

static void small_cnn(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[2,1,6,6], %k: f64[2,1,3,3], %kb: f64[2], %w: f64[8,3]) {\n"
			 "  %c = Conv(%x, %k, %kb) {pads = [1, 1, 1, 1]}\n"
			 "  %r = Relu(%c)\n"
			 "  %p = MaxPool(%r) {kernel_shape = [3, 3], strides = [3, 3]}\n"
			 "  %f = Flatten(%p)\n"
			 "  %o = MatMul(%f, %w)\n"
			 "  %y = Softmax(%o)\n"
			 "  return %y\n}\n");
}

/* ---- Errors ----------------------------------------------------------------------- */
static void expect_error(const char *text, int loss_output, const char *want) {
	tbc_module *m = parse(text);
	tbc_graph *g = m->main;
	tbc_value *wrt[MAX_WRT], *grads[MAX_WRT];
	int n = 0;
	for (int i = 0; i < g->n_inputs; i++) wrt[n++] = g->inputs[i];
	tbc_value *loss = g->outputs[loss_output];
	tbc_op *before = g->last;
	int consts = g->n_consts;
	tbc_diags *d = tbc_diags_create();
	assert_false(tbc_autodiff(m, loss, n, wrt, grads, d));
	assert_true(tbc_diags_count(d) > 0);
	char msg[1200];
	tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
	if (!strstr(msg, want)) {
		print_error("message '%s' lacks '%s'\n", msg, want);
		fail();
	}
	/* Nothing was left behind. */
	assert_ptr_equal(g->last, before);
	assert_int_equal(g->n_consts, consts);
	for (int i = 0; i < n; i++) assert_null(grads[i]);
	assert_true(tbc_verify(m, d));
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

static void an_op_without_a_rule_is_named(void **state) {
	(void)state;
	expect_error(HEAD "graph main(%x: f64[3]) {\n  %s = Atan(%x) @my_atan\n  %t = Relu(%s)\n"
			  "  %y = ReduceSum(%t) {keepdims = 0}\n  return %y\n}\n",
		     0, "node 'my_atan' (Atan): gradient: no gradient rule for Atan");
}

static void the_loss_must_be_a_float_scalar(void **state) {
	(void)state;
	expect_error(HEAD "graph main(%x: f64[3]) {\n  %y = Relu(%x)\n  return %y\n}\n", 0, "float scalar");
	expect_error(HEAD "graph main(%x: f64[3]) {\n  %a = ArgMax(%x) {keepdims = 0}\n  return %a\n}\n", 0, "float scalar");
}

static void only_inputs_and_initializers_are_differentiated_by(void **state) {
	(void)state;
	expect_error(HEAD "graph main(%x: f64[3], %i: i64[3]) {\n  %y = ReduceSum(%x) {keepdims = 0}\n  return %y\n}\n", 0,
		     "can be differentiated by");
}

/* Dropout: at inference the identity; in training dy times the mask and the
 * scale the op drew (its seed, and tbc's seed offset when given: the mask
 * is fixed for the finite differences, as the seed fixes it). */
static void dropout_in_both_modes(void **state) {
	(void)state;
	check_grads(HEAD "graph main(%x: f64[3,4]) {\n  %y = Dropout(%x)\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[6,5]) {\n  %r: f32[] = const [0.4]\n  %t: bool[] = const [1]\n"
			 "  %y = Dropout(%x, %r, %t) {seed = 3}\n  return %y\n}\n");
	check_grads(HEAD "graph main(%x: f64[6,5]) {\n  %r: f64[] = const [0.25]\n  %t: bool[] = const [1]\n"
			 "  %o: i64[] = const [2000006]\n  %y = Dropout(%x, %r, %t, %o) {seed = 3}\n  return %y\n}\n");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_sub_mul_broadcast_both_ways),
		cmocka_unit_test(dropout_in_both_modes),
		cmocka_unit_test(div_and_pow),
		cmocka_unit_test(activations),
		cmocka_unit_test(variadic_sum_mean_max_min),
		cmocka_unit_test(softmax_and_log_softmax_over_each_axis),
		cmocka_unit_test(where_selects_the_gradient),
		cmocka_unit_test(reshape_flatten_squeeze_transpose_expand_concat),
		cmocka_unit_test(split_slice_gather),
		cmocka_unit_test(layer_normalization),
		cmocka_unit_test(reduce_sum_and_mean),
		cmocka_unit_test(matmul_batched_broadcast_and_vectors),
		cmocka_unit_test(gemm_every_transpose_alpha_beta_and_bias_shape),
		cmocka_unit_test(conv_strides_dilations_pads_groups),
		cmocka_unit_test(conv_transpose_strides_pads_output_padding_groups),
		cmocka_unit_test(batch_normalization_training_and_inference),
		cmocka_unit_test(max_average_and_global_average_pool),
		cmocka_unit_test(mlp_with_initializers),
		cmocka_unit_test(small_cnn),
		cmocka_unit_test(an_op_without_a_rule_is_named),
		cmocka_unit_test(the_loss_must_be_a_float_scalar),
		cmocka_unit_test(only_inputs_and_initializers_are_differentiated_by),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
