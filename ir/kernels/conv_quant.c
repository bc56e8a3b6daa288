/* Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
 *
 *   quantize:   y = saturate(round_half_even(x / scale) + zero_point)
 *   dequantize: y = (x - zero_point) * scale
 *
 * scale and zero_point are per tensor (one value), per axis (1-D along
 * axis) or blocked (x's shape with dim axis divided by block_size, rounded
 * up).  The arithmetic follows the reference: x / scale in x's precision,
 * (x - zero_point) * scale in float32. */
#include <stdio.h>

#include "conv_util.h"

/* Where element e of x finds its scale / zero point. */
typedef struct qparam_map {
	int kind; /* 0 per tensor, 1 per axis, 2 blocked */
	int rank, axis;
	int64_t block, inner, axis_dim;
	int64_t xdims[TBC_MAX_RANK], pstrides[TBC_MAX_RANK];
} qparam_map;

/* Validates the shape (pdims) of a scale for x (xdims) and builds the map. */
static const char *qparam_make(qparam_map *m, int rank, const int64_t *xdims, int prank, const int64_t *pdims,
			       int64_t axis_attr, int64_t block) {
	memset(m, 0, sizeof *m);
	m->rank = rank;
	memcpy(m->xdims, xdims, (size_t)rank * sizeof *xdims);
	int64_t pn = conv_prod(0, prank, pdims);
	if (block < 0) return "block_size must not be negative";
	if (prank == 0 || (pn == 1 && block == 0 && prank <= 1)) return NULL;
	if (!tbc_norm_axis(axis_attr, rank, &m->axis)) return "axis is out of range";
	m->axis_dim = xdims[m->axis];
	m->inner = conv_prod(m->axis + 1, rank, xdims);
	if (block == 0) {
		if (prank != 1 || pdims[0] != xdims[m->axis]) return "a per-axis scale must be 1-D with the size of the axis";
		m->kind = 1;
		return NULL;
	}
	if (prank != rank) return "a blocked scale must have the rank of x";
	for (int d = 0; d < rank; d++) {
		int64_t want = d == m->axis ? (xdims[d] + block - 1) / block : xdims[d];
		if (pdims[d] != want) return "a blocked scale must have x's shape with the axis divided by block_size";
	}
	m->kind = 2;
	m->block = block;
	tbc_strides(rank, pdims, m->pstrides);
	return NULL;
}

static int64_t qparam_index(const qparam_map *m, int64_t e) {
	if (m->kind == 0) return 0;
	if (m->kind == 1) return (e / m->inner) % m->axis_dim;
	int64_t at = 0;
	for (int d = m->rank - 1; d >= 0; d--) {
		int64_t i = e % m->xdims[d];
		e /= m->xdims[d];
		at += (d == m->axis ? i / m->block : i) * m->pstrides[d];
	}
	return at;
}

static bool is_float8(tbc_dtype dt) {
	return dt == TBC_DT_F8E4M3FN || dt == TBC_DT_F8E4M3FNUZ || dt == TBC_DT_F8E5M2 || dt == TBC_DT_F8E5M2FNUZ;
}

/* The integer range of a quantized integer type; false for other types. */
static bool quant_int_range(tbc_dtype dt, double *lo, double *hi) {
	switch (dt) {
	case TBC_DT_U8: *lo = 0, *hi = 255; return true;
	case TBC_DT_I8: *lo = -128, *hi = 127; return true;
	case TBC_DT_U16: *lo = 0, *hi = 65535; return true;
	case TBC_DT_I16: *lo = -32768, *hi = 32767; return true;
	case TBC_DT_U4: *lo = 0, *hi = 15; return true;
	case TBC_DT_I4: *lo = -8, *hi = 7; return true;
	case TBC_DT_U2: *lo = 0, *hi = 3; return true;
	case TBC_DT_I2: *lo = -2, *hi = 1; return true;
	default: return false;
	}
}

static bool quant_type_ok(tbc_dtype dt) {
	double lo, hi;
	return quant_int_range(dt, &lo, &hi) || is_float8(dt) || dt == TBC_DT_F4E2M1;
}

/* Static shape of a value, -1 for symbolic dims; false when rank unknown. */
static bool static_dims(const tbc_type *t, int64_t *d) {
	if (t->rank < 0) return false;
	for (int i = 0; i < t->rank; i++) d[i] = t->dims[i].sym ? -1 : t->dims[i].size;
	for (int i = 0; i < t->rank; i++)
		if (d[i] < 0) return false;
	return true;
}

/* Shape-time check of scale and zero point against x where all are static. */
static bool check_params(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	int64_t xd[TBC_MAX_RANK], pd[TBC_MAX_RANK];
	if (!static_dims(x, xd)) return true;
	for (int i = 1; i < op->n_inputs && i < 3; i++) {
		if (!op->inputs[i] || !static_dims(&op->inputs[i]->type, pd)) continue;
		qparam_map m;
		const char *err = qparam_make(&m, x->rank, xd, op->inputs[i]->type.rank, pd, tbc_attr_int(op, "axis", 1),
					      tbc_attr_int(op, "block_size", 0));
		if (err) return tbc_infer_error(cx, op, "%s %s", i == 1 ? "scale:" : "zero point:", err);
	}
	return true;
}

