/* Shape kernels of the ops whose output shape is given by a tensor's values
 * or by dims inference could not know: Reshape, Squeeze, Unsqueeze, Expand,
 * Tile, ConstantOfShape, Range, and the broadcasting elementwise ops.
 *
 * Each emits one small sequential kernel that reads the shape-giving inputs
 * (and the inputs' dims), checks them as the interpreter does
 * (ir/kernels/data_shape.c, data_select.c), and stores the output dims into
 * their computed symbols (lower_shape_dim).  The data itself is then moved
 * by the op's ordinary lowering, which sees symbolic dims like a dynamic
 * batch's: Reshape and its kin alias their input, Expand broadcasts, Range
 * fills.  Run-time errors carry the interpreter's wording. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "codegen/lower/lower_dyn.h"
#include "codegen/lower/kir_short.h"
#include "ir/kernels/kernels.h"

bool shk_begin(shk *s, lower_cx *cx, const tbc_op *op) {
	memset(s, 0, sizeof *s);
	s->op = op;
	const char *ty = tbc_ops[op->code].onnx_name;
	snprintf(s->where, sizeof s->where, "node '%s' (%s)", op->name ? op->name : "", ty);
	char what[64];
	snprintf(what, sizeof what, "shape_%s", ty);
	if (!lk_begin(&s->l, cx, what)) return false;
	s->k = s->l.k;
	return true;
}


void shk_fail_if(shk *s, kir_expr *cond, const char *fmt, ...) {
	char msg[256], full[448];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "%s: %s", s->where, msg);
	kir_block_add(s->k, &s->b, kir_s_error(s->k, cond, full));
}

kir_expr *shk_let(shk *s, const char *name, kir_expr *value) {
	kir_var *v = kir_var_new(s->k, name, value ? value->type : KIR_INDEX);
	kir_block_add(s->k, &s->b, kir_s_set(s->k, v, value));
	return kir_e_var(s->k, v);
}

kir_expr *shk_elem(shk *s, const tbc_value *v, int64_t i) {
	kir_buffer *b = lk_value(&s->l, v);
	return b ? kir_e_cast(s->k, KIR_INDEX, kir_e_load(s->k, b, I(s->k, i))) : NULL;
}

kir_expr *shk_dim_of(shk *s, const tbc_value *v, int d) { return lk_dim(&s->l, v->type.dims[d]); }

bool shk_out_dim(shk *s, int o, int d, kir_expr *value) {
	tbc_dim dim = s->op->outputs[o]->type.dims[d];
	/* A symbol this kernel stores already (two outputs sharing a dim): it
	 * holds the same value by construction, and checking against it would
	 * read the value from before the kernel ran. */
	for (int i = 0; dim.sym && i < s->n_stored; i++)
		if (!strcmp(s->stored[i], dim.sym)) return true;
	if (dim.sym && !lower_dim_known(s->l.cx, dim) && s->n_stored < SHK_MAX_STORED) s->stored[s->n_stored++] = dim.sym;
	char what[64];
	snprintf(what, sizeof what, "output dim %d of %s", d, tbc_ops[s->op->code].onnx_name);
	return lower_shape_dim(&s->l, &s->b, s->op, dim, what, value);
}

bool shk_end(shk *s) {
	if (!s->b.first) kir_block_add(s->k, &s->b, kir_s_set(s->k, kir_var_new(s->k, "unused", KIR_INDEX), I(s->k, 0)));
	return lk_end(&s->l, s->b.first);
}

bool shk_store_sym(shk *s, const char *name, kir_expr *value, tbc_dim *out) {
	lower_cx *cx = s->l.cx;
	int idx = lower_sym_computed(cx, name);
	kir_buffer *syms = idx >= 0 ? lk_syms(&s->l) : NULL;
	if (!syms) return false;
	kir_block_add(s->k, &s->b, kir_s_store(s->k, syms, I(s->k, idx), kir_e_cast(s->k, TBC_DT_I64, value)));
	if (out) *out = (tbc_dim){-1, cx->p->sym_names[idx]};
	return !s->k->failed;
}

