/* Data movement whose output shape is given by a tensor's values while
 * running: Slice (starts, ends, axes, steps), Split (split sizes), Pad (pads,
 * axes, constant_value), OneHot (depth), TopK (K), CenterCropPad (shape),
 * AffineGrid (size), Col2Im (image and block shapes).  Design notes:
 * docs/lower-dynamic.md, section "Slice, Split, Pad, ...".
 *
 * Each op gets a shape kernel that reads the parameter tensors, checks them
 * as the interpreter does (ir/kernels/data_layout.c, data_pad.c,
 * data_index.c, reduce_scan.c, conv_sample.c, conv_transpose.c) and stores
 * the output dims into their computed symbols.  Slice, Pad and Col2Im also
 * store their per-dim run-time parameters (first element and step, offsets,
 * block sizes) as computed symbols, so the data kernel takes them as
 * loop-invariant sizes; Split copies like its static lowering, also when an
 * output is omitted.  OneHot then runs its ordinary lowering (output dims
 * from the type); TopK, CenterCropPad, AffineGrid and Col2Im have their data
 * kernels here, used for constant parameters too (lower_family_data
 * dispatches to them). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_data.h"
#include "codegen/lower/lower_dyn.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/conv_util.h"
#include "ir/kernels/data.h"

/* ---- Shape kernels (codegen/lower/lower_dyn.h) -----------------------------------------*/
static kir_expr *CLAMP(shk *s, kir_expr *v, kir_expr *lo, kir_expr *hi) { return MAX(s->k, MIN(s->k, v, hi), lo); }

/* A run-time parameter of the op (>= 0: the runtime takes a negative
 * computed symbol for one never set) as a computed symbol named after the
 * op's position; *out is the dim later kernels read it through. */
static bool param_sym(shk *s, const char *what, int d, kir_expr *value, tbc_dim *out) {
	char name[64];
	snprintf(name, sizeof name, "_op%d.%s%d", s->l.cx->op_pos, what, d);
	return shk_store_sym(s, name, value, out);
}

/* The length of a parameter tensor (a scalar counts 1); -1 (with a
 * diagnostic) when it is not static, not 1-D or longer than max. */
static int param_len(lower_cx *cx, const tbc_op *op, int input, int max, const char *what) {
	const tbc_value *v = op->n_inputs > input ? op->inputs[input] : NULL;
	if (!v) return -1;
	if (!tbc_dtype_is_int(v->type.dtype)) {
		lower_error(cx, op, "%s must be an integer tensor", what);
		return -1;
	}
	if (v->type.rank == 0) return 1;
	if (v->type.rank != 1 || v->type.dims[0].sym || v->type.dims[0].size > max) {
		lower_error(cx, op, "%s of unknown length has no lowering yet", what);
		return -1;
	}
	return (int)v->type.dims[0].size;
}

/* Axes given while running (n values of input `input`), normalised against
 * rank and checked in range and distinct, into out; NULL input: 0..n-1. */
static bool load_axes(shk *s, const tbc_value *axes, int n, int rank, const char *twice, kir_expr **out) {
	for (int a = 0; a < n; a++) {
		if (!axes) {
			out[a] = I(s->k, a);
			continue;
		}
		char name[16];
		snprintf(name, sizeof name, "axis%d", a);
		kir_expr *v = shk_let(s, name, shk_elem(s, axes, a));
		shk_fail_if(s, OR(s->k, CMP(s->k, KIR_LT, v, I(s->k, -rank)), CMP(s->k, KIR_GE, v, I(s->k, rank))), "axes[%d] is out of range for rank %d",
			a, rank);
		out[a] = shk_let(s, name, SEL(s->k, CMP(s->k, KIR_LT, v, I(s->k, 0)), ADD(s->k, v, I(s->k, rank)), v));
		for (int b = 0; b < a; b++) shk_fail_if(s, CMP(s->k, KIR_EQ, out[a], out[b]), "%s", twice);
	}
	return !s->k->failed;
}

/* Whether dim d may be named by axes: always when they are given while
 * running, else when the constant list holds it. */
static bool maybe_axis(const tbc_op *op, int input, int n, int rank, int d) {
	if (op->n_inputs <= input || !op->inputs[input]) return d < n;
	int64_t v[TBC_MAX_RANK];
	int k = tbc_data_const_ints(op, input, v, TBC_MAX_RANK);
	if (k < 0) return true;
	for (int i = 0; i < k; i++) {
		int a;
		if (tbc_norm_axis(v[i], rank, &a) && a == d) return true;
	}
	return false;
}

/* Ends a data kernel whose body may be empty (nothing to move: no launch). */
static bool finish(lk *l, kir_block *b) {
	if (!b->first) {
		l->cx->n_kernels--;
		return !l->k->failed;
	}
	return lk_end(l, b->first);
}

static bool empty_type(const tbc_type *t) {
	for (int d = 0; d < t->rank; d++)
		if (!t->dims[d].sym && t->dims[d].size == 0) return true;
	return false;
}

/* ---- Slice ------------------------------------------------------------------------
 * Per input dim d the shape kernel computes, as the interpreter's slice_dim,
 * the first element, the step and the count; the count is the output dim,
 * the first element and the step (clamped to [-(D+1), D+1], which selects
 * the same elements, and stored biased by D+1 so it is never negative)
 * become computed symbols.  The data kernel is an affine copy. */