static tbc_dtype quantize_out_dtype(const tbc_op *op, tbc_dtype zp_dt, bool has_zp) {
	int64_t od = tbc_attr_int(op, "output_dtype", 0);
	if (has_zp) return zp_dt;
	return od ? (tbc_dtype)od : TBC_DT_U8;
}

bool tbc_shape_QuantizeLinear(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *s = &op->inputs[1]->type;
	bool has_zp = op->n_inputs > 2 && op->inputs[2];
	if (!tbc_dtype_is_float(x->dtype) && x->dtype != TBC_DT_I32)
		return tbc_infer_error(cx, op, "x must be a float or int32 tensor");
	if (!tbc_dtype_is_float(s->dtype) && s->dtype != TBC_DT_I32) return tbc_infer_error(cx, op, "y_scale must be a float tensor");
	int64_t od = tbc_attr_int(op, "output_dtype", 0);
	if (has_zp && od && od != op->inputs[2]->type.dtype)
		return tbc_infer_error(cx, op, "output_dtype (%lld) and the zero point's type (%s) differ", (long long)od,
				       tbc_dtype_name(op->inputs[2]->type.dtype));
	tbc_dtype dt = quantize_out_dtype(op, has_zp ? op->inputs[2]->type.dtype : TBC_DT_UNDEFINED, has_zp);
	if (!tbc_dtype_valid((int)dt) || !quant_type_ok(dt))
		return tbc_infer_error(cx, op, "cannot quantize to %s", tbc_dtype_name(dt));
	if (!check_params(cx, op)) return false;
	op->outputs[0]->type = *x;
	op->outputs[0]->type.dtype = dt;
	return true;
}

bool tbc_shape_DequantizeLinear(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *s = &op->inputs[1]->type;
	if (op->n_inputs > 2 && op->inputs[2] && op->inputs[2]->type.dtype != x->dtype)
		return tbc_infer_error(cx, op, "x is %s but its zero point is %s", tbc_dtype_name(x->dtype),
				       tbc_dtype_name(op->inputs[2]->type.dtype));
	if (!tbc_dtype_is_float(s->dtype)) return tbc_infer_error(cx, op, "x_scale must be a float tensor");
	int64_t od = tbc_attr_int(op, "output_dtype", 0);
	tbc_dtype dt = od ? (tbc_dtype)od : s->dtype;
	if (!tbc_dtype_valid((int)dt) || !tbc_dtype_is_float(dt))
		return tbc_infer_error(cx, op, "output_dtype must be a float type");
	if (!check_params(cx, op)) return false;
	op->outputs[0]->type = *x;
	op->outputs[0]->type.dtype = dt;
	return true;
}

/* Rounds v to the precision of dt (a float type) and back. */
static double round_to(tbc_dtype dt, double v) {
	if (dt == TBC_DT_F64 || !tbc_dtype_is_float(dt)) return v;
	if (dt == TBC_DT_F32) return (double)(float)v;
	unsigned char buf[8];
	tbc_store_f64(dt, buf, 0, v);
	return tbc_load_f64(dt, buf, 0);
}

static int param_map(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, const tbc_tensor *p, qparam_map *m) {
	const char *err = qparam_make(m, x->rank, x->dims, p->rank, p->dims, tbc_attr_int(op, "axis", 1),
				      tbc_attr_int(op, "block_size", 0));
	return err ? tbc_interp_error(ip, op, "%s", err) : 0;
}

int tbc_interp_QuantizeLinear(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *s = in[1], *zp = op->n_inputs > 2 ? in[2] : NULL;
	qparam_map ms, mz;
	if (param_map(ip, op, x, s, &ms) || (zp && param_map(ip, op, x, zp, &mz))) return -1;
	tbc_dtype dt = quantize_out_dtype(op, zp ? zp->dtype : TBC_DT_UNDEFINED, zp != NULL);
	bool saturate = tbc_attr_int(op, "saturate", 1) != 0;
	int64_t prec = tbc_attr_int(op, "precision", 0);
	tbc_dtype pdt = prec ? (tbc_dtype)prec : tbc_dtype_is_float(x->dtype) ? x->dtype : TBC_DT_F32;
	double lo, hi;
	bool is_int = quant_int_range(dt, &lo, &hi);
	if (!is_int && !is_float8(dt) && dt != TBC_DT_F4E2M1)
		return tbc_interp_error(ip, op, "cannot quantize to %s", tbc_dtype_name(dt));
	tbc_tensor *y = tbc_interp_new(ip, op, dt, x->rank, x->dims);
	if (!y) return -1;
	double fmax_ = conv_dtype_float_max(dt);
	for (int64_t e = 0; e < x->numel; e++) {
		double sc = round_to(pdt, tbc_get_f64(s, qparam_index(&ms, e)));
		double q = round_to(pdt, round_to(pdt, tbc_get_f64(x, e)) / sc);
		if (is_int) {
			q = nearbyint(q);
			if (zp) q += tbc_get_f64(zp, qparam_index(&mz, e));
			q = isnan(q) ? 0.0 : q < lo ? lo : q > hi ? hi : q;
			tbc_set_f64(y, e, q);
		} else if (dt == TBC_DT_F4E2M1) {
			if (zp) q += tbc_get_f64(zp, qparam_index(&mz, e));
			tbc_set_f64(y, e, q < -fmax_ ? -fmax_ : q > fmax_ ? fmax_ : q);
		} else if (saturate) {
			tbc_set_f64(y, e, q < -fmax_ ? -fmax_ : q > fmax_ ? fmax_ : q);
		} else {
			tbc_store_f64_nosat(dt, y->data, (size_t)e, q);
		}
	}
	out[0] = y;
	return 0;
}

