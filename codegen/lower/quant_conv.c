/* ConvInteger and QLinearConv on the CPU: an integer GEMM per image and
 * group,
 *
 *   y[n, g](m, p) = sum over k of (W[g](m, k) - w_zp[m]) (X[n, g](k, p) - x_zp)
 *
 * X the im2col matrix (row k a channel and tap of the group, column p an
 * output position), made by a kernel; the sums are the interpreter's, bit
 * for bit, in either form:
 *
 * - Where the target has kir_dot4 and W is a constant (quant_vnni.c): W is
 *   A (rows: the output channels; u8, an i8 W moved up by 128 when
 *   lowering), the activations are B, packed by `qconv_pack` in the dot
 *   product's groups of 4 rows (4 channels of one tap: rows k = tap * Cg4 +
 *   channel, the channels padded to a multiple of 4) with their column sums,
 *   x_zp at a tap in the padding (x - x_zp is 0 there: the interpreter's
 *   padding contributes nothing).  The vector lanes run along positions and
 *   y is stored as NCHW rows.  (vpdpbusd multiplies unsigned bytes, the
 *   broadcast, by signed ones: the activations, shifted by 128 where u8.)
 * - Else: `im2row` writes X transposed (a row per position, k = c * taps +
 *   tap, W's own order) as x - x_zp in int16 (0 in the padding), W is
 *   shifted by its zero point the same way (quant.c's shift) and read as B
 *   transposed, and the GEMM generator sums in a type where the sums are
 *   exact (quant_exact_ct), storing y with row stride 1, column stride P.
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
	bool w_is_a; /* the dot4 form: W is A (rows: channels), the activations B */
	kir_buffer *mult;           /* the multiplier per channel, when the scales are constants */
	kir_buffer *xs, *ws, *ys;   /* else the scales */
	kir_buffer *yz, *bias;
	bool bias_i32;  /* the sum plus the bias cannot leave int32: added there */
	bool yz_const;  /* y's zero point a constant, yz_value */
	double yz_value;
	double lo, hi;
	tbc_dtype ydt;
} qconv;

/* The dot4 form: conv_gemm's own bases (A is W); else A is conv_gemm's
 * col (its batch's base) and B its W. */
static kir_expr *qconv_base(void *ctx, lk *l, int which, kir_expr *batch) {
	qconv *q = ctx;
	return conv_gemm_base(&q->cg, l, q->w_is_a || which == 2 ? which : 1 - which, batch);
}

/* QLinearConv: y = saturate(round_half_even((sum + bias) * mult + y_zp));
 * ConvInteger: the sum. */
