/* Ops that pick or generate elements by a rule on positions or values:
 * Compress, NonZero, Unique (data-dependent sizes), Trilu, ReverseSequence,
 * EyeLike and Range. */
#include "data.h"
#include "ir/symdim.h"

static int64_t prod(int n, const int64_t *dims) {
	int64_t p = 1;
	for (int i = 0; i < n; i++) p *= dims[i];
	return p;
}

/* Whether element i is non-zero (NaN is non-zero, -0.0 is zero). */
static bool is_nonzero(const tbc_tensor *t, int64_t i) {
	if (tbc_dtype_is_float(t->dtype)) return tbc_get_f64(t, i) != 0.0;
	return tbc_load_u64(t->dtype, t->data, (size_t)i) != 0;
}

/* ---- Compress ---- */
bool tbc_shape_Compress(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	tbc_type t = {.dtype = in->dtype, .rank = 1};
	const tbc_tensor *cond = tbc_input_const(op, 1);
	tbc_dim kept = tbc_module_fresh_dim(cx->module);
	if (cond && cond->rank == 1) {
		int64_t n = 0;
		for (int64_t i = 0; i < cond->numel; i++) n += is_nonzero(cond, i);
		kept = (tbc_dim){n, NULL};
	}
	if (ax) {
		int a;
		t = *in;
		if (in->rank >= 0) {
			if (!tbc_norm_axis(ax->i, in->rank, &a))
				return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)ax->i, in->rank);
			t.dims[a] = kept;
		}
	} else {
		t.dims[0] = kept;
	}
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_Compress(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *cond = in[1];
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	if (cond->rank != 1) return tbc_interp_error(ip, op, "condition must be 1-D");
	int a = 0;
	int64_t outer = 1, n = x->numel, inner = 1;
	if (ax) {
		if (!tbc_norm_axis(ax->i, x->rank, &a)) return tbc_interp_error(ip, op, "axis is out of range for rank %d", x->rank);
		outer = prod(a, x->dims);
		n = x->dims[a];
		inner = prod(x->rank - a - 1, x->dims + a + 1);
	}
	int64_t kept = 0;
	for (int64_t i = 0; i < cond->numel; i++) {
		if (!is_nonzero(cond, i)) continue;
		if (i >= n) return tbc_interp_error(ip, op, "condition selects index %lld of a dim of %lld", (long long)i, (long long)n);
		kept++;
	}
	int64_t dims[TBC_MAX_RANK];
	int rank = 1;
	dims[0] = kept;
	if (ax) {
		rank = x->rank;
		memcpy(dims, x->dims, sizeof dims);
		dims[a] = kept;
	}
	tbc_tensor *t = tbc_interp_new(ip, op, x->dtype, rank, dims);
	if (!t) return -1;
	size_t es = tbc_dtype_size(x->dtype);
	char *dst = t->data;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < cond->numel; i++) {
			if (!is_nonzero(cond, i)) continue;
			memcpy(dst, (const char *)x->data + (size_t)((o * n + i) * inner) * es, (size_t)inner * es);
			dst += (size_t)inner * es;
		}
	out[0] = t;
	return 0;
}

/* ---- NonZero ---- */
bool tbc_shape_NonZero(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	int64_t dims[2] = {in->rank < 0 ? -1 : in->rank == 0 ? 1 : in->rank, -1};
	tbc_data_set_out(cx, op, 0, TBC_DT_I64, 2, dims);
	return true;
}

int tbc_interp_NonZero(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int rank = x->rank ? x->rank : 1; /* a scalar counts as 1-D, as numpy does */
	int64_t n = 0;
	for (int64_t i = 0; i < x->numel; i++) n += is_nonzero(x, i);
	int64_t dims[2] = {rank, n};
	tbc_tensor *t = tbc_interp_new(ip, op, TBC_DT_I64, 2, dims);
	if (!t) return -1;
	int64_t *o = t->data, idx[TBC_MAX_RANK] = {0}, k = 0;
	for (int64_t i = 0; i < x->numel; i++, tbc_index_next(x->rank, x->dims, idx)) {
		if (!is_nonzero(x, i)) continue;
		for (int d = 0; d < rank; d++) o[d * n + k] = x->rank ? idx[d] : 0;
		k++;
	}
	out[0] = t;
	return 0;
}

