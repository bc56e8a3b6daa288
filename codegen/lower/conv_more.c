/* ConvTranspose, MaxUnpool, GridSample, RoiAlign and DeformConv lowered
 * (dispatched from lower_family_conv, codegen/lower/conv.c).
 *
 * ConvTranspose is a GEMM followed by a gather (col2im), so that every
 * parallel loop writes disjoint elements:
 *   col[n, g][(m, k...)][i...] = sum_c W[g*Cg + c][m][k...] * X[n][g*Cg + c][i...]
 * (the GEMM generator with W read transposed), then for each output point
 *   Y[n][g*Mg + m][o...] = B[m] + sum over taps k with o = i*s + k*d - pb
 *   (i inside the input) of col[n, g][(m, k)][i]
 * where the taps come from per-dim ranges (no test per tap beyond the
 * stride's divisibility).  Geometry is the interpreter's own
 * (tconv_geom_make, ir/kernels/conv_util.h).
 *
 * MaxUnpool zero-fills Y, then scatters X sequentially (indices may repeat:
 * the last write wins, as in the interpreter); an index outside the
 * unpooled tensor fails the run.
 *
 * GridSample: parallel over (n, output point); the source positions, tap
 * indices and weights are computed once per point in the interpreter's
 * precision (the grid value and the unnormalized position in float32,
 * weights in double), then a sequential loop over channels sums the taps.
 *
 * RoiAlign: parallel over (roi, channel) planes; the region geometry is
 * computed in the rois' precision (rounded to float32 at every step for
 * float32 rois, as the interpreter does).
 *
 * DeformConv: a deformable im2col into the same scratch, then Conv's GEMM
 * (see its section).  docs/lower-conv-more.md has the details. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_conv.h"
#include "codegen/lower/lower_gemm.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/conv_util.h"




/* ---- ConvTranspose -----------------------------------------------------------*/

typedef struct tconv_cx {
	int64_t G, Cg, MK, in_size;
} tconv_cx;

static kir_expr *tconv_base(void *ctx, lk *l, int which, kir_expr *batch) {
	tconv_cx *c = ctx;
	switch (which) {
	case 0: return c->G == 1 ? NULL : MUL(l->k, MOD(l->k, batch, I(l->k, c->G)), I(l->k, c->Cg * c->MK));
	case 1: return MUL(l->k, batch, I(l->k, c->Cg * c->in_size));
	default: return MUL(l->k, batch, I(l->k, c->MK * c->in_size));
	}
}

static lower_result lower_conv_transpose(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[1], *yv = op->outputs[0];
	const tbc_value *bv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_type *xt = &xv->type, *wt = &wv->type, *yt = &yv->type;
	tbc_dtype ct;
	if (!conv_float_ct(xt->dtype, &ct) || wt->dtype != xt->dtype) return conv_refuse(cx, op, "on this dtype");
	if (xt->rank < 3 || wt->rank != xt->rank || yt->rank != xt->rank) return conv_refuse(cx, op, "of this rank");
	if (!conv_static_dims(xt, 1) || !conv_static_dims(wt, 0) || !conv_static_dims(yt, 1))
		return conv_refuse(cx, op, "with symbolic channel, spatial or weight dims");
	int nsp = xt->rank - 2;
	int64_t wk[CONV_MAX_SPATIAL], in[CONV_MAX_SPATIAL];
	for (int i = 0; i < nsp; i++) wk[i] = wt->dims[2 + i].size, in[i] = xt->dims[2 + i].size;
	tconv_geom g;
	const char *err = tconv_geom_make(&g, op, nsp, wk, in);
	if (err) return lower_error(cx, op, "%s", err), LOWER_FAILED;
	tconv_cx c = {0};
	c.G = tbc_attr_int(op, "group", 1);
	int64_t C = xt->dims[1].size, Mg = wt->dims[1].size;
	if (c.G <= 0 || C != wt->dims[0].size || C % c.G)
		return lower_error(cx, op, "ConvTranspose channels and group disagree"), LOWER_FAILED;
	int64_t M = Mg * c.G;
	c.Cg = C / c.G;
	int64_t KS = conv_prod(0, nsp, g.kernel);
	for (int i = 0; i < nsp; i++)
		if (g.kernel[i] != wk[i] || g.out[i] != yt->dims[2 + i].size)
			return lower_error(cx, op, "ConvTranspose geometry disagrees with its type"), LOWER_FAILED;
	if (yt->dims[1].size != M) return lower_error(cx, op, "ConvTranspose channels disagree with its type"), LOWER_FAILED;
	c.MK = Mg * KS;
	c.in_size = conv_prod(0, nsp, g.in);
	int64_t out_size = conv_prod(0, nsp, g.out);
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	int xb = lower_value_buf(cx, xv);
	if (xb < 0) return LOWER_FAILED;
	bool empty_in = conv_static_empty(xt); /* C == 0 or an input dim 0: Y is the bias */
	int cb = -1;
	if (!empty_in) {
		cb = lower_shared_temp(cx, "col2im", ct, xt->dims[0], c.G * c.MK * c.in_size);
		if (cb < 0) return LOWER_FAILED;
		lk l;
		if (!lk_begin(&l, cx, "convtranspose_gemm")) return LOWER_FAILED;
		gemm_spec s = {.ct = ct};
		s.a.buf = lk_value(&l, wv);
		s.b.buf = lk_buf(&l, xb);
		s.y.buf = lk_buf(&l, cb);
		if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
		s.M = I(l.k, c.MK), s.N = I(l.k, c.in_size), s.K = I(l.k, c.Cg);
		s.NB = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, c.G));
		s.a.rs = I(l.k, 1), s.a.cs = I(l.k, c.MK);
		s.b.rs = I(l.k, c.in_size), s.b.cs = I(l.k, 1);
		s.y.rs = I(l.k, c.in_size), s.y.cs = I(l.k, 1);
		s.ctx = &c;
		s.base = tconv_base;
		if (!lk_end(&l, gemm_generate(&l, &s))) return LOWER_FAILED;
	}
	/* The gather: parallel over (n, output channel) planes. */
	lk l;
	if (!lk_begin(&l, cx, "col2im")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *y = lk_buf(&l, yb), *col = cb >= 0 ? lk_buf(&l, cb) : NULL, *bias = bv ? lk_value(&l, bv) : NULL;
	if (!y || (cb >= 0 && !col) || (bv && !bias)) return LOWER_FAILED;
	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX), *acc = kir_var_new(k, "acc", ct);
	kir_var *o[CONV_MAX_SPATIAL], *kv[CONV_MAX_SPATIAL];
	for (int d = 0; d < nsp; d++) o[d] = kir_var_new(k, "o", KIR_INDEX), kv[d] = kir_var_new(k, "k", KIR_INDEX);
	kir_block plane = {0}, pos = {0}, tap = {0};
	kir_expr *b0 = bias ? LET(l.k, &plane, "b", CAST(l.k, ct, kir_e_load(k, bias, MOD(l.k, V(l.k, pl), I(l.k, M)))))
			    : F(l.k, ct, 0);
	kir_expr *cbase = col ? LET(l.k, &plane, "cbase", MUL(l.k, V(l.k, pl), I(l.k, KS * c.in_size))) : NULL;
	kir_block_add(k, &pos, kir_s_set(k, acc, b0));
	/* Per dim: t = o + pb; tap k reads i = (t - k*d) / s, valid when
	 * 0 <= t - k*d <= (in-1)*s and divisible by s:
	 * k in [max(0, ceil((t - (in-1)*s) / d)), min(K, t / d + 1)). */
	kir_expr *lo[CONV_MAX_SPATIAL], *hi[CONV_MAX_SPATIAL], *num[CONV_MAX_SPATIAL];
	kir_expr *divisible = NULL;
	for (int d = 0; d < nsp; d++) {
		kir_expr *t = LET(l.k, &pos, "t", ADD(l.k, V(l.k, o[d]), I(l.k, g.pad_begin[d])));
		int64_t span = (g.in[d] - 1) * g.stride[d], dil = g.dil[d];
		lo[d] = LET(l.k, &pos, "lo", MAX(l.k, I(l.k, 0), DIV(l.k, ADD(l.k, SUB(l.k, t, I(l.k, span)), I(l.k, dil - 1)), I(l.k, dil))));
		hi[d] = LET(l.k, &pos, "hi", MIN(l.k, I(l.k, g.kernel[d]), ADD(l.k, DIV(l.k, t, I(l.k, dil)), I(l.k, 1))));
		num[d] = SUB(l.k, t, MUL(l.k, V(l.k, kv[d]), I(l.k, dil)));
	}
	kir_expr *ci = I(l.k, 0), *ki = I(l.k, 0);
	int64_t istride = 1, kstride = 1;
	for (int d = nsp - 1; d >= 0; d--) {
		kir_expr *nm = LET(l.k, &tap, "num", num[d]);
		if (g.stride[d] > 1) {
			kir_expr *ok = CMP(l.k, KIR_EQ, MOD(l.k, nm, I(l.k, g.stride[d])), I(l.k, 0));
			divisible = divisible ? AND(l.k, divisible, ok) : ok;
		}
		kir_expr *i = MIN(l.k, MAX(l.k, DIV(l.k, nm, I(l.k, g.stride[d])), I(l.k, 0)), I(l.k, g.in[d] - 1)); /* in range already */
		ci = ADD(l.k, ci, MUL(l.k, i, I(l.k, istride)));
		ki = ADD(l.k, ki, MUL(l.k, MIN(l.k, MAX(l.k, V(l.k, kv[d]), I(l.k, 0)), I(l.k, g.kernel[d] - 1)), I(l.k, kstride)));
		istride *= g.in[d];
		kstride *= g.kernel[d];
	}
	if (col) {
		kir_expr *at = ADD(l.k, cbase, ADD(l.k, MUL(l.k, ki, I(l.k, c.in_size)), ci));
		kir_stmt *upd = kir_s_set(k, acc, BIN(l.k, KIR_ADD, V(l.k, acc), kir_e_load(k, col, at)));
		kir_block_add(k, &tap, divisible ? kir_s_if(k, divisible, upd, NULL) : upd);
		kir_stmt *taps = tap.first;
		for (int d = nsp - 1; d >= 0; d--) taps = kir_s_for(k, kv[d], lo[d], hi[d], 1, KIR_LOOP_SEQUENTIAL, taps);
		kir_block_add(k, &pos, taps);
	}
	kir_expr *oi = I(l.k, 0);
	int64_t ostride = 1;
	for (int d = nsp - 1; d >= 0; d--) {
		oi = ADD(l.k, oi, MUL(l.k, V(l.k, o[d]), I(l.k, ostride)));
		ostride *= g.out[d];
	}
	kir_block_add(k, &pos, kir_s_store(k, y, ADD(l.k, MUL(l.k, V(l.k, pl), I(l.k, out_size)), oi), CAST(l.k, yt->dtype, V(l.k, acc))));
	kir_stmt *s = pos.first;
	for (int d = nsp - 1; d >= 0; d--) s = kir_s_for(k, o[d], I(l.k, 0), I(l.k, g.out[d]), 1, KIR_LOOP_SEQUENTIAL, s);
	kir_block_add(k, &plane, s);
	kir_expr *planes = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, M));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(l.k, 0), planes, 1, KIR_LOOP_PARALLEL, plane.first)));
}

