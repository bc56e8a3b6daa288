/* The GEMM generator's tensor-core form (lower_gemm.h): f16 or bf16
 * operands, f32 sums, for targets whose description declares kernel IR's
 * warp matrix multiply-accumulate (tbc_target_desc.mma_f16 / mma_bf16:
 * NVIDIA GPUs from sm_80).
 *
 *   a work-group of 32 x 8 items: 8 warps (local_id(1)), 2 down by 4
 *   across, each warp owning a 16 MI x 8 NI block of a TM x TN tile of y
 *   (TM = 32 MI, TN = 32 NI: 128 x 128 with MI = NI = 4);
 *   a and b staged TK = 16 columns (rows) at a time in local memory in
 *   their own type, zeros past the edges (an operand's value converted to
 *   f32 and back is itself, so the sums are the scalar form's products),
 *   rows padded by 8 elements so that the 8 rows one ldmatrix reads fall
 *   into distinct banks;
 *   per 16 of k, one mma of MI x NI m16n8k16 tiles per warp (kir_mma),
 *   its sums in 4 MI NI f32 locals per item; barriers around the products;
 *   the epilogue stores each item's sums where the fragment layout puts
 *   them (rows g, g + 8 of each 16, columns 2t, 2t + 1 of each 8), through
 *   the same callback as the other forms.
 *
 * The sums are of the same products as the scalar form, added in the
 * order the tensor core adds them (16 at a time), so the kernel is marked
 * contract and results agree with the scalar form within f32 rounding. */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_gemm.h"

#define MMA_WARPS_Y 2
#define MMA_WARPS_X 4
#define MMA_TK_MAX 32
#define MMA_PAD 8 /* elements past each staged row: 16 bytes */

typedef struct mma_gen {
	lk *l;
	kir_kernel *k;
	const gemm_spec *s;
	tbc_dtype dt; /* the operands' type, f16 or bf16 */
	int mi, ni;
	int64_t tm, tn, tk, lda, ldb;
	kir_expr *lid;
} mma_gen;

/* TBC_GEMM_MMA=0 keeps the scalar form (gemm_grid.c), for measuring one
 * against the other; TBC_GEMM_MMA=MIxNI[:TK] picks the warp's tiles (1 .. 4
 * each) and the depth staged (16 or 32).  Otherwise 4 x 4 (a 128 x 128
 * tile), or 2 x 2 (64 x 64) where 128 x 128 tiles would not make 128
 * work-groups (about one per multiprocessor), and 1 x 2 (32 x 64) where
 * 64 x 64 ones would not either; TK 16: ptxas -v for sm_90 gives 4 x 4
 * 232 registers and no spills (255 and a spill with TK 32), 2 x 2 126
 * registers (170), so that two groups of 256 fit a multiprocessor's 64 K
 * registers.  Which is fastest is for a GPU to say (docs/gpu.md). */
static bool choose(mma_gen *g) {
	const char *e = getenv("TBC_GEMM_MMA");
	int mi = 0, ni = 0, tk = 16;
	g->tk = 16;
	if (e && e[0] == '0' && !e[1]) return false;
	if (e && sscanf(e, "%dx%d:%d", &mi, &ni, &tk) >= 2 && mi >= 1 && mi <= 4 && ni >= 1 && ni <= 4 &&
	    (tk == 16 || tk == MMA_TK_MAX)) {
		g->mi = mi, g->ni = ni, g->tk = tk;
		return true;
	}
	int64_t m = -1, n = -1, nb = -1;
	g->mi = g->ni = 4;
	if (!kir_e_const_index(g->s->NB, &nb)) nb = 1; /* a batch known only while running counts as one */
	if (kir_e_const_index(g->s->M, &m) && kir_e_const_index(g->s->N, &n) && m > 0 && n > 0 && nb > 0) {
		if (nb * ((m + 127) / 128) * ((n + 127) / 128) < 128) g->mi = g->ni = 2;
		if (nb * ((m + 63) / 64) * ((n + 63) / 64) < 128) g->mi = 1, g->ni = 2;
	}
	return true;
}

