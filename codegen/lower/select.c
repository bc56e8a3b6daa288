/* Ops whose output size is known only after computing, and generators of a
 * size given while running: NonZero, Compress, Unique, NonMaxSuppression,
 * the Hann/Hamming/Blackman windows, MelWeightMatrix, STFT, and the shape
 * kernel of MaxUnpool with an output_shape input (docs/lower-dynamic.md).
 *
 * Count-dependent outputs follow one pattern: a kernel computes what the
 * output holds into scratch of an upper-bound size (lower_temp_buf sized by
 * the inputs' dims) and stores the count into the output dim's computed
 * symbol (lower_shape_dim); a later kernel, whose buffers sized by that
 * symbol are allocated once it is known, copies the result out.  Sorting
 * (Unique's units, NonMaxSuppression's candidates) is a bottom-up stable
 * merge sort: a stable sort's result is unique, so it orders exactly as the
 * interpreter's merge sort and qsort with an index tie-break do.
 *
 * The generators (windows, MelWeightMatrix, STFT) emit a shape kernel with
 * the interpreter's checks, then fill the output in parallel in double with
 * the interpreter's expressions (ir/kernels/seq_signal.c).  Run-time errors
 * carry the interpreter's wording (ir/kernels/data_select.c, seq_nms.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_data.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/kernels.h"

#define F64 TBC_DT_F64
#define SEQ KIR_LOOP_SEQUENTIAL
#define PAR KIR_LOOP_PARALLEL

/* A kernel under construction for op. */
typedef struct dk {
	lk l;
	kir_kernel *k;
	const tbc_op *op;
	char where[160]; /* "node 'x' (NonZero)" */
} dk;

static bool dk_begin(dk *d, lower_cx *cx, const tbc_op *op, const char *what) {
	memset(d, 0, sizeof *d);
	d->op = op;
	snprintf(d->where, sizeof d->where, "node '%s' (%s)", op->name ? op->name : "", tbc_ops[op->code].onnx_name);
	if (!lk_begin(&d->l, cx, what)) return false;
	d->k = d->l.k;
	return true;
}

static kir_expr *BOOL(dk *d, bool v) { return kir_e_int(d->k, TBC_DT_BOOL, v); }
static kir_expr *ONE_IF(dk *d, kir_expr *c) { return SEL(d->k, c, I(d->k, 1), I(d->k, 0)); }

/* A local set to init here (its type: init's). */
static kir_var *var(dk *d, kir_block *b, const char *name, kir_expr *init) {
	if (!init) {
		d->k->failed = true;
		return kir_var_new(d->k, name, KIR_INDEX);
	}
	kir_var *v = kir_var_new(d->k, name, init->type);
	kir_block_add(d->k, b, kir_s_set(d->k, v, init));
	return v;
}
/* An index local that later statements set again, starting at init. */
static kir_var *counter(dk *d, kir_block *b, const char *name, int64_t init) {
	return var(d, b, name, kir_e_index(d->k, init));
}
static kir_expr *let(dk *d, kir_block *b, const char *name, kir_expr *e) { return V(d->k, var(d, b, name, e)); }
static void set(dk *d, kir_block *b, kir_var *v, kir_expr *e) { kir_block_add(d->k, b, kir_s_set(d->k, v, e)); }
static void store(dk *d, kir_block *b, kir_buffer *buf, kir_expr *i, kir_expr *v) {
	kir_block_add(d->k, b, kir_s_store(d->k, buf, i, v));
}
/* for i in [lo, hi): body (nothing when body is empty). */
static void loop(dk *d, kir_block *b, kir_var *i, kir_expr *lo, kir_expr *hi, kir_loop_kind kind, kir_block *body) {
	if (body->first) kir_block_add(d->k, b, kir_s_for(d->k, i, lo, hi, 1, kind, body->first));
}
static void when(dk *d, kir_block *b, kir_expr *cond, kir_block *then, kir_block *orelse) {
	if (then->first || (orelse && orelse->first))
		kir_block_add(d->k, b, kir_s_if(d->k, cond, then->first, orelse ? orelse->first : NULL));
}
static kir_var *ivar(dk *d, const char *name) { return kir_var_new(d->k, name, KIR_INDEX); }

/* Fails the run with "<where>: <message>" when cond holds. */
static void fail_if(dk *d, kir_block *b, kir_expr *cond, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail_if(dk *d, kir_block *b, kir_expr *cond, const char *fmt, ...) {
	char msg[256], full[448];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "%s: %s", d->where, msg);
	kir_block_add(d->k, b, kir_s_error(d->k, cond, full));
}

static bool dk_end(dk *d, kir_block *b) {
	if (!b->first) kir_block_add(d->k, b, kir_s_set(d->k, ivar(d, "unused"), I(d->k, 0)));
	return lk_end(&d->l, b->first);
}

static kir_expr *dim(dk *d, tbc_dim x) { return lk_dim(&d->l, x); }
static kir_expr *prod(dk *d, const tbc_type *t, int lo, int hi) {
	kir_expr *p = I(d->k, 1);
	for (int i = lo; i < hi; i++) p = MUL(d->k, p, dim(d, t->dims[i]));
	return p;
}

/* Element i of b as a value to compute with: narrow floats widened to f32,
 * bool as an index (0 or 1). */
static kir_expr *num(dk *d, kir_buffer *b, kir_expr *i) {
	kir_expr *e = LOAD(d->k, b, i);
	tbc_dtype t = b ? b->dtype : TBC_DT_F32;
	if (t == TBC_DT_BOOL) return CAST(d->k, KIR_INDEX, e);
	if (tbc_dtype_is_float(t) && t != TBC_DT_F32 && t != F64) return CAST(d->k, TBC_DT_F32, e);
	return e;
}
static kir_expr *f64_at(dk *d, kir_buffer *b, kir_expr *i) { return CAST(d->k, F64, num(d, b, i)); }
static bool is_floaty(const kir_expr *e) { return e && (e->type == TBC_DT_F32 || e->type == F64); }

/* Whether element i is non-zero as the interpreter's is_nonzero: NaN is,
 * -0.0 is not. */
static kir_expr *nonzero(dk *d, kir_buffer *b, kir_expr *i) {
	kir_expr *v = num(d, b, i);
	if (!v) return NULL;
	kir_expr *zero = is_floaty(v) ? kir_e_float(d->k, v->type, 0) : v->type == KIR_INDEX ? I(d->k, 0) : kir_e_int(d->k, v->type, 0);
	return CMP(d->k, KIR_NE, v, zero);
}

/* Element 0 of a tensor input as an index (integers as they are, floats
 * truncated). */
static kir_expr *scalar(dk *d, const tbc_value *v) { return CAST(d->k, KIR_INDEX, LOAD(d->k, lk_value(&d->l, v), I(d->k, 0))); }

/* Output dims stored by one kernel: a symbol is stored once (a second
 * check in the same kernel would read the size before the store). */
typedef struct stored {
	int n;
	const char *syms[8];
} stored;

static bool shape_dim(dk *d, kir_block *b, stored *st, int o, int j, kir_expr *value) {
	tbc_dim x = d->op->outputs[o]->type.dims[j];
	for (int i = 0; x.sym && i < st->n; i++)
		if (!strcmp(st->syms[i], x.sym)) return true;
	bool fresh = !lower_dim_known(d->l.cx, x);
	char what[96];
	snprintf(what, sizeof what, "output %d dim %d of %s", o, j, tbc_ops[d->op->code].onnx_name);
	if (!lower_shape_dim(&d->l, b, d->op, x, what, value)) return false;
	if (fresh && st->n < 8) st->syms[st->n++] = x.sym;
	return true;
}

/* A computed symbol of the op's own (a run-time parameter later kernels take
 * as a size), set to value here; the dim naming it. */
static tbc_dim own_sym(dk *d, kir_block *b, const char *what, kir_expr *value) {
	char name[64];
	snprintf(name, sizeof name, "_%s%u_%s", tbc_ops[d->op->code].onnx_name, d->op->outputs[0]->id, what);
	int s = lower_sym_computed(d->l.cx, name);
	kir_buffer *syms = s >= 0 ? lk_syms(&d->l) : NULL;
	if (!syms) {
		d->k->failed = true;
		return (tbc_dim){1, NULL};
	}
	store(d, b, syms, I(d->k, s), CAST(d->k, TBC_DT_I64, value));
	return (tbc_dim){-1, d->l.cx->p->sym_names[s]};
}

static lower_result done(bool ok) { return ok ? LOWER_OK : LOWER_FAILED; }
static lower_result refuse(lower_cx *cx, const tbc_op *op, const char *why) {
	lower_error(cx, op, "op %s %s has no lowering yet", tbc_ops[op->code].onnx_name, why);
	return LOWER_FAILED;
}
static bool want(const tbc_op *op, int i) { return op->n_outputs > i && op->outputs[i]; }
static const tbc_value *in_opt(const tbc_op *op, int i) { return op->n_inputs > i ? op->inputs[i] : NULL; }
/* Whether v holds exactly one element by its static type. */
static bool one_element(const tbc_value *v) { return tbc_type_numel(&v->type) == 1; }

