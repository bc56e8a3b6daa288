/* libm without libm: the math the GPU targets (NVPTX, AMDGPU) cannot call,
 * as internal LLVM IR functions computed in f64, the same on every target
 * that asks for them (llvm_hooks.soft_math).  An f32 argument is widened,
 * computed in f64 and rounded once to f32 (f32 exp, log, tanh and erf keep
 * llvm_math.c's inline polynomials).
 *
 * The algorithms are the textbook ones, with exact Taylor coefficients
 * where that converges fast enough and fdlibm's reductions:
 *  - exp: n = round(x / ln 2), r = x - n ln 2 in two parts (|r| <= 0.35),
 *    Taylor to r^13, scaled by 2^n in two exact steps;
 *  - log: x = 2^e f with f in [sqrt(1/2), sqrt(2)), fdlibm's
 *    log(1 + u) = u - u^2/2 + s (u^2/2 + R(s^2)), s = u / (2 + u), R the
 *    atanh series to s^24;
 *  - sin, cos, tan: n = round(x / (pi/2)), r = x - n pi/2 in three parts
 *    (fdlibm's; exact for |x| < 2^20 pi/2, less accurate beyond: no
 *    Payne-Hanek reduction), Taylor of sin to r^17 and cos to r^16;
 *  - atan: |x| > 1 as pi/2 - atan(1/|x|), above tan(pi/12) through
 *    atan(t) = pi/6 + atan((t sqrt 3 - 1) / (t + sqrt 3)), Taylor to t^31;
 *    atan2, asin, acos from it with C's special cases;
 *  - erf: Taylor to x^61 below 2, 1 - erfc by its continued fraction (60
 *    terms) up to 6, 1 beyond;
 *  - expm1, log1p: Kahan's corrections of exp and log; sinh, cosh, tanh,
 *    asinh, acosh, atanh: fdlibm's formulas on expm1 / log1p;
 *  - pow: an integer base to an integer power up to 64 by binary powering
 *    (exact where the result is representable), others as
 *    exp(y log |x|) with C's special cases (zeros, infinities, a negative
 *    base): relative error about |y ln x| 2^-53, so f64 results near
 *    overflow lose a few digits.
 * Measured against the C library over grids of f64 inputs: a few ulp,
 * apart from pow as said and sin/cos/tan of large arguments. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

typedef struct sm {
	llvm_cx *c;
	LLVMBuilderRef b;
} sm;

static LLVMValueRef K(sm *m, double v) { return LLVMConstReal(m->c->f64, v); }
static LLVMValueRef mul(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef add(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef fdiv_(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static LLVMValueRef sel(sm *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
	return LLVMBuildSelect(m->b, c, a, b, "");
}
static LLVMValueRef lt(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, LLVMRealOLT, a, b, ""); }
static LLVMValueRef eq(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, LLVMRealOEQ, a, b, ""); }
static LLVMValueRef isnan_(sm *m, LLVMValueRef a) { return LLVMBuildFCmp(m->b, LLVMRealUNO, a, a, ""); }
static LLVMValueRef and_(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAnd(m->b, a, b, ""); }
static LLVMValueRef or_(sm *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildOr(m->b, a, b, ""); }

static LLVMValueRef intrinsic(sm *m, const char *name, LLVMValueRef *args, unsigned n) {
	LLVMTypeRef t = m->c->f64;
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->c->mod, id, &t, 1);
	return LLVMBuildCall2(m->b, LLVMIntrinsicGetType(m->c->ctx, id, &t, 1), fn, args, n, "");
}
static LLVMValueRef fabs_(sm *m, LLVMValueRef x) { return intrinsic(m, "llvm.fabs", &x, 1); }
static LLVMValueRef sqrt_(sm *m, LLVMValueRef x) { return intrinsic(m, "llvm.sqrt", &x, 1); }
static LLVMValueRef floor_(sm *m, LLVMValueRef x) { return intrinsic(m, "llvm.floor", &x, 1); }
static LLVMValueRef rint_(sm *m, LLVMValueRef x) { return intrinsic(m, "llvm.roundeven", &x, 1); }
static LLVMValueRef copysign_(sm *m, LLVMValueRef x, LLVMValueRef s) {
	LLVMValueRef a[2] = {x, s};
	return intrinsic(m, "llvm.copysign", a, 2);
}
static LLVMValueRef signbit_(sm *m, LLVMValueRef x) {
	LLVMValueRef bits = LLVMBuildBitCast(m->b, x, m->c->i64, "");
	return LLVMBuildICmp(m->b, LLVMIntSLT, bits, LLVMConstInt(m->c->i64, 0, 0), "");
}

/* Horner over c[0] z^(n-1) + ... + c[n-1]. */
static LLVMValueRef horner(sm *m, const double *c, int n, LLVMValueRef z) {
	LLVMValueRef y = K(m, c[0]);
	for (int i = 1; i < n; i++) y = add(m, mul(m, y, z), K(m, c[i]));
	return y;
}

