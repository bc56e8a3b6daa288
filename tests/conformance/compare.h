/* How the conformance tools compare an output with the expected one: dtypes
 * and shapes equal, floats within atol + rtol * |want| (NaN equal to NaN, an
 * infinity only to itself: tests/unit/support/close.h), integers and bools
 * exactly. */
#ifndef TBC_TESTS_CONFORMANCE_COMPARE_H
#define TBC_TESTS_CONFORMANCE_COMPARE_H
#include <stdbool.h>
#include <stddef.h>

#include "tbc/tbc.h"

/* true when got matches want; otherwise msg says where they first differ,
 * naming the output `what`. */
bool tbc_conf_compare(const tbc_tensor *got, const tbc_tensor *want, const char *what, double atol, double rtol,
		      char *msg, size_t size);

#endif
