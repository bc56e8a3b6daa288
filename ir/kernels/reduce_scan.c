/* Running reductions along one axis: CumSum, CumProd (axis as input 1,
 * exclusive and reverse attributes), and TopK (k as input 1), which sorts
 * each slice stably so that equal values keep their index order, as onnx's
 * reference does. */
#include "reduce_common.h"

/* ---- CumSum / CumProd ---------------------------------------------------- */

bool tbc_shape_CumSum(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *at = &op->inputs[1]->type;
	if (tbc_red_class_of(at->dtype) == TBC_RED_FLOAT)
		return tbc_infer_error(cx, op, "axis must be an integer tensor, not %s", tbc_dtype_name(at->dtype));
	if (at->rank > 1) return tbc_infer_error(cx, op, "axis must be a scalar, not rank %d", at->rank);
	const tbc_tensor *ac = tbc_input_const(op, 1);
	int64_t axis;
	int a;
	if (ac && x->rank >= 0) {
		if (!tbc_red_scalar_int(ac, &axis)) return tbc_infer_error(cx, op, "axis must hold one integer");
		if (!tbc_norm_axis(axis, x->rank, &a))
			return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	}
	op->outputs[0]->type = *x;
	return true;
}

static int cumulate(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out, bool prod) {
	const tbc_tensor *x = in[0];
	int64_t axis;
	int a;
	if (!tbc_red_scalar_int(in[1], &axis)) return tbc_interp_error(ip, op, "axis must hold one integer");
	if (!tbc_norm_axis(axis, x->rank, &a))
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	bool exclusive = tbc_attr_int(op, "exclusive", 0) != 0, reverse = tbc_attr_int(op, "reverse", 0) != 0;
	int64_t outer = 1, inner = 1, n = x->dims[a];
	for (int d = 0; d < x->rank; d++) {
		if (d < a) outer *= x->dims[d];
		if (d > a) inner *= x->dims[d];
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, x->dims);
	if (!y) return -1;
	bool is_float = tbc_red_class_of(x->dtype) == TBC_RED_FLOAT;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			double f = prod ? 1 : 0;
			uint64_t u = prod ? 1 : 0; /* integers: exact, wrapping */
			for (int64_t s = 0; s < n; s++) {
				int64_t j = reverse ? n - 1 - s : s, e = (o * n + j) * inner + i;
				if (exclusive) {
					if (is_float) tbc_set_f64(y, e, f);
					else tbc_store_u64(y->dtype, y->data, (size_t)e, u);
				}
				if (is_float) {
					double v = tbc_get_f64(x, e);
					f = prod ? f * v : f + v;
				} else {
					uint64_t v = tbc_load_u64(x->dtype, x->data, (size_t)e);
					u = prod ? u * v : u + v;
				}
				if (!exclusive) {
					if (is_float) tbc_set_f64(y, e, f);
					else tbc_store_u64(y->dtype, y->data, (size_t)e, u);
				}
			}
		}
	out[0] = y;
	return 0;
}

int tbc_interp_CumSum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return cumulate(ip, op, in, out, false);
}
int tbc_interp_CumProd(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return cumulate(ip, op, in, out, true);
}

/* ---- TopK ---------------------------------------------------------------- */

