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
size_t tbc_dtype_size(tbc_dtype dt) { return tbc_dtype_valid((int)dt) ? dtypes[dt].size : 0; }
const char *tbc_dtype_name(tbc_dtype dt) { return tbc_dtype_valid((int)dt) ? dtypes[dt].name : "undefined"; }

tbc_dtype tbc_dtype_from_name(const char *name) {
	for (int i = 1; i < TBC_DT_COUNT; i++)
		if (!strcmp(dtypes[i].name, name)) return (tbc_dtype)i;
	return TBC_DT_UNDEFINED;
}

/* ---- Narrow floats --------------------------------------------------------
 * One description per format; rounding is done on doubles (exact scaling by
 * powers of two, then nearbyint, which rounds half to even), encoding after. */
typedef struct fmt {
	int mbits, bias, emin; /* emin: exponent of the smallest normal */
	double max;            /* largest finite value */
	bool has_inf, nan_is_0x80, has_neg_zero;
	unsigned nan_code, inf_code; /* for formats with them (positive) */
	int ebits;
} fmt;

static const fmt F16 = {10, 15, -14, 65504.0, true, false, true, 0x7e00, 0x7c00, 5};
static const fmt BF16 = {7, 127, -126, 3.38953138925153547590470800371487866880e38, true, false, true, 0x7fc0, 0x7f80, 8};
static const fmt E4M3FN = {3, 7, -6, 448.0, false, false, true, 0x7f, 0, 4};
static const fmt E4M3FNUZ = {3, 8, -7, 240.0, false, true, false, 0x80, 0, 4};
static const fmt E5M2 = {2, 15, -14, 57344.0, true, false, true, 0x7f, 0x7c, 5};
static const fmt E5M2FNUZ = {2, 16, -15, 57344.0, false, true, false, 0x80, 0, 5};
static const fmt E2M1 = {1, 1, 0, 6.0, false, false, true, 0, 0, 2};

static const fmt *f8fmt(tbc_dtype dt) {
	switch (dt) {
	case TBC_DT_F8E4M3FN: return &E4M3FN;
	case TBC_DT_F8E4M3FNUZ: return &E4M3FNUZ;
	case TBC_DT_F8E5M2: return &E5M2;
	case TBC_DT_F8E5M2FNUZ: return &E5M2FNUZ;
	default: return NULL;
	}
}

static double decode(const fmt *f, unsigned bits) {
	unsigned total = 1u + (unsigned)f->ebits + (unsigned)f->mbits;
	unsigned sign = (bits >> (total - 1)) & 1u;
	unsigned e = (bits >> f->mbits) & ((1u << f->ebits) - 1u);
	unsigned m = bits & ((1u << f->mbits) - 1u);
	if (f->nan_is_0x80 && bits == 0x80) return NAN;
	unsigned emax_field = (1u << f->ebits) - 1u;
	if (f->has_inf && e == emax_field) return m ? NAN : (sign ? -INFINITY : INFINITY);
	if (!f->has_inf && !f->nan_is_0x80 && f->nan_code && (bits & ~(1u << (total - 1))) == f->nan_code)
		return NAN;
	double v = e == 0 ? ldexp((double)m, f->emin - f->mbits)
			  : ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
	return sign ? -v : v;
}

