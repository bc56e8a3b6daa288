/* Broadcasting binary and n-ary ops of the elementwise family: arithmetic,
 * Pow, Mod, bit ops, logic, comparisons, Max/Min/Mean/Sum and Where.
 * Integer arithmetic is exact in int64/uint64 and wraps to the width on
 * store (two's complement, as numpy); floats compute in double. */
#include "elementwise.h"

/* Wrapping int64 arithmetic (signed overflow is undefined in C). */
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* ---- Arithmetic -------------------------------------------------------------*/
static double add_f(ew_ctx *c, const double *x) { (void)c; return x[0] + x[1]; }
static int64_t add_i(ew_ctx *c, const int64_t *x) { (void)c; return wadd(x[0], x[1]); }
static const ew_def add_def = {add_f, add_i, NULL};
EW_NARY_KERNEL(Add, add_def)

static double sub_f(ew_ctx *c, const double *x) { (void)c; return x[0] - x[1]; }
static int64_t sub_i(ew_ctx *c, const int64_t *x) { (void)c; return wsub(x[0], x[1]); }
static const ew_def sub_def = {sub_f, sub_i, NULL};
EW_NARY_KERNEL(Sub, sub_def)

static double mul_f(ew_ctx *c, const double *x) { (void)c; return x[0] * x[1]; }
static int64_t mul_i(ew_ctx *c, const int64_t *x) { (void)c; return wmul(x[0], x[1]); }
static const ew_def mul_def = {mul_f, mul_i, NULL};
EW_NARY_KERNEL(Mul, mul_def)

/* Integer division truncates toward zero (C, and the ONNX reference). */
static double div_f(ew_ctx *c, const double *x) { (void)c; return x[0] / x[1]; }
static int64_t div_i(ew_ctx *c, const int64_t *x) {
	if (x[1] == 0) return c->error = "integer division by zero", 0;
	if (x[1] == -1) return wsub(0, x[0]); /* INT64_MIN / -1 wraps */
	return x[0] / x[1];
}
static uint64_t div_u(ew_ctx *c, const uint64_t *x) {
	if (x[1] == 0) return c->error = "integer division by zero", 0;
	return x[0] / x[1];
}
static const ew_def div_def = {div_f, div_i, div_u};
EW_NARY_KERNEL(Div, div_def)

/* ---- Mod ---------------------------------------------------------------------
 * flag 0: a - floor(a / b) * b, the sign of b (Python's %);
 * flag 1: a - trunc(a / b) * b, the sign of a (C's fmod and %). */
static double mod_f(ew_ctx *c, const double *x) {
	double r = fmod(x[0], x[1]);
	if (c->flag || isnan(r)) return r;
	if (r == 0) return copysign(0.0, x[1]);
	if ((r < 0) != (x[1] < 0)) r += x[1];
	return r;
}
static int64_t mod_i(ew_ctx *c, const int64_t *x) {
	if (x[1] == 0) return c->error = "integer modulo by zero", 0;
	if (x[1] == -1) return 0; /* INT64_MIN % -1 overflows in C */
	int64_t r = x[0] % x[1];
	if (!c->flag && r != 0 && (r < 0) != (x[1] < 0)) r += x[1];
	return r;
}
static uint64_t mod_u(ew_ctx *c, const uint64_t *x) {
	if (x[1] == 0) return c->error = "integer modulo by zero", 0;
	return x[0] % x[1];
}
static const ew_def mod_def = {mod_f, mod_i, mod_u};

int tbc_interp_Mod(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.flag = tbc_attr_int(op, "fmod", 0)};
	return ew_nary(ip, op, &mod_def, &c, in, out);
}

/* ---- Pow: the result has the base's type ---------------------------------
 * Integer base and integer exponent: exact, wrapping, by squaring; a negative
 * exponent gives the truncated real result (1, -1 or 0).  Any float involved:
 * pow in double, stored into the base's type (truncated for an integer base,
 * as numpy's astype). */
static double pow_f(ew_ctx *c, const double *x) { (void)c; return pow(x[0], x[1]); }
static int64_t pow_i(ew_ctx *c, const int64_t *x) {
	(void)c;
	int64_t base = x[0], e = x[1];
	if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
	int64_t r = 1;
	while (e) {
		if (e & 1) r = wmul(r, base);
		base = wmul(base, base);
		e >>= 1;
	}
	return r;
}
static uint64_t pow_u(ew_ctx *c, const uint64_t *x) {
	(void)c;
	uint64_t base = x[0], e = x[1], r = 1;
	while (e) {
		if (e & 1) r *= base;
		base *= base;
		e >>= 1;
	}
	return r;
}
static const ew_def pow_int_def = {pow_f, pow_i, pow_u};
static const ew_def pow_float_def = {pow_f, NULL, NULL};

int tbc_interp_Pow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	bool exact = !tbc_dtype_is_float(in[0]->dtype) && !tbc_dtype_is_float(in[1]->dtype);
	return ew_map(ip, op, exact ? &pow_int_def : &pow_float_def, NULL, 2, in, 0, in[0]->dtype, out);
}