int tbc_interp_DequantizeLinear(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *s = in[1], *zp = op->n_inputs > 2 ? in[2] : NULL;
	qparam_map ms, mz;
	if (param_map(ip, op, x, s, &ms) || (zp && param_map(ip, op, x, zp, &mz))) return -1;
	/* float8 and float4 have no zero point (it must be 0). */
	bool use_zp = zp && !is_float8(x->dtype) && x->dtype != TBC_DT_F4E2M1;
	if (zp && is_float8(x->dtype))
		for (int64_t e = 0; e < zp->numel; e++)
			if (tbc_get_f64(zp, e) != 0.0) return tbc_interp_error(ip, op, "a float8 zero point must be 0");
	int64_t od = tbc_attr_int(op, "output_dtype", 0);
	tbc_dtype dt = od ? (tbc_dtype)od : s->dtype;
	tbc_tensor *y = tbc_interp_new(ip, op, dt, x->rank, x->dims);
	if (!y) return -1;
	bool wide = s->dtype == TBC_DT_F64 || dt == TBC_DT_F64;
	for (int64_t e = 0; e < x->numel; e++) {
		double sc = tbc_get_f64(s, qparam_index(&ms, e));
		double z = use_zp ? tbc_get_f64(zp, qparam_index(&mz, e)) : 0.0;
		double v;
		if (wide) v = (tbc_get_f64(x, e) - z) * sc;
		else v = (double)(((float)tbc_get_f64(x, e) - (float)z) * (float)sc);
		tbc_set_f64(y, e, v);
	}
	out[0] = y;
	return 0;
}

/* ---- DynamicQuantizeLinear: uint8 with scale and zero point from the data's
 * range (extended to include 0), in float32 arithmetic. */

bool tbc_shape_DynamicQuantizeLinear(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	if (x->dtype != TBC_DT_F32) return tbc_infer_error(cx, op, "x must be float32");
	op->outputs[0]->type = *x;
	op->outputs[0]->type.dtype = TBC_DT_U8;
	tbc_type sc;
	memset(&sc, 0, sizeof sc);
	sc.dtype = TBC_DT_F32;
	if (op->n_outputs > 1 && op->outputs[1]) op->outputs[1]->type = sc;
	sc.dtype = TBC_DT_U8;
	if (op->n_outputs > 2 && op->outputs[2]) op->outputs[2]->type = sc;
	return true;
}

int tbc_interp_DynamicQuantizeLinear(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	if (x->dtype != TBC_DT_F32) return tbc_interp_error(ip, op, "x must be float32");
	const float *xv = x->data;
	float maxx = 0.0f, minx = 0.0f;
	for (int64_t e = 0; e < x->numel; e++) {
		if (xv[e] > maxx) maxx = xv[e];
		if (xv[e] < minx) minx = xv[e];
	}
	volatile float range = maxx == minx ? 1.0f : maxx - minx; /* volatile: no fused or wider arithmetic */
	float scale = range / 255.0f;
	float zp = 0.0f - minx / scale;
	zp = zp < 0.0f ? 0.0f : zp > 255.0f ? 255.0f : zp;
	float zpi = nearbyintf(zp);
	tbc_tensor *y = tbc_interp_new(ip, op, TBC_DT_U8, x->rank, x->dims);
	tbc_tensor *ys = tbc_interp_new(ip, op, TBC_DT_F32, 0, NULL);
	tbc_tensor *yz = tbc_interp_new(ip, op, TBC_DT_U8, 0, NULL);
	if (!y || !ys || !yz) {
		tbc_tensor_destroy(y), tbc_tensor_destroy(ys), tbc_tensor_destroy(yz);
		return -1;
	}
	uint8_t *yv = y->data;
	for (int64_t e = 0; e < x->numel; e++) {
		float q = nearbyintf(xv[e] / scale) + zpi;
		yv[e] = (uint8_t)(isnan(q) ? 0.0f : q < 0.0f ? 0.0f : q > 255.0f ? 255.0f : q);
	}
	*(float *)ys->data = scale;
	*(uint8_t *)yz->data = (uint8_t)zpi;
	out[0] = y;
	if (op->n_outputs > 1) out[1] = ys;
	else tbc_tensor_destroy(ys);
	if (op->n_outputs > 2) out[2] = yz;
	else tbc_tensor_destroy(yz);
	return 0;
}
