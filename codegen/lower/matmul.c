/* MatMul and Gemm: the GEMM generator (codegen/lower/lower_gemm.h) and its uses.
 *
 * The generator emits one kernel nest: a parallel loop over (batch, row tile,
 * column block), and inside it register-blocked micro-tiles of MR x NR sums
 * held in scalar locals (5 x 16 for f32 on a 256-bit vector unit) over a
 * sequential k loop.  Each k step loads MR values of A (broadcast) and NR
 * contiguous values of B, and updates MR x NR accumulators; LLVM's SLP
 * vectorizer turns the NR-wide rows into vector registers.  Edges: the last
 * row tile clamps its row index (a row past M recomputes the last row and
 * stores it again: no branch); columns past the last whole NR tile are covered by one more tile ending at column N
 * (overlapping the previous one, in the same chunk), so they vectorize too;
 * only a symbolic N smaller than NR runs column by column.
 * Sizes are index expressions, so symbolic dims stay symbolic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower_gemm.h"
#include "codegen/lower/kir_short.h"

/* ---- Index shorthands --------------------------------------------------------*/

/* A scalar local set to e in block b; returns its value. */
static kir_expr *local(lk *l, kir_block *b, const char *name, kir_expr *e) {
	if (!e) {
		l->k->failed = true;
		return NULL;
	}
	kir_var *v = kir_var_new(l->k, name, e->type);
	kir_block_add(l->k, b, kir_s_set(l->k, v, e));
	return V(l->k, v);
}

static kir_expr *zero(lk *l, tbc_dtype t) {
	return tbc_dtype_is_float(t) ? kir_e_float(l->k, t, 0.0) : kir_e_int(l->k, t, 0);
}

/* ---- The generator ---------------------------------------------------------*/
/* The bytes of B a chunk's row tiles pass over, without K blocks: within
 * an L2 (Zen 4's: 1 MiB; Skylake-SP's: 1 MiB). */
#define GEMM_B_BLOCK_BYTES (512 * 1024)
#define GEMM_MAX_MR 32 /* kir_tile2's two tiles of 16 rows; 8 otherwise */
#define GEMM_MAX_NR 32

/* Whether y's columns are contiguous (a row's sums stored as vectors, and
 * a K block resumed from them; a convolution computed transposed, conv.c,
 * stores channels P apart). */
static bool y_cols_contiguous(const gemm_spec *s) {
	int64_t ycs;
	return kir_e_const_index(s->y.cs, &ycs) && ycs == 1;
}

typedef struct gemm_gen {
	lk *l;
	const gemm_spec *s;
	int mr;
	kir_expr *batch, *i0, *rows[GEMM_MAX_MR], *base[3];
	/* The k range of the micro-tiles: [klo, khi).  With K blocking
	 * (kresume non-NULL) a tile starts from the partial sums its earlier
	 * blocks stored in y when kresume holds, and stores the epilogue's
	 * value only when klast holds; `skip` leading columns of the tile are
	 * not stored (the overlapping last tile: the tile before it owns
	 * them). */
	kir_expr *klo, *khi, *kresume, *klast;
	int skip;
	/* Micro-tiles of kir_tile2 (AMX): mr 16 or 32 consecutive rows (the
	 * last row tile overlaps the one before instead of clamping rows), nc
	 * 16 or 32, over K values. */
	bool tile;
	int64_t K;
	/* B in column panels (gemm_operand.panel) and a whole tile's columns
	 * one panel: the panel's first element (the tile's columns are then
	 * bpanel + k * panel + c, an index LLVM sees contiguous; the
	 * overlapping last tile reads through load_ct's general formula). */
	kir_expr *bpanel;
} gemm_gen;

static kir_expr *load_ct(gemm_gen *g, const gemm_operand *o, kir_expr *base, kir_expr *r, kir_expr *c) {
	lk *l = g->l;
	kir_expr *idx = ADD(l->k, ADD(l->k, base, MUL(l->k, r, o->rs)), MUL(l->k, c, o->cs));
	if (o->panel) { /* column panels: (c / panel) * stride + r * panel + c % panel */
		kir_expr *p = I(l->k, o->panel);
		idx = ADD(l->k, ADD(l->k, ADD(l->k, base, MUL(l->k, DIV(l->k, c, p), o->panel_stride)), MUL(l->k, r, p)),
			  MOD(l->k, c, p));
	}
	/* An operand of the products: a NaN's payload is the hardware's anyway */
	return kir_e_cast_any_nan(l->k, g->s->ct, kir_e_load(l->k, o->buf, idx));
}

static kir_expr *y_index(gemm_gen *g, kir_expr *row, kir_expr *col) {
	lk *l = g->l;
	return ADD(l->k, ADD(l->k, g->base[2], MUL(l->k, row, g->s->y.rs)), MUL(l->k, col, g->s->y.cs));
}

/* Whether a float micro-tile of nc columns is one kir_fma_tile: a target
 * declaring it, operands of the compute type (f16 storage keeps the
 * scalar code, which converts as it loads), and the tile's columns of b
 * contiguous -- a stride of 1, or this tile's own panel (g->bpanel; the
 * overlapping last tile of a panel layout straddles two). */
static bool fma_tile_wanted(const gemm_gen *g, int nc) {
	const gemm_spec *s = g->s;
	int64_t cs;
	bool contiguous = g->bpanel || nc == 1 || (!s->b.panel && kir_e_const_index(s->b.cs, &cs) && cs == 1);
	return g->l->cx->target->fma_tile && (s->ct == TBC_DT_F32 || s->ct == TBC_DT_F64) && s->a.buf->dtype == s->ct &&
	       s->b.buf->dtype == s->ct && !s->b.pairs && contiguous && g->mr <= KIR_FMA_TILE_MAX_MR &&
	       nc <= KIR_FMA_TILE_MAX_NC;
}

/* One micro-tile of mr x nc sums at columns cols[0..nc): the k loop, then
 * the stores.  Statements go to blk. */
