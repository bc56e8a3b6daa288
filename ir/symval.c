/* Symbolic values of shape tensors (docs/symbolic-shapes.md).
 *
 * An exported model computes the shapes it reshapes to from Shape: Shape of
 * a [batch, seq] value is the vector [batch, seq], Gather picks seq, Concat
 * builds [batch, seq, 12, 64], Add makes past_seq + seq.  Inference keeps
 * those vectors element by element (tbc_sval: a constant, a dim's name or
 * unknown) on the values that hold them, so the rules of Reshape, Expand,
 * ConstantOfShape, Range and Slice read symbolic dims where they would
 * otherwise see only "not a constant" and make a fresh, data-dependent dim.
 * Elements are exact: a value here is what the tensor holds at run time for
 * the sizes the symbols stand for, never a guess.  What it cannot express
 * (a value read from a graph input's data, NonZero's count, a division that
 * is not exact) stays unknown. */
#include <string.h>

#include "kernels/kernels.h"
#include "symdim.h"

#define MAXV TBC_MAX_RANK

static bool tracked_dtype(tbc_dtype dt) { return dt == TBC_DT_I64 || dt == TBC_DT_I32 || dt == TBC_DT_BOOL; }

tbc_dim tbc_sval_dim(tbc_sval s) {
	if (!s.known) return (tbc_dim){-1, NULL};
	if (s.sym) return (tbc_dim){-1, s.sym};
	return s.c >= 0 ? (tbc_dim){s.c, NULL} : (tbc_dim){-1, NULL};
}

int tbc_value_svals(const tbc_value *v, tbc_sval *out) {
	if (!v) return -1;
	if (v->kind == TBC_VALUE_CONST) {
		const tbc_tensor *t = v->constant;
		if (!t || !(tbc_dtype_is_int(t->dtype) || t->dtype == TBC_DT_BOOL) || t->rank > 1 || t->numel > MAXV) return -1;
		for (int64_t i = 0; i < t->numel; i++) out[i] = (tbc_sval){true, NULL, tbc_get_i64(t, i)};
		return (int)t->numel;
	}
	if (!v->svals) {
		/* A short integer vector inference knows nothing about (read from
		 * a graph input, NonZero's count): its elements are unknown, which
		 * lets a Concat keep the parts it does know. */
		const tbc_type *t = &v->type;
		if (!tracked_dtype(t->dtype) || t->rank < 0 || t->rank > 1) return -1;
		int64_t n = t->rank == 0 ? 1 : t->dims[0].sym ? -1 : t->dims[0].size;
		if (n < 0 || n > MAXV) return -1;
		for (int64_t i = 0; i < n; i++) out[i] = (tbc_sval){false, NULL, 0};
		return (int)n;
	}
	memcpy(out, v->svals, (size_t)v->n_svals * sizeof *out);
	return v->n_svals;
}

int tbc_input_svals(const tbc_op *op, int index, tbc_sval *out) {
	return index < op->n_inputs ? tbc_value_svals(op->inputs[index], out) : -1;
}

/* ---- Elements as polynomials ---------------------------------------------- */
static bool poly_of(tbc_sval s, tbc_poly *p) {
	if (!s.known) return false;
	if (!s.sym) {
		tbc_poly_const(p, s.c);
		return true;
	}
	return tbc_poly_of_sym(s.sym, p);
}

static tbc_sval of_poly(tbc_module *m, const tbc_poly *p) {
	int64_t c;
	if (tbc_poly_is_const(p, &c)) return (tbc_sval){true, NULL, c};
	tbc_dim d = tbc_dim_of_poly(m, p);
	return d.sym ? (tbc_sval){true, d.sym, 0} : (tbc_sval){false, NULL, 0};
}

static const tbc_sval unknown = {false, NULL, 0};

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_MAX, BIN_MIN, BIN_EQ } bin_kind;

/* max(a, b) or min(a, b) when one side is known to win: equal values, two
 * constants, or a constant <= 0 against a value that cannot be negative. */
