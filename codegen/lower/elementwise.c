/* Elementwise ops and Fused regions -> one loop nest each.
 *
 * Every elementwise op of ops.def has one scalar definition here (the table
 * ew_table), a kernel IR expression mirroring the interpreter's definition
 * (ir/kernels/elementwise_*.c) case for case: NaN handling, integer wrapping,
 * attribute defaults.  Domains: narrow floats compute in f32, f32 and f64 in
 * themselves, integers exactly in their own width (which wraps as the
 * interpreter's int64 arithmetic does on store).  Ops the spec defines for
 * floats only compute integer inputs in f64, as the interpreter does.
 *
 * Integer division and modulo by a divisor that may be zero check it first
 * (a kernel IR error statement): the run fails as the interpreter's does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"
#include "codegen/lower/kir_short.h"
#include "passes/util.h"

typedef struct ew {
	kir_kernel *k;
	const tbc_op *op;
	int n;
	kir_expr **x;  /* inputs (NULL: omitted), cast to ct unless the row is EW_RAW */
	tbc_dtype ct;  /* compute type */
	const char *error; /* set by a definition that cannot lower this instance */
	kir_block *checks; /* where run-time checks go (before the value is used); NULL: none possible */
} ew;

typedef kir_expr *(*ew_fn)(ew *e);

enum {
	EW_FLOAT = 1, /* defined on floats: integer inputs compute in f64 */
	EW_RAW = 2    /* the definition takes inputs in their own types and returns the output's */
};

typedef struct ew_row {
	ew_fn fn;
	unsigned flags;
} ew_row;

/* ---- Shorthands ------------------------------------------------------------*/
static bool ct_float(const ew *e) { return tbc_dtype_is_float(e->ct); }
static bool ct_unsigned(const ew *e) { return tbc_dtype_is_unsigned(e->ct); }
static kir_expr *C(ew *e, double v) {
	return ct_float(e) ? kir_e_float(e->k, e->ct, v) : kir_e_int(e->k, e->ct, (int64_t)v);
}
static double attr_f(ew *e, const char *name, double dflt) { return tbc_attr_float(e->op, name, dflt); }
#define X0 (e->x[0])
#define X1 (e->x[1])

/* ---- Unary math --------------------------------------------------------------*/
static kir_expr *ew_abs(ew *e) { return ct_unsigned(e) ? X0 : UN(e->k, KIR_ABS, X0); }
static kir_expr *ew_neg(ew *e) { return UN(e->k, KIR_NEG, X0); }
static kir_expr *ew_sign(ew *e) { return UN(e->k, KIR_SIGN, X0); }
static kir_expr *ew_not(ew *e) { return UN(e->k, KIR_NOT, X0); }
static kir_expr *ew_reciprocal(ew *e) { return FDIV(e->k, C(e, 1), X0); }
#define EW_UNOP(name, kop) \
	static kir_expr *ew_##name(ew *e) { return UN(e->k, kop, X0); }
EW_UNOP(acos, KIR_ACOS)
EW_UNOP(acosh, KIR_ACOSH)
EW_UNOP(asin, KIR_ASIN)
EW_UNOP(asinh, KIR_ASINH)
EW_UNOP(atan, KIR_ATAN)
EW_UNOP(atanh, KIR_ATANH)
EW_UNOP(ceil, KIR_CEIL)
EW_UNOP(cos, KIR_COS)
EW_UNOP(cosh, KIR_COSH)
EW_UNOP(erf, KIR_ERF)
EW_UNOP(exp, KIR_EXP)
EW_UNOP(floor, KIR_FLOOR)
EW_UNOP(log, KIR_LOG)
EW_UNOP(round, KIR_ROUND_EVEN)
EW_UNOP(sin, KIR_SIN)
EW_UNOP(sinh, KIR_SINH)
EW_UNOP(sqrt, KIR_SQRT)
EW_UNOP(tan, KIR_TAN)
EW_UNOP(tanh, KIR_TANH)
EW_UNOP(isnan, KIR_ISNAN)

static kir_expr *ew_isinf(ew *e) {
	bool neg = tbc_attr_int(e->op, "detect_negative", 1) != 0, pos = tbc_attr_int(e->op, "detect_positive", 1) != 0;
	kir_expr *inf = UN(e->k, KIR_ISINF, X0);
	if (neg && pos) return inf;
	if (!neg && !pos) return kir_e_int(e->k, TBC_DT_BOOL, 0);
	return BIN(e->k, KIR_AND, inf, CMP(e->k, neg ? KIR_LT : KIR_GT, X0, C(e, 0)));
}

