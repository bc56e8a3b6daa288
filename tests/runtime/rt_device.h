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

/* saxpy (y = a * x + y, a = 2: once over all N with the device's work-group
 * size, then over the first 1000 again in groups of 8) and group_sum (one
 * sum per work-group of 64 through local memory) on device d, compared with
 * the host.  Both kernels take the arguments the tests' sources and host
 * functions declare. */
static inline void rt_check_saxpy_and_group_sum(tbcrt__device *d, tbcrt__kernel *saxpy, tbcrt__kernel *sum) {
	enum { N = 64 * 37 };
	static float x[N], y[N], sums[37];
	for (int i = 0; i < N; i++) x[i] = (float)(i % 13), y[i] = 1;
	tbcrt__buffer *bx, *by, *bs;
	RT_OK(tbcrt__buffer_alloc(d, sizeof x, &bx));
	RT_OK(tbcrt__buffer_alloc(d, sizeof y, &by));
	RT_OK(tbcrt__buffer_alloc(d, sizeof sums, &bs));
	RT_OK(tbcrt__buffer_write(bx, 0, x, sizeof x));
	RT_OK(tbcrt__buffer_write(by, 0, y, sizeof y));
	float a = 2;
	tbcrt__arg args[] = {{TBCRT__ARG_SCALAR, NULL, &a, sizeof a}, {TBCRT__ARG_BUFFER, bx, NULL, 0},
			     {TBCRT__ARG_BUFFER, by, NULL, 0}};
	tbcrt__launch_desc l = {.dims = 1, .global = {N}, .n_args = 3, .args = args};
	RT_OK(tbcrt__launch(saxpy, &l)); /* local chosen by the device */
	l.global[0] = 1000, l.local[0] = 8; /* the first 1000 again, in groups of 8 */
	RT_OK(tbcrt__launch(saxpy, &l));
	tbcrt__arg sum_args[] = {{TBCRT__ARG_BUFFER, bx, NULL, 0}, {TBCRT__ARG_BUFFER, bs, NULL, 0},
				 {TBCRT__ARG_LOCAL, NULL, NULL, 64 * sizeof(float)}};
	tbcrt__launch_desc ls = {.dims = 1, .global = {N}, .local = {64}, .n_args = 3, .args = sum_args};
	RT_OK(tbcrt__launch(sum, &ls));
	RT_OK(tbcrt__device_synchronize(d));
	RT_OK(tbcrt__buffer_read(by, 0, y, sizeof y));
	RT_OK(tbcrt__buffer_read(bs, 0, sums, sizeof sums));
	for (int i = 0; i < N; i++)
		if (y[i] != (i < 1000 ? 4 : 2) * x[i] + 1) fail_msg("y[%d] = %g, expected %g", i, y[i], (i < 1000 ? 4 : 2) * x[i] + 1);
	for (int g = 0; g < 37; g++) {
		float want = 0;
		for (int i = 0; i < 64; i++) want += x[g * 64 + i];
		assert_true(sums[g] == want);
	}
	tbcrt__buffer_free(bx);
	tbcrt__buffer_free(by);
	tbcrt__buffer_free(bs);
}

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

/* A session of model on device (its index in the context), which it
 * reports as its device. */
static inline tbcrt_session *rt_session_on(tbcrt_model *model, uint32_t device) {
	tbcrt_session_options o;
	tbcrt_session_options_init(&o);
	o.device = device;
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create_with(model, &o, &s));
	uint32_t got = UINT32_MAX;
	RT_OK(tbcrt_session_device(s, &got));
	assert_int_equal(got, device);
	return s;
}

#endif
