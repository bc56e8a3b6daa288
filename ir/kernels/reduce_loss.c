/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.  Input (N, C, d1,
 * ..., dk), target (N, d1, ..., dk) of class indices, optional weight (C).
 * loss[n, d] = -weight[t] * input[n, t, d] with t = target[n, d]; a target
 * equal to ignore_index gives 0 and counts no weight.  reduction "none"
 * keeps the target's shape, "sum" adds up, "mean" divides the sum by the
 * total weight of the targets not ignored (their count without weights). */
#include <string.h>

#include "reduce_common.h"

typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN, LOSS_BAD } loss_reduction;

static loss_reduction reduction_of(const tbc_op *op) {
	const char *r = tbc_attr_string(op, "reduction", "mean");
	return !strcmp(r, "none") ? LOSS_NONE : !strcmp(r, "sum") ? LOSS_SUM : !strcmp(r, "mean") ? LOSS_MEAN : LOSS_BAD;
}

static bool loss_shape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *t = &op->inputs[1]->type;
	loss_reduction red = reduction_of(op);
	if (red == LOSS_BAD) return tbc_infer_error(cx, op, "reduction must be none, sum or mean, not '%s'", tbc_attr_string(op, "reduction", ""));
	if (!tbc_dtype_is_float(x->dtype)) return tbc_infer_error(cx, op, "input must be a float tensor, not %s", tbc_dtype_name(x->dtype));
	if (t->dtype != TBC_DT_I32 && t->dtype != TBC_DT_I64)
		return tbc_infer_error(cx, op, "target must be int32 or int64, not %s", tbc_dtype_name(t->dtype));
	if (x->rank >= 0 && x->rank < 2) return tbc_infer_error(cx, op, "input must have rank 2 or more (N, C, ...), not %d", x->rank);
	if (x->rank >= 0 && t->rank >= 0) {
		if (t->rank != x->rank - 1) return tbc_infer_error(cx, op, "target must have rank %d, not %d", x->rank - 1, t->rank);
		for (int d = 0; d < t->rank; d++) {
			tbc_dim a = x->dims[d ? d + 1 : 0], b = t->dims[d];
			if (!a.sym && !b.sym && a.size != b.size)
				return tbc_infer_error(cx, op, "target dim %d is %lld, the input's is %lld", d, (long long)b.size, (long long)a.size);
		}
	}
	if (op->n_inputs > 2 && op->inputs[2]) {
		const tbc_type *w = &op->inputs[2]->type;
		if (w->rank >= 0 && w->rank != 1) return tbc_infer_error(cx, op, "weight must be 1-D, not rank %d", w->rank);
	}
	tbc_type y = *t;
	y.dtype = x->dtype;
	if (red != LOSS_NONE) y.rank = 0;
	op->outputs[0]->type = y;
	if (op->n_outputs > 1 && op->outputs[1]) op->outputs[1]->type = *x;
	return true;
}

bool tbc_shape_NegativeLogLikelihoodLoss(tbc_infer *cx, tbc_op *op) { return loss_shape(cx, op); }
bool tbc_shape_SoftmaxCrossEntropyLoss(tbc_infer *cx, tbc_op *op) { return loss_shape(cx, op); }

/* logp: the log-probabilities (N, C, D) as doubles. */
static int loss_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, const double *logp, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *t = in[1], *w = op->n_inputs > 2 ? in[2] : NULL;
	loss_reduction red = reduction_of(op);
	const tbc_attr *ia = tbc_op_attr(op, "ignore_index");
	bool has_ii = ia != NULL;
	int64_t ii = tbc_attr_int(op, "ignore_index", 0);
	int64_t n = x->dims[0], c = x->dims[1], d = t->numel / (n ? n : 1);
	bool fits = t->rank == x->rank - 1;
	for (int k = 0; fits && k < t->rank; k++) fits = t->dims[k] == x->dims[k ? k + 1 : 0];
	if (!fits) return tbc_interp_error(ip, op, "target's shape does not match the input's (N, d1, ..., dk)");
	if (w && w->numel != c) return tbc_interp_error(ip, op, "weight has %lld elements for %lld classes", (long long)w->numel, (long long)c);
	tbc_tensor *y = red == LOSS_NONE ? tbc_interp_new(ip, op, x->dtype, t->rank, t->dims) : tbc_interp_new(ip, op, x->dtype, 0, NULL);
	if (!y) return -1;
	double sum = 0, wsum = 0;
	for (int64_t b = 0; b < n; b++)
		for (int64_t k = 0; k < d; k++) {
			int64_t e = b * d + k, cls = tbc_get_i64(t, e);
			double l = 0;
			if (!(has_ii && cls == ii)) {
				if (cls < 0 || cls >= c) {
					tbc_tensor_destroy(y);
					return tbc_interp_error(ip, op, "target %lld is out of range [0, %lld)", (long long)cls, (long long)c);
				}
				double wt = w ? tbc_get_f64(w, cls) : 1;
				l = -logp[(b * c + cls) * d + k] * wt;
				wsum += wt;
			}
			sum += l;
			if (red == LOSS_NONE) tbc_set_f64(y, e, l);
		}
	if (red == LOSS_SUM) tbc_set_f64(y, 0, sum);
	if (red == LOSS_MEAN) tbc_set_f64(y, 0, sum / wsum);
	out[0] = y;
	return 0;
}

int tbc_interp_NegativeLogLikelihoodLoss(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	if (in[0]->rank < 2) return tbc_interp_error(ip, op, "input must have rank 2 or more");
	double *v = tbc_red_load_f64s(in[0]);
	if (!v) return tbc_interp_error(ip, op, "out of memory");
	int rc = loss_run(ip, op, in, v, out);
	free(v);
	return rc;
}

int tbc_interp_SoftmaxCrossEntropyLoss(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	if (x->rank < 2) return tbc_interp_error(ip, op, "input must have rank 2 or more");
	int64_t n = x->dims[0], c = x->dims[1], d = x->numel / (n * c != 0 ? n * c : 1);
	double *v = tbc_red_load_f64s(x);
	if (!v) return tbc_interp_error(ip, op, "out of memory");
	/* log_softmax over the class axis, in place. */
	for (int64_t b = 0; b < n; b++)
		for (int64_t k = 0; k < d; k++) {
			double mx = -INFINITY, s = 0;
			for (int64_t j = 0; j < c; j++) mx = fmax(mx, v[(b * c + j) * d + k]);
			for (int64_t j = 0; j < c; j++) s += exp(v[(b * c + j) * d + k] - mx);
			for (int64_t j = 0; j < c; j++) v[(b * c + j) * d + k] -= mx + log(s);
		}
	tbc_tensor *lp = NULL;
	if (op->n_outputs > 1 && op->outputs[1]) {
		if (!(lp = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims))) {
			free(v);
			return -1;
		}
		for (int64_t i = 0; i < x->numel; i++) tbc_set_f64(lp, i, v[i]);
	}
	int rc = loss_run(ip, op, in, v, out);
	free(v);
	if (rc) tbc_tensor_destroy(lp);
	else if (lp) out[1] = lp;
	return rc;
}