/* ---- Bit ops -------------------------------------------------------------
 * BitShift (flag 0 LEFT, 1 RIGHT): a shift by a negative amount or by the
 * width or more gives what the sign extension alone gives: -1 for a right
 * shift of a negative value, 0 otherwise.  Right shifts of signed values are
 * arithmetic; the int64 domain holds the value sign-extended. */
static double no_float_f(ew_ctx *c, const double *x) {
	c->error = "this op needs integer inputs";
	return x[0];
}
static int64_t bitshift_i(ew_ctx *c, const int64_t *x) {
	int64_t a = x[0], s = x[1];
	if (s < 0 || s >= c->bits) return c->flag && a < 0 ? -1 : 0;
	if (c->flag) return a < 0 ? ~(~a >> s) : a >> s;
	return (int64_t)((uint64_t)a << s);
}
static uint64_t bitshift_u(ew_ctx *c, const uint64_t *x) {
	uint64_t a = x[0], s = x[1];
	if (s >= (uint64_t)c->bits) return 0;
	return c->flag ? a >> s : a << s;
}
static const ew_def bitshift_def = {no_float_f, bitshift_i, bitshift_u};

static int bitshift_direction(const tbc_op *op) {
	const char *d = tbc_attr_string(op, "direction", "");
	return !strcmp(d, "LEFT") ? 0 : !strcmp(d, "RIGHT") ? 1 : -1;
}
int tbc_interp_BitShift(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {.flag = bitshift_direction(op)};
	if (c.flag < 0) return tbc_interp_error(ip, op, "direction must be \"LEFT\" or \"RIGHT\"");
	return ew_nary(ip, op, &bitshift_def, &c, in, out);
}

/* The same bits whether signed or unsigned: one int64 definition each. */
static int64_t and_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] & x[1]; }
static int64_t or_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] | x[1]; }
static int64_t xor_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] ^ x[1]; }
static const ew_def bitwise_and_def = {no_float_f, and_i, NULL};
static const ew_def bitwise_or_def = {no_float_f, or_i, NULL};
static const ew_def bitwise_xor_def = {no_float_f, xor_i, NULL};
EW_NARY_KERNEL(BitwiseAnd, bitwise_and_def)
EW_NARY_KERNEL(BitwiseOr, bitwise_or_def)
EW_NARY_KERNEL(BitwiseXor, bitwise_xor_def)

/* ---- Logic (bool inputs) ---------------------------------------------------*/
static int64_t land_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] && x[1]; }
static int64_t lor_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] || x[1]; }
static int64_t lxor_i(ew_ctx *c, const int64_t *x) { (void)c; return !x[0] != !x[1]; }
static const ew_def and_def = {no_float_f, land_i, NULL};
static const ew_def or_def = {no_float_f, lor_i, NULL};
static const ew_def xor_def = {no_float_f, lxor_i, NULL};
EW_BOOL_KERNEL(And, and_def)
EW_BOOL_KERNEL(Or, or_def)
EW_BOOL_KERNEL(Xor, xor_def)

