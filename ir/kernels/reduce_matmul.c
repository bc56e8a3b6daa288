/* Contractions: MatMul (numpy semantics: batch broadcasting, 1-D operands
 * promoted and their dim removed), Gemm, MatMulInteger, QLinearMatMul, and
 * Det.  Operands are loaded once into double (or int64) arrays, transposed
 * where Gemm asks, and multiplied in i-k-j order, which keeps every inner
 * loop on contiguous rows.  Floats accumulate in double; integer MatMul and
 * Gemm accumulate exactly in 64 bits, wrapping like the narrow type. */
#include "reduce_common.h"

/* ---- Batched matrix products --------------------------------------------- */

typedef struct mm_plan {
	int64_t m, k, n;
	int batch_rank;
	int64_t batch[TBC_MAX_RANK];
	int64_t a_str[TBC_MAX_RANK], b_str[TBC_MAX_RANK]; /* per batch dim, in matrices (0: broadcast) */
	int out_rank;
	int64_t out_dims[TBC_MAX_RANK];
} mm_plan;

static bool mm_plan_make(int ra, const int64_t *da, int rb, const int64_t *db, mm_plan *p, char *err, size_t errsz) {
	if (ra < 1 || rb < 1) {
		snprintf(err, errsz, "MatMul operands must have rank 1 or more");
		return false;
	}
	p->m = ra == 1 ? 1 : da[ra - 2];
	int64_t ka = da[ra - 1], kb = rb == 1 ? db[0] : db[rb - 2];
	p->n = rb == 1 ? 1 : db[rb - 1];
	if (ka != kb) {
		snprintf(err, errsz, "inner dims differ: %lld and %lld", (long long)ka, (long long)kb);
		return false;
	}
	p->k = ka;
	int abr = ra > 2 ? ra - 2 : 0, bbr = rb > 2 ? rb - 2 : 0;
	if (!tbc_broadcast_dims(abr, da, bbr, db, &p->batch_rank, p->batch)) {
		snprintf(err, errsz, "batch dims do not broadcast");
		return false;
	}
	tbc_broadcast_strides(abr, da, p->batch_rank, p->a_str);
	tbc_broadcast_strides(bbr, db, p->batch_rank, p->b_str);
	p->out_rank = 0;
	for (int d = 0; d < p->batch_rank; d++) p->out_dims[p->out_rank++] = p->batch[d];
	if (ra > 1) p->out_dims[p->out_rank++] = p->m;
	if (rb > 1) p->out_dims[p->out_rank++] = p->n;
	return true;
}

/* v's last two dims (rows, cols) swapped; the dims before them are kept. */
static double *transpose_f64(const double *v, int64_t total, int64_t rows, int64_t cols) {
	double *t = malloc((size_t)(total ? total : 1) * sizeof *t);
	int64_t mat = rows * cols;
	if (!t) return NULL;
	for (int64_t b = 0; mat && b < total / mat; b++)
		for (int64_t r = 0; r < rows; r++)
			for (int64_t c = 0; c < cols; c++) t[b * mat + c * rows + r] = v[b * mat + r * cols + c];
	return t;
}

static int64_t *transpose_i64(const int64_t *v, int64_t total, int64_t rows, int64_t cols) {
	int64_t *t = malloc((size_t)(total ? total : 1) * sizeof *t);
	int64_t mat = rows * cols;
	if (!t) return NULL;
	for (int64_t b = 0; mat && b < total / mat; b++)
		for (int64_t r = 0; r < rows; r++)
			for (int64_t c = 0; c < cols; c++) t[b * mat + c * rows + r] = v[b * mat + r * cols + c];
	return t;
}

/* y[batch, i, :] = sum_k a[batch, i, k] * b[batch, k, :], in i-k-j order:
 * the inner loop runs along rows of b and y, contiguous and free of a
 * loop-carried sum, so the compiler vectorizes it without reassociating. */
