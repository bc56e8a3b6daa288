/* Ops that make their output from positions more than from data: Shape,
 * Size, ConstantOfShape, Range, Trilu, EyeLike. */
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_data.h"
#include "ir/kernels/data.h"

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
	return b.first ? lk_end(&l, b.first) : data_no_kernel(&l);
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
	if (data_empty_type(&yv->type)) return data_no_kernel(&l);
	kir_expr *v = value ? data_bits(&l, value->dtype, value->data, 0) : kir_e_int(l.k, dst->dtype, 0);
	return lk_end(&l, data_fill(&l, dst, &yv->type, v));
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
	if (data_empty_type(&yv->type)) return data_no_kernel(&l);
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
	if (data_empty_type(&yv->type)) return data_no_kernel(&l);
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
	if (data_empty_type(&yv->type)) return data_no_kernel(&l);
	kir_kernel *k = l.k;
	kir_expr *C = lk_dim(&l, yv->type.dims[1]);
	dloops lp = {0};
	kir_expr *i = dl_add(&l, &lp, lk_dim(&l, yv->type.dims[0]), false), *j = dl_add(&l, &lp, C, false);
	kir_expr *on = kir_e_cmp(k, KIR_EQ, kir_e_binary(k, KIR_SUB, j, i), kir_e_index(k, kk));
	kir_expr *v = kir_e_select(k, on, data_bits_of(&l, yv->type.dtype, 1.0), kir_e_int(k, dst->dtype, 0));
	return lk_end(&l, dl_wrap(&l, &lp, kir_s_store(k, dst, kir_e_add(k, kir_e_mul(k, i, C), j), v)));
}

