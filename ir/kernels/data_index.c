/* Ops that read or write elements at positions held in an index tensor:
 * Gather, GatherElements, GatherND, ScatterElements, ScatterND,
 * TensorScatter and OneHot.  Index tensors may be int32 or int64; negative
 * indices count from the end; an index out of range is a runtime error. */
#include "data.h"

/* Copies n elements of es bytes. */
static void copy_elems(void *dst, int64_t di, const void *src, int64_t si, int64_t n, size_t es) {
	memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, (size_t)n * es);
}

static int64_t prod(int n, const int64_t *dims) {
	int64_t p = 1;
	for (int i = 0; i < n; i++) p *= dims[i];
	return p;
}

static bool check_index_tensor(tbc_interp *ip, const tbc_op *op, const tbc_tensor *t, const char *what) {
	if (t->dtype == TBC_DT_I32 || t->dtype == TBC_DT_I64) return true;
	tbc_interp_error(ip, op, "%s must be int32 or int64, not %s", what, tbc_dtype_name(t->dtype));
	return false;
}

/* ---- Gather ---- */
bool tbc_shape_Gather(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *idx = &op->inputs[1]->type;
	tbc_type t = {.dtype = x->dtype, .rank = -1};
	if (x->rank == 0) return tbc_infer_error(cx, op, "data must have rank >= 1");
	if (x->rank > 0) {
		int a;
		if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), x->rank, &a))
			return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d",
					       (long long)tbc_attr_int(op, "axis", 0), x->rank);
		if (idx->rank >= 0) {
			if (x->rank - 1 + idx->rank > TBC_MAX_RANK)
				return tbc_infer_error(cx, op, "the result has more than %d dims", TBC_MAX_RANK);
			t.rank = 0;
			for (int d = 0; d < a; d++) t.dims[t.rank++] = x->dims[d];
			for (int d = 0; d < idx->rank; d++) t.dims[t.rank++] = idx->dims[d];
			for (int d = a + 1; d < x->rank; d++) t.dims[t.rank++] = x->dims[d];
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Gather(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *idx = in[1];
	int a;
	if (!check_index_tensor(ip, op, idx, "indices")) return -1;
	if (x->rank == 0 || !tbc_norm_axis(tbc_attr_int(op, "axis", 0), x->rank, &a))
		return tbc_interp_error(ip, op, "axis is out of range for rank %d", x->rank);
	if (x->rank - 1 + idx->rank > TBC_MAX_RANK)
		return tbc_interp_error(ip, op, "the result has more than %d dims", TBC_MAX_RANK);
	int64_t dims[TBC_MAX_RANK];
	int rank = 0;
	for (int d = 0; d < a; d++) dims[rank++] = x->dims[d];
	for (int d = 0; d < idx->rank; d++) dims[rank++] = idx->dims[d];
	for (int d = a + 1; d < x->rank; d++) dims[rank++] = x->dims[d];
	int64_t outer = prod(a, x->dims), n = x->dims[a], inner = prod(x->rank - a - 1, x->dims + a + 1);
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, rank, dims);
	if (!t) return -1;
	size_t es = tbc_dtype_size(x->dtype);
	for (int64_t i = 0; i < idx->numel; i++) {
		int64_t v = tbc_get_i64(idx, i), k;
		if (!tbc_data_wrap_index(v, n, &k)) {
			tbc_tensor_destroy(t);
			return tbc_interp_error(ip, op, "index %lld is out of range for axis %d of size %lld", (long long)v, a,
						(long long)n);
		}
		for (int64_t o = 0; o < outer; o++)
			copy_elems(t->data, (o * idx->numel + i) * inner, x->data, (o * n + k) * inner, inner, es);
	}
	out[0] = t;
	return 0;
}

/* ---- GatherElements / ScatterElements ----
 * Both walk the index tensor; the data position is the walk's own position
 * with the axis coordinate replaced by the index value. */

/* Offset in data (dims, strides) of position pos of the index walk whose axis
 * coordinate is v; false when v or another coordinate is out of range. */