/* ---- Activations -------------------------------------------------------------*/
static kir_expr *ew_relu(ew *e) { return ct_unsigned(e) ? X0 : SEL(e->k, CMP(e->k, KIR_LT, X0, C(e, 0)), C(e, 0), X0); }
static kir_expr *ew_leaky_relu(ew *e) {
	return SEL(e->k, CMP(e->k, KIR_LT, X0, C(e, 0)), MUL(e->k, C(e, attr_f(e, "alpha", 0.01)), X0), X0);
}
static kir_expr *elu_neg(ew *e, double alpha) { return MUL(e->k, C(e, alpha), UN(e->k, KIR_EXPM1, X0)); }
static kir_expr *ew_elu(ew *e) { return SEL(e->k, CMP(e->k, KIR_GT, X0, C(e, 0)), X0, elu_neg(e, attr_f(e, "alpha", 1.0))); }
/* fmax(0, x) + fmin(0, alpha * expm1(x / alpha)): fmax and fmin ignore NaN. */
static kir_expr *ew_celu(ew *e) {
	double alpha = attr_f(e, "alpha", 1.0);
	if (alpha == 0) {
		e->error = "Celu's alpha must not be 0";
		return NULL;
	}
	kir_expr *t = MUL(e->k, C(e, alpha), UN(e->k, KIR_EXPM1, FDIV(e->k, X0, C(e, alpha))));
	return ADD(e->k, SEL(e->k, CMP(e->k, KIR_GT, X0, C(e, 0)), X0, C(e, 0)), SEL(e->k, CMP(e->k, KIR_LT, t, C(e, 0)), t, C(e, 0)));
}
static kir_expr *ew_selu(ew *e) {
	double alpha = attr_f(e, "alpha", 1.67326319217681884765625), gamma = attr_f(e, "gamma", 1.05070102214813232421875);
	return MUL(e->k, C(e, gamma), SEL(e->k, CMP(e->k, KIR_GT, X0, C(e, 0)), X0, elu_neg(e, alpha)));
}
static kir_expr *ew_thresholded_relu(ew *e) {
	return SEL(e->k, CMP(e->k, KIR_GT, X0, C(e, attr_f(e, "alpha", 1.0))), X0, C(e, 0));
}
/* 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: neither overflows. */
static kir_expr *sigmoid(ew *e, kir_expr *x) {
	kir_expr *t = UN(e->k, KIR_EXP, UN(e->k, KIR_NEG, UN(e->k, KIR_ABS, x)));
	kir_expr *den = ADD(e->k, C(e, 1), t);
	return SEL(e->k, CMP(e->k, KIR_GE, x, C(e, 0)), FDIV(e->k, C(e, 1), den), FDIV(e->k, t, den));
}
/* fmax(0, fmin(1, t)) with fmin/fmax's NaN rule: NaN gives 1. */
static kir_expr *clamp01(ew *e, kir_expr *t) {
	kir_expr *u = SEL(e->k, CMP(e->k, KIR_LT, t, C(e, 1)), t, C(e, 1));
	return SEL(e->k, CMP(e->k, KIR_GT, u, C(e, 0)), u, C(e, 0));
}
static kir_expr *softplus(ew *e, kir_expr *x) {
	return SEL(e->k, CMP(e->k, KIR_GT, x, C(e, 0)), ADD(e->k, x, UN(e->k, KIR_LOG1P, UN(e->k, KIR_EXP, UN(e->k, KIR_NEG, x)))),
		   UN(e->k, KIR_LOG1P, UN(e->k, KIR_EXP, x)));
}
static kir_expr *ew_sigmoid(ew *e) { return sigmoid(e, X0); }
static kir_expr *ew_hard_sigmoid(ew *e) {
	return clamp01(e, ADD(e->k, MUL(e->k, C(e, attr_f(e, "alpha", 0.2)), X0), C(e, attr_f(e, "beta", 0.5))));
}
static kir_expr *ew_hard_swish(ew *e) { return MUL(e->k, X0, clamp01(e, ADD(e->k, FDIV(e->k, X0, C(e, 6)), C(e, 0.5)))); }
static kir_expr *ew_softplus(ew *e) { return softplus(e, X0); }
static kir_expr *ew_softsign(ew *e) { return FDIV(e->k, X0, ADD(e->k, C(e, 1), UN(e->k, KIR_ABS, X0))); }
static kir_expr *ew_mish(ew *e) { return MUL(e->k, X0, UN(e->k, KIR_TANH, softplus(e, X0))); }
static kir_expr *ew_gelu(ew *e) {
	const char *mode = tbc_attr_string(e->op, "approximate", "none");
	kir_expr *half_x = MUL(e->k, C(e, 0.5), X0);
	if (!strcmp(mode, "tanh")) {
		kir_expr *cube = MUL(e->k, MUL(e->k, X0, X0), X0);
		kir_expr *inner = MUL(e->k, C(e, sqrt(2.0 / M_PI)), ADD(e->k, X0, MUL(e->k, C(e, 0.044715), cube)));
		return MUL(e->k, half_x, ADD(e->k, C(e, 1), UN(e->k, KIR_TANH, inner)));
	}
	if (strcmp(mode, "none")) {
		e->error = "Gelu's approximate must be \"none\" or \"tanh\"";
		return NULL;
	}
	return MUL(e->k, half_x, ADD(e->k, C(e, 1), UN(e->k, KIR_ERF, FDIV(e->k, X0, C(e, sqrt(2.0))))));
}
static kir_expr *ew_swish(ew *e) { return MUL(e->k, X0, sigmoid(e, MUL(e->k, C(e, attr_f(e, "alpha", 1.0)), X0))); }
static kir_expr *ew_swiglu(ew *e) {
	return MUL(e->k, MUL(e->k, X0, sigmoid(e, MUL(e->k, C(e, attr_f(e, "alpha", 1.0)), X0))), X1);
}
static kir_expr *ew_shrink(ew *e) {
	double bias = attr_f(e, "bias", 0.0), lambd = attr_f(e, "lambd", 0.5);
	return SEL(e->k, CMP(e->k, KIR_LT, X0, C(e, -lambd)), ADD(e->k, X0, C(e, bias)),
		   SEL(e->k, CMP(e->k, KIR_GT, X0, C(e, lambd)), SUB(e->k, X0, C(e, bias)), C(e, 0)));
}
static kir_expr *ew_prelu(ew *e) {
	if (ct_unsigned(e)) return X0;
	return SEL(e->k, CMP(e->k, KIR_LT, X0, C(e, 0)), MUL(e->k, X1, X0), X0);
}
/* np.clip: min first, then max, so min > max gives max; NaN stays. */
static kir_expr *ew_clip(ew *e) {
	kir_expr *v = X0;
	if (e->n > 1 && e->x[1]) v = SEL(e->k, CMP(e->k, KIR_LT, v, e->x[1]), e->x[1], v);
	if (e->n > 2 && e->x[2]) v = SEL(e->k, CMP(e->k, KIR_GT, v, e->x[2]), e->x[2], v);
	return v;
}

