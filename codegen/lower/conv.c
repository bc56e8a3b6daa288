/* Conv and the pools.
 *
 * Conv is an im2col + GEMM generator: a kernel copies the input windows into
 * a scratch matrix col[n, g][(c, k...)][(o...)] (zero where a tap falls in
 * the padding), then the GEMM generator (codegen/lower/lower_gemm.h) computes
 * y[n, g] = W[g] (Mg x Kg) * col[n, g] (Kg x P) with the bias added as it
 * stores.  A 1x1 convolution with unit strides and no padding reads X itself
 * as the matrix (no copy).  The scratch is one buffer per dtype and batch dim
 * shared by every Conv of the program (launches run in order), sized for the
 * largest.
 *
 * Pools walk each window with per-dim tap ranges computed from the output
 * position (no test per tap): parallel over (n, c) planes, sequential over
 * output positions and taps; MaxPool without Indices goes a row at a time
 * with a vector loop over the row's interior (maxpool_rows).  Geometry (pads, auto_pad, ceil_mode, output
 * sizes) comes from the interpreter's own functions (ir/kernels/conv_util.h),
 * so shapes and results agree by construction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower_conv.h"
#include "codegen/lower/lower_gemm.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/conv_util.h"

/* ---- Shorthands ----------------------------------------------------------------*/
#define CONV_MAX_TAPS_FLAT 49 /* depthwise_flat: up to a 7 x 7 kernel, a local per tap */

static kir_expr *fconst(lk *l, tbc_dtype t, double v) {
	return tbc_dtype_is_float(t) ? kir_e_float(l->k, t, v) : kir_e_int(l->k, t, (int64_t)v);
}

lower_result conv_failed(bool ok) { return ok ? LOWER_OK : LOWER_FAILED; }
lower_result conv_refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "op %s %s has no lowering yet", tbc_ops[op->code].onnx_name, why);
	return LOWER_FAILED;
}

bool conv_static_dims(const tbc_type *t, int from) {
	for (int d = from; d < t->rank; d++)
		if (t->dims[d].sym) return false;
	return true;
}

bool conv_static_empty(const tbc_type *t) {
	for (int d = 0; d < t->rank; d++)
		if (!t->dims[d].sym && t->dims[d].size == 0) return true;
	return false;
}

/* Compute type of a float op over dt (narrow floats in f32). */
bool conv_float_ct(tbc_dtype dt, tbc_dtype *ct) {
	if (dt == TBC_DT_F32 || dt == TBC_DT_F16 || dt == TBC_DT_BF16) *ct = TBC_DT_F32;
	else if (dt == TBC_DT_F64) *ct = TBC_DT_F64;
	else return false;
	return true;
}

/* ---- Conv ---------------------------------------------------------------------------*/
static int64_t conv_col_pitch(const conv_gemm *c) { return c->colp ? c->colp : c->P; }

kir_expr *conv_gemm_base(void *ctx, lk *l, int which, kir_expr *batch) {
	conv_gemm *c = ctx;
	if (c->transposed) /* a: col^T, b: the group's columns of W^T */
		which = which == 0 ? 1 : which == 1 ? 3 : 2;
	switch (which) {
	case 0: return c->G == 1 ? NULL : MUL(l->k, MOD(l->k, batch, I(l->k, c->G)), I(l->k, c->Mg * c->Kg));
	case 1:
		if (c->a_img)
			return ADD(l->k, MUL(l->k, DIV(l->k, batch, I(l->k, c->G)), I(l->k, c->a_img)),
				   MUL(l->k, MOD(l->k, batch, I(l->k, c->G)), I(l->k, c->a_grp)));
		return MUL(l->k, batch, I(l->k, c->Kg * conv_col_pitch(c)));
	case 3: return c->G == 1 ? NULL : MUL(l->k, MOD(l->k, batch, I(l->k, c->G)), I(l->k, c->wt_group));
	default: return MUL(l->k, batch, I(l->k, c->Mg * (c->yrows ? c->yrows : c->P)));
	}
}

kir_expr *conv_gemm_epi(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col) {
	conv_gemm *c = ctx;
	if (c->bias) {
		kir_expr *ch = c->transposed ? col : row; /* the output channel in its group */
		kir_expr *m = c->G == 1 ? ch : ADD(l->k, MUL(l->k, MOD(l->k, batch, I(l->k, c->G)), I(l->k, c->Mg)), ch);
		acc = kir_e_binary(l->k, KIR_ADD, acc, kir_e_cast(l->k, c->ct, kir_e_load(l->k, c->bias, m)));
	}
	return conv_act(c, l->k, kir_e_cast(l->k, c->yt, acc));
}

kir_expr *conv_act(const conv_gemm *c, kir_kernel *k, kir_expr *v) {
	if (!c->act || !v) return v;
	kir_expr *x[8] = {v};
	for (int i = 1; i < c->act->n_inputs && i < 8; i++)
		x[i] = c->act->inputs[i] ? lower_scalar_const(k, c->act->inputs[i]) : NULL;
	return lower_ew_expr(c->cx, k, c->act, x);
}

/* The op a Conv's stores may apply for it: the only reader of y, right
 * after it, elementwise on y alone (y its first input, any other a scalar
 * constant: Relu, Clip with constant bounds, LeakyRelu), of y's type, where
 * its result's storage does not overlap the convolution's inputs (the
 * kernel writes the result while it reads them).  Applied as the sums are
 * stored, it saves a pass over y (MobileNetV2's Clip after each
 * convolution: 3.4% of its time).  TBC_CONV_ACTIVATION=0: never. */
static const tbc_op *conv_activation(lower_cx *cx, const tbc_op *op) {
	const char *e = getenv("TBC_CONV_ACTIVATION");
	const tbc_value *yv = op->outputs[0];
	const tbc_op *a = op->next;
	if ((e && !strcmp(e, "0")) || !a || !yv || !yv->uses || yv->uses->next || yv->uses->op != a || yv->uses->index != 0)
		return NULL;
	for (int i = 0; i < yv->graph->n_outputs; i++)
		if (yv->graph->outputs[i] == yv) return NULL;
	if (tbc_ops[a->code].category != TBC_CAT_ELEMENTWISE || a->code == TBC_OP_Dropout || a->code == TBC_OP_BitCast ||
	    !lower_ew_supported(a) || a->n_outputs != 1 || !a->outputs[0] || a->n_inputs > 8)
		return NULL;
	const tbc_value *av = a->outputs[0];
	if (av->type.dtype != yv->type.dtype || !tbc_type_same_dims(&av->type, &yv->type)) return NULL;
	for (int i = 1; i < a->n_inputs; i++)
		if (a->inputs[i] && (a->inputs[i]->kind != TBC_VALUE_CONST || !a->inputs[i]->constant ||
				     a->inputs[i]->constant->numel != 1 || a->inputs[i]->type.dtype != yv->type.dtype))
			return NULL;
	if (cx->load_time && cx->load_time[yv->id] != cx->load_time[av->id]) return NULL;
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && lower_storage_overlaps(cx, av, op->inputs[i])) return NULL;
	return a;
}

/* The rows of a tile over P rows, mr or up to two fewer, whichever pads P
 * least (7 for 49 and 196); the rows they pad P to in *padded. */
static int tile_rows(int64_t P, int mr, int64_t *padded) {
	int best = P < mr ? (int)P : mr;
	int64_t best_rows = (P + best - 1) / best * best;
	for (int r = best - 1; r >= mr - 3 && r >= 1; r--) {
		int64_t rows = (P + r - 1) / r * r;
		if (rows < best_rows) best = r, best_rows = rows;
	}
	*padded = best_rows;
	return best;
}

/* The register tile's rows when the GEMM is computed transposed, 0 when it
 * is not.  A tile of mr x nr sums (nr the vector direction, gemm_tile_shape)
 * costs its whole area however much of it the matrix fills: the last column
 * tile overlaps the one before, the last row tile repeats a row.  Laid out
 * as it is, positions are columns: 7 x 7 positions fill 49 of 64, 14 x 14
 * 196 of 224, and fewer positions than nr (a convolution of a 1 x 1 map)
 * fill a vector's width with less.  Transposed, the output channels are the
 * columns (ResNet's and MobileNetV2's counts are multiples of 32, their
 * weights then whole panels) and the positions the rows, in tiles of a few
 * rows less than mr where that count divides them (7 for 49 and 196).  It
 * pays where the area falls by more than a tenth: the transposed tile's
 * stores are scalar (y's channels lie P apart) and it has no K blocks
 * (matmul.c, k_block).  Float weights known when compiling, in the
 * compute type; the target's tile from gemm_tile_shape; a target whose
 * constants may be laid out in panels (gemv_panels: not when a device
 * program shares the CPU's weights, codegen/compile.c). */
int conv_transposed_rows(const lower_cx *cx, const conv_gemm *c, const tbc_value *wv, tbc_dtype xt) {
	if (wv->kind != TBC_VALUE_CONST || !wv->constant || wv->type.dtype != c->ct || xt != c->ct || c->yt != c->ct) return 0;
	return conv_transposed_tile_rows(cx, c);
}

int conv_transposed_tile_rows(const lower_cx *cx, const conv_gemm *c) {
	const char *e = getenv("TBC_CONV_TRANSPOSED"); /* 0: never, for measuring */
	if ((e && !strcmp(e, "0")) || cx->target->parallel == TBC_PAR_GRID || c->pairs || !cx->target->gemv_panels)
		return 0;
	int mr, nr;
	gemm_tile_shape(cx->target, c->ct, &mr, &nr);
	if (c->Mg % nr || c->P < 1) return 0;
	int64_t cols = c->P < nr ? nr : (c->P + nr - 1) / nr * nr;
	double as_is = (double)((c->Mg + mr - 1) / mr * mr) * (double)cols;
	int64_t best_rows = 0;
	int best = tile_rows(c->P, mr, &best_rows);
	return (double)best_rows * (double)c->Mg * 1.1 < as_is ? best : 0;
}

