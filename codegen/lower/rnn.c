/* The recurrent ops RNN, GRU and LSTM lowered for the CPU (docs/lower-rnn.md).
 *
 * Three kernels per op, following the interpreter (ir/kernels/seq_rnn.c)
 * step by step, in double, with every sum in the interpreter's order (so the
 * results agree to the last bits the libm functions allow):
 *
 *   transpose: WT[d][i][g] = W[d][g][i], RT[d][i][g] = R[d][g][i]   (f64 scratch)
 *   input:     for (t, b) parallel, d:  XW[t][b][d][g] = Wb[g] + sum_i x_t[i] WT[i][g]
 *   recurrence:
 *     check every sequence_lens[b] in [0, seq_length] (else the run fails)
 *     for (d, b) parallel {
 *       state h (and c) <- initial_h (initial_c) or 0           f64 scratch
 *       for s = 0 .. len sequential {                            t = s, or len-1-s backward
 *         HR[g] = Rb[g] + sum_i h[i] RT[i][g]
 *         per hidden unit j: gates from XW[t] + HR, activations
 *         h (c) <- the new state; Y[t] <- h
 *       }
 *       Y[t] <- 0 for t in [len, seq_length); Y_h <- h; Y_c <- c
 *     }
 *
 * The sums over i run as `acc[g] += v[i] * T[i][g]` for all g at once: a
 * vector loop over contiguous g, each acc[g] summed in order of i as the
 * interpreter's dot products are, so no reassociation is needed.  Outputs
 * round to X's dtype on store. */
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/rnn_acts.h"

#define F64 TBC_DT_F64

static const int n_gates[3] = {1, 3, 4};

/* ---- The op's parameters -------------------------------------------------------*/
typedef struct rnn_spec {
	enum rnn_kind kind;
	int G, D, layout;
	bool reverse_only, lbr, input_forget, has_clip;
	double clip;
	act_fn acts[2][3];
	int64_t I, H;
	tbc_dim S, B;
	const tbc_value *x, *w, *r, *bias, *lens, *h0, *c0, *p;
	tbc_dtype dt;
} rnn_spec;

static const tbc_value *opt_in(const tbc_op *op, int i) { return i < op->n_inputs ? op->inputs[i] : NULL; }
static const tbc_value *opt_out(const tbc_op *op, int i) { return i < op->n_outputs ? op->outputs[i] : NULL; }

static bool static_dims(const tbc_type *t, int rank, int64_t d0, int64_t d1, int64_t d2) {
	int64_t want[3] = {d0, d1, d2};
	if (t->rank != rank) return false;
	for (int i = 0; i < rank; i++)
		if (t->dims[i].sym || t->dims[i].size != want[i]) return false;
	return true;
}

static lower_result refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "op %s %s has no lowering yet", tbc_ops[op->code].onnx_name, why);
	return LOWER_FAILED;
}