int shk_static_len(lower_cx *cx, const tbc_op *op, int input, const char *what) {
	const tbc_value *v = op->n_inputs > input ? op->inputs[input] : NULL;
	if (!v || v->type.rank != 1 || v->type.dims[0].sym || v->type.dims[0].size > TBC_MAX_RANK) {
		lower_error(cx, op, "%s of unknown length has no lowering yet", what);
		return -1;
	}
	return (int)v->type.dims[0].size;
}

/* dims[idx] for a run-time idx in [0, n): a chain of selects. */
static kir_expr *pick(shk *s, kir_expr *const *dims, int n, kir_expr *idx) {
	if (n == 0) return I(s->k, 1);
	kir_expr *r = dims[n - 1];
	for (int i = n - 2; i >= 0; i--) r = SEL(s->k, CMP(s->k, KIR_EQ, idx, I(s->k, i)), dims[i], r);
	return r;
}

/* ---- Reshape ----------------------------------------------------------------*/
static bool shape_reshape(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int n = y->type.rank, r = x->type.rank;
	bool allowzero = tbc_attr_int(op, "allowzero", 0) != 0;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *total = I(s.k, 1);
	for (int d = 0; d < r; d++) total = MUL(s.k, total, shk_dim_of(&s, x, d));
	total = shk_let(&s, "total", total);
	kir_expr *v[TBC_MAX_RANK], *known = I(s.k, 1), *minus = I(s.k, 0), *zero = I(s.k, 0);
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof name, "s%d", i);
		v[i] = shk_let(&s, name, shk_elem(&s, op->inputs[1], i));
		shk_fail_if(&s, CMP(s.k, KIR_LT, v[i], I(s.k, -1)), "shape[%d] is below -1", i);
		if (!allowzero) {
			if (i >= r) shk_fail_if(&s, CMP(s.k, KIR_EQ, v[i], I(s.k, 0)), "shape[%d] is 0 (copy) but the input has rank %d", i, r);
			else v[i] = shk_let(&s, name, SEL(s.k, CMP(s.k, KIR_EQ, v[i], I(s.k, 0)), shk_dim_of(&s, x, i), v[i]));
		} else {
			zero = ADD(s.k, zero, SEL(s.k, CMP(s.k, KIR_EQ, v[i], I(s.k, 0)), I(s.k, 1), I(s.k, 0)));
		}
		kir_expr *is_minus = CMP(s.k, KIR_EQ, v[i], I(s.k, -1));
		minus = ADD(s.k, minus, SEL(s.k, is_minus, I(s.k, 1), I(s.k, 0)));
		known = MUL(s.k, known, SEL(s.k, is_minus, I(s.k, 1), v[i]));
	}
	minus = shk_let(&s, "minus", minus);
	known = shk_let(&s, "known", known);
	shk_fail_if(&s, CMP(s.k, KIR_GT, minus, I(s.k, 1)), "the shape has more than one -1");
	if (allowzero)
		shk_fail_if(&s, AND(s.k, CMP(s.k, KIR_GT, zero, I(s.k, 0)), CMP(s.k, KIR_GT, minus, I(s.k, 0))),
			"with allowzero, the shape cannot hold both 0 and -1");
	kir_expr *has_minus = CMP(s.k, KIR_EQ, minus, I(s.k, 1));
	shk_fail_if(&s,
		SEL(s.k, has_minus,
		    OR(s.k, CMP(s.k, KIR_EQ, known, I(s.k, 0)),
		       CMP(s.k, KIR_NE, kir_e_binary(s.k, KIR_FLOORMOD, total, SEL(s.k, CMP(s.k, KIR_EQ, known, I(s.k, 0)), I(s.k, 1), known)),
			   I(s.k, 0))),
		    CMP(s.k, KIR_NE, known, total)),
		"cannot view the input's elements as the shape given");
	kir_expr *inferred = kir_e_binary(s.k, KIR_FLOORDIV, total, SEL(s.k, CMP(s.k, KIR_EQ, known, I(s.k, 0)), I(s.k, 1), known));
	for (int i = 0; i < n; i++)
		if (!shk_out_dim(&s, 0, i, SEL(s.k, CMP(s.k, KIR_EQ, v[i], I(s.k, -1)), inferred, v[i]))) return false;
	return shk_end(&s);
}

