/* Reverse-mode differentiation on the graph IR (docs/training.md).
 *
 * Does: given a scalar float loss of the main graph and the values to
 * differentiate it by (initializers or graph inputs), appends the backward
 * graph to the main graph as ordinary ops and returns one gradient value per
 * such value, of its type.  Each op's rule is named by the `grad` column of
 * ir/ops.def (grad_<name> below); the rules emit ops every backend already
 * lowers (the input gradient of Conv is a ConvTranspose, its weight gradient
 * a Conv over the batch; MaxPool scatters through its indices).
 * Only ops on a path from a differentiated value to the loss are
 * differentiated; such an op without a rule is an error naming it.
 * Requires: a verified, inferred module; shapes the rules read (Conv's
 * spatial dims, Concat's axis) static.
 * Guarantees: the forward ops are untouched; every new op is inferred by its
 * own shape rule as it is made; a gradient has the dtype, rank and static
 * dims of its value; a value the loss does not depend on gets zeros.
 * Nothing is changed when it fails (new ops are removed). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

typedef struct ad {
	tbc_module *m;
	tbc_graph *g;
	tbc_diags *d;
	tbc_infer cx;
	const tbc_op *at; /* the forward op whose rule runs: names the new ops */
	uint32_t n;       /* forward value ids are below n */
	tbc_value **grad; /* per forward value id: its gradient so far */
	pass_bits active; /* depends on a differentiated value */
	pass_bits useful; /* the loss depends on it */
	bool failed;
} ad;

typedef bool (*grad_fn)(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx);

/* ---- Building ---------------------------------------------------------------- */

static bool fail(ad *A, tbc_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(ad *A, tbc_code code, const char *fmt, ...) {
	if (!A->failed) {
		char msg[512];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		if (A->at) tbc_diags_op(A->d, code, A->at, "gradient: %s", msg);
		else tbc_diags_add(A->d, code, A->m->path, NULL, NULL, NULL, "gradient: %s", msg);
	}
	A->failed = true;
	return false;
}

static tbc_op *mk(ad *A, tbc_opcode code, int n_in, tbc_value *const *in, int n_out) {
	if (A->failed) return NULL;
	for (int i = 0; i < n_in; i++)
		if (!in[i] && i < tbc_ops[code].min_inputs) {
			A->failed = true;
			return NULL;
		}
	tbc_op *op = tbc_op_new(A->g, code, A->at ? A->at->name : "", n_in, in, n_out);
	if (!op) fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	return op;
}

static void attr_i(ad *A, tbc_op *op, const char *name, int64_t v) {
	if (!op) return;
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_INT);
	if (!a) fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	else a->i = v;
}

static void attr_f(ad *A, tbc_op *op, const char *name, double v) {
	if (!op) return;
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_FLOAT);
	if (!a) fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	else a->f = v;
}

static void attr_s(ad *A, tbc_op *op, const char *name, const char *v) {
	if (!op) return;
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_STRING);
	char *s = a ? tbc_arena_strdup(A->m->arena, v) : NULL;
	if (!s) {
		fail(A, TBC_ERR_NO_MEMORY, "out of memory");
		return;
	}
	a->s = s;
	a->s_len = strlen(s);
}

static void attr_ints(ad *A, tbc_op *op, const char *name, int n, const int64_t *v) {
	if (!op) return;
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_INTS);
	int64_t *p = a ? tbc_arena_array(A->m->arena, n ? (size_t)n : 1, sizeof *p) : NULL;
	if (!p) {
		fail(A, TBC_ERR_NO_MEMORY, "out of memory");
		return;
	}
	if (n) memcpy(p, v, (size_t)n * sizeof *p);
	a->n = n;
	a->ints = p;
}

/* Copies attribute `name` of the forward op, when it has it. */
static void attr_copy(ad *A, tbc_op *op, const tbc_op *from, const char *name) {
	const tbc_attr *src = tbc_op_attr(from, name);
	if (!op || !src) return;
	tbc_attr *a = tbc_op_add_attr(op, name, src->kind);
	if (!a) {
		fail(A, TBC_ERR_NO_MEMORY, "out of memory");
		return;
	}
	const char *keep = a->name;
	*a = *src; /* the forward op's arrays live in the same arena, never freed */
	a->name = keep;
}

/* Infers op; its first result. */
static tbc_value *fin(ad *A, tbc_op *op) {
	if (!op || A->failed) {
		A->failed = true;
		return NULL;
	}
	if (!tbc_infer_op(&A->cx, op)) {
		fail(A, TBC_ERR_INTERNAL, "a %s of the backward graph does not infer (bug in tbc)", tbc_ops[op->code].name);
		return NULL;
	}
	return op->outputs[0];
}

static tbc_value *op1(ad *A, tbc_opcode c, tbc_value *a) {
	tbc_value *in[1] = {a};
	return fin(A, mk(A, c, 1, in, 1));
}
static tbc_value *op2(ad *A, tbc_opcode c, tbc_value *a, tbc_value *b) {
	tbc_value *in[2] = {a, b};
	return fin(A, mk(A, c, 2, in, 1));
}
static tbc_value *op3(ad *A, tbc_opcode c, tbc_value *a, tbc_value *b, tbc_value *d) {
	tbc_value *in[3] = {a, b, d};
	return fin(A, mk(A, c, 3, in, 1));
}