static bool lower_slice_dyn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	if (!y) return true;
	bool has_axes = op->n_inputs > 3 && op->inputs[3], has_steps = op->n_inputs > 4 && op->inputs[4];
	int n = param_len(cx, op, 1, TBC_MAX_RANK, "Slice's starts");
	int ne = param_len(cx, op, 2, TBC_MAX_RANK, "Slice's ends");
	int na = has_axes ? param_len(cx, op, 3, TBC_MAX_RANK, "Slice's axes") : n;
	int nt = has_steps ? param_len(cx, op, 4, TBC_MAX_RANK, "Slice's steps") : n;
	if (n < 0 || ne < 0 || na < 0 || nt < 0) return false;
	if (ne != n) return lower_error(cx, op, "starts has %d values, ends %d", n, ne);
	if (n > r || na != n || nt != n)
		return lower_error(cx, op, "starts, ends, axes and steps must have the same length, at most the rank %d", r);
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *axes[TBC_MAX_RANK], *st[TBC_MAX_RANK], *en[TBC_MAX_RANK], *sp[TBC_MAX_RANK];
	if (!load_axes(&s, has_axes ? op->inputs[3] : NULL, n, r, "an axis is sliced twice", axes)) return false;
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof name, "start%d", i);
		st[i] = shk_let(&s, name, shk_elem(&s, op->inputs[1], i));
		snprintf(name, sizeof name, "end%d", i);
		en[i] = shk_let(&s, name, shk_elem(&s, op->inputs[2], i));
		snprintf(name, sizeof name, "step%d", i);
		sp[i] = has_steps ? shk_let(&s, name, shk_elem(&s, op->inputs[4], i)) : I(s.k, 1);
		if (has_steps) shk_fail_if(&s, CMP(s.k, KIR_EQ, sp[i], I(s.k, 0)), "step %d is 0", i);
	}
	tbc_dim first[TBC_MAX_RANK], step[TBC_MAX_RANK];
	bool sliced[TBC_MAX_RANK];
	for (int d = 0; d < r; d++) {
		sliced[d] = maybe_axis(op, 3, n, r, d);
		if (!sliced[d]) continue;
		/* The parameters naming dim d; an unnamed dim is the whole dim. */
		kir_expr *D = shk_dim_of(&s, x, d), *S = I(s.k, 0), *E = D, *T = I(s.k, 1);
		for (int i = n - 1; i >= 0; i--) {
			kir_expr *here = CMP(s.k, KIR_EQ, axes[i], I(s.k, d));
			S = SEL(s.k, here, st[i], S);
			E = SEL(s.k, here, en[i], E);
			T = SEL(s.k, here, sp[i], T);
		}
		char name[16];
		snprintf(name, sizeof name, "D%d", d);
		D = shk_let(&s, name, D);
		kir_expr *Dp1 = ADD(s.k, D, I(s.k, 1)), *zero = I(s.k, 0), *m1 = I(s.k, -1);
		T = shk_let(&s, "t", CLAMP(&s, T, SUB(s.k, zero, Dp1), Dp1));
		S = shk_let(&s, "s", SEL(s.k, CMP(s.k, KIR_LT, S, zero), ADD(s.k, S, D), S));
		E = shk_let(&s, "e", SEL(s.k, CMP(s.k, KIR_LT, E, zero), ADD(s.k, E, D), E));
		kir_expr *pos = CMP(s.k, KIR_GT, T, zero);
		kir_expr *Dm1 = SUB(s.k, D, I(s.k, 1));
		kir_expr *sp_ = CLAMP(&s, S, zero, D), *ep = CLAMP(&s, E, zero, D);
		kir_expr *sn = CLAMP(&s, S, zero, Dm1), *enn = CLAMP(&s, E, m1, Dm1);
		kir_expr *a = shk_let(&s, "a", SEL(s.k, pos, sp_, sn)), *b = shk_let(&s, "b", SEL(s.k, pos, ep, enn));
		/* Elements from a towards b (exclusive) by |t|. */
		kir_expr *gap = SEL(s.k, pos, SUB(s.k, b, a), SUB(s.k, a, b));
		kir_expr *mag = SEL(s.k, pos, T, SUB(s.k, zero, T));
		kir_expr *count = SEL(s.k, CMP(s.k, KIR_GT, gap, zero),
				      ADD(s.k, kir_e_binary(s.k, KIR_DIV, SUB(s.k, gap, I(s.k, 1)), mag), I(s.k, 1)), zero);
		count = shk_let(&s, "count", count);
		if (!shk_out_dim(&s, 0, d, count)) return false;
		if (!param_sym(&s, "first", d, MAX(s.k, a, zero), &first[d])) return false;
		if (!param_sym(&s, "step", d, ADD(s.k, T, Dp1), &step[d])) return false;
	}
	if (!shk_end(&s)) return false;

	lk l;
	if (!lk_begin(&l, cx, "slice")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_kernel *k = l.k;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	kir_block b = {0};
	for (int d = 0; d < r; d++) {
		kir_expr *stride = xs[d];
		if (sliced[d]) {
			kir_expr *t = kir_e_binary(k, KIR_SUB, lk_dim(&l, step[d]),
						   kir_e_add(k, lk_dim(&l, x->type.dims[d]), kir_e_index(k, 1)));
			stride = kir_e_mul(k, stride, t);
			a.src_off = kir_e_add(k, a.src_off, kir_e_mul(k, lk_dim(&l, first[d]), xs[d]));
		}
		aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], stride);
	}
	if (!empty_type(&y->type)) {
		kir_stmt *c = a.n ? aff_copy(&l, &a, dst, src) : kir_s_store(k, dst, a.dst_off, kir_e_load(k, src, a.src_off));
		if (c) kir_block_add(k, &b, c);
	}
	return finish(&l, &b);
}

/* ---- Split ------------------------------------------------------------------------
 * The sizes given while running (or the default parts of a dim known only
 * while running) become the output dims; the size of an omitted output (the
 * pipeline drops unused ones) becomes a computed symbol, so the copies of
 * the others start at the right offset. */
static bool lower_split_dyn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank, n = op->n_outputs, a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &a)) return lower_error(cx, op, "axis is out of range for rank %d", r);
	if (n > 64) return lower_error(cx, op, "Split into more than 64 parts has no lowering yet");
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *D = shk_let(&s, "dim", shk_dim_of(&s, x, a));
	kir_expr *size[64];
	if (op->n_inputs > 1 && op->inputs[1]) {
		int k = param_len(cx, op, 1, 64, "Split's split");
		if (k < 0) return false;
		if (k != n) return lower_error(cx, op, "split must be a 1-D integer tensor of %d values (one per output)", n);
		kir_expr *sum = I(s.k, 0);
		for (int i = 0; i < n; i++) {
			char name[16];
			snprintf(name, sizeof name, "split%d", i);
			size[i] = shk_let(&s, name, shk_elem(&s, op->inputs[1], i));
			shk_fail_if(&s, CMP(s.k, KIR_LT, size[i], I(s.k, 0)), "split[%d] is negative", i);
			sum = shk_let(&s, "sum", ADD(s.k, sum, size[i]));
		}
		shk_fail_if(&s, CMP(s.k, KIR_NE, sum, D), "the split sizes do not sum to the dim");
	} else {
		int64_t num = tbc_attr_int(op, "num_outputs", 0);
		if (num && num != n) return lower_error(cx, op, "num_outputs is %" PRId64 " but the node has %d outputs", num, n);
		kir_expr *N = I(s.k, n);
		kir_expr *even = CMP(s.k, KIR_EQ, kir_e_binary(s.k, KIR_FLOORMOD, D, N), I(s.k, 0));
		kir_expr *q = kir_e_binary(s.k, KIR_FLOORDIV, D, N);
		if (!num) {
			shk_fail_if(&s, kir_e_unary(s.k, KIR_NOT, even), "the dim does not split into %d equal parts", n);
			for (int i = 0; i < n; i++) size[i] = q;
		} else {
			kir_expr *chunk = shk_let(&s, "chunk", SEL(s.k, even, q, ADD(s.k, q, I(s.k, 1))));
			kir_expr *last = shk_let(&s, "last", SUB(s.k, D, kir_e_mul(s.k, chunk, I(s.k, n - 1))));
			shk_fail_if(&s, CMP(s.k, KIR_LT, last, I(s.k, 0)), "the dim does not split into %d parts", n);
			for (int i = 0; i < n; i++) size[i] = i == n - 1 ? last : chunk;
		}
	}
	tbc_dim len[64];
	for (int i = 0; i < n; i++) {
		if (op->outputs[i]) {
			len[i] = op->outputs[i]->type.dims[a];
			if (!shk_out_dim(&s, i, a, size[i])) return false;
		} else if (!param_sym(&s, "part", i, size[i], &len[i])) {
			return false;
		}
	}
	if (!shk_end(&s)) return false;

	lk l;
	if (!lk_begin(&l, cx, "split")) return false;
	kir_buffer *src = data_in(&l, x);
	if (!src) return false;
	kir_kernel *k = l.k;
	kir_expr *xs[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	kir_expr *off = kir_e_index(k, 0);
	kir_block b = {0};
	for (int i = 0; i < n; i++) {
		const tbc_value *y = op->outputs[i];
		if (y && !(!len[i].sym && len[i].size == 0) && !empty_type(&y->type)) {
			kir_buffer *dst = data_out(&l, y);
			if (!dst) return false;
			kir_expr *ys[TBC_MAX_RANK];
			data_strides(&l, &y->type, ys);
			affine af;
			aff_init(&l, &af);
			af.src_off = kir_e_mul(k, off, xs[a]);
			for (int d = 0; d < r; d++) aff_dim(&af, lk_dim(&l, y->type.dims[d]), ys[d], xs[d]);
			kir_stmt *c = af.n ? aff_copy(&l, &af, dst, src) : kir_s_store(k, dst, af.dst_off, kir_e_load(k, src, af.src_off));
			if (c) kir_block_add(k, &b, c);
		} else if (y && !data_out(&l, y)) {
			return false;
		}
		off = kir_e_add(k, off, lk_dim(&l, len[i]));
	}
	return finish(&l, &b);
}

