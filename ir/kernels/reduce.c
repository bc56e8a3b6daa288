/* The Reduce* ops and ArgMax/ArgMin: one reduction engine.  Every input
 * element is added into the accumulator of the output element it reduces
 * to, so any set of axes is one pass.  Floats accumulate in double and round
 * on store; integers accumulate exactly in 64 bits (wrapping like the
 * narrower type would), never through double.  An empty reduction gives the
 * op's identity: 0 for sums, 1 for ReduceProd, -inf (or the smallest integer,
 * or false) for ReduceMax, -inf for ReduceLogSum(Exp), NaN for ReduceMean.
 * With noop_with_empty_axes and no axes nothing is reduced, but the
 * element-wise part still applies, as the spec says.
 * Also the helpers of reduce_common.h. */
#include <stdio.h>

#include "reduce_common.h"

/* ---- Shared helpers ------------------------------------------------------ */

tbc_red_class tbc_red_class_of(tbc_dtype dt) {
	if (tbc_dtype_is_float(dt)) return TBC_RED_FLOAT;
	switch (dt) {
	case TBC_DT_I8:
	case TBC_DT_I16:
	case TBC_DT_I32:
	case TBC_DT_I64:
	case TBC_DT_I4: return TBC_RED_SIGNED;
	default: return TBC_RED_UNSIGNED;
	}
}

int tbc_red_cmp(const tbc_tensor *t, int64_t i, int64_t j) {
	switch (tbc_red_class_of(t->dtype)) {
	case TBC_RED_FLOAT: {
		double a = tbc_get_f64(t, i), b = tbc_get_f64(t, j);
		if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
		return (a > b) - (a < b);
	}
	case TBC_RED_SIGNED: {
		int64_t a = tbc_get_i64(t, i), b = tbc_get_i64(t, j);
		return (a > b) - (a < b);
	}
	default: {
		uint64_t a = tbc_load_u64(t->dtype, t->data, (size_t)i), b = tbc_load_u64(t->dtype, t->data, (size_t)j);
		return (a > b) - (a < b);
	}
	}
}

void tbc_red_int_limits(tbc_dtype dt, int64_t *min, uint64_t *max) {
	switch (dt) {
	case TBC_DT_I8: *min = INT8_MIN, *max = INT8_MAX; break;
	case TBC_DT_I16: *min = INT16_MIN, *max = INT16_MAX; break;
	case TBC_DT_I32: *min = INT32_MIN, *max = INT32_MAX; break;
	case TBC_DT_I64: *min = INT64_MIN, *max = INT64_MAX; break;
	case TBC_DT_I4: *min = -8, *max = 7; break;
	case TBC_DT_U8: *min = 0, *max = UINT8_MAX; break;
	case TBC_DT_U16: *min = 0, *max = UINT16_MAX; break;
	case TBC_DT_U32: *min = 0, *max = UINT32_MAX; break;
	case TBC_DT_U4: *min = 0, *max = 15; break;
	case TBC_DT_BOOL: *min = 0, *max = 1; break;
	default: *min = 0, *max = UINT64_MAX; break;
	}
}

bool tbc_red_scalar_int(const tbc_tensor *t, int64_t *out) {
	if (!t || t->numel != 1 || tbc_red_class_of(t->dtype) == TBC_RED_FLOAT) return false;
	*out = tbc_get_i64(t, 0);
	return true;
}

double *tbc_red_expand_f64(const tbc_tensor *t, int rank, const int64_t *dims, bool *bad) {
	*bad = false;
	if (t->rank > rank) {
		*bad = true;
		return NULL;
	}
	for (int i = 0; i < t->rank; i++) {
		int64_t d = t->dims[i], want = dims[rank - t->rank + i];
		if (d != want && d != 1) {
			*bad = true;
			return NULL;
		}
	}
	int64_t n = tbc_shape_numel(rank, dims);
	double *v = n < 0 ? NULL : malloc((size_t)(n ? n : 1) * sizeof *v);
	if (!v) return NULL;
	int64_t str[TBC_MAX_RANK], idx[TBC_MAX_RANK] = {0};
	tbc_broadcast_strides(t->rank, t->dims, rank, str);
	for (int64_t i = 0; i < n; i++) {
		int64_t off = 0;
		for (int d = 0; d < rank; d++) off += idx[d] * str[d];
		v[i] = tbc_get_f64(t, off);
		tbc_index_next(rank, dims, idx);
	}
	return v;
}

