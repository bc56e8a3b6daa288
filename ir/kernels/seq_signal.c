/* Signal ops: DFT (opset 20 form: dft_length and axis as inputs), STFT,
 * the Blackman / Hamming / Hann windows and MelWeightMatrix.  Transforms
 * are plain O(n^2) sums in double: the interpreter is the oracle, not the
 * fast path.  Complex values are [..., 2] (real, imaginary); a real signal
 * is [..., 1]. */
#include "seq_common.h"

/* ---- DFT ------------------------------------------------------------------- */
typedef struct {
	int axis;        /* normalized into [0, rank-2] */
	int64_t n;       /* dft_length */
	int64_t out_len; /* output length along axis */
	bool inverse, onesided;
} dft_cfg;

/* Default axis of the op's form: opset 17-19 had an axis attribute
 * defaulting to 1; opset 20 made it an input defaulting to -2. */
static int64_t dft_default_axis(const tbc_op *op) {
	const tbc_attr *a = tbc_op_attr(op, "axis");
	if (a) return a->i;
	return op->graph && op->graph->module && op->graph->module->opset > 0 && op->graph->module->opset < 20 ? 1 : -2;
}

static bool dft_axis_ok(int64_t axis, int rank, int *out) {
	/* Accepted: [-r, -2] and [0, r-2]; the last dim holds the complex pair. */
	if (axis < -rank || axis > rank - 2 || axis == -1) return false;
	*out = (int)(axis < 0 ? axis + rank : axis);
	return true;
}

bool tbc_shape_DFT(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = seq_in_type(op, 0);
	tbc_type *y = seq_out_type(op, 0);
	bool inverse = tbc_attr_int(op, "inverse", 0), onesided = tbc_attr_int(op, "onesided", 0);
	if (!tbc_dtype_is_float(x->dtype)) return tbc_infer_error(cx, op, "input must be a float tensor");
	y->dtype = x->dtype;
	if (x->rank < 0) {
		y->rank = -1;
		return true;
	}
	if (x->rank < 2) return tbc_infer_error(cx, op, "input must have rank >= 2, got %d", x->rank);
	tbc_dim last = x->dims[x->rank - 1];
	if (seq_dim_known(last) && last.size != 1 && last.size != 2)
		return tbc_infer_error(cx, op, "the last dim must be 1 (real) or 2 (complex), got %lld", (long long)last.size);
	if (onesided && !inverse && seq_dim_known(last) && last.size == 2)
		return tbc_infer_error(cx, op, "onesided needs a real input");
	int64_t axis_v;
	bool axis_known = true;
	if (seq_in_type(op, 2)) axis_known = seq_const_i64(op, 2, &axis_v);
	else axis_v = dft_default_axis(op);
	int axis = -1;
	if (axis_known && !dft_axis_ok(axis_v, x->rank, &axis))
		return tbc_infer_error(cx, op, "axis %lld is out of range for rank %d", (long long)axis_v, x->rank);
	int64_t n = -1;
	if (seq_in_type(op, 1) && !seq_const_i64(op, 1, &n)) n = -2; /* unknown */
	if (n == 0 || n < -2) return tbc_infer_error(cx, op, "dft_length must be positive");
	y->rank = x->rank;
	for (int i = 0; i < x->rank - 1; i++) y->dims[i] = x->dims[i];
	y->dims[x->rank - 1] = seq_dim(inverse && onesided ? 1 : 2);
	if (!axis_known) {
		/* Without a known axis only a length-preserving transform keeps dims. */
		if (n != -1 || onesided)
			for (int i = 0; i < x->rank - 1; i++) y->dims[i] = tbc_module_fresh_dim(cx->module);
		return true;
	}
	tbc_dim in_len = x->dims[axis], len;
	if (n > 0) len = seq_dim(n);
	else if (n == -2) len = tbc_module_fresh_dim(cx->module);
	else if (inverse && onesided)
		len = seq_dim_known(in_len) ? seq_dim(2 * (in_len.size - 1)) : tbc_module_fresh_dim(cx->module);
	else len = in_len;
	if (onesided && !inverse) len = seq_dim_known(len) ? seq_dim(len.size / 2 + 1) : tbc_module_fresh_dim(cx->module);
	y->dims[axis] = len;
	return true;
}