/* ---- Pad --------------------------------------------------------------------------
 * Per dim: begin and end pads; negative ones crop.  The shape kernel stores
 * the output dim and, as computed symbols, the cropped start lo, the kept
 * length n and the leading pad before; the data kernel is the static one's
 * with those as sizes. */
typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

static bool lower_pad_dyn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	if (!y) return true;
	static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
	const char *ms = tbc_attr_string(op, "mode", "constant");
	int mode = -1;
	for (int i = 0; i < 4; i++)
		if (!strcmp(ms, names[i])) mode = i;
	if (mode < 0) return lower_error(cx, op, "unknown mode '%s'", ms);
	bool has_axes = op->n_inputs > 3 && op->inputs[3];
	int np = param_len(cx, op, 1, 2 * TBC_MAX_RANK, "Pad's pads");
	int na = has_axes ? param_len(cx, op, 3, TBC_MAX_RANK, "Pad's axes") : r;
	if (np < 0 || na < 0) return false;
	if (np != 2 * na) return lower_error(cx, op, "pads has %d values, expected %d (2 per axis)", np, 2 * na);
	const tbc_value *cv = op->n_inputs > 2 ? op->inputs[2] : NULL;
	int64_t cn = cv ? tbc_data_static_len(&cv->type) : 0;
	if (cv && (cn < 0 || cn > 1 || cv->type.rank > 1))
		return lower_error(cx, op, "Pad with a constant_value of unknown size has no lowering yet");
	if (cv && cn == 1 && cv->type.dtype != x->type.dtype) return lower_error(cx, op, "constant_value must have the dtype of data");

	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *axes[TBC_MAX_RANK], *pads[2 * TBC_MAX_RANK];
	if (!load_axes(&s, has_axes ? op->inputs[3] : NULL, na, r, "an axis is repeated", axes)) return false;
	for (int i = 0; i < np; i++) {
		char name[16];
		snprintf(name, sizeof name, "pad%d", i);
		pads[i] = shk_let(&s, name, shk_elem(&s, op->inputs[1], i));
	}
	tbc_dim lo[TBC_MAX_RANK], keep[TBC_MAX_RANK], before[TBC_MAX_RANK];
	bool padded[TBC_MAX_RANK];
	kir_expr *zero = I(s.k, 0);
	for (int d = 0; d < r; d++) {
		padded[d] = maybe_axis(op, 3, na, r, d);
		if (!padded[d]) continue;
		kir_expr *B = zero, *E = zero;
		for (int i = na - 1; i >= 0; i--) {
			kir_expr *here = CMP(s.k, KIR_EQ, axes[i], I(s.k, d));
			B = SEL(s.k, here, pads[i], B);
			E = SEL(s.k, here, pads[na + i], E);
		}
		B = shk_let(&s, "begin", B);
		E = shk_let(&s, "end", E);
		kir_expr *X = shk_dim_of(&s, x, d);
		kir_expr *l_ = shk_let(&s, "lo", MAX(s.k, SUB(s.k, zero, B), zero));
		kir_expr *n_ = shk_let(&s, "n", SUB(s.k, SUB(s.k, X, l_), MAX(s.k, SUB(s.k, zero, E), zero)));
		kir_expr *o = shk_let(&s, "out", ADD(s.k, ADD(s.k, X, B), E));
		shk_fail_if(&s, OR(s.k, CMP(s.k, KIR_LT, n_, zero), CMP(s.k, KIR_LT, o, zero)), "pads shrink dim %d below zero", d);
		if (mode != PAD_CONSTANT)
			shk_fail_if(&s, AND(s.k, CMP(s.k, KIR_EQ, n_, zero), CMP(s.k, KIR_GT, o, zero)), "cannot pad the empty dim %d in this mode",
				d);
		if (!shk_out_dim(&s, 0, d, o)) return false;
		if (!param_sym(&s, "lo", d, l_, &lo[d]) || !param_sym(&s, "n", d, n_, &keep[d]) ||
		    !param_sym(&s, "before", d, MAX(s.k, B, zero), &before[d]))
			return false;
	}
	if (!shk_end(&s)) return false;

	lk l;
	if (!lk_begin(&l, cx, "pad")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	if (empty_type(&y->type)) {
		cx->n_kernels--;
		return true;
	}
	kir_kernel *k = l.k;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK], *LO[TBC_MAX_RANK], *N[TBC_MAX_RANK], *BE[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	for (int d = 0; d < r; d++) {
		LO[d] = padded[d] ? lk_dim(&l, lo[d]) : kir_e_index(k, 0);
		N[d] = padded[d] ? lk_dim(&l, keep[d]) : lk_dim(&l, x->type.dims[d]);
		BE[d] = padded[d] ? lk_dim(&l, before[d]) : kir_e_index(k, 0);
	}
	kir_block b = {0};
	if (mode == PAD_CONSTANT) {
		kir_expr *cval = kir_e_int(k, dst->dtype, 0);
		if (cv && cn == 1) {
			const tbc_tensor *c = tbc_input_const(op, 2);
			if (c) cval = data_bits(&l, c->dtype, c->data, 0);
			else {
				kir_buffer *cb = data_in(&l, cv);
				if (!cb) return false;
				cval = kir_e_load(k, cb, kir_e_index(k, 0));
			}
		}
		dloops lp = {0};
		kir_expr *i = dl_add(&l, &lp, data_prod(&l, &y->type, 0, r), false);
		kir_block_add(k, &b, dl_wrap(&l, &lp, kir_s_store(k, dst, i, cval)));
		affine a;
		aff_init(&l, &a);
		for (int d = 0; d < r; d++) {
			a.dst_off = kir_e_add(k, a.dst_off, kir_e_mul(k, BE[d], ys[d]));
			a.src_off = kir_e_add(k, a.src_off, kir_e_mul(k, LO[d], xs[d]));
			aff_dim(&a, N[d], ys[d], xs[d]);
		}
		kir_stmt *c = a.n ? aff_copy(&l, &a, dst, src) : kir_s_store(k, dst, a.dst_off, kir_e_load(k, src, a.src_off));
		if (c) kir_block_add(k, &b, c);
		return lk_end(&l, b.first);
	}
	/* Edge, wrap, reflect: each output coordinate maps to a source one. */
	dloops lp = {0};
	kir_expr *si = kir_e_index(k, 0), *di = kir_e_index(k, 0), *one = kir_e_index(k, 1), *z = kir_e_index(k, 0);
	for (int d = 0; d < r; d++) {
		kir_expr *o = dl_add(&l, &lp, lk_dim(&l, y->type.dims[d]), false);
		di = kir_e_add(k, di, kir_e_mul(k, o, ys[d]));
		if (!padded[d]) {
			si = kir_e_add(k, si, kir_e_mul(k, o, xs[d]));
			continue;
		}
		kir_expr *i = kir_e_binary(k, KIR_SUB, o, BE[d]), *sv;
		kir_expr *last = kir_e_binary(k, KIR_SUB, N[d], one);
		if (mode == PAD_EDGE) {
			sv = kir_e_binary(k, KIR_MAX, kir_e_binary(k, KIR_MIN, i, last), z);
		} else if (mode == PAD_WRAP) {
			sv = kir_e_binary(k, KIR_FLOORMOD, i, N[d]);
		} else { /* reflect: n == 1 gives period 0 and x mod 0 == 0 */
			kir_expr *p = kir_e_mul(k, kir_e_index(k, 2), last);
			kir_expr *m = kir_e_binary(k, KIR_FLOORMOD, i, p);
			sv = kir_e_binary(k, KIR_MIN, kir_e_binary(k, KIR_MIN, m, kir_e_binary(k, KIR_SUB, p, m)), last);
		}
		si = kir_e_add(k, si, kir_e_mul(k, kir_e_add(k, sv, LO[d]), xs[d]));
	}
	return lk_end(&l, dl_wrap(&l, &lp, kir_s_store(k, dst, di, kir_e_load(k, src, si))));
}