/* ---- Unique ----
 * The input is viewed as `n` units (elements, or slices along axis) of
 * `len` elements each; units compare lexicographically by value. */
typedef struct unique_view {
	const tbc_tensor *x;
	int64_t n, len, inner;
} unique_view;

/* Element j of unit u. */
static int64_t unit_elem(const unique_view *v, int64_t u, int64_t j) {
	int64_t o = j / v->inner, r = j % v->inner;
	return (o * v->n + u) * v->inner + r;
}

static int cmp_elem(const tbc_tensor *x, int64_t i, int64_t j) {
	tbc_dtype dt = x->dtype;
	if (tbc_dtype_is_float(dt)) {
		double a = tbc_get_f64(x, i), b = tbc_get_f64(x, j);
		if (isnan(a) || isnan(b)) return isnan(a) - isnan(b); /* NaN sorts last */
		return (a > b) - (a < b);
	}
	if (tbc_dtype_is_signed(dt)) {
		int64_t a = tbc_get_i64(x, i), b = tbc_get_i64(x, j);
		return (a > b) - (a < b);
	}
	uint64_t a = tbc_load_u64(dt, x->data, (size_t)i), b = tbc_load_u64(dt, x->data, (size_t)j);
	return (a > b) - (a < b);
}

static int cmp_units(const unique_view *v, int64_t a, int64_t b) {
	for (int64_t j = 0; j < v->len; j++) {
		int c = cmp_elem(v->x, unit_elem(v, a, j), unit_elem(v, b, j));
		if (c) return c;
	}
	return 0;
}

/* Stable merge sort of unit numbers by value. */
static void sort_units(const unique_view *v, int64_t *a, int64_t *tmp, int64_t n) {
	if (n < 2) return;
	int64_t h = n / 2;
	sort_units(v, a, tmp, h);
	sort_units(v, a + h, tmp, n - h);
	int64_t i = 0, j = h, k = 0;
	while (i < h && j < n) tmp[k++] = cmp_units(v, a[j], a[i]) < 0 ? a[j++] : a[i++];
	while (i < h) tmp[k++] = a[i++];
	while (j < n) tmp[k++] = a[j++];
	memcpy(a, tmp, (size_t)n * sizeof *a);
}

bool tbc_shape_Unique(tbc_infer *cx, tbc_op *op) {
	const tbc_type *in = &op->inputs[0]->type;
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	tbc_dim count = tbc_module_fresh_dim(cx->module);
	tbc_type y = {.dtype = in->dtype, .rank = 1}, inv = {.dtype = TBC_DT_I64, .rank = 1};
	y.dims[0] = count;
	if (ax) {
		int a;
		y = *in;
		inv.dims[0] = tbc_module_fresh_dim(cx->module);
		if (in->rank >= 0) {
			if (!tbc_norm_axis(ax->i, in->rank, &a))
				return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)ax->i, in->rank);
			y.dims[a] = count;
			inv.dims[0] = in->dims[a];
		}
	} else {
		int64_t n = tbc_type_numel(in);
		inv.dims[0] = n >= 0 ? (tbc_dim){n, NULL} : tbc_module_fresh_dim(cx->module);
	}
	tbc_type idx = {.dtype = TBC_DT_I64, .rank = 1};
	idx.dims[0] = count;
	if (op->outputs[0]) op->outputs[0]->type = y;
	if (op->n_outputs > 1 && op->outputs[1]) op->outputs[1]->type = idx;
	if (op->n_outputs > 2 && op->outputs[2]) op->outputs[2]->type = inv;
	if (op->n_outputs > 3 && op->outputs[3]) op->outputs[3]->type = idx;
	return true;
}

