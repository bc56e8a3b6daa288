/* Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions on a CPU.
 *
 * The output is cut into 2 x 2 tiles; tile t's outputs come from the 4 x 4
 * input patch d at rows 2 th - pt .. +3 and columns 2 tw - pl .. +3.  With
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks")
 *
 *   B^T = [1  0 -1  0]   G = [1    0    0 ]   A^T = [1 1  1  0]
 *         [0  1  1  0]       [1/2  1/2  1/2]         [0 1 -1 -1]
 *         [0 -1  1  0]       [1/2 -1/2  1/2]
 *         [0  1  0 -1]       [0    0    1 ]
 *
 * y_tile[k] = A^T [ sum_c (G g[k][c] G^T) .* (B^T d[c] B) ] A: the 16
 * products per tile and channel pair are 16 GEMMs over the channels,
 *
 *   M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T),  xi = 4 a + b < 16,
 *
 * U = G g G^T computed when compiling (in double, stored in f32), V = B^T d B
 * by a kernel (wino_in) from the input copied once into padded planes
 * (wino_planes), and y = A^T M A + bias by another (wino_out).  16
 * multiplications give 4 outputs where direct summation takes 36: the
 * GEMMs do 4/9 of im2col's work.  The transforms are additions only (G's
 * halves are exact); the results differ from direct summation by the
 * rounding of their sums of up to 4 terms.
 *
 * The tiles are numbered t = th (TW + 1) + tw: each row of tiles has one
 * more, never used, so that a patch's rows lie at 2 t + a constant in the
 * planes.  Those keep a channel's even rows of the padded input (Wq = 2 TW
 * + 2 wide), then its odd ones: patch row i of tile t starts at 2 t +
 * (i % 2) (TH + 1) Wq + (i / 2) Wq.  The input transform is then one vector
 * loop over a channel's tiles (stride-2 loads), not one per row of tiles,
 * whose 7 or 14 tiles had left most of it to the scalar remainder.  The
 * GEMMs' columns grow by a tile a row (T = TH (TW + 1)), which rarely adds
 * one of their 32-column tiles (49 -> 56 tiles: two either way). */
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_conv.h"
#include "codegen/lower/lower_gemm.h"

static kir_expr *CLAMP_IDX(kir_kernel *k, kir_expr *x, int64_t hi) { return MIN(k, MAX(k, x, I(k, 0)), I(k, hi - 1)); }

/* The GEMMs' addressing: batch b = 16 n + xi, T the tiles with the unused
 * one per row; u_step > 0: computed transposed, U in panels, U[xi]'s
 * u_step elements from U[xi - 1]'s. */
typedef struct wino_gemm {
	int64_t K, C, T, u_step;
} wino_gemm;

static kir_expr *wino_base(void *ctx, lk *l, int which, kir_expr *batch) {
	const wino_gemm *w = ctx;
	kir_kernel *k = l->k;
	kir_expr *xi = MOD(k, batch, I(k, 16));
	if (w->u_step) /* a: V^T, b: U^T's panels */
		return which == 0 ? MUL(k, batch, I(k, w->C * w->T)) : which == 1 ? MUL(k, xi, I(k, w->u_step))
										 : MUL(k, batch, I(k, w->K * w->T));
	switch (which) {
	case 0: return MUL(k, xi, I(k, w->K * w->C));      /* U[xi] */
	case 1: return MUL(k, batch, I(k, w->C * w->T));   /* V[n][xi] */
	default: return MUL(k, batch, I(k, w->K * w->T));  /* M[n][xi] */
	}
}

/* U[xi][m][c] = (G g[m][c] G^T)[a][b], xi = 4 a + b: a constant of the
 * arena, [16 M, C]. */
