/* Split-K for the grouped GEMM (codegen/lower/gemm_grid.c): a GEMM whose
 * output tiles are too few to fill the device sums K in S slices instead.
 *
 *   kernel <name>_slices: a work-group per (batch, slice, tile), summing the
 *       slice's TK steps of K in k order from 0 into f32 partials
 *       part[slice][batch][row][col] (scratch of the arena);
 *   kernel <name>: a work-item per output, sum = part[0] + part[1] + ... +
 *       part[S-1] in that order, then the GEMM's epilogue (bias, activation,
 *       Gemm's alpha and C, the output's cast), as the one-pass kernel
 *       applies it.
 *
 * Deterministic: no atomics, every sum in a fixed order, so the same code
 * gives the same bits on every run.  The order differs from one pass's (k
 * order from 0 through all of K): S partial sums of K / S products each,
 * then S - 1 additions, so the result is within f32 rounding of one pass's
 * (of the same order of error, often smaller), well inside the conformance
 * tolerance (rtol 1e-3).
 *
 * When: a GEMM whose tiles (times the batch) are fewer than the device's
 * multiprocessors (compute_units, codegen/target_desc.h) leaves some of
 * them idle; it gets S slices, S the least that makes tiles * S groups
 * hold compute_units * items_per_unit work-items (the device's occupancy
 * figure), at most 64 and with each slice at least 4 TK steps deep (a
 * slice shallower than that spends more on its group's setup and its
 * partials than it saves).  A GEMM with a group for every multiprocessor
 * stays one pass: its groups keep every multiprocessor busy, if at a lower
 * occupancy that the tile's several outputs per item partly make up for,
 * and a split would add a pass over the partials (a 1024^3 MatMul on 132
 * SMs: 256 tiles, one pass).  Only f32 GEMMs (the partials are f32: f64
 * would lose digits, integer sums are kept as they are) whose M, N and K
 * are known when compiling.
 *
 * A batch known only while running (ResNet-50's, the bench model's): S is
 * the same rule computed while running from the batch, index arithmetic of
 * the sizes in both kernels.  The batches whose tiles fill the device get
 * S = 1: the grouped kernel then stores y itself, with the epilogue (a
 * branch every item of a group takes alike), and the sum kernel runs no
 * item; so only the batches below that take partials, and the scratch has
 * a size known when compiling, the most any of them takes.
 *
 * TBC_GEMM_SPLITK=S, when compiling, forces S slices on every such GEMM
 * with a batch known when compiling (1: none on any), for measuring S on a
 * device and for running the conformance cases through the split path
 * (docs/gpu.md). */
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_gemm.h"

#define SPLITK_MIN_STEPS 4
#define SPLITK_MAX_SLICES 64
/* A split that would need more scratch than this is not made. */
#define SPLITK_MAX_BYTES ((int64_t)1 << 30)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
/* ceil(a / b) for a >= 1 and b >= 1, naming b once: these expressions nest
 * and are printed whole wherever they are read (OpenCL C). */
static kir_expr *CEIL_DIV(kir_kernel *k, int64_t a, kir_expr *b) { return ADD(k, DIV(k, I(k, a - 1), b), I(k, 1)); }

/* TBC_GEMM_SPLITK as a count of slices; 0 when unset or not a count. */
static int64_t forced_slices(void) {
	const char *e = getenv("TBC_GEMM_SPLITK");
	if (!e || !*e) return 0;
	char *end;
	long v = strtol(e, &end, 10);
	return *end || v < 1 || v > 4096 ? 0 : v;
}

static bool dynamic_wanted(void) {
	const char *e = getenv("TBC_GEMM_SPLITK_DYNAMIC");
	return e && !strcmp(e, "1");
}

/* What decides the slices: KT steps of K, the tiles of one batch element,
 * the items a group, the most slices wanted (SPLITK_MAX_SLICES and at least
 * SPLITK_MIN_STEPS steps a slice), the device's figures. */
typedef struct plan {
	int64_t kt, tiles1, items, cap, units, fill;
} plan;

/* The slices that hold steps when K is cut into at most `want`. */
static int64_t whole_steps(int64_t kt, int64_t want) { return ceil_div(kt, ceil_div(kt, want)); }

/* The slices for a batch of nb (>= 1): 1 when its tiles fill the device. */
static int64_t auto_slices(const plan *p, int64_t nb) {
	if (nb * p->tiles1 >= p->units) return 1;
	int64_t want = ceil_div(p->fill, nb * p->tiles1 * p->items);
	return whole_steps(p->kt, want < p->cap ? want : p->cap);
}

