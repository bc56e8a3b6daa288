/* Data movement: Transpose, Slice, Concat, Split, Expand, Tile, DepthToSpace,
 * SpaceToDepth, with static shapes and with shapes given by a tensor's values
 * while running (Slice's starts/ends/axes/steps, Split's sizes, Concat of
 * such inputs).  Each op's data kernel copies storage bits (affine copies);
 * a dynamic one first runs its shape kernel, which checks the parameters as
 * the interpreter does (ir/kernels/data_layout.c) and stores the output dims
 * and per-dim parameters into computed symbols (docs/lower-dynamic.md). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_data.h"
#include "codegen/lower/lower_dyn.h"
#include "ir/kernels/conv_util.h"
#include "ir/kernels/data.h"

/* ---- Transpose ---------------------------------------------------------------*/
bool lower_data_transpose(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank, perm[TBC_MAX_RANK];
	const int64_t *p;
	int np = tbc_attr_ints(op, "perm", &p);
	for (int d = 0; d < r; d++) perm[d] = np == r ? (int)p[d] : r - 1 - d;
	for (int d = 0; d < r; d++)
		if (perm[d] < 0 || perm[d] >= r) return lower_error(cx, op, "Transpose's perm is out of range");
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	for (int d = 0; d < r; d++) aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], xs[perm[d]]);
	kir_block b = {0};
	if (r == 0) data_add(&l, &b, kir_s_store(l.k, dst, kir_e_index(l.k, 0), kir_e_load(l.k, src, kir_e_index(l.k, 0))));
	else data_add(&l, &b, aff_copy(&l, &a, dst, src));
	return data_finish(&l, &b);
}

/* A whole-tensor copy through an affine box (rank 0 included). */
static kir_stmt *copy_box(lk *l, affine *a, kir_buffer *dst, kir_buffer *src) {
	if (a->n == 0) return kir_s_store(l->k, dst, a->dst_off, kir_e_load(l->k, src, a->src_off));
	return aff_copy(l, a, dst, src);
}

/* ---- Slice -------------------------------------------------------------------*/
bool lower_data_slice(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	int64_t v[4][TBC_MAX_RANK];
	int cnt[4] = {0, 0, 0, 0};
	for (int i = 0; i < 4; i++) {
		if (i + 1 >= op->n_inputs || !op->inputs[i + 1]) {
			cnt[i] = -1;
			continue;
		}
		cnt[i] = tbc_data_const_ints(op, i + 1, v[i], TBC_MAX_RANK);
		if (cnt[i] < 0)
			return lower_error(cx, op, "Slice with non-constant starts, ends, axes or steps has no lowering yet");
	}
	int n = cnt[0];
	if (cnt[1] != n || (cnt[2] >= 0 && cnt[2] != n) || (cnt[3] >= 0 && cnt[3] != n) || n > r)
		return lower_error(cx, op, "Slice's starts, ends, axes and steps disagree in length");
	int64_t start[TBC_MAX_RANK], step[TBC_MAX_RANK];
	for (int d = 0; d < r; d++) start[d] = 0, step[d] = 1;
	for (int i = 0; i < n; i++) {
		int a = i;
		if (cnt[2] >= 0 && !tbc_norm_axis(v[2][i], r, &a)) return lower_error(cx, op, "Slice's axis is out of range");
		int64_t s = v[0][i], st = cnt[3] >= 0 ? v[3][i] : 1;
		if (st == 0) return lower_error(cx, op, "Slice's step is 0");
		tbc_dim dim = x->type.dims[a];
		if (dim.sym) {
			/* The shape rule keeps a symbolic dim only for the whole-dim slice. */
			if (!tbc_dim_eq(dim, y->type.dims[a]) || s != 0 || st != 1)
				return lower_error(cx, op, "Slice of a symbolic dim has no lowering yet");
			continue;
		}
		int64_t D = dim.size;
		if (s < 0) s += D;
		if (st > 0) s = s < 0 ? 0 : s > D ? D : s;
		else s = s < 0 ? 0 : s > D - 1 ? D - 1 : s;
		start[a] = s;
		step[a] = st;
	}
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	bool empty = false;
	for (int d = 0; d < r; d++) {
		empty |= !y->type.dims[d].sym && y->type.dims[d].size == 0;
		a.src_off = kir_e_add(l.k, a.src_off, kir_e_mul(l.k, kir_e_index(l.k, start[d]), xs[d]));
		aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], kir_e_mul(l.k, xs[d], kir_e_index(l.k, step[d])));
	}
	kir_block b = {0};
	if (!empty) data_add(&l, &b, copy_box(&l, &a, dst, src));
	return data_finish(&l, &b);
}

