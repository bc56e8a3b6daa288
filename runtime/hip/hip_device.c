/* The HIP (ROCm) device: libamdhip64.so reached only through dlopen
 * (libamdhip64.so, then .so.6 and .so.5), never linked or included, so a
 * machine without ROCm loads libtbcrt and reports "hip" as unavailable,
 * saying why.  Every device HIP finds is one registry entry, "hip:N".
 *
 * HIP's current device is per thread, so every call first sets it
 * (hipSetDevice).  Opening a device makes one stream; buffers are hipMalloc
 * allocations and views addresses inside them; copies and launches are
 * queued on the stream, and a write or a read waits for it.  A program is
 * an AMDGPU code object (hipModuleLoadData); its build options name the
 * target ("gfx942"), quoted when the runtime refuses the object.  Kernel
 * arguments go as one parameter block (hipModuleLaunchKernel's `extra`),
 * which every ROCm release takes.
 *
 * The device's name comes from hipDeviceGetName and its limits from
 * hipDeviceGetAttribute (the attribute numbers of ROCm 5 and later), not
 * from hipGetDeviceProperties, whose large struct changed layout between
 * releases; so the exact gfx name is not known here, and `features` holds
 * the compute capability HIP reports ("cc 9.4"). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../gpu.h"

/* ---- HIP: the types and entry points used (hip_runtime_api.h's) ---- */
typedef int hipError_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;

enum {
	hipSuccess = 0,
	hipErrorOutOfMemory = 2,
	hipErrorInvalidImage = 200,
	hipErrorNoBinaryForGpu = 209,
	hipErrorInvalidKernelFile = 218,
	hipDeviceAttributeComputeCapabilityMajor = 23,
	hipDeviceAttributeMaxBlockDimX = 26, /* Y 27, Z 28 */
	hipDeviceAttributeMaxGridDimX = 29,  /* Y 30, Z 31 */
	hipDeviceAttributeMaxThreadsPerBlock = 56,
	hipDeviceAttributeComputeCapabilityMinor = 61,
	hipDeviceAttributeMultiprocessorCount = 63,
	hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
	HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
};
#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define HIP_LAUNCH_PARAM_END ((void *)0x03)

#define HIP_FUNCTIONS(X)                                                                                       \
	X(hipError_t, hipInit, (unsigned flags))                                                               \
	X(hipError_t, hipDriverGetVersion, (int *version))                                                     \
	X(hipError_t, hipGetDeviceCount, (int *count))                                                         \
	X(hipError_t, hipDeviceGetName, (char *name, int len, int device))                                     \
	X(hipError_t, hipDeviceGetAttribute, (int *value, int attrib, int device))                             \
	X(hipError_t, hipDeviceTotalMem, (size_t * bytes, int device))                                         \
	X(hipError_t, hipSetDevice, (int device))                                                              \
	X(hipError_t, hipStreamCreate, (hipStream_t * stream))                                                 \
	X(hipError_t, hipStreamDestroy, (hipStream_t stream))                                                  \
	X(hipError_t, hipStreamSynchronize, (hipStream_t stream))                                              \
	X(hipError_t, hipMalloc, (void **ptr, size_t bytes))                                                   \
	X(hipError_t, hipFree, (void *ptr))                                                                    \
	X(hipError_t, hipMemcpyHtoDAsync, (void *dst, const void *src, size_t bytes, hipStream_t stream))      \
	X(hipError_t, hipMemcpyDtoHAsync, (void *dst, const void *src, size_t bytes, hipStream_t stream))      \
	X(hipError_t, hipMemcpyDtoDAsync, (void *dst, const void *src, size_t bytes, hipStream_t stream))      \
	X(hipError_t, hipModuleLoadData, (hipModule_t * module, const void *image))                            \
	X(hipError_t, hipModuleUnload, (hipModule_t module))                                                   \
	X(hipError_t, hipModuleGetFunction, (hipFunction_t * f, hipModule_t module, const char *name))         \
	X(hipError_t, hipFuncGetAttribute, (int *value, int attrib, hipFunction_t f))                          \
	X(hipError_t, hipModuleLaunchKernel,                                                                   \
	  (hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,      \
	   unsigned shared, hipStream_t stream, void **params, void **extra))                                  \
	X(const char *, hipGetErrorName, (hipError_t err))                                                     \
	X(const char *, hipGetErrorString, (hipError_t err))

