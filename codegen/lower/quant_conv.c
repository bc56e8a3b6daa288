/* ConvInteger and QLinearConv on the CPU: im2row + an integer GEMM.
 *
 *   y[n, g](p, m) = sum over k of (A[n, g](p, k) - x_zp) (W[g](m, k) - w_zp[m])
 *
 * A is the im2row matrix of image n and group g: one row per output
 * position p, k = c * taps + tap as in W's own layout [M, Cg, kernel...],
 * so the weights read as G matrices of Mg x Kg are B transposed.  The
 * positions are A's rows so that the output channels, B's columns, are the
 * byte dot product's vector lanes (vpdpbusd multiplies unsigned bytes, the
 * broadcast activations, by signed ones, the weights); y (NCHW) is then
 * stored with row stride 1 and column stride P.
 *
 * Where the target has kir_dot4 and W is a constant (quant_vnni.c): W
 * packed when lowering, A holding x's own bytes with x_zp at a tap in the
 * padding (so x - x_zp is 0 there: the interpreter's padding contributes
 * nothing), the zero points paid back from row and column sums.  Else A
 * holds x - x_zp in int16 (0 in the padding), W is shifted by its zero
 * point the same way (quant.c's shift), and the GEMM generator sums them
 * in a type where the sums are exact (quant_exact_ct).  Either way the sums
 * are the interpreter's, bit for bit.
 *
 * QLinearConv's epilogue repeats the interpreter's arithmetic: the sum plus
 * the bias in f64 (exact: integers far below 2^53), times the multiplier
 * x_scale * w_scale / y_scale computed in f32 (when lowering where the
 * scales are constants), plus y_zp, rounded half to even, clamped. */
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_conv.h"
#include "codegen/lower/lower_gemm.h"
#include "codegen/lower/quant_internal.h"
#include "codegen/lower/quant_vnni.h"
#include "ir/kernels/conv_util.h"

typedef struct qconv {
	conv_gemm cg; /* G, Mg, Kg, P, M: conv_gemm_base's view of the GEMMs */
	conv_geom g;
	int64_t Cg, KS, in_size;
	bool qlinear, ws_per;
	kir_buffer *mult;           /* the multiplier per channel, when the scales are constants */
	kir_buffer *xs, *ws, *ys;   /* else the scales */
	kir_buffer *yz, *bias;
	double lo, hi;
	tbc_dtype ydt;
} qconv;

/* A is conv_gemm's col (its batch's base), B its W. */
static kir_expr *qconv_base(void *ctx, lk *l, int which, kir_expr *batch) {
	qconv *q = ctx;
	return conv_gemm_base(&q->cg, l, which == 0 ? 1 : which == 1 ? 0 : 2, batch);
}

/* QLinearConv: y = saturate(round_half_even((sum + bias) * mult + y_zp));
 * ConvInteger: the sum. */
static kir_expr *qconv_epi(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col) {
	(void)row;
	qconv *q = ctx;
	kir_kernel *k = l->k;
	kir_expr *sum = CAST(k, TBC_DT_I32, acc);
	if (!q->qlinear) return sum;
	const tbc_dtype f = TBC_DT_F32, d = TBC_DT_F64;
	kir_expr *m = q->cg.G == 1 ? col : ADD(k, MUL(k, MOD(k, batch, I(k, q->cg.G)), I(k, q->cg.Mg)), col);
	kir_expr *r = CAST(k, d, sum), *mult;
	if (q->bias) r = BIN(k, KIR_ADD, r, CAST(k, d, LOAD(k, q->bias, m)));
	if (q->mult) {
		mult = LOAD(k, q->mult, m);
	} else {
		kir_expr *xs = CAST(k, f, LOAD(k, q->xs, I(k, 0))), *ys = CAST(k, f, LOAD(k, q->ys, I(k, 0)));
		kir_expr *ws = CAST(k, f, LOAD(k, q->ws, q->ws_per ? m : I(k, 0)));
		mult = BIN(k, KIR_DIV, BIN(k, KIR_MUL, xs, ws), ys);
	}
	r = BIN(k, KIR_MUL, r, CAST(k, d, mult));
	if (q->yz) r = BIN(k, KIR_ADD, r, CAST(k, d, LOAD(k, q->yz, I(k, 0))));
	return CAST(k, q->ydt, quant_clamp_nan0(l, kir_e_unary(k, KIR_ROUND_EVEN, r), q->lo, q->hi));
}