int tbc_interp_Unique(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	bool sorted = tbc_attr_int(op, "sorted", 1) != 0;
	unique_view v = {x, x->numel, 1, 1};
	int a = 0;
	if (ax) {
		if (!tbc_norm_axis(ax->i, x->rank, &a)) return tbc_interp_error(ip, op, "axis is out of range for rank %d", x->rank);
		v.n = x->dims[a];
		v.inner = prod(x->rank - a - 1, x->dims + a + 1);
		v.len = v.n ? x->numel / v.n : 0;
	}
	size_t n = (size_t)(v.n ? v.n : 1);
	int64_t *order = malloc(n * sizeof *order), *tmp = malloc(n * sizeof *tmp);
	int64_t *first = malloc(n * sizeof *first), *inverse = malloc(n * sizeof *inverse);
	int64_t *counts = calloc(n, sizeof *counts), *slot = malloc(n * sizeof *slot);
	tbc_tensor *res[4] = {NULL, NULL, NULL, NULL};
	int rc = -1;
	if (!order || !tmp || !first || !inverse || !counts || !slot) {
		tbc_interp_error(ip, op, "out of memory");
		goto done;
	}
	for (int64_t i = 0; i < v.n; i++) order[i] = i;
	sort_units(&v, order, tmp, v.n);
	/* Group equal units: the stable sort puts each group's first occurrence first. */
	int64_t m = 0;
	for (int64_t k = 0; k < v.n; k++) {
		if (k == 0 || cmp_units(&v, order[k - 1], order[k]) != 0) first[m++] = order[k];
		inverse[order[k]] = m - 1;
		counts[m - 1]++;
	}
	if (!sorted) {
		/* Renumber groups in order of first occurrence. */
		int64_t *nf = order, *nc = tmp, next = 0;
		for (int64_t g = 0; g < m; g++) slot[g] = -1;
		for (int64_t i = 0; i < v.n; i++) {
			int64_t g = inverse[i];
			if (slot[g] < 0) {
				slot[g] = next;
				nf[next] = first[g];
				nc[next] = counts[g];
				next++;
			}
			inverse[i] = slot[g];
		}
		memcpy(first, nf, (size_t)m * sizeof *first);
		memcpy(counts, nc, (size_t)m * sizeof *counts);
	}
	int64_t dims[TBC_MAX_RANK];
	int rank = 1;
	dims[0] = m;
	if (ax) {
		rank = x->rank;
		memcpy(dims, x->dims, sizeof dims);
		dims[a] = m;
	}
	if (!(res[0] = tbc_interp_new(ip, op, x->dtype, rank, dims))) goto done;
	size_t es = tbc_dtype_size(x->dtype);
	int64_t outer = v.inner && v.n ? x->numel / (v.n * v.inner) : 0;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t g = 0; g < m; g++)
			memcpy((char *)res[0]->data + (size_t)((o * m + g) * v.inner) * es,
			       (const char *)x->data + (size_t)((o * v.n + first[g]) * v.inner) * es, (size_t)v.inner * es);
	const int64_t *lists[3] = {first, inverse, counts};
	int64_t lens[3] = {m, v.n, m};
	for (int k = 1; k < 4 && k < op->n_outputs; k++) {
		if (!op->outputs[k]) continue;
		if (!(res[k] = tbc_interp_new(ip, op, TBC_DT_I64, 1, &lens[k - 1]))) goto done;
		memcpy(res[k]->data, lists[k - 1], (size_t)lens[k - 1] * sizeof(int64_t));
	}
	for (int k = 0; k < 4 && k < op->n_outputs; k++) {
		out[k] = res[k];
		res[k] = NULL;
	}
	rc = 0;
done:
	for (int k = 0; k < 4; k++) tbc_tensor_destroy(res[k]);
	free(order);
	free(tmp);
	free(first);
	free(inverse);
	free(counts);
	free(slot);
	return rc;
}

/* ---- Trilu ---- */
int tbc_interp_Trilu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *kt = op->n_inputs > 1 ? in[1] : NULL;
	if (x->rank < 2) return tbc_interp_error(ip, op, "the input must have rank >= 2");
	int64_t k = 0;
	if (kt) {
		if (!tbc_dtype_is_int(kt->dtype) || kt->numel != 1) return tbc_interp_error(ip, op, "k must be one integer");
		k = tbc_get_i64(kt, 0);
	}
	bool upper = tbc_attr_int(op, "upper", 1) != 0;
	tbc_tensor *t = tbc_tensor_clone(x);
	if (!t) return tbc_interp_error(ip, op, "out of memory");
	int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
	size_t es = tbc_dtype_size(x->dtype);
	for (int64_t i = 0; i < t->numel; i++) {
		int64_t c = i % cols, r = (i / cols) % rows;
		/* Upper keeps j - i >= k, lower keeps j - i <= k; the rest is zeroed. */
		bool keep = upper ? c - r >= k : c - r <= k;
		if (!keep) memset((char *)t->data + (size_t)i * es, 0, es);
	}
	out[0] = t;
	return 0;
}