static void mm_f64(const mm_plan *p, const double *a, const double *b, double *y) {
	int64_t idx[TBC_MAX_RANK] = {0}, nb = 1;
	for (int d = 0; d < p->batch_rank; d++) nb *= p->batch[d];
	for (int64_t t = 0; t < nb; t++) {
		int64_t ao = 0, bo = 0;
		for (int d = 0; d < p->batch_rank; d++) {
			ao += idx[d] * p->a_str[d];
			bo += idx[d] * p->b_str[d];
		}
		const double *am = a + ao * p->m * p->k, *bm = b + bo * p->k * p->n;
		for (int64_t i = 0; i < p->m; i++) {
			double *yr = y + (t * p->m + i) * p->n;
			for (int64_t j = 0; j < p->n; j++) yr[j] = 0;
			for (int64_t q = 0; q < p->k; q++) {
				double av = am[i * p->k + q];
				const double *br = bm + q * p->n;
				for (int64_t j = 0; j < p->n; j++) yr[j] += av * br[j];
			}
		}
		tbc_index_next(p->batch_rank, p->batch, idx);
	}
}

/* The same in 64-bit integers, wrapping instead of overflowing. */
static void mm_i64(const mm_plan *p, const int64_t *a, const int64_t *b, int64_t *y) {
	int64_t idx[TBC_MAX_RANK] = {0}, nb = 1;
	for (int d = 0; d < p->batch_rank; d++) nb *= p->batch[d];
	for (int64_t t = 0; t < nb; t++) {
		int64_t ao = 0, bo = 0;
		for (int d = 0; d < p->batch_rank; d++) {
			ao += idx[d] * p->a_str[d];
			bo += idx[d] * p->b_str[d];
		}
		const int64_t *am = a + ao * p->m * p->k, *bm = b + bo * p->k * p->n;
		for (int64_t i = 0; i < p->m; i++) {
			uint64_t *yr = (uint64_t *)(y + (t * p->m + i) * p->n);
			for (int64_t j = 0; j < p->n; j++) yr[j] = 0;
			for (int64_t q = 0; q < p->k; q++) {
				uint64_t av = (uint64_t)am[i * p->k + q];
				const int64_t *br = bm + q * p->n;
				for (int64_t j = 0; j < p->n; j++) yr[j] += av * (uint64_t)br[j];
			}
		}
		tbc_index_next(p->batch_rank, p->batch, idx);
	}
}

/* Shape rule of a numpy matmul of inputs ia and ib with result dtype dt. */
static bool mm_shape(tbc_infer *cx, tbc_op *op, int ia, int ib, tbc_dtype dt) {
	const tbc_type *a = &op->inputs[ia]->type, *b = &op->inputs[ib]->type;
	tbc_type *y = &op->outputs[0]->type;
	y->dtype = dt;
	if (a->rank == 0 || b->rank == 0) return tbc_infer_error(cx, op, "MatMul operands must have rank 1 or more");
	if (a->rank < 0 || b->rank < 0) {
		y->rank = -1;
		return true;
	}
	tbc_dim ka = a->dims[a->rank - 1], kb = b->dims[b->rank == 1 ? 0 : b->rank - 2];
	if (!ka.sym && !kb.sym && ka.size != kb.size)
		return tbc_infer_error(cx, op, "inner dims differ: %lld and %lld", (long long)ka.size, (long long)kb.size);
	tbc_type ab = *a, bb = *b, out;
	ab.rank = a->rank > 2 ? a->rank - 2 : 0;
	bb.rank = b->rank > 2 ? b->rank - 2 : 0;
	const tbc_type *both[2] = {&ab, &bb};
	memset(&out, 0, sizeof out);
	if (!tbc_broadcast_types(cx, op, 2, both, &out)) return false;
	if (out.rank + 2 > TBC_MAX_RANK) return tbc_infer_error(cx, op, "result rank is too large");
	y->rank = out.rank;
	for (int d = 0; d < out.rank; d++) y->dims[d] = out.dims[d];
	if (a->rank > 1) y->dims[y->rank++] = a->dims[a->rank - 2];
	if (b->rank > 1) y->dims[y->rank++] = b->dims[b->rank - 1];
	return true;
}