static tbc_sval extreme(tbc_module *m, const tbc_poly *a, const tbc_poly *b, bool max) {
	int64_t ca, cb;
	bool ka = tbc_poly_is_const(a, &ca), kb = tbc_poly_is_const(b, &cb);
	if (ka && kb) return (tbc_sval){true, NULL, max ? (ca > cb ? ca : cb) : (ca < cb ? ca : cb)};
	if (tbc_poly_eq(a, b)) return of_poly(m, a);
	if (kb && cb <= 0 && tbc_poly_nonneg(a)) return max ? of_poly(m, a) : of_poly(m, b);
	if (ka && ca <= 0 && tbc_poly_nonneg(b)) return max ? of_poly(m, b) : of_poly(m, a);
	return unknown;
}

static tbc_sval binary(tbc_module *m, bin_kind k, tbc_sval x, tbc_sval y) {
	tbc_poly a, b, r;
	if (!poly_of(x, &a) || !poly_of(y, &b)) return unknown;
	int64_t ca, cb;
	bool ka = tbc_poly_is_const(&a, &ca), kb = tbc_poly_is_const(&b, &cb);
	switch (k) {
	case BIN_ADD:
	case BIN_SUB: return tbc_poly_add(&a, &b, k == BIN_ADD ? 1 : -1, &r) ? of_poly(m, &r) : unknown;
	case BIN_MUL: return tbc_poly_mul(&a, &b, &r) ? of_poly(m, &r) : unknown;
	case BIN_DIV:
		/* Integer division truncates (the interpreter's C division): two
		 * constants divide as it does, symbols only exactly. */
		if (ka && kb) return cb && !(ca == INT64_MIN && cb == -1) ? (tbc_sval){true, NULL, ca / cb} : unknown;
		return tbc_poly_div_exact(&a, &b, &r) ? of_poly(m, &r) : unknown;
	case BIN_MAX:
	case BIN_MIN: return extreme(m, &a, &b, k == BIN_MAX);
	case BIN_EQ:
		if (tbc_poly_eq(&a, &b)) return (tbc_sval){true, NULL, 1};
		if (ka && kb) return (tbc_sval){true, NULL, 0};
		/* A size is never negative. */
		if ((kb && cb < 0 && tbc_poly_nonneg(&a)) || (ka && ca < 0 && tbc_poly_nonneg(&b)))
			return (tbc_sval){true, NULL, 0};
		return unknown;
	}
	return unknown;
}

/* ---- Rules ------------------------------------------------------------------ */
static int shape_of(const tbc_op *op, tbc_sval *out) {
	const tbc_type *t = &op->inputs[0]->type;
	if (t->rank < 0) return -1;
	int64_t s = tbc_attr_int(op, "start", 0), e = tbc_attr_int(op, "end", t->rank);
	if (s < 0) s += t->rank;
	if (e < 0) e += t->rank;
	s = s < 0 ? 0 : s > t->rank ? t->rank : s;
	e = e < s ? s : e > t->rank ? t->rank : e;
	for (int64_t i = s; i < e; i++) {
		tbc_dim d = t->dims[i];
		out[i - s] = d.sym ? (tbc_sval){true, d.sym, 0} : d.size >= 0 ? (tbc_sval){true, NULL, d.size} : unknown;
	}
	return (int)(e - s);
}

static int size_of(tbc_module *m, const tbc_op *op, tbc_sval *out) {
	const tbc_type *t = &op->inputs[0]->type;
	if (t->rank < 0) return -1;
	tbc_poly p, d;
	tbc_poly_const(&p, 1);
	for (int i = 0; i < t->rank; i++)
		if (!tbc_poly_of_dim(t->dims[i], &d) || !tbc_poly_mul(&p, &d, &p)) return -1;
	out[0] = of_poly(m, &p);
	return 1;
}

/* Constant integers of input index (all elements known constants). */
static int const_ints(const tbc_op *op, int index, int64_t *vals) {
	tbc_sval s[MAXV];
	int n = tbc_input_svals(op, index, s);
	for (int i = 0; i < n; i++) {
		if (!s[i].known || s[i].sym) return -1;
		vals[i] = s[i].c;
	}
	return n;
}

static int gather(const tbc_op *op, tbc_sval *out) {
	tbc_sval data[MAXV];
	int64_t idx[MAXV];
	int n = tbc_input_svals(op, 0, data), ni = const_ints(op, 1, idx);
	if (n < 0 || ni < 0 || op->inputs[0]->type.rank != 1) return -1;
	int64_t axis = tbc_attr_int(op, "axis", 0);
	if (axis != 0 && axis != -1) return -1;
	for (int i = 0; i < ni; i++) {
		int64_t k = idx[i] < 0 ? idx[i] + n : idx[i];
		if (k < 0 || k >= n) return -1; /* the interpreter reports it */
		out[i] = data[k];
	}
	return ni;
}