/* Scratch of dtype i64 shaped [lead, dims of t from..to) (lead 0: none). */
static int scratch(lower_cx *cx, const tbc_type *t, int from, int to, int64_t lead, const char *name) {
	tbc_type s = {.dtype = TBC_DT_I64, .rank = 0};
	if (lead) s.dims[s.rank++] = (tbc_dim){lead, NULL};
	for (int i = from; i < to; i++) {
		if (s.rank == TBC_MAX_RANK) return -1;
		s.dims[s.rank++] = t->dims[i];
	}
	return lower_temp_buf(cx, &s, name);
}

/* ---- Stable merge sort -------------------------------------------------------
 * Sorts ord[base + cur * half + (0 .. n)] (two halves `half` apart, the
 * sorted run ends in half `cur`, returned) bottom-up; before(c, a) is a bool
 * saying whether item c sorts strictly before item a, computed by
 * statements it appends to the block it is given. */
typedef kir_expr *(*before_fn)(void *ctx, dk *d, kir_block *b, kir_expr *c, kir_expr *a);

static kir_var *merge_sort(dk *d, kir_block *b, kir_buffer *ord, kir_expr *base, kir_expr *half, kir_expr *n,
			   before_fn before, void *ctx) {
	kir_var *cur = counter(d, b, "cur", 0), *w = counter(d, b, "w", 1);
	kir_block pass = {0}, runs = {0}, merge = {0}, cmp = {0};
	kir_expr *src = let(d, &pass, "src", ADD(d->k, base, MUL(d->k, V(d->k, cur), half)));
	kir_expr *dst = let(d, &pass, "dst", ADD(d->k, base, MUL(d->k, SUB(d->k, I(d->k, 1), V(d->k, cur)), half)));
	kir_expr *w2 = let(d, &pass, "w2", MUL(d->k, V(d->k, w), I(d->k, 2)));
	kir_var *s = ivar(d, "s"), *k = ivar(d, "k");
	kir_expr *lo = let(d, &runs, "lo", MUL(d->k, V(d->k, s), w2));
	kir_expr *mid = let(d, &runs, "mid", MIN(d->k, ADD(d->k, lo, V(d->k, w)), n));
	kir_expr *hi = let(d, &runs, "hi", MIN(d->k, ADD(d->k, lo, w2), n));
	kir_var *i = var(d, &runs, "a", lo), *j = var(d, &runs, "b", mid);
	kir_var *c = var(d, &merge, "c", BOOL(d, false));
	kir_expr *ai = let(d, &merge, "ia", LOAD(d->k, ord, ADD(d->k, src, MIN(d->k, V(d->k, i), SUB(d->k, n, I(d->k, 1))))));
	kir_expr *aj = let(d, &merge, "ib", LOAD(d->k, ord, ADD(d->k, src, MIN(d->k, V(d->k, j), SUB(d->k, n, I(d->k, 1))))));
	set(d, &cmp, c, before(ctx, d, &cmp, aj, ai));
	when(d, &merge, AND(d->k, CMP(d->k, KIR_LT, V(d->k, i), mid), CMP(d->k, KIR_LT, V(d->k, j), hi)), &cmp, NULL);
	kir_expr *takej = let(d, &merge, "right",
			      AND(d->k, CMP(d->k, KIR_LT, V(d->k, j), hi), OR(d->k, CMP(d->k, KIR_GE, V(d->k, i), mid), V(d->k, c))));
	store(d, &merge, ord, ADD(d->k, dst, V(d->k, k)), SEL(d->k, takej, aj, ai));
	set(d, &merge, i, ADD(d->k, V(d->k, i), SEL(d->k, takej, I(d->k, 0), I(d->k, 1))));
	set(d, &merge, j, ADD(d->k, V(d->k, j), ONE_IF(d, takej)));
	loop(d, &runs, k, lo, hi, SEQ, &merge);
	loop(d, &pass, s, I(d->k, 0), DIV(d->k, SUB(d->k, ADD(d->k, n, w2), I(d->k, 1)), w2), SEQ, &runs);
	set(d, &pass, cur, SUB(d->k, I(d->k, 1), V(d->k, cur)));
	set(d, &pass, w, w2);
	kir_block body = {0};
	when(d, &body, CMP(d->k, KIR_LT, V(d->k, w), n), &pass, NULL);
	loop(d, b, ivar(d, "pass"), I(d->k, 0), I(d->k, 63), SEQ, &body);
	return cur;
}

/* ---- NonZero -------------------------------------------------------------------
 * A counting kernel stores the count; a sequential kernel then writes the
 * coordinates of each non-zero element in row-major order. */
static lower_result lower_nonzero(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type;
	int r = xt->rank, R = r ? r : 1;
	if (r < 0 || yv->type.rank != 2) return refuse(cx, op, "of unknown rank");
	dk d;
	kir_block b = {0}, body = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "nonzero_count")) return LOWER_FAILED;
	kir_buffer *x = lk_value(&d.l, xv);
	kir_var *n = counter(&d, &b, "n", 0), *i = ivar(&d, "i");
	set(&d, &body, n, ADD(d.k, V(d.k, n), ONE_IF(&d, nonzero(&d, x, V(d.k, i)))));
	loop(&d, &b, i, I(d.k, 0), prod(&d, xt, 0, r), SEQ, &body);
	if (!shape_dim(&d, &b, &st, 0, 0, I(d.k, R)) || !shape_dim(&d, &b, &st, 0, 1, V(d.k, n)) || !dk_end(&d, &b))
		return LOWER_FAILED;

	int yb = lower_result_buf(cx, yv);
	if (yb < 0 || !dk_begin(&d, cx, op, "nonzero")) return LOWER_FAILED;
	x = lk_value(&d.l, xv);
	kir_buffer *y = lk_buf(&d.l, yb);
	kir_expr *count = dim(&d, yv->type.dims[1]);
	kir_block top = {0}, hit = {0};
	kir_var *k = counter(&d, &top, "k", 0), *c[TBC_MAX_RANK];
	kir_expr *lin = I(d.k, 0);
	for (int a = 0; a < r; a++) {
		c[a] = ivar(&d, "c");
		lin = ADD(d.k, MUL(d.k, lin, dim(&d, xt->dims[a])), V(d.k, c[a]));
	}
	for (int a = 0; a < R; a++)
		store(&d, &hit, y, ADD(d.k, MUL(d.k, I(d.k, a), count), V(d.k, k)), r ? CAST(d.k, TBC_DT_I64, V(d.k, c[a])) : kir_e_int(d.k, TBC_DT_I64, 0));
	set(&d, &hit, k, ADD(d.k, V(d.k, k), I(d.k, 1)));
	kir_block nest = {0};
	when(&d, &nest, nonzero(&d, x, lin), &hit, NULL);
	for (int a = r - 1; a >= 0; a--) {
		kir_block outer = {0};
		loop(&d, &outer, c[a], I(d.k, 0), dim(&d, xt->dims[a]), SEQ, &nest);
		nest = outer;
	}
	kir_block_add(d.k, &top, nest.first);
	return done(dk_end(&d, &top));
}

/* ---- Compress ------------------------------------------------------------------
 * The positions the condition selects go to scratch (checked against the
 * dim as the interpreter does); the copy is then parallel over them. */