/* ---- Binary and variadic -----------------------------------------------------*/
/* Integer division and modulo by zero fail the run, as in the interpreter:
 * a check before the value is used (none for a non-zero constant). */
static void check_divisor(ew *e, kir_expr *d, const char *what) {
	if (ct_float(e) || !d || (d->kind == KIR_E_INT && d->i != 0)) return;
	if (!e->checks) {
		e->error = "integer division by a divisor that may be zero has no lowering here yet";
		return;
	}
	char msg[256];
	snprintf(msg, sizeof msg, "node '%s' (%s): %s", e->op->name ? e->op->name : "", tbc_ops[e->op->code].onnx_name,
		 what);
	kir_block_add(e->k, e->checks, kir_s_error(e->k, CMP(e->k, KIR_EQ, d, C(e, 0)), msg));
}

static kir_expr *ew_add(ew *e) { return ADD(e->k, X0, X1); }
static kir_expr *ew_sub(ew *e) { return SUB(e->k, X0, X1); }
static kir_expr *ew_mul(ew *e) { return MUL(e->k, X0, X1); }
static kir_expr *ew_div(ew *e) {
	check_divisor(e, X1, "integer division by zero");
	return FDIV(e->k, X0, X1);
}

/* Mod: fmod=1 is C's fmod / %; fmod=0 takes the sign of the divisor (and a
 * float zero result takes the divisor's sign too). */