/* 2^n for an i64 n in [-1022, 1023]: the exponent field. */
static LLVMValueRef pow2i(sm *m, LLVMValueRef n) {
	LLVMValueRef bits = LLVMBuildShl(m->b, LLVMBuildAdd(m->b, n, LLVMConstInt(m->c->i64, 1023, 0), ""),
					 LLVMConstInt(m->c->i64, 52, 0), "");
	return LLVMBuildBitCast(m->b, bits, m->c->f64, "");
}

static LLVMValueRef call1(sm *m, const char *fn, LLVMValueRef x);
static LLVMValueRef call2(sm *m, const char *fn, LLVMValueRef x, LLVMValueRef y);

#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define PI 3.14159265358979311600e+00
#define PI_2 1.57079632679489655800e+00

/* ---- exp, log -------------------------------------------------------------*/
static LLVMValueRef f_exp(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	/* 1/13! ... 1/1!, 1 */
	double P[14];
	double f = 1;
	for (int k = 1; k <= 13; k++) f *= k;
	for (int k = 13, i = 0; k >= 0; k--, i++) {
		P[i] = 1.0 / f;
		if (k) f /= k;
	}
	LLVMValueRef xc = sel(m, lt(m, x, K(m, -1100.0)), K(m, -1100.0), x);
	xc = sel(m, lt(m, K(m, 710.0), xc), K(m, 710.0), xc);
	LLVMValueRef t = mul(m, xc, K(m, 1.44269504088896338700e+00));
	LLVMValueRef n = rint_(m, t);
	LLVMValueRef r = sub(m, sub(m, xc, mul(m, n, K(m, LN2_HI))), mul(m, n, K(m, LN2_LO)));
	LLVMValueRef p = horner(m, P, 14, r);
	/* p * 2^n in two exact steps: n may be past the normal exponents */
	LLVMValueRef ni = LLVMBuildFPToSI(m->b, sel(m, isnan_(m, n), K(m, 0.0), n), m->c->i64, "");
	LLVMValueRef n1 = LLVMBuildAShr(m->b, ni, LLVMConstInt(m->c->i64, 1, 0), "");
	LLVMValueRef n2 = LLVMBuildSub(m->b, ni, n1, "");
	p = mul(m, mul(m, p, pow2i(m, n1)), pow2i(m, n2));
	return sel(m, isnan_(m, x), x, p);
}

static LLVMValueRef f_log(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMBuilderRef b = m->b;
	llvm_cx *c = m->c;
	LLVMValueRef i64c[4] = {LLVMConstInt(c->i64, 52, 0), LLVMConstInt(c->i64, 0x7ff, 0), LLVMConstInt(c->i64, 1022, 0),
				LLVMConstInt(c->i64, 54, 0)};
	LLVMValueRef subn = lt(m, x, K(m, 0x1p-1022));
	LLVMValueRef xs = sel(m, subn, mul(m, x, K(m, 0x1p54)), x);
	LLVMValueRef bits = LLVMBuildBitCast(b, xs, c->i64, "");
	LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAnd(b, LLVMBuildLShr(b, bits, i64c[0], ""), i64c[1], ""), i64c[2], "");
	e = LLVMBuildSub(b, e, sel(m, subn, i64c[3], LLVMConstInt(c->i64, 0, 0)), "");
	LLVMValueRef fr = LLVMBuildBitCast(
		b,
		LLVMBuildOr(b, LLVMBuildAnd(b, bits, LLVMConstInt(c->i64, 0x000fffffffffffffull, 0), ""),
			    LLVMConstInt(c->i64, 0x3fe0000000000000ull, 0), ""),
		c->f64, "");
	LLVMValueRef low = lt(m, fr, K(m, 0.70710678118654752440));
	e = LLVMBuildSub(b, e, LLVMBuildZExt(b, low, c->i64, ""), "");
	LLVMValueRef u = sub(m, sel(m, low, add(m, fr, fr), fr), K(m, 1.0));
	LLVMValueRef s = fdiv_(m, u, add(m, K(m, 2.0), u));
	LLVMValueRef z = mul(m, s, s);
	double R[12];
	for (int k = 12, i = 0; k >= 1; k--, i++) R[i] = 2.0 / (2 * k + 1);
	LLVMValueRef r = mul(m, z, horner(m, R, 12, z));
	LLVMValueRef hfsq = mul(m, K(m, 0.5), mul(m, u, u));
	LLVMValueRef dk = LLVMBuildSIToFP(b, e, c->f64, "");
	/* dk ln2_hi - ((hfsq - (s (hfsq + R) + dk ln2_lo)) - u) */
	LLVMValueRef v = add(m, mul(m, s, add(m, hfsq, r)), mul(m, dk, K(m, LN2_LO)));
	v = sub(m, mul(m, dk, K(m, LN2_HI)), sub(m, sub(m, hfsq, v), u));
	v = sel(m, eq(m, x, K(m, INFINITY)), K(m, INFINITY), v);
	v = sel(m, eq(m, x, K(m, 0.0)), K(m, -INFINITY), v);
	v = sel(m, lt(m, x, K(m, 0.0)), K(m, NAN), v);
	return sel(m, isnan_(m, x), x, v);
}