/* Fills s from op; NULL or why it does not lower. */
static const char *rnn_read(const tbc_op *op, enum rnn_kind kind, rnn_spec *s) {
	memset(s, 0, sizeof *s);
	s->kind = kind;
	s->G = n_gates[kind];
	const char *dir = tbc_attr_string(op, "direction", "forward");
	s->D = !strcmp(dir, "bidirectional") ? 2 : 1;
	s->reverse_only = !strcmp(dir, "reverse");
	if (strcmp(dir, "forward") && strcmp(dir, "reverse") && s->D != 2) return "with this direction";
	s->layout = (int)tbc_attr_int(op, "layout", 0);
	if (s->layout != 0 && s->layout != 1) return "with this layout";
	s->lbr = tbc_attr_int(op, "linear_before_reset", 0) != 0;
	s->input_forget = tbc_attr_int(op, "input_forget", 0) != 0;
	s->has_clip = tbc_op_attr(op, "clip") != NULL;
	s->clip = s->has_clip ? tbc_attr_float(op, "clip", 0) : 0;
	if (tbc_rnn_parse_acts(op, kind, s->D, s->acts)) return "with these activations";
	s->x = op->inputs[0], s->w = op->inputs[1], s->r = op->inputs[2];
	s->bias = opt_in(op, 3), s->lens = opt_in(op, 4), s->h0 = opt_in(op, 5);
	s->c0 = kind == RNN_LSTM ? opt_in(op, 6) : NULL;
	s->p = kind == RNN_LSTM ? opt_in(op, 7) : NULL;
	const tbc_type *xt = &s->x->type, *wt = &s->w->type, *rt = &s->r->type;
	s->dt = xt->dtype;
	if (!tbc_dtype_is_float(s->dt) || !tbc_dtype_supported(s->dt)) return "on this dtype";
	if (xt->rank != 3 || xt->dims[2].sym || wt->rank != 3 || rt->rank != 3 || rt->dims[2].sym)
		return "with symbolic or unknown input or hidden sizes";
	s->S = xt->dims[s->layout ? 1 : 0];
	s->B = xt->dims[s->layout ? 0 : 1];
	s->I = xt->dims[2].size;
	s->H = rt->dims[2].size;
	int64_t GH = s->G * s->H;
	if (!static_dims(wt, 3, s->D, GH, s->I) || !static_dims(rt, 3, s->D, GH, s->H))
		return "with W or R of symbolic or mismatched shape";
	if (s->bias && !static_dims(&s->bias->type, 2, s->D, 2 * GH, 0)) return "with B of this shape";
	if (s->p && !static_dims(&s->p->type, 2, s->D, 3 * s->H, 0)) return "with P of this shape";
	if (s->lens) {
		const tbc_type *lt = &s->lens->type;
		if (lt->rank != 1 || !tbc_dim_eq(lt->dims[0], s->B)) return "with sequence_lens of this shape";
		if (tbc_dtype_is_float(lt->dtype) || lt->dtype == TBC_DT_BOOL || !tbc_dtype_supported(lt->dtype))
			return "with sequence_lens of this dtype";
	}
	tbc_dim d = {s->D, NULL}, h = {s->H, NULL};
	tbc_dim want[3] = {s->layout ? s->B : d, s->layout ? d : s->B, h};
	const tbc_value *states[2] = {s->h0, s->c0};
	for (int i = 0; i < 2; i++) {
		if (!states[i]) continue;
		const tbc_type *t = &states[i]->type;
		if (t->rank != 3) return "with initial_h / initial_c of this shape";
		for (int k = 0; k < 3; k++)
			if (!tbc_dim_eq(t->dims[k], want[k])) return "with initial_h / initial_c of this shape";
	}
	const tbc_value *rest[4] = {s->w, s->r, s->bias, s->p};
	for (int i = 0; i < 4; i++)
		if (rest[i] && (!tbc_dtype_is_float(rest[i]->type.dtype) || !tbc_dtype_supported(rest[i]->type.dtype)))
			return "with weights of this dtype";
	for (int i = 0; i < 2; i++)
		if (states[i] && (!tbc_dtype_is_float(states[i]->type.dtype) || !tbc_dtype_supported(states[i]->type.dtype)))
			return "with initial states of this dtype";
	return NULL;
}

/* ---- Kernel building -------------------------------------------------------------*/
typedef struct gen {
	lk l;
	kir_kernel *k;
	const rnn_spec *s;
	int wt, rt, xw, state; /* program buffers of the scratch */
	kir_expr *S, *B;       /* sizes */
	/* The recurrence kernel's buffers. */
	kir_buffer *rtb, *xwb, *bias, *p, *h0, *c0, *lens, *y, *yh, *yc, *st;
	kir_expr *b;           /* the batch of the parallel iteration */
	int dc;                /* the direction being built */
	kir_expr *xwo;         /* XW[t][b][d] at the current step */
	/* Offsets into the state scratch: h, c, HR and the step's gate values. */
	kir_expr *hb, *cb, *rb, *tb;
} gen;

static kir_expr *ST(gen *g, kir_expr *i) { return kir_e_load(g->k, g->st, i); } /* the state scratch is f64 */
/* t when a c b, else f. */
static kir_expr *WHEN(gen *g, kir_cmp c, kir_expr *a, kir_expr *b, kir_expr *t, kir_expr *f) {
	return kir_e_select(g->k, kir_e_cmp(g->k, c, a, b), t, f);
}

/* A loop under construction: loop_begin returns its variable, the caller
 * fills lp.body, loop_end adds the loop to outer. */
typedef struct loop {
	kir_var *v;
	kir_expr *lo, *hi;
	kir_block body;
} loop;

static kir_expr *loop_begin(gen *g, loop *lp, const char *name, kir_expr *lo, kir_expr *hi) {
	lp->v = kir_var_new(g->k, name, KIR_INDEX);
	lp->lo = lo, lp->hi = hi;
	lp->body = (kir_block){0};
	return V(g->k, lp->v);
}
static void loop_end(gen *g, kir_block *outer, loop *lp, kir_loop_kind kind) {
	kir_block_add(g->k, outer, kir_s_for(g->k, lp->v, lp->lo, lp->hi, 1, kind, lp->body.first));
}

static void store(gen *g, kir_block *blk, kir_buffer *b, kir_expr *i, kir_expr *v) {
	kir_block_add(g->k, blk, kir_s_store(g->k, b, i, v));
}

/* acc[a0 + g] = init(g), then acc[a0 + g] += src(i) * T[t0 + i * GH + g] for
 * i < n in order, for g in [0, count): the interpreter's dot products of
 * `count` rows, vectorized over the rows.  src[src0 + i] is the vector (cast
 * to f64); bias[b0 + g] the initial value (0 without B).  Four steps of i
 * per pass over acc (the sum of each acc[g] still in order of i), so acc is
 * loaded and stored once per four multiply-adds. */