bool gemm_splitk_plan(lk *l, const gemm_spec *s, int64_t tm, int64_t tn, int64_t tk, int64_t items, gemm_splitk *sk) {
	const tbc_target_desc *t = l->cx->target;
	kir_kernel *k = l->k;
	*sk = (gemm_splitk){0};
	int64_t m, n, kk, nb = -1;
	if (s->ct != TBC_DT_F32 || !kir_e_const_index(s->M, &m) || !kir_e_const_index(s->N, &n) ||
	    !kir_e_const_index(s->K, &kk) || m <= 0 || n <= 0 || kk <= 0)
		return true;
	bool dynamic = !kir_e_const_index(s->NB, &nb);
	if (!dynamic && nb <= 0) return true;
	/* A batch known only while running splits only with
	 * TBC_GEMM_SPLITK_DYNAMIC=1: on an H200 (docs/gpu.md, run 10) the
	 * kernel able to split at run time was slower than the one-pass one on
	 * the transformer block (0.490 against 0.372 ms) and no faster on
	 * ResNet-50's last convolution, split or not. */
	if (dynamic && !dynamic_wanted()) return true;
	plan p = {.kt = ceil_div(kk, tk), .tiles1 = ceil_div(m, tm) * ceil_div(n, tn), .items = items,
		  .units = t->compute_units, .fill = (int64_t)t->compute_units * t->items_per_unit};
	p.cap = p.kt / SPLITK_MIN_STEPS < SPLITK_MAX_SLICES ? p.kt / SPLITK_MIN_STEPS : SPLITK_MAX_SLICES;
	int64_t forced = forced_slices(), slices = 1, elems = 0;
	if (forced == 1) return true;
	if (forced && !dynamic) {
		slices = whole_steps(p.kt, forced < p.kt ? forced : p.kt);
		elems = slices * nb * m * n;
	} else if (p.fill <= 0 || p.cap < 2) {
		return true; /* the device's figures unknown, or K too shallow to cut */
	} else if (!dynamic) {
		slices = auto_slices(&p, nb);
		elems = slices * nb * m * n;
	} else {
		/* The most partials any batch that splits needs (the batches below
		 * the one whose tiles fill the device): the scratch's size. */
		for (int64_t b = 1; b * p.tiles1 < p.units; b++) {
			int64_t sb = auto_slices(&p, b);
			if (sb > 1 && sb * b * m * n > elems) elems = sb * b * m * n;
		}
		slices = elems > 0 ? 2 : 1;
	}
	if (slices < 2 || elems > SPLITK_MAX_BYTES / 4) return true;
	if (!dynamic) {
		sk->slices = I(k, slices);
		sk->steps = I(k, ceil_div(p.kt, slices));
	} else {
		/* auto_slices of the run's batch, as index arithmetic */
		kir_expr *nbx = MAX(k, s->NB, I(k, 1)), *tiles = MUL(k, nbx, I(k, p.tiles1));
		kir_expr *want = MIN(k, CEIL_DIV(k, p.fill, MUL(k, tiles, I(k, items))), I(k, p.cap));
		want = SEL(k, CMP(k, KIR_LT, tiles, I(k, p.units)), want, I(k, 1));
		sk->steps = CEIL_DIV(k, p.kt, want);
		sk->slices = CEIL_DIV(k, p.kt, sk->steps);
	}
	/* One scratch shared by every split GEMM (launches run in order),
	 * grown to the largest: placed by memory planning with the other
	 * scratch, apart from what lives while the GEMM runs. */
	int pb = lower_shared_temp(l->cx, "splitk", TBC_DT_F32, (tbc_dim){1, NULL}, elems);
	sk->part = lk_buf(l, pb);
	sk->dynamic = dynamic;
	sk->part_elems = elems;
	return sk->part && sk->slices && sk->steps;
}

kir_expr *gemm_splitk_base(kir_kernel *k, const gemm_spec *s, kir_expr *slice, kir_expr *batch) {
	return ADD(k, MUL(k, slice, MUL(k, MUL(k, s->NB, s->M), s->N)), MUL(k, MUL(k, batch, s->M), s->N));
}

kir_stmt *gemm_splitk_sum(lk *l, const gemm_spec *s, const gemm_splitk *sk) {
	kir_kernel *k = l->k;
	int64_t m, n, nb = -1;
	if (!kir_e_const_index(s->M, &m) || !kir_e_const_index(s->N, &n)) return k->failed = true, NULL;
	kir_e_const_index(s->NB, &nb);
	kir_expr *per = MUL(k, s->NB, I(k, m * n));
	kir_var *f = kir_var_new(k, "f", KIR_INDEX), *sl = kir_var_new(k, "sl", KIR_INDEX);
	kir_var *sum = kir_var_new(k, "sum", s->ct);
	kir_block body = {0};
	kir_expr *fv = V(k, f);
	/* f = (batch * M + row) * N + col: the partials' own order */
	kir_expr *col = LET(k, &body, "col", MOD(k, fv, I(k, n)));
	kir_expr *row = LET(k, &body, "row", m == 1 ? I(k, 0) : MOD(k, DIV(k, fv, I(k, n)), I(k, m)));
	kir_expr *batch = nb == 1 ? I(k, 0) : LET(k, &body, "batch", DIV(k, fv, I(k, m * n)));
	kir_expr *at0 = sk->dynamic ? MIN(k, fv, I(k, sk->part_elems - 1)) : fv;
	kir_block_add(k, &body, kir_s_set(k, sum, LOAD(k, sk->part, at0)));
	kir_expr *at = ADD(k, MUL(k, V(k, sl), per), fv);
	if (sk->dynamic) at = MIN(k, at, I(k, sk->part_elems - 1));
	kir_stmt *add = kir_s_set(k, sum, ADD(k, V(k, sum), LOAD(k, sk->part, at)));
	kir_block_add(k, &body, kir_s_for(k, sl, I(k, 1), sk->slices, 1, KIR_LOOP_SEQUENTIAL, add));
	kir_expr *ybase = s->base ? s->base(s->ctx, l, 2, batch) : NULL;
	kir_expr *v = V(k, sum);
	v = s->epi ? s->epi(s->ctx, l, v, batch, row, col) : CAST(k, s->y.buf->dtype, v);
	kir_expr *yi = ADD(k, ADD(k, ybase ? ybase : I(k, 0), MUL(k, row, s->y.rs)), MUL(k, col, s->y.cs));
	kir_block_add(k, &body, kir_s_store(k, s->y.buf, yi, v));
	/* a batch that fills the device was summed in one pass: no item here */
	kir_expr *items = sk->dynamic ? SEL(k, CMP(k, KIR_GT, sk->slices, I(k, 1)), per, I(k, 0)) : per;
	return kir_s_for(k, f, I(k, 0), items, 1, KIR_LOOP_PARALLEL, body.first);
}