/* ---- Concat / Split ------------------------------------------------------------*/
bool lower_data_concat(lower_cx *cx, const tbc_op *op) {
	const tbc_value *y = op->outputs[0];
	int r = y->type.rank, ax;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &ax)) return lower_error(cx, op, "Concat's axis is out of range");
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *dst = data_out(&l, y);
	if (!dst) return false;
	kir_expr *ys[TBC_MAX_RANK];
	data_strides(&l, &y->type, ys);
	kir_expr *off = kir_e_index(l.k, 0);
	kir_block b = {0};
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *x = op->inputs[i];
		tbc_dim len = x->type.dims[ax];
		if (!len.sym && len.size == 0) continue;
		kir_buffer *src = data_in(&l, x);
		if (!src) return false;
		kir_expr *xs[TBC_MAX_RANK];
		data_strides(&l, &x->type, xs);
		affine a;
		aff_init(&l, &a);
		a.dst_off = kir_e_mul(l.k, off, ys[ax]);
		for (int d = 0; d < r; d++) aff_dim(&a, lk_dim(&l, x->type.dims[d]), ys[d], xs[d]);
		data_add(&l, &b, copy_box(&l, &a, dst, src));
		off = kir_e_add(l.k, off, lk_dim(&l, len));
	}
	return data_finish(&l, &b);
}

bool lower_data_split(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank, ax;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &ax)) return lower_error(cx, op, "Split's axis is out of range");
	for (int i = 0; i < op->n_outputs; i++)
		if (!op->outputs[i]) return lower_error(cx, op, "Split with an omitted output has no lowering yet");
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x);
	if (!src) return false;
	kir_expr *xs[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	kir_expr *off = kir_e_index(l.k, 0);
	kir_block b = {0};
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *y = op->outputs[i];
		kir_buffer *dst = data_out(&l, y);
		if (!dst) return false;
		tbc_dim len = y->type.dims[ax];
		kir_expr *ys[TBC_MAX_RANK];
		data_strides(&l, &y->type, ys);
		affine a;
		aff_init(&l, &a);
		a.src_off = kir_e_mul(l.k, off, xs[ax]);
		for (int d = 0; d < r; d++) aff_dim(&a, lk_dim(&l, y->type.dims[d]), ys[d], xs[d]);
		if (len.sym || len.size > 0) data_add(&l, &b, copy_box(&l, &a, dst, src));
		off = kir_e_add(l.k, off, lk_dim(&l, len));
	}
	return data_finish(&l, &b);
}

/* ---- Expand / Tile ---------------------------------------------------------------*/
bool lower_data_expand(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	nest n;
	const tbc_type *ops[1] = {&x->type};
	if (!src || !dst || !nest_build(&l, &n, &y->type, 1, ops)) return false;
	kir_block_add(l.k, &n.body, kir_s_store(l.k, dst, n.linear, kir_e_load(l.k, src, nest_index(&l, &n, &x->type))));
	return lk_end(&l, nest_finish(&l, &n));
}

/* Each output dim d splits into (repeat, position): out = rep * D + pos. */
bool lower_data_tile(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK];
	data_strides(&l, &x->type, xs);
	data_strides(&l, &y->type, ys);
	affine a;
	aff_init(&l, &a);
	bool empty = false;
	for (int d = 0; d < r; d++) {
		tbc_dim xd = x->type.dims[d], yd = y->type.dims[d];
		kir_expr *reps;
		if (tbc_dim_eq(xd, yd)) reps = kir_e_index(l.k, 1);
		else if (!xd.sym && !yd.sym) reps = kir_e_index(l.k, xd.size ? yd.size / xd.size : 0);
		else { /* a symbolic dim (a dynamic batch, or repeats given while running) */
			kir_expr *xs_ = lk_dim(&l, xd);
			kir_expr *zero = kir_e_cmp(l.k, KIR_EQ, xs_, kir_e_index(l.k, 0));
			reps = kir_e_select(l.k, zero, kir_e_index(l.k, 0),
					    kir_e_binary(l.k, KIR_FLOORDIV, lk_dim(&l, yd),
							 kir_e_select(l.k, zero, kir_e_index(l.k, 1), xs_)));
		}
		empty |= (!xd.sym && xd.size == 0) || (!yd.sym && yd.size == 0);
		kir_expr *D = lk_dim(&l, xd);
		aff_dim(&a, reps, kir_e_mul(l.k, D, ys[d]), kir_e_index(l.k, 0));
		aff_dim(&a, D, ys[d], xs[d]);
	}
	kir_block b = {0};
	if (!empty) data_add(&l, &b, copy_box(&l, &a, dst, src));
	return data_finish(&l, &b);
}