static bool element_offset(int rank, const int64_t *pos, int axis, int64_t v, const int64_t *dims,
			   const int64_t *strides, int64_t *off) {
	int64_t o = 0, k;
	for (int d = 0; d < rank; d++) {
		if (d == axis) {
			if (!tbc_data_wrap_index(v, dims[d], &k)) return false;
			o += k * strides[d];
		} else {
			if (pos[d] >= dims[d]) return false;
			o += pos[d] * strides[d];
		}
	}
	*off = o;
	return true;
}

bool tbc_shape_GatherElements(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *idx = &op->inputs[1]->type;
	if (x->rank >= 0 && idx->rank >= 0 && x->rank != idx->rank)
		return tbc_infer_error(cx, op, "data has rank %d but indices rank %d", x->rank, idx->rank);
	int a, rank = x->rank >= 0 ? x->rank : idx->rank;
	if (rank == 0) return tbc_infer_error(cx, op, "data must have rank >= 1");
	if (rank > 0 && !tbc_norm_axis(tbc_attr_int(op, "axis", 0), rank, &a))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)tbc_attr_int(op, "axis", 0),
				       rank);
	tbc_type t = *idx;
	t.dtype = x->dtype;
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_GatherElements(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *idx = in[1];
	int a;
	if (!check_index_tensor(ip, op, idx, "indices")) return -1;
	if (x->rank != idx->rank || x->rank == 0) return tbc_interp_error(ip, op, "data and indices must have the same rank >= 1");
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), x->rank, &a))
		return tbc_interp_error(ip, op, "axis is out of range for rank %d", x->rank);
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, idx->rank, idx->dims);
	if (!t) return -1;
	int64_t strides[TBC_MAX_RANK], pos[TBC_MAX_RANK] = {0}, off;
	tbc_strides(x->rank, x->dims, strides);
	size_t es = tbc_dtype_size(x->dtype);
	for (int64_t i = 0; i < idx->numel; i++, tbc_index_next(idx->rank, idx->dims, pos)) {
		int64_t v = tbc_get_i64(idx, i);
		if (!element_offset(x->rank, pos, a, v, x->dims, strides, &off)) {
			tbc_tensor_destroy(t);
			return tbc_interp_error(ip, op, "index %lld at element %lld is out of range", (long long)v, (long long)i);
		}
		copy_elems(t->data, i, x->data, off, 1, es);
	}
	out[0] = t;
	return 0;
}

static bool scatter_reduction(tbc_interp *ip, const tbc_op *op, tbc_data_reduction *r) {
	const char *s = tbc_attr_string(op, "reduction", "none");
	if (tbc_data_parse_reduction(s, r)) return true;
	tbc_interp_error(ip, op, "unknown reduction '%s'", s);
	return false;
}

int tbc_interp_ScatterElements(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *idx = in[1], *upd = in[2];
	int a;
	tbc_data_reduction red;
	if (!check_index_tensor(ip, op, idx, "indices") || !scatter_reduction(ip, op, &red)) return -1;
	if (x->rank != idx->rank || x->rank == 0 || !tbc_tensor_same_shape(idx, upd) || upd->dtype != x->dtype)
		return tbc_interp_error(ip, op, "data, indices and updates must have one rank >= 1, "
						"indices and updates one shape");
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), x->rank, &a))
		return tbc_interp_error(ip, op, "axis is out of range for rank %d", x->rank);
	tbc_tensor *t = tbc_tensor_clone(x);
	if (!t) return tbc_interp_error(ip, op, "out of memory");
	int64_t strides[TBC_MAX_RANK], pos[TBC_MAX_RANK] = {0}, off;
	tbc_strides(x->rank, x->dims, strides);
	for (int64_t i = 0; i < idx->numel; i++, tbc_index_next(idx->rank, idx->dims, pos)) {
		int64_t v = tbc_get_i64(idx, i);
		if (!element_offset(x->rank, pos, a, v, x->dims, strides, &off)) {
			tbc_tensor_destroy(t);
			return tbc_interp_error(ip, op, "index %lld at element %lld is out of range", (long long)v, (long long)i);
		}
		tbc_data_reduce_elem(x->dtype, t->data, off, upd->data, i, red);
	}
	out[0] = t;
	return 0;
}

