/* TopK (K constant or given while running), AffineGrid and Col2Im (sizes
 * constant or given while running): each has its data kernel here, and a
 * shape kernel when a size is given while running. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_data.h"
#include "codegen/lower/lower_dyn.h"
#include "ir/kernels/conv_util.h"
#include "ir/kernels/data.h"

/* ---- TopK -------------------------------------------------------------------------
 * K given while running: checked in [0, n]; the kernel is lower_data_topk. */
bool lower_data_topk_shape(lower_cx *cx, const tbc_op *op) {
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
	if (data_empty_type(&shape_v->type)) {
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

/* ---- AffineGrid -------------------------------------------------------------------
 * size (N, C, [D,] H, W) given while running: checked positive, N against
 * theta's batch; the kernel is lower_data_affine_grid. */
bool lower_data_affine_grid_shape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *th = op->inputs[0], *sz = op->inputs[1];
	int len = data_param_len(cx, op, 1, 5, "AffineGrid's size");
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
	if (data_empty_type(&y->type)) {
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
	int nsp = data_param_len(cx, op, 1, CONV_MAX_SPATIAL, "Col2Im's image_shape");
	int nb = data_param_len(cx, op, 2, CONV_MAX_SPATIAL, "Col2Im's block_shape");
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
		if (!data_param_sym(&s, "block", i, blk[i], &kdim[i]) || !data_param_sym(&s, "blocks", i, li, &ldim[i])) return false;
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
	if (data_empty_type(&y->type)) {
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