/* The multiplier x_scale * w_scale[m] / y_scale of every channel in f32,
 * as the interpreter computes it, into a constant; -1 when a scale is not
 * a constant (the epilogue computes it), -2 on failure. */
static int const_multiplier(lower_cx *cx, const tbc_value *xsv, const tbc_value *wsv, const tbc_value *ysv, int64_t M) {
	const tbc_value *s[3] = {xsv, wsv, ysv};
	for (int i = 0; i < 3; i++)
		if (s[i]->kind != TBC_VALUE_CONST || !s[i]->constant) return -1;
	void *data = NULL;
	int64_t dims[1] = {M};
	int b = lower_const_new(cx, TBC_DT_F32, 1, dims, "qconv_multiplier", &data);
	if (b < 0) return -2;
	const tbc_tensor *xs = xsv->constant, *ws = wsv->constant, *ys = ysv->constant;
	float *mult = data;
	for (int64_t m = 0; m < M; m++) {
		float prod = (float)tbc_load_f64(xs->dtype, xs->data, 0) *
			     (float)tbc_load_f64(ws->dtype, ws->data, (size_t)(ws->numel == 1 ? 0 : m));
		mult[m] = prod / (float)tbc_load_f64(ys->dtype, ys->data, 0);
	}
	return b;
}

/* The output positions [*first, *end) of a row of `out` whose tap at
 * ow * s + off lies inside an input row of `in`. */
static void inside_span(int64_t off, int64_t s, int64_t in, int64_t out, int64_t *first, int64_t *end) {
	int64_t a = 0, b = 0;
	while (a < out && a * s + off < 0) a++;
	b = a;
	while (b < out && b * s + off <= in - 1) b++;
	*first = a, *end = b;
}

/* A[(ng P + p) Kg + c KS + t] = x[ng Cg + c][tap t of position p] for
 * image-and-group ng, or `pad` where the tap lies in the padding; shifted,
 * A is int16 x - x_zp and pad 0, else x's type and pad x_zp (0 without).
 * Parallel over (ng, position of the outer spatial dims); per input
 * channel and tap of the outer dims, each tap kw of the last dim over the
 * row's positions, a plain load where its tap is inside the input row. */