bool gemm_mma_wanted(const lk *l, const gemm_spec *s) {
	const tbc_target_desc *t = l->cx->target;
	tbc_dtype dt = s->a.buf ? s->a.buf->dtype : TBC_DT_F32;
	bool typed = dt == TBC_DT_F16 ? t->mma_f16 : dt == TBC_DT_BF16 && t->mma_bf16;
	if (!typed || s->ct != TBC_DT_F32 || !s->b.buf || s->b.buf->dtype != dt) return false;
	/* the group: 8 warps of 32, and the tiles of the largest choice */
	int64_t bytes = ((128 * (MMA_TK_MAX + MMA_PAD)) + MMA_TK_MAX * (128 + MMA_PAD)) * 2;
	return t->subgroup_size == 32 && t->max_workgroup_size >= 256 && t->local_mem_bytes >= bytes;
}

static kir_expr *set_local(kir_kernel *k, kir_block *b, const char *name, kir_expr *e) { return LET(k, b, name, e); }

/* Stores one operand's tile (rows x cols of it from (r0, c0), limits R x
 * C) into local buffer dst of row pitch ld: element e = it * 256 + lid of
 * the tile at dst[(e / cols) * ld + e % cols], neighbouring items reading
 * neighbouring columns. */
static void stage(mma_gen *g, kir_block *b, kir_buffer *dst, int64_t ld, const gemm_operand *o, kir_expr *base,
		  kir_expr *r0, kir_expr *c0, int64_t rows, int64_t cols, kir_expr *R, kir_expr *C) {
	kir_kernel *k = g->k;
	int64_t n = rows * cols, items = 32 * MMA_WARPS_X * MMA_WARPS_Y;
	for (int64_t it = 0; it < n / items; it++) { /* n is a multiple of the items (tiles of 32 x 32 at least) */
		kir_expr *e = ADD(k, I(k, it * items), g->lid);
		kir_expr *tr = DIV(k, e, I(k, cols)), *tc = MOD(k, e, I(k, cols));
		kir_expr *r = ADD(k, r0, tr), *c = ADD(k, c0, tc);
		kir_expr *in = AND(k, CMP(k, KIR_LT, r, R), CMP(k, KIR_LT, c, C));
		kir_expr *rc = MIN(k, r, SUB(k, R, I(k, 1))), *cc = MIN(k, c, SUB(k, C, I(k, 1)));
		kir_expr *idx = ADD(k, ADD(k, base, MUL(k, rc, o->rs)), MUL(k, cc, o->cs));
		kir_expr *v = SEL(k, in, LOAD(k, o->buf, idx), F(k, g->dt, 0.0));
		kir_block_add(k, b, kir_s_store(k, dst, ADD(k, MUL(k, tr, I(k, ld)), tc), v));
	}
}

