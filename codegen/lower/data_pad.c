/* Pad (constant, reflect, edge and wrap; pads, axes and value constant or
 * given while running) and CenterCropPad.  Negative pads crop, then the rest
 * pads.  With pads given while running, the shape kernel checks them as the
 * interpreter does (ir/kernels/data_pad.c) and stores the output dims and
 * per-dim offsets as computed symbols. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_data.h"
#include "codegen/lower/lower_dyn.h"
#include "ir/kernels/conv_util.h"
#include "ir/kernels/data.h"

/* ---- Pad ------------------------------------------------------------------------
 * Negative pads crop, then the rest pads.  Constant mode fills the output and
 * copies the interior (an affine copy); edge, wrap and reflect map every
 * output coordinate to its source coordinate. */
typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

bool lower_data_pad(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	int r = xv->type.rank;
	static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
	const char *ms = tbc_attr_string(op, "mode", "constant");
	int mode = -1;
	for (int i = 0; i < 4; i++)
		if (!strcmp(ms, names[i])) mode = i;
	if (mode < 0) return lower_error(cx, op, "unknown Pad mode '%s'", ms);
	int64_t pads[2 * TBC_MAX_RANK], axes[TBC_MAX_RANK];
	int np = tbc_data_const_ints(op, 1, pads, 2 * TBC_MAX_RANK);
	bool has_axes = op->n_inputs > 3 && op->inputs[3];
	int na = has_axes ? tbc_data_const_ints(op, 3, axes, TBC_MAX_RANK) : r;
	if (np < 0 || na < 0) return lower_error(cx, op, "Pad with non-constant pads or axes has no lowering yet");
	if (np != 2 * na) return lower_error(cx, op, "Pad's pads and axes disagree in length");
	int64_t begin[TBC_MAX_RANK] = {0}, end[TBC_MAX_RANK] = {0};
	for (int i = 0; i < na; i++) {
		int a = i;
		if (has_axes && !tbc_norm_axis(axes[i], r, &a)) return lower_error(cx, op, "Pad's axis is out of range");
		begin[a] = pads[i];
		end[a] = pads[na + i];
	}
	lk l;
	if (!lk_begin(&l, cx, "pad")) return false;
	kir_buffer *src = data_in(&l, xv), *dst = data_out(&l, yv);
	if (!src || !dst) return false;
	if (data_empty_type(&yv->type)) return data_no_kernel(&l);
	kir_kernel *k = l.k;
	kir_expr *xs[TBC_MAX_RANK], *ys[TBC_MAX_RANK], *n[TBC_MAX_RANK];
	int64_t lo[TBC_MAX_RANK], before[TBC_MAX_RANK];
	data_strides(&l, &xv->type, xs);
	data_strides(&l, &yv->type, ys);
	bool interior_empty = false;
	for (int d = 0; d < r; d++) {
		lo[d] = begin[d] < 0 ? -begin[d] : 0;
		before[d] = begin[d] > 0 ? begin[d] : 0;
		n[d] = kir_e_binary(k, KIR_SUB, lk_dim(&l, xv->type.dims[d]), kir_e_index(k, lo[d] + (end[d] < 0 ? -end[d] : 0)));
		int64_t c;
		if (kir_e_const_index(n[d], &c) && c <= 0) interior_empty = true;
	}
	kir_block b = {0};
	if (mode == PAD_CONSTANT) {
		kir_expr *cval = kir_e_int(k, dst->dtype, 0);
		if (op->n_inputs > 2 && op->inputs[2]) {
			const tbc_tensor *c = tbc_input_const(op, 2);
			if (c && c->numel == 1) cval = data_bits(&l, c->dtype, c->data, 0);
			else if (!c) {
				kir_buffer *cb = data_in(&l, op->inputs[2]);
				bool always, never;
				kir_expr *cond = data_nonempty(&l, &op->inputs[2]->type, &always, &never);
				if (!cb) return false;
				if (cond) return lower_error(cx, op, "Pad with a constant_value of unknown size has no lowering yet");
				if (always) cval = kir_e_load(k, cb, kir_e_index(k, 0));
			}
		}
		kir_block_add(k, &b, data_fill(&l, dst, &yv->type, cval));
		if (!interior_empty) {
			affine a;
			aff_init(&l, &a);
			for (int d = 0; d < r; d++) {
				a.dst_off = kir_e_add(k, a.dst_off, kir_e_mul(k, kir_e_index(k, before[d]), ys[d]));
				a.src_off = kir_e_add(k, a.src_off, kir_e_mul(k, kir_e_index(k, lo[d]), xs[d]));
				aff_dim(&a, n[d], ys[d], xs[d]);
			}
			kir_stmt *s = a.n ? aff_copy(&l, &a, dst, src)
					  : kir_s_store(k, dst, a.dst_off, kir_e_load(k, src, a.src_off));
			if (s) kir_block_add(k, &b, s);
		}
		return lk_end(&l, b.first);
	}
	if (interior_empty) return lower_error(cx, op, "Pad in mode '%s' of an empty dim", ms);
	dloops lp = {0};
	kir_expr *si = kir_e_index(k, 0), *di = kir_e_index(k, 0);
	for (int d = 0; d < r; d++) {
		kir_expr *o = dl_add(&l, &lp, lk_dim(&l, yv->type.dims[d]), false);
		di = kir_e_add(k, di, kir_e_mul(k, o, ys[d]));
		int64_t c;
		if (before[d] == 0 && lo[d] == 0 && tbc_dim_eq(xv->type.dims[d], yv->type.dims[d])) {
			si = kir_e_add(k, si, kir_e_mul(k, o, xs[d])); /* an unpadded dim */
			continue;
		}
		kir_expr *i = kir_e_binary(k, KIR_SUB, o, kir_e_index(k, before[d])), *s;
		kir_expr *zero = kir_e_index(k, 0), *one = kir_e_index(k, 1);
		if (mode == PAD_EDGE) {
			s = kir_e_binary(k, KIR_MAX, kir_e_binary(k, KIR_MIN, i, kir_e_binary(k, KIR_SUB, n[d], one)), zero);
		} else if (mode == PAD_WRAP) {
			s = kir_e_binary(k, KIR_FLOORMOD, i, n[d]);
		} else if (kir_e_const_index(n[d], &c) && c == 1) {
			s = zero;
		} else {
			/* Reflect: period p = 2 (n - 1), m = i mod p, s = min(m, p - m),
			 * which is at most n - 1 (the last min only tells the verifier).
			 * n == 1 gives p == 0 and x mod 0 == 0. */
			kir_expr *last = kir_e_binary(k, KIR_SUB, n[d], one);
			kir_expr *p = kir_e_mul(k, kir_e_index(k, 2), last);
			kir_expr *m = kir_e_binary(k, KIR_FLOORMOD, i, p);
			s = kir_e_binary(k, KIR_MIN, kir_e_binary(k, KIR_MIN, m, kir_e_binary(k, KIR_SUB, p, m)), last);
		}
		si = kir_e_add(k, si, kir_e_mul(k, kir_e_add(k, s, kir_e_index(k, lo[d])), xs[d]));
	}
	bool always, never;
	kir_expr *cond = data_nonempty(&l, &xv->type, &always, &never);
	if (never) return lower_error(cx, op, "Pad in mode '%s' of an empty tensor", ms);
	return lk_end(&l, dl_wrap(&l, &lp, data_guarded_store(&l, dst, di, cond, kir_e_load(k, src, si))));
}