static tbc_value *constant(ad *A, tbc_dtype dt, int rank, const int64_t *dims, const double *f, const int64_t *i) {
	if (A->failed) return NULL;
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) {
		fail(A, TBC_ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	for (int64_t k = 0; k < t->numel; k++) {
		if (f) tbc_store_f64(dt, t->data, (size_t)k, f[k]);
		else tbc_store_i64(dt, t->data, (size_t)k, i[k]);
	}
	tbc_value *v = tbc_graph_add_const(A->g, NULL, t);
	tbc_tensor_destroy(t);
	if (!v) fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	return v;
}

/* A constant of the given dims, every element v. */
static tbc_value *filled_const(ad *A, tbc_dtype dt, int rank, const int64_t *dims, double v) {
	if (A->failed) return NULL;
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) {
		fail(A, TBC_ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	for (int64_t k = 0; k < t->numel; k++) tbc_store_f64(dt, t->data, (size_t)k, v);
	tbc_value *c = tbc_graph_add_const(A->g, NULL, t);
	tbc_tensor_destroy(t);
	if (!c) fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	return c;
}

static tbc_value *scalar(ad *A, tbc_dtype dt, double v) { return constant(A, dt, 0, NULL, &v, NULL); }
static tbc_value *ints(ad *A, int n, const int64_t *v) {
	int64_t d[1] = {n};
	return constant(A, TBC_DT_I64, 1, d, NULL, v);
}
static tbc_value *shape_of(ad *A, tbc_value *x) { return op1(A, TBC_OP_Shape, x); }
static tbc_value *reshape_like(ad *A, tbc_value *g, tbc_value *x) {
	if (g && pass_same_type(&g->type, &x->type)) return g;
	return op2(A, TBC_OP_Reshape, g, shape_of(A, x));
}
static tbc_value *transpose(ad *A, tbc_value *a, int n, const int64_t *perm) {
	tbc_value *in[1] = {a};
	tbc_op *op = mk(A, TBC_OP_Transpose, 1, in, 1);
	attr_ints(A, op, "perm", n, perm);
	return fin(A, op);
}
static tbc_value *reduce(ad *A, tbc_opcode c, tbc_value *a, int n_axes, const int64_t *axes, int64_t keepdims) {
	tbc_value *in[2] = {a, n_axes ? ints(A, n_axes, axes) : NULL};
	tbc_op *op = mk(A, c, n_axes ? 2 : 1, in, 1);
	attr_i(A, op, "keepdims", keepdims);
	return fin(A, op);
}
/* Zeros (or `v`) of x's type. */
static tbc_value *filled_like(ad *A, tbc_value *x, double v) {
	return op2(A, TBC_OP_Expand, scalar(A, x->type.dtype, v), shape_of(A, x));
}
static tbc_value *mul_s(ad *A, tbc_value *a, double s) { return op2(A, TBC_OP_Mul, a, scalar(A, a->type.dtype, s)); }

static bool dim_static(tbc_dim d) { return !d.sym && d.size >= 0; }
static bool dim_one(tbc_dim d) { return !d.sym && d.size == 1; }

/* numel(small) / numel(big) as a scalar of dtype dt: a constant when both
 * are static, else computed from their sizes while running. */
static tbc_value *size_ratio(ad *A, tbc_value *small, tbc_value *big, tbc_dtype dt) {
	int64_t s = tbc_type_numel(&small->type), b = tbc_type_numel(&big->type);
	if (s >= 0 && b > 0) return scalar(A, dt, (double)s / (double)b);
	tbc_value *cs = op1(A, TBC_OP_Size, small), *cb = op1(A, TBC_OP_Size, big);
	tbc_op *c1 = mk(A, TBC_OP_Cast, 1, &cs, 1);
	attr_i(A, c1, "to", dt);
	tbc_op *c2 = mk(A, TBC_OP_Cast, 1, &cb, 1);
	attr_i(A, c2, "to", dt);
	tbc_value *fs = fin(A, c1), *fb = fin(A, c2);
	return op2(A, TBC_OP_Div, fs, fb);
}

/* The gradient g of a broadcast result, summed back to the shape of the
 * operand x: over the leading dims x lacks and the dims where x has 1. */
static tbc_value *sum_to(ad *A, tbc_value *g, tbc_value *x) {
	if (!g || A->failed) return NULL;
	if (pass_same_type(&g->type, &x->type)) return g;
	int rg = g->type.rank, rx = x->type.rank;
	if (rg < 0 || rx < 0 || rx > rg) {
		fail(A, TBC_ERR_UNSUPPORTED, "cannot sum a gradient of rank %d back to rank %d", rg, rx);
		return NULL;
	}
	int64_t axes[TBC_MAX_RANK];
	int n = 0;
	for (int i = 0; i < rg; i++) {
		if (i < rg - rx) {
			axes[n++] = i;
			continue;
		}
		tbc_dim xd = x->type.dims[i - (rg - rx)], gd = g->type.dims[i];
		if (dim_one(xd) && !dim_one(gd)) axes[n++] = i;
		else if (!tbc_dim_eq(xd, gd) && !dim_static(gd)) {
			fail(A, TBC_ERR_UNSUPPORTED, "cannot tell whether a symbolic dim was broadcast (dim %d)", i);
			return NULL;
		}
	}
	if (n) g = reduce(A, TBC_OP_ReduceSum, g, n, axes, 1);
	return reshape_like(A, g, x);
}

static bool need(const ad *A, const tbc_op *op, int i) {
	const tbc_value *v = i < op->n_inputs ? op->inputs[i] : NULL;
	return v && pass_bits_get(&A->active, v->id);
}

/* ---- Rules -------------------------------------------------------------------
 * grad_<name>(A, op, dy, dx): dy[i] is the gradient of output i (NULL when
 * the loss does not depend on it); sets dx[i] for each input i that needs
 * one (need()).  Referenced from ops.def's grad column. */
#define grad_none NULL

static bool grad_identity(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	(void)A, (void)op;
	dx[0] = dy[0];
	return true;
}

static bool grad_add(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if (need(A, op, 0)) dx[0] = sum_to(A, dy[0], op->inputs[0]);
	if (need(A, op, 1)) dx[1] = sum_to(A, dy[0], op->inputs[1]);
	return true;
}

static bool grad_sub(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if (need(A, op, 0)) dx[0] = sum_to(A, dy[0], op->inputs[0]);
	if (need(A, op, 1)) dx[1] = sum_to(A, op1(A, TBC_OP_Neg, dy[0]), op->inputs[1]);
	return true;
}

static bool grad_mul(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *a = op->inputs[0], *b = op->inputs[1];
	if (need(A, op, 0)) dx[0] = sum_to(A, op2(A, TBC_OP_Mul, dy[0], b), a);
	if (need(A, op, 1)) dx[1] = sum_to(A, op2(A, TBC_OP_Mul, dy[0], a), b);
	return true;
}

/* y = a / b: da = dy / b, db = -dy * y / b. */
static bool grad_div(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *a = op->inputs[0], *b = op->inputs[1], *y = op->outputs[0];
	tbc_value *q = op2(A, TBC_OP_Div, dy[0], b);
	if (need(A, op, 0)) dx[0] = sum_to(A, q, a);
	if (need(A, op, 1)) dx[1] = sum_to(A, op1(A, TBC_OP_Neg, op2(A, TBC_OP_Mul, q, y)), b);
	return true;
}

/* y = a ^ b: da = dy * b * a^(b-1), db = dy * y * log(a). */
static bool grad_pow(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *a = op->inputs[0], *b = op->inputs[1], *y = op->outputs[0];
	if (need(A, op, 0)) {
		tbc_value *bm1 = op2(A, TBC_OP_Sub, b, scalar(A, b->type.dtype, 1));
		tbc_value *p = op2(A, TBC_OP_Pow, a, bm1);
		tbc_value *bb = b->type.dtype == a->type.dtype ? b : NULL;
		if (!bb && !A->failed) {
			tbc_op *c = mk(A, TBC_OP_Cast, 1, &b, 1);
			attr_i(A, c, "to", a->type.dtype);
			bb = fin(A, c);
		}
		dx[0] = sum_to(A, op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Mul, bb, p)), a);
	}
	if (need(A, op, 1)) {
		if (b->type.dtype != a->type.dtype) return fail(A, TBC_ERR_UNSUPPORTED, "exponent of another type than the base");
		dx[1] = sum_to(A, op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Mul, y, op1(A, TBC_OP_Log, a))), b);
	}
	return true;
}

static bool grad_neg(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	(void)op;
	dx[0] = op1(A, TBC_OP_Neg, dy[0]);
	return true;
}

static bool grad_exp(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op->outputs[0]);
	return true;
}

static bool grad_log(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op2(A, TBC_OP_Div, dy[0], op->inputs[0]);
	return true;
}

static bool grad_sqrt(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op2(A, TBC_OP_Div, mul_s(A, dy[0], 0.5), op->outputs[0]);
	return true;
}

/* dy where x > 0, else dy * alpha (Relu: 0). */
static tbc_value *where_positive(ad *A, const tbc_op *op, tbc_value *dy, tbc_value *neg) {
	tbc_value *x = op->inputs[0];
	tbc_value *pos = op2(A, TBC_OP_Greater, x, scalar(A, x->type.dtype, 0));
	return op3(A, TBC_OP_Where, pos, dy, neg);
}

static bool grad_relu(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = where_positive(A, op, dy[0], scalar(A, dy[0]->type.dtype, 0));
	return true;
}

static bool grad_leaky_relu(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = where_positive(A, op, dy[0], mul_s(A, dy[0], tbc_attr_float(op, "alpha", 0.01)));
	return true;
}

static bool grad_sigmoid(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	tbc_value *one_minus = op2(A, TBC_OP_Sub, scalar(A, y->type.dtype, 1), y);
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Mul, y, one_minus));
	return true;
}

static bool grad_tanh(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	tbc_value *d = op2(A, TBC_OP_Sub, scalar(A, y->type.dtype, 1), op2(A, TBC_OP_Mul, y, y));
	dx[0] = op2(A, TBC_OP_Mul, dy[0], d);
	return true;
}

/* d erf(x) = 2/sqrt(pi) exp(-x^2). */
static bool grad_erf(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	tbc_value *e = op1(A, TBC_OP_Exp, op1(A, TBC_OP_Neg, op2(A, TBC_OP_Mul, x, x)));
	dx[0] = op2(A, TBC_OP_Mul, dy[0], mul_s(A, e, 2.0 / sqrt(M_PI)));
	return true;
}

/* Exact Gelu, x * Phi(x): Phi(x) + x * phi(x).  Its tanh form,
 * 0.5 x (1 + t) with t = tanh(k (x + c x^3)), k = sqrt(2/pi), c = 0.044715:
 * 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2). */
static bool grad_gelu(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	const char *approx = tbc_attr_string(op, "approximate", "none");
	tbc_value *x = op->inputs[0];
	tbc_dtype dt = x->type.dtype;
	if (!strcmp(approx, "tanh")) {
		const double k = sqrt(2.0 / M_PI), c = 0.044715;
		tbc_value *x2 = op2(A, TBC_OP_Mul, x, x);
		tbc_value *t = op1(A, TBC_OP_Tanh, mul_s(A, op2(A, TBC_OP_Add, x, mul_s(A, op2(A, TBC_OP_Mul, x2, x), c)), k));
		tbc_value *half_1pt = mul_s(A, op2(A, TBC_OP_Add, t, scalar(A, dt, 1)), 0.5);
		tbc_value *sech2 = op2(A, TBC_OP_Sub, scalar(A, dt, 1), op2(A, TBC_OP_Mul, t, t));
		tbc_value *inner = op2(A, TBC_OP_Add, mul_s(A, x2, 3.0 * c), scalar(A, dt, 1));
		tbc_value *rest = op2(A, TBC_OP_Mul, mul_s(A, x, 0.5 * k), op2(A, TBC_OP_Mul, sech2, inner));
		dx[0] = op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Add, half_1pt, rest));
		return true;
	}
	if (strcmp(approx, "none"))
		return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for Gelu with approximate='%s'", approx);
	tbc_value *cdf = mul_s(A, op2(A, TBC_OP_Add, op1(A, TBC_OP_Erf, mul_s(A, x, M_SQRT1_2)), scalar(A, dt, 1)), 0.5);
	tbc_value *pdf = mul_s(A, op1(A, TBC_OP_Exp, mul_s(A, op2(A, TBC_OP_Mul, x, x), -0.5)), 1.0 / sqrt(2.0 * M_PI));
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Add, cdf, op2(A, TBC_OP_Mul, x, pdf)));
	return true;
}

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* dx = y * (dy - sum(dy * y, axis)). */
static bool grad_softmax(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	int64_t axis = norm_axis(tbc_attr_int(op, "axis", -1), y->type.rank);
	tbc_value *s = reduce(A, TBC_OP_ReduceSum, op2(A, TBC_OP_Mul, dy[0], y), 1, &axis, 1);
	dx[0] = op2(A, TBC_OP_Mul, y, op2(A, TBC_OP_Sub, dy[0], s));
	return true;
}

/* dx = dy - exp(y) * sum(dy, axis). */
static bool grad_log_softmax(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	int64_t axis = norm_axis(tbc_attr_int(op, "axis", -1), y->type.rank);
	tbc_value *s = reduce(A, TBC_OP_ReduceSum, dy[0], 1, &axis, 1);
	dx[0] = op2(A, TBC_OP_Sub, dy[0], op2(A, TBC_OP_Mul, op1(A, TBC_OP_Exp, y), s));
	return true;
}

