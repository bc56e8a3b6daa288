/* Winograd's F(m x m, 3 x 3) for 3x3 stride-1 convolutions on a CPU, m 2
 * or 4 (Lavin and Gray, "Fast Algorithms for Convolutional Neural
 * Networks"; the matrices are wino_f2's and wino_f4's below).
 *
 * The output is cut into m x m tiles; tile (th, tw)'s outputs come from the
 * a x a input patch d (a = m + 2) at rows m th - pt .. + a - 1 and columns
 * m tw - pl .. + a - 1, and
 *
 *   y_tile[k] = A^T [ sum_c (G g[k][c] G^T) .* (B^T d[c] B) ] A:
 *
 * the a^2 products per tile and channel pair are a^2 GEMMs over the
 * channels, M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T), xi = a i + j.
 * U = G g G^T is computed when compiling (in double, stored in f32), or
 * when loading where the weights are computed then; the
 * kernels are wino_planes (the input copied once, padded, in row phases),
 * wino_in (V = B^T d B), the GEMMs (conv), wino_out (A^T M A + bias) and
 * wino_rows (y's rows copied out).  Multiplications per output: 16 / 4 = 4
 * for F(2x2), 36 / 16 = 2.25 for F(4x4), where direct summation takes 9.
 * The transforms' coefficients are exact in binary except G's, applied
 * when compiling; the results differ from direct summation by rounding,
 * which grows with the tile (docs/decisions.md).
 *
 * The tiles are numbered t = th (TW + 1) + tw: each row of tiles has one
 * more, never used, so that a patch's rows lie at m t + a constant in the
 * planes.  Those keep a channel's padded input rows in m phases (rows p, m
 * + p, 2 m + p, .., Wq = m (TW + 1) wide), so that patch row i of tile t
 * starts at m t + (i % m) R Wq + (i / m) Wq.  The input transform is then
 * one vector loop over a channel's tiles (stride-m loads), not one per row
 * of tiles, whose 7 or 14 tiles had left most of it to the scalar
 * remainder; the output transform likewise writes phases of rows, copied
 * out.  The GEMMs' columns grow by a tile a row, which rarely adds one of
 * their 32-column tiles (49 -> 56 tiles: two either way). */
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_conv.h"
#include "codegen/lower/lower_gemm.h"

/* F(m x m, 3 x 3), the tile m outputs wide, its patch a = m + 2 (at most 6). */
#define WINO_MAX_A 6
typedef struct wino_form {
	int m, a;
	double BT[WINO_MAX_A][WINO_MAX_A]; /* a x a */
	double G[WINO_MAX_A][3];           /* a x 3 */
	double AT[WINO_MAX_A - 2][WINO_MAX_A]; /* m x a */
} wino_form;

static const wino_form wino_f2 = {
	.m = 2, .a = 4,
	.BT = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
	.G = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
	.AT = {{1, 1, 1, 0}, {0, 1, -1, -1}},
};

static const wino_form wino_f4 = {
	.m = 4, .a = 6,
	.BT = {{4, 0, -5, 0, 1, 0},
	       {0, -4, -4, 1, 1, 0},
	       {0, 4, -4, -1, 1, 0},
	       {0, -2, -1, 2, 1, 0},
	       {0, 2, -1, -2, 1, 0},
	       {0, 4, 0, -5, 0, 1}},
	.G = {{1.0 / 4, 0, 0},
	      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
	      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
	      {1.0 / 24, 1.0 / 12, 1.0 / 6},
	      {1.0 / 24, -1.0 / 12, 1.0 / 6},
	      {0, 0, 1}},
	.AT = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
};

/* sum_j coef[j] in[j] over the nonzero coefficients: the first positive
 * term, then the others in j order; +-1 as an addition or subtraction,
 * others multiplied (every coefficient here is exact in binary but G's,
 * which are applied when compiling). */