#define AXPY_UNROLL 4
static void axpy_rows(gen *g, kir_block *blk, kir_buffer *acc, kir_expr *a0, kir_buffer *bias, kir_expr *b0,
		      kir_buffer *src, kir_expr *src0, int64_t n, kir_buffer *T, kir_expr *t0, int64_t count) {
	int64_t GH = g->s->G * g->s->H, n4 = n / AXPY_UNROLL * AXPY_UNROLL;
	loop lg;
	kir_expr *gv = loop_begin(g, &lg, "g", I(g->k, 0), I(g->k, count));
	store(g, &lg.body, acc, ADD(g->k, a0, gv), bias ? LOAD_F64(g->k, bias, ADD(g->k, b0, gv)) : F(g->k, F64, 0));
	loop_end(g, blk, &lg, KIR_LOOP_VECTOR);
	for (int part = 0; part < 2; part++) {
		int64_t lo = part ? n4 : 0, hi = part ? n : n4, m = part ? 1 : AXPY_UNROLL;
		if (hi <= lo) continue;
		/* i = lo + q * m + u (a loop over q keeps the verifier's ranges exact) */
		loop li;
		kir_expr *q = loop_begin(g, &li, "i", I(g->k, 0), I(g->k, (hi - lo) / m));
		kir_expr *xi[AXPY_UNROLL], *trow[AXPY_UNROLL];
		for (int u = 0; u < m; u++) {
			kir_expr *i = ADD(g->k, ADD(g->k, I(g->k, lo), MUL(g->k, q, I(g->k, m))), I(g->k, u));
			xi[u] = LET(g->k, &li.body, "v", LOAD_F64(g->k, src, ADD(g->k, src0, i)));
			trow[u] = LET(g->k, &li.body, "tr", ADD(g->k, t0, MUL(g->k, i, I(g->k, GH))));
		}
		gv = loop_begin(g, &lg, "g", I(g->k, 0), I(g->k, count));
		kir_expr *ai = ADD(g->k, a0, gv), *sum = kir_e_load(g->k, acc, ai);
		for (int u = 0; u < m; u++) sum = BIN(g->k, KIR_ADD, sum, BIN(g->k, KIR_MUL, xi[u], kir_e_load(g->k, T, ADD(g->k, trow[u], gv))));
		store(g, &lg.body, acc, ai, sum);
		loop_end(g, &li.body, &lg, KIR_LOOP_VECTOR);
		loop_end(g, blk, &li, KIR_LOOP_SEQUENTIAL);
	}
}

/* ---- Kernel 1: W and R transposed into f64 scratch --------------------------------
 * for (d, block of 16 rows g) parallel, i, g vector: T[d][i][g] = M[d][g][i]:
 * the 16 rows read stay in cache while i walks along them. */
#define TRANSPOSE_BLOCK 16
static bool transpose_kernel(gen *g, const tbc_value *m, int64_t cols, int dst) {
	const rnn_spec *s = g->s;
	int64_t GH = s->G * s->H, nb = (GH + TRANSPOSE_BLOCK - 1) / TRANSPOSE_BLOCK;
	if (!lk_begin(&g->l, g->l.cx, "rnn_transpose")) return false;
	kir_kernel *k = g->k = g->l.k;
	kir_buffer *src = lk_value(&g->l, m), *t = lk_buf(&g->l, dst);
	if (!src || !t) return false;
	loop lb, li, lg;
	kir_expr *db = loop_begin(g, &lb, "db", I(g->k, 0), I(g->k, s->D * nb));
	kir_expr *d = LET(g->k, &lb.body, "d", kir_e_binary(k, KIR_FLOORDIV, db, I(g->k, nb)));
	kir_expr *g0 = LET(g->k, &lb.body, "g0", MUL(g->k, kir_e_binary(k, KIR_FLOORMOD, db, I(g->k, nb)), I(g->k, TRANSPOSE_BLOCK)));
	kir_expr *g1 = LET(g->k, &lb.body, "g1", kir_e_binary(k, KIR_MIN, ADD(g->k, g0, I(g->k, TRANSPOSE_BLOCK)), I(g->k, GH)));
	kir_expr *i = loop_begin(g, &li, "i", I(g->k, 0), I(g->k, cols));
	kir_expr *gv = loop_begin(g, &lg, "g", g0, g1);
	store(g, &lg.body, t, ADD(g->k, MUL(g->k, ADD(g->k, MUL(g->k, d, I(g->k, cols)), i), I(g->k, GH)), gv),
	      LOAD_F64(g->k, src, ADD(g->k, MUL(g->k, ADD(g->k, MUL(g->k, d, I(g->k, GH)), gv), I(g->k, cols)), i)));
	loop_end(g, &li.body, &lg, KIR_LOOP_VECTOR);
	loop_end(g, &lb.body, &li, KIR_LOOP_SEQUENTIAL);
	kir_block all = {0};
	loop_end(g, &all, &lb, KIR_LOOP_PARALLEL);
	return lk_end(&g->l, all.first);
}