static kir_expr *ew_mod(ew *e) {
	int64_t fmod_attr = tbc_attr_int(e->op, "fmod", 0);
	check_divisor(e, X1, "integer modulo by zero");
	kir_expr *r = BIN(e->k, KIR_REM, X0, X1);
	if (fmod_attr || ct_unsigned(e)) return r;
	kir_expr *fix = BIN(e->k, KIR_AND, CMP(e->k, KIR_NE, r, C(e, 0)),
			  CMP(e->k, KIR_NE, CMP(e->k, KIR_LT, r, C(e, 0)), CMP(e->k, KIR_LT, X1, C(e, 0))));
	kir_expr *v = SEL(e->k, fix, ADD(e->k, r, X1), r);
	if (!ct_float(e)) return v;
	kir_expr *zero = SEL(e->k, CMP(e->k, KIR_LT, X1, C(e, 0)), C(e, -0.0), C(e, 0.0));
	return SEL(e->k, CMP(e->k, KIR_EQ, r, C(e, 0)), zero, v);
}

/* Pow: the result has the base's type.  Integer base and exponent: exact
 * (wrapping) in 64 bits; a float on either side: pow in the float domain
 * (f64 for an integer base, truncated on the way back). */
static kir_expr *ew_pow(ew *e) {
	tbc_dtype bt = e->op->inputs[0]->type.dtype, et = e->op->inputs[1]->type.dtype;
	tbc_dtype out = e->op->outputs[0]->type.dtype;
	tbc_dtype ct;
	if (!tbc_dtype_is_float(bt) && !tbc_dtype_is_float(et)) ct = tbc_dtype_is_unsigned(bt) ? TBC_DT_U64 : TBC_DT_I64;
	else if (tbc_dtype_is_float(bt)) ct = bt == TBC_DT_F64 ? TBC_DT_F64 : TBC_DT_F32;
	else ct = TBC_DT_F64;
	kir_expr *b = kir_e_cast(e->k, ct, X0), *x = kir_e_cast(e->k, ct, X1);
	return kir_e_cast(e->k, out, BIN(e->k, KIR_POW, b, x));
}

static kir_expr *ew_bitshift(ew *e) {
	const char *d = tbc_attr_string(e->op, "direction", "");
	if (strcmp(d, "LEFT") && strcmp(d, "RIGHT")) {
		e->error = "BitShift's direction must be \"LEFT\" or \"RIGHT\"";
		return NULL;
	}
	return BIN(e->k, !strcmp(d, "LEFT") ? KIR_SHL : KIR_SHR, X0, X1);
}
static kir_expr *ew_and(ew *e) { return BIN(e->k, KIR_AND, X0, X1); }
static kir_expr *ew_or(ew *e) { return BIN(e->k, KIR_OR, X0, X1); }
static kir_expr *ew_xor(ew *e) { return BIN(e->k, KIR_XOR, X0, X1); }
static kir_expr *ew_equal(ew *e) { return CMP(e->k, KIR_EQ, X0, X1); }
static kir_expr *ew_greater(ew *e) { return CMP(e->k, KIR_GT, X0, X1); }
static kir_expr *ew_greater_equal(ew *e) { return CMP(e->k, KIR_GE, X0, X1); }
static kir_expr *ew_less(ew *e) { return CMP(e->k, KIR_LT, X0, X1); }
static kir_expr *ew_less_equal(ew *e) { return CMP(e->k, KIR_LE, X0, X1); }

static kir_expr *fold(ew *e, kir_binop op) {
	kir_expr *r = X0;
	for (int i = 1; i < e->n; i++) r = BIN(e->k, op, r, e->x[i]);
	return r;
}
static kir_expr *ew_max(ew *e) { return fold(e, KIR_MAX); }
static kir_expr *ew_min(ew *e) { return fold(e, KIR_MIN); }
static kir_expr *ew_sum(ew *e) { return fold(e, KIR_ADD); }
static kir_expr *ew_mean(ew *e) { return FDIV(e->k, fold(e, KIR_ADD), C(e, e->n)); }

/* ---- Raw: inputs in their own types ------------------------------------------*/
static kir_expr *ew_where(ew *e) { return SEL(e->k, X0, X1, e->x[2]); }
static kir_expr *ew_cast(ew *e) {
	tbc_dtype to = e->op->outputs[0]->type.dtype;
	bool nosat = tbc_attr_int(e->op, "saturate", 1) == 0 && tbc_dtype_is_float(to) && tbc_dtype_bits(to) <= 8;
	if (to == TBC_DT_F8E8M0 && strcmp(tbc_attr_string(e->op, "round_mode", "up"), "up")) {
		e->error = "Cast to float8e8m0 rounding other than up has no lowering yet";
		return NULL;
	}
	return nosat ? kir_e_cast_nosat(e->k, to, X0) : kir_e_cast(e->k, to, X0);
}
/* QuantizeLinear / DequantizeLinear: only their per-tensor forms are
 * elementwise (and fused); the others are kernels of codegen/lower/quant.c. */