kir_stmt *gemm_generate_mma(lk *l, const gemm_spec *s) {
	kir_kernel *k = l->k;
	mma_gen g = {.l = l, .k = k, .s = s, .dt = s->a.buf->dtype};
	if (!choose(&g)) return gemm_generate_grid(l, s);
	k->contract = true; /* the tensor core adds 16 products at a time */
	g.tm = 16 * g.mi * MMA_WARPS_Y, g.tn = 8 * g.ni * MMA_WARPS_X;
	g.lda = g.tk + MMA_PAD, g.ldb = g.tn + MMA_PAD;
	int64_t grp[2] = {32, MMA_WARPS_X * MMA_WARPS_Y};
	kir_kernel_set_group(k, 2, grp);
	kir_buffer *As = kir_local_new(k, "a_tile", g.dt, 2, (int64_t[]){g.tm, g.lda});
	kir_buffer *Bs = kir_local_new(k, "b_tile", g.dt, 2, (int64_t[]){g.tk, g.ldb});
	int64_t nb = -1;
	bool batched = !kir_e_const_index(s->NB, &nb) || nb != 1;
	kir_var *bv = batched ? kir_var_new(k, "batch", KIR_INDEX) : NULL;
	kir_var *bi = kir_var_new(k, "bi", KIR_INDEX), *bj = kir_var_new(k, "bj", KIR_INDEX);
	kir_expr *lane = kir_e_local_id(k, 0), *warp = kir_e_local_id(k, 1);
	g.lid = ADD(k, lane, MUL(k, warp, I(k, 32)));
	kir_expr *batch = bv ? V(k, bv) : I(k, 0);
	kir_block body = {0};
	kir_expr *base[3];
	for (int w = 0; w < 3; w++) {
		kir_expr *b = s->base ? s->base(s->ctx, l, w, batch) : NULL;
		base[w] = b ? set_local(k, &body, w == 0 ? "abase" : w == 1 ? "bbase" : "ybase", b) : I(k, 0);
	}
	kir_expr *i0 = MUL(k, V(k, bi), I(k, g.tm)), *j0 = MUL(k, V(k, bj), I(k, g.tn));
	/* The warp's block of the tile: rows wr .. wr + 16 MI, columns wc .. wc + 8 NI. */
	kir_expr *wr = MUL(k, DIV(k, warp, I(k, MMA_WARPS_X)), I(k, 16 * g.mi));
	kir_expr *wc = MUL(k, MOD(k, warp, I(k, MMA_WARPS_X)), I(k, 8 * g.ni));
	int n_acc = g.mi * g.ni * 4;
	kir_var *acc[4 * 4 * 4];
	for (int i = 0; i < n_acc; i++) {
		acc[i] = kir_var_new(k, "acc", TBC_DT_F32);
		kir_block_add(k, &body, kir_s_set(k, acc[i], F(k, TBC_DT_F32, 0.0)));
	}
	kir_var *kt = kir_var_new(k, "kt", KIR_INDEX), *ks = kir_var_new(k, "ks", KIR_INDEX);
	kir_expr *k0 = MUL(k, V(k, kt), I(k, g.tk));
	kir_block tile = {0};
	stage(&g, &tile, As, g.lda, &s->a, base[0], i0, k0, g.tm, g.tk, s->M, s->K);
	stage(&g, &tile, Bs, g.ldb, &s->b, base[1], k0, j0, g.tk, g.tn, s->K, s->N);
	kir_block_add(k, &tile, kir_s_barrier(k));
	kir_mma m = {.mi = g.mi, .ni = g.ni, .a = As, .b = Bs, .lda = g.lda, .ldb = g.ldb, .acc = acc};
	kir_expr *kk = MUL(k, V(k, ks), I(k, 16));
	m.a_at = ADD(k, MUL(k, wr, I(k, g.lda)), kk);
	m.b_at = ADD(k, MUL(k, kk, I(k, g.ldb)), wc);
	kir_block_add(k, &tile, kir_s_for(k, ks, I(k, 0), I(k, g.tk / 16), 1, KIR_LOOP_SEQUENTIAL, kir_s_mma(k, &m)));
	kir_block_add(k, &tile, kir_s_barrier(k));
	kir_expr *KT = DIV(k, ADD(k, s->K, I(k, g.tk - 1)), I(k, g.tk));
	int64_t kc;
	if (!kir_e_const_index(s->K, &kc) || kc > 0) /* no loop over a statically empty range */
		kir_block_add(k, &body, kir_s_for(k, kt, I(k, 0), KT, 1, KIR_LOOP_SEQUENTIAL, tile.first));
	/* The stores: the item's sums where kir_mma's layout puts them, each
	 * where its row and column exist (indices clamped too, for the
	 * verifier's interval check). */
	kir_expr *gq = set_local(k, &body, "g", DIV(k, lane, I(k, 4)));
	kir_expr *tq = set_local(k, &body, "t", MUL(k, MOD(k, lane, I(k, 4)), I(k, 2)));
	kir_expr *row0 = set_local(k, &body, "row0", ADD(k, ADD(k, i0, wr), gq));
	kir_expr *col0 = set_local(k, &body, "col0", ADD(k, ADD(k, j0, wc), tq));
	for (int i = 0; i < g.mi; i++)
		for (int j = 0; j < g.ni; j++)
			for (int e = 0; e < 4; e++) {
				kir_expr *row = ADD(k, row0, I(k, 16 * i + 8 * (e / 2)));
				kir_expr *col = ADD(k, col0, I(k, 8 * j + e % 2));
				kir_expr *in = AND(k, CMP(k, KIR_LT, row, s->M), CMP(k, KIR_LT, col, s->N));
				kir_expr *rc = MIN(k, row, SUB(k, s->M, I(k, 1))), *cc = MIN(k, col, SUB(k, s->N, I(k, 1)));
				kir_expr *v = V(k, acc[(i * g.ni + j) * 4 + e]);
				v = s->epi ? s->epi(s->ctx, l, v, batch, rc, cc) : CAST(k, s->y.buf->dtype, v);
				kir_expr *yi = ADD(k, ADD(k, base[2], MUL(k, rc, s->y.rs)), MUL(k, cc, s->y.cs));
				kir_block_add(k, &body, kir_s_if(k, in, kir_s_store(k, s->y.buf, yi, v), NULL));
			}
	return gemm_tile_nest(k, s, g.tm, g.tn, nb, bi, bj, bv, s->NB, body.first);
}