static kir_expr *qconv_epi(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col) {
	qconv *q = ctx;
	kir_kernel *k = l->k;
	kir_expr *sum = CAST(k, TBC_DT_I32, acc);
	if (!q->qlinear) return sum;
	const tbc_dtype f = TBC_DT_F32, d = TBC_DT_F64;
	kir_expr *ch = q->w_is_a ? row : col;
	kir_expr *m = q->cg.G == 1 ? ch : ADD(k, MUL(k, MOD(k, batch, I(k, q->cg.G)), I(k, q->cg.Mg)), ch);
	if (q->bias && q->bias_i32) sum = BIN(k, KIR_ADD, sum, CAST(k, TBC_DT_I32, LOAD(k, q->bias, m)));
	kir_expr *r = CAST(k, d, sum), *mult;
	if (q->bias && !q->bias_i32) r = BIN(k, KIR_ADD, r, CAST(k, d, LOAD(k, q->bias, m)));
	if (q->mult) {
		mult = LOAD(k, q->mult, m);
	} else {
		kir_expr *xs = CAST(k, f, LOAD(k, q->xs, I(k, 0))), *ys = CAST(k, f, LOAD(k, q->ys, I(k, 0)));
		kir_expr *ws = CAST(k, f, LOAD(k, q->ws, q->ws_per ? m : I(k, 0)));
		mult = BIN(k, KIR_DIV, BIN(k, KIR_MUL, xs, ws), ys);
	}
	r = BIN(k, KIR_MUL, r, CAST(k, d, mult));
	if (q->yz_const) r = BIN(k, KIR_ADD, r, F(k, d, q->yz_value));
	else if (q->yz) r = BIN(k, KIR_ADD, r, CAST(k, d, LOAD(k, q->yz, I(k, 0))));
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

/* Whether every sum of K products of 8-bit values less their zero points
 * (each factor within +-255) plus constant bias b stays within int32, so
 * that the sum and the bias add exactly in int32 as they do in the
 * interpreter's f64. */
static bool bias_fits_i32(const tbc_value *b, int64_t K) {
	if (!b || b->kind != TBC_VALUE_CONST || !b->constant || K > ((int64_t)1 << 20)) return false;
	const tbc_tensor *t = b->constant;
	int64_t big = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		int64_t v = tbc_load_i64(t->dtype, t->data, (size_t)i);
		if (v < -((int64_t)1 << 40) || v > ((int64_t)1 << 40)) return false;
		if ((v < 0 ? -v : v) > big) big = v < 0 ? -v : v;
	}
	return K * 255 * 255 + big <= INT32_MAX;
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

/* Row r of a kernel parallel over (image-and-group, position of the outer
 * spatial dims, OR of them): its image-and-group (returned), its outer
 * position *orow and that position's coordinates od[0 .. nsp - 1), in blk. */
static kir_expr *row_coords(kir_kernel *k, kir_block *blk, const conv_geom *g, kir_expr *r, int64_t OR, kir_expr **orow,
			    kir_expr **od) {
	kir_expr *ng = LET(k, blk, "ng", DIV(k, r, I(k, OR)));
	kir_expr *rest = *orow = LET(k, blk, "orow", MOD(k, r, I(k, OR)));
	for (int d = g->nsp - 2; d >= 0; d--) {
		od[d] = LET(k, blk, "o", MOD(k, rest, I(k, g->out[d])));
		rest = DIV(k, rest, I(k, g->out[d]));
	}
	return ng;
}

/* A[(ng P + p) Kg + c KS + t] = x[ng Cg + c][tap t of position p] - x_zp
 * in int16 for image-and-group ng, 0 where the tap lies in the padding.
 * Parallel over (ng, position of the outer spatial dims); per input
 * channel and tap of the outer dims, each tap kw of the last dim over the
 * row's positions, a plain load where its tap is inside the input row. */
static bool im2row(lower_cx *cx, const qconv *q, const tbc_value *xv, const tbc_value *zv, int ab, tbc_dim images) {
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
	kir_expr *orow, *od[CONV_MAX_SPATIAL];
	kir_expr *ng = row_coords(k, &body, g, V(k, r), OR, &orow, od);
	kir_expr *zx = zb ? LET(k, &body, "zx", CAST(k, adt, LOAD(k, zb, I(k, 0)))) : NULL;
	kir_expr *pad = kir_e_int(k, adt, 0);
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
			v = CAST(k, adt, v);
			if (zx) v = BIN(k, KIR_SUB, v, zx);
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

/* The dot4 GEMM's B, the activations, for image-and-group ng, its rows
 * k = t * Cg4 + c (tap-major, the channels of the group padded to Cg4, a
 * multiple of 4, so that a group of 4 rows is 4 channels of one tap) and
 * its positions p < P:
 *   b[ng * bstride + (k / 4) * ldb + 4 p + k % 4] = v(c, t, p) - cb,
 * v the tap's x, or x_zp in the padding and for the channels past Cg (so
 * that b - zb' = v - x_zp is 0 there, whatever the weight), cb 128 for a
 * u8 x (vpdpbusd's second operand is signed); and cs[ng * ncs + p] = the
 * sum over k of b, less K zb' (zb' = x_zp - cb).
 *
 * Parallel over (ng, block of PB positions), PB a multiple of 16, so that a
 * block's bytes of every group of b and its column sums are whole cache
 * lines (ldb and ncs are multiples of 16): parallel over output rows, two
 * threads wrote the halves of the same lines (a 7-wide row is 28 bytes of
 * a group) for every group of k: the fused QDQ ResNet-50 at two threads
 * went from 18.2 to 16.3 ms with the blocks.  Whole rows where a block of them is still small enough to
 * balance, else the rows clipped to the block.  Per row of the block, tap
 * (generated apart) and group of 4 channels, the positions whose tap lies
 * inside the input row are a vector loop of plain loads and 4-way
 * interleaved stores, the borders select, a tap whose outer dims lie in the
 * padding is all x_zp. */
static bool pack_b(lower_cx *cx, const qconv *q, const tbc_value *xv, const tbc_value *zv, int bb, int csb, tbc_dim images,
		   int64_t Cg4, int64_t ldb, int64_t ncs, int64_t cb) {
	/* A pointwise convolution (1 x .. x 1, stride 1, no padding) reads
	 * position p of x for output position p: packed as one row of P
	 * positions, its blocks' vector loops are PB long (a row of ResNet-50's
	 * last stage is 7: every loop had been its scalar remainder). */
	qconv flat;
	bool pointwise = q->KS == 1;
	for (int d = 0; d < q->g.nsp; d++)
		pointwise = pointwise && q->g.stride[d] == 1 && q->g.pad_begin[d] == 0 && q->g.in[d] == q->g.out[d];
	if (pointwise) {
		flat = *q;
		flat.g.nsp = 1;
		flat.g.kernel[0] = flat.g.stride[0] = flat.g.dil[0] = 1;
		flat.g.pad_begin[0] = flat.g.pad_end[0] = 0;
		flat.g.in[0] = flat.g.out[0] = q->cg.P;
		q = &flat;
	}
	lk l;
	if (!lk_begin(&l, cx, "qconv_pack")) return false;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_value(&l, xv), *b = lk_buf(&l, bb), *cs = lk_buf(&l, csb), *zb = zv ? lk_value(&l, zv) : NULL;
	if (!x || !b || !cs || (zv && !zb)) return false;
	const conv_geom *g = &q->g;
	const tbc_dtype i32 = TBC_DT_I32;
	int w = g->nsp - 1;
	int64_t OW = g->out[w], KW = g->kernel[w], G4 = q->KS * Cg4 / 4;
	int64_t sw = g->stride[w], inw = g->in[w], P = q->cg.P;
	/* PB: about P / 16 positions, whole rows where lcm(OW, 16) allows */
	int64_t target = (P + 15) / 16, line = OW, PB;
	while (line % 16) line += OW;
	PB = line <= 2 * target ? (target + line - 1) / line * line : (target + 15) / 16 * 16;
	int64_t NB = (P + PB - 1) / PB;
	bool whole = PB % OW == 0;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX);
	kir_block top = {0}, body = {0};
	kir_expr *ng = LET(k, &top, "ng", DIV(k, V(k, r), I(k, NB)));
	kir_expr *p0 = LET(k, &top, "p0", MUL(k, MOD(k, V(k, r), I(k, NB)), I(k, PB)));
	kir_expr *p1 = LET(k, &top, "p1", MIN(k, ADD(k, p0, I(k, PB)), I(k, P)));
	kir_expr *zx = zb ? LET(k, &top, "zx", CAST(k, i32, LOAD(k, zb, I(k, 0)))) : kir_e_int(k, i32, 0);
	kir_expr *pad = LET(k, &top, "pad", BIN(k, KIR_SUB, zx, kir_e_int(k, i32, cb)));
	kir_expr *xplane = LET(k, &top, "xplane", MUL(k, ng, I(k, q->Cg * q->in_size)));
	/* the rows of the block, each its positions [lo, hi) of the block */
	kir_var *orv = kir_var_new(k, "orow", KIR_INDEX);
	kir_expr *orow = V(k, orv), *od[CONV_MAX_SPATIAL], *rest = orow;
	for (int d = g->nsp - 2; d >= 0; d--) {
		od[d] = LET(k, &body, "o", MOD(k, rest, I(k, g->out[d])));
		rest = DIV(k, rest, I(k, g->out[d]));
	}
	kir_expr *prow = LET(k, &body, "prow", MUL(k, orow, I(k, OW)));
	kir_expr *lo = whole ? I(k, 0) : LET(k, &body, "lo", MAX(k, SUB(k, p0, prow), I(k, 0)));
	kir_expr *hi = whole ? I(k, OW) : LET(k, &body, "hi", MIN(k, SUB(k, p1, prow), I(k, OW)));
	kir_expr *brow = LET(k, &body, "brow", ADD(k, MUL(k, ng, I(k, G4 * ldb)), MUL(k, prow, I(k, 4))));
	kir_expr *csrow = LET(k, &body, "csrow", ADD(k, MUL(k, ng, I(k, ncs)), prow));
	kir_var *ow0 = kir_var_new(k, "ow", KIR_INDEX);
	kir_expr *cs0 = MUL(k, kir_e_int(k, i32, -G4 * 4), pad);
	kir_block_add(k, &body, kir_s_for(k, ow0, lo, hi, 1, KIR_LOOP_VECTOR, kir_s_store(k, cs, ADD(k, csrow, V(k, ow0)), cs0)));

	for (int64_t t = 0; t < q->KS; t++) {
		/* the tap's outer dims: inside or not, and its input row */
		int64_t kd[CONV_MAX_SPATIAL], rem = t / KW, kw = t % KW, istride = inw;
		for (int d = w - 1; d >= 0; d--) kd[d] = rem % g->kernel[d], rem /= g->kernel[d];
		kir_expr *inside = kir_e_int(k, TBC_DT_BOOL, 1), *rowoff = I(k, 0);
		for (int d = w - 1; d >= 0; d--) {
			kir_expr *i = ADD(k, MUL(k, od[d], I(k, g->stride[d])), I(k, kd[d] * g->dil[d] - g->pad_begin[d]));
			inside = kir_e_binary(k, KIR_AND, inside, kir_e_binary(k, KIR_AND, CMP(k, KIR_GE, i, I(k, 0)), CMP(k, KIR_LT, i, I(k, g->in[d]))));
			rowoff = ADD(k, rowoff, MUL(k, MIN(k, MAX(k, i, I(k, 0)), I(k, g->in[d] - 1)), I(k, istride)));
			istride *= g->in[d];
		}
		/* 4 channels of the group at a time */
		kir_var *cg = kir_var_new(k, "cg", KIR_INDEX);
		kir_block grp = {0}, copy = {0}, fill = {0};
		kir_expr *bgroup = LET(k, &grp, "bgroup", ADD(k, brow, MUL(k, ADD(k, I(k, t * Cg4 / 4), V(k, cg)), I(k, ldb))));
		kir_expr *valid[4], *xrow[4];
		for (int qq = 0; qq < 4; qq++) {
			kir_expr *c = ADD(k, MUL(k, V(k, cg), I(k, 4)), I(k, qq));
			valid[qq] = LET(k, &grp, "valid", CMP(k, KIR_LT, c, I(k, q->Cg)));
			kir_expr *cc = MIN(k, c, I(k, q->Cg - 1));
			xrow[qq] = LET(k, &grp, "xrow", ADD(k, ADD(k, xplane, MUL(k, cc, I(k, q->in_size))), rowoff));
		}
		int64_t off = kw * g->dil[w] - g->pad_begin[w], first, end;
		inside_span(off, sw, inw, OW, &first, &end);
		for (int part = 0; part < 4; part++) {
			int64_t from = part == 1 ? first : part == 2 ? end : 0, to = part == 0 ? first : part == 1 ? end : OW;
			if (from >= to) continue;
			kir_expr *efrom = whole ? I(k, from) : MAX(k, lo, I(k, from)), *eto = whole ? I(k, to) : MIN(k, hi, I(k, to));
			kir_var *ow = kir_var_new(k, "ow", KIR_INDEX);
			kir_block pb = {0};
			kir_expr *sum = NULL;
			for (int qq = 0; qq < 4; qq++) {
				kir_expr *v = pad;
				if (part < 3) { /* part 3: the outer tap in the padding */
					kir_expr *i = ADD(k, MUL(k, V(k, ow), I(k, sw)), I(k, off)), *ok = valid[qq];
					if (part != 1) {
						ok = kir_e_binary(k, KIR_AND, ok, kir_e_binary(k, KIR_AND, CMP(k, KIR_GE, i, I(k, 0)), CMP(k, KIR_LT, i, I(k, inw))));
						i = MIN(k, MAX(k, i, I(k, 0)), I(k, inw - 1));
					}
					kir_expr *xv_ = BIN(k, KIR_SUB, CAST(k, i32, LOAD(k, x, ADD(k, xrow[qq], i))), kir_e_int(k, i32, cb));
					v = LET(k, &pb, "bv", kir_e_select(k, ok, xv_, pad));
				}
				kir_block_add(k, &pb, kir_s_store(k, b, ADD(k, bgroup, ADD(k, MUL(k, V(k, ow), I(k, 4)), I(k, qq))), CAST(k, TBC_DT_I8, v)));
				sum = sum ? BIN(k, KIR_ADD, sum, v) : v;
			}
			kir_expr *at = ADD(k, csrow, V(k, ow));
			kir_block_add(k, &pb, kir_s_store(k, cs, at, BIN(k, KIR_ADD, LOAD(k, cs, at), sum)));
			kir_stmt *loop = kir_s_for(k, ow, efrom, eto, 1, part == 1 || part == 3 ? KIR_LOOP_VECTOR : KIR_LOOP_SEQUENTIAL, pb.first);
			kir_block_add(k, part == 3 ? &fill : &copy, loop);
		}
		kir_block_add(k, &grp, w > 0 ? kir_s_if(k, inside, copy.first, fill.first) : copy.first);
		kir_block_add(k, &body, kir_s_for(k, cg, I(k, 0), I(k, Cg4 / 4), 1, KIR_LOOP_SEQUENTIAL, grp.first));
	}
	kir_expr *first_row = DIV(k, p0, I(k, OW)), *end_row = ADD(k, DIV(k, SUB(k, p1, I(k, 1)), I(k, OW)), I(k, 1));
	kir_block_add(k, &top, kir_s_for(k, orv, first_row, end_row, 1, KIR_LOOP_SEQUENTIAL, body.first));
	kir_expr *blocks = MUL(k, lk_dim(&l, images), I(k, q->cg.G * NB));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), blocks, 1, KIR_LOOP_PARALLEL, top.first));
}

