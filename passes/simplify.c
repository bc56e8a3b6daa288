/* Algebraic simplification.
 *
 * Does: folds an inference BatchNormalization that reads a Conv into that
 * Conv's weights and bias (else, see bn_as_affine, writes it as
 * elementwise Sub, Mul, Add with per-channel constants),
 *   s[m] = scale[m] / sqrt(var[m] + epsilon)
 *   W'[m, ...] = W[m, ...] * s[m]
 *   B'[m] = (B[m] - mean[m]) * s[m] + bias[m]        (B = 0 without one)
 * so the normalization costs nothing while running (ResNet-50: 53 kernels
 * that each read and wrote a whole activation).  The Conv then writes what
 * the BatchNormalization wrote; its old weights, no longer read, are left
 * to dce.
 * When: the BatchNormalization is not in training mode and gives only Y
 * (its running statistics are not read), its scale, bias, mean and var are
 * constants of one value per output channel; the Conv's weights (and bias)
 * are constants, f32 or f64; the Conv is in the BatchNormalization's graph,
 * its result has no other reader and is no graph's output; Y is not a
 * model output (its name is the interface).
 * Requires: a verified, inferred module; constants folded (run after fold).
 * Guarantees: Y within rounding of what the interpreter computes (the new
 * weights are computed in double and rounded once to the weights' dtype;
 * the sums then run over scaled terms).  Every graph, subgraphs included. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/kernels/kernels.h"
#include "passes/passes.h"
#include "passes/util.h"

typedef struct simplifier {
	tbc_module *m;
	tbc_diags *d;
	bool oom, failed;
} simplifier;

/* The BatchNormalization's per-channel parameter i (1..4) as a constant of
 * M values, else NULL. */
static const tbc_tensor *bn_param(const tbc_op *bn, int i, int64_t M) {
	const tbc_tensor *t = tbc_input_const(bn, i);
	return t && t->rank == 1 && t->dims[0] == M ? t : NULL;
}

/* Whether output i of op is read or returned anywhere. */
static bool is_used(const tbc_module *m, const tbc_op *op, int i) {
	const tbc_value *v = op->outputs[i];
	return v && (tbc_value_use_count(v) > 0 || pass_is_returned(m, v));
}

static bool fold_bn_into_conv(simplifier *S, tbc_graph *g, tbc_op *bn) {
	tbc_value *x = bn->inputs[0], *y = bn->outputs[0];
	tbc_op *conv = x->def;
	/* The Conv in the same graph: the new weights become constants of it. */
	if (!conv || conv->code != TBC_OP_Conv || conv->graph != g || tbc_attr_int(bn, "training_mode", 0) != 0) return false;
	for (int i = 1; i < bn->n_outputs; i++)
		if (is_used(S->m, bn, i)) return false;
	if (tbc_value_use_count(x) != 1 || pass_is_returned(S->m, x) || pass_is_model_output(S->m, y)) return false;
	const tbc_tensor *w = tbc_input_const(conv, 1);
	bool has_b = conv->n_inputs > 2 && conv->inputs[2];
	const tbc_tensor *b = has_b ? tbc_input_const(conv, 2) : NULL;
	if (!w || (has_b && !b) || w->rank < 3) return false;
	if (w->dtype != TBC_DT_F32 && w->dtype != TBC_DT_F64) return false;
	int64_t M = w->dims[0], per = M > 0 ? w->numel / M : 0;
	if (b && (b->rank != 1 || b->dims[0] != M || b->dtype != w->dtype)) return false;
	const tbc_tensor *scale = bn_param(bn, 1, M), *bias = bn_param(bn, 2, M), *mean = bn_param(bn, 3, M),
			 *var = bn_param(bn, 4, M);
	if (!scale || !bias || !mean || !var) return false;
	double eps = tbc_attr_float(bn, "epsilon", 1e-5);

	/* The new weights: a copy in the module's arena, scaled in place (the
	 * module owns it, as it does any constant); the bias, M values. */
	tbc_tensor *w2 = tbc_tensor_copy_to_arena(S->m->arena, w), *b2 = tbc_tensor_create(w->dtype, 1, &M);
	if (!w2 || !b2) {
		tbc_tensor_destroy(b2);
		S->oom = true;
		return false;
	}
	for (int64_t c = 0; c < M; c++) {
		double s = tbc_get_f64(scale, c) / sqrt(tbc_get_f64(var, c) + eps);
		if (w->dtype == TBC_DT_F32) {
			float *to = (float *)w2->data + c * per;
			for (int64_t i = 0; i < per; i++) to[i] = (float)((double)to[i] * s);
		} else {
			double *to = (double *)w2->data + c * per;
			for (int64_t i = 0; i < per; i++) to[i] *= s;
		}
		double b0 = b ? tbc_get_f64(b, c) : 0;
		tbc_set_f64(b2, c, (b0 - tbc_get_f64(mean, c)) * s + tbc_get_f64(bias, c));
	}
	char wn[256], bnm[256], buf[200];
	snprintf(wn, sizeof wn, "%s_bn_w", tbc_value_display_name(y, buf, sizeof buf));
	snprintf(bnm, sizeof bnm, "%s_bn_b", tbc_value_display_name(y, buf, sizeof buf));
	tbc_value *wv = tbc_graph_add_const_shared(g, wn, w2), *bv = tbc_graph_add_const(g, bnm, b2);
	tbc_tensor_destroy(b2);
	if (!wv || !bv || (conv->n_inputs < 3 && !tbc_op_resize_inputs(conv, 3))) {
		S->oom = true;
		return false;
	}
	tbc_op_set_input(conv, 1, wv);
	tbc_op_set_input(conv, 2, bv);
	pass_replace_value(S->m, y, x);
	pass_remove_op(bn);
	return true;
}