lower_result conv_gemm_launch(lower_cx *cx, const char *name, conv_gemm *c, const tbc_value *wv, const tbc_value *bv,
			      int colb, int yb, tbc_dim batch, tbc_dtype xt) {
	lk l;
	if (!lk_begin(&l, cx, name)) return LOWER_FAILED;
	gemm_spec s = {.ct = c->ct};
	int tmr = conv_transposed_rows(cx, c, wv, xt);
	int64_t panel_stride = 0;
	c->transposed = tmr > 0 && gemm_const_tile_panels(&l, wv, c->M, c->Kg, true, c->ct, &s.b) &&
			kir_e_const_index(s.b.panel_stride, &panel_stride);
	c->wt_group = c->transposed ? c->Mg / s.b.panel * panel_stride : 0; /* a group's Mg / nr panels */
	s.a.buf = c->transposed ? lk_buf(&l, colb) : lk_value(&l, wv);
	if (!c->transposed) s.b.buf = lk_buf(&l, colb);
	s.y.buf = lk_buf(&l, yb);
	if (bv && !(c->bias = lk_value(&l, bv))) return LOWER_FAILED;
	if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
	s.K = I(l.k, c->Kg);
	s.NB = MUL(l.k, lk_dim(&l, batch), I(l.k, c->G));
	if (c->transposed) {
		/* y^T (P x Mg) = col^T (P x Kg) W^T (Kg x Mg, panels) */
		s.M = I(l.k, c->P), s.N = I(l.k, c->Mg), s.mr = tmr;
		s.a.rs = I(l.k, 1), s.a.cs = I(l.k, conv_col_pitch(c));
		s.y.rs = I(l.k, 1), s.y.cs = I(l.k, c->P);
	} else {
		s.M = I(l.k, c->Mg), s.N = I(l.k, c->P);
		s.a.rs = I(l.k, c->Kg), s.a.cs = I(l.k, 1);
		s.b.rs = I(l.k, c->pairs ? 2 * c->P : conv_col_pitch(c)), s.b.cs = I(l.k, 1);
		s.b.pairs = c->pairs;
		s.y.rs = I(l.k, c->P), s.y.cs = I(l.k, 1);
	}
	s.ctx = c;
	s.base = conv_gemm_base;
	s.epi = conv_gemm_epi;
	return conv_failed(lk_end(&l, gemm_generate(&l, &s)));
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* The output positions [*oa, *ob) of a dim with OW outputs, stride s and
 * input size in whose taps o * s + lo .. o * s + hi all lie in the input. */
static void interior(int64_t lo, int64_t hi, int64_t s, int64_t in, int64_t OW, int64_t *oa, int64_t *ob) {
	int64_t a = -floor_div(lo, s), b = floor_div(in - 1 - hi, s) + 1;
	a = a < 0 ? 0 : a > OW ? OW : a;
	*oa = a, *ob = b < a ? a : b > OW ? OW : b;
}

/* The valid taps [lo, hi) of a window starting at base (dilation dil,
 * kernel K, input size in): lo = max(0, ceil(-base / dil)),
 * hi = min(K, floor((in - 1 - base) / dil) + 1); set in blk. */
static void tap_range(lk *l, kir_block *blk, kir_expr *base, int64_t dil, int64_t K, int64_t in, kir_expr **lo,
		      kir_expr **hi) {
	*lo = LET(l->k, blk, "lo", MAX(l->k, I(l->k, 0), DIV(l->k, ADD(l->k, SUB(l->k, I(l->k, 0), base), I(l->k, dil - 1)), I(l->k, dil))));
	*hi = LET(l->k, blk, "hi", MIN(l->k, I(l->k, K), ADD(l->k, DIV(l->k, SUB(l->k, I(l->k, in - 1), base), I(l->k, dil)), I(l->k, 1))));
}

/* A device's im2col: one parallel loop over every element of col, each
 * decomposed into its row (image and group, channel, tap) and output
 * position, a load of its tap or 0 in the padding, so the grid covers the
 * whole matrix whatever the batch. */
static bool im2col_flat(lk *l, const conv_geom *g, kir_buffer *x, kir_buffer *col, kir_expr *images, int64_t Kg, int64_t P) {
	kir_kernel *k = l->k;
	int nsp = g->nsp, w = nsp - 1;
	int64_t KS = conv_prod(0, nsp, g->kernel), in_size = conv_prod(0, nsp, g->in);
	int64_t KW = g->kernel[w], KR = KS / KW, Cg = Kg / KS;
	kir_var *f = kir_var_new(k, "f", KIR_INDEX);
	kir_block b = {0};
	kir_expr *fv = V(k, f);
	kir_expr *pos = LET(k, &b, "p", MOD(k, fv, I(k, P)));
	kir_expr *q = LET(k, &b, "q", DIV(k, fv, I(k, P)));
	kir_expr *r = LET(k, &b, "r", DIV(k, q, I(k, KW)));
	kir_expr *rem = LET(k, &b, "rem", MOD(k, r, I(k, Cg * KR)));
	kir_expr *xbase = LET(k, &b, "xbase", MUL(k, ADD(k, MUL(k, DIV(k, r, I(k, Cg * KR)), I(k, Cg)), DIV(k, rem, I(k, KR))),
						       I(k, in_size)));
	kir_expr *kd[CONV_MAX_SPATIAL], *kt = MOD(k, rem, I(k, KR));
	kd[w] = MOD(k, q, I(k, KW));
	for (int d = w - 1; d >= 0; d--) {
		kd[d] = MOD(k, kt, I(k, g->kernel[d]));
		kt = DIV(k, kt, I(k, g->kernel[d]));
	}
	kir_expr *inside = kir_e_int(k, TBC_DT_BOOL, 1), *xi = xbase, *ostride = I(k, 1);
	int64_t istride = 1;
	for (int d = w; d >= 0; d--) {
		kir_expr *o = MOD(k, DIV(k, pos, ostride), I(k, g->out[d]));
		kir_expr *i = LET(k, &b, "i", ADD(k, SUB(k, MUL(k, o, I(k, g->stride[d])), I(k, g->pad_begin[d])),
						   MUL(k, kd[d], I(k, g->dil[d]))));
		inside = kir_e_binary(k, KIR_AND, inside,
				      kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, i, I(k, 0)), kir_e_cmp(k, KIR_LT, i, I(k, g->in[d]))));
		xi = ADD(k, xi, MUL(k, CLAMP(l->k, i, g->in[d]), I(k, istride)));
		istride *= g->in[d];
		ostride = MUL(k, ostride, I(k, g->out[d]));
	}
	kir_expr *zero = x->dtype == TBC_DT_F32 || x->dtype == TBC_DT_F64 ? kir_e_float(k, x->dtype, 0)
								       : kir_e_cast(k, x->dtype, kir_e_float(k, TBC_DT_F32, 0));
	kir_block_add(k, &b, kir_s_store(k, col, fv, kir_e_select(k, inside, kir_e_load(k, x, xi), zero)));
	/* images (batch x groups) x Kg rows of P positions */
	return lk_end(l, kir_s_for(k, f, I(k, 0), MUL(k, MUL(k, images, I(k, Kg)), I(k, P)), 1, KIR_LOOP_PARALLEL, b.first));
}

/* col[(n*G + g)*Kg + kk][o] = x[n][g*Cg + kk / KS][o * s + k * d - pb] or 0.
 * Parallel over the rows of col taken KW at a time (one tap of the outer
 * kernel dims, every tap kw of the last), then over output positions of the
 * outer dims; per kw, generated apart, the positions ow whose tap lies
 * inside the input row are a copy with constant bounds (a vector loop, for
 * stride 1 a contiguous one), the few at the borders select 0 or a clamped
 * load, and a row whose outer tap is in the padding is all zeros. */
static bool im2col(lower_cx *cx, const tbc_op *op, const conv_geom *g, int xb, int cb, tbc_dim nd, int64_t C,
		   int64_t Kg, int64_t P, int64_t pitch, bool pairs) {
	lk l;
	if (!lk_begin(&l, cx, "im2col")) return false;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_buf(&l, xb), *col = lk_buf(&l, cb);
	if (!x || !col) return false;
	(void)C;
	if (cx->target->parallel == TBC_PAR_GRID)
		return im2col_flat(&l, g, x, col, MUL(l.k, lk_dim(&l, nd), I(l.k, tbc_attr_int(op, "group", 1))), Kg, P);
	int nsp = g->nsp, w = nsp - 1;
	int64_t KS = conv_prod(0, nsp, g->kernel), in_size = conv_prod(0, nsp, g->in);
	int64_t KW = g->kernel[w], KR = KS / KW, Cg = Kg / KS;
	int64_t OW = g->out[w], sw = g->stride[w], pw = g->pad_begin[w], dw = g->dil[w], inw = g->in[w];
	kir_var *r = kir_var_new(k, "r", KIR_INDEX);
	kir_block body = {0};
	kir_expr *rem = LET(l.k, &body, "rem", MOD(l.k, V(l.k, r), I(l.k, Cg * KR)));
	kir_expr *ng = DIV(l.k, V(l.k, r), I(l.k, Cg * KR)), *cc = DIV(l.k, rem, I(l.k, KR));
	kir_expr *kt = MOD(l.k, rem, I(l.k, KR));
	kir_expr *xbase = LET(l.k, &body, "xbase", MUL(l.k, ADD(l.k, MUL(l.k, ng, I(l.k, Cg)), cc), I(l.k, in_size)));
	kir_expr *kd[CONV_MAX_SPATIAL];
	for (int d = w - 1; d >= 0; d--) {
		kd[d] = LET(l.k, &body, "kt", MOD(l.k, kt, I(l.k, g->kernel[d])));
		kt = DIV(l.k, kt, I(l.k, g->kernel[d]));
	}
	/* One position of the outer dims: its tap, in the input or not. */
	kir_block pos = {0};
	kir_var *o[CONV_MAX_SPATIAL];
	/* Row R = r KW + kw of col, position pos: at R pitch + pos, or in k pairs
	 * (Kg even, so a pair never spans two matrices) at (R / 2) 2 P +
	 * 2 pos + R % 2. */
	kir_expr *inside = kir_e_int(k, TBC_DT_BOOL, 1), *xi = xbase, *ci = I(l.k, 0);
	int64_t istride = inw, ostride = OW;
	for (int d = w - 1; d >= 0; d--) {
		o[d] = kir_var_new(k, "o", KIR_INDEX);
		kir_expr *i = ADD(l.k, SUB(l.k, MUL(l.k, V(l.k, o[d]), I(l.k, g->stride[d])), I(l.k, g->pad_begin[d])),
				  MUL(l.k, kd[d], I(l.k, g->dil[d])));
		kir_expr *ok = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, i, I(l.k, 0)), kir_e_cmp(k, KIR_LT, i, I(l.k, g->in[d])));
		inside = kir_e_binary(k, KIR_AND, ok, inside);
		xi = ADD(l.k, xi, MUL(l.k, CLAMP(l.k, i, g->in[d]), I(l.k, istride)));
		ci = ADD(l.k, ci, MUL(l.k, V(l.k, o[d]), I(l.k, ostride)));
		istride *= g->in[d];
		ostride *= g->out[d];
	}
	kir_expr *xrow = LET(l.k, &pos, "xrow", xi), *crow = LET(l.k, &pos, "crow", pairs ? MUL(l.k, ci, I(l.k, 2)) : ci);
	int64_t pstep = pairs ? 2 : 1; /* elements between positions */
	kir_expr *zero = x->dtype == TBC_DT_F32 || x->dtype == TBC_DT_F64 ? kir_e_float(k, x->dtype, 0)
								       : kir_e_cast(k, x->dtype, kir_e_float(k, TBC_DT_F32, 0));
	kir_block copy = {0}, zeros = {0};
	for (int64_t kw = 0; kw < KW; kw++) {
		kir_expr *R = ADD(l.k, MUL(l.k, V(l.k, r), I(l.k, KW)), I(l.k, kw));
		kir_expr *rowat = pairs ? ADD(l.k, MUL(l.k, DIV(l.k, R, I(l.k, 2)), I(l.k, 2 * P)), MOD(l.k, R, I(l.k, 2)))
					: MUL(l.k, R, I(l.k, pitch));
		kir_expr *cr = ADD(l.k, crow, rowat);
		/* Inside the row: 0 <= ow s - pw + kw dw <= inw - 1. */
		int64_t off = kw * dw - pw, oa, ob;
		interior(off, off, sw, inw, OW, &oa, &ob);
		for (int part = 0; part < 3; part++) {
			int64_t from = part == 0 ? 0 : part == 1 ? oa : ob, to = part == 0 ? oa : part == 1 ? ob : OW;
			if (from >= to) continue;
			kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
			kir_expr *i = ADD(l.k, MUL(l.k, V(l.k, ow), I(l.k, sw)), I(l.k, off)), *v;
			if (part == 1) {
				v = kir_e_load(k, x, ADD(l.k, xrow, i));
			} else {
				kir_expr *ok = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, i, I(l.k, 0)), kir_e_cmp(k, KIR_LT, i, I(l.k, inw)));
				v = kir_e_select(k, ok, kir_e_load(k, x, ADD(l.k, xrow, CLAMP(l.k, i, inw))), zero);
			}
			kir_stmt *st = kir_s_store(k, col, ADD(l.k, cr, MUL(l.k, V(l.k, ow), I(l.k, pstep))), v);
			kir_block_add(k, &copy, kir_s_for(k, ow, I(l.k, from), I(l.k, to), 1, part == 1 ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL, st));
		}
		if (w == 0) continue;
		kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
		kir_block_add(k, &zeros, kir_s_for(k, ow, I(l.k, 0), I(l.k, OW), 1, KIR_LOOP_VECTOR,
						  kir_s_store(k, col, ADD(l.k, cr, MUL(l.k, V(l.k, ow), I(l.k, pstep))), zero)));
	}
	kir_block_add(k, &pos, w > 0 ? kir_s_if(k, inside, copy.first, zeros.first) : copy.first);
	kir_stmt *st = pos.first;
	for (int d = w - 1; d >= 0; d--) st = kir_s_for(k, o[d], I(l.k, 0), I(l.k, g->out[d]), 1, KIR_LOOP_SEQUENTIAL, st);
	kir_block_add(k, &body, st);
	kir_expr *rows = MUL(l.k, MUL(l.k, lk_dim(&l, nd), I(l.k, tbc_attr_int(op, "group", 1))), I(l.k, Cg * KR));
	return lk_end(&l, kir_s_for(k, r, I(l.k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* A depthwise convolution (one input channel a group, any channel
 * multiplier) on a CPU target, a row at a time as maxpool_rows: output
 * plane pl of channel m reads input channel m / Mg; the output row along the
 * last spatial dim is the accumulator (y itself, first set to the bias),
 * and each valid tap of the outer dims adds w * x for every tap of the last
 * dim: over the row's interior a vector loop (stride-s loads), at the
 * borders a tap in the padding leaves the sum as it is.  im2col + GEMM
 * would copy every window and multiply one row (Mg) by nine columns. */
static lower_result depthwise_rows(lower_cx *cx, const tbc_op *op, const conv_geom *g, const conv_gemm *c, int yb) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[1];
	const tbc_value *bv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_type *xt = &xv->type;
	lk l;
	if (!lk_begin(&l, cx, "depthwise")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	k->contract = true; /* y += w * x: one rounding instead of two, as the GEMMs */
	kir_buffer *x = lk_value(&l, xv), *w = lk_value(&l, wv), *y = lk_buf(&l, yb), *bias = bv ? lk_value(&l, bv) : NULL;
	if (!x || !w || !y || (bv && !bias)) return LOWER_FAILED;
	tbc_dtype ct = c->ct;
	int nsp = g->nsp, wd = nsp - 1;
	int64_t isz = conv_prod(0, nsp, g->in), osz = conv_prod(0, nsp, g->out), taps = conv_prod(0, nsp, g->kernel);
	int64_t C = c->G, M = c->M, Mg = c->Mg;
	int64_t OW = g->out[wd], s = g->stride[wd], pb = g->pad_begin[wd], dil = g->dil[wd], KW = g->kernel[wd], in = g->in[wd];

	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX), *o[CONV_MAX_SPATIAL], *kv[CONV_MAX_SPATIAL];
	for (int d = 0; d < nsp; d++) o[d] = kir_var_new(k, "o", KIR_INDEX), kv[d] = kir_var_new(k, "k", KIR_INDEX);
	kir_block plane = {0}, row = {0};
	kir_expr *m = LET(l.k, &plane, "m", MOD(l.k, V(l.k, pl), I(l.k, M)));
	kir_expr *xplane = LET(l.k, &plane, "xplane", MUL(l.k, ADD(l.k, MUL(l.k, DIV(l.k, V(l.k, pl), I(l.k, M)), I(l.k, C)),
								     DIV(l.k, m, I(l.k, Mg))), I(l.k, isz)));
	kir_expr *init = bias ? LET(l.k, &plane, "bias", kir_e_cast(k, ct, kir_e_load(k, bias, m))) : fconst(&l, ct, 0);
	kir_expr *yrow = MUL(l.k, V(l.k, pl), I(l.k, osz)), *xrow = xplane, *wtap = MUL(l.k, m, I(l.k, taps));
	kir_expr *lo[CONV_MAX_SPATIAL], *hi[CONV_MAX_SPATIAL];
	int64_t ostride = OW, istride = in, kstride = KW;
	for (int d = wd - 1; d >= 0; d--) {
		kir_expr *base = LET(l.k, &row, "base", SUB(l.k, MUL(l.k, V(l.k, o[d]), I(l.k, g->stride[d])), I(l.k, g->pad_begin[d])));
		tap_range(&l, &row, base, g->dil[d], g->kernel[d], g->in[d], &lo[d], &hi[d]);
		yrow = ADD(l.k, yrow, MUL(l.k, V(l.k, o[d]), I(l.k, ostride)));
		/* in range for kv[d] in [lo, hi); the clamp says so to kir_verify */
		xrow = ADD(l.k, xrow, MUL(l.k, CLAMP(l.k, ADD(l.k, base, MUL(l.k, V(l.k, kv[d]), I(l.k, g->dil[d]))), g->in[d]),
					  I(l.k, istride)));
		wtap = ADD(l.k, wtap, MUL(l.k, V(l.k, kv[d]), I(l.k, kstride)));
		ostride *= g->out[d], istride *= g->in[d], kstride *= g->kernel[d];
	}
	yrow = LET(l.k, &row, "yrow", yrow);
	kir_var *ov = kir_var_new(k, "ow", KIR_INDEX);
	kir_block_add(k, &row, kir_s_for(k, ov, I(l.k, 0), I(l.k, OW), 1, KIR_LOOP_VECTOR,
					 kir_s_store(k, y, ADD(l.k, yrow, V(l.k, ov)), kir_e_cast(k, y->dtype, init))));

	/* Each valid tap of the outer dims: each tap of the last dim over the
	 * row's three parts. */
	kir_block tapblk = {0};
	kir_expr *xr = LET(l.k, &tapblk, "xrow", xrow), *wr = LET(l.k, &tapblk, "wtap", wtap);
	for (int64_t kw = 0; kw < KW; kw++) {
		kir_expr *wk = LET(l.k, &tapblk, "w", kir_e_cast(k, ct, kir_e_load(k, w, ADD(l.k, wr, I(l.k, kw)))));
		int64_t off = kw * dil - pb, oa, ob;
		interior(off, off, s, in, OW, &oa, &ob);
		for (int part = 0; part < 3; part++) {
			int64_t from = part == 0 ? 0 : part == 1 ? oa : ob, to = part == 0 ? oa : part == 1 ? ob : OW;
			if (from >= to) continue;
			kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
			kir_expr *at = ADD(l.k, yrow, V(l.k, ow)), *i = ADD(l.k, MUL(l.k, V(l.k, ow), I(l.k, s)), I(l.k, off));
			kir_expr *acc = kir_e_cast(k, ct, kir_e_load(k, y, at));
			kir_expr *xv_ = kir_e_cast(k, ct, kir_e_load(k, x, ADD(l.k, xr, part == 1 ? i : CLAMP(l.k, i, in))));
			kir_expr *sum = kir_e_binary(k, KIR_ADD, acc, kir_e_binary(k, KIR_MUL, wk, xv_));
			if (part != 1) /* a tap in the padding adds nothing */
				sum = kir_e_select(k, kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, i, I(l.k, 0)), kir_e_cmp(k, KIR_LT, i, I(l.k, in))),
						   sum, acc);
			kir_block_add(k, &tapblk, kir_s_for(k, ow, I(l.k, from), I(l.k, to), 1,
							    part == 1 ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL,
							    kir_s_store(k, y, at, kir_e_cast(k, y->dtype, sum))));
		}
	}
	kir_stmt *st = tapblk.first;
	for (int d = wd - 1; d >= 0; d--) st = kir_s_for(k, kv[d], lo[d], hi[d], 1, KIR_LOOP_SEQUENTIAL, st);
	kir_block_add(k, &row, st);
	if (c->act) { /* the row summed: the activation over it */
		kir_var *av = kir_var_new(k, "ow", KIR_INDEX);
		kir_expr *at = ADD(l.k, yrow, V(l.k, av));
		kir_block_add(k, &row, kir_s_for(k, av, I(l.k, 0), I(l.k, OW), 1, KIR_LOOP_VECTOR,
						 kir_s_store(k, y, at, conv_act(c, k, kir_e_load(k, y, at)))));
	}
	st = row.first;
	for (int d = wd - 1; d >= 0; d--) st = kir_s_for(k, o[d], I(l.k, 0), I(l.k, g->out[d]), 1, KIR_LOOP_SEQUENTIAL, st);
	kir_block_add(k, &plane, st);
	kir_expr *planes = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, M));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(l.k, 0), planes, 1, KIR_LOOP_PARALLEL, plane.first)));
}