static void micro_tile(gemm_gen *g, kir_block *blk, int nc, kir_expr *const *cols) {
	lk *l = g->l;
	kir_kernel *k = l->k;
	const gemm_spec *s = g->s;
	kir_var *acc[GEMM_MAX_MR][GEMM_MAX_NR];
	int64_t kc;
	bool has_k = !kir_e_const_index(s->K, &kc) || kc > 0;
	bool fma = !g->tile && !s->b.pairs && has_k && fma_tile_wanted(g, nc);
	/* An fma tile resumes from y itself where y's columns are contiguous:
	 * vector loads, not a load and a select per sum. */
	bool y_rows = y_cols_contiguous(s);
	bool fma_resume = fma && g->kresume && g->l->cx->target->fma_tile_y && s->y.buf->dtype == s->ct && y_rows;
	/* y(row, cols[0]) per row, where the resume or the stores use it */
	kir_expr *y_at[GEMM_MAX_MR] = {0};
	bool row_stores = y_rows && g->l->cx->target->gemm_row_stores;
	if (fma_resume || row_stores)
		for (int r = 0; r < g->mr; r++) y_at[r] = local(l, blk, "yrow", y_index(g, g->rows[r], cols[0]));
	/* Straight-line code, selects rather than branches: LLVM's SLP
	 * vectorizer packs the accumulators only when no branch splits them. */
	for (int r = 0; r < g->mr; r++)
		for (int c = 0; c < nc; c++) {
			acc[r][c] = kir_var_new(k, "acc", s->ct);
			kir_expr *init = zero(l, s->ct);
			if (g->kresume && !fma_resume)
				init = kir_e_select(k, g->kresume, kir_e_load(k, s->y.buf, y_index(g, g->rows[r], cols[c])), init);
			kir_block_add(k, blk, kir_s_set(k, acc[r][c], init));
		}
	if (g->tile) {
		/* tdpbf16ps: mr / 16 tiles of a's rows by nc / 16 tiles of b's pairs */
		kir_tile2 d = {.mt = g->mr / 16, .nt = nc / 16, .a = s->a.buf, .b = s->b.buf, .lda = s->a.rs, .ldb = s->b.rs, .kn = g->K};
		kir_var *flat[GEMM_MAX_MR * GEMM_MAX_NR];
		for (int r = 0; r < g->mr; r++)
			for (int c = 0; c < nc; c++) flat[r * nc + c] = acc[r][c];
		d.a_at = local(l, blk, "arow", ADD(l->k, g->base[0], MUL(l->k, g->rows[0], s->a.rs)));
		d.b_at = local(l, blk, "bcol", ADD(l->k, g->base[1], MUL(l->k, cols[0], I(l->k, 2))));
		d.acc = flat;
		kir_block_add(k, blk, kir_s_tile2(k, &d));
	} else if (s->b.pairs) {
		/* vdpbf16ps: mr rows of a by nc / 16 vectors of b's pairs */
		kir_dot2 d = {.mr = g->mr, .nv = nc / 16, .a = s->a.buf, .b = s->b.buf, .ldb = s->b.rs, .kn = s->K};
		kir_var *flat[GEMM_MAX_MR * GEMM_MAX_NR];
		for (int r = 0; r < g->mr; r++) {
			d.a_at[r] = local(l, blk, "arow", ADD(l->k, g->base[0], MUL(l->k, g->rows[r], s->a.rs)));
			for (int c = 0; c < nc; c++) flat[r * nc + c] = acc[r][c];
		}
		d.b_at = local(l, blk, "bcol", ADD(l->k, g->base[1], MUL(l->k, cols[0], I(l->k, 2))));
		d.acc = flat;
		kir_block_add(k, blk, kir_s_dot2(k, &d));
	} else if (fma) {
		/* vector fused multiply-adds, mr rows by nc contiguous columns */
		kir_fma_tile d = {.mr = g->mr, .nc = nc, .a = s->a.buf, .b = s->b.buf, .a_ks = s->a.cs, .klo = g->klo, .khi = g->khi};
		kir_var *flat[GEMM_MAX_MR * GEMM_MAX_NR];
		for (int r = 0; r < g->mr; r++) {
			d.a_at[r] = local(l, blk, "arow", ADD(l->k, g->base[0], MUL(l->k, g->rows[r], s->a.rs)));
			for (int c = 0; c < nc; c++) flat[r * nc + c] = acc[r][c];
		}
		if (g->bpanel) {
			d.b_at = g->bpanel, d.ldb = I(l->k, s->b.panel);
		} else {
			d.b_at = local(l, blk, "bcol", ADD(l->k, g->base[1], MUL(l->k, cols[0], s->b.cs)));
			d.ldb = s->b.rs;
		}
		d.acc = flat;
		if (fma_resume) {
			d.y = s->y.buf, d.resume = g->kresume;
			for (int r = 0; r < g->mr; r++) d.y_at[r] = y_at[r];
		}
		if (s->taps) {
			/* a tile per tap, the sums carried through the locals: tap
			 * t is k block [t tk, (t + 1) tk) of the operand without
			 * taps, and the one with them shifted */
			kir_expr *arow[GEMM_MAX_MR], *b_at = d.b_at;
			for (int r = 0; r < g->mr; r++) arow[r] = d.a_at[r];
			d.klo = I(l->k, 0), d.khi = I(l->k, s->tk);
			for (int64_t t = 0; t < s->taps; t++) {
				kir_expr *shift = I(l->k, s->tshift[t]);
				kir_expr *kblock = I(l->k, t * s->tk);
				for (int r = 0; r < g->mr; r++)
					d.a_at[r] = ADD(l->k, arow[r], s->taps_b ? MUL(l->k, kblock, s->a.cs) : shift);
				d.b_at = ADD(l->k, b_at, s->taps_b ? shift : MUL(l->k, kblock, d.ldb));
				kir_block_add(k, blk, kir_s_fma_tile(k, &d));
			}
		} else {
			kir_block_add(k, blk, kir_s_fma_tile(k, &d));
		}
	} else if (has_k) {
		kir_var *kv = kir_var_new(k, "k", KIR_INDEX);
		kir_block kb = {0};
		kir_expr *av[GEMM_MAX_MR], *bv[GEMM_MAX_NR];
		if (s->taps) { /* the direct form is made of fma tiles (conv.c, conv_direct_wanted) */
			k->failed = true;
			return;
		}
		for (int r = 0; r < g->mr; r++) av[r] = local(l, &kb, "a", load_ct(g, &s->a, g->base[0], g->rows[r], V(l->k, kv)));
		for (int c = 0; c < nc; c++) {
			kir_expr *b;
			if (g->bpanel) /* this tile's panel: contiguous in c */
				b = kir_e_cast_any_nan(l->k, s->ct, kir_e_load(l->k, s->b.buf, ADD(l->k, ADD(l->k, g->bpanel, MUL(l->k, V(l->k, kv), I(l->k, s->b.panel))), I(l->k, c))));
			else
				b = load_ct(g, &s->b, g->base[1], V(l->k, kv), cols[c]);
			bv[c] = local(l, &kb, "b", b);
		}
		for (int r = 0; r < g->mr; r++)
			for (int c = 0; c < nc; c++)
				kir_block_add(k, &kb,
					      kir_s_set(k, acc[r][c],
							kir_e_binary(k, KIR_ADD, V(l->k, acc[r][c]),
								     kir_e_binary(k, KIR_MUL, av[r], bv[c]))));
		kir_block_add(k, blk, kir_s_for(k, kv, g->klo, g->khi, 1, KIR_LOOP_SEQUENTIAL, kb.first));
	}
	/* The stores, straight-line, after every value they store is computed
	 * (the epilogue reads other buffers, Conv's bias: LLVM cannot tell
	 * they are not y, so a load after a store must stay after it, and the
	 * rows stayed scalar).  A row past M was clamped to the last row, so it
	 * stores that row's own value again: no `if` around some rows' stores
	 * either (LLVM's SLP vectorizer then left those rows' accumulators
	 * scalar; a 1x1 convolution with a bias ran 4x slower). */
	kir_expr *val[GEMM_MAX_MR][GEMM_MAX_NR];
	for (int r = 0; r < g->mr; r++)
		for (int c = g->skip; c < nc; c++) {
			kir_expr *v = V(l->k, acc[r][c]);
			v = s->epi ? s->epi(s->ctx, l, v, g->batch, g->rows[r], cols[c]) : kir_e_cast(k, s->y.buf->dtype, v);
			if (g->klast) v = kir_e_select(k, g->klast, v, V(l->k, acc[r][c]));
			val[r][c] = local(l, blk, "v", v);
		}
	/* A row's stores as y(row, cols[0]) + c where y's columns are
	 * contiguous: the CPU's emitter stores them as vectors. */
	for (int r = 0; r < g->mr; r++)
		for (int c = g->skip; c < nc; c++) {
			kir_expr *at = row_stores ? ADD(l->k, y_at[r], I(l->k, c)) : y_index(g, g->rows[r], cols[c]);
			kir_block_add(k, blk, kir_s_store(k, s->y.buf, at, val[r][c]));
		}
}

/* The register tile: MR x NR sums, NR of them contiguous (the vector
 * direction).  A 256-bit unit with 16 registers: f32 5 x 16, f64 5 x 8
 * (10 vector accumulators, 2 B vectors, a broadcast and room for LLVM's
 * scheduling: 6 x 16 left 15 of 16 live and spilled accumulators to the
 * stack in the k loop; ResNet-50 and the transformer block ran ~30% faster
 * with 5 x 16 on an AVX2 EPYC, docs/performance.md).  A 512-bit unit with
 * 32 registers: f32 8 x 32 (16 accumulators, 8 broadcasts and 2 B vectors
 * live; 12 x 32 spills), f64 8 x 16. */
