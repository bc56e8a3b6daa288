/* Narrow floats in the LLVM backends: f16, bf16, the float8 variants and
 * f4e2m1 are held as their bit patterns (i16 / i8) and converted to and from
 * f32 / f64 with integer and exact float operations, never libcalls (x86
 * without F16C would call compiler-rt's __truncsfhf2, which generated code
 * may not assume, and a GPU has no such library), so the loop vectorizer
 * widens them and every target converts alike.
 *
 * Every conversion computes what ir/dtype.c computes (the evaluator and the
 * interpreter use it): decoding is exact; encoding rounds to nearest even
 * once, from the source value (an f32 or f64; integers go through f64 and
 * bf16 / e8m0 through f32, as tbc_store_* do); f16 overflows to infinity,
 * float8 and f4e2m1 saturate (kernel IR casts to float8 saturate); NaN keeps
 * its sign where the format has one.  The formats' parameters are ir/dtype.c's
 * table; the largest code is found by encoding the largest value there.
 *
 * Where the CPU converts f16 itself (llvm_cx.f16_hw: x86 with F16C,
 * AArch64), f16 <-> f32 goes through LLVM's half type, one instruction per
 * vector, with the NaNs made the ones the integer code makes (the hardware
 * keeps a NaN's payload): the same bits either way, checked for every code
 * by test_codegen's narrow-float tests. */
#include <math.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

typedef enum { NAN_SIGNED, NAN_0X80, NAN_NONE_E2M1 } nan_rule;

typedef struct fmt {
	int ebits, mbits, bias, emin;
	double max;
	bool has_inf;
	nan_rule nan;
	unsigned nan_code, inf_code;
	bool saturate;
} fmt;

/* The same table as ir/dtype.c (kept in sync by the conversion tests). */
static bool narrow_fmt(tbc_dtype dt, fmt *f) {
	switch (dt) {
	case TBC_DT_F16: *f = (fmt){5, 10, 15, -14, 65504.0, true, NAN_SIGNED, 0x7e00, 0x7c00, false}; return true;
	case TBC_DT_F8E4M3FN: *f = (fmt){4, 3, 7, -6, 448.0, false, NAN_SIGNED, 0x7f, 0, true}; return true;
	case TBC_DT_F8E4M3FNUZ: *f = (fmt){4, 3, 8, -7, 240.0, false, NAN_0X80, 0x80, 0, true}; return true;
	case TBC_DT_F8E5M2: *f = (fmt){5, 2, 15, -14, 57344.0, true, NAN_SIGNED, 0x7e, 0x7c, true}; return true;
	case TBC_DT_F8E5M2FNUZ: *f = (fmt){5, 2, 16, -15, 57344.0, false, NAN_0X80, 0x80, 0, true}; return true;
	case TBC_DT_F4E2M1: *f = (fmt){2, 1, 1, 0, 6.0, false, NAN_NONE_E2M1, 0, 0, true}; return true;
	default: return false;
	}
}

static unsigned max_code(tbc_dtype dt, const fmt *f) {
	uint16_t bits = 0;
	tbc_store_f64(dt, &bits, 0, f->max);
	return tbc_dtype_size(dt) == 1 ? (unsigned)(bits & 0xff) : bits;
}

static LLVMValueRef u32c(llvm_cx *c, unsigned v) { return LLVMConstInt(c->i32, v, 0); }

static LLVMValueRef intrinsic1(llvm_cx *c, const char *name, LLVMValueRef x) {
	LLVMTypeRef t = LLVMTypeOf(x);
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &t, 1);
	return LLVMBuildCall2(c->b, LLVMIntrinsicGetType(c->ctx, id, &t, 1), fn, &x, 1, "");
}

/* ---- Decoding: bits -> f32 ------------------------------------------------*/
/* NaN x made sign | quiet (f32 0x7fc00000, f16 0x7e00, as bits of width it). */
static LLVMValueRef canonical_nan(llvm_cx *c, LLVMValueRef x, LLVMValueRef xbits, LLVMTypeRef it, unsigned sign,
				  unsigned quiet) {
	LLVMBuilderRef b = c->b;
	LLVMValueRef nan = LLVMBuildOr(b, LLVMBuildAnd(b, xbits, LLVMConstInt(it, sign, 0), ""), LLVMConstInt(it, quiet, 0), "");
	return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), nan, xbits, "");
}

/* As llvm_narrow_to_f32, but a NaN may come out with any payload and sign
 * (KIR_CAST_ANY_NAN): f16 with the hardware's conversion alone, bf16 by its
 * shift alone. */