/* Transforms one line: in[k] (complex, length in_len, stride in_st pairs)
 * into out (complex, out_len). */
static void dft_line(const dft_cfg *c, const double *re, const double *im, int64_t in_len, double *ore, double *oim) {
	int64_t n = c->n;
	double sign = c->inverse ? 1.0 : -1.0;
	for (int64_t k = 0; k < c->out_len; k++) {
		double sr = 0, si = 0;
		for (int64_t j = 0; j < n; j++) {
			double xr, xi;
			if (c->inverse && c->onesided) {
				/* Hermitian extension of the one-sided spectrum. */
				int64_t src = j <= n / 2 ? j : n - j;
				xr = src < in_len ? re[src] : 0;
				xi = src < in_len ? im[src] : 0;
				if (j > n / 2) xi = -xi;
			} else {
				xr = j < in_len ? re[j] : 0;
				xi = j < in_len ? im[j] : 0;
			}
			double ang = sign * 2.0 * M_PI * (double)((k * j) % n) / (double)n;
			double cr = cos(ang), ci = sin(ang);
			sr += xr * cr - xi * ci;
			si += xr * ci + xi * cr;
		}
		if (c->inverse) sr /= (double)n, si /= (double)n;
		ore[k] = sr;
		oim[k] = si;
	}
}

/* Applies the transform along cfg->axis of x ([..., 1|2]) into a new y. */
static tbc_tensor *dft_apply(tbc_interp *ip, const tbc_op *op, const tbc_tensor *x, const dft_cfg *c) {
	int rank = x->rank, axis = c->axis;
	int64_t comp_in = x->dims[rank - 1], comp_out = c->inverse && c->onesided ? 1 : 2;
	int64_t ydims[TBC_MAX_RANK];
	for (int i = 0; i < rank; i++) ydims[i] = x->dims[i];
	ydims[axis] = c->out_len;
	ydims[rank - 1] = comp_out;
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, rank, ydims);
	if (!y) return NULL;
	int64_t in_len = x->dims[axis];
	int64_t xs[TBC_MAX_RANK], ys[TBC_MAX_RANK];
	tbc_strides(rank, x->dims, xs);
	tbc_strides(rank, ydims, ys);
	double *re = malloc((size_t)(in_len + 1) * sizeof *re), *im = malloc((size_t)(in_len + 1) * sizeof *im);
	double *ore = malloc((size_t)(c->out_len + 1) * sizeof *ore), *oim = malloc((size_t)(c->out_len + 1) * sizeof *oim);
	if (!re || !im || !ore || !oim) {
		free(re), free(im), free(ore), free(oim);
		tbc_tensor_destroy(y);
		tbc_interp_error(ip, op, "out of memory");
		return NULL;
	}
	/* Walk every line: all dims but axis and the complex one. */
	int64_t outer[TBC_MAX_RANK], idx[TBC_MAX_RANK];
	for (int i = 0; i < rank; i++) outer[i] = i == axis || i == rank - 1 ? 1 : x->dims[i];
	bool empty = false;
	for (int i = 0; i < rank; i++) empty |= outer[i] == 0;
	memset(idx, 0, sizeof idx);
	if (!empty && y->numel > 0) do {
		int64_t xo = 0, yo = 0;
		for (int i = 0; i < rank; i++) xo += idx[i] * xs[i], yo += idx[i] * ys[i];
		for (int64_t j = 0; j < in_len; j++) {
			re[j] = tbc_get_f64(x, xo + j * xs[axis]);
			im[j] = comp_in == 2 ? tbc_get_f64(x, xo + j * xs[axis] + 1) : 0;
		}
		dft_line(c, re, im, in_len, ore, oim);
		for (int64_t k = 0; k < c->out_len; k++) {
			tbc_set_f64(y, yo + k * ys[axis], ore[k]);
			if (comp_out == 2) tbc_set_f64(y, yo + k * ys[axis] + 1, oim[k]);
		}
	} while (tbc_index_next(rank, outer, idx));
	free(re), free(im), free(ore), free(oim);
	return y;
}

