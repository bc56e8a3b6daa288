/* The Reduce* ops with axes given while running (a graph input rather than
 * a constant): which dims are reduced is known only from the data, so the
 * output's dims are computed symbols and the loop structure cannot be fixed
 * at compile time.  Two kernels:
 *
 *  - a shape kernel reads the axes, checks them as the interpreter does
 *    (ir/kernels/reduce.c mark_axes: in range, not repeated; empty axes
 *    reduce everything, or nothing with noop_with_empty_axes), stores the
 *    output dims (lower_shape_dim) and, per input dim d, two symbols of its
 *    own: kext_d (size_d when kept, else 1) and rext_d (size_d when reduced,
 *    else 1);
 *  - a data kernel: the reduction engine of lower_reduce.c (rs_reduce, so
 *    the accumulation rules and precision are exactly those of the
 *    constant-axes lowering) over the space [n_out | rext_0 .. rext_{r-1}]:
 *    one parallel loop over the output's elements, and inside it a nest of
 *    sequential loops over every input dim with run-time extent rext_d.  A
 *    kept dim's loop runs once, so no element index needs a division; the
 *    input index of an output point (its base) is decomposed from the flat
 *    output index with run-time strides once per point.
 *
 * Called from lower_op for a data-dependent output shape, and from the
 * constant-axes lowering when the axes are not constant but every output dim
 * is known anyway (all dims reduced without keepdims, dims of size 1). */
#include <stdio.h>

#include "codegen/lower/lower_dyn.h"
#include "codegen/lower/lower_reduce.h"
#include "codegen/lower/kir_short.h"

/* The name of the symbol `what`_d of op's lowering (distinct per output value). */
static const char *sym_name(const tbc_op *op, const char *what, int d, char *buf, size_t size) {
	snprintf(buf, size, "_red%d.%s%d", op->outputs[0]->id, what, d);
	return buf;
}

/* ---- The shape kernel -----------------------------------------------------*/

