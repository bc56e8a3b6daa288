/* Lowering of the signal and sequence-model ops: DFT, LinearAttention and
 * TfIdfVectorizer (docs/lower-signal.md).
 *
 * Each computes as its interpreter kernel does (ir/kernels/seq_signal.c,
 * seq_linear_attention.c, seq_tfidf.c), in double and summing in the same
 * order, so results agree with the interpreter to the last bits or nearly:
 *  - DFT: a direct O(n^2) sum per output point, parallel over every output
 *    point; the twiddles come from a table of cos/sin(sign 2 pi m / n)
 *    computed with the interpreter's expression, indexed by (k j) mod n kept
 *    as a running sum.  Power-of-two lengths from 32 on take a radix-2 FFT
 *    per line instead (same twiddles, another summation order).  An axis
 *    given at run time picks one of the loop nests compiled for each axis.
 *  - LinearAttention: one kernel parallel over (batch, kv head); the
 *    recurrence over time runs inside, the state [d_k, d_v] in f64 scratch.
 *  - TfIdfVectorizer: parallel over rows; each pool n-gram is a loop over the
 *    skip distances and positions counting matches against its constant
 *    tokens. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"
#include "codegen/lower/kir_short.h"

#define F64 TBC_DT_F64

static bool want(const tbc_op *op, int i) { return op->n_outputs > i && op->outputs[i]; }
static const tbc_value *in_opt(const tbc_op *op, int i) { return op->n_inputs > i ? op->inputs[i] : NULL; }

static lower_result refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "op %s %s has no lowering yet", tbc_ops[op->code].onnx_name, why);
	return LOWER_FAILED;
}

/* The interpreter's run-time error, as the compiled run reports it. */
static void fail_if(kir_kernel *k, kir_block *b, const tbc_op *op, kir_expr *cond, const char *what) {
	char msg[256];
	snprintf(msg, sizeof msg, "node '%s' (%s): %s", op->name ? op->name : "", tbc_ops[op->code].onnx_name, what);
	kir_block_add(k, b, kir_s_error(k, cond, msg));
}

static kir_stmt *FOR(kir_kernel *k, kir_var *v, kir_expr *lo, kir_expr *hi, kir_loop_kind kind, kir_block *body) {
	return kir_s_for(k, v, lo, hi, 1, kind, body->first);
}

/* A scalar local set to value in block b; its value from there on. */
static kir_expr *let(kir_kernel *k, kir_block *b, const char *name, kir_expr *value) {
	if (!value) return NULL;
	kir_var *v = kir_var_new(k, name, value->type);
	kir_block_add(k, b, kir_s_set(k, v, value));
	return V(k, v);
}

static bool static_dim(tbc_dim d) { return !d.sym && d.size >= 0; }

/* ---- DFT ---------------------------------------------------------------------
 * Canonical form (frontend/canon.c): input 1 dft_length, input 2 axis (an
 * opset 17-19 axis attribute becomes a constant there). */

/* The transform along one axis, as this op's attributes and lengths make it. */
typedef struct dft_variant {
	int axis;
	tbc_dim n;       /* dft_length: static, or the axis's symbolic length */
	tbc_dim out_len; /* output length along the axis */
	bool ok;         /* the output type is the compiled one */
	const char *why; /* when not: the interpreter's error, if it has one */
	int table;       /* index of its twiddle table */
	int fft_work, fft_rev; /* radix-2 path: per-line work and bit-reversal scratch, else -1 */
} dft_variant;

typedef struct dft_op {
	const tbc_value *x, *y;
	int rank;
	int64_t comp_in, comp_out;
	bool inverse, onesided, herm; /* herm: inverse of a one-sided spectrum */
	int64_t n_fixed;              /* dft_length when given, else -1 */
	/* Output dims a shape kernel computed (the axis given at run time picks
	 * which dim the transform resizes, lower_dyn_signal): bit i set for dim
	 * i, which then agrees with any variant's while running. */
	unsigned computed_dims;
} dft_op;

static int64_t dft_default_axis(const tbc_op *op) {
	const tbc_attr *a = tbc_op_attr(op, "axis");
	if (a) return a->i;
	return op->graph && op->graph->module && op->graph->module->opset > 0 && op->graph->module->opset < 20 ? 1 : -2;
}

static dft_variant dft_variant_of(const dft_op *d, int axis) {
	dft_variant v = {.axis = axis, .ok = true};
	tbc_dim in_len = d->x->type.dims[axis];
	if (d->n_fixed > 0) {
		v.n = (tbc_dim){d->n_fixed, NULL};
	} else if (d->herm) {
		if (!static_dim(in_len)) {
			v.ok = false;
			return v;
		}
		v.n = (tbc_dim){2 * (in_len.size - 1), NULL};
	} else {
		v.n = in_len;
	}
	if (static_dim(v.n) && v.n.size <= 0) {
		v.ok = false;
		v.why = "dft_length must be positive";
		return v;
	}
	v.out_len = v.n;
	if (d->onesided && !d->inverse) {
		if (!static_dim(v.n)) {
			v.ok = false;
			return v;
		}
		v.out_len = (tbc_dim){v.n.size / 2 + 1, NULL};
	}
	const tbc_type *yt = &d->y->type;
	for (int i = 0; i < d->rank - 1; i++)
		if (!(d->computed_dims >> i & 1) && !tbc_dim_eq(yt->dims[i], i == axis ? v.out_len : d->x->type.dims[i]))
			v.ok = false;
	return v;
}

/* Fills table (f64 [n, 2]) with cos and sin of sign * 2 pi m / n, m < n: the
 * interpreter's angle expression, so the same libm values. */
static void dft_twiddles(lk *l, kir_block *b, kir_buffer *table, kir_expr *n, double sign) {
	kir_kernel *k = l->k;
	kir_var *m = kir_var_new(k, "m", KIR_INDEX);
	kir_block body = {0};
	kir_expr *ang = BIN(k, KIR_DIV, BIN(k, KIR_MUL, F(k, F64, sign * 2.0 * M_PI), kir_e_cast(k, F64, V(k, m))),
			    kir_e_cast(k, F64, n));
	ang = let(k, &body, "ang", ang);
	kir_expr *at = MUL(k, V(k, m), I(k, 2));
	kir_block_add(k, &body, kir_s_store(k, table, at, kir_e_unary(k, KIR_COS, ang)));
	kir_block_add(k, &body, kir_s_store(k, table, ADD(k, at, I(k, 1)), kir_e_unary(k, KIR_SIN, ang)));
	kir_block_add(k, b, FOR(k, m, I(k, 0), n, KIR_LOOP_SEQUENTIAL, &body));
}

/* sum_j x[j] w^(k j) for j in [j0, j1), src(j) = j (or n - j, conjugated,
 * when mirror), adding to the locals sr and si (si NULL: real part only). */