/* ---- sin, cos, tan ----------------------------------------------------------*/
/* r = x - n pi/2 with sin(r), cos(r) and n mod 4 (as a double, NaN for a
 * NaN or infinite x). */
static void reduce_trig(sm *m, LLVMValueRef x, LLVMValueRef *s, LLVMValueRef *co, LLVMValueRef *q) {
	LLVMValueRef n = rint_(m, mul(m, x, K(m, 6.36619772367581382433e-01)));
	LLVMValueRef r = sub(m, x, mul(m, n, K(m, 1.57079632673412561417e+00)));
	r = sub(m, r, mul(m, n, K(m, 6.07710050630396597660e-11)));
	r = sub(m, r, mul(m, n, K(m, 2.02226624879595063154e-21)));
	*q = sub(m, n, mul(m, K(m, 4.0), floor_(m, mul(m, n, K(m, 0.25)))));
	LLVMValueRef z = mul(m, r, r);
	/* sin: r + r^3 (-1/3! + z (1/5! - ...)) to r^17; cos: 1 - z/2 + ... to r^16 */
	double S[8], C[9];
	double f = 1;
	for (int k = 1; k <= 17; k++) f *= k; /* 17! */
	for (int k = 17, i = 0; k >= 3; k -= 2, i++) {
		S[i] = ((k / 2) % 2 ? -1.0 : 1.0) / f;
		f /= (double)k * (k - 1);
	}
	f = 1;
	for (int k = 1; k <= 16; k++) f *= k; /* 16! */
	for (int k = 16, i = 0; k >= 0; k -= 2, i++) {
		C[i] = ((k / 2) % 2 ? -1.0 : 1.0) / f;
		if (k) f /= (double)k * (k - 1);
	}
	*s = add(m, r, mul(m, mul(m, r, z), horner(m, S, 8, z)));
	*co = horner(m, C, 9, z);
}

static LLVMValueRef f_sin(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef s, c, q;
	reduce_trig(m, x, &s, &c, &q);
	/* q 0: s, 1: c, 2: -s, 3: -c */
	LLVMValueRef v = sel(m, lt(m, q, K(m, 0.5)), s, sel(m, lt(m, q, K(m, 1.5)), c, LLVMBuildFNeg(m->b, sel(m, lt(m, q, K(m, 2.5)), s, c), "")));
	v = sel(m, eq(m, x, K(m, 0.0)), x, v); /* sin(-0) = -0 */
	return sel(m, isnan_(m, q), K(m, NAN), v);
}

static LLVMValueRef f_cos(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef s, c, q;
	reduce_trig(m, x, &s, &c, &q);
	/* q 0: c, 1: -s, 2: -c, 3: s */
	LLVMValueRef ns = LLVMBuildFNeg(m->b, s, ""), nc = LLVMBuildFNeg(m->b, c, "");
	LLVMValueRef v = sel(m, lt(m, q, K(m, 0.5)), c, sel(m, lt(m, q, K(m, 1.5)), ns, sel(m, lt(m, q, K(m, 2.5)), nc, s)));
	return sel(m, isnan_(m, q), K(m, NAN), v);
}