/* ---- Squeeze / Unsqueeze with axes given while running ---------------------------*/
/* axes[a] normalised against rank, checked in range and distinct. */
static bool load_axes(shk *s, const tbc_value *axes, int k, int rank, kir_expr **out) {
	for (int a = 0; a < k; a++) {
		char name[16];
		snprintf(name, sizeof name, "axis%d", a);
		kir_expr *v = shk_elem(s, axes, a);
		if (!v) return false;
		shk_fail_if(s, OR(s->k, CMP(s->k, KIR_LT, v, I(s->k, -rank)), CMP(s->k, KIR_GE, v, I(s->k, rank))), "axes[%d] is out of range for rank %d", a,
			rank);
		out[a] = shk_let(s, name, SEL(s->k, CMP(s->k, KIR_LT, v, I(s->k, 0)), ADD(s->k, v, I(s->k, rank)), v));
		for (int b = 0; b < a; b++) shk_fail_if(s, CMP(s->k, KIR_EQ, out[a], out[b]), "axes repeat an axis");
	}
	return true;
}

/* Whether a run-time axis list holds position p. */
static kir_expr *holds(shk *s, kir_expr *const *axes, int k, int p) {
	kir_expr *h = kir_e_int(s->k, TBC_DT_BOOL, 0);
	for (int a = 0; a < k; a++) h = OR(s->k, h, CMP(s->k, KIR_EQ, axes[a], I(s->k, p)));
	return h;
}

static bool shape_unsqueeze(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int k = op->n_inputs > 1 && op->inputs[1] ? shk_static_len(cx, op, 1, "Unsqueeze's axes") : -1;
	if (k < 0) return op->n_inputs > 1 && op->inputs[1] ? false : lower_error(cx, op, "Unsqueeze needs axes");
	int r = x->type.rank, R = r + k;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *axes[TBC_MAX_RANK], *in[TBC_MAX_RANK];
	if (!load_axes(&s, op->inputs[1], k, R, axes)) return false;
	for (int d = 0; d < r; d++) in[d] = shk_dim_of(&s, x, d);
	for (int j = 0; j < R; j++) {
		kir_expr *before = I(s.k, 0); /* inserted positions before j */
		for (int a = 0; a < k; a++) before = ADD(s.k, before, SEL(s.k, CMP(s.k, KIR_LT, axes[a], I(s.k, j)), I(s.k, 1), I(s.k, 0)));
		kir_expr *src = kir_e_binary(s.k, KIR_MAX, I(s.k, 0), kir_e_binary(s.k, KIR_SUB, I(s.k, j), before));
		if (!shk_out_dim(&s, 0, j, SEL(s.k, holds(&s, axes, k, j), I(s.k, 1), pick(&s, in, r, src)))) return false;
	}
	return shk_end(&s);
}