static void dft_terms(lk *l, kir_block *b, const dft_op *d, kir_buffer *xb, kir_buffer *table, kir_expr *base,
		      kir_expr *stride, kir_expr *n, kir_expr *kk, kir_expr *j0, kir_expr *j1, bool mirror, kir_var *sr,
		      kir_var *si) {
	kir_kernel *k = l->k;
	/* m = (k j) mod n, kept as a running sum: k < n, so one subtraction. */
	kir_var *m = kir_var_new(k, "tw", KIR_INDEX);
	kir_block_add(k, b, kir_s_set(k, m, BIN(k, KIR_FLOORMOD, MUL(k, kk, j0), n)));
	kir_var *j = kir_var_new(k, "j", KIR_INDEX);
	kir_block body = {0};
	kir_expr *src = mirror ? BIN(k, KIR_SUB, n, V(k, j)) : V(k, j);
	kir_expr *at = let(k, &body, "at", ADD(k, base, MUL(k, src, stride)));
	kir_expr *xr = let(k, &body, "xr", LOAD_F64(k, xb, at));
	kir_expr *xi = d->comp_in == 2 ? LOAD_F64(k, xb, ADD(k, at, I(k, 1))) : NULL;
	if (xi && mirror) xi = kir_e_unary(k, KIR_NEG, xi);
	if (xi) xi = let(k, &body, "xi", xi);
	kir_expr *tm = MUL(k, V(k, m), I(k, 2));
	kir_expr *cr = let(k, &body, "cr", kir_e_load(k, table, tm));
	kir_expr *ci = let(k, &body, "ci", kir_e_load(k, table, ADD(k, tm, I(k, 1))));
	kir_expr *re = BIN(k, KIR_MUL, xr, cr), *im = BIN(k, KIR_MUL, xr, ci);
	if (xi) {
		re = BIN(k, KIR_SUB, re, BIN(k, KIR_MUL, xi, ci));
		im = BIN(k, KIR_ADD, im, BIN(k, KIR_MUL, xi, cr));
	}
	kir_block_add(k, &body, kir_s_set(k, sr, BIN(k, KIR_ADD, V(k, sr), re)));
	if (si) kir_block_add(k, &body, kir_s_set(k, si, BIN(k, KIR_ADD, V(k, si), im)));
	kir_expr *next = ADD(k, V(k, m), kk);
	kir_block_add(k, &body, kir_s_set(k, m, kir_e_select(k, CMP(k, KIR_GE, next, n), BIN(k, KIR_SUB, next, n), next)));
	kir_block_add(k, b, FOR(k, j, j0, j1, KIR_LOOP_SEQUENTIAL, &body));
}

/* The transform of variant v: one parallel loop over every output point
 * (outer, k, inner) with its sum over j inside. */
static void dft_nest(lk *l, kir_block *b, const dft_op *d, const dft_variant *v, kir_buffer *xb, kir_buffer *yb,
		     kir_buffer *table) {
	kir_kernel *k = l->k;
	const tbc_type *xt = &d->x->type;
	kir_expr *outer = I(k, 1), *inner = I(k, 1);
	for (int i = 0; i < v->axis; i++) outer = MUL(k, outer, lk_dim(l, xt->dims[i]));
	for (int i = v->axis + 1; i < d->rank - 1; i++) inner = MUL(k, inner, lk_dim(l, xt->dims[i]));
	kir_expr *L = lk_dim(l, xt->dims[v->axis]), *n = lk_dim(l, v->n), *out_len = lk_dim(l, v->out_len);
	kir_var *o = kir_var_new(k, "o", KIR_INDEX);
	kir_block body = {0};
	kir_expr *q = let(k, &body, "q", BIN(k, KIR_FLOORMOD, V(k, o), inner));
	kir_expr *row = let(k, &body, "row", BIN(k, KIR_FLOORDIV, V(k, o), inner));
	kir_expr *kk = let(k, &body, "kk", BIN(k, KIR_FLOORMOD, row, out_len));
	kir_expr *p = BIN(k, KIR_FLOORDIV, row, out_len);
	kir_expr *stride = MUL(k, inner, I(k, d->comp_in));
	kir_expr *base = let(k, &body, "base", ADD(k, MUL(k, MUL(k, p, L), stride), MUL(k, q, I(k, d->comp_in))));
	kir_var *sr = kir_var_new(k, "sr", F64), *si = d->comp_out == 2 ? kir_var_new(k, "si", F64) : NULL;
	kir_block_add(k, &body, kir_s_set(k, sr, F(k, F64, 0)));
	if (si) kir_block_add(k, &body, kir_s_set(k, si, F(k, F64, 0)));
	if (!d->herm) {
		/* x is zero past its length: the sum stops there. */
		dft_terms(l, &body, d, xb, table, base, stride, n, kk, I(k, 0), BIN(k, KIR_MIN, n, L), false, sr, si);
	} else {
		/* The Hermitian extension: x[j] for j <= n/2, conj(x[n - j]) after,
		 * zero where the source is past the input's length (n static). */
		int64_t N = v->n.size, Lx = xt->dims[v->axis].size;
		int64_t e1 = N / 2 + 1 < Lx ? N / 2 + 1 : Lx, s2 = N / 2 + 1 > N - Lx + 1 ? N / 2 + 1 : N - Lx + 1;
		if (e1 > 0) dft_terms(l, &body, d, xb, table, base, stride, n, kk, I(k, 0), I(k, e1), false, sr, si);
		if (s2 < N) dft_terms(l, &body, d, xb, table, base, stride, n, kk, I(k, s2), I(k, N), true, sr, si);
	}
	kir_expr *re = V(k, sr), *im = si ? V(k, si) : NULL;
	if (d->inverse) {
		kir_expr *nf = kir_e_cast(k, F64, n);
		re = BIN(k, KIR_DIV, re, nf);
		if (im) im = BIN(k, KIR_DIV, im, nf);
	}
	tbc_dtype dt = d->y->type.dtype;
	kir_expr *at = MUL(k, V(k, o), I(k, d->comp_out));
	kir_block_add(k, &body, kir_s_store(k, yb, at, kir_e_cast(k, dt, re)));
	if (im) kir_block_add(k, &body, kir_s_store(k, yb, ADD(k, at, I(k, 1)), kir_e_cast(k, dt, im)));
	kir_expr *total = MUL(k, MUL(k, outer, out_len), inner);
	kir_block_add(k, b, FOR(k, o, I(k, 0), total, KIR_LOOP_PARALLEL, &body));
}

/* Radix-2 FFT for a static power-of-two n (>= DFT_FFT_MIN): per line, the
 * signal (zero-padded, truncated or Hermitian-extended as the direct sum
 * reads it) goes into work scratch in bit-reversed order, then log2(n)
 * stages of butterflies with the same twiddle table (stage with half-size h
 * uses table[j * n / 2h]).  Sums in another order than the interpreter's
 * direct sum: equal within double rounding, not bit for bit. */
#define DFT_FFT_MIN 32

static bool dft_use_fft(const dft_variant *v) {
	return static_dim(v->n) && v->n.size >= DFT_FFT_MIN && (v->n.size & (v->n.size - 1)) == 0;
}

/* rev[j] = j with its log2(n) bits reversed. */
static void dft_bit_reverse(lk *l, kir_block *b, kir_buffer *rev, int64_t n) {
	kir_kernel *k = l->k;
	int bits = 0;
	while (((int64_t)1 << bits) < n) bits++;
	kir_var *j = kir_var_new(k, "j", KIR_INDEX), *bit = kir_var_new(k, "bit", KIR_INDEX);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX), *rest = kir_var_new(k, "rest", KIR_INDEX);
	kir_block body = {0}, bb = {0};
	kir_block_add(k, &body, kir_s_set(k, r, I(k, 0)));
	kir_block_add(k, &body, kir_s_set(k, rest, V(k, j)));
	kir_block_add(k, &bb, kir_s_set(k, r, ADD(k, MUL(k, V(k, r), I(k, 2)), BIN(k, KIR_FLOORMOD, V(k, rest), I(k, 2)))));
	kir_block_add(k, &bb, kir_s_set(k, rest, BIN(k, KIR_FLOORDIV, V(k, rest), I(k, 2))));
	kir_block_add(k, &body, FOR(k, bit, I(k, 0), I(k, bits), KIR_LOOP_SEQUENTIAL, &bb));
	kir_block_add(k, &body, kir_s_store(k, rev, V(k, j), kir_e_cast(k, TBC_DT_I64, V(k, r))));
	kir_block_add(k, b, FOR(k, j, I(k, 0), I(k, n), KIR_LOOP_SEQUENTIAL, &body));
}