LLVMValueRef llvm_narrow_to_f32_any_nan(llvm_cx *c, tbc_dtype t, LLVMValueRef bits) {
	LLVMBuilderRef b = c->b;
	if (t == TBC_DT_F16 && c->f16_hw)
		return LLVMBuildFPExt(b, LLVMBuildBitCast(b, bits, LLVMHalfTypeInContext(c->ctx), ""), c->f32, "");
	if (t == TBC_DT_BF16)
		return LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildZExt(b, bits, c->i32, ""), u32c(c, 16), ""), c->f32, "");
	return llvm_narrow_to_f32(c, t, bits);
}

LLVMValueRef llvm_narrow_to_f32(llvm_cx *c, tbc_dtype t, LLVMValueRef bits) {
	LLVMBuilderRef b = c->b;
	if (t == TBC_DT_F16 && c->f16_hw) {
		LLVMValueRef h = LLVMBuildBitCast(b, bits, LLVMHalfTypeInContext(c->ctx), "");
		LLVMValueRef v = LLVMBuildFPExt(b, h, c->f32, "");
		LLVMValueRef vb = canonical_nan(c, v, LLVMBuildBitCast(b, v, c->i32, ""), c->i32, 0x80000000u, 0x7fc00000u);
		return LLVMBuildBitCast(b, vb, c->f32, "");
	}
	LLVMValueRef u = LLVMBuildZExt(b, bits, c->i32, "");
	if (t == TBC_DT_BF16) {
		/* The f32 with the same top bits; a signalling NaN comes out quiet,
		 * as from tbc_load_f64 (through double). */
		LLVMValueRef v = LLVMBuildShl(b, u, u32c(c, 16), "");
		LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntUGT, LLVMBuildAnd(b, v, u32c(c, 0x7fffffff), ""), u32c(c, 0x7f800000), "");
		v = LLVMBuildSelect(b, nan, LLVMBuildOr(b, v, u32c(c, 0x00400000), ""), v, "");
		return LLVMBuildBitCast(b, v, c->f32, "");
	}
	if (t == TBC_DT_F8E8M0) {
		/* 2^(u - 127); code 0 is 2^-127, an f32 subnormal; 0xff is NaN. */
		LLVMValueRef v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, u, u32c(c, 0), ""), u32c(c, 0x00400000),
						 LLVMBuildShl(b, u, u32c(c, 23), ""), "");
		v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, u, u32c(c, 0xff), ""), u32c(c, 0x7fc00000), v, "");
		return LLVMBuildBitCast(b, v, c->f32, "");
	}
	fmt f;
	if (!narrow_fmt(t, &f)) {
		llvm_fail(c, TBC_ERR_INTERNAL, "no decoding of %s", tbc_dtype_name(t));
		return NULL;
	}
	if (t == TBC_DT_F4E2M1) u = LLVMBuildAnd(b, u, u32c(c, 0xf), "");
	unsigned signbit = 1u << (f.ebits + f.mbits);
	LLVMValueRef mag = LLVMBuildAnd(b, u, u32c(c, signbit - 1), "");
	LLVMValueRef e = LLVMBuildLShr(b, mag, u32c(c, (unsigned)f.mbits), "");
	LLVMValueRef m = LLVMBuildAnd(b, mag, u32c(c, (1u << f.mbits) - 1), "");
	/* Normal: the f32 with exponent e - bias and the mantissa moved up. */
	LLVMValueRef nbits = LLVMBuildOr(
		b, LLVMBuildShl(b, LLVMBuildAdd(b, e, u32c(c, (unsigned)(127 - f.bias)), ""), u32c(c, 23), ""),
		LLVMBuildShl(b, m, u32c(c, (unsigned)(23 - f.mbits)), ""), "");
	LLVMValueRef normal = LLVMBuildBitCast(b, nbits, c->f32, "");
	/* Subnormal: m * 2^(emin - mbits), exact. */
	LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, m, c->f32, ""),
					 LLVMConstReal(c->f32, ldexp(1.0, f.emin - f.mbits)), "");
	LLVMValueRef v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, u32c(c, 0), ""), sub, normal, "");
	LLVMValueRef qnan = LLVMBuildBitCast(b, u32c(c, 0x7fc00000), c->f32, "");
	if (f.nan == NAN_SIGNED) {
		LLVMValueRef special;
		if (f.has_inf) {
			LLVMValueRef inf = LLVMConstReal(c->f32, INFINITY);
			LLVMValueRef naninf = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntNE, m, u32c(c, 0), ""), qnan, inf, "");
			special = LLVMBuildICmp(b, LLVMIntEQ, e, u32c(c, (1u << f.ebits) - 1), "");
			v = LLVMBuildSelect(b, special, naninf, v, "");
		} else {
			special = LLVMBuildICmp(b, LLVMIntEQ, mag, u32c(c, f.nan_code), "");
			v = LLVMBuildSelect(b, special, qnan, v, "");
		}
	}
	LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, u, u32c(c, signbit), ""), u32c(c, 0), "");
	v = LLVMBuildSelect(b, neg, LLVMBuildFNeg(b, v, ""), v, "");
	if (f.nan == NAN_0X80) v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, u, u32c(c, 0x80), ""), qnan, v, "");
	return v;
}

