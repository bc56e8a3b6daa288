/* The scalar conversions of ir/dtype.c against the ONNX Cast tables and the
 * formats' definitions: every float8 code decodes and encodes back to
 * itself, ties round to even, out-of-range values saturate or become
 * inf/NaN as the `saturate` attribute says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "ir/dtype.h"

static const tbc_dtype f8_types[] = {TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ, TBC_DT_F8E5M2, TBC_DT_F8E5M2FNUZ};

static double f8(tbc_dtype dt, unsigned code) {
	uint8_t b = (uint8_t)code;
	return tbc_load_f64(dt, &b, 0);
}
static unsigned to_f8(tbc_dtype dt, double v, bool saturate) {
	uint8_t b = 0;
	if (saturate) tbc_store_f64(dt, &b, 0, v);
	else tbc_store_f64_nosat(dt, &b, 0, v);
	return b;
}

static void float8_decode_then_encode_is_the_identity(void **s) {
	(void)s;
	for (size_t t = 0; t < sizeof f8_types / sizeof *f8_types; t++) {
		tbc_dtype dt = f8_types[t];
		for (unsigned c = 0; c < 256; c++) {
			double v = f8(dt, c);
			if (isnan(v)) continue;
			assert_int_equal(to_f8(dt, v, false), c);
			assert_int_equal(tbc_f32_to_f8(dt, tbc_f8_to_f32(dt, (uint8_t)c), false), c);
			if (!isinf(v)) assert_int_equal(to_f8(dt, v, true), c); /* saturating: inf -> max */
		}
	}
}

static void float8_nan_codes_are_the_formats(void **s) {
	(void)s;
	int nans[4] = {0, 0, 0, 0};
	for (size_t t = 0; t < 4; t++)
		for (unsigned c = 0; c < 256; c++) nans[t] += isnan(f8(f8_types[t], c));
	assert_int_equal(nans[0], 2);  /* e4m3fn: S.1111.111 */
	assert_int_equal(nans[1], 1);  /* e4m3fnuz: 0x80 */
	assert_int_equal(nans[2], 6);  /* e5m2: S.11111.{01,10,11} */
	assert_int_equal(nans[3], 1);  /* e5m2fnuz: 0x80 */
	assert_true(isinf(f8(TBC_DT_F8E5M2, 0x7c)) && f8(TBC_DT_F8E5M2, 0xfc) < 0);
}

static void float8_largest_values(void **s) {
	(void)s;
	assert_true(f8(TBC_DT_F8E4M3FN, 0x7e) == 448.0);
	assert_true(f8(TBC_DT_F8E4M3FNUZ, 0x7f) == 240.0);
	assert_true(f8(TBC_DT_F8E5M2, 0x7b) == 57344.0);
	assert_true(f8(TBC_DT_F8E5M2FNUZ, 0x7f) == 57344.0);
	/* Smallest subnormals. */
	assert_true(f8(TBC_DT_F8E4M3FN, 0x01) == ldexp(1, -9));
	assert_true(f8(TBC_DT_F8E4M3FNUZ, 0x01) == ldexp(1, -10));
	assert_true(f8(TBC_DT_F8E5M2, 0x01) == ldexp(1, -16));
	assert_true(f8(TBC_DT_F8E5M2FNUZ, 0x01) == ldexp(1, -17));
}

/* Between two neighbours the encoder picks the nearer, and at the midpoint
 * the one with an even mantissa. */
static void float8_rounds_to_nearest_even(void **s) {
	(void)s;
	for (size_t t = 0; t < 4; t++) {
		tbc_dtype dt = f8_types[t];
		for (unsigned c = 0; c < 0x7f; c++) {
			double lo = f8(dt, c), hi = f8(dt, c + 1);
			if (isnan(lo) || isnan(hi) || isinf(hi)) continue;
			double mid = (lo + hi) / 2;
			unsigned even = (c & 1) ? c + 1 : c;
			assert_int_equal(to_f8(dt, mid, true), even);
			assert_int_equal(to_f8(dt, lo + (hi - lo) / 4, true), c);
			assert_int_equal(to_f8(dt, hi - (hi - lo) / 4, true), c + 1);
			/* Negative values mirror (the fnuz formats have no -0). */
			if (c > 0) assert_int_equal(to_f8(dt, -mid, true), even | 0x80);
		}
	}
}

/* The Cast tables, saturate = 1 and saturate = 0. */
static void float8_cast_table_saturate(void **s) {
	(void)s;
	for (size_t t = 0; t < 4; t++) {
		tbc_dtype dt = f8_types[t];
		double max = dt == TBC_DT_F8E4M3FN ? 448 : dt == TBC_DT_F8E4M3FNUZ ? 240 : 57344;
		assert_true(f8(dt, to_f8(dt, INFINITY, true)) == max);
		assert_true(f8(dt, to_f8(dt, -INFINITY, true)) == -max);
		assert_true(f8(dt, to_f8(dt, 1e9, true)) == max);
		assert_true(f8(dt, to_f8(dt, -1e9, true)) == -max);
		assert_true(isnan(f8(dt, to_f8(dt, NAN, true))));
	}
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, -0.0, true), 0x80);
	assert_int_equal(to_f8(TBC_DT_F8E4M3FNUZ, -0.0, true), 0x00);
	assert_int_equal(to_f8(TBC_DT_F8E5M2FNUZ, -1e-30, true), 0x00);
}