static LLVMValueRef f_tan(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef s, c, q;
	reduce_trig(m, x, &s, &c, &q);
	/* n even: s / c; odd: -c / s */
	LLVMValueRef odd = or_(m, eq(m, q, K(m, 1.0)), eq(m, q, K(m, 3.0)));
	LLVMValueRef v = sel(m, odd, LLVMBuildFNeg(m->b, fdiv_(m, c, s), ""), fdiv_(m, s, c));
	v = sel(m, eq(m, x, K(m, 0.0)), x, v);
	return sel(m, isnan_(m, q), K(m, NAN), v);
}

/* ---- atan, atan2, asin, acos -----------------------------------------------*/
static LLVMValueRef f_atan(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x);
	LLVMValueRef big = lt(m, K(m, 1.0), a);
	LLVMValueRef t = sel(m, big, fdiv_(m, K(m, 1.0), a), a);
	LLVMValueRef mid = lt(m, K(m, 0.26794919243112270647), t);
	LLVMValueRef sqrt3 = K(m, 1.73205080756887719318);
	LLVMValueRef t2 = sel(m, mid, fdiv_(m, sub(m, mul(m, t, sqrt3), K(m, 1.0)), add(m, t, sqrt3)), t);
	double P[16];
	for (int k = 15, i = 0; k >= 0; k--, i++) P[i] = (k % 2 ? -1.0 : 1.0) / (2 * k + 1);
	LLVMValueRef z = mul(m, t2, t2);
	LLVMValueRef r = mul(m, t2, horner(m, P, 16, z));
	r = sel(m, mid, add(m, K(m, 5.23598775598298815658e-01), r), r);
	r = sel(m, big, sub(m, K(m, PI_2), r), r);
	return copysign_(m, sel(m, isnan_(m, x), x, r), x);
}

static LLVMValueRef f_atan2(sm *m, LLVMValueRef y, LLVMValueRef x) {
	LLVMValueRef ax = fabs_(m, x), ay = fabs_(m, y);
	LLVMValueRef base = call1(m, "atan", fdiv_(m, ay, ax));
	LLVMValueRef zero = K(m, 0.0), inf = K(m, INFINITY);
	base = sel(m, and_(m, eq(m, ax, zero), eq(m, ay, zero)), zero, base);
	base = sel(m, and_(m, eq(m, ax, inf), eq(m, ay, inf)), K(m, 0.78539816339744827900), base);
	base = sel(m, signbit_(m, x), sub(m, K(m, PI), base), base);
	LLVMValueRef r = copysign_(m, base, y);
	return sel(m, or_(m, isnan_(m, x), isnan_(m, y)), add(m, x, y), r);
}

/* sqrt(1 - x^2) as sqrt((1 - x)(1 + x)): NaN past |x| = 1 */
static LLVMValueRef cosine_of_sine(sm *m, LLVMValueRef x) {
	return sqrt_(m, mul(m, sub(m, K(m, 1.0), x), add(m, K(m, 1.0), x)));
}
static LLVMValueRef f_asin(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	return call2(m, "atan2", x, cosine_of_sine(m, x));
}
static LLVMValueRef f_acos(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	return call2(m, "atan2", cosine_of_sine(m, x), x);
}

/* ---- expm1, log1p and the hyperbolic functions --------------------------------*/
static LLVMValueRef f_expm1(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef u = call1(m, "exp", x);
	LLVMValueRef um1 = sub(m, u, K(m, 1.0));
	LLVMValueRef v = fdiv_(m, mul(m, um1, x), call1(m, "log", u));
	v = sel(m, eq(m, u, K(m, INFINITY)), u, v);
	v = sel(m, eq(m, um1, K(m, -1.0)), K(m, -1.0), v);
	return sel(m, eq(m, u, K(m, 1.0)), x, v);
}

static LLVMValueRef f_log1p(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef u = add(m, K(m, 1.0), x);
	LLVMValueRef v = fdiv_(m, mul(m, call1(m, "log", u), x), sub(m, u, K(m, 1.0)));
	v = sel(m, eq(m, u, K(m, INFINITY)), u, v);
	v = sel(m, eq(m, u, K(m, 0.0)), K(m, -INFINITY), v);
	return sel(m, eq(m, u, K(m, 1.0)), x, v);
}