/* ---- Encoding: f32 / f64 -> bits ------------------------------------------*/
/* The sign bit of x (an f32 or f64) as an i1. */
static LLVMValueRef sign_of(llvm_cx *c, LLVMValueRef x) {
	LLVMBuilderRef b = c->b;
	bool dbl = LLVMTypeOf(x) == c->f64;
	LLVMValueRef bits = LLVMBuildBitCast(b, x, dbl ? c->i64 : c->i32, "");
	return LLVMBuildICmp(b, LLVMIntSLT, bits, LLVMConstInt(dbl ? c->i64 : c->i32, 0, 0), "");
}

static LLVMValueRef encode_bf16(llvm_cx *c, LLVMValueRef x) {
	LLVMBuilderRef b = c->b;
	if (LLVMTypeOf(x) == c->f64) x = LLVMBuildFPTrunc(b, x, c->f32, ""); /* through f32, as ml_dtypes */
	LLVMValueRef u = LLVMBuildBitCast(b, x, c->i32, "");
	LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, u32c(c, 16), ""), u32c(c, 1), "");
	LLVMValueRef r = LLVMBuildLShr(b, LLVMBuildAdd(b, LLVMBuildAdd(b, u, u32c(c, 0x7fff), ""), lsb, ""), u32c(c, 16), "");
	LLVMValueRef nan = LLVMBuildOr(b, LLVMBuildAnd(b, LLVMBuildLShr(b, u, u32c(c, 16), ""), u32c(c, 0x8000), ""),
				       u32c(c, 0x7fc0), "");
	r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), nan, r, "");
	return LLVMBuildTrunc(b, r, c->i16, "");
}

/* tbc_f32_to_e8m0, rounding up. */
static LLVMValueRef encode_e8m0(llvm_cx *c, LLVMValueRef x, bool saturate) {
	LLVMBuilderRef b = c->b;
	if (LLVMTypeOf(x) == c->f64) x = LLVMBuildFPTrunc(b, x, c->f32, "");
	LLVMValueRef u = LLVMBuildBitCast(b, x, c->i32, "");
	LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, u, u32c(c, 23), ""), u32c(c, 0xff), "");
	LLVMValueRef frac = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, u, u32c(c, 0x7fffff), ""), u32c(c, 0), "");
	LLVMValueRef up = saturate ? LLVMBuildAnd(b, frac, LLVMBuildICmp(b, LLVMIntNE, e, u32c(c, 0xfe), ""), "") : frac;
	LLVMValueRef r = LLVMBuildAdd(b, e, LLVMBuildZExt(b, up, c->i32, ""), "");
	LLVMValueRef is_inf = LLVMBuildFCmp(b, LLVMRealOEQ, intrinsic1(c, "llvm.fabs", x), LLVMConstReal(c->f32, INFINITY), "");
	r = LLVMBuildSelect(b, is_inf, u32c(c, saturate ? 0xfe : 0xff), r, "");
	r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), u32c(c, 0xff), r, "");
	return LLVMBuildTrunc(b, r, c->i8, "");
}

