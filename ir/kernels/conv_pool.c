/* Pooling: AveragePool, MaxPool (with Indices), LpPool, the Global pools and
 * MaxUnpool.  A window per output position: start o * stride - pad_begin,
 * taps start + k * dilation; taps outside the input are skipped (AveragePool
 * with count_include_pad counts those inside the declared pads, never the
 * ones that ceil_mode adds past them).  Sums in double. */
#include <float.h>
#include <stdio.h>

#include "conv_util.h"

typedef enum pool_kind { POOL_AVG, POOL_MAX, POOL_LP } pool_kind;

static bool pool_dtype_ok(pool_kind kind, tbc_dtype dt) {
	return conv_is_float_dtype(dt) || (kind == POOL_MAX && conv_is_int8_dtype(dt));
}

static bool pool_shape(tbc_infer *cx, tbc_op *op, pool_kind kind) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!pool_dtype_ok(kind, x->dtype))
		return tbc_infer_error(cx, op, "%s does not take %s tensors", tbc_ops[op->code].onnx_name, tbc_dtype_name(x->dtype));
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	if (x->rank < 0) {
		y.rank = -1;
	} else {
		if (x->rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3 (N, C, spatial...), got %d", x->rank);
		conv_geom g;
		const char *err = conv_geom_read(&g, op, x->rank - 2, NULL, true, true);
		for (int i = 0; !err && i < g.nsp; i++) g.in[i] = x->dims[2 + i].sym ? -1 : x->dims[2 + i].size;
		if (!err) err = conv_geom_resolve(&g);
		if (err) return tbc_infer_error(cx, op, "%s", err);
		if (kind == POOL_LP && tbc_attr_int(op, "p", 2) <= 0) return tbc_infer_error(cx, op, "p must be positive");
		if (kind == POOL_MAX) {
			int64_t so = tbc_attr_int(op, "storage_order", 0);
			if (so != 0 && so != 1) return tbc_infer_error(cx, op, "storage_order must be 0 or 1");
		}
		y.rank = x->rank;
		y.dims[0] = x->dims[0];
		y.dims[1] = x->dims[1];
		conv_geom_type_dims(cx, &g, x, &y);
	}
	op->outputs[0]->type = y;
	if (op->n_outputs > 1 && op->outputs[1]) {
		y.dtype = TBC_DT_I64;
		op->outputs[1]->type = y;
	}
	return true;
}

bool tbc_shape_AveragePool(tbc_infer *cx, tbc_op *op) { return pool_shape(cx, op, POOL_AVG); }
bool tbc_shape_MaxPool(tbc_infer *cx, tbc_op *op) { return pool_shape(cx, op, POOL_MAX); }
bool tbc_shape_LpPool(tbc_infer *cx, tbc_op *op) { return pool_shape(cx, op, POOL_LP); }

static int pool_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, pool_kind kind, tbc_tensor **out) {
	if (x->rank < 3) return tbc_interp_error(ip, op, "X must have rank >= 3, got %d", x->rank);
	conv_geom g;
	const char *err = conv_geom_read(&g, op, x->rank - 2, NULL, true, true);
	for (int i = 0; !err && i < g.nsp; i++) g.in[i] = x->dims[2 + i];
	if (!err) err = conv_geom_resolve(&g);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	int nsp = g.nsp;
	bool include_pad = kind == POOL_AVG && tbc_attr_int(op, "count_include_pad", 0) != 0;
	double p = (double)tbc_attr_int(op, "p", 2);
	bool col_major = tbc_attr_int(op, "storage_order", 0) == 1;
	int64_t ydims[TBC_MAX_RANK] = {x->dims[0], x->dims[1]};
	for (int i = 0; i < nsp; i++) ydims[2 + i] = g.out[i];
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	tbc_tensor *idx = NULL;
	if (y && kind == POOL_MAX && op->n_outputs > 1 && op->outputs[1] &&
	    !(idx = tbc_interp_new(ip, op, TBC_DT_I64, x->rank, ydims))) {
		tbc_tensor_destroy(y);
		return -1;
	}
	double *xd = y ? conv_load_all(x) : NULL;
	if (!xd) {
		tbc_tensor_destroy(y);
		tbc_tensor_destroy(idx);
		return y ? tbc_interp_error(ip, op, "out of memory") : -1;
	}
	int64_t planes = x->dims[0] * x->dims[1], isz = conv_prod(0, nsp, g.in), osz = conv_prod(0, nsp, g.out);
	int64_t ksz = conv_prod(0, nsp, g.kernel);
	for (int64_t pl = 0; pl < planes; pl++) {
		const double *plane = xd + pl * isz;
		int64_t o[CONV_MAX_SPATIAL] = {0};
		for (int64_t ol = 0; ol < osz; ol++, tbc_index_next(nsp, g.out, o)) {
			double acc = 0.0, best = 0.0;
			int64_t count = 0, best_at = -1;
			bool have = false;
			int64_t k[CONV_MAX_SPATIAL] = {0};
			for (int64_t kl = 0; kl < ksz; kl++, tbc_index_next(nsp, g.kernel, k)) {
				int64_t il = 0, ic = 0, colstride = 1;
				bool inside = true, counted = true;
				for (int d = 0; d < nsp; d++) {
					int64_t i = o[d] * g.stride[d] + k[d] * g.dil[d] - g.pad_begin[d];
					inside = inside && i >= 0 && i < g.in[d];
					counted = counted && i < g.in[d] + g.pad_end[d];
					il = il * g.in[d] + i;
					ic += i * colstride;
					colstride *= g.in[d];
				}
				if (include_pad && counted) count++;
				if (!inside) continue;
				double v = plane[il];
				if (!include_pad) count++;
				if (kind == POOL_AVG) {
					acc += v;
				} else if (kind == POOL_LP) {
					acc += pow(fabs(v), p);
				} else if (!have || v > best || (isnan(best) && !isnan(v))) {
					best = v;
					best_at = col_major ? ic : il;
					have = true;
				}
			}
			int64_t e = pl * osz + ol;
			if (kind == POOL_AVG) tbc_set_f64(y, e, acc / (double)count);
			else if (kind == POOL_LP) tbc_set_f64(y, e, pow(acc, 1.0 / p));
			else tbc_set_f64(y, e, best);
			if (idx) tbc_set_i64(idx, e, best_at < 0 ? -1 : pl * isz + best_at);
		}
	}
	free(xd);
	out[0] = y;
	if (op->n_outputs > 1) out[1] = idx;
	return 0;
}