/* Reshape, Flatten, Squeeze, Unsqueeze: the gradient takes x's shape back. */
static bool grad_reshape(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = reshape_like(A, dy[0], op->inputs[0]);
	return true;
}

static bool grad_transpose(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	int r = op->inputs[0]->type.rank;
	const int64_t *perm;
	int n = tbc_attr_ints(op, "perm", &perm);
	int64_t inv[TBC_MAX_RANK];
	for (int i = 0; i < r; i++) {
		int64_t p = n == r ? perm[i] : r - 1 - i;
		inv[p] = i;
	}
	dx[0] = transpose(A, dy[0], r, inv);
	return true;
}

static bool grad_expand(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = sum_to(A, dy[0], op->inputs[0]);
	return true;
}

/* The reduced axes of a ReduceSum/ReduceMean (sorted, non-negative); -1
 * when they are not a constant, 0 with *identity when it reduces nothing. */
static int reduced_axes(const tbc_op *op, int64_t *axes, bool *identity) {
	int r = op->inputs[0]->type.rank;
	*identity = false;
	if (op->n_inputs < 2 || !op->inputs[1]) {
		if (tbc_attr_int(op, "noop_with_empty_axes", 0)) {
			*identity = true;
			return 0;
		}
		for (int i = 0; i < r; i++) axes[i] = i;
		return r;
	}
	const tbc_tensor *t = tbc_input_const(op, 1);
	if (!t || t->numel > r) return -1;
	if (t->numel == 0) { /* as absent */
		*identity = tbc_attr_int(op, "noop_with_empty_axes", 0) != 0;
		for (int i = 0; i < r; i++) axes[i] = i;
		return *identity ? 0 : r;
	}
	bool seen[TBC_MAX_RANK] = {false};
	for (int64_t k = 0; k < t->numel; k++) {
		int64_t a = norm_axis(tbc_load_i64(t->dtype, t->data, (size_t)k), r);
		if (a < 0 || a >= r) return -1;
		seen[a] = true;
	}
	int n = 0;
	for (int i = 0; i < r; i++)
		if (seen[i]) axes[n++] = i;
	return n;
}

static bool grad_reduce(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	int64_t axes[TBC_MAX_RANK];
	bool identity;
	int n = reduced_axes(op, axes, &identity);
	if (n < 0) return fail(A, TBC_ERR_UNSUPPORTED, "the axes are not a constant");
	if (identity) {
		dx[0] = dy[0];
		return true;
	}
	tbc_value *g = dy[0];
	if (!tbc_attr_int(op, "keepdims", 1) && n) g = op2(A, TBC_OP_Unsqueeze, g, ints(A, n, axes));
	g = op2(A, TBC_OP_Expand, g, shape_of(A, x));
	if (op->code == TBC_OP_ReduceMean) g = op2(A, TBC_OP_Mul, g, size_ratio(A, op->outputs[0], x, x->type.dtype));
	dx[0] = g;
	return true;
}

/* Operand as a matrix of rank >= 2 (a vector becomes a row or a column). */
static tbc_value *as_matrix(ad *A, tbc_value *v, int64_t axis) {
	return v->type.rank == 1 ? op2(A, TBC_OP_Unsqueeze, v, ints(A, 1, &axis)) : v;
}
static tbc_value *swap_last(ad *A, tbc_value *v) {
	int r = v->type.rank;
	int64_t perm[TBC_MAX_RANK];
	for (int i = 0; i < r; i++) perm[i] = i;
	perm[r - 2] = r - 1;
	perm[r - 1] = r - 2;
	return transpose(A, v, r, perm);
}

static tbc_value *gemm(ad *A, tbc_value *a, tbc_value *b, int64_t ta, int64_t tb, double alpha);

/* y = a @ b (numpy semantics): da = dy @ b^T, db = a^T @ dy, summed over
 * the batch dims each operand was broadcast along. */
static bool grad_matmul(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *a = op->inputs[0], *b = op->inputs[1];
	if (a->type.rank < 1 || b->type.rank < 1) return fail(A, TBC_ERR_UNSUPPORTED, "operands of unknown rank");
	tbc_value *a2 = as_matrix(A, a, 0), *b2 = as_matrix(A, b, 1), *g = dy[0];
	if (a->type.rank == 1) g = op2(A, TBC_OP_Unsqueeze, g, ints(A, 1, (const int64_t[]){-2}));
	if (b->type.rank == 1) g = op2(A, TBC_OP_Unsqueeze, g, ints(A, 1, (const int64_t[]){-1}));
	/* Summed to the matrix form, whose last two dims are the product's. */
	if (need(A, op, 0)) dx[0] = reshape_like(A, sum_to(A, op2(A, TBC_OP_MatMul, g, swap_last(A, b2)), a2), a);
	/* A weight matrix read by a batch of rows (a [..., M, K], b [K, N]):
	 * one product over all the rows, a^T [K, B*M] @ dy [B*M, N], rather
	 * than a product per batch [B, K, N] summed after (B times the memory:
	 * the largest value of a transformer's backward pass), as a Gemm. */
	if (need(A, op, 1) && b->type.rank == 2 && a->type.rank > 2 && !a->type.dims[a->type.rank - 1].sym &&
	    !b->type.dims[1].sym) {
		tbc_value *rows = op2(A, TBC_OP_Reshape, a, ints(A, 2, (const int64_t[]){-1, a->type.dims[a->type.rank - 1].size}));
		tbc_value *grows = op2(A, TBC_OP_Reshape, g, ints(A, 2, (const int64_t[]){-1, b->type.dims[1].size}));
		/* a^T read in place (Gemm's transA), not a transposed copy as
		 * large as a beside it. */
		dx[1] = gemm(A, rows, grows, 1, 0, 1.0);
	} else if (need(A, op, 1)) {
		dx[1] = reshape_like(A, sum_to(A, op2(A, TBC_OP_MatMul, swap_last(A, a2), g), b2), b);
	}
	return true;
}

static tbc_value *gemm(ad *A, tbc_value *a, tbc_value *b, int64_t ta, int64_t tb, double alpha) {
	tbc_value *in[2] = {a, b};
	tbc_op *op = mk(A, TBC_OP_Gemm, 2, in, 1);
	attr_i(A, op, "transA", ta);
	attr_i(A, op, "transB", tb);
	if (alpha != 1.0) attr_f(A, op, "alpha", alpha);
	return fin(A, op);
}

/* y = alpha * op(a) @ op(b) + beta * c, op() transposing when asked. */
static bool grad_gemm(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *a = op->inputs[0], *b = op->inputs[1], *g = dy[0];
	int64_t ta = tbc_attr_int(op, "transA", 0) != 0, tb = tbc_attr_int(op, "transB", 0) != 0;
	double alpha = tbc_attr_float(op, "alpha", 1.0), beta = tbc_attr_float(op, "beta", 1.0);
	if (need(A, op, 0)) dx[0] = ta ? gemm(A, b, g, tb, 1, alpha) : gemm(A, g, b, 0, !tb, alpha);
	if (need(A, op, 1)) dx[1] = tb ? gemm(A, g, a, 1, ta, alpha) : gemm(A, a, g, !ta, 0, alpha);
	if (need(A, op, 2)) dx[2] = sum_to(A, beta == 1.0 ? g : mul_s(A, g, beta), op->inputs[2]);
	return true;
}

/* y = where(c, a, b). */
static bool grad_where(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *zero = scalar(A, dy[0]->type.dtype, 0);
	if (need(A, op, 1)) dx[1] = sum_to(A, op3(A, TBC_OP_Where, op->inputs[0], dy[0], zero), op->inputs[1]);
	if (need(A, op, 2)) dx[2] = sum_to(A, op3(A, TBC_OP_Where, op->inputs[0], zero, dy[0]), op->inputs[2]);
	return true;
}

static bool grad_cast(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_op *c = mk(A, TBC_OP_Cast, 1, (tbc_value *const *)dy, 1);
	attr_i(A, c, "to", op->inputs[0]->type.dtype);
	dx[0] = fin(A, c);
	return true;
}

static bool grad_concat(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	int r = op->outputs[0]->type.rank;
	int64_t axis = norm_axis(tbc_attr_int(op, "axis", 0), r), at = 0;
	for (int i = 0; i < op->n_inputs; i++) {
		tbc_dim d = op->inputs[i]->type.dims[axis];
		if (!dim_static(d)) return fail(A, TBC_ERR_UNSUPPORTED, "input %d's size along the axis is symbolic", i);
		if (need(A, op, i)) {
			int64_t end = at + d.size;
			tbc_value *in[4] = {dy[0], ints(A, 1, &at), ints(A, 1, &end), ints(A, 1, &axis)};
			dx[i] = fin(A, mk(A, TBC_OP_Slice, 4, in, 1));
		}
		at += d.size;
	}
	return true;
}

/* Dropout: at inference the identity.  In training mode y = x * m * s
 * with m the mask the op drew and s its scale, so dx = dy * (m * s): a
 * second Dropout of the same seed, ratio, seed offset and shape applied to
 * ones draws the same mask (the stream depends on nothing else) and gives
 * m * s, rounded to x's type as the forward op rounds it.  The mask is
 * recomputed, not kept from the forward pass. */
static bool grad_dropout(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if (!pass_has_effects(op)) {
		dx[0] = dy[0];
		return true;
	}
	tbc_value *in[4] = {filled_like(A, op->inputs[0], 1), op->inputs[1], op->inputs[2],
			    op->n_inputs > 3 ? op->inputs[3] : NULL};
	tbc_op *d = mk(A, TBC_OP_Dropout, op->n_inputs, in, 1);
	attr_copy(A, d, op, "seed");
	dx[0] = op2(A, TBC_OP_Mul, dy[0], fin(A, d));
	return true;
}