bool tbc_red_type_broadcasts_to(const tbc_type *t, const tbc_type *x) {
	if (t->rank < 0 || x->rank < 0) return true;
	if (t->rank > x->rank) return false;
	for (int i = 0; i < t->rank; i++) {
		tbc_dim a = t->dims[i], b = x->dims[x->rank - t->rank + i];
		if (a.sym || b.sym) continue;
		if (a.size != b.size && a.size != 1) return false;
	}
	return true;
}

double *tbc_red_load_f64s(const tbc_tensor *t) {
	double *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
	if (!v) return NULL;
	for (int64_t i = 0; i < t->numel; i++) v[i] = tbc_get_f64(t, i);
	return v;
}

/* ---- Axes ---------------------------------------------------------------- */

/* Marks the axes listed in values[0..n) (negative from the end) in mask;
 * false with a message in err when one is out of range or repeated. */
static bool mark_axes(const int64_t *values, int64_t n, int rank, bool *mask, char *err, size_t errsz) {
	for (int d = 0; d < rank; d++) mask[d] = false;
	for (int64_t i = 0; i < n; i++) {
		int a;
		if (!tbc_norm_axis(values[i], rank, &a)) {
			snprintf(err, errsz, "axis %lld is out of range for rank %d", (long long)values[i], rank);
			return false;
		}
		if (mask[a]) {
			snprintf(err, errsz, "axis %lld is repeated", (long long)values[i]);
			return false;
		}
		mask[a] = true;
	}
	return true;
}

static bool reduce_shape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	tbc_type *y = &op->outputs[0]->type;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	bool noop = tbc_attr_int(op, "noop_with_empty_axes", 0) != 0;
	const tbc_value *av = op->n_inputs > 1 ? op->inputs[1] : NULL;
	const tbc_tensor *ac = av ? tbc_input_const(op, 1) : NULL;
	y->dtype = x->dtype;
	if (av && tbc_red_class_of(av->type.dtype) == TBC_RED_FLOAT)
		return tbc_infer_error(cx, op, "axes must be an integer tensor, not %s", tbc_dtype_name(av->type.dtype));
	if (av && av->type.rank > 1) return tbc_infer_error(cx, op, "axes must be a 1-D tensor, not rank %d", av->type.rank);
	if (x->rank < 0) {
		y->rank = -1;
		return true;
	}
	int64_t n_axes = -1; /* -1: not known */
	if (!av) n_axes = 0;
	else if (ac) n_axes = ac->numel;
	else if (av->type.rank == 0) n_axes = 1;
	else if (av->type.rank == 1 && !av->type.dims[0].sym) n_axes = av->type.dims[0].size;
	if (n_axes == 0 && noop) {
		*y = *x;
		return true;
	}
	bool mask[TBC_MAX_RANK];
	bool known = n_axes == 0 || ac;
	if (n_axes == 0) {
		for (int d = 0; d < x->rank; d++) mask[d] = true;
	} else if (ac) {
		char err[128];
		int64_t *v = tbc_tensor_i64s(ac);
		if (!v) return tbc_infer_error(cx, op, "out of memory");
		bool ok = mark_axes(v, ac->numel, x->rank, mask, err, sizeof err);
		free(v);
		if (!ok) return tbc_infer_error(cx, op, "%s", err);
	}
	if (known) {
		int r = 0;
		for (int d = 0; d < x->rank; d++) {
			if (!mask[d]) y->dims[r++] = x->dims[d];
			else if (keep) y->dims[r++] = (tbc_dim){1, NULL};
		}
		y->rank = r;
		return true;
	}
	/* Axes known only at run time: each dim is either kept or 1. */
	if (keep) {
		y->rank = x->rank;
		for (int d = 0; d < x->rank; d++)
			y->dims[d] = !x->dims[d].sym && x->dims[d].size == 1 ? x->dims[d] : tbc_module_fresh_dim(cx->module);
		return true;
	}
	if (n_axes < 0) {
		y->rank = -1;
		return true;
	}
	if (n_axes > x->rank) return tbc_infer_error(cx, op, "%lld axes for a rank-%d input", (long long)n_axes, x->rank);
	y->rank = x->rank - (int)n_axes;
	for (int d = 0; d < y->rank; d++) y->dims[d] = tbc_module_fresh_dim(cx->module);
	return true;
}