/* ---- Kernel 2: XW = X W^T + Wb for every step ------------------------------------*/
static bool input_kernel(gen *g) {
	const rnn_spec *s = g->s;
	int64_t GH = s->G * s->H;
	if (!lk_begin(&g->l, g->l.cx, "rnn_input")) return false;
	kir_kernel *k = g->k = g->l.k;
	kir_buffer *x = lk_value(&g->l, s->x), *wt = lk_buf(&g->l, g->wt), *xw = lk_buf(&g->l, g->xw);
	kir_buffer *bias = s->bias ? lk_value(&g->l, s->bias) : NULL;
	if (!x || !wt || !xw || (s->bias && !bias)) return false;
	kir_expr *S = lk_dim(&g->l, s->S), *B = lk_dim(&g->l, s->B);
	loop lp;
	kir_expr *tb = loop_begin(g, &lp, "tb", I(g->k, 0), MUL(g->k, S, B));
	kir_expr *xr = tb; /* X's row of (t, b): tb itself in layout 0 */
	if (s->layout) {
		kir_expr *t = kir_e_binary(k, KIR_FLOORDIV, tb, B), *b = kir_e_binary(k, KIR_FLOORMOD, tb, B);
		xr = ADD(g->k, MUL(g->k, b, S), t);
	}
	kir_expr *x0 = LET(g->k, &lp.body, "x0", MUL(g->k, xr, I(g->k, s->I)));
	for (int d = 0; d < s->D; d++) {
		kir_expr *a0 = LET(g->k, &lp.body, "a0", MUL(g->k, ADD(g->k, MUL(g->k, tb, I(g->k, s->D)), I(g->k, d)), I(g->k, GH)));
		axpy_rows(g, &lp.body, xw, a0, bias, I(g->k, (int64_t)d * 2 * GH), x, x0, s->I, wt, I(g->k, (int64_t)d * s->I * GH), GH);
	}
	kir_block all = {0};
	loop_end(g, &all, &lp, KIR_LOOP_PARALLEL);
	return lk_end(&g->l, all.first);
}

/* ---- Kernel 3: the recurrence -------------------------------------------------------*/
/* HR rows [row0, row0 + count) from the vector at scratch offset vb. */
static void hr_rows(gen *g, kir_block *blk, kir_expr *vb, int64_t row0, int64_t count) {
	const rnn_spec *s = g->s;
	int64_t GH = s->G * s->H, d = g->dc;
	axpy_rows(g, blk, g->st, ADD(g->k, g->rb, I(g->k, row0)), g->bias, I(g->k, d * 2 * GH + GH + row0), g->st, vb, s->H,
		  g->rtb, I(g->k, d * s->H * GH + row0), count);
}

/* XW + HR of gate `gate`, unit j: the interpreter's (x W + Wb) + (h R + Rb). */
static kir_expr *gate_in(gen *g, int gate, kir_expr *j) {
	kir_expr *row = ADD(g->k, I(g->k, gate * g->s->H), j);
	return BIN(g->k, KIR_ADD, kir_e_load(g->k, g->xwb, ADD(g->k, g->xwo, row)), ST(g, ADD(g->k, g->rb, row)));
}

/* f(v) in f64, v clipped first when `clip` (fmin(c, fmax(-c, v)): NaN gives -c). */
static kir_expr *act(gen *g, kir_block *blk, const act_fn *f, kir_expr *v, bool clip) {
	kir_kernel *k = g->k;
	v = LET(g->k, blk, "a", v);
	if (clip && g->s->has_clip) {
		double c = g->s->clip;
		v = LET(g->k, blk, "cl", WHEN(g, KIR_GE, v, F(g->k, F64, -c), v, F(g->k, F64, -c)));
		v = LET(g->k, blk, "cl", WHEN(g, KIR_LE, v, F(g->k, F64, c), v, F(g->k, F64, c)));
	}
	kir_expr *zero = F(g->k, F64, 0), *one = F(g->k, F64, 1);
	switch (f->kind) {
	case ACT_RELU: return WHEN(g, KIR_GT, v, zero, v, zero);
	case ACT_TANH: return kir_e_unary(k, KIR_TANH, v);
	case ACT_SIGMOID: return BIN(g->k, KIR_DIV, one, BIN(g->k, KIR_ADD, one, kir_e_unary(k, KIR_EXP, kir_e_unary(k, KIR_NEG, v))));
	case ACT_AFFINE: return BIN(g->k, KIR_ADD, BIN(g->k, KIR_MUL, F(g->k, F64, f->alpha), v), F(g->k, F64, f->beta));
	case ACT_LEAKYRELU: return WHEN(g, KIR_GE, v, zero, v, BIN(g->k, KIR_MUL, F(g->k, F64, f->alpha), v));
	case ACT_THRESHOLDEDRELU: return WHEN(g, KIR_GT, v, F(g->k, F64, f->alpha), v, zero);
	case ACT_SCALEDTANH:
		return BIN(g->k, KIR_MUL, F(g->k, F64, f->alpha), kir_e_unary(k, KIR_TANH, BIN(g->k, KIR_MUL, F(g->k, F64, f->beta), v)));
	case ACT_HARDSIGMOID: {
		/* fmax(0, fmin(1, alpha * v + beta)): NaN gives 1. */
		kir_expr *u = LET(g->k, blk, "hs", BIN(g->k, KIR_ADD, BIN(g->k, KIR_MUL, F(g->k, F64, f->alpha), v), F(g->k, F64, f->beta)));
		u = LET(g->k, blk, "hs", WHEN(g, KIR_LE, u, one, u, one));
		return WHEN(g, KIR_GE, u, zero, u, zero);
	}
	case ACT_ELU:
		return WHEN(g, KIR_GE, v, zero, v, BIN(g->k, KIR_MUL, F(g->k, F64, f->alpha), BIN(g->k, KIR_SUB, kir_e_unary(k, KIR_EXP, v), one)));
	case ACT_SOFTSIGN: return BIN(g->k, KIR_DIV, v, BIN(g->k, KIR_ADD, one, kir_e_unary(k, KIR_ABS, v)));
	case ACT_SOFTPLUS: /* log1p(exp(-|v|)) + fmax(v, 0) */
		return BIN(g->k, KIR_ADD, kir_e_unary(k, KIR_LOG1P, kir_e_unary(k, KIR_EXP, kir_e_unary(k, KIR_NEG, kir_e_unary(k, KIR_ABS, v)))),
			  WHEN(g, KIR_GE, v, zero, v, zero));
	}
	return v;
}