bool tbc_shape_MatMul(tbc_infer *cx, tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	if (dt != op->inputs[1]->type.dtype)
		return tbc_infer_error(cx, op, "operands have different types (%s and %s)", tbc_dtype_name(dt),
				       tbc_dtype_name(op->inputs[1]->type.dtype));
	if (dt == TBC_DT_BOOL) return tbc_infer_error(cx, op, "operands must be numbers, not bool");
	return mm_shape(cx, op, 0, 1, dt);
}

int tbc_interp_MatMul(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *a = in[0], *b = in[1];
	mm_plan p;
	char err[128];
	if (!mm_plan_make(a->rank, a->dims, b->rank, b->dims, &p, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	tbc_tensor *y = tbc_interp_new(ip, op, a->dtype, p.out_rank, p.out_dims);
	if (!y) return -1;
	bool ok;
	if (tbc_red_class_of(a->dtype) == TBC_RED_FLOAT) {
		double *av = tbc_red_load_f64s(a), *bv = tbc_red_load_f64s(b);
		double *yv = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yv);
		ok = av && bv && yv;
		if (ok) {
			mm_f64(&p, av, bv, yv);
			if (y->dtype == TBC_DT_F32)
				for (int64_t i = 0; i < y->numel; i++) ((float *)y->data)[i] = (float)yv[i];
			else
				for (int64_t i = 0; i < y->numel; i++) tbc_set_f64(y, i, yv[i]);
		}
		free(av), free(bv), free(yv);
	} else {
		int64_t *av = tbc_tensor_i64s(a), *bv = tbc_tensor_i64s(b);
		int64_t *yv = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yv);
		ok = av && bv && yv;
		if (ok) {
			mm_i64(&p, av, bv, yv);
			for (int64_t i = 0; i < y->numel; i++) tbc_set_i64(y, i, yv[i]);
		}
		free(av), free(bv), free(yv);
	}
	if (!ok) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	out[0] = y;
	return 0;
}

/* ---- Gemm ------------------------------------------------------------------ */

bool tbc_shape_Gemm(tbc_infer *cx, tbc_op *op) {
	const tbc_type *a = &op->inputs[0]->type, *b = &op->inputs[1]->type;
	const tbc_value *c = op->n_inputs > 2 ? op->inputs[2] : NULL;
	bool ta = tbc_attr_int(op, "transA", 0) != 0, tb = tbc_attr_int(op, "transB", 0) != 0;
	tbc_type *y = &op->outputs[0]->type;
	if (a->dtype != b->dtype || (c && c->type.dtype != a->dtype))
		return tbc_infer_error(cx, op, "A, B and C must have the same type");
	if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2))
		return tbc_infer_error(cx, op, "A and B must be matrices (rank 2)");
	y->dtype = a->dtype;
	y->rank = 2;
	y->dims[0] = a->rank == 2 ? a->dims[ta ? 1 : 0] : tbc_module_fresh_dim(cx->module);
	y->dims[1] = b->rank == 2 ? b->dims[tb ? 0 : 1] : tbc_module_fresh_dim(cx->module);
	if (a->rank == 2 && b->rank == 2) {
		tbc_dim ka = a->dims[ta ? 0 : 1], kb = b->dims[tb ? 1 : 0];
		if (!ka.sym && !kb.sym && ka.size != kb.size)
			return tbc_infer_error(cx, op, "inner dims differ: %lld and %lld", (long long)ka.size, (long long)kb.size);
	}
	if (c && !tbc_red_type_broadcasts_to(&c->type, y)) return tbc_infer_error(cx, op, "C does not broadcast to (M, N)");
	return true;
}

