/* Reproducible random tensors and the comparison of two tensors, for
 * checking one target against another (tbc check).  Values go through
 * ir/dtype.c's conversions, so every numeric type (the narrow floats
 * included) is made and read the same way. */
#include <math.h>
#include <string.h>

#include "ir.h"

/* splitmix64: a good 64-bit mix, one state word; the same on every host. */
static uint64_t next(uint64_t *state) {
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The largest integer in [0, 10) the type holds (int2 holds 0..1). */
static uint64_t int_span(tbc_dtype dt) {
	int bits = tbc_dtype_bits(dt);
	if (bits >= 8) return 10;
	uint64_t max = tbc_dtype_is_signed(dt) ? ((uint64_t)1 << (bits - 1)) : ((uint64_t)1 << bits);
	return max < 10 ? max : 10;
}

tbc_code tbc_tensor_fill_random(tbc_tensor *t, uint64_t seed) {
	if (!t || !tbc_dtype_supported(t->dtype) || (t->numel && !t->data)) return TBC_ERR_UNSUPPORTED;
	uint64_t state = seed ^ 0x5eed5eed5eed5eedull;
	bool fl = tbc_dtype_is_float(t->dtype), boolean = t->dtype == TBC_DT_BOOL;
	uint64_t span = fl || boolean ? 0 : int_span(t->dtype);
	for (int64_t i = 0; i < t->numel; i++) {
		uint64_t r = next(&state);
		if (fl)
			tbc_store_f64(t->dtype, t->data, (size_t)i, (double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
		else if (boolean)
			tbc_store_i64(t->dtype, t->data, (size_t)i, (int64_t)(r >> 63));
		else
			tbc_store_i64(t->dtype, t->data, (size_t)i, (int64_t)((r >> 11) % span));
	}
	return TBC_OK;
}

static void compare_floats(const tbc_tensor *got, const tbc_tensor *want, double rtol, double atol,
			   tbc_compare_result *r) {
	for (int64_t i = 0; i < got->numel; i++) {
		double g = tbc_load_f64(got->dtype, got->data, (size_t)i);
		double w = tbc_load_f64(want->dtype, want->data, (size_t)i);
		bool close;
		if (isnan(g) || isnan(w)) {
			close = isnan(g) && isnan(w);
			if (close) r->n_nan_both++;
			else r->n_nan_mismatched++;
		} else if (isinf(g) || isinf(w)) {
			close = g == w;
		} else {
			double diff = fabs(g - w);
			close = diff <= atol + rtol * fabs(w);
			if (diff > r->max_abs_diff) r->max_abs_diff = diff;
			if (w != 0 && diff / fabs(w) > r->max_rel_diff) r->max_rel_diff = diff / fabs(w);
		}
		if (!close && r->n_mismatched++ == 0) {
			r->first_mismatch = i;
			r->first_got = g;
			r->first_want = w;
		}
	}
}

static void compare_ints(const tbc_tensor *got, const tbc_tensor *want, tbc_compare_result *r) {
	bool u64 = got->dtype == TBC_DT_U64;
	for (int64_t i = 0; i < got->numel; i++) {
		double diff, gd, wd;
		if (u64) {
			uint64_t g = tbc_load_u64(got->dtype, got->data, (size_t)i);
			uint64_t w = tbc_load_u64(want->dtype, want->data, (size_t)i);
			diff = g > w ? (double)(g - w) : (double)(w - g);
			gd = (double)g;
			wd = (double)w;
		} else {
			int64_t g = tbc_load_i64(got->dtype, got->data, (size_t)i);
			int64_t w = tbc_load_i64(want->dtype, want->data, (size_t)i);
			diff = g == w ? 0 : fmax(fabs((double)g - (double)w), 1.0); /* beyond 2^53 too */
			gd = (double)g;
			wd = (double)w;
		}
		if (diff == 0) continue;
		if (diff > r->max_abs_diff) r->max_abs_diff = diff;
		if (wd != 0 && diff / fabs(wd) > r->max_rel_diff) r->max_rel_diff = diff / fabs(wd);
		if (r->n_mismatched++ == 0) {
			r->first_mismatch = i;
			r->first_got = gd;
			r->first_want = wd;
		}
	}
}

void tbc_tensor_compare(const tbc_tensor *got, const tbc_tensor *want, double rtol, double atol,
			tbc_compare_result *out) {
	memset(out, 0, sizeof *out);
	out->first_mismatch = -1;
	if (!got || !want) return;
	out->same_dtype = got->dtype == want->dtype && tbc_dtype_supported(got->dtype);
	out->same_shape = tbc_tensor_same_shape(got, want) && got->numel == want->numel;
	if (!out->same_dtype || !out->same_shape) return;
	if (tbc_dtype_is_float(got->dtype))
		compare_floats(got, want, rtol, atol, out);
	else
		compare_ints(got, want, out);
}
