/* ConvTranspose and Col2Im: the scatter side of convolution.  Every input
 * element (ConvTranspose: times every kernel weight) is added into the output
 * position o = i * stride + k * dilation - pad_begin, when that lies inside.
 * Computed in double, rounded once on store. */
#include <stdio.h>

#include "conv_util.h"

/* ---- ConvTranspose geometry ----------------------------------------------*/

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

/* Reads the attributes; kernel[i] < 0 where the weight's dim is unknown.
 * in[i] < 0 gives out[i] < 0 unless output_shape fixes it. */
const char *tconv_geom_make(tconv_geom *g, const tbc_op *op, int nsp, const int64_t *wk, const int64_t *in) {
	memset(g, 0, sizeof *g);
	g->nsp = nsp;
	conv_autopad ap;
	if (!conv_read_autopad(op, &ap)) return "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID";
	const int64_t *v, *ks, *os, *opad, *pads;
	int n = tbc_attr_ints(op, "kernel_shape", &ks);
	if (n >= 0 && n != nsp) return "kernel_shape must have one value per spatial dim";
	for (int i = 0; i < nsp; i++) {
		g->kernel[i] = n >= 0 ? ks[i] : wk[i];
		if (n >= 0 && wk[i] >= 0 && wk[i] != ks[i]) return "kernel_shape does not match the weight's spatial dims";
		if (n >= 0 && ks[i] <= 0) return "kernel_shape values must be positive";
	}
	n = tbc_attr_ints(op, "strides", &v);
	if (n > 0 && n != nsp) return "strides must have one value per spatial dim";
	for (int i = 0; i < nsp; i++)
		if ((g->stride[i] = n > 0 ? v[i] : 1) <= 0) return "strides must be positive";
	n = tbc_attr_ints(op, "dilations", &v);
	if (n > 0 && n != nsp) return "dilations must have one value per spatial dim";
	for (int i = 0; i < nsp; i++)
		if ((g->dil[i] = n > 0 ? v[i] : 1) <= 0) return "dilations must be positive";
	int n_op = tbc_attr_ints(op, "output_padding", &opad);
	if (n_op > 0 && n_op != nsp && n_op != 2 * nsp) return "output_padding must have one value per spatial dim";
	int n_pads = tbc_attr_ints(op, "pads", &pads);
	if (n_pads > 0 && n_pads != 2 * nsp) return "pads must have two values per spatial dim";
	int n_os = tbc_attr_ints(op, "output_shape", &os);
	if (n_os > 0 && n_os != nsp && n_os != nsp + 2) return "output_shape must have one value per spatial dim";
	for (int i = 0; i < nsp; i++) {
		g->out_pad[i] = n_op > 0 ? opad[i] : 0;
		g->pad_begin[i] = n_pads > 0 && ap == AUTOPAD_NOTSET ? pads[i] : 0;
		g->pad_end[i] = n_pads > 0 && ap == AUTOPAD_NOTSET ? pads[nsp + i] : 0;
		if (g->out_pad[i] < 0 || g->pad_begin[i] < 0 || g->pad_end[i] < 0)
			return "pads and output_padding must not be negative";
		if (g->stride[i] > ((int64_t)1 << 30) || g->dil[i] > ((int64_t)1 << 20) || g->kernel[i] > ((int64_t)1 << 30) ||
		    g->pad_begin[i] > ((int64_t)1 << 40) || g->pad_end[i] > ((int64_t)1 << 40))
			return "window attributes are out of range";
		g->in[i] = in[i];
		int64_t eff = g->kernel[i] >= 0 ? (g->kernel[i] - 1) * g->dil[i] + 1 : -1;
		int64_t fixed = n_os > 0 ? os[n_os - nsp + i] : -1;
		bool same = ap == AUTOPAD_SAME_UPPER || ap == AUTOPAD_SAME_LOWER;
		g->keeps[i] = fixed < 0 && g->stride[i] == 1 &&
			      (same || (eff >= 0 && g->out_pad[i] + eff - 1 - g->pad_begin[i] - g->pad_end[i] == 0));
		if (fixed < 0 && (in[i] < 0 || eff < 0)) {
			g->out[i] = -1;
			continue;
		}
		int64_t full = in[i] >= 0 && eff >= 0 ? g->stride[i] * (in[i] - 1) + g->out_pad[i] + eff : -1;
		if (fixed >= 0) {
			/* output_shape given: the pads follow from it (the spec's
			 * total_padding, more at the start unless SAME_UPPER). */
			g->out[i] = fixed;
			if (full >= 0) {
				int64_t total = full - fixed, half = floor_div2(total);
				g->pad_begin[i] = ap == AUTOPAD_SAME_UPPER ? half : total - half;
				g->pad_end[i] = ap == AUTOPAD_SAME_UPPER ? total - half : half;
			}
		} else if (same) {
			/* out = in * stride, unless that needs negative padding (a
			 * kernel smaller than the stride): then no padding at all. */
			int64_t total = full - in[i] * g->stride[i];
			if (total < 0) total = 0;
			g->out[i] = full - total;
			g->pad_begin[i] = ap == AUTOPAD_SAME_UPPER ? total / 2 : total - total / 2;
			g->pad_end[i] = total - g->pad_begin[i];
		} else {
			g->out[i] = full - g->pad_begin[i] - g->pad_end[i];
		}
		if (g->out[i] <= 0) return "the output of ConvTranspose would be empty (pads too large)";
	}
	return NULL;
}

