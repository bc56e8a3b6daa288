/* What every kernel tbc prints as OpenCL C 1.2 relies on: the scalar
 * semantics of kernel IR where C leaves a case undefined (codegen/kir/kir_sem.h)
 * and the narrow float formats (ir/dtype.c), written the same way so every
 * target computes the same values.  Narrow floats travel as their bits
 * (ushort, uchar) and are decoded to and encoded from tbc_wide: double where
 * the device has cl_khr_fp64, float otherwise.  Every narrow format's value
 * is a float, and a float rounds to a narrow format in float arithmetic
 * exactly as in double, so a model without float64 tensors computes the same
 * bits either way (docs/opencl.md, "Devices without fp64").  A kernel that
 * computes float64 itself says so with #error where fp64 is missing.
 * TBC_NO_FP64 (a build option) takes the float path on any device: the tests
 * use it to run that path on PoCL. */
#if defined(cl_khr_fp64) && !defined(TBC_NO_FP64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define TBC_HAS_FP64 1
typedef double tbc_wide;
#define TBC_NAN as_double(0x7ff8000000000000UL)
#else
typedef float tbc_wide;
#define TBC_NAN as_float(0x7fc00000u)
#endif
#pragma OPENCL FP_CONTRACT OFF

/* The quiet NaN C's NAN is (OpenCL's NAN may carry another payload). */
#define TBC_NANF as_float(0x7fc00000u)

/* ---- Integers --------------------------------------------------------------*/
inline long tbc_sdiv(long a, long b) { return b == 0 ? 0 : b == -1 ? (long)(0UL - (ulong)a) : a / b; }
inline ulong tbc_udiv(ulong a, ulong b) { return b ? a / b : 0; }
inline long tbc_srem(long a, long b) { return b == 0 || b == -1 ? 0 : a % b; }
inline ulong tbc_urem(ulong a, ulong b) { return b ? a % b : 0; }
inline long tbc_floordiv(long a, long b) {
	long q = tbc_sdiv(a, b), r = tbc_srem(a, b);
	return r != 0 && ((r < 0) != (b < 0)) ? q - 1 : q;
}
inline long tbc_floormod(long a, long b) {
	long r = tbc_srem(a, b);
	return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
inline long tbc_ipow(long base, long e) {
	if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
	ulong r = 1, b = (ulong)base;
	while (e) {
		if (e & 1) r *= b;
		b *= b;
		e >>= 1;
	}
	return (long)r;
}
inline ulong tbc_upow(ulong b, ulong e) {
	ulong r = 1;
	while (e) {
		if (e & 1) r *= b;
		b *= b;
		e >>= 1;
	}
	return r;
}
inline long tbc_shl(long a, long s, int is_unsigned, int bits) {
	if (is_unsigned ? (ulong)s >= (ulong)bits : (s < 0 || s >= bits)) return 0;
	return (long)((ulong)a << s);
}
inline long tbc_shr(long a, long s, int is_unsigned, int bits) {
	if (is_unsigned ? (ulong)s >= (ulong)bits : (s < 0 || s >= bits)) return !is_unsigned && a < 0 ? -1 : 0;
	if (is_unsigned) return (long)((ulong)a >> s);
	return a < 0 ? ~(~a >> s) : a >> s;
}
/* v wrapped to a signed or unsigned field of `bits` bits (int4, int2). */
inline long tbc_wrap_s(long v, int bits) { return (long)((ulong)v << (64 - bits)) >> (64 - bits); }
inline long tbc_wrap_u(long v, int bits) { return (long)((ulong)v & ((1UL << bits) - 1)); }

inline long tbc_abs_i(long a) { return a < 0 ? (long)(0UL - (ulong)a) : a; }
inline long tbc_sign_i(long a) { return (a > 0) - (a < 0); }

/* Float to integer truncates; NaN is 0, out of range clamps to 64 bits. */
inline long tbc_f2i(tbc_wide d) {
	if (isnan(d)) return 0;
	if (d >= 9223372036854775808.0f) return 0x7fffffffffffffffL;
	if (d <= -9223372036854775808.0f) return (long)0x8000000000000000UL;
	return (long)d;
}
inline ulong tbc_f2u(tbc_wide d) {
	d = trunc(d);
	if (d >= 18446744073709551616.0f) return 0xffffffffffffffffUL;
	if (d >= 9223372036854775808.0f) return (ulong)d;
	return (ulong)tbc_f2i(d);
}

/* ---- Floats ----------------------------------------------------------------*/
/* min and max propagate NaN and order -0 below +0. */
#define TBC_MIN_MAX(T, SUFFIX, QNAN)                                    \
	inline T tbc_fmin##SUFFIX(T x, T y) {                           \
		if (isnan(x) || isnan(y)) return QNAN;                  \
		if (x == y) return signbit(x) ? x : y;                  \
		return x < y ? x : y;                                   \
	}                                                               \
	inline T tbc_fmax##SUFFIX(T x, T y) {                           \
		if (isnan(x) || isnan(y)) return QNAN;                  \
		if (x == y) return signbit(x) ? y : x;                  \
		return x > y ? x : y;                                   \
	}