/* One time step of direction g->dc: the new state in the scratch's h (and
 * c), the step's gate values at tb.  Each loop over the hidden units j reads
 * only the old state. */
static void step(gen *g, kir_block *blk) {
	const rnn_spec *s = g->s;
	const act_fn *acts = s->acts[g->dc];
	int64_t H = s->H;
	kir_expr *Hx = I(g->k, H);
	loop lp;
	kir_expr *j;
	if (s->kind == RNN_PLAIN) {
		/* tmp[j] = f(x W + h R) */
		hr_rows(g, blk, g->hb, 0, H);
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		store(g, &lp.body, g->st, ADD(g->k, g->tb, j), act(g, &lp.body, &acts[0], gate_in(g, 0, j), true));
		loop_end(g, blk, &lp, KIR_LOOP_SEQUENTIAL);
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		store(g, &lp.body, g->st, ADD(g->k, g->hb, j), ST(g, ADD(g->k, g->tb, j)));
		loop_end(g, blk, &lp, KIR_LOOP_VECTOR);
		return;
	}
	if (s->kind == RNN_GRU) {
		/* Scratch gates: z at tb, r at tb + H, hh at tb + 2H, r*h at tb + 3H. */
		kir_expr *zb = g->tb, *rgb = ADD(g->k, g->tb, Hx), *hhb = ADD(g->k, g->tb, I(g->k, 2 * H)), *rhb = ADD(g->k, g->tb, I(g->k, 3 * H));
		hr_rows(g, blk, g->hb, 0, s->lbr ? 3 * H : 2 * H);
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		store(g, &lp.body, g->st, ADD(g->k, zb, j), act(g, &lp.body, &acts[0], gate_in(g, 0, j), true));
		store(g, &lp.body, g->st, ADD(g->k, rgb, j), act(g, &lp.body, &acts[0], gate_in(g, 1, j), true));
		loop_end(g, blk, &lp, KIR_LOOP_SEQUENTIAL);
		kir_expr *row;
		if (!s->lbr) { /* the candidate's h R uses r * h */
			j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
			store(g, &lp.body, g->st, ADD(g->k, rhb, j), BIN(g->k, KIR_MUL, ST(g, ADD(g->k, rgb, j)), ST(g, ADD(g->k, g->hb, j))));
			loop_end(g, blk, &lp, KIR_LOOP_VECTOR);
			hr_rows(g, blk, rhb, 2 * H, H);
		}
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		row = ADD(g->k, I(g->k, 2 * H), j);
		kir_expr *xwv = kir_e_load(g->k, g->xwb, ADD(g->k, g->xwo, row)), *hrv = ST(g, ADD(g->k, g->rb, row));
		kir_expr *v = BIN(g->k, KIR_ADD, xwv, s->lbr ? BIN(g->k, KIR_MUL, ST(g, ADD(g->k, rgb, j)), hrv) : hrv);
		store(g, &lp.body, g->st, ADD(g->k, hhb, j), act(g, &lp.body, &acts[1], v, true));
		loop_end(g, blk, &lp, KIR_LOOP_SEQUENTIAL);
		/* h = (1 - z) * hh + z * h */
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		kir_expr *z = LET(g->k, &lp.body, "z", ST(g, ADD(g->k, zb, j)));
		kir_expr *hn = BIN(g->k, KIR_ADD, BIN(g->k, KIR_MUL, BIN(g->k, KIR_SUB, F(g->k, F64, 1), z), ST(g, ADD(g->k, hhb, j))),
				  BIN(g->k, KIR_MUL, z, ST(g, ADD(g->k, g->hb, j))));
		store(g, &lp.body, g->st, ADD(g->k, g->hb, j), hn);
		loop_end(g, blk, &lp, KIR_LOOP_VECTOR);
		return;
	}
	/* LSTM: gates i, o, f, c; peepholes i, o, f.  New c at tb, new h at tb + H. */
	kir_expr *cnb = g->tb, *hnb = ADD(g->k, g->tb, Hx);
	kir_expr *pb = I(g->k, (int64_t)g->dc * 3 * H);
	hr_rows(g, blk, g->hb, 0, 4 * H);
	j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
	kir_block *b = &lp.body;
	kir_expr *c = LET(g->k, b, "c", ST(g, ADD(g->k, g->cb, j)));
	kir_expr *gi = gate_in(g, 0, j);
	if (g->p) gi = BIN(g->k, KIR_ADD, gi, BIN(g->k, KIR_MUL, LOAD_F64(g->k, g->p, ADD(g->k, pb, j)), c));
	kir_expr *gf = NULL;
	if (!s->input_forget) {
		gf = gate_in(g, 2, j);
		if (g->p) gf = BIN(g->k, KIR_ADD, gf, BIN(g->k, KIR_MUL, LOAD_F64(g->k, g->p, ADD(g->k, ADD(g->k, pb, I(g->k, 2 * H)), j)), c));
	}
	kir_expr *iv = LET(g->k, b, "ig", act(g, b, &acts[0], gi, true));
	kir_expr *fv = LET(g->k, b, "fg", s->input_forget ? BIN(g->k, KIR_SUB, F(g->k, F64, 1), iv) : act(g, b, &acts[0], gf, true));
	kir_expr *cn = LET(g->k, b, "cn", BIN(g->k, KIR_ADD, BIN(g->k, KIR_MUL, fv, c), BIN(g->k, KIR_MUL, iv, act(g, b, &acts[1], gate_in(g, 3, j), true))));
	kir_expr *go = gate_in(g, 1, j);
	if (g->p) go = BIN(g->k, KIR_ADD, go, BIN(g->k, KIR_MUL, LOAD_F64(g->k, g->p, ADD(g->k, ADD(g->k, pb, Hx), j)), cn));
	/* The cell state is not clipped before h (as the interpreter, onnxruntime). */
	kir_expr *hn = BIN(g->k, KIR_MUL, act(g, b, &acts[0], go, true), act(g, b, &acts[2], cn, false));
	store(g, b, g->st, ADD(g->k, cnb, j), cn);
	store(g, b, g->st, ADD(g->k, hnb, j), hn);
	loop_end(g, blk, &lp, KIR_LOOP_SEQUENTIAL);
	j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
	store(g, &lp.body, g->st, ADD(g->k, g->cb, j), ST(g, ADD(g->k, cnb, j)));
	store(g, &lp.body, g->st, ADD(g->k, g->hb, j), ST(g, ADD(g->k, hnb, j)));
	loop_end(g, blk, &lp, KIR_LOOP_VECTOR);
}