/* ---- GatherND / ScatterND ---- */

/* Offset in data (strides ds, starting at dim `first`) of the k-tuple of
 * indices at idx[pos..pos+k); false when one is out of range. */
static bool nd_offset(const tbc_tensor *idx, int64_t pos, int k, const int64_t *dims, const int64_t *ds, int first,
		      int64_t *off, int64_t *bad) {
	int64_t o = 0, j;
	for (int i = 0; i < k; i++) {
		int64_t v = tbc_get_i64(idx, pos + i);
		if (!tbc_data_wrap_index(v, dims[first + i], &j)) {
			*bad = v;
			return false;
		}
		o += j * ds[first + i];
	}
	*off = o;
	return true;
}

bool tbc_shape_GatherND(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *idx = &op->inputs[1]->type;
	int64_t b = tbc_attr_int(op, "batch_dims", 0);
	tbc_type t = {.dtype = x->dtype, .rank = -1};
	if (x->rank >= 0 && idx->rank >= 0) {
		if (idx->rank < 1 || x->rank < 1) return tbc_infer_error(cx, op, "data and indices must have rank >= 1");
		if (b < 0 || b >= idx->rank || b >= x->rank)
			return tbc_infer_error(cx, op, "batch_dims %lld must be less than both ranks", (long long)b);
		tbc_dim last = idx->dims[idx->rank - 1];
		if (!last.sym) {
			if (last.size > x->rank - b)
				return tbc_infer_error(cx, op, "indices tuples of %lld exceed the data rank %d less batch_dims",
						       (long long)last.size, x->rank);
			t.rank = idx->rank - 1 + x->rank - (int)b - (int)last.size;
			if (t.rank > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the result has too many dims");
			int r = 0;
			for (int d = 0; d < idx->rank - 1; d++) t.dims[r++] = idx->dims[d];
			for (int d = (int)(b + last.size); d < x->rank; d++) t.dims[r++] = x->dims[d];
		}
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_GatherND(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *idx = in[1];
	int64_t b = tbc_attr_int(op, "batch_dims", 0);
	if (!check_index_tensor(ip, op, idx, "indices")) return -1;
	if (idx->rank < 1 || x->rank < 1 || b < 0 || b >= idx->rank || b >= x->rank)
		return tbc_interp_error(ip, op, "bad ranks or batch_dims");
	int bd = (int)b;
	int64_t k = idx->dims[idx->rank - 1];
	if (k > x->rank - bd) return tbc_interp_error(ip, op, "indices tuples of %lld exceed the data rank", (long long)k);
	for (int d = 0; d < bd; d++)
		if (idx->dims[d] != x->dims[d]) return tbc_interp_error(ip, op, "batch dim %d differs between data and indices", d);
	int64_t dims[TBC_MAX_RANK];
	int rank = 0;
	for (int d = 0; d < idx->rank - 1; d++) dims[rank++] = idx->dims[d];
	for (int d = bd + (int)k; d < x->rank; d++) dims[rank++] = x->dims[d];
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, rank, dims);
	if (!t) return -1;
	int64_t ds[TBC_MAX_RANK];
	tbc_strides(x->rank, x->dims, ds);
	int64_t slice = prod(x->rank - bd - (int)k, x->dims + bd + k);
	int64_t n_tuples = k ? idx->numel / k : prod(idx->rank - 1, idx->dims);
	int64_t per_batch = prod(idx->rank - 1 - bd, idx->dims + bd); /* tuples per batch entry */
	int64_t batch_size = prod(x->rank - bd, x->dims + bd);
	size_t es = tbc_dtype_size(x->dtype);
	for (int64_t i = 0; i < n_tuples; i++) {
		int64_t off, bad;
		if (!nd_offset(idx, i * k, (int)k, x->dims, ds, bd, &off, &bad)) {
			tbc_tensor_destroy(t);
			return tbc_interp_error(ip, op, "index %lld is out of range", (long long)bad);
		}
		int64_t batch = per_batch ? i / per_batch : 0;
		copy_elems(t->data, i * slice, x->data, batch * batch_size + off, slice, es);
	}
	out[0] = t;
	return 0;
}

int tbc_interp_ScatterND(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *idx = in[1], *upd = in[2];
	tbc_data_reduction red;
	if (!check_index_tensor(ip, op, idx, "indices") || !scatter_reduction(ip, op, &red)) return -1;
	if (idx->rank < 1 || x->rank < 1 || upd->dtype != x->dtype)
		return tbc_interp_error(ip, op, "data and indices must have rank >= 1, updates the dtype of data");
	int64_t k = idx->dims[idx->rank - 1];
	if (k > x->rank) return tbc_interp_error(ip, op, "indices tuples of %lld exceed the data rank %d", (long long)k, x->rank);
	/* updates: indices.shape[:-1] + data.shape[k:] */
	bool ok = upd->rank == idx->rank - 1 + x->rank - (int)k;
	for (int d = 0; ok && d < upd->rank; d++)
		ok = upd->dims[d] == (d < idx->rank - 1 ? idx->dims[d] : x->dims[k + d - (idx->rank - 1)]);
	if (!ok) return tbc_interp_error(ip, op, "updates must have shape indices.shape[:-1] + data.shape[%lld:]", (long long)k);
	tbc_tensor *t = tbc_tensor_clone(x);
	if (!t) return tbc_interp_error(ip, op, "out of memory");
	int64_t ds[TBC_MAX_RANK];
	tbc_strides(x->rank, x->dims, ds);
	int64_t slice = prod(x->rank - (int)k, x->dims + k);
	int64_t n_tuples = prod(idx->rank - 1, idx->dims);
	for (int64_t i = 0; i < n_tuples; i++) {
		int64_t off, bad;
		if (!nd_offset(idx, i * k, (int)k, x->dims, ds, 0, &off, &bad)) {
			tbc_tensor_destroy(t);
			return tbc_interp_error(ip, op, "index %lld is out of range", (long long)bad);
		}
		for (int64_t e = 0; e < slice; e++) tbc_data_reduce_elem(x->dtype, t->data, off + e, upd->data, i * slice + e, red);
	}
	out[0] = t;
	return 0;
}

/* ---- TensorScatter: write update into a KV cache along axis, at a
 * per-batch offset (linear) or wrapping around (circular). ---- */
int tbc_interp_TensorScatter(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *cache = in[0], *upd = in[1], *wi = op->n_inputs > 2 ? in[2] : NULL;
	const char *mode = tbc_attr_string(op, "mode", "linear");
	bool circular = !strcmp(mode, "circular");
	if (!circular && strcmp(mode, "linear")) return tbc_interp_error(ip, op, "unknown mode '%s'", mode);
	int a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -2), cache->rank, &a) || a == 0)
		return tbc_interp_error(ip, op, "axis must name a dim after the batch dim of the rank-%d cache", cache->rank);
	bool ok = upd->dtype == cache->dtype && upd->rank == cache->rank;
	for (int d = 0; ok && d < cache->rank; d++) ok = d == a ? upd->dims[d] <= cache->dims[d] : upd->dims[d] == cache->dims[d];
	if (!ok) return tbc_interp_error(ip, op, "update must match the cache except for a shorter sequence axis");
	int64_t batch = cache->dims[0];
	if (wi && (!check_index_tensor(ip, op, wi, "write_indices") || wi->numel != batch))
		return wi->numel != batch ? tbc_interp_error(ip, op, "write_indices must hold one index per batch entry") : -1;
	tbc_tensor *t = tbc_tensor_clone(cache);
	if (!t) return tbc_interp_error(ip, op, "out of memory");
	int64_t max_seq = cache->dims[a], seq = upd->dims[a];
	int64_t inner = prod(cache->rank - a - 1, cache->dims + a + 1);
	int64_t outer = prod(a, cache->dims), per_batch = outer / (batch ? batch : 1);
	size_t es = tbc_dtype_size(cache->dtype);
	for (int64_t o = 0; o < outer; o++) {
		int64_t start = wi ? tbc_get_i64(wi, o / per_batch) : 0;
		for (int64_t s = 0; s < seq; s++) {
			int64_t pos = start + s;
			if (circular && max_seq) pos = ((pos % max_seq) + max_seq) % max_seq;
			if (pos < 0 || pos >= max_seq) {
				tbc_tensor_destroy(t);
				return tbc_interp_error(ip, op, "write position %lld is outside the cache of %lld", (long long)pos,
							(long long)max_seq);
			}
			copy_elems(t->data, (o * max_seq + pos) * inner, upd->data, (o * seq + s) * inner, inner, es);
		}
	}
	out[0] = t;
	return 0;
}