/* Split: the outputs' gradients side by side again (zeros for one the loss
 * does not read). */
static bool grad_split(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	int n = op->n_outputs;
	tbc_value **parts = tbc_arena_array(A->m->arena, (size_t)n, sizeof *parts);
	if (!parts) return fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	for (int i = 0; i < n; i++) {
		if (!op->outputs[i]) return fail(A, TBC_ERR_UNSUPPORTED, "an output of Split is not wanted");
		parts[i] = dy[i] ? dy[i] : filled_like(A, op->outputs[i], 0);
	}
	tbc_op *c = mk(A, TBC_OP_Concat, n, parts, 1);
	attr_i(A, c, "axis", tbc_attr_int(op, "axis", 0));
	dx[0] = fin(A, c);
	return true;
}

/* An integer tensor input's values (at most TBC_MAX_RANK); -1 when it is not a constant. */
static int const_ints(const tbc_op *op, int index, int64_t *out) {
	const tbc_tensor *t = index < op->n_inputs && op->inputs[index] ? tbc_input_const(op, index) : NULL;
	if (!t || t->numel > TBC_MAX_RANK) return -1;
	for (int64_t i = 0; i < t->numel; i++) out[i] = tbc_load_i64(t->dtype, t->data, (size_t)i);
	return (int)t->numel;
}

/* Slice with steps of 1: the gradient padded with zeros back to x's shape. */
/* g spread along axis a with stride s: each element followed by s - 1
 * zeros, cut to `len` (Unsqueeze after a, Pad that axis, Reshape the two
 * into one: the shape from Shape(g), so other dims may be symbolic). */
static tbc_value *spread(ad *A, tbc_value *g, int a, int64_t s, int64_t len) {
	int r = g->type.rank;
	int64_t ax = a + 1;
	tbc_value *u = op2(A, TBC_OP_Unsqueeze, g, ints(A, 1, &ax));
	int64_t pads[2 * (TBC_MAX_RANK + 1)] = {0};
	pads[a + 1 + r + 1] = s - 1;
	u = op2(A, TBC_OP_Pad, u, ints(A, 2 * (r + 1), pads));
	int64_t L = g->type.dims[a].size, zero = 0, lo[1] = {0}, hi[1] = {a}, lo2[1] = {a + 1}, hi2[1] = {r}, m = L * s;
	tbc_value *sh = shape_of(A, g);
	tbc_value *parts[3] = {op3(A, TBC_OP_Slice, sh, ints(A, 1, lo), ints(A, 1, hi)), ints(A, 1, &m),
			       op3(A, TBC_OP_Slice, sh, ints(A, 1, lo2), ints(A, 1, hi2))};
	tbc_op *cat = mk(A, TBC_OP_Concat, 3, parts, 1);
	attr_i(A, cat, "axis", 0);
	u = op2(A, TBC_OP_Reshape, u, fin(A, cat));
	if (len == m) return u;
	int64_t axv = a;
	tbc_value *in[4] = {u, ints(A, 1, &zero), ints(A, 1, &len), ints(A, 1, &axv)};
	return fin(A, mk(A, TBC_OP_Slice, 4, in, 1));
}

/* Slice: dy back in place, zeros around.  Per axis, ONNX's clamping gives
 * the first index b, the step s and the count L; the elements sit at b,
 * b + s, ...  Steps of 1 are one Pad; another step spreads dy along its
 * axis first (reversed for a negative step, so the positions ascend). */
static bool grad_slice(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	int r = x->type.rank;
	int64_t starts[TBC_MAX_RANK], ends[TBC_MAX_RANK], axes[TBC_MAX_RANK], steps[TBC_MAX_RANK];
	int n = const_ints(op, 1, starts);
	if (n < 0 || const_ints(op, 2, ends) != n) return fail(A, TBC_ERR_UNSUPPORTED, "starts and ends are not constants");
	int na = op->n_inputs > 3 && op->inputs[3] ? const_ints(op, 3, axes) : -2;
	int ns = op->n_inputs > 4 && op->inputs[4] ? const_ints(op, 4, steps) : -2;
	if (na == -1 || ns == -1 || (na >= 0 && na != n) || (ns >= 0 && ns != n))
		return fail(A, TBC_ERR_UNSUPPORTED, "axes or steps are not constants");
	int64_t pads[2 * TBC_MAX_RANK] = {0};
	tbc_value *g = dy[0];
	for (int i = 0; i < n && g; i++) {
		int64_t a = norm_axis(na >= 0 ? axes[i] : i, r), s = ns >= 0 ? steps[i] : 1;
		if (a < 0 || a >= r || !dim_static(x->type.dims[a]))
			return fail(A, TBC_ERR_UNSUPPORTED, "an axis out of range or of symbolic size");
		if (s == 0) return fail(A, TBC_ERR_UNSUPPORTED, "a step of 0");
		int64_t d = x->type.dims[a].size, b = starts[i] < 0 ? starts[i] + d : starts[i], e = ends[i] < 0 ? ends[i] + d : ends[i];
		if (s > 0) {
			b = b < 0 ? 0 : b > d ? d : b;
			e = e < 0 ? 0 : e > d ? d : e;
		} else {
			b = b < 0 ? 0 : b > d - 1 ? d - 1 : b;
			e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
		}
		int64_t L = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e - s - 1) / -s : 0);
		if (L == 0) { /* nothing read: a zero gradient */
			dx[0] = filled_like(A, x, 0);
			return true;
		}
		int64_t first = s > 0 ? b : b + (L - 1) * s, stride = s > 0 ? s : -s;
		if (s < 0) { /* reversed: the positions ascend */
			int64_t st = -1, en = INT64_MIN, axv = a, m1 = -1;
			tbc_value *in[5] = {g, ints(A, 1, &st), ints(A, 1, &en), ints(A, 1, &axv), ints(A, 1, &m1)};
			g = fin(A, mk(A, TBC_OP_Slice, 5, in, 1));
		}
		int64_t len = (L - 1) * stride + 1;
		if (stride > 1) g = spread(A, g, (int)a, stride, len);
		pads[a] = first;
		pads[a + r] = d - first - len;
	}
	dx[0] = op2(A, TBC_OP_Pad, g, ints(A, 2 * r, pads));
	return true;
}

/* Gather: dy added at the rows it read (ScatterND, reduction add, so a row
 * read twice gets both), negative indices counted from the end.  Along an
 * axis a other than 0, the same on the data with a moved first: dy's dims
 * reordered to (indices, data before a, data after a), the sum moved back. */
static bool grad_gather(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *data = op->inputs[0], *idx = op->inputs[1];
	int r = data->type.rank, q = idx->type.rank;
	int64_t a = norm_axis(tbc_attr_int(op, "axis", 0), r);
	if (a < 0 || a >= r || q < 0) return fail(A, TBC_ERR_UNSUPPORTED, "an axis out of range");
	if (!dim_static(data->type.dims[a])) return fail(A, TBC_ERR_UNSUPPORTED, "a symbolic gathered dim");
	tbc_dtype it = idx->type.dtype;
	tbc_value *neg = op2(A, TBC_OP_Less, idx, scalar(A, it, 0));
	tbc_value *wrapped = op2(A, TBC_OP_Add, idx, scalar(A, it, (double)data->type.dims[a].size));
	tbc_value *pos = op3(A, TBC_OP_Where, neg, wrapped, idx);
	int64_t last = -1;
	tbc_value *base = data, *upd = dy[0];
	int64_t perm[TBC_MAX_RANK], inv[TBC_MAX_RANK], dperm[2 * TBC_MAX_RANK];
	if (a != 0) {
		perm[0] = a; /* data: a first */
		for (int i = 0, j = 1; i < r; i++)
			if (i != a) perm[j++] = i;
		for (int i = 0; i < r; i++) inv[perm[i]] = i;
		base = transpose(A, data, r, perm);
		int j = 0; /* dy: (data before a, indices, data after a) -> (indices, before, after) */
		for (int i = 0; i < q; i++) dperm[j++] = a + i;
		for (int i = 0; i < a; i++) dperm[j++] = i;
		for (int i = (int)a + q; i < r - 1 + q; i++) dperm[j++] = i;
		upd = transpose(A, dy[0], r - 1 + q, dperm);
	}
	tbc_value *in[3] = {filled_like(A, base, 0), op2(A, TBC_OP_Unsqueeze, pos, ints(A, 1, &last)), upd};
	tbc_op *sc = mk(A, TBC_OP_ScatterND, 3, in, 1);
	attr_s(A, sc, "reduction", "add");
	dx[0] = fin(A, sc);
	if (a != 0) dx[0] = transpose(A, dx[0], r, inv);
	return true;
}

/* LayerNormalization over axes [axis, rank): with xhat = (x - mean) * rstd,
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale;
 *   dscale = dy * xhat and dbias = dy, summed back to their shapes. */
