/* Ops that make their output from positions more than from data: Pad, Shape,
 * Size, ConstantOfShape, Range, Trilu, EyeLike. */
#include <string.h>

#include "codegen/lower/lower_data.h"
#include "ir/kernels/data.h"

static bool empty_type(const tbc_type *t) {
	for (int d = 0; d < t->rank; d++)
		if (!t->dims[d].sym && t->dims[d].size == 0) return true;
	return false;
}

/* Ends a kernel with nothing to do: no launch. */
static bool no_kernel(lk *l) {
	l->cx->n_kernels--;
	return !l->k->failed;
}

/* Fills every element of dst (type t) with value. */
static kir_stmt *fill(lk *l, kir_buffer *dst, const tbc_type *t, kir_expr *value) {
	dloops lp = {0};
	kir_expr *i = dl_add(l, &lp, data_prod(l, t, 0, t->rank), false);
	return dl_wrap(l, &lp, kir_s_store(l->k, dst, i, value));
}

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
	if (empty_type(&yv->type)) return no_kernel(&l);
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
		kir_block_add(k, &b, fill(&l, dst, &yv->type, cval));
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

/* ---- Shape / Size ------------------------------------------------------------------
 * Static dims are constants, symbolic ones the run-time symbol values. */
static kir_expr *dim_value(lk *l, tbc_dim d) { return kir_e_cast(l->k, TBC_DT_I64, lk_dim(l, d)); }

bool lower_data_shape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	int rank = xv->type.rank;
	int64_t s = tbc_attr_int(op, "start", 0), e = tbc_attr_int(op, "end", rank);
	if (s < 0) s += rank;
	if (e < 0) e += rank;
	s = s < 0 ? 0 : s > rank ? rank : s;
	e = e < 0 ? 0 : e > rank ? rank : e;
	lk l;
	if (!lk_begin(&l, cx, "shape")) return false;
	int ob = lower_result_buf(cx, yv);
	kir_buffer *dst = ob >= 0 ? lk_buf(&l, ob) : NULL;
	if (!dst) return false;
	kir_block b = {0};
	for (int64_t i = s; i < e; i++)
		kir_block_add(l.k, &b, kir_s_store(l.k, dst, kir_e_index(l.k, i - s), dim_value(&l, xv->type.dims[i])));
	return b.first ? lk_end(&l, b.first) : no_kernel(&l);
}

bool lower_data_size(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	lk l;
	if (!lk_begin(&l, cx, "size")) return false;
	int ob = lower_result_buf(cx, yv);
	kir_buffer *dst = ob >= 0 ? lk_buf(&l, ob) : NULL;
	if (!dst) return false;
	kir_expr *n = kir_e_cast(l.k, TBC_DT_I64, data_prod(&l, &xv->type, 0, xv->type.rank));
	return lk_end(&l, kir_s_store(l.k, dst, kir_e_index(l.k, 0), n));
}

/* ---- ConstantOfShape ---------------------------------------------------------------*/
bool lower_data_constant_of_shape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *yv = op->outputs[0];
	const tbc_tensor *value = tbc_attr_tensor(op, "value");
	if (value && value->numel != 1) return lower_error(cx, op, "ConstantOfShape's value must hold one element");
	lk l;
	if (!lk_begin(&l, cx, "constant_of_shape")) return false;
	kir_buffer *dst = data_out(&l, yv);
	if (!dst) return false;
	if (empty_type(&yv->type)) return no_kernel(&l);
	kir_expr *v = value ? data_bits(&l, value->dtype, value->data, 0) : kir_e_int(l.k, dst->dtype, 0);
	return lk_end(&l, fill(&l, dst, &yv->type, v));
}

/* ---- Range --------------------------------------------------------------------------
 * out[i] = start + i * delta: floats in f64 rounded on store, integers in
 * wrapping 64 bits, as the interpreter computes. */