static bool shape_squeeze(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int r = x->type.rank;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_expr *in[TBC_MAX_RANK], *gone[TBC_MAX_RANK];
	for (int d = 0; d < r; d++) in[d] = shk_dim_of(&s, x, d);
	if (op->n_inputs > 1 && op->inputs[1]) {
		int k = shk_static_len(cx, op, 1, "Squeeze's axes");
		kir_expr *axes[TBC_MAX_RANK];
		if (k < 0 || !load_axes(&s, op->inputs[1], k, r, axes)) return false;
		if (y->type.rank != r - k) return lower_error(cx, op, "Squeeze's output rank does not fit its axes");
		for (int d = 0; d < r; d++) {
			gone[d] = holds(&s, axes, k, d);
			shk_fail_if(&s, AND(s.k, gone[d], CMP(s.k, KIR_NE, in[d], I(s.k, 1))), "cannot squeeze dim %d: it is not 1", d);
		}
	} else {
		/* Without axes every dim of size 1 goes.  Compiled code fixed the
		 * rank before running (inference with static ranks): static dims
		 * of 1 go, and a symbolic dim stays, so it must not be 1. */
		int kept = 0;
		for (int d = 0; d < r; d++) kept += x->type.dims[d].sym || x->type.dims[d].size != 1;
		if (y->type.rank != kept) return lower_error(cx, op, "Squeeze's output rank does not fit its input");
		for (int d = 0; d < r; d++) {
			gone[d] = kir_e_int(s.k, TBC_DT_BOOL, !x->type.dims[d].sym && x->type.dims[d].size == 1);
			if (x->type.dims[d].sym)
				shk_fail_if(&s, CMP(s.k, KIR_EQ, in[d], I(s.k, 1)),
					    "input dim %d is 1 while running: Squeeze without axes drops it, but the "
					    "compiled code fixed the output's rank at %d, assuming a dim known only "
					    "while running is not 1",
					    d, kept);
		}
	}
	/* Output dim j is the input dim d that is kept and has j kept dims before it. */
	for (int j = 0; j < y->type.rank; j++) {
		kir_expr *v = I(s.k, 1), *kept_before = I(s.k, 0);
		for (int d = 0; d < r; d++) {
			kir_expr *here = AND(s.k, kir_e_unary(s.k, KIR_NOT, gone[d]), CMP(s.k, KIR_EQ, kept_before, I(s.k, j)));
			v = SEL(s.k, here, in[d], v);
			kept_before = ADD(s.k, kept_before, SEL(s.k, gone[d], I(s.k, 0), I(s.k, 1)));
		}
		if (!shk_out_dim(&s, 0, j, v)) return false;
	}
	return shk_end(&s);
}

/* ---- Broadcasting ------------------------------------------------------------------*/
/* Output dim j of a multidirectional broadcast of dims a and b (either may
 * be absent: NULL): equal, or one of them 1; else the run fails. */
static kir_expr *bcast(shk *s, kir_expr *a, kir_expr *b, int j) {
	if (!a) return b;
	if (!b) return a;
	shk_fail_if(s, AND(s->k, CMP(s->k, KIR_NE, a, b), AND(s->k, CMP(s->k, KIR_NE, a, I(s->k, 1)), CMP(s->k, KIR_NE, b, I(s->k, 1)))),
		"dim %d does not broadcast", j);
	return SEL(s->k, CMP(s->k, KIR_EQ, a, I(s->k, 1)), b, a);
}

static bool shape_expand(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0], *y = op->outputs[0];
	int n = shk_static_len(cx, op, 1, "Expand's shape");
	if (n < 0) return false;
	int r = x->type.rank, R = y->type.rank;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	for (int j = 0; j < R; j++) {
		int dx = j - (R - r), ds = j - (R - n);
		kir_expr *a = dx >= 0 ? shk_dim_of(&s, x, dx) : NULL, *b = NULL;
		if (ds >= 0) {
			b = shk_elem(&s, op->inputs[1], ds);
			shk_fail_if(&s, CMP(s.k, KIR_LT, b, I(s.k, 0)), "shape[%d] is negative", ds);
		}
		if (!shk_out_dim(&s, 0, j, bcast(&s, a, b, j))) return false;
	}
	return shk_end(&s);
}

