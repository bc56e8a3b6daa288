/* Element types: classification and the scalar conversions every kernel and
 * Cast rely on.  The conversions follow ONNX's Cast and its reference
 * implementation (numpy + ml_dtypes), which is what generates the conformance
 * data: floats round to nearest even, float8 saturates by default (the Cast
 * table), integers wrap to their width, bool is "not zero". */
#include "dtype.h"

#include <math.h>
#include <string.h>

enum kind { F, S, U, B, X };

static const struct {
	const char *name;
	unsigned char size, kind;
} dtypes[TBC_DT_COUNT] = {
	[TBC_DT_UNDEFINED] = {"undefined", 0, X},
#define TBC_DT(id, name, size, kind) [id] = {name, size, kind},
#include "dtype.def"
#undef TBC_DT
};

bool tbc_dtype_valid(int dt) { return dt > 0 && dt < TBC_DT_COUNT; }
bool tbc_dtype_supported(tbc_dtype dt) { return tbc_dtype_valid((int)dt) && dtypes[dt].kind != X; }
bool tbc_dtype_is_float(tbc_dtype dt) { return tbc_dtype_valid((int)dt) && dtypes[dt].kind == F; }
bool tbc_dtype_is_int(tbc_dtype dt) {
	return tbc_dtype_valid((int)dt) && (dtypes[dt].kind == S || dtypes[dt].kind == U);
}
bool tbc_dtype_is_signed(tbc_dtype dt) {
	return tbc_dtype_valid((int)dt) && (dtypes[dt].kind == S || dtypes[dt].kind == F);
}
bool tbc_dtype_is_unsigned(tbc_dtype dt) { return tbc_dtype_valid((int)dt) && dtypes[dt].kind == U; }
size_t tbc_dtype_size(tbc_dtype dt) { return tbc_dtype_valid((int)dt) ? dtypes[dt].size : 0; }
const char *tbc_dtype_name(tbc_dtype dt) { return tbc_dtype_valid((int)dt) ? dtypes[dt].name : "undefined"; }

int tbc_dtype_bits(tbc_dtype dt) {
	switch (dt) {
	case TBC_DT_I4:
	case TBC_DT_U4:
	case TBC_DT_F4E2M1: return 4;
	case TBC_DT_I2:
	case TBC_DT_U2: return 2;
	default: return (int)tbc_dtype_size(dt) * 8;
	}
}

tbc_dtype tbc_dtype_from_name(const char *name) {
	for (int i = 1; i < TBC_DT_COUNT; i++)
		if (dtypes[i].name && !strcmp(dtypes[i].name, name)) return (tbc_dtype)i;
	return TBC_DT_UNDEFINED;
}

/* ---- Narrow floats --------------------------------------------------------
 * One description per format.  Rounding is done on doubles (exact scaling by
 * powers of two, then nearbyint, which rounds half to even), encoding after.
 * Every value of float32 and float16 is a double, so rounding a double that
 * came from them rounds the original value once. */
typedef enum nan_rule {
	NAN_SIGNED,   /* NaN keeps its sign: f16, bf16, e4m3fn, e5m2 */
	NAN_0X80,     /* the one NaN is 0x80, no negative zero: the fnuz formats */
	NAN_NONE_E2M1 /* no NaN: ml_dtypes gives +NaN -> 0x8, -NaN -> 0x0 */
} nan_rule;

typedef struct fmt {
	int ebits, mbits, bias, emin; /* emin: exponent of the smallest normal */
	double max;                   /* largest finite value */
	bool has_inf;
	nan_rule nan;
	unsigned nan_code; /* positive quiet NaN (NAN_SIGNED) */
	unsigned inf_code; /* positive infinity (has_inf) */
} fmt;

static const fmt F16 = {5, 10, 15, -14, 65504.0, true, NAN_SIGNED, 0x7e00, 0x7c00};
static const fmt BF16 = {8, 7, 127, -126, 3.38953138925153547590470800371487866880e38, true, NAN_SIGNED, 0x7fc0, 0x7f80};
static const fmt E4M3FN = {4, 3, 7, -6, 448.0, false, NAN_SIGNED, 0x7f, 0};
static const fmt E4M3FNUZ = {4, 3, 8, -7, 240.0, false, NAN_0X80, 0x80, 0};
static const fmt E5M2 = {5, 2, 15, -14, 57344.0, true, NAN_SIGNED, 0x7e, 0x7c};
static const fmt E5M2FNUZ = {5, 2, 16, -15, 57344.0, false, NAN_0X80, 0x80, 0};
static const fmt E2M1 = {2, 1, 1, 0, 6.0, false, NAN_NONE_E2M1, 0, 0};