/* ---- The engine ---------------------------------------------------------- */

typedef enum red_kind {
	RED_SUM, RED_MEAN, RED_PROD, RED_MAX, RED_MIN, RED_L1, RED_L2, RED_SUMSQ, RED_LOGSUM, RED_LOGSUMEXP
} red_kind;

int64_t *tbc_red_output_map(const tbc_tensor *x, const bool *mask) {
	int64_t kd[TBC_MAX_RANK], ks[TBC_MAX_RANK], idx[TBC_MAX_RANK] = {0};
	for (int d = 0; d < x->rank; d++) kd[d] = mask[d] ? 1 : x->dims[d];
	tbc_strides(x->rank, kd, ks);
	for (int d = 0; d < x->rank; d++)
		if (mask[d]) ks[d] = 0;
	int64_t *map = malloc((size_t)(x->numel ? x->numel : 1) * sizeof *map);
	if (!map) return NULL;
	for (int64_t i = 0; i < x->numel; i++) {
		int64_t o = 0;
		for (int d = 0; d < x->rank; d++) o += idx[d] * ks[d];
		map[i] = o;
		tbc_index_next(x->rank, x->dims, idx);
	}
	return map;
}

static bool reduce_float(const tbc_tensor *x, const int64_t *map, tbc_tensor *y, red_kind k, int64_t count) {
	int64_t n = y->numel;
	double *acc = malloc((size_t)(n ? n : 1) * sizeof *acc);
	double *shift = k == RED_LOGSUMEXP ? malloc((size_t)(n ? n : 1) * sizeof *shift) : NULL;
	if (!acc || (k == RED_LOGSUMEXP && !shift)) {
		free(acc);
		free(shift);
		return false;
	}
	double init = k == RED_PROD ? 1 : k == RED_MAX ? -INFINITY : k == RED_MIN ? INFINITY : 0;
	for (int64_t o = 0; o < n; o++) acc[o] = init;
	if (k == RED_LOGSUMEXP) {
		/* The largest finite value of each group keeps exp() in range. */
		for (int64_t o = 0; o < n; o++) shift[o] = -INFINITY;
		for (int64_t i = 0; i < x->numel; i++) {
			double v = tbc_get_f64(x, i);
			if (v > shift[map[i]] || isnan(v)) shift[map[i]] = v;
		}
		for (int64_t o = 0; o < n; o++)
			if (!isfinite(shift[o])) shift[o] = 0;
	}
	for (int64_t i = 0; i < x->numel; i++) {
		double v = tbc_get_f64(x, i), *a = &acc[map[i]];
		switch (k) {
		case RED_SUM:
		case RED_MEAN:
		case RED_LOGSUM: *a += v; break;
		case RED_PROD: *a *= v; break;
		case RED_MAX: if (v > *a || isnan(v)) *a = isnan(*a) ? *a : v; break;
		case RED_MIN: if (v < *a || isnan(v)) *a = isnan(*a) ? *a : v; break;
		case RED_L1: *a += fabs(v); break;
		case RED_L2:
		case RED_SUMSQ: *a += v * v; break;
		case RED_LOGSUMEXP: *a += exp(v - shift[map[i]]); break;
		}
	}
	for (int64_t o = 0; o < n; o++) {
		double r = acc[o];
		if (k == RED_MEAN) r = r / (double)count;
		else if (k == RED_L2) r = sqrt(r);
		else if (k == RED_LOGSUM) r = log(r);
		else if (k == RED_LOGSUMEXP) r = log(r) + shift[o];
		tbc_set_f64(y, o, r);
	}
	free(acc);
	free(shift);
	return true;
}