/* ---- MaxUnpool -------------------------------------------------------------------*/
static lower_result lower_max_unpool(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *iv = op->inputs[1], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type, *yt = &yv->type;
	if (xt->rank < 3 || yt->rank != xt->rank || iv->type.dtype != TBC_DT_I64) return conv_refuse(cx, op, "of this rank or index type");
	/* Output dims may be symbols: an output_shape given while running, checked
	 * and stored by its shape kernel (codegen/lower/select.c). */
	if (!conv_static_dims(xt, 0)) return conv_refuse(cx, op, "with symbolic dims");
	int r = xt->rank;
	/* The unpooled shape: (in - 1) * stride - pads + kernel per spatial dim. */
	const int64_t *ks, *st, *pads;
	int nk = tbc_attr_ints(op, "kernel_shape", &ks), ns = tbc_attr_ints(op, "strides", &st), np = tbc_attr_ints(op, "pads", &pads);
	int nsp = r - 2;
	if (nk != nsp || (ns > 0 && ns != nsp) || (np > 0 && np != 2 * nsp)) return conv_refuse(cx, op, "with these attributes");
	int64_t inner[TBC_MAX_RANK] = {xt->dims[0].size, xt->dims[1].size}, ydims[TBC_MAX_RANK];
	for (int d = 0; d < nsp; d++)
		inner[2 + d] = (xt->dims[2 + d].size - 1) * (ns > 0 ? st[d] : 1) - (np > 0 ? pads[d] + pads[nsp + d] : 0) + ks[d];
	for (int d = 0; d < r; d++) {
		ydims[d] = yt->dims[d].size;
		if (!yt->dims[d].sym && ydims[d] < inner[d]) return lower_error(cx, op, "MaxUnpool output smaller than the unpooled size"), LOWER_FAILED;
	}
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	lk l;
	if (!lk_begin(&l, cx, "maxunpool")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *ix = lk_value(&l, iv), *y = lk_buf(&l, yb);
	if (!x || !ix || !y) return LOWER_FAILED;
	kir_expr *ysz = I(l.k, 1);
	for (int d = 0; d < r; d++) ysz = MUL(l.k, ysz, lk_dim(&l, yt->dims[d]));
	int64_t total = conv_prod(0, r, inner), xsz = 1;
	for (int d = 0; d < r; d++) xsz *= xt->dims[d].size;
	kir_expr *zero = tbc_dtype_is_float(yt->dtype) ? CAST(l.k, yt->dtype, F(l.k, TBC_DT_F64, 0)) : kir_e_int(k, yt->dtype, 0);
	if (yt->dtype == TBC_DT_BOOL) zero = kir_e_int(k, TBC_DT_BOOL, 0);
	kir_var *e = kir_var_new(k, "e", KIR_INDEX), *q = kir_var_new(k, "q", KIR_INDEX);
	kir_stmt *fill = kir_s_for(k, e, I(l.k, 0), ysz, 1, KIR_LOOP_PARALLEL, kir_s_store(k, y, V(l.k, e), zero));
	kir_block body = {0};
	kir_expr *t = LET(l.k, &body, "t", CAST(l.k, KIR_INDEX, kir_e_load(k, ix, V(l.k, q))));
	kir_block_add(k, &body, kir_s_error(k, kir_e_binary(k, KIR_OR, CMP(l.k, KIR_LT, t, I(l.k, 0)), CMP(l.k, KIR_GE, t, I(l.k, total))),
					    "MaxUnpool: an index is outside the unpooled tensor"));
	kir_expr *at = I(l.k, 0);
	int64_t is = 1;
	kir_expr *ys = I(l.k, 1);
	for (int d = r - 1; d >= 0; d--) {
		at = ADD(l.k, at, MUL(l.k, MOD(l.k, DIV(l.k, t, I(l.k, is)), I(l.k, inner[d])), ys));
		is *= inner[d];
		ys = MUL(l.k, ys, lk_dim(&l, yt->dims[d]));
	}
	kir_block_add(k, &body, kir_s_store(k, y, MIN(l.k, MAX(l.k, at, I(l.k, 0)), SUB(l.k, ysz, I(l.k, 1))), kir_e_load(k, x, V(l.k, q))));
	kir_block all = {0};
	kir_block_add(k, &all, fill);
	kir_block_add(k, &all, kir_s_for(k, q, I(l.k, 0), I(l.k, xsz), 1, KIR_LOOP_SEQUENTIAL, body.first));
	return conv_failed(lk_end(&l, all.first));
}

/* ---- GridSample ------------------------------------------------------------------*/
enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

/* gs_reflect of ir/kernels/conv_sample.c on a double x (bounds constants). */
static kir_expr *gs_reflect(lk *l, kir_block *b, kir_expr *x, double lo, double hi) {
	const tbc_dtype D = TBC_DT_F64;
	double rng = hi - lo;
	if (!(rng > 0)) return F(l->k, D, lo);
	x = LET(l->k, b, "rx", x);
	kir_expr *dxl = LET(l->k, b, "dxl", BIN(l->k, KIR_SUB, F(l->k, D, lo), x));
	kir_expr *nl = LET(l->k, b, "nl", kir_e_unary(l->k, KIR_TRUNC, BIN(l->k, KIR_DIV, dxl, F(l->k, D, rng))));
	kir_expr *rl = BIN(l->k, KIR_SUB, dxl, BIN(l->k, KIR_MUL, nl, F(l->k, D, rng)));
	kir_expr *evl = CMP(l->k, KIR_EQ, BIN(l->k, KIR_REM, nl, F(l->k, D, 2)), F(l->k, D, 0));
	kir_expr *below = SEL(l->k, evl, BIN(l->k, KIR_ADD, F(l->k, D, lo), rl), BIN(l->k, KIR_SUB, F(l->k, D, hi), rl));
	kir_expr *dxh = LET(l->k, b, "dxh", BIN(l->k, KIR_SUB, x, F(l->k, D, hi)));
	kir_expr *nh = LET(l->k, b, "nh", kir_e_unary(l->k, KIR_TRUNC, BIN(l->k, KIR_DIV, dxh, F(l->k, D, rng))));
	kir_expr *rh = BIN(l->k, KIR_SUB, dxh, BIN(l->k, KIR_MUL, nh, F(l->k, D, rng)));
	kir_expr *evh = CMP(l->k, KIR_EQ, BIN(l->k, KIR_REM, nh, F(l->k, D, 2)), F(l->k, D, 0));
	kir_expr *above = SEL(l->k, evh, BIN(l->k, KIR_SUB, F(l->k, D, hi), rh), BIN(l->k, KIR_ADD, F(l->k, D, lo), rh));
	return LET(l->k, b, "refl", SEL(l->k, CMP(l->k, KIR_LT, x, F(l->k, D, lo)), below, SEL(l->k, CMP(l->k, KIR_GT, x, F(l->k, D, hi)), above, x)));
}

/* Index i (index-typed) of a dim of size n after padding: *ok false for a zero. */
static kir_expr *gs_index(lk *l, kir_block *b, kir_expr *i, int64_t n, int pad, double lo, double hi, kir_expr **ok) {
	*ok = NULL;
	if (pad == GS_ZEROS) {
		i = LET(l->k, b, "ti", i);
		*ok = LET(l->k, b, "tok", AND(l->k, CMP(l->k, KIR_GE, i, I(l->k, 0)), CMP(l->k, KIR_LT, i, I(l->k, n))));
		return MIN(l->k, MAX(l->k, i, I(l->k, 0)), I(l->k, n - 1));
	}
	if (pad == GS_BORDER) return LET(l->k, b, "ti", MIN(l->k, MAX(l->k, i, I(l->k, 0)), I(l->k, n - 1)));
	kir_expr *r = kir_e_unary(l->k, KIR_TRUNC, gs_reflect(l, b, CAST(l->k, TBC_DT_F64, CAST(l->k, TBC_DT_I64, i)), lo, hi));
	/* r is within [lo, hi] (finite): the cast is safe. */
	return LET(l->k, b, "ti", MIN(l->k, MAX(l->k, CAST(l->k, KIR_INDEX, CAST(l->k, TBC_DT_I64, r)), I(l->k, 0)), I(l->k, n - 1)));
}

static kir_expr *cubic_w(lk *l, kir_expr *x, int t) {
	const tbc_dtype D = TBC_DT_F64;
	const double A = -0.75;
	kir_expr *u;
	switch (t) {
	case 0:
		u = BIN(l->k, KIR_ADD, x, F(l->k, D, 1));
		return BIN(l->k, KIR_SUB, BIN(l->k, KIR_MUL, BIN(l->k, KIR_ADD, BIN(l->k, KIR_MUL, BIN(l->k, KIR_SUB, BIN(l->k, KIR_MUL, F(l->k, D, A), u), F(l->k, D, 5 * A)), u), F(l->k, D, 8 * A)), u), F(l->k, D, 4 * A));
	case 1:
		return BIN(l->k, KIR_ADD, BIN(l->k, KIR_MUL, BIN(l->k, KIR_MUL, BIN(l->k, KIR_SUB, BIN(l->k, KIR_MUL, F(l->k, D, A + 2), x), F(l->k, D, A + 3)), x), x), F(l->k, D, 1));
	case 2:
		u = BIN(l->k, KIR_SUB, F(l->k, D, 1), x);
		return BIN(l->k, KIR_ADD, BIN(l->k, KIR_MUL, BIN(l->k, KIR_MUL, BIN(l->k, KIR_SUB, BIN(l->k, KIR_MUL, F(l->k, D, A + 2), u), F(l->k, D, A + 3)), u), u), F(l->k, D, 1));
	default:
		u = BIN(l->k, KIR_SUB, F(l->k, D, 2), x);
		return BIN(l->k, KIR_SUB, BIN(l->k, KIR_MUL, BIN(l->k, KIR_ADD, BIN(l->k, KIR_MUL, BIN(l->k, KIR_SUB, BIN(l->k, KIR_MUL, F(l->k, D, A), u), F(l->k, D, 5 * A)), u), F(l->k, D, 8 * A)), u), F(l->k, D, 4 * A));
	}
}

static lower_result lower_grid_sample(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *gv = op->inputs[1], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type, *gt = &gv->type, *yt = &yv->type;
	tbc_dtype ct;
	if (!conv_float_ct(xt->dtype, &ct) || !conv_float_ct(gt->dtype, &ct)) return conv_refuse(cx, op, "on this dtype");
	ct = TBC_DT_F64;
	const char *ms = conv_attr_str(op, "mode", "linear"), *ps = conv_attr_str(op, "padding_mode", "zeros");
	int mode, pad;
	if (!strcmp(ms, "nearest")) mode = GS_NEAREST;
	else if (!strcmp(ms, "linear") || !strcmp(ms, "bilinear")) mode = GS_LINEAR;
	else if (!strcmp(ms, "cubic") || !strcmp(ms, "bicubic")) mode = GS_CUBIC;
	else return conv_refuse(cx, op, "with this mode");
	if (!strcmp(ps, "zeros")) pad = GS_ZEROS;
	else if (!strcmp(ps, "border")) pad = GS_BORDER;
	else if (!strcmp(ps, "reflection")) pad = GS_REFLECTION;
	else return conv_refuse(cx, op, "with this padding_mode");
	bool align = tbc_attr_int(op, "align_corners", 0) != 0;
	int r = xt->rank - 2;
	if (r < 1 || r > 3 || gt->rank != xt->rank || yt->rank != xt->rank) return conv_refuse(cx, op, "of this rank");
	if (!conv_static_dims(xt, 1) || !conv_static_dims(gt, 1) || !conv_static_dims(yt, 1)) return conv_refuse(cx, op, "with symbolic dims past the batch");
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	lk l;
	if (!lk_begin(&l, cx, "gridsample")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *grid = lk_value(&l, gv), *y = lk_buf(&l, yb);
	if (!x || !grid || !y) return LOWER_FAILED;
	int64_t dims[CONV_MAX_SPATIAL], C = xt->dims[1].size, isz = 1, osz = 1;
	for (int d = 0; d < r; d++) dims[d] = xt->dims[2 + d].size, isz *= dims[d], osz *= yt->dims[2 + d].size;
	const tbc_dtype S = TBC_DT_F32, D = TBC_DT_F64;
	kir_var *p = kir_var_new(k, "p", KIR_INDEX), *c = kir_var_new(k, "c", KIR_INDEX), *acc = kir_var_new(k, "acc", D);
	kir_block body = {0};
	int taps = mode == GS_CUBIC ? 4 : mode == GS_LINEAR ? 2 : 1;
	kir_expr *idx[CONV_MAX_SPATIAL][4], *ok[CONV_MAX_SPATIAL][4], *wt[CONV_MAX_SPATIAL][4];
	for (int d = 0; d < r; d++) {
		double lo = align ? 0.0 : -0.5, hi = align ? (double)dims[d] - 1.0 : (double)dims[d] - 0.5;
		float len = (float)dims[d];
		kir_expr *g = LET(l.k, &body, "g", CAST(l.k, S, kir_e_load(k, grid, ADD(l.k, MUL(l.k, V(l.k, p), I(l.k, r)), I(l.k, r - 1 - d)))));
		kir_expr *v = align ? BIN(l.k, KIR_MUL, BIN(l.k, KIR_DIV, BIN(l.k, KIR_ADD, g, F(l.k, S, 1)), F(l.k, S, 2)), F(l.k, S, len - 1.0f))
				    : BIN(l.k, KIR_DIV, BIN(l.k, KIR_SUB, BIN(l.k, KIR_MUL, BIN(l.k, KIR_ADD, g, F(l.k, S, 1)), F(l.k, S, len)), F(l.k, S, 1)), F(l.k, S, 2));
		if (mode == GS_NEAREST) v = kir_e_unary(k, KIR_ROUND_EVEN, v);
		v = LET(l.k, &body, "v", v);
		kir_expr *outside = kir_e_binary(k, KIR_OR, CMP(l.k, KIR_LT, v, F(l.k, S, (float)lo)), CMP(l.k, KIR_GT, v, F(l.k, S, (float)hi)));
		if (pad == GS_BORDER)
			v = LET(l.k, &body, "v", SEL(l.k, outside, SEL(l.k, CMP(l.k, KIR_LT, v, F(l.k, S, 0)), F(l.k, S, 0), SEL(l.k, CMP(l.k, KIR_GT, v, F(l.k, S, len - 1)), F(l.k, S, len - 1), v)), v));
		else if (pad == GS_REFLECTION)
			v = LET(l.k, &body, "v", SEL(l.k, outside, CAST(l.k, S, gs_reflect(&l, &body, CAST(l.k, D, v), lo, hi)), v));
		kir_expr *pp = LET(l.k, &body, "pos", CAST(l.k, D, v));
		pp = LET(l.k, &body, "pos", SEL(l.k, AND(l.k, CMP(l.k, KIR_GT, pp, F(l.k, D, -1e15)), CMP(l.k, KIR_LT, pp, F(l.k, D, 1e15))), pp, F(l.k, D, -1e15)));
		if (mode == GS_NEAREST) {
			kir_expr *i = CAST(l.k, KIR_INDEX, CAST(l.k, TBC_DT_I64, kir_e_unary(k, KIR_TRUNC, pp)));
			idx[d][0] = gs_index(&l, &body, i, dims[d], pad, lo, hi, &ok[d][0]);
			wt[d][0] = NULL;
			continue;
		}
		kir_expr *f = LET(l.k, &body, "fl", kir_e_unary(k, KIR_FLOOR, pp));
		kir_expr *x0 = LET(l.k, &body, "x0", CAST(l.k, KIR_INDEX, CAST(l.k, TBC_DT_I64, f)));
		kir_expr *fr = LET(l.k, &body, "fr", kir_e_unary(k, KIR_ABS, BIN(l.k, KIR_SUB, pp, f)));
		if (mode == GS_LINEAR) {
			wt[d][0] = LET(l.k, &body, "w", BIN(l.k, KIR_SUB, F(l.k, D, 1), fr));
			wt[d][1] = fr;
			for (int t = 0; t < 2; t++) idx[d][t] = gs_index(&l, &body, ADD(l.k, x0, I(l.k, t)), dims[d], pad, lo, hi, &ok[d][t]);
		} else {
			kir_expr *fx = LET(l.k, &body, "fx", BIN(l.k, KIR_SUB, pp, f));
			for (int t = 0; t < 4; t++) {
				wt[d][t] = LET(l.k, &body, "w", cubic_w(&l, fx, t));
				idx[d][t] = gs_index(&l, &body, ADD(l.k, x0, I(l.k, t - 1)), dims[d], pad, lo, hi, &ok[d][t]);
			}
		}
	}
	/* Per corner: weight, validity and plane offset, once per point. */
	int64_t corners = 1;
	for (int d = 0; d < r; d++) corners *= taps;
	kir_expr *cw[64], *cok[64], *coff[64];
	for (int64_t q = 0; q < corners; q++) {
		kir_expr *w = NULL, *vk = NULL, *off = I(l.k, 0);
		int64_t rem = q, stride = 1;
		for (int d = r - 1; d >= 0; d--) {
			int t = (int)(rem % taps);
			rem /= taps;
			if (wt[d][t]) w = w ? BIN(l.k, KIR_MUL, w, wt[d][t]) : wt[d][t];
			if (ok[d][t]) vk = vk ? AND(l.k, vk, ok[d][t]) : ok[d][t];
			off = ADD(l.k, off, MUL(l.k, idx[d][t], I(l.k, stride)));
			stride *= dims[d];
		}
		/* the interpreter multiplies weights from dim r-1 down: w = 1 * w[r-1] * ... */
		cw[q] = w ? LET(l.k, &body, "cw", w) : NULL;
		cok[q] = vk;
		coff[q] = LET(l.k, &body, "coff", off);
	}
	kir_block ch = {0};
	kir_expr *n = DIV(l.k, V(l.k, p), I(l.k, osz)), *ol = MOD(l.k, V(l.k, p), I(l.k, osz));
	kir_expr *nc = LET(l.k, &ch, "nc", ADD(l.k, MUL(l.k, n, I(l.k, C)), V(l.k, c)));
	kir_expr *base = LET(l.k, &ch, "base", MUL(l.k, nc, I(l.k, isz)));
	kir_block_add(k, &ch, kir_s_set(k, acc, F(l.k, D, 0)));
	for (int64_t q = 0; q < corners; q++) {
		kir_expr *v = CAST(l.k, D, kir_e_load(k, x, ADD(l.k, base, coff[q])));
		if (cw[q]) v = BIN(l.k, KIR_MUL, cw[q], v);
		kir_expr *sum = BIN(l.k, KIR_ADD, V(l.k, acc), v);
		kir_block_add(k, &ch, kir_s_set(k, acc, cok[q] ? SEL(l.k, cok[q], sum, V(l.k, acc)) : sum));
	}
	kir_block_add(k, &ch, kir_s_store(k, y, ADD(l.k, MUL(l.k, nc, I(l.k, osz)), ol), CAST(l.k, yt->dtype, V(l.k, acc))));
	kir_block_add(k, &body, kir_s_for(k, c, I(l.k, 0), I(l.k, C), 1, KIR_LOOP_SEQUENTIAL, ch.first));
	kir_expr *pts = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, osz));
	return conv_failed(lk_end(&l, kir_s_for(k, p, I(l.k, 0), pts, 1, KIR_LOOP_PARALLEL, body.first)));
}

