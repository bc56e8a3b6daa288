/* The GEMM generator's parallel form (lower_gemm.h), for targets whose
 * parallel loops are a grid of work-groups (TBC_PAR_GRID with work-groups):
 *
 *   a work-group of GX x GY items (8 x 8; 16 x 16 on a GPU) per TM x TN
 *   tile of y (TM = GY * WM, TN = GX * WN), each item WM x WN outputs
 *   (8 x 8; 4 x 4 or 2 x 2 on a GPU) held in scalar
 *   locals; the tiles of a and b staged in local memory TK columns (rows)
 *   at a time, each item storing its share, zeros past the edges; barriers
 *   around the products.  Where items run in lockstep (subgroup_size > 1)
 *   item (x, y) owns rows y, y + GY, ... and columns x, x + GX, ... of the
 *   tile, so neighbouring items read neighbouring words; elsewhere its
 *   outputs are contiguous, which the device compiler vectorizes within
 *   the item (PoCL, a 512^3 MatMul on 2 cores: 4 x 4 spread 71 ms, 4 x 4
 *   contiguous 47 ms, 8 x 8 contiguous 31 ms; the CPU's register-tiled
 *   form run as 16 work-items: 7 ms).
 *
 * Grid loops: the batch (when there is more than one), the row tiles, the
 * column tiles.  Every output's sum is taken in k order from 0 (the padding
 * adds +0 products to a sum that is never -0), as the CPU's generator does,
 * and the epilogue is the same callback.
 *
 * Split-K (codegen/lower/gemm_splitk.c), where the tiles are too few to
 * fill the device: the batch loop runs over (batch, slice) pairs (or the
 * slices alone), each group summing its slice's TK steps of K in k order
 * from 0 and storing the sums, without the epilogue, as f32 partials; a
 * second kernel adds the slices' partials, slice 0 first, and applies the
 * epilogue.  An output is then (...(p0 + p1) + ...) + p(S-1) with each p a
 * sum in k order: another rounding than one pass's, within f32 rounding of
 * it, and the same bits on every run (no atomics). */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_gemm.h"

#define GG_MAX_W 8

kir_stmt *gemm_tile_nest(kir_kernel *k, const gemm_spec *s, int64_t tm, int64_t tn, int64_t nb, kir_var *bi,
			 kir_var *bj, kir_var *bv, kir_expr *batches, kir_stmt *body) {
	kir_expr *MT = DIV(k, ADD(k, s->M, I(k, tm - 1)), I(k, tm));
	kir_expr *NT = DIV(k, ADD(k, s->N, I(k, tn - 1)), I(k, tn));
	int64_t mc = -1, nc = -1;
	kir_e_const_index(s->M, &mc), kir_e_const_index(s->N, &nc);
	bool empty = mc == 0 || nc == 0 || nb == 0; /* no groups: an empty nest */
	kir_stmt *nest = kir_s_for(k, bj, I(k, 0), NT, 1, KIR_LOOP_GRID, empty ? NULL : body);
	nest = kir_s_for(k, bi, I(k, 0), MT, 1, KIR_LOOP_GRID, nest);
	return bv ? kir_s_for(k, bv, I(k, 0), batches, 1, KIR_LOOP_GRID, nest) : nest;
}

bool gemm_grid_wanted(const lk *l) {
	const tbc_target_desc *t = l->cx->target;
	return t->parallel == TBC_PAR_GRID && t->workgroups && t->max_workgroup_size >= 16 && t->local_mem_bytes >= 4096;
}

typedef struct gg {
	lk *l;
	kir_kernel *k;
	const gemm_spec *s;
	int64_t gx, gy, wm, wn, tk, tm, tn, items;
	kir_expr *batch, *slice, *base[3], *i0, *j0, *lx, *ly, *lid;
	bool spread; /* item (x, y) owns rows y, y + GY, ...: else rows y * WM, y * WM + 1, ... */
} gg;

/* Row r (column c) of the item's outputs, within the tile. */
static kir_expr *own_row(gg *g, int r) {
	kir_kernel *k = g->k;
	return g->spread ? ADD(k, g->ly, I(k, r * g->gy)) : ADD(k, MUL(k, g->ly, I(k, g->wm)), I(k, r));
}
static kir_expr *own_col(gg *g, int c) {
	kir_kernel *k = g->k;
	return g->spread ? ADD(k, g->lx, I(k, c * g->gx)) : ADD(k, MUL(k, g->lx, I(k, g->wn)), I(k, c));
}

static kir_expr *set_local(kir_kernel *k, kir_block *b, const char *name, kir_expr *e) {
	if (!e) return k->failed = true, NULL;
	kir_var *v = kir_var_new(k, name, e->type);
	kir_block_add(k, b, kir_s_set(k, v, e));
	return V(k, v);
}