static bool shape_kernel(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *ax = op->inputs[1], *y = op->outputs[0];
	int r = x->type.rank;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	bool noop = tbc_attr_int(op, "noop_with_empty_axes", 0) != 0;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_kernel *k = s.k;
	kir_buffer *ab = lk_value(&s.l, ax);
	if (!ab) return false;

	/* marked_d: axis d listed so far (0 or 1), over a sequential loop on the
	 * axes in their order, so the first bad axis gives the run's error. */
	kir_expr *n = ax->type.rank == 0 ? I(s.k, 1) : shk_dim_of(&s, ax, 0);
	kir_expr *marked[TBC_MAX_RANK];
	for (int d = 0; d < r; d++) marked[d] = shk_let(&s, "marked", I(s.k, 0));
	kir_block outer = s.b;
	s.b = (kir_block){0}; /* the loop's body */
	kir_var *iv = kir_var_new(k, "i", KIR_INDEX);
	kir_expr *v = shk_let(&s, "v", kir_e_cast(k, KIR_INDEX, kir_e_load(k, ab, kir_e_var(k, iv))));
	/* The interpreter names the value; a compiled message cannot hold it. */
	shk_fail_if(&s, OR(s.k, CMP(s.k, KIR_LT, v, I(s.k, -r)), CMP(s.k, KIR_GE, v, I(s.k, r))), "an axis is out of range for rank %d", r);
	kir_expr *a = shk_let(&s, "a", SEL(s.k, CMP(s.k, KIR_LT, v, I(s.k, 0)), kir_e_add(k, v, I(s.k, r)), v));
	for (int d = 0; d < r; d++) {
		/* In range, a repeated axis is one of 2r values: each its own message. */
		kir_expr *seen = CMP(s.k, KIR_NE, marked[d], I(s.k, 0));
		shk_fail_if(&s, AND(s.k, seen, CMP(s.k, KIR_EQ, v, I(s.k, d))), "axis %d is repeated", d);
		shk_fail_if(&s, AND(s.k, seen, CMP(s.k, KIR_EQ, v, I(s.k, d - r))), "axis %d is repeated", d - r);
	}
	for (int d = 0; d < r; d++)
		kir_block_add(k, &s.b, kir_s_set(k, marked[d]->var, SEL(s.k, CMP(s.k, KIR_EQ, a, I(s.k, d)), I(s.k, 1), marked[d])));
	kir_stmt *loop = kir_s_for(k, iv, I(s.k, 0), n, 1, KIR_LOOP_SEQUENTIAL, s.b.first);
	s.b = outer;
	kir_block_add(k, &s.b, loop);

	/* No axes: every dim reduced, or none with noop_with_empty_axes. */
	kir_expr *empty = CMP(s.k, KIR_EQ, n, I(s.k, 0));
	kir_expr *red[TBC_MAX_RANK], *size[TBC_MAX_RANK];
	char name[64];
	for (int d = 0; d < r; d++) {
		size[d] = shk_dim_of(&s, x, d);
		red[d] = shk_let(&s, "red", SEL(s.k, empty, kir_e_int(k, TBC_DT_BOOL, !noop), CMP(s.k, KIR_NE, marked[d], I(s.k, 0))));
		if (!shk_store_sym(&s, sym_name(op, "k", d, name, sizeof name), SEL(s.k, red[d], I(s.k, 1), size[d]), NULL) ||
		    !shk_store_sym(&s, sym_name(op, "r", d, name, sizeof name), SEL(s.k, red[d], size[d], I(s.k, 1)), NULL))
			return false;
	}
	/* Output dims: each input dim kept, 1 where reduced with keepdims; without
	 * keepdims output dim j is the input dim kept with j kept before it. */
	for (int j = 0; j < y->type.rank; j++) {
		kir_expr *val;
		if (keep) {
			val = SEL(s.k, red[j], I(s.k, 1), size[j]);
		} else {
			val = I(s.k, 1);
			kir_expr *before = I(s.k, 0);
			for (int d = 0; d < r; d++) {
				kir_expr *kept = kir_e_unary(k, KIR_NOT, red[d]);
				val = SEL(s.k, AND(s.k, kept, CMP(s.k, KIR_EQ, before, I(s.k, j))), size[d], val);
				before = kir_e_add(k, before, SEL(s.k, kept, I(s.k, 1), I(s.k, 0)));
			}
		}
		if (!shk_out_dim(&s, 0, j, val)) return false;
	}
	return shk_end(&s);
}

/* ---- The data kernel ------------------------------------------------------*/
typedef struct elem_ctx {
	kir_buffer *x;
	kir_expr *base;                  /* input index of the point's first element */
	kir_expr *stride[TBC_MAX_RANK];  /* the input's row-major strides */
	int rank;
} elem_ctx;

static kir_expr *dyn_elem(void *p, rspace *s, bool first) {
	(void)first;
	elem_ctx *c = p;
	kir_expr *idx = c->base;
	for (int d = 0; d < c->rank; d++)
		if (s->cur[1 + d]) idx = kir_e_add(s->k, idx, kir_e_mul(s->k, s->cur[1 + d], c->stride[d]));
	kir_expr *v = kir_e_load(s->k, c->x, idx);
	/* Bool (ReduceMax/Min) accumulates in u8; the select spares the CPU
	 * backend a bool-to-u8 cast, which it emits as a bare i1. */
	if (c->x->dtype == TBC_DT_BOOL) v = kir_e_select(s->k, v, kir_e_int(s->k, TBC_DT_U8, 1), kir_e_int(s->k, TBC_DT_U8, 0));
	return v;
}