/* ---- OneHot -----------------------------------------------------------------------
 * depth: one number of any numeric dtype, truncated, positive; the rest is
 * OneHot's ordinary lowering. */
static bool shape_onehot(lower_cx *cx, const tbc_op *op) {
	const tbc_value *dv = op->inputs[1], *y = op->outputs[0];
	int a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), y->type.rank, &a))
		return lower_error(cx, op, "axis is out of range for rank %d", y->type.rank);
	if (tbc_data_static_len(&dv->type) != 1 || dv->type.rank > 1)
		return lower_error(cx, op, "OneHot's depth of unknown size has no lowering yet");
	tbc_dtype dt = dv->type.dtype;
	if (!tbc_dtype_is_int(dt) && !tbc_dtype_is_float(dt))
		return lower_error(cx, op, "OneHot's depth of %s has no lowering yet", tbc_dtype_name(dt));
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_buffer *b = lk_value(&s.l, dv);
	if (!b) return false;
	kir_expr *v = kir_e_load(s.k, b, I(s.k, 0)), *depth;
	const char *bad = "depth must be one positive number";
	if (tbc_dtype_is_float(dt)) {
		if (dt != TBC_DT_F64) v = kir_e_cast(s.k, TBC_DT_F64, dt == TBC_DT_F32 ? v : kir_e_cast(s.k, TBC_DT_F32, v));
		v = shk_let(&s, "depth_f", v);
		kir_expr *lim = kir_e_float(s.k, TBC_DT_F64, 9e18);
		kir_expr *ok = AND(s.k, CMP(s.k, KIR_LT, kir_e_unary(s.k, KIR_ABS, v), lim), kir_e_unary(s.k, KIR_NOT, kir_e_unary(s.k, KIR_ISNAN, v)));
		shk_fail_if(&s, kir_e_unary(s.k, KIR_NOT, ok), "%s", bad);
		depth = shk_let(&s, "depth", kir_e_cast(s.k, KIR_INDEX, kir_e_cast(s.k, TBC_DT_I64, SEL(s.k, ok, v, kir_e_float(s.k, TBC_DT_F64, 0)))));
	} else {
		depth = shk_let(&s, "depth", kir_e_cast(s.k, KIR_INDEX, v));
	}
	shk_fail_if(&s, CMP(s.k, KIR_LE, depth, I(s.k, 0)), "%s", bad);
	if (!shk_out_dim(&s, 0, a, depth)) return false;
	return shk_end(&s);
}

/* ---- Concat -----------------------------------------------------------------------
 * Inputs whose dims are known only while running (a carried value growing
 * in a Loop, a data-dependent slice): the output's axis dim is their sum and
 * every other dim must agree among them, as the interpreter checks; the
 * copy is Concat's ordinary lowering. */
static bool shape_concat(lower_cx *cx, const tbc_op *op) {
	const tbc_value *y = op->outputs[0];
	int r = y->type.rank, a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &a)) return lower_error(cx, op, "Concat's axis is out of range");
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	const tbc_value *first = NULL;
	kir_expr *sum = I(s.k, 0);
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *x = op->inputs[i];
		if (!x) continue;
		if (x->type.rank != r) return lower_error(cx, op, "Concat's inputs differ in rank");
		sum = kir_e_add(s.k, sum, shk_dim_of(&s, x, a));
		if (!first) {
			first = x;
			continue;
		}
		for (int d = 0; d < r; d++)
			if (d != a)
				shk_fail_if(&s, CMP(s.k, KIR_NE, shk_dim_of(&s, x, d), shk_dim_of(&s, first, d)),
					    "input %d differs from input 0 in dim %d", i, d);
	}
	if (!first) return lower_error(cx, op, "Concat needs an input");
	for (int d = 0; d < r; d++)
		if (!shk_out_dim(&s, 0, d, d == a ? shk_let(&s, "len", sum) : shk_dim_of(&s, first, d))) return false;
	return shk_end(&s);
}

/* ---- TopK -------------------------------------------------------------------------
 * K given while running: checked in [0, n]; the kernel is lower_data_topk. */
static bool shape_topk(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *kv = op->inputs[1];
	int a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), x->type.rank, &a))
		return lower_error(cx, op, "axis is out of range for rank %d", x->type.rank);
	if (!tbc_dtype_is_int(kv->type.dtype) || tbc_data_static_len(&kv->type) != 1 || kv->type.rank > 1)
		return lower_error(cx, op, "TopK's K must hold one integer");
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *K = shk_let(&s, "k", shk_elem(&s, kv, 0));
	shk_fail_if(&s, OR(s.k, CMP(s.k, KIR_LT, K, I(s.k, 0)), CMP(s.k, KIR_GT, K, shk_dim_of(&s, x, a))),
		"K must be in [0, n], the size of the axis");
	for (int o = 0; o < op->n_outputs; o++)
		if (op->outputs[o] && !shk_out_dim(&s, o, a, K)) return false;
	return shk_end(&s);
}

/* Whether value a goes before value b: the larger (smaller) first, NaN
 * counting as the largest value (the interpreter's tbc_red_cmp). */