/* exp(|x|) / 2 without overflowing before the result does */
static LLVMValueRef half_exp_big(sm *m, LLVMValueRef a) {
	LLVMValueRef w = call1(m, "exp", mul(m, K(m, 0.5), a));
	return mul(m, mul(m, K(m, 0.5), w), w);
}

static LLVMValueRef f_sinh(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x);
	LLVMValueRef e = call1(m, "expm1", a);
	LLVMValueRef small = mul(m, K(m, 0.5), add(m, e, fdiv_(m, e, add(m, e, K(m, 1.0)))));
	LLVMValueRef v = sel(m, lt(m, a, K(m, 22.0)), small, half_exp_big(m, a));
	return copysign_(m, sel(m, isnan_(m, x), x, v), x);
}

static LLVMValueRef f_cosh(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x);
	LLVMValueRef t = call1(m, "expm1", a);
	LLVMValueRef w = add(m, K(m, 1.0), t);
	LLVMValueRef tiny = add(m, K(m, 1.0), fdiv_(m, mul(m, t, t), add(m, w, w)));
	LLVMValueRef e = call1(m, "exp", a);
	LLVMValueRef mid = add(m, mul(m, K(m, 0.5), e), fdiv_(m, K(m, 0.5), e));
	LLVMValueRef v = sel(m, lt(m, a, K(m, 0.34657359027997264)), tiny, sel(m, lt(m, a, K(m, 22.0)), mid, half_exp_big(m, a)));
	return sel(m, isnan_(m, x), x, v);
}

static LLVMValueRef f_tanh(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x);
	LLVMValueRef t = call1(m, "expm1", add(m, a, a));
	LLVMValueRef v = sel(m, lt(m, a, K(m, 22.0)), fdiv_(m, t, add(m, t, K(m, 2.0))), K(m, 1.0));
	return copysign_(m, sel(m, isnan_(m, x), x, v), x);
}

static LLVMValueRef f_asinh(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x), one = K(m, 1.0);
	LLVMValueRef a2 = mul(m, a, a);
	LLVMValueRef huge = add(m, call1(m, "log", a), K(m, 6.93147180559945286227e-01));
	LLVMValueRef big = call1(m, "log", add(m, add(m, a, a), fdiv_(m, one, add(m, sqrt_(m, add(m, a2, one)), a))));
	LLVMValueRef small = call1(m, "log1p", add(m, a, fdiv_(m, a2, add(m, one, sqrt_(m, add(m, one, a2))))));
	LLVMValueRef v = sel(m, lt(m, K(m, 0x1p28), a), huge, sel(m, lt(m, K(m, 2.0), a), big, small));
	return copysign_(m, v, x);
}

static LLVMValueRef f_acosh(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef one = K(m, 1.0);
	LLVMValueRef huge = add(m, call1(m, "log", x), K(m, 6.93147180559945286227e-01));
	LLVMValueRef big = call1(m, "log", sub(m, add(m, x, x), fdiv_(m, one, add(m, x, sqrt_(m, sub(m, mul(m, x, x), one))))));
	LLVMValueRef t = sub(m, x, one);
	LLVMValueRef small = call1(m, "log1p", add(m, t, sqrt_(m, add(m, add(m, t, t), mul(m, t, t)))));
	LLVMValueRef v = sel(m, lt(m, K(m, 0x1p28), x), huge, sel(m, lt(m, K(m, 2.0), x), big, small));
	return sel(m, lt(m, x, one), K(m, NAN), v);
}

static LLVMValueRef f_atanh(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x), one = K(m, 1.0), half = K(m, 0.5);
	LLVMValueRef t = add(m, a, a);
	LLVMValueRef small = call1(m, "log1p", add(m, t, fdiv_(m, mul(m, t, a), sub(m, one, a))));
	LLVMValueRef big = call1(m, "log1p", fdiv_(m, t, sub(m, one, a)));
	LLVMValueRef v = mul(m, half, sel(m, lt(m, a, half), small, big));
	return copysign_(m, v, x);
}