/* Y's row of (t, direction g->dc, the current batch). */
static kir_expr *y_row(gen *g, kir_expr *t) {
	const rnn_spec *s = g->s;
	kir_expr *D = I(g->k, s->D), *d = I(g->k, g->dc);
	kir_expr *r = s->layout ? ADD(g->k, MUL(g->k, ADD(g->k, MUL(g->k, g->b, g->S), t), D), d) : ADD(g->k, MUL(g->k, ADD(g->k, MUL(g->k, t, D), d), g->B), g->b);
	return MUL(g->k, r, I(g->k, s->H));
}

/* The recurrence of direction dc for the current batch, given its length. */
static void direction(gen *g, kir_block *blk, int dc, kir_expr *len) {
	const rnn_spec *s = g->s;
	kir_expr *Hx = I(g->k, s->H), *D = I(g->k, s->D), *d = I(g->k, dc);
	bool backward = s->reverse_only || dc == 1;
	g->dc = dc;
	/* The state's row in initial_h / Y_h. */
	kir_expr *si = LET(g->k, blk, "si", MUL(g->k, s->layout ? ADD(g->k, MUL(g->k, g->b, D), d) : ADD(g->k, MUL(g->k, d, g->B), g->b), Hx));
	loop lp;
	kir_expr *j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
	store(g, &lp.body, g->st, ADD(g->k, g->hb, j), g->h0 ? LOAD_F64(g->k, g->h0, ADD(g->k, si, j)) : F(g->k, F64, 0));
	if (s->kind == RNN_LSTM) store(g, &lp.body, g->st, ADD(g->k, g->cb, j), g->c0 ? LOAD_F64(g->k, g->c0, ADD(g->k, si, j)) : F(g->k, F64, 0));
	loop_end(g, blk, &lp, KIR_LOOP_VECTOR);

	loop ts;
	kir_expr *sv = loop_begin(g, &ts, "s", I(g->k, 0), len);
	kir_expr *t = LET(g->k, &ts.body, "t", backward ? SUB(g->k, SUB(g->k, len, I(g->k, 1)), sv) : sv);
	/* XW[t][b][d] */
	g->xwo = LET(g->k, &ts.body, "xo", MUL(g->k, ADD(g->k, MUL(g->k, ADD(g->k, MUL(g->k, t, g->B), g->b), D), d), I(g->k, s->G * s->H)));
	step(g, &ts.body);
	if (g->y) {
		kir_expr *yr = LET(g->k, &ts.body, "yr", y_row(g, t));
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		store(g, &lp.body, g->y, ADD(g->k, yr, j), kir_e_cast(g->k, s->dt, ST(g, ADD(g->k, g->hb, j))));
		loop_end(g, &ts.body, &lp, KIR_LOOP_VECTOR);
	}
	loop_end(g, blk, &ts, KIR_LOOP_SEQUENTIAL);

	if (g->y && g->lens) { /* steps past the batch's length stay zero */
		loop tz;
		kir_expr *t2 = loop_begin(g, &tz, "t", len, g->S);
		kir_expr *yr = LET(g->k, &tz.body, "yr", y_row(g, t2));
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		store(g, &lp.body, g->y, ADD(g->k, yr, j), kir_e_float(g->k, s->dt, 0));
		loop_end(g, &tz.body, &lp, KIR_LOOP_VECTOR);
		loop_end(g, blk, &tz, KIR_LOOP_SEQUENTIAL);
	}
	if (g->yh || g->yc) {
		j = loop_begin(g, &lp, "j", I(g->k, 0), Hx);
		if (g->yh) store(g, &lp.body, g->yh, ADD(g->k, si, j), kir_e_cast(g->k, s->dt, ST(g, ADD(g->k, g->hb, j))));
		if (g->yc) store(g, &lp.body, g->yc, ADD(g->k, si, j), kir_e_cast(g->k, s->dt, ST(g, ADD(g->k, g->cb, j))));
		loop_end(g, blk, &lp, KIR_LOOP_VECTOR);
	}
}