static kir_expr *wino_combine(kir_kernel *k, const double *coef, kir_expr *const *in, int n) {
	int first = -1; /* a positive term first where there is one: no 0 - x */
	for (int j = 0; j < n && first < 0; j++)
		if (coef[j] > 0) first = j;
	kir_expr *r = NULL;
	for (int pass = 0; pass < 2; pass++)
		for (int j = 0; j < n; j++) {
			double c = coef[j];
			if (c == 0 || (pass == 0) != (j == first) || (pass == 0 && first < 0)) continue;
			kir_expr *t = c == 1 || c == -1 ? in[j] : MUL(k, F(k, TBC_DT_F32, r && c < 0 ? -c : c), in[j]);
			if (!r) r = c == -1 ? SUB(k, F(k, TBC_DT_F32, 0), t) : t;
			else r = c < 0 ? SUB(k, r, t) : ADD(k, r, t);
		}
	return r ? r : F(k, TBC_DT_F32, 0);
}

/* out (rows x rows) = L x L^T for x (n x n), L rows x n: the transforms
 * B^T d B (L = B^T) and A^T M A (L = A^T); L x is a local a value. */
static void wino_sandwich(kir_kernel *k, kir_block *b, const double (*Lm)[WINO_MAX_A], int rows, int n,
			  kir_expr *const x[WINO_MAX_A][WINO_MAX_A], kir_expr *out[WINO_MAX_A][WINO_MAX_A]) {
	kir_expr *w[WINO_MAX_A][WINO_MAX_A];
	for (int j = 0; j < n; j++) { /* w = L x, column by column */
		kir_expr *col[WINO_MAX_A];
		for (int i = 0; i < n; i++) col[i] = x[i][j];
		for (int i = 0; i < rows; i++) w[i][j] = LET(k, b, "w", wino_combine(k, Lm[i], col, n));
	}
	for (int i = 0; i < rows; i++) /* out = w L^T, row by row */
		for (int j = 0; j < rows; j++) out[i][j] = wino_combine(k, Lm[j], w[i], n);
}

/* The GEMMs' addressing: batch b = a^2 n + xi, T the tiles with the
 * unused one per row; u_step > 0: computed transposed, U in panels, U[xi]'s
 * u_step elements from U[xi - 1]'s. */
typedef struct wino_gemm {
	int64_t K, C, T, xis, u_step;
} wino_gemm;

static kir_expr *wino_base(void *ctx, lk *l, int which, kir_expr *batch) {
	const wino_gemm *w = ctx;
	kir_kernel *k = l->k;
	kir_expr *xi = MOD(k, batch, I(k, w->xis));
	if (w->u_step) /* a: V^T, b: U^T's panels */
		return which == 0 ? MUL(k, batch, I(k, w->C * w->T)) : which == 1 ? MUL(k, xi, I(k, w->u_step))
										 : MUL(k, batch, I(k, w->K * w->T));
	switch (which) {
	case 0: return MUL(k, xi, I(k, w->K * w->C));     /* U[xi] */
	case 1: return MUL(k, batch, I(k, w->C * w->T));  /* V[n][xi] */
	default: return MUL(k, batch, I(k, w->K * w->T)); /* M[n][xi] */
	}
}

/* U[xi][m][c] = (G g[m][c] G^T)[i][j], xi = a i + j, in double: a constant
 * of the arena, [a^2 M, C]. */
static tbc_value *winograd_weights(lower_cx *cx, const wino_form *f, const tbc_value *wv, int64_t M, int64_t C) {
	tbc_arena *ar = cx->p->arena;
	const tbc_tensor *w = wv->constant;
	int a = f->a;
	tbc_value *v = tbc_arena_alloc(ar, sizeof *v);
	tbc_tensor *t = tbc_arena_alloc(ar, sizeof *t);
	float *u = tbc_arena_alloc(ar, (size_t)(a * a * M * C) * sizeof *u);
	if (!v || !t || !u) return NULL;
	const float *g = w->data;
	for (int64_t m = 0; m < M; m++)
		for (int64_t c = 0; c < C; c++) {
			const float *k3 = g + (m * C + c) * 9;
			double gk[WINO_MAX_A][3]; /* G g */
			for (int i = 0; i < a; i++)
				for (int j = 0; j < 3; j++)
					gk[i][j] = f->G[i][0] * k3[j] + f->G[i][1] * k3[3 + j] + f->G[i][2] * k3[6 + j];
			for (int i = 0; i < a; i++)
				for (int j = 0; j < a; j++)
					u[((i * a + j) * M + m) * C + c] =
						(float)(gk[i][0] * f->G[j][0] + gk[i][1] * f->G[j][1] + gk[i][2] * f->G[j][2]);
		}
	*v = *wv;
	*t = *w;
	t->rank = 2, t->dims[0] = a * a * M, t->dims[1] = C;
	t->numel = a * a * M * C;
	t->data = u;
	v->constant = t;
	tbc_type_set(&v->type, w->dtype, 2, t->dims);
	return v;
}

