/* Vectorizable f32 math: exp, log, tanh and erf as straight-line LLVM IR
 * (range reduction, a polynomial, selects for the special values) in
 * internal always-inline functions, so the loop vectorizer widens loops
 * that use them; a libm call (expf) would keep a loop scalar, and a GPU
 * target has no libm at all.
 *
 * Accuracy against the correctly rounded result, measured over dense grids
 * of f32 inputs (numpy, in f32 arithmetic without fused multiply-add, as
 * emitted here): exp <= 1 ulp, log <= 1 ulp, tanh <= 1.3 ulp, erf <= 2.4 ulp.
 * exp and log are Cephes' expf and logf (Cody-Waite reduction, minimax
 * polynomials); tanh is Cephes' tanhf below 0.625 and 1 - 2 / (exp(2|x|) + 1)
 * above; erf is x * P(x^2) below 1 and a polynomial per unit interval on
 * [1, 4) (least-squares fits, coefficients chosen per lane by selects), 1
 * beyond.  NaN propagates; infinities and zeros give the limits (log of a
 * negative number is NaN).  f64 keeps LLVM's intrinsics and libm where the
 * target has libm (llvm_hooks.libm). */
#include <math.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

typedef struct mb {
	llvm_cx *c;
	LLVMBuilderRef b;
} mb;

static LLVMValueRef K(mb *m, double v) { return LLVMConstReal(m->c->f32, v); }
static LLVMValueRef I(mb *m, unsigned v) { return LLVMConstInt(m->c->i32, v, 0); }
static LLVMValueRef mul(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef add(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef sel(mb *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
	return LLVMBuildSelect(m->b, c, a, b, "");
}
static LLVMValueRef lt(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, LLVMRealOLT, a, b, ""); }
static LLVMValueRef isnan_(mb *m, LLVMValueRef a) { return LLVMBuildFCmp(m->b, LLVMRealUNO, a, a, ""); }

static LLVMValueRef intrinsic(mb *m, const char *name, LLVMValueRef *args, unsigned n) {
	LLVMTypeRef t = m->c->f32;
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->c->mod, id, &t, 1);
	return LLVMBuildCall2(m->b, LLVMIntrinsicGetType(m->c->ctx, id, &t, 1), fn, args, n, "");
}
static LLVMValueRef fabs_(mb *m, LLVMValueRef x) { return intrinsic(m, "llvm.fabs", &x, 1); }
static LLVMValueRef copysign_(mb *m, LLVMValueRef x, LLVMValueRef s) {
	LLVMValueRef a[2] = {x, s};
	return intrinsic(m, "llvm.copysign", a, 2);
}

/* Horner: ((c[0] x + c[1]) x + ...) + c[n-1]. */
static LLVMValueRef horner(mb *m, const double *c, int n, LLVMValueRef x) {
	LLVMValueRef y = K(m, c[0]);
	for (int i = 1; i < n; i++) y = add(m, mul(m, y, x), K(m, c[i]));
	return y;
}