/* A stride-1 2-D depthwise convolution over a zero-padded copy of each
 * plane, as one flat loop: with the plane copied into xp of HP x WP (the
 * padding written as zeros), output (oh, ow) is at q = oh WP + ow of a flat
 * result whose every tap is xp[q + kh DH WP + kw DW], so one vector loop
 * over q computes every output of the plane, tap by tap in the rows' order
 * (kh, then kw, as depthwise_rows adds them), with no border cases; the
 * WP - OW columns past each row are computed and dropped as the rows are
 * copied out.  depthwise_rows' loops run over one output row, 7 or 14 long
 * in the last stages of MobileNetV2: LLVM kept them scalar (the row in 14
 * registers), and those convolutions were a third of the model's time.
 * The padded plane and the flat result are scratch of their own per plane
 * (depthwise_pad). */
static bool depthwise_flat_wanted(const conv_geom *g) {
	const char *e = getenv("TBC_DEPTHWISE_FLAT"); /* a row width at most which planes go flat; 0: never */
	int64_t widest = e ? atoll(e) : 64;
	return g->nsp == 2 && g->stride[0] == 1 && g->stride[1] == 1 && g->out[1] <= widest;
}

static lower_result depthwise_flat(lower_cx *cx, const tbc_op *op, const conv_geom *g, const conv_gemm *c, int yb) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[1];
	const tbc_value *bv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_type *xt = &xv->type;
	tbc_dtype ct = c->ct;
	int64_t IH = g->in[0], IW = g->in[1], OH = g->out[0], OW = g->out[1], KH = g->kernel[0], KW = g->kernel[1];
	int64_t DH = g->dil[0], DW = g->dil[1], PT = g->pad_begin[0], PL = g->pad_begin[1];
	int64_t WP = OW + (KW - 1) * DW, HP = OH + (KH - 1) * DH; /* every output's taps inside */
	int64_t XP = HP * WP, Q = (OH - 1) * WP + OW;             /* the flat result's last output + 1 */
	int64_t C = c->G, M = c->M, Mg = c->Mg, taps = KH * KW;
	if (PT + IH > HP || PL + IW > WP) return conv_refuse(cx, op, "with padding past its output"); /* pads < 0 */
	int sb = lower_shared_temp(cx, "depthwise_pad", ct, xt->dims[0], M * (XP + Q));
	if (sb < 0) return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "depthwise")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	k->contract = true; /* y += w * x: one rounding instead of two, as depthwise_rows */
	kir_buffer *x = lk_value(&l, xv), *w = lk_value(&l, wv), *y = lk_buf(&l, yb), *sc = lk_buf(&l, sb);
	kir_buffer *bias = bv ? lk_value(&l, bv) : NULL;
	if (!x || !w || !y || !sc || (bv && !bias)) return LOWER_FAILED;

	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX);
	kir_block plane = {0};
	kir_expr *m = LET(k, &plane, "m", MOD(k, V(k, pl), I(k, M)));
	kir_expr *xplane = LET(k, &plane, "xplane",
			       MUL(k, ADD(k, MUL(k, DIV(k, V(k, pl), I(k, M)), I(k, C)), DIV(k, m, I(k, Mg))), I(k, IH * IW)));
	kir_expr *sbase = LET(k, &plane, "sbase", MUL(k, V(k, pl), I(k, XP + Q)));
	kir_expr *ybase = LET(k, &plane, "ybase", ADD(k, sbase, I(k, XP)));
	/* xp: zeros, then the plane's rows at (PT, PL) */
	kir_var *i = kir_var_new(k, "i", KIR_INDEX);
	kir_block_add(k, &plane, kir_s_for(k, i, I(k, 0), I(k, XP), 1, KIR_LOOP_VECTOR,
					   kir_s_store(k, sc, ADD(k, sbase, V(k, i)), fconst(&l, ct, 0))));
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *cc = kir_var_new(k, "c", KIR_INDEX);
	kir_expr *to = ADD(k, ADD(k, sbase, MUL(k, ADD(k, V(k, r), I(k, PT)), I(k, WP))), ADD(k, V(k, cc), I(k, PL)));
	kir_expr *from = ADD(k, ADD(k, xplane, MUL(k, V(k, r), I(k, IW))), V(k, cc));
	kir_block_add(k, &plane, kir_s_for(k, r, I(k, 0), I(k, IH), 1, KIR_LOOP_SEQUENTIAL,
					   kir_s_for(k, cc, I(k, 0), I(k, IW), 1, KIR_LOOP_VECTOR,
						     kir_s_store(k, sc, to, kir_e_cast(k, ct, kir_e_load(k, x, from))))));
	/* the flat result: bias, then each tap */
	kir_expr *wt[CONV_MAX_TAPS_FLAT];
	for (int64_t t = 0; t < taps; t++)
		wt[t] = LET(k, &plane, "w", kir_e_cast(k, ct, kir_e_load(k, w, ADD(k, MUL(k, m, I(k, taps)), I(k, t)))));
	kir_expr *acc = bias ? LET(k, &plane, "bias", kir_e_cast(k, ct, kir_e_load(k, bias, m))) : fconst(&l, ct, 0);
	kir_var *q = kir_var_new(k, "q", KIR_INDEX);
	for (int64_t kh = 0; kh < KH; kh++)
		for (int64_t kw = 0; kw < KW; kw++) {
			kir_expr *at = ADD(k, ADD(k, sbase, V(k, q)), I(k, kh * DH * WP + kw * DW));
			acc = kir_e_binary(k, KIR_ADD, acc, kir_e_binary(k, KIR_MUL, wt[kh * KW + kw], kir_e_load(k, sc, at)));
		}
	kir_block_add(k, &plane, kir_s_for(k, q, I(k, 0), I(k, Q), 1, KIR_LOOP_VECTOR,
					   kir_s_store(k, sc, ADD(k, ybase, V(k, q)), acc)));
	/* the rows out, without the columns past OW */
	kir_var *oh = kir_var_new(k, "oh", KIR_INDEX), *ow = kir_var_new(k, "ow", KIR_INDEX);
	kir_expr *yat = ADD(k, ADD(k, MUL(k, V(k, pl), I(k, OH * OW)), MUL(k, V(k, oh), I(k, OW))), V(k, ow));
	kir_expr *rat = ADD(k, ADD(k, ybase, MUL(k, V(k, oh), I(k, WP))), V(k, ow));
	kir_block_add(k, &plane, kir_s_for(k, oh, I(k, 0), I(k, OH), 1, KIR_LOOP_SEQUENTIAL,
					   kir_s_for(k, ow, I(k, 0), I(k, OW), 1, KIR_LOOP_VECTOR,
						     kir_s_store(k, y, yat, conv_act(c, k, kir_e_cast(k, y->dtype, kir_e_load(k, sc, rat)))))));
	kir_expr *planes = MUL(k, lk_dim(&l, xt->dims[0]), I(k, M));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(k, 0), planes, 1, KIR_LOOP_PARALLEL, plane.first)));
}

/* A 2-D depthwise convolution whose input rows are its output rows'
 * stride times as long (IW = SW OW: the rows padded to keep their width at
 * stride 1, 'same' padding of an even width at stride 2, as nearly every
 * CNN's 3 x 3 depthwise layers), as flat vector loops over the plane with
 * no loop per row.  Number the outputs of virtual rows r (pitch OW)
 * q = r OW + ow, where output row oh is virtual row SH oh: tap (kh, kw)
 * of q reads input (r + kh DH - PT, SW ow + kw DW - PL), and with IW = SW
 * OW that is the plane's flat element SW q + off(kh, kw), a constant
 * offset (stride-SW loads).
 * - The plane goes in bands of BR virtual rows (a multiple of SH) whose
 *   taps span at most DEPTHWISE_BAND input elements.  A band whose span
 *   leaves the plane reads a copy of it (scratch `depthwise_pad`, a band a
 *   plane, so it stays in the first-level cache) with zeros where it
 *   leaves: a row outside the plane lands before or after it, in those
 *   zeros.  The other bands read the plane where it is.
 * - A column outside the row lands in the row above or below, so each tap
 *   column's load is taken only where its column is inside (ow from a
 *   constant table of a band's q mod OW: no division in the loop).
 * - At stride 1 the loop writes y.  At SH > 1, output rows of DEPTHWISE_ROW
 *   or more go a loop a row; shorter ones are computed with the SH - 1
 *   rows between them, into scratch of their own (`depthwise_rows`), and
 *   every SH-th row is copied out.
 * depthwise_flat computed the padded width's outputs and copied the rows
 * in and out one at a time (14 or 7 long in MobileNetV2: scalar), and
 * depthwise_rows loads and stores each output once per tap. */