/* U as winograd_weights computes it, for weights wv computed when the
 * model loads (codegen/lower/load_time.c): a kernel of its own reading
 * them alone, so it runs once per session with them, into a temporary
 * (returned; -1 on failure).  The same sums in the same order, in f64,
 * rounded to f32 once, as when compiling.  nr 0: U as [a^2 M, C]; else
 * U^T in the transposed GEMM's panels, as gemm_const_tile_panels lays out
 * a constant U: row n = xi M + m of U is column n of U^T, element (c, n) at
 * (n / nr) stride + c nr + n % nr. */
static int winograd_weights_at_load(lower_cx *cx, const wino_form *f, const tbc_value *wv, int64_t M, int64_t C, int64_t nr,
				    int64_t stride) {
	int a = f->a;
	tbc_type t = {.dtype = TBC_DT_F32, .rank = 2};
	t.dims[0] = (tbc_dim){nr ? a * a * M / nr : a * a * M, NULL}, t.dims[1] = (tbc_dim){nr ? stride : C, NULL};
	int ub = lower_temp_buf(cx, &t, "wino_u");
	lk l;
	if (ub < 0 || !lk_begin(&l, cx, "wino_weights")) return -1;
	kir_kernel *k = l.k;
	kir_buffer *w = lk_value(&l, wv), *u = lk_buf(&l, ub);
	if (!w || !u) return -1;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX); /* m C + c */
	kir_block body = {0};
	kir_expr *m = LET(k, &body, "m", DIV(k, V(k, r), I(k, C))), *c = LET(k, &body, "c", MOD(k, V(k, r), I(k, C)));
	kir_expr *g[9], *gk[WINO_MAX_A][3];
	for (int i = 0; i < 9; i++) g[i] = LET(k, &body, "g", CAST(k, TBC_DT_F64, LOAD(k, w, ADD(k, MUL(k, V(k, r), I(k, 9)), I(k, i)))));
	for (int i = 0; i < a; i++) /* G g */
		for (int j = 0; j < 3; j++)
			gk[i][j] = LET(k, &body, "gk",
				       ADD(k, ADD(k, MUL(k, F(k, TBC_DT_F64, f->G[i][0]), g[j]), MUL(k, F(k, TBC_DT_F64, f->G[i][1]), g[3 + j])),
					   MUL(k, F(k, TBC_DT_F64, f->G[i][2]), g[6 + j])));
	for (int i = 0; i < a; i++) /* (G g) G^T */
		for (int j = 0; j < a; j++) {
			kir_expr *v = ADD(k, ADD(k, MUL(k, gk[i][0], F(k, TBC_DT_F64, f->G[j][0])), MUL(k, gk[i][1], F(k, TBC_DT_F64, f->G[j][1]))),
					  MUL(k, gk[i][2], F(k, TBC_DT_F64, f->G[j][2])));
			kir_expr *n = ADD(k, I(k, (i * a + j) * M), m);
			kir_expr *at = nr ? ADD(k, ADD(k, MUL(k, DIV(k, n, I(k, nr)), I(k, stride)), MUL(k, c, I(k, nr))), MOD(k, n, I(k, nr)))
					  : ADD(k, MUL(k, n, I(k, C)), c);
			kir_block_add(k, &body, kir_s_store(k, u, at, CAST(k, TBC_DT_F32, v)));
		}
	if (!lk_end(&l, kir_s_for(k, r, I(k, 0), I(k, M * C), 1, KIR_LOOP_PARALLEL, body.first))) return -1;
	return ub;
}