int tbc_interp_Gemm(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *a = in[0], *b = in[1], *c = op->n_inputs > 2 ? in[2] : NULL;
	bool ta = tbc_attr_int(op, "transA", 0) != 0, tb = tbc_attr_int(op, "transB", 0) != 0;
	double alpha = tbc_attr_float(op, "alpha", 1.0), beta = tbc_attr_float(op, "beta", 1.0);
	if (a->rank != 2 || b->rank != 2) return tbc_interp_error(ip, op, "A and B must be matrices (rank 2)");
	mm_plan p = {.m = a->dims[ta], .k = a->dims[!ta], .n = b->dims[!tb], .out_rank = 2};
	if (b->dims[tb] != p.k)
		return tbc_interp_error(ip, op, "inner dims differ: %lld and %lld", (long long)p.k, (long long)b->dims[tb]);
	p.out_dims[0] = p.m;
	p.out_dims[1] = p.n;
	/* C's broadcast: index of C for each (i, j). */
	int64_t cs[2] = {0, 0};
	if (c) {
		if (c->rank > 2) return tbc_interp_error(ip, op, "C does not broadcast to (M, N)");
		for (int d = 0; d < c->rank; d++) {
			int64_t want = p.out_dims[2 - c->rank + d];
			if (c->dims[d] != want && c->dims[d] != 1) return tbc_interp_error(ip, op, "C does not broadcast to (M, N)");
		}
		tbc_broadcast_strides(c->rank, c->dims, 2, cs);
	}
	tbc_tensor *y = tbc_interp_new(ip, op, a->dtype, 2, p.out_dims);
	if (!y) return -1;
	bool ok, is_float = tbc_red_class_of(a->dtype) == TBC_RED_FLOAT;
	bool exact = !is_float && alpha == floor(alpha) && beta == floor(beta) && fabs(alpha) < 1e15 && fabs(beta) < 1e15;
	if (!exact) {
		/* Make A (M, K) and B (K, N) row-major. */
		double *av = tbc_red_load_f64s(a), *bv = tbc_red_load_f64s(b);
		double *at = av && ta ? transpose_f64(av, a->numel, p.k, p.m) : NULL;
		double *bt = bv && tb ? transpose_f64(bv, b->numel, p.n, p.k) : NULL;
		double *yv = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yv);
		ok = av && bv && (!ta || at) && (!tb || bt) && yv;
		if (ok) {
			mm_f64(&p, ta ? at : av, tb ? bt : bv, yv);
			for (int64_t i = 0; i < p.m; i++)
				for (int64_t j = 0; j < p.n; j++) {
					double v = alpha * yv[i * p.n + j];
					if (c && beta != 0) v += beta * tbc_get_f64(c, i * cs[0] + j * cs[1]);
					tbc_set_f64(y, i * p.n + j, v);
				}
		}
		free(av), free(bv), free(at), free(bt), free(yv);
	} else {
		int64_t *av = tbc_tensor_i64s(a), *bv = tbc_tensor_i64s(b);
		int64_t *at = av && ta ? transpose_i64(av, a->numel, p.k, p.m) : NULL;
		int64_t *bt = bv && tb ? transpose_i64(bv, b->numel, p.n, p.k) : NULL;
		int64_t *yv = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *yv);
		ok = av && bv && (!ta || at) && (!tb || bt) && yv;
		if (ok) {
			mm_i64(&p, ta ? at : av, tb ? bt : bv, yv);
			uint64_t al = (uint64_t)(int64_t)alpha, be = (uint64_t)(int64_t)beta;
			for (int64_t i = 0; i < p.m; i++)
				for (int64_t j = 0; j < p.n; j++) {
					uint64_t v = al * (uint64_t)yv[i * p.n + j];
					if (c) v += be * (uint64_t)tbc_get_i64(c, i * cs[0] + j * cs[1]);
					tbc_set_i64(y, i * p.n + j, (int64_t)v);
				}
		}
		free(av), free(bv), free(at), free(bt), free(yv);
	}
	if (!ok) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	out[0] = y;
	return 0;
}

/* ---- MatMulInteger and QLinearMatMul --------------------------------------- */

/* t - zp as doubles.  zp is per tensor (one element), per row of t (1-D of
 * t's row count; per_col false) or per column (1-D of t's column count;
 * per_col true), or of t's rank, broadcast.  The values are 8-bit, so the
 * products and their sums stay exact in double (below 2^53 for any K under
 * 2^37). */