static tbc_value *winograd_weights(lower_cx *cx, const tbc_value *wv, int64_t M, int64_t C) {
	static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
	tbc_arena *a = cx->p->arena;
	const tbc_tensor *w = wv->constant;
	tbc_value *v = tbc_arena_alloc(a, sizeof *v);
	tbc_tensor *t = tbc_arena_alloc(a, sizeof *t);
	float *u = tbc_arena_alloc(a, (size_t)(16 * M * C) * sizeof *u);
	if (!v || !t || !u) return NULL;
	const float *g = w->data;
	for (int64_t m = 0; m < M; m++)
		for (int64_t c = 0; c < C; c++) {
			const float *f = g + (m * C + c) * 9;
			double gf[4][3]; /* G f */
			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 3; j++)
					gf[i][j] = G[i][0] * f[j] + G[i][1] * f[3 + j] + G[i][2] * f[6 + j];
			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 4; j++)
					u[((i * 4 + j) * M + m) * C + c] =
						(float)(gf[i][0] * G[j][0] + gf[i][1] * G[j][1] + gf[i][2] * G[j][2]);
		}
	*v = *wv;
	*t = *w;
	t->rank = 2, t->dims[0] = 16 * M, t->dims[1] = C;
	t->numel = 16 * M * C;
	t->data = u;
	v->constant = t;
	tbc_type_set(&v->type, w->dtype, 2, t->dims);
	return v;
}

/* Whether conv c (geometry g, weights wv, input dtype xt) is computed so:
 * 2-D, 3x3, stride and dilation 1, one group, f32 throughout with weights
 * known when compiling, on a CPU target with fma tiles whose constants it
 * may lay out as its own (gemv_panels: not when a device program shares
 * them), and enough tiles that the GEMMs' columns are not mostly padding
 * (docs/performance.md: measured per shape). */
bool conv_winograd_wanted(const lower_cx *cx, const conv_gemm *c, const conv_geom *g, const tbc_value *wv, tbc_dtype xt) {
	const char *e = getenv("TBC_CONV_WINOGRAD"); /* 0: never, for measuring; 1: whatever the tiles' count */
	if ((e && !strcmp(e, "0")) || g->nsp != 2 || c->pairs || c->G != 1 || !cx->target->fma_tile ||
	    !cx->target->gemv_panels || cx->target->parallel != TBC_PAR_HOST_THREADS)
		return false;
	if (g->kernel[0] != 3 || g->kernel[1] != 3 || g->stride[0] != 1 || g->stride[1] != 1 || g->dil[0] != 1 ||
	    g->dil[1] != 1)
		return false;
	if (wv->kind != TBC_VALUE_CONST || !wv->constant || wv->type.dtype != TBC_DT_F32 || xt != TBC_DT_F32 ||
	    c->yt != TBC_DT_F32 || c->ct != TBC_DT_F32)
		return false;
	if (e && !strcmp(e, "1")) return true; /* whatever the size, for testing */
	return ((g->out[0] + 1) / 2) * ((g->out[1] + 1) / 2) >= 16;
}

/* The planes: for each image and channel, the padded input's rows 0, 2,
 * .., 2 TH, then 1, 3, .., 2 TH + 1, each Wq = 2 TW + 2 wide (pads per g,
 * and one more row or column of zeros where OH or OW is odd), then 2 zeros
 * (read by the last row's unused tile). */