static int slice(const tbc_op *op, tbc_sval *out) {
	tbc_sval data[MAXV];
	int64_t st[MAXV], en[MAXV], ax[MAXV], sp[MAXV];
	int n = tbc_input_svals(op, 0, data);
	if (n < 0 || op->inputs[0]->type.rank != 1 || const_ints(op, 1, st) != 1 || const_ints(op, 2, en) != 1) return -1;
	if (op->n_inputs > 3 && op->inputs[3] && (const_ints(op, 3, ax) != 1 || (ax[0] != 0 && ax[0] != -1))) return -1;
	int64_t step = 1;
	if (op->n_inputs > 4 && op->inputs[4]) {
		if (const_ints(op, 4, sp) != 1 || sp[0] == 0) return -1;
		step = sp[0];
	}
	int64_t s = st[0], e = en[0];
	if (s < 0) s += n;
	if (e < 0) e += n;
	int k = 0;
	if (step > 0) {
		s = s < 0 ? 0 : s > n ? n : s;
		e = e < 0 ? 0 : e > n ? n : e;
		for (int64_t i = s; i < e; i += step) out[k++] = data[i];
	} else {
		s = s < 0 ? 0 : s > n - 1 ? n - 1 : s;
		e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
		for (int64_t i = s; i > e; i += step) out[k++] = data[i];
	}
	return k;
}

static int concat(const tbc_op *op, tbc_sval *out) {
	int total = 0;
	for (int i = 0; i < op->n_inputs; i++) {
		tbc_sval part[MAXV];
		int n = tbc_input_svals(op, i, part);
		if (n < 0 || op->inputs[i]->type.rank != 1 || total + n > MAXV) return -1;
		memcpy(out + total, part, (size_t)n * sizeof *part);
		total += n;
	}
	return total;
}

/* Elementwise over inputs of n or 1 elements (numpy broadcasting of vectors
 * and scalars). */
static int elementwise(tbc_module *m, const tbc_op *op, tbc_sval *out) {
	tbc_sval in[3][MAXV];
	int n[3], len = 1, arity = op->code == TBC_OP_Where ? 3 : 2;
	for (int k = 0; k < arity; k++) {
		if ((n[k] = tbc_input_svals(op, k, in[k])) < 0) return -1;
		if (n[k] != 1 && len != 1 && n[k] != len) return -1;
		if (n[k] != 1) len = n[k];
	}
	for (int i = 0; i < len; i++) {
		tbc_sval x[3];
		for (int k = 0; k < arity; k++) x[k] = in[k][n[k] == 1 ? 0 : i];
		switch (op->code) {
		case TBC_OP_Add: out[i] = binary(m, BIN_ADD, x[0], x[1]); break;
		case TBC_OP_Sub: out[i] = binary(m, BIN_SUB, x[0], x[1]); break;
		case TBC_OP_Mul: out[i] = binary(m, BIN_MUL, x[0], x[1]); break;
		case TBC_OP_Div: out[i] = binary(m, BIN_DIV, x[0], x[1]); break;
		case TBC_OP_Max: out[i] = binary(m, BIN_MAX, x[0], x[1]); break;
		case TBC_OP_Min: out[i] = binary(m, BIN_MIN, x[0], x[1]); break;
		case TBC_OP_Equal: out[i] = binary(m, BIN_EQ, x[0], x[1]); break;
		case TBC_OP_Where: out[i] = x[0].known && !x[0].sym ? (x[0].c ? x[1] : x[2]) : unknown; break;
		default: return -1;
		}
	}
	return len;
}

static int cast(const tbc_op *op, tbc_sval *out) {
	int n = tbc_input_svals(op, 0, out);
	if (n < 0 || !tracked_dtype(op->inputs[0]->type.dtype)) return -1;
	if (op->outputs[0]->type.dtype == TBC_DT_BOOL)
		for (int i = 0; i < n; i++) out[i] = out[i].known && !out[i].sym ? (tbc_sval){true, NULL, out[i].c != 0} : unknown;
	return n;
}