static lower_result lower_compress(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *cv = op->inputs[1], *yv = op->outputs[0];
	const tbc_type *xt = &xv->type;
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	int r = xt->rank, a = 0;
	if (r < 0 || cv->type.rank != 1) return refuse(cx, op, "with a condition that is not 1-D");
	if (ax && !tbc_norm_axis(ax->i, r, &a)) return refuse(cx, op, "with its axis out of range");
	int sel = scratch(cx, &cv->type, 0, 1, 0, "compress_sel");
	if (sel < 0) return refuse(cx, op, "with this condition's shape");
	dk d;
	kir_block b = {0}, body = {0}, hit = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "compress_select")) return LOWER_FAILED;
	kir_buffer *cond = lk_value(&d.l, cv), *sb = lk_buf(&d.l, sel);
	kir_expr *n = ax ? dim(&d, xt->dims[a]) : prod(&d, xt, 0, r);
	kir_var *kept = counter(&d, &b, "kept", 0), *i = ivar(&d, "i");
	int64_t ns;
	if (kir_e_const_index(n, &ns))
		fail_if(&d, &hit, CMP(d.k, KIR_GE, V(d.k, i), n), "condition selects an index outside a dim of %lld", (long long)ns);
	else
		fail_if(&d, &hit, CMP(d.k, KIR_GE, V(d.k, i), n), "condition selects an index outside the dim");
	store(&d, &hit, sb, V(d.k, kept), CAST(d.k, TBC_DT_I64, V(d.k, i)));
	set(&d, &hit, kept, ADD(d.k, V(d.k, kept), I(d.k, 1)));
	when(&d, &body, nonzero(&d, cond, V(d.k, i)), &hit, NULL);
	loop(&d, &b, i, I(d.k, 0), dim(&d, cv->type.dims[0]), SEQ, &body);
	if (!shape_dim(&d, &b, &st, 0, ax ? a : 0, V(d.k, kept)) || !dk_end(&d, &b)) return LOWER_FAILED;

	if (!dk_begin(&d, cx, op, "compress")) return LOWER_FAILED;
	kir_buffer *x = data_in(&d.l, xv), *y = data_out(&d.l, yv);
	sb = lk_buf(&d.l, sel);
	if (!x || !y || !sb) return LOWER_FAILED;
	n = ax ? dim(&d, xt->dims[a]) : prod(&d, xt, 0, r);
	kir_expr *outer = ax ? prod(&d, xt, 0, a) : I(d.k, 1), *inner = ax ? prod(&d, xt, a + 1, r) : I(d.k, 1);
	kir_expr *m = dim(&d, yv->type.dims[ax ? a : 0]);
	dloops lp = {0};
	kir_expr *o = dl_add(&d.l, &lp, outer, false), *j = dl_add(&d.l, &lp, m, false), *e = dl_add(&d.l, &lp, inner, false);
	kir_expr *src = CAST(d.k, KIR_INDEX, LOAD(d.k, sb, j));
	kir_stmt *copy = kir_s_store(d.k, y, ADD(d.k, MUL(d.k, ADD(d.k, MUL(d.k, o, m), j), inner), e),
				     LOAD(d.k, x, ADD(d.k, MUL(d.k, ADD(d.k, MUL(d.k, o, n), src), inner), e)));
	kir_block all = {0};
	kir_block_add(d.k, &all, dl_wrap(&d.l, &lp, copy));
	return done(dk_end(&d, &all));
}

/* ---- Windows -------------------------------------------------------------------
 * a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N) in double, N = size
 * (periodic) or size - 1, as the interpreter's window_run. */
static lower_result lower_window(lower_cx *cx, const tbc_op *op, double a0, double a1, double a2) {
	const tbc_value *sv = op->inputs[0], *yv = op->outputs[0];
	if (!one_element(sv)) return refuse(cx, op, "with a size that is not one element");
	dk d;
	kir_block b = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "window_size")) return LOWER_FAILED;
	kir_expr *n = let(&d, &b, "n", scalar(&d, sv));
	fail_if(&d, &b, CMP(d.k, KIR_LT, n, I(d.k, 0)), "size must not be negative");
	if (!shape_dim(&d, &b, &st, 0, 0, n) || !dk_end(&d, &b)) return LOWER_FAILED;

	int yb = lower_result_buf(cx, yv);
	if (yb < 0 || !dk_begin(&d, cx, op, "window")) return LOWER_FAILED;
	kir_buffer *y = lk_buf(&d.l, yb);
	bool periodic = tbc_attr_int(op, "periodic", 1) != 0;
	kir_block top = {0}, body = {0};
	kir_expr *len = dim(&d, yv->type.dims[0]);
	kir_expr *N = let(&d, &top, "N", periodic ? CAST(d.k, F64, len) : BIN(d.k, KIR_SUB, CAST(d.k, F64, len), F(d.k, F64, 1)));
	kir_var *i = ivar(&d, "i");
	kir_expr *fi = CAST(d.k, F64, V(d.k, i));
	kir_expr *c1 = UN(d.k, KIR_COS, BIN(d.k, KIR_DIV, BIN(d.k, KIR_MUL, F(d.k, F64, 2 * M_PI), fi), N));
	kir_expr *c2 = UN(d.k, KIR_COS, BIN(d.k, KIR_DIV, BIN(d.k, KIR_MUL, F(d.k, F64, 4 * M_PI), fi), N));
	kir_expr *v = BIN(d.k, KIR_ADD, BIN(d.k, KIR_SUB, F(d.k, F64, a0), BIN(d.k, KIR_MUL, F(d.k, F64, a1), c1)), BIN(d.k, KIR_MUL, F(d.k, F64, a2), c2));
	v = SEL(d.k, CMP(d.k, KIR_EQ, N, F(d.k, F64, 0)), F(d.k, F64, a0 - a1 + a2), v);
	store(&d, &body, y, V(d.k, i), CAST(d.k, yv->type.dtype, v));
	loop(&d, &top, i, I(d.k, 0), len, PAR, &body);
	return done(dk_end(&d, &top));
}

/* ---- MelWeightMatrix -----------------------------------------------------------*/
typedef struct mel {
	kir_expr *lo_mel, *step, *len, *rate;
} mel;

/* The interpreter's mel points: the edges through float32 log1p, the rest
 * in double. */
static mel mel_setup(dk *d, kir_block *b, const tbc_op *op) {
	mel m;
	kir_expr *bins = let(d, b, "bins", scalar(d, op->inputs[0]));
	m.len = let(d, b, "len", scalar(d, op->inputs[1]));
	m.rate = let(d, b, "rate", scalar(d, op->inputs[2]));
	kir_expr *edge[2];
	for (int e = 0; e < 2; e++) {
		kir_expr *hz = CAST(d->k, TBC_DT_F32, num(d, lk_value(&d->l, op->inputs[3 + e]), I(d->k, 0)));
		kir_expr *l1p = UN(d->k, KIR_LOG1P, BIN(d->k, KIR_DIV, hz, kir_e_float(d->k, TBC_DT_F32, 700.0)));
		edge[e] = let(d, b, e ? "hi_mel" : "lo_mel",
			      BIN(d->k, KIR_DIV, CAST(d->k, F64, BIN(d->k, KIR_MUL, kir_e_float(d->k, TBC_DT_F32, 2595.0), l1p)), F(d->k, F64, log(10.0))));
	}
	m.lo_mel = edge[0];
	m.step = let(d, b, "step", BIN(d->k, KIR_DIV, BIN(d->k, KIR_SUB, edge[1], edge[0]), CAST(d->k, F64, ADD(d->k, bins, I(d->k, 2)))));
	return m;
}

/* floor((len + 1) * hz / rate) of mel point i. */
static kir_expr *mel_bin(dk *d, const mel *m, kir_expr *i) {
	kir_expr *t = BIN(d->k, KIR_MUL, BIN(d->k, KIR_DIV, BIN(d->k, KIR_ADD, BIN(d->k, KIR_MUL, CAST(d->k, F64, i), m->step), m->lo_mel), F(d->k, F64, 2595.0)),
			  F(d->k, F64, log(10.0)));
	kir_expr *hz = BIN(d->k, KIR_MUL, F(d->k, F64, 700.0), UN(d->k, KIR_EXPM1, t));
	kir_expr *q = BIN(d->k, KIR_DIV, BIN(d->k, KIR_MUL, CAST(d->k, F64, ADD(d->k, m->len, I(d->k, 1))), hz), CAST(d->k, F64, m->rate));
	return CAST(d->k, KIR_INDEX, UN(d->k, KIR_FLOOR, q));
}