typedef struct hip_driver {
	tbcrt__gpu_lib lib; /* first: gpu.h's lifetime */
#define HIP_POINTER(ret, name, args) ret(*name) args;
	HIP_FUNCTIONS(HIP_POINTER)
#undef HIP_POINTER
	/* Timing, optional: NULL where the runtime lacks them. */
	hipError_t (*hipEventCreate)(hipEvent_t *event);
	hipError_t (*hipEventRecord)(hipEvent_t event, hipStream_t stream);
	hipError_t (*hipEventSynchronize)(hipEvent_t event);
	hipError_t (*hipEventElapsedTime)(float *ms, hipEvent_t start, hipEvent_t end);
	hipError_t (*hipEventDestroy)(hipEvent_t event);
	const char *library;
	int version;
} hip_driver;

static tbcrt_status hip_fail(const hip_driver *drv, hipError_t err, const char *call) {
	return tbcrt__gpu_fail(err == hipErrorOutOfMemory ? TBCRT_ERR_NO_MEMORY : TBCRT_ERR_DEVICE, call, err,
			       drv->hipGetErrorName(err), drv->hipGetErrorString(err));
}

static const tbcrt__device_ops hip_ops;

/* ---- Enumeration ---- */
static int attribute(const hip_driver *drv, int device, int what) {
	int v = 0;
	return drv->hipDeviceGetAttribute(&v, what, device) == hipSuccess ? v : 0;
}