static kir_expr *zero_of(kir_kernel *k, tbc_dtype t) { return tbc_dtype_is_float(t) ? F(k, t, 0.0) : kir_e_int(k, t, 0); }

/* Stores one operand's tile (rows x cols of the operand from (r0, c0),
 * limits R x C) into local buffer dst, element e = it * items + lid. */
static void stage(gg *g, kir_block *b, kir_buffer *dst, const gemm_operand *o, kir_expr *base, kir_expr *r0,
		  kir_expr *c0, int64_t rows, int64_t cols, kir_expr *R, kir_expr *C) {
	kir_kernel *k = g->k;
	int64_t n = rows * cols;
	for (int64_t it = 0; it < (n + g->items - 1) / g->items; it++) {
		/* the last share may be partial: those items store nothing (the
		 * index clamped too, for the verifier's interval check) */
		bool partial = (it + 1) * g->items > n;
		kir_expr *e = ADD(k, I(k, it * g->items), g->lid);
		if (partial) e = MIN(k, e, I(k, n - 1));
		kir_expr *r = ADD(k, r0, DIV(k, e, I(k, cols))), *c = ADD(k, c0, MOD(k, e, I(k, cols)));
		kir_expr *in = AND(k, CMP(k, KIR_LT, r, R), CMP(k, KIR_LT, c, C));
		kir_expr *rc = MIN(k, r, SUB(k, R, I(k, 1))), *cc = MIN(k, c, SUB(k, C, I(k, 1)));
		kir_expr *idx = ADD(k, ADD(k, base, MUL(k, rc, o->rs)), MUL(k, cc, o->cs));
		kir_expr *v = CAST(k, g->s->ct, LOAD(k, o->buf, idx));
		kir_stmt *st = kir_s_store(k, dst, e, SEL(k, in, v, zero_of(k, g->s->ct)));
		if (partial) st = kir_s_if(k, CMP(k, KIR_LT, ADD(k, I(k, it * g->items), g->lid), I(k, n)), st, NULL);
		kir_block_add(k, b, st);
	}
}

/* Picks the tile: 64 items as 8 x 8 with 8 x 8 outputs each where the
 * target allows (a GPU: 256 items of 4 x 4 or 2 x 2), fewer outputs along
 * a dim that is small. */