static lower_result lower_mel(lower_cx *cx, const tbc_op *op) {
	const tbc_value *yv = op->outputs[0];
	for (int i = 0; i < 5; i++)
		if (!one_element(op->inputs[i])) return refuse(cx, op, "with inputs that are not one element");
	dk d;
	kir_block b = {0}, chk = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "mel_shape")) return LOWER_FAILED;
	mel m = mel_setup(&d, &b, op);
	kir_expr *bins = scalar(&d, op->inputs[0]);
	kir_expr *lo = f64_at(&d, lk_value(&d.l, op->inputs[3]), I(d.k, 0)), *hi = f64_at(&d, lk_value(&d.l, op->inputs[4]), I(d.k, 0));
	kir_expr *bad = OR(d.k, OR(d.k, CMP(d.k, KIR_LE, bins, I(d.k, 0)), CMP(d.k, KIR_LE, m.len, I(d.k, 0))), CMP(d.k, KIR_LE, m.rate, I(d.k, 0)));
	bad = OR(d.k, bad, OR(d.k, CMP(d.k, KIR_LT, lo, F(d.k, F64, 0)), CMP(d.k, KIR_LT, hi, lo)));
	bad = OR(d.k, bad, CMP(d.k, KIR_GT, hi, BIN(d.k, KIR_ADD, BIN(d.k, KIR_DIV, CAST(d.k, F64, m.rate), F(d.k, F64, 2.0)), F(d.k, F64, 1e-9))));
	fail_if(&d, &b, bad,
		"need num_mel_bins, dft_length, sample_rate > 0 and 0 <= lower_edge_hertz <= upper_edge_hertz <= sample_rate/2");
	kir_expr *spec = let(&d, &b, "spec", ADD(d.k, DIV(d.k, m.len, I(d.k, 2)), I(d.k, 1)));
	kir_var *i = ivar(&d, "i");
	kir_expr *l = let(&d, &chk, "l", mel_bin(&d, &m, V(d.k, i)));
	kir_expr *c = let(&d, &chk, "c", mel_bin(&d, &m, ADD(d.k, V(d.k, i), I(d.k, 1))));
	kir_expr *r = let(&d, &chk, "r", mel_bin(&d, &m, ADD(d.k, V(d.k, i), I(d.k, 2))));
	kir_expr *out = OR(d.k, OR(d.k, CMP(d.k, KIR_LT, l, I(d.k, 0)), CMP(d.k, KIR_GE, r, ADD(d.k, spec, I(d.k, 1)))), CMP(d.k, KIR_GE, c, spec));
	out = OR(d.k, out, OR(d.k, CMP(d.k, KIR_GT, l, c), CMP(d.k, KIR_GT, c, r)));
	fail_if(&d, &chk, out, "a mel bin falls outside the spectrum");
	loop(&d, &b, i, I(d.k, 0), bins, SEQ, &chk);
	if (!shape_dim(&d, &b, &st, 0, 0, spec) || !shape_dim(&d, &b, &st, 0, 1, bins) || !dk_end(&d, &b)) return LOWER_FAILED;

	int yb = lower_result_buf(cx, yv);
	if (yb < 0 || !dk_begin(&d, cx, op, "mel")) return LOWER_FAILED;
	kir_buffer *y = lk_buf(&d.l, yb);
	tbc_dtype dt = yv->type.dtype;
	kir_block top = {0}, zero = {0}, per = {0}, up = {0}, flat = {0}, down = {0};
	m = mel_setup(&d, &top, op);
	kir_expr *nb = dim(&d, yv->type.dims[1]);
	kir_var *e = ivar(&d, "e");
	store(&d, &zero, y, V(d.k, e), CAST(d.k, dt, F(d.k, F64, 0)));
	loop(&d, &top, e, I(d.k, 0), MUL(d.k, dim(&d, yv->type.dims[0]), nb), PAR, &zero);
	i = ivar(&d, "i");
	l = let(&d, &per, "l", mel_bin(&d, &m, V(d.k, i)));
	c = let(&d, &per, "c", mel_bin(&d, &m, ADD(d.k, V(d.k, i), I(d.k, 1))));
	r = let(&d, &per, "r", mel_bin(&d, &m, ADD(d.k, V(d.k, i), I(d.k, 2))));
	store(&d, &flat, y, ADD(d.k, MUL(d.k, c, nb), V(d.k, i)), CAST(d.k, dt, F(d.k, F64, 1)));
	kir_var *j = ivar(&d, "j");
	kir_block rise = {0};
	store(&d, &rise, y, ADD(d.k, MUL(d.k, V(d.k, j), nb), V(d.k, i)),
	      CAST(d.k, dt, BIN(d.k, KIR_DIV, CAST(d.k, F64, SUB(d.k, V(d.k, j), l)), CAST(d.k, F64, SUB(d.k, c, l)))));
	loop(&d, &up, j, l, ADD(d.k, c, I(d.k, 1)), SEQ, &rise);
	when(&d, &per, CMP(d.k, KIR_EQ, c, l), &flat, &up);
	kir_var *j2 = ivar(&d, "j");
	kir_block fall = {0};
	store(&d, &fall, y, ADD(d.k, MUL(d.k, V(d.k, j2), nb), V(d.k, i)),
	      CAST(d.k, dt, BIN(d.k, KIR_DIV, CAST(d.k, F64, SUB(d.k, r, V(d.k, j2))), CAST(d.k, F64, SUB(d.k, r, c)))));
	loop(&d, &down, j2, c, r, SEQ, &fall);
	kir_block_add(d.k, &per, down.first);
	loop(&d, &top, i, I(d.k, 0), nb, PAR, &per);
	return done(dk_end(&d, &top));
}

/* ---- STFT ----------------------------------------------------------------------
 * A shape kernel checks frame_step and frame_length as the interpreter does
 * and stores the frame and bin counts (and frame_step / frame_length as
 * symbols of the op's own when they are given while running); a twiddle
 * table cos/sin(-2 pi m / n) in the interpreter's expression; then a direct
 * DFT per (batch, frame, bin), parallel, summing in double in its order. */
static lower_result lower_stft(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *sv = op->inputs[1], *wv = in_opt(op, 2), *fv = in_opt(op, 3), *yv = op->outputs[0];
	const tbc_type *xt = &xv->type;
	bool onesided = tbc_attr_int(op, "onesided", 1) != 0;
	if (xt->rank != 3 || xt->dims[2].sym || (xt->dims[2].size != 1 && xt->dims[2].size != 2) || yv->type.rank != 4)
		return refuse(cx, op, "with a signal that is not [batch, length, 1|2]");
	if (!one_element(sv) || (fv && !one_element(fv))) return refuse(cx, op, "with frame_step or frame_length not one element");
	if (wv && wv->type.rank != 1) return refuse(cx, op, "with a window that is not 1-D");
	int64_t comp = xt->dims[2].size;
	const tbc_tensor *sc = tbc_input_const(op, 1), *fc = fv ? tbc_input_const(op, 3) : NULL;
	dk d;
	kir_block b = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "stft_shape")) return LOWER_FAILED;
	kir_expr *L = dim(&d, xt->dims[1]);
	kir_expr *step = let(&d, &b, "step", scalar(&d, sv));
	kir_expr *flen = let(&d, &b, "flen", fv ? scalar(&d, fv) : wv ? dim(&d, wv->type.dims[0]) : L);
	if (wv) fail_if(&d, &b, CMP(d.k, KIR_NE, dim(&d, wv->type.dims[0]), flen), "window must be 1-D of frame_length elements");
	fail_if(&d, &b, OR(d.k, OR(d.k, CMP(d.k, KIR_LE, step, I(d.k, 0)), CMP(d.k, KIR_LE, flen, I(d.k, 0))), CMP(d.k, KIR_GT, flen, L)),
		"bad frame_step or frame_length");
	if (onesided && comp == 2) fail_if(&d, &b, BOOL(&d, true), "onesided needs a real signal");
	kir_expr *frames = ADD(d.k, I(d.k, 1), DIV(d.k, SUB(d.k, L, flen), SEL(d.k, CMP(d.k, KIR_GT, step, I(d.k, 0)), step, I(d.k, 1))));
	kir_expr *bins = onesided ? ADD(d.k, DIV(d.k, flen, I(d.k, 2)), I(d.k, 1)) : flen;
	tbc_dim step_d = sc ? (tbc_dim){tbc_load_i64(sc->dtype, sc->data, 0), NULL} : own_sym(&d, &b, "step", step);
	tbc_dim flen_d = fc ? (tbc_dim){tbc_load_i64(fc->dtype, fc->data, 0), NULL}
		       : fv ? own_sym(&d, &b, "flen", flen)
		       : wv ? wv->type.dims[0]
			    : xt->dims[1];
	if (!shape_dim(&d, &b, &st, 0, 0, dim(&d, xt->dims[0])) || !shape_dim(&d, &b, &st, 0, 1, frames) ||
	    !shape_dim(&d, &b, &st, 0, 2, bins) || !shape_dim(&d, &b, &st, 0, 3, I(d.k, 2)) || !dk_end(&d, &b))
		return LOWER_FAILED;
	if (flen_d.size <= 0 && !flen_d.sym) return LOWER_OK; /* the shape kernel fails the run */

	tbc_type twt = {.dtype = F64, .rank = 2};
	twt.dims[0] = (tbc_dim){2, NULL};
	twt.dims[1] = flen_d;
	int tw = lower_temp_buf(cx, &twt, "stft_twiddle");
	if (tw < 0 || !dk_begin(&d, cx, op, "stft_twiddle")) return LOWER_FAILED;
	kir_buffer *twb = lk_buf(&d.l, tw);
	kir_block top = {0}, body = {0};
	kir_expr *n = dim(&d, flen_d);
	kir_var *mv = ivar(&d, "m");
	kir_expr *ang = let(&d, &body, "ang", BIN(d.k, KIR_DIV, BIN(d.k, KIR_MUL, F(d.k, F64, -1.0 * 2.0 * M_PI), CAST(d.k, F64, V(d.k, mv))), CAST(d.k, F64, n)));
	store(&d, &body, twb, V(d.k, mv), UN(d.k, KIR_COS, ang));
	store(&d, &body, twb, ADD(d.k, n, V(d.k, mv)), UN(d.k, KIR_SIN, ang));
	loop(&d, &top, mv, I(d.k, 0), n, PAR, &body);
	if (!dk_end(&d, &top)) return LOWER_FAILED;

	int yb = lower_result_buf(cx, yv);
	if (yb < 0 || !dk_begin(&d, cx, op, "stft")) return LOWER_FAILED;
	kir_buffer *x = lk_value(&d.l, xv), *w = wv ? lk_value(&d.l, wv) : NULL, *y = lk_buf(&d.l, yb);
	twb = lk_buf(&d.l, tw);
	n = dim(&d, flen_d);
	L = dim(&d, xt->dims[1]);
	step = dim(&d, step_d);
	frames = dim(&d, yv->type.dims[1]);
	bins = dim(&d, yv->type.dims[2]);
	kir_block all = {0}, pt = {0}, term = {0};
	kir_var *t = ivar(&d, "t"), *j = ivar(&d, "j");
	kir_expr *kk = let(&d, &pt, "bin", MOD(d.k, V(d.k, t), bins));
	kir_expr *bf = let(&d, &pt, "bf", DIV(d.k, V(d.k, t), bins));
	kir_expr *f = let(&d, &pt, "f", MOD(d.k, bf, frames)), *bb = let(&d, &pt, "b", DIV(d.k, bf, frames));
	kir_var *sr = var(&d, &pt, "sr", F(d.k, F64, 0)), *si = var(&d, &pt, "si", F(d.k, F64, 0)), *m = counter(&d, &pt, "m", 0);
	kir_expr *xi = let(&d, &term, "xi", MUL(d.k, ADD(d.k, MUL(d.k, bb, L), ADD(d.k, MUL(d.k, f, step), V(d.k, j))), I(d.k, comp)));
	kir_expr *wj = w ? let(&d, &term, "w", f64_at(&d, w, V(d.k, j))) : NULL;
	kir_expr *xr = f64_at(&d, x, xi), *xim = comp == 2 ? f64_at(&d, x, ADD(d.k, xi, I(d.k, 1))) : F(d.k, F64, 0);
	if (wj) {
		xr = BIN(d.k, KIR_MUL, xr, wj);
		if (comp == 2) xim = BIN(d.k, KIR_MUL, xim, wj);
	}
	xr = let(&d, &term, "xr", xr);
	xim = let(&d, &term, "xim", xim);
	kir_expr *cr = let(&d, &term, "cr", LOAD(d.k, twb, V(d.k, m))), *ci = let(&d, &term, "ci", LOAD(d.k, twb, ADD(d.k, n, V(d.k, m))));
	set(&d, &term, sr, BIN(d.k, KIR_ADD, V(d.k, sr), BIN(d.k, KIR_SUB, BIN(d.k, KIR_MUL, xr, cr), BIN(d.k, KIR_MUL, xim, ci))));
	set(&d, &term, si, BIN(d.k, KIR_ADD, V(d.k, si), BIN(d.k, KIR_ADD, BIN(d.k, KIR_MUL, xr, ci), BIN(d.k, KIR_MUL, xim, cr))));
	kir_expr *next = let(&d, &term, "mn", ADD(d.k, V(d.k, m), kk));
	set(&d, &term, m, SEL(d.k, CMP(d.k, KIR_GE, next, n), SUB(d.k, next, n), next));
	loop(&d, &pt, j, I(d.k, 0), n, SEQ, &term);
	store(&d, &pt, y, MUL(d.k, V(d.k, t), I(d.k, 2)), CAST(d.k, yv->type.dtype, V(d.k, sr)));
	store(&d, &pt, y, ADD(d.k, MUL(d.k, V(d.k, t), I(d.k, 2)), I(d.k, 1)), CAST(d.k, yv->type.dtype, V(d.k, si)));
	loop(&d, &all, t, I(d.k, 0), MUL(d.k, MUL(d.k, dim(&d, xt->dims[0]), frames), bins), PAR, &pt);
	return done(dk_end(&d, &all));
}