/* Whether conv c (geometry g, weights wv, input dtype xt) is computed so:
 * 2-D, 3x3, stride and dilation 1, one group, f32 throughout with weights
 * known when compiling or computed when loading, on a CPU target with fma tiles whose constants it
 * may lay out as its own (gemv_panels: not when a device program shares
 * them), and 16 tiles of 2 x 2 or more (docs/performance.md: measured per
 * shape). */
bool conv_winograd_wanted(const lower_cx *cx, const conv_gemm *c, const conv_geom *g, const tbc_value *wv, tbc_dtype xt) {
	const char *e = getenv("TBC_CONV_WINOGRAD"); /* 0: never, for measuring; 1: whatever the tiles' count */
	if ((e && !strcmp(e, "0")) || g->nsp != 2 || c->pairs || c->G != 1 || !cx->target->fma_tile ||
	    !cx->target->gemv_panels || cx->target->parallel != TBC_PAR_HOST_THREADS)
		return false;
	if (g->kernel[0] != 3 || g->kernel[1] != 3 || g->stride[0] != 1 || g->stride[1] != 1 || g->dil[0] != 1 ||
	    g->dil[1] != 1)
		return false;
	bool known = (wv->kind == TBC_VALUE_CONST && wv->constant) ||
		     (cx->load_time && cx->load_time[wv->id] && conv_static_dims(&wv->type, 0));
	if (!known || wv->type.dtype != TBC_DT_F32 || xt != TBC_DT_F32 || c->yt != TBC_DT_F32 || c->ct != TBC_DT_F32)
		return false;
	if (e && !strcmp(e, "1")) return true;
	return ((g->out[0] + 1) / 2) * ((g->out[1] + 1) / 2) >= 16;
}

/* The tile: F(4x4, 3x3) where both output dims are at least WINO_F4_MIN,
 * else F(2x2, 3x3).  TBC_CONV_WINOGRAD_TILE=2 or 4 decides, for measuring. */
#define WINO_F4_MIN 16
static const wino_form *wino_choose(const conv_geom *g) {
	const char *e = getenv("TBC_CONV_WINOGRAD_TILE");
	if (e && (!strcmp(e, "2") || !strcmp(e, "4"))) return *e == '4' ? &wino_f4 : &wino_f2;
	return g->out[0] >= WINO_F4_MIN && g->out[1] >= WINO_F4_MIN ? &wino_f4 : &wino_f2;
}

/* The planes' geometry for tiles of m: a channel's padded input rows in m
 * phases (rows p, m + p, 2 m + p, .. for p < m), R = TH + 1 rows each, Wq =
 * m (TW + 1) wide, then 2 zeros (read by the last row's unused tile). */
typedef struct wino_geom {
	int m, a;
	int64_t TH, TW, T, R, Wq, PL;
} wino_geom;

static wino_geom wino_geometry(const wino_form *f, int64_t OH, int64_t OW) {
	wino_geom q = {.m = f->m, .a = f->a, .TH = (OH + f->m - 1) / f->m, .TW = (OW + f->m - 1) / f->m};
	q.T = q.TH * (q.TW + 1), q.R = q.TH + 1, q.Wq = q.m * (q.TW + 1), q.PL = q.m * q.R * q.Wq + 2;
	return q;
}

/* The planes of x (wino_geom): row (p, r) of a channel is the padded
 * input's row m r + p, zeros outside x. */