static kir_expr *ew_qdq(ew *e) {
	if (!pass_qdq_elementwise(e->op)) {
		e->error = "a per-axis or blocked QuantizeLinear / DequantizeLinear in a fused loop";
		return NULL;
	}
	return quant_qdq_value(e->k, e->op, X0, X1, e->n > 2 ? e->x[2] : NULL, e->checks);
}

static const ew_row ew_table[TBC_OP_COUNT] = {
	[TBC_OP_Abs] = {ew_abs, 0},
	[TBC_OP_Acos] = {ew_acos, EW_FLOAT},
	[TBC_OP_Acosh] = {ew_acosh, EW_FLOAT},
	[TBC_OP_Asin] = {ew_asin, EW_FLOAT},
	[TBC_OP_Asinh] = {ew_asinh, EW_FLOAT},
	[TBC_OP_Atan] = {ew_atan, EW_FLOAT},
	[TBC_OP_Atanh] = {ew_atanh, EW_FLOAT},
	[TBC_OP_Ceil] = {ew_ceil, EW_FLOAT},
	[TBC_OP_Cos] = {ew_cos, EW_FLOAT},
	[TBC_OP_Cosh] = {ew_cosh, EW_FLOAT},
	[TBC_OP_Erf] = {ew_erf, EW_FLOAT},
	[TBC_OP_Exp] = {ew_exp, EW_FLOAT},
	[TBC_OP_Floor] = {ew_floor, EW_FLOAT},
	[TBC_OP_Log] = {ew_log, EW_FLOAT},
	[TBC_OP_Neg] = {ew_neg, 0},
	[TBC_OP_Reciprocal] = {ew_reciprocal, EW_FLOAT},
	[TBC_OP_Round] = {ew_round, EW_FLOAT},
	[TBC_OP_Sign] = {ew_sign, 0},
	[TBC_OP_Sin] = {ew_sin, EW_FLOAT},
	[TBC_OP_Sinh] = {ew_sinh, EW_FLOAT},
	[TBC_OP_Sqrt] = {ew_sqrt, EW_FLOAT},
	[TBC_OP_Tan] = {ew_tan, EW_FLOAT},
	[TBC_OP_Tanh] = {ew_tanh, EW_FLOAT},
	[TBC_OP_Not] = {ew_not, 0},
	[TBC_OP_BitwiseNot] = {ew_not, 0},
	[TBC_OP_IsInf] = {ew_isinf, EW_FLOAT},
	[TBC_OP_IsNaN] = {ew_isnan, EW_FLOAT},
	[TBC_OP_Relu] = {ew_relu, 0},
	[TBC_OP_LeakyRelu] = {ew_leaky_relu, EW_FLOAT},
	[TBC_OP_Elu] = {ew_elu, EW_FLOAT},
	[TBC_OP_Celu] = {ew_celu, EW_FLOAT},
	[TBC_OP_Selu] = {ew_selu, EW_FLOAT},
	[TBC_OP_Sigmoid] = {ew_sigmoid, EW_FLOAT},
	[TBC_OP_HardSigmoid] = {ew_hard_sigmoid, EW_FLOAT},
	[TBC_OP_HardSwish] = {ew_hard_swish, EW_FLOAT},
	[TBC_OP_Softplus] = {ew_softplus, EW_FLOAT},
	[TBC_OP_Softsign] = {ew_softsign, EW_FLOAT},
	[TBC_OP_Mish] = {ew_mish, EW_FLOAT},
	[TBC_OP_Gelu] = {ew_gelu, EW_FLOAT},
	[TBC_OP_Swish] = {ew_swish, EW_FLOAT},
	[TBC_OP_ThresholdedRelu] = {ew_thresholded_relu, EW_FLOAT},
	[TBC_OP_Shrink] = {ew_shrink, EW_FLOAT},
	[TBC_OP_Clip] = {ew_clip, 0},
	[TBC_OP_Add] = {ew_add, 0},
	[TBC_OP_Sub] = {ew_sub, 0},
	[TBC_OP_Mul] = {ew_mul, 0},
	[TBC_OP_Div] = {ew_div, 0},
	[TBC_OP_Pow] = {ew_pow, EW_RAW},
	[TBC_OP_Mod] = {ew_mod, 0},
	[TBC_OP_PRelu] = {ew_prelu, 0},
	[TBC_OP_BitShift] = {ew_bitshift, 0},
	[TBC_OP_BitwiseAnd] = {ew_and, 0},
	[TBC_OP_BitwiseOr] = {ew_or, 0},
	[TBC_OP_BitwiseXor] = {ew_xor, 0},
	[TBC_OP_And] = {ew_and, 0},
	[TBC_OP_Or] = {ew_or, 0},
	[TBC_OP_Xor] = {ew_xor, 0},
	[TBC_OP_Equal] = {ew_equal, 0},
	[TBC_OP_Greater] = {ew_greater, 0},
	[TBC_OP_GreaterOrEqual] = {ew_greater_equal, 0},
	[TBC_OP_Less] = {ew_less, 0},
	[TBC_OP_LessOrEqual] = {ew_less_equal, 0},
	[TBC_OP_Max] = {ew_max, 0},
	[TBC_OP_Min] = {ew_min, 0},
	[TBC_OP_Mean] = {ew_mean, EW_FLOAT},
	[TBC_OP_Sum] = {ew_sum, 0},
	[TBC_OP_Where] = {ew_where, EW_RAW},
	[TBC_OP_Cast] = {ew_cast, EW_RAW},
	[TBC_OP_CastLike] = {ew_cast, EW_RAW},
	[TBC_OP_QuantizeLinear] = {ew_qdq, EW_RAW},
	[TBC_OP_DequantizeLinear] = {ew_qdq, EW_RAW},
	[TBC_OP_SwiGLU] = {ew_swiglu, EW_FLOAT},
};