/* ---- Pad given while running -----------------------------------------------------
 * Per dim: begin and end pads; negative ones crop.  The shape kernel stores
 * the output dim and, as computed symbols, the cropped start lo, the kept
 * length n and the leading pad before; the data kernel is the static one's
 * with those as sizes. */

bool lower_data_pad_dyn(lower_cx *cx, const tbc_op *op) {
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
	int np = data_param_len(cx, op, 1, 2 * TBC_MAX_RANK, "Pad's pads");
	int na = has_axes ? data_param_len(cx, op, 3, TBC_MAX_RANK, "Pad's axes") : r;
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
	if (!data_load_axes(&s, has_axes ? op->inputs[3] : NULL, na, r, "an axis is repeated", axes)) return false;
	for (int i = 0; i < np; i++) {
		char name[16];
		snprintf(name, sizeof name, "pad%d", i);
		pads[i] = shk_let(&s, name, shk_elem(&s, op->inputs[1], i));
	}
	tbc_dim lo[TBC_MAX_RANK], keep[TBC_MAX_RANK], before[TBC_MAX_RANK];
	bool padded[TBC_MAX_RANK];
	kir_expr *zero = I(s.k, 0);
	for (int d = 0; d < r; d++) {
		padded[d] = data_maybe_axis(op, 3, na, r, d);
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
		if (!data_param_sym(&s, "lo", d, l_, &lo[d]) || !data_param_sym(&s, "n", d, n_, &keep[d]) ||
		    !data_param_sym(&s, "before", d, MAX(s.k, B, zero), &before[d]))
			return false;
	}
	if (!shk_end(&s)) return false;

	lk l;
	if (!lk_begin(&l, cx, "pad")) return false;
	kir_buffer *src = data_in(&l, x), *dst = data_out(&l, y);
	if (!src || !dst) return false;
	if (data_empty_type(&y->type)) {
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

/* ---- CenterCropPad ------------------------------------------------------------------
 * The target sizes given while running; the kernel is
 * lower_data_center_crop_pad. */
bool lower_data_center_crop_pad_shape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank;
	const int64_t *axes;
	int na = tbc_attr_ints(op, "axes", &axes);
	int want = na < 0 ? r : na;
	int n = data_param_len(cx, op, 1, TBC_MAX_RANK, "CenterCropPad's shape");
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
	if (data_empty_type(&y->type)) {
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

