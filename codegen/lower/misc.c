/* Lowering of single ops that fit no other family: BitCast, and Dropout in
 * training mode (lower_dropout in codegen/lower/lower.c sends it here when
 * training_mode is not a constant false).  Design notes: docs/lower-misc.md. */
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/kernels.h"

#define F64 TBC_DT_F64
#define U32 TBC_DT_U32

static kir_expr *W(kir_kernel *k, uint32_t v) { return kir_e_int(k, U32, v); }

/* The message of a run-time error, prefixed as the interpreter's are. */
static const char *node_msg(const tbc_op *op, char *buf, size_t size, const char *what) {
	snprintf(buf, size, "node '%s' (%s): %s", op->name ? op->name : "", tbc_ops[op->code].onnx_name, what);
	return buf;
}

/* The element count of type t as an index expression. */
static kir_expr *numel(lk *l, const tbc_type *t) {
	kir_expr *n = I(l->k, 1);
	for (int d = 0; d < t->rank; d++) n = kir_e_mul(l->k, n, lk_dim(l, t->dims[d]));
	return n;
}

/* The unsigned integer type of a dtype's storage size. */
static tbc_dtype storage_uint(tbc_dtype dt) {
	switch (tbc_dtype_size(dt)) {
	case 1: return TBC_DT_U8;
	case 2: return TBC_DT_U16;
	case 4: return TBC_DT_U32;
	default: return TBC_DT_U64;
	}
}

/* ---- BitCast ------------------------------------------------------------------
 * The interpreter moves the low tbc_dtype_bits(from) bits of each element's
 * storage (tbc_load_bits / tbc_store_bits).  Kernel IR has no bit
 * reinterpretation, so a float side is read or written through a view of its
 * buffer as the unsigned integer of its storage size (a kernel buffer bound
 * to the program buffer with another dtype of the same element size: the
 * backends address a buffer by the kernel buffer's dtype).  Integer sides
 * need no view: a same-width integer cast wraps, which is the
 * reinterpretation.  Sub-byte sources keep their low bits only; a bool
 * target stores bits != 0, a signed sub-byte target sign-fills its byte (the
 * backend's store does), as tbc_store_bits does. */