void gemm_tile_shape(const tbc_target_desc *t, tbc_dtype ct, int *mr, int *nr) {
	bool wide = t->vector_bytes >= 64 && t->vector_regs >= 32;
	if (wide && (ct == TBC_DT_F32 || ct == TBC_DT_F64)) {
		*mr = 8, *nr = ct == TBC_DT_F32 ? 32 : 16;
		return;
	}
	switch (ct) {
	case TBC_DT_F32: *mr = 5, *nr = 16; break;
	case TBC_DT_F64: *mr = 5, *nr = 8; break;
	case TBC_DT_I64:
	case TBC_DT_U64: *mr = 4, *nr = 4; break;
	default: *mr = 4, *nr = 8; break;
	}
}

/* The statements of one row tile (rows i0 .. i0 + mr) over whole NR tiles
 * jt in [jlo, jhi), then, when `last` holds, the tile ending at column N
 * (overlapping the previous one) for the columns past the whole tiles. */
static kir_stmt *row_tile(gemm_gen *g, kir_expr *rt, int nr, kir_expr *jlo, kir_expr *jhi, kir_expr *last) {
	lk *l = g->l;
	kir_kernel *k = l->k;
	const gemm_spec *s = g->s;
	kir_block blk = {0};
	g->i0 = local(l, &blk, "i0", MUL(l->k, rt, I(l->k, g->mr)));
	kir_expr *mlast = SUB(l->k, s->M, I(l->k, 1));
	if (g->tile) g->i0 = local(l, &blk, "i0", MIN(l->k, g->i0, SUB(l->k, s->M, I(l->k, g->mr))));
	for (int r = 0; r < g->mr; r++)
		g->rows[r] = g->tile ? ADD(l->k, g->i0, I(l->k, r))
				     : local(l, &blk, "row", MIN(l->k, ADD(l->k, g->i0, I(l->k, r)), mlast));
	kir_var *jt = kir_var_new(k, "jt", KIR_INDEX);
	kir_block tile = {0};
	kir_expr *j0 = local(l, &tile, "j0", MUL(l->k, V(l->k, jt), I(l->k, nr)));
	if (g->tile) j0 = local(l, &tile, "j0", MIN(l->k, j0, SUB(l->k, s->N, I(l->k, nr))));
	kir_expr *cols[GEMM_MAX_NR] = {0};
	for (int c = 0; c < nr; c++) cols[c] = ADD(l->k, j0, I(l->k, c));
	if (s->b.panel == nr)
		g->bpanel = local(l, &tile, "bpanel", ADD(l->k, g->base[1], MUL(l->k, V(l->k, jt), s->b.panel_stride)));
	micro_tile(g, &tile, nr, cols);
	g->bpanel = NULL;
	kir_block_add(k, &blk, kir_s_for(k, jt, jlo, jhi, 1, KIR_LOOP_SEQUENTIAL, tile.first));
	if (last) {
		kir_block tail = {0};
		kir_expr *jl = local(l, &tail, "jl", SUB(l->k, s->N, I(l->k, nr)));
		for (int c = 0; c < nr; c++) cols[c] = ADD(l->k, jl, I(l->k, c));
		/* Resuming from y, columns the tile before stored in this K block
		 * would be counted twice: those stay the earlier tile's.  (K
		 * blocking needs a static N, so their count is known.) */
		int64_t n = 0;
		if (g->kresume && kir_e_const_index(s->N, &n)) g->skip = nr - (int)(n % nr);
		micro_tile(g, &tail, nr, cols);
		g->skip = 0;
		kir_block_add(k, &blk, kir_s_if(k, last, tail.first, NULL));
	}
	return blk.first;
}

/* The K block of a GEMM, 0 for none: the chunk's row tiles pass over a
 * kc x cols block of B (its column block) of about 32 KiB, an L1 data
 * cache, the blocks of K evened out (kc 128 for f32 at 64 columns: on
 * Zen 2, 8 KiB per NR tile ran faster than 4 or 16 or 32 KiB,
 * docs/performance.md).  Blocking resumes from partial sums stored in y,
 * so it needs y to hold the compute type exactly, and a static K and N
 * (the overlapping last tile's shared columns are then known), and y's
 * columns contiguous (resuming from a y of strided columns is a scalar load
 * and select per sum, each K block; a convolution computed transposed,
 * conv.c, has such a y).  The sums are still taken in k order, so the
 * results do not change. */
static int64_t k_block(const gemm_spec *s, int64_t cols) {
	int64_t K;
	if (!kir_e_const_index(s->K, &K) || s->y.buf->dtype != s->ct || !y_cols_contiguous(s)) return 0;
	int64_t kc = 32768 / (cols * tbc_dtype_size(s->ct));
	if (kc < 64) kc = 64;
	int64_t blocks = (K + kc - 1) / kc;
	if (blocks < 2) return 0;
	return (K + blocks - 1) / blocks;
}

bool gemm_const_operand(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, gemm_operand *o) {
	if (v->kind != TBC_VALUE_CONST || !v->constant || rows <= 0 || cols <= 0) return false;
	int64_t len = transpose ? rows : cols, es = (int64_t)tbc_dtype_size(v->type.dtype);
	int64_t pitch = len * es % 512 == 0 ? len + 64 / es : len;
	if (!transpose && pitch == len) return false;
	int b = lower_const_matrix(l->cx, v, rows, cols, transpose, pitch);
	kir_buffer *buf = b >= 0 ? lk_buf(l, b) : NULL;
	if (!buf) return false;
	o->buf = buf;
	o->rs = I(l->k, pitch), o->cs = I(l->k, 1);
	return true;
}

/* The column panels of a B (K, N) that M <= MR rows read (a batch-1 fully
 * connected layer), or a number of rows known only while running
 * (GEMM_M_RUNTIME: an exported model's batch or sequence, a decode step's
 * one row as well as a prefill's hundreds; gemm_rows_nest): panels of *nr
 * columns, *stride elements apart; false where the target or the shapes
 * take the plain layout.  A panel is the K x NR block a row tile reads, so
 * many rows read it as well as few (GPT's prefill of 128 tokens ran 4%
 * faster from panels than from pitched rows, its decode step 1.5x;
 * docs/performance.md).
 * Panels whose byte size is a multiple of 512 get 64 bytes more: the
 * streams a chunk reads side by side (4 panels) would otherwise fall into
 * the same cache sets (4096 x 11008 f32 ran 1.4x slower than without
 * panels until padded; docs/performance.md). */
static bool gemv_panels(const tbc_target_desc *t, tbc_dtype dt, tbc_dtype ct, int64_t M, int64_t K, int64_t N,
			int64_t *nr, int64_t *stride) {
	int mr, n;
	gemm_tile_shape(t, ct, &mr, &n);
	const char *e = getenv("TBC_GEMV_PANELS"); /* 0: off, for measuring one against the other */
	bool rows_ok = M == GEMM_M_RUNTIME || (M >= 1 && M <= mr);
	if ((e && !strcmp(e, "0")) || !t->gemv_panels || t->parallel != TBC_PAR_HOST_THREADS || !rows_ok || N < n || K < 1)
		return false;
	int64_t es = (int64_t)tbc_dtype_size(dt);
	*nr = n;
	*stride = K * n;
	if (*stride * es % 512 == 0) *stride += 64 / es;
	return true;
}