/* ---- ReverseSequence ---- */
int tbc_interp_ReverseSequence(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *lens = in[1];
	int ta, ba;
	if (x->rank < 2 || !tbc_norm_axis(tbc_attr_int(op, "time_axis", 0), x->rank, &ta) ||
	    !tbc_norm_axis(tbc_attr_int(op, "batch_axis", 1), x->rank, &ba) || ta == ba || ta > 1 || ba > 1)
		return tbc_interp_error(ip, op, "time_axis and batch_axis must be 0 and 1 in some order, rank >= 2");
	if (!tbc_dtype_is_int(lens->dtype) || lens->rank != 1 || lens->numel != x->dims[ba])
		return tbc_interp_error(ip, op, "sequence_lens must hold one length per batch entry");
	int64_t steps = x->dims[ta];
	for (int64_t b = 0; b < lens->numel; b++) {
		int64_t l = tbc_get_i64(lens, b);
		if (l < 0 || l > steps)
			return tbc_interp_error(ip, op, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b, (long long)l,
						(long long)steps);
	}
	tbc_tensor *t = tbc_tensor_clone(x);
	if (!t) return tbc_interp_error(ip, op, "out of memory");
	int64_t xs[TBC_MAX_RANK];
	tbc_strides(x->rank, x->dims, xs);
	int64_t inner = xs[1]; /* elements per (dim0, dim1) pair */
	size_t es = tbc_dtype_size(x->dtype);
	for (int64_t b = 0; b < x->dims[ba]; b++) {
		int64_t l = tbc_get_i64(lens, b);
		for (int64_t s = 0; s < l; s++) {
			int64_t dst = s * xs[ta] + b * xs[ba], src = (l - 1 - s) * xs[ta] + b * xs[ba];
			memcpy((char *)t->data + (size_t)dst * es, (const char *)x->data + (size_t)src * es, (size_t)inner * es);
		}
	}
	out[0] = t;
	return 0;
}

/* ---- EyeLike ---- */
bool tbc_shape_EyeLike(tbc_infer *cx, tbc_op *op) {
	tbc_type t = op->inputs[0]->type;
	if (t.rank >= 0 && t.rank != 2) return tbc_infer_error(cx, op, "the input must be 2-D, not rank %d", t.rank);
	int64_t dt = tbc_attr_int(op, "dtype", t.dtype);
	if (!tbc_dtype_valid((int)dt) || !tbc_dtype_supported((tbc_dtype)dt))
		return tbc_infer_error(cx, op, "dtype %lld is not a supported element type", (long long)dt);
	t.dtype = (tbc_dtype)dt;
	if (op->outputs[0]) op->outputs[0]->type = t;
	return true;
}

int tbc_interp_EyeLike(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	if (x->rank != 2) return tbc_interp_error(ip, op, "the input must be 2-D");
	int64_t dt = tbc_attr_int(op, "dtype", x->dtype), k = tbc_attr_int(op, "k", 0);
	if (!tbc_dtype_valid((int)dt) || !tbc_dtype_supported((tbc_dtype)dt))
		return tbc_interp_error(ip, op, "dtype %lld is not supported", (long long)dt);
	tbc_tensor *t = tbc_interp_new(ip, op, (tbc_dtype)dt, 2, x->dims);
	if (!t) return -1;
	for (int64_t r = 0; r < x->dims[0]; r++) {
		int64_t c = r + k;
		if (c >= 0 && c < x->dims[1]) tbc_set_f64(t, r * x->dims[1] + c, 1.0);
	}
	out[0] = t;
	return 0;
}

/* ---- Range ---- */

