/* Ops that read or write at positions held in an index tensor: Gather,
 * GatherElements, GatherND, ScatterElements, ScatterND, OneHot.
 *
 * An index is wrapped (negative counts from the end) and clamped into its
 * axis, so no read or write leaves a buffer; and before it is used, an
 * index outside [-n, n) fails the run naming the node, as the interpreter's
 * check does (OneHot's out-of-range index is no error: the spec makes its
 * row all off). */
#include <stdio.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_data.h"
#include "codegen/lower/lower_dyn.h"
#include "ir/kernels/data.h"

static bool index_dtype_ok(lower_cx *cx, const tbc_op *op, const tbc_value *idx) {
	if (idx->type.dtype == TBC_DT_I32 || idx->type.dtype == TBC_DT_I64) return true;
	return lower_error(cx, op, "%s with %s indices has no lowering yet", tbc_ops[op->code].onnx_name,
			   tbc_dtype_name(idx->type.dtype));
}

/* The zero of a buffer's element type. */
static kir_expr *zero_of(lk *l, const kir_buffer *b) {
	return tbc_dtype_is_float(b->dtype) ? kir_e_float(l->k, b->dtype, 0) : kir_e_int(l->k, b->dtype, 0);
}

/* dst[di] = src[si] where src may be empty: statically empty stores zeros,
 * possibly empty (symbolic) is guarded at run time. */
static kir_stmt *gather_store(lk *l, kir_buffer *dst, kir_expr *di, const tbc_type *src_type, kir_buffer *src,
			      kir_expr *si) {
	bool always, never;
	kir_expr *cond = data_nonempty(l, src_type, &always, &never);
	if (never) return kir_s_store(l->k, dst, di, zero_of(l, dst));
	return data_guarded_store(l, dst, di, cond, kir_e_load(l->k, src, si));
}

static bool output_empty(const tbc_type *t) {
	for (int d = 0; d < t->rank; d++)
		if (!t->dims[d].sym && t->dims[d].size == 0) return true;
	return false;
}

/* ---- Gather ------------------------------------------------------------------
 * out[o, i, j] = x[o, wrap(idx[i]), j] over (outer, index count, inner). */
bool lower_data_gather(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *iv = op->inputs[1], *y = op->outputs[0];
	int r = x->type.rank, a;
	if (!index_dtype_ok(cx, op, iv)) return false;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &a)) return lower_error(cx, op, "Gather's axis is out of range");
	lk l;
	if (!lk_begin(&l, cx, "gather")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y), *idx = lk_value(&l, iv);
	if (!src || !dst || !idx) return false;
	if (output_empty(&y->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	kir_expr *O = data_prod(&l, &x->type, 0, a), *N = lk_dim(&l, x->type.dims[a]);
	kir_expr *I = data_prod(&l, &x->type, a + 1, r), *NI = data_prod(&l, &iv->type, 0, iv->type.rank);
	dloops lp = {0};
	kir_expr *o = dl_add(&l, &lp, O, false), *i = dl_add(&l, &lp, NI, false), *j = dl_add(&l, &lp, I, false);
	kir_block body = {0};
	char msg[400];
	snprintf(msg, sizeof msg, "Gather '%.300s': an index is out of range for axis %d", op->name, a);
	kir_expr *kk = data_wrap_checked(&l, data_to_index(&l, kir_e_load(k, idx, i)), N, &body, msg);
	kir_expr *si = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, o, N), kk), I), j);
	kir_expr *di = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, o, NI), i), I), j);
	kir_block_add(k, &body, gather_store(&l, dst, di, &x->type, src, si));
	return lk_end(&l, dl_wrap(&l, &lp, body.first));
}

/* ---- GatherElements / ScatterElements -------------------------------------------
 * Position p of the index walk reads (writes) data at p with the axis
 * coordinate replaced by the index.  The other coordinates are clamped into
 * data when its dim may be smaller than the index tensor's. */