bool lower_ew_supported(const tbc_op *op) { return op->code < TBC_OP_COUNT && ew_table[op->code].fn; }

static bool dtype_lowers(tbc_dtype dt) { return tbc_dtype_supported(dt); }

/* The scalar value of op's output 0 from its inputs' values x (in their
 * storage types); NULL with a diagnostic when this instance cannot lower. */
static kir_expr *ew_expr(lower_cx *cx, kir_kernel *k, const tbc_op *op, kir_expr **x, kir_block *checks) {
	const ew_row *row = &ew_table[op->code];
	tbc_dtype out = op->outputs[0]->type.dtype;
	if (!dtype_lowers(out)) {
		lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name, tbc_dtype_name(out));
		return NULL;
	}
	ew e = {.k = k, .op = op, .n = op->n_inputs, .x = x, .checks = checks};
	kir_expr *cast[16];
	if (op->n_inputs > 16) {
		lower_error(cx, op, "op %s with %d inputs has no lowering yet", tbc_ops[op->code].onnx_name,
			    op->n_inputs);
		return NULL;
	}
	if (!(row->flags & EW_RAW)) {
		tbc_dtype dt = op->inputs[0]->type.dtype;
		if (row->flags & EW_FLOAT && !tbc_dtype_is_float(dt)) e.ct = TBC_DT_F64;
		else if (tbc_dtype_is_float(dt) && dt != TBC_DT_F64) e.ct = TBC_DT_F32;
		else e.ct = dt;
		for (int i = 0; i < op->n_inputs; i++) cast[i] = x[i] ? kir_e_cast(k, e.ct, x[i]) : NULL;
		e.x = cast;
	}
	kir_expr *v = row->fn(&e);
	if (e.error) {
		tbc_diags_op(cx->d, TBC_ERR_UNSUPPORTED, op, "%s", e.error);
		return NULL;
	}
	return kir_e_cast(k, out, v);
}

/* ew_expr for other lowering files (declared in lower_internal.h). */
kir_expr *lower_ew_expr(lower_cx *cx, kir_kernel *k, const tbc_op *op, kir_expr **x) {
	return ew_expr(cx, k, op, x, NULL);
}
kir_expr *lower_ew_expr_checked(lower_cx *cx, kir_kernel *k, const tbc_op *op, kir_expr **x, kir_block *checks) {
	return ew_expr(cx, k, op, x, checks);
}

kir_expr *lower_scalar_const(kir_kernel *k, const tbc_value *v) {
	const tbc_tensor *t = v->kind == TBC_VALUE_CONST ? v->constant : NULL;
	tbc_dtype dt = v->type.dtype;
	if (t && t->numel == 1 && (dt == TBC_DT_F32 || dt == TBC_DT_F64)) return kir_e_float(k, dt, tbc_load_f64(dt, t->data, 0));
	if (t && t->numel == 1 && (tbc_dtype_is_int(dt) || dt == TBC_DT_BOOL))
		return kir_e_int(k, dt, tbc_dtype_is_unsigned(dt) ? (int64_t)tbc_load_u64(dt, t->data, 0) : tbc_load_i64(dt, t->data, 0));
	return NULL;
}