/* mode: 1 saturate, 0 overflow to inf or NaN. */
static unsigned encode(const fmt *f, double x, int saturate) {
	unsigned total = 1u + (unsigned)f->ebits + (unsigned)f->mbits;
	unsigned signbit = 1u << (total - 1);
	if (isnan(x)) return f->nan_code;
	unsigned sign = signbit & (signbit * (unsigned)!!signbit(x));
	double a = fabs(x);
	unsigned maxcode;
	{
		/* The code of the largest finite value. */
		int e;
		double fr = frexp(f->max, &e);
		unsigned mant = (unsigned)ldexp(fr * 2.0 - 1.0, f->mbits);
		maxcode = ((unsigned)(e - 1 + f->bias) << f->mbits) | mant;
	}
	if (isinf(a)) {
		if (f->has_inf && !saturate) return sign | f->inf_code;
		if (!f->has_inf && !saturate) return f->nan_is_0x80 ? 0x80 : (sign | f->nan_code);
		if (f->nan_is_0x80) return 0x80; /* fnuz: inf has no finite image */
		return sign | maxcode;
	}
	int e;
	(void)frexp(a, &e);
	int exp = e - 1 < f->emin ? f->emin : e - 1;
	double q = ldexp(1.0, exp - f->mbits);
	double r = nearbyint(a / q) * q;
	if (r > f->max) {
		if (saturate) return sign | maxcode;
		if (f->has_inf) return sign | f->inf_code;
		return f->nan_is_0x80 ? 0x80 : (sign | f->nan_code);
	}
	if (r == 0) return f->has_neg_zero ? sign : 0;
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
uint16_t tbc_f64_to_f16(double d) { return (uint16_t)encode(&F16, d, 0); }
uint16_t tbc_f32_to_f16(float f) { return (uint16_t)encode(&F16, f, 0); }
float tbc_bf16_to_f32(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
uint16_t tbc_f32_to_bf16(float f) {
	if (isnan(f)) return (uint16_t)(signbit(f) ? 0xffc0 : 0x7fc0);
	return (uint16_t)encode(&BF16, f, 0);
}
float tbc_f8_to_f32(tbc_dtype dt, uint8_t v) { return (float)decode(f8fmt(dt), v); }
uint8_t tbc_f32_to_f8(tbc_dtype dt, float f, bool saturate) { return (uint8_t)encode(f8fmt(dt), f, saturate); }
float tbc_f4e2m1_to_f32(uint8_t v) { return (float)decode(&E2M1, v & 0xf); }
uint8_t tbc_f32_to_f4e2m1(float f) { return (uint8_t)encode(&E2M1, f, 1); }

/* ---- Loads and stores -----------------------------------------------------*/
#define P(T) (((const T *)base)[i])
#define W(T) (((T *)base)[i])

double tbc_load_f64(tbc_dtype dt, const void *base, size_t i) {
	switch (dt) {
	case TBC_DT_F32: return P(float);
	case TBC_DT_F64: return P(double);
	case TBC_DT_F16: return tbc_f16_to_f32(P(uint16_t));
	case TBC_DT_BF16: return tbc_bf16_to_f32(P(uint16_t));
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ: return decode(f8fmt(dt), P(uint8_t));
	case TBC_DT_F4E2M1: return decode(&E2M1, P(uint8_t) & 0xf);
	case TBC_DT_U64: return (double)P(uint64_t);
	default: return (double)tbc_load_i64(dt, base, i);
	}
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
	default: {
		double d = tbc_load_f64(dt, base, i);
		if (isnan(d)) return 0;
		if (d >= 9223372036854775807.0) return INT64_MAX;
		if (d <= -9223372036854775808.0) return INT64_MIN;
		return (int64_t)d;
	}
	}
}

uint64_t tbc_load_u64(tbc_dtype dt, const void *base, size_t i) {
	if (dt == TBC_DT_U64) return P(uint64_t);
	if (tbc_dtype_is_float(dt)) {
		double d = tbc_load_f64(dt, base, i);
		if (isnan(d) || d <= 0) return d < 0 ? (uint64_t)(int64_t)d : 0;
		if (d >= 18446744073709551615.0) return UINT64_MAX;
		return (uint64_t)d;
	}
	return (uint64_t)tbc_load_i64(dt, base, i);
}

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
	case TBC_DT_I4: {
		/* Keep the sign in the byte so that a raw read sees the value. */
		int8_t s = (int8_t)(uint8_t)((uint8_t)(v << 4)) >> 4;
		W(int8_t) = s;
		break;
	}
	case TBC_DT_U4: W(uint8_t) = (uint8_t)(v & 0xf); break;
	default: break;
	}
}

static void store_float(tbc_dtype dt, void *base, size_t i, double v, int saturate) {
	switch (dt) {
	case TBC_DT_F32: W(float) = (float)v; break;
	case TBC_DT_F64: W(double) = v; break;
	case TBC_DT_F16: W(uint16_t) = tbc_f64_to_f16(v); break;
	case TBC_DT_BF16: W(uint16_t) = tbc_f32_to_bf16((float)v); break;
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ: W(uint8_t) = (uint8_t)encode(f8fmt(dt), v, saturate); break;
	case TBC_DT_F4E2M1: W(uint8_t) = (uint8_t)encode(&E2M1, v, 1); break;
	default: break;
	}
}

static void store_f64(tbc_dtype dt, void *base, size_t i, double v, int saturate) {
	if (tbc_dtype_is_float(dt)) {
		store_float(dt, base, i, v, saturate);
		return;
	}
	if (dt == TBC_DT_BOOL) {
		W(uint8_t) = v != 0;
		return;
	}
	/* Float to integer: truncate toward zero; out of range is undefined in
	 * ONNX, we saturate to 64 bits and then wrap to the width. */
	if (isnan(v)) v = 0;
	v = trunc(v);
	if (dt == TBC_DT_U64) {
		uint64_t u = v <= 0 ? (uint64_t)(int64_t)(v < -9.2e18 ? -9.2e18 : v)
				    : v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
		store_int(dt, base, i, u);
		return;
	}
	int64_t s = v >= 9223372036854775807.0 ? INT64_MAX : v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;
	store_int(dt, base, i, (uint64_t)s);
}

void tbc_store_f64(tbc_dtype dt, void *base, size_t i, double v) { store_f64(dt, base, i, v, 1); }
void tbc_store_f64_nosat(tbc_dtype dt, void *base, size_t i, double v) { store_f64(dt, base, i, v, 0); }

void tbc_store_i64(tbc_dtype dt, void *base, size_t i, int64_t v) {
	if (tbc_dtype_is_float(dt))
		store_float(dt, base, i, (double)v, 1);
	else
		store_int(dt, base, i, (uint64_t)v);
}

void tbc_store_u64(tbc_dtype dt, void *base, size_t i, uint64_t v) {
	if (tbc_dtype_is_float(dt))
		store_float(dt, base, i, (double)v, 1);
	else
		store_int(dt, base, i, v);
}