static kir_expr *element_offset(lk *l, const tbc_type *xt, const tbc_type *it, int a, kir_expr *const *coord,
				kir_expr *axis_index, kir_block *checks, const char *msg) {
	kir_kernel *k = l->k;
	kir_expr *xs[TBC_MAX_RANK], *off = kir_e_index(k, 0);
	data_strides(l, xt, xs);
	for (int d = 0; d < xt->rank; d++) {
		kir_expr *c = coord[d];
		tbc_dim xd = xt->dims[d], id = it->dims[d];
		if (d == a) {
			c = data_wrap_checked(l, axis_index, lk_dim(l, xd), checks, msg);
		} else if (!(tbc_dim_eq(xd, id) || (!xd.sym && !id.sym && id.size <= xd.size))) {
			kir_expr *hi = kir_e_binary(k, KIR_SUB, lk_dim(l, xd), kir_e_index(k, 1));
			c = kir_e_binary(k, KIR_MAX, kir_e_binary(k, KIR_MIN, c, hi), kir_e_index(k, 0));
		}
		off = kir_e_add(k, off, kir_e_mul(k, c, xs[d]));
	}
	return off;
}

bool lower_data_gather_elements(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *iv = op->inputs[1], *y = op->outputs[0];
	int r = x->type.rank, a;
	if (!index_dtype_ok(cx, op, iv)) return false;
	if (r < 1 || iv->type.rank != r || !tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &a))
		return lower_error(cx, op, "GatherElements' ranks or axis are out of range");
	lk l;
	if (!lk_begin(&l, cx, "gather_elements")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y), *idx = lk_value(&l, iv);
	if (!src || !dst || !idx) return false;
	if (output_empty(&y->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	dloops lp = {0};
	kir_expr *coord[TBC_MAX_RANK], *is[TBC_MAX_RANK];
	data_strides(&l, &iv->type, is);
	kir_expr *lin = kir_e_index(k, 0);
	for (int d = 0; d < r; d++) {
		coord[d] = dl_add(&l, &lp, lk_dim(&l, iv->type.dims[d]), false);
		lin = kir_e_add(k, lin, kir_e_mul(k, coord[d], is[d]));
	}
	kir_block body = {0};
	char msg[400];
	snprintf(msg, sizeof msg, "GatherElements '%.300s': an index is out of range for axis %d", op->name, a);
	kir_expr *si = element_offset(&l, &x->type, &iv->type, a, coord, data_to_index(&l, kir_e_load(k, idx, lin)),
				      &body, msg);
	kir_block_add(k, &body, gather_store(&l, dst, lin, &x->type, src, si));
	return lk_end(&l, dl_wrap(&l, &lp, body.first));
}

/* ---- Scatter reductions ----------------------------------------------------------*/
typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } red;

static bool parse_red(lower_cx *cx, const tbc_op *op, red *r, tbc_dtype dt) {
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	const char *s = tbc_attr_string(op, "reduction", "none");
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i])) {
			*r = (red)i;
			if (*r != RED_NONE && !(tbc_dtype_is_int(dt) || dt == TBC_DT_BOOL || dt == TBC_DT_F32 || dt == TBC_DT_F64))
				return lower_error(cx, op, "%s with reduction '%s' on %s has no lowering yet",
						   tbc_ops[op->code].onnx_name, s, tbc_dtype_name(dt));
			return true;
		}
	return lower_error(cx, op, "unknown reduction '%s'", s);
}

/* The updated value: integers wrap in their width, floats compute in their
 * type (one rounding, as the interpreter's double then store), max/min
 * propagate NaN, bool add/max is or, mul/min is and. */
static kir_expr *combine(lk *l, red r, kir_expr *old, kir_expr *upd) {
	kir_kernel *k = l->k;
	tbc_dtype t = old->type;
	if (r == RED_NONE) return upd;
	if (t == TBC_DT_BOOL) return kir_e_binary(k, r == RED_ADD || r == RED_MAX ? KIR_OR : KIR_AND, old, upd);
	switch (r) {
	case RED_ADD: return kir_e_binary(k, KIR_ADD, old, upd);
	case RED_MUL: return kir_e_binary(k, KIR_MUL, old, upd);
	default: break;
	}
	kir_expr *pick = kir_e_select(k, kir_e_cmp(k, r == RED_MAX ? KIR_GT : KIR_LT, old, upd), old, upd);
	if (!tbc_dtype_is_float(t)) return pick;
	kir_expr *nan = kir_e_binary(k, KIR_OR, kir_e_unary(k, KIR_ISNAN, old), kir_e_unary(k, KIR_ISNAN, upd));
	return kir_e_select(k, nan, kir_e_binary(k, KIR_ADD, old, upd), pick);
}