bool tbc_shape_ConvTranspose(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *w = &op->inputs[1]->type;
	if (!conv_is_float_dtype(x->dtype)) return tbc_infer_error(cx, op, "ConvTranspose takes float tensors");
	if (w->dtype != x->dtype) return tbc_infer_error(cx, op, "X and W differ in type");
	int64_t group = tbc_attr_int(op, "group", 1);
	if (group <= 0) return tbc_infer_error(cx, op, "group must be positive");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	if (x->rank < 0) {
		y.rank = -1;
		op->outputs[0]->type = y;
		return true;
	}
	if (x->rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3, got %d", x->rank);
	if (w->rank >= 0 && w->rank != x->rank) return tbc_infer_error(cx, op, "W has rank %d but X has rank %d", w->rank, x->rank);
	int nsp = x->rank - 2;
	if (w->rank >= 0 && !x->dims[1].sym && !w->dims[0].sym && x->dims[1].size != w->dims[0].size)
		return tbc_infer_error(cx, op, "X has %lld channels but W has %lld", (long long)x->dims[1].size,
				       (long long)w->dims[0].size);
	if (!x->dims[1].sym && x->dims[1].size % group)
		return tbc_infer_error(cx, op, "the %lld input channels do not divide into %lld groups",
				       (long long)x->dims[1].size, (long long)group);
	int64_t wk[CONV_MAX_SPATIAL], in[CONV_MAX_SPATIAL];
	for (int i = 0; i < nsp; i++) {
		wk[i] = w->rank >= 0 && !w->dims[2 + i].sym ? w->dims[2 + i].size : -1;
		in[i] = x->dims[2 + i].sym ? -1 : x->dims[2 + i].size;
	}
	tconv_geom g;
	const char *err = tconv_geom_make(&g, op, nsp, wk, in);
	if (err) return tbc_infer_error(cx, op, "%s", err);
	y.rank = x->rank;
	y.dims[0] = x->dims[0];
	if (w->rank >= 0 && !w->dims[1].sym) y.dims[1] = (tbc_dim){w->dims[1].size * group, NULL};
	else if (w->rank >= 0 && group == 1) y.dims[1] = w->dims[1];
	else y.dims[1] = tbc_module_fresh_dim(cx->module);
	for (int i = 0; i < nsp; i++) {
		if (g.out[i] >= 0) y.dims[2 + i] = (tbc_dim){g.out[i], NULL};
		else if (g.keeps[i]) y.dims[2 + i] = x->dims[2 + i];
		else y.dims[2 + i] = tbc_module_fresh_dim(cx->module);
	}
	op->outputs[0]->type = y;
	return true;
}

int tbc_interp_ConvTranspose(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *w = in[1], *b = op->n_inputs > 2 ? in[2] : NULL;
	if (x->rank < 3 || w->rank != x->rank) return tbc_interp_error(ip, op, "X and W must have the same rank >= 3");
	int nsp = x->rank - 2;
	int64_t N = x->dims[0], C = x->dims[1], group = tbc_attr_int(op, "group", 1);
	if (group <= 0 || w->dims[0] != C || C % group)
		return tbc_interp_error(ip, op, "X has %lld channels, W has %lld, group %lld: they do not agree", (long long)C,
					(long long)w->dims[0], (long long)group);
	int64_t Cg = C / group, Mg = w->dims[1], M = Mg * group;
	if (b && (b->rank != 1 || b->dims[0] != M))
		return tbc_interp_error(ip, op, "B must hold one value per output channel (%lld)", (long long)M);
	tconv_geom g;
	const char *err = tconv_geom_make(&g, op, nsp, w->dims + 2, x->dims + 2);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	for (int i = 0; i < nsp; i++)
		if (g.kernel[i] != w->dims[2 + i]) return tbc_interp_error(ip, op, "kernel_shape does not match W");
	int64_t ydims[TBC_MAX_RANK] = {N, M};
	for (int i = 0; i < nsp; i++) ydims[2 + i] = g.out[i];
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	if (!y) return -1;
	int64_t in_size = conv_prod(2, x->rank, x->dims), out_size = conv_prod(2, x->rank, ydims);
	int64_t ksz = conv_prod(2, w->rank, w->dims);
	double *xd = conv_load_all(x), *wd = conv_load_all(w), *yd = calloc((size_t)(y->numel ? y->numel : 1), sizeof *yd);
	if (!xd || !wd || !yd) {
		free(xd), free(wd), free(yd);
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++) {
			int64_t grp = c / Cg;
			int64_t i[CONV_MAX_SPATIAL] = {0};
			for (int64_t il = 0; il < in_size; il++, tbc_index_next(nsp, x->dims + 2, i)) {
				double xv = xd[(n * C + c) * in_size + il];
				int64_t k[CONV_MAX_SPATIAL] = {0};
				for (int64_t kl = 0; kl < ksz; kl++, tbc_index_next(nsp, g.kernel, k)) {
					int64_t ol = 0;
					bool inside = true;
					for (int d = 0; d < nsp && inside; d++) {
						int64_t o = i[d] * g.stride[d] + k[d] * g.dil[d] - g.pad_begin[d];
						inside = o >= 0 && o < g.out[d];
						ol = ol * g.out[d] + o;
					}
					if (!inside) continue;
					for (int64_t m = 0; m < Mg; m++)
						yd[(n * M + grp * Mg + m) * out_size + ol] += xv * wd[(c * Mg + m) * ksz + kl];
				}
			}
		}
	for (int64_t e = 0; e < y->numel; e++)
		tbc_set_f64(y, e, yd[e] + (b ? tbc_get_f64(b, (e / (out_size ? out_size : 1)) % M) : 0.0));
	free(xd), free(wd), free(yd);
	out[0] = y;
	return 0;
}

/* ---- Col2Im ----------------------------------------------------------------
 * input (N, C * prod(block_shape), L) holds the L sliding blocks of an image
 * (N, C, image_shape...); overlapping block elements are summed. */

/* Reads a small 1-D int64 input (image_shape / block_shape). */
static int read_shape_input(const tbc_tensor *t, int64_t *v, int max) {
	if (!t || t->rank != 1 || t->numel < 1 || t->numel > max) return -1;
	for (int64_t i = 0; i < t->numel; i++) v[i] = tbc_get_i64(t, i);
	return (int)t->numel;
}

/* Geometry from the attributes; g.in = image dims, g.out = blocks per dim. */
static const char *col2im_geom(conv_geom *g, const tbc_op *op, int nsp, const int64_t *image, const int64_t *block) {
	for (int i = 0; i < nsp; i++) {
		if (block[i] <= 0) return "block_shape values must be positive";
		if (image[i] <= 0) return "image_shape values must be positive";
	}
	const char *err = conv_geom_read(g, op, nsp, block, true, false);
	if (err) return err;
	for (int i = 0; i < nsp; i++) g->in[i] = image[i];
	return conv_geom_resolve(g);
}

bool tbc_shape_Col2Im(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *is = &op->inputs[1]->type;
	if (x->rank >= 0 && x->rank != 3) return tbc_infer_error(cx, op, "input must have rank 3 (N, C*prod(block), L)");
	if (is->rank >= 0 && is->rank != 1) return tbc_infer_error(cx, op, "image_shape must be 1-D");
	if (is->dtype != TBC_DT_I64 || op->inputs[2]->type.dtype != TBC_DT_I64)
		return tbc_infer_error(cx, op, "image_shape and block_shape must be int64");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	const tbc_tensor *image_t = tbc_input_const(op, 1), *block_t = tbc_input_const(op, 2);
	int64_t image[CONV_MAX_SPATIAL], block[CONV_MAX_SPATIAL];
	int ni = read_shape_input(image_t, image, CONV_MAX_SPATIAL), nb = read_shape_input(block_t, block, CONV_MAX_SPATIAL);
	int nsp = ni > 0 ? ni : is->rank == 1 && !is->dims[0].sym ? (int)is->dims[0].size : -1;
	if (nsp > CONV_MAX_SPATIAL) return tbc_infer_error(cx, op, "image_shape has too many dims");
	if (nsp < 0) {
		y.rank = -1;
		op->outputs[0]->type = y;
		return true;
	}
	if (nb > 0 && nb != nsp) return tbc_infer_error(cx, op, "image_shape and block_shape differ in length");
	y.rank = nsp + 2;
	y.dims[0] = x->rank == 3 ? x->dims[0] : tbc_module_fresh_dim(cx->module);
	y.dims[1] = tbc_module_fresh_dim(cx->module);
	if (nb > 0 && x->rank == 3 && !x->dims[1].sym) {
		int64_t bl = conv_prod(0, nsp, block);
		if (bl <= 0 || x->dims[1].size % bl)
			return tbc_infer_error(cx, op, "input dim 1 (%lld) is not a multiple of prod(block_shape) (%lld)",
					       (long long)x->dims[1].size, (long long)bl);
		y.dims[1] = (tbc_dim){x->dims[1].size / bl, NULL};
	}
	for (int i = 0; i < nsp; i++) y.dims[2 + i] = ni > 0 ? (tbc_dim){image[i], NULL} : tbc_module_fresh_dim(cx->module);
	if (ni > 0 && nb > 0) {
		conv_geom g;
		const char *err = col2im_geom(&g, op, nsp, image, block);
		if (err) return tbc_infer_error(cx, op, "%s", err);
		int64_t L = conv_prod(0, nsp, g.out);
		if (x->rank == 3 && !x->dims[2].sym && x->dims[2].size != L)
			return tbc_infer_error(cx, op, "input has %lld blocks but the geometry gives %lld",
					       (long long)x->dims[2].size, (long long)L);
	}
	op->outputs[0]->type = y;
	return true;
}

int tbc_interp_Col2Im(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0];
	int64_t image[CONV_MAX_SPATIAL], block[CONV_MAX_SPATIAL];
	int ni = read_shape_input(in[1], image, CONV_MAX_SPATIAL), nb = read_shape_input(in[2], block, CONV_MAX_SPATIAL);
	if (ni < 0 || nb != ni) return tbc_interp_error(ip, op, "image_shape and block_shape must be 1-D of the same length");
	if (x->rank != 3) return tbc_interp_error(ip, op, "input must have rank 3");
	int nsp = ni;
	conv_geom g;
	const char *err = col2im_geom(&g, op, nsp, image, block);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	int64_t bl = conv_prod(0, nsp, block), L = conv_prod(0, nsp, g.out);
	if (x->dims[1] % bl || x->dims[2] != L)
		return tbc_interp_error(ip, op, "input is (%lld, %lld, %lld) but the blocks need (N, C*%lld, %lld)",
					(long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2], (long long)bl,
					(long long)L);
	int64_t N = x->dims[0], C = x->dims[1] / bl;
	int64_t ydims[TBC_MAX_RANK] = {N, C};
	for (int i = 0; i < nsp; i++) ydims[2 + i] = image[i];
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, nsp + 2, ydims);
	if (!y) return -1;
	int64_t img_size = conv_prod(0, nsp, image);
	/* Integers sum exactly (wrapping, in uint64), everything else in double. */
	bool exact = tbc_dtype_is_int(x->dtype);
	double *yd = calloc((size_t)(y->numel ? y->numel : 1), sizeof *yd);
	uint64_t *yi = exact ? calloc((size_t)(y->numel ? y->numel : 1), sizeof *yi) : NULL;
	if (!yd || (exact && !yi)) {
		free(yd);
		free(yi);
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++) {
			int64_t k[CONV_MAX_SPATIAL] = {0};
			for (int64_t kl = 0; kl < bl; kl++, tbc_index_next(nsp, block, k)) {
				const int64_t row = (n * x->dims[1] + c * bl + kl) * L;
				int64_t o[CONV_MAX_SPATIAL] = {0};
				for (int64_t l = 0; l < L; l++, tbc_index_next(nsp, g.out, o)) {
					int64_t il = 0;
					bool inside = true;
					for (int d = 0; d < nsp && inside; d++) {
						int64_t i = o[d] * g.stride[d] + k[d] * g.dil[d] - g.pad_begin[d];
						inside = i >= 0 && i < image[d];
						il = il * image[d] + i;
					}
					if (!inside) continue;
					int64_t at = (n * C + c) * img_size + il;
					if (exact) yi[at] += tbc_load_u64(x->dtype, x->data, (size_t)(row + l));
					else yd[at] += tbc_get_f64(x, row + l);
				}
			}
		}
	for (int64_t e = 0; e < y->numel; e++) {
		if (exact) tbc_store_u64(y->dtype, y->data, (size_t)e, yi[e]);
		else tbc_set_f64(y, e, yd[e]);
	}
	free(yi);
	free(yd);
	out[0] = y;
	return 0;
}