#define DEPTHWISE_BAND 4096 /* elements of a band's input span, at most where rows allow */
#define DEPTHWISE_ROW 16    /* at stride SH > 1, output rows at least this long go a loop a row */

static bool depthwise_masked_wanted(const conv_geom *g) {
	const char *e = getenv("TBC_DEPTHWISE_MASKED"); /* 0: never, for measuring */
	int smax = e ? atoi(e) : 2;
	return g->nsp == 2 && g->stride[1] <= smax && g->stride[0] <= smax &&
	       g->in[1] == g->stride[1] * g->out[1] && g->pad_begin[0] >= 0 && g->pad_begin[1] >= 0 &&
	       g->kernel[0] * g->kernel[1] <= CONV_MAX_TAPS_FLAT && g->out[1] <= INT16_MAX;
}

/* depthwise_masked's geometry and its kernel's values for each band */
typedef struct dw_band {
	lk *l;
	const conv_gemm *c;
	int64_t W, HW, OW, OH, KH, KW, DH, DW, PT, PL, SH, SW, R, Q, lo, BR, BQ, BL;
	kir_buffer *x, *y, *sc, *zs, *cols;
	kir_expr *xplane, *sbase, *zbase, *yplane, *acc0, *wt[CONV_MAX_TAPS_FLAT];
} dw_band;

/* One band: virtual rows from q0 / OW (a multiple of SH), nq outputs,
 * its taps' span from input element `from` of the plane.  A span inside
 * the plane is read where it is (inside: the bands of the loop, and any
 * other whose fs, `from` known when compiling, says so); one that leaves
 * it is copied into the scratch between zeros. */
static void dw_band_emit(dw_band *d, kir_block *blk, kir_expr *q0, int64_t nq, kir_expr *from, bool inside, int64_t fs) {
	lk *l = d->l;
	kir_kernel *k = l->k;
	tbc_dtype ct = d->sc->dtype;
	kir_buffer *src = d->x;
	kir_expr *base = ADD(k, d->xplane, from);
	if (!inside) {
		int64_t z0 = fs < 0 ? (-fs < d->BL ? -fs : d->BL) : 0;
		int64_t z1 = d->HW - fs < d->BL ? (d->HW - fs > 0 ? d->HW - fs : 0) : d->BL;
		if (z1 < z0) z1 = z0;
		kir_var *i = kir_var_new(k, "i", KIR_INDEX);
		if (z0 > 0)
			kir_block_add(k, blk, kir_s_for(k, i, I(k, 0), I(k, z0), 1, KIR_LOOP_VECTOR,
							kir_s_store(k, d->sc, ADD(k, d->sbase, V(k, i)), fconst(l, ct, 0))));
		i = kir_var_new(k, "i", KIR_INDEX);
		if (z1 > z0)
			kir_block_add(k, blk, kir_s_for(k, i, I(k, z0), I(k, z1), 1, KIR_LOOP_VECTOR,
							kir_s_store(k, d->sc, ADD(k, d->sbase, V(k, i)),
								    kir_e_cast(k, ct, kir_e_load(k, d->x, ADD(k, base, V(k, i)))))));
		i = kir_var_new(k, "i", KIR_INDEX);
		if (d->BL > z1)
			kir_block_add(k, blk, kir_s_for(k, i, I(k, z1), I(k, d->BL), 1, KIR_LOOP_VECTOR,
							kir_s_store(k, d->sc, ADD(k, d->sbase, V(k, i)), fconst(l, ct, 0))));
		src = d->sc, base = d->sbase;
	}
	/* Outputs (bias, then each tap in the rows' order): at SH = 1 one loop
	 * over the band's q, writing y; at SH > 1 a loop a row where rows are
	 * wide, else over every virtual row into scratch (the rows between the
	 * output rows computed and dropped) and every SH-th row copied out.
	 * The band starts a row, so ow is the band's q mod OW. */
	int64_t rows = (nq / d->OW - 1) / d->SH + 1;
	bool by_rows = d->SH > 1 && d->OW >= DEPTHWISE_ROW;
	kir_var *q = kir_var_new(k, "q", KIR_INDEX), *oh = kir_var_new(k, "oh", KIR_INDEX);
	kir_expr *qv = by_rows ? ADD(k, MUL(k, V(k, oh), I(k, d->SH * d->OW)), V(k, q)) : V(k, q); /* band's virtual q */
	kir_expr *col = kir_e_load(k, d->cols, V(k, q)), *at = ADD(k, base, MUL(k, qv, I(k, d->SW)));
	kir_expr *acc = d->acc0;
	for (int64_t kh = 0; kh < d->KH; kh++)
		for (int64_t kw = 0; kw < d->KW; kw++) {
			/* column SW ow + c is inside for ow in [clo, chi) */
			int64_t c = kw * d->DW - d->PL, clo = c < 0 ? (-c + d->SW - 1) / d->SW : 0, chi = (d->W - c + d->SW - 1) / d->SW;
			kir_expr *v = kir_e_cast(k, ct, kir_e_load(k, src, ADD(k, at, I(k, (kh * d->DH - d->PT) * d->W + c - d->lo))));
			kir_expr *ok = clo > 0 ? kir_e_cmp(k, KIR_GE, col, kir_e_int(k, TBC_DT_I16, clo)) : NULL;
			if (chi < d->OW) {
				kir_expr *left = kir_e_cmp(k, KIR_LT, col, kir_e_int(k, TBC_DT_I16, chi < 0 ? 0 : chi));
				ok = ok ? kir_e_binary(k, KIR_AND, ok, left) : left;
			}
			if (ok) v = kir_e_select(k, ok, v, fconst(l, ct, 0));
			acc = kir_e_binary(k, KIR_ADD, acc, kir_e_binary(k, KIR_MUL, d->wt[kh * d->KW + kw], v));
		}
	if (d->SH == 1) {
		kir_block_add(k, blk, kir_s_for(k, q, I(k, 0), I(k, nq), 1, KIR_LOOP_VECTOR,
						kir_s_store(k, d->y, ADD(k, ADD(k, d->yplane, q0), V(k, q)),
							    conv_act(d->c, k, kir_e_cast(k, d->y->dtype, acc)))));
		return;
	}
	kir_expr *ybase = ADD(k, d->yplane, DIV(k, q0, I(k, d->SH))); /* output row q0 / (OW SH) */
	kir_expr *yat = ADD(k, ADD(k, ybase, MUL(k, V(k, oh), I(k, d->OW))), V(k, q));
	if (by_rows) {
		kir_block_add(k, blk, kir_s_for(k, oh, I(k, 0), I(k, rows), 1, KIR_LOOP_SEQUENTIAL,
						kir_s_for(k, q, I(k, 0), I(k, d->OW), 1, KIR_LOOP_VECTOR,
							  kir_s_store(k, d->y, yat, conv_act(d->c, k, kir_e_cast(k, d->y->dtype, acc))))));
		return;
	}
	/* the virtual rows into scratch of their own */
	kir_block_add(k, blk, kir_s_for(k, q, I(k, 0), I(k, nq), 1, KIR_LOOP_VECTOR, kir_s_store(k, d->zs, ADD(k, d->zbase, V(k, q)), acc)));
	kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
	kir_expr *zat = ADD(k, ADD(k, d->zbase, MUL(k, V(k, oh), I(k, d->SH * d->OW))), V(k, ow));
	yat = ADD(k, ADD(k, ybase, MUL(k, V(k, oh), I(k, d->OW))), V(k, ow));
	kir_block_add(k, blk, kir_s_for(k, oh, I(k, 0), I(k, rows), 1, KIR_LOOP_SEQUENTIAL,
					kir_s_for(k, ow, I(k, 0), I(k, d->OW), 1, KIR_LOOP_VECTOR,
						  kir_s_store(k, d->y, yat, conv_act(d->c, k, kir_e_cast(k, d->y->dtype, kir_e_load(k, d->zs, zat)))))));
}

static lower_result depthwise_masked(lower_cx *cx, const tbc_op *op, const conv_geom *g, const conv_gemm *c, int yb) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[1];
	const tbc_value *bv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_type *xt = &xv->type;
	tbc_dtype ct = c->ct;
	dw_band d = {.W = g->in[1], .OW = g->out[1], .OH = g->out[0], .KH = g->kernel[0], .KW = g->kernel[1], .DH = g->dil[0],
		     .DW = g->dil[1], .PT = g->pad_begin[0], .PL = g->pad_begin[1], .SH = g->stride[0], .SW = g->stride[1]};
	d.HW = g->in[0] * d.W, d.R = d.SH * (d.OH - 1) + 1, d.Q = d.R * d.OW;
	int64_t C = c->G, M = c->M, Mg = c->Mg, taps = d.KH * d.KW;
	/* the taps' offsets from SW q span [lo, hi]; a band of BR virtual rows
	 * reads BL elements from SW q0 + lo */
	int64_t hi = ((d.KH - 1) * d.DH - d.PT) * d.W + (d.KW - 1) * d.DW - d.PL;
	d.lo = -(d.PT * d.W + d.PL);
	d.BR = (DEPTHWISE_BAND - (hi - d.lo + 1)) / d.W / d.SH * d.SH;
	if (d.BR < d.SH) d.BR = d.SH;
	if (d.BR > d.R) d.BR = d.R;
	d.BQ = d.BR * d.OW, d.BL = d.SW * (d.BQ - 1) + hi - d.lo + 1;
	int64_t NB = (d.R + d.BR - 1) / d.BR;
	/* a plane's scratch: the band's input; its virtual rows (apart, so
	 * that LLVM sees the loop's loads and stores do not overlap) */
	int sb = lower_shared_temp(cx, "depthwise_pad", ct, xt->dims[0], M * d.BL);
	bool virtual_rows = d.SH > 1 && d.OW < DEPTHWISE_ROW;
	int zb = virtual_rows ? lower_shared_temp(cx, "depthwise_rows", ct, xt->dims[0], M * d.BQ) : -1;
	if (sb < 0 || (virtual_rows && zb < 0)) return LOWER_FAILED;
	/* ow of a band's outputs, a table shared by the bands and planes */
	void *colsd;
	int cb = lower_const_new(cx, TBC_DT_I16, 1, (int64_t[]){d.BQ}, "depthwise_cols", &colsd);
	if (cb < 0) return LOWER_FAILED;
	for (int64_t q = 0; q < d.BQ; q++) ((int16_t *)colsd)[q] = (int16_t)(q % d.OW);
	lk l;
	if (!lk_begin(&l, cx, "depthwise")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	k->contract = true; /* y += w * x: one rounding instead of two, as depthwise_rows */
	d.l = &l, d.c = c;
	d.x = lk_value(&l, xv), d.y = lk_buf(&l, yb), d.sc = lk_buf(&l, sb), d.cols = lk_buf(&l, cb);
	kir_buffer *w = lk_value(&l, wv), *bias = bv ? lk_value(&l, bv) : NULL;
	d.zs = zb >= 0 ? lk_buf(&l, zb) : NULL;
	if (!d.x || !w || !d.y || !d.sc || !d.cols || (zb >= 0 && !d.zs) || (bv && !bias)) return LOWER_FAILED;

	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX);
	kir_block plane = {0};
	kir_expr *m = LET(k, &plane, "m", MOD(k, V(k, pl), I(k, M)));
	d.xplane = LET(k, &plane, "xplane", MUL(k, ADD(k, MUL(k, DIV(k, V(k, pl), I(k, M)), I(k, C)), DIV(k, m, I(k, Mg))), I(k, d.HW)));
	d.sbase = LET(k, &plane, "sbase", MUL(k, V(k, pl), I(k, d.BL)));
	if (d.zs) d.zbase = LET(k, &plane, "zbase", MUL(k, V(k, pl), I(k, d.BQ)));
	d.yplane = LET(k, &plane, "yplane", MUL(k, V(k, pl), I(k, d.OH * d.OW)));
	for (int64_t t = 0; t < taps; t++)
		d.wt[t] = LET(k, &plane, "w", kir_e_cast(k, ct, kir_e_load(k, w, ADD(k, MUL(k, m, I(k, taps)), I(k, t)))));
	d.acc0 = bias ? LET(k, &plane, "bias", kir_e_cast(k, ct, kir_e_load(k, bias, m))) : fconst(&l, ct, 0);
	/* Bands whose span stays inside the plane in one loop, the others
	 * (the first and last few) each on its own with its zeros. */
	int64_t inner_lo = NB, inner_hi = NB;
	for (int64_t b = 0; b < NB - 1; b++) {
		int64_t fs = d.SW * b * d.BQ + d.lo;
		bool inside = fs >= 0 && fs + d.BL <= d.HW;
		if (inside && inner_lo == NB) inner_lo = b;
		if (inside) inner_hi = b + 1;
		else if (inner_lo < NB) break;
	}
	for (int64_t b = 0; b < NB; b++) {
		if (b == inner_lo && inner_hi - inner_lo > 1) {
			kir_var *bi = kir_var_new(k, "band", KIR_INDEX);
			kir_block band = {0};
			kir_expr *q0 = LET(k, &band, "q0", MUL(k, V(k, bi), I(k, d.BQ)));
			kir_expr *from = LET(k, &band, "from", ADD(k, MUL(k, q0, I(k, d.SW)), I(k, d.lo)));
			dw_band_emit(&d, &band, q0, d.BQ, from, true, 0);
			kir_block_add(k, &plane, kir_s_for(k, bi, I(k, inner_lo), I(k, inner_hi), 1, KIR_LOOP_SEQUENTIAL, band.first));
			b = inner_hi - 1;
			continue;
		}
		int64_t q0 = b * d.BQ, fs = d.SW * q0 + d.lo, nq = b == NB - 1 ? d.Q - q0 : d.BQ;
		dw_band_emit(&d, &plane, I(k, q0), nq, I(k, fs), fs >= 0 && fs + d.BL <= d.HW, fs);
	}
	kir_expr *planes = MUL(k, lk_dim(&l, xt->dims[0]), I(k, M));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(k, 0), planes, 1, KIR_LOOP_PARALLEL, plane.first)));
}