/* ---- Comparisons: each domain compares its own values exactly -------------*/
#define EW_COMPARE(Op, name, OPER)                                                        \
	static double name##_f(ew_ctx *c, const double *x) { (void)c; return x[0] OPER x[1]; }   \
	static int64_t name##_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] OPER x[1]; } \
	static uint64_t name##_u(ew_ctx *c, const uint64_t *x) { (void)c; return x[0] OPER x[1]; } \
	static const ew_def name##_def = {name##_f, name##_i, name##_u};                      \
	EW_BOOL_KERNEL(Op, name##_def)

EW_COMPARE(Equal, equal, ==)
EW_COMPARE(Greater, greater, >)
EW_COMPARE(GreaterOrEqual, greater_equal, >=)
EW_COMPARE(Less, less, <)
EW_COMPARE(LessOrEqual, less_equal, <=)

/* ---- Variadic: Max, Min, Sum, Mean over any number of inputs -------------
 * Max and Min propagate NaN (np.maximum / np.minimum). */
static double max_f(ew_ctx *c, const double *x) {
	double r = x[0];
	for (int k = 1; k < c->n; k++) r = isnan(r) || x[k] < r ? r : x[k];
	return r;
}
static int64_t max_i(ew_ctx *c, const int64_t *x) {
	int64_t r = x[0];
	for (int k = 1; k < c->n; k++) r = x[k] > r ? x[k] : r;
	return r;
}
static uint64_t max_u(ew_ctx *c, const uint64_t *x) {
	uint64_t r = x[0];
	for (int k = 1; k < c->n; k++) r = x[k] > r ? x[k] : r;
	return r;
}
static const ew_def max_def = {max_f, max_i, max_u};
EW_NARY_KERNEL(Max, max_def)

static double min_f(ew_ctx *c, const double *x) {
	double r = x[0];
	for (int k = 1; k < c->n; k++) r = isnan(r) || x[k] > r ? r : x[k];
	return r;
}
static int64_t min_i(ew_ctx *c, const int64_t *x) {
	int64_t r = x[0];
	for (int k = 1; k < c->n; k++) r = x[k] < r ? x[k] : r;
	return r;
}
static uint64_t min_u(ew_ctx *c, const uint64_t *x) {
	uint64_t r = x[0];
	for (int k = 1; k < c->n; k++) r = x[k] < r ? x[k] : r;
	return r;
}
static const ew_def min_def = {min_f, min_i, min_u};
EW_NARY_KERNEL(Min, min_def)

static double sum_f(ew_ctx *c, const double *x) {
	double r = 0;
	for (int k = 0; k < c->n; k++) r += x[k];
	return r;
}
static int64_t sum_i(ew_ctx *c, const int64_t *x) {
	int64_t r = 0;
	for (int k = 0; k < c->n; k++) r = wadd(r, x[k]);
	return r;
}
static const ew_def sum_def = {sum_f, sum_i, NULL};
EW_NARY_KERNEL(Sum, sum_def)

static double mean_f(ew_ctx *c, const double *x) { return sum_f(c, x) / c->n; }
static const ew_def mean_def = {mean_f, NULL, NULL};
EW_NARY_KERNEL(Mean, mean_def)

/* ---- Where(condition, X, Y): the result has X's type -------------------*/
static double where_f(ew_ctx *c, const double *x) { (void)c; return x[0] != 0 ? x[1] : x[2]; }
static int64_t where_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] ? x[1] : x[2]; }
static uint64_t where_u(ew_ctx *c, const uint64_t *x) { (void)c; return x[0] ? x[1] : x[2]; }
static const ew_def where_def = {where_f, where_i, where_u};

int tbc_interp_Where(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return ew_map(ip, op, &where_def, NULL, 3, in, 1, in[1]->dtype, out);
}

/* ---- Shape rules ------------------------------------------------------------*/
static bool same_dtypes(tbc_infer *cx, tbc_op *op, int first) {
	const tbc_value *ref = NULL;
	for (int k = first; k < op->n_inputs; k++) {
		const tbc_value *v = op->inputs[k];
		if (!v) return tbc_infer_error(cx, op, "input %d is missing", k);
		if (!ref) ref = v;
		else if (v->type.dtype != ref->type.dtype)
			return tbc_infer_error(cx, op, "input %d is %s but input %d is %s", k,
					       tbc_dtype_name(v->type.dtype), first, tbc_dtype_name(ref->type.dtype));
	}
	return true;
}

/* Inputs of one dtype, broadcast; the result has that dtype. */
bool tbc_shape_ew_broadcast_same(tbc_infer *cx, tbc_op *op) {
	return same_dtypes(cx, op, 0) && tbc_shape_broadcast(cx, op);
}

/* Inputs of one dtype, broadcast; a bool result (comparisons, logic). */
bool tbc_shape_ew_compare(tbc_infer *cx, tbc_op *op) {
	return same_dtypes(cx, op, 0) && tbc_shape_broadcast_bool(cx, op);
}

bool tbc_shape_Mod(tbc_infer *cx, tbc_op *op) {
	int64_t fmod_attr = tbc_attr_int(op, "fmod", 0);
	if (fmod_attr != 0 && fmod_attr != 1)
		return tbc_infer_error(cx, op, "fmod must be 0 or 1, not %lld", (long long)fmod_attr);
	return tbc_shape_ew_broadcast_same(cx, op);
}

bool tbc_shape_BitShift(tbc_infer *cx, tbc_op *op) {
	if (bitshift_direction(op) < 0)
		return tbc_infer_error(cx, op, "direction must be \"LEFT\" or \"RIGHT\", not \"%s\"",
				       tbc_attr_string(op, "direction", ""));
	if (!tbc_dtype_is_int(op->inputs[0]->type.dtype))
		return tbc_infer_error(cx, op, "BitShift needs integer inputs, not %s",
				       tbc_dtype_name(op->inputs[0]->type.dtype));
	return tbc_shape_ew_broadcast_same(cx, op);
}

bool tbc_shape_Where(tbc_infer *cx, tbc_op *op) {
	if (op->inputs[0]->type.dtype != TBC_DT_BOOL)
		return tbc_infer_error(cx, op, "condition must be bool, not %s", tbc_dtype_name(op->inputs[0]->type.dtype));
	if (!same_dtypes(cx, op, 1)) return false;
	const tbc_type *in[3] = {&op->inputs[0]->type, &op->inputs[1]->type, &op->inputs[2]->type};
	tbc_type t;
	memset(&t, 0, sizeof t);
	if (!tbc_broadcast_types(cx, op, 3, in, &t)) return false;
	t.dtype = in[1]->dtype;
	op->outputs[0]->type = t;
	return true;
}