/* v's K x N matrix in panels of nr columns, stride elements apart. */
static bool const_panels(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t nr, int64_t stride,
			 gemm_operand *o) {
	int b = lower_const_panels(l->cx, v, rows, cols, transpose, nr, stride);
	kir_buffer *buf = b >= 0 ? lk_buf(l, b) : NULL;
	if (!buf) return false;
	o->buf = buf;
	o->panel = nr;
	o->panel_stride = I(l->k, stride);
	o->rs = I(l->k, nr), o->cs = I(l->k, 1); /* within a panel; load_ct uses the panels */
	return true;
}

bool gemm_const_panels(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t M, tbc_dtype ct,
		       gemm_operand *o) {
	int64_t K = transpose ? cols : rows, N = transpose ? rows : cols, nr, stride;
	if (v->kind != TBC_VALUE_CONST || !v->constant || !gemv_panels(l->cx->target, v->type.dtype, ct, M, K, N, &nr, &stride))
		return false;
	return const_panels(l, v, rows, cols, transpose, nr, stride, o);
}

bool gemm_const_tile_panels(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, tbc_dtype ct,
			    gemm_operand *o) {
	int mr, nr;
	gemm_tile_shape(l->cx->target, ct, &mr, &nr);
	int64_t K = transpose ? cols : rows, N = transpose ? rows : cols, es = (int64_t)tbc_dtype_size(v->type.dtype);
	if (v->kind != TBC_VALUE_CONST || !v->constant || K < 1 || N < 1 || N % nr) return false;
	return const_panels(l, v, rows, cols, transpose, nr, gemm_tile_panel_stride(K, nr, es), o);
}

int64_t gemm_tile_panel_stride(int64_t K, int64_t nr, int64_t elem_bytes) {
	int64_t stride = K * nr;
	return stride * elem_bytes % 512 == 0 ? stride + 64 / elem_bytes : stride;
}

bool gemm_dot2_wanted(const tbc_target_desc *t, tbc_dtype a, tbc_dtype b, bool a_k_contiguous, int64_t n) {
	/* With AMX tiles (kir_tile2, dot2 for what tiles do not fit) and on
	 * AMD's cores (dot_bf16_default); elsewhere only when asked for: on
	 * the Intel CPU measured, vdpbf16ps has half the multiply-adds per
	 * cycle of f32 FMAs, and the bf16 models ran no faster than with the
	 * scalar GEMM (docs/precision.md).  TBC_GEMM_DOT2=1 / 0: on / off. */
	const char *e = getenv("TBC_GEMM_DOT2");
	bool on = e && !strcmp(e, "1") ? true : e && !strcmp(e, "0") ? false : t->tile_bf16 || t->dot_bf16_default;
	return on && t->dot_bf16 && t->parallel == TBC_PAR_HOST_THREADS && a == TBC_DT_BF16 && b == TBC_DT_BF16 &&
	       a_k_contiguous && n >= 16;
}

bool gemm_const_pairs(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, gemm_operand *o) {
	if (v->kind != TBC_VALUE_CONST || !v->constant || rows <= 0 || cols <= 0) return false;
	/* A pair row of 4 n bytes that is a multiple of 512 gets 16 more
	 * columns, as gemm_const_operand pads rows. */
	int64_t n = transpose ? rows : cols, pitch = 4 * n % 512 == 0 ? n + 16 : n;
	int b = lower_const_pairs(l->cx, v, rows, cols, transpose, pitch);
	kir_buffer *buf = b >= 0 ? lk_buf(l, b) : NULL;
	if (!buf) return false;
	o->buf = buf;
	o->rs = I(l->k, 2 * pitch), o->cs = I(l->k, 1);
	o->pairs = true;
	return true;
}

/* B of a GEMM that is a load-time value (lower_cx.load_time): laid out as a
 * constant B is (gemm_const_panels' column panels where few rows read it,
 * else gemm_const_operand's rows with a pitch), by a kernel of its own that
 * reads the weights' results alone, so it runs once per session with them
 * (codegen/lower/load_time.c) and not at each run.  buf -1: v is not one or
 * needs no layout. */
typedef struct load_time_b {
	int buf;
	bool failed;           /* the kernel did not build (a diagnostic says why) */
	int64_t pitch;         /* rows: elements from one row of (K, N) to the next */
	int64_t panel, stride; /* > 0: column panels of that many columns, stride apart */
} load_time_b;

static load_time_b load_time_matrix(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose,
				    int64_t M, tbc_dtype ct) {
	load_time_b r = {.buf = -1};
	if (!cx->load_time || !cx->load_time[v->id] || v->kind == TBC_VALUE_CONST || rows <= 0 || cols <= 0) return r;
	int64_t K = transpose ? cols : rows, N = transpose ? rows : cols, es = (int64_t)tbc_dtype_size(v->type.dtype);
	bool panels = gemv_panels(cx->target, v->type.dtype, ct, M, K, N, &r.panel, &r.stride);
	int64_t p = N * es % 512 == 0 ? N + 64 / es : N;
	if (!panels && !transpose && p == N) return r;
	tbc_type t = {.dtype = v->type.dtype, .rank = 2};
	t.dims[0] = (tbc_dim){panels ? (N + r.panel - 1) / r.panel : K, NULL};
	t.dims[1] = (tbc_dim){panels ? r.stride : p, NULL};
	int b = lower_temp_buf(cx, &t, "b_layout");
	lk l;
	r.failed = true;
	if (b < 0 || !lk_begin(&l, cx, "b_layout")) return r;
	kir_kernel *k = l.k;
	kir_buffer *src = lk_value(&l, v), *dst = lk_buf(&l, b);
	if (!src || !dst) return r;
	kir_var *ib = kir_var_new(k, "ib", KIR_INDEX), *i = kir_var_new(k, "i", KIR_INDEX);
	kir_var *j = kir_var_new(k, "j", KIR_INDEX), *z = kir_var_new(k, "z", KIR_INDEX);
	kir_expr *zero = kir_e_cast(k, v->type.dtype, I(k, 0));
	/* Element (i, j) of B (K, N): v[i][j], or v[j][i] transposed. */
#define B_AT(ie, je) (transpose ? kir_e_load(k, src, ADD(k, MUL(k, (je), I(k, cols)), (ie))) \
				: kir_e_load(k, src, ADD(k, MUL(k, (ie), I(k, cols)), (je))))
	kir_stmt *body;
	if (panels) {
		/* Panel ib: element (i, ib nr + c) at ib stride + i nr + c, zeros
		 * past N (a column clamped to N - 1 for the load, which every
		 * panel's kernel bounds alike) and in the stride's tail.  A
		 * transposed B is read along its rows (c outer). */
		int64_t nr = r.panel;
		kir_var *c = kir_var_new(k, "c", KIR_INDEX);
		kir_expr *col = ADD(k, MUL(k, V(k, ib), I(k, nr)), V(k, c));
		kir_expr *in = CMP(k, KIR_LT, ADD(k, MUL(k, V(k, ib), I(k, nr)), V(k, c)), I(k, N));
		kir_expr *at = ADD(k, ADD(k, MUL(k, V(k, ib), I(k, r.stride)), MUL(k, V(k, i), I(k, nr))), V(k, c));
		kir_stmt *store = kir_s_store(k, dst, at, SEL(k, in, B_AT(V(k, i), MIN(k, col, I(k, N - 1))), zero));
		kir_stmt *copy = transpose ? kir_s_for(k, c, I(k, 0), I(k, nr), 1, KIR_LOOP_SEQUENTIAL,
						       kir_s_for(k, i, I(k, 0), I(k, K), 1, KIR_LOOP_SEQUENTIAL, store))
					   : kir_s_for(k, i, I(k, 0), I(k, K), 1, KIR_LOOP_SEQUENTIAL,
						       kir_s_for(k, c, I(k, 0), I(k, nr), 1, KIR_LOOP_SEQUENTIAL, store));
		kir_stmt *tail = kir_s_for(k, z, I(k, K * nr), I(k, r.stride), 1, KIR_LOOP_SEQUENTIAL,
					   kir_s_store(k, dst, ADD(k, MUL(k, V(k, ib), I(k, r.stride)), V(k, z)),
						       kir_e_cast(k, v->type.dtype, I(k, 0))));
		if (copy) copy->next = tail;
		body = kir_s_for(k, ib, I(k, 0), I(k, (N + nr - 1) / nr), 1, KIR_LOOP_PARALLEL, copy);
	} else {
		/* dst[i][j] = B(i, j), then the pitch's tail zeros.  Blocks of 16
		 * rows of dst: a transposing block reads 16 neighbours of each
		 * row of v. */
		kir_expr *lo = MUL(k, V(k, ib), I(k, 16)), *hi = MIN(k, ADD(k, MUL(k, V(k, ib), I(k, 16)), I(k, 16)), I(k, K));
		kir_stmt *store = kir_s_store(k, dst, ADD(k, MUL(k, V(k, i), I(k, p)), V(k, j)), B_AT(V(k, i), V(k, j)));
		kir_stmt *copy = transpose ? kir_s_for(k, j, I(k, 0), I(k, N), 1, KIR_LOOP_SEQUENTIAL,
						       kir_s_for(k, i, lo, hi, 1, KIR_LOOP_SEQUENTIAL, store))
					   : kir_s_for(k, i, lo, hi, 1, KIR_LOOP_SEQUENTIAL,
						       kir_s_for(k, j, I(k, 0), I(k, N), 1, KIR_LOOP_SEQUENTIAL, store));
		kir_expr *lo2 = MUL(k, V(k, ib), I(k, 16)), *hi2 = MIN(k, ADD(k, MUL(k, V(k, ib), I(k, 16)), I(k, 16)), I(k, K));
		kir_var *i2 = kir_var_new(k, "i2", KIR_INDEX);
		kir_stmt *pad = kir_s_for(k, i2, lo2, hi2, 1, KIR_LOOP_SEQUENTIAL,
					  kir_s_for(k, z, I(k, N), I(k, p), 1, KIR_LOOP_SEQUENTIAL,
						    kir_s_store(k, dst, ADD(k, MUL(k, V(k, i2), I(k, p)), V(k, z)), zero)));
		if (copy) copy->next = pad;
		body = kir_s_for(k, ib, I(k, 0), I(k, (K + 15) / 16), 1, KIR_LOOP_PARALLEL, copy);
	}