static void dft_fft_nest(lk *l, kir_block *b, const dft_op *d, const dft_variant *v, kir_buffer *xb, kir_buffer *yb,
			 kir_buffer *table, kir_buffer *work, kir_buffer *rev) {
	kir_kernel *k = l->k;
	const tbc_type *xt = &d->x->type;
	int64_t N = v->n.size;
	kir_expr *outer = I(k, 1), *inner = I(k, 1);
	for (int i = 0; i < v->axis; i++) outer = MUL(k, outer, lk_dim(l, xt->dims[i]));
	for (int i = v->axis + 1; i < d->rank - 1; i++) inner = MUL(k, inner, lk_dim(l, xt->dims[i]));
	kir_expr *L = lk_dim(l, xt->dims[v->axis]), *out_len = lk_dim(l, v->out_len);
	kir_var *line = kir_var_new(k, "line", KIR_INDEX);
	kir_block body = {0};
	kir_expr *q = let(k, &body, "q", BIN(k, KIR_FLOORMOD, V(k, line), inner));
	kir_expr *p = let(k, &body, "p", BIN(k, KIR_FLOORDIV, V(k, line), inner));
	kir_expr *stride = MUL(k, inner, I(k, d->comp_in));
	kir_expr *base = let(k, &body, "base", ADD(k, MUL(k, MUL(k, p, L), stride), MUL(k, q, I(k, d->comp_in))));
	kir_expr *wb = let(k, &body, "wb", MUL(k, V(k, line), I(k, 2 * N)));
	/* Load in bit-reversed order. */
	{
		kir_var *j = kir_var_new(k, "j", KIR_INDEX);
		kir_block jb = {0};
		kir_expr *src = V(k, j), *neg = NULL;
		if (d->herm) {
			kir_expr *upper = CMP(k, KIR_GT, V(k, j), I(k, N / 2));
			src = let(k, &jb, "src", kir_e_select(k, upper, BIN(k, KIR_SUB, I(k, N), V(k, j)), V(k, j)));
			neg = upper;
		}
		kir_expr *inside = CMP(k, KIR_LT, src, L);
		kir_expr *at = let(k, &jb, "at", ADD(k, base, MUL(k, BIN(k, KIR_MIN, src, BIN(k, KIR_SUB, L, I(k, 1))), stride)));
		kir_expr *xr = kir_e_select(k, inside, LOAD_F64(k, xb, at), F(k, F64, 0));
		kir_expr *xi = F(k, F64, 0);
		if (d->comp_in == 2) {
			xi = kir_e_select(k, inside, LOAD_F64(k, xb, ADD(k, at, I(k, 1))), F(k, F64, 0));
			if (neg) xi = kir_e_select(k, neg, kir_e_unary(k, KIR_NEG, xi), xi);
		}
		kir_expr *to = let(k, &jb, "to", ADD(k, wb, MUL(k, kir_e_cast(k, KIR_INDEX, kir_e_load(k, rev, V(k, j))), I(k, 2))));
		kir_block_add(k, &jb, kir_s_store(k, work, to, xr));
		kir_block_add(k, &jb, kir_s_store(k, work, ADD(k, to, I(k, 1)), xi));
		kir_block_add(k, &body, FOR(k, j, I(k, 0), I(k, N), KIR_LOOP_SEQUENTIAL, &jb));
	}
	/* Stages: blocks of 2h, butterflies (i0, i0 + h) with twiddle j n / 2h. */
	kir_var *h = kir_var_new(k, "h", KIR_INDEX), *tstep = kir_var_new(k, "tstep", KIR_INDEX);
	kir_block_add(k, &body, kir_s_set(k, h, I(k, 1)));
	kir_block_add(k, &body, kir_s_set(k, tstep, I(k, N / 2)));
	{
		kir_var *st = kir_var_new(k, "stage", KIR_INDEX), *g = kir_var_new(k, "blk", KIR_INDEX), *j = kir_var_new(k, "j", KIR_INDEX);
		kir_block sb = {0}, gb = {0}, jb = {0};
		kir_expr *i0 = let(k, &jb, "i0", ADD(k, wb, MUL(k, ADD(k, MUL(k, V(k, g), MUL(k, V(k, h), I(k, 2))), V(k, j)), I(k, 2))));
		kir_expr *i1 = let(k, &jb, "i1", ADD(k, i0, MUL(k, V(k, h), I(k, 2))));
		kir_expr *tw = let(k, &jb, "tw", MUL(k, MUL(k, V(k, j), V(k, tstep)), I(k, 2)));
		kir_expr *wr = let(k, &jb, "wr", kir_e_load(k, table, tw)), *wi = let(k, &jb, "wi", kir_e_load(k, table, ADD(k, tw, I(k, 1))));
		kir_expr *ar = let(k, &jb, "ar", kir_e_load(k, work, i1)), *ai = let(k, &jb, "ai", kir_e_load(k, work, ADD(k, i1, I(k, 1))));
		kir_expr *vr = let(k, &jb, "vr", BIN(k, KIR_SUB, BIN(k, KIR_MUL, ar, wr), BIN(k, KIR_MUL, ai, wi)));
		kir_expr *vi = let(k, &jb, "vi", BIN(k, KIR_ADD, BIN(k, KIR_MUL, ar, wi), BIN(k, KIR_MUL, ai, wr)));
		kir_expr *ur = let(k, &jb, "ur", kir_e_load(k, work, i0)), *ui = let(k, &jb, "ui", kir_e_load(k, work, ADD(k, i0, I(k, 1))));
		kir_block_add(k, &jb, kir_s_store(k, work, i0, BIN(k, KIR_ADD, ur, vr)));
		kir_block_add(k, &jb, kir_s_store(k, work, ADD(k, i0, I(k, 1)), BIN(k, KIR_ADD, ui, vi)));
		kir_block_add(k, &jb, kir_s_store(k, work, i1, BIN(k, KIR_SUB, ur, vr)));
		kir_block_add(k, &jb, kir_s_store(k, work, ADD(k, i1, I(k, 1)), BIN(k, KIR_SUB, ui, vi)));
		kir_block_add(k, &gb, FOR(k, j, I(k, 0), V(k, h), KIR_LOOP_SEQUENTIAL, &jb));
		kir_expr *blocks = BIN(k, KIR_FLOORDIV, I(k, N / 2), V(k, h));
		kir_block_add(k, &sb, FOR(k, g, I(k, 0), blocks, KIR_LOOP_SEQUENTIAL, &gb));
		kir_block_add(k, &sb, kir_s_set(k, h, MUL(k, V(k, h), I(k, 2))));
		kir_block_add(k, &sb, kir_s_set(k, tstep, BIN(k, KIR_FLOORDIV, V(k, tstep), I(k, 2))));
		int bits = 0;
		while (((int64_t)1 << bits) < N) bits++;
		kir_block_add(k, &body, FOR(k, st, I(k, 0), I(k, bits), KIR_LOOP_SEQUENTIAL, &sb));
	}
	/* Store the out_len first bins. */
	{
		kir_var *kk = kir_var_new(k, "kk", KIR_INDEX);
		kir_block kb = {0};
		kir_expr *from = let(k, &kb, "from", ADD(k, wb, MUL(k, V(k, kk), I(k, 2))));
		kir_expr *re = kir_e_load(k, work, from), *im = d->comp_out == 2 ? kir_e_load(k, work, ADD(k, from, I(k, 1))) : NULL;
		if (d->inverse) {
			re = BIN(k, KIR_DIV, re, F(k, F64, (double)N));
			if (im) im = BIN(k, KIR_DIV, im, F(k, F64, (double)N));
		}
		tbc_dtype dt = d->y->type.dtype;
		kir_expr *at = let(k, &kb, "yat", MUL(k, ADD(k, MUL(k, ADD(k, MUL(k, p, out_len), V(k, kk)), inner), q), I(k, d->comp_out)));
		kir_block_add(k, &kb, kir_s_store(k, yb, at, kir_e_cast(k, dt, re)));
		if (im) kir_block_add(k, &kb, kir_s_store(k, yb, ADD(k, at, I(k, 1)), kir_e_cast(k, dt, im)));
		kir_block_add(k, &body, FOR(k, kk, I(k, 0), out_len, KIR_LOOP_SEQUENTIAL, &kb));
	}
	kir_block_add(k, b, FOR(k, line, I(k, 0), MUL(k, outer, inner), KIR_LOOP_PARALLEL, &body));
}