/* Integers and bool: exact 64-bit arithmetic (wrapping), compared signed or
 * unsigned as the dtype is. */
static bool reduce_int(const tbc_tensor *x, const int64_t *map, tbc_tensor *y, red_kind k, int64_t count) {
	int64_t n = y->numel;
	bool sgn = tbc_red_class_of(x->dtype) == TBC_RED_SIGNED;
	uint64_t *acc = malloc((size_t)(n ? n : 1) * sizeof *acc);
	if (!acc) return false;
	int64_t lo;
	uint64_t hi;
	tbc_red_int_limits(x->dtype, &lo, &hi);
	uint64_t init = k == RED_PROD ? 1 : k == RED_MAX ? (uint64_t)lo : k == RED_MIN ? hi : 0;
	for (int64_t o = 0; o < n; o++) acc[o] = init;
	for (int64_t i = 0; i < x->numel; i++) {
		uint64_t v = sgn ? (uint64_t)tbc_get_i64(x, i) : tbc_load_u64(x->dtype, x->data, (size_t)i);
		uint64_t *a = &acc[map[i]];
		switch (k) {
		case RED_MAX:
			if (sgn ? (int64_t)v > (int64_t)*a : v > *a) *a = v;
			break;
		case RED_MIN:
			if (sgn ? (int64_t)v < (int64_t)*a : v < *a) *a = v;
			break;
		case RED_PROD: *a *= v; break;
		case RED_L1: *a += sgn && (int64_t)v < 0 ? 0 - v : v; break;
		case RED_L2:
		case RED_SUMSQ: *a += v * v; break;
		default: *a += v; break;
		}
	}
	for (int64_t o = 0; o < n; o++) {
		uint64_t r = acc[o];
		if (k == RED_MEAN) {
			if (count == 0) r = 0;
			else if (sgn) r = (uint64_t)((int64_t)r / count);
			else r = r / (uint64_t)count;
		}
		if (k == RED_L2) tbc_set_f64(y, o, sqrt(sgn ? (double)(int64_t)r : (double)r));
		else tbc_store_u64(y->dtype, y->data, (size_t)o, r);
	}
	free(acc);
	return true;
}

static int reduce_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out, red_kind k) {
	const tbc_tensor *x = in[0], *axes = op->n_inputs > 1 ? in[1] : NULL;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	bool noop = tbc_attr_int(op, "noop_with_empty_axes", 0) != 0;
	bool mask[TBC_MAX_RANK];
	if (axes && tbc_red_class_of(axes->dtype) == TBC_RED_FLOAT)
		return tbc_interp_error(ip, op, "axes must be an integer tensor");
	if (!axes || axes->numel == 0) {
		/* noop_with_empty_axes reduces nothing, but the element-wise part
		 * still applies (ReduceSumSquare squares, ReduceLogSum takes logs). */
		for (int d = 0; d < x->rank; d++) mask[d] = !noop;
	} else {
		char err[128];
		int64_t *v = tbc_tensor_i64s(axes);
		if (!v) return tbc_interp_error(ip, op, "out of memory");
		bool ok = mark_axes(v, axes->numel, x->rank, mask, err, sizeof err);
		free(v);
		if (!ok) return tbc_interp_error(ip, op, "%s", err);
	}
	int64_t dims[TBC_MAX_RANK], count = 1;
	int r = 0;
	for (int d = 0; d < x->rank; d++) {
		if (mask[d]) count *= x->dims[d];
		if (!mask[d]) dims[r++] = x->dims[d];
		else if (keep) dims[r++] = 1;
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, r, dims);
	if (!y) return -1;
	int64_t *map = tbc_red_output_map(x, mask);
	if (!map) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	bool exact = tbc_red_class_of(x->dtype) != TBC_RED_FLOAT && k != RED_LOGSUM && k != RED_LOGSUMEXP;
	bool ok = exact ? reduce_int(x, map, y, k, count) : reduce_float(x, map, y, k, count);
	free(map);
	if (!ok) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	out[0] = y;
	return 0;
}