static bool recurrence_kernel(gen *g, const tbc_op *op, int oy, int oyh, int oyc, int64_t width) {
	const rnn_spec *s = g->s;
	if (!lk_begin(&g->l, g->l.cx, s->kind == RNN_PLAIN ? "rnn" : s->kind == RNN_GRU ? "gru" : "lstm")) return false;
	kir_kernel *k = g->k = g->l.k;
	lk *l = &g->l;
	g->rtb = lk_buf(l, g->rt), g->xwb = lk_buf(l, g->xw), g->st = lk_buf(l, g->state);
	g->bias = s->bias ? lk_value(l, s->bias) : NULL;
	g->p = s->p ? lk_value(l, s->p) : NULL;
	g->h0 = s->h0 ? lk_value(l, s->h0) : NULL;
	g->c0 = s->c0 ? lk_value(l, s->c0) : NULL;
	g->lens = s->lens ? lk_value(l, s->lens) : NULL;
	g->y = oy >= 0 ? lk_buf(l, oy) : NULL;
	g->yh = oyh >= 0 ? lk_buf(l, oyh) : NULL;
	g->yc = oyc >= 0 ? lk_buf(l, oyc) : NULL;
	if (!g->rtb || !g->xwb || !g->st || (s->bias && !g->bias) || (s->p && !g->p) || (s->h0 && !g->h0) ||
	    (s->c0 && !g->c0) || (s->lens && !g->lens) || (oy >= 0 && !g->y) || (oyh >= 0 && !g->yh) || (oyc >= 0 && !g->yc))
		return false;
	g->S = lk_dim(l, s->S);
	g->B = lk_dim(l, s->B);
	kir_block all = {0};
	if (g->lens) { /* the interpreter's check, before anything runs */
		loop lc;
		kir_expr *bv = loop_begin(g, &lc, "b", I(g->k, 0), g->B);
		kir_expr *lb = kir_e_cast(k, KIR_INDEX, kir_e_load(k, g->lens, bv));
		char msg[128];
		snprintf(msg, sizeof msg, "%s: a sequence_lens value is outside [0, seq_length]", tbc_ops[op->code].onnx_name);
		kir_block_add(k, &lc.body, kir_s_error(k, kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, lb, I(g->k, 0)), kir_e_cmp(k, KIR_GT, lb, g->S)), msg));
		loop_end(g, &all, &lc, KIR_LOOP_SEQUENTIAL);
	}
	loop par;
	kir_expr *db = loop_begin(g, &par, "db", I(g->k, 0), MUL(g->k, I(g->k, s->D), g->B));
	kir_block *body = &par.body;
	g->b = s->D == 1 ? db : LET(g->k, body, "b", kir_e_binary(k, KIR_FLOORMOD, db, g->B));
	int64_t H = s->H, GH = s->G * H;
	kir_expr *base = LET(g->k, body, "sb", MUL(g->k, db, I(g->k, width)));
	g->hb = base;
	g->cb = s->kind == RNN_LSTM ? LET(g->k, body, "cb", ADD(g->k, base, I(g->k, H))) : NULL;
	g->rb = LET(g->k, body, "rb", ADD(g->k, base, I(g->k, (1 + (s->kind == RNN_LSTM)) * H)));
	g->tb = LET(g->k, body, "tb", ADD(g->k, base, I(g->k, (1 + (s->kind == RNN_LSTM)) * H + GH)));
	kir_expr *len = g->S;
	if (g->lens) {
		kir_expr *lb = kir_e_cast(k, KIR_INDEX, kir_e_load(k, g->lens, g->b));
		len = LET(g->k, body, "len", kir_e_binary(k, KIR_MIN, kir_e_binary(k, KIR_MAX, lb, I(g->k, 0)), g->S));
	}
	if (s->D == 1) {
		direction(g, body, 0, len);
	} else {
		kir_block fwd = {0}, bwd = {0};
		direction(g, &fwd, 0, len);
		direction(g, &bwd, 1, len);
		kir_expr *is_fwd = kir_e_cmp(k, KIR_LT, db, g->B); /* d = db / B */
		kir_block_add(k, body, kir_s_if(k, is_fwd, fwd.first, bwd.first));
	}
	loop_end(g, &all, &par, KIR_LOOP_PARALLEL);
	return lk_end(l, all.first);
}