/* ---- The direct forms: taps as shifts over padded planes --------------------------
 * A 2-D convolution with no im2col matrix: its input is copied once into
 * planes padded by the convolution's pads (Hp x Wp each), and the GEMM runs
 * over the positions of the padded width, v = oh Wp + ow for ow < Wp: at
 * stride 1, tap (kh, kw) of position v is the plane's element v + kh dh Wp
 * + kw dw, a shift (a stride above 1 splits the planes into phases, where
 * a tap is a shift again: conv_phases).  K runs over the taps and, inside a
 * tap, the channels (the weights in that order), so a tap is an fma tile
 * whose plane operand steps a plane per k (gemm_spec.taps).  Two layouts:
 * - transposed (y^T = planes' rows W^T, as conv_gemm_launch computes where
 *   positions waste the tile): the positions are the rows, the channels
 *   the columns, W^T in panels; for few channels out (conv_direct_wanted);
 * - as it is (y = W planes' columns): the channels are the rows, the
 *   positions the vector columns (conv_direct_rows_wanted).
 * Positions ow >= OW are computed (Wp / OW of the work: 58 / 56 at
 * ResNet's first stage, 9 / 7 at its last) into rows of Wp and not copied
 * out: a kernel moves y's OW columns of each row into place.  im2col wrote
 * and the GEMM read KH KW times the input; the planes are one copy of it. */

/* The columns of 32-wide tiles (gemm_tile_shape's nr) over n: the last
 * one overlaps the one before, so n < nr costs a tile and more costs
 * ceil(n / nr) of them. */
static int64_t tile_cols(int64_t n, int nr) { return (n < nr ? 1 : (n + nr - 1) / nr) * nr; }

/* What both direct forms need: a 2-D f32 convolution of at least two
 * taps, its weights a constant in the compute type, on a CPU whose
 * constants the program may lay out (gemv_panels: not when a device
 * program shares them).  TBC_CONV_DIRECT=0: never; TBC_CONV_DIRECT_STRIDED
 * =0: not where a stride is above 1 (for measuring). */
static bool conv_direct_possible(const lower_cx *cx, const conv_gemm *c, const conv_geom *g, const tbc_value *wv,
				 tbc_dtype xt) {
	const char *e = getenv("TBC_CONV_DIRECT"), *es = getenv("TBC_CONV_DIRECT_STRIDED");
	if ((e && !strcmp(e, "0")) || g->nsp != 2 || c->pairs || !cx->target->fma_tile || !cx->target->gemv_panels ||
	    cx->target->parallel != TBC_PAR_HOST_THREADS || g->kernel[0] * g->kernel[1] < 2 || c->ct != TBC_DT_F32)
		return false;
	if ((g->stride[0] > 1 || g->stride[1] > 1) && es && !strcmp(es, "0")) return false;
	return wv->kind == TBC_VALUE_CONST && wv->constant && wv->type.dtype == c->ct && xt == c->ct && c->yt == c->ct;
}

/* The padded width of the positions: the phase planes' (conv_phases). */
static int64_t direct_width(const conv_geom *g) {
	return (g->in[1] + g->pad_begin[1] + g->pad_end[1] + g->stride[1] - 1) / g->stride[1];
}

static bool conv_direct_wanted(const lower_cx *cx, const conv_gemm *c, const conv_geom *g, const tbc_value *wv,
			       tbc_dtype xt) {
	if (!conv_direct_possible(cx, c, g, wv, xt)) return false;
	int mr, nr;
	gemm_tile_shape(cx->target, c->ct, &mr, &nr);
	if (c->Mg % nr) return false;
	int64_t V = g->out[0] * direct_width(g), padded;
	tile_rows(V, mr, &padded);
	/* Strided: im2col copies a fraction of what it does at stride 1 (a
	 * 3x3 of stride 2 reads 9 / 4 of the input; stride 1, 9 times), so
	 * either direct form beats it (ResNet-50's strided 3x3s and stem:
	 * the model 0.95 of the time, docs/performance.md); transposed where
	 * that tiles a tenth less area than rows of channels, as
	 * conv_transposed_tile_rows decides for im2col (7 x 7 outputs). */
	if (g->stride[0] > 1 || g->stride[1] > 1)
		return (double)padded * (double)c->Mg * 1.1 < (double)((c->Mg + mr - 1) / mr * mr) * (double)tile_cols(V, nr);
	/* Stride 1: worth it where im2col costs more than the junk columns:
	 * im2col's share of the work falls as 1 / Mg (each column of col
	 * serves Mg rows), the junk is the rows computed past P.  Measured on
	 * single 3x3 convolutions (docs/performance.md): 32 channels out
	 * gained at 56, 28 and 14 wide (junk 4%, 7%, 14%), lost at 7 (29%);
	 * 64 gained at 56 and were even at 28; 96 or more lost 2-24% at 28
	 * and below. */
	return (double)(padded - c->P) / (double)c->P * (double)c->Mg < 5.0;
}

/* W [M, Cg, KH, KW] as a constant [M, KH KW Cg]: tap-major, the order of
 * the direct form's K.  A value of the arena, read by the panels' layout. */
static tbc_value *tap_major_weights(lower_cx *cx, const tbc_value *wv, int64_t M, int64_t Cg, int64_t KS) {
	tbc_arena *a = cx->p->arena;
	const tbc_tensor *w = wv->constant;
	tbc_value *v = tbc_arena_alloc(a, sizeof *v);
	tbc_tensor *t = tbc_arena_alloc(a, sizeof *t);
	size_t es = tbc_dtype_size(w->dtype);
	void *data = tbc_arena_alloc(a, (size_t)w->numel * es + 1);
	if (!v || !t || !data) return NULL;
	*v = *wv;
	*t = *w;
	t->rank = 2, t->dims[0] = M, t->dims[1] = KS * Cg;
	t->data = data;
	for (int64_t m = 0; m < M; m++)
		for (int64_t ch = 0; ch < Cg; ch++)
			for (int64_t tap = 0; tap < KS; tap++)
				memcpy((char *)data + (size_t)((m * KS + tap) * Cg + ch) * es,
				       (const char *)w->data + (size_t)((m * Cg + ch) * KS + tap) * es, es);
	v->constant = t;
	tbc_type_set(&v->type, w->dtype, 2, t->dims);
	return v;
}

kir_stmt *conv_padded_row(kir_kernel *k, kir_buffer *x, kir_buffer *pl, kir_expr *out, kir_expr *in, kir_expr *inside,
			  kir_expr *zero, int64_t pw, int64_t W, int64_t Wrow) {
	kir_var *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block copy = {0};
	if (pw > 0)
		kir_block_add(k, &copy, kir_s_for(k, j, I(k, 0), I(k, pw), 1, KIR_LOOP_SEQUENTIAL,
						  kir_s_store(k, pl, ADD(k, out, V(k, j)), zero)));
	kir_block_add(k, &copy, kir_s_for(k, j, I(k, 0), I(k, W), 1, KIR_LOOP_VECTOR,
					  kir_s_store(k, pl, ADD(k, ADD(k, out, I(k, pw)), V(k, j)), kir_e_load(k, x, ADD(k, in, V(k, j))))));
	if (Wrow > pw + W)
		kir_block_add(k, &copy, kir_s_for(k, j, I(k, pw + W), I(k, Wrow), 1, KIR_LOOP_SEQUENTIAL,
						  kir_s_store(k, pl, ADD(k, out, V(k, j)), zero)));
	kir_stmt *zeros = kir_s_for(k, j, I(k, 0), I(k, Wrow), 1, KIR_LOOP_VECTOR, kir_s_store(k, pl, ADD(k, out, V(k, j)), zero));
	return kir_s_if(k, inside, copy.first, zeros);
}

/* The direct form's planes.  A padded input plane (Hp x Wp) is split, for
 * strides sh and sw, into sh sw phase planes of Hq = ceil(Hp / sh) rows of
 * Wq = ceil(Wp / sw): phase (ph, pw)'s element (i, j) is the padded plane's
 * (i sh + ph, j sw + pw), 0 past it.  Output (oh, ow)'s tap (kh, kw) reads
 * the padded plane at (oh sh + kh dh, ow sw + kw dw): phase ((kh dh) % sh,
 * (kw dw) % sw) at (oh + kh dh / sh, ow + kw dw / sw) -- a shift of the
 * position oh Wq + ow within that phase plane, as a stride-1 tap is a shift
 * within the padded plane (strides 1: one phase, the padded plane itself).
 * The positions are OH rows of Wq, ow >= OW the junk columns. */
typedef struct conv_phases {
	int64_t sh, sw, Hq, Wq;
	int64_t block; /* sh sw Hq Wq: a channel's planes */
	int64_t V;     /* OH Wq positions, junk included */
	int64_t slack; /* what the last channel's junk reads past its block */
	int64_t *shift; /* [KH KW], tap-major as the weights' K */
} conv_phases;

static bool conv_phases_make(lower_cx *cx, const conv_geom *g, conv_phases *ph) {
	int64_t KH = g->kernel[0], KW = g->kernel[1];
	ph->sh = g->stride[0], ph->sw = g->stride[1];
	ph->Hq = (g->in[0] + g->pad_begin[0] + g->pad_end[0] + ph->sh - 1) / ph->sh;
	ph->Wq = (g->in[1] + g->pad_begin[1] + g->pad_end[1] + ph->sw - 1) / ph->sw;
	ph->block = ph->sh * ph->sw * ph->Hq * ph->Wq;
	ph->V = g->out[0] * ph->Wq;
	ph->slack = 0;
	if (!(ph->shift = tbc_arena_alloc(cx->p->arena, (size_t)(KH * KW) * sizeof *ph->shift))) return false;
	for (int64_t kh = 0; kh < KH; kh++)
		for (int64_t kw = 0; kw < KW; kw++) {
			int64_t r = kh * g->dil[0], c = kw * g->dil[1];
			int64_t t = ((r % ph->sh * ph->sw + c % ph->sw) * ph->Hq + r / ph->sh) * ph->Wq + c / ph->sw;
			ph->shift[kh * KW + kw] = t;
			if (ph->V + t - ph->block > ph->slack) ph->slack = ph->V + t - ph->block;
		}
	return true;
}

/* The phase planes of each image: pl[n][c][ph][pw] (Hq x Wq) as
 * conv_phases says, an image C block + slack elements (the slack, zeros,
 * is what the last positions' junk columns read past the last block). */