static bool wino_planes(lower_cx *cx, const conv_geom *g, const wino_geom *q, int xb, int pb, tbc_dim nd, int64_t C) {
	lk l;
	if (!lk_begin(&l, cx, "wino_planes")) return false;
	kir_kernel *k = l.k;
	kir_buffer *x = lk_buf(&l, xb), *pl = lk_buf(&l, pb);
	if (!x || !pl) return false;
	int64_t H = g->in[0], W = g->in[1], pt = g->pad_begin[0], pw = g->pad_begin[1], R = q->R, Wq = q->Wq, MR = q->m * R;
	kir_expr *zero = F(k, TBC_DT_F32, 0);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	kir_expr *nc = LET(k, &body, "nc", DIV(k, V(k, r), I(k, MR)));
	kir_expr *pr = LET(k, &body, "pr", MOD(k, V(k, r), I(k, MR))); /* p R + row */
	kir_expr *out = LET(k, &body, "out", ADD(k, MUL(k, nc, I(k, q->PL)), MUL(k, pr, I(k, Wq))));
	kir_expr *ih = LET(k, &body, "ih", SUB(k, ADD(k, MUL(k, MOD(k, pr, I(k, R)), I(k, q->m)), DIV(k, pr, I(k, R))), I(k, pt)));
	kir_expr *in = LET(k, &body, "in", ADD(k, MUL(k, nc, I(k, H * W)), MUL(k, CLAMP(k, ih, H), I(k, W))));
	kir_expr *inside = AND(k, CMP(k, KIR_GE, ih, I(k, 0)), CMP(k, KIR_LT, ih, I(k, H)));
	kir_block_add(k, &body, conv_padded_row(k, x, pl, out, in, inside, zero, pw, W, Wq));
	kir_expr *last = CMP(k, KIR_EQ, pr, I(k, MR - 1));
	kir_expr *end = ADD(k, MUL(k, nc, I(k, q->PL)), I(k, MR * Wq));
	kir_block_add(k, &body, kir_s_if(k, last, kir_s_for(k, j, I(k, 0), I(k, 2), 1, KIR_LOOP_SEQUENTIAL,
							    kir_s_store(k, pl, ADD(k, end, V(k, j)), zero)), NULL));
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, C * MR));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* V[n][xi][c][t] = (B^T d B)[i][j], xi = a i + j, of tile t, d its a x a
 * patch of the planes: row i at m t + (i % m) R Wq + (i / m) Wq.  Parallel
 * over (n, c), a vector loop over the tiles (stride-m loads). */
static bool wino_in(lower_cx *cx, const wino_form *f, const wino_geom *q, int pb, int vb, tbc_dim nd, int64_t C) {
	lk l;
	if (!lk_begin(&l, cx, "wino_in")) return false;
	kir_kernel *k = l.k;
	kir_buffer *pl = lk_buf(&l, pb), *vt = lk_buf(&l, vb);
	if (!pl || !vt) return false;
	int a = q->a, m = q->m;
	int64_t T = q->T;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block body = {0}, in = {0};
	kir_expr *src = LET(k, &body, "src", MUL(k, V(k, r), I(k, q->PL)));
	kir_expr *dst = LET(k, &body, "dst", ADD(k, MUL(k, DIV(k, V(k, r), I(k, C)), I(k, a * a * C * T)),
						 MUL(k, MOD(k, V(k, r), I(k, C)), I(k, T))));
	kir_expr *col = ADD(k, src, MUL(k, V(k, t), I(k, m)));
	kir_expr *d[WINO_MAX_A][WINO_MAX_A], *v[WINO_MAX_A][WINO_MAX_A];
	for (int i = 0; i < a; i++)
		for (int j = 0; j < a; j++) d[i][j] = LOAD(k, pl, ADD(k, col, I(k, (i % m) * q->R * q->Wq + (i / m) * q->Wq + j)));
	wino_sandwich(k, &in, f->BT, a, a, d, v);
	for (int i = 0; i < a; i++)
		for (int j = 0; j < a; j++)
			kir_block_add(k, &in, kir_s_store(k, vt, ADD(k, ADD(k, dst, I(k, (i * a + j) * C * T)), V(k, t)), v[i][j]));
	kir_block_add(k, &body, kir_s_for(k, t, I(k, 0), I(k, T), 1, KIR_LOOP_VECTOR, in.first));
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, C));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* Z[n][ch][i][m t + j] = act((A^T M[n][.][ch][t] A)[i][j] + bias[ch]): each
 * output row i of every tile in a plane of its own, the tiles side by side
 * (row th of tiles Wz = m (TW + 1) wide, its last tile unused).  Parallel
 * over (n, ch), a vector loop over the tiles (stride-m stores), as the
 * input's transform; y's rows are copied out of Z by wino_rows.  (A loop
 * per row of tiles stored y directly, but 7 tiles of 4 are too few for a
 * vector: it was a quarter of a 28 x 28 layer's time.) */
static bool wino_out(lower_cx *cx, const wino_form *f, const wino_geom *q, int mb, int zb, const tbc_value *bv,
		     tbc_dim nd, int64_t K, const conv_gemm *c) {
	lk l;
	if (!lk_begin(&l, cx, "wino_out")) return false;
	kir_kernel *k = l.k;
	kir_buffer *mt = lk_buf(&l, mb), *z = lk_buf(&l, zb), *bb = bv ? lk_value(&l, bv) : NULL;
	if (!mt || !z || (bv && !bb)) return false;
	int a = q->a, m = q->m;
	int64_t T = q->T, ZP = m * m * T; /* Z's elements per (n, ch) */
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block body = {0}, in = {0};
	kir_expr *ch = LET(k, &body, "ch", MOD(k, V(k, r), I(k, K)));
	kir_expr *src = LET(k, &body, "src", ADD(k, MUL(k, DIV(k, V(k, r), I(k, K)), I(k, a * a * K * T)), MUL(k, ch, I(k, T))));
	kir_expr *dst = LET(k, &body, "dst", MUL(k, V(k, r), I(k, ZP)));
	kir_expr *bias = bb ? LET(k, &body, "bias", CAST(k, TBC_DT_F32, LOAD(k, bb, ch))) : NULL;
	kir_expr *x[WINO_MAX_A][WINO_MAX_A], *o[WINO_MAX_A][WINO_MAX_A];
	for (int i = 0; i < a; i++)
		for (int j = 0; j < a; j++) x[i][j] = LOAD(k, mt, ADD(k, ADD(k, src, I(k, (i * a + j) * K * T)), V(k, t)));
	wino_sandwich(k, &in, f->AT, m, a, x, o);
	kir_expr *col = ADD(k, dst, MUL(k, V(k, t), I(k, m)));
	for (int i = 0; i < m; i++)
		for (int j = 0; j < m; j++)
			kir_block_add(k, &in, kir_s_store(k, z, ADD(k, col, I(k, i * m * T + j)),
							  conv_act(c, k, bias ? ADD(k, o[i][j], bias) : o[i][j])));
	kir_block_add(k, &body, kir_s_for(k, t, I(k, 0), I(k, T), 1, KIR_LOOP_VECTOR, in.first));
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, K));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