static bool grad_layer_norm(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if ((op->n_outputs > 1 && dy[1]) || (op->n_outputs > 2 && dy[2]))
		return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule through LayerNormalization's Mean and InvStdDev outputs");
	tbc_value *x = op->inputs[0], *scale = op->inputs[1];
	int r = x->type.rank;
	int64_t axis = norm_axis(tbc_attr_int(op, "axis", -1), r), axes[TBC_MAX_RANK];
	int n = 0;
	for (int64_t i = axis; i < r; i++) axes[n++] = i;
	tbc_dtype dt = x->type.dtype;
	tbc_value *mu = reduce(A, TBC_OP_ReduceMean, x, n, axes, 1);
	tbc_value *xc = op2(A, TBC_OP_Sub, x, mu);
	tbc_value *var = reduce(A, TBC_OP_ReduceMean, op2(A, TBC_OP_Mul, xc, xc), n, axes, 1);
	tbc_value *sd = op1(A, TBC_OP_Sqrt, op2(A, TBC_OP_Add, var, scalar(A, dt, tbc_attr_float(op, "epsilon", 1e-5))));
	tbc_value *rstd = op2(A, TBC_OP_Div, scalar(A, dt, 1), sd);
	tbc_value *xhat = op2(A, TBC_OP_Mul, xc, rstd);
	if (need(A, op, 0)) {
		tbc_value *g = op2(A, TBC_OP_Mul, dy[0], scale);
		tbc_value *mg = reduce(A, TBC_OP_ReduceMean, g, n, axes, 1);
		tbc_value *mgx = reduce(A, TBC_OP_ReduceMean, op2(A, TBC_OP_Mul, g, xhat), n, axes, 1);
		tbc_value *inner = op2(A, TBC_OP_Sub, op2(A, TBC_OP_Sub, g, mg), op2(A, TBC_OP_Mul, xhat, mgx));
		dx[0] = op2(A, TBC_OP_Mul, rstd, inner);
	}
	if (need(A, op, 1)) dx[1] = sum_to(A, op2(A, TBC_OP_Mul, dy[0], xhat), scale);
	if (need(A, op, 2)) dx[2] = sum_to(A, dy[0], op->inputs[2]);
	return true;
}

static bool grad_abs(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op1(A, TBC_OP_Sign, op->inputs[0]));
	return true;
}

/* y = 1/x: dx = -dy * y^2. */
static bool grad_reciprocal(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	dx[0] = op1(A, TBC_OP_Neg, op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Mul, y, y)));
	return true;
}

static bool grad_sin(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op1(A, TBC_OP_Cos, op->inputs[0]));
	return true;
}

static bool grad_cos(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op1(A, TBC_OP_Neg, op2(A, TBC_OP_Mul, dy[0], op1(A, TBC_OP_Sin, op->inputs[0])));
	return true;
}

static bool grad_softplus(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op1(A, TBC_OP_Sigmoid, op->inputs[0]));
	return true;
}

/* x / (1 + |x|): dx = dy / (1 + |x|)^2. */
static bool grad_softsign(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	tbc_value *d = op2(A, TBC_OP_Add, op1(A, TBC_OP_Abs, x), scalar(A, x->type.dtype, 1));
	dx[0] = op2(A, TBC_OP_Div, dy[0], op2(A, TBC_OP_Mul, d, d));
	return true;
}

/* Elu: below zero y = alpha (e^x - 1), whose slope is y + alpha. */
static bool grad_elu(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	tbc_value *slope = op2(A, TBC_OP_Add, y, scalar(A, y->type.dtype, tbc_attr_float(op, "alpha", 1.0)));
	dx[0] = where_positive(A, op, dy[0], op2(A, TBC_OP_Mul, dy[0], slope));
	return true;
}

/* HardSigmoid: alpha where the line is inside (0, 1), else 0. */
static bool grad_hard_sigmoid(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *y = op->outputs[0];
	tbc_dtype dt = y->type.dtype;
	tbc_value *inside = op2(A, TBC_OP_And, op2(A, TBC_OP_Greater, y, scalar(A, dt, 0)), op2(A, TBC_OP_Less, y, scalar(A, dt, 1)));
	dx[0] = op3(A, TBC_OP_Where, inside, mul_s(A, dy[0], tbc_attr_float(op, "alpha", 0.2)), scalar(A, dt, 0));
	return true;
}

/* Swish: x * s with s = sigmoid(alpha x): s + alpha x s (1 - s). */
static bool grad_swish(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	tbc_dtype dt = x->type.dtype;
	double alpha = tbc_attr_float(op, "alpha", 1.0);
	tbc_value *sg = op1(A, TBC_OP_Sigmoid, mul_s(A, x, alpha));
	tbc_value *t = op2(A, TBC_OP_Mul, mul_s(A, x, alpha), op2(A, TBC_OP_Mul, sg, op2(A, TBC_OP_Sub, scalar(A, dt, 1), sg)));
	dx[0] = op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Add, sg, t));
	return true;
}

/* PRelu: dy where x > 0, dy * slope elsewhere; the slope's is dy * x there. */
static bool grad_prelu(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0], *slope = op->inputs[1];
	tbc_value *pos = op2(A, TBC_OP_Greater, x, scalar(A, x->type.dtype, 0));
	tbc_value *zero = scalar(A, x->type.dtype, 0);
	if (need(A, op, 0)) dx[0] = op3(A, TBC_OP_Where, pos, dy[0], op2(A, TBC_OP_Mul, dy[0], slope));
	if (need(A, op, 1)) dx[1] = sum_to(A, op3(A, TBC_OP_Where, pos, zero, op2(A, TBC_OP_Mul, dy[0], x)), slope);
	return true;
}

/* Clip: dy where min <= x <= max (the bounds themselves not differentiated). */
static bool grad_clip(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if (need(A, op, 1) || need(A, op, 2)) return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for Clip's bounds");
	tbc_value *x = op->inputs[0], *in = NULL;
	if (op->n_inputs > 1 && op->inputs[1]) in = op2(A, TBC_OP_GreaterOrEqual, x, op->inputs[1]);
	if (op->n_inputs > 2 && op->inputs[2]) {
		tbc_value *below = op2(A, TBC_OP_LessOrEqual, x, op->inputs[2]);
		in = in ? op2(A, TBC_OP_And, in, below) : below;
	}
	dx[0] = in ? op3(A, TBC_OP_Where, in, dy[0], scalar(A, dy[0]->type.dtype, 0)) : dy[0];
	return true;
}

/* Sum and Mean of several inputs, broadcast: dy (over n for Mean) summed back to each. */
static bool grad_sum(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *g = op->code == TBC_OP_Mean ? mul_s(A, dy[0], 1.0 / op->n_inputs) : dy[0];
	for (int i = 0; i < op->n_inputs; i++)
		if (need(A, op, i)) dx[i] = sum_to(A, g, op->inputs[i]);
	return true;
}

/* Max and Min of two inputs: dy goes to the one chosen (the first on a tie). */
static bool grad_max_min(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if (op->n_inputs == 1) {
		dx[0] = dy[0];
		return true;
	}
	if (op->n_inputs != 2) return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for %s of more than two inputs yet",
					  tbc_ops[op->code].onnx_name);
	tbc_value *a = op->inputs[0], *b = op->inputs[1], *zero = scalar(A, dy[0]->type.dtype, 0);
	tbc_value *first = op2(A, op->code == TBC_OP_Max ? TBC_OP_GreaterOrEqual : TBC_OP_LessOrEqual, a, b);
	if (need(A, op, 0)) dx[0] = sum_to(A, op3(A, TBC_OP_Where, first, dy[0], zero), a);
	if (need(A, op, 1)) dx[1] = sum_to(A, op3(A, TBC_OP_Where, first, zero, dy[0]), b);
	return true;
}

/* Pad (constant mode, pads >= 0): the gradient is the middle, a Slice. */
static bool grad_pad(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	int r = x->type.rank;
	int64_t pads[2 * TBC_MAX_RANK], axes[TBC_MAX_RANK], starts[TBC_MAX_RANK], ends[TBC_MAX_RANK];
	if (strcmp(tbc_attr_string(op, "mode", "constant"), "constant"))
		return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for Pad in mode '%s' yet", tbc_attr_string(op, "mode", ""));
	const tbc_tensor *pt = tbc_input_const(op, 1);
	int na = op->n_inputs > 3 && op->inputs[3] ? const_ints(op, 3, axes) : r;
	if (!pt || na < 0 || pt->numel != 2 * na) return fail(A, TBC_ERR_UNSUPPORTED, "pads or axes are not constants");
	for (int64_t i = 0; i < pt->numel; i++) pads[i] = tbc_load_i64(pt->dtype, pt->data, (size_t)i);
	for (int i = 0; i < na; i++) {
		int64_t a = norm_axis(op->n_inputs > 3 && op->inputs[3] ? axes[i] : i, r);
		if (pads[i] < 0 || pads[i + na] < 0 || !dim_static(x->type.dims[a]))
			return fail(A, TBC_ERR_UNSUPPORTED, "negative pads or a symbolic dim");
		axes[i] = a;
		starts[i] = pads[i];
		ends[i] = pads[i] + x->type.dims[a].size;
	}
	tbc_value *in[4] = {dy[0], ints(A, na, starts), ints(A, na, ends), ints(A, na, axes)};
	dx[0] = fin(A, mk(A, TBC_OP_Slice, 4, in, 1));
	return true;
}

/* ---- Windows ------------------------------------------------------------------ */

typedef struct window {
	int nsp;
	int64_t k[TBC_MAX_RANK], s[TBC_MAX_RANK], d[TBC_MAX_RANK], pb[TBC_MAX_RANK], pe[TBC_MAX_RANK];
	int64_t in[TBC_MAX_RANK], out[TBC_MAX_RANK]; /* spatial sizes of x and y */
	int64_t opad[TBC_MAX_RANK]; /* ConvTranspose's output_padding that gives in[] back */
} window;