int tbc_interp_AveragePool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return pool_run(ip, op, in[0], POOL_AVG, out);
}
int tbc_interp_MaxPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return pool_run(ip, op, in[0], POOL_MAX, out);
}
int tbc_interp_LpPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return pool_run(ip, op, in[0], POOL_LP, out);
}

/* ---- Global pools: one window covering all spatial dims ------------------ */

static bool global_shape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!conv_is_float_dtype(x->dtype)) return tbc_infer_error(cx, op, "X must be a float tensor");
	tbc_type y = *x;
	if (x->rank >= 0 && x->rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3, got %d", x->rank);
	for (int i = 2; i < y.rank; i++) y.dims[i] = (tbc_dim){1, NULL};
	if (op->code == TBC_OP_GlobalLpPool && tbc_attr_int(op, "p", 2) <= 0) return tbc_infer_error(cx, op, "p must be positive");
	op->outputs[0]->type = y;
	return true;
}

bool tbc_shape_GlobalAveragePool(tbc_infer *cx, tbc_op *op) { return global_shape(cx, op); }
bool tbc_shape_GlobalMaxPool(tbc_infer *cx, tbc_op *op) { return global_shape(cx, op); }
bool tbc_shape_GlobalLpPool(tbc_infer *cx, tbc_op *op) { return global_shape(cx, op); }

static int global_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, pool_kind kind, tbc_tensor **out) {
	if (x->rank < 3) return tbc_interp_error(ip, op, "X must have rank >= 3, got %d", x->rank);
	int64_t ydims[TBC_MAX_RANK] = {x->dims[0], x->dims[1]};
	for (int i = 2; i < x->rank; i++) ydims[i] = 1;
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	if (!y) return -1;
	int64_t sz = conv_prod(2, x->rank, x->dims);
	double p = (double)tbc_attr_int(op, "p", 2);
	bool f32 = x->dtype == TBC_DT_F32;
	for (int64_t pl = 0; pl < y->numel; pl++) {
		double acc = kind == POOL_MAX ? -INFINITY : 0.0;
		bool nan = false;
		for (int64_t i = 0; i < sz; i++) {
			double v = f32 ? ((const float *)x->data)[pl * sz + i] : tbc_get_f64(x, pl * sz + i);
			if (kind == POOL_AVG) acc += v;
			else if (kind == POOL_LP) acc += pow(fabs(v), p);
			else if (isnan(v)) nan = true;
			else if (v > acc) acc = v;
		}
		if (kind == POOL_AVG) acc /= (double)sz;
		else if (kind == POOL_LP) acc = pow(acc, 1.0 / p);
		else if (nan) acc = NAN;
		tbc_set_f64(y, pl, acc);
	}
	out[0] = y;
	return 0;
}

int tbc_interp_GlobalAveragePool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return global_run(ip, op, in[0], POOL_AVG, out);
}
int tbc_interp_GlobalMaxPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return global_run(ip, op, in[0], POOL_MAX, out);
}
int tbc_interp_GlobalLpPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return global_run(ip, op, in[0], POOL_LP, out);
}

/* ---- MaxUnpool --------------------------------------------------------------
 * Scatters X to the flat positions I gives, in a zero tensor of the shape
 * MaxPool's input had: (in - 1) * stride - pad_begin - pad_end + kernel.  A
 * larger output_shape keeps that block at its origin (as the reference
 * implementation does), the rest zero. */