/* ---- DepthToSpace / SpaceToDepth ----------------------------------------------
 * A reshape to 6 dims, a transpose, a reshape: the transposed box is an affine
 * copy whose source strides are the 6-dim view's. */
bool lower_data_depth_space(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (x->type.rank != 4) return lower_error(cx, op, "%s needs a rank-4 input", tbc_ops[op->code].onnx_name);
	int64_t bs = tbc_attr_int(op, "blocksize", 0);
	if (bs <= 0) return lower_error(cx, op, "blocksize must be positive");
	lk l;
	if (!data_begin(&l, cx, op)) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	kir_kernel *k = l.k;
	kir_expr *B = kir_e_index(k, bs);
	kir_expr *N = lk_dim(&l, x->type.dims[0]), *H = lk_dim(&l, x->type.dims[2]), *W = lk_dim(&l, x->type.dims[3]);
	kir_expr *view[6];
	int perm[6];
	if (op->code == TBC_OP_DepthToSpace) {
		kir_expr *C = lk_dim(&l, y->type.dims[1]);
		bool crd = !strcmp(tbc_attr_string(op, "mode", "DCR"), "CRD");
		if (crd) {
			kir_expr *v[6] = {N, C, B, B, H, W};
			static const int p[6] = {0, 1, 4, 2, 5, 3};
			memcpy(view, v, sizeof v);
			memcpy(perm, p, sizeof p);
		} else {
			kir_expr *v[6] = {N, B, B, C, H, W};
			static const int p[6] = {0, 3, 4, 1, 5, 2};
			memcpy(view, v, sizeof v);
			memcpy(perm, p, sizeof p);
		}
	} else {
		kir_expr *C = lk_dim(&l, x->type.dims[1]);
		kir_expr *h = lk_dim(&l, y->type.dims[2]), *w = lk_dim(&l, y->type.dims[3]);
		kir_expr *v[6] = {N, C, h, B, w, B};
		static const int p[6] = {0, 3, 5, 1, 2, 4};
		memcpy(view, v, sizeof v);
		memcpy(perm, p, sizeof p);
	}
	kir_expr *vs[6], *s = kir_e_index(k, 1);
	for (int d = 5; d >= 0; d--) {
		vs[d] = s;
		s = kir_e_mul(k, s, view[d]);
	}
	kir_expr *os[6];
	s = kir_e_index(k, 1);
	for (int d = 5; d >= 0; d--) {
		os[d] = s;
		s = kir_e_mul(k, s, view[perm[d]]);
	}
	affine a;
	aff_init(&l, &a);
	bool empty = false;
	for (int d = 0; d < 4; d++) empty |= !y->type.dims[d].sym && y->type.dims[d].size == 0;
	for (int d = 0; d < 6; d++) aff_dim(&a, view[perm[d]], os[d], vs[perm[d]]);
	kir_block b = {0};
	if (!empty) data_add(&l, &b, copy_box(&l, &a, dst, src));
	return data_finish(&l, &b);
}

/* ---- Slice ------------------------------------------------------------------------
 * Per input dim d the shape kernel computes, as the interpreter's slice_dim,
 * the first element, the step and the count; the count is the output dim,
 * the first element and the step (clamped to [-(D+1), D+1], which selects
 * the same elements, and stored biased by D+1 so it is never negative)
 * become computed symbols.  The data kernel is an affine copy. */
