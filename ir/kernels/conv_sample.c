/* Sampling at fractional positions: GridSample (N-D), AffineGrid (the grid
 * an affine map gives) and RoiAlign (bilinear averages or maxima over
 * regions of interest).  Arithmetic follows onnx's reference implementation,
 * in double where it uses float64 and rounded to float32 where it does. */
#include <stdio.h>

#include "conv_util.h"

/* ---- GridSample ------------------------------------------------------------*/

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static const char *gs_read(const tbc_op *op, int *mode, int *pad, bool *align) {
	const char *m = conv_attr_str(op, "mode", "linear"), *p = conv_attr_str(op, "padding_mode", "zeros");
	if (!strcmp(m, "nearest")) *mode = GS_NEAREST;
	else if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) *mode = GS_LINEAR;
	else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic")) *mode = GS_CUBIC;
	else return "mode must be nearest, linear or cubic";
	if (!strcmp(p, "zeros")) *pad = GS_ZEROS;
	else if (!strcmp(p, "border")) *pad = GS_BORDER;
	else if (!strcmp(p, "reflection")) *pad = GS_REFLECTION;
	else return "padding_mode must be zeros, border or reflection";
	*align = tbc_attr_int(op, "align_corners", 0) != 0;
	return NULL;
}

bool tbc_shape_GridSample(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *g = &op->inputs[1]->type;
	int mode, pad;
	bool align;
	const char *err = gs_read(op, &mode, &pad, &align);
	if (err) return tbc_infer_error(cx, op, "%s", err);
	if (!tbc_dtype_is_float(g->dtype)) return tbc_infer_error(cx, op, "grid must be a float tensor");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	int rank = x->rank >= 0 ? x->rank : g->rank;
	if (rank >= 0 && rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3");
	if (x->rank >= 0 && g->rank >= 0 && g->rank != x->rank) return tbc_infer_error(cx, op, "grid must have the rank of X");
	if (g->rank >= 0 && rank >= 0 && !g->dims[g->rank - 1].sym && g->dims[g->rank - 1].size != rank - 2)
		return tbc_infer_error(cx, op, "the last dim of grid must be %d", rank - 2);
	y.rank = rank;
	for (int i = 0; i < rank; i++) {
		if (i == 0) y.dims[0] = x->rank >= 0 ? x->dims[0] : g->dims[0];
		else if (i == 1) y.dims[1] = x->rank >= 0 ? x->dims[1] : tbc_module_fresh_dim(cx->module);
		else y.dims[i] = g->rank >= 0 ? g->dims[i - 1] : tbc_module_fresh_dim(cx->module);
	}
	op->outputs[0]->type = y;
	return true;
}

static double gs_reflect(double x, double lo, double hi) {
	double rng = hi - lo;
	if (!(rng > 0)) return lo; /* a dim of one pixel with aligned corners */
	if (x < lo) {
		double dx = lo - x, n = trunc(dx / rng), r = dx - n * rng;
		return fmod(n, 2) == 0 ? lo + r : hi - r;
	}
	if (x > hi) {
		double dx = x - hi, n = trunc(dx / rng), r = dx - n * rng;
		return fmod(n, 2) == 0 ? hi - r : lo + r;
	}
	return x;
}

/* Index i of a dim of size d after padding; -1 for a zero. */
static int64_t gs_index(int64_t i, int64_t d, int pad, double lo, double hi) {
	if (pad == GS_ZEROS) return i >= 0 && i < d ? i : -1;
	if (pad == GS_BORDER) return i < 0 ? 0 : i >= d ? d - 1 : i;
	double r = trunc(gs_reflect((double)i, lo, hi));
	int64_t k = (int64_t)r;
	return k < 0 ? 0 : k >= d ? d - 1 : k;
}

static void cubic_coeffs(double x, double *c) {
	const double A = -0.75;
	x = fabs(x);
	c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
	c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
	c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
	c[3] = ((A * (2 - x) - 5 * A) * (2 - x) + 8 * A) * (2 - x) - 4 * A;
}

int tbc_interp_GridSample(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *grid = in[1];
	int mode, pad;
	bool align;
	const char *err = gs_read(op, &mode, &pad, &align);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	int r = x->rank - 2;
	if (r < 1 || grid->rank != x->rank || grid->dims[0] != x->dims[0] || grid->dims[grid->rank - 1] != r)
		return tbc_interp_error(ip, op, "grid must be (N, out dims..., %d) for X of rank %d", r, x->rank);
	if (r > 8) return tbc_interp_error(ip, op, "GridSample supports at most 8 spatial dims");
	int64_t ydims[TBC_MAX_RANK] = {x->dims[0], x->dims[1]};
	for (int i = 0; i < r; i++) ydims[2 + i] = grid->dims[1 + i];
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	if (!y) return -1;
	double *xd = conv_load_all(x);
	if (!xd) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	const int64_t *dims = x->dims + 2;
	int64_t isz = conv_prod(0, r, dims), osz = conv_prod(0, r, ydims + 2), N = x->dims[0], C = x->dims[1];
	double lo[CONV_MAX_SPATIAL], hi[CONV_MAX_SPATIAL];
	for (int d = 0; d < r; d++) {
		lo[d] = align ? 0.0 : -0.5;
		hi[d] = align ? (double)dims[d] - 1.0 : (double)dims[d] - 0.5;
	}
	int taps = mode == GS_CUBIC ? 4 : mode == GS_LINEAR ? 2 : 1;
	int64_t corners = 1;
	for (int d = 0; d < r; d++) corners *= taps;
	for (int64_t n = 0; n < N; n++)
		for (int64_t ol = 0; ol < osz; ol++) {
			/* Source position per spatial dim (the grid lists them last dim first). */
			int64_t idx[CONV_MAX_SPATIAL][4];
			double wt[CONV_MAX_SPATIAL][4];
			for (int d = 0; d < r; d++) {
				float g = (float)tbc_get_f64(grid, (n * osz + ol) * r + (r - 1 - d));
				float len = (float)dims[d];
				float v = align ? (g + 1.0f) / 2.0f * (len - 1.0f) : ((g + 1.0f) * len - 1.0f) / 2.0f;
				if (mode == GS_NEAREST) v = nearbyintf(v);
				if (v < lo[d] || v > hi[d]) {
					if (pad == GS_BORDER) v = v < 0 ? 0.0f : v > len - 1 ? len - 1 : v;
					else if (pad == GS_REFLECTION) v = (float)gs_reflect(v, lo[d], hi[d]);
				}
				double p = v;
				if (!(p > -1e15 && p < 1e15)) p = -1e15; /* NaN and huge: outside */
				if (mode == GS_NEAREST) {
					idx[d][0] = gs_index((int64_t)trunc(p), dims[d], pad, lo[d], hi[d]);
					wt[d][0] = 1.0;
					continue;
				}
				double f = floor(p);
				int64_t x0 = (int64_t)f;
				if (mode == GS_LINEAR) {
					wt[d][0] = 1.0 - fabs(p - f);
					wt[d][1] = fabs(p - f);
					for (int t = 0; t < 2; t++) idx[d][t] = gs_index(x0 + t, dims[d], pad, lo[d], hi[d]);
				} else {
					cubic_coeffs(p - f, wt[d]);
					for (int t = 0; t < 4; t++) idx[d][t] = gs_index(x0 - 1 + t, dims[d], pad, lo[d], hi[d]);
				}
			}
			for (int64_t c = 0; c < C; c++) {
				const double *plane = xd + (n * C + c) * isz;
				double acc = 0.0;
				for (int64_t k = 0; k < corners; k++) {
					double w = 1.0;
					int64_t il = 0, rem = k;
					bool zero = false;
					for (int d = r - 1; d >= 0; d--) {
						int t = (int)(rem % taps);
						rem /= taps;
						w *= wt[d][t];
						if (idx[d][t] < 0) zero = true;
					}
					if (zero) continue;
					rem = k;
					int64_t stride = 1;
					for (int d = r - 1; d >= 0; d--) {
						int t = (int)(rem % taps);
						rem /= taps;
						il += idx[d][t] * stride;
						stride *= dims[d];
					}
					acc += w * plane[il];
				}
				tbc_set_f64(y, (n * C + c) * osz + ol, acc);
			}
		}
#undef RP
	free(xd);
	out[0] = y;
	return 0;
}

/* ---- AffineGrid ------------------------------------------------------------*/

bool tbc_shape_AffineGrid(tbc_infer *cx, tbc_op *op) {
	const tbc_type *th = &op->inputs[0]->type, *sz = &op->inputs[1]->type;
	if (!tbc_dtype_is_float(th->dtype)) return tbc_infer_error(cx, op, "theta must be a float tensor");
	if (sz->dtype != TBC_DT_I64) return tbc_infer_error(cx, op, "size must be int64");
	if (th->rank >= 0 && th->rank != 3) return tbc_infer_error(cx, op, "theta must be (N, 2, 3) or (N, 3, 4)");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = th->dtype;
	const tbc_tensor *s = tbc_input_const(op, 1);
	int len = s ? (int)s->numel : sz->rank == 1 && !sz->dims[0].sym ? (int)sz->dims[0].size : -1;
	if (len < 0 && th->rank == 3 && !th->dims[1].sym) len = (int)th->dims[1].size + 2;
	if (len >= 0 && len != 4 && len != 5) return tbc_infer_error(cx, op, "size must be (N, C, H, W) or (N, C, D, H, W)");
	if (len < 0) {
		y.rank = -1;
		op->outputs[0]->type = y;
		return true;
	}
	int r = len - 2;
	if (th->rank == 3 && ((!th->dims[1].sym && th->dims[1].size != r) || (!th->dims[2].sym && th->dims[2].size != r + 1)))
		return tbc_infer_error(cx, op, "theta must be (N, %d, %d) for a %d-D size", r, r + 1, r);
	y.rank = r + 2;
	y.dims[0] = th->rank == 3 ? th->dims[0] : tbc_module_fresh_dim(cx->module);
	for (int i = 0; i < r; i++) {
		if (s && tbc_get_i64(s, 2 + i) <= 0) return tbc_infer_error(cx, op, "size values must be positive");
		y.dims[1 + i] = s ? (tbc_dim){tbc_get_i64(s, 2 + i), NULL} : tbc_module_fresh_dim(cx->module);
	}
	y.dims[r + 1] = (tbc_dim){r, NULL};
	op->outputs[0]->type = y;
	return true;
}

int tbc_interp_AffineGrid(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *th = in[0], *sz = in[1];
	bool align = tbc_attr_int(op, "align_corners", 0) != 0;
	if (sz->rank != 1 || (sz->numel != 4 && sz->numel != 5)) return tbc_interp_error(ip, op, "size must hold 4 or 5 values");
	int r = (int)sz->numel - 2;
	int64_t N = tbc_get_i64(sz, 0);
	if (th->rank != 3 || th->dims[0] != N || th->dims[1] != r || th->dims[2] != r + 1)
		return tbc_interp_error(ip, op, "theta must be (%lld, %d, %d)", (long long)N, r, r + 1);
	int64_t ydims[TBC_MAX_RANK] = {N}, sp[3];
	for (int i = 0; i < r; i++) {
		sp[i] = tbc_get_i64(sz, 2 + i);
		if (sp[i] <= 0) return tbc_interp_error(ip, op, "size values must be positive");
		ydims[1 + i] = sp[i];
	}
	ydims[r + 1] = r;
	tbc_tensor *y = tbc_interp_new(ip, op, th->dtype, r + 2, ydims);
	if (!y) return -1;
	int64_t pts = conv_prod(0, r, sp);
	for (int64_t n = 0; n < N; n++) {
		int64_t i[3] = {0};
		for (int64_t pl = 0; pl < pts; pl++, tbc_index_next(r, sp, i)) {
			/* Homogeneous base coordinates, x (last dim) first. */
			double base[4];
			for (int k = 0; k < r; k++) {
				int d = r - 1 - k;
				double len = (double)sp[d];
				double step = align ? 2.0 / (len - 1) : 2.0 / len;
				base[k] = len == 1 && align ? -1.0 : align ? -1.0 + (double)i[d] * step : -1.0 + step / 2 + (double)i[d] * step;
			}
			base[r] = 1.0;
			for (int k = 0; k < r; k++) {
				double acc = 0.0;
				for (int j = 0; j <= r; j++) acc += tbc_get_f64(th, (n * r + k) * (r + 1) + j) * base[j];
				tbc_set_f64(y, (n * pts + pl) * r + k, acc);
			}
		}
	}
	out[0] = y;
	return 0;
}

/* ---- RoiAlign ----------------------------------------------------------------*/

bool tbc_shape_RoiAlign(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *rois = &op->inputs[1]->type, *bi = &op->inputs[2]->type;
	if (!conv_is_float_dtype(x->dtype) || rois->dtype != x->dtype)
		return tbc_infer_error(cx, op, "X and rois must be float tensors of one type");
	if (bi->dtype != TBC_DT_I64) return tbc_infer_error(cx, op, "batch_indices must be int64");
	if (x->rank >= 0 && x->rank != 4) return tbc_infer_error(cx, op, "X must be (N, C, H, W)");
	if (rois->rank >= 0 && (rois->rank != 2 || (!rois->dims[1].sym && rois->dims[1].size != 4)))
		return tbc_infer_error(cx, op, "rois must be (num_rois, 4)");
	if (bi->rank >= 0 && bi->rank != 1) return tbc_infer_error(cx, op, "batch_indices must be 1-D");
	const char *mode = conv_attr_str(op, "mode", "avg"), *ctm = conv_attr_str(op, "coordinate_transformation_mode", "half_pixel");
	if (strcmp(mode, "avg") && strcmp(mode, "max")) return tbc_infer_error(cx, op, "mode must be avg or max");
	if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
		return tbc_infer_error(cx, op, "coordinate_transformation_mode must be half_pixel or output_half_pixel");
	int64_t oh = tbc_attr_int(op, "output_height", 1), ow = tbc_attr_int(op, "output_width", 1);
	if (oh <= 0 || ow <= 0) return tbc_infer_error(cx, op, "output_height and output_width must be positive");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	y.rank = 4;
	y.dims[0] = rois->rank == 2 ? rois->dims[0] : bi->rank == 1 ? bi->dims[0] : tbc_module_fresh_dim(cx->module);
	y.dims[1] = x->rank == 4 ? x->dims[1] : tbc_module_fresh_dim(cx->module);
	y.dims[2] = (tbc_dim){oh, NULL};
	y.dims[3] = (tbc_dim){ow, NULL};
	op->outputs[0]->type = y;
	return true;
}

int tbc_interp_RoiAlign(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *rois = in[1], *bi = in[2];
	if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0])
		return tbc_interp_error(ip, op, "expects X (N, C, H, W), rois (R, 4) and batch_indices (R)");
	bool max_mode = !strcmp(conv_attr_str(op, "mode", "avg"), "max");
	bool half_pixel = !strcmp(conv_attr_str(op, "coordinate_transformation_mode", "half_pixel"), "half_pixel");
	int64_t PH = tbc_attr_int(op, "output_height", 1), PW = tbc_attr_int(op, "output_width", 1);
	int64_t ratio = tbc_attr_int(op, "sampling_ratio", 0);
	double scale = tbc_attr_float(op, "spatial_scale", 1.0);
	int64_t R = rois->dims[0], N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	if (PH <= 0 || PW <= 0) return tbc_interp_error(ip, op, "output_height and output_width must be positive");
	if (R > 0 && (H <= 0 || W <= 0)) return tbc_interp_error(ip, op, "X has an empty spatial dim");
	int64_t ydims[4] = {R, C, PH, PW};
	for (int64_t r = 0; r < R; r++)
		if (tbc_get_i64(bi, r) < 0 || tbc_get_i64(bi, r) >= N)
			return tbc_interp_error(ip, op, "batch index %lld of roi %lld is out of range [0, %lld)",
						(long long)tbc_get_i64(bi, r), (long long)r, (long long)N);
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, 4, ydims);
	if (!y) return -1;
	double *xd = conv_load_all(x);
	if (!xd) {
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	/* The region geometry is computed in the rois' precision, as the
	 * reference does (it decides the sampling grid through ceil). */
	bool wide = rois->dtype == TBC_DT_F64;
#define RP(v) (wide ? (double)(v) : (double)(float)(v))
	double off = half_pixel ? 0.5 : 0.0, fscale = RP(scale);
	for (int64_t r = 0; r < R; r++) {
		double sw = RP(RP(tbc_get_f64(rois, r * 4 + 0) * fscale) - off);
		double sh = RP(RP(tbc_get_f64(rois, r * 4 + 1) * fscale) - off);
		double ew = RP(RP(tbc_get_f64(rois, r * 4 + 2) * fscale) - off);
		double eh = RP(RP(tbc_get_f64(rois, r * 4 + 3) * fscale) - off);
		double rw = RP(ew - sw), rh = RP(eh - sh);
		if (!half_pixel) {
			rw = fmax(rw, 1.0);
			rh = fmax(rh, 1.0);
		}
		double bh = RP(rh / (double)PH), bw = RP(rw / (double)PW);
		double gh_d = ratio > 0 ? (double)ratio : ceil(RP(rh / (double)PH)), gw_d = ratio > 0 ? (double)ratio : ceil(RP(rw / (double)PW));
		if (!(gh_d >= 0 && gh_d < 1e6 && gw_d >= 0 && gw_d < 1e6)) {
			free(xd);
			tbc_tensor_destroy(y);
			return tbc_interp_error(ip, op, "roi %lld is too large or not finite", (long long)r);
		}
		int64_t gh = (int64_t)gh_d, gw = (int64_t)gw_d, count = gh * gw > 1 ? gh * gw : 1;
		if (count > ((int64_t)1 << 24)) {
			free(xd);
			tbc_tensor_destroy(y);
			return tbc_interp_error(ip, op, "roi %lld needs %lld samples per bin (more than 2^24)", (long long)r,
						(long long)count);
		}
		int64_t b = tbc_get_i64(bi, r);
		for (int64_t c = 0; c < C; c++) {
			const double *plane = xd + (b * C + c) * H * W;
			for (int64_t ph = 0; ph < PH; ph++)
				for (int64_t pw = 0; pw < PW; pw++) {
					double acc = 0.0;
					bool have = false;
					for (int64_t iy = 0; iy < gh; iy++) {
						double yy = RP(RP(sh + RP((double)ph * bh)) + RP(RP(((double)iy + 0.5) * bh) / (double)gh));
						for (int64_t ix = 0; ix < gw; ix++) {
							double xx = RP(RP(sw + RP((double)pw * bw)) + RP(RP(((double)ix + 0.5) * bw) / (double)gw));
							double v1 = 0, v2 = 0, v3 = 0, v4 = 0;
							if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
								double yv = fmax(yy, 0.0), xv = fmax(xx, 0.0);
								int64_t yl = (int64_t)yv, xl = (int64_t)xv, yh, xh;
								if (yl >= H - 1) yh = yl = H - 1, yv = (double)yl;
								else yh = yl + 1;
								if (xl >= W - 1) xh = xl = W - 1, xv = (double)xl;
								else xh = xl + 1;
								double ly = RP(yv - (double)yl), lx = RP(xv - (double)xl), hy = RP(1 - ly), hx = RP(1 - lx);
								v1 = hy * hx * plane[yl * W + xl];
								v2 = hy * lx * plane[yl * W + xh];
								v3 = ly * hx * plane[yh * W + xl];
								v4 = ly * lx * plane[yh * W + xh];
							}
							if (!max_mode) {
								acc += v1 + v2 + v3 + v4;
							} else {
								double v = fmax(fmax(v1, v2), fmax(v3, v4));
								acc = have ? fmax(acc, v) : v;
								have = true;
							}
						}
					}
					if (!max_mode) acc /= (double)count;
					tbc_set_f64(y, ((r * C + c) * PH + ph) * PW + pw, acc);
				}
		}
	}
#undef RP
	free(xd);
	out[0] = y;
	return 0;
}