/* Elementwise ops: the output's dims broadcast from every operand's. */
static bool shape_broadcast(lower_cx *cx, const tbc_op *op) {
	const tbc_value *y = op->outputs[0];
	int R = y->type.rank;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	for (int j = 0; j < R; j++) {
		kir_expr *v = NULL;
		for (int i = 0; i < op->n_inputs; i++) {
			const tbc_value *x = op->inputs[i];
			if (!x) continue;
			int d = j - (R - x->type.rank);
			if (d >= 0) v = bcast(&s, v, shk_dim_of(&s, x, d), j);
		}
		if (!shk_out_dim(&s, 0, j, v ? v : I(s.k, 1))) return false;
	}
	for (int o = 1; o < op->n_outputs; o++) /* ops with more outputs of the same shape */
		for (int j = 0; op->outputs[o] && j < R && j < op->outputs[o]->type.rank; j++)
			if (!lower_dim_known(cx, op->outputs[o]->type.dims[j])) return lower_error(cx, op, "output %d's shape is not known", o);
	return shk_end(&s);
}

/* ---- Tile, ConstantOfShape, Range ---------------------------------------------------*/
static bool shape_tile(lower_cx *cx, const tbc_op *op) {
	const tbc_value *x = op->inputs[0];
	int r = x->type.rank;
	if (shk_static_len(cx, op, 1, "Tile's repeats") != r) return r >= 0 && lower_error(cx, op, "Tile's repeats must hold one value per dim");
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	for (int d = 0; d < r; d++) {
		kir_expr *rep = shk_elem(&s, op->inputs[1], d);
		shk_fail_if(&s, CMP(s.k, KIR_LT, rep, I(s.k, 0)), "repeats[%d] is negative", d);
		if (!shk_out_dim(&s, 0, d, MUL(s.k, shk_dim_of(&s, x, d), rep))) return false;
	}
	return shk_end(&s);
}

static bool shape_constant_of_shape(lower_cx *cx, const tbc_op *op) {
	int n = shk_static_len(cx, op, 0, "ConstantOfShape's shape");
	if (n < 0) return false;
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	for (int d = 0; d < n; d++) {
		kir_expr *v = shk_elem(&s, op->inputs[0], d);
		shk_fail_if(&s, CMP(s.k, KIR_LT, v, I(s.k, 0)), "shape[%d] is negative", d);
		if (!shk_out_dim(&s, 0, d, v)) return false;
	}
	return shk_end(&s);
}

/* The element count of Range, as ir/kernels/data_select.c range_count:
 * ceil((limit - start) / delta), at least 0; floats in f64. */