static tbcrt_status add_unavailable(tbcrt__registry *r, tbcrt_device_info *info, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static tbcrt_status add_unavailable(tbcrt__registry *r, tbcrt_device_info *info, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(info->unavailable_reason, sizeof info->unavailable_reason, fmt, ap);
	va_end(ap);
	info->available = false;
	return tbcrt__registry_add(r, NULL, info, NULL, NULL);
}

static tbcrt_status add_device(tbcrt__registry *r, hip_driver *drv, int ordinal) {
	tbcrt_device_info info;
	memset(&info, 0, sizeof info);
	snprintf(info.name, sizeof info.name, "hip:%d", ordinal);
	info.kind = TBCRT_DEVICE_HIP;
	info.available = true;
	if (drv->hipDeviceGetName(info.device_name, (int)sizeof info.device_name, ordinal) != hipSuccess)
		info.device_name[0] = '\0';
	info.device_name[sizeof info.device_name - 1] = '\0';
	tbcrt__copy_string(info.vendor, sizeof info.vendor, "AMD");
	snprintf(info.version, sizeof info.version, "HIP driver %d (%s)", drv->version, drv->library);
	snprintf(info.features, sizeof info.features, "cc %d.%d",
		 attribute(drv, ordinal, hipDeviceAttributeComputeCapabilityMajor),
		 attribute(drv, ordinal, hipDeviceAttributeComputeCapabilityMinor));
	info.compute_units = (uint32_t)attribute(drv, ordinal, hipDeviceAttributeMultiprocessorCount);
	size_t total = 0;
	if (drv->hipDeviceTotalMem(&total, ordinal) != hipSuccess) total = 0;
	info.global_memory_bytes = total;
	info.max_alloc_bytes = total;
	info.local_memory_bytes = (uint64_t)attribute(drv, ordinal, hipDeviceAttributeMaxSharedMemoryPerBlock);
	info.max_work_group_size = (uint64_t)attribute(drv, ordinal, hipDeviceAttributeMaxThreadsPerBlock);
	info.fp16 = true;
	info.fp64 = true;
	tbcrt__gpu_lib_retain(&drv->lib);
	tbcrt_status s = tbcrt__registry_add(r, &hip_ops, &info, drv, (void *)(intptr_t)ordinal);
	if (s.code != TBCRT_OK) tbcrt__gpu_lib_release(&drv->lib);
	return s;
}

tbcrt_status tbcrt__hip_enumerate(tbcrt_context *c, tbcrt__registry *r) {
	static const char *const libraries[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
	tbcrt_device_info info, later;
	void *dl = tbcrt__driver_open(&info, "hip", TBCRT_DEVICE_HIP, libraries[0], "HIP runtime");
	const char *library = libraries[0];
	for (size_t i = 1; !dl && i < sizeof libraries / sizeof *libraries; i++) {
		dl = tbcrt__driver_open(&later, "hip", TBCRT_DEVICE_HIP, libraries[i], "HIP runtime");
		library = libraries[i];
	}
	if (!dl) return tbcrt__registry_add(r, NULL, &info, NULL, NULL); /* the first name's reason */
	hip_driver *drv = tbcrt__gpu_lib_create(c, dl, sizeof *drv);
	if (!drv) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory listing devices");
	drv->library = library;
#define HIP_RESOLVE(ret, name, args)                                                                             \
	if (!(*(void **)&drv->name = dlsym(dl, #name))) {                                                        \
		tbcrt__gpu_lib_release(&drv->lib);                                                               \
		return add_unavailable(r, &info, "%s lacks %s (tbc needs HIP of ROCm 5 or newer)", library, #name); \
	}
	HIP_FUNCTIONS(HIP_RESOLVE)
#undef HIP_RESOLVE
	*(void **)&drv->hipEventCreate = dlsym(dl, "hipEventCreate");
	*(void **)&drv->hipEventRecord = dlsym(dl, "hipEventRecord");
	*(void **)&drv->hipEventSynchronize = dlsym(dl, "hipEventSynchronize");
	*(void **)&drv->hipEventElapsedTime = dlsym(dl, "hipEventElapsedTime");
	*(void **)&drv->hipEventDestroy = dlsym(dl, "hipEventDestroy");
	tbcrt_status s = tbcrt__ok();
	int n = 0;
	const char *call = "hipInit";
	hipError_t err = drv->hipInit(0);
	if (err == hipSuccess) call = "hipDriverGetVersion", err = drv->hipDriverGetVersion(&drv->version);
	if (err == hipSuccess) call = "hipGetDeviceCount", err = drv->hipGetDeviceCount(&n);
	if (err != hipSuccess) {
		tbcrt_status f = hip_fail(drv, err, call);
		s = add_unavailable(r, &info, "%s found, but %s", library, f.message);
	} else if (n <= 0) {
		s = add_unavailable(r, &info, "HIP driver %d (%s) finds no device", drv->version, library);
	}
	for (int i = 0; i < n && s.code == TBCRT_OK; i++) s = add_device(r, drv, i);
	tbcrt__gpu_lib_release(&drv->lib); /* the entries hold it now */
	return s;
}

/* ---- The open device ---- */
typedef struct hip_state {
	const hip_driver *drv;
	int device;
	hipStream_t stream;
	tbcrt__gpu_limits limits;
	char last_kernel[128]; /* launched since the last synchronization */
} hip_state;

typedef struct hip_program {
	hipModule_t module;
	void *image; /* the code object, kept while the module lives */
} hip_program;

typedef struct hip_kernel {
	hipFunction_t f;
	int static_shared;
} hip_kernel;

/* HIP's current device is the calling thread's: set it before each call. */
static tbcrt_status enter(const hip_state *st) {
	hipError_t err = st->drv->hipSetDevice(st->device);
	return err == hipSuccess ? tbcrt__ok() : hip_fail(st->drv, err, "hipSetDevice");
}

#define ENTER(st)                                              \
	do {                                                   \
		tbcrt_status entered_ = enter(st);             \
		if (entered_.code != TBCRT_OK) return entered_; \
	} while (0)

static tbcrt_status hip_open(tbcrt__device *d) {
	const hip_driver *drv = d->native[0];
	hip_state *st = tbcrt__calloc(d->context, 1, sizeof *st);
	if (!st) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory opening the device");
	st->drv = drv;
	st->device = (int)(intptr_t)d->native[1];
	tbcrt_status s = enter(st);
	if (s.code == TBCRT_OK) {
		hipError_t err = drv->hipStreamCreate(&st->stream);
		if (err != hipSuccess) s = hip_fail(drv, err, "hipStreamCreate");
	}
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, st);
		return s;
	}
	for (int i = 0; i < 3; i++) {
		st->limits.max_block[i] = (uint32_t)attribute(drv, st->device, hipDeviceAttributeMaxBlockDimX + i);
		st->limits.max_grid[i] = (uint32_t)attribute(drv, st->device, hipDeviceAttributeMaxGridDimX + i);
		if (!st->limits.max_block[i]) st->limits.max_block[i] = 1;
		if (!st->limits.max_grid[i]) st->limits.max_grid[i] = 1;
	}
	st->limits.max_shared = d->info.local_memory_bytes;
	d->align_bytes = TBCRT_ARENA_ALIGN;
	d->impl = st;
	return tbcrt__ok();
}

static void hip_close(tbcrt__device *d) {
	hip_state *st = d->impl;
	if (enter(st).code == TBCRT_OK) {
		(void)st->drv->hipStreamSynchronize(st->stream);
		(void)st->drv->hipStreamDestroy(st->stream);
	}
	tbcrt__free(d->context, st);
	d->impl = NULL;
}

static void hip_release(tbcrt__device *d) { tbcrt__gpu_lib_release(d->native[0]); }

static void *address(const tbcrt__buffer *b, uint64_t offset) {
	return (void *)(uintptr_t)(tbcrt__gpu_address(b) + offset);
}

static tbcrt_status hip_buffer_alloc(tbcrt__device *d, tbcrt__buffer *b) {
	hip_state *st = d->impl;
	ENTER(st);
	void *p = NULL;
	hipError_t err = st->drv->hipMalloc(&p, b->bytes ? (size_t)b->bytes : 1);
	if (err != hipSuccess) {
		char what[64];
		snprintf(what, sizeof what, "a buffer of %llu bytes", (unsigned long long)b->bytes);
		return tbcrt__wrap(hip_fail(st->drv, err, "hipMalloc"), what);
	}
	b->impl = p;
	return tbcrt__ok();
}

static tbcrt_status hip_buffer_view(tbcrt__device *d, tbcrt__buffer *b) {
	b->impl = address(b->parent, b->offset);
	return tbcrt__ok();
}

static void hip_buffer_free(tbcrt__device *d, tbcrt__buffer *b) {
	hip_state *st = d->impl;
	if (b->parent || !b->impl || enter(st).code != TBCRT_OK) return;
	(void)st->drv->hipFree(b->impl);
}

static tbcrt_status wait_stream(hip_state *st, const char *after) {
	hipError_t err = st->drv->hipStreamSynchronize(st->stream);
	if (err == hipSuccess) {
		st->last_kernel[0] = '\0';
		return tbcrt__ok();
	}
	char call[96];
	snprintf(call, sizeof call, "hipStreamSynchronize%s", after);
	return tbcrt__gpu_after_kernel(hip_fail(st->drv, err, call), st->last_kernel);
}

static tbcrt_status hip_write(tbcrt__device *d, tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes) {
	hip_state *st = d->impl;
	ENTER(st);
	hipError_t err = st->drv->hipMemcpyHtoDAsync(address(b, offset), src, (size_t)bytes, st->stream);
	if (err != hipSuccess)
		return tbcrt__gpu_after_kernel(hip_fail(st->drv, err, "hipMemcpyHtoDAsync"), st->last_kernel);
	return wait_stream(st, " (after a write)");
}

static tbcrt_status hip_read(tbcrt__device *d, const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes) {
	hip_state *st = d->impl;
	ENTER(st);
	hipError_t err = st->drv->hipMemcpyDtoHAsync(dst, address(b, offset), (size_t)bytes, st->stream);
	if (err != hipSuccess)
		return tbcrt__gpu_after_kernel(hip_fail(st->drv, err, "hipMemcpyDtoHAsync"), st->last_kernel);
	return wait_stream(st, " (after a read)");
}

static tbcrt_status hip_copy(tbcrt__device *d, tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
			     uint64_t src_offset, uint64_t bytes) {
	hip_state *st = d->impl;
	ENTER(st);
	hipError_t err =
		st->drv->hipMemcpyDtoDAsync(address(dst, dst_offset), address(src, src_offset), (size_t)bytes, st->stream);
	return err == hipSuccess ? tbcrt__ok() : hip_fail(st->drv, err, "hipMemcpyDtoDAsync");
}

static tbcrt_status hip_program_build(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program *p) {
	hip_state *st = d->impl;
	if (desc->kind != TBCRT__PROGRAM_BINARY)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "program '%s' is %s; a HIP device runs AMDGPU code objects (a binary program)", desc->name,
				  desc->kind == TBCRT__PROGRAM_SOURCE ? "OpenCL C source" : "host code for the CPU");
	hip_program *hp = tbcrt__calloc(d->context, 1, sizeof *hp);
	/* A NUL after the bytes: an ELF does not need it, the tests' text images do. */
	if (hp) hp->image = tbcrt__alloc(d->context, desc->size + 1, 16);
	if (!hp || !hp->image) {
		tbcrt__free(d->context, hp);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory loading program '%s'", desc->name);
	}
	memcpy(hp->image, desc->bytes, desc->size);
	((char *)hp->image)[desc->size] = '\0';
	tbcrt_status s = enter(st);
	if (s.code == TBCRT_OK) {
		hipError_t err = st->drv->hipModuleLoadData(&hp->module, hp->image);
		if (err != hipSuccess) {
			tbcrt_status f = hip_fail(st->drv, err, "hipModuleLoadData");
			bool other_gpu = err == hipErrorNoBinaryForGpu;
			tbcrt_code code = f.code == TBCRT_ERR_NO_MEMORY ? f.code
					  : other_gpu			    ? TBCRT_ERR_UNSUPPORTED_TARGET
									    : TBCRT_ERR_BUILD_FAILED;
			char target[80] = "";
			if (desc->options && desc->options[0]) snprintf(target, sizeof target, " (for %s)", desc->options);
			s = tbcrt__err(code, "program '%s'%s %s: %s", desc->name, target,
				       other_gpu ? "does not run on this GPU" : "failed to load", f.message);
		}
	}
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, hp->image);
		tbcrt__free(d->context, hp);
		return s;
	}
	p->impl = hp;
	return s;
}