/* The geometry of a Conv or pool op with static spatial dims, its pads
 * resolved.  kernel: the weight's spatial dims (NULL: kernel_shape). */
static bool window_read(ad *A, const tbc_op *op, const int64_t *kernel, window *w) {
	const tbc_type *x = &op->inputs[0]->type, *y = &op->outputs[0]->type;
	if (x->rank < 3 || y->rank != x->rank) return fail(A, TBC_ERR_UNSUPPORTED, "input of rank below 3 or unknown");
	w->nsp = x->rank - 2;
	for (int i = 2; i < x->rank; i++)
		if (!dim_static(x->dims[i]) || !dim_static(y->dims[i]))
			return fail(A, TBC_ERR_UNSUPPORTED, "symbolic spatial dims are not supported yet");
	const int64_t *ks, *st, *dl, *pads;
	int nk = tbc_attr_ints(op, "kernel_shape", &ks), ns = tbc_attr_ints(op, "strides", &st);
	int nd = tbc_attr_ints(op, "dilations", &dl), np = tbc_attr_ints(op, "pads", &pads);
	const char *ap = tbc_attr_string(op, "auto_pad", "NOTSET");
	bool ceil = tbc_attr_int(op, "ceil_mode", 0) != 0; /* pools: the last window may overhang the end */
	for (int i = 0; i < w->nsp; i++) {
		w->k[i] = kernel ? kernel[i] : nk == w->nsp ? ks[i] : -1;
		if (w->k[i] < 1) return fail(A, TBC_ERR_UNSUPPORTED, "no kernel_shape");
		w->s[i] = ns == w->nsp ? st[i] : 1;
		w->d[i] = nd == w->nsp ? dl[i] : 1;
		w->in[i] = x->dims[i + 2].size;
		w->out[i] = y->dims[i + 2].size;
		int64_t span = (w->k[i] - 1) * w->d[i] + 1;
		if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
			int64_t total = (w->out[i] - 1) * w->s[i] + span - w->in[i];
			if (total < 0) total = 0;
			w->pb[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
			w->pe[i] = total - w->pb[i];
		} else if (!strcmp(ap, "VALID") || np != 2 * w->nsp) {
			w->pb[i] = w->pe[i] = 0;
		} else {
			w->pb[i] = pads[i];
			w->pe[i] = pads[i + w->nsp];
		}
		/* ceil_mode's overhang past the padded end: more end padding, which
		 * holds nothing (ConvTranspose then cuts it off) */
		int64_t over = (w->out[i] - 1) * w->s[i] + span - (w->in[i] + w->pb[i] + w->pe[i]);
		if (ceil && over > 0) w->pe[i] += over;
		w->opad[i] = w->in[i] - ((w->out[i] - 1) * w->s[i] + span - w->pb[i] - w->pe[i]);
		if (w->opad[i] < 0) return fail(A, TBC_ERR_INTERNAL, "window geometry does not add up (bug in tbc)");
	}
	return true;
}

static void window_pads(ad *A, tbc_op *op, const window *w) {
	int64_t pads[2 * TBC_MAX_RANK];
	for (int i = 0; i < w->nsp; i++) {
		pads[i] = w->pb[i];
		pads[i + w->nsp] = w->pe[i];
	}
	attr_ints(A, op, "pads", 2 * w->nsp, pads);
}

/* The transposed window over dy back to x's spatial shape. */
static tbc_value *conv_transpose(ad *A, tbc_value *g, tbc_value *weight, const window *w, int64_t group) {
	tbc_value *in[2] = {g, weight};
	tbc_op *op = mk(A, TBC_OP_ConvTranspose, 2, in, 1);
	attr_ints(A, op, "strides", w->nsp, w->s);
	attr_ints(A, op, "dilations", w->nsp, w->d);
	window_pads(A, op, w);
	attr_ints(A, op, "output_padding", w->nsp, w->opad);
	if (group != 1) attr_i(A, op, "group", group);
	return fin(A, op);
}

/* The weight's gradient of Conv(x [N,C,S..], w [M,C/g,K..]) given the
 * output's g [N,M,O..]: a Conv over the batch, x as [C/g, g*N, S..] (a batch
 * of C/g, the g*N channels grouped g ways) with g as its weight [M, N, O..],
 * strides and dilations swapped: [C/g, M, K'..] with K' >= K, cut to K and
 * transposed to [M, C/g, K..]. */
static tbc_value *conv_weight_grad(ad *A, tbc_value *x, tbc_value *g, tbc_value *wt, const window *w, int64_t group,
				   const int64_t *kernel) {
	int r = x->type.rank;
	if (!dim_static(x->type.dims[0]))
		return fail(A, TBC_ERR_UNSUPPORTED, "a symbolic batch is not supported yet"), NULL;
	int64_t N = x->type.dims[0].size, C = x->type.dims[1].size, Cg = C / group;
	int64_t perm[TBC_MAX_RANK + 1], shape[TBC_MAX_RANK + 1];
	tbc_value *xt;
	for (int i = 0; i <= r; i++) perm[i] = i;
	if (group == 1) {
		perm[0] = 1, perm[1] = 0;
		xt = transpose(A, x, r, perm);
	} else { /* [N, g, Cg, S..] -> [Cg, g, N, S..] -> [Cg, g*N, S..] */
		shape[0] = N, shape[1] = group, shape[2] = Cg;
		for (int i = 2; i < r; i++) shape[i + 1] = x->type.dims[i].size;
		tbc_value *x5 = op2(A, TBC_OP_Reshape, x, ints(A, r + 1, shape));
		perm[0] = 2, perm[2] = 0;
		tbc_value *x5t = transpose(A, x5, r + 1, perm);
		shape[0] = Cg, shape[1] = group * N;
		for (int i = 2; i < r; i++) shape[i] = x->type.dims[i].size;
		xt = op2(A, TBC_OP_Reshape, x5t, ints(A, r, shape));
		perm[0] = 0, perm[2] = 2;
	}
	perm[0] = 1, perm[1] = 0;
	tbc_value *gt = transpose(A, g, r, perm);
	tbc_value *in[2] = {xt, gt};
	tbc_op *c = mk(A, TBC_OP_Conv, 2, in, 1);
	attr_ints(A, c, "strides", w->nsp, w->d);
	attr_ints(A, c, "dilations", w->nsp, w->s);
	window_pads(A, c, w);
	if (group != 1) attr_i(A, c, "group", group);
	tbc_value *z = fin(A, c);
	bool cut = false;
	for (int i = 2; z && i < r; i++) cut |= !tbc_dim_eq(z->type.dims[i], wt->type.dims[i]);
	if (cut) {
		int64_t starts[TBC_MAX_RANK] = {0}, axes[TBC_MAX_RANK];
		for (int i = 0; i < w->nsp; i++) axes[i] = i + 2;
		tbc_value *sin[4] = {z, ints(A, w->nsp, starts), ints(A, w->nsp, kernel), ints(A, w->nsp, axes)};
		z = fin(A, mk(A, TBC_OP_Slice, 4, sin, 1));
	}
	return transpose(A, z, r, perm);
}

/* A per-channel bias's gradient: g summed over all but dim 1. */
static tbc_value *channel_sum(ad *A, tbc_value *g) {
	int64_t axes[TBC_MAX_RANK];
	int n = 0;
	for (int i = 0; i < g->type.rank; i++)
		if (i != 1) axes[n++] = i;
	return reduce(A, TBC_OP_ReduceSum, g, n, axes, 0);
}

/* The weight's static dims, its spatial ones into kernel. */
static bool static_weight(ad *A, const tbc_value *x, const tbc_value *wt, int64_t *kernel) {
	int r = x->type.rank;
	if (wt->type.rank != r) return fail(A, TBC_ERR_UNSUPPORTED, "weight of another rank than the input");
	for (int i = 0; i < r; i++)
		if (!dim_static(wt->type.dims[i]) || (i > 0 && !dim_static(x->type.dims[i])))
			return fail(A, TBC_ERR_UNSUPPORTED, "symbolic channel or kernel dims are not supported yet");
	for (int i = 2; i < r; i++) kernel[i - 2] = wt->type.dims[i].size;
	return true;
}

/* Conv(x [N,C,S..], w [M,C/g,K..]) -> y [N,M,O..]:
 *   dx = ConvTranspose(dy, w) with the same geometry;
 *   dw = conv_weight_grad(x, dy);
 *   db = dy summed over all but the channel dim. */
static bool grad_conv(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0], *wt = op->inputs[1], *g = dy[0];
	int64_t group = tbc_attr_int(op, "group", 1);
	window w;
	int64_t kernel[TBC_MAX_RANK];
	if (!static_weight(A, x, wt, kernel) || !window_read(A, op, kernel, &w)) return false;
	if (need(A, op, 0)) dx[0] = conv_transpose(A, g, wt, &w, group);
	if (need(A, op, 1) && !(dx[1] = conv_weight_grad(A, x, g, wt, &w, group, kernel))) return false;
	if (need(A, op, 2)) dx[2] = channel_sum(A, g);
	return true;
}

/* ConvTranspose(x [N,C,S..], w [C,M/g,K..]) -> y [N,M,O..] is the adjoint of
 * Conv(z [N,M,O..], w) -> [N,C,S..] with the same strides, dilations, pads
 * and groups (its output_padding only sizes O), so
 *   dx = Conv(dy, w);
 *   dw = the weight gradient of that Conv with dy as its input and x as its
 *        output's gradient (<dy, ConvT_w(x)> = <Conv_w(dy), x>);
 *   db = dy summed over all but the channel dim.
 * Pads from output_shape or auto_pad are not resolved here (an error). */