/* The op's attributes and lengths into d; LOWER_OK, or a refusal. */
static lower_result dft_parse(lower_cx *cx, const tbc_op *op, dft_op *out) {
	dft_op d = {.x = op->inputs[0], .y = op->outputs[0]};
	d.rank = d.x->type.rank;
	tbc_dtype dt = d.x->type.dtype;
	if (d.rank < 2 || !tbc_dtype_is_float(dt) || tbc_dtype_bits(dt) < 16 || !tbc_dtype_supported(dt) ||
	    d.y->type.rank != d.rank)
		return refuse(cx, op, "on this input");
	for (int i = 0; i < d.rank - 1 && i < 32; i++)
		if (lower_dim_computed(cx, d.y->type.dims[i])) d.computed_dims |= 1u << i;
	tbc_dim last = d.x->type.dims[d.rank - 1];
	if (!static_dim(last) || (last.size != 1 && last.size != 2)) return refuse(cx, op, "with a last dim other than 1 or 2");
	d.comp_in = last.size;
	d.inverse = tbc_attr_int(op, "inverse", 0) != 0;
	d.onesided = tbc_attr_int(op, "onesided", 0) != 0;
	d.herm = d.inverse && d.onesided;
	d.comp_out = d.herm ? 1 : 2;
	if (d.onesided && !d.inverse && d.comp_in == 2) return refuse(cx, op, "onesided on a complex input");
	d.n_fixed = -1;
	const tbc_value *lenv = in_opt(op, 1);
	if (lenv) {
		const tbc_tensor *t = tbc_input_const(op, 1);
		if (!t) return refuse(cx, op, "with a dft_length known only at run time");
		if (t->numel != 1) return refuse(cx, op, "with a dft_length that is not a scalar");
		d.n_fixed = tbc_load_i64(t->dtype, t->data, 0);
		if (d.n_fixed <= 0) return refuse(cx, op, "with a dft_length that is not positive");
	}
	*out = d;
	return LOWER_OK;
}

/* The run-time axis, normalised, checked as the interpreter does. */
static kir_expr *dft_runtime_axis(lk *l, kir_block *b, const tbc_op *op, int rank, kir_buffer *ab) {
	kir_kernel *k = l->k;
	kir_expr *a = let(k, b, "axis", kir_e_cast(k, KIR_INDEX, kir_e_load(k, ab, I(k, 0))));
	kir_expr *bad = BIN(k, KIR_OR, BIN(k, KIR_OR, CMP(k, KIR_LT, a, I(k, -rank)), CMP(k, KIR_GT, a, I(k, rank - 2))),
			    CMP(k, KIR_EQ, a, I(k, -1)));
	fail_if(k, b, op, bad, "axis is out of range");
	return let(k, b, "ax", kir_e_select(k, CMP(k, KIR_LT, a, I(k, 0)), ADD(k, a, I(k, rank)), a));
}

/* A DFT whose axis is given at run time and whose output dims therefore are
 * not known while compiling (a one-sided transform resizes the axis): a
 * shape kernel computes them from the axis, then lower_dft lowers one nest
 * per axis as for any run-time axis. */