static kir_expr *topk_before(kir_kernel *k, kir_expr *a, kir_expr *b, bool largest, bool is_float) {
	kir_expr *c = kir_e_cmp(k, largest ? KIR_GT : KIR_LT, a, b);
	if (!is_float) return c;
	kir_expr *na = kir_e_unary(k, KIR_ISNAN, a), *nb = kir_e_unary(k, KIR_ISNAN, b);
	kir_expr *nan_first = largest ? kir_e_binary(k, KIR_AND, na, kir_e_unary(k, KIR_NOT, nb))
				      : kir_e_binary(k, KIR_AND, nb, kir_e_unary(k, KIR_NOT, na));
	return kir_e_binary(k, KIR_OR, c, nan_first);
}

/* Each slice along the axis is scanned once, keeping its best K indices
 * sorted in the indices output (or a scratch buffer when that output is
 * omitted): an element better than the last kept one (or any while fewer
 * than K are kept) is inserted after every kept element not worse than it,
 * so equal values keep their index order like the interpreter's stable
 * sort.  O(n) per slice when few elements enter, O(n K) at worst; slices are
 * independent (the outer loops are parallel).  Then the values are
 * gathered. */
bool lower_data_topk(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *yv = op->outputs[0], *yi = op->n_outputs > 1 ? op->outputs[1] : NULL;
	int r = x->type.rank, a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", -1), r, &a)) return lower_error(cx, op, "axis is out of range for rank %d", r);
	tbc_dtype dt = x->type.dtype;
	bool is_float = tbc_dtype_is_float(dt);
	if (!is_float && !tbc_dtype_is_int(dt) && dt != TBC_DT_BOOL)
		return lower_error(cx, op, "TopK on %s has no lowering yet", tbc_dtype_name(dt));
	const tbc_value *shape_v = yv ? yv : yi;
	if (!shape_v) return true;
	bool largest = tbc_attr_int(op, "largest", 1) != 0;
	int ib;
	if (yi) ib = lower_result_buf(cx, yi);
	else {
		tbc_type t = shape_v->type;
		t.dtype = TBC_DT_I64;
		ib = lower_temp_buf(cx, &t, "topk_indices");
	}
	if (ib < 0) return false;
	lk l;
	if (!lk_begin(&l, cx, "topk")) return false;
	kir_buffer *src = lk_value(&l, x), *ind = lk_buf(&l, ib);
	if (!src || !ind) return false;
	if (empty_type(&shape_v->type)) {
		cx->n_kernels--;
		return true;
	}
	kir_kernel *k = l.k;
	kir_expr *O = data_prod(&l, &x->type, 0, a), *N = lk_dim(&l, x->type.dims[a]);
	kir_expr *IN = data_prod(&l, &x->type, a + 1, r), *K = lk_dim(&l, shape_v->type.dims[a]);
	kir_expr *zero = kir_e_index(k, 0), *one = kir_e_index(k, 1);
	dloops lp = {0};
	kir_expr *o = dl_add(&l, &lp, O, false), *i = dl_add(&l, &lp, IN, true);
	if (lp.n == 1) lp.seq[0] = false; /* one loop: parallel */
	/* value of the slice's element at position p, in a type that compares */
	kir_expr *xbase = kir_e_add(k, kir_e_mul(k, kir_e_mul(k, o, N), IN), i);
	kir_expr *ibase = kir_e_add(k, kir_e_mul(k, kir_e_mul(k, o, K), IN), i);
	tbc_dtype ct = dt == TBC_DT_BOOL ? TBC_DT_U8 : (is_float && dt != TBC_DT_F64) ? TBC_DT_F32 : dt;
#define XVAL(p) kir_e_cast(k, ct, kir_e_load(k, src, kir_e_add(k, xbase, kir_e_mul(k, (p), IN))))
#define SLOT(q) kir_e_add(k, ibase, kir_e_mul(k, (q), IN))
	kir_var *cnt = kir_var_new(k, "cnt", KIR_INDEX), *acc = kir_var_new(k, "take", TBC_DT_BOOL);
	kir_var *pos = kir_var_new(k, "pos", KIR_INDEX), *v = kir_var_new(k, "v", ct);
	kir_var *j = kir_var_new(k, "j", KIR_INDEX), *e = kir_var_new(k, "e", KIR_INDEX), *t = kir_var_new(k, "t", KIR_INDEX);
	kir_expr *C = kir_e_var(k, cnt), *P = kir_e_var(k, pos), *V = kir_e_var(k, v), *J = kir_e_var(k, j);
	kir_block scan = {0};
	kir_block_add(k, &scan, kir_s_set(k, v, XVAL(J)));
	kir_block_add(k, &scan, kir_s_set(k, acc, kir_e_cmp(k, KIR_LT, C, K)));
	/* Full: enter only when better than the last kept element. */
	kir_expr *last = XVAL(data_to_index(&l, kir_e_load(k, ind, SLOT(kir_e_binary(k, KIR_SUB, K, one)))));
	kir_block_add(k, &scan,
		      kir_s_if(k, kir_e_unary(k, KIR_NOT, kir_e_var(k, acc)), kir_s_set(k, acc, topk_before(k, V, last, largest, is_float)),
			       NULL));
	kir_block ins = {0};
	/* pos: the kept elements not worse than v (a prefix: the list is sorted). */
	kir_block_add(k, &ins, kir_s_set(k, pos, zero));
	kir_expr *kept = XVAL(data_to_index(&l, kir_e_load(k, ind, SLOT(kir_e_var(k, e)))));
	kir_expr *not_worse = kir_e_unary(k, KIR_NOT, topk_before(k, V, kept, largest, is_float));
	kir_block_add(k, &ins,
		      kir_s_for(k, e, zero, C, 1, KIR_LOOP_SEQUENTIAL,
				kir_s_set(k, pos, kir_e_add(k, P, kir_e_select(k, not_worse, one, zero)))));
	/* Shift [pos, m) one place on, from the back; m = min(cnt, K - 1). */
	kir_expr *m = kir_e_binary(k, KIR_MIN, C, kir_e_binary(k, KIR_SUB, K, one));
	kir_expr *q = kir_e_binary(k, KIR_SUB, kir_e_binary(k, KIR_SUB, m, one), kir_e_var(k, t));
	kir_block_add(k, &ins,
		      kir_s_for(k, t, zero, kir_e_binary(k, KIR_SUB, m, P), 1, KIR_LOOP_SEQUENTIAL,
				kir_s_store(k, ind, SLOT(kir_e_add(k, q, one)), kir_e_load(k, ind, SLOT(q)))));
	kir_block_add(k, &ins, kir_s_store(k, ind, SLOT(P), kir_e_cast(k, TBC_DT_I64, J)));
	kir_block_add(k, &ins, kir_s_set(k, cnt, kir_e_binary(k, KIR_MIN, kir_e_add(k, C, one), K)));
	kir_block_add(k, &scan, kir_s_if(k, kir_e_var(k, acc), ins.first, NULL));
	kir_block body = {0};
	kir_block_add(k, &body, kir_s_set(k, cnt, zero));
	/* K == 0 keeps nothing (and has no last element to compare with). */
	kir_expr *n_scan = kir_e_select(k, kir_e_cmp(k, KIR_GT, K, zero), N, zero);
	kir_block_add(k, &body, kir_s_for(k, j, zero, n_scan, 1, KIR_LOOP_SEQUENTIAL, scan.first));
	if (yv) {
		kir_buffer *vals = data_out(&l, yv), *xs = data_in(&l, x);
		if (!vals || !xs) return false;
		kir_var *t2 = kir_var_new(k, "t", KIR_INDEX);
		kir_expr *src_i = kir_e_add(k, xbase, kir_e_mul(k, data_to_index(&l, kir_e_load(k, ind, SLOT(kir_e_var(k, t2)))), IN));
		kir_block_add(k, &body,
			      kir_s_for(k, t2, zero, K, 1, KIR_LOOP_SEQUENTIAL,
					kir_s_store(k, vals, SLOT(kir_e_var(k, t2)), kir_e_load(k, xs, src_i))));
	}
#undef XVAL
#undef SLOT
	return lk_end(&l, dl_wrap(&l, &lp, body.first));
}