/* ---- erf ------------------------------------------------------------------*/
static LLVMValueRef f_erf(sm *m, LLVMValueRef x, LLVMValueRef y) {
	(void)y;
	LLVMValueRef a = fabs_(m, x);
	/* erf(a) = 2/sqrt(pi) sum (-1)^n a^(2n+1) / (n! (2n+1)), to n = 30 */
	double T[31];
	double fact = 1;
	for (int n = 1; n <= 30; n++) fact *= n;
	for (int n = 30, i = 0; n >= 0; n--, i++) {
		T[i] = (n % 2 ? -1.0 : 1.0) / (fact * (2 * n + 1)) * 1.12837916709551255856;
		if (n) fact /= n;
	}
	LLVMValueRef small = mul(m, a, horner(m, T, 31, mul(m, a, a)));
	/* erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / ...))) */
	LLVMValueRef ac = sel(m, lt(m, a, K(m, 2.0)), K(m, 2.0), a); /* keeps the fraction finite */
	LLVMValueRef fr = ac;
	for (int k = 60; k >= 1; k--) fr = add(m, ac, fdiv_(m, K(m, k * 0.5), fr));
	LLVMValueRef erfc = fdiv_(m, mul(m, call1(m, "exp", LLVMBuildFNeg(m->b, mul(m, ac, ac), "")), K(m, 0.56418958354775627928)), fr);
	LLVMValueRef big = sub(m, K(m, 1.0), erfc);
	LLVMValueRef v = sel(m, lt(m, a, K(m, 2.0)), small, sel(m, lt(m, a, K(m, 6.0)), big, K(m, 1.0)));
	return copysign_(m, sel(m, isnan_(m, x), x, v), x);
}

/* ---- pow ------------------------------------------------------------------*/
/* x^n for an integer 0 <= n < 128 (given as a double) by binary powering:
 * exact wherever the result is representable and x an integer (9^3 is 729,
 * not exp(3 log 9) = 728.99999999999989, which an integer Pow would
 * truncate to 728), and at most a few roundings otherwise. */
static LLVMValueRef powi_(sm *m, LLVMValueRef x, LLVMValueRef n) {
	LLVMValueRef ni = LLVMBuildFPToSI(m->b, n, m->c->i64, "");
	LLVMValueRef r = K(m, 1.0), p = x;
	for (int i = 0; i < 7; i++) {
		LLVMValueRef bit = LLVMBuildAnd(m->b, ni, LLVMConstInt(m->c->i64, 1ull << i, 0), "");
		r = sel(m, LLVMBuildICmp(m->b, LLVMIntNE, bit, LLVMConstInt(m->c->i64, 0, 0), ""), mul(m, r, p), r);
		if (i < 6) p = mul(m, p, p);
	}
	return r;
}

static LLVMValueRef f_pow(sm *m, LLVMValueRef x, LLVMValueRef y) {
	LLVMValueRef one = K(m, 1.0), zero = K(m, 0.0), inf = K(m, INFINITY);
	LLVMValueRef ax = fabs_(m, x);
	LLVMValueRef r = call1(m, "exp", mul(m, y, call1(m, "log", ax)));
	LLVMValueRef y_int = eq(m, floor_(m, y), y); /* infinities count as even integers */
	LLVMValueRef hy = mul(m, y, K(m, 0.5));
	LLVMValueRef y_odd = and_(m, y_int, LLVMBuildNot(m->b, eq(m, floor_(m, hy), hy), ""));
	r = sel(m, and_(m, signbit_(m, x), y_odd), LLVMBuildFNeg(m->b, r, ""), r);
	/* a finite negative base to a non-integer power */
	LLVMValueRef neg_finite = and_(m, lt(m, x, zero), lt(m, K(m, -INFINITY), x));
	r = sel(m, and_(m, neg_finite, LLVMBuildNot(m->b, y_int, "")), K(m, NAN), r);
	/* An integer base to an integer power up to 64 by binary powering (the
	 * sign follows from the products), a negative power as its reciprocal
	 * unless x^|y| overflowed or vanished, where exp(y log |x|) keeps the
	 * digits.  (For other bases the products' error, up to about |y| ulp
	 * near 1, can exceed exp-log's |y ln x| 2^-53.) */
	LLVMValueRef ay = fabs_(m, y);
	LLVMValueRef small = and_(m, and_(m, y_int, lt(m, ay, K(m, 64.5))), eq(m, floor_(m, x), x));
	LLVMValueRef pn = powi_(m, x, sel(m, small, ay, zero));
	LLVMValueRef neg_y = lt(m, y, zero);
	LLVMValueRef lost = or_(m, eq(m, fabs_(m, pn), inf), eq(m, pn, zero));
	LLVMValueRef by_products = and_(m, small, LLVMBuildNot(m->b, and_(m, neg_y, lost), ""));
	r = sel(m, by_products, sel(m, neg_y, fdiv_(m, one, pn), pn), r);
	r = sel(m, and_(m, eq(m, ax, one), eq(m, fabs_(m, y), inf)), one, r); /* (-1)^inf */
	r = sel(m, or_(m, isnan_(m, x), isnan_(m, y)), add(m, x, y), r);
	return sel(m, or_(m, eq(m, y, zero), eq(m, x, one)), one, r);
}