static bool pad_planes(lower_cx *cx, const conv_geom *g, const conv_phases *ph, int xb, int pb, tbc_dim nd, int64_t C) {
	lk l;
	if (!lk_begin(&l, cx, "conv_planes")) return false;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_buf(&l, xb), *pl = lk_buf(&l, pb);
	if (!x || !pl) return false;
	int64_t H = g->in[0], W = g->in[1], pt = g->pad_begin[0], pw = g->pad_begin[1];
	int64_t sh = ph->sh, sw = ph->sw, Hq = ph->Hq, Wq = ph->Wq, img = C * ph->block + ph->slack;
	kir_expr *zero = fconst(&l, x->dtype, 0);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	/* a row r of the padded planes' rows: channel nc, row phase rp, row hq */
	kir_block body = {0};
	kir_expr *hq = LET(k, &body, "hq", MOD(k, V(k, r), I(k, Hq)));
	kir_expr *rp = LET(k, &body, "rp", MOD(k, DIV(k, V(k, r), I(k, Hq)), I(k, sh)));
	kir_expr *nc = LET(k, &body, "nc", DIV(k, V(k, r), I(k, sh * Hq)));
	kir_expr *n = LET(k, &body, "n", DIV(k, nc, I(k, C)));
	kir_expr *at = LET(k, &body, "at", ADD(k, MUL(k, n, I(k, img)), ADD(k, MUL(k, MOD(k, nc, I(k, C)), I(k, ph->block)),
									   MUL(k, rp, I(k, sw * Hq * Wq)))));
	kir_expr *ih = LET(k, &body, "ih", SUB(k, ADD(k, MUL(k, hq, I(k, sh)), rp), I(k, pt)));
	kir_expr *in = LET(k, &body, "in", ADD(k, MUL(k, nc, I(k, H * W)), MUL(k, CLAMP(l.k, ih, H), I(k, W)))); /* used inside */
	kir_expr *inside = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, ih, I(k, 0)), kir_e_cmp(k, KIR_LT, ih, I(k, H)));
	for (int64_t cp = 0; cp < sw; cp++) { /* each column phase's row: x's columns j sw + cp - pw */
		kir_expr *out = ADD(k, at, MUL(k, ADD(k, I(k, cp * Hq), hq), I(k, Wq)));
		if (sw == 1) {
			kir_block_add(k, &body, conv_padded_row(k, x, pl, out, in, inside, zero, pw, W, Wq));
			continue;
		}
		/* [ja, jb): the columns inside x */
		int64_t ja = pw - cp > 0 ? (pw - cp + sw - 1) / sw : 0, jb = (W + pw - cp + sw - 1) / sw;
		if (jb > Wq) jb = Wq;
		if (jb < ja) jb = ja;
		kir_block copy = {0};
		if (ja > 0)
			kir_block_add(k, &copy, kir_s_for(k, j, I(k, 0), I(k, ja), 1, KIR_LOOP_SEQUENTIAL,
							  kir_s_store(k, pl, ADD(k, out, V(k, j)), zero)));
		kir_block_add(k, &copy, kir_s_for(k, j, I(k, ja), I(k, jb), 1, KIR_LOOP_VECTOR,
						  kir_s_store(k, pl, ADD(k, out, V(k, j)),
							      kir_e_load(k, x, ADD(k, in, SUB(k, ADD(k, MUL(k, V(k, j), I(k, sw)), I(k, cp)), I(k, pw)))))));
		if (jb < Wq)
			kir_block_add(k, &copy, kir_s_for(k, j, I(k, jb), I(k, Wq), 1, KIR_LOOP_SEQUENTIAL,
							  kir_s_store(k, pl, ADD(k, out, V(k, j)), zero)));
		kir_stmt *zeros =
			kir_s_for(k, j, I(k, 0), I(k, Wq), 1, KIR_LOOP_VECTOR, kir_s_store(k, pl, ADD(k, out, V(k, j)), zero));
		kir_block_add(k, &body, kir_s_if(k, inside, copy.first, zeros));
	}
	if (ph->slack > 0) { /* after an image's last row: its slack */
		kir_expr *last = kir_e_cmp(k, KIR_EQ, MOD(k, V(k, r), I(k, C * sh * Hq)), I(k, C * sh * Hq - 1));
		kir_expr *end = ADD(k, MUL(k, n, I(k, img)), I(k, C * ph->block));
		kir_block_add(k, &body, kir_s_if(k, last, kir_s_for(k, j, I(k, 0), I(k, ph->slack), 1, KIR_LOOP_SEQUENTIAL,
								   kir_s_store(k, pl, ADD(k, end, V(k, j)), zero)), NULL));
	}
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, C * sh * Hq));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* y[n][m][oh][ow] = rows[n][m][oh Wp + ow] for ow < OW. */
static bool rows_out(lower_cx *cx, int rb, int yb, tbc_dim nd, int64_t M, int64_t OH, int64_t OW, int64_t Wp) {
	lk l;
	if (!lk_begin(&l, cx, "conv_rows_out")) return false;
	kir_kernel *k = l.k;
	kir_buffer *rows = lk_buf(&l, rb), *y = lk_buf(&l, yb);
	if (!rows || !y) return false;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	kir_expr *from = LET(k, &body, "from", ADD(k, MUL(k, DIV(k, V(k, r), I(k, OH)), I(k, OH * Wp)), MUL(k, MOD(k, V(k, r), I(k, OH)), I(k, Wp))));
	kir_expr *to = LET(k, &body, "to", MUL(k, V(k, r), I(k, OW)));
	kir_block_add(k, &body, kir_s_for(k, j, I(k, 0), I(k, OW), 1, KIR_LOOP_VECTOR,
					  kir_s_store(k, y, ADD(k, to, V(k, j)), kir_e_load(k, rows, ADD(k, from, V(k, j))))));
	kir_expr *n = MUL(k, lk_dim(&l, nd), I(k, M * OH));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), n, 1, KIR_LOOP_PARALLEL, body.first));
}

/* The direct form laid out as it is (y = W col, the channels the rows, the
 * positions of the padded width the columns): where the transposed one is
 * not wanted (its channels not whole panels, or many of them), the tiles'
 * columns over the padded width are at most a tenth more than over the
 * positions (none more at 14 x 14: 224 either way, 7 x 7: 64), and the
 * weights are a constant the CPU program may lay out as its own
 * (gemv_panels: not when a device program shares them). */
static bool conv_direct_rows_wanted(const lower_cx *cx, const conv_gemm *c, const conv_geom *g, const tbc_value *wv,
				    tbc_dtype xt) {
	if (!conv_direct_possible(cx, c, g, wv, xt)) return false;
	int mr, nr;
	gemm_tile_shape(cx->target, c->ct, &mr, &nr);
	return (double)tile_cols(g->out[0] * direct_width(g), nr) <= 1.1 * (double)tile_cols(c->P, nr);
}

static lower_result conv_direct(lower_cx *cx, const conv_geom *g, conv_gemm *c, const tbc_value *wv, const tbc_value *bv,
				int xb, int yb, tbc_dim nd, int64_t C, bool transposed) {
	int64_t KS = g->kernel[0] * g->kernel[1], Cg = C / c->G;
	conv_phases ph;
	if (!conv_phases_make(cx, g, &ph)) return LOWER_FAILED;
	int64_t OH = g->out[0], OW = g->out[1], V = ph.V, plane = ph.block;
	tbc_dtype dt = c->ct;
	int pb = lower_shared_temp(cx, "conv_planes", dt, nd, C * plane + ph.slack);
	int rb = lower_shared_temp(cx, "conv_rows", dt, nd, c->M * V);
	tbc_value *wt = tap_major_weights(cx, wv, c->M, Cg, KS);
	if (pb < 0 || rb < 0 || !wt || !pad_planes(cx, g, &ph, xb, pb, nd, C)) return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "conv")) return LOWER_FAILED;
	gemm_spec s = {.ct = dt};
	int mr, nr;
	gemm_tile_shape(cx->target, dt, &mr, &nr);
	c->a_img = C * plane + ph.slack, c->a_grp = Cg * plane, c->yrows = V;
	kir_buffer *planes = lk_buf(&l, pb);
	s.y.buf = lk_buf(&l, rb);
	if (bv && !(c->bias = lk_value(&l, bv))) return LOWER_FAILED;
	s.K = I(l.k, c->Kg);
	s.NB = MUL(l.k, lk_dim(&l, nd), I(l.k, c->G));
	s.taps = KS, s.tk = Cg, s.tshift = ph.shift;
	if (transposed) { /* y^T (V x Mg) = planes' rows (V x Kg) W^T (Kg x Mg, panels) */
		int64_t padded, panel_stride;
		s.mr = tile_rows(V, mr, &padded);
		if (!gemm_const_tile_panels(&l, wt, c->M, c->Kg, true, dt, &s.b) ||
		    !kir_e_const_index(s.b.panel_stride, &panel_stride))
			return LOWER_FAILED;
		c->transposed = true;
		c->wt_group = c->Mg / s.b.panel * panel_stride;
		s.a.buf = planes;
		s.M = I(l.k, V), s.N = I(l.k, c->Mg);
		s.a.rs = I(l.k, 1), s.a.cs = I(l.k, plane);
		s.y.rs = I(l.k, 1), s.y.cs = I(l.k, V);
	} else { /* y (Mg x V) = W (Mg x Kg, tap-major) planes' columns (Kg x V) */
		int wb = lower_const_matrix(cx, wt, c->M, c->Kg, false, c->Kg);
		if (wb < 0) return LOWER_FAILED;
		s.a.buf = lk_buf(&l, wb);
		s.b.buf = planes;
		s.taps_b = true;
		s.M = I(l.k, c->Mg), s.N = I(l.k, V);
		s.a.rs = I(l.k, c->Kg), s.a.cs = I(l.k, 1);
		s.b.rs = I(l.k, plane), s.b.cs = I(l.k, 1);
		s.y.rs = I(l.k, V), s.y.cs = I(l.k, 1);
	}
	if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
	s.ctx = c;
	s.base = conv_gemm_base;
	s.epi = conv_gemm_epi;
	if (!lk_end(&l, gemm_generate(&l, &s))) return LOWER_FAILED;
	return conv_failed(rows_out(cx, rb, yb, nd, c->M, OH, OW, ph.Wq));
}

static lower_result lower_conv(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[1], *yv = op->outputs[0];
	const tbc_value *bv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_type *xt = &xv->type, *wt = &wv->type, *yt = &yv->type;
	conv_gemm c = {0};
	if (!conv_float_ct(xt->dtype, &c.ct) || wt->dtype != xt->dtype) return conv_refuse(cx, op, "on this dtype");
	if (xt->rank < 3 || wt->rank != xt->rank || yt->rank != xt->rank) return conv_refuse(cx, op, "of this rank");
	if (!conv_static_dims(xt, 1) || !conv_static_dims(wt, 0) || !conv_static_dims(yt, 1))
		return conv_refuse(cx, op, "with symbolic channel, spatial or weight dims");
	int nsp = xt->rank - 2;
	conv_geom g;
	int64_t kernel[CONV_MAX_SPATIAL];
	for (int i = 0; i < nsp; i++) kernel[i] = wt->dims[2 + i].size;
	const char *err = conv_geom_read(&g, op, nsp, kernel, true, false);
	for (int i = 0; !err && i < nsp; i++) g.in[i] = xt->dims[2 + i].size;
	if (!err) err = conv_geom_resolve(&g);
	if (err) return lower_error(cx, op, "%s", err), LOWER_FAILED;
	for (int i = 0; i < nsp; i++)
		if (g.out[i] != yt->dims[2 + i].size) return lower_error(cx, op, "Conv geometry disagrees with its type"), LOWER_FAILED;
	c.G = tbc_attr_int(op, "group", 1);
	int64_t C = xt->dims[1].size, Cg = wt->dims[1].size;
	c.M = wt->dims[0].size;
	if (c.G <= 0 || C != Cg * c.G || c.M % c.G) return lower_error(cx, op, "Conv channels and group disagree"), LOWER_FAILED;
	c.Mg = c.M / c.G;
	c.Kg = Cg * conv_prod(0, nsp, g.kernel);
	c.P = conv_prod(0, nsp, g.out);
	c.yt = yt->dtype;
	c.cx = cx;
	c.act = conv_activation(cx, op);
	int yb = lower_result_buf(cx, c.act ? c.act->outputs[0] : yv);
	if (yb < 0) return LOWER_FAILED;
	if (c.act) cx->computed[c.act->outputs[0]->id] = true;
	if (conv_static_empty(yt)) return LOWER_OK;
	bool direct = true;
	for (int i = 0; i < nsp; i++)
		direct &= g.kernel[i] == 1 && g.stride[i] == 1 && g.pad_begin[i] == 0 && g.pad_end[i] == 0;
	/* One input channel a group, computed in the tensors' own type: the
	 * depthwise rows on a CPU (a device keeps im2col + GEMM, whose grid has
	 * the parallelism a GPU needs). */
	if (!direct && Cg == 1 && c.G > 1 && c.ct == yt->dtype && cx->target->parallel != TBC_PAR_GRID)
		return depthwise_masked_wanted(&g) ? depthwise_masked(cx, op, &g, &c, yb)
		       : depthwise_flat_wanted(&g) && g.kernel[0] * g.kernel[1] <= CONV_MAX_TAPS_FLAT ? depthwise_flat(cx, op, &g, &c, yb)
												     : depthwise_rows(cx, op, &g, &c, yb);
	int xb = lower_value_buf(cx, xv);
	if (xb < 0) return LOWER_FAILED;
	int matb = xb;
	/* kir_dot2 where the target has it: col in k pairs, made by im2col
	 * even for a 1x1 convolution (a copy of X). */
	c.pairs = c.Kg % 2 == 0 && gemm_dot2_wanted(cx->target, wt->dtype, xt->dtype, true, c.P);
	if (!direct && conv_winograd_wanted(cx, &c, &g, wv, xt->dtype))
		return conv_winograd(cx, &g, &c, wv, bv, xb, yb, xt->dims[0], C);
	if (!direct && conv_direct_wanted(cx, &c, &g, wv, xt->dtype))
		return conv_direct(cx, &g, &c, wv, bv, xb, yb, xt->dims[0], C, true);
	if (!direct && !conv_transposed_rows(cx, &c, wv, xt->dtype) && conv_direct_rows_wanted(cx, &c, &g, wv, xt->dtype))
		return conv_direct(cx, &g, &c, wv, bv, xb, yb, xt->dims[0], C, false);
	if (!direct || c.pairs) {
		/* On a CPU the rows of col start a whole number of vectors apart,
		 * so that the GEMM's vector loads of B never span two cache lines
		 * (AlexNet's 27 x 27 = 729 positions: rows 2916 bytes apart, 5x5
		 * convolution 1.35x onnxruntime's time; docs/performance.md). */
		int64_t lanes = cx->target->vector_bytes / (int64_t)tbc_dtype_size(xt->dtype);
		if (!c.pairs && cx->target->parallel == TBC_PAR_HOST_THREADS && lanes > 1) c.colp = (c.P + lanes - 1) / lanes * lanes;
		matb = lower_shared_temp(cx, c.pairs ? "im2col_pairs" : "im2col", xt->dtype, xt->dims[0], c.G * c.Kg * conv_col_pitch(&c));
		if (matb < 0 || !im2col(cx, op, &g, xb, matb, xt->dims[0], C, c.Kg, c.P, conv_col_pitch(&c), c.pairs)) return LOWER_FAILED;
	}
	return conv_gemm_launch(cx, "conv", &c, wv, bv, matb, yb, xt->dims[0], xt->dtype);
}

