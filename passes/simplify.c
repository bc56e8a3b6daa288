/* Algebraic simplification.
 *
 * Does: folds an inference BatchNormalization that reads a Conv into that
 * Conv's weights and bias,
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
	bool oom;
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

static bool simplify_graph(tbc_graph *g, void *ctx) {
	simplifier *S = ctx;
	for (tbc_op *op = g->first, *next; op && !S->oom; op = next) {
		next = op->next;
		if (op->code == TBC_OP_BatchNormalization) fold_bn_into_conv(S, g, op);
	}
	return !S->oom;
}

bool tbc_pass_simplify(tbc_module *m, tbc_diags *d) {
	simplifier S = {.m = m};
	if (!pass_each_graph(m->main, simplify_graph, &S) || S.oom) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory in the simplify pass");
		return false;
	}
	return true;
}
