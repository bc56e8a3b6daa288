/* DeformConv: a convolution whose every kernel tap samples X at its usual
 * place plus a learned offset (per output position, tap and offset group),
 * by multilinear interpolation with zeros outside, scaled by an optional
 * mask.  N-D: the offsets of a tap are nsp values, dim order. */
#include <stdio.h>

#include "conv_util.h"

bool tbc_shape_DeformConv(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type, *w = &op->inputs[1]->type;
	if (!conv_is_float_dtype(x->dtype)) return tbc_infer_error(cx, op, "DeformConv takes float tensors");
	for (int i = 1; i < op->n_inputs; i++)
		if (op->inputs[i] && op->inputs[i]->type.dtype != x->dtype)
			return tbc_infer_error(cx, op, "input %d differs in type from X", i);
	int64_t group = tbc_attr_int(op, "group", 1), og = tbc_attr_int(op, "offset_group", 1);
	if (group <= 0 || og <= 0) return tbc_infer_error(cx, op, "group and offset_group must be positive");
	tbc_type y;
	memset(&y, 0, sizeof y);
	y.dtype = x->dtype;
	if (x->rank < 0) {
		y.rank = -1;
		op->outputs[0]->type = y;
		return true;
	}
	if (x->rank < 3) return tbc_infer_error(cx, op, "X must have rank >= 3");
	if (w->rank >= 0 && w->rank != x->rank) return tbc_infer_error(cx, op, "W must have the rank of X");
	int nsp = x->rank - 2;
	y.rank = x->rank;
	y.dims[0] = x->dims[0];
	y.dims[1] = w->rank >= 0 ? w->dims[0] : tbc_module_fresh_dim(cx->module);
	int64_t kernel[CONV_MAX_SPATIAL];
	bool known = w->rank >= 0;
	for (int i = 0; i < nsp; i++) {
		kernel[i] = known && !w->dims[2 + i].sym ? w->dims[2 + i].size : -1;
		if (kernel[i] < 0) known = false;
	}
	conv_geom g;
	const char *err = conv_geom_read(&g, op, nsp, known ? kernel : NULL, true, false);
	if (err && !known && !tbc_op_attr(op, "kernel_shape")) {
		for (int i = 0; i < nsp; i++) y.dims[2 + i] = tbc_module_fresh_dim(cx->module);
		op->outputs[0]->type = y;
		return true;
	}
	if (err) return tbc_infer_error(cx, op, "%s", err);
	for (int i = 0; i < nsp; i++) g.in[i] = x->dims[2 + i].sym ? -1 : x->dims[2 + i].size;
	if ((err = conv_geom_resolve(&g))) return tbc_infer_error(cx, op, "%s", err);
	conv_geom_type_dims(cx, &g, x, &y);
	op->outputs[0]->type = y;
	return true;
}

/* X (one channel plane, dims in[]) at a fractional position; 0 outside. */
static double sample(const double *plane, const int64_t *dims, int nsp, const double *pos) {
	int64_t lo[CONV_MAX_SPATIAL];
	double fr[CONV_MAX_SPATIAL];
	for (int d = 0; d < nsp; d++) {
		if (!(pos[d] > -2.0 && pos[d] < (double)dims[d] + 1.0)) return 0.0; /* also NaN */
		double f = floor(pos[d]);
		lo[d] = (int64_t)f;
		fr[d] = pos[d] - f;
	}
	double acc = 0.0;
	for (unsigned corner = 0; corner < (1u << nsp); corner++) {
		double wt = 1.0;
		int64_t il = 0;
		bool inside = true;
		for (int d = 0; d < nsp && inside; d++) {
			unsigned bit = (corner >> (nsp - 1 - d)) & 1u;
			int64_t i = lo[d] + bit;
			wt *= bit ? fr[d] : 1.0 - fr[d];
			inside = i >= 0 && i < dims[d];
			il = il * dims[d] + i;
		}
		if (inside && wt != 0.0) acc += wt * plane[il];
	}
	return acc;
}