static bool im2row(lower_cx *cx, const qconv *q, const tbc_value *xv, const tbc_value *zv, int ab, tbc_dim images,
		   bool shifted) {
	lk l;
	if (!lk_begin(&l, cx, "im2row")) return false;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *a = lk_buf(&l, ab), *zb = zv ? lk_value(&l, zv) : NULL;
	if (!x || !a || (zv && !zb)) return false;
	const conv_geom *g = &q->g;
	int w = g->nsp - 1;
	int64_t OW = g->out[w], OR = q->cg.P / OW, KW = g->kernel[w], Kg = q->cg.Kg;
	tbc_dtype adt = a->dtype;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX);
	kir_block body = {0};
	kir_expr *ng = LET(k, &body, "ng", DIV(k, V(k, r), I(k, OR)));
	kir_expr *orow = LET(k, &body, "orow", MOD(k, V(k, r), I(k, OR)));
	kir_expr *zx = zb ? LET(k, &body, "zx", CAST(k, adt, LOAD(k, zb, I(k, 0)))) : NULL;
	kir_expr *pad = shifted || !zx ? kir_e_int(k, adt, 0) : zx;
	kir_expr *od[CONV_MAX_SPATIAL], *rest = orow;
	for (int d = w - 1; d >= 0; d--) {
		od[d] = LET(k, &body, "o", MOD(k, rest, I(k, g->out[d])));
		rest = DIV(k, rest, I(k, g->out[d]));
	}
	kir_expr *arow = LET(k, &body, "arow", MUL(k, ADD(k, MUL(k, ng, I(k, q->cg.P)), MUL(k, orow, I(k, OW))), I(k, Kg)));
	kir_expr *xplane = LET(k, &body, "xplane", MUL(k, ng, I(k, q->Cg * q->in_size)));

	/* Channel c, a tap of the outer dims: in the input or not. */
	kir_var *c = kir_var_new(k, "c", KIR_INDEX), *kv[CONV_MAX_SPATIAL];
	kir_block tap = {0};
	kir_expr *inside = kir_e_int(k, TBC_DT_BOOL, 1), *xi = ADD(k, xplane, MUL(k, V(k, c), I(k, q->in_size)));
	kir_expr *touter = I(k, 0);
	int64_t istride = g->in[w];
	for (int d = 0; d < w; d++) {
		kv[d] = kir_var_new(k, "kt", KIR_INDEX);
		touter = ADD(k, MUL(k, touter, I(k, g->kernel[d])), V(k, kv[d]));
	}
	for (int d = w - 1; d >= 0; d--) {
		kir_expr *i = LET(k, &tap, "i", ADD(k, SUB(k, MUL(k, od[d], I(k, g->stride[d])), I(k, g->pad_begin[d])),
						    MUL(k, V(k, kv[d]), I(k, g->dil[d]))));
		inside = kir_e_binary(k, KIR_AND, inside,
				      kir_e_binary(k, KIR_AND, CMP(k, KIR_GE, i, I(k, 0)), CMP(k, KIR_LT, i, I(k, g->in[d]))));
		xi = ADD(k, xi, MUL(k, MIN(k, MAX(k, i, I(k, 0)), I(k, g->in[d] - 1)), I(k, istride)));
		istride *= g->in[d];
	}
	kir_expr *xrow = LET(k, &tap, "xrow", xi);
	kir_expr *acol = LET(k, &tap, "acol", ADD(k, arow, ADD(k, MUL(k, V(k, c), I(k, q->KS)), MUL(k, touter, I(k, KW)))));
	kir_block copy = {0}, fill = {0};
	int64_t sw = g->stride[w], inw = g->in[w];
	for (int64_t kw = 0; kw < KW; kw++) {
		int64_t off = kw * g->dil[w] - g->pad_begin[w], first, end;
		inside_span(off, sw, inw, OW, &first, &end);
		for (int part = 0; part < 3; part++) {
			int64_t lo = part == 0 ? 0 : part == 1 ? first : end, hi = part == 0 ? first : part == 1 ? end : OW;
			if (lo >= hi) continue;
			kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
			kir_expr *i = ADD(k, MUL(k, V(k, ow), I(k, sw)), I(k, off));
			kir_expr *v = LOAD(k, x, ADD(k, xrow, part == 1 ? i : MIN(k, MAX(k, i, I(k, 0)), I(k, inw - 1))));
			if (shifted) v = CAST(k, adt, v);
			if (shifted && zx) v = BIN(k, KIR_SUB, v, zx);
			if (part != 1)
				v = kir_e_select(k, kir_e_binary(k, KIR_AND, CMP(k, KIR_GE, i, I(k, 0)), CMP(k, KIR_LT, i, I(k, inw))), v, pad);
			kir_expr *at = ADD(k, acol, ADD(k, MUL(k, V(k, ow), I(k, Kg)), I(k, kw)));
			kir_block_add(k, &copy, kir_s_for(k, ow, I(k, lo), I(k, hi), 1, KIR_LOOP_SEQUENTIAL, kir_s_store(k, a, at, v)));
		}
		if (w == 0) continue;
		kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
		kir_expr *at = ADD(k, acol, ADD(k, MUL(k, V(k, ow), I(k, Kg)), I(k, kw)));
		kir_block_add(k, &fill, kir_s_for(k, ow, I(k, 0), I(k, OW), 1, KIR_LOOP_SEQUENTIAL, kir_s_store(k, a, at, pad)));
	}
	kir_block_add(k, &tap, w > 0 ? kir_s_if(k, inside, copy.first, fill.first) : copy.first);
	kir_stmt *st = tap.first;
	for (int d = w - 1; d >= 0; d--) st = kir_s_for(k, kv[d], I(k, 0), I(k, g->kernel[d]), 1, KIR_LOOP_SEQUENTIAL, st);
	kir_block_add(k, &body, kir_s_for(k, c, I(k, 0), I(k, q->Cg), 1, KIR_LOOP_SEQUENTIAL, st));
	kir_expr *rows = MUL(k, lk_dim(&l, images), I(k, q->cg.G * OR));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* y[ng][m][p] = t[ng][p][m] for image-and-group ng (Mg channels, P
 * positions): the dot product's results, channels contiguous, into NCHW.
 * Parallel over (ng, block of 16 channels); per position the block's 16
 * values are one contiguous read. */