/* ---- Unique --------------------------------------------------------------------
 * The input as n units (elements, or slices along axis) of outer x inner
 * elements.  One sequential kernel sorts the unit numbers stably, groups
 * equal units (first occurrence, inverse, counts: scratch), renumbers the
 * groups by first occurrence when not sorted, and stores the group count;
 * a parallel kernel then copies the units and the lists out. */
typedef struct unique_cx {
	kir_buffer *x;
	kir_expr *n; /* units */
	const tbc_type *xt;
	int a; /* axis, or -1 */
} unique_cx;

/* Geometry of the units in kernel d: outer, n, inner. */
static void unique_geom(dk *d, const unique_cx *u, kir_expr **outer, kir_expr **n, kir_expr **inner) {
	int r = u->xt->rank;
	if (u->a < 0) {
		*outer = I(d->k, 1), *n = prod(d, u->xt, 0, r), *inner = I(d->k, 1);
	} else {
		*outer = prod(d, u->xt, 0, u->a), *n = dim(d, u->xt->dims[u->a]), *inner = prod(d, u->xt, u->a + 1, r);
	}
}

/* -1, 0 or 1 as the interpreter's cmp_elem (NaN sorts last). */
static kir_expr *cmp_elem(dk *d, kir_expr *p, kir_expr *q) {
	kir_expr *ord = SUB(d->k, ONE_IF(d, CMP(d->k, KIR_GT, p, q)), ONE_IF(d, CMP(d->k, KIR_LT, p, q)));
	if (!is_floaty(p)) return ord;
	kir_expr *np = UN(d->k, KIR_ISNAN, p), *nq = UN(d->k, KIR_ISNAN, q);
	return SEL(d->k, OR(d->k, np, nq), SUB(d->k, ONE_IF(d, np), ONE_IF(d, nq)), ord);
}

/* A loop over the elements of units c and a (outer, inner), calling body. */
typedef struct unit_walk {
	kir_block outer, inner;
	kir_var *o, *e;
	kir_expr *pc, *pa; /* the elements of c and a */
} unit_walk;

static void walk_begin(dk *d, const unique_cx *u, unit_walk *w, kir_expr *c, kir_expr *a) {
	memset(w, 0, sizeof *w);
	kir_expr *outer, *n, *inner;
	unique_geom(d, u, &outer, &n, &inner);
	w->o = ivar(d, "o");
	w->e = ivar(d, "e");
	kir_expr *row = MUL(d->k, V(d->k, w->o), n);
	w->pc = num(d, u->x, ADD(d->k, MUL(d->k, ADD(d->k, row, c), inner), V(d->k, w->e)));
	w->pa = num(d, u->x, ADD(d->k, MUL(d->k, ADD(d->k, row, a), inner), V(d->k, w->e)));
}

static void walk_end(dk *d, const unique_cx *u, unit_walk *w, kir_block *b) {
	kir_expr *outer, *n, *inner;
	unique_geom(d, u, &outer, &n, &inner);
	loop(d, &w->outer, w->e, I(d->k, 0), inner, SEQ, &w->inner);
	loop(d, b, w->o, I(d->k, 0), outer, SEQ, &w->outer);
}

static kir_expr *unit_before(void *ctx, dk *d, kir_block *b, kir_expr *c, kir_expr *a) {
	const unique_cx *u = ctx;
	c = let(d, b, "uc", CAST(d->k, KIR_INDEX, c));
	a = let(d, b, "ua", CAST(d->k, KIR_INDEX, a));
	kir_var *r = var(d, b, "ord", I(d->k, 0));
	unit_walk w;
	walk_begin(d, u, &w, c, a);
	kir_block then = {0};
	set(d, &then, r, cmp_elem(d, w.pc, w.pa));
	when(d, &w.inner, CMP(d->k, KIR_EQ, V(d->k, r), I(d->k, 0)), &then, NULL);
	walk_end(d, u, &w, b);
	return CMP(d->k, KIR_LT, V(d->k, r), I(d->k, 0));
}

static kir_expr *units_equal(dk *d, const unique_cx *u, kir_block *b, kir_expr *c, kir_expr *a) {
	kir_var *eq = var(d, b, "same", BOOL(d, true));
	unit_walk w;
	walk_begin(d, u, &w, c, a);
	kir_expr *e = CMP(d->k, KIR_EQ, w.pc, w.pa);
	if (is_floaty(w.pc)) e = OR(d->k, e, AND(d->k, UN(d->k, KIR_ISNAN, w.pc), UN(d->k, KIR_ISNAN, w.pa)));
	set(d, &w.inner, eq, AND(d->k, V(d->k, eq), e));
	walk_end(d, u, &w, b);
	return V(d->k, eq);
}

enum { U_FIRST, U_INV, U_CNT, U_SLOT };