int tbc_interp_DFT(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *len = seq_in(op, in, 1), *ax = seq_in(op, in, 2);
	dft_cfg c;
	c.inverse = tbc_attr_int(op, "inverse", 0) != 0;
	c.onesided = tbc_attr_int(op, "onesided", 0) != 0;
	if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
		return tbc_interp_error(ip, op, "input must be [..., 1] (real) or [..., 2] (complex)");
	int64_t axis_v = ax ? (ax->numel == 1 ? tbc_get_i64(ax, 0) : INT64_MIN) : dft_default_axis(op);
	if (!dft_axis_ok(axis_v, x->rank, &c.axis)) return tbc_interp_error(ip, op, "axis is out of range");
	int64_t in_len = x->dims[c.axis];
	if (len) {
		if (len->numel != 1) return tbc_interp_error(ip, op, "dft_length must be a scalar");
		c.n = tbc_get_i64(len, 0);
	} else {
		c.n = c.inverse && c.onesided ? 2 * (in_len - 1) : in_len;
	}
	if (c.n <= 0) return tbc_interp_error(ip, op, "dft_length must be positive, got %lld", (long long)c.n);
	c.out_len = c.onesided && !c.inverse ? c.n / 2 + 1 : c.n;
	tbc_tensor *y = dft_apply(ip, op, x, &c);
	if (!y) return -1;
	out[0] = y;
	return 0;
}

/* ---- STFT ------------------------------------------------------------------ */
bool tbc_shape_STFT(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = seq_in_type(op, 0), *win = seq_in_type(op, 2);
	tbc_type *y = seq_out_type(op, 0);
	tbc_module *m = cx->module;
	bool onesided = tbc_attr_int(op, "onesided", 1) != 0;
	if (!tbc_dtype_is_float(x->dtype)) return tbc_infer_error(cx, op, "signal must be a float tensor");
	if (x->rank >= 0 && x->rank != 3) return tbc_infer_error(cx, op, "signal must be [batch, length, 1|2]");
	int64_t step = -1, flen = -1;
	if (seq_const_i64(op, 1, &step) && step <= 0) return tbc_infer_error(cx, op, "frame_step must be positive");
	if (seq_in_type(op, 3)) {
		if (seq_const_i64(op, 3, &flen) && flen <= 0) return tbc_infer_error(cx, op, "frame_length must be positive");
	} else if (win && win->rank == 1 && seq_dim_known(win->dims[0])) {
		flen = win->dims[0].size;
	}
	y->dtype = x->dtype;
	y->rank = 4;
	y->dims[0] = x->rank == 3 ? x->dims[0] : tbc_module_fresh_dim(m);
	y->dims[1] = tbc_module_fresh_dim(m);
	y->dims[2] = flen > 0 ? seq_dim(onesided ? flen / 2 + 1 : flen) : tbc_module_fresh_dim(m);
	y->dims[3] = seq_dim(2);
	if (x->rank == 3 && seq_dim_known(x->dims[1]) && step > 0 && flen > 0) {
		if (flen > x->dims[1].size) return tbc_infer_error(cx, op, "frame_length is longer than the signal");
		y->dims[1] = seq_dim(1 + (x->dims[1].size - flen) / step);
	}
	return true;
}

int tbc_interp_STFT(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *stp = in[1], *win = seq_in(op, in, 2), *fl = seq_in(op, in, 3);
	bool onesided = tbc_attr_int(op, "onesided", 1) != 0;
	if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
		return tbc_interp_error(ip, op, "signal must be [batch, length, 1|2]");
	if (stp->numel != 1) return tbc_interp_error(ip, op, "frame_step must be a scalar");
	int64_t step = tbc_get_i64(stp, 0), B = x->dims[0], L = x->dims[1], comp = x->dims[2];
	int64_t flen = fl ? (fl->numel == 1 ? tbc_get_i64(fl, 0) : -1) : win ? win->numel : L;
	if (win && (win->rank != 1 || win->numel != flen))
		return tbc_interp_error(ip, op, "window must be 1-D of frame_length elements");
	if (step <= 0 || flen <= 0 || flen > L) return tbc_interp_error(ip, op, "bad frame_step or frame_length");
	if (onesided && comp == 2) return tbc_interp_error(ip, op, "onesided needs a real signal");
	int64_t frames = 1 + (L - flen) / step, bins = onesided ? flen / 2 + 1 : flen;
	int64_t ydims[4] = {B, frames, bins, 2};
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, 4, ydims);
	if (!y) return -1;
	double *re = malloc((size_t)flen * sizeof *re), *im = malloc((size_t)flen * sizeof *im);
	double *ore = malloc((size_t)bins * sizeof *ore), *oim = malloc((size_t)bins * sizeof *oim);
	if (!re || !im || !ore || !oim) {
		free(re), free(im), free(ore), free(oim);
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	dft_cfg c = {0, flen, bins, false, onesided};
	for (int64_t b = 0; b < B; b++)
		for (int64_t f = 0; f < frames; f++) {
			for (int64_t j = 0; j < flen; j++) {
				double w = win ? tbc_get_f64(win, j) : 1.0;
				int64_t xi = (b * L + f * step + j) * comp;
				re[j] = tbc_get_f64(x, xi) * w;
				im[j] = comp == 2 ? tbc_get_f64(x, xi + 1) * w : 0;
			}
			dft_line(&c, re, im, flen, ore, oim);
			for (int64_t k = 0; k < bins; k++) {
				tbc_set_f64(y, ((b * frames + f) * bins + k) * 2, ore[k]);
				tbc_set_f64(y, ((b * frames + f) * bins + k) * 2 + 1, oim[k]);
			}
		}
	free(re), free(im), free(ore), free(oim);
	out[0] = y;
	return 0;
}

