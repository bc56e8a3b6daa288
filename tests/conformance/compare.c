#include "tests/conformance/compare.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/dtype.h"
#include "tests/unit/support/close.h"

bool tbc_conf_compare(const tbc_tensor *got, const tbc_tensor *want, const char *what, double atol, double rtol,
		      char *msg, size_t size) {
	if (got->dtype != want->dtype) {
		snprintf(msg, size, "%s: dtype %s, expected %s", what, tbc_dtype_name(got->dtype),
			 tbc_dtype_name(want->dtype));
		return false;
	}
	bool same = got->rank == want->rank;
	for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
	if (!same) {
		char a[128] = "", b[128] = "";
		for (int i = 0; i < got->rank; i++)
			snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", i ? "," : "", (long long)got->dims[i]);
		for (int i = 0; i < want->rank; i++)
			snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? "," : "", (long long)want->dims[i]);
		snprintf(msg, size, "%s: shape [%s], expected [%s]", what, a, b);
		return false;
	}
	bool fl = tbc_dtype_is_float(got->dtype);
	for (int64_t i = 0; i < got->numel; i++) {
		if (fl) {
			double g = tbc_load_f64(got->dtype, got->data, (size_t)i);
			double w = tbc_load_f64(want->dtype, want->data, (size_t)i);
			if (!tbc_test_close(g, w, atol, rtol)) {
				snprintf(msg, size, "%s[%lld]: %.9g, expected %.9g", what, (long long)i, g, w);
				return false;
			}
		} else if (got->dtype == TBC_DT_U64) {
			uint64_t g = tbc_load_u64(got->dtype, got->data, (size_t)i);
			uint64_t w = tbc_load_u64(want->dtype, want->data, (size_t)i);
			if (g != w) {
				snprintf(msg, size, "%s[%lld]: %llu, expected %llu", what, (long long)i,
					 (unsigned long long)g, (unsigned long long)w);
				return false;
			}
		} else {
			int64_t g = tbc_load_i64(got->dtype, got->data, (size_t)i);
			int64_t w = tbc_load_i64(want->dtype, want->data, (size_t)i);
			if (g != w) {
				snprintf(msg, size, "%s[%lld]: %lld, expected %lld", what, (long long)i, (long long)g,
					 (long long)w);
				return false;
			}
		}
	}
	return true;
}