/* ---- RoiAlign ------------------------------------------------------------------*/
static lower_result lower_roi_align(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *rv = op->inputs[1], *bv = op->inputs[2], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type, *rt = &rv->type, *yt = &yv->type;
	tbc_dtype ct;
	if (!conv_float_ct(xt->dtype, &ct) || !conv_float_ct(rt->dtype, &ct) || bv->type.dtype != TBC_DT_I64) return conv_refuse(cx, op, "on this dtype");
	if (xt->rank != 4 || rt->rank != 2 || yt->rank != 4) return conv_refuse(cx, op, "of this rank");
	if (!conv_static_dims(xt, 0) || !conv_static_dims(yt, 1)) return conv_refuse(cx, op, "with symbolic dims of X");
	bool max_mode = !strcmp(conv_attr_str(op, "mode", "avg"), "max");
	bool half_pixel = !strcmp(conv_attr_str(op, "coordinate_transformation_mode", "half_pixel"), "half_pixel");
	int64_t PH = tbc_attr_int(op, "output_height", 1), PW = tbc_attr_int(op, "output_width", 1);
	int64_t ratio = tbc_attr_int(op, "sampling_ratio", 0);
	double scale = tbc_attr_float(op, "spatial_scale", 1.0);
	int64_t N = xt->dims[0].size, C = xt->dims[1].size, H = xt->dims[2].size, W = xt->dims[3].size;
	if (PH <= 0 || PW <= 0 || yt->dims[2].size != PH || yt->dims[3].size != PW) return conv_refuse(cx, op, "with these output sizes");
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	if (H <= 0 || W <= 0) return conv_refuse(cx, op, "on an empty image");
	lk l;
	if (!lk_begin(&l, cx, "roialign")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *rois = lk_value(&l, rv), *bi = lk_value(&l, bv), *y = lk_buf(&l, yb);
	if (!x || !rois || !bi || !y) return LOWER_FAILED;
	/* R: the rois' precision, in which the reference computes the geometry. */
	const tbc_dtype R = rt->dtype == TBC_DT_F64 ? TBC_DT_F64 : TBC_DT_F32, D = TBC_DT_F64;
	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX);
	kir_block body = {0};
	kir_expr *r = LET(l.k, &body, "r", DIV(l.k, V(l.k, pl), I(l.k, C))), *c = LET(l.k, &body, "c", MOD(l.k, V(l.k, pl), I(l.k, C)));
	kir_expr *b = LET(l.k, &body, "b", CAST(l.k, KIR_INDEX, kir_e_load(k, bi, r)));
	kir_block_add(k, &body, kir_s_error(k, kir_e_binary(k, KIR_OR, CMP(l.k, KIR_LT, b, I(l.k, 0)), CMP(l.k, KIR_GE, b, I(l.k, N))),
					    "RoiAlign: a batch index is out of range"));
	kir_expr *co[4];
	for (int i = 0; i < 4; i++) {
		kir_expr *v = BIN(l.k, KIR_MUL, CAST(l.k, R, kir_e_load(k, rois, ADD(l.k, MUL(l.k, r, I(l.k, 4)), I(l.k, i)))), F(l.k, R, scale));
		co[i] = LET(l.k, &body, "co", BIN(l.k, KIR_SUB, v, F(l.k, R, half_pixel ? 0.5 : 0.0)));
	}
	kir_expr *sw = co[0], *sh = co[1];
	kir_expr *rw = BIN(l.k, KIR_SUB, co[2], co[0]), *rh = BIN(l.k, KIR_SUB, co[3], co[1]);
	if (!half_pixel) rw = BIN(l.k, KIR_MAX, rw, F(l.k, R, 1)), rh = BIN(l.k, KIR_MAX, rh, F(l.k, R, 1));
	rw = LET(l.k, &body, "rw", rw);
	rh = LET(l.k, &body, "rh", rh);
	kir_expr *bh = LET(l.k, &body, "bh", BIN(l.k, KIR_DIV, rh, F(l.k, R, (double)PH)));
	kir_expr *bw = LET(l.k, &body, "bw", BIN(l.k, KIR_DIV, rw, F(l.k, R, (double)PW)));
	kir_expr *gh, *gw, *ghf, *gwf;
	if (ratio > 0) {
		gh = gw = I(l.k, ratio);
		ghf = gwf = F(l.k, R, (double)ratio);
	} else {
		kir_expr *ghd = LET(l.k, &body, "ghd", CAST(l.k, D, kir_e_unary(k, KIR_CEIL, bh)));
		kir_expr *gwd = LET(l.k, &body, "gwd", CAST(l.k, D, kir_e_unary(k, KIR_CEIL, bw)));
		kir_expr *good = AND(l.k, AND(l.k, CMP(l.k, KIR_GE, ghd, F(l.k, D, 0)), CMP(l.k, KIR_LT, ghd, F(l.k, D, 1e6))),
				     AND(l.k, CMP(l.k, KIR_GE, gwd, F(l.k, D, 0)), CMP(l.k, KIR_LT, gwd, F(l.k, D, 1e6))));
		kir_block_add(k, &body, kir_s_error(k, kir_e_unary(k, KIR_NOT, good), "RoiAlign: a roi is too large or not finite"));
		gh = LET(l.k, &body, "gh", CAST(l.k, KIR_INDEX, CAST(l.k, TBC_DT_I64, SEL(l.k, good, ghd, F(l.k, D, 0)))));
		gw = LET(l.k, &body, "gw", CAST(l.k, KIR_INDEX, CAST(l.k, TBC_DT_I64, SEL(l.k, good, gwd, F(l.k, D, 0)))));
		kir_block_add(k, &body, kir_s_error(k, CMP(l.k, KIR_GT, MUL(l.k, gh, gw), I(l.k, (int64_t)1 << 24)),
						    "RoiAlign: a roi needs more than 2^24 samples per bin"));
		ghf = CAST(l.k, R, CAST(l.k, TBC_DT_I64, gh));
		gwf = CAST(l.k, R, CAST(l.k, TBC_DT_I64, gw));
		ghf = LET(l.k, &body, "ghf", ghf);
		gwf = LET(l.k, &body, "gwf", gwf);
	}
	kir_expr *count = LET(l.k, &body, "count", CAST(l.k, D, CAST(l.k, TBC_DT_I64, MAX(l.k, MUL(l.k, gh, gw), I(l.k, 1)))));
	kir_expr *plane = LET(l.k, &body, "plane", MUL(l.k, ADD(l.k, MUL(l.k, b, I(l.k, C)), c), I(l.k, H * W)));
	kir_var *ph = kir_var_new(k, "ph", KIR_INDEX), *pw = kir_var_new(k, "pw", KIR_INDEX);
	kir_var *iy = kir_var_new(k, "iy", KIR_INDEX), *ix = kir_var_new(k, "ix", KIR_INDEX);
	kir_var *acc = kir_var_new(k, "acc", D), *have = kir_var_new(k, "have", TBC_DT_BOOL);
	kir_block bin = {0}, row = {0}, smp = {0};
	kir_block_add(k, &bin, kir_s_set(k, acc, F(l.k, D, 0)));
	kir_block_add(k, &bin, kir_s_set(k, have, kir_e_int(k, TBC_DT_BOOL, 0)));
	kir_expr *ry = BIN(l.k, KIR_ADD, sh, BIN(l.k, KIR_MUL, CAST(l.k, R, CAST(l.k, TBC_DT_I64, V(l.k, ph))), bh));
	kir_expr *yy = LET(l.k, &row, "yy", BIN(l.k, KIR_ADD, ry, BIN(l.k, KIR_DIV, BIN(l.k, KIR_MUL, BIN(l.k, KIR_ADD, CAST(l.k, R, CAST(l.k, TBC_DT_I64, V(l.k, iy))), F(l.k, R, 0.5)), bh), ghf)));
	kir_expr *rx = BIN(l.k, KIR_ADD, sw, BIN(l.k, KIR_MUL, CAST(l.k, R, CAST(l.k, TBC_DT_I64, V(l.k, pw))), bw));
	kir_expr *xx = LET(l.k, &smp, "xx", BIN(l.k, KIR_ADD, rx, BIN(l.k, KIR_DIV, BIN(l.k, KIR_MUL, BIN(l.k, KIR_ADD, CAST(l.k, R, CAST(l.k, TBC_DT_I64, V(l.k, ix))), F(l.k, R, 0.5)), bw), gwf)));
	kir_expr *inside = LET(l.k, &smp, "inside", AND(l.k, AND(l.k, CMP(l.k, KIR_GE, yy, F(l.k, R, -1)), CMP(l.k, KIR_LE, yy, F(l.k, R, (double)H))),
							 AND(l.k, CMP(l.k, KIR_GE, xx, F(l.k, R, -1)), CMP(l.k, KIR_LE, xx, F(l.k, R, (double)W)))));
	kir_expr *lerp[2][4]; /* per axis (y, x): low index, high index, low weight, high weight */
	kir_expr *pos[2] = {yy, xx};
	int64_t ext[2] = {H, W};
	for (int a = 0; a < 2; a++) {
		kir_expr *v = LET(l.k, &smp, "pv", SEL(l.k, inside, BIN(l.k, KIR_MAX, pos[a], F(l.k, R, 0)), F(l.k, R, 0)));
		kir_expr *lo = LET(l.k, &smp, "lo", CAST(l.k, KIR_INDEX, CAST(l.k, TBC_DT_I64, v)));
		kir_expr *edge = LET(l.k, &smp, "edge", CMP(l.k, KIR_GE, lo, I(l.k, ext[a] - 1)));
		kir_expr *lo2 = LET(l.k, &smp, "lo", SEL(l.k, edge, I(l.k, ext[a] - 1), lo));
		kir_expr *hi = SEL(l.k, edge, I(l.k, ext[a] - 1), ADD(l.k, lo, I(l.k, 1)));
		v = SEL(l.k, edge, CAST(l.k, R, CAST(l.k, TBC_DT_I64, lo2)), v);
		kir_expr *lw = LET(l.k, &smp, "lw", BIN(l.k, KIR_SUB, v, CAST(l.k, R, CAST(l.k, TBC_DT_I64, lo2))));
		kir_expr *hw = LET(l.k, &smp, "hw", BIN(l.k, KIR_SUB, F(l.k, R, 1), lw));
		lerp[a][0] = MIN(l.k, MAX(l.k, lo2, I(l.k, 0)), I(l.k, ext[a] - 1));
		lerp[a][1] = MIN(l.k, MAX(l.k, hi, I(l.k, 0)), I(l.k, ext[a] - 1));
		lerp[a][2] = CAST(l.k, D, hw);
		lerp[a][3] = CAST(l.k, D, lw);
	}
	kir_expr *vs[4];
	for (int q = 0; q < 4; q++) {
		int qy = q >> 1, qx = q & 1;
		kir_expr *at = ADD(l.k, plane, ADD(l.k, MUL(l.k, lerp[0][qy], I(l.k, W)), lerp[1][qx]));
		kir_expr *v = BIN(l.k, KIR_MUL, BIN(l.k, KIR_MUL, lerp[0][2 + qy], lerp[1][2 + qx]), CAST(l.k, D, kir_e_load(k, x, at)));
		vs[q] = LET(l.k, &smp, "v", SEL(l.k, inside, v, F(l.k, D, 0)));
	}
	if (!max_mode) {
		kir_block_add(k, &smp, kir_s_set(k, acc, BIN(l.k, KIR_ADD, V(l.k, acc), BIN(l.k, KIR_ADD, BIN(l.k, KIR_ADD, BIN(l.k, KIR_ADD, vs[0], vs[1]), vs[2]), vs[3]))));
	} else {
		kir_expr *m = BIN(l.k, KIR_MAX, BIN(l.k, KIR_MAX, vs[0], vs[1]), BIN(l.k, KIR_MAX, vs[2], vs[3]));
		kir_expr *mv = LET(l.k, &smp, "m", m);
		kir_block_add(k, &smp, kir_s_set(k, acc, SEL(l.k, V(l.k, have), BIN(l.k, KIR_MAX, V(l.k, acc), mv), mv)));
		kir_block_add(k, &smp, kir_s_set(k, have, kir_e_int(k, TBC_DT_BOOL, 1)));
	}
	kir_block_add(k, &row, kir_s_for(k, ix, I(l.k, 0), gw, 1, KIR_LOOP_SEQUENTIAL, smp.first));
	kir_block_add(k, &bin, kir_s_for(k, iy, I(l.k, 0), gh, 1, KIR_LOOP_SEQUENTIAL, row.first));
	kir_expr *res = max_mode ? V(l.k, acc) : BIN(l.k, KIR_DIV, V(l.k, acc), count);
	kir_expr *at = ADD(l.k, MUL(l.k, ADD(l.k, MUL(l.k, V(l.k, pl), I(l.k, PH)), V(l.k, ph)), I(l.k, PW)), V(l.k, pw));
	kir_block_add(k, &bin, kir_s_store(k, y, at, CAST(l.k, yt->dtype, res)));
	kir_stmt *bins = kir_s_for(k, ph, I(l.k, 0), I(l.k, PH), 1, KIR_LOOP_SEQUENTIAL,
				   kir_s_for(k, pw, I(l.k, 0), I(l.k, PW), 1, KIR_LOOP_SEQUENTIAL, bin.first));
	kir_block_add(k, &body, bins);
	kir_expr *planes = MUL(l.k, lk_dim(&l, rt->dims[0]), I(l.k, C));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(l.k, 0), planes, 1, KIR_LOOP_PARALLEL, body.first)));
}