static void hip_program_free(tbcrt__device *d, tbcrt__program *p) {
	hip_state *st = d->impl;
	hip_program *hp = p->impl;
	if (!hp) return;
	if (enter(st).code == TBCRT_OK) (void)st->drv->hipModuleUnload(hp->module);
	tbcrt__free(d->context, hp->image);
	tbcrt__free(d->context, hp);
}

static tbcrt_status hip_kernel_create(tbcrt__device *d, tbcrt__program *p, const char *name, tbcrt__kernel *k) {
	hip_state *st = d->impl;
	const hip_program *hp = p->impl;
	hip_kernel *hk = tbcrt__calloc(d->context, 1, sizeof *hk);
	if (!hk) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for kernel '%s'", name);
	tbcrt_status s = enter(st);
	if (s.code == TBCRT_OK) {
		hipError_t err = st->drv->hipModuleGetFunction(&hk->f, hp->module, name);
		int max_threads = 0;
		if (err == hipSuccess)
			err = st->drv->hipFuncGetAttribute(&max_threads, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, hk->f);
		if (err == hipSuccess)
			err = st->drv->hipFuncGetAttribute(&hk->static_shared, HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, hk->f);
		if (err != hipSuccess) {
			char what[256];
			snprintf(what, sizeof what, "kernel '%s' of program '%s'", name, p->name);
			s = tbcrt__wrap(hip_fail(st->drv, err, "hipModuleGetFunction"), what);
		} else if (max_threads > 0 && (uint64_t)max_threads < k->max_group_size) {
			k->max_group_size = (uint64_t)max_threads;
		}
	}
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, hk);
		return s;
	}
	k->impl = hk;
	return s;
}