bool lower_data_range(lower_cx *cx, const tbc_op *op) {
	const tbc_value *yv = op->outputs[0];
	tbc_dtype dt = yv->type.dtype;
	if (!(tbc_dtype_is_int(dt) || tbc_dtype_is_float(dt)))
		return lower_error(cx, op, "Range on %s has no lowering yet", tbc_dtype_name(dt));
	for (int i = 0; i < 3; i++)
		if (op->inputs[i]->type.rank > 1 || (op->inputs[i]->type.rank == 1 && (op->inputs[i]->type.dims[0].sym ||
											 op->inputs[i]->type.dims[0].size != 1)))
			return lower_error(cx, op, "Range's start, limit and delta must be scalars");
	lk l;
	if (!lk_begin(&l, cx, "range")) return false;
	int ob = lower_result_buf(cx, yv);
	kir_buffer *dst = ob >= 0 ? lk_buf(&l, ob) : NULL, *s = lk_value(&l, op->inputs[0]), *d = lk_value(&l, op->inputs[2]);
	if (!dst || !s || !d) return false;
	if (empty_type(&yv->type)) return no_kernel(&l);
	kir_kernel *k = l.k;
	tbc_dtype ct = tbc_dtype_is_float(dt) ? TBC_DT_F64 : TBC_DT_I64;
	dloops lp = {0};
	kir_expr *i = dl_add(&l, &lp, lk_dim(&l, yv->type.dims[0]), false);
	kir_expr *z = kir_e_index(k, 0);
	kir_expr *start = kir_e_load(k, s, z), *delta = kir_e_load(k, d, z);
	if (tbc_dtype_is_float(dt) && dt != TBC_DT_F32 && dt != TBC_DT_F64) /* narrow floats: exact through f32 */
		start = kir_e_cast(k, TBC_DT_F32, start), delta = kir_e_cast(k, TBC_DT_F32, delta);
	kir_expr *v = kir_e_add(k, kir_e_cast(k, ct, start), kir_e_mul(k, kir_e_cast(k, ct, i), kir_e_cast(k, ct, delta)));
	return lk_end(&l, dl_wrap(&l, &lp, kir_s_store(k, dst, i, kir_e_cast(k, dt, v))));
}

/* ---- Trilu / EyeLike ------------------------------------------------------------------*/
bool lower_data_trilu(lower_cx *cx, const tbc_op *op) {
	const tbc_value *xv = op->inputs[0], *yv = op->outputs[0];
	int r = xv->type.rank;
	if (r < 2) return lower_error(cx, op, "Trilu needs rank >= 2");
	bool upper = tbc_attr_int(op, "upper", 1) != 0;
	lk l;
	if (!lk_begin(&l, cx, "trilu")) return false;
	kir_buffer *src = data_in(&l, xv), *dst = data_out(&l, yv);
	if (!src || !dst) return false;
	if (empty_type(&yv->type)) return no_kernel(&l);
	kir_kernel *k = l.k;
	kir_expr *kk = kir_e_index(k, 0);
	if (op->n_inputs > 1 && op->inputs[1]) {
		const tbc_value *kv = op->inputs[1];
		if (!tbc_dtype_is_int(kv->type.dtype)) return lower_error(cx, op, "Trilu's k must be an integer");
		const tbc_tensor *c = tbc_input_const(op, 1);
		if (c && c->numel == 1) kk = kir_e_index(k, tbc_load_i64(c->dtype, c->data, 0));
		else {
			kir_buffer *kb = lk_value(&l, kv);
			bool always, never;
			data_nonempty(&l, &kv->type, &always, &never);
			if (!kb || !always) return lower_error(cx, op, "Trilu's k must be one integer");
			kk = kir_e_cast(k, KIR_INDEX, kir_e_load(k, kb, kir_e_index(k, 0)));
		}
	}
	kir_expr *R = lk_dim(&l, xv->type.dims[r - 2]), *C = lk_dim(&l, xv->type.dims[r - 1]);
	dloops lp = {0};
	kir_expr *bi = dl_add(&l, &lp, data_prod(&l, &xv->type, 0, r - 2), false);
	kir_expr *i = dl_add(&l, &lp, R, false), *j = dl_add(&l, &lp, C, false);
	kir_expr *lin = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, bi, R), i), C), j);
	kir_expr *diff = kir_e_binary(k, KIR_SUB, j, i);
	kir_expr *keep = kir_e_cmp(k, upper ? KIR_GE : KIR_LE, diff, kk);
	kir_expr *v = kir_e_select(k, keep, kir_e_load(k, src, lin), kir_e_int(k, dst->dtype, 0));
	return lk_end(&l, dl_wrap(&l, &lp, kir_s_store(k, dst, lin, v)));
}

bool lower_data_eye_like(lower_cx *cx, const tbc_op *op) {
	const tbc_value *yv = op->outputs[0];
	if (yv->type.rank != 2) return lower_error(cx, op, "EyeLike needs a 2-D input");
	int64_t kk = tbc_attr_int(op, "k", 0);
	lk l;
	if (!lk_begin(&l, cx, "eye_like")) return false;
	kir_buffer *dst = data_out(&l, yv);
	if (!dst) return false;
	if (empty_type(&yv->type)) return no_kernel(&l);
	kir_kernel *k = l.k;
	kir_expr *C = lk_dim(&l, yv->type.dims[1]);
	dloops lp = {0};
	kir_expr *i = dl_add(&l, &lp, lk_dim(&l, yv->type.dims[0]), false), *j = dl_add(&l, &lp, C, false);
	kir_expr *on = kir_e_cmp(k, KIR_EQ, kir_e_binary(k, KIR_SUB, j, i), kir_e_index(k, kk));
	kir_expr *v = kir_e_select(k, on, data_bits_of(&l, yv->type.dtype, 1.0), kir_e_int(k, dst->dtype, 0));
	return lk_end(&l, dl_wrap(&l, &lp, kir_s_store(k, dst, kir_e_add(k, kir_e_mul(k, i, C), j), v)));
}