int tbc_interp_DeformConv(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_tensor *x = in[0], *w = in[1], *off = in[2];
	const tbc_tensor *b = op->n_inputs > 3 ? in[3] : NULL, *mask = op->n_inputs > 4 ? in[4] : NULL;
	if (x->rank < 3 || w->rank != x->rank || off->rank != x->rank)
		return tbc_interp_error(ip, op, "X, W and offset must have the same rank >= 3");
	if (x->rank - 2 > 6) return tbc_interp_error(ip, op, "DeformConv supports at most 6 spatial dims");
	int nsp = x->rank - 2;
	int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
	int64_t group = tbc_attr_int(op, "group", 1), OG = tbc_attr_int(op, "offset_group", 1);
	if (group <= 0 || OG <= 0 || C != w->dims[1] * group || M % group || C % OG)
		return tbc_interp_error(ip, op, "channels, group (%lld) and offset_group (%lld) do not agree", (long long)group,
					(long long)OG);
	conv_geom g;
	const char *err = conv_geom_read(&g, op, nsp, w->dims + 2, true, false);
	for (int i = 0; !err && i < nsp; i++) g.in[i] = x->dims[2 + i];
	if (!err) err = conv_geom_resolve(&g);
	if (err) return tbc_interp_error(ip, op, "%s", err);
	int64_t ksz = conv_prod(0, nsp, g.kernel), osz = conv_prod(0, nsp, g.out), isz = conv_prod(0, nsp, g.in);
	bool ok = off->dims[0] == N && off->dims[1] == OG * ksz * nsp;
	for (int i = 0; i < nsp; i++) ok = ok && off->dims[2 + i] == g.out[i];
	if (!ok) return tbc_interp_error(ip, op, "offset must be (N, offset_group * kernel size * %d, output dims...)", nsp);
	if (mask) {
		ok = mask->rank == x->rank && mask->dims[0] == N && mask->dims[1] == OG * ksz;
		for (int i = 0; ok && i < nsp; i++) ok = mask->dims[2 + i] == g.out[i];
		if (!ok) return tbc_interp_error(ip, op, "mask must be (N, offset_group * kernel size, output dims...)");
	}
	if (b && (b->rank != 1 || b->dims[0] != M)) return tbc_interp_error(ip, op, "B must hold %lld values", (long long)M);
	int64_t ydims[TBC_MAX_RANK] = {N, M};
	for (int i = 0; i < nsp; i++) ydims[2 + i] = g.out[i];
	tbc_tensor *y = tbc_interp_new(ip, op, x->dtype, x->rank, ydims);
	if (!y) return -1;
	int64_t Cg = C / group, Mg = M / group, Cog = C / OG;
	double *xd = conv_load_all(x), *wd = conv_load_all(w), *od = conv_load_all(off);
	double *md = mask ? conv_load_all(mask) : NULL;
	double *cols = malloc((size_t)(ksz * osz > 0 ? ksz * osz : 1) * sizeof *cols);
	double *yd = calloc((size_t)(y->numel ? y->numel : 1), sizeof *yd);
	if (!xd || !wd || !od || (mask && !md) || !cols || !yd) {
		free(xd), free(wd), free(od), free(md), free(cols), free(yd);
		tbc_tensor_destroy(y);
		return tbc_interp_error(ip, op, "out of memory");
	}
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++) {
			int64_t og = c / Cog, grp = c / Cg;
			const double *plane = xd + (n * C + c) * isz;
			int64_t k[CONV_MAX_SPATIAL] = {0};
			for (int64_t kl = 0; kl < ksz; kl++, tbc_index_next(nsp, g.kernel, k)) {
				int64_t o[CONV_MAX_SPATIAL] = {0};
				for (int64_t ol = 0; ol < osz; ol++, tbc_index_next(nsp, g.out, o)) {
					double pos[CONV_MAX_SPATIAL];
					for (int d = 0; d < nsp; d++)
						pos[d] = (double)(o[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dil[d]) +
							 od[(((n * OG + og) * ksz + kl) * nsp + d) * osz + ol];
					double m = md ? md[((n * OG + og) * ksz + kl) * osz + ol] : 1.0;
					cols[kl * osz + ol] = m * sample(plane, g.in, nsp, pos);
				}
			}
			for (int64_t m = grp * Mg; m < (grp + 1) * Mg; m++) {
				double *ym = yd + (n * M + m) * osz;
				const double *wm = wd + (m * Cg + c % Cg) * ksz;
				for (int64_t kl = 0; kl < ksz; kl++)
					for (int64_t ol = 0; ol < osz; ol++) ym[ol] += wm[kl] * cols[kl * osz + ol];
			}
		}
	for (int64_t e = 0; e < y->numel; e++) tbc_set_f64(y, e, yd[e] + (b ? tbc_get_f64(b, (e / osz) % M) : 0.0));
	free(xd), free(wd), free(od), free(md), free(cols), free(yd);
	out[0] = y;
	return 0;
}