/* W as the dot4 GEMM's A: [M, KS * Cg4], column t * Cg4 + c = W[m, c, t],
 * 0 for the channels past Cg (B holds x_zp there: they add nothing); u8,
 * an i8 W moved up by 128 (so its zero point is 128 more: za_add), since
 * the instruction reads A as unsigned bytes and an i8 A would be flipped
 * as it is loaded, row by row. */
static int weights_tap_major(lower_cx *cx, const qconv *q, const tbc_value *wv, int64_t Cg4) {
	const tbc_tensor *w = wv->constant;
	int64_t K4 = q->KS * Cg4, dims[2] = {q->cg.M, K4};
	void *data = NULL;
	int b = lower_const_new(cx, TBC_DT_U8, 2, dims, "qconv_weights", &data);
	if (b < 0) return -1;
	uint8_t *out = data, add = w->dtype == TBC_DT_I8 ? 128 : 0;
	for (int64_t m = 0; m < q->cg.M; m++)
		for (int64_t c = 0; c < q->Cg; c++)
			for (int64_t t = 0; t < q->KS; t++)
				out[m * K4 + t * Cg4 + c] = (uint8_t)(tbc_load_i64(w->dtype, w->data, (size_t)((m * q->Cg + c) * q->KS + t)) + add);
	return b;
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
	int64_t yz_c = 0;
	if (yzv && quant_uniform_const(yzv, &yz_c)) q.yz_const = true, q.yz_value = (double)yz_c;
	q.bias_i32 = bias_fits_i32(bv, q.cg.Kg);

	int ob = lower_result_buf(cx, yv);
	if (ob < 0) return LOWER_FAILED;
	if (conv_static_empty(yt)) return LOWER_OK;
	int mb = qlinear ? const_multiplier(cx, xsv, wsv, ysv, q.cg.M) : -1;
	if (mb == -2) return LOWER_FAILED;
	/* The byte dot product where the target has it and W is a constant:
	 * W is A, its rows the channels, and the activations are B, packed by
	 * a kernel, so that the vector lanes run along positions and y is
	 * stored as NCHW rows.  Else int16 operands shifted by their zero
	 * points: im2row's positions are A's rows, W is B. */
	q.w_is_a = wv->kind == TBC_VALUE_CONST && wv->constant && qgemm_vnni_fits(cx, wt->dtype, xt->dtype, q.cg.Kg, q.cg.P);
	int ab, bb = -1, csb = -1;
	int64_t nc = 0, ncs = 0, ldb = 0, cb = xt->dtype == TBC_DT_U8 ? 128 : 0;
	bool w_shift = !q.w_is_a && wzv && !quant_zero_const(wzv);
	int64_t Cg4 = (q.Cg + 3) / 4 * 4, K4 = q.KS * Cg4;
	if (q.w_is_a) {
		nc = qgemm_vnni_tile_cols(cx, q.cg.P);
		ncs = (q.cg.P + nc - 1) / nc * nc, ldb = 4 * ncs;
		ab = weights_tap_major(cx, &q, wv, Cg4);
		bb = lower_shared_temp(cx, "qconv_b", TBC_DT_I8, xt->dims[0], G * (K4 / 4) * ldb);
		csb = lower_shared_temp(cx, "qconv_colsum", TBC_DT_I32, xt->dims[0], G * ncs);
		if (ab < 0 || bb < 0 || csb < 0 || !pack_b(cx, &q, xv, xzv, bb, csb, xt->dims[0], Cg4, ldb, ncs, cb)) return LOWER_FAILED;
	} else {
		ab = lower_shared_temp(cx, "im2row", TBC_DT_I16, xt->dims[0], G * q.cg.P * q.cg.Kg);
		if (ab < 0 || !im2row(cx, &q, xv, xzv, ab, xt->dims[0])) return LOWER_FAILED;
		if (w_shift) {
			tbc_type view = *wt;
			view.rank = 2;
			view.dims[1] = (tbc_dim){.size = q.cg.Kg};
			bb = quant_shift_operand(cx, op, wv, &view, wzv, wz_per, false);
		} else {
			bb = lower_value_buf(cx, wv);
		}
		if (bb < 0) return LOWER_FAILED;
	}

	lk l;
	if (!lk_begin(&l, cx, qlinear ? "qlinear_conv" : "conv_integer")) return LOWER_FAILED;
	tbc_dim Kd = {.size = q.cg.Kg};
	gemm_spec s = {.ct = q.w_is_a ? TBC_DT_I32 : quant_exact_ct(xt->dtype, wt->dtype, true, w_shift, Kd)};
	s.a.buf = lk_buf(&l, ab);
	s.b.buf = q.w_is_a ? NULL : lk_buf(&l, bb);
	s.y.buf = lk_buf(&l, ob);
	if (!s.a.buf || (!q.w_is_a && !s.b.buf) || !s.y.buf) return LOWER_FAILED;
	if (qlinear) {
		q.mult = mb >= 0 ? lk_buf(&l, mb) : NULL;
		if (!q.mult) {
			q.xs = lk_value(&l, xsv), q.ws = lk_value(&l, wsv), q.ys = lk_value(&l, ysv);
			if (!q.xs || !q.ws || !q.ys) return LOWER_FAILED;
		}
		if ((yzv && !(q.yz = lk_value(&l, yzv))) || (bv && !(q.bias = lk_value(&l, bv)))) return LOWER_FAILED;
	}
	s.NB = MUL(l.k, lk_dim(&l, xt->dims[0]), I(l.k, G));
	s.ctx = &q;
	s.base = qconv_base;
	s.epi = qconv_epi;
	s.K = I(l.k, q.cg.Kg);
	if (!q.w_is_a) {
		s.M = I(l.k, q.cg.P), s.N = I(l.k, q.cg.Mg);
		s.a.rs = I(l.k, q.cg.Kg), s.a.cs = I(l.k, 1);
		s.b.rs = I(l.k, 1), s.b.cs = I(l.k, q.cg.Kg);
		s.y.rs = I(l.k, 1), s.y.cs = I(l.k, q.cg.P);
		return conv_failed(lk_end(&l, gemm_generate(&l, &s)));
	}
	q.cg.Kg = K4; /* A's rows: W in tap-major order, its channels padded (conv_gemm_base) */
	s.M = I(l.k, q.cg.Mg), s.N = I(l.k, q.cg.P), s.K = I(l.k, K4);
	s.a.rs = I(l.k, K4), s.a.cs = I(l.k, 1);
	s.y.rs = I(l.k, q.cg.P), s.y.cs = I(l.k, 1);
	/* W's zero point one constant (per channel in form, as quantizers write
	 * it, but all 0): a number, so that its product with the column sums
	 * is one per column, not one per element */
	int64_t wz_c = 0;
	bool wz_uniform = !wzv || quant_uniform_const(wzv, &wz_c);
	qgemm_vnni v = {.bzv = xzv, .az_row = wz_per && !wz_uniform, .K = K4, .N = q.cg.P, .bstride = K4 / 4 * ldb, .ldb = ldb,
			.ncs = ncs, .cb = cb, .a_groups = G, .za_add = wz_c + (wt->dtype == TBC_DT_I8 ? 128 : 0)};
	v.bpk = lk_buf(&l, bb), v.bcs = lk_buf(&l, csb);
	v.az = wzv && !wz_uniform ? lk_value(&l, wzv) : NULL;
	v.bz = xzv ? lk_value(&l, xzv) : NULL;
	if (!v.bpk || !v.bcs || (wzv && !wz_uniform && !v.az) || (xzv && !v.bz)) return LOWER_FAILED;
	return conv_failed(lk_end(&l, qgemm_vnni_generate(&l, &s, &v)));
}