bool lower_data_slice_dyn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	if (!y) return true;
	bool has_axes = op->n_inputs > 3 && op->inputs[3], has_steps = op->n_inputs > 4 && op->inputs[4];
	int n = data_param_len(cx, op, 1, TBC_MAX_RANK, "Slice's starts");
	int ne = data_param_len(cx, op, 2, TBC_MAX_RANK, "Slice's ends");
	int na = has_axes ? data_param_len(cx, op, 3, TBC_MAX_RANK, "Slice's axes") : n;
	int nt = has_steps ? data_param_len(cx, op, 4, TBC_MAX_RANK, "Slice's steps") : n;
	if (n < 0 || ne < 0 || na < 0 || nt < 0) return false;
	if (ne != n) return lower_error(cx, op, "starts has %d values, ends %d", n, ne);
	if (n > r || na != n || nt != n)
		return lower_error(cx, op, "starts, ends, axes and steps must have the same length, at most the rank %d", r);
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *axes[TBC_MAX_RANK], *st[TBC_MAX_RANK], *en[TBC_MAX_RANK], *sp[TBC_MAX_RANK];
	if (!data_load_axes(&s, has_axes ? op->inputs[3] : NULL, n, r, "an axis is sliced twice", axes)) return false;
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
		sliced[d] = data_maybe_axis(op, 3, n, r, d);
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
		T = shk_let(&s, "t", data_clamp(&s, T, SUB(s.k, zero, Dp1), Dp1));
		S = shk_let(&s, "s", SEL(s.k, CMP(s.k, KIR_LT, S, zero), ADD(s.k, S, D), S));
		E = shk_let(&s, "e", SEL(s.k, CMP(s.k, KIR_LT, E, zero), ADD(s.k, E, D), E));
		kir_expr *pos = CMP(s.k, KIR_GT, T, zero);
		kir_expr *Dm1 = SUB(s.k, D, I(s.k, 1));
		kir_expr *sp_ = data_clamp(&s, S, zero, D), *ep = data_clamp(&s, E, zero, D);
		kir_expr *sn = data_clamp(&s, S, zero, Dm1), *enn = data_clamp(&s, E, m1, Dm1);
		kir_expr *a = shk_let(&s, "a", SEL(s.k, pos, sp_, sn)), *b = shk_let(&s, "b", SEL(s.k, pos, ep, enn));
		/* Elements from a towards b (exclusive) by |t|. */
		kir_expr *gap = SEL(s.k, pos, SUB(s.k, b, a), SUB(s.k, a, b));
		kir_expr *mag = SEL(s.k, pos, T, SUB(s.k, zero, T));
		kir_expr *count = SEL(s.k, CMP(s.k, KIR_GT, gap, zero),
				      ADD(s.k, kir_e_binary(s.k, KIR_DIV, SUB(s.k, gap, I(s.k, 1)), mag), I(s.k, 1)), zero);
		count = shk_let(&s, "count", count);
		if (!shk_out_dim(&s, 0, d, count)) return false;
		if (!data_param_sym(&s, "first", d, MAX(s.k, a, zero), &first[d])) return false;
		if (!data_param_sym(&s, "step", d, ADD(s.k, T, Dp1), &step[d])) return false;
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
	if (!data_empty_type(&y->type)) {
		kir_stmt *c = a.n ? aff_copy(&l, &a, dst, src) : kir_s_store(k, dst, a.dst_off, kir_e_load(k, src, a.src_off));
		if (c) kir_block_add(k, &b, c);
	}
	return data_finish(&l, &b);
}

/* ---- Split ------------------------------------------------------------------------
 * The sizes given while running (or the default parts of a dim known only
 * while running) become the output dims; the size of an omitted output (the
 * pipeline drops unused ones) becomes a computed symbol, so the copies of
 * the others start at the right offset. */
bool lower_data_split_dyn(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank, n = op->n_outputs, a;
	if (!tbc_norm_axis(tbc_attr_int(op, "axis", 0), r, &a)) return lower_error(cx, op, "axis is out of range for rank %d", r);
	if (n > 64) return lower_error(cx, op, "Split into more than 64 parts has no lowering yet");
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *D = shk_let(&s, "dim", shk_dim_of(&s, x, a));
	kir_expr *size[64];
	if (op->n_inputs > 1 && op->inputs[1]) {
		int k = data_param_len(cx, op, 1, 64, "Split's split");
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
		} else if (!data_param_sym(&s, "part", i, size[i], &len[i])) {
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
		if (y && !(!len[i].sym && len[i].size == 0) && !data_empty_type(&y->type)) {
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
	return data_finish(&l, &b);
}

/* ---- Concat -----------------------------------------------------------------------
 * Inputs whose dims are known only while running (a carried value growing
 * in a Loop, a data-dependent slice): the output's axis dim is their sum and
 * every other dim must agree among them, as the interpreter checks; the
 * copy is Concat's ordinary lowering. */
bool lower_data_concat_shape(lower_cx *cx, const tbc_op *op) {
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