/* out = data, as the first statement of a scatter kernel (bits or values). */
static kir_stmt *copy_all(lk *l, kir_buffer *dst, kir_buffer *src, const tbc_type *t) {
	dloops lp = {0};
	kir_expr *i = dl_add(l, &lp, data_prod(l, t, 0, t->rank), false);
	return dl_wrap(l, &lp, kir_s_store(l->k, dst, i, kir_e_load(l->k, src, i)));
}

/* Views of data, updates and the output: storage bits without a reduction,
 * values with one. */
static bool scatter_views(lk *l, const tbc_op *op, red r, kir_buffer **x, kir_buffer **u, kir_buffer **y) {
	if (r == RED_NONE) {
		*x = data_in(l, op->inputs[0]);
		*u = data_in(l, op->inputs[2]);
		*y = data_out(l, op->outputs[0]);
	} else {
		*x = lk_value(l, op->inputs[0]);
		*u = lk_value(l, op->inputs[2]);
		int b = lower_result_buf(l->cx, op->outputs[0]);
		*y = b >= 0 ? lk_buf(l, b) : NULL;
	}
	return *x && *u && *y;
}

/* Walks indices with the axis loop innermost and sequential: positions that
 * differ off the axis write different elements, so the other loops are
 * parallel, and along the axis the updates apply in order. */
bool lower_data_scatter_elements(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *iv = op->inputs[1], *uv = op->inputs[2], *yv = op->outputs[0];
	int r = xv->type.rank, a;
	red rd;
	if (!index_dtype_ok(cx, op, iv) || !parse_red(cx, op, &rd, xv->type.dtype)) return false;
	if (r < 1 || iv->type.rank != r || uv->type.rank != r || !tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &a))
		return lower_error(cx, op, "ScatterElements' ranks or axis are out of range");
	for (int d = 0; d < r; d++)
		if (!tbc_dim_eq(iv->type.dims[d], uv->type.dims[d]))
			return lower_error(cx, op, "ScatterElements' indices and updates differ in shape");
	lk l;
	if (!lk_begin(&l, cx, "scatter_elements")) return false;
	kir_buffer *x, *u, *y, *idx = lk_value(&l, iv);
	if (!idx || !scatter_views(&l, op, rd, &x, &u, &y)) return false;
	kir_kernel *k = l.k;
	kir_block b = {0};
	if (output_empty(&yv->type)) return cx->n_kernels--, true;
	kir_block_add(k, &b, copy_all(&l, y, x, &xv->type));
	if (!output_empty(&iv->type)) {
		dloops lp = {0};
		kir_expr *coord[TBC_MAX_RANK], *is[TBC_MAX_RANK];
		data_strides(&l, &iv->type, is);
		for (int d = 0; d < r; d++)
			if (d != a) coord[d] = dl_add(&l, &lp, lk_dim(&l, iv->type.dims[d]), false);
		coord[a] = dl_add(&l, &lp, lk_dim(&l, iv->type.dims[a]), true);
		kir_expr *lin = kir_e_index(k, 0);
		for (int d = 0; d < r; d++) lin = kir_e_add(k, lin, kir_e_mul(k, coord[d], is[d]));
		kir_block body = {0};
		char msg[400];
		snprintf(msg, sizeof msg, "ScatterElements '%.300s': an index is out of range for axis %d", op->name, a);
		kir_expr *di = element_offset(&l, &xv->type, &iv->type, a, coord,
					      data_to_index(&l, kir_e_load(k, idx, lin)), &body, msg);
		kir_expr *v = combine(&l, rd, kir_e_load(k, y, di), kir_e_load(k, u, lin));
		kir_block_add(k, &body, kir_s_store(k, y, di, v));
		kir_block_add(k, &b, dl_wrap(&l, &lp, body.first));
	}
	return lk_end(&l, b.first);
}

/* ---- GatherND / ScatterND ---------------------------------------------------------
 * An index tuple of m values addresses data dims [b, b + m) (b: batch dims);
 * each tuple moves a slice of the remaining dims. */
static kir_expr *tuple_offset(lk *l, const tbc_type *xt, int b, int m, kir_buffer *idx, kir_expr *base,
			       kir_block *checks, const char *msg) {
	kir_kernel *k = l->k;
	kir_expr *xs[TBC_MAX_RANK], *off = kir_e_index(k, 0);
	data_strides(l, xt, xs);
	for (int j = 0; j < m; j++) {
		kir_expr *v = data_to_index(l, kir_e_load(k, idx, kir_e_add(k, base, kir_e_index(k, j))));
		off = kir_e_add(k, off, kir_e_mul(k, data_wrap_checked(l, v, lk_dim(l, xt->dims[b + j]), checks, msg), xs[b + j]));
	}
	return off;
}