/* ---- The functions, each made once per module ---------------------------------*/
typedef LLVMValueRef (*sm_emit)(sm *, LLVMValueRef, LLVMValueRef);
static const struct {
	const char *name;
	int arity;
	sm_emit emit;
} functions[] = {
	{"exp", 1, f_exp},     {"log", 1, f_log},     {"sin", 1, f_sin},       {"cos", 1, f_cos},
	{"tan", 1, f_tan},     {"atan", 1, f_atan},   {"asin", 1, f_asin},     {"acos", 1, f_acos},
	{"expm1", 1, f_expm1}, {"log1p", 1, f_log1p}, {"sinh", 1, f_sinh},     {"cosh", 1, f_cosh},
	{"tanh", 1, f_tanh},   {"asinh", 1, f_asinh}, {"acosh", 1, f_acosh},   {"atanh", 1, f_atanh},
	{"erf", 1, f_erf},     {"pow", 2, f_pow},     {"atan2", 2, f_atan2},
};

/* The internal f64 function tbc.sm.<name>; NULL if there is none. */
static LLVMValueRef function(llvm_cx *c, const char *name, LLVMTypeRef *out_ty) {
	int found = -1;
	for (size_t i = 0; i < sizeof functions / sizeof *functions; i++)
		if (!strcmp(functions[i].name, name)) found = (int)i;
	if (found < 0) return NULL;
	LLVMTypeRef params[2] = {c->f64, c->f64};
	LLVMTypeRef fty = LLVMFunctionType(c->f64, params, (unsigned)functions[found].arity, 0);
	*out_ty = fty;
	char sym[32];
	snprintf(sym, sizeof sym, "tbc.sm.%s", name);
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, sym);
	if (fn) return fn;
	fn = LLVMAddFunction(c->mod, sym, fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	const char *attrs[] = {"nounwind", "willreturn", "nosync", "nofree", "memory"};
	for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
		unsigned kind = LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i]));
		/* memory(none): 0 is "accesses nothing" */
		LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, 0));
	}
	sm m = {c, LLVMCreateBuilderInContext(c->ctx)};
	LLVMPositionBuilderAtEnd(m.b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	LLVMValueRef y = functions[found].arity == 2 ? LLVMGetParam(fn, 1) : NULL;
	LLVMBuildRet(m.b, functions[found].emit(&m, LLVMGetParam(fn, 0), y));
	LLVMDisposeBuilder(m.b);
	return fn;
}

static LLVMValueRef call1(sm *m, const char *fn, LLVMValueRef x) {
	LLVMTypeRef fty;
	LLVMValueRef f = function(m->c, fn, &fty);
	return LLVMBuildCall2(m->b, fty, f, &x, 1, "");
}

static LLVMValueRef call2(sm *m, const char *fn, LLVMValueRef x, LLVMValueRef y) {
	LLVMTypeRef fty;
	LLVMValueRef f = function(m->c, fn, &fty);
	LLVMValueRef args[2] = {x, y};
	return LLVMBuildCall2(m->b, fty, f, args, 2, "");
}

LLVMValueRef llvm_soft_math(llvm_cx *c, const char *fn, LLVMValueRef x, LLVMValueRef y) {
	LLVMTypeRef fty;
	LLVMValueRef f = function(c, fn, &fty);
	if (!f) {
		llvm_fail(c, TBC_ERR_UNSUPPORTED, "%s has no implementation on this target", fn);
		return NULL;
	}
	bool f32 = LLVMTypeOf(x) == c->f32;
	LLVMValueRef args[2] = {x, y};
	if (f32) {
		args[0] = LLVMBuildFPExt(c->b, x, c->f64, "");
		if (y) args[1] = LLVMBuildFPExt(c->b, y, c->f64, "");
	}
	LLVMValueRef r = LLVMBuildCall2(c->b, fty, f, args, y ? 2 : 1, "");
	return f32 ? LLVMBuildFPTrunc(c->b, r, c->f32, "") : r;
}