static bool wino_planes(lower_cx *cx, const conv_geom *g, int xb, int pb, tbc_dim nd, int64_t C, int64_t TH, int64_t TW) {
	lk l;
	if (!lk_begin(&l, cx, "wino_planes")) return false;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_buf(&l, xb), *pl = lk_buf(&l, pb);
	if (!x || !pl) return false;
	int64_t H = g->in[0], W = g->in[1], pt = g->pad_begin[0], pw = g->pad_begin[1];
	int64_t R = TH + 1, Wq = 2 * TW + 2, PL = 2 * R * Wq + 2;
	kir_expr *zero = F(k, TBC_DT_F32, 0);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	/* row r of the output: (n c, phase, q), the input row 2 q + phase - pt */
	kir_expr *nc = LET(k, &body, "nc", DIV(k, V(k, r), I(k, 2 * R)));
	kir_expr *pq = LET(k, &body, "pq", MOD(k, V(k, r), I(k, 2 * R)));
	kir_expr *out = LET(k, &body, "out", ADD(k, MUL(k, nc, I(k, PL)), MUL(k, pq, I(k, Wq))));
	kir_expr *ih = LET(k, &body, "ih", SUB(k, ADD(k, MUL(k, MOD(k, pq, I(k, R)), I(k, 2)), DIV(k, pq, I(k, R))), I(k, pt)));
	kir_expr *in = LET(k, &body, "in", ADD(k, MUL(k, nc, I(k, H * W)), MUL(k, CLAMP_IDX(k, ih, H), I(k, W))));
	kir_expr *inside = AND(k, CMP(k, KIR_GE, ih, I(k, 0)), CMP(k, KIR_LT, ih, I(k, H)));
	kir_block copy = {0};
	if (pw > 0)
		kir_block_add(k, &copy, kir_s_for(k, j, I(k, 0), I(k, pw), 1, KIR_LOOP_SEQUENTIAL,
						  kir_s_store(k, pl, ADD(k, out, V(k, j)), zero)));
	kir_block_add(k, &copy, kir_s_for(k, j, I(k, 0), I(k, W), 1, KIR_LOOP_VECTOR,
					  kir_s_store(k, pl, ADD(k, ADD(k, out, I(k, pw)), V(k, j)), LOAD(k, x, ADD(k, in, V(k, j))))));
	if (Wq > pw + W)
		kir_block_add(k, &copy, kir_s_for(k, j, I(k, pw + W), I(k, Wq), 1, KIR_LOOP_SEQUENTIAL,
						  kir_s_store(k, pl, ADD(k, out, V(k, j)), zero)));
	kir_stmt *zeros = kir_s_for(k, j, I(k, 0), I(k, Wq), 1, KIR_LOOP_VECTOR, kir_s_store(k, pl, ADD(k, out, V(k, j)), zero));
	kir_block_add(k, &body, kir_s_if(k, inside, copy.first, zeros));
	kir_expr *last = CMP(k, KIR_EQ, pq, I(k, 2 * R - 1));
	kir_expr *end = ADD(k, MUL(k, nc, I(k, PL)), I(k, 2 * R * Wq));
	kir_block_add(k, &body, kir_s_if(k, last, kir_s_for(k, j, I(k, 0), I(k, 2), 1, KIR_LOOP_SEQUENTIAL,
							    kir_s_store(k, pl, ADD(k, end, V(k, j)), zero)), NULL));
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, C * 2 * R));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* V[n][xi][c][t] = (B^T d B)[a][b] of tile t, d its 4 x 4 patch of the
 * planes, parallel over (n, c), a vector loop over the tiles. */
static bool wino_in(lower_cx *cx, int pb, int vb, tbc_dim nd, int64_t C, int64_t TH, int64_t TW) {
	lk l;
	if (!lk_begin(&l, cx, "wino_in")) return false;
	kir_kernel *k = l.k;
	kir_buffer *pl = lk_buf(&l, pb), *vt = lk_buf(&l, vb);
	if (!pl || !vt) return false;
	int64_t R = TH + 1, Wq = 2 * TW + 2, PL = 2 * R * Wq + 2, T = TH * (TW + 1);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block body = {0}, in = {0};
	kir_expr *src = LET(k, &body, "src", MUL(k, V(k, r), I(k, PL)));
	kir_expr *dst = LET(k, &body, "dst", ADD(k, MUL(k, DIV(k, V(k, r), I(k, C)), I(k, 16 * C * T)),
						 MUL(k, MOD(k, V(k, r), I(k, C)), I(k, T))));
	kir_expr *col = ADD(k, src, MUL(k, V(k, t), I(k, 2)));
	kir_expr *w[4][4];
	/* w = B^T d: combinations of the patch's rows, column by column */
	for (int j = 0; j < 4; j++) {
		kir_expr *d[4];
		for (int i = 0; i < 4; i++) d[i] = LOAD(k, pl, ADD(k, col, I(k, (i % 2) * R * Wq + (i / 2) * Wq + j)));
		w[0][j] = LET(k, &in, "w", SUB(k, d[0], d[2]));
		w[1][j] = LET(k, &in, "w", ADD(k, d[1], d[2]));
		w[2][j] = LET(k, &in, "w", SUB(k, d[2], d[1]));
		w[3][j] = LET(k, &in, "w", SUB(k, d[1], d[3]));
	}
	/* V = w B: the same along each row */
	for (int i = 0; i < 4; i++) {
		kir_expr *v[4] = {SUB(k, w[i][0], w[i][2]), ADD(k, w[i][1], w[i][2]), SUB(k, w[i][2], w[i][1]),
				  SUB(k, w[i][1], w[i][3])};
		for (int j = 0; j < 4; j++)
			kir_block_add(k, &in, kir_s_store(k, vt, ADD(k, ADD(k, dst, I(k, (i * 4 + j) * C * T)), V(k, t)), v[j]));
	}
	kir_block_add(k, &body, kir_s_for(k, t, I(k, 0), I(k, T), 1, KIR_LOOP_VECTOR, in.first));
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, C));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* One loop of wino_out over tiles tw in [lo, hi): y's rows 2 th (+1 when
 * row1) and columns 2 tw (+1 when col1) of channel m from M[n][xi][m][t]. */