static void choose(gg *g, const tbc_target_desc *t) {
	const gemm_spec *s = g->s;
	int64_t m = -1, n = -1;
	kir_e_const_index(s->M, &m);
	kir_e_const_index(s->N, &n);
	g->gx = g->gy = t->max_workgroup_size >= 64 ? 8 : 4;
	g->wm = g->wn = 8;
	if (m >= 0 && m <= 4) { /* a few rows (a vector times a matrix): the group spreads over columns */
		g->gx *= g->gy, g->gy = 1, g->wm = m > 0 ? m : 1, g->wn = 4;
	} else if (n >= 0 && n <= 4) {
		g->gy *= g->gx, g->gx = 1, g->wn = n > 0 ? n : 1, g->wm = 4;
	}
	/* TBC_GEMM_GRID_TILE=GXxGY:WMxWN:TK replaces the general case's choice,
	 * for measuring tiles on a device (docs/gpu.md); one that does not fit
	 * the target is ignored. */
	const char *e = getenv("TBC_GEMM_GRID_TILE");
	long v[5];
	if (e && m != 0 && n != 0 && g->gx * g->gy >= 16 &&
	    sscanf(e, "%ldx%ld:%ldx%ld:%ld", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5 && v[0] > 0 && v[1] > 0 &&
	    v[0] * v[1] <= t->max_workgroup_size && v[2] > 0 && v[2] <= GG_MAX_W && v[3] > 0 && v[3] <= GG_MAX_W &&
	    v[4] > 0 && (v[1] * v[2] + v[0] * v[3]) * v[4] * (int64_t)tbc_dtype_size(s->ct) <= t->local_mem_bytes) {
		g->gx = v[0], g->gy = v[1], g->wm = v[2], g->wn = v[3];
		g->items = g->gx * g->gy;
		g->spread = t->subgroup_size > 1;
		g->tm = g->gy * g->wm, g->tn = g->gx * g->wn, g->tk = v[4];
		return;
	}
	/* Items in lockstep (a warp) read local memory best at neighbouring
	 * addresses: spread an item's outputs GX columns apart.  Items that
	 * run alone (a CPU device, subgroup 1) vectorize their own outputs:
	 * keep them contiguous. */
	g->spread = t->subgroup_size > 1;
	if (g->spread && t->max_workgroup_size >= 256 && g->wm == 8 && g->wn == 8) {
		/* A GPU: 16 x 16 items of 4 x 4 outputs, a 64 x 64 tile (an H200,
		 * docs/gpu.md: 4096^3 at 27.3 TFLOP/s, 55% of cuBLAS, where 8 x 8
		 * items of 8 x 8 ran at 22.5 and spilled); 2 x 2 outputs, 32 x 32
		 * tiles, where 64 x 64 ones would not make 128 work-groups, about
		 * one per multiprocessor (128 x 512 x 2048: 0.030 ms, not 0.036). */
		g->gx = g->gy = 16, g->wm = g->wn = 4;
		int64_t nb = -1;
		if (m > 0 && n > 0 && kir_e_const_index(s->NB, &nb) && nb > 0 &&
		    nb * ((m + 63) / 64) * ((n + 63) / 64) < 128)
			g->wm = g->wn = 2;
	}
	g->items = g->gx * g->gy;
	g->tm = g->gy * g->wm, g->tn = g->gx * g->wn;
	/* TK: the deepest of 32, 16, ... whose two tiles fit in a third of the
	 * local memory (several groups share a multiprocessor). */
	int64_t es = (int64_t)tbc_dtype_size(s->ct);
	for (g->tk = 32; g->tk > 1; g->tk /= 2)
		if ((g->tm + g->tn) * g->tk * es <= t->local_mem_bytes / 3) break;
}

kir_stmt *gemm_generate_grid(lk *l, const gemm_spec *s) {
	kir_kernel *k = l->k;
	/* a += x * w in one rounding where the device fuses (the GPUs' fma;
	 * OpenCL C keeps FP_CONTRACT OFF), as the CPU's GEMM does */
	k->contract = l->cx->target->fma;
	gg g = {.l = l, .k = k, .s = s};
	choose(&g, l->cx->target);
	/* K in slices (codegen/lower/gemm_splitk.c), or one pass (part NULL) */
	gemm_splitk sk;
	if (!gemm_splitk_plan(l, s, g.tm, g.tn, g.tk, g.items, &sk)) return NULL;
	kir_buffer *part = sk.part;
	int64_t grp[2] = {g.gx, g.gy};
	kir_kernel_set_group(k, 2, grp);
	kir_buffer *As = kir_local_new(k, "a_tile", s->ct, 2, (int64_t[]){g.tm, g.tk});
	kir_buffer *Bs = kir_local_new(k, "b_tile", s->ct, 2, (int64_t[]){g.tk, g.tn});
	int64_t nb = -1;
	bool batched = !kir_e_const_index(s->NB, &nb) || nb != 1;
	kir_var *bv = batched || part ? kir_var_new(k, batched ? "batch" : "slice", KIR_INDEX) : NULL;
	kir_var *bi = kir_var_new(k, "bi", KIR_INDEX), *bj = kir_var_new(k, "bj", KIR_INDEX);
	g.lx = kir_e_local_id(k, 0), g.ly = kir_e_local_id(k, 1);
	g.lid = ADD(k, g.lx, MUL(k, g.ly, I(k, g.gx)));
	kir_block body = {0};
	g.batch = bv && batched ? V(k, bv) : I(k, 0);
	if (part) { /* the grid's first loop runs over (batch, slice) pairs */
		/* an expression of the grid's variable, not a local: the K loop's
		 * bounds read it, and the verifier knows grid variables (not
		 * locals) to be the same for every item of a group, as a loop
		 * holding barriers needs */
		g.slice = batched ? MOD(k, V(k, bv), sk.slices) : V(k, bv);
		if (batched) g.batch = set_local(k, &body, "batch", DIV(k, V(k, bv), sk.slices));
	}
	for (int w = 0; w < (part && !sk.dynamic ? 2 : 3); w++) {
		kir_expr *b = s->base ? s->base(s->ctx, l, w, g.batch) : NULL;
		g.base[w] = b ? set_local(k, &body, w == 0 ? "abase" : w == 1 ? "bbase" : "ybase", b) : I(k, 0);
	}
	/* where the group's partials begin; whether this run splits at all (a
	 * batch known only while running that fills the device is one slice:
	 * its sums are y's, the epilogue applied here) */
	kir_expr *pbase = part ? set_local(k, &body, "pbase", gemm_splitk_base(k, s, g.slice, g.batch)) : NULL;
	kir_expr *split = part && sk.dynamic ? set_local(k, &body, "split", CMP(k, KIR_GT, sk.slices, I(k, 1))) : NULL;
	g.i0 = MUL(k, V(k, bi), I(k, g.tm));
	g.j0 = MUL(k, V(k, bj), I(k, g.tn));
	kir_var *acc[GG_MAX_W][GG_MAX_W];
	for (int r = 0; r < g.wm; r++)
		for (int c = 0; c < g.wn; c++) {
			acc[r][c] = kir_var_new(k, "acc", s->ct);
			kir_block_add(k, &body, kir_s_set(k, acc[r][c], zero_of(k, s->ct)));
		}
	/* One K tile: stage, barrier, the products, barrier (before the next
	 * stage overwrites what others still read). */
	kir_var *kt = kir_var_new(k, "kt", KIR_INDEX), *kk = kir_var_new(k, "kk", KIR_INDEX);
	kir_expr *k0 = MUL(k, V(k, kt), I(k, g.tk));
	kir_block tile = {0};
	stage(&g, &tile, As, &s->a, g.base[0], g.i0, k0, g.tm, g.tk, s->M, s->K);
	stage(&g, &tile, Bs, &s->b, g.base[1], k0, g.j0, g.tk, g.tn, s->K, s->N);
	kir_block_add(k, &tile, kir_s_barrier(k));
	kir_block step = {0};
	kir_expr *av[GG_MAX_W], *bw[GG_MAX_W];
	for (int r = 0; r < g.wm; r++) {
		kir_expr *row = own_row(&g, r);
		av[r] = set_local(k, &step, "a", LOAD(k, As, ADD(k, MUL(k, row, I(k, g.tk)), V(k, kk))));
	}
	for (int c = 0; c < g.wn; c++) {
		kir_expr *col = own_col(&g, c);
		bw[c] = set_local(k, &step, "b", LOAD(k, Bs, ADD(k, MUL(k, V(k, kk), I(k, g.tn)), col)));
	}
	for (int r = 0; r < g.wm; r++)
		for (int c = 0; c < g.wn; c++)
			kir_block_add(k, &step, kir_s_set(k, acc[r][c], ADD(k, V(k, acc[r][c]), MUL(k, av[r], bw[c]))));
	kir_block_add(k, &tile, kir_s_for(k, kk, I(k, 0), I(k, g.tk), 1, KIR_LOOP_SEQUENTIAL, step.first));
	kir_block_add(k, &tile, kir_s_barrier(k));
	kir_expr *KT = DIV(k, ADD(k, s->K, I(k, g.tk - 1)), I(k, g.tk)), *kt0 = I(k, 0);
	if (part) { /* the slice's steps; the same bounds for every item of a group */
		kt0 = MUL(k, g.slice, sk.steps);
		KT = MIN(k, ADD(k, kt0, sk.steps), KT);
	}
	int64_t kc;
	if (!kir_e_const_index(s->K, &kc) || kc > 0) /* no loop over a statically empty range */
		kir_block_add(k, &body, kir_s_for(k, kt, kt0, KT, 1, KIR_LOOP_SEQUENTIAL, tile.first));
	/* The stores, each where its row and column exist (indices clamped as
	 * well, so the verifier's interval check sees them in bounds). */
	for (int r = 0; r < g.wm; r++)
		for (int c = 0; c < g.wn; c++) {
			kir_expr *row = ADD(k, g.i0, own_row(&g, r));
			kir_expr *col = ADD(k, g.j0, own_col(&g, c));
			kir_expr *in = AND(k, CMP(k, KIR_LT, row, s->M), CMP(k, KIR_LT, col, s->N));
			kir_expr *rc = MIN(k, row, SUB(k, s->M, I(k, 1))), *cc = MIN(k, col, SUB(k, s->N, I(k, 1)));
			kir_expr *v = V(k, acc[r][c]);
			kir_stmt *st = NULL, *ys = NULL;
			if (part) {
				kir_expr *pi = ADD(k, pbase, ADD(k, MUL(k, rc, s->N), cc));
				/* in bounds whenever this run splits; clamped so that
				 * the verifier sees it too */
				if (sk.dynamic) pi = MIN(k, pi, I(k, sk.part_elems - 1));
				st = kir_s_store(k, part, pi, v);
			}
			if (!part || sk.dynamic) {
				v = s->epi ? s->epi(s->ctx, l, v, g.batch, rc, cc) : CAST(k, s->y.buf->dtype, v);
				kir_expr *yi = ADD(k, ADD(k, g.base[2], MUL(k, rc, s->y.rs)), MUL(k, cc, s->y.cs));
				ys = kir_s_store(k, s->y.buf, yi, v);
			}
			if (split) st = kir_s_if(k, split, st, ys);
			kir_block_add(k, &body, kir_s_if(k, in, st ? st : ys, NULL));
		}
	kir_stmt *nest = gemm_tile_nest(k, s, g.tm, g.tn, nb, bi, bj, bv, part ? MUL(k, s->NB, sk.slices) : s->NB,
					body.first);
	if (!part) return nest;
	/* The partial sums are a kernel of their own, launched first; this one
	 * goes on as their sum. */
	if (!lk_split_first(l, nest, "slices")) return NULL;
	return gemm_splitk_sum(l, s, &sk);
}