static lower_result lower_unique(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0];
	const tbc_type *xt = &xv->type;
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	bool sorted = tbc_attr_int(op, "sorted", 1) != 0;
	int r = xt->rank, a = -1;
	if (r < 0) return refuse(cx, op, "of unknown rank");
	if (ax && !tbc_norm_axis(ax->i, r, &a)) return refuse(cx, op, "with its axis out of range");
	unique_cx u = {.xt = xt, .a = a};
	int from = a < 0 ? 0 : a, to = a < 0 ? r : a + 1;
	int ord = scratch(cx, xt, from, to, 2, "unique_order"), aux = scratch(cx, xt, from, to, 4, "unique_groups");
	if (ord < 0 || aux < 0) return refuse(cx, op, "of this rank");
	dk d;
	kir_block b = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "unique_sort")) return LOWER_FAILED;
	u.x = lk_value(&d.l, xv);
	kir_buffer *ob = lk_buf(&d.l, ord), *gb = lk_buf(&d.l, aux);
	kir_expr *outer, *n, *inner;
	unique_geom(&d, &u, &outer, &n, &inner);
	n = let(&d, &b, "n", n);
	u.n = n;
#define G(part, i) ADD(d.k, MUL(d.k, I(d.k, part), n), (i))
	kir_block init = {0};
	kir_var *i = ivar(&d, "i");
	store(&d, &init, ob, V(d.k, i), CAST(d.k, TBC_DT_I64, V(d.k, i)));
	loop(&d, &b, i, I(d.k, 0), n, SEQ, &init);
	kir_var *cur = merge_sort(&d, &b, ob, I(d.k, 0), n, n, unit_before, &u);
	/* Group equal neighbours: the stable sort puts each group's first
	 * occurrence first. */
	kir_var *m = counter(&d, &b, "m", 0), *k = ivar(&d, "k");
	kir_block grp = {0}, fresh = {0};
	kir_expr *run = MUL(d.k, V(d.k, cur), n);
	kir_expr *uk = let(&d, &grp, "u", CAST(d.k, KIR_INDEX, LOAD(d.k, ob, ADD(d.k, run, V(d.k, k)))));
	kir_expr *prev = let(&d, &grp, "prev", CAST(d.k, KIR_INDEX, LOAD(d.k, ob, ADD(d.k, run, MAX(d.k, SUB(d.k, V(d.k, k), I(d.k, 1)), I(d.k, 0))))));
	kir_expr *same = let(&d, &grp, "dup", AND(d.k, CMP(d.k, KIR_GT, V(d.k, k), I(d.k, 0)), units_equal(&d, &u, &grp, prev, uk)));
	store(&d, &fresh, gb, G(U_FIRST, V(d.k, m)), CAST(d.k, TBC_DT_I64, uk));
	store(&d, &fresh, gb, G(U_CNT, V(d.k, m)), kir_e_int(d.k, TBC_DT_I64, 0));
	set(&d, &fresh, m, ADD(d.k, V(d.k, m), I(d.k, 1)));
	when(&d, &grp, NOT(d.k, same), &fresh, NULL);
	kir_expr *g = SUB(d.k, V(d.k, m), I(d.k, 1));
	store(&d, &grp, gb, G(U_INV, uk), CAST(d.k, TBC_DT_I64, g));
	store(&d, &grp, gb, G(U_CNT, g), BIN(d.k, KIR_ADD, LOAD(d.k, gb, G(U_CNT, g)), kir_e_int(d.k, TBC_DT_I64, 1)));
	loop(&d, &b, k, I(d.k, 0), n, SEQ, &grp);
	if (!sorted) {
		/* Renumber groups in order of first occurrence (the order buffer,
		 * free now, holds the new first and count lists). */
		kir_block clear = {0}, scan = {0}, first_seen = {0}, back = {0};
		kir_var *q = ivar(&d, "g");
		store(&d, &clear, gb, G(U_SLOT, V(d.k, q)), kir_e_int(d.k, TBC_DT_I64, -1));
		loop(&d, &b, q, I(d.k, 0), V(d.k, m), SEQ, &clear);
		kir_var *next = counter(&d, &b, "next", 0), *e = ivar(&d, "i");
		kir_expr *gi = let(&d, &scan, "grp", CAST(d.k, KIR_INDEX, LOAD(d.k, gb, G(U_INV, V(d.k, e)))));
		store(&d, &first_seen, gb, G(U_SLOT, gi), CAST(d.k, TBC_DT_I64, V(d.k, next)));
		store(&d, &first_seen, ob, V(d.k, next), LOAD(d.k, gb, G(U_FIRST, gi)));
		store(&d, &first_seen, ob, ADD(d.k, n, V(d.k, next)), LOAD(d.k, gb, G(U_CNT, gi)));
		set(&d, &first_seen, next, ADD(d.k, V(d.k, next), I(d.k, 1)));
		when(&d, &scan, CMP(d.k, KIR_LT, LOAD(d.k, gb, G(U_SLOT, gi)), kir_e_int(d.k, TBC_DT_I64, 0)), &first_seen, NULL);
		store(&d, &scan, gb, G(U_INV, V(d.k, e)), LOAD(d.k, gb, G(U_SLOT, gi)));
		loop(&d, &b, e, I(d.k, 0), n, SEQ, &scan);
		q = ivar(&d, "g");
		store(&d, &back, gb, G(U_FIRST, V(d.k, q)), LOAD(d.k, ob, V(d.k, q)));
		store(&d, &back, gb, G(U_CNT, V(d.k, q)), LOAD(d.k, ob, ADD(d.k, n, V(d.k, q))));
		loop(&d, &b, q, I(d.k, 0), V(d.k, m), SEQ, &back);
	}
	if (!shape_dim(&d, &b, &st, 0, a < 0 ? 0 : a, V(d.k, m))) return LOWER_FAILED;
	for (int o = 1; o < 4; o++)
		if (want(op, o) && !shape_dim(&d, &b, &st, o, 0, o == 2 ? n : V(d.k, m))) return LOWER_FAILED;
	if (!dk_end(&d, &b)) return LOWER_FAILED;
#undef G

	int out[4];
	for (int o = 0; o < 4; o++) out[o] = want(op, o) ? lower_result_buf(cx, op->outputs[o]) : -2;
	for (int o = 0; o < 4; o++)
		if (out[o] == -1) return LOWER_FAILED;
	if (!dk_begin(&d, cx, op, "unique")) return LOWER_FAILED;
	gb = lk_buf(&d.l, aux);
	unique_geom(&d, &u, &outer, &n, &inner);
	kir_block all = {0};
	kir_expr *mm = dim(&d, want(op, 1) ? op->outputs[1]->type.dims[0] : want(op, 3) ? op->outputs[3]->type.dims[0]
									       : op->outputs[0]->type.dims[a < 0 ? 0 : a]);
#define G(part, i) ADD(d.k, MUL(d.k, I(d.k, part), n), (i))
	if (out[0] >= 0) {
		kir_buffer *x = data_in(&d.l, xv), *y = data_out(&d.l, op->outputs[0]);
		dloops lp = {0};
		kir_expr *o = dl_add(&d.l, &lp, outer, false), *gg = dl_add(&d.l, &lp, mm, false), *e = dl_add(&d.l, &lp, inner, false);
		kir_expr *src = CAST(d.k, KIR_INDEX, LOAD(d.k, gb, G(U_FIRST, gg)));
		kir_stmt *copy = kir_s_store(d.k, y, ADD(d.k, MUL(d.k, ADD(d.k, MUL(d.k, o, mm), gg), inner), e),
					     LOAD(d.k, x, ADD(d.k, MUL(d.k, ADD(d.k, MUL(d.k, o, n), src), inner), e)));
		kir_block_add(d.k, &all, dl_wrap(&d.l, &lp, copy));
	}
	static const int part[4] = {0, U_FIRST, U_INV, U_CNT};
	for (int o = 1; o < 4; o++) {
		if (out[o] < 0) continue;
		kir_buffer *y = lk_buf(&d.l, out[o]);
		kir_block body = {0};
		kir_var *q = ivar(&d, "q");
		store(&d, &body, y, V(d.k, q), LOAD(d.k, gb, G(part[o], V(d.k, q))));
		loop(&d, &all, q, I(d.k, 0), o == 2 ? n : mm, PAR, &body);
	}
#undef G
	return done(dk_end(&d, &all));
}

/* ---- NonMaxSuppression ------------------------------------------------------------
 * A check kernel (dims, iou_threshold); per (batch, class) in parallel: the
 * candidates above the score threshold, stably sorted by score (highest
 * first, equal scores by index), then greedily kept against the kept boxes,
 * in double as the interpreter; a sequential kernel sums the counts into
 * offsets and the output size; a parallel copy writes the triples. */
typedef struct nms_cx {
	kir_buffer *scores;
	kir_expr *row; /* bc * N */
} nms_cx;

static kir_expr *score_before(void *ctx, dk *d, kir_block *b, kir_expr *c, kir_expr *a) {
	const nms_cx *s = ctx;
	(void)b;
	kir_expr *sc = f64_at(d, s->scores, ADD(d->k, s->row, CAST(d->k, KIR_INDEX, c)));
	kir_expr *sa = f64_at(d, s->scores, ADD(d->k, s->row, CAST(d->k, KIR_INDEX, a)));
	return CMP(d->k, KIR_GT, sc, sa);
}