static double *load_minus_zp(const tbc_tensor *t, const tbc_tensor *zp, bool per_col, const char *what, char *err, size_t errsz) {
	double *v = tbc_red_load_f64s(t);
	if (!v || !zp) return v;
	int64_t cols = t->rank ? t->dims[t->rank - 1] : 1, rows = t->rank > 1 ? t->dims[t->rank - 2] : 1;
	if (zp->numel == 1) {
		double z = tbc_get_f64(zp, 0);
		for (int64_t i = 0; i < t->numel; i++) v[i] -= z;
	} else if (zp->rank == 1 && t->rank >= 2 && zp->numel == (per_col ? cols : rows)) {
		for (int64_t i = 0; i < t->numel; i++) v[i] -= tbc_get_f64(zp, per_col ? i % cols : (i / cols) % rows);
	} else if (zp->rank == t->rank) {
		bool bad;
		double *z = tbc_red_expand_f64(zp, t->rank, t->dims, &bad);
		if (!z) {
			snprintf(err, errsz, bad ? "%s zero point does not fit the operand's shape" : "out of memory", what);
			free(v);
			return NULL;
		}
		for (int64_t i = 0; i < t->numel; i++) v[i] -= z[i];
		free(z);
	} else {
		snprintf(err, errsz, "%s zero point does not fit the operand's shape", what);
		free(v);
		return NULL;
	}
	return v;
}

/* The integer product (a - a_zp) x (b - b_zp) as doubles; *yv is malloc'd. */
static bool qmm(const tbc_tensor *a, const tbc_tensor *azp, const tbc_tensor *b, const tbc_tensor *bzp, mm_plan *p,
		double **yv, char *err, size_t errsz) {
	*yv = NULL;
	if (!mm_plan_make(a->rank, a->dims, b->rank, b->dims, p, err, errsz)) return false;
	snprintf(err, errsz, "out of memory");
	double *av = load_minus_zp(a, azp, false, "a", err, errsz), *bv = load_minus_zp(b, bzp, true, "b", err, errsz);
	int64_t n = tbc_shape_numel(p->out_rank, p->out_dims);
	double *y = av && bv ? malloc((size_t)(n > 0 ? n : 1) * sizeof *y) : NULL;
	if (y) mm_f64(p, av, bv, y);
	free(av), free(bv);
	*yv = y;
	return y != NULL;
}

bool tbc_shape_MatMulInteger(tbc_infer *cx, tbc_op *op) { return mm_shape(cx, op, 0, 1, TBC_DT_I32); }

