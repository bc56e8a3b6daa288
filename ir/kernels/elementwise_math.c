/* Unary math of the elementwise family: Abs, Neg, Sign, rounding, roots,
 * exponentials, trigonometry, Not, BitwiseNot, IsInf, IsNaN.  Each op is its
 * scalar definition (ew_def) and one line binding it to a kernel. */
#include "elementwise.h"

/* Negation that wraps at INT64_MIN instead of overflowing. */
static int64_t wrap_neg(int64_t x) { return (int64_t)(0u - (uint64_t)x); }

static double abs_f(ew_ctx *c, const double *x) { (void)c; return fabs(x[0]); }
static int64_t abs_i(ew_ctx *c, const int64_t *x) { (void)c; return x[0] < 0 ? wrap_neg(x[0]) : x[0]; }
static uint64_t abs_u(ew_ctx *c, const uint64_t *x) { (void)c; return x[0]; }
static const ew_def abs_def = {abs_f, abs_i, abs_u};
EW_UNARY_KERNEL(Abs, abs_def)

static double neg_f(ew_ctx *c, const double *x) { (void)c; return -x[0]; }
static int64_t neg_i(ew_ctx *c, const int64_t *x) { (void)c; return wrap_neg(x[0]); }
static const ew_def neg_def = {neg_f, neg_i, NULL};
EW_UNARY_KERNEL(Neg, neg_def)

/* np.sign: -1, 0 or 1; NaN stays NaN, zeros keep their sign. */
static double sign_f(ew_ctx *c, const double *x) { (void)c; return x[0] > 0 ? 1.0 : x[0] < 0 ? -1.0 : x[0]; }
static int64_t sign_i(ew_ctx *c, const int64_t *x) { (void)c; return (x[0] > 0) - (x[0] < 0); }
static uint64_t sign_u(ew_ctx *c, const uint64_t *x) { (void)c; return x[0] > 0; }
static const ew_def sign_def = {sign_f, sign_i, sign_u};
EW_UNARY_KERNEL(Sign, sign_def)

/* Float-only ops: one libm call each.  Round is half to even (nearbyint in
 * the default rounding mode), as np.round. */
#define EW_LIBM(Op, expr)                                                        \
	static double Op##_f(ew_ctx *c, const double *x) {                      \
		(void)c;                                                        \
		double v = x[0];                                                \
		return (expr);                                                  \
	}                                                                       \
	static const ew_def Op##_def = {Op##_f, NULL, NULL};                    \
	EW_UNARY_KERNEL(Op, Op##_def)

EW_LIBM(Acos, acos(v))
EW_LIBM(Acosh, acosh(v))
EW_LIBM(Asin, asin(v))
EW_LIBM(Asinh, asinh(v))
EW_LIBM(Atan, atan(v))
EW_LIBM(Atanh, atanh(v))
EW_LIBM(Ceil, ceil(v))
EW_LIBM(Cos, cos(v))
EW_LIBM(Cosh, cosh(v))
EW_LIBM(Erf, erf(v))
EW_LIBM(Exp, exp(v))
EW_LIBM(Floor, floor(v))
EW_LIBM(Log, log(v))
EW_LIBM(Reciprocal, 1.0 / v)
EW_LIBM(Round, nearbyint(v))
EW_LIBM(Sin, sin(v))
EW_LIBM(Sinh, sinh(v))
EW_LIBM(Sqrt, sqrt(v))
EW_LIBM(Tan, tan(v))
EW_LIBM(Tanh, tanh(v))

static double not_f(ew_ctx *c, const double *x) { (void)c; return x[0] == 0; }
static int64_t not_i(ew_ctx *c, const int64_t *x) { (void)c; return !x[0]; }
static const ew_def not_def = {not_f, not_i, NULL};
EW_UNARY_KERNEL(Not, not_def)

/* The store wraps ~x to the element width. */
static double bitwise_not_f(ew_ctx *c, const double *x) {
	c->error = "BitwiseNot needs an integer input";
	return x[0];
}
static int64_t bitwise_not_i(ew_ctx *c, const int64_t *x) { (void)c; return ~x[0]; }
static uint64_t bitwise_not_u(ew_ctx *c, const uint64_t *x) { (void)c; return ~x[0]; }
static const ew_def bitwise_not_def = {bitwise_not_f, bitwise_not_i, bitwise_not_u};
EW_UNARY_KERNEL(BitwiseNot, bitwise_not_def)

/* ---- IsInf, IsNaN: bool results of the input's shape ---------------------*/
static double isinf_f(ew_ctx *c, const double *x) {
	/* c->ia: detect_negative, c->ib: detect_positive */
	return isinf(x[0]) && (x[0] < 0 ? c->ia != 0 : c->ib != 0);
}
static const ew_def isinf_def = {isinf_f, NULL, NULL};

int tbc_interp_IsInf(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	ew_ctx c = {0};
	c.ia = tbc_attr_int(op, "detect_negative", 1);
	c.ib = tbc_attr_int(op, "detect_positive", 1);
	return ew_map(ip, op, &isinf_def, &c, 1, in, 0, TBC_DT_BOOL, out);
}

static double isnan_f(ew_ctx *c, const double *x) { (void)c; return isnan(x[0]); }
static const ew_def isnan_def = {isnan_f, NULL, NULL};

int tbc_interp_IsNaN(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	return ew_map(ip, op, &isnan_def, NULL, 1, in, 0, TBC_DT_BOOL, out);
}

static bool shape_float_to_bool(tbc_infer *cx, tbc_op *op) {
	const tbc_type *x = &op->inputs[0]->type;
	if (!tbc_dtype_is_float(x->dtype))
		return tbc_infer_error(cx, op, "input must be a floating-point tensor, not %s", tbc_dtype_name(x->dtype));
	op->outputs[0]->type = *x;
	op->outputs[0]->type.dtype = TBC_DT_BOOL;
	return true;
}

bool tbc_shape_IsInf(tbc_infer *cx, tbc_op *op) { return shape_float_to_bool(cx, op); }
bool tbc_shape_IsNaN(tbc_infer *cx, tbc_op *op) { return shape_float_to_bool(cx, op); }