/* The value of operand v at the nest's point: scalar constants inline. */
static kir_expr *operand(lk *l, const nest *n, const tbc_value *v) {
	kir_expr *c = lower_scalar_const(l->k, v);
	if (c) return c;
	kir_buffer *b = lk_value(l, v);
	if (!b) return NULL;
	return kir_e_load(l->k, b, nest_index(l, n, &v->type));
}

static const char *lower_name(const tbc_op *op, char *buf, size_t size) {
	const char *s = tbc_ops[op->code].name;
	size_t i = 0;
	for (; s[i] && i + 1 < size; i++) buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
	buf[i] = 0;
	return buf;
}

bool lower_elementwise(lower_cx *cx, const tbc_op *op) {
	const tbc_value *outv = op->outputs[0];
	if (!outv) return true;
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && !dtype_lowers(op->inputs[i]->type.dtype))
			return lower_error(cx, op, "op %s on %s has no lowering yet", tbc_ops[op->code].onnx_name,
					   tbc_dtype_name(op->inputs[i]->type.dtype));
	int ob = lower_result_buf(cx, outv);
	char name[64];
	lk l;
	if (ob < 0 || !lk_begin(&l, cx, lower_name(op, name, sizeof name))) return false;
	kir_buffer *out = lk_buf(&l, ob);
	const tbc_type *types[16];
	int n_types = 0;
	for (int i = 0; i < op->n_inputs && n_types < 16; i++)
		if (op->inputs[i]) types[n_types++] = &op->inputs[i]->type;
	nest n;
	if (!out || !nest_build(&l, &n, &outv->type, n_types, types)) return false;
	kir_expr *x[16] = {0};
	for (int i = 0; i < op->n_inputs && i < 16; i++)
		if (op->inputs[i] && !(x[i] = operand(&l, &n, op->inputs[i]))) return false;
	kir_expr *v = ew_expr(cx, l.k, op, x, &n.body);
	if (!v) return false;
	kir_block_add(l.k, &n.body, kir_s_store(l.k, out, n.linear, v));
	return lk_end(&l, nest_finish(&l, &n));
}

/* ---- Fused regions ---------------------------------------------------------
 * One loop nest per distinct output shape; inner values live in registers:
 * an inner value used more than once becomes a scalar local. */
typedef struct fuse {
	lower_cx *cx;
	lk *l;
	nest *n;
	const tbc_op *op;
	const tbc_graph *body;
	kir_expr **memo; /* by value id */
} fuse;

static kir_expr *fused_value(fuse *f, const tbc_value *v) {
	if (f->memo[v->id]) return f->memo[v->id];
	kir_expr *e = NULL;
	if (v->kind == TBC_VALUE_INPUT) {
		for (int i = 0; i < f->body->n_inputs; i++)
			if (f->body->inputs[i] == v) e = operand(f->l, f->n, f->op->inputs[i]);
	} else if (v->kind == TBC_VALUE_CONST) {
		e = operand(f->l, f->n, v);
	} else {
		const tbc_op *op = v->def;
		kir_expr *x[16] = {0};
		for (int i = 0; i < op->n_inputs && i < 16; i++)
			if (op->inputs[i] && !(x[i] = fused_value(f, op->inputs[i]))) return NULL;
		e = ew_expr(f->cx, f->l->k, op, x, &f->n->body);
		if (e && tbc_value_use_count(v) > 1) {
			char name[32];
			snprintf(name, sizeof name, "v%u", v->id);
			kir_var *t = kir_var_new(f->l->k, name, e->type);
			kir_block_add(f->l->k, &f->n->body, kir_s_set(f->l->k, t, e));
			e = kir_e_var(f->l->k, t);
		}
	}
	f->memo[v->id] = e;
	return e;
}