/* ---- Windows --------------------------------------------------------------- */
static bool window_shape(tbc_infer *cx, tbc_op *op) {
	const tbc_type *s = seq_in_type(op, 0);
	int64_t dt = tbc_attr_int(op, "output_datatype", TBC_DT_F32);
	if (!tbc_dtype_valid((int)dt) || !tbc_dtype_supported((tbc_dtype)dt) || dt == TBC_DT_BOOL)
		return tbc_infer_error(cx, op, "output_datatype %lld is not a numeric type", (long long)dt);
	if (s->dtype != TBC_DT_I32 && s->dtype != TBC_DT_I64) return tbc_infer_error(cx, op, "size must be int32 or int64");
	if (s->rank > 0 && !(s->rank == 1 && seq_dim_known(s->dims[0]) && s->dims[0].size == 1))
		return tbc_infer_error(cx, op, "size must be a scalar");
	int64_t n;
	tbc_type *y = seq_out_type(op, 0);
	y->dtype = (tbc_dtype)dt;
	y->rank = 1;
	if (seq_const_i64(op, 0, &n)) {
		if (n < 0) return tbc_infer_error(cx, op, "size must not be negative");
		y->dims[0] = seq_dim(n);
	} else {
		y->dims[0] = tbc_module_fresh_dim(cx->module);
	}
	return true;
}

/* a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size-1. */
static int window_run(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out, double a0,
		      double a1, double a2) {
	if (in[0]->numel != 1) return tbc_interp_error(ip, op, "size must be a scalar");
	int64_t n = tbc_get_i64(in[0], 0);
	if (n < 0) return tbc_interp_error(ip, op, "size must not be negative, got %lld", (long long)n);
	tbc_dtype dt = (tbc_dtype)tbc_attr_int(op, "output_datatype", TBC_DT_F32);
	bool periodic = tbc_attr_int(op, "periodic", 1) != 0;
	tbc_tensor *y = tbc_interp_new(ip, op, dt, 1, &n);
	if (!y) return -1;
	double N = periodic ? (double)n : (double)n - 1;
	for (int64_t i = 0; i < n; i++) {
		double v = N == 0 ? a0 - a1 + a2 : a0 - a1 * cos(2 * M_PI * (double)i / N) + a2 * cos(4 * M_PI * (double)i / N);
		tbc_set_f64(y, i, v);
	}
	out[0] = y;
	return 0;
}

bool tbc_shape_BlackmanWindow(tbc_infer *cx, tbc_op *op) { return window_shape(cx, op); }
bool tbc_shape_HammingWindow(tbc_infer *cx, tbc_op *op) { return window_shape(cx, op); }
bool tbc_shape_HannWindow(tbc_infer *cx, tbc_op *op) { return window_shape(cx, op); }
int tbc_interp_BlackmanWindow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return window_run(ip, op, in, out, 0.42, 0.5, 0.08);
}
int tbc_interp_HammingWindow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return window_run(ip, op, in, out, 25.0 / 46.0, 21.0 / 46.0, 0);
}
int tbc_interp_HannWindow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return window_run(ip, op, in, out, 0.5, 0.5, 0);
}