/* y[n][ch][oh][ow] = Z[n][ch][oh % m][(oh / m) Wz + ow]. */
static bool wino_rows(lower_cx *cx, const wino_geom *q, int zb, int yb, tbc_dim nd, int64_t K, int64_t OH, int64_t OW) {
	lk l;
	if (!lk_begin(&l, cx, "wino_rows")) return false;
	kir_kernel *k = l.k;
	kir_buffer *z = lk_buf(&l, zb), *y = lk_buf(&l, yb);
	if (!z || !y) return false;
	int64_t m = q->m, Wz = q->Wq, ZP = m * m * q->T;
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	kir_expr *oh = LET(k, &body, "oh", MOD(k, V(k, r), I(k, OH)));
	kir_expr *from = LET(k, &body, "from", ADD(k, ADD(k, MUL(k, DIV(k, V(k, r), I(k, OH)), I(k, ZP)), MUL(k, MOD(k, oh, I(k, m)), I(k, m * q->T))),
						   MUL(k, DIV(k, oh, I(k, m)), I(k, Wz))));
	kir_expr *to = LET(k, &body, "to", MUL(k, V(k, r), I(k, OW)));
	kir_block_add(k, &body, kir_s_for(k, j, I(k, 0), I(k, OW), 1, KIR_LOOP_VECTOR,
					  kir_s_store(k, y, ADD(k, to, V(k, j)), LOAD(k, z, ADD(k, from, V(k, j))))));
	kir_expr *rows = MUL(k, lk_dim(&l, nd), I(k, K * OH));
	return lk_end(&l, kir_s_for(k, r, I(k, 0), rows, 1, KIR_LOOP_PARALLEL, body.first));
}

