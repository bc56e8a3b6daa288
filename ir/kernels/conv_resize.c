/* Resize (canonical form: X, roi, scales, sizes).  The output size comes
 * from sizes (with keep_aspect_ratio_policy) or floor(in * scale).  The
 * interpolation is separable: each resized axis is done in turn, in double,
 * with every output coordinate mapped back by coordinate_transformation_mode
 * to x_ori and weighted over n neighbours (nearest: 2 with 0/1 weights,
 * linear: 2, cubic: 4, antialias: a footprint widened by 1/scale), edge
 * neighbours clamped.  Nearest copies elements (exact for int64), the others
 * round half to even and saturate to the output type, as the reference does. */
#include <stdio.h>

#include "conv_util.h"

enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_CROP };
enum { KA_STRETCH, KA_NOT_LARGER, KA_NOT_SMALLER };

typedef struct resize_cfg {
	int mode, nearest_mode, ctm, policy;
	bool antialias, exclude_outside;
	double cubic_a, extrapolation;
	int rank, n_axes;
	int axes[TBC_MAX_RANK];
} resize_cfg;

static int pick(const char *s, const char *const *names, int n) {
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i])) return i;
	return -1;
}

static const char *resize_read_cfg(const tbc_op *op, int rank, resize_cfg *c) {
	static const char *const modes[] = {"nearest", "linear", "cubic"};
	static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
					   "asymmetric", "tf_crop_and_resize"};
	static const char *const pols[] = {"stretch", "not_larger", "not_smaller"};
	memset(c, 0, sizeof *c);
	c->rank = rank;
	if ((c->mode = pick(conv_attr_str(op, "mode", "nearest"), modes, 3)) < 0) return "mode must be nearest, linear or cubic";
	if ((c->nearest_mode = pick(conv_attr_str(op, "nearest_mode", "round_prefer_floor"), nms, 4)) < 0)
		return "nearest_mode must be round_prefer_floor, round_prefer_ceil, floor or ceil";
	if ((c->ctm = pick(conv_attr_str(op, "coordinate_transformation_mode", "half_pixel"), ctms, 6)) < 0)
		return "unknown coordinate_transformation_mode";
	if ((c->policy = pick(conv_attr_str(op, "keep_aspect_ratio_policy", "stretch"), pols, 3)) < 0)
		return "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller";
	c->antialias = tbc_attr_int(op, "antialias", 0) != 0;
	c->exclude_outside = tbc_attr_int(op, "exclude_outside", 0) != 0;
	c->cubic_a = tbc_attr_float(op, "cubic_coeff_a", -0.75);
	c->extrapolation = tbc_attr_float(op, "extrapolation_value", 0.0);
	if (c->antialias && c->mode == MODE_NEAREST) return "antialias is not supported with mode nearest";
	const int64_t *axes;
	int n = tbc_attr_ints(op, "axes", &axes);
	if (n < 0) {
		c->n_axes = rank;
		for (int i = 0; i < rank; i++) c->axes[i] = i;
		return NULL;
	}
	if (n > rank) return "axes has more values than X has dims";
	c->n_axes = n;
	for (int i = 0; i < n; i++) {
		if (!tbc_norm_axis(axes[i], rank, &c->axes[i])) return "axes value out of range";
		for (int k = 0; k < i; k++)
			if (c->axes[k] == c->axes[i]) return "axes must not repeat";
	}
	return NULL;
}

/* An optional input is absent when omitted or empty. */
static bool input_present(const tbc_op *op, int i) {
	if (i >= op->n_inputs || !op->inputs[i]) return false;
	const tbc_type *t = &op->inputs[i]->type;
	return !(t->rank == 1 && !t->dims[0].sym && t->dims[0].size == 0);
}

/* Output dims and per-dim scales from sizes (int64, n_axes values) or scales
 * (n_axes values); in[] all known. */