/* C's fmin / fmax: a NaN operand gives the other. */
static kir_expr *fmin_(dk *d, kir_expr *a, kir_expr *b) {
	return SEL(d->k, OR(d->k, UN(d->k, KIR_ISNAN, b), CMP(d->k, KIR_LT, a, b)), a, b);
}
static kir_expr *fmax_(dk *d, kir_expr *a, kir_expr *b) {
	return SEL(d->k, OR(d->k, UN(d->k, KIR_ISNAN, b), CMP(d->k, KIR_GT, a, b)), a, b);
}

/* Corners (ymin, xmin, ymax, xmax) of box i as nms_corners. */
static void nms_corners(dk *d, kir_block *blk, kir_buffer *boxes, kir_expr *at, bool center, kir_expr **c, const char *name) {
	kir_expr *v[4];
	char nm[16];
	for (int t = 0; t < 4; t++) {
		snprintf(nm, sizeof nm, "%s%d", name, t);
		v[t] = let(d, blk, nm, f64_at(d, boxes, ADD(d->k, at, I(d->k, t))));
	}
	kir_expr *c0, *c1, *c2, *c3;
	if (center) {
		kir_expr *h = BIN(d->k, KIR_DIV, v[3], F(d->k, F64, 2)), *w = BIN(d->k, KIR_DIV, v[2], F(d->k, F64, 2));
		c0 = BIN(d->k, KIR_SUB, v[1], h), c2 = BIN(d->k, KIR_ADD, v[1], h);
		c1 = BIN(d->k, KIR_SUB, v[0], w), c3 = BIN(d->k, KIR_ADD, v[0], w);
	} else {
		c0 = fmin_(d, v[0], v[2]), c2 = fmax_(d, v[0], v[2]);
		c1 = fmin_(d, v[1], v[3]), c3 = fmax_(d, v[1], v[3]);
	}
	kir_expr *cs[4] = {c0, c1, c2, c3};
	for (int t = 0; t < 4; t++) {
		snprintf(nm, sizeof nm, "%sc%d", name, t);
		c[t] = let(d, blk, nm, cs[t]);
	}
}

static lower_result lower_nms(lower_cx *cx, const tbc_op *op) {
	const tbc_value *bv = op->inputs[0], *sv = op->inputs[1], *yv = op->outputs[0];
	const tbc_value *mo = in_opt(op, 2), *iou = in_opt(op, 3), *sth = in_opt(op, 4);
	const tbc_type *bt = &bv->type, *stt = &sv->type;
	if (bt->rank != 3 || stt->rank != 3) return refuse(cx, op, "with boxes or scores not of rank 3");
	for (int i = 2; i < 5; i++) {
		const tbc_value *v = in_opt(op, i);
		if (v && tbc_type_numel(&v->type) < 0) return refuse(cx, op, "with a threshold or limit of unknown size");
	}
	bool has_mo = mo && tbc_type_numel(&mo->type) > 0, has_iou = iou && tbc_type_numel(&iou->type) > 0;
	bool has_st = sth && tbc_type_numel(&sth->type) > 0, center = tbc_attr_int(op, "center_point_box", 0) == 1;
	tbc_dim Bd = bt->dims[0], Nd = bt->dims[1], Cd = stt->dims[1];
	/* Static dims that disagree would make the kernels read out of bounds. */
	if ((!bt->dims[2].sym && bt->dims[2].size != 4) || (!stt->dims[0].sym && !Bd.sym && stt->dims[0].size != Bd.size) ||
	    (!stt->dims[2].sym && !Nd.sym && stt->dims[2].size != Nd.size))
		return lower_error(cx, op, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]"), LOWER_FAILED;
	tbc_type sct = {.dtype = TBC_DT_I64, .rank = 3};
	sct.dims[0] = Bd, sct.dims[1] = Cd, sct.dims[2] = Nd;
	int ord = scratch(cx, &sct, 0, 3, 2, "nms_order"), kept = scratch(cx, &sct, 0, 3, 0, "nms_kept");
	int cnt = scratch(cx, &sct, 0, 2, 0, "nms_count"), off = scratch(cx, &sct, 0, 2, 0, "nms_offset");
	if (ord < 0 || kept < 0 || cnt < 0 || off < 0) return LOWER_FAILED;

	dk d;
	kir_block b = {0};
	if (!dk_begin(&d, cx, op, "nms_check")) return LOWER_FAILED;
	kir_expr *bad = OR(d.k, CMP(d.k, KIR_NE, dim(&d, bt->dims[2]), I(d.k, 4)), CMP(d.k, KIR_NE, dim(&d, stt->dims[0]), dim(&d, Bd)));
	bad = OR(d.k, bad, CMP(d.k, KIR_NE, dim(&d, stt->dims[2]), dim(&d, Nd)));
	fail_if(&d, &b, bad, "boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]");
	kir_expr *thr = has_iou ? f64_at(&d, lk_value(&d.l, iou), I(d.k, 0)) : F(d.k, F64, 0);
	fail_if(&d, &b, OR(d.k, CMP(d.k, KIR_LT, thr, F(d.k, F64, 0)), CMP(d.k, KIR_GT, thr, F(d.k, F64, 1))), "iou_threshold must be in [0, 1]");
	if (!dk_end(&d, &b)) return LOWER_FAILED;

	if (!dk_begin(&d, cx, op, "nms_select")) return LOWER_FAILED;
	kir_buffer *boxes = lk_value(&d.l, bv), *scores = lk_value(&d.l, sv);
	kir_buffer *ob = lk_buf(&d.l, ord), *kb = lk_buf(&d.l, kept), *cb = lk_buf(&d.l, cnt);
	kir_block top = {0}, per = {0};
	kir_expr *N = dim(&d, Nd), *C = dim(&d, Cd);
	kir_expr *total = let(&d, &top, "bcn", MUL(d.k, MUL(d.k, dim(&d, Bd), C), N));
	kir_expr *max_out = let(&d, &top, "max_out", has_mo ? MAX(d.k, scalar(&d, mo), I(d.k, 0)) : I(d.k, 0));
	thr = let(&d, &top, "thr", has_iou ? f64_at(&d, lk_value(&d.l, iou), I(d.k, 0)) : F(d.k, F64, 0));
	kir_expr *sthr = has_st ? let(&d, &top, "sthr", f64_at(&d, lk_value(&d.l, sth), I(d.k, 0))) : NULL;
	kir_var *bc = ivar(&d, "bc");
	kir_expr *row = let(&d, &per, "row", MUL(d.k, V(d.k, bc), N));
	kir_expr *brow = let(&d, &per, "brow", MUL(d.k, DIV(d.k, V(d.k, bc), C), N)); /* b * N */
	kir_var *nc = counter(&d, &per, "nc", 0), *i = ivar(&d, "i");
	kir_block cand = {0}, add = {0};
	kir_expr *s = f64_at(&d, scores, ADD(d.k, row, V(d.k, i)));
	store(&d, &add, ob, ADD(d.k, row, V(d.k, nc)), CAST(d.k, TBC_DT_I64, V(d.k, i)));
	set(&d, &add, nc, ADD(d.k, V(d.k, nc), I(d.k, 1)));
	if (has_st) when(&d, &cand, CMP(d.k, KIR_GT, s, sthr), &add, NULL);
	else kir_block_add(d.k, &cand, add.first);
	loop(&d, &per, i, I(d.k, 0), N, SEQ, &cand);
	nms_cx sc = {scores, row};
	kir_var *cur = merge_sort(&d, &per, ob, row, total, V(d.k, nc), score_before, &sc);
	kir_var *nk = counter(&d, &per, "nk", 0), *k = ivar(&d, "k");
	kir_block each = {0}, vs = {0}, test = {0}, keep_it = {0};
	kir_expr *ci = let(&d, &each, "cand", CAST(d.k, KIR_INDEX, LOAD(d.k, ob, ADD(d.k, ADD(d.k, row, MUL(d.k, V(d.k, cur), total)), V(d.k, k)))));
	kir_var *keep = var(&d, &each, "keep", CMP(d.k, KIR_LT, V(d.k, nk), max_out));
	kir_expr *ca[4], *cb4[4];
	nms_corners(&d, &each, boxes, MUL(d.k, ADD(d.k, brow, ci), I(d.k, 4)), center, ca, "a");
	kir_var *q = ivar(&d, "q");
	kir_expr *other = let(&d, &test, "other", CAST(d.k, KIR_INDEX, LOAD(d.k, kb, ADD(d.k, row, V(d.k, q)))));
	nms_corners(&d, &test, boxes, MUL(d.k, ADD(d.k, brow, other), I(d.k, 4)), center, cb4, "b");
	kir_expr *ix0 = let(&d, &test, "ix0", fmax_(&d, ca[1], cb4[1])), *ix1 = let(&d, &test, "ix1", fmin_(&d, ca[3], cb4[3]));
	kir_expr *iy0 = let(&d, &test, "iy0", fmax_(&d, ca[0], cb4[0])), *iy1 = let(&d, &test, "iy1", fmin_(&d, ca[2], cb4[2]));
	kir_expr *inter = let(&d, &test, "inter", BIN(d.k, KIR_MUL, BIN(d.k, KIR_SUB, ix1, ix0), BIN(d.k, KIR_SUB, iy1, iy0)));
	kir_expr *area1 = let(&d, &test, "area1", BIN(d.k, KIR_MUL, BIN(d.k, KIR_SUB, ca[3], ca[1]), BIN(d.k, KIR_SUB, ca[2], ca[0])));
	kir_expr *area2 = let(&d, &test, "area2", BIN(d.k, KIR_MUL, BIN(d.k, KIR_SUB, cb4[3], cb4[1]), BIN(d.k, KIR_SUB, cb4[2], cb4[0])));
	kir_expr *uni = let(&d, &test, "uni", BIN(d.k, KIR_SUB, BIN(d.k, KIR_ADD, area1, area2), inter));
	kir_expr *zero = F(d.k, F64, 0);
	kir_expr *apart = OR(d.k, CMP(d.k, KIR_LE, ix1, ix0), CMP(d.k, KIR_LE, iy1, iy0));
	kir_expr *degenerate = OR(d.k, OR(d.k, CMP(d.k, KIR_LE, inter, zero), CMP(d.k, KIR_LE, area1, zero)),
				  OR(d.k, CMP(d.k, KIR_LE, area2, zero), CMP(d.k, KIR_LE, uni, zero)));
	kir_expr *suppress = AND(d.k, NOT(d.k, OR(d.k, apart, degenerate)), CMP(d.k, KIR_GT, BIN(d.k, KIR_DIV, inter, uni), thr));
	set(&d, &test, keep, NOT(d.k, suppress));
	when(&d, &vs, V(d.k, keep), &test, NULL);
	loop(&d, &each, q, I(d.k, 0), V(d.k, nk), SEQ, &vs);
	store(&d, &keep_it, kb, ADD(d.k, row, V(d.k, nk)), CAST(d.k, TBC_DT_I64, ci));
	set(&d, &keep_it, nk, ADD(d.k, V(d.k, nk), I(d.k, 1)));
	when(&d, &each, V(d.k, keep), &keep_it, NULL);
	loop(&d, &per, k, I(d.k, 0), V(d.k, nc), SEQ, &each);
	store(&d, &per, cb, V(d.k, bc), CAST(d.k, TBC_DT_I64, V(d.k, nk)));
	loop(&d, &top, bc, I(d.k, 0), MUL(d.k, dim(&d, Bd), C), PAR, &per);
	if (!dk_end(&d, &top)) return LOWER_FAILED;

	stored st = {0};
	if (!dk_begin(&d, cx, op, "nms_total")) return LOWER_FAILED;
	cb = lk_buf(&d.l, cnt);
	kir_buffer *fb = lk_buf(&d.l, off);
	kir_block tb = {0}, sum = {0};
	kir_var *acc = counter(&d, &tb, "total", 0), *g = ivar(&d, "bc");
	store(&d, &sum, fb, V(d.k, g), CAST(d.k, TBC_DT_I64, V(d.k, acc)));
	set(&d, &sum, acc, ADD(d.k, V(d.k, acc), CAST(d.k, KIR_INDEX, LOAD(d.k, cb, V(d.k, g)))));
	loop(&d, &tb, g, I(d.k, 0), MUL(d.k, dim(&d, Bd), dim(&d, Cd)), SEQ, &sum);
	if (!shape_dim(&d, &tb, &st, 0, 0, V(d.k, acc)) || !shape_dim(&d, &tb, &st, 0, 1, I(d.k, 3)) || !dk_end(&d, &tb))
		return LOWER_FAILED;

	int yb = lower_result_buf(cx, yv);
	if (yb < 0 || !dk_begin(&d, cx, op, "nms")) return LOWER_FAILED;
	cb = lk_buf(&d.l, cnt), fb = lk_buf(&d.l, off), kb = lk_buf(&d.l, kept);
	kir_buffer *y = lk_buf(&d.l, yb);
	C = dim(&d, Cd), N = dim(&d, Nd);
	kir_block ct = {0}, pbc = {0}, tri = {0};
	g = ivar(&d, "bc");
	q = ivar(&d, "q");
	kir_expr *base = let(&d, &pbc, "at", CAST(d.k, KIR_INDEX, LOAD(d.k, fb, V(d.k, g))));
	kir_expr *bi = let(&d, &pbc, "b", CAST(d.k, TBC_DT_I64, DIV(d.k, V(d.k, g), C)));
	kir_expr *cl = let(&d, &pbc, "c", CAST(d.k, TBC_DT_I64, MOD(d.k, V(d.k, g), C)));
	kir_expr *at = let(&d, &tri, "o", MUL(d.k, ADD(d.k, base, V(d.k, q)), I(d.k, 3)));
	store(&d, &tri, y, at, bi);
	store(&d, &tri, y, ADD(d.k, at, I(d.k, 1)), cl);
	store(&d, &tri, y, ADD(d.k, at, I(d.k, 2)), LOAD(d.k, kb, ADD(d.k, MUL(d.k, V(d.k, g), N), V(d.k, q))));
	loop(&d, &pbc, q, I(d.k, 0), CAST(d.k, KIR_INDEX, LOAD(d.k, cb, V(d.k, g))), SEQ, &tri);
	loop(&d, &ct, g, I(d.k, 0), MUL(d.k, dim(&d, Bd), C), PAR, &pbc);
	return done(dk_end(&d, &ct));
}