static kir_stmt *wino_out_loop(kir_kernel *k, kir_buffer *mt, kir_buffer *y, kir_expr *src, kir_expr *dst, kir_expr *bias,
			       int64_t KT, int64_t OW, int64_t lo, int64_t hi, bool row1, bool col1) {
	kir_var *tw = kir_var_new(k, "tw", KIR_INDEX);
	kir_block in = {0};
	kir_expr *u[2][4];
	/* u = A^T m, column by column */
	for (int j = 0; j < 4; j++) {
		kir_expr *m[4];
		for (int i = 0; i < 4; i++) m[i] = LOAD(k, mt, ADD(k, ADD(k, src, I(k, (i * 4 + j) * KT)), V(k, tw)));
		u[0][j] = LET(k, &in, "u", ADD(k, ADD(k, m[0], m[1]), m[2]));
		u[1][j] = LET(k, &in, "u", SUB(k, SUB(k, m[1], m[2]), m[3]));
	}
	kir_expr *col = MUL(k, V(k, tw), I(k, 2));
	for (int i = 0; i < (row1 ? 2 : 1); i++) {
		kir_expr *y0 = ADD(k, ADD(k, u[i][0], u[i][1]), u[i][2]);
		kir_expr *y1 = SUB(k, SUB(k, u[i][1], u[i][2]), u[i][3]);
		if (bias) y0 = ADD(k, y0, bias), y1 = ADD(k, y1, bias);
		kir_expr *at = ADD(k, ADD(k, dst, I(k, i * OW)), col);
		kir_block_add(k, &in, kir_s_store(k, y, at, y0));
		if (col1) kir_block_add(k, &in, kir_s_store(k, y, ADD(k, at, I(k, 1)), y1));
	}
	return kir_s_for(k, tw, I(k, lo), I(k, hi), 1, KIR_LOOP_VECTOR, in.first);
}

/* y[n][m][2 th + i][2 tw + j] = (A^T M[n][.][m][t] A)[i][j] + bias[m], for
 * the positions inside y (an odd OH or OW: the last tiles' second row or
 * column dropped), parallel over (n, m), a row of tiles after another. */
static bool wino_out(lower_cx *cx, int mb, int yb, const tbc_value *bv, tbc_dim nd, int64_t K, int64_t OH, int64_t OW) {
	lk l;
	if (!lk_begin(&l, cx, "wino_out")) return false;
	kir_kernel *k = l.k;
	kir_buffer *mt = lk_buf(&l, mb), *y = lk_buf(&l, yb), *bb = bv ? lk_value(&l, bv) : NULL;
	if (!mt || !y || (bv && !bb)) return false;
	int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, T = TH * (TW + 1);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *tv = kir_var_new(k, "th", KIR_INDEX);
	kir_block body = {0};
	kir_expr *m = LET(k, &body, "m", MOD(k, V(k, r), I(k, K)));
	kir_expr *n = LET(k, &body, "n", DIV(k, V(k, r), I(k, K)));
	kir_expr *src0 = LET(k, &body, "src0", ADD(k, MUL(k, n, I(k, 16 * K * T)), MUL(k, m, I(k, T))));
	kir_expr *dst0 = LET(k, &body, "dst0", MUL(k, V(k, r), I(k, OH * OW)));
	kir_expr *bias = bb ? LET(k, &body, "bias", CAST(k, TBC_DT_F32, LOAD(k, bb, m))) : NULL;
	/* a row of tiles th: row1, its second row too (not the last of an odd OH) */
	for (int row1 = 1; row1 >= 0; row1--) {
		if ((!row1 && OH % 2 == 0) || (row1 && OH / 2 == 0)) continue;
		kir_expr *th = row1 ? V(k, tv) : I(k, TH - 1);
		kir_block blk = {0};
		kir_expr *src = LET(k, &blk, "src", ADD(k, src0, MUL(k, th, I(k, TW + 1))));
		kir_expr *dst = LET(k, &blk, "dst", ADD(k, dst0, MUL(k, th, I(k, 2 * OW))));
		if (OW / 2) kir_block_add(k, &blk, wino_out_loop(k, mt, y, src, dst, bias, K * T, OW, 0, OW / 2, row1, true));
		if (OW % 2) kir_block_add(k, &blk, wino_out_loop(k, mt, y, src, dst, bias, K * T, OW, TW - 1, TW, row1, false));
		kir_block_add(k, &body, row1 ? kir_s_for(k, tv, I(k, 0), I(k, OH / 2), 1, KIR_LOOP_SEQUENTIAL, blk.first) : blk.first);
	}
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, K));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