static int constant_of_shape(const tbc_op *op, tbc_sval *out) {
	const tbc_tensor *v = tbc_attr_tensor(op, "value");
	const tbc_type *t = &op->outputs[0]->type;
	if (t->rank != 1 || t->dims[0].sym || t->dims[0].size > MAXV) return -1;
	int64_t c = v && v->numel == 1 ? tbc_get_i64(v, 0) : 0;
	for (int64_t i = 0; i < t->dims[0].size; i++) out[i] = (tbc_sval){true, NULL, c};
	return (int)t->dims[0].size;
}

static int expand(const tbc_op *op, tbc_sval *out) {
	tbc_sval in[MAXV];
	int n = tbc_input_svals(op, 0, in);
	const tbc_type *t = &op->outputs[0]->type;
	if (n < 0 || t->rank != 1 || t->dims[0].sym || t->dims[0].size > MAXV) return -1;
	if (n != 1 && n != t->dims[0].size) return -1;
	for (int64_t i = 0; i < t->dims[0].size; i++) out[i] = in[n == 1 ? 0 : i];
	return (int)t->dims[0].size;
}

static int range(tbc_module *m, const tbc_op *op, tbc_sval *out) {
	tbc_sval s[MAXV], d[MAXV];
	const tbc_type *t = &op->outputs[0]->type;
	if (t->rank != 1 || t->dims[0].sym || t->dims[0].size > MAXV) return -1;
	if (tbc_input_svals(op, 0, s) != 1 || tbc_input_svals(op, 2, d) != 1) return -1;
	tbc_sval v = s[0];
	for (int64_t i = 0; i < t->dims[0].size; i++) {
		out[i] = v;
		v = binary(m, BIN_ADD, v, d[0]);
	}
	return (int)t->dims[0].size;
}

static int infer_svals(tbc_infer *cx, const tbc_op *op, tbc_sval *out) {
	tbc_module *m = cx->module;
	switch (op->code) {
	case TBC_OP_Shape: return shape_of(op, out);
	case TBC_OP_Size: return size_of(m, op, out);
	case TBC_OP_Identity:
	case TBC_OP_Reshape:
	case TBC_OP_Squeeze:
	case TBC_OP_Unsqueeze:
	case TBC_OP_Flatten: return tbc_input_svals(op, 0, out);
	case TBC_OP_Cast: return cast(op, out);
	case TBC_OP_Gather: return gather(op, out);
	case TBC_OP_Slice: return slice(op, out);
	case TBC_OP_Concat: return concat(op, out);
	case TBC_OP_Add:
	case TBC_OP_Sub:
	case TBC_OP_Mul:
	case TBC_OP_Div:
	case TBC_OP_Max:
	case TBC_OP_Min:
	case TBC_OP_Equal:
	case TBC_OP_Where: return op->n_inputs == (op->code == TBC_OP_Where ? 3 : 2) ? elementwise(m, op, out) : -1;
	case TBC_OP_ConstantOfShape: return constant_of_shape(op, out);
	case TBC_OP_Expand: return expand(op, out);
	case TBC_OP_Range: return range(m, op, out);
	default: return -1;
	}
}

void tbc_symval_infer(tbc_infer *cx, tbc_op *op) {
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i]) op->outputs[i]->svals = NULL, op->outputs[i]->n_svals = 0;
	tbc_value *v = op->n_outputs == 1 ? op->outputs[0] : NULL;
	if (!v || !tracked_dtype(v->type.dtype) || v->type.rank > 1 || v->type.rank < 0) return;
	tbc_sval out[MAXV];
	int n = infer_svals(cx, op, out);
	int64_t want = v->type.rank == 0 ? 1 : v->type.dims[0].sym ? -1 : v->type.dims[0].size;
	if (n < 0 || n != want) return;
	bool any = false;
	for (int i = 0; i < n; i++) {
		/* An int32 tensor wraps what does not fit. */
		if (out[i].known && !out[i].sym && v->type.dtype == TBC_DT_I32 && (int32_t)out[i].c != out[i].c)
			out[i] = unknown;
		any |= out[i].known;
	}
	if (!any) return;
	tbc_sval *keep = tbc_arena_array(cx->module->arena, (size_t)(n ? n : 1), sizeof *keep);
	if (!keep) return; /* out of memory: nothing known, which is always correct */
	memcpy(keep, out, (size_t)n * sizeof *out);
	v->svals = keep;
	v->n_svals = n;
}