/* ---- MaxUnpool with output_shape -----------------------------------------------------
 * The shape kernel checks each output_shape value against the unpooled size
 * (interpreter's unpool_dims) and stores it; the ordinary lowering
 * (codegen/lower/conv_more.c) then scatters into the symbolic output. */
lower_result lower_max_unpool_shape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *os = in_opt(op, 2), *yv = op->outputs[0];
	const tbc_type *xt = &xv->type;
	int r = xt->rank, nsp = r - 2;
	if (!os || r < 3 || os->type.rank != 1 || os->type.dims[0].sym || os->type.dims[0].size != r || yv->type.rank != r)
		return refuse(cx, op, "with this output_shape");
	for (int i = 0; i < r; i++)
		if (xt->dims[i].sym) return refuse(cx, op, "with symbolic dims");
	const int64_t *ks, *stv, *pads;
	int nk = tbc_attr_ints(op, "kernel_shape", &ks), ns = tbc_attr_ints(op, "strides", &stv), np = tbc_attr_ints(op, "pads", &pads);
	if (nk != nsp || (ns > 0 && ns != nsp) || (np > 0 && np != 2 * nsp)) return refuse(cx, op, "with these attributes");
	int64_t inner[TBC_MAX_RANK] = {xt->dims[0].size, xt->dims[1].size};
	for (int i = 0; i < nsp; i++)
		inner[2 + i] = (xt->dims[2 + i].size - 1) * (ns > 0 ? stv[i] : 1) - (np > 0 ? pads[i] + pads[nsp + i] : 0) + ks[i];
	dk d;
	kir_block b = {0};
	stored st = {0};
	if (!dk_begin(&d, cx, op, "maxunpool_shape")) return LOWER_FAILED;
	kir_buffer *ob = lk_value(&d.l, os);
	for (int i = 0; i < r; i++) {
		char name[16];
		snprintf(name, sizeof name, "d%d", i);
		kir_expr *v = let(&d, &b, name, CAST(d.k, KIR_INDEX, LOAD(d.k, ob, I(d.k, i))));
		fail_if(&d, &b, CMP(d.k, KIR_LT, v, I(d.k, inner[i])), "output_shape dim %d is smaller than the unpooled size %lld", i,
			(long long)inner[i]);
		if (!shape_dim(&d, &b, &st, 0, i, v)) return LOWER_FAILED;
	}
	return dk_end(&d, &b) ? LOWER_SHAPED : LOWER_FAILED;
}

lower_result lower_dyn_select(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_NonZero: return lower_nonzero(cx, op);
	case TBC_OP_Compress: return lower_compress(cx, op);
	case TBC_OP_Unique: return lower_unique(cx, op);
	case TBC_OP_NonMaxSuppression: return lower_nms(cx, op);
	case TBC_OP_HannWindow: return lower_window(cx, op, 0.5, 0.5, 0);
	case TBC_OP_HammingWindow: return lower_window(cx, op, 25.0 / 46.0, 21.0 / 46.0, 0);
	case TBC_OP_BlackmanWindow: return lower_window(cx, op, 0.42, 0.5, 0.08);
	case TBC_OP_MelWeightMatrix: return lower_mel(cx, op);
	case TBC_OP_STFT: return lower_stft(cx, op);
		default: return LOWER_NOT_MINE;
	}
}