static const char *resize_out_dims(const resize_cfg *c, const int64_t *in, const double *scales, const int64_t *sizes,
				   int64_t *out, double *scale) {
	for (int d = 0; d < c->rank; d++) {
		out[d] = in[d];
		scale[d] = 1.0;
	}
	if (sizes) {
		for (int i = 0; i < c->n_axes; i++) {
			if (sizes[i] < 0) return "sizes must not be negative";
			if (in[c->axes[i]] == 0 && sizes[i] != 0) return "cannot resize an empty dim";
		}
		if (c->policy == KA_STRETCH) {
			for (int i = 0; i < c->n_axes; i++) {
				int a = c->axes[i];
				out[a] = sizes[i];
				scale[a] = in[a] ? (double)sizes[i] / (double)in[a] : 1.0;
			}
			return NULL;
		}
		double s = c->policy == KA_NOT_LARGER ? INFINITY : -INFINITY;
		for (int i = 0; i < c->n_axes; i++) {
			double r = in[c->axes[i]] ? (double)sizes[i] / (double)in[c->axes[i]] : 1.0;
			s = c->policy == KA_NOT_LARGER ? fmin(s, r) : fmax(s, r);
		}
		for (int i = 0; i < c->n_axes; i++) {
			int a = c->axes[i];
			scale[a] = s;
			out[a] = (int64_t)(s * (double)in[a] + 0.5);
		}
		return NULL;
	}
	for (int i = 0; i < c->n_axes; i++) {
		int a = c->axes[i];
		if (!(scales[i] > 0) || scales[i] * (double)in[a] > 9.0e15) return "scales must be positive and finite";
		scale[a] = scales[i];
		out[a] = (int64_t)floor(scales[i] * (double)in[a]);
	}
	return NULL;
}

bool tbc_shape_Resize(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	tbc_type y = *x;
	if (x->rank < 0) {
		op->outputs[0]->type = y;
		return true;
	}
	resize_cfg c;
	const char *err = resize_read_cfg(op, x->rank, &c);
	if (err) return tbc_infer_error(cx, op, "%s", err);
	bool has_scales = input_present(op, 2), has_sizes = input_present(op, 3);
	if (has_scales == has_sizes) return tbc_infer_error(cx, op, "exactly one of scales and sizes must be given");
	int vi = has_sizes ? 3 : 2;
	const tbc_type *vt = &op->inputs[vi]->type;
	if (has_sizes && vt->dtype != TBC_DT_I64) return tbc_infer_error(cx, op, "sizes must be int64");
	if (has_scales && !tbc_dtype_is_float(vt->dtype)) return tbc_infer_error(cx, op, "scales must be float");
	if (vt->rank >= 0 && vt->rank != 1) return tbc_infer_error(cx, op, "%s must be 1-D", has_sizes ? "sizes" : "scales");
	if (vt->rank == 1 && !vt->dims[0].sym && vt->dims[0].size != c.n_axes)
		return tbc_infer_error(cx, op, "%s has %lld values for %d axes", has_sizes ? "sizes" : "scales",
				       (long long)vt->dims[0].size, c.n_axes);
	const tbc_tensor *v = tbc_input_const(op, vi);
	if (v && v->numel != c.n_axes) return tbc_infer_error(cx, op, "scales/sizes must hold one value per axis");
	int64_t in[TBC_MAX_RANK], out[TBC_MAX_RANK];
	double sc[TBC_MAX_RANK], scale[TBC_MAX_RANK];
	int64_t sz[TBC_MAX_RANK];
	bool all_in = true;
	for (int d = 0; d < x->rank; d++) in[d] = x->dims[d].sym ? -1 : x->dims[d].size;
	for (int i = 0; i < c.n_axes; i++) all_in = all_in && in[c.axes[i]] >= 0;
	if (v) {
		int64_t in2[TBC_MAX_RANK];
		for (int i = 0; i < c.n_axes; i++) {
			sc[i] = tbc_get_f64(v, i);
			sz[i] = tbc_get_i64(v, i);
		}
		for (int d = 0; d < x->rank; d++) in2[d] = in[d] < 0 ? 1 : in[d];
		if ((err = resize_out_dims(&c, in2, sc, has_sizes ? sz : NULL, out, scale))) return tbc_infer_error(cx, op, "%s", err);
	}
	for (int i = 0; i < c.n_axes; i++) {
		int a = c.axes[i];
		bool stat = v && (has_sizes ? c.policy == KA_STRETCH || all_in : in[a] >= 0);
		if (stat) y.dims[a] = (tbc_dim){out[a], NULL};
		else if (v && !has_sizes && sc[i] == 1.0) y.dims[a] = x->dims[a]; /* floor(d * 1) == d */
		else y.dims[a] = tbc_module_fresh_dim(cx->module);
	}
	op->outputs[0]->type = y;
	return true;
}

/* ---- Coordinates and weights ------------------------------------------- */

static double cubic_weight(double x, double A) {
	x = fabs(x);
	if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
	if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
	return 0.0;
}