/* ---- Windowed pools --------------------------------------------------------------
 * Per output position and spatial dim d: the window starts at
 * base = o * stride - pad_begin; its taps k with 0 <= base + k * dil < in
 * form the range [lo, hi), computed once per position. */
typedef enum pool_kind { POOL_AVG, POOL_MAX, POOL_LP } pool_kind;

/* MaxPool without Indices, a row at a time: the output row along the last
 * spatial dim is the accumulator (y itself, first set to NaN, or the
 * least integer, or 0 where the window is empty in an outer dim), and each
 * valid tap of the outer dims updates the whole row.  Positions of the row
 * whose window lies inside the input take their taps of the last dim with
 * constant bounds and no clamp: a vector loop (stride-s loads).  The
 * others (the borders) take theirs from per-position ranges.  max keeps
 * the first of equal values and skips NaN unless every tap is NaN (the
 * interpreter's rule): select(v > m || isnan(m), v, m) from NaN.  A 2-D
 * pool whose windows all hold a valid tap, dilation 1 (nearly every CNN's)
 * instead reads its taps with indices clamped into the input, every row
 * alike, and keeps each window's max in registers (maxpool_row_clamped). */
typedef struct maxpool_cx {
	const conv_geom *g;
	kir_buffer *x, *y;
	tbc_dtype ct, yt;
	bool is_float;
	int64_t isz, osz, oa, ob; /* [oa, ob): the last dim's interior */
	kir_var *pl, **o, **kv;
	kir_expr *zero, *init;
} maxpool_cx;

/* m's next value for tap value v: max skipping NaN, the first of equals. */
static kir_expr *maxpool_step(kir_kernel *k, const maxpool_cx *c, kir_expr *mv, kir_expr *v) {
	if (!c->is_float) return kir_e_binary(k, KIR_MAX, mv, v);
	return kir_e_select(k, kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_GT, v, mv), kir_e_unary(k, KIR_ISNAN, mv)), v, mv);
}
/* The max over every tap of a 2-D window, the taps' rows at x offsets
 * rows[0..KH) and columns col + tw: the max of each window row first, then
 * of those.  The same bits as the taps in order (the step keeps the
 * earlier of equals and skips NaN, so grouping consecutive taps changes
 * nothing), with chains KW and KH long instead of one KH KW long.  clamp_w
 * > 0: columns clamped to [0, clamp_w). */
static kir_expr *maxpool_window(lk *l, const maxpool_cx *c, kir_block *b, kir_expr *const *rows, kir_expr *col, int64_t clamp_w) {
	kir_kernel *k = l->k;
	kir_expr *m = NULL;
	for (int64_t th = 0; th < c->g->kernel[0]; th++) {
		kir_expr *h = NULL;
		for (int64_t tw = 0; tw < c->g->kernel[1]; tw++) {
			kir_expr *cw = ADD(k, col, I(k, tw));
			if (clamp_w) cw = CLAMP(l->k, cw, clamp_w);
			kir_expr *v = LET(k, b, "v", kir_e_cast(k, c->ct, kir_e_load(k, c->x, ADD(k, rows[th], cw))));
			h = h ? LET(k, b, "h", maxpool_step(k, c, h, v)) : v;
		}
		m = m ? LET(k, b, "m", maxpool_step(k, c, m, h)) : h;
	}
	return m;
}

/* Whether a 2-D max pool may read its windows with indices clamped into
 * the input instead of skipping the padding: dilation 1 and no window
 * without a valid tap.  A clamped tap then repeats a valid tap of its
 * window, and since clamping keeps the taps' order, the first of equal
 * maxima and the last of all-NaN taps are the same elements: the same
 * bits. */
static bool maxpool_clampable(const conv_geom *g) {
	if (g->nsp != 2 || g->kernel[0] * g->kernel[1] > 49) return false;
	for (int d = 0; d < 2; d++)
		if (g->dil[d] != 1 || g->pad_begin[d] >= g->kernel[d] || (g->out[d] - 1) * g->stride[d] - g->pad_begin[d] > g->in[d] - 1)
			return false;
	return true;
}

/* Row o[0] of a clampable pool (maxpool_clampable): the taps' rows
 * clamped, the row's interior a vector loop, its borders scalar loops with
 * the columns clamped too; y stored once. */
static kir_stmt *maxpool_row_clamped(lk *l, const maxpool_cx *c) {
	kir_kernel *k = l->k;
	const conv_geom *g = c->g;
	int64_t W = g->in[1], OW = g->out[1], s = g->stride[1], pw = g->pad_begin[1];
	kir_block row = {0};
	kir_expr *rows[CONV_MAX_TAPS_FLAT], *plane = MUL(k, V(k, c->pl), I(k, c->isz));
	kir_expr *ih = LET(k, &row, "ih", SUB(k, MUL(k, V(k, c->o[0]), I(k, g->stride[0])), I(k, g->pad_begin[0])));
	for (int64_t th = 0; th < g->kernel[0]; th++)
		rows[th] = LET(k, &row, "xrow", ADD(k, plane, MUL(k, CLAMP(l->k, ADD(k, ih, I(k, th)), g->in[0]), I(k, W))));
	kir_expr *yrow = LET(k, &row, "yrow", ADD(k, MUL(k, V(k, c->pl), I(k, c->osz)), MUL(k, V(k, c->o[0]), I(k, OW))));
	for (int part = 0; part < 3; part++) {
		int64_t from = part == 0 ? 0 : part == 1 ? c->oa : c->ob, to = part == 0 ? c->oa : part == 1 ? c->ob : OW;
		if (from >= to) continue;
		kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
		kir_block body = {0};
		kir_expr *col = LET(k, &body, "col", SUB(k, MUL(k, V(k, ow), I(k, s)), I(k, pw)));
		kir_expr *m = maxpool_window(l, c, &body, rows, col, part == 1 ? 0 : W);
		kir_block_add(k, &body, kir_s_store(k, c->y, ADD(k, yrow, V(k, ow)), kir_e_cast(k, c->yt, m)));
		kir_block_add(k, &row, kir_s_for(k, ow, I(k, from), I(k, to), 1, part == 1 ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL,
						 body.first));
	}
	return row.first;
}

/* One output row of maxpool_rows (outer dims at o[0..w)): y's row first
 * set to the start value, then updated per valid tap of the outer dims. */
static kir_stmt *maxpool_row(lk *l, const maxpool_cx *c) {
	kir_kernel *k = l->k;
	const conv_geom *g = c->g;
	int nsp = g->nsp, w = nsp - 1;
	int64_t OW = g->out[w], s = g->stride[w], pb = g->pad_begin[w], dil = g->dil[w], KW = g->kernel[w], in = g->in[w];
	kir_block row = {0};
	kir_expr *yrow = MUL(k, V(k, c->pl), I(k, c->osz)), *xrow = MUL(k, V(k, c->pl), I(k, c->isz));
	kir_expr *lo[CONV_MAX_SPATIAL], *hi[CONV_MAX_SPATIAL], *empty = kir_e_int(k, TBC_DT_BOOL, 0);
	int64_t ostride = OW, istride = in;
	for (int d = w - 1; d >= 0; d--) {
		kir_expr *base = LET(k, &row, "base", SUB(k, MUL(k, V(k, c->o[d]), I(k, g->stride[d])), I(k, g->pad_begin[d])));
		tap_range(l, &row, base, g->dil[d], g->kernel[d], g->in[d], &lo[d], &hi[d]);
		empty = kir_e_binary(k, KIR_OR, empty, kir_e_cmp(k, KIR_GE, lo[d], hi[d]));
		yrow = ADD(k, yrow, MUL(k, V(k, c->o[d]), I(k, ostride)));
		xrow = ADD(k, xrow, MUL(k, CLAMP(l->k, ADD(k, base, MUL(k, V(k, c->kv[d]), I(k, g->dil[d]))), g->in[d]), I(k, istride)));
		ostride *= g->out[d], istride *= g->in[d];
	}
	yrow = LET(k, &row, "yrow", yrow);
	kir_var *ov = kir_var_new(k, "ow", KIR_INDEX);
	kir_block set = {0};
	kir_block_add(k, &set, kir_s_store(k, c->y, ADD(k, yrow, V(k, ov)), kir_e_cast(k, c->yt, kir_e_select(k, empty, c->zero, c->init))));
	kir_block_add(k, &row, kir_s_for(k, ov, I(k, 0), I(k, OW), 1, KIR_LOOP_VECTOR, set.first));

	/* Each valid tap of the outer dims: the row's three parts. */
	kir_block taps = {0};
	kir_expr *xr = LET(k, &taps, "xrow", xrow);
	for (int part = 0; part < 3; part++) {
		int64_t from = part == 0 ? 0 : part == 1 ? c->oa : c->ob, to = part == 0 ? c->oa : part == 1 ? c->ob : OW;
		if (from >= to) continue;
		kir_var *ow = kir_var_new(k, "ow", KIR_INDEX), *m = kir_var_new(k, "m", c->ct), *kw = kir_var_new(k, "kw", KIR_INDEX);
		kir_block body = {0}, tap = {0};
		kir_expr *at = ADD(k, yrow, V(k, ow));
		kir_block_add(k, &body, kir_s_set(k, m, kir_e_cast(k, c->ct, kir_e_load(k, c->y, at))));
		kir_expr *base = LET(k, &body, "base", SUB(k, MUL(k, V(k, ow), I(k, s)), I(k, pb)));
		kir_expr *i = ADD(k, base, MUL(k, V(k, kw), I(k, dil))), *klo = I(k, 0), *khi = I(k, KW);
		if (part != 1) {
			tap_range(l, &body, base, dil, KW, in, &klo, &khi);
			i = CLAMP(l->k, i, in);
		}
		kir_expr *v = LET(k, &tap, "v", kir_e_cast(k, c->ct, kir_e_load(k, c->x, ADD(k, xr, i))));
		kir_block_add(k, &tap, kir_s_set(k, m, maxpool_step(k, c, V(k, m), v)));
		kir_block_add(k, &body, kir_s_for(k, kw, klo, khi, 1, KIR_LOOP_SEQUENTIAL, tap.first));
		kir_expr *res = V(k, m);
		if (part != 1) res = kir_e_select(k, kir_e_cmp(k, KIR_GE, klo, khi), c->zero, res); /* empty in the last dim */
		kir_block_add(k, &body, kir_s_store(k, c->y, at, kir_e_cast(k, c->yt, res)));
		kir_block_add(k, &taps, kir_s_for(k, ow, I(k, from), I(k, to), 1, part == 1 ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL, body.first));
	}
	kir_stmt *st = taps.first;
	for (int d = w - 1; d >= 0; d--) st = kir_s_for(k, c->kv[d], lo[d], hi[d], 1, KIR_LOOP_SEQUENTIAL, st);
	if (st) kir_block_add(k, &row, st);
	return row.first;
}

static lower_result maxpool_rows(lower_cx *cx, const tbc_op *op, const conv_geom *g, int yb, tbc_dtype ct) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type;
	lk l;
	if (!lk_begin(&l, cx, "maxpool")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	int nsp = g->nsp, w = nsp - 1;
	kir_var *o[CONV_MAX_SPATIAL], *kv[CONV_MAX_SPATIAL];
	for (int d = 0; d < nsp; d++) o[d] = kir_var_new(k, "o", KIR_INDEX), kv[d] = kir_var_new(k, "k", KIR_INDEX);
	maxpool_cx c = {.g = g, .x = lk_value(&l, xv), .y = lk_buf(&l, yb), .ct = ct, .yt = yv->type.dtype,
			.is_float = tbc_dtype_is_float(ct), .isz = conv_prod(0, nsp, g->in), .osz = conv_prod(0, nsp, g->out),
			.pl = kir_var_new(k, "pl", KIR_INDEX), .o = o, .kv = kv, .zero = fconst(&l, ct, 0)};
	if (!c.x || !c.y) return LOWER_FAILED;
	c.init = c.is_float ? kir_e_float(k, ct, NAN) : kir_e_int(k, ct, xt->dtype == TBC_DT_I8 ? -128 : 0);
	/* The interior: base = o s - pb >= 0 and base + (KW - 1) dil <= in - 1. */
	int64_t s = g->stride[w], pb = g->pad_begin[w], dil = g->dil[w], KW = g->kernel[w];
	interior(-pb, (KW - 1) * dil - pb, s, g->in[w], g->out[w], &c.oa, &c.ob);
	kir_stmt *st = maxpool_clampable(g) ? maxpool_row_clamped(&l, &c) : maxpool_row(&l, &c);
	for (int d = w - 1; d >= 0; d--) st = kir_s_for(k, o[d], I(k, 0), I(k, g->out[d]), 1, KIR_LOOP_SEQUENTIAL, st);
	kir_expr *planes = MUL(k, lk_dim(&l, xt->dims[0]), lk_dim(&l, xt->dims[1]));
	return conv_failed(lk_end(&l, kir_s_for(k, c.pl, I(k, 0), planes, 1, KIR_LOOP_PARALLEL, st)));
}