lower_result lower_dyn_signal(lower_cx *cx, const tbc_op *op) {
	if (op->code != TBC_OP_DFT || !want(op, 0)) return LOWER_NOT_MINE;
	const tbc_value *axv = in_opt(op, 2);
	if (!axv || tbc_input_const(op, 2) || tbc_type_numel(&axv->type) != 1 || !tbc_dtype_is_int(axv->type.dtype))
		return LOWER_NOT_MINE;
	dft_op d;
	lower_result r = dft_parse(cx, op, &d);
	if (r != LOWER_OK) return r;
	if (!lower_dim_known(cx, d.y->type.dims[d.rank - 1])) return LOWER_NOT_MINE;
	lk l;
	if (!lk_begin(&l, cx, "shape_dft")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *ab = lk_value(&l, axv);
	if (!ab) return LOWER_FAILED;
	kir_block b = {0};
	kir_expr *axis = dft_runtime_axis(&l, &b, op, d.rank, ab);
	for (int i = 0; i < d.rank - 1; i++) {
		kir_expr *len = lk_dim(&l, d.x->type.dims[i]);
		dft_variant v = dft_variant_of(&d, i);
		/* A length this axis cannot transform keeps the input's: the DFT
		 * kernel then fails with the interpreter's message. */
		kir_expr *out = v.out_len.sym || v.out_len.size > 0 ? lk_dim(&l, v.out_len) : len;
		kir_expr *val = kir_e_select(k, CMP(k, KIR_EQ, axis, I(k, i)), out, len);
		char what[64];
		snprintf(what, sizeof what, "output dim %d of DFT", i);
		if (!lower_shape_dim(&l, &b, op, d.y->type.dims[i], what, val)) return LOWER_FAILED;
	}
	return lk_end(&l, b.first) ? LOWER_SHAPED : LOWER_FAILED;
}

static lower_result lower_dft(lower_cx *cx, const tbc_op *op) {
	if (!want(op, 0)) return LOWER_OK;
	dft_op d;
	lower_result pr = dft_parse(cx, op, &d);
	if (pr != LOWER_OK) return pr;
	const tbc_value *axv = in_opt(op, 2);
	/* The axis: known now, or one of [0, rank-2] at run time. */
	int n_var = 0;
	dft_variant vars[TBC_MAX_RANK];
	bool runtime_axis = false;
	int64_t axis_v = dft_default_axis(op);
	if (axv) {
		const tbc_tensor *t = tbc_input_const(op, 2);
		if (t) {
			if (t->numel != 1) return refuse(cx, op, "with an axis that is not a scalar");
			axis_v = tbc_load_i64(t->dtype, t->data, 0);
		} else {
			int64_t numel = 1;
			for (int i = 0; i < axv->type.rank; i++) numel = static_dim(axv->type.dims[i]) ? numel * axv->type.dims[i].size : -1;
			if (axv->type.rank < 0 || numel != 1 || !tbc_dtype_is_int(axv->type.dtype))
				return refuse(cx, op, "with an axis input that is not an integer scalar");
			runtime_axis = true;
		}
	}
	if (!runtime_axis) {
		if (axis_v < -d.rank || axis_v > d.rank - 2 || axis_v == -1) return refuse(cx, op, "with an axis out of range");
		vars[n_var++] = dft_variant_of(&d, (int)(axis_v < 0 ? axis_v + d.rank : axis_v));
		if (!vars[0].ok) return refuse(cx, op, "with these lengths");
	} else {
		for (int a = 0; a <= d.rank - 2; a++) vars[n_var++] = dft_variant_of(&d, a);
	}
	int yb_pb = lower_result_buf(cx, d.y);
	if (yb_pb < 0) return LOWER_FAILED;
	/* One twiddle table per distinct length, in scratch. */
	int tables[TBC_MAX_RANK], n_tables = 0;
	tbc_dim table_n[TBC_MAX_RANK];
	for (int i = 0; i < n_var; i++) {
		vars[i].table = -1;
		if (!vars[i].ok) continue;
		for (int t = 0; t < n_tables && vars[i].table < 0; t++)
			if (tbc_dim_eq(table_n[t], vars[i].n)) vars[i].table = t;
		if (vars[i].table >= 0) continue;
		tbc_type tt = {.dtype = F64, .rank = 2};
		tt.dims[0] = vars[i].n;
		tt.dims[1] = (tbc_dim){2, NULL};
		table_n[n_tables] = vars[i].n;
		if ((tables[n_tables] = lower_temp_buf(cx, &tt, "dft_twiddles")) < 0) return refuse(cx, op, "on this shape");
		vars[i].table = n_tables++;
	}
	for (int i = 0; i < n_var; i++) {
		vars[i].fft_work = vars[i].fft_rev = -1;
		tbc_dim len = d.x->type.dims[vars[i].axis];
		if (!vars[i].ok || !dft_use_fft(&vars[i]) || !static_dim(len) || len.size < 1) continue;
		/* Work: one line of n complex values per (outer, inner) point. */
		tbc_type wt = {.dtype = F64, .rank = 0}, rt = {.dtype = TBC_DT_I64, .rank = 1};
		for (int a = 0; a < d.rank - 1; a++)
			if (a != vars[i].axis) wt.dims[wt.rank++] = d.x->type.dims[a];
		wt.dims[wt.rank++] = vars[i].n;
		wt.dims[wt.rank++] = (tbc_dim){2, NULL};
		rt.dims[0] = vars[i].n;
		vars[i].fft_work = lower_temp_buf(cx, &wt, "dft_work");
		vars[i].fft_rev = lower_temp_buf(cx, &rt, "dft_rev");
		if (vars[i].fft_work < 0 || vars[i].fft_rev < 0) return refuse(cx, op, "on this shape");
	}
	lk l;
	if (!lk_begin(&l, cx, "dft")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *xb = lk_value(&l, d.x), *yb = lk_buf(&l, yb_pb), *ab = runtime_axis ? lk_value(&l, axv) : NULL;
	if (!xb || !yb || (runtime_axis && !ab)) return LOWER_FAILED;
	kir_block body = {0};
	kir_expr *axis = runtime_axis ? dft_runtime_axis(&l, &body, op, d.rank, ab) : NULL;
	double sign = d.inverse ? 1.0 : -1.0;
	for (int i = 0; i < n_var; i++) {
		const dft_variant *v = &vars[i];
		kir_block vb = {0};
		if (!v->ok) {
			fail_if(k, &vb, op, kir_e_int(k, TBC_DT_BOOL, 1),
				v->why ? v->why : "the transform along this axis gives a shape other than the one compiled");
		} else {
			kir_buffer *table = lk_buf(&l, tables[v->table]);
			kir_expr *n = lk_dim(&l, v->n);
			if (!table) return LOWER_FAILED;
			if (v->n.sym) fail_if(k, &vb, op, CMP(k, KIR_LE, n, I(k, 0)), "dft_length must be positive");
			dft_twiddles(&l, &vb, table, n, sign);
			if (v->fft_work >= 0) {
				kir_buffer *work = lk_buf(&l, v->fft_work), *rev = lk_buf(&l, v->fft_rev);
				if (!work || !rev) return LOWER_FAILED;
				dft_bit_reverse(&l, &vb, rev, v->n.size);
				dft_fft_nest(&l, &vb, &d, v, xb, yb, table, work, rev);
			} else {
				dft_nest(&l, &vb, &d, v, xb, yb, table);
			}
		}
		if (!runtime_axis) {
			body = vb; /* nothing before it */
			continue;
		}
		kir_block_add(k, &body, kir_s_if(k, CMP(k, KIR_EQ, axis, I(k, v->axis)), vb.first, NULL));
	}
	return lk_end(&l, body.first) ? LOWER_OK : LOWER_FAILED;
}

/* ---- LinearAttention -----------------------------------------------------------
 * for (b, h) parallel:                      S = past_state[b, h] or 0   (f64 scratch)
 *   for t:  gated:  S[d, :] *= exp(decay[b, t, h(, d)])
 *           delta:  u = beta * (v_t - S^T k_t)     else u = v_t       (u: f64 scratch)
 *           write:  S[d, :] += k_t[d] * u
 *           read:   o[b, t, hq] = scale * q_t S    for the query heads of group h
 *   present_state[b, h] = S
 * Sums over d run in increasing d, as the interpreter's, but as vector loops
 * over the d_v columns accumulating into scratch, so rows stay contiguous. */
static lower_result lower_linear_attention(lower_cx *cx, const tbc_op *op) {
	const tbc_value *Q = op->inputs[0], *K = op->inputs[1], *Vv = op->inputs[2];
	const tbc_value *PS = in_opt(op, 3), *G = in_opt(op, 4), *BT = in_opt(op, 5);
	if (!want(op, 0) && !want(op, 1)) return LOWER_OK;
	const char *rule = tbc_attr_string(op, "update_rule", "gated_delta");
	bool gating = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta");
	bool delta = !strcmp(rule, "delta") || !strcmp(rule, "gated_delta");
	if (!gating && !delta && strcmp(rule, "linear")) return refuse(cx, op, "with this update_rule");
	if (gating != (G != NULL) || delta != (BT != NULL)) return refuse(cx, op, "with decay / beta not matching update_rule");
	int64_t Hq = tbc_attr_int(op, "q_num_heads", 0), Hkv = tbc_attr_int(op, "kv_num_heads", 0);
	if (Hq <= 0 || Hkv <= 0 || Hq % Hkv) return refuse(cx, op, "with these head counts");
	const tbc_type *qt = &Q->type, *kt = &K->type, *vt = &Vv->type;
	tbc_dtype dt = qt->dtype;
	if (!tbc_dtype_is_float(dt) || tbc_dtype_bits(dt) < 16 || !tbc_dtype_supported(dt) || qt->rank != 3 ||
	    kt->rank != 3 || vt->rank != 3)
		return refuse(cx, op, "on these inputs");
	if (!static_dim(qt->dims[2]) || !static_dim(kt->dims[2]) || !static_dim(vt->dims[2]))
		return refuse(cx, op, "with symbolic hidden sizes");
	if (qt->dims[2].size % Hq || vt->dims[2].size % Hkv) return refuse(cx, op, "with hidden sizes not divisible by the heads");
	int64_t dk = qt->dims[2].size / Hq, dv = vt->dims[2].size / Hkv, group = Hq / Hkv;
	tbc_dim Bd = qt->dims[0], Td = qt->dims[1];
	bool shapes = kt->dims[2].size == Hkv * dk;
	for (int i = 0; i < 2; i++) shapes &= tbc_dim_eq(kt->dims[i], qt->dims[i]) && tbc_dim_eq(vt->dims[i], qt->dims[i]);
	if (PS) {
		const tbc_type *p = &PS->type;
		shapes &= p->rank == 4 && tbc_dim_eq(p->dims[0], Bd) && tbc_dim_eq(p->dims[1], (tbc_dim){Hkv, NULL}) &&
			  tbc_dim_eq(p->dims[2], (tbc_dim){dk, NULL}) && tbc_dim_eq(p->dims[3], (tbc_dim){dv, NULL});
	}
	bool decay_per_head = false;
	if (G) {
		const tbc_type *g = &G->type;
		shapes &= g->rank == 3 && tbc_dim_eq(g->dims[0], Bd) && tbc_dim_eq(g->dims[1], Td) && static_dim(g->dims[2]) &&
			  (g->dims[2].size == Hkv || g->dims[2].size == Hkv * dk);
		decay_per_head = shapes && g->dims[2].size == Hkv;
	}
	int64_t beta_w = 0;
	if (BT) {
		const tbc_type *bt = &BT->type;
		shapes &= bt->rank == 3 && tbc_dim_eq(bt->dims[0], Bd) && tbc_dim_eq(bt->dims[1], Td) && static_dim(bt->dims[2]) &&
			  (bt->dims[2].size == Hkv || bt->dims[2].size == 1);
		if (shapes) beta_w = bt->dims[2].size;
	}
	if (!shapes) return refuse(cx, op, "with inputs of these shapes");
	for (int i = 3; i < 6; i++) {
		const tbc_value *x = in_opt(op, i);
		if (x && (!tbc_dtype_is_float(x->type.dtype) || tbc_dtype_bits(x->type.dtype) < 16 || !tbc_dtype_supported(x->type.dtype)))
			return refuse(cx, op, "with these input dtypes");
	}
	double scale = tbc_attr_float(op, "scale", 0);
	if (scale == 0) scale = 1.0 / sqrt((double)dk);

	int ob = -1, sb = -1;
	if (want(op, 0) && (ob = lower_result_buf(cx, op->outputs[0])) < 0) return LOWER_FAILED;
	if (want(op, 1) && (sb = lower_result_buf(cx, op->outputs[1])) < 0) return LOWER_FAILED;
	tbc_type st = {.dtype = F64, .rank = 4}, ut = {.dtype = F64, .rank = 3};
	st.dims[0] = ut.dims[0] = Bd;
	st.dims[1] = ut.dims[1] = (tbc_dim){Hkv, NULL};
	st.dims[2] = (tbc_dim){dk, NULL};
	st.dims[3] = ut.dims[2] = (tbc_dim){dv, NULL};
	int s_pb = lower_temp_buf(cx, &st, "la_state"), u_pb = lower_temp_buf(cx, &ut, "la_u");
	if (s_pb < 0 || u_pb < 0) return refuse(cx, op, "with this batch dim");

	lk l;
	if (!lk_begin(&l, cx, "linear_attention")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *qb = lk_value(&l, Q), *kb = lk_value(&l, K), *vb = lk_value(&l, Vv);
	kir_buffer *pb = PS ? lk_value(&l, PS) : NULL, *gb = G ? lk_value(&l, G) : NULL, *bb = BT ? lk_value(&l, BT) : NULL;
	kir_buffer *S = lk_buf(&l, s_pb), *U = lk_buf(&l, u_pb);
	kir_buffer *yo = ob >= 0 ? lk_buf(&l, ob) : NULL, *ys = sb >= 0 ? lk_buf(&l, sb) : NULL;
	if (!qb || !kb || !vb || (PS && !pb) || (G && !gb) || (BT && !bb) || !S || !U || (ob >= 0 && !yo) || (sb >= 0 && !ys))
		return LOWER_FAILED;
	kir_expr *B = lk_dim(&l, Bd), *T = lk_dim(&l, Td);
	kir_expr *DK = I(k, dk), *DV = I(k, dv), *HKV = I(k, Hkv);

	kir_var *bh = kir_var_new(k, "bh", KIR_INDEX);
	kir_block par = {0};
	kir_expr *bi = let(k, &par, "b", BIN(k, KIR_FLOORDIV, V(k, bh), HKV));
	kir_expr *h = let(k, &par, "h", BIN(k, KIR_FLOORMOD, V(k, bh), HKV));
	kir_expr *sbase = let(k, &par, "sbase", MUL(k, V(k, bh), I(k, dk * dv)));
	kir_expr *ubase = let(k, &par, "ubase", MUL(k, V(k, bh), DV));
	/* S = past_state or 0. */
	{
		kir_var *e = kir_var_new(k, "e", KIR_INDEX);
		kir_block b = {0};
		kir_expr *at = ADD(k, sbase, V(k, e));
		kir_block_add(k, &b, kir_s_store(k, S, at, pb ? LOAD_F64(k, pb, at) : F(k, F64, 0)));
		kir_block_add(k, &par, FOR(k, e, I(k, 0), I(k, dk * dv), KIR_LOOP_VECTOR, &b));
	}
	kir_var *t = kir_var_new(k, "t", KIR_INDEX);
	kir_block tb = {0};
	kir_expr *row = let(k, &tb, "bt", ADD(k, MUL(k, bi, T), V(k, t)));
	kir_expr *kx = let(k, &tb, "kx", ADD(k, MUL(k, row, I(k, Hkv * dk)), MUL(k, h, DK)));
	kir_expr *vx = let(k, &tb, "vx", ADD(k, MUL(k, row, I(k, Hkv * dv)), MUL(k, h, DV)));
	if (gating) {
		kir_var *dd = kir_var_new(k, "d", KIR_INDEX), *mm = kir_var_new(k, "mm", KIR_INDEX);
		kir_block db = {0}, mb = {0};
		kir_expr *gi = decay_per_head ? ADD(k, MUL(k, row, HKV), h) : ADD(k, kx, V(k, dd));
		kir_expr *e = let(k, &db, "g", kir_e_unary(k, KIR_EXP, LOAD_F64(k, gb, gi)));
		kir_expr *at = ADD(k, ADD(k, sbase, MUL(k, V(k, dd), DV)), V(k, mm));
		kir_block_add(k, &mb, kir_s_store(k, S, at, BIN(k, KIR_MUL, kir_e_load(k, S, at), e)));
		kir_block_add(k, &db, FOR(k, mm, I(k, 0), DV, KIR_LOOP_VECTOR, &mb));
		kir_block_add(k, &tb, FOR(k, dd, I(k, 0), DK, KIR_LOOP_SEQUENTIAL, &db));
	}
	/* u = v_t, or beta * (v_t - S^T k_t). */
	{
		kir_var *mm = kir_var_new(k, "mm", KIR_INDEX);
		kir_block mb = {0};
		kir_expr *ua = ADD(k, ubase, V(k, mm));
		kir_block_add(k, &mb, kir_s_store(k, U, ua, delta ? F(k, F64, 0) : LOAD_F64(k, vb, ADD(k, vx, V(k, mm)))));
		kir_block_add(k, &tb, FOR(k, mm, I(k, 0), DV, KIR_LOOP_VECTOR, &mb));
	}
	if (delta) {
		kir_var *dd = kir_var_new(k, "d", KIR_INDEX), *mm = kir_var_new(k, "mm", KIR_INDEX);
		kir_block db = {0}, mb = {0};
		kir_expr *kd = let(k, &db, "kd", LOAD_F64(k, kb, ADD(k, kx, V(k, dd))));
		kir_expr *ua = ADD(k, ubase, V(k, mm));
		kir_expr *sv = kir_e_load(k, S, ADD(k, ADD(k, sbase, MUL(k, V(k, dd), DV)), V(k, mm)));
		kir_block_add(k, &mb, kir_s_store(k, U, ua, BIN(k, KIR_ADD, kir_e_load(k, U, ua), BIN(k, KIR_MUL, sv, kd))));
		kir_block_add(k, &db, FOR(k, mm, I(k, 0), DV, KIR_LOOP_VECTOR, &mb));
		kir_block_add(k, &tb, FOR(k, dd, I(k, 0), DK, KIR_LOOP_SEQUENTIAL, &db));
		kir_expr *bidx = ADD(k, MUL(k, row, I(k, beta_w)), beta_w == 1 ? I(k, 0) : h);
		kir_expr *beta = let(k, &tb, "beta", LOAD_F64(k, bb, bidx));
		kir_var *m2 = kir_var_new(k, "mm", KIR_INDEX);
		kir_block m2b = {0};
		kir_expr *ua2 = ADD(k, ubase, V(k, m2));
		kir_expr *diff = BIN(k, KIR_SUB, LOAD_F64(k, vb, ADD(k, vx, V(k, m2))), kir_e_load(k, U, ua2));
		kir_block_add(k, &m2b, kir_s_store(k, U, ua2, BIN(k, KIR_MUL, beta, diff)));
		kir_block_add(k, &tb, FOR(k, m2, I(k, 0), DV, KIR_LOOP_VECTOR, &m2b));
	}
	/* S += k_t (x) u. */
	{
		kir_var *dd = kir_var_new(k, "d", KIR_INDEX), *mm = kir_var_new(k, "mm", KIR_INDEX);
		kir_block db = {0}, mb = {0};
		kir_expr *kd = let(k, &db, "kd", LOAD_F64(k, kb, ADD(k, kx, V(k, dd))));
		kir_expr *at = ADD(k, ADD(k, sbase, MUL(k, V(k, dd), DV)), V(k, mm));
		kir_expr *upd = BIN(k, KIR_MUL, kd, kir_e_load(k, U, ADD(k, ubase, V(k, mm))));
		kir_block_add(k, &mb, kir_s_store(k, S, at, BIN(k, KIR_ADD, kir_e_load(k, S, at), upd)));
		kir_block_add(k, &db, FOR(k, mm, I(k, 0), DV, KIR_LOOP_VECTOR, &mb));
		kir_block_add(k, &tb, FOR(k, dd, I(k, 0), DK, KIR_LOOP_SEQUENTIAL, &db));
	}
	/* o[b, t, hq] = scale * q_t S for the query heads reading kv head h; u is
	 * free again and accumulates. */
	if (yo) {
		kir_var *g = kir_var_new(k, "g", KIR_INDEX);
		kir_block gbk = {0};
		kir_expr *hq = let(k, &gbk, "hq", ADD(k, MUL(k, h, I(k, group)), V(k, g)));
		kir_expr *qx = let(k, &gbk, "qx", ADD(k, MUL(k, row, I(k, Hq * dk)), MUL(k, hq, DK)));
		kir_expr *ox = let(k, &gbk, "ox", ADD(k, MUL(k, row, I(k, Hq * dv)), MUL(k, hq, DV)));
		kir_var *m0 = kir_var_new(k, "mm", KIR_INDEX);
		kir_block m0b = {0};
		kir_block_add(k, &m0b, kir_s_store(k, U, ADD(k, ubase, V(k, m0)), F(k, F64, 0)));
		kir_block_add(k, &gbk, FOR(k, m0, I(k, 0), DV, KIR_LOOP_VECTOR, &m0b));
		kir_var *dd = kir_var_new(k, "d", KIR_INDEX), *mm = kir_var_new(k, "mm", KIR_INDEX);
		kir_block db = {0}, mb = {0};
		kir_expr *qd = let(k, &db, "qd", LOAD_F64(k, qb, ADD(k, qx, V(k, dd))));
		kir_expr *ua = ADD(k, ubase, V(k, mm));
		kir_expr *sv = kir_e_load(k, S, ADD(k, ADD(k, sbase, MUL(k, V(k, dd), DV)), V(k, mm)));
		kir_block_add(k, &mb, kir_s_store(k, U, ua, BIN(k, KIR_ADD, kir_e_load(k, U, ua), BIN(k, KIR_MUL, qd, sv))));
		kir_block_add(k, &db, FOR(k, mm, I(k, 0), DV, KIR_LOOP_VECTOR, &mb));
		kir_block_add(k, &gbk, FOR(k, dd, I(k, 0), DK, KIR_LOOP_SEQUENTIAL, &db));
		kir_var *m3 = kir_var_new(k, "mm", KIR_INDEX);
		kir_block m3b = {0};
		kir_expr *val = BIN(k, KIR_MUL, F(k, F64, scale), kir_e_load(k, U, ADD(k, ubase, V(k, m3))));
		kir_block_add(k, &m3b, kir_s_store(k, yo, ADD(k, ox, V(k, m3)), kir_e_cast(k, yo->dtype, val)));
		kir_block_add(k, &gbk, FOR(k, m3, I(k, 0), DV, KIR_LOOP_VECTOR, &m3b));
		kir_block_add(k, &tb, FOR(k, g, I(k, 0), I(k, group), KIR_LOOP_SEQUENTIAL, &gbk));
	}
	kir_block_add(k, &par, FOR(k, t, I(k, 0), T, KIR_LOOP_SEQUENTIAL, &tb));
	if (ys) {
		kir_var *e = kir_var_new(k, "e", KIR_INDEX);
		kir_block b = {0};
		kir_expr *at = ADD(k, sbase, V(k, e));
		kir_block_add(k, &b, kir_s_store(k, ys, at, kir_e_cast(k, ys->dtype, kir_e_load(k, S, at))));
		kir_block_add(k, &par, FOR(k, e, I(k, 0), I(k, dk * dv), KIR_LOOP_VECTOR, &b));
	}
	kir_stmt *body = FOR(k, bh, I(k, 0), MUL(k, B, HKV), KIR_LOOP_PARALLEL, &par);
	return lk_end(&l, body) ? LOWER_OK : LOWER_FAILED;
}

/* ---- TfIdfVectorizer -------------------------------------------------------------
 * The pool is constant: each distinct pool n-gram becomes a counting loop
 * with its tokens inlined, summed per output index, then weighted. */
typedef struct tfidf {
	int64_t min_n, max_n, max_skip, out_size;
	int n_counts, n_indexes, n_pool, n_weights;
	const int64_t *counts, *indexes, *pool;
	const double *weights;
	int mode; /* 1 TF, 2 IDF, 3 TFIDF */
} tfidf;

/* The interpreter's checks (seq_tfidf.c: tfidf_parse). */
static const char *tfidf_parse(const tbc_op *op, tfidf *c) {
	c->min_n = tbc_attr_int(op, "min_gram_length", 0);
	c->max_n = tbc_attr_int(op, "max_gram_length", 0);
	c->max_skip = tbc_attr_int(op, "max_skip_count", 0);
	const char *mode = tbc_attr_string(op, "mode", "");
	c->mode = !strcmp(mode, "TF") ? 1 : !strcmp(mode, "IDF") ? 2 : !strcmp(mode, "TFIDF") ? 3 : 0;
	if (!c->mode) return "with this mode";
	if (tbc_op_attr(op, "pool_strings")) return "with a string pool";
	c->n_counts = tbc_attr_ints(op, "ngram_counts", &c->counts);
	c->n_indexes = tbc_attr_ints(op, "ngram_indexes", &c->indexes);
	c->n_pool = tbc_attr_ints(op, "pool_int64s", &c->pool);
	c->n_weights = tbc_attr_floats(op, "weights", &c->weights);
	if (c->n_counts <= 0 || c->n_indexes <= 0 || c->n_pool < 0) return "without ngram_counts, ngram_indexes or pool_int64s";
	if (c->min_n < 1 || c->max_n < c->min_n || c->max_skip < 0) return "with these gram lengths";
	c->out_size = 0;
	for (int i = 0; i < c->n_indexes; i++) {
		if (c->indexes[i] < 0) return "with a negative ngram index";
		if (c->indexes[i] + 1 > c->out_size) c->out_size = c->indexes[i] + 1;
	}
	if (c->n_weights > 0 && c->n_weights < c->out_size) return "with too few weights";
	int64_t id = 0;
	for (int i = 0; i < c->n_counts; i++) {
		int64_t start = c->counts[i], end = i + 1 < c->n_counts ? c->counts[i + 1] : c->n_pool;
		if (start < 0 || end < start || end > c->n_pool || (end - start) % (i + 1)) return "with ngram_counts not splitting the pool";
		id += (end - start) / (i + 1);
	}
	if (id > c->n_indexes) return "with too few ngram_indexes";
	if (c->n_counts < c->max_n) c->max_n = c->n_counts;
	return NULL;
}

/* Adds to acc (i64) the matches in row (X at rbase, C tokens) of the gram of
 * length n at pool[g], over every skip distance the interpreter counts it at. */
static void tfidf_count(lk *l, kir_block *b, const tfidf *c, kir_buffer *xb, kir_expr *rbase, kir_expr *C, int64_t n,
			int64_t g, kir_var *acc) {
	kir_kernel *k = l->k;
	tbc_dtype xt = xb->dtype;
	for (int64_t i = 0; i < n; i++) /* a token beyond int32 never matches an int32 input */
		if (xt == TBC_DT_I32 && (c->pool[g + i] < INT32_MIN || c->pool[g + i] > INT32_MAX)) return;
	int64_t cs;
	if (kir_e_const_index(C, &cs) && cs < n) return; /* no room for the gram */
	int64_t skips = n == 1 ? 1 : c->max_skip + 1; /* unigrams do not depend on the skip */
	kir_var *s = kir_var_new(k, "skip", KIR_INDEX), *pos = kir_var_new(k, "pos", KIR_INDEX);
	kir_block sb = {0}, pb = {0};
	/* Positions whose last token is in the row; loads clamped for the bounds
	 * check (the clamp never binds). */
	kir_expr *span = MUL(k, V(k, s), I(k, n - 1));
	kir_expr *hi = BIN(k, KIR_MAX, BIN(k, KIR_SUB, C, span), I(k, 0));
	kir_expr *match = NULL;
	for (int64_t i = 0; i < n; i++) {
		kir_expr *at = ADD(k, V(k, pos), MUL(k, V(k, s), I(k, i)));
		if (i) at = BIN(k, KIR_MIN, at, BIN(k, KIR_SUB, C, I(k, 1)));
		kir_expr *eq = CMP(k, KIR_EQ, kir_e_load(k, xb, ADD(k, rbase, at)), kir_e_int(k, xt, c->pool[g + i]));
		match = match ? BIN(k, KIR_AND, match, eq) : eq;
	}
	kir_expr *one = kir_e_select(k, match, kir_e_int(k, TBC_DT_I64, 1), kir_e_int(k, TBC_DT_I64, 0));
	kir_block_add(k, &pb, kir_s_set(k, acc, BIN(k, KIR_ADD, V(k, acc), one)));
	kir_block_add(k, &sb, FOR(k, pos, I(k, 0), hi, KIR_LOOP_SEQUENTIAL, &pb));
	kir_block_add(k, b, FOR(k, s, I(k, 1), I(k, skips + 1), KIR_LOOP_SEQUENTIAL, &sb));
}

static lower_result lower_tfidf(lower_cx *cx, const tbc_op *op) {
	if (!want(op, 0)) return LOWER_OK;
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	tfidf c;
	const char *why = tfidf_parse(op, &c);
	if (why) return refuse(cx, op, why);
	const tbc_type *xt = &x->type;
	if ((xt->dtype != TBC_DT_I32 && xt->dtype != TBC_DT_I64) || xt->rank < 0 || xt->rank > 2)
		return refuse(cx, op, "on this input");
	if (y->type.dtype != TBC_DT_F32) return refuse(cx, op, "with this output type");
	/* Each distinct gram of a counted length, by output index (the
	 * interpreter's lookup finds the first of equal grams). */
	int64_t n_grams = 0;
	for (int i = 0; i < c.n_counts; i++)
		n_grams += ((i + 1 < c.n_counts ? c.counts[i + 1] : c.n_pool) - c.counts[i]) / (i + 1);
	int ob = lower_result_buf(cx, y);
	lk l;
	if (ob < 0 || !lk_begin(&l, cx, "tfidf")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *xb = lk_value(&l, x), *yb = lk_buf(&l, ob);
	if (!xb || !yb) return LOWER_FAILED;
	kir_expr *rows = xt->rank == 2 ? lk_dim(&l, xt->dims[0]) : I(k, 1);
	kir_expr *C = xt->rank == 0 ? I(k, 1) : lk_dim(&l, xt->dims[xt->rank - 1]);
	kir_expr *O = I(k, c.out_size);
	kir_var *r = kir_var_new(k, "r", KIR_INDEX);
	kir_block rb = {0};
	kir_expr *rbase = let(k, &rb, "rbase", MUL(k, V(k, r), C));
	kir_expr *ybase = let(k, &rb, "ybase", MUL(k, V(k, r), O));
	{
		kir_var *i = kir_var_new(k, "i", KIR_INDEX);
		kir_block ib = {0};
		kir_block_add(k, &ib, kir_s_store(k, yb, ADD(k, ybase, V(k, i)), kir_e_float(k, TBC_DT_F32, 0)));
		kir_block_add(k, &rb, FOR(k, i, I(k, 0), O, KIR_LOOP_VECTOR, &ib));
	}
	/* Output indexes in first-gram order; each gets one count local. */
	for (int64_t want_id = 0; want_id < n_grams; want_id++) {
		int64_t oi = c.indexes[want_id];
		bool first = true, any = false;
		for (int64_t id = 0; id < want_id && first; id++) first = c.indexes[id] != oi;
		if (!first) continue;
		kir_var *acc = kir_var_new(k, "count", TBC_DT_I64);
		kir_block_add(k, &rb, kir_s_set(k, acc, kir_e_int(k, TBC_DT_I64, 0)));
		int64_t id = 0;
		for (int64_t n = 1; n <= c.n_counts; n++) {
			int64_t start = c.counts[n - 1], end = n < c.n_counts ? c.counts[n] : c.n_pool;
			for (int64_t g = start; g + n <= end; g += n, id++) {
				if (c.indexes[id] != oi || n < c.min_n || n > c.max_n) continue;
				bool dup = false;
				for (int64_t e = start; e < g && !dup; e += n) dup = !memcmp(c.pool + e, c.pool + g, (size_t)n * sizeof *c.pool);
				if (dup) continue;
				tfidf_count(&l, &rb, &c, xb, rbase, C, n, g, acc);
				any = true;
			}
		}
		if (!any) continue;
		double w = c.n_weights > 0 ? c.weights[oi] : 1;
		kir_expr *cnt = kir_e_cast(k, F64, V(k, acc)), *v;
		if (c.mode == 1) v = cnt;
		else if (c.mode == 2) v = kir_e_select(k, CMP(k, KIR_GT, V(k, acc), kir_e_int(k, TBC_DT_I64, 0)), F(k, F64, w), F(k, F64, 0));
		else v = c.n_weights > 0 ? BIN(k, KIR_MUL, F(k, F64, w), cnt) : cnt;
		kir_block_add(k, &rb, kir_s_store(k, yb, ADD(k, ybase, I(k, oi)), kir_e_cast(k, TBC_DT_F32, v)));
	}
	kir_stmt *body = FOR(k, r, I(k, 0), rows, KIR_LOOP_PARALLEL, &rb);
	return lk_end(&l, body) ? LOWER_OK : LOWER_FAILED;
}

lower_result lower_family_signal(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_DFT: return lower_dft(cx, op);
	case TBC_OP_LinearAttention: return lower_linear_attention(cx, op);
	case TBC_OP_TfIdfVectorizer: return lower_tfidf(cx, op);
	default: return LOWER_NOT_MINE;
	}
}