static lower_result lower_rnn(lower_cx *cx, const tbc_op *op, enum rnn_kind kind) {
	rnn_spec s;
	const char *why = rnn_read(op, kind, &s);
	if (why) return refuse(cx, op, why);
	const tbc_value *yv = opt_out(op, 0), *yhv = opt_out(op, 1), *ycv = kind == RNN_LSTM ? opt_out(op, 2) : NULL;
	if (!yv && !yhv && !ycv) return LOWER_OK;
	int oy = yv ? lower_result_buf(cx, yv) : -2, oyh = yhv ? lower_result_buf(cx, yhv) : -2;
	int oyc = ycv ? lower_result_buf(cx, ycv) : -2;
	if (oy == -1 || oyh == -1 || oyc == -1) return LOWER_FAILED;
	int64_t H = s.H, GH = s.G * H;
	/* Scratch: WT, RT; XW for every step; per (direction, batch) h, c
	 * (LSTM), HR and the step's gate values (RNN: 1 x H, GRU: z, r,
	 * candidate, r*h, LSTM: new c, new h). */
	int64_t n_tmp = kind == RNN_PLAIN ? 1 : kind == RNN_GRU ? 4 : 2;
	int64_t width = (1 + (kind == RNN_LSTM) + n_tmp) * H + GH;
	tbc_dim dd = {s.D, NULL};
	tbc_type wtt = {.dtype = F64, .rank = 3, .dims = {dd, {s.I, NULL}, {GH, NULL}}};
	tbc_type rtt = {.dtype = F64, .rank = 3, .dims = {dd, {H, NULL}, {GH, NULL}}};
	tbc_type xwt = {.dtype = F64, .rank = 3, .dims = {s.S, s.B, {s.D * GH, NULL}}};
	tbc_type stt = {.dtype = F64, .rank = 3, .dims = {dd, s.B, {width, NULL}}};
	gen g = {.s = &s};
	g.l.cx = cx;
	g.wt = lower_temp_buf(cx, &wtt, "tbc.rnn_wt");
	g.rt = lower_temp_buf(cx, &rtt, "tbc.rnn_rt");
	g.xw = lower_temp_buf(cx, &xwt, "tbc.rnn_xw");
	g.state = lower_temp_buf(cx, &stt, "tbc.rnn_state");
	if (g.wt < 0 || g.rt < 0 || g.xw < 0 || g.state < 0)
		return refuse(cx, op, "with a batch or sequence dim that is not a symbol of the inputs");
	bool ok = transpose_kernel(&g, s.w, s.I, g.wt) && transpose_kernel(&g, s.r, H, g.rt) && input_kernel(&g) &&
		  recurrence_kernel(&g, op, oy, oyh, oyc, width);
	return ok ? LOWER_OK : LOWER_FAILED;
}

lower_result lower_family_rnn(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_RNN: return lower_rnn(cx, op, RNN_PLAIN);
	case TBC_OP_GRU: return lower_rnn(cx, op, RNN_GRU);
	case TBC_OP_LSTM: return lower_rnn(cx, op, RNN_LSTM);
	default: return LOWER_NOT_MINE;
	}
}
