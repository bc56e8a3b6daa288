/* Softmax, LogSoftmax and Hardmax along one axis (opset 13 form: the axis
 * alone, default -1).  The largest value is subtracted first so exp() stays
 * in range. */
#include "reduce_common.h"

/* Shared rule of the three ops: the input's type, after checking the axis. */
bool tbc_shape_Softmax(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	int64_t axis = tbc_attr_int(op, "axis", -1);
	int a;
	if (x->rank >= 0 && !tbc_norm_axis(axis, x->rank, &a) && !(x->rank == 0 && (axis == 0 || axis == -1)))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	op->outputs[0]->type = *x;
	return true;
}

typedef enum smax_kind { SMAX_SOFT, SMAX_LOG, SMAX_HARD } smax_kind;

static int smax_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, tbc_tensor **out, smax_kind kind) {
	int64_t axis = tbc_attr_int(op, "axis", -1);
	int a = 0;
	if (x->rank > 0 && !tbc_norm_axis(axis, x->rank, &a))
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	int64_t outer = 1, inner = 1, n = x->rank ? x->dims[a] : 1;
	for (int d = 0; d < x->rank; d++) {
		if (d < a) outer *= x->dims[d];
		if (d > a) inner *= x->dims[d];
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	if (!y) return -1;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * n * inner + i, best = 0;
			double mx = -INFINITY;
			for (int64_t j = 0; j < n; j++) {
				double v = tbc_get_f64(x, base + j * inner);
				if (isnan(mx)) continue;
				if (v > mx || isnan(v)) {
					mx = v;
					best = j;
				}
			}
			if (kind == SMAX_HARD) {
				for (int64_t j = 0; j < n; j++) tbc_set_f64(y, base + j * inner, j == best ? 1 : 0);
				continue;
			}
			double sum = 0;
			for (int64_t j = 0; j < n; j++) sum += exp(tbc_get_f64(x, base + j * inner) - mx);
			for (int64_t j = 0; j < n; j++) {
				double d = tbc_get_f64(x, base + j * inner) - mx;
				tbc_set_f64(y, base + j * inner, kind == SMAX_LOG ? d - log(sum) : exp(d) / sum);
			}
		}
	out[0] = y;
	return 0;
}

int tbc_interp_Softmax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return smax_run(ip, op, in[0], out, SMAX_SOFT);
}
int tbc_interp_LogSoftmax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return smax_run(ip, op, in[0], out, SMAX_LOG);
}
int tbc_interp_Hardmax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return smax_run(ip, op, in[0], out, SMAX_HARD);
}