#undef B_AT
	if (!lk_end(&l, body)) return r;
	r.failed = false;
	if (!panels) r.panel = r.stride = 0;
	r.pitch = p;
	r.buf = b;
	return r;
}

/* o reads lb, B laid out by load_time_matrix; false when there is none. */
static bool load_time_operand(lk *l, const load_time_b *lb, gemm_operand *o) {
	if (lb->buf < 0 || !(o->buf = lk_buf(l, lb->buf))) return false;
	if (lb->panel) {
		o->panel = lb->panel;
		o->panel_stride = I(l->k, lb->stride);
		o->rs = I(l->k, lb->panel), o->cs = I(l->k, 1);
	} else {
		o->rs = I(l->k, lb->pitch), o->cs = I(l->k, 1);
	}
	return true;
}

/* Row tiles and column blocks per parallel chunk.  Static N: blocks of 4
 * NR tiles (a B panel that stays in L2 while every row tile of the chunk
 * passes over it), and as many row tiles per chunk as still leaves about 16
 * chunks (a batch known only while running counts as one; an M known only
 * while running has its row tiles a chunk counted while running).
 * Symbolic N, or the few rows' nest: one row tile, 16 NR tiles. */
#define GEMM_CHUNKS 16

static kir_stmt *gemm_nest(lk *l, const gemm_spec *s, bool tile, int mr_cap);

/* The row-tile nests for a GEMM whose M is known only while running: the
 * nest of a static M of 1 where M is 1 at run time, one of GEMM_FEW_ROWS-row
 * tiles where M is at most that, else the general one.  One row is a
 * decode step's (a token per sequence), a few rows a decode step of a
 * small batch (the batch folded into the rows, lower_matmul); the general
 * nest's MR-row tile would compute a row MR times over, clamped (GPT's
 * decode step ran 2.3x faster with the single row, its batch-3 step 1.1x
 * with the few; docs/performance.md).  TBC_GEMM_M1=0: the general nest
 * alone; TBC_GEMM_FEW=0: without the few rows' -- for measuring. */
#define GEMM_FEW_ROWS 4

static kir_stmt *gemm_rows_nest(lk *l, const gemm_spec *s) {
	int64_t mc;
	const char *e = getenv("TBC_GEMM_M1"), *f = getenv("TBC_GEMM_FEW");
	if (kir_e_const_index(s->M, &mc) || (e && !strcmp(e, "0"))) return gemm_nest(l, s, false, 0);
	gemm_spec one = *s;
	one.M = I(l->k, 1);
	kir_stmt *rest = gemm_nest(l, s, false, 0);
	if (!(f && !strcmp(f, "0")))
		rest = kir_s_if(l->k, kir_e_cmp(l->k, KIR_LE, s->M, I(l->k, GEMM_FEW_ROWS)), gemm_nest(l, s, false, GEMM_FEW_ROWS), rest);
	return kir_s_if(l->k, kir_e_cmp(l->k, KIR_EQ, s->M, I(l->k, 1)), gemm_nest(l, &one, false, 0), rest);
}

kir_stmt *gemm_generate(lk *l, const gemm_spec *s) {
	if (gemm_grid_wanted(l)) /* devices: codegen/lower/gemm_mma.c, gemm_grid.c */
		return gemm_mma_wanted(l, s) ? gemm_generate_mma(l, s) : gemm_generate_grid(l, s);
	kir_kernel *k = l->k;
	k->contract = true; /* a += x * w: one rounding instead of two */
	/* kir_tile2 where the target has it and the shapes let every tile be
	 * whole: M and N at least 16, K even (a row's last pair in a).  An M
	 * known only while running gets both nests, tiles where it is at
	 * least 16. */
	int64_t mc, nc, kc;
	bool tile = s->b.pairs && l->cx->target->tile_bf16 && kir_e_const_index(s->N, &nc) && nc >= 16 &&
		    kir_e_const_index(s->K, &kc) && kc >= 2 && kc % 2 == 0;
	if (!tile) return gemm_rows_nest(l, s);
	if (kir_e_const_index(s->M, &mc)) return gemm_nest(l, s, mc >= 16, 0);
	kir_stmt *tiles = gemm_nest(l, s, true, 0), *rest = gemm_rows_nest(l, s);
	return kir_s_if(k, kir_e_cmp(k, KIR_GE, s->M, I(l->k, 16)), tiles, rest);
}