static const char *unpool_dims(const tbc_op *op, int rank, const int64_t *xdims, int64_t *dims) {
	conv_geom g;
	const char *err = conv_geom_read(&g, op, rank - 2, NULL, false, false);
	if (err) return err;
	dims[0] = xdims[0];
	dims[1] = xdims[1];
	for (int i = 0; i < g.nsp; i++) {
		if (xdims[2 + i] < 0) {
			dims[2 + i] = -1;
			continue;
		}
		dims[2 + i] = (xdims[2 + i] - 1) * g.stride[i] - g.pad_begin[i] - g.pad_end[i] + g.kernel[i];
		if (dims[2 + i] <= 0) return "the unpooled output would be empty";
	}
	return NULL;
}

bool tbc_shape_MaxUnpool(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *ix = &op->inputs[1]->type;
	if (!conv_is_float_dtype(x->dtype)) return tbc_infer_error(cx, op, "X must be a float tensor");
	if (ix->dtype != TBC_DT_I64) return tbc_infer_error(cx, op, "I must be int64");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	y.rank = x->rank;
	if (x->rank >= 0 && x->rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3, got %d", x->rank);
	const tbc_value *os = op->n_inputs > 2 ? op->inputs[2] : NULL;
	if (os) {
		const tbc_tensor *c = tbc_input_const(op, 2);
		if (c) {
			if (c->rank != 1 || (x->rank >= 0 && c->numel != x->rank) || c->numel > TBC_MAX_RANK)
				return tbc_infer_error(cx, op, "output_shape must hold one value per dim of X");
			y.rank = (int)c->numel;
			for (int i = 0; i < y.rank; i++) y.dims[i] = (tbc_dim){tbc_get_i64(c, i), NULL};
		} else {
			if (y.rank < 0 && os->type.rank == 1 && !os->type.dims[0].sym) y.rank = (int)os->type.dims[0].size;
			for (int i = 0; i < y.rank; i++) y.dims[i] = tbc_module_fresh_dim(cx->module);
		}
		op->outputs[0]->type = y;
		return true;
	}
	if (x->rank >= 0) {
		int64_t xd[TBC_MAX_RANK], d[TBC_MAX_RANK];
		for (int i = 0; i < x->rank; i++) xd[i] = x->dims[i].sym ? -1 : x->dims[i].size;
		const char *err = unpool_dims(op, x->rank, xd, d);
		if (err) return tbc_infer_error(cx, op, "%s", err);
		for (int i = 0; i < x->rank; i++)
			y.dims[i] = i < 2 ? x->dims[i] : d[i] >= 0 ? (tbc_dim){d[i], NULL} : tbc_module_fresh_dim(cx->module);
	}
	op->outputs[0]->type = y;
	return true;
}

int tbc_interp_MaxUnpool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *ix = in[1], *os = op->n_inputs > 2 ? in[2] : NULL;
	if (x->rank < 3) return tbc_interp_error(ip, op, "X must have rank >= 3");
	if (!tbc_tensor_same_shape(x, ix)) return tbc_interp_error(ip, op, "X and I must have the same shape");
	int64_t inner[TBC_MAX_RANK], ydims[TBC_MAX_RANK];
	const char *err = unpool_dims(op, x->rank, x->dims, inner);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	memcpy(ydims, inner, sizeof ydims);
	if (os) {
		if (os->rank != 1 || os->numel != x->rank) return tbc_interp_error(ip, op, "output_shape must hold %d values", x->rank);
		for (int i = 0; i < x->rank; i++) {
			ydims[i] = tbc_get_i64(os, i);
			if (ydims[i] < inner[i])
				return tbc_interp_error(ip, op, "output_shape dim %d (%lld) is smaller than the unpooled size %lld", i,
							(long long)ydims[i], (long long)inner[i]);
		}
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	if (!y) return -1;
	memset(y->data, 0, (size_t)y->numel * tbc_dtype_size(y->dtype));
	int64_t total = conv_prod(0, x->rank, inner), ystr[TBC_MAX_RANK], istr[TBC_MAX_RANK];
	tbc_strides(x->rank, ydims, ystr);
	tbc_strides(x->rank, inner, istr);
	for (int64_t e = 0; e < x->numel; e++) {
		int64_t t = tbc_get_i64(ix, e);
		if (t < 0 || t >= total) {
			tbc_tensor_destroy(y);
			return tbc_interp_error(ip, op, "index %lld is outside the unpooled tensor of %lld elements", (long long)t,
						(long long)total);
		}
		int64_t at = 0;
		for (int d = 0; d < x->rank; d++) at += (t / istr[d]) % inner[d] * ystr[d];
		tbc_set_f64(y, at, tbc_get_f64(x, e));
	}
	out[0] = y;
	return 0;
}