/* ---- CenterCropPad ------------------------------------------------------------------
 * The target sizes given while running; the kernel is
 * lower_data_center_crop_pad. */
static bool shape_center_crop_pad(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank;
	const int64_t *axes;
	int na = tbc_attr_ints(op, "axes", &axes);
	int want = na < 0 ? r : na;
	int n = param_len(cx, op, 1, TBC_MAX_RANK, "CenterCropPad's shape");
	if (n < 0) return false;
	if (n != want) return lower_error(cx, op, "shape has %d values, expected %d", n, want);
	bool seen[TBC_MAX_RANK] = {false};
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	for (int i = 0; i < want; i++) {
		int a = i;
		if (na >= 0 && !tbc_norm_axis(axes[i], r, &a)) return lower_error(cx, op, "axis %" PRId64 " is out of range for rank %d", axes[i], r);
		if (seen[a]) return lower_error(cx, op, "axis %d is repeated", a);
		seen[a] = true;
		kir_expr *v = shk_let(&s, "size", shk_elem(&s, op->inputs[1], i));
		shk_fail_if(&s, CMP(s.k, KIR_LT, v, I(s.k, 0)), "shape[%d] is negative", i);
		if (!shk_out_dim(&s, 0, a, v)) return false;
	}
	return shk_end(&s);
}

/* Output coordinate o reads input o + delta, delta = (X - Y) / 2 for a crop
 * and -((Y - X) / 2) for a pad; outside the input it is 0. */
bool lower_data_center_crop_pad(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	if (!y) return true;
	lk l;
	if (!lk_begin(&l, cx, "center_crop_pad")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	if (empty_type(&y->type)) {
		cx->n_kernels--;
		return true;
	}
	kir_kernel *k = l.k;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK], *zero = kir_e_index(k, 0), *two = kir_e_index(k, 2);
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	dloops lp = {0};
	kir_expr *si = zero, *di = zero, *inside = NULL;
	for (int d = 0; d < r; d++) {
		kir_expr *o = dl_add(&l, &lp, lk_dim(&l, y->type.dims[d]), false);
		di = kir_e_add(k, di, kir_e_mul(k, o, ys[d]));
		if (tbc_dim_eq(x->type.dims[d], y->type.dims[d])) {
			si = kir_e_add(k, si, kir_e_mul(k, o, xs[d]));
			continue;
		}
		kir_expr *X = lk_dim(&l, x->type.dims[d]), *Y = lk_dim(&l, y->type.dims[d]);
		kir_expr *delta = kir_e_select(k, kir_e_cmp(k, KIR_LE, Y, X), kir_e_binary(k, KIR_FLOORDIV, kir_e_binary(k, KIR_SUB, X, Y), two),
					       kir_e_binary(k, KIR_SUB, zero, kir_e_binary(k, KIR_FLOORDIV, kir_e_binary(k, KIR_SUB, Y, X), two)));
		kir_expr *i = kir_e_add(k, o, delta);
		kir_expr *in = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, i, zero), kir_e_cmp(k, KIR_LT, i, X));
		inside = inside ? kir_e_binary(k, KIR_AND, inside, in) : in;
		si = kir_e_add(k, si, kir_e_mul(k, i, xs[d]));
	}
	kir_stmt *st = data_guarded_store(&l, dst, di, inside, kir_e_load(k, src, si));
	return lk_end(&l, r ? dl_wrap(&l, &lp, st) : st);
}

/* ---- AffineGrid -------------------------------------------------------------------
 * size (N, C, [D,] H, W) given while running: checked positive, N against
 * theta's batch; the kernel is lower_data_affine_grid. */
static bool shape_affine_grid(lower_cx *cx, const tbc_op *op) {
	const tbc_value *th = op->inputs[0], *sz = op->inputs[1];
	int len = param_len(cx, op, 1, 5, "AffineGrid's size");
	if (len < 0) return false;
	if (len != 4 && len != 5) return lower_error(cx, op, "size must hold 4 or 5 values");
	int r = len - 2;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *N = shk_let(&s, "n", shk_elem(&s, sz, 0));
	shk_fail_if(&s, CMP(s.k, KIR_NE, N, shk_dim_of(&s, th, 0)), "theta must be (N, %d, %d) with N = size[0]", r, r + 1);
	if (!shk_out_dim(&s, 0, 0, N)) return false;
	for (int i = 0; i < r; i++) {
		kir_expr *v = shk_let(&s, "size", shk_elem(&s, sz, 2 + i));
		shk_fail_if(&s, CMP(s.k, KIR_LE, v, I(s.k, 0)), "size values must be positive");
		if (!shk_out_dim(&s, 0, 1 + i, v)) return false;
	}
	return shk_end(&s);
}

/* grid[n, i..., k] = sum_j theta[n, k, j] * base[j] in f64 as the
 * interpreter: base holds the normalised coordinates, x (the last dim)
 * first, then 1. */