static kir_stmt *gemm_nest(lk *l, const gemm_spec *s, bool tile, int mr_cap) {
	kir_kernel *k = l->k;
	gemm_gen g = {.l = l, .s = s, .tile = tile};
	int mr, nr;
	gemm_tile_shape(l->cx->target, s->ct, &mr, &nr);
	if (s->mr > 0) mr = s->mr;
	int64_t mc, nc, nbc;
	bool m_static = kir_e_const_index(s->M, &mc), n_static = kir_e_const_index(s->N, &nc);
	if (s->b.pairs) /* kir_dot2: 8 rows by 2 zmm of columns (1 below 32) */
		mr = 8, nr = n_static && nc < 32 ? 16 : 32;
	if (tile) { /* kir_tile2: one 16 x 16 tile (two side by side ran no
		     * faster and doubled LLVM's time on the epilogue) */
		kir_e_const_index(s->K, &g.K);
		mr = 16, nr = 16;
	}
	if (m_static && mc < mr) mr = mc > 0 ? (int)mc : 1;
	if (mr_cap && mr > mr_cap) mr = mr_cap;
	if (n_static && nc < nr) nr = nc > 0 ? (int)nc : 1;
	g.mr = mr;
	kir_expr *RT = DIV(l->k, ADD(l->k, s->M, I(l->k, mr - 1)), I(l->k, mr));
	/* Tiles: every column tile whole, the last one overlapping the one
	 * before (one micro-tile in the code, not a second for the columns past
	 * the whole tiles: a tile's epilogue is 512 values, LLVM's time) */
	kir_expr *NT = tile ? DIV(l->k, ADD(l->k, s->N, I(l->k, nr - 1)), I(l->k, nr)) : DIV(l->k, s->N, I(l->k, nr));
	int64_t tb = 16, rg = 1, kc = 0, groups = 1;
	/* An M known only while running takes the static shape too, its row
	 * groups counted while running (RG below); not the few rows' nest,
	 * whose one row tile has no second to reuse a block of B. */
	bool m_run = !m_static && !mr_cap && !tile;
	if ((m_static || m_run) && n_static) {
		/* A batch known only while running (a dynamic batch) counts as
		 * one for the chunk shape. */
		if (!kir_e_const_index(s->NB, &nbc)) nbc = 1;
		int64_t rtc = m_static ? (mc + mr - 1) / mr : 0, ntc = tile ? (nc + nr - 1) / nr : nc / nr;
		tb = 4;
		kc = s->b.pairs || s->taps ? 0 : k_block(s, tb * nr);
		/* No K blocks for a y of strided columns or a B of taps: a
		 * chunk's row tiles each pass over its whole K x TB NR block of
		 * B, which then should stay in L2 -- fewer column tiles a chunk
		 * for a deep K (a 3x3 convolution of 512 channels: 590 KiB a
		 * tile). */
		int64_t K;
		if (!s->b.pairs && !kc && kir_e_const_index(s->K, &K) && K > 0 && (!y_cols_contiguous(s) || s->taps)) {
			int64_t fit = GEMM_B_BLOCK_BYTES / (K * nr * (int64_t)tbc_dtype_size(s->ct));
			tb = fit < 1 ? 1 : fit < tb ? fit : tb;
		}
		int64_t cbc = (ntc + tb - 1) / tb, chunks = nbc * cbc;
		groups = chunks >= GEMM_CHUNKS ? 1 : (GEMM_CHUNKS + chunks - 1) / chunks;
		if (m_static && groups > rtc) groups = rtc > 0 ? rtc : 1;
		if (m_static) rg = (rtc + groups - 1) / groups;
	}
	kir_expr *TB = I(l->k, tb), *RG = I(l->k, rg);
	if (m_run && n_static) /* ceil(RT / groups) row tiles a chunk, at least one */
		RG = MAX(l->k, DIV(l->k, ADD(l->k, RT, I(l->k, groups - 1)), I(l->k, groups)), I(l->k, 1));
	kir_expr *CB = MAX(l->k, DIV(l->k, ADD(l->k, NT, I(l->k, tb - 1)), TB), I(l->k, 1));
	kir_expr *RGN = DIV(l->k, ADD(l->k, RT, SUB(l->k, RG, I(l->k, 1))), RG);

	kir_var *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block body = {0};
	kir_expr *cb = local(l, &body, "cb", MOD(l->k, V(l->k, t), CB));
	kir_expr *rest = DIV(l->k, V(l->k, t), CB);
	kir_expr *rgi = local(l, &body, "rg", MOD(l->k, rest, RGN));
	g.batch = local(l, &body, "batch", DIV(l->k, rest, RGN));
	for (int w = 0; w < 3; w++) {
		kir_expr *b = s->base ? s->base(s->ctx, l, w, g.batch) : NULL;
		g.base[w] = b ? local(l, &body, w == 0 ? "abase" : w == 1 ? "bbase" : "ybase", b) : I(l->k, 0);
	}
	kir_var *rt = kir_var_new(k, "rt", KIR_INDEX);
	kir_expr *rlo = MUL(l->k, rgi, RG), *rhi = MIN(l->k, ADD(l->k, rlo, RG), RT);

	/* K blocks: the chunk's tiles pass over K in blocks of kc, so the
	 * kc x TB NR block of B stays in L1 while the row tiles reuse it.
	 * Every block but the last stores its sums as they are, the last the
	 * epilogue's value: a select, computed with every other stored value
	 * before the first store (see micro_tile). */
	g.klo = I(l->k, 0), g.khi = s->K;

	/* Whole NR tiles of this column block, and the overlapping last tile. */
	kir_expr *jlo = MUL(l->k, cb, TB), *jhi = MIN(l->k, ADD(l->k, jlo, TB), NT);
	kir_expr *last = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_EQ, cb, SUB(l->k, CB, I(l->k, 1))),
				      kir_e_cmp(k, KIR_NE, MOD(l->k, s->N, I(l->k, nr)), I(l->k, 0)));
	if ((n_static && nc % nr == 0) || tile) last = NULL;
	kir_stmt *tiles;
	if (kc) {
		int64_t K = 0;
		kir_e_const_index(s->K, &K);
		int64_t KB = (K + kc - 1) / kc;
		kir_var *kb = kir_var_new(k, "kb", KIR_INDEX);
		g.klo = MUL(l->k, V(l->k, kb), I(l->k, kc)), g.khi = MIN(l->k, ADD(l->k, g.klo, I(l->k, kc)), s->K);
		g.kresume = kir_e_cmp(k, KIR_GT, V(l->k, kb), I(l->k, 0));
		g.klast = kir_e_cmp(k, KIR_EQ, V(l->k, kb), I(l->k, KB - 1));
		kir_stmt *rows = kir_s_for(k, rt, rlo, rhi, 1, KIR_LOOP_SEQUENTIAL, row_tile(&g, V(l->k, rt), nr, jlo, jhi, last));
		tiles = kir_s_for(k, kb, I(l->k, 0), I(l->k, KB), 1, KIR_LOOP_SEQUENTIAL, rows);
	} else {
		tiles = kir_s_for(k, rt, rlo, rhi, 1, KIR_LOOP_SEQUENTIAL, row_tile(&g, V(l->k, rt), nr, jlo, jhi, last));
	}

	/* Fewer columns than NR (only when N is symbolic): one at a time. */
	kir_stmt *narrow = NULL;
	if (!n_static) {
		kir_var *rt1 = kir_var_new(k, "rt", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
		kir_block one = {0};
		g.i0 = local(l, &one, "i0", MUL(l->k, V(l->k, rt1), I(l->k, mr)));
		kir_expr *mlast = SUB(l->k, s->M, I(l->k, 1));
		for (int r = 0; r < mr; r++)
			g.rows[r] = r == 0 ? g.i0 : local(l, &one, "row", MIN(l->k, ADD(l->k, g.i0, I(l->k, r)), mlast));
		kir_block cols = {0};
		kir_expr *jcol = V(l->k, j);
		micro_tile(&g, &cols, 1, &jcol);
		kir_block_add(k, &one, kir_s_for(k, j, I(l->k, 0), s->N, 1, KIR_LOOP_SEQUENTIAL, cols.first));
		narrow = kir_s_for(k, rt1, rlo, rhi, 1, KIR_LOOP_SEQUENTIAL, one.first);
	}
	if (narrow) kir_block_add(k, &body, kir_s_if(k, kir_e_cmp(k, KIR_GT, NT, I(l->k, 0)), tiles, narrow));
	else kir_block_add(k, &body, tiles);
	kir_expr *total = MUL(l->k, MUL(l->k, s->NB, RGN), CB);
	return kir_s_for(k, t, I(l->k, 0), total, 1, KIR_LOOP_PARALLEL, body.first);
}

