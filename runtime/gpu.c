/* What the CUDA and HIP devices share (gpu.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

void *tbcrt__gpu_lib_create(const tbcrt_context *c, void *dl, size_t bytes) {
	tbcrt__gpu_lib *lib = tbcrt__calloc(c, 1, bytes);
	if (!lib) {
		dlclose(dl);
		return NULL;
	}
	atomic_init(&lib->refs, 1);
	lib->context = c;
	lib->dl = dl;
	return lib;
}

void tbcrt__gpu_lib_retain(tbcrt__gpu_lib *lib) { atomic_fetch_add(&lib->refs, 1); }

void tbcrt__gpu_lib_release(tbcrt__gpu_lib *lib) {
	if (!lib || atomic_fetch_sub(&lib->refs, 1) != 1) return;
	dlclose(lib->dl);
	tbcrt__free(lib->context, lib);
}

tbcrt_status tbcrt__gpu_fail(tbcrt_code code, const char *call, int err, const char *name, const char *text) {
	if (name && text) return tbcrt__err(code, "%s failed: %s (%s)", call, name, text);
	return tbcrt__err(code, "%s failed: error %d%s%s", call, err, text ? ": " : "", text ? text : "");
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* The natural alignment of an argument of size bytes. */
static size_t alignment(size_t bytes) {
	size_t a = 1;
	while (a < 16 && bytes % (2 * a) == 0) a *= 2;
	return a;
}

tbcrt_status tbcrt__gpu_launch_prepare(const tbcrt__kernel *k, const tbcrt__launch_desc *l,
				       const tbcrt__gpu_limits *limits, tbcrt__gpu_launch *out) {
	const char *kn = k->name;
	out->n_params = 0;
	out->packed_bytes = 0;
	out->dynamic_shared = 0;
	for (uint32_t i = 0; i < 3; i++) out->grid[i] = out->block[i] = 1;
	if (!l->local[0]) {
		uint64_t b = TBCRT__GPU_DEFAULT_BLOCK;
		if (k->max_group_size && b > k->max_group_size) b = k->max_group_size;
		if (b > limits->max_block[0]) b = limits->max_block[0];
		out->block[0] = (uint32_t)(b ? b : 1);
	} else {
		for (uint32_t i = 0; i < l->dims; i++)
			if (l->local[i] > limits->max_block[i])
				return tbcrt__err(TBCRT_ERR_LIMIT,
						  "kernel '%s': a work-group of %llu items in dim %u exceeds the device's block "
						  "limit of %u there",
						  kn, (unsigned long long)l->local[i], i, limits->max_block[i]);
		for (uint32_t i = 0; i < l->dims; i++) out->block[i] = (uint32_t)l->local[i];
	}
	for (uint32_t i = 0; i < l->dims; i++) {
		uint64_t g = ceil_div(l->global[i], out->block[i]);
		out->grid[i] = (uint32_t)(g > limits->max_grid[i] ? limits->max_grid[i] : g ? g : 1);
	}
	for (uint32_t i = 0; i < l->n_args; i++) {
		const tbcrt__arg *a = &l->args[i];
		if (a->kind == TBCRT__ARG_LOCAL) {
			out->dynamic_shared += ceil_div(a->bytes, 16) * 16;
			continue;
		}
		const void *value = a->value;
		size_t bytes = a->bytes;
		if (a->kind == TBCRT__ARG_BUFFER) {
			out->addresses[i] = tbcrt__gpu_address(a->buffer);
			value = &out->addresses[i];
			bytes = sizeof out->addresses[i];
		}
		size_t at = ceil_div(out->packed_bytes, alignment(bytes)) * alignment(bytes);
		if (at + bytes > sizeof out->packed)
			return tbcrt__err(TBCRT_ERR_LIMIT, "kernel '%s': its arguments take more than the %u bytes a launch passes",
					  kn, TBCRT__GPU_MAX_PARAM_BYTES);
		memcpy(out->packed + at, value, bytes);
		out->packed_bytes = at + bytes;
		out->params[out->n_params++] = (void *)value;
	}
	return tbcrt__ok();
}

tbcrt_status tbcrt__gpu_check_shared(const tbcrt__kernel *k, uint64_t static_bytes, uint64_t dynamic_bytes,
				     const tbcrt__gpu_limits *limits) {
	if (static_bytes + dynamic_bytes <= limits->max_shared) return tbcrt__ok();
	return tbcrt__err(TBCRT_ERR_LIMIT,
			  "kernel '%s' needs %llu bytes of shared memory (%llu static, %llu dynamic); the device allows %llu per "
			  "block",
			  k->name, (unsigned long long)(static_bytes + dynamic_bytes), (unsigned long long)static_bytes,
			  (unsigned long long)dynamic_bytes, (unsigned long long)limits->max_shared);
}

tbcrt_status tbcrt__gpu_after_kernel(tbcrt_status s, const char *last) {
	if (s.code == TBCRT_OK || !last || !last[0]) return s;
	size_t at = strlen(s.message);
	snprintf(s.message + at, sizeof s.message - at, " (after kernel '%s', the last one launched)", last);
	return s;
}

void tbcrt__gpu_append_log(tbcrt_status *s, const char *log) {
	while (log && (*log == ' ' || *log == '\n' || *log == '\r' || *log == '\t')) log++;
	size_t at = strlen(s->message);
	tbcrt__copy_string(s->message + at, sizeof s->message - at, log && *log ? log : "(the log is empty)");
}
