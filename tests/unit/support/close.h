/* The one closeness rule of the tests: NaN matches NaN, an infinity matches
 * only the same infinity (|g - inf| <= atol + rtol * inf would accept any
 * finite g), and anything else is within atol + rtol * |want|. */
#ifndef TBC_TEST_CLOSE_H
#define TBC_TEST_CLOSE_H
#include <math.h>
#include <stdbool.h>

static inline bool tbc_test_close(double got, double want, double atol, double rtol) {
	if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
	if (isinf(want) || isinf(got)) return got == want;
	return fabs(got - want) <= atol + rtol * fabs(want);
}

#endif