/* ---- Shared checks -----------------------------------------------------------*/
static bool static_empty(const tbc_type *t) {
	for (int d = 0; d < t->rank; d++)
		if (!t->dims[d].sym && t->dims[d].size == 0) return true;
	return false;
}

/* The compute type of a contraction over dt; false when it has no lowering. */
static bool compute_type(tbc_dtype dt, tbc_dtype *ct) {
	switch (dt) {
	case TBC_DT_F16:
	case TBC_DT_BF16:
	case TBC_DT_F32: *ct = TBC_DT_F32; return true;
	case TBC_DT_F64:
	case TBC_DT_I8:
	case TBC_DT_U8:
	case TBC_DT_I16:
	case TBC_DT_U16:
	case TBC_DT_I32:
	case TBC_DT_U32:
	case TBC_DT_I64:
	case TBC_DT_U64: *ct = dt; return true;
	default: return false;
	}
}

/* ---- MatMul ------------------------------------------------------------------
 * Numpy semantics: batch dims broadcast, a 1-D A is a row, a 1-D B a column
 * (their dim removed from the result).  Each operand's batch offset is the
 * sum over the result's batch dims of index * stride (0 where it
 * broadcasts; a symbolic dim that may be 1 at run time gets a run-time
 * select, as elementwise nests do). */
typedef struct mm_cx {
	int batch_rank;
	kir_expr *bdims[TBC_MAX_RANK];        /* the result's batch dims */
	kir_expr *bstride[2][TBC_MAX_RANK];   /* per operand, elements */
	kir_expr *ystride;                    /* elements per result matrix */
	bool contiguous[2];                   /* operand batch dims are the result's: base = batch * matrix */
	kir_expr *mat[2];
} mm_cx;

static kir_expr *mm_base(void *ctx, lk *l, int which, kir_expr *batch) {
	mm_cx *m = ctx;
	if (which == 2) return MUL(l->k, batch, m->ystride);
	if (m->batch_rank == 0) return NULL;
	if (m->contiguous[which]) return MUL(l->k, batch, m->mat[which]);
	kir_expr *off = I(l->k, 0), *rest = batch;
	for (int d = m->batch_rank - 1; d >= 0; d--) {
		kir_expr *idx = d == 0 ? rest : MOD(l->k, rest, m->bdims[d]);
		off = ADD(l->k, off, MUL(l->k, idx, m->bstride[which][d]));
		if (d > 0) rest = DIV(l->k, rest, m->bdims[d]);
	}
	return off;
}

static lower_result lower_matmul(lower_cx *cx, const tbc_op *op) {
	const tbc_value *av = op->inputs[0], *bv = op->inputs[1], *yv = op->outputs[0];
	const tbc_type *at = &av->type, *bt = &bv->type, *yt = &yv->type;
	tbc_dtype ct;
	if (!compute_type(at->dtype, &ct) || bt->dtype != at->dtype)
		return lower_error(cx, op, "MatMul on %s has no lowering yet", tbc_dtype_name(at->dtype)), LOWER_FAILED;
	if (at->rank < 1 || bt->rank < 1 || yt->rank < 0) return lower_unsupported(cx, op), LOWER_FAILED;
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (static_empty(yt)) return LOWER_OK;
	/* A B of rank 2 (weights: an encoder's or a decoder's layers) under a
	 * batched A: A's batch dims are the result's, and A and the result are
	 * row-major, so their batches fold into the rows -- one GEMM of
	 * batch x M rows that reads B once, not a GEMM per batch each reading
	 * all of B.  On the CPU: a device's grid GEMM keeps its batches (its
	 * split-K chooses by them, and no device ran the fold yet).
	 * TBC_MATMUL_FOLD=0: a GEMM per batch, for measuring. */
	const char *fe = getenv("TBC_MATMUL_FOLD");
	bool fold = bt->rank == 2 && at->rank >= 3 && cx->target->parallel == TBC_PAR_HOST_THREADS && !(fe && !strcmp(fe, "0"));
	int64_t m_rows = 1; /* the GEMM's rows, GEMM_M_RUNTIME when any factor is symbolic */
	for (int d = fold ? 0 : at->rank - 2; at->rank > 1 && d <= at->rank - 2; d++)
		m_rows = at->dims[d].sym || m_rows == GEMM_M_RUNTIME ? GEMM_M_RUNTIME : m_rows * at->dims[d].size;
	load_time_b lb = {.buf = -1};
	if (bt->rank == 2) lb = load_time_matrix(cx, bv, bt->dims[0].size, bt->dims[1].size, false, m_rows, ct);
	if (lb.failed) return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "matmul")) return LOWER_FAILED;
	gemm_spec s = {.ct = ct};
	int ra = at->rank, rb = bt->rank;
	kir_expr *M = ra == 1 ? I(l.k, 1) : lk_dim(&l, at->dims[ra - 2]);
	for (int d = 0; fold && d < ra - 2; d++) M = MUL(l.k, M, lk_dim(&l, at->dims[d]));
	kir_expr *K = lk_dim(&l, at->dims[ra - 1]);
	kir_expr *N = rb == 1 ? I(l.k, 1) : lk_dim(&l, bt->dims[rb - 1]);
	s.M = M, s.N = N, s.K = K;
	s.a.rs = K, s.a.cs = I(l.k, 1);
	s.b.rs = N, s.b.cs = I(l.k, 1);
	s.y.rs = N, s.y.cs = I(l.k, 1);
	/* A constant B (weights) laid out for the kernel: in k pairs for
	 * kir_dot2 where the target has it. */
	bool dot2 = rb == 2 && gemm_dot2_wanted(l.cx->target, at->dtype, bt->dtype, true, bt->dims[1].size) &&
		    gemm_const_pairs(&l, bv, bt->dims[0].size, bt->dims[1].size, false, &s.b);
	int64_t mc = 0;
	if (!kir_e_const_index(M, &mc)) mc = GEMM_M_RUNTIME;
	bool panels = rb == 2 && !dot2 && gemm_const_panels(&l, bv, bt->dims[0].size, bt->dims[1].size, false, mc, ct, &s.b);
	if (rb == 2 && !dot2 && !panels) gemm_const_operand(&l, bv, bt->dims[0].size, bt->dims[1].size, false, &s.b);
	if (!dot2 && !panels) load_time_operand(&l, &lb, &s.b);
	s.a.buf = lk_value(&l, av);
	if (!s.b.buf) s.b.buf = lk_value(&l, bv);
	s.y.buf = lk_buf(&l, yb);
	if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
	mm_cx m;
	memset(&m, 0, sizeof m);
	m.batch_rank = fold ? 0 : yt->rank - (ra > 1) - (rb > 1);
	m.mat[0] = MUL(l.k, M, K);
	m.mat[1] = MUL(l.k, K, N);
	m.ystride = MUL(l.k, M, N);
	s.NB = I(l.k, 1);
	for (int d = 0; d < m.batch_rank; d++) {
		m.bdims[d] = lk_dim(&l, yt->dims[d]);
		s.NB = MUL(l.k, s.NB, m.bdims[d]);
	}
	for (int w = 0; w < 2; w++) {
		const tbc_type *t = w ? bt : at;
		int obr = t->rank > 2 ? t->rank - 2 : 0;
		kir_expr *stride = m.mat[w];
		m.contiguous[w] = obr == m.batch_rank;
		for (int d = m.batch_rank - 1; d >= 0; d--) {
			int od = d - (m.batch_rank - obr);
			if (od < 0) {
				m.bstride[w][d] = I(l.k, 0);
				m.contiguous[w] = false;
				continue;
			}
			tbc_dim td = t->dims[od], ydim = yt->dims[d];
			kir_expr *dim = lk_dim(&l, td);
			if (!td.sym && td.size == 1 && !(!ydim.sym && ydim.size == 1)) {
				m.bstride[w][d] = I(l.k, 0);
				m.contiguous[w] = false;
			} else if (td.sym && !tbc_dim_eq(td, ydim)) {
				m.bstride[w][d] = kir_e_select(l.k, kir_e_cmp(l.k, KIR_EQ, dim, I(l.k, 1)), I(l.k, 0), stride);
				m.contiguous[w] = false;
			} else {
				m.bstride[w][d] = stride;
			}
			stride = MUL(l.k, stride, dim);
		}
	}
	s.ctx = &m;
	s.base = mm_base;
	kir_stmt *st = gemm_generate(&l, &s);
	return lk_end(&l, st) ? LOWER_OK : LOWER_FAILED;
}