static const fmt *narrow_fmt(tbc_dtype dt) {
	switch (dt) {
	case TBC_DT_F16: return &F16;
	case TBC_DT_BF16: return &BF16;
	case TBC_DT_F8E4M3FN: return &E4M3FN;
	case TBC_DT_F8E4M3FNUZ: return &E4M3FNUZ;
	case TBC_DT_F8E5M2: return &E5M2;
	case TBC_DT_F8E5M2FNUZ: return &E5M2FNUZ;
	case TBC_DT_F4E2M1: return &E2M1;
	default: return NULL;
	}
}

static unsigned sign_bit(const fmt *f) { return 1u << (f->ebits + f->mbits); }

static double decode(const fmt *f, unsigned bits) {
	unsigned signbit = sign_bit(f);
	unsigned sign = bits & signbit, mag = bits & (signbit - 1u);
	unsigned e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1u);
	unsigned emax_field = (1u << f->ebits) - 1u;
	switch (f->nan) {
	case NAN_0X80:
		if (bits == 0x80) return NAN;
		break;
	case NAN_SIGNED:
		if (f->has_inf && e == emax_field) return m ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);
		if (!f->has_inf && mag == f->nan_code) return sign ? -NAN : NAN;
		break;
	case NAN_NONE_E2M1: break;
	}
	double v = e == 0 ? ldexp((double)m, f->emin - f->mbits)
			  : ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
	return sign ? -v : v;
}

static unsigned max_code(const fmt *f) {
	int e;
	double fr = frexp(f->max, &e); /* max = fr * 2^e, fr in [0.5, 1) */
	unsigned mant = (unsigned)ldexp(fr * 2.0 - 1.0, f->mbits);
	return ((unsigned)(e - 1 + f->bias) << f->mbits) | mant;
}

static unsigned nan_code(const fmt *f, bool negative) {
	switch (f->nan) {
	case NAN_SIGNED: return (negative ? sign_bit(f) : 0u) | f->nan_code;
	case NAN_0X80: return 0x80;
	case NAN_NONE_E2M1: return negative ? 0x0 : 0x8;
	}
	return 0;
}

/* What a value too large for the format becomes (the Cast tables). */
static unsigned overflow_code(const fmt *f, unsigned sign, bool saturate) {
	if (saturate || f->nan == NAN_NONE_E2M1) return sign | max_code(f);
	if (f->has_inf) return sign | f->inf_code;
	return f->nan == NAN_0X80 ? 0x80 : (sign | f->nan_code);
}

static unsigned encode(const fmt *f, double x, bool saturate) {
	if (isnan(x)) return nan_code(f, signbit(x));
	unsigned sign = signbit(x) ? sign_bit(f) : 0u;
	double a = fabs(x);
	if (isinf(a)) return overflow_code(f, sign, saturate);
	int e;
	(void)frexp(a, &e);
	int exp = e - 1 < f->emin ? f->emin : e - 1; /* subnormals share emin's spacing */
	double q = ldexp(1.0, exp - f->mbits);
	double r = nearbyint(a / q) * q;
	if (r > f->max) return overflow_code(f, sign, saturate);
	if (r == 0) return f->nan == NAN_0X80 ? 0u : sign;
	(void)frexp(r, &e);
	int ue = e - 1;
	unsigned code;
	if (ue < f->emin)
		code = (unsigned)ldexp(r, f->mbits - f->emin);
	else
		code = ((unsigned)(ue + f->bias) << f->mbits) | ((unsigned)ldexp(r, f->mbits - ue) - (1u << f->mbits));
	return sign | code;
}