lower_result conv_winograd(lower_cx *cx, const conv_geom *g, const conv_gemm *c, const tbc_value *wv, const tbc_value *bv,
			   int xb, int yb, tbc_dim nd, int64_t C) {
	int64_t K = c->M, OH = g->out[0], OW = g->out[1], TH = (OH + 1) / 2, TW = (OW + 1) / 2, T = TH * (TW + 1);
	int64_t plane = 2 * (TH + 1) * (2 * TW + 2) + 2;
	int pb = lower_shared_temp(cx, "conv_planes", TBC_DT_F32, nd, C * plane);
	int vb = lower_shared_temp(cx, "wino_v", TBC_DT_F32, nd, 16 * C * T);
	int mb = lower_shared_temp(cx, "wino_m", TBC_DT_F32, nd, 16 * K * T);
	tbc_value *u = winograd_weights(cx, wv, K, C);
	if (pb < 0 || vb < 0 || mb < 0 || !u || !wino_planes(cx, g, xb, pb, nd, C, TH, TW) || !wino_in(cx, pb, vb, nd, C, TH, TW))
		return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "conv")) return LOWER_FAILED;
	/* computed transposed where that wastes less of the register tile (a
	 * few tiles, many channels: 7 x 7 positions are 20 tiles) */
	conv_gemm cg = {.G = 1, .Mg = K, .Kg = C, .P = T, .M = K, .ct = TBC_DT_F32, .yt = TBC_DT_F32};
	int tmr = conv_transposed_rows(cx, &cg, u, TBC_DT_F32);
	wino_gemm w = {.K = K, .C = C, .T = T};
	gemm_spec s = {.ct = TBC_DT_F32};
	int64_t panel_stride = 0;
	if (tmr > 0 && gemm_const_tile_panels(&l, u, 16 * K, C, true, TBC_DT_F32, &s.b) &&
	    kir_e_const_index(s.b.panel_stride, &panel_stride)) {
		/* M[xi]^T (T x K) = V[xi]^T (T x C) U[xi]^T (C x K, panels) */
		w.u_step = K / s.b.panel * panel_stride;
		s.a.buf = lk_buf(&l, vb);
		s.M = I(l.k, T), s.N = I(l.k, K), s.mr = tmr;
		s.a.rs = I(l.k, 1), s.a.cs = I(l.k, T);
		s.y.rs = I(l.k, 1), s.y.cs = I(l.k, T);
	} else {
		s.a.buf = lk_value(&l, u);
		s.b.buf = lk_buf(&l, vb);
		s.M = I(l.k, K), s.N = I(l.k, T);
		s.a.rs = I(l.k, C), s.a.cs = I(l.k, 1);
		s.b.rs = I(l.k, T), s.b.cs = I(l.k, 1);
		s.y.rs = I(l.k, T), s.y.cs = I(l.k, 1);
	}
	s.y.buf = lk_buf(&l, mb);
	if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
	s.K = I(l.k, C);
	s.NB = MUL(l.k, lk_dim(&l, nd), I(l.k, 16));
	s.ctx = &w;
	s.base = wino_base;
	if (!lk_end(&l, gemm_generate(&l, &s))) return LOWER_FAILED;
	return conv_failed(wino_out(cx, mb, yb, bv, nd, K, OH, OW));
}