/* A new op of g before `at` reading in, its result inferred; NULL on failure. */
static tbc_value *op_before(simplifier *S, tbc_graph *g, tbc_op *at, tbc_opcode code, tbc_value *a, tbc_value *b) {
	tbc_value *in[2] = {a, b};
	tbc_op *op = tbc_op_new(g, code, at->name, 2, in, 1);
	if (!op) {
		S->oom = true;
		return NULL;
	}
	pass_unlink(op);
	pass_insert_before(op, at);
	tbc_infer cx = {.module = S->m, .diags = S->d};
	if (!tbc_infer_op(&cx, op)) {
		S->failed = true;
		return NULL;
	}
	return op->outputs[0];
}

/* The per-channel constant f(c) of C values as [C, 1, ...] (rank), f32. */
static tbc_value *channel_const(simplifier *S, tbc_graph *g, const tbc_value *y, const char *what, int rank, int64_t C,
				const double *v) {
	int64_t dims[TBC_MAX_RANK];
	dims[0] = C;
	for (int i = 1; i < rank; i++) dims[i] = 1;
	tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, rank, dims);
	if (!t) {
		S->oom = true;
		return NULL;
	}
	for (int64_t c = 0; c < C; c++) tbc_store_f64(TBC_DT_F32, t->data, (size_t)c, v[c]);
	char name[256], buf[200];
	snprintf(name, sizeof name, "%s_bn_%s", tbc_value_display_name(y, buf, sizeof buf), what);
	tbc_value *cv = tbc_graph_add_const(g, name, t);
	tbc_tensor_destroy(t);
	if (!cv) S->oom = true;
	return cv;
}

/* An inference BatchNormalization left over (not after a Conv: DenseNet's
 * pre-activation ones) becomes (x - mean) * m + bias, m = scale /
 * sqrt(var + epsilon) in double rounded once to f32: elementwise ops that
 * fusion merges with the Relu after them (one pass over the activation
 * instead of two).  The same f32 steps as its kernel (codegen/lower/norm.c).
 * When: f32 x of rank >= 2 and static channels, constant parameters of one
 * value per channel, only Y read, Y not a model output. */
static bool bn_as_affine(simplifier *S, tbc_graph *g, tbc_op *bn) {
	tbc_value *x = bn->inputs[0], *y = bn->outputs[0];
	if (tbc_attr_int(bn, "training_mode", 0) != 0 || !y || pass_is_model_output(S->m, y)) return false;
	for (int i = 1; i < bn->n_outputs; i++)
		if (is_used(S->m, bn, i)) return false;
	const tbc_type *xt = &x->type;
	if (xt->dtype != TBC_DT_F32 || xt->rank < 2 || xt->dims[1].sym) return false;
	int64_t C = xt->dims[1].size;
	const tbc_tensor *scale = bn_param(bn, 1, C), *bias = bn_param(bn, 2, C), *mean = bn_param(bn, 3, C),
			 *var = bn_param(bn, 4, C);
	if (!scale || !bias || !mean || !var || C < 1) return false;
	double eps = tbc_attr_float(bn, "epsilon", 1e-5);
	double *v = malloc(3 * (size_t)C * sizeof *v);
	if (!v) {
		S->oom = true;
		return false;
	}
	for (int64_t c = 0; c < C; c++) {
		v[c] = tbc_get_f64(mean, c);
		v[C + c] = tbc_get_f64(scale, c) * (1.0 / sqrt(tbc_get_f64(var, c) + eps));
		v[2 * C + c] = tbc_get_f64(bias, c);
	}
	int rank = xt->rank - 1;
	tbc_value *mc = channel_const(S, g, y, "mean", rank, C, v), *mm = channel_const(S, g, y, "mul", rank, C, v + C),
		  *bc = channel_const(S, g, y, "bias", rank, C, v + 2 * C);
	free(v);
	if (!mc || !mm || !bc) return false;
	tbc_value *t = op_before(S, g, bn, TBC_OP_Sub, x, mc);
	t = t ? op_before(S, g, bn, TBC_OP_Mul, t, mm) : NULL;
	t = t ? op_before(S, g, bn, TBC_OP_Add, t, bc) : NULL;
	if (!t) return false;
	t->name = y->name; /* the BatchNormalization's result, by its name */
	pass_replace_value(S->m, y, t);
	pass_remove_op(bn);
	return true;
}

static bool simplify_graph(tbc_graph *g, void *ctx) {
	simplifier *S = ctx;
	for (tbc_op *op = g->first, *next; op && !S->oom && !S->failed; op = next) {
		next = op->next;
		if (op->code == TBC_OP_BatchNormalization && !fold_bn_into_conv(S, g, op) && !S->oom) bn_as_affine(S, g, op);
	}
	return !S->oom && !S->failed;
}

bool tbc_pass_simplify(tbc_module *m, tbc_diags *d) {
	simplifier S = {.m = m, .d = d};
	if (!pass_each_graph(m->main, simplify_graph, &S) || S.oom || S.failed) {
		if (S.oom) tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory in the simplify pass");
		return false;
	}
	return true;
}