static void hip_kernel_free(tbcrt__device *d, tbcrt__kernel *k) { tbcrt__free(d->context, k->impl); }

static tbcrt_status hip_launch(tbcrt__device *d, tbcrt__kernel *k, const tbcrt__launch_desc *l) {
	hip_state *st = d->impl;
	hip_kernel *hk = k->impl;
	tbcrt__gpu_launch g;
	tbcrt_status s = tbcrt__gpu_launch_prepare(k, l, &st->limits, &g);
	if (s.code == TBCRT_OK) s = tbcrt__gpu_check_shared(k, (uint64_t)hk->static_shared, g.dynamic_shared, &st->limits);
	if (s.code != TBCRT_OK) return s;
	ENTER(st);
	size_t bytes = g.packed_bytes;
	void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, g.packed, HIP_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
			 HIP_LAUNCH_PARAM_END};
	hipError_t err = st->drv->hipModuleLaunchKernel(hk->f, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1],
							g.block[2], (unsigned)g.dynamic_shared, st->stream, NULL, extra);
	if (err != hipSuccess) return hip_fail(st->drv, err, "hipModuleLaunchKernel");
	tbcrt__copy_string(st->last_kernel, sizeof st->last_kernel, k->name);
	return tbcrt__ok();
}

static tbcrt_status hip_synchronize(tbcrt__device *d) {
	hip_state *st = d->impl;
	ENTER(st);
	return wait_stream(st, "");
}