/* ---- exp ----------------------------------------------------------------- */
static LLVMValueRef emit_exp(mb *m, LLVMValueRef x) {
	static const double P[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
				   4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
	/* Past these the result is infinite or zero anyway; the clamp keeps n
	 * where the two-step scaling below is exact. */
	LLVMValueRef xc = sel(m, lt(m, x, K(m, -104.0)), K(m, -104.0), x);
	xc = sel(m, lt(m, K(m, 89.0), xc), K(m, 89.0), xc);
	LLVMValueRef t = mul(m, xc, K(m, 1.44269504088896341));
	LLVMValueRef n = intrinsic(m, "llvm.roundeven", &t, 1);
	LLVMValueRef r = sub(m, xc, mul(m, n, K(m, 0.693359375)));
	r = sub(m, r, mul(m, n, K(m, -2.12194440e-4)));
	LLVMValueRef z = mul(m, r, r);
	LLVMValueRef y = add(m, add(m, mul(m, horner(m, P, 6, r), z), r), K(m, 1.0));
	/* y * 2^n, y in [0.7, 1.42), n in [-150, 128], with no subnormal
	 * operand or result in any lane: Intel cores take a microcode assist
	 * of a hundred cycles or more for each, and a causal softmax's masked
	 * half is all exp(-huge) (GPT's prefill spent a fifth of its time
	 * there; docs/performance.md).  In integer arithmetic on y's bits: n
	 * added to the exponent field is y 2^n exactly where that is a normal
	 * float (the field lands in [1, 254]); at 255 or more it is an
	 * overflow, and the bits are clamped to infinity's.  Below the normal
	 * range (bits under 2^23 as a signed integer: a field of 0, or wrapped
	 * below it) the result is k 2^-149 with k = y 2^(n + 149) rounded to
	 * an integer: p = y 2^(n + 149) is a normal float (the field plus 149,
	 * n + 149 in [-1, 23]) below 2^23 (at n = -126 only y < 1 lands
	 * here), so p + 2^23 rounds it to nearest even with an ulp of 1, and
	 * that sum's bits less 2^23's are k -- which as float bits is the
	 * subnormal (or, at k = 2^23, the least normal): the one rounding the
	 * multiplication makes.  Other lanes add 0 instead of p, so no float
	 * operation sees their wrapped bits.  About as many operations as
	 * two multiplications by 2^(n / 2) (how this was done before). */
	LLVMBuilderRef b = m->b;
	LLVMTypeRef i32 = m->c->i32;
	LLVMValueRef ni = LLVMBuildFPToSI(b, n, i32, "");
	LLVMValueRef bits = LLVMBuildAdd(b, LLVMBuildBitCast(b, y, i32, ""), LLVMBuildShl(b, ni, I(m, 23), ""), "");
	bits = sel(m, LLVMBuildICmp(b, LLVMIntSGT, bits, I(m, 0x7f800000), ""), I(m, 0x7f800000), bits);
	LLVMValueRef tiny = LLVMBuildICmp(b, LLVMIntSLT, bits, I(m, 0x00800000), "");
	LLVMValueRef p = LLVMBuildBitCast(b, sel(m, tiny, LLVMBuildAdd(b, bits, I(m, 149u << 23), ""), I(m, 0)), m->c->f32, "");
	LLVMValueRef k = LLVMBuildSub(b, LLVMBuildBitCast(b, add(m, p, K(m, 0x1p23)), i32, ""), I(m, 0x4b000000), "");
	y = LLVMBuildBitCast(b, sel(m, tiny, k, bits), m->c->f32, "");
	return sel(m, isnan_(m, x), x, y);
}

/* ---- log ----------------------------------------------------------------- */
static LLVMValueRef emit_log(mb *m, LLVMValueRef x) {
	static const double P[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
				   -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
				   2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
	LLVMBuilderRef b = m->b;
	llvm_cx *c = m->c;
	/* Subnormals: scale into the normal range first. */
	LLVMValueRef sub_n = lt(m, x, K(m, 0x1p-126));
	LLVMValueRef xs = sel(m, sub_n, mul(m, x, K(m, 0x1p23)), x);
	LLVMValueRef bits = LLVMBuildBitCast(b, xs, c->i32, "");
	/* x = f * 2^e with f in [0.5, 1) */
	LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAnd(b, LLVMBuildLShr(b, bits, I(m, 23), ""), I(m, 0xff), ""), I(m, 126), "");
	e = LLVMBuildSub(b, e, sel(m, sub_n, I(m, 23), I(m, 0)), "");
	LLVMValueRef f = LLVMBuildBitCast(b, LLVMBuildOr(b, LLVMBuildAnd(b, bits, I(m, 0x007fffff), ""), I(m, 0x3f000000), ""),
					  c->f32, "");
	/* f below sqrt(1/2): use 2f - 1 and e - 1, so the argument is in
	 * [sqrt(1/2) - 1, sqrt(2) - 1). */
	LLVMValueRef lo = lt(m, f, K(m, 0.707106781186547524));
	e = LLVMBuildSub(b, e, sel(m, lo, I(m, 1), I(m, 0)), "");
	LLVMValueRef u = sub(m, sel(m, lo, add(m, f, f), f), K(m, 1.0));
	LLVMValueRef ef = LLVMBuildSIToFP(b, e, c->f32, "");
	LLVMValueRef z = mul(m, u, u);
	LLVMValueRef y = mul(m, mul(m, horner(m, P, 9, u), u), z);
	y = add(m, y, mul(m, ef, K(m, -2.12194440e-4)));
	y = sub(m, y, mul(m, K(m, 0.5), z));
	LLVMValueRef r = add(m, add(m, u, y), mul(m, ef, K(m, 0.693359375)));
	r = sel(m, LLVMBuildFCmp(b, LLVMRealOEQ, x, K(m, INFINITY), ""), K(m, INFINITY), r);
	r = sel(m, LLVMBuildFCmp(b, LLVMRealOEQ, x, K(m, 0.0), ""), K(m, -INFINITY), r);
	r = sel(m, lt(m, x, K(m, 0.0)), K(m, NAN), r);
	return sel(m, isnan_(m, x), x, r);
}

/* ---- tanh ---------------------------------------------------------------- */
static LLVMValueRef emit_tanh(mb *m, LLVMValueRef x) {
	static const double P[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
				   -3.33332819422E-1};
	LLVMValueRef a = fabs_(m, x);
	LLVMValueRef z = mul(m, x, x);
	LLVMValueRef small = add(m, mul(m, mul(m, horner(m, P, 5, z), z), x), x);
	LLVMValueRef t = emit_exp(m, add(m, a, a));
	LLVMValueRef big = sub(m, K(m, 1.0), LLVMBuildFDiv(m->b, K(m, 2.0), add(m, t, K(m, 1.0)), ""));
	return copysign_(m, sel(m, lt(m, a, K(m, 0.625)), small, big), x);
}

/* ---- erf ----------------------------------------------------------------- */
static LLVMValueRef emit_erf(mb *m, LLVMValueRef x) {
	/* erf(x) / x as a polynomial in x^2 on [0, 1]. */
	static const double S[] = {7.882500358e-05,  -8.018859080e-04, 5.189312622e-03, -2.685432881e-02,
				   1.128359735e-01,  -3.761262596e-01, 1.128379107e+00};
	/* erf(mid + u) for |u| <= 1/2 on [1, 2), [2, 3), [3, 4). */
	static const double Q[3][10] = {
		{1.540404046e-03, -2.401931444e-03, -4.701159894e-03, 1.933342963e-02, -1.487084292e-02, -4.459944740e-02,
		 1.387522072e-01, -1.783954203e-01, 1.189302877e-01, 9.661051631e-01},
		{-2.453946800e-04, 3.063140030e-04, 5.410769954e-04, -2.808213001e-03, 6.117499899e-03, -8.621518500e-03,
		 8.350082673e-03, -5.445736926e-03, 2.178284340e-03, 9.995930195e-01},
		{0.000000000e+00, -3.703756374e-05, 6.689117436e-05, -7.714565436e-05, 8.048125164e-05, -6.777083763e-05,
		 4.240918497e-05, -1.889634405e-05, 5.397293990e-06, 9.999992847e-01},
	};
	LLVMValueRef a = fabs_(m, x);
	LLVMValueRef small = mul(m, a, horner(m, S, 7, mul(m, a, a)));
	LLVMValueRef in1 = lt(m, a, K(m, 2.0)), in2 = lt(m, a, K(m, 3.0));
	LLVMValueRef mid = sel(m, in1, K(m, 1.5), sel(m, in2, K(m, 2.5), K(m, 3.5)));
	LLVMValueRef u = sub(m, a, mid);
	LLVMValueRef y = NULL;
	for (int i = 0; i < 10; i++) {
		LLVMValueRef ci = sel(m, in1, K(m, Q[0][i]), sel(m, in2, K(m, Q[1][i]), K(m, Q[2][i])));
		y = y ? add(m, mul(m, y, u), ci) : ci;
	}
	LLVMValueRef r = sel(m, lt(m, a, K(m, 1.0)), small, y);
	r = sel(m, LLVMBuildFCmp(m->b, LLVMRealOGE, a, K(m, 4.0), ""), K(m, 1.0), r);
	return copysign_(m, r, x);
}

/* The internal function "name" computing op, made once per module. */
LLVMValueRef llvm_math_f32(llvm_cx *c, kir_unop op, LLVMValueRef x) {
	const char *name;
	LLVMValueRef (*emit)(mb *, LLVMValueRef);
	switch (op) {
	case KIR_EXP: name = "tbc.expf", emit = emit_exp; break;
	case KIR_LOG: name = "tbc.logf", emit = emit_log; break;
	case KIR_TANH: name = "tbc.tanhf", emit = emit_tanh; break;
	case KIR_ERF: name = "tbc.erff", emit = emit_erf; break;
	default: return NULL;
	}
	LLVMTypeRef fty = LLVMFunctionType(c->f32, &c->f32, 1, 0);
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
	if (!fn) {
		fn = LLVMAddFunction(c->mod, name, fty);
		LLVMSetLinkage(fn, LLVMInternalLinkage);
		const char *attrs[] = {"alwaysinline", "nounwind", "willreturn", "nosync", "nofree"};
		for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++)
			LLVMAddAttributeAtIndex(
				fn, LLVMAttributeFunctionIndex,
				LLVMCreateEnumAttribute(c->ctx, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
		mb m = {c, LLVMCreateBuilderInContext(c->ctx)};
		LLVMPositionBuilderAtEnd(m.b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
		LLVMBuildRet(m.b, emit(&m, LLVMGetParam(fn, 0)));
		LLVMDisposeBuilder(m.b);
	}
	return LLVMBuildCall2(c->b, fty, fn, &x, 1, "");
}