#define NHWC_BLOCK 16
static bool nhwc_to_nchw(lower_cx *cx, const qconv *q, int tb, int yb, tbc_dim images) {
	lk l;
	if (!lk_begin(&l, cx, "qconv_nchw")) return false;
	kir_kernel *k = l.k;
	kir_buffer *t = lk_buf(&l, tb), *y = lk_buf(&l, yb);
	if (!t || !y) return false;
	int64_t Mg = q->cg.Mg, P = q->cg.P, NBL = (Mg + NHWC_BLOCK - 1) / NHWC_BLOCK;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *p = kir_var_new(k, "p", KIR_INDEX);
	kir_block body = {0}, pos = {0};
	kir_expr *ng = LET(k, &body, "ng", DIV(k, V(k, r), I(k, NBL)));
	kir_expr *m0 = LET(k, &body, "m0", MUL(k, MOD(k, V(k, r), I(k, NBL)), I(k, NHWC_BLOCK)));
	kir_expr *trow = LET(k, &pos, "trow", MUL(k, ADD(k, MUL(k, ng, I(k, P)), V(k, p)), I(k, Mg)));
	kir_expr *yplane = LET(k, &pos, "yplane", ADD(k, MUL(k, MUL(k, ng, I(k, Mg)), I(k, P)), V(k, p)));
	for (int64_t mm = 0; mm < NHWC_BLOCK && mm < Mg; mm++) {
		/* the last block's channels past Mg store the last channel again */
		kir_expr *m = Mg % NHWC_BLOCK ? MIN(k, ADD(k, m0, I(k, mm)), I(k, Mg - 1)) : ADD(k, m0, I(k, mm));
		m = LET(k, &pos, "m", m);
		kir_block_add(k, &pos, kir_s_store(k, y, ADD(k, yplane, MUL(k, m, I(k, P))), LOAD(k, t, ADD(k, trow, m))));
	}
	kir_block_add(k, &body, kir_s_for(k, p, I(k, 0), I(k, P), 1, KIR_LOOP_SEQUENTIAL, pos.first));
	kir_expr *blocks = MUL(k, lk_dim(&l, images), I(k, q->cg.G * NBL));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), blocks, 1, KIR_LOOP_PARALLEL, body.first));
}