static bool grad_conv_transpose(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0], *wt = op->inputs[1], *g = dy[0];
	int64_t group = tbc_attr_int(op, "group", 1), kernel[TBC_MAX_RANK];
	const int64_t *unused;
	if (tbc_attr_ints(op, "output_shape", &unused) > 0 || strcmp(tbc_attr_string(op, "auto_pad", "NOTSET"), "NOTSET"))
		return fail(A, TBC_ERR_UNSUPPORTED, "ConvTranspose with output_shape or auto_pad: give pads instead");
	if (!static_weight(A, x, wt, kernel)) return false;
	const tbc_type *xs = &x->type, *ys = &op->outputs[0]->type;
	window w = {.nsp = xs->rank - 2};
	const int64_t *st, *dl, *pads;
	int ns = tbc_attr_ints(op, "strides", &st), nd = tbc_attr_ints(op, "dilations", &dl);
	int np = tbc_attr_ints(op, "pads", &pads);
	for (int i = 0; i < w.nsp; i++) {
		if (!dim_static(ys->dims[i + 2])) return fail(A, TBC_ERR_UNSUPPORTED, "symbolic spatial dims are not supported yet");
		w.k[i] = kernel[i];
		w.s[i] = ns == w.nsp ? st[i] : 1;
		w.d[i] = nd == w.nsp ? dl[i] : 1;
		w.pb[i] = np == 2 * w.nsp ? pads[i] : 0;
		w.pe[i] = np == 2 * w.nsp ? pads[i + w.nsp] : 0;
		w.in[i] = ys->dims[i + 2].size; /* the adjoint Conv's: from y's size to x's */
		w.out[i] = xs->dims[i + 2].size;
		w.opad[i] = w.in[i] - ((w.out[i] - 1) * w.s[i] + (w.k[i] - 1) * w.d[i] + 1 - w.pb[i] - w.pe[i]);
		if (w.opad[i] < 0 || w.opad[i] >= w.s[i])
			return fail(A, TBC_ERR_INTERNAL, "ConvTranspose geometry does not add up (bug in tbc)");
	}
	if (need(A, op, 0)) {
		tbc_value *in[2] = {g, wt};
		tbc_op *c = mk(A, TBC_OP_Conv, 2, in, 1);
		attr_ints(A, c, "strides", w.nsp, w.s);
		attr_ints(A, c, "dilations", w.nsp, w.d);
		window_pads(A, c, &w);
		if (group != 1) attr_i(A, c, "group", group);
		dx[0] = fin(A, c);
	}
	if (need(A, op, 1) && !(dx[1] = conv_weight_grad(A, g, x, wt, &w, group, kernel))) return false;
	if (need(A, op, 2)) dx[2] = channel_sum(A, g);
	return true;
}

/* BatchNormalization(x [N,C,S..], scale, bias, mean, var [C]): with xhat the
 * normalized x and g = dy * scale (scale and the statistics broadcast as
 * [1,C,1..]),
 *   training_mode=1 (the batch's mean and biased variance over N and S..):
 *     dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), means over N, S..;
 *   otherwise (the running statistics, inputs 3 and 4):
 *     dx = g * rstd;
 *   dscale = sum(dy * xhat), dbias = sum(dy) over N, S...
 * The running statistics are buffers, not parameters: not differentiated
 * (train.c never trains them), nor the running-statistics outputs. */
static bool grad_batch_norm(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	if ((op->n_outputs > 1 && dy[1]) || (op->n_outputs > 2 && dy[2]))
		return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule through BatchNormalization's running statistics outputs");
	if (need(A, op, 3) || need(A, op, 4))
		return fail(A, TBC_ERR_UNSUPPORTED, "BatchNormalization's running mean and variance are not differentiated");
	tbc_value *x = op->inputs[0];
	int r = x->type.rank;
	if (r < 2) return fail(A, TBC_ERR_UNSUPPORTED, "an input of rank below 2");
	tbc_dtype dt = x->type.dtype;
	int64_t axes[TBC_MAX_RANK], bshape[TBC_MAX_RANK];
	int n = 0;
	for (int i = 0; i < r; i++) {
		if (i != 1) axes[n++] = i;
		bshape[i] = i == 1 ? -1 : 1;
	}
	tbc_value *per_channel = ints(A, r, bshape);
#define CH(v) op2(A, TBC_OP_Reshape, (v), per_channel)
	bool training = tbc_attr_int(op, "training_mode", 0) != 0;
	tbc_value *eps = scalar(A, dt, tbc_attr_float(op, "epsilon", 1e-5));
	tbc_value *mu, *var;
	if (training) {
		mu = reduce(A, TBC_OP_ReduceMean, x, n, axes, 1);
		tbc_value *xc0 = op2(A, TBC_OP_Sub, x, mu);
		var = reduce(A, TBC_OP_ReduceMean, op2(A, TBC_OP_Mul, xc0, xc0), n, axes, 1);
	} else {
		mu = CH(op->inputs[3]);
		var = CH(op->inputs[4]);
	}
	tbc_value *rstd = op2(A, TBC_OP_Div, scalar(A, dt, 1), op1(A, TBC_OP_Sqrt, op2(A, TBC_OP_Add, var, eps)));
	tbc_value *xhat = op2(A, TBC_OP_Mul, op2(A, TBC_OP_Sub, x, mu), rstd);
	if (need(A, op, 0)) {
		tbc_value *gs = op2(A, TBC_OP_Mul, dy[0], CH(op->inputs[1]));
		if (training) {
			tbc_value *mg = reduce(A, TBC_OP_ReduceMean, gs, n, axes, 1);
			tbc_value *mgx = reduce(A, TBC_OP_ReduceMean, op2(A, TBC_OP_Mul, gs, xhat), n, axes, 1);
			gs = op2(A, TBC_OP_Sub, op2(A, TBC_OP_Sub, gs, mg), op2(A, TBC_OP_Mul, xhat, mgx));
		}
		dx[0] = op2(A, TBC_OP_Mul, gs, rstd);
	}
#undef CH
	if (need(A, op, 1)) dx[1] = channel_sum(A, op2(A, TBC_OP_Mul, dy[0], xhat));
	if (need(A, op, 2)) dx[2] = channel_sum(A, dy[0]);
	return true;
}

/* MaxPool: dy scattered (added) to where each window's maximum came from,
 * by the flat Indices a MaxPool with two results gives. */
static bool grad_maxpool(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	if (tbc_attr_int(op, "storage_order", 0) != 0) return fail(A, TBC_ERR_UNSUPPORTED, "storage_order=1");
	tbc_value *idx = op->n_outputs > 1 ? op->outputs[1] : NULL;
	if (!idx) { /* the forward op does not give them: a MaxPool that does */
		tbc_op *mp = mk(A, TBC_OP_MaxPool, 1, &x, 2);
		for (int a = 0; mp && a < op->n_attrs; a++) attr_copy(A, mp, op, op->attrs[a].name);
		if (!fin(A, mp)) return false;
		idx = mp->outputs[1];
	}
	int64_t flat = -1;
	tbc_value *zeros = op2(A, TBC_OP_Reshape, filled_like(A, x, 0), ints(A, 1, &flat));
	tbc_value *fi = op2(A, TBC_OP_Reshape, idx, ints(A, 1, &flat));
	tbc_value *fg = op2(A, TBC_OP_Reshape, dy[0], ints(A, 1, &flat));
	tbc_value *in[3] = {zeros, fi, fg};
	tbc_op *sc = mk(A, TBC_OP_ScatterElements, 3, in, 1);
	attr_i(A, sc, "axis", 0);
	attr_s(A, sc, "reduction", "add");
	dx[0] = reshape_like(A, fin(A, sc), x);
	return true;
}

/* AveragePool: y_w = (sum of x over window w) / divisor_w, so dx is dy / divisor
 * spread over each window by a ConvTranspose with a kernel of ones, one group
 * per channel.  The divisor is whatever the op divides by (the window's
 * size, its elements inside the input without count_include_pad, the
 * ceil_mode overhang left out): the op applied to ones gives n_w /
 * divisor_w, with n_w the window's elements inside the input -- a Conv of
 * ones by ones with the same geometry, a constant -- so 1 / divisor_w =
 * AveragePool(ones)_w / n_w. */