LLVMValueRef llvm_float_to_narrow(llvm_cx *c, tbc_dtype t, LLVMValueRef x, bool saturate) {
	LLVMBuilderRef b = c->b;
	if (t == TBC_DT_BF16) return encode_bf16(c, x);
	if (t == TBC_DT_F8E8M0) return encode_e8m0(c, x, saturate);
	fmt f;
	if (!narrow_fmt(t, &f)) {
		llvm_fail(c, TBC_ERR_INTERNAL, "no encoding of %s", tbc_dtype_name(t));
		return NULL;
	}
	if (tbc_dtype_bits(t) == 8) f.saturate = saturate; /* f16 never saturates, f4e2m1 always */
	LLVMTypeRef ft = LLVMTypeOf(x);
	if (t == TBC_DT_F16 && c->f16_hw && ft == c->f32) { /* from f64 it would round twice */
		LLVMValueRef h = LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, x, LLVMHalfTypeInContext(c->ctx), ""), c->i16, "");
		return canonical_nan(c, x, h, c->i16, 0x8000u, 0x7e00u);
	}
	bool dbl = ft == c->f64;
	LLVMTypeRef it = dbl ? c->i64 : c->i32;
	int fbits = dbl ? 52 : 23, fbias = dbl ? 1023 : 127;
	LLVMValueRef neg = sign_of(c, x);
	LLVMValueRef a = intrinsic1(c, "llvm.fabs", x);
	LLVMValueRef is_nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	LLVMValueRef is_inf = LLVMBuildFCmp(b, LLVMRealOEQ, a, LLVMConstReal(ft, INFINITY), "");
	/* Finite values only below (NaN and infinity are chosen at the end). */
	a = LLVMBuildSelect(b, LLVMBuildOr(b, is_nan, is_inf, ""), LLVMConstReal(ft, 0.0), a, "");
	/* exp = max(floor(log2 a), emin) from the exponent field. */
	LLVMValueRef field = LLVMBuildLShr(b, LLVMBuildBitCast(b, a, it, ""), LLVMConstInt(it, (unsigned)fbits, 0), "");
	LLVMValueRef ue = LLVMBuildSub(b, LLVMBuildTrunc(b, field, c->i32, ""), u32c(c, (unsigned)fbias), "");
	LLVMValueRef emin = LLVMConstInt(c->i32, (unsigned long long)(int64_t)f.emin, 1);
	LLVMValueRef exp = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, ue, emin, ""), emin, ue, "");
	/* 2^(mbits - exp), built from its exponent field: a power of two, so
	 * a * scale is exact and roundeven rounds once. */
	LLVMValueRef sfield = LLVMBuildAdd(b, LLVMBuildSub(b, u32c(c, (unsigned)f.mbits), exp, ""), u32c(c, (unsigned)fbias), "");
	LLVMValueRef scale = LLVMBuildBitCast(
		b, LLVMBuildShl(b, dbl ? LLVMBuildZExt(b, sfield, c->i64, "") : sfield, LLVMConstInt(it, (unsigned)fbits, 0), ""),
		ft, "");
	LLVMValueRef mi = intrinsic1(c, "llvm.roundeven", LLVMBuildFMul(b, a, scale, ""));
	/* code = ((exp - emin) << mbits) + mi: continuous from subnormals through
	 * a rounding carry into the next binade (emin + bias == 1 in every format). */
	LLVMValueRef code = LLVMBuildAdd(b, LLVMBuildShl(b, LLVMBuildSub(b, exp, emin, ""), u32c(c, (unsigned)f.mbits), ""),
					 LLVMBuildFPToUI(b, mi, c->i32, ""), "");
	unsigned sbit = 1u << (f.ebits + f.mbits), maxc = max_code(t, &f);
	LLVMValueRef sign = LLVMBuildSelect(b, neg, u32c(c, sbit), u32c(c, 0), "");
	unsigned over_pos, nan_pos, nan_neg;
	if (f.saturate || f.nan == NAN_NONE_E2M1) over_pos = maxc;
	else if (f.has_inf) over_pos = f.inf_code;
	else over_pos = f.nan == NAN_0X80 ? 0x80 : f.nan_code;
	LLVMValueRef over = f.nan == NAN_0X80 && over_pos == 0x80 ? u32c(c, 0x80) : LLVMBuildOr(b, sign, u32c(c, over_pos), "");
	switch (f.nan) {
	case NAN_SIGNED: nan_pos = f.nan_code, nan_neg = sbit | f.nan_code; break;
	case NAN_0X80: nan_pos = nan_neg = 0x80; break;
	default: nan_pos = 0x8, nan_neg = 0x0; break;
	}
	LLVMValueRef r = LLVMBuildOr(b, sign, code, "");
	if (f.nan == NAN_0X80) /* no negative zero */
		r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, code, u32c(c, 0), ""), u32c(c, 0), r, "");
	r = LLVMBuildSelect(b, LLVMBuildOr(b, is_inf, LLVMBuildICmp(b, LLVMIntUGT, code, u32c(c, maxc), ""), ""), over, r, "");
	r = LLVMBuildSelect(b, is_nan, LLVMBuildSelect(b, neg, u32c(c, nan_neg), u32c(c, nan_pos), ""), r, "");
	return LLVMBuildTrunc(b, r, tbc_dtype_size(t) == 2 ? c->i16 : c->i8, "");
}

LLVMValueRef llvm_narrow_const(llvm_cx *c, tbc_dtype t, double v) {
	uint16_t bits = 0;
	tbc_store_f64(t, &bits, 0, v);
	if (tbc_dtype_size(t) == 1) return LLVMConstInt(c->i8, bits & 0xff, 0);
	return LLVMConstInt(c->i16, bits, 0);
}