/* ---- Timing: HIP events on the stream ---- */
static tbcrt_status hip_event_record(tbcrt__device *d, void **out_event) {
	hip_state *st = d->impl;
	const hip_driver *drv = st->drv;
	if (!drv->hipEventCreate || !drv->hipEventRecord || !drv->hipEventSynchronize || !drv->hipEventElapsedTime ||
	    !drv->hipEventDestroy)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "%s lacks the event entry points", drv->library);
	ENTER(st);
	hipEvent_t e = NULL;
	hipError_t err = drv->hipEventCreate(&e);
	if (err != hipSuccess) return hip_fail(drv, err, "hipEventCreate");
	err = drv->hipEventRecord(e, st->stream);
	if (err != hipSuccess) {
		(void)drv->hipEventDestroy(e);
		return hip_fail(drv, err, "hipEventRecord");
	}
	*out_event = e;
	return tbcrt__ok();
}

static tbcrt_status hip_event_elapsed(tbcrt__device *d, void *start, void *end, double *out_ms) {
	hip_state *st = d->impl;
	ENTER(st);
	float ms = 0;
	hipError_t err = st->drv->hipEventSynchronize(end);
	if (err != hipSuccess) return tbcrt__gpu_after_kernel(hip_fail(st->drv, err, "hipEventSynchronize"), st->last_kernel);
	err = st->drv->hipEventElapsedTime(&ms, start, end);
	if (err != hipSuccess) return hip_fail(st->drv, err, "hipEventElapsedTime");
	*out_ms = ms;
	return tbcrt__ok();
}

static void hip_event_free(tbcrt__device *d, void *event) {
	hip_state *st = d->impl;
	if (enter(st).code == TBCRT_OK) (void)st->drv->hipEventDestroy(event);
}

static const tbcrt__device_ops hip_ops = {
	.kind = "hip",
	.open = hip_open,
	.close = hip_close,
	.buffer_alloc = hip_buffer_alloc,
	.buffer_view = hip_buffer_view,
	.buffer_free = hip_buffer_free,
	.write = hip_write,
	.read = hip_read,
	.copy = hip_copy,
	.program_build = hip_program_build,
	.program_free = hip_program_free,
	.kernel_create = hip_kernel_create,
	.kernel_free = hip_kernel_free,
	.launch = hip_launch,
	.synchronize = hip_synchronize,
	.release = hip_release,
	.event_record = hip_event_record,
	.event_elapsed = hip_event_elapsed,
	.event_free = hip_event_free,
};