static bool grad_avgpool(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	window w;
	if (!window_read(A, op, NULL, &w)) return false;
	if (!dim_static(x->type.dims[1])) return fail(A, TBC_ERR_UNSUPPORTED, "a symbolic channel dim");
	int64_t C = x->type.dims[1].size, wdims[TBC_MAX_RANK], odims[TBC_MAX_RANK];
	wdims[0] = C, wdims[1] = 1, odims[0] = odims[1] = 1;
	for (int i = 0; i < w.nsp; i++) wdims[i + 2] = w.k[i], odims[i + 2] = w.in[i];
	tbc_dtype dt = x->type.dtype;
	tbc_value *ones = filled_like(A, x, 1);
	tbc_op *ap = mk(A, TBC_OP_AveragePool, 1, &ones, 1);
	for (int a = 0; ap && a < op->n_attrs; a++) attr_copy(A, ap, op, op->attrs[a].name);
	tbc_value *share = fin(A, ap); /* n_w / divisor_w */
	tbc_value *cin[2] = {filled_const(A, dt, w.nsp + 2, odims, 1.0), NULL};
	int64_t kd[TBC_MAX_RANK];
	kd[0] = kd[1] = 1;
	for (int i = 0; i < w.nsp; i++) kd[i + 2] = w.k[i];
	cin[1] = filled_const(A, dt, w.nsp + 2, kd, 1.0);
	tbc_op *cv = mk(A, TBC_OP_Conv, 2, cin, 1);
	attr_ints(A, cv, "strides", w.nsp, w.s);
	attr_ints(A, cv, "dilations", w.nsp, w.d);
	window_pads(A, cv, &w);
	tbc_value *n = fin(A, cv); /* n_w, [1, 1, out..] */
	tbc_value *g = op2(A, TBC_OP_Mul, dy[0], op2(A, TBC_OP_Div, share, n));
	tbc_value *kern = filled_const(A, dt, w.nsp + 2, wdims, 1.0);
	dx[0] = conv_transpose(A, g, kern, &w, C);
	return true;
}

static bool grad_global_avgpool(ad *A, const tbc_op *op, tbc_value *const *dy, tbc_value **dx) {
	tbc_value *x = op->inputs[0];
	tbc_value *g = op2(A, TBC_OP_Expand, dy[0], shape_of(A, x));
	dx[0] = op2(A, TBC_OP_Mul, g, size_ratio(A, op->outputs[0], x, x->type.dtype));
	return true;
}

/* The rule of each op, from ops.def's grad column. */
static const grad_fn rules[TBC_OP_COUNT] = {
#define TBC_OP(id, onnx, min_in, max_in, min_out, max_out, cat, shape, interp, lower, grad) [TBC_OP_##id] = grad_##grad,
#include "ir/ops.def"
#undef TBC_OP
};

bool tbc_autodiff_has_rule(tbc_opcode code) { return code < TBC_OP_COUNT && rules[code]; }

/* ---- Driver ------------------------------------------------------------------- */

static bool is_float(tbc_dtype dt) {
	return dt == TBC_DT_F32 || dt == TBC_DT_F64 || dt == TBC_DT_F16 || dt == TBC_DT_BF16;
}

/* Whether a subgraph of op reads a value of the main graph marked in bits. */
static bool captures_marked(const tbc_op *op, const pass_bits *bits, const tbc_graph *main) {
	for (int a = 0; a < op->n_attrs; a++) {
		const tbc_attr *at = &op->attrs[a];
		int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
		for (int k = 0; k < n; k++) {
			const tbc_graph *sg = at->graphs[k];
			for (const tbc_op *o = sg->first; o; o = o->next) {
				for (int i = 0; i < o->n_inputs; i++)
					if (o->inputs[i] && o->inputs[i]->graph == main && pass_bits_get(bits, o->inputs[i]->id))
						return true;
				if (captures_marked(o, bits, main)) return true;
			}
			for (int i = 0; i < sg->n_outputs; i++)
				if (sg->outputs[i]->graph == main && pass_bits_get(bits, sg->outputs[i]->id)) return true;
		}
	}
	return false;
}

static bool accumulate(ad *A, tbc_value *v, tbc_value *g) {
	if (!g || A->failed) return !A->failed;
	const tbc_type *t = &v->type, *u = &g->type;
	bool ok = t->dtype == u->dtype && t->rank == u->rank;
	for (int i = 0; ok && i < t->rank; i++)
		if (dim_static(t->dims[i]) && dim_static(u->dims[i]) && t->dims[i].size != u->dims[i].size) ok = false;
	if (!ok) return fail(A, TBC_ERR_INTERNAL, "the gradient has another type than its value (bug in tbc)");
	tbc_value **slot = &A->grad[v->id];
	*slot = *slot ? op2(A, TBC_OP_Add, *slot, g) : g;
	return !A->failed;
}

static bool backward(ad *A, tbc_value *loss, int n_wrt, tbc_value *const *wrt, tbc_value **grads) {
	tbc_graph *g = A->g;
	for (int i = 0; i < n_wrt; i++)
		if (!pass_bits_set(&A->active, wrt[i]->id)) return fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	/* Forward: what depends on a differentiated value. */
	for (tbc_op *op = g->first; op; op = op->next) {
		bool act = captures_marked(op, &A->active, g);
		for (int i = 0; i < op->n_inputs; i++) act |= need(A, op, i);
		for (int i = 0; act && i < op->n_outputs; i++)
			if (op->outputs[i] && is_float(op->outputs[i]->type.dtype) && !pass_bits_set(&A->active, op->outputs[i]->id))
				return fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	}
	/* Backward: what the loss depends on. */
	if (!pass_bits_set(&A->useful, loss->id)) return fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	tbc_op *last = g->last;
	for (tbc_op *op = last; op; op = op->prev) {
		bool use = false;
		for (int i = 0; i < op->n_outputs; i++)
			use |= op->outputs[i] && pass_bits_get(&A->useful, op->outputs[i]->id) && pass_bits_get(&A->active, op->outputs[i]->id);
		for (int i = 0; use && i < op->n_inputs; i++)
			if (need(A, op, i) && !pass_bits_set(&A->useful, op->inputs[i]->id))
				return fail(A, TBC_ERR_NO_MEMORY, "out of memory");
	}
	if (pass_bits_get(&A->active, loss->id)) {
		A->at = loss->kind == TBC_VALUE_RESULT ? loss->def : NULL;
		A->grad[loss->id] = filled_like(A, loss, 1);
	}
	for (tbc_op *op = last; op && !A->failed; op = op->prev) {
		tbc_value *dy[256] = {NULL}, *dx[256] = {NULL};
		bool any = false, wants = false;
		for (int i = 0; i < op->n_outputs && i < 256; i++)
			if (op->outputs[i] && op->outputs[i]->id < A->n && (dy[i] = A->grad[op->outputs[i]->id])) any = true;
		for (int i = 0; i < op->n_inputs; i++)
			wants |= need(A, op, i) && pass_bits_get(&A->useful, op->inputs[i]->id);
		if (!any || !wants) continue;
		A->at = op;
		if (op->n_inputs > 256 || op->n_outputs > 256) return fail(A, TBC_ERR_UNSUPPORTED, "too many inputs or outputs");
		grad_fn rule = rules[op->code];
		if (!rule || captures_marked(op, &A->active, g))
			return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for %s", tbc_ops[op->code].onnx_name);
		/* Rules read dy[0]; those of several float outputs (Split) fill the others. */
		if (!dy[0] && op->code != TBC_OP_Split)
			return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for %s through its outputs after the first",
				    tbc_ops[op->code].onnx_name);
		if (!rule(A, op, dy, dx)) return false;
		for (int i = 0; i < op->n_inputs && !A->failed; i++) {
			if (!need(A, op, i) || !pass_bits_get(&A->useful, op->inputs[i]->id)) continue;
			if (!dx[i]) return fail(A, TBC_ERR_UNSUPPORTED, "no gradient rule for %s's input %d", tbc_ops[op->code].onnx_name, i);
			if (!accumulate(A, op->inputs[i], dx[i])) return false;
		}
	}
	A->at = NULL;
	for (int i = 0; i < n_wrt && !A->failed; i++)
		grads[i] = A->grad[wrt[i]->id] ? A->grad[wrt[i]->id] : filled_like(A, wrt[i], 0);
	return !A->failed;
}

bool tbc_autodiff(tbc_module *m, tbc_value *loss, int n_wrt, tbc_value *const *wrt, tbc_value **grads, tbc_diags *d) {
	for (int i = 0; i < n_wrt; i++) grads[i] = NULL;
	char buf[64];
	tbc_graph *g = m->main;
	if (!loss || loss->graph != g) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL, "the loss must be a value of the main graph");
		return false;
	}
	if (!is_float(loss->type.dtype) || tbc_type_numel(&loss->type) != 1) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, tbc_value_display_name(loss, buf, sizeof buf),
			      "the loss must be a float scalar (one element), not %s with %d dims", tbc_dtype_name(loss->type.dtype),
			      loss->type.rank);
		return false;
	}
	for (int i = 0; i < n_wrt; i++) {
		const tbc_value *v = wrt[i];
		if (!v || v->graph != g || v->kind == TBC_VALUE_RESULT || !is_float(v->type.dtype)) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL,
				      v ? tbc_value_display_name(v, buf, sizeof buf) : NULL,
				      "only float initializers and inputs of the main graph can be differentiated by");
			return false;
		}
	}
	ad A = {.m = m, .g = g, .d = d, .cx = {.module = m, .diags = d, .static_ranks = true}, .n = m->n_values};
	A.grad = calloc((size_t)A.n + 1, sizeof *A.grad);
	tbc_op *last = g->last;
	int n_consts = g->n_consts;
	bool ok = A.grad && backward(&A, loss, n_wrt, wrt, grads);
	if (!A.grad) tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory");
	if (!ok) { /* take the backward graph away again, last op first */
		while (g->last != last) {
			tbc_op *op = g->last;
			bool used = false;
			for (int i = 0; i < op->n_outputs; i++) used |= op->outputs[i] && op->outputs[i]->uses;
			if (used) break; /* cannot happen: ops are removed after their readers */
			pass_remove_op(op);
		}
		g->n_consts = n_consts;
		for (int i = 0; i < n_wrt; i++) grads[i] = NULL;
	}
	free(A.grad);
	pass_bits_free(&A.active);
	pass_bits_free(&A.useful);
	return ok;
}
