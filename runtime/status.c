/* Statuses, element types and the overflow-checked arithmetic every check
 * of untrusted sizes goes through. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

tbcrt_status tbcrt__ok(void) {
	tbcrt_status s;
	s.code = TBCRT_OK;
	s.message[0] = '\0';
	return s;
}

tbcrt_status tbcrt__verr(tbcrt_code code, const char *fmt, va_list ap) {
	tbcrt_status s;
	s.code = code;
	vsnprintf(s.message, sizeof s.message, fmt, ap);
	return s;
}

tbcrt_status tbcrt__err(tbcrt_code code, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	tbcrt_status s = tbcrt__verr(code, fmt, ap);
	va_end(ap);
	return s;
}

tbcrt_status tbcrt__wrap(tbcrt_status s, const char *what) {
	if (s.code == TBCRT_OK) return s;
	/* what, ": ", then as much of the old message as fits. */
	char old[sizeof s.message];
	memcpy(old, s.message, sizeof old);
	size_t w = strlen(what), cap = sizeof s.message - 1;
	if (w > cap) w = cap;
	memcpy(s.message, what, w);
	size_t at = w;
	for (const char *p = ": "; *p && at < cap; p++) s.message[at++] = *p;
	size_t n = strnlen(old, sizeof old - 1);
	if (n > cap - at) n = cap - at;
	memcpy(s.message + at, old, n);
	s.message[at + n] = '\0';
	return s;
}

bool tbcrt__mul_within(uint64_t v, uint64_t w, uint64_t limit, uint64_t *out) {
	if (w != 0 && v > limit / w) return false;
	*out = v * w;
	return *out <= limit;
}

const char *tbcrt_code_name(tbcrt_code code) {
	switch (code) {
	case TBCRT_OK: return "ok";
	case TBCRT_ERR_INVALID_ARGUMENT: return "invalid argument";
	case TBCRT_ERR_NO_MEMORY: return "out of memory";
	case TBCRT_ERR_IO: return "i/o error";
	case TBCRT_ERR_INVALID_ARTIFACT: return "invalid artifact";
	case TBCRT_ERR_ABI_VERSION: return "ABI version mismatch";
	case TBCRT_ERR_UNSUPPORTED_TARGET: return "unsupported target";
	case TBCRT_ERR_DTYPE_MISMATCH: return "dtype mismatch";
	case TBCRT_ERR_SHAPE_MISMATCH: return "shape mismatch";
	case TBCRT_ERR_NOT_READY: return "not ready";
	case TBCRT_ERR_RUN_FAILED: return "run failed";
	case TBCRT_ERR_LIMIT: return "limit exceeded";
	case TBCRT_ERR_DEVICE_UNAVAILABLE: return "device unavailable";
	case TBCRT_ERR_BUILD_FAILED: return "program build failed";
	case TBCRT_ERR_DEVICE: return "device error";
	}
	return "unknown status code";
}

/* ONNX TensorProto.DataType numbers, as tbc_dtype in tbc/tbc.h. */
static const struct {
	const char *name;
	uint8_t size;
} dtypes[] = {
	[0] = {"undefined", 0}, [1] = {"float32", 4},   [2] = {"uint8", 1},        [3] = {"int8", 1},
	[4] = {"uint16", 2},    [5] = {"int16", 2},     [6] = {"int32", 4},        [7] = {"int64", 8},
	[8] = {"string", 0},    [9] = {"bool", 1},      [10] = {"float16", 2},     [11] = {"float64", 8},
	[12] = {"uint32", 4},   [13] = {"uint64", 8},   [14] = {"complex64", 8},   [15] = {"complex128", 16},
	[16] = {"bfloat16", 2}, [17] = {"float8e4m3fn", 1}, [18] = {"float8e4m3fnuz", 1}, [19] = {"float8e5m2", 1},
	[20] = {"float8e5m2fnuz", 1}, [21] = {"uint4", 1}, [22] = {"int4", 1}, [23] = {"float4e2m1", 1},
	[24] = {"float8e8m0", 1}, [25] = {"uint2", 1},  [26] = {"int2", 1},
};

size_t tbcrt_dtype_size(int32_t dtype) {
	if (dtype < 0 || (size_t)dtype >= sizeof dtypes / sizeof *dtypes) return 0;
	return dtypes[dtype].size;
}

const char *tbcrt_dtype_name(int32_t dtype) {
	if (dtype <= 0 || (size_t)dtype >= sizeof dtypes / sizeof *dtypes) return "unknown";
	return dtypes[dtype].name;
}