/* The weights of the n neighbours for the fraction ratio in (0, 1]; returns n. */
static int weights(const resize_cfg *c, double ratio, double scale, double *w, int cap) {
	if (c->mode == MODE_NEAREST) {
		bool up;
		if (ratio == 1.0) up = true;
		else if (c->nearest_mode == NM_ROUND_PREFER_FLOOR) up = ratio > 0.5;
		else if (c->nearest_mode == NM_ROUND_PREFER_CEIL) up = ratio >= 0.5;
		else up = c->nearest_mode == NM_CEIL;
		w[0] = up ? 0.0 : 1.0;
		w[1] = up ? 1.0 : 0.0;
		return 2;
	}
	double A = c->cubic_a;
	if (!c->antialias) {
		if (c->mode == MODE_LINEAR) {
			w[0] = 1 - ratio;
			w[1] = ratio;
			return 2;
		}
		w[0] = ((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A;
		w[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
		w[2] = ((A + 2) * (1 - ratio) - (A + 3)) * (1 - ratio) * (1 - ratio) + 1;
		w[3] = ((A * ((1 - ratio) + 1) - 5 * A) * ((1 - ratio) + 1) + 8 * A) * ((1 - ratio) + 1) - 4 * A;
		return 4;
	}
	/* Antialias: the kernel stretched by 1/scale when downsampling. */
	double s = scale < 1.0 ? scale : 1.0, sum = 0.0;
	int start = (int)floor((c->mode == MODE_LINEAR ? -1.0 : -2.0) / s) + 1;
	int n = c->mode == MODE_LINEAR ? 2 - 2 * start : (2 - start) - start;
	if (n > cap) n = cap;
	for (int i = 0; i < n; i++) {
		double a = ((double)(start + i) - ratio) * s;
		w[i] = c->mode == MODE_LINEAR ? fmin(fmax(1 - fabs(a), 0.0), 1.0) : cubic_weight(a, A);
		sum += w[i];
	}
	for (int i = 0; i < n; i++) w[i] /= sum;
	return n;
}

static int footprint(const resize_cfg *c, double scale) {
	if (!c->antialias) return c->mode == MODE_CUBIC ? 4 : 2;
	double s = scale < 1.0 ? scale : 1.0;
	double start = floor((c->mode == MODE_LINEAR ? -1.0 : -2.0) / s) + 1;
	return (int)(2 - 2 * start);
}

/* One axis: for each output coordinate j, n neighbours (clamped) with
 * weights, or extrapolated. */
typedef struct axis_map {
	int n;
	int64_t *idx; /* out_w * n */
	double *w;    /* out_w * n */
	bool *extrap; /* out_w */
} axis_map;

static bool axis_map_make(const resize_cfg *c, int64_t in_w, int64_t out_w, double scale, const double *roi,
			  bool roi_f32, axis_map *m) {
	m->n = footprint(c, scale);
	if (m->n < 1 || m->n > (1 << 24)) return false;
	size_t cells = (size_t)(out_w ? out_w : 1) * (size_t)m->n;
	m->idx = malloc(cells * sizeof *m->idx);
	m->w = malloc(cells * sizeof *m->w);
	m->extrap = calloc((size_t)(out_w ? out_w : 1), sizeof *m->extrap);
	if (!m->idx || !m->w || !m->extrap) return false;
	double out_f = scale * (double)in_w;
	for (int64_t j = 0; j < out_w; j++) {
		double y = (double)j, x;
		switch (c->ctm) {
		case CT_ALIGN_CORNERS: x = out_f == 1 ? 0.0 : y * (double)(in_w - 1) / (out_f - 1); break;
		case CT_ASYMMETRIC: x = y / scale; break;
		case CT_PYTORCH_HALF_PIXEL: x = out_f == 1 ? -0.5 : (y + 0.5) / scale - 0.5; break;
		case CT_HALF_PIXEL_SYMMETRIC: {
			double adjustment = (double)out_w / out_f, center = (double)in_w / 2;
			x = center * (1 - adjustment) + (y + 0.5) / scale - 0.5;
			break;
		}
		case CT_TF_CROP: {
			/* roi arithmetic in its own precision, as numpy does */
			double r0 = roi ? roi[0] : 0.0, r1 = roi ? roi[1] : 1.0;
			double span = roi_f32 ? (double)(float)(r1 - r0) : r1 - r0;
			double base = roi_f32 ? (double)((float)r0 * (float)(in_w - 1)) : r0 * (double)(in_w - 1);
			x = out_f == 1 ? span * (double)(in_w - 1) / 2 : y * span * (double)(in_w - 1) / (out_f - 1);
			x += base;
			m->extrap[j] = x < 0 || x > (double)(in_w - 1);
			break;
		}
		default: x = (y + 0.5) / scale - 0.5; break;
		}
		if (!(x > -1e15)) x = -1e15; /* also NaN */
		if (x > 1e15) x = 1e15;
		double xf = floor(x), ratio = x == xf ? 1.0 : x - xf;
		double *w = m->w + j * m->n;
		int n = weights(c, ratio, scale, w, m->n);
		int pad = (n + 1) / 2;
		double xp = x + pad, pf = floor(xp), frac = xp - pf;
		int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
		int64_t start = (int64_t)pf + off - pad;
		double sum = 0.0;
		for (int i = 0; i < n; i++) {
			int64_t k = start + i;
			if (c->exclude_outside && (k < 0 || k >= in_w)) w[i] = 0.0;
			sum += w[i];
			m->idx[j * m->n + i] = k < 0 ? 0 : k >= in_w ? in_w - 1 : k;
		}
		if (c->exclude_outside)
			for (int i = 0; i < n; i++) w[i] /= sum == 0.0 ? 1.0 : sum;
	}
	return true;
}

static void axis_map_free(axis_map *m) {
	free(m->idx);
	free(m->w);
	free(m->extrap);
}

/* Saturating store of the reference (numpy_helper.saturate_cast). */
static void store_saturated(tbc_tensor *y, int64_t i, double v) {
	tbc_dtype dt = y->dtype;
	if (tbc_dtype_is_int(dt) || dt == TBC_DT_BOOL) {
		double lo, hi;
		int bits = tbc_dtype_bits(dt);
		if (dt == TBC_DT_BOOL) lo = 0, hi = 1;
		else if (tbc_dtype_is_signed(dt)) lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1) - 1;
		else lo = 0, hi = ldexp(1.0, bits) - 1;
		v = nearbyint(v);
		if (isnan(v)) v = 0;
		v = v < lo ? lo : v > hi ? hi : v;
		if (dt == TBC_DT_I64 && v >= 9223372036854775807.0) tbc_set_i64(y, i, INT64_MAX);
		else if (dt == TBC_DT_U64 && v >= 18446744073709551615.0) tbc_store_u64(dt, y->data, (size_t)i, UINT64_MAX);
		else tbc_set_f64(y, i, v);
		return;
	}
	double max = conv_dtype_float_max(dt);
	if (max > 0) v = v < -max ? -max : v > max ? max : v;
	tbc_set_f64(y, i, v);
}

int tbc_interp_Resize(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	const tbc_tensor *roi_t = op->n_inputs > 1 ? in[1] : NULL;
	const tbc_tensor *scales_t = op->n_inputs > 2 ? in[2] : NULL, *sizes_t = op->n_inputs > 3 ? in[3] : NULL;
	if (scales_t && scales_t->numel == 0) scales_t = NULL;
	if (sizes_t && sizes_t->numel == 0) sizes_t = NULL;
	if (roi_t && roi_t->numel == 0) roi_t = NULL;
	resize_cfg c;
	const char *err = resize_read_cfg(op, x->rank, &c);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	if (!scales_t == !sizes_t) return tbc_interp_error(ip, op, "exactly one of scales and sizes must be given");
	const tbc_tensor *v = sizes_t ? sizes_t : scales_t;
	if (v->numel != c.n_axes) return tbc_interp_error(ip, op, "scales/sizes must hold one value per axis (%d)", c.n_axes);
	if (c.ctm == CT_TF_CROP && roi_t && roi_t->numel != 2 * c.n_axes)
		return tbc_interp_error(ip, op, "roi must hold 2 values per axis (%d)", 2 * c.n_axes);
	double sc[TBC_MAX_RANK], scale[TBC_MAX_RANK], roi[2 * TBC_MAX_RANK];
	int64_t sz[TBC_MAX_RANK], ydims[TBC_MAX_RANK];
	for (int i = 0; i < c.n_axes; i++) {
		sc[i] = tbc_get_f64(v, i);
		sz[i] = tbc_get_i64(v, i);
	}
	if ((err = resize_out_dims(&c, x->dims, sc, sizes_t ? sz : NULL, ydims, scale))) return tbc_interp_error(ip, op, "%s", err);
	/* roi per dim: [start, end], identity where not given */
	bool has_roi[TBC_MAX_RANK] = {false};
	for (int i = 0; c.ctm == CT_TF_CROP && roi_t && i < c.n_axes; i++) {
		roi[2 * c.axes[i]] = tbc_get_f64(roi_t, i);
		roi[2 * c.axes[i] + 1] = tbc_get_f64(roi_t, c.n_axes + i);
		has_roi[c.axes[i]] = true;
	}
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	if (!y) return -1;
	axis_map maps[TBC_MAX_RANK];
	memset(maps, 0, sizeof maps);
	bool resized[TBC_MAX_RANK] = {false}, ok = true;
	for (int i = 0; i < c.n_axes; i++) {
		int a = c.axes[i];
		bool roi_identity = !has_roi[a] || (fabs(roi[2 * a]) < 1e-9 && fabs(roi[2 * a + 1] - 1.0) < 1e-9);
		resized[a] = !(fabs(scale[a] - 1.0) <= 1e-9 && ydims[a] == x->dims[a] && roi_identity);
		if (resized[a] && ydims[a] > 0 &&
		    !axis_map_make(&c, x->dims[a], ydims[a], scale[a], has_roi[a] ? roi + 2 * a : NULL,
				   roi_t && roi_t->dtype == TBC_DT_F32, &maps[a]))
			ok = false;
	}
	int rc = 0;
	if (!ok) {
		rc = tbc_interp_error(ip, op, "out of memory");
	} else if (y->numel == 0) {
		/* nothing to compute */
	} else if (c.mode == MODE_NEAREST) {
		/* Each output element is one input element (or the extrapolation value). */
		int64_t xs[TBC_MAX_RANK], o[TBC_MAX_RANK] = {0};
		size_t es = tbc_dtype_size(x->dtype);
		tbc_strides(x->rank, x->dims, xs);
		for (int64_t e = 0; e < y->numel; e++, tbc_index_next(x->rank, ydims, o)) {
			int64_t src = 0;
			bool extrap = false;
			for (int d = 0; d < x->rank; d++) {
				int64_t i = o[d];
				if (resized[d]) {
					const axis_map *m = &maps[d];
					extrap = extrap || m->extrap[i];
					i = m->w[i * m->n] != 0.0 ? m->idx[i * m->n] : m->idx[i * m->n + 1];
				}
				src += i * xs[d];
			}
			if (extrap) store_saturated(y, e, c.extrapolation);
			else memcpy((char *)y->data + (size_t)e * es, (const char *)x->data + (size_t)src * es, es);
		}
	} else {
		/* Separable: resize one axis at a time in double. */
		int64_t cur_dims[TBC_MAX_RANK];
		memcpy(cur_dims, x->dims, sizeof cur_dims);
		double *cur = conv_load_all(x);
		if (!cur) rc = tbc_interp_error(ip, op, "out of memory");
		for (int i = 0; rc == 0 && i < c.n_axes; i++) {
			int a = c.axes[i];
			if (!resized[a]) continue;
			const axis_map *m = &maps[a];
			int64_t outer = conv_prod(0, a, cur_dims), inner = conv_prod(a + 1, x->rank, cur_dims);
			int64_t in_w = cur_dims[a], out_w = ydims[a];
			double *next = malloc((size_t)(outer * out_w * inner > 0 ? outer * out_w * inner : 1) * sizeof *next);
			if (!next) {
				rc = tbc_interp_error(ip, op, "out of memory");
				break;
			}
			for (int64_t p = 0; p < outer; p++)
				for (int64_t j = 0; j < out_w; j++) {
					double *dst = next + (p * out_w + j) * inner;
					if (m->extrap[j]) {
						for (int64_t q = 0; q < inner; q++) dst[q] = c.extrapolation;
						continue;
					}
					for (int64_t q = 0; q < inner; q++) dst[q] = 0.0;
					for (int k = 0; k < m->n; k++) {
						double w = m->w[j * m->n + k];
						const double *src = cur + (p * in_w + m->idx[j * m->n + k]) * inner;
						for (int64_t q = 0; q < inner; q++) dst[q] += w * src[q];
					}
				}
			free(cur);
			cur = next;
			cur_dims[a] = out_w;
		}
		for (int64_t e = 0; rc == 0 && e < y->numel; e++) store_saturated(y, e, cur[e]);
		free(cur);
	}
	for (int d = 0; d < x->rank; d++) axis_map_free(&maps[d]);
	if (rc) {
		tbc_tensor_destroy(y);
		return rc;
	}
	out[0] = y;
	return 0;
}