static lower_result lower_pool(lower_cx *cx, const tbc_op *op, pool_kind kind) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	const tbc_value *iv = op->n_outputs > 1 ? op->outputs[1] : NULL;
	const tbc_type *xt = &xv->type, *yt = &yv->type;
	tbc_dtype ct;
	bool is_float = conv_float_ct(xt->dtype, &ct);
	if (kind != POOL_MAX) ct = TBC_DT_F64; /* sums in double, as the interpreter */
	if (!is_float) {
		if (kind != POOL_MAX || (xt->dtype != TBC_DT_I8 && xt->dtype != TBC_DT_U8)) return conv_refuse(cx, op, "on this dtype");
		ct = xt->dtype;
	}
	if (xt->rank < 3 || !conv_static_dims(xt, 2) || !conv_static_dims(yt, 2)) return conv_refuse(cx, op, "with symbolic spatial dims");
	int nsp = xt->rank - 2;
	conv_geom g;
	const char *err = conv_geom_read(&g, op, nsp, NULL, true, true);
	for (int i = 0; !err && i < nsp; i++) g.in[i] = xt->dims[2 + i].size;
	if (!err) err = conv_geom_resolve(&g);
	if (err) return lower_error(cx, op, "%s", err), LOWER_FAILED;
	bool include_pad = kind == POOL_AVG && tbc_attr_int(op, "count_include_pad", 0) != 0;
	bool col_major = tbc_attr_int(op, "storage_order", 0) == 1;
	double p = (double)tbc_attr_int(op, "p", 2);
	int yb = lower_result_buf(cx, yv), ib = iv ? lower_result_buf(cx, iv) : -2;
	if (yb < 0 || ib == -1) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	/* The row form is the CPU's (a vector loop over a row's interior); a
	 * device computes each output on its own, one work-item each. */
	if (kind == POOL_MAX && !iv && cx->target->parallel != TBC_PAR_GRID) return maxpool_rows(cx, op, &g, yb, ct);
	static const char *const names[] = {"averagepool", "maxpool", "lppool"};
	lk l;
	if (!lk_begin(&l, cx, names[kind])) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *y = lk_buf(&l, yb), *ix = iv ? lk_buf(&l, ib) : NULL;
	if (!x || !y || (iv && !ix)) return LOWER_FAILED;
	int64_t isz = conv_prod(0, nsp, g.in), osz = conv_prod(0, nsp, g.out);

	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX);
	kir_var *o[CONV_MAX_SPATIAL], *kv[CONV_MAX_SPATIAL];
	for (int d = 0; d < nsp; d++) o[d] = kir_var_new(k, "o", KIR_INDEX);
	kir_block pos = {0}; /* the body at one output position */
	kir_expr *lo[CONV_MAX_SPATIAL], *hi[CONV_MAX_SPATIAL], *base[CONV_MAX_SPATIAL];
	kir_expr *count = I(l.k, 1), *empty = kir_e_int(k, TBC_DT_BOOL, 0);
	for (int d = 0; d < nsp; d++) {
		int64_t dil = g.dil[d];
		base[d] = LET(l.k, &pos, "base", SUB(l.k, MUL(l.k, V(l.k, o[d]), I(l.k, g.stride[d])), I(l.k, g.pad_begin[d])));
		tap_range(&l, &pos, base[d], dil, g.kernel[d], g.in[d], &lo[d], &hi[d]);
		empty = kir_e_binary(k, KIR_OR, empty, kir_e_cmp(k, KIR_GE, lo[d], hi[d]));
		kir_expr *n;
		if (include_pad)
			n = MAX(l.k, I(l.k, 0), MIN(l.k, I(l.k, g.kernel[d]),
						  ADD(l.k, DIV(l.k, SUB(l.k, I(l.k, g.in[d] + g.pad_end[d] - 1), base[d]), I(l.k, dil)), I(l.k, 1))));
		else n = MAX(l.k, I(l.k, 0), SUB(l.k, hi[d], lo[d]));
		count = MUL(l.k, count, n);
	}
	kir_var *acc = kir_var_new(k, "acc", ct), *best = kir_var_new(k, "best", KIR_INDEX);
	kir_expr *init;
	if (kind != POOL_MAX) init = fconst(&l, ct, 0);
	else if (is_float) init = kir_e_float(k, ct, NAN);
	else init = kir_e_int(k, ct, xt->dtype == TBC_DT_I8 ? -128 : 0);
	kir_block_add(k, &pos, kir_s_set(k, acc, init));
	if (kind == POOL_MAX) kir_block_add(k, &pos, kir_s_set(k, best, I(l.k, -1)));
	/* The innermost tap. */
	kir_expr *il = I(l.k, 0), *ic = I(l.k, 0);
	int64_t istride = 1, cstride = 1;
	for (int d = nsp - 1; d >= 0; d--) {
		kv[d] = kir_var_new(k, "k", KIR_INDEX);
		kir_expr *i = CLAMP(l.k, ADD(l.k, base[d], MUL(l.k, V(l.k, kv[d]), I(l.k, g.dil[d]))), g.in[d]);
		il = ADD(l.k, il, MUL(l.k, i, I(l.k, istride)));
		istride *= g.in[d];
	}
	for (int d = 0; d < nsp; d++) {
		kir_expr *i = CLAMP(l.k, ADD(l.k, base[d], MUL(l.k, V(l.k, kv[d]), I(l.k, g.dil[d]))), g.in[d]);
		ic = ADD(l.k, ic, MUL(l.k, i, I(l.k, cstride)));
		cstride *= g.in[d];
	}
	kir_block tap = {0};
	kir_expr *v = LET(l.k, &tap, "v", kir_e_cast(k, ct, kir_e_load(k, x, ADD(l.k, MUL(l.k, V(l.k, pl), I(l.k, isz)), il))));
	kir_expr *a = V(l.k, acc);
	if (kind == POOL_AVG) {
		kir_block_add(k, &tap, kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, a, v)));
	} else if (kind == POOL_LP) {
		kir_block_add(k, &tap, kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, a, kir_e_binary(k, KIR_POW, kir_e_unary(k, KIR_ABS, v), fconst(&l, ct, p)))));
	} else {
		kir_expr *first = kir_e_cmp(k, KIR_LT, V(l.k, best), I(l.k, 0));
		kir_expr *take = kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_GT, v, a), first);
		if (is_float)
			take = kir_e_binary(k, KIR_OR, take,
					    kir_e_binary(k, KIR_AND, kir_e_unary(k, KIR_ISNAN, a),
							 kir_e_unary(k, KIR_NOT, kir_e_unary(k, KIR_ISNAN, v))));
		kir_var *tk = kir_var_new(k, "take", TBC_DT_BOOL);
		kir_block_add(k, &tap, kir_s_set(k, tk, take));
		kir_block_add(k, &tap, kir_s_set(k, acc, kir_e_select(k, V(l.k, tk), v, a)));
		/* Without an Indices output, best only marks the first tap. */
		kir_expr *at = ix ? (col_major ? ic : il) : I(l.k, 0);
		kir_block_add(k, &tap, kir_s_set(k, best, kir_e_select(k, V(l.k, tk), at, V(l.k, best))));
	}
	kir_stmt *taps = tap.first;
	for (int d = nsp - 1; d >= 0; d--) taps = kir_s_for(k, kv[d], lo[d], hi[d], 1, KIR_LOOP_SEQUENTIAL, taps);
	kir_block_add(k, &pos, taps);
	/* The result. */
	kir_expr *oi = I(l.k, 0);
	int64_t ostride = 1;
	for (int d = nsp - 1; d >= 0; d--) {
		oi = ADD(l.k, oi, MUL(l.k, V(l.k, o[d]), I(l.k, ostride)));
		ostride *= g.out[d];
	}
	kir_expr *at = ADD(l.k, MUL(l.k, V(l.k, pl), I(l.k, osz)), oi);
	kir_expr *res = V(l.k, acc);
	if (kind == POOL_AVG) res = kir_e_binary(k, KIR_DIV, res, kir_e_cast(k, ct, count));
	else if (kind == POOL_LP) res = kir_e_binary(k, KIR_POW, res, fconst(&l, ct, 1.0 / p));
	else res = kir_e_select(k, empty, fconst(&l, ct, 0), res);
	kir_block_add(k, &pos, kir_s_store(k, y, at, kir_e_cast(k, yt->dtype, res)));
	if (ix) {
		kir_expr *bi = V(l.k, best);
		kir_block_add(k, &pos, kir_s_store(k, ix, at, kir_e_cast(k, TBC_DT_I64, kir_e_select(k, kir_e_cmp(k, KIR_LT, bi, I(l.k, 0)), I(l.k, -1), ADD(l.k, MUL(l.k, V(l.k, pl), I(l.k, isz)), bi)))));
	}
	kir_stmt *s = pos.first;
	for (int d = nsp - 1; d >= 0; d--) s = kir_s_for(k, o[d], I(l.k, 0), I(l.k, g.out[d]), 1, KIR_LOOP_SEQUENTIAL, s);
	kir_expr *planes = MUL(l.k, lk_dim(&l, xt->dims[0]), lk_dim(&l, xt->dims[1]));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(l.k, 0), planes, 1, KIR_LOOP_PARALLEL, s)));
}

/* ---- Global pools: one window over every spatial dim --------------------------------*/
static lower_result lower_global_pool(lower_cx *cx, const tbc_op *op, pool_kind kind) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type;
	tbc_dtype ct;
	if (!conv_float_ct(xt->dtype, &ct)) return conv_refuse(cx, op, "on this dtype");
	if (kind != POOL_MAX) ct = TBC_DT_F64; /* sums in double, as the interpreter */
	if (xt->rank < 3) return conv_refuse(cx, op, "of this rank");
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (conv_static_empty(&yv->type)) return LOWER_OK;
	static const char *const names[] = {"globalaveragepool", "globalmaxpool", "globallppool"};
	lk l;
	if (!lk_begin(&l, cx, names[kind])) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *y = lk_buf(&l, yb);
	if (!x || !y) return LOWER_FAILED;
	kir_expr *sz = I(l.k, 1);
	for (int d = 2; d < xt->rank; d++) sz = MUL(l.k, sz, lk_dim(&l, xt->dims[d]));
	double p = (double)tbc_attr_int(op, "p", 2);
	kir_var *pl = kir_var_new(k, "pl", KIR_INDEX), *i = kir_var_new(k, "i", KIR_INDEX);
	kir_var *acc = kir_var_new(k, "acc", ct);
	/* The f64 sum of f32 (or narrower) terms: its order changes it far
	 * below f32's rounding, so it may be vectorized (as softmax's). */
	acc->reassoc = kind == POOL_AVG && xt->dtype != TBC_DT_F64;
	kir_block body = {0};
	kir_block_add(k, &body, kir_s_set(k, acc, kind == POOL_MAX ? kir_e_float(k, ct, -INFINITY) : fconst(&l, ct, 0)));
	kir_expr *base = LET(l.k, &body, "base", MUL(l.k, V(l.k, pl), sz));
	kir_expr *v = kir_e_cast(k, ct, kir_e_load(k, x, ADD(l.k, base, V(l.k, i))));
	kir_expr *a = V(l.k, acc), *upd;
	if (kind == POOL_AVG) upd = kir_e_binary(k, KIR_ADD, a, v);
	else if (kind == POOL_MAX) upd = kir_e_binary(k, KIR_MAX, a, v);
	else upd = kir_e_binary(k, KIR_ADD, a, kir_e_binary(k, KIR_POW, kir_e_unary(k, KIR_ABS, v), fconst(&l, ct, p)));
	kir_block_add(k, &body, kir_s_for(k, i, I(l.k, 0), sz, 1, KIR_LOOP_SEQUENTIAL, kir_s_set(k, acc, upd)));
	kir_expr *res = V(l.k, acc);
	if (kind == POOL_AVG) res = kir_e_binary(k, KIR_DIV, res, kir_e_cast(k, ct, sz));
	else if (kind == POOL_LP) res = kir_e_binary(k, KIR_POW, res, fconst(&l, ct, 1.0 / p));
	kir_block_add(k, &body, kir_s_store(k, y, V(l.k, pl), kir_e_cast(k, yv->type.dtype, res)));
	kir_expr *planes = MUL(l.k, lk_dim(&l, xt->dims[0]), lk_dim(&l, xt->dims[1]));
	return conv_failed(lk_end(&l, kir_s_for(k, pl, I(l.k, 0), planes, 1, KIR_LOOP_PARALLEL, body.first)));
}

lower_result lower_family_conv(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_Conv: return lower_conv(cx, op);
	case TBC_OP_AveragePool: return lower_pool(cx, op, POOL_AVG);
	case TBC_OP_MaxPool: return lower_pool(cx, op, POOL_MAX);
	case TBC_OP_LpPool: return lower_pool(cx, op, POOL_LP);
	case TBC_OP_GlobalAveragePool: return lower_global_pool(cx, op, POOL_AVG);
	case TBC_OP_GlobalMaxPool: return lower_global_pool(cx, op, POOL_MAX);
	case TBC_OP_GlobalLpPool: return lower_global_pool(cx, op, POOL_LP);
	default: return lower_conv_more(cx, op);
	}
}

lower_result lower_family_conv_shape(lower_cx *cx, const tbc_op *op) {
	return op->code == TBC_OP_MaxUnpool ? lower_max_unpool_shape(cx, op) : LOWER_NOT_MINE;
}