bool tbc_shape_TopK(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *kt = &op->inputs[1]->type;
	if (tbc_red_class_of(kt->dtype) == TBC_RED_FLOAT)
		return tbc_infer_error(cx, op, "K must be an integer tensor, not %s", tbc_dtype_name(kt->dtype));
	tbc_type y = *x;
	if (x->rank >= 0) {
		int64_t axis = tbc_attr_int(op, "axis", -1), k;
		int a;
		if (!tbc_norm_axis(axis, x->rank, &a))
			return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
		const tbc_tensor *kc = tbc_input_const(op, 1);
		if (kc) {
			if (!tbc_red_scalar_int(kc, &k)) return tbc_infer_error(cx, op, "K must hold one integer");
			if (k < 0) return tbc_infer_error(cx, op, "K is negative (%lld)", (long long)k);
			if (!x->dims[a].sym && k > x->dims[a].size)
				return tbc_infer_error(cx, op, "K (%lld) is larger than the axis (%lld)", (long long)k,
						       (long long)x->dims[a].size);
			y.dims[a] = (tbc_dim){k, NULL};
		} else {
			y.dims[a] = tbc_module_fresh_dim(cx->module);
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = y;
	y.dtype = TBC_DT_I64;
	if (op->n_outputs > 1 && op->outputs[1]) op->outputs[1]->type = y;
	return true;
}

typedef struct topk_slice {
	const tbc_tensor *x;
	int64_t base, stride;
	bool largest;
} topk_slice;

/* True when index a (along the slice) goes before b: the larger (or smaller)
 * value first, NaN counting as the largest value. */
static bool topk_before(const topk_slice *s, int64_t a, int64_t b) {
	int c = tbc_red_cmp(s->x, s->base + a * s->stride, s->base + b * s->stride);
	return s->largest ? c > 0 : c < 0;
}

/* Stable merge sort of idx[0..n) (tmp is scratch of the same size). */
static void topk_sort(const topk_slice *s, int64_t *idx, int64_t *tmp, int64_t n) {
	for (int64_t w = 1; w < n; w *= 2) {
		for (int64_t lo = 0; lo < n; lo += 2 * w) {
			int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			int64_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) tmp[k++] = topk_before(s, idx[j], idx[i]) ? idx[j++] : idx[i++];
			while (i < mid) tmp[k++] = idx[i++];
			while (j < hi) tmp[k++] = idx[j++];
		}
		memcpy(idx, tmp, (size_t)n * sizeof *idx);
	}
}

int tbc_interp_TopK(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int64_t axis = tbc_attr_int(op, "axis", -1), k;
	int a;
	if (!tbc_norm_axis(axis, x->rank, &a))
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	if (!tbc_red_scalar_int(in[1], &k)) return tbc_interp_error(ip, op, "K must hold one integer");
	int64_t n = x->dims[a];
	if (k < 0 || k > n)
		return tbc_interp_error(ip, op, "K (%lld) must be in [0, %lld], the size of the axis", (long long)k,
					(long long)n);
	int64_t dims[TBC_MAX_RANK], outer = 1, inner = 1;
	for (int d = 0; d < x->rank; d++) {
		dims[d] = d == a ? k : x->dims[d];
		if (d < a) outer *= x->dims[d];
		if (d > a) inner *= x->dims[d];
	}
	tbc_tensor *vals = tbc_interp_new(ip, op, x->dtype, x->rank, dims);
	tbc_tensor *inds = vals ? tbc_interp_new(ip, op, TBC_DT_I64, x->rank, dims) : NULL;
	int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx), *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
	if (!vals || !inds || !idx || !tmp) {
		tbc_tensor_destroy(vals);
		tbc_tensor_destroy(inds);
		free(idx);
		free(tmp);
		return vals && inds ? tbc_interp_error(ip, op, "out of memory") : -1;
	}
	size_t es = tbc_dtype_size(x->dtype);
	topk_slice s = {x, 0, inner, tbc_attr_int(op, "largest", 1) != 0};
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			s.base = o * n * inner + i;
			for (int64_t j = 0; j < n; j++) idx[j] = j;
			topk_sort(&s, idx, tmp, n);
			for (int64_t j = 0; j < k; j++) {
				int64_t dst = (o * k + j) * inner + i, src = s.base + idx[j] * inner;
				memcpy((char *)vals->data + dst * es, (const char *)x->data + src * es, es);
				((int64_t *)inds->data)[dst] = idx[j];
			}
		}
	free(idx);
	free(tmp);
	out[0] = vals;
	out[1] = inds;
	return 0;
}