static lower_result lower_bitcast(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (!y) return LOWER_OK;
	tbc_dtype from = x->type.dtype, to = y->type.dtype;
	if (!tbc_dtype_supported(from) || !tbc_dtype_supported(to) || tbc_dtype_bits(from) != tbc_dtype_bits(to) ||
	    tbc_dtype_size(from) != tbc_dtype_size(to) || x->type.rank < 0)
		return lower_error(cx, op, "op BitCast from %s to %s has no lowering yet", tbc_dtype_name(from),
				   tbc_dtype_name(to)), LOWER_FAILED;
	tbc_dtype u = storage_uint(from);
	int ob = lower_result_buf(cx, y);
	lk l;
	if (ob < 0 || !lk_begin(&l, cx, "bitcast")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *xb = lk_value(&l, x), *yb = lk_buf(&l, ob);
	if (!xb || !yb) return LOWER_FAILED;
	bool x_view = tbc_dtype_is_float(from), y_view = tbc_dtype_is_float(to);
	if (x_view) xb->dtype = u;
	if (y_view) yb->dtype = u;
	nest n;
	if (!nest_build(&l, &n, &y->type, 0, NULL)) return LOWER_FAILED;
	kir_expr *idx = n.rank ? n.linear : I(k, 0);
	kir_expr *bits = kir_e_cast(k, u, kir_e_load(k, xb, idx));
	int nb = tbc_dtype_bits(from);
	if (nb < 8) bits = BIN(k, KIR_AND, bits, kir_e_int(k, u, (1 << nb) - 1));
	kir_stmt *st = kir_s_store(k, yb, idx, y_view ? bits : kir_e_cast(k, to, bits));
	if (!n.rank) return lk_end(&l, st) ? LOWER_OK : LOWER_FAILED;
	kir_block_add(k, &n.body, st);
	return lk_end(&l, nest_finish(&l, &n)) ? LOWER_OK : LOWER_FAILED;
}

/* ---- Dropout in training mode -------------------------------------------------
 * The interpreter (ir/kernels/elementwise_cast.c) draws one double per
 * element, row-major, from numpy's legacy MT19937 seeded with the seed
 * attribute (ir/kernels/rng_mt19937.c), keeps the element when the draw is
 * >= ratio and scales kept ones by 1 / (1 - ratio) rounded to ratio's type.
 * The kernel runs the same generator over a 624-word state in scratch: seed
 * it, then per block of 624 words (312 elements, two words each) regenerate
 * the block (sequential loops: word i reads words i + 1 and i + 397 mod 624,
 * some already new) and temper, draw and apply for the block's elements in a
 * vector loop.  The kernel has no parallel loop: the stream is one sequence.
 * training_mode and ratio are read at run time; when training is off or the
 * ratio is 0 the kernel copies X and the mask is all true. */
#define MT_N 624
#define MT_M 397

/* state[i] = state[(i + 397) % 624] ^ twist(state[i], state[(i + 1) % 624])
 * for i in [lo, hi): mt_generate's loop, cut where i + 397 wraps. */
static kir_stmt *mt_twist(kir_kernel *k, kir_buffer *st, int lo, int hi) {
	bool last = hi == MT_N; /* the last word alone: i = 623 reads words 0 and 396 */
	kir_var *i = last ? NULL : kir_var_new(k, "w", KIR_INDEX);
	kir_expr *iv = last ? I(k, MT_N - 1) : V(k, i);
	kir_expr *next = last ? I(k, 0) : BIN(k, KIR_ADD, iv, I(k, 1));
	kir_expr *far = last ? I(k, MT_M - 1)
		      : lo + MT_M >= MT_N ? BIN(k, KIR_SUB, iv, I(k, MT_N - MT_M))
					  : BIN(k, KIR_ADD, iv, I(k, MT_M));
	kir_expr *y = BIN(k, KIR_OR, BIN(k, KIR_AND, kir_e_load(k, st, iv), W(k, 0x80000000u)),
			BIN(k, KIR_AND, kir_e_load(k, st, next), W(k, 0x7fffffffu)));
	kir_block b = {0};
	kir_var *yv = kir_var_new(k, "y", U32);
	kir_block_add(k, &b, kir_s_set(k, yv, y));
	y = V(k, yv);
	kir_expr *odd = kir_e_cmp(k, KIR_NE, BIN(k, KIR_AND, y, W(k, 1)), W(k, 0));
	kir_expr *v = BIN(k, KIR_XOR, BIN(k, KIR_XOR, kir_e_load(k, st, far), BIN(k, KIR_SHR, y, W(k, 1))),
			kir_e_select(k, odd, W(k, 0x9908b0dfu), W(k, 0)));
	kir_block_add(k, &b, kir_s_store(k, st, iv, v));
	if (last) return b.first; /* a list of two statements */
	return kir_s_for(k, i, I(k, lo), I(k, hi), 1, KIR_LOOP_SEQUENTIAL, b.first);
}

static kir_expr *mt_temper(kir_kernel *k, kir_expr *y) {
	y = BIN(k, KIR_XOR, y, BIN(k, KIR_SHR, y, W(k, 11)));
	y = BIN(k, KIR_XOR, y, BIN(k, KIR_AND, BIN(k, KIR_SHL, y, W(k, 7)), W(k, 0x9d2c5680u)));
	y = BIN(k, KIR_XOR, y, BIN(k, KIR_AND, BIN(k, KIR_SHL, y, W(k, 15)), W(k, 0xefc60000u)));
	return BIN(k, KIR_XOR, y, BIN(k, KIR_SHR, y, W(k, 18)));
}

static lower_result lower_dropout_training(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	const tbc_value *ratio = op->n_inputs > 1 ? op->inputs[1] : NULL, *train = op->inputs[2];
	const tbc_value *mask = op->n_outputs > 1 ? op->outputs[1] : NULL;
	tbc_dtype dt = x->type.dtype;
	if (!y && !mask) return LOWER_OK;
	if (!tbc_dtype_is_float(dt) || !tbc_dtype_supported(dt) || x->type.rank < 0)
		return lower_error(cx, op, "Dropout in training mode on %s has no lowering yet", tbc_dtype_name(dt)),
		       LOWER_FAILED;
	for (int i = 1; i < op->n_inputs && i < 4; i++) {
		const tbc_value *s = op->inputs[i];
		if (!s) continue;
		bool one = s->type.rank >= 0;
		for (int d = 0; d < s->type.rank; d++) one = one && !s->type.dims[d].sym && s->type.dims[d].size == 1;
		if (!one || (i == 1 && !tbc_dtype_is_float(s->type.dtype)))
			return lower_error(cx, op, "Dropout in training mode with a %s that is not one element has no lowering yet",
					   i == 1 ? "float ratio" : i == 2 ? "training_mode" : "seed offset"), LOWER_FAILED;
	}
	/* The state: scratch of this op only. */
	tbc_type st_type = {.dtype = U32, .rank = 1};
	st_type.dims[0].size = MT_N;
	int sb = lower_temp_buf(cx, &st_type, "mt19937");
	int yb = y ? lower_result_buf(cx, y) : -1, mb = mask ? lower_result_buf(cx, mask) : -1;
	if (sb < 0 || (y && yb < 0) || (mask && mb < 0)) return LOWER_FAILED;
	bool empty = false;
	for (int d = 0; d < x->type.rank; d++) empty |= !x->type.dims[d].sym && x->type.dims[d].size == 0;
	if (empty) return LOWER_OK;
	lk l;
	if (!lk_begin(&l, cx, "dropout")) return LOWER_FAILED;
	kir_kernel *k = l.k;
	kir_buffer *xk = lk_value(&l, x), *st = lk_buf(&l, sb);
	kir_buffer *yk = y ? lk_buf(&l, yb) : NULL, *mk = mask ? lk_buf(&l, mb) : NULL;
	kir_buffer *rk = ratio ? lk_value(&l, ratio) : NULL, *tk = lk_value(&l, train);
	const tbc_value *seedv = op->n_inputs > 3 ? op->inputs[3] : NULL;
	kir_buffer *sk = seedv ? lk_value(&l, seedv) : NULL;
	if (!xk || !st || (y && !yk) || (mask && !mk) || (ratio && !rk) || !tk || (seedv && !sk)) return LOWER_FAILED;
	kir_block body = {0};
	kir_expr *zero = I(k, 0);
	kir_var *rv = kir_var_new(k, "ratio", F64), *tv = kir_var_new(k, "training", TBC_DT_BOOL);
	kir_block_add(k, &body, kir_s_set(k, rv, rk ? kir_e_cast(k, F64, kir_e_load(k, rk, zero)) : kir_e_float(k, F64, 0.5)));
	kir_block_add(k, &body, kir_s_set(k, tv, kir_e_cast(k, TBC_DT_BOOL, kir_e_load(k, tk, zero))));
	kir_expr *r = V(k, rv);
	kir_expr *r_ok = BIN(k, KIR_AND, kir_e_cmp(k, KIR_GE, r, kir_e_float(k, F64, 0)), kir_e_cmp(k, KIR_LT, r, kir_e_float(k, F64, 1)));
	char msg[256];
	kir_block_add(k, &body, kir_s_error(k, BIN(k, KIR_AND, V(k, tv), kir_e_unary(k, KIR_NOT, r_ok)),
					    node_msg(op, msg, sizeof msg, "ratio must be in [0, 1)")));
	kir_expr *go = BIN(k, KIR_AND, BIN(k, KIR_AND, V(k, tv), r_ok), kir_e_cmp(k, KIR_NE, r, kir_e_float(k, F64, 0)));

	/* Training: seed, then block by block. */
	kir_block tr = {0};
	kir_expr *one = kir_e_float(k, F64, 1);
	kir_expr *scale = BIN(k, KIR_DIV, one, BIN(k, KIR_SUB, one, r));
	if (ratio) {
		tbc_dtype rt = ratio->type.dtype;
		kir_expr *keep = kir_e_cast(k, F64, kir_e_cast(k, rt, BIN(k, KIR_SUB, one, r)));
		scale = kir_e_cast(k, F64, kir_e_cast(k, rt, BIN(k, KIR_DIV, one, keep)));
	}
	kir_var *sv = kir_var_new(k, "scale", F64);
	kir_block_add(k, &tr, kir_s_set(k, sv, scale));
	/* the seed attribute, plus the seed offset when given (a training
	 * step's, changing every step), modulo 2^32 */
	kir_expr *seed = W(k, (uint32_t)tbc_attr_int(op, "seed", 0));
	if (sk) seed = BIN(k, KIR_ADD, seed, kir_e_cast(k, U32, kir_e_load(k, sk, zero)));
	kir_block_add(k, &tr, kir_s_store(k, st, zero, seed));
	{
		kir_var *i = kir_var_new(k, "s", KIR_INDEX);
		kir_expr *prev = kir_e_load(k, st, BIN(k, KIR_SUB, V(k, i), I(k, 1)));
		kir_expr *v = BIN(k, KIR_ADD, BIN(k, KIR_MUL, W(k, 1812433253u), BIN(k, KIR_XOR, prev, BIN(k, KIR_SHR, prev, W(k, 30)))),
				kir_e_cast(k, U32, V(k, i)));
		kir_block_add(k, &tr, kir_s_for(k, i, I(k, 1), I(k, MT_N), 1, KIR_LOOP_SEQUENTIAL, kir_s_store(k, st, V(k, i), v)));
	}
	kir_expr *total = numel(&l, &x->type);
	kir_var *nv = kir_var_new(k, "n", KIR_INDEX);
	kir_block_add(k, &tr, kir_s_set(k, nv, total));
	kir_expr *n = V(k, nv);
	kir_var *blk = kir_var_new(k, "blk", KIR_INDEX);
	kir_block bb = {0};
	kir_block_add(k, &bb, mt_twist(k, st, 0, MT_N - MT_M));
	kir_block_add(k, &bb, mt_twist(k, st, MT_N - MT_M, MT_N - 1));
	kir_block_add(k, &bb, mt_twist(k, st, MT_N - 1, MT_N));
	kir_expr *base = kir_e_mul(k, V(k, blk), I(k, MT_N / 2));
	kir_var *tvar = kir_var_new(k, "t", KIR_INDEX);
	kir_expr *t = V(k, tvar);
	kir_block eb = {0};
	/* Clamped so the verifier can prove it in bounds; t < count keeps it exact. */
	kir_expr *e = BIN(k, KIR_MIN, kir_e_add(k, base, t), BIN(k, KIR_SUB, n, I(k, 1)));
	kir_var *ev = kir_var_new(k, "e", KIR_INDEX);
	kir_block_add(k, &eb, kir_s_set(k, ev, e));
	e = V(k, ev);
	kir_expr *two_t = kir_e_mul(k, t, I(k, 2));
	kir_expr *a = BIN(k, KIR_SHR, mt_temper(k, kir_e_load(k, st, two_t)), W(k, 5));
	kir_expr *b2 = BIN(k, KIR_SHR, mt_temper(k, kir_e_load(k, st, kir_e_add(k, two_t, I(k, 1)))), W(k, 6));
	kir_expr *u = BIN(k, KIR_DIV, BIN(k, KIR_ADD, BIN(k, KIR_MUL, kir_e_cast(k, F64, a), kir_e_float(k, F64, 67108864.0)),
				      kir_e_cast(k, F64, b2)),
			kir_e_float(k, F64, 9007199254740992.0));
	kir_var *kv = kir_var_new(k, "keep", TBC_DT_BOOL);
	kir_block_add(k, &eb, kir_s_set(k, kv, kir_e_cmp(k, KIR_GE, u, r)));
	if (yk) {
		/* numpy multiplies by the mask (0 * -x = -0, 0 * inf = NaN), then scales. */
		kir_expr *m = kir_e_select(k, V(k, kv), one, kir_e_float(k, F64, 0));
		kir_expr *v = BIN(k, KIR_MUL, BIN(k, KIR_MUL, kir_e_cast(k, F64, kir_e_load(k, xk, e)), m), V(k, sv));
		kir_block_add(k, &eb, kir_s_store(k, yk, e, kir_e_cast(k, dt, v)));
	}
	if (mk) kir_block_add(k, &eb, kir_s_store(k, mk, e, V(k, kv)));
	kir_expr *count = BIN(k, KIR_MIN, I(k, MT_N / 2), BIN(k, KIR_SUB, n, base));
	kir_block_add(k, &bb, kir_s_for(k, tvar, zero, count, 1, KIR_LOOP_VECTOR, eb.first));
	kir_expr *blocks = kir_e_binary(k, KIR_FLOORDIV, kir_e_add(k, n, I(k, MT_N / 2 - 1)), I(k, MT_N / 2));
	kir_block_add(k, &tr, kir_s_for(k, blk, zero, blocks, 1, KIR_LOOP_SEQUENTIAL, bb.first));

	/* Otherwise the identity with an all-true mask. */
	kir_block id = {0};
	kir_var *iv = kir_var_new(k, "i", KIR_INDEX);
	kir_block ib = {0};
	if (yk) kir_block_add(k, &ib, kir_s_store(k, yk, V(k, iv), kir_e_load(k, xk, V(k, iv))));
	if (mk) kir_block_add(k, &ib, kir_s_store(k, mk, V(k, iv), kir_e_int(k, TBC_DT_BOOL, 1)));
	kir_block_add(k, &id, kir_s_for(k, iv, zero, numel(&l, &x->type), 1, KIR_LOOP_VECTOR, ib.first));

	kir_block_add(k, &body, kir_s_if(k, go, tr.first, id.first));
	return lk_end(&l, body.first) ? LOWER_OK : LOWER_FAILED;
}

lower_result lower_family_misc(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_BitCast: return lower_bitcast(cx, op);
	case TBC_OP_Dropout: /* from lower_dropout: training_mode is not a constant false */
		if (op->n_inputs < 3 || !op->inputs[2]) return LOWER_NOT_MINE;
		return lower_dropout_training(cx, op);
	default: return LOWER_NOT_MINE;
	}
}