/* ---- MelWeightMatrix ------------------------------------------------------- */
bool tbc_shape_MelWeightMatrix(tbc_infer *cx, tbc_op *op) {
	int64_t dt = tbc_attr_int(op, "output_datatype", TBC_DT_F32), bins, len;
	if (!tbc_dtype_valid((int)dt) || !tbc_dtype_supported((tbc_dtype)dt))
		return tbc_infer_error(cx, op, "output_datatype %lld is not a numeric type", (long long)dt);
	for (int i = 0; i < 3; i++)
		if (!tbc_dtype_is_int(seq_in_type(op, i)->dtype)) return tbc_infer_error(cx, op, "input %d must be an integer", i);
	for (int i = 3; i < 5; i++)
		if (!tbc_dtype_is_float(seq_in_type(op, i)->dtype)) return tbc_infer_error(cx, op, "input %d must be a float", i);
	tbc_type *y = seq_out_type(op, 0);
	y->dtype = (tbc_dtype)dt;
	y->rank = 2;
	y->dims[0] = seq_const_i64(op, 1, &len) ? seq_dim(len / 2 + 1) : tbc_module_fresh_dim(cx->module);
	y->dims[1] = seq_const_i64(op, 0, &bins) ? seq_dim(bins) : tbc_module_fresh_dim(cx->module);
	if ((y->dims[0].size < 0 && !y->dims[0].sym) || (y->dims[1].size < 0 && !y->dims[1].sym))
		return tbc_infer_error(cx, op, "num_mel_bins and dft_length must not be negative");
	return true;
}

int tbc_interp_MelWeightMatrix(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	for (int i = 0; i < 5; i++)
		if (in[i]->numel != 1) return tbc_interp_error(ip, op, "input %d must be a scalar", i);
	int64_t bins = tbc_get_i64(in[0], 0), len = tbc_get_i64(in[1], 0), rate = tbc_get_i64(in[2], 0);
	double lo = tbc_get_f64(in[3], 0), hi = tbc_get_f64(in[4], 0);
	if (bins <= 0 || len <= 0 || rate <= 0 || lo < 0 || hi < lo || hi > rate / 2.0 + 1e-9)
		return tbc_interp_error(ip, op, "need num_mel_bins, dft_length, sample_rate > 0 and "
						"0 <= lower_edge_hertz <= upper_edge_hertz <= sample_rate/2");
	tbc_dtype dt = (tbc_dtype)tbc_attr_int(op, "output_datatype", TBC_DT_F32);
	int64_t spec = len / 2 + 1, dims[2] = {spec, bins};
	tbc_tensor *y = tbc_interp_new(ip, op, dt, 2, dims);
	if (!y) return -1;
	int64_t *fb = malloc((size_t)(bins + 2) * sizeof *fb);
	if (!fb) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	/* Mel scale points, evenly spaced, mapped back to DFT bins (as the
	 * reference does, with the float32 edges it was given). */
	double lo_mel = (double)(2595.0f * log1pf((float)lo / 700.0f)) / log(10.0);
	double hi_mel = (double)(2595.0f * log1pf((float)hi / 700.0f)) / log(10.0);
	double step = (hi_mel - lo_mel) / (double)(bins + 2);
	for (int64_t i = 0; i < bins + 2; i++) {
		double hz = 700.0 * expm1(((double)i * step + lo_mel) / 2595.0 * log(10.0));
		fb[i] = (int64_t)floor((double)(len + 1) * hz / (double)rate);
	}
	int rc = 0;
	for (int64_t i = 0; i < bins && rc == 0; i++) {
		int64_t l = fb[i], c = fb[i + 1], r = fb[i + 2];
		if (l < 0 || r >= spec + 1 || c >= spec || l > c || c > r) {
			rc = tbc_interp_error(ip, op, "mel bin %lld falls outside the spectrum", (long long)i);
			break;
		}
		if (c == l) tbc_set_f64(y, c * bins + i, 1);
		else
			for (int64_t j = l; j <= c; j++) tbc_set_f64(y, j * bins + i, (double)(j - l) / (double)(c - l));
		for (int64_t j = c; j < r && r > c; j++) tbc_set_f64(y, j * bins + i, (double)(r - j) / (double)(r - c));
	}
	free(fb);
	if (rc) {
		tbc_tensor_destroy(y);
		return rc;
	}
	out[0] = y;
	return 0;
}