#define REDUCE_OP(Name, kind)                                                                                  \
	bool tbc_shape_##Name(tbc_infer *cx, tbc_op *op) { return reduce_shape(cx, op); }                          \
	int tbc_interp_##Name(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { \
		return reduce_run(ip, op, in, out, kind);                                                          \
	}
REDUCE_OP(ReduceL1, RED_L1)
REDUCE_OP(ReduceL2, RED_L2)
REDUCE_OP(ReduceLogSum, RED_LOGSUM)
REDUCE_OP(ReduceLogSumExp, RED_LOGSUMEXP)
REDUCE_OP(ReduceMax, RED_MAX)
REDUCE_OP(ReduceMean, RED_MEAN)
REDUCE_OP(ReduceMin, RED_MIN)
REDUCE_OP(ReduceProd, RED_PROD)
REDUCE_OP(ReduceSum, RED_SUM)
REDUCE_OP(ReduceSumSquare, RED_SUMSQ)
#undef REDUCE_OP

/* ---- ArgMax / ArgMin ----------------------------------------------------- */

static bool arg_shape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	tbc_type *y = &op->outputs[0]->type;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	y->dtype = TBC_DT_I64;
	if (x->rank < 0) {
		y->rank = -1;
		return true;
	}
	int64_t axis = tbc_attr_int(op, "axis", 0);
	int a;
	if (!tbc_norm_axis(axis, x->rank, &a))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	int r = 0;
	for (int d = 0; d < x->rank; d++) {
		if (d != a) y->dims[r++] = x->dims[d];
		else if (keep) y->dims[r++] = (tbc_dim){1, NULL};
	}
	y->rank = r;
	return true;
}

/* want_max: ArgMax.  NaN wins both (numpy's argmax and argmin pick it). */
static int arg_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, tbc_tensor **out, bool want_max) {
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	bool last = tbc_attr_int(op, "select_last_index", 0) != 0;
	int64_t axis = tbc_attr_int(op, "axis", 0);
	int a;
	if (!tbc_norm_axis(axis, x->rank, &a))
		return tbc_interp_error(ip, op, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
	int64_t dims[TBC_MAX_RANK], outer = 1, inner = 1, n = x->dims[a];
	int r = 0;
	for (int d = 0; d < x->rank; d++) {
		if (d < a) outer *= x->dims[d];
		if (d > a) inner *= x->dims[d];
		if (d != a) dims[r++] = x->dims[d];
		else if (keep) dims[r++] = 1;
	}
	if (n == 0 && outer * inner > 0) return tbc_interp_error(ip, op, "cannot take the arg%s of an empty axis", want_max ? "max" : "min");
	tbc_tensor *y = tbc_interp_new(ip, op, TBC_DT_I64, r, dims);
	if (!y) return -1;
	bool is_float = tbc_red_class_of(x->dtype) == TBC_RED_FLOAT;
	int64_t *res = y->data;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * n * inner + i, best = 0;
			for (int64_t j = 1; j < n; j++) {
				int64_t cur = base + j * inner, bi = base + best * inner;
				if (is_float && isnan(tbc_get_f64(x, bi))) {
					if (last && isnan(tbc_get_f64(x, cur))) best = j;
					continue;
				}
				if (is_float && isnan(tbc_get_f64(x, cur))) {
					best = j;
					continue;
				}
				int c = tbc_red_cmp(x, cur, bi);
				if (!want_max) c = -c;
				if (c > 0 || (c == 0 && last)) best = j;
			}
			res[o * inner + i] = best;
		}
	out[0] = y;
	return 0;
}

bool tbc_shape_ArgMax(tbc_infer *cx, tbc_op *op) { return arg_shape(cx, op); }
bool tbc_shape_ArgMin(tbc_infer *cx, tbc_op *op) { return arg_shape(cx, op); }
int tbc_interp_ArgMax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return arg_run(ip, op, in[0], out, true);
}
int tbc_interp_ArgMin(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return arg_run(ip, op, in[0], out, false);
}