TBC_MIN_MAX(float, f, TBC_NANF)
inline float tbc_signf(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x; }
#ifdef TBC_HAS_FP64
TBC_MIN_MAX(double, , TBC_NAN)
inline double tbc_sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }
#endif

/* ---- Narrow float formats (ir/dtype.c's fmt, encode and decode) ------------*/
#define TBC_NAN_SIGNED 0
#define TBC_NAN_0X80 1
#define TBC_NAN_NONE_E2M1 2
typedef struct tbc_fmt {
	int ebits, mbits, bias, emin;
	tbc_wide max;
	int has_inf, nan;
	uint nan_code, inf_code;
} tbc_fmt;

inline tbc_fmt tbc_format(int which) {
	tbc_fmt f;
	switch (which) {
	case 10: f = (tbc_fmt){5, 10, 15, -14, 65504.0f, 1, TBC_NAN_SIGNED, 0x7e00, 0x7c00}; break;
	case 16: f = (tbc_fmt){8, 7, 127, -126, 3.38953139e38f, 1, TBC_NAN_SIGNED, 0x7fc0, 0x7f80}; break;
	case 17: f = (tbc_fmt){4, 3, 7, -6, 448.0f, 0, TBC_NAN_SIGNED, 0x7f, 0}; break;
	case 18: f = (tbc_fmt){4, 3, 8, -7, 240.0f, 0, TBC_NAN_0X80, 0x80, 0}; break;
	case 19: f = (tbc_fmt){5, 2, 15, -14, 57344.0f, 1, TBC_NAN_SIGNED, 0x7e, 0x7c}; break;
	case 20: f = (tbc_fmt){5, 2, 16, -15, 57344.0f, 0, TBC_NAN_0X80, 0x80, 0}; break;
	default: f = (tbc_fmt){2, 1, 1, 0, 6.0f, 0, TBC_NAN_NONE_E2M1, 0, 0}; break; /* 23: float4e2m1 */
	}
	return f;
}

inline tbc_wide tbc_decode(int which, uint bits) {
	tbc_fmt f = tbc_format(which);
	uint signbit_ = 1u << (f.ebits + f.mbits);
	uint sign = bits & signbit_, mag = bits & (signbit_ - 1u);
	uint e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1u);
	uint emax_field = (1u << f.ebits) - 1u;
	if (f.nan == TBC_NAN_0X80 && bits == 0x80) return TBC_NAN;
	if (f.nan == TBC_NAN_SIGNED) {
		if (f.has_inf && e == emax_field) return m ? (sign ? -TBC_NAN : TBC_NAN) : (sign ? -INFINITY : INFINITY);
		if (!f.has_inf && mag == f.nan_code) return sign ? -TBC_NAN : TBC_NAN;
	}
	tbc_wide v = e == 0 ? ldexp((tbc_wide)m, f.emin - f.mbits) : ldexp((tbc_wide)(m | (1u << f.mbits)), (int)e - f.bias - f.mbits);
	return sign ? -v : v;
}