lower_result conv_winograd(lower_cx *cx, const conv_geom *g, const conv_gemm *c, const tbc_value *wv, const tbc_value *bv,
			   int xb, int yb, tbc_dim nd, int64_t C) {
	const wino_form *f = wino_choose(g);
	int64_t K = c->M, OH = g->out[0], OW = g->out[1], xis = f->a * f->a;
	wino_geom q = wino_geometry(f, OH, OW);
	int64_t T = q.T;
	int pb = lower_shared_temp(cx, "conv_planes", TBC_DT_F32, nd, C * q.PL);
	int vb = lower_shared_temp(cx, "wino_v", TBC_DT_F32, nd, xis * C * T);
	int mb = lower_shared_temp(cx, "wino_m", TBC_DT_F32, nd, xis * K * T);
	/* computed transposed where that wastes less of the register tile (a
	 * few tiles, many channels: 7 x 7 positions are 20 tiles); U computed
	 * when loading is then laid out in U^T's panels by its own kernel */
	conv_gemm cg = {.G = 1, .Mg = K, .Kg = C, .P = T, .M = K, .ct = TBC_DT_F32, .yt = TBC_DT_F32};
	bool at_load = wv->kind != TBC_VALUE_CONST;
	int tmr = at_load ? conv_transposed_tile_rows(cx, &cg) : conv_transposed_rows(cx, &cg, wv, TBC_DT_F32);
	int mr_, nr = 0;
	int64_t load_stride = 0;
	if (at_load && tmr > 0) {
		gemm_tile_shape(cx->target, TBC_DT_F32, &mr_, &nr);
		load_stride = gemm_tile_panel_stride(C, nr, 4); /* as gemm_const_tile_panels lays out a constant U */
	}
	tbc_value *u = at_load ? NULL : winograd_weights(cx, f, wv, K, C);
	int ub = at_load ? winograd_weights_at_load(cx, f, wv, K, C, nr, load_stride) : -1;
	if (pb < 0 || vb < 0 || mb < 0 || (at_load ? ub < 0 : !u) || !wino_planes(cx, g, &q, xb, pb, nd, C) || !wino_in(cx, f, &q, pb, vb, nd, C))
		return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "conv")) return LOWER_FAILED;
	wino_gemm w = {.K = K, .C = C, .T = T, .xis = xis};
	gemm_spec s = {.ct = TBC_DT_F32};
	int64_t panel_stride = 0;
	if (at_load && tmr > 0) {
		s.b.buf = lk_buf(&l, ub);
		s.b.panel = nr;
		s.b.panel_stride = I(l.k, load_stride);
		s.b.rs = I(l.k, nr), s.b.cs = I(l.k, 1);
		panel_stride = load_stride;
		if (!s.b.buf) return LOWER_FAILED;
	}
	if (tmr > 0 && (at_load || (gemm_const_tile_panels(&l, u, xis * K, C, true, TBC_DT_F32, &s.b) &&
				    kir_e_const_index(s.b.panel_stride, &panel_stride)))) {
		/* M[xi]^T (T x K) = V[xi]^T (T x C) U[xi]^T (C x K, panels) */
		w.u_step = K / s.b.panel * panel_stride;
		s.a.buf = lk_buf(&l, vb);
		s.M = I(l.k, T), s.N = I(l.k, K), s.mr = tmr;
		s.a.rs = I(l.k, 1), s.a.cs = I(l.k, T);
		s.y.rs = I(l.k, 1), s.y.cs = I(l.k, T);
	} else {
		s.a.buf = u ? lk_value(&l, u) : lk_buf(&l, ub);
		s.b.buf = lk_buf(&l, vb);
		s.M = I(l.k, K), s.N = I(l.k, T);
		s.a.rs = I(l.k, C), s.a.cs = I(l.k, 1);
		s.b.rs = I(l.k, T), s.b.cs = I(l.k, 1);
		s.y.rs = I(l.k, T), s.y.cs = I(l.k, 1);
	}
	s.y.buf = lk_buf(&l, mb);
	if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
	s.K = I(l.k, C);
	s.NB = MUL(l.k, lk_dim(&l, nd), I(l.k, xis));
	s.ctx = &w;
	s.base = wino_base;
	if (!lk_end(&l, gemm_generate(&l, &s))) return LOWER_FAILED;
	int zb = lower_shared_temp(cx, "wino_v", TBC_DT_F32, nd, K * f->m * f->m * T); /* V is read by now */
	return conv_failed(zb >= 0 && wino_out(cx, f, &q, mb, zb, bv, nd, K, c) && wino_rows(cx, &q, zb, yb, nd, K, OH, OW));
}