static void float8_cast_table_no_saturate(void **s) {
	(void)s;
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, INFINITY, false), 0x7f);   /* NaN */
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, -INFINITY, false), 0xff);  /* -NaN */
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, 1e6, false), 0x7f);
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, 460, false), 0x7e);        /* rounds down to 448 */
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, 465, false), 0x7f);        /* rounds past 448 */
	assert_int_equal(to_f8(TBC_DT_F8E4M3FNUZ, INFINITY, false), 0x80);
	assert_int_equal(to_f8(TBC_DT_F8E4M3FNUZ, -1e6, false), 0x80);
	assert_int_equal(to_f8(TBC_DT_F8E5M2, INFINITY, false), 0x7c);
	assert_int_equal(to_f8(TBC_DT_F8E5M2, -1e6, false), 0xfc);
	assert_int_equal(to_f8(TBC_DT_F8E5M2FNUZ, 1e6, false), 0x80);
	assert_int_equal(to_f8(TBC_DT_F8E4M3FN, -NAN, false), 0xff);
	assert_int_equal(to_f8(TBC_DT_F8E5M2, NAN, false), 0x7e);
}

static void float4e2m1_saturates_and_rounds_to_even(void **s) {
	(void)s;
	static const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
	for (unsigned c = 0; c < 16; c++) {
		uint8_t b = (uint8_t)c;
		double v = tbc_load_f64(TBC_DT_F4E2M1, &b, 0);
		assert_true(v == ((c & 8) ? -values[c & 7] : values[c & 7]));
		assert_int_equal(tbc_f32_to_f4e2m1((float)v), c);
	}
	assert_int_equal(tbc_f32_to_f4e2m1(0.25f), 0x0);  /* tie: 0 is even */
	assert_int_equal(tbc_f32_to_f4e2m1(-3.5f), 0xe);  /* tie: -4 is even */
	assert_int_equal(tbc_f32_to_f4e2m1(2.5f), 0x4);   /* tie: 2 */
	assert_int_equal(tbc_f32_to_f4e2m1(1e6f), 0x7);   /* 6 */
	assert_int_equal(tbc_f32_to_f4e2m1(-INFINITY), 0xf);
}

static void e8m0_is_a_power_of_two(void **s) {
	(void)s;
	assert_true(tbc_e8m0_to_f64(127) == 1.0);
	assert_true(tbc_e8m0_to_f64(0) == ldexp(1, -127));
	assert_true(isnan(tbc_e8m0_to_f64(0xff)));
	assert_int_equal(tbc_f32_to_e8m0(1.1f, true, TBC_ROUND_UP), 128);
	assert_int_equal(tbc_f32_to_e8m0(1.1f, true, TBC_ROUND_DOWN), 127);
	assert_int_equal(tbc_f32_to_e8m0(1.4f, true, TBC_ROUND_NEAREST), 127);
	assert_int_equal(tbc_f32_to_e8m0(1.6f, true, TBC_ROUND_NEAREST), 128);
	assert_int_equal(tbc_f32_to_e8m0(3e38f, true, TBC_ROUND_UP), 0xfe);  /* saturates */
	assert_int_equal(tbc_f32_to_e8m0(3e38f, false, TBC_ROUND_UP), 0xff); /* NaN */
	assert_int_equal(tbc_f32_to_e8m0(0.0f, true, TBC_ROUND_UP), 0);
}

static void f16_and_bf16_keep_nan_sign_and_round_to_even(void **s) {
	(void)s;
	assert_int_equal(tbc_f64_to_f16(-NAN), 0xfe00);
	assert_int_equal(tbc_f32_to_bf16(-NAN), 0xffc0);
	assert_int_equal(tbc_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);        /* tie: even */
	assert_int_equal(tbc_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
	assert_int_equal(tbc_f32_to_bf16(3.4e38f), 0x7f80);                 /* overflows to inf */
}

static void integers_wrap_to_their_width(void **s) {
	(void)s;
	uint8_t b;
	tbc_store_i64(TBC_DT_I4, &b, 0, 8);
	assert_int_equal(tbc_load_i64(TBC_DT_I4, &b, 0), -8);
	tbc_store_f64(TBC_DT_I4, &b, 0, -9.0);
	assert_int_equal(tbc_load_i64(TBC_DT_I4, &b, 0), 7);
	tbc_store_f64(TBC_DT_U4, &b, 0, -1.0);
	assert_int_equal(tbc_load_i64(TBC_DT_U4, &b, 0), 15);
	tbc_store_f64(TBC_DT_I2, &b, 0, 2.0);
	assert_int_equal(tbc_load_i64(TBC_DT_I2, &b, 0), -2);
	tbc_store_f64(TBC_DT_U2, &b, 0, -3.0);
	assert_int_equal(tbc_load_i64(TBC_DT_U2, &b, 0), 1);
	tbc_store_f64(TBC_DT_BOOL, &b, 0, NAN);
	assert_int_equal(b, 1);
	int16_t h;
	tbc_store_i64(TBC_DT_I16, &h, 0, 200 + 65536);
	assert_int_equal(h, 200);
	uint64_t u;
	tbc_store_f64(TBC_DT_U64, &u, 0, 18446744073709549568.0);
	assert_true(u == 18446744073709549568u);
	int64_t big = 9007199254740993; /* 2^53 + 1 */
	float f;
	tbc_store_i64(TBC_DT_F32, &f, 0, big);
	assert_true(f == 9007199254740992.0f);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(float8_decode_then_encode_is_the_identity),
		cmocka_unit_test(float8_nan_codes_are_the_formats),
		cmocka_unit_test(float8_largest_values),
		cmocka_unit_test(float8_rounds_to_nearest_even),
		cmocka_unit_test(float8_cast_table_saturate),
		cmocka_unit_test(float8_cast_table_no_saturate),
		cmocka_unit_test(float4e2m1_saturates_and_rounds_to_even),
		cmocka_unit_test(e8m0_is_a_power_of_two),
		cmocka_unit_test(f16_and_bf16_keep_nan_sign_and_round_to_even),
		cmocka_unit_test(integers_wrap_to_their_width),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