bool lower_data_gather_nd(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *iv = op->inputs[1], *yv = op->outputs[0];
	int r = xv->type.rank, q = iv->type.rank;
	int64_t bd = tbc_attr_int(op, "batch_dims", 0);
	if (!index_dtype_ok(cx, op, iv)) return false;
	if (q < 1 || r < 1 || bd < 0 || bd >= q || bd >= r) return lower_error(cx, op, "GatherND's ranks are out of range");
	tbc_dim last = iv->type.dims[q - 1];
	if (last.sym || last.size > r - bd)
		return lower_error(cx, op, "GatherND with a symbolic or too long index tuple has no lowering yet");
	int b = (int)bd, m = (int)last.size;
	for (int d = 0; d < b; d++)
		if (!tbc_dim_eq(xv->type.dims[d], iv->type.dims[d]))
			return lower_error(cx, op, "GatherND's batch dims differ between data and indices");
	lk l;
	if (!lk_begin(&l, cx, "gather_nd")) return false;
	kir_buffer *src = data_in(&l, xv), *dst = data_out(&l, yv), *idx = lk_value(&l, iv);
	if (!src || !dst || !idx) return false;
	if (output_empty(&yv->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	kir_expr *B = data_prod(&l, &iv->type, 0, b), *G = data_prod(&l, &iv->type, b, q - 1);
	kir_expr *I = data_prod(&l, &xv->type, b + m, r), *per_batch = data_prod(&l, &xv->type, b, r);
	dloops lp = {0};
	kir_expr *bi = dl_add(&l, &lp, B, false), *g = dl_add(&l, &lp, G, false), *ii = dl_add(&l, &lp, I, false);
	kir_expr *tuple = kir_e_add(k, kir_e_mul(k, bi, G), g);
	kir_block body = {0};
	char msg[400];
	snprintf(msg, sizeof msg, "GatherND '%.300s': an index is out of range", op->name);
	kir_expr *off = tuple_offset(&l, &xv->type, b, m, idx, kir_e_mul(k, tuple, kir_e_index(k, m)), &body, msg);
	kir_expr *si = kir_e_add(k, kir_e_add(k, kir_e_mul(k, bi, per_batch), off), ii);
	kir_expr *di = kir_e_add(k, kir_e_mul(k, tuple, I), ii);
	kir_block_add(k, &body, gather_store(&l, dst, di, &xv->type, src, si));
	return lk_end(&l, dl_wrap(&l, &lp, body.first));
}

/* Parallel over the slice, sequential over the tuples: each element sees its
 * updates in order, so repeated indices reduce (or overwrite) as the
 * interpreter does. */
bool lower_data_scatter_nd(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *iv = op->inputs[1], *uv = op->inputs[2], *yv = op->outputs[0];
	int r = xv->type.rank, q = iv->type.rank;
	red rd;
	if (!index_dtype_ok(cx, op, iv) || !parse_red(cx, op, &rd, xv->type.dtype)) return false;
	if (q < 1 || r < 1) return lower_error(cx, op, "ScatterND's ranks are out of range");
	tbc_dim last = iv->type.dims[q - 1];
	if (last.sym || last.size > r)
		return lower_error(cx, op, "ScatterND with a symbolic or too long index tuple has no lowering yet");
	int m = (int)last.size;
	if (uv->type.rank != q - 1 + r - m) return lower_error(cx, op, "ScatterND's updates have the wrong rank");
	lk l;
	if (!lk_begin(&l, cx, "scatter_nd")) return false;
	kir_buffer *x, *u, *y, *idx = lk_value(&l, iv);
	if (!idx || !scatter_views(&l, op, rd, &x, &u, &y)) return false;
	if (output_empty(&yv->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	kir_block b = {0};
	kir_block_add(k, &b, copy_all(&l, y, x, &xv->type));
	if (!output_empty(&uv->type)) {
		kir_expr *T = data_prod(&l, &iv->type, 0, q - 1), *I = data_prod(&l, &xv->type, m, r);
		dloops lp = {0};
		kir_expr *j = dl_add(&l, &lp, I, false), *t = dl_add(&l, &lp, T, true);
		kir_block body = {0};
		char msg[400];
		snprintf(msg, sizeof msg, "ScatterND '%.300s': an index is out of range", op->name);
		kir_expr *di = kir_e_add(
			k, tuple_offset(&l, &xv->type, 0, m, idx, kir_e_mul(k, t, kir_e_index(k, m)), &body, msg), j);
		kir_expr *ui = kir_e_add(k, kir_e_mul(k, t, I), j);
		kir_expr *v = combine(&l, rd, kir_e_load(k, y, di), kir_e_load(k, u, ui));
		kir_block_add(k, &body, kir_s_store(k, y, di, v));
		kir_block_add(k, &b, dl_wrap(&l, &lp, body.first));
	}
	return lk_end(&l, b.first);
}

/* ---- OneHot ------------------------------------------------------------------------
 * out[..., c, ...] = values[idx[...] (wrapped by depth) == c]; an index out of
 * range (or a non-finite float) is off everywhere, as the spec says. */
bool lower_data_onehot(lower_cx *cx, const tbc_op *op) {
	const tbc_value *iv = op->inputs[0], *vv = op->inputs[2], *yv = op->outputs[0];
	int r = yv->type.rank, a;
	tbc_dtype it = iv->type.dtype;
	if (!(tbc_dtype_is_int(it) || it == TBC_DT_F32 || it == TBC_DT_F64))
		return lower_error(cx, op, "OneHot with %s indices has no lowering yet", tbc_dtype_name(it));
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), r, &a)) return lower_error(cx, op, "OneHot's axis is out of range");
	lk l;
	if (!lk_begin(&l, cx, "onehot")) return false;
	kir_buffer *idx = lk_value(&l, iv), *vals = data_in(&l, vv), *dst = data_out(&l, yv);
	if (!idx || !vals || !dst) return false;
	if (output_empty(&yv->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	kir_expr *ys[TBC_MAX_RANK], *is[TBC_MAX_RANK];
	data_strides(&l, &yv->type, ys);
	data_strides(&l, &iv->type, is);
	dloops lp = {0};
	kir_expr *di = kir_e_index(k, 0), *ii = kir_e_index(k, 0), *c = NULL;
	for (int d = 0, e = 0; d < r; d++) {
		kir_expr *v = dl_add(&l, &lp, lk_dim(&l, yv->type.dims[d]), false);
		di = kir_e_add(k, di, kir_e_mul(k, v, ys[d]));
		if (d == a) c = v;
		else ii = kir_e_add(k, ii, kir_e_mul(k, v, is[e++]));
	}
	kir_expr *raw = kir_e_load(k, idx, ii), *valid = NULL;
	if (tbc_dtype_is_float(it)) {
		valid = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, raw, kir_e_float(k, it, -9e18)),
				     kir_e_cmp(k, KIR_LE, raw, kir_e_float(k, it, 9e18)));
		raw = kir_e_select(k, valid, raw, kir_e_float(k, it, 0));
	}
	kir_expr *v = data_to_index(&l, raw), *depth = lk_dim(&l, yv->type.dims[a]);
	v = kir_e_select(k, kir_e_cmp(k, KIR_LT, v, kir_e_index(k, 0)), kir_e_add(k, v, depth), v);
	kir_expr *hit = kir_e_cmp(k, KIR_EQ, v, c);
	if (valid) hit = kir_e_binary(k, KIR_AND, hit, valid);
	kir_expr *val = kir_e_select(k, hit, kir_e_load(k, vals, kir_e_index(k, 1)), kir_e_load(k, vals, kir_e_index(k, 0)));
	return lk_end(&l, dl_wrap(&l, &lp, kir_s_store(k, dst, di, val)));
}

/* ---- ReverseSequence ---------------------------------------------------------
 * y[.., t, ..] = x[.., L-1-t, ..] where t < L = sequence_lens[b], else
 * x[.., t, ..]: a gather over every output element.  A length outside
 * [0, T] fails the run (as the interpreter); the gather clamps it, so the
 * kernel never reads outside x. */
bool lower_data_reverse_sequence(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *lv = op->inputs[1], *y = op->outputs[0];
	int r = x->type.rank, ta, ba;
	if (!index_dtype_ok(cx, op, lv)) return false;
	if (r < 2 || lv->type.rank != 1 || !tbc_norm_axis(tbc_attr_int(op, "time_axis", 0), r, &ta) ||
	    !tbc_norm_axis(tbc_attr_int(op, "batch_axis", 1), r, &ba) || ta == ba || ta > 1 || ba > 1)
		return lower_error(cx, op, "ReverseSequence's axes or sequence_lens are out of range");
	lk l;
	if (!lk_begin(&l, cx, "reverse_sequence")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y), *lens = lk_value(&l, lv);
	if (!src || !dst || !lens) return false;
	if (output_empty(&y->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	kir_expr *T = lk_dim(&l, x->type.dims[ta]), *zero = kir_e_index(k, 0), *one = kir_e_index(k, 1);
	/* The check: every length in [0, T]. */
	kir_var *bv = kir_var_new(k, "b", KIR_INDEX);
	kir_expr *lb = data_to_index(&l, kir_e_load(k, lens, kir_e_var(k, bv)));
	kir_stmt *check = kir_s_for(k, bv, zero, lk_dim(&l, x->type.dims[ba]), 1, KIR_LOOP_SEQUENTIAL,
				    kir_s_error(k, kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, lb, zero), kir_e_cmp(k, KIR_GT, lb, T)),
						"ReverseSequence: a sequence length is outside [0, time steps]"));
	dloops lp = {0};
	kir_expr *coord[TBC_MAX_RANK], *xs[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	for (int d = 0; d < r; d++) coord[d] = dl_add(&l, &lp, lk_dim(&l, x->type.dims[d]), false);
	kir_expr *L = data_to_index(&l, kir_e_load(k, lens, coord[ba]));
	L = kir_e_binary(k, KIR_MIN, kir_e_binary(k, KIR_MAX, L, zero), T);
	kir_expr *t = coord[ta];
	kir_expr *st = kir_e_select(k, kir_e_cmp(k, KIR_LT, t, L), kir_e_binary(k, KIR_SUB, kir_e_binary(k, KIR_SUB, L, one), t), t);
	kir_expr *di = zero, *si = zero;
	for (int d = 0; d < r; d++) {
		di = kir_e_add(k, di, kir_e_mul(k, coord[d], xs[d]));
		si = kir_e_add(k, si, kir_e_mul(k, d == ta ? st : coord[d], xs[d]));
	}
	kir_block all = {0};
	kir_block_add(k, &all, check);
	kir_block_add(k, &all, dl_wrap(&l, &lp, kir_s_store(k, dst, di, kir_e_load(k, src, si))));
	return lk_end(&l, all.first);
}

/* ---- TensorScatter -----------------------------------------------------------
 * present = past with update written at positions start[b] + s of the
 * sequence axis (wrapped around in circular mode).  Written as a gather: the
 * element at position p of the axis takes update[.., s, ..] with s = p -
 * start[b] (mod the cache length when circular) when 0 <= s < seq, else the
 * past value.  A linear write past the cache's end fails the run, as the
 * interpreter. */
bool lower_data_tensor_scatter(lower_cx *cx, const tbc_op *op) {
	const tbc_value *c = op->inputs[0], *u = op->inputs[1], *wv = op->n_inputs > 2 ? op->inputs[2] : NULL, *y = op->outputs[0];
	int r = c->type.rank, a;
	const char *mode = tbc_attr_string(op, "mode", "linear");
	bool circular = !strcmp(mode, "circular");
	if (wv && !index_dtype_ok(cx, op, wv)) return false;
	if ((!circular && strcmp(mode, "linear")) || !tbc_norm_axis(tbc_attr_int(op, "axis", -2), r, &a) || a == 0 ||
	    u->type.rank != r || (wv && wv->type.rank != 1))
		return lower_error(cx, op, "TensorScatter's mode, axis or shapes are out of range");
	lk l;
	if (!lk_begin(&l, cx, "tensor_scatter")) return false;
	kir_buffer *past = data_in(&l, c), *upd = data_in(&l, u), *dst = data_out(&l, y), *wi = wv ? lk_value(&l, wv) : NULL;
	if (!past || !upd || !dst || (wv && !wi)) return false;
	if (output_empty(&y->type)) return cx->n_kernels--, true;
	kir_kernel *k = l.k;
	kir_expr *zero = kir_e_index(k, 0), *M = lk_dim(&l, c->type.dims[a]), *S = lk_dim(&l, u->type.dims[a]);
	kir_block all = {0};
	if (wi && !circular) {
		kir_var *bv = kir_var_new(k, "b", KIR_INDEX);
		kir_expr *st = data_to_index(&l, kir_e_load(k, wi, kir_e_var(k, bv)));
		kir_block_add(k, &all,
			      kir_s_for(k, bv, zero, lk_dim(&l, c->type.dims[0]), 1, KIR_LOOP_SEQUENTIAL,
					kir_s_error(k, kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, st, zero), kir_e_cmp(k, KIR_GT, kir_e_add(k, st, S), M)),
						    "TensorScatter: a write position is outside the cache")));
	}
	dloops lp = {0};
	kir_expr *coord[TBC_MAX_RANK], *cs[TBC_MAX_RANK], *us[TBC_MAX_RANK];
	data_strides(&l, &c->type, cs);
	data_strides(&l, &u->type, us);
	for (int d = 0; d < r; d++) coord[d] = dl_add(&l, &lp, lk_dim(&l, c->type.dims[d]), false);
	kir_expr *start = wi ? data_to_index(&l, kir_e_load(k, wi, coord[0])) : zero;
	kir_expr *s = kir_e_binary(k, KIR_SUB, coord[a], start);
	if (circular) s = kir_e_binary(k, KIR_REM, kir_e_add(k, kir_e_binary(k, KIR_REM, s, M), M), M);
	kir_expr *in = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, s, zero), kir_e_cmp(k, KIR_LT, s, S));
	kir_expr *di = zero, *ui = zero;
	for (int d = 0; d < r; d++) {
		di = kir_e_add(k, di, kir_e_mul(k, coord[d], cs[d]));
		ui = kir_e_add(k, ui, kir_e_mul(k, d == a ? s : coord[d], us[d]));
	}
	kir_stmt *body = kir_s_if(k, in, kir_s_store(k, dst, di, kir_e_load(k, upd, ui)), kir_s_store(k, dst, di, kir_e_load(k, past, di)));
	kir_block_add(k, &all, dl_wrap(&l, &lp, body));
	return lk_end(&l, all.first);
}