inline uint tbc_max_code(tbc_fmt f) {
	int e;
	tbc_wide fr = frexp(f.max, &e);
	uint mant = (uint)ldexp(fr * 2 - 1, f.mbits);
	return ((uint)(e - 1 + f.bias) << f.mbits) | mant;
}

inline uint tbc_overflow_code(tbc_fmt f, uint sign, int saturate) {
	if (saturate || f.nan == TBC_NAN_NONE_E2M1) return sign | tbc_max_code(f);
	if (f.has_inf) return sign | f.inf_code;
	return f.nan == TBC_NAN_0X80 ? 0x80 : (sign | f.nan_code);
}

inline uint tbc_encode(int which, tbc_wide x, int saturate) {
	tbc_fmt f = tbc_format(which);
	uint signbit_ = 1u << (f.ebits + f.mbits);
	if (isnan(x)) {
		if (f.nan == TBC_NAN_SIGNED) return (signbit(x) ? signbit_ : 0u) | f.nan_code;
		if (f.nan == TBC_NAN_0X80) return 0x80;
		return signbit(x) ? 0x0 : 0x8;
	}
	uint sign = signbit(x) ? signbit_ : 0u;
	tbc_wide a = fabs(x);
	if (isinf(a)) return tbc_overflow_code(f, sign, saturate);
	int e;
	(void)frexp(a, &e);
	int ex = e - 1 < f.emin ? f.emin : e - 1;
	tbc_wide q = ldexp((tbc_wide)1, ex - f.mbits);
	tbc_wide r = rint(a / q) * q;
	if (r > f.max) return tbc_overflow_code(f, sign, saturate);
	if (r == 0) return f.nan == TBC_NAN_0X80 ? 0u : sign;
	(void)frexp(r, &e);
	int ue = e - 1;
	uint code;
	if (ue < f.emin) code = (uint)ldexp(r, f.mbits - f.emin);
	else code = ((uint)(ue + f.bias) << f.mbits) | ((uint)ldexp(r, f.mbits - ue) - (1u << f.mbits));
	return sign | code;
}

inline tbc_wide tbc_from_bf16(ushort h) { return (tbc_wide)as_float((uint)h << 16); }
/* Through float32 first, as ml_dtypes converts a double to bfloat16, then
 * to nearest even on the bits (what tbc_encode computes, without its float
 * arithmetic near the subnormals a device may flush); NaN keeps its sign. */
inline ushort tbc_to_bf16(tbc_wide v) {
	float f = (float)v;
	uint b = as_uint(f);
	if (isnan(f)) return (ushort)(((b >> 16) & 0x8000u) | 0x7fc0u);
	return (ushort)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* float8e8m0: 2^(code - 127), 0xff NaN; encoded from the float32 bits, rounding up. */
inline tbc_wide tbc_from_e8m0(uchar v) { return v == 0xff ? TBC_NAN : ldexp((tbc_wide)1, (int)v - 127); }
inline uchar tbc_to_e8m0(tbc_wide d, int saturate) {
	float f = (float)d;
	uint bits = as_uint(f);
	uint exponent = (bits >> 23) & 0xff;
	if (isnan(f)) return 0xff;
	if (isinf(f)) return saturate ? 0xfe : 0xff;
	int round_up = (bits & 0x7fffff) != 0;
	if (round_up && saturate && exponent == 0xfe) round_up = 0;
	return (uchar)(exponent + (round_up ? 1u : 0u));
}

/* ---- Run-time errors -------------------------------------------------------*/
/* The first failed check wins: status[0] takes its number (1-based). */
inline void tbc_fail(__global int *status, int code) { atomic_cmpxchg(status, 0, code); }