int tbc_interp_MatMulInteger(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *azp = op->n_inputs > 2 ? in[2] : NULL, *bzp = op->n_inputs > 3 ? in[3] : NULL;
	mm_plan p;
	double *yv;
	char err[128];
	if (!qmm(in[0], azp, in[1], bzp, &p, &yv, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	tbc_tensor *y = tbc_interp_new(ip, op, TBC_DT_I32, p.out_rank, p.out_dims);
	if (y)
		for (int64_t i = 0; i < y->numel; i++) tbc_set_i64(y, i, (int64_t)yv[i]);
	free(yv);
	if (!y) return -1;
	out[0] = y;
	return 0;
}

bool tbc_shape_QLinearMatMul(tbc_infer *cx, tbc_op *op) {
	const tbc_value *yzp = op->inputs[7];
	return mm_shape(cx, op, 0, 3, yzp ? yzp->type.dtype : op->inputs[0]->type.dtype);
}

/* v rounded to dtype dt (the scales' arithmetic happens in their type). */
static double round_to(tbc_dtype dt, double v) {
	uint64_t buf = 0;
	tbc_store_f64(dt, &buf, 0, v);
	return tbc_load_f64(dt, &buf, 0);
}

/* Element i of a per-tensor (one element) or per-row/column vector. */
static double vec_at(const tbc_tensor *t, int64_t i) { return t ? tbc_get_f64(t, t->numel == 1 ? 0 : i) : 0; }

/* y = saturate(round((a - a_zp)(b - b_zp) * a_scale * b_scale / y_scale) + y_zp). */
int tbc_interp_QLinearMatMul(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *as = in[1], *bs = in[4], *ys = in[6], *yzp = in[7];
	mm_plan p;
	double *yv;
	char err[128];
	if (!qmm(in[0], in[2], in[3], in[5], &p, &yv, err, sizeof err)) return tbc_interp_error(ip, op, "%s", err);
	const tbc_tensor *sz[3] = {as, bs, ys};
	int64_t want[3] = {p.m, p.n, p.n};
	for (int i = 0; i < 3; i++)
		if (sz[i]->numel != 1 && sz[i]->numel != want[i]) {
			free(yv);
			return tbc_interp_error(ip, op, "%s must have one element or %lld", i == 0 ? "a_scale" : i == 1 ? "b_scale" : "y_scale",
						(long long)want[i]);
		}
	if (yzp && yzp->numel != 1 && yzp->numel != p.n) {
		free(yv);
		return tbc_interp_error(ip, op, "y_zero_point must have one element or %lld", (long long)p.n);
	}
	tbc_dtype odt = yzp ? yzp->dtype : in[0]->dtype;
	tbc_tensor *y = tbc_interp_new(ip, op, odt, p.out_rank, p.out_dims);
	if (!y) {
		free(yv);
		return -1;
	}
	int64_t lo;
	uint64_t hi;
	tbc_red_int_limits(odt, &lo, &hi);
	bool is_int = tbc_red_class_of(odt) != TBC_RED_FLOAT;
	for (int64_t e = 0; e < y->numel; e++) {
		int64_t j = e % p.n, i = (e / p.n) % p.m;
		double mult = round_to(ys->dtype, round_to(as->dtype, vec_at(as, i) * vec_at(bs, j)) / vec_at(ys, j));
		double v = yv[e] * mult + vec_at(yzp, j);
		if (is_int) {
			v = nearbyint(v);
			v = v < (double)lo ? (double)lo : v > (double)hi ? (double)hi : v;
			tbc_set_i64(y, e, isnan(v) ? 0 : (int64_t)v);
		} else {
			tbc_set_f64(y, e, v);
		}
	}
	free(yv);
	out[0] = y;
	return 0;
}

/* ---- Det ------------------------------------------------------------------- */

bool tbc_shape_Det(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	tbc_type *y = &op->outputs[0]->type;
	if (!tbc_dtype_is_float(x->dtype)) return tbc_infer_error(cx, op, "input must be a float tensor, not %s", tbc_dtype_name(x->dtype));
	*y = *x;
	if (x->rank < 0) return true;
	if (x->rank < 2) return tbc_infer_error(cx, op, "input must have rank 2 or more, not %d", x->rank);
	tbc_dim r = x->dims[x->rank - 2], c = x->dims[x->rank - 1];
	if (!r.sym && !c.sym && r.size != c.size)
		return tbc_infer_error(cx, op, "matrices must be square, not %lld x %lld", (long long)r.size, (long long)c.size);
	y->rank = x->rank - 2;
	return true;
}

/* LU decomposition with partial pivoting, in double. */
static double det_of(double *m, int64_t n) {
	double det = 1;
	for (int64_t c = 0; c < n; c++) {
		int64_t piv = c;
		for (int64_t r = c + 1; r < n; r++)
			if (fabs(m[r * n + c]) > fabs(m[piv * n + c])) piv = r;
		if (m[piv * n + c] == 0) return 0;
		if (piv != c) {
			for (int64_t k = 0; k < n; k++) {
				double t = m[c * n + k];
				m[c * n + k] = m[piv * n + k];
				m[piv * n + k] = t;
			}
			det = -det;
		}
		det *= m[c * n + c];
		for (int64_t r = c + 1; r < n; r++) {
			double f = m[r * n + c] / m[c * n + c];
			for (int64_t k = c; k < n; k++) m[r * n + k] -= f * m[c * n + k];
		}
	}
	return det;
}

int tbc_interp_Det(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
		return tbc_interp_error(ip, op, "input must be a (batch of) square matrices");
	int64_t n = x->dims[x->rank - 1], mat = n * n;
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank - 2, x->dims);
	if (!y) return -1;
	double *m = malloc((size_t)(mat ? mat : 1) * sizeof *m);
	if (!m) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	for (int64_t b = 0; b < y->numel; b++) {
		for (int64_t i = 0; i < mat; i++) m[i] = tbc_get_f64(x, b * mat + i);
		tbc_set_f64(y, b, det_of(m, n));
	}
	free(m);
	out[0] = y;
	return 0;
}
