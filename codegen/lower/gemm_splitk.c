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
 * Deterministic: no atomics, every sum in a fixed order, the same bits on
 * every run and every device computing f32 as IEEE 754 does.  The order
 * differs from one pass's (k order from 0 through all of K): the result is
 * within f32 rounding of it (a sum of S + 1 roundings more, of terms each
 * a K / S-long sum), well inside the conformance tolerance.
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
 * SMs: 256 tiles, one pass).  Only f32
 * GEMMs (the partials are f32: f64 would lose digits, integer sums are
 * kept as they are) with sizes known at compile time (the choice and the
 * scratch's size need them).  TBC_GEMM_SPLITK=S, when compiling, forces S
 * slices (1: none) on every such GEMM, for measuring S on a device and for
 * running the conformance cases through the split path (docs/gpu.md). */
#include <stdlib.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_gemm.h"

#define SPLITK_MIN_STEPS 4
#define SPLITK_MAX_SLICES 64
/* A forced split that would need more scratch than this is not made. */
#define SPLITK_MAX_BYTES ((int64_t)1 << 30)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The static sizes of s; false when one is symbolic or none is positive. */
static bool static_sizes(const gemm_spec *s, int64_t *m, int64_t *n, int64_t *k, int64_t *nb) {
	return kir_e_const_index(s->M, m) && kir_e_const_index(s->N, n) && kir_e_const_index(s->K, k) &&
	       kir_e_const_index(s->NB, nb) && *m > 0 && *n > 0 && *k > 0 && *nb > 0;
}

/* TBC_GEMM_SPLITK as a count of slices; 0 when unset or not a count. */
static int64_t forced_slices(void) {
	const char *e = getenv("TBC_GEMM_SPLITK");
	if (!e || !*e) return 0;
	char *end;
	long v = strtol(e, &end, 10);
	return *end || v < 1 || v > 4096 ? 0 : v;
}

int64_t gemm_splitk_slices(const lk *l, const gemm_spec *s, int64_t tm, int64_t tn, int64_t tk, int64_t items,
			   int64_t *steps) {
	const tbc_target_desc *t = l->cx->target;
	int64_t m, n, k, nb;
	*steps = 0;
	if (s->ct != TBC_DT_F32 || !static_sizes(s, &m, &n, &k, &nb)) return 1;
	int64_t kt = ceil_div(k, tk), tiles = nb * ceil_div(m, tm) * ceil_div(n, tn);
	int64_t want = forced_slices();
	if (want) {
		if (want > kt) want = kt;
	} else {
		int64_t fill = (int64_t)t->compute_units * t->items_per_unit;
		if (fill <= 0 || tiles >= t->compute_units) return 1;
		want = ceil_div(fill, tiles * items);
		if (want > kt / SPLITK_MIN_STEPS) want = kt / SPLITK_MIN_STEPS;
		if (want > SPLITK_MAX_SLICES) want = SPLITK_MAX_SLICES;
	}
	if (want < 2) return 1;
	/* Whole steps per slice; the slices that then hold steps at all. */
	*steps = ceil_div(kt, want);
	int64_t slices = ceil_div(kt, *steps);
	if (slices < 2 || slices * nb * m * n > SPLITK_MAX_BYTES / 4) return *steps = 0, 1;
	return slices;
}

kir_buffer *gemm_splitk_partials(lk *l, const gemm_spec *s, int64_t slices) {
	int64_t m, n, k, nb;
	if (!static_sizes(s, &m, &n, &k, &nb)) return NULL;
	/* One scratch shared by every split GEMM (launches run in order),
	 * grown to the largest: placed by memory planning with the other
	 * scratch, apart from what lives while the GEMM runs. */
	int pb = lower_shared_temp(l->cx, "splitk", TBC_DT_F32, (tbc_dim){1, NULL}, slices * nb * m * n);
	return lk_buf(l, pb);
}

kir_expr *gemm_splitk_index(kir_kernel *k, const gemm_spec *s, kir_expr *slice, kir_expr *batch, kir_expr *row,
			    kir_expr *col) {
	kir_expr *per = MUL(k, MUL(k, s->NB, s->M), s->N);
	return ADD(k, MUL(k, slice, per), ADD(k, MUL(k, ADD(k, MUL(k, batch, s->M), row), s->N), col));
}

kir_stmt *gemm_splitk_sum(lk *l, const gemm_spec *s, kir_buffer *part, int64_t slices) {
	kir_kernel *k = l->k;
	int64_t m, n, kk, nb;
	if (!static_sizes(s, &m, &n, &kk, &nb)) return k->failed = true, NULL;
	int64_t per = nb * m * n;
	kir_var *f = kir_var_new(k, "f", KIR_INDEX), *sl = kir_var_new(k, "sl", KIR_INDEX);
	kir_var *sum = kir_var_new(k, "sum", s->ct);
	kir_block body = {0};
	kir_expr *fv = V(k, f);
	/* f = (batch * M + row) * N + col: the partials' own order */
	kir_expr *col = LET(k, &body, "col", MOD(k, fv, I(k, n)));
	kir_expr *row = LET(k, &body, "row", m == 1 ? I(k, 0) : MOD(k, DIV(k, fv, I(k, n)), I(k, m)));
	kir_expr *batch = nb == 1 ? I(k, 0) : LET(k, &body, "batch", DIV(k, fv, I(k, m * n)));
	kir_block_add(k, &body, kir_s_set(k, sum, LOAD(k, part, fv)));
	kir_stmt *add = kir_s_set(k, sum, ADD(k, V(k, sum), LOAD(k, part, ADD(k, MUL(k, V(k, sl), I(k, per)), fv))));
	kir_block_add(k, &body, kir_s_for(k, sl, I(k, 1), I(k, slices), 1, KIR_LOOP_SEQUENTIAL, add));
	kir_expr *ybase = s->base ? s->base(s->ctx, l, 2, batch) : NULL;
	kir_expr *v = V(k, sum);
	v = s->epi ? s->epi(s->ctx, l, v, batch, row, col) : CAST(k, s->y.buf->dtype, v);
	kir_expr *yi = ADD(k, ADD(k, ybase ? ybase : I(k, 0), MUL(k, row, s->y.rs)), MUL(k, col, s->y.cs));
	kir_block_add(k, &body, kir_s_store(k, s->y.buf, yi, v));
	return kir_s_for(k, f, I(k, 0), I(k, per), 1, KIR_LOOP_PARALLEL, body.first);
}