/* ---- OneHot ---- */

/* depth as an integer (any numeric dtype, truncated); false when invalid. */
static bool onehot_depth(const tbc_tensor *d, int64_t *depth) {
	if (d->numel != 1 || d->rank > 1) return false;
	double v = tbc_get_f64(d, 0);
	if (tbc_dtype_is_int(d->dtype)) *depth = tbc_get_i64(d, 0);
	else if (isfinite(v) && fabs(v) < 9e18) *depth = (int64_t)v;
	else return false;
	return *depth > 0;
}

bool tbc_shape_OneHot(tbc_infer *cx, tbc_op *op) {
	const tbc_type *idx = &op->inputs[0]->type;
	tbc_type t = {.dtype = op->inputs[2]->type.dtype, .rank = -1};
	if (idx->rank >= 0) {
		int rank = idx->rank + 1, a;
		if (rank > TBC_MAX_RANK) return tbc_infer_error(cx, op, "the result has more than %d dims", TBC_MAX_RANK);
		if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), rank, &a))
			return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)tbc_attr_int(op, "axis", -1),
					       rank);
		const tbc_tensor *d = tbc_input_const(op, 1);
		int64_t depth;
		if (d && !onehot_depth(d, &depth)) return tbc_infer_error(cx, op, "depth must be one positive number");
		t.rank = rank;
		for (int i = 0, k = 0; i < rank; i++)
			t.dims[i] = i == a ? (d ? (tbc_dim){depth, NULL} : tbc_module_fresh_dim(cx->module)) : idx->dims[k++];
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_OneHot(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *idx = in[0], *dep = in[1], *vals = in[2];
	int64_t depth;
	int a, rank = idx->rank + 1;
	if (!onehot_depth(dep, &depth)) return tbc_interp_error(ip, op, "depth must be one positive number");
	if (vals->numel != 2) return tbc_interp_error(ip, op, "values must hold [off_value, on_value]");
	if (rank > TBC_MAX_RANK || !tbc_norm_axis(tbc_attr_int(op, "axis", -1), rank, &a))
		return tbc_interp_error(ip, op, "axis is out of range for rank %d", rank);
	int64_t dims[TBC_MAX_RANK];
	for (int i = 0, k = 0; i < rank; i++) dims[i] = i == a ? depth : idx->dims[k++];
	tbc_tensor *t = tbc_interp_new(ip, op, vals->dtype, rank, dims);
	if (!t) return -1;
	size_t es = tbc_dtype_size(vals->dtype);
	for (int64_t i = 0; i < t->numel; i++) copy_elems(t->data, i, vals->data, 0, 1, es);
	int64_t inner = prod(idx->rank - a, idx->dims + a);
	for (int64_t i = 0; i < idx->numel; i++) {
		int64_t v;
		if (tbc_dtype_is_int(idx->dtype)) {
			v = tbc_get_i64(idx, i);
		} else {
			double f = tbc_get_f64(idx, i);
			if (!isfinite(f) || fabs(f) > 9e18) continue;
			v = (int64_t)f;
		}
		if (v < 0) v += depth;
		if (v < 0 || v >= depth) continue; /* out of range: all off_value */
		int64_t o = i / inner, r = i % inner;
		copy_elems(t->data, (o * depth + v) * inner + r, vals->data, 1, 1, es);
	}
	out[0] = t;
	return 0;
}