bool lower_data_affine_grid(lower_cx *cx, const tbc_op *op) {
	const tbc_value *th = op->inputs[0], *y = op->outputs[0];
	int r = y->type.rank - 2;
	tbc_dtype dt = th->type.dtype;
	if (r < 2 || r > 3 || th->type.rank != 3 || y->type.dims[r + 1].sym || y->type.dims[r + 1].size != r ||
	    !tbc_dim_eq(th->type.dims[1], (tbc_dim){r, NULL}) || !tbc_dim_eq(th->type.dims[2], (tbc_dim){r + 1, NULL}))
		return lower_error(cx, op, "theta must be (N, %d, %d) for a %d-D size", r, r + 1, r);
	if (!tbc_dtype_is_float(dt)) return lower_error(cx, op, "AffineGrid on %s has no lowering yet", tbc_dtype_name(dt));
	bool align = tbc_attr_int(op, "align_corners", 0) != 0;
	lk l;
	if (!lk_begin(&l, cx, "affine_grid")) return false;
	int ob = lower_result_buf(cx, y);
	kir_buffer *tb = lk_value(&l, th), *dst = ob >= 0 ? lk_buf(&l, ob) : NULL;
	if (!tb || !dst) return false;
	if (empty_type(&y->type)) {
		cx->n_kernels--;
		return true;
	}
	kir_kernel *k = l.k;
	dloops lp = {0};
	kir_expr *n = dl_add(&l, &lp, lk_dim(&l, y->type.dims[0]), false), *iv[3], *pl = kir_e_index(k, 0);
	for (int d = 0; d < r; d++) {
		iv[d] = dl_add(&l, &lp, lk_dim(&l, y->type.dims[1 + d]), false);
		pl = kir_e_add(k, kir_e_mul(k, pl, lk_dim(&l, y->type.dims[1 + d])), iv[d]);
	}
	kir_expr *pts = data_prod(&l, &y->type, 1, r + 1);
	kir_expr *base[4];
	kir_expr *m1 = kir_e_float(k, TBC_DT_F64, -1.0), *two = kir_e_float(k, TBC_DT_F64, 2.0);
	for (int j = 0; j < r; j++) {
		int d = r - 1 - j;
		kir_expr *len = kir_e_cast(k, TBC_DT_F64, kir_e_cast(k, TBC_DT_I64, lk_dim(&l, y->type.dims[1 + d])));
		kir_expr *i = kir_e_cast(k, TBC_DT_F64, kir_e_cast(k, TBC_DT_I64, iv[d]));
		if (align) {
			kir_expr *step = kir_e_binary(k, KIR_DIV, two, kir_e_binary(k, KIR_SUB, len, kir_e_float(k, TBC_DT_F64, 1.0)));
			kir_expr *v = kir_e_binary(k, KIR_ADD, m1, kir_e_binary(k, KIR_MUL, i, step));
			base[j] = kir_e_select(k, kir_e_cmp(k, KIR_EQ, len, kir_e_float(k, TBC_DT_F64, 1.0)), m1, v);
		} else {
			kir_expr *step = kir_e_binary(k, KIR_DIV, two, len);
			kir_expr *half = kir_e_binary(k, KIR_DIV, step, two);
			base[j] = kir_e_binary(k, KIR_ADD, kir_e_binary(k, KIR_ADD, m1, half), kir_e_binary(k, KIR_MUL, i, step));
		}
	}
	base[r] = kir_e_float(k, TBC_DT_F64, 1.0);
	kir_block b = {0};
	for (int c = 0; c < r; c++) {
		kir_expr *acc = kir_e_float(k, TBC_DT_F64, 0.0);
		for (int j = 0; j <= r; j++) {
			kir_expr *t = kir_e_load(k, tb, kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, n, kir_e_index(k, r)), kir_e_index(k, c)),
									 kir_e_index(k, r + 1)),
							 kir_e_index(k, j)));
			if (dt != TBC_DT_F32 && dt != TBC_DT_F64) t = kir_e_cast(k, TBC_DT_F32, t);
			acc = kir_e_binary(k, KIR_ADD, acc, kir_e_binary(k, KIR_MUL, kir_e_cast(k, TBC_DT_F64, t), base[j]));
		}
		kir_expr *at = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, n, pts), pl), kir_e_index(k, r)), kir_e_index(k, c));
		kir_block_add(k, &b, kir_s_store(k, dst, at, kir_e_cast(k, dt, acc)));
	}
	return lk_end(&l, dl_wrap(&l, &lp, b.first));
}

/* ---- Col2Im ------------------------------------------------------------------------
 * image_shape and block_shape given while running.  The shape kernel checks
 * them (positive, the blocks fitting the input) and stores the image dims,
 * C, and as computed symbols the block sizes and the blocks per dim; the
 * kernel gathers: each image point sums, in block order as the interpreter
 * accumulates, the block elements landing on it (f64 for floats, wrapping
 * 64-bit integers).  Constant shapes take the same path (the shape kernel
 * then checks the dims instead of storing them). */