static bool data_kernel(lower_cx *cx, const tbc_op *op, rkind kind) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	int ob = lower_result_buf(cx, y);
	lk l;
	char what[64];
	snprintf(what, sizeof what, "%s_dynaxes", tbc_ops[op->code].onnx_name);
	if (ob < 0 || !lk_begin(&l, cx, what)) return false;
	kir_kernel *k = l.k;
	kir_buffer *out = lk_buf(&l, ob), *xb = lk_value(&l, x);
	if (!out || !xb) return false;
	/* Space dim 0: the output's elements; dims 1..r: the input's, run-time
	 * extent rext_d (1 where kept).  A dim of static size 1 is 1 in both. */
	kir_expr *sizes[1 + TBC_MAX_RANK], *kext[TBC_MAX_RANK];
	bool mask[1 + TBC_MAX_RANK] = {false};
	kir_expr *n_out = kir_e_index(k, 1);
	char name[64];
	for (int d = 0; d < r; d++) {
		tbc_dim xd = x->type.dims[d];
		bool unit = !xd.sym && xd.size == 1;
		kext[d] = unit ? kir_e_index(k, 1) : lk_dim(&l, (tbc_dim){-1, sym_name(op, "k", d, name, sizeof name)});
		sizes[1 + d] = unit ? kir_e_index(k, 1) : lk_dim(&l, (tbc_dim){-1, sym_name(op, "r", d, name, sizeof name)});
		mask[1 + d] = true;
		n_out = kir_e_mul(k, n_out, kext[d]);
	}
	sizes[0] = n_out;
	rspace s;
	if (!rs_begin_sizes(&l, &s, 1 + r, sizes, mask)) return false;
	/* base = sum over dims of (o / ostride_d % kext_d) * stride_d, from the
	 * innermost dim out; a reduced dim's coordinate is 0 (kext_d = 1). */
	elem_ctx c = {.x = xb, .rank = r};
	kir_expr *o = s.cur[0], *base = kir_e_index(k, 0), *ostride = kir_e_index(k, 1), *stride = kir_e_index(k, 1);
	for (int d = r - 1; d >= 0; d--) {
		c.stride[d] = stride;
		int64_t one;
		if (!(kir_e_const_index(kext[d], &one) && one == 1)) {
			kir_expr *q = kir_e_binary(k, KIR_DIV, o, ostride);
			kir_expr *coord = d == 0 ? q : kir_e_binary(k, KIR_REM, q, kext[d]);
			base = kir_e_add(k, base, kir_e_mul(k, coord, stride));
		}
		ostride = kir_e_mul(k, ostride, kext[d]);
		stride = kir_e_mul(k, stride, lk_dim(&l, x->type.dims[d]));
	}
	c.base = rs_local(&s, "base", base);
	kir_expr *res = rs_reduce(&s, op, kind, x->type.dtype, dyn_elem, &c);
	if (!res) return false;
	kir_block_add(k, &s.point, kir_s_store(k, out, rs_out_linear(&s), res));
	return lk_end(&l, rs_finish(&s));
}

lower_result lower_dyn_reduce(lower_cx *cx, const tbc_op *op) {
	rkind kind;
	if (!rk_of(op->code, &kind)) return LOWER_NOT_MINE;
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	if (!y) return LOWER_OK;
	bool mask[TBC_MAX_RANK];
	if (x->type.rank >= 0 && rs_reduce_mask(op, x->type.rank, mask)) return LOWER_NOT_MINE; /* constant axes */
	const tbc_value *ax = op->n_inputs > 1 ? op->inputs[1] : NULL;
	const char *opn = tbc_ops[op->code].onnx_name;
	if (x->type.rank < 0 || y->type.rank < 0 || !ax || ax->type.rank > 1 || tbc_dtype_is_float(ax->type.dtype))
		return lower_error(cx, op, "op %s with axes of unknown count has no lowering yet", opn), LOWER_FAILED;
	bool keep = tbc_attr_int(op, "keepdims", 1) != 0;
	int64_t n_axes = ax->type.rank == 0 ? 1 : ax->type.dims[0].sym ? -1 : ax->type.dims[0].size;
	if (keep ? y->type.rank != x->type.rank : n_axes < 0 || y->type.rank != x->type.rank - n_axes)
		return lower_error(cx, op, "op %s: the output's rank does not fit the axes", opn), LOWER_FAILED;
	if (!shape_kernel(cx, op) || !data_kernel(cx, op, kind)) return LOWER_FAILED;
	return LOWER_OK;
}