lower_result lower_qconv(lower_cx *cx, const tbc_op *op, bool qlinear) {
	const tbc_value *xv = op->inputs[0], *wv = op->inputs[qlinear ? 3 : 1];
	const tbc_value *xzv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_value *wzv = qlinear ? op->inputs[5] : op->n_inputs > 3 ? op->inputs[3] : NULL;
	const tbc_value *xsv = qlinear ? op->inputs[1] : NULL, *wsv = qlinear ? op->inputs[4] : NULL;
	const tbc_value *ysv = qlinear ? op->inputs[6] : NULL, *yzv = qlinear ? op->inputs[7] : NULL;
	const tbc_value *bv = qlinear && op->n_inputs > 8 ? op->inputs[8] : NULL;
	const tbc_value *yv = op->outputs[0];
	if (!yv) return LOWER_OK;
	const tbc_type *xt = &xv->type, *wt = &wv->type, *yt = &yv->type;
	if (xt->rank < 3 || wt->rank != xt->rank || yt->rank != xt->rank) return quant_refuse(cx, op, "operands of this rank");
	if (!quant_static_type(wt)) return quant_refuse(cx, op, "a weight of symbolic shape");
	if (!conv_static_dims(xt, 1) || !conv_static_dims(yt, 1)) return quant_refuse(cx, op, "symbolic channel or spatial dims");
	if ((xt->dtype != TBC_DT_U8 && xt->dtype != TBC_DT_I8) || (wt->dtype != TBC_DT_U8 && wt->dtype != TBC_DT_I8))
		return quant_refuse(cx, op, "an operand other than int8/uint8");
	qconv q;
	memset(&q, 0, sizeof q);
	int nsp = xt->rank - 2;
	int64_t wk[CONV_MAX_SPATIAL];
	for (int i = 0; i < nsp; i++) wk[i] = wt->dims[2 + i].size;
	const char *err = conv_geom_read(&q.g, op, nsp, wk, true, false);
	for (int i = 0; !err && i < nsp; i++) q.g.in[i] = xt->dims[2 + i].size;
	if (!err) err = conv_geom_resolve(&q.g);
	for (int i = 0; !err && i < nsp; i++)
		if (q.g.out[i] != yt->dims[2 + i].size) err = "the convolution's geometry disagrees with its output type";
	if (err) return lower_error(cx, op, "%s", err), LOWER_FAILED;
	int64_t C = xt->dims[1].size, G = tbc_attr_int(op, "group", 1);
	q.cg.M = wt->dims[0].size;
	if (G <= 0 || C != wt->dims[1].size * G || q.cg.M % G)
		return lower_error(cx, op, "X, W and group do not agree"), LOWER_FAILED;
	q.cg.G = G, q.cg.Mg = q.cg.M / G, q.Cg = C / G;
	q.KS = conv_prod(0, nsp, q.g.kernel);
	q.cg.Kg = q.Cg * q.KS;
	q.cg.P = conv_prod(0, nsp, q.g.out);
	q.in_size = conv_prod(0, nsp, q.g.in);
	bool wz_per = false, dummy = false, b_per = false;
	if (!quant_vec_param(cx, op, xzv, -1, "x_zero_point", &dummy) || !quant_vec_param(cx, op, wzv, q.cg.M, "w_zero_point", &wz_per))
		return LOWER_FAILED;
	if (qlinear && (!quant_vec_param(cx, op, xsv, -1, "x_scale", &dummy) ||
			!quant_vec_param(cx, op, wsv, q.cg.M, "w_scale", &q.ws_per) ||
			!quant_vec_param(cx, op, ysv, -1, "y_scale", &dummy) || !quant_vec_param(cx, op, yzv, -1, "y_zero_point", &dummy) ||
			(bv && !quant_vec_param(cx, op, bv, q.cg.M, "B", &b_per))))
		return LOWER_FAILED;
	if (bv && !b_per && q.cg.M != 1) return lower_error(cx, op, "B must hold one value per output channel"), LOWER_FAILED;
	if (qlinear && !quant_int_range(yt->dtype, &q.lo, &q.hi)) return quant_refuse(cx, op, "a non-integer output");
	q.qlinear = qlinear, q.ydt = yt->dtype;

	int ob = lower_result_buf(cx, yv);
	if (ob < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	/* The byte dot product (x's own bytes, W packed), else int16 shifted
	 * operands. */
	bool vnni = qgemm_vnni_fits(cx, xt->dtype, wv, q.cg.Kg, q.cg.Mg);
	bool w_shift = !vnni && wzv && !quant_zero_const(wzv);
	tbc_dtype adt = vnni ? xt->dtype : TBC_DT_I16;
	int ab = lower_shared_temp(cx, "im2row", adt, xt->dims[0], G * q.cg.P * q.cg.Kg);
	if (ab < 0 || !im2row(cx, &q, xv, xzv, ab, xt->dims[0], !vnni)) return LOWER_FAILED;
	int wb;
	if (w_shift) {
		tbc_type view = *wt;
		view.rank = 2;
		view.dims[1] = (tbc_dim){.size = q.cg.Kg};
		wb = quant_shift_operand(cx, op, wv, &view, wzv, wz_per, false);
	} else {
		wb = vnni ? 0 : lower_value_buf(cx, wv);
	}
	int mb = qlinear ? const_multiplier(cx, xsv, wsv, ysv, q.cg.M) : -1;
	/* The dot product's vector lanes are channels: its results go to
	 * scratch channels-last (contiguous stores), then into y. */
	int tb = vnni ? lower_shared_temp(cx, "qconv_nhwc", yt->dtype, xt->dims[0], G * q.cg.P * q.cg.Mg) : ob;
	if (wb < 0 || mb == -2 || tb < 0) return LOWER_FAILED;

	lk l;
	if (!lk_begin(&l, cx, qlinear ? "qlinear_conv" : "conv_integer")) return LOWER_FAILED;
	tbc_dim Kd = {.size = q.cg.Kg};
	gemm_spec s = {.ct = vnni ? TBC_DT_I32 : quant_exact_ct(xt->dtype, wt->dtype, true, w_shift, Kd)};
	s.a.buf = lk_buf(&l, ab);
	s.b.buf = vnni ? NULL : lk_buf(&l, wb);
	s.y.buf = lk_buf(&l, tb);
	if (!s.a.buf || (!vnni && !s.b.buf) || !s.y.buf) return LOWER_FAILED;
	if (qlinear) {
		q.mult = mb >= 0 ? lk_buf(&l, mb) : NULL;
		if (!q.mult) {
			q.xs = lk_value(&l, xsv), q.ws = lk_value(&l, wsv), q.ys = lk_value(&l, ysv);
			if (!q.xs || !q.ws || !q.ys) return LOWER_FAILED;
		}
		if ((yzv && !(q.yz = lk_value(&l, yzv))) || (bv && !(q.bias = lk_value(&l, bv)))) return LOWER_FAILED;
	}
	s.M = I(l.k, q.cg.P), s.N = I(l.k, q.cg.Mg), s.K = I(l.k, q.cg.Kg);
	s.NB = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, G));
	s.a.rs = I(l.k, q.cg.Kg), s.a.cs = I(l.k, 1);
	s.b.rs = I(l.k, 1), s.b.cs = I(l.k, q.cg.Kg);
	if (vnni) s.y.rs = I(l.k, q.cg.Mg), s.y.cs = I(l.k, 1);
	else s.y.rs = I(l.k, 1), s.y.cs = I(l.k, q.cg.P);
	s.ctx = &q;
	s.base = qconv_base;
	s.epi = qconv_epi;
	if (!vnni) return conv_failed(lk_end(&l, gemm_generate(&l, &s)));
	qgemm_vnni v = {.b = wv, .bzv = wzv, .bz_col = wz_per, .nk_groups = G, .K = q.cg.Kg, .N = q.cg.Mg};
	v.az = xzv ? lk_value(&l, xzv) : NULL;
	v.bz = wzv ? lk_value(&l, wzv) : NULL;
	if ((xzv && !v.az) || (wzv && !v.bz)) return LOWER_FAILED;
	if (!lk_end(&l, qgemm_vnni_generate(&l, &s, &v))) return LOWER_FAILED;
	return conv_failed(nhwc_to_nchw(cx, &q, tb, ob, xt->dims[0]));
}