bool lower_fused(lower_cx *cx, const tbc_op *op) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	if (!body || body->n_outputs != op->n_outputs) return lower_error(cx, op, "Fused without a body");
	for (const tbc_op *o = body->first; o; o = o->next) {
		if (!lower_ew_supported(o) || o->n_outputs != 1 || o->n_inputs > 16)
			return lower_error(cx, op, "a fused region holding %s has no lowering yet",
					   tbc_ops[o->code].onnx_name);
		for (int i = 0; i < o->n_inputs; i++)
			if (o->inputs[i] && !dtype_lowers(o->inputs[i]->type.dtype))
				return lower_error(cx, op, "a fused region over %s has no lowering yet",
						   tbc_dtype_name(o->inputs[i]->type.dtype));
	}
	/* Operand types for merging dims: every op input and body constant. */
	int n_types = 0;
	const tbc_type **types = tbc_arena_array(cx->p->arena, (size_t)op->n_inputs + (size_t)body->n_consts + 1,
						 sizeof *types);
	if (!types) return false;
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i]) types[n_types++] = &op->inputs[i]->type;
	for (int i = 0; i < body->n_consts; i++) types[n_types++] = &body->consts[i]->type;
	bool *done = calloc((size_t)op->n_outputs + 1, sizeof *done);
	kir_expr **memo = calloc((size_t)cx->m->n_values + 1, sizeof *memo);
	bool ok = done && memo;
	/* Memory planning may write an output over an input that dies here.
	 * Within one nest that is safe (every value is computed before any
	 * store); across nests a later nest may still read the input, so such
	 * an output gets storage of its own. */
	int n_shapes = 0;
	for (int i = 0; i < op->n_outputs; i++) {
		if (!op->outputs[i]) continue;
		bool seen = false;
		for (int j = 0; j < i && !seen; j++) {
			if (!op->outputs[j] || op->outputs[j]->type.rank != op->outputs[i]->type.rank) continue;
			bool same = true;
			for (int d = 0; d < op->outputs[i]->type.rank; d++)
				same &= tbc_dim_eq(op->outputs[i]->type.dims[d], op->outputs[j]->type.dims[d]);
			seen = same;
		}
		n_shapes += !seen;
	}
	for (int i = 0; ok && n_shapes > 1 && i < op->n_outputs; i++) {
		if (!op->outputs[i]) continue;
		for (int k = 0; k < op->n_inputs; k++)
			if (op->inputs[k] && lower_storage_overlaps(cx, op->outputs[i], op->inputs[k])) {
				ok = lower_result_buf_apart(cx, op->outputs[i]) >= 0;
				break;
			}
	}
	kir_buffer *nest_out[64];
	kir_expr *nest_val[64];
	for (int first = 0; ok && first < op->n_outputs; first++) {
		if (done[first] || !op->outputs[first]) continue;
		const tbc_type *shape = &op->outputs[first]->type;
		lk l;
		nest n;
		ok = lk_begin(&l, cx, "fused") && nest_build(&l, &n, shape, n_types, types);
		memset(memo, 0, ((size_t)cx->m->n_values + 1) * sizeof *memo);
		fuse f = {cx, &l, &n, op, body, memo};
		int n_stores = 0;
		for (int i = first; ok && i < op->n_outputs; i++) {
			const tbc_value *ov = op->outputs[i];
			if (!ov || done[i] || ov->type.rank != shape->rank) continue;
			bool same = true;
			for (int d = 0; d < shape->rank; d++) same &= tbc_dim_eq(ov->type.dims[d], shape->dims[d]);
			if (!same) continue;
			done[i] = true;
			int ob = lower_result_buf(cx, ov);
			kir_buffer *out = ob >= 0 ? lk_buf(&l, ob) : NULL;
			kir_expr *v = out ? fused_value(&f, body->outputs[i]) : NULL;
			if (v) v = kir_e_cast(l.k, ov->type.dtype, v);
			ok = v != NULL && n_stores < 64;
			if (!ok) break;
			nest_out[n_stores] = out;
			nest_val[n_stores++] = v;
		}
		/* Several outputs: every value into a local before the first store,
		 * since an output may be written over an input the others read. */
		for (int i = 0; ok && n_stores > 1 && i < n_stores; i++) {
			if (nest_val[i]->kind == KIR_E_VAR || nest_val[i]->kind == KIR_E_INT || nest_val[i]->kind == KIR_E_FLOAT)
				continue;
			kir_var *t = kir_var_new(l.k, "out", nest_val[i]->type);
			kir_block_add(l.k, &n.body, kir_s_set(l.k, t, nest_val[i]));
			nest_val[i] = kir_e_var(l.k, t);
		}
		for (int i = 0; ok && i < n_stores; i++)
			kir_block_add(l.k, &n.body, kir_s_store(l.k, nest_out[i], n.linear, nest_val[i]));
		ok = ok && lk_end(&l, nest_finish(&l, &n));
	}
	free(done);
	free(memo);
	return ok;
}