/* ---- Gemm ----------------------------------------------------------------------
 * y = alpha * op(A) op(B) + beta * C, C broadcast to (M, N); beta == 0 ignores
 * C.  Integer Gemm needs integer alpha and beta (the interpreter's exact
 * path); it wraps in the element type. */
typedef struct gemm_cx {
	const tbc_op *op;
	double alpha, beta;
	kir_buffer *c;
	kir_expr *cs[2];
	tbc_dtype ct;
} gemm_cx;

static kir_expr *gemm_epi(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col) {
	(void)batch;
	gemm_cx *g = ctx;
	kir_kernel *k = l->k;
	bool fl = tbc_dtype_is_float(g->ct);
	kir_expr *v = acc;
	if (g->alpha != 1.0)
		v = kir_e_binary(k, KIR_MUL, fl ? kir_e_float(k, g->ct, g->alpha) : kir_e_int(k, g->ct, (int64_t)g->alpha), v);
	if (g->c) {
		kir_expr *cv = kir_e_cast(k, g->ct, kir_e_load(k, g->c, ADD(l->k, MUL(l->k, row, g->cs[0]), MUL(l->k, col, g->cs[1]))));
		if (g->beta != 1.0)
			cv = kir_e_binary(k, KIR_MUL, fl ? kir_e_float(k, g->ct, g->beta) : kir_e_int(k, g->ct, (int64_t)g->beta),
					  cv);
		v = kir_e_binary(k, KIR_ADD, v, cv);
	}
	return kir_e_cast(k, g->op->outputs[0]->type.dtype, v);
}

static lower_result lower_gemm(lower_cx *cx, const tbc_op *op) {
	const tbc_value *av = op->inputs[0], *bv = op->inputs[1], *yv = op->outputs[0];
	const tbc_value *cv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	const tbc_type *at = &av->type, *bt = &bv->type, *yt = &yv->type;
	gemm_cx g = {.op = op};
	g.alpha = tbc_attr_float(op, "alpha", 1.0);
	g.beta = tbc_attr_float(op, "beta", 1.0);
	bool ta = tbc_attr_int(op, "transA", 0) != 0, tb = tbc_attr_int(op, "transB", 0) != 0;
	if (!compute_type(at->dtype, &g.ct) || at->rank != 2 || bt->rank != 2 || yt->rank != 2)
		return lower_error(cx, op, "Gemm on %s has no lowering yet", tbc_dtype_name(at->dtype)), LOWER_FAILED;
	if (!tbc_dtype_is_float(g.ct) &&
	    (g.alpha != (double)(int64_t)g.alpha || g.beta != (double)(int64_t)g.beta || g.alpha > 1e15 || g.beta > 1e15 ||
	     g.alpha < -1e15 || g.beta < -1e15))
		return lower_error(cx, op, "integer Gemm with a fractional alpha or beta has no lowering yet"), LOWER_FAILED;
	if (g.beta == 0) cv = NULL;
	int yb = lower_result_buf(cx, yv);
	if (yb < 0) return LOWER_FAILED;
	if (static_empty(yt)) return LOWER_OK;
	load_time_b lb = load_time_matrix(cx, bv, bt->dims[0].size, bt->dims[1].size, tb,
					  yt->dims[0].sym ? GEMM_M_RUNTIME : yt->dims[0].size, g.ct);
	if (lb.failed) return LOWER_FAILED;
	lk l;
	if (!lk_begin(&l, cx, "gemm")) return LOWER_FAILED;
	gemm_spec s = {.ct = g.ct};
	s.M = lk_dim(&l, yt->dims[0]);
	s.N = lk_dim(&l, yt->dims[1]);
	s.K = lk_dim(&l, at->dims[ta ? 0 : 1]);
	s.NB = I(l.k, 1);
	kir_expr *one = I(l.k, 1);
	/* A is (M, K), or (K, M) transposed; B is (K, N), or (N, K). */
	s.a.rs = ta ? one : s.K, s.a.cs = ta ? s.M : one;
	s.b.rs = tb ? one : s.N, s.b.cs = tb ? s.K : one;
	s.y.rs = s.N, s.y.cs = one;
	/* A constant B (weights) laid out for the kernel: transposed, (N, K)
	 * becomes (K, N), so its rows are the vector direction. */
	bool dot2 = gemm_dot2_wanted(l.cx->target, at->dtype, bt->dtype, !ta, yt->dims[1].sym ? -1 : yt->dims[1].size) &&
		    gemm_const_pairs(&l, bv, bt->dims[0].size, bt->dims[1].size, tb, &s.b);
	int64_t mc = 0;
	if (!kir_e_const_index(s.M, &mc)) mc = GEMM_M_RUNTIME;
	bool panels = !dot2 && gemm_const_panels(&l, bv, bt->dims[0].size, bt->dims[1].size, tb, mc, g.ct, &s.b);
	if (!dot2 && !panels) gemm_const_operand(&l, bv, bt->dims[0].size, bt->dims[1].size, tb, &s.b);
	if (!dot2 && !panels) load_time_operand(&l, &lb, &s.b);
	s.a.buf = lk_value(&l, av);
	if (!s.b.buf) s.b.buf = lk_value(&l, bv);
	s.y.buf = lk_buf(&l, yb);
	if (!s.a.buf || !s.b.buf || !s.y.buf) return LOWER_FAILED;
	if (cv) {
		const tbc_type *t = &cv->type;
		if (t->rank > 2) return lower_unsupported(cx, op), LOWER_FAILED;
		g.c = lk_value(&l, cv);
		if (!g.c) return LOWER_FAILED;
		g.cs[0] = g.cs[1] = I(l.k, 0);
		kir_expr *stride = one;
		for (int d = t->rank - 1; d >= 0; d--) {
			int yd = 2 - t->rank + d;
			tbc_dim td = t->dims[d];
			kir_expr *dim = lk_dim(&l, td);
			if (!td.sym && td.size == 1) g.cs[yd] = I(l.k, 0);
			else if (td.sym && !tbc_dim_eq(td, yt->dims[yd]))
				g.cs[yd] = kir_e_select(l.k, kir_e_cmp(l.k, KIR_EQ, dim, one), I(l.k, 0), stride);
			else g.cs[yd] = stride;
			stride = MUL(l.k, stride, dim);
		}
	}
	s.ctx = &g;
	s.epi = gemm_epi;
	kir_stmt *st = gemm_generate(&l, &s);
	return lk_end(&l, st) ? LOWER_OK : LOWER_FAILED;
}

lower_result lower_family_matmul(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_MatMul: return lower_matmul(cx, op);
	case TBC_OP_Gemm: return lower_gemm(cx, op);
	default: return LOWER_NOT_MINE;
	}
}