float tbc_f16_to_f32(uint16_t h) { return (float)decode(&F16, h); }
uint16_t tbc_f64_to_f16(double d) { return (uint16_t)encode(&F16, d, false); }
uint16_t tbc_f32_to_f16(float f) { return (uint16_t)encode(&F16, f, false); }
float tbc_bf16_to_f32(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
uint16_t tbc_f32_to_bf16(float f) { return (uint16_t)encode(&BF16, f, false); }
float tbc_f8_to_f32(tbc_dtype dt, uint8_t v) {
	if (dt == TBC_DT_F8E8M0) return (float)tbc_e8m0_to_f64(v);
	return (float)decode(narrow_fmt(dt), v);
}
uint8_t tbc_f32_to_f8(tbc_dtype dt, float f, bool saturate) {
	if (dt == TBC_DT_F8E8M0) return tbc_f32_to_e8m0(f, saturate, TBC_ROUND_UP);
	return (uint8_t)encode(narrow_fmt(dt), f, saturate);
}
float tbc_f4e2m1_to_f32(uint8_t v) { return (float)decode(&E2M1, v & 0xf); }
uint8_t tbc_f32_to_f4e2m1(float f) { return (uint8_t)encode(&E2M1, f, true); }

/* float8e8m0: a biased power of two, 2^(code - 127); 0xff is NaN.  There is
 * no sign and no zero.  Encoding works on the float32 bits as the ONNX
 * reference does (onnx.numpy_helper.to_float8e8m0): the float's exponent
 * field, rounded by the fraction according to the mode. */
double tbc_e8m0_to_f64(uint8_t v) { return v == 0xff ? NAN : ldexp(1.0, (int)v - 127); }

uint8_t tbc_f32_to_e8m0(float f, bool saturate, tbc_round_mode mode) {
	uint32_t bits;
	memcpy(&bits, &f, 4);
	unsigned exponent = (bits >> 23) & 0xff;
	if (isnan(f)) return 0xff;
	if (isinf(f)) return saturate ? 0xfe : 0xff; /* the Cast table: Inf -> E8M0_MAX */
	bool round_up = false;
	switch (mode) {
	case TBC_ROUND_UP: round_up = (bits & 0x7fffff) != 0; break;
	case TBC_ROUND_DOWN: break;
	case TBC_ROUND_NEAREST: {
		bool g = bits & 0x400000, r = bits & 0x200000, s = bits & 0x1fffff, lsb = exponent > 0;
		round_up = g && (r || s || lsb);
		break;
	}
	}
	if (round_up && saturate && exponent == 0xfe) round_up = false;
	return (uint8_t)(exponent + (round_up ? 1u : 0u));
}

/* ---- Loads and stores -----------------------------------------------------*/
#define P(T) (((const T *)base)[i])
#define W(T) (((T *)base)[i])

double tbc_load_f64(tbc_dtype dt, const void *base, size_t i) {
	switch (dt) {
	case TBC_DT_F32: return P(float);
	case TBC_DT_F64: return P(double);
	case TBC_DT_BF16: return tbc_bf16_to_f32(P(uint16_t));
	case TBC_DT_F16: return decode(&F16, P(uint16_t));
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ: return decode(narrow_fmt(dt), P(uint8_t));
	case TBC_DT_F8E8M0: return tbc_e8m0_to_f64(P(uint8_t));
	case TBC_DT_F4E2M1: return decode(&E2M1, P(uint8_t) & 0xf);
	case TBC_DT_U64: return (double)P(uint64_t);
	default: return (double)tbc_load_i64(dt, base, i);
	}
}

/* Float to int64 the way C truncates, made total: NaN is 0 and values past
 * the range clamp to it. */
static int64_t f64_to_i64(double d) {
	if (isnan(d)) return 0;
	if (d >= 9223372036854775808.0) return INT64_MAX;
	if (d <= -9223372036854775808.0) return INT64_MIN;
	return (int64_t)d;
}

int64_t tbc_load_i64(tbc_dtype dt, const void *base, size_t i) {
	switch (dt) {
	case TBC_DT_I8: return P(int8_t);
	case TBC_DT_U8: return P(uint8_t);
	case TBC_DT_I16: return P(int16_t);
	case TBC_DT_U16: return P(uint16_t);
	case TBC_DT_I32: return P(int32_t);
	case TBC_DT_U32: return P(uint32_t);
	case TBC_DT_I64: return P(int64_t);
	case TBC_DT_U64: return (int64_t)P(uint64_t);
	case TBC_DT_BOOL: return P(uint8_t) != 0;
	case TBC_DT_I4: return (int8_t)(uint8_t)(P(uint8_t) << 4) >> 4;
	case TBC_DT_U4: return P(uint8_t) & 0xf;
	case TBC_DT_I2: return (int8_t)(uint8_t)(P(uint8_t) << 6) >> 6;
	case TBC_DT_U2: return P(uint8_t) & 0x3;
	default: return f64_to_i64(tbc_load_f64(dt, base, i));
	}
}

uint64_t tbc_load_u64(tbc_dtype dt, const void *base, size_t i) {
	if (dt == TBC_DT_U64) return P(uint64_t);
	if (tbc_dtype_is_float(dt)) {
		double d = tbc_load_f64(dt, base, i);
		if (d >= 18446744073709551616.0) return UINT64_MAX;
		if (d >= 9223372036854775808.0) return (uint64_t)d;
		return (uint64_t)f64_to_i64(d);
	}
	return (uint64_t)tbc_load_i64(dt, base, i);
}

/* Integer stores keep the low bits (two's complement wrap).  Sub-byte types
 * are held one per byte; a signed one keeps its sign in the whole byte so a
 * raw read sees the value. */
static void store_int(tbc_dtype dt, void *base, size_t i, uint64_t v) {
	switch (dt) {
	case TBC_DT_I8:
	case TBC_DT_U8: W(uint8_t) = (uint8_t)v; break;
	case TBC_DT_I16:
	case TBC_DT_U16: W(uint16_t) = (uint16_t)v; break;
	case TBC_DT_I32:
	case TBC_DT_U32: W(uint32_t) = (uint32_t)v; break;
	case TBC_DT_I64:
	case TBC_DT_U64: W(uint64_t) = v; break;
	case TBC_DT_BOOL: W(uint8_t) = v != 0; break;
	case TBC_DT_I4: W(int8_t) = (int8_t)(uint8_t)(v << 4) >> 4; break;
	case TBC_DT_U4: W(uint8_t) = (uint8_t)(v & 0xf); break;
	case TBC_DT_I2: W(int8_t) = (int8_t)(uint8_t)(v << 6) >> 6; break;
	case TBC_DT_U2: W(uint8_t) = (uint8_t)(v & 0x3); break;
	default: break;
	}
}

static void store_float(tbc_dtype dt, void *base, size_t i, double v, bool saturate) {
	switch (dt) {
	case TBC_DT_F32: W(float) = (float)v; break;
	case TBC_DT_F64: W(double) = v; break;
	case TBC_DT_F16: W(uint16_t) = (uint16_t)encode(&F16, v, false); break;
	/* Through float32 first, as ml_dtypes converts a double to bfloat16. */
	case TBC_DT_BF16: W(uint16_t) = tbc_f32_to_bf16((float)v); break;
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ: W(uint8_t) = (uint8_t)encode(narrow_fmt(dt), v, saturate); break;
	case TBC_DT_F8E8M0: W(uint8_t) = tbc_f32_to_e8m0((float)v, saturate, TBC_ROUND_UP); break;
	case TBC_DT_F4E2M1: W(uint8_t) = (uint8_t)encode(&E2M1, v, true); break;
	default: break;
	}
}

static void store_f64(tbc_dtype dt, void *base, size_t i, double v, bool saturate) {
	if (tbc_dtype_is_float(dt)) {
		store_float(dt, base, i, v, saturate);
		return;
	}
	if (dt == TBC_DT_BOOL) {
		W(uint8_t) = v != 0; /* NaN is true */
		return;
	}
	/* Float to integer truncates toward zero; out of range is undefined in
	 * ONNX: we clamp to 64 bits and then wrap to the width, which is what
	 * numpy does for int4/int2 (-9.0 -> int4 7). */
	v = trunc(v);
	if (dt == TBC_DT_U64 && v >= 9223372036854775808.0) {
		store_int(dt, base, i, v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v);
		return;
	}
	store_int(dt, base, i, (uint64_t)f64_to_i64(v));
}

void tbc_store_f64(tbc_dtype dt, void *base, size_t i, double v) { store_f64(dt, base, i, v, true); }
void tbc_store_f64_nosat(tbc_dtype dt, void *base, size_t i, double v) { store_f64(dt, base, i, v, false); }

void tbc_store_i64(tbc_dtype dt, void *base, size_t i, int64_t v) {
	if (dt == TBC_DT_F32)
		W(float) = (float)v; /* one rounding, not two through double */
	else if (tbc_dtype_is_float(dt))
		store_float(dt, base, i, (double)v, true);
	else
		store_int(dt, base, i, (uint64_t)v);
}

void tbc_store_u64(tbc_dtype dt, void *base, size_t i, uint64_t v) {
	if (dt == TBC_DT_F32)
		W(float) = (float)v;
	else if (tbc_dtype_is_float(dt))
		store_float(dt, base, i, (double)v, true);
	else
		store_int(dt, base, i, v);
}

/* Raw bit patterns, for BitCast: the low tbc_dtype_bits(dt) bits of the
 * element's storage. */
uint64_t tbc_load_bits(tbc_dtype dt, const void *base, size_t i) {
	switch (tbc_dtype_size(dt)) {
	case 1: {
		uint64_t b = P(uint8_t);
		int bits = tbc_dtype_bits(dt);
		return bits < 8 ? b & ((1u << bits) - 1u) : b;
	}
	case 2: return P(uint16_t);
	case 4: return P(uint32_t);
	case 8: return P(uint64_t);
	default: return 0;
	}
}

void tbc_store_bits(tbc_dtype dt, void *base, size_t i, uint64_t bits) {
	switch (tbc_dtype_size(dt)) {
	case 1:
		if (dt == TBC_DT_I4 || dt == TBC_DT_I2 || dt == TBC_DT_U4 || dt == TBC_DT_U2)
			store_int(dt, base, i, bits);
		else if (dt == TBC_DT_BOOL)
			W(uint8_t) = bits != 0;
		else
			W(uint8_t) = (uint8_t)(dt == TBC_DT_F4E2M1 ? bits & 0xf : bits);
		break;
	case 2: W(uint16_t) = (uint16_t)bits; break;
	case 4: W(uint32_t) = (uint32_t)bits; break;
	case 8: W(uint64_t) = bits; break;
	default: break;
	}
}