static bool shape_range(lower_cx *cx, const tbc_op *op) {
	tbc_dtype dt = op->inputs[0]->type.dtype;
	for (int i = 0; i < 3; i++)
		if (tbc_type_numel(&op->inputs[i]->type) != 1 || op->inputs[i]->type.rank > 1)
			return lower_error(cx, op, "Range's start, limit and delta must be scalars");
	shk s;
	if (!shk_begin(&s, cx, op)) return false;
	kir_kernel *k = s.k;
	kir_buffer *b[3];
	for (int i = 0; i < 3; i++)
		if (!(b[i] = lk_value(&s.l, op->inputs[i]))) return false;
	kir_expr *n;
	const char *bad = "start, limit and delta must be finite scalars of one dtype, delta non-zero";
	if (tbc_dtype_is_float(dt)) {
		kir_expr *v[3];
		kir_expr *finite = kir_e_int(k, TBC_DT_BOOL, 1);
		for (int i = 0; i < 3; i++) {
			kir_expr *x = kir_e_load(k, b[i], I(s.k, 0));
			if (dt != TBC_DT_F32 && dt != TBC_DT_F64) x = kir_e_cast(k, TBC_DT_F32, x);
			v[i] = shk_let(&s, i == 0 ? "start" : i == 1 ? "limit" : "delta", kir_e_cast(k, TBC_DT_F64, x));
			finite = AND(s.k, finite,
				     kir_e_unary(k, KIR_NOT, OR(s.k, kir_e_unary(k, KIR_ISNAN, v[i]), kir_e_unary(k, KIR_ISINF, v[i]))));
		}
		kir_expr *zero = kir_e_float(k, TBC_DT_F64, 0);
		shk_fail_if(&s, OR(s.k, kir_e_unary(k, KIR_NOT, finite), CMP(s.k, KIR_EQ, v[2], zero)), "%s", bad);
		kir_expr *q = shk_let(&s, "q", kir_e_unary(k, KIR_CEIL, kir_e_binary(k, KIR_DIV, kir_e_binary(k, KIR_SUB, v[1], v[0]), v[2])));
		shk_fail_if(&s, CMP(s.k, KIR_GT, q, kir_e_float(k, TBC_DT_F64, (double)TBC_MAX_TENSOR_BYTES)), "%s", bad);
		n = SEL(s.k, CMP(s.k, KIR_GT, q, zero), kir_e_cast(k, KIR_INDEX, q), I(s.k, 0));
	} else {
		kir_expr *a = shk_let(&s, "start", kir_e_cast(k, KIR_INDEX, kir_e_load(k, b[0], I(s.k, 0))));
		kir_expr *l = shk_let(&s, "limit", kir_e_cast(k, KIR_INDEX, kir_e_load(k, b[1], I(s.k, 0))));
		kir_expr *c = shk_let(&s, "delta", kir_e_cast(k, KIR_INDEX, kir_e_load(k, b[2], I(s.k, 0))));
		shk_fail_if(&s, CMP(s.k, KIR_EQ, c, I(s.k, 0)), "%s", bad);
		/* limit - start in 64 bits: its overflow makes a range longer than any tensor. */
		kir_expr *diff = shk_let(&s, "diff", kir_e_binary(k, KIR_SUB, l, a));
		kir_expr *ovf = CMP(s.k, KIR_LT,
				    kir_e_binary(k, KIR_AND, kir_e_binary(k, KIR_XOR, l, a), kir_e_binary(k, KIR_XOR, l, diff)), I(s.k, 0));
		shk_fail_if(&s, ovf, "%s", bad);
		kir_expr *safe_c = SEL(s.k, CMP(s.k, KIR_EQ, c, I(s.k, 0)), I(s.k, 1), c);
		kir_expr *q = kir_e_binary(k, KIR_DIV, diff, safe_c); /* truncating */
		kir_expr *exact = CMP(s.k, KIR_EQ, MUL(s.k, q, safe_c), diff);
		kir_expr *same_sign = CMP(s.k, KIR_EQ, CMP(s.k, KIR_GT, diff, I(s.k, 0)), CMP(s.k, KIR_GT, safe_c, I(s.k, 0)));
		q = shk_let(&s, "q", ADD(s.k, q, SEL(s.k, AND(s.k, kir_e_unary(k, KIR_NOT, exact), same_sign), I(s.k, 1), I(s.k, 0))));
		shk_fail_if(&s, CMP(s.k, KIR_GT, q, I(s.k, TBC_MAX_TENSOR_BYTES)), "%s", bad);
		n = SEL(s.k, CMP(s.k, KIR_GT, q, I(s.k, 0)), q, I(s.k, 0));
	}
	if (!shk_out_dim(&s, 0, 0, n)) return false;
	return shk_end(&s);
}

lower_result lower_dyn_shape(lower_cx *cx, const tbc_op *op) {
	bool (*fn)(lower_cx *, const tbc_op *) = NULL;
	switch (op->code) {
	case TBC_OP_Reshape: fn = shape_reshape; break;
	case TBC_OP_Unsqueeze: fn = shape_unsqueeze; break;
	case TBC_OP_Squeeze: fn = shape_squeeze; break;
	case TBC_OP_Expand: fn = shape_expand; break;
	case TBC_OP_Tile: fn = shape_tile; break;
	case TBC_OP_ConstantOfShape: fn = shape_constant_of_shape; break;
	case TBC_OP_Range: fn = shape_range; break;
	default:
		if (lower_ew_supported(op) && op->n_outputs >= 1 && op->outputs[0]) fn = shape_broadcast;
		break;
	}
	if (!fn) return LOWER_NOT_MINE;
	return fn(cx, op) ? LOWER_SHAPED : LOWER_FAILED;
}