/* ---- OneHot -----------------------------------------------------------------------
 * depth: one number of any numeric dtype, truncated, positive; the rest is
 * OneHot's ordinary lowering. */
bool lower_data_onehot_shape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *dv = op->inputs[1], *y = op->outputs[0];
	int a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), y->type.rank, &a))
		return lower_error(cx, op, "axis is out of range for rank %d", y->type.rank);
	if (tbc_data_static_len(&dv->type) != 1 || dv->type.rank > 1)
		return lower_error(cx, op, "OneHot's depth of unknown size has no lowering yet");
	tbc_dtype dt = dv->type.dtype;
	if (!tbc_dtype_is_int(dt) && !tbc_dtype_is_float(dt))
		return lower_error(cx, op, "OneHot's depth of %s has no lowering yet", tbc_dtype_name(dt));
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_buffer *b = lk_value(&s.l, dv);
	if (!b) return false;
	kir_expr *v = kir_e_load(s.k, b, I(s.k, 0)), *depth;
	const char *bad = "depth must be one positive number";
	if (tbc_dtype_is_float(dt)) {
		if (dt != TBC_DT_F64) v = kir_e_cast(s.k, TBC_DT_F64, dt == TBC_DT_F32 ? v : kir_e_cast(s.k, TBC_DT_F32, v));
		v = shk_let(&s, "depth_f", v);
		kir_expr *lim = kir_e_float(s.k, TBC_DT_F64, 9e18);
		kir_expr *ok = AND(s.k, CMP(s.k, KIR_LT, kir_e_unary(s.k, KIR_ABS, v), lim), kir_e_unary(s.k, KIR_NOT, kir_e_unary(s.k, KIR_ISNAN, v)));
		shk_fail_if(&s, kir_e_unary(s.k, KIR_NOT, ok), "%s", bad);
		depth = shk_let(&s, "depth", kir_e_cast(s.k, KIR_INDEX, kir_e_cast(s.k, TBC_DT_I64, SEL(s.k, ok, v, kir_e_float(s.k, TBC_DT_F64, 0)))));
	} else {
		depth = shk_let(&s, "depth", kir_e_cast(s.k, KIR_INDEX, v));
	}
	shk_fail_if(&s, CMP(s.k, KIR_LE, depth, I(s.k, 0)), "%s", bad);
	if (!shk_out_dim(&s, 0, a, depth)) return false;
	return shk_end(&s);
}