bool lower_data_col2im(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (!y) return true;
	int nsp = param_len(cx, op, 1, CONV_MAX_SPATIAL, "Col2Im's image_shape");
	int nb = param_len(cx, op, 2, CONV_MAX_SPATIAL, "Col2Im's block_shape");
	if (nsp < 0 || nb < 0) return false;
	if (nb != nsp || x->type.rank != 3 || y->type.rank != nsp + 2)
		return lower_error(cx, op, "image_shape and block_shape must be 1-D of the same length");
	tbc_dtype dt = x->type.dtype;
	if (!tbc_dtype_is_float(dt) && !tbc_dtype_is_int(dt)) return lower_error(cx, op, "Col2Im on %s has no lowering yet", tbc_dtype_name(dt));
	int64_t ones[CONV_MAX_SPATIAL] = {1, 1, 1, 1, 1, 1};
	conv_geom g;
	const char *err = conv_geom_read(&g, op, nsp, ones, true, false);
	if (err) return lower_error(cx, op, "%s", err);
	if (g.auto_pad != AUTOPAD_NOTSET && g.auto_pad != AUTOPAD_VALID)
		return lower_error(cx, op, "Col2Im with auto_pad SAME has no lowering yet");
	if (g.auto_pad == AUTOPAD_VALID)
		for (int i = 0; i < nsp; i++) g.pad_begin[i] = g.pad_end[i] = 0;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *img[CONV_MAX_SPATIAL], *blk[CONV_MAX_SPATIAL], *bl = I(s.k, 1), *L = I(s.k, 1);
	tbc_dim kdim[CONV_MAX_SPATIAL], ldim[CONV_MAX_SPATIAL];
	for (int i = 0; i < nsp; i++) {
		img[i] = shk_let(&s, "image", shk_elem(&s, op->inputs[1], i));
		blk[i] = shk_let(&s, "block", shk_elem(&s, op->inputs[2], i));
	}
	for (int i = 0; i < nsp; i++) shk_fail_if(&s, CMP(s.k, KIR_LE, blk[i], I(s.k, 0)), "block_shape values must be positive");
	for (int i = 0; i < nsp; i++) shk_fail_if(&s, CMP(s.k, KIR_LE, img[i], I(s.k, 0)), "image_shape values must be positive");
	for (int i = 0; i < nsp; i++) {
		kir_expr *eff = ADD(s.k, kir_e_mul(s.k, SUB(s.k, blk[i], I(s.k, 1)), I(s.k, g.dil[i])), I(s.k, 1));
		kir_expr *num = shk_let(&s, "num", SUB(s.k, ADD(s.k, img[i], I(s.k, g.pad_begin[i] + g.pad_end[i])), eff));
		shk_fail_if(&s, CMP(s.k, KIR_LT, num, I(s.k, 0)), "the window (kernel_shape with dilations) is larger than the padded input");
		kir_expr *li = shk_let(&s, "blocks", ADD(s.k, kir_e_binary(s.k, KIR_FLOORDIV, MAX(s.k, num, I(s.k, 0)), I(s.k, g.stride[i])), I(s.k, 1)));
		bl = shk_let(&s, "bl", kir_e_mul(s.k, bl, blk[i]));
		L = shk_let(&s, "l", kir_e_mul(s.k, L, li));
		if (!param_sym(&s, "block", i, blk[i], &kdim[i]) || !param_sym(&s, "blocks", i, li, &ldim[i])) return false;
	}
	kir_expr *C1 = shk_dim_of(&s, x, 1);
	shk_fail_if(&s, OR(s.k, CMP(s.k, KIR_NE, kir_e_binary(s.k, KIR_FLOORMOD, C1, bl), I(s.k, 0)), CMP(s.k, KIR_NE, shk_dim_of(&s, x, 2), L)),
		"input is (N, C, L) but the blocks need (N, C*prod(block_shape), blocks)");
	if (!shk_out_dim(&s, 0, 0, shk_dim_of(&s, x, 0)) || !shk_out_dim(&s, 0, 1, kir_e_binary(s.k, KIR_FLOORDIV, C1, bl))) return false;
	for (int i = 0; i < nsp; i++)
		if (!shk_out_dim(&s, 0, 2 + i, img[i])) return false;
	if (!shk_end(&s)) return false;

	lk l;
	if (!lk_begin(&l, cx, "col2im")) return false;
	int ob = lower_result_buf(cx, y);
	kir_buffer *src = lk_value(&l, x), *dst = ob >= 0 ? lk_buf(&l, ob) : NULL;
	if (!src || !dst) return false;
	if (empty_type(&y->type)) {
		cx->n_kernels--;
		return true;
	}
	kir_kernel *k = l.k;
	bool is_float = tbc_dtype_is_float(dt);
	tbc_dtype at = is_float ? TBC_DT_F64 : TBC_DT_I64;
	kir_expr *zero = kir_e_index(k, 0);
	dloops lp = {0};
	kir_expr *nc = dl_add(&l, &lp, kir_e_mul(k, lk_dim(&l, y->type.dims[0]), lk_dim(&l, y->type.dims[1])), false);
	kir_expr *iv[CONV_MAX_SPATIAL], *pix = zero;
	for (int d = 0; d < nsp; d++) {
		iv[d] = dl_add(&l, &lp, lk_dim(&l, y->type.dims[2 + d]), false);
		pix = kir_e_add(k, kir_e_mul(k, pix, lk_dim(&l, y->type.dims[2 + d])), iv[d]);
	}
	kir_expr *C = lk_dim(&l, y->type.dims[1]);
	kir_expr *n = kir_e_binary(k, KIR_FLOORDIV, nc, C), *c = kir_e_binary(k, KIR_FLOORMOD, nc, C);
	kir_expr *blx = kir_e_index(k, 1), *Lx = kir_e_index(k, 1);
	for (int d = 0; d < nsp; d++) blx = kir_e_mul(k, blx, lk_dim(&l, kdim[d])), Lx = kir_e_mul(k, Lx, lk_dim(&l, ldim[d]));
	kir_var *acc = kir_var_new(k, "acc", at), *kv[CONV_MAX_SPATIAL];
	kir_expr *kl = zero, *li = zero, *valid = NULL;
	for (int d = 0; d < nsp; d++) {
		kv[d] = kir_var_new(k, "kk", KIR_INDEX);
		kir_expr *kd = kir_e_var(k, kv[d]), *S = kir_e_index(k, g.stride[d]);
		kl = kir_e_add(k, kir_e_mul(k, kl, lk_dim(&l, kdim[d])), kd);
		kir_expr *t = kir_e_binary(k, KIR_SUB, kir_e_add(k, iv[d], kir_e_index(k, g.pad_begin[d])), kir_e_mul(k, kd, kir_e_index(k, g.dil[d])));
		kir_expr *o = kir_e_binary(k, KIR_FLOORDIV, t, S), *Ld = lk_dim(&l, ldim[d]);
		kir_expr *ok = kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_GE, t, zero),
					    kir_e_binary(k, KIR_AND, kir_e_cmp(k, KIR_EQ, kir_e_binary(k, KIR_FLOORMOD, t, S), zero), kir_e_cmp(k, KIR_LT, o, Ld)));
		valid = valid ? kir_e_binary(k, KIR_AND, valid, ok) : ok;
		li = kir_e_add(k, kir_e_mul(k, li, Ld), o);
	}
	kir_expr *xi = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, n, lk_dim(&l, x->type.dims[1])), kir_e_add(k, kir_e_mul(k, c, blx), kl)), Lx), li);
	kir_expr *v = kir_e_load(k, src, xi);
	if (is_float && dt != TBC_DT_F32 && dt != TBC_DT_F64) v = kir_e_cast(k, TBC_DT_F32, v);
	kir_stmt *body = kir_s_if(k, valid, kir_s_set(k, acc, kir_e_binary(k, KIR_ADD, kir_e_var(k, acc), kir_e_cast(k, at, v))), NULL);
	for (int d = nsp - 1; d >= 0; d--) body = kir_s_for(k, kv[d], zero, lk_dim(&l, kdim[d]), 1, KIR_LOOP_SEQUENTIAL, body);
	kir_block b = {0};
	kir_block_add(k, &b, kir_s_set(k, acc, is_float ? kir_e_float(k, at, 0.0) : kir_e_int(k, at, 0)));
	kir_block_add(k, &b, body);
	kir_expr *oi = kir_e_add(k, kir_e_mul(k, nc, data_prod(&l, &y->type, 2, nsp + 2)), pix);
	kir_block_add(k, &b, kir_s_store(k, dst, oi, kir_e_cast(k, dt, kir_e_var(k, acc))));
	return lk_end(&l, dl_wrap(&l, &lp, b.first));
}

/* ---- Entry ------------------------------------------------------------------------*/
lower_result lower_dyn_data(lower_cx *cx, const tbc_op *op) {
	bool (*fn)(lower_cx *, const tbc_op *) = NULL;
	bool complete = false; /* lowers data too (else the ordinary lowering follows) */
	switch (op->code) {
	case TBC_OP_Slice: fn = lower_slice_dyn, complete = true; break;
	case TBC_OP_Pad: fn = lower_pad_dyn, complete = true; break;
	case TBC_OP_Split: fn = lower_split_dyn, complete = true; break;
	case TBC_OP_OneHot: fn = shape_onehot; break;
	case TBC_OP_Concat: fn = shape_concat; break;
	case TBC_OP_TopK: fn = shape_topk; break;
	case TBC_OP_CenterCropPad: fn = shape_center_crop_pad; break;
	case TBC_OP_AffineGrid: fn = shape_affine_grid; break;
	case TBC_OP_Col2Im: fn = lower_data_col2im, complete = true; break;
	default: return LOWER_NOT_MINE;
	}
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && op->inputs[i]->type.rank < 0) {
			lower_error(cx, op, "an input of unknown rank has no lowering yet");
			return LOWER_FAILED;
		}
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && (op->outputs[i]->type.rank < 0 || data_storage_type(op->outputs[i]->type.dtype) == TBC_DT_UNDEFINED)) {
			lower_error(cx, op, "op %s with this output has no lowering yet", tbc_ops[op->code].onnx_name);
			return LOWER_FAILED;
		}
	if (!fn(cx, op)) return LOWER_FAILED;
	return complete ? LOWER_OK : LOWER_SHAPED;
}