/* Element count of range(start, limit, delta): max(ceil((limit - start) / delta), 0). */
static bool range_count(const tbc_tensor *s, const tbc_tensor *l, const tbc_tensor *d, int64_t *n) {
	if (tbc_dtype_is_float(s->dtype)) {
		double a = tbc_get_f64(s, 0), b = tbc_get_f64(l, 0), c = tbc_get_f64(d, 0);
		if (c == 0 || !isfinite(a) || !isfinite(b) || !isfinite(c)) return false;
		double v = ceil((b - a) / c);
		if (v > (double)TBC_MAX_TENSOR_BYTES) return false;
		*n = v > 0 ? (int64_t)v : 0;
		return true;
	}
	int64_t a = tbc_get_i64(s, 0), b = tbc_get_i64(l, 0), c = tbc_get_i64(d, 0);
	if (c == 0) return false;
	/* Integer arithmetic in 128 bits so that no value overflows. */
	__int128 diff = (__int128)b - a, q = diff / c;
	if (q * c != diff && ((diff > 0) == (c > 0))) q++;
	if (q > (__int128)TBC_MAX_TENSOR_BYTES) return false;
	*n = q > 0 ? (int64_t)q : 0;
	return true;
}

static bool range_scalars_ok(const tbc_op *op, const tbc_tensor *const *t) {
	for (int i = 0; i < 3; i++)
		if (!t[i] || t[i]->numel != 1 || t[i]->rank > 1 || t[i]->dtype != t[0]->dtype) return false;
	(void)op;
	return true;
}

bool tbc_shape_Range(tbc_infer *cx, tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	for (int i = 1; i < 3; i++)
		if (op->inputs[i]->type.dtype != dt) return tbc_infer_error(cx, op, "start, limit and delta must share a dtype");
	const tbc_tensor *c[3] = {tbc_input_const(op, 0), tbc_input_const(op, 1), tbc_input_const(op, 2)};
	int64_t n = -1;
	if (c[0] && c[1] && c[2]) {
		if (!range_scalars_ok(op, c) || !range_count(c[0], c[1], c[2], &n))
			return tbc_infer_error(cx, op, "start, limit and delta must be finite scalars with a non-zero delta");
	} else if (tbc_dtype_is_int(dt)) {
		/* arange(past, past + seq): with a delta of d > 0 the count is
		 * (limit - start) / d when that divides exactly, assuming limit >=
		 * start; the compiled code checks the count it computes against it. */
		tbc_sval s[TBC_MAX_RANK], l[TBC_MAX_RANK], d[TBC_MAX_RANK];
		if (tbc_input_svals(op, 0, s) == 1 && tbc_input_svals(op, 1, l) == 1 && tbc_input_svals(op, 2, d) == 1 &&
		    s[0].known && l[0].known && d[0].known && !d[0].sym && d[0].c > 0 && op->outputs[0]) {
			tbc_dim span = tbc_dim_add(cx->module, tbc_sval_dim(l[0]), tbc_sval_dim(s[0]), -1);
			if (!s[0].sym && s[0].c < 0) span = (tbc_dim){-1, NULL}; /* a negative start is no dim */
			if (!l[0].sym && l[0].c < 0) span = (tbc_dim){-1, NULL};
			tbc_dim count = span.sym ? tbc_dim_div_exact(cx->module, span, (tbc_dim){d[0].c, NULL}) : (tbc_dim){-1, NULL};
			if (count.sym) {
				tbc_type *t = &op->outputs[0]->type;
				memset(t, 0, sizeof *t);
				t->dtype = dt;
				t->rank = 1;
				t->dims[0] = count;
				return true;
			}
		}
	}
	tbc_data_set_out(cx, op, 0, dt, 1, &n);
	return true;
}

int tbc_interp_Range(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	int64_t n;
	if (!range_scalars_ok(op, in) || !range_count(in[0], in[1], in[2], &n))
		return tbc_interp_error(ip, op, "start, limit and delta must be finite scalars of one dtype, delta non-zero");
	tbc_tensor *t = tbc_interp_new(ip, op, in[0]->dtype, 1, &n);
	if (!t) return -1;
	if (tbc_dtype_is_float(t->dtype)) {
		double s = tbc_get_f64(in[0], 0), d = tbc_get_f64(in[2], 0);
		for (int64_t i = 0; i < n; i++) tbc_set_f64(t, i, s + (double)i * d);
	} else {
		int64_t s = tbc_get_i64(in[0], 0), d = tbc_get_i64(in[2], 0);
		for (int64_t i = 0; i < n; i++) tbc_set_i64(t, i, (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d));
	}
	out[0] = t;
	return 0;
}
