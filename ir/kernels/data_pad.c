/* Ops that grow or shrink each dim around the data: Pad (constant, reflect,
 * edge and wrap modes; negative pads crop) and CenterCropPad. */
#include "data.h"

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

static bool pad_mode_of(const tbc_op *op, pad_mode *m) {
	static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
	const char *s = tbc_attr_string(op, "mode", "constant");
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*m = (pad_mode)i;
			return true;
		}
	return false;
}

/* Per-dim begin/end pads of a rank-`rank` tensor from pads (2n values) and
 * axes (n values, or NULL: all dims).  False with a message. */
static bool pad_amounts(int rank, const int64_t *pads, int n_pads, const int64_t *axes, int n_axes, int64_t *begin,
			int64_t *end, char *err, size_t err_size) {
	int n = axes ? n_axes : rank;
	if (n_pads != 2 * n) {
		snprintf(err, err_size, "pads has %d values, expected %d (2 per axis)", n_pads, 2 * n);
		return false;
	}
	for (int d = 0; d < rank; d++) begin[d] = end[d] = 0;
	bool seen[TBC_MAX_RANK] = {false};
	for (int i = 0; i < n; i++) {
		int a = i;
		if (axes && !tbc_norm_axis(axes[i], rank, &a)) {
			snprintf(err, err_size, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
			return false;
		}
		if (seen[a]) {
			snprintf(err, err_size, "axis %d is repeated", a);
			return false;
		}
		seen[a] = true;
		begin[a] = pads[i];
		end[a] = pads[n + i];
	}
	return true;
}

bool tbc_shape_Pad(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	pad_mode mode;
	if (!pad_mode_of(op, &mode)) return tbc_infer_error(cx, op, "unknown mode '%s'", tbc_attr_string(op, "mode", ""));
	tbc_type t = *in;
	if (in->rank < 0) {
		if (op->outputs[0]) op->outputs[0]->type = t;
		return true;
	}
	int64_t pads[2 * TBC_MAX_RANK], axes[TBC_MAX_RANK], begin[TBC_MAX_RANK], end[TBC_MAX_RANK];
	bool has_axes = op->n_inputs > 3 && op->inputs[3];
	int np = tbc_data_const_ints(op, 1, pads, 2 * TBC_MAX_RANK);
	int na = has_axes ? tbc_data_const_ints(op, 3, axes, TBC_MAX_RANK) : 0;
	if (np == -2 || na == -2) return tbc_infer_error(cx, op, "pads and axes must be 1-D integer tensors");
	if (na < 0 || (np < 0 && !has_axes)) {
		tbc_type_set_unknown_dims(cx->module, &t, in->dtype, in->rank);
	} else {
		char err[160];
		if (np < 0) { /* known axes, unknown amounts */
			np = 2 * na;
			for (int i = 0; i < np; i++) pads[i] = 1;
		}
		if (!pad_amounts(in->rank, pads, np, has_axes ? axes : NULL, na, begin, end, err, sizeof err))
			return tbc_infer_error(cx, op, "%s", err);
		bool amounts_known = tbc_input_const(op, 1) != NULL;
		for (int d = 0; d < in->rank; d++) {
			if (!amounts_known && (begin[d] || end[d])) {
				t.dims[d] = tbc_module_fresh_dim(cx->module);
			} else if (!in->dims[d].sym) {
				int64_t v = in->dims[d].size + begin[d] + end[d];
				if (v < 0) return tbc_infer_error(cx, op, "pads shrink dim %d below zero", d);
				if (mode != PAD_CONSTANT && in->dims[d].size == 0 && v > 0)
					return tbc_infer_error(cx, op, "cannot pad the empty dim %d in this mode", d);
				t.dims[d].size = v;
			} else if (begin[d] + end[d] != 0) {
				t.dims[d] = tbc_module_fresh_dim(cx->module);
			}
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

/* Source index along a dim for output coordinate o, after cropping the dim
 * to [lo, lo + n) and padding that by `before`; -1: the constant. */
static int64_t pad_source(int64_t o, int64_t before, int64_t lo, int64_t n, pad_mode mode) {
	int64_t i = o - before;
	if (i >= 0 && i < n) return lo + i;
	switch (mode) {
	case PAD_CONSTANT: return -1;
	case PAD_EDGE: return lo + (i < 0 ? 0 : n - 1);
	case PAD_WRAP: return lo + ((i % n) + n) % n;
	case PAD_REFLECT:
	default: {
		if (n == 1) return lo;
		int64_t period = 2 * (n - 1);
		int64_t k = ((i % period) + period) % period;
		return lo + (k < n ? k : period - k);
	}
	}
}

int tbc_interp_Pad(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *p = in[1];
	const tbc_tensor *cv = op->n_inputs > 2 ? in[2] : NULL, *ax = op->n_inputs > 3 ? in[3] : NULL;
	pad_mode mode;
	if (!pad_mode_of(op, &mode)) return tbc_interp_error(ip, op, "unknown mode '%s'", tbc_attr_string(op, "mode", ""));
	if (!tbc_dtype_is_int(p->dtype) || p->rank != 1 || p->numel > 2 * TBC_MAX_RANK ||
	    (ax && (!tbc_dtype_is_int(ax->dtype) || ax->rank != 1 || ax->numel > TBC_MAX_RANK)))
		return tbc_interp_error(ip, op, "pads and axes must be 1-D integer tensors");
	if (cv && cv->numel > 1) return tbc_interp_error(ip, op, "constant_value must be a scalar");
	if (cv && cv->numel == 1 && cv->dtype != x->dtype)
		return tbc_interp_error(ip, op, "constant_value must have the dtype of data");
	int64_t pads[2 * TBC_MAX_RANK], axes[TBC_MAX_RANK], begin[TBC_MAX_RANK], end[TBC_MAX_RANK];
	for (int64_t i = 0; i < p->numel; i++) pads[i] = tbc_get_i64(p, i);
	for (int64_t i = 0; ax && i < ax->numel; i++) axes[i] = tbc_get_i64(ax, i);
	char err[160];
	if (!pad_amounts(x->rank, pads, (int)p->numel, ax ? axes : NULL, ax ? (int)ax->numel : 0, begin, end, err, sizeof err))
		return tbc_interp_error(ip, op, "%s", err);
	/* Negative pads crop first; the rest pads what is left. */
	int64_t dims[TBC_MAX_RANK], lo[TBC_MAX_RANK], n[TBC_MAX_RANK], before[TBC_MAX_RANK];
	for (int d = 0; d < x->rank; d++) {
		lo[d] = begin[d] < 0 ? -begin[d] : 0;
		n[d] = x->dims[d] - lo[d] - (end[d] < 0 ? -end[d] : 0);
		before[d] = begin[d] > 0 ? begin[d] : 0;
		dims[d] = x->dims[d] + begin[d] + end[d];
		if (n[d] < 0 || dims[d] < 0) return tbc_interp_error(ip, op, "pads shrink dim %d below zero", d);
		if (n[d] == 0 && dims[d] > 0 && mode != PAD_CONSTANT)
			return tbc_interp_error(ip, op, "cannot pad the empty dim %d in this mode", d);
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
	if (!t) return -1;
	size_t es = tbc_dtype_size(x->dtype);
	int64_t xs[TBC_MAX_RANK], idx[TBC_MAX_RANK] = {0};
	tbc_strides(x->rank, x->dims, xs);
	for (int64_t k = 0; k < t->numel; k++, tbc_index_next(x->rank, dims, idx)) {
		int64_t src = 0;
		for (int d = 0; d < x->rank && src >= 0; d++) {
			int64_t s = pad_source(idx[d], before[d], lo[d], n[d], mode);
			src = s < 0 ? -1 : src + s * xs[d];
		}
		char *dst = (char *)t->data + (size_t)k * es;
		if (src >= 0) memcpy(dst, (const char *)x->data + (size_t)src * es, es);
		else if (cv && cv->numel == 1) memcpy(dst, cv->data, es);
		/* else the zero the tensor was created with */
	}
	out[0] = t;
	return 0;
}

/* ---- CenterCropPad ---- */

/* Target size per dim (-1: unchanged) from the shape values and axes attr. */
static bool crop_targets(const tbc_op *op, int rank, const int64_t *shape, int n, int64_t *target, char *err,
			 size_t err_size) {
	const int64_t *axes;
	int na = tbc_attr_ints(op, "axes", &axes);
	int want = na < 0 ? rank : na;
	if (n != want) {
		snprintf(err, err_size, "shape has %d values, expected %d", n, want);
		return false;
	}
	for (int d = 0; d < rank; d++) target[d] = -1;
	for (int i = 0; i < want; i++) {
		int a = i;
		if (na >= 0 && !tbc_norm_axis(axes[i], rank, &a)) {
			snprintf(err, err_size, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
			return false;
		}
		if (target[a] >= 0) {
			snprintf(err, err_size, "axis %d is repeated", a);
			return false;
		}
		if (shape[i] < 0) {
			snprintf(err, err_size, "shape[%d] is negative", i);
			return false;
		}
		target[a] = shape[i];
	}
	return true;
}

bool tbc_shape_CenterCropPad(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	tbc_type t = *in;
	if (in->rank >= 0) {
		int64_t shape[TBC_MAX_RANK], target[TBC_MAX_RANK];
		int n = tbc_data_const_ints(op, 1, shape, TBC_MAX_RANK);
		if (n == -2) return tbc_infer_error(cx, op, "shape must be a 1-D integer tensor");
		if (n >= 0) {
			char err[160];
			if (!crop_targets(op, in->rank, shape, n, target, err, sizeof err)) return tbc_infer_error(cx, op, "%s", err);
			for (int d = 0; d < in->rank; d++)
				if (target[d] >= 0) t.dims[d] = (tbc_dim){target[d], NULL};
		} else {
			const int64_t *axes;
			int na = tbc_attr_ints(op, "axes", &axes);
			for (int i = 0; i < (na < 0 ? in->rank : na); i++) {
				int a = i;
				if (na >= 0 && !tbc_norm_axis(axes[i], in->rank, &a))
					return tbc_infer_error(cx, op, "axis %lld is out of range", (long long)axes[i]);
				t.dims[a] = tbc_module_fresh_dim(cx->module);
			}
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_CenterCropPad(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *s = in[1];
	if (!tbc_dtype_is_int(s->dtype) || s->rank != 1 || s->numel > TBC_MAX_RANK)
		return tbc_interp_error(ip, op, "shape must be a 1-D integer tensor");
	int64_t shape[TBC_MAX_RANK], target[TBC_MAX_RANK], dims[TBC_MAX_RANK], delta[TBC_MAX_RANK];
	for (int64_t i = 0; i < s->numel; i++) shape[i] = tbc_get_i64(s, i);
	char err[160];
	if (!crop_targets(op, x->rank, shape, (int)s->numel, target, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	/* Output coordinate o reads input o + delta: a crop starts at
	 * floor((dim - size) / 2), a pad puts the data at floor((size - dim) / 2). */
	for (int d = 0; d < x->rank; d++) {
		dims[d] = target[d] >= 0 ? target[d] : x->dims[d];
		delta[d] = dims[d] <= x->dims[d] ? (x->dims[d] - dims[d]) / 2 : -((dims[d] - x->dims[d]) / 2);
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
	if (!t) return -1;
	size_t es = tbc_dtype_size(x->dtype);
	int64_t xs[TBC_MAX_RANK], idx[TBC_MAX_RANK] = {0};
	tbc_strides(x->rank, x->dims, xs);
	for (int64_t k = 0; k < t->numel; k++, tbc_index_next(x->rank, dims, idx)) {
		int64_t src = 0;
		for (int d = 0; d < x->rank && src >= 0; d++) {
			int64_t i = idx[d] + delta[d];
			src = i < 0 || i >= x->dims[d] ? -1 : src + i * xs[d];
		}
		if (src >= 0) memcpy((char *)t->data + (size_t)k * es, (const char *)x->data + (size_t)src * es, es);
	}
	out[0] = t;
	return 0;
}