/* ---- DeformConv ------------------------------------------------------------------
 * A deformable im2col (each tap of each output position sampled at its
 * place plus its offset, multilinear with zeros outside, times the mask)
 * into a scratch col[n, g][(c, k...)][o...], then Conv's GEMM:
 * y[n, g] = W[g] * col[n, g] + B. */
static lower_result lower_deform_conv(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[1], *ov = op->inputs[2], *yv = op->outputs[0];
	const tbc_value *bv = op->n_inputs > 3 ? op->inputs[3] : NULL, *mv = op->n_inputs > 4 ? op->inputs[4] : NULL;
	const tbc_type *xt = &xv->type, *wt = &wv->type, *ot = &ov->type, *yt = &yv->type;
	conv_gemm c = {0};
	if (!conv_float_ct(xt->dtype, &c.ct)) return conv_refuse(cx, op, "on this dtype");
	int nsp = xt->rank - 2;
	if (nsp < 1 || nsp > 3 || wt->rank != xt->rank || ot->rank != xt->rank || yt->rank != xt->rank ||
	    (mv && mv->type.rank != xt->rank))
		return conv_refuse(cx, op, "of this rank");
	if (!conv_static_dims(xt, 1) || !conv_static_dims(wt, 0) || !conv_static_dims(ot, 1) || !conv_static_dims(yt, 1) ||
	    (mv && !conv_static_dims(&mv->type, 1)))
		return conv_refuse(cx, op, "with symbolic channel, spatial or weight dims");
	conv_geom g;
	int64_t kernel[CONV_MAX_SPATIAL];
	for (int i = 0; i < nsp; i++) kernel[i] = wt->dims[2 + i].size;
	const char *err = conv_geom_read(&g, op, nsp, kernel, true, false);
	for (int i = 0; !err && i < nsp; i++) g.in[i] = xt->dims[2 + i].size;
	if (!err) err = conv_geom_resolve(&g);
	if (err) return lower_error(cx, op, "%s", err), LOWER_FAILED;
	c.G = tbc_attr_int(op, "group", 1);
	int64_t OG = tbc_attr_int(op, "offset_group", 1);
	int64_t C = xt->dims[1].size, Cg = wt->dims[1].size, M = wt->dims[0].size;
	int64_t KS = conv_prod(0, nsp, g.kernel);
	if (c.G <= 0 || OG <= 0 || C != Cg * c.G || M % c.G || C % OG || ot->dims[1].size != OG * KS * nsp ||
	    (mv && mv->type.dims[1].size != OG * KS))
		return lower_error(cx, op, "DeformConv channels, groups and offsets disagree"), LOWER_FAILED;
	for (int i = 0; i < nsp; i++)
		if (g.out[i] != yt->dims[2 + i].size || ot->dims[2 + i].size != g.out[i] || (mv && mv->type.dims[2 + i].size != g.out[i]))
			return lower_error(cx, op, "DeformConv geometry disagrees with its types"), LOWER_FAILED;
	c.Mg = M / c.G;
	c.Kg = Cg * KS;
	c.P = conv_prod(0, nsp, g.out);
	c.yt = yt->dtype;
	int64_t Cog = C / OG, isz = conv_prod(0, nsp, g.in);
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	int cb = lower_shared_temp(cx, "col2im", c.ct, xt->dims[0], c.G * c.Kg * c.P);
	if (cb < 0) return LOWER_FAILED;
	/* The deformable im2col: parallel over rows (n, g, c, k). */
	{
		lk l;
		if (!lk_begin(&l, cx, "deform_im2col")) return LOWER_FAILED;
		kir_kernel *k = l.k;
		kir_buffer *x = lk_value(&l, xv), *off = lk_value(&l, ov), *mask = mv ? lk_value(&l, mv) : NULL, *col = lk_buf(&l, cb);
		if (!x || !off || (mv && !mask) || !col) return LOWER_FAILED;
		const tbc_dtype D = TBC_DT_F64;
		kir_var *rv = kir_var_new(k, "r", KIR_INDEX), *ol = kir_var_new(k, "ol", KIR_INDEX);
		kir_block row = {0}, pt = {0};
		kir_expr *ng = LET(l.k, &row, "ng", DIV(l.k, V(l.k, rv), I(l.k, c.Kg)));
		kir_expr *kk = LET(l.k, &row, "kk", MOD(l.k, V(l.k, rv), I(l.k, c.Kg)));
		kir_expr *n = LET(l.k, &row, "n", DIV(l.k, ng, I(l.k, c.G)));
		kir_expr *ch = LET(l.k, &row, "ch", ADD(l.k, MUL(l.k, MOD(l.k, ng, I(l.k, c.G)), I(l.k, Cg)), DIV(l.k, kk, I(l.k, KS))));
		kir_expr *kl = LET(l.k, &row, "kl", MOD(l.k, kk, I(l.k, KS)));
		kir_expr *og = DIV(l.k, ch, I(l.k, Cog));
		kir_expr *tap = LET(l.k, &row, "tap", ADD(l.k, MUL(l.k, ADD(l.k, MUL(l.k, n, I(l.k, OG)), og), I(l.k, KS)), kl));
		kir_expr *plane = LET(l.k, &row, "plane", MUL(l.k, ADD(l.k, MUL(l.k, n, I(l.k, C)), ch), I(l.k, isz)));
		kir_expr *kd[CONV_MAX_SPATIAL], *od[CONV_MAX_SPATIAL];
		kir_expr *rem = kl;
		for (int d = nsp - 1; d >= 0; d--) {
			kd[d] = LET(l.k, &row, "kd", MOD(l.k, rem, I(l.k, g.kernel[d])));
			rem = DIV(l.k, rem, I(l.k, g.kernel[d]));
		}
		rem = V(l.k, ol);
		for (int d = nsp - 1; d >= 0; d--) {
			od[d] = LET(l.k, &pt, "od", MOD(l.k, rem, I(l.k, g.out[d])));
			rem = DIV(l.k, rem, I(l.k, g.out[d]));
		}
		kir_expr *lo[CONV_MAX_SPATIAL], *fr[CONV_MAX_SPATIAL], *near = NULL;
		for (int d = 0; d < nsp; d++) {
			kir_expr *base = ADD(l.k, SUB(l.k, MUL(l.k, od[d], I(l.k, g.stride[d])), I(l.k, g.pad_begin[d])), MUL(l.k, kd[d], I(l.k, g.dil[d])));
			kir_expr *at = ADD(l.k, MUL(l.k, ADD(l.k, MUL(l.k, tap, I(l.k, nsp)), I(l.k, d)), I(l.k, c.P)), V(l.k, ol));
			kir_expr *pos = LET(l.k, &pt, "pos", BIN(l.k, KIR_ADD, CAST(l.k, D, CAST(l.k, TBC_DT_I64, base)), CAST(l.k, D, kir_e_load(k, off, at))));
			kir_expr *ok = AND(l.k, CMP(l.k, KIR_GT, pos, F(l.k, D, -2.0)), CMP(l.k, KIR_LT, pos, F(l.k, D, (double)g.in[d] + 1.0)));
			near = near ? AND(l.k, near, ok) : ok;
			pos = LET(l.k, &pt, "pos", SEL(l.k, ok, pos, F(l.k, D, 0))); /* keeps the cast below defined */
			kir_expr *f = LET(l.k, &pt, "f", kir_e_unary(k, KIR_FLOOR, pos));
			lo[d] = LET(l.k, &pt, "lo", CAST(l.k, KIR_INDEX, CAST(l.k, TBC_DT_I64, f)));
			fr[d] = LET(l.k, &pt, "fr", BIN(l.k, KIR_SUB, pos, f));
		}
		near = LET(l.k, &pt, "near", near);
		kir_var *acc = kir_var_new(k, "acc", D);
		kir_block_add(k, &pt, kir_s_set(k, acc, F(l.k, D, 0)));
		for (unsigned corner = 0; corner < (1u << nsp); corner++) {
			kir_expr *w = NULL, *inside = NULL, *il = I(l.k, 0);
			for (int d = 0; d < nsp; d++) {
				unsigned bit = (corner >> (nsp - 1 - d)) & 1u;
				kir_expr *i = bit ? ADD(l.k, lo[d], I(l.k, 1)) : lo[d];
				kir_expr *wd = bit ? fr[d] : BIN(l.k, KIR_SUB, F(l.k, D, 1), fr[d]);
				w = w ? BIN(l.k, KIR_MUL, w, wd) : BIN(l.k, KIR_MUL, F(l.k, D, 1), wd);
				kir_expr *ok = AND(l.k, CMP(l.k, KIR_GE, i, I(l.k, 0)), CMP(l.k, KIR_LT, i, I(l.k, g.in[d])));
				inside = inside ? AND(l.k, inside, ok) : ok;
				il = ADD(l.k, MUL(l.k, il, I(l.k, g.in[d])), MIN(l.k, MAX(l.k, i, I(l.k, 0)), I(l.k, g.in[d] - 1)));
			}
			kir_expr *wv2 = LET(l.k, &pt, "w", w);
			kir_expr *use = AND(l.k, AND(l.k, near, inside), CMP(l.k, KIR_NE, wv2, F(l.k, D, 0)));
			kir_expr *sum = BIN(l.k, KIR_ADD, V(l.k, acc), BIN(l.k, KIR_MUL, wv2, CAST(l.k, D, kir_e_load(k, x, ADD(l.k, plane, il)))));
			kir_block_add(k, &pt, kir_s_set(k, acc, SEL(l.k, use, sum, V(l.k, acc))));
		}
		kir_expr *v = V(l.k, acc);
		if (mask) v = BIN(l.k, KIR_MUL, CAST(l.k, D, kir_e_load(k, mask, ADD(l.k, MUL(l.k, tap, I(l.k, c.P)), V(l.k, ol)))), v);
		kir_block_add(k, &pt, kir_s_store(k, col, ADD(l.k, MUL(l.k, V(l.k, rv), I(l.k, c.P)), V(l.k, ol)), CAST(l.k, c.ct, v)));
		kir_block_add(k, &row, kir_s_for(k, ol, I(l.k, 0), I(l.k, c.P), 1, KIR_LOOP_SEQUENTIAL, pt.first));
		kir_expr *rows = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, c.G * c.Kg));
		if (!lk_end(&l, kir_s_for(k, rv, I(l.k, 0), rows, 1, KIR_LOOP_PARALLEL, row.first))) return LOWER_FAILED;
	}
	return conv_gemm_launch(cx, "deformconv", &c, wv, bv, cb, yb, xt->dims[0], c.ct);
}

lower_result lower_conv_more(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_ConvTranspose: return lower_conv_transpose(cx, op);
	case TBC_OP_MaxUnpool: return lower_max_unpool(cx, op);
	case TBC_OP_GridSample: return lower_grid_sample(cx, op);
	case TBC_OP_RoiAlign: return lower_roi_align(cx, op);
	case TBC_OP_DeformConv: return lower_deform_conv(cx, op);
	default: return LOWER_NOT_MINE;
	}
}
