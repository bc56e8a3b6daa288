/* Helpers of the device tests (tests/unit/test_runtime_device*.c). */
#ifndef RT_DEVICE_H
#define RT_DEVICE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "tests/unit/support/pocl.h"
#include "tests/runtime/rt_test.h"

/* The device of that name, opened; when it is unavailable the test is
 * skipped, saying why -- except for OpenCL under CI=true, where PoCL must
 * be there and a missing platform fails. */
static inline tbcrt__device *rt_device_or_skip(tbcrt_context *ctx, const char *name) {
	tbcrt__device *d = NULL;
	tbcrt_status s = tbcrt__device_get(ctx, name, &d);
	if (s.code == TBCRT_OK) return d;
	const char *ci = getenv("CI");
	if (s.code == TBCRT_ERR_DEVICE_UNAVAILABLE && !(ci && !strcmp(ci, "true") && !strncmp(name, "opencl", 6))) {
		printf("skipped: %s (%s)\n", name, s.message);
		tbcrt_context_destroy(ctx);
		skip();
	}
	tbcrt_context_destroy(ctx);
	fail_msg("device %s: %s: %s", name, tbcrt_code_name(s.code), s.message);
	return NULL;
}

#endif
