/* The CUDA device: the driver API reached only through
 * dlopen("libcuda.so.1"), never linked or included, so a machine without
 * the driver loads libtbcrt and reports "cuda" as unavailable, saying why.
 * Every device the driver finds is one registry entry, "cuda:N".
 *
 * Opening one retains its primary context and makes one non-blocking
 * stream; every call pushes the context and pops it again, since the
 * runtime is called from any thread.  Buffers are cuMemAlloc allocations
 * and views are addresses inside them.  Copies and launches are queued on
 * the stream; a write or a read waits for it (the host memory may go, or
 * is read, when it returns).  A program is PTX text the driver compiles, or
 * a cubin (an ELF object) it loads as it is (cuModuleLoadDataEx takes both,
 * its error log in the status); its build options name the target
 * ("sm_80"), checked against the device's compute capability. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gpu.h"

/* ---- The driver API: the types and entry points used (cuda.h's) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
	CU_STREAM_NON_BLOCKING = 1,
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
	CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2, /* Y 3, Z 4 */
	CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,  /* Y 6, Z 7 */
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
	CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
	CU_JIT_INFO_LOG_BUFFER = 3,
	CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};

#define CU_FUNCTIONS(X)                                                                                         \
	X(CUresult, cuInit, (unsigned flags))                                                                   \
	X(CUresult, cuDriverGetVersion, (int *version))                                                         \
	X(CUresult, cuDeviceGetCount, (int *count))                                                             \
	X(CUresult, cuDeviceGet, (CUdevice * device, int ordinal))                                              \
	X(CUresult, cuDeviceGetName, (char *name, int len, CUdevice dev))                                       \
	X(CUresult, cuDeviceGetAttribute, (int *value, int attrib, CUdevice dev))                               \
	X(CUresult, cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev))                                        \
	X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))                                  \
	X(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                               \
	X(CUresult, cuCtxPushCurrent_v2, (CUcontext ctx))                                                       \
	X(CUresult, cuCtxPopCurrent_v2, (CUcontext * ctx))                                                      \
	X(CUresult, cuStreamCreate, (CUstream * stream, unsigned flags))                                        \
	X(CUresult, cuStreamDestroy_v2, (CUstream stream))                                                      \
	X(CUresult, cuStreamSynchronize, (CUstream stream))                                                     \
	X(CUresult, cuMemAlloc_v2, (CUdeviceptr * ptr, size_t bytes))                                           \
	X(CUresult, cuMemFree_v2, (CUdeviceptr ptr))                                                            \
	X(CUresult, cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))    \
	X(CUresult, cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))          \
	X(CUresult, cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))    \
	X(CUresult, cuModuleLoadDataEx,                                                                         \
	  (CUmodule * module, const void *image, unsigned n, int *options, void **values))                     \
	X(CUresult, cuModuleUnload, (CUmodule module))                                                          \
	X(CUresult, cuModuleGetFunction, (CUfunction * f, CUmodule module, const char *name))                   \
	X(CUresult, cuFuncGetAttribute, (int *value, int attrib, CUfunction f))                                 \
	X(CUresult, cuFuncSetAttribute, (CUfunction f, int attrib, int value))                                  \
	X(CUresult, cuLaunchKernel,                                                                             \
	  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,         \
	   unsigned shared, CUstream stream, void **params, void **extra))                                     \
	X(CUresult, cuGetErrorName, (CUresult err, const char **name))                                          \
	X(CUresult, cuGetErrorString, (CUresult err, const char **text))

typedef struct cu_driver {
	tbcrt__gpu_lib lib; /* first: gpu.h's lifetime */
#define CU_POINTER(ret, name, args) ret(*name) args;
	CU_FUNCTIONS(CU_POINTER)
#undef CU_POINTER
	/* Timing, optional: NULL where the driver lacks them. */
	CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
	CUresult (*cuEventRecord)(CUevent event, CUstream stream);
	CUresult (*cuEventSynchronize)(CUevent event);
	CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
	CUresult (*cuEventDestroy_v2)(CUevent event);
	int version;
} cu_driver;

/* A failed call as a status: out of memory is TBCRT_ERR_NO_MEMORY. */
static tbcrt_status cu_fail(const cu_driver *drv, CUresult err, const char *call) {
	const char *name = NULL, *text = NULL;
	if (drv->cuGetErrorName(err, &name) != CUDA_SUCCESS) name = NULL;
	if (drv->cuGetErrorString(err, &text) != CUDA_SUCCESS) text = NULL;
	return tbcrt__gpu_fail(err == CUDA_ERROR_OUT_OF_MEMORY ? TBCRT_ERR_NO_MEMORY : TBCRT_ERR_DEVICE, call, err, name,
			       text);
}

static const tbcrt__device_ops cuda_ops;

/* ---- Enumeration ---- */
static int attribute(const cu_driver *drv, CUdevice dev, int what) {
	int v = 0;
	return drv->cuDeviceGetAttribute(&v, what, dev) == CUDA_SUCCESS ? v : 0;
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

static tbcrt_status add_device(tbcrt__registry *r, cu_driver *drv, int ordinal) {
	tbcrt_device_info info;
	memset(&info, 0, sizeof info);
	snprintf(info.name, sizeof info.name, "cuda:%d", ordinal);
	info.kind = TBCRT_DEVICE_CUDA;
	CUdevice dev = 0;
	CUresult err = drv->cuDeviceGet(&dev, ordinal);
	if (err != CUDA_SUCCESS) {
		tbcrt_status s = cu_fail(drv, err, "cuDeviceGet");
		return add_unavailable(r, &info, "%s", s.message);
	}
	info.available = true;
	if (drv->cuDeviceGetName(info.device_name, (int)sizeof info.device_name, dev) != CUDA_SUCCESS)
		info.device_name[0] = '\0';
	info.device_name[sizeof info.device_name - 1] = '\0';
	tbcrt__copy_string(info.vendor, sizeof info.vendor, "NVIDIA");
	snprintf(info.version, sizeof info.version, "CUDA driver %d.%d", drv->version / 1000, drv->version % 1000 / 10);
	int major = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	int minor = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
	/* The compute capability as the target tbc compiles for names it. */
	snprintf(info.features, sizeof info.features, "sm_%d%d", major, minor);
	snprintf(info.arch, sizeof info.arch, "sm_%d%d", major, minor);
	info.compute_units = (uint32_t)attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
	size_t total = 0;
	if (drv->cuDeviceTotalMem_v2(&total, dev) != CUDA_SUCCESS) total = 0;
	info.global_memory_bytes = total;
	info.max_alloc_bytes = total;
	int shared = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
	if (!shared) shared = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
	info.local_memory_bytes = (uint64_t)shared;
	info.max_work_group_size = (uint64_t)attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
	info.fp16 = major * 10 + minor >= 53;
	info.fp64 = true;
	tbcrt__gpu_lib_retain(&drv->lib);
	tbcrt_status s = tbcrt__registry_add(r, &cuda_ops, &info, drv, (void *)(intptr_t)dev);
	if (s.code != TBCRT_OK) tbcrt__gpu_lib_release(&drv->lib);
	return s;
}

tbcrt_status tbcrt__cuda_enumerate(tbcrt_context *c, tbcrt__registry *r) {
	tbcrt_device_info info;
	void *dl = tbcrt__driver_open(&info, "cuda", TBCRT_DEVICE_CUDA, "libcuda.so.1", "CUDA driver");
	if (!dl) return tbcrt__registry_add(r, NULL, &info, NULL, NULL);
	cu_driver *drv = tbcrt__gpu_lib_create(c, dl, sizeof *drv);
	if (!drv) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory listing devices");
#define CU_RESOLVE(ret, name, args)                                                                           \
	if (!(*(void **)&drv->name = dlsym(dl, #name))) {                                                     \
		tbcrt__gpu_lib_release(&drv->lib);                                                            \
		return add_unavailable(r, &info, "libcuda.so.1 lacks %s (tbc needs a CUDA driver of 11.0 or newer)", \
				       #name);                                                                \
	}
	CU_FUNCTIONS(CU_RESOLVE)
#undef CU_RESOLVE
	*(void **)&drv->cuEventCreate = dlsym(dl, "cuEventCreate");
	*(void **)&drv->cuEventRecord = dlsym(dl, "cuEventRecord");
	*(void **)&drv->cuEventSynchronize = dlsym(dl, "cuEventSynchronize");
	*(void **)&drv->cuEventDestroy_v2 = dlsym(dl, "cuEventDestroy_v2");
	if (!(*(void **)&drv->cuEventElapsedTime = dlsym(dl, "cuEventElapsedTime")))
		*(void **)&drv->cuEventElapsedTime = dlsym(dl, "cuEventElapsedTime_v2"); /* CUDA 13's name */
	tbcrt_status s = tbcrt__ok();
	CUresult err = drv->cuInit(0);
	int n = 0;
	if (err == CUDA_SUCCESS) err = drv->cuDriverGetVersion(&drv->version);
	if (err == CUDA_SUCCESS) err = drv->cuDeviceGetCount(&n);
	if (err != CUDA_SUCCESS) {
		tbcrt_status f = cu_fail(drv, err, "cuInit");
		s = add_unavailable(r, &info, "libcuda.so.1 found, but %s", f.message);
	} else if (n <= 0) {
		s = add_unavailable(r, &info, "CUDA driver %d.%d finds no device", drv->version / 1000,
				    drv->version % 1000 / 10);
	}
	for (int i = 0; i < n && s.code == TBCRT_OK; i++) s = add_device(r, drv, i);
	tbcrt__gpu_lib_release(&drv->lib); /* the entries hold it now */
	return s;
}

/* ---- The open device ---- */
typedef struct cu_state {
	const cu_driver *drv;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	tbcrt__gpu_limits limits;
	int major, minor;
	char last_kernel[128]; /* launched since the last synchronization */
} cu_state;

typedef struct cu_kernel {
	CUfunction f;
	int static_shared, max_dynamic_shared;
} cu_kernel;

/* Every call runs with the device's primary context current on the calling
 * thread, and leaves the thread as it found it. */
static tbcrt_status enter(const cu_state *st) {
	CUresult err = st->drv->cuCtxPushCurrent_v2(st->ctx);
	return err == CUDA_SUCCESS ? tbcrt__ok() : cu_fail(st->drv, err, "cuCtxPushCurrent_v2");
}

static void leave(const cu_state *st) {
	CUcontext popped;
	(void)st->drv->cuCtxPopCurrent_v2(&popped);
}

#define ENTER(st)                                              \
	do {                                                   \
		tbcrt_status entered_ = enter(st);             \
		if (entered_.code != TBCRT_OK) return entered_; \
	} while (0)

static tbcrt_status cu_open(tbcrt__device *d) {
	const cu_driver *drv = d->native[0];
	cu_state *st = tbcrt__calloc(d->context, 1, sizeof *st);
	if (!st) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory opening the device");
	st->drv = drv;
	st->dev = (CUdevice)(intptr_t)d->native[1];
	CUresult err = drv->cuDevicePrimaryCtxRetain(&st->ctx, st->dev);
	if (err != CUDA_SUCCESS) {
		tbcrt__free(d->context, st);
		return cu_fail(drv, err, "cuDevicePrimaryCtxRetain");
	}
	tbcrt_status s = enter(st);
	if (s.code == TBCRT_OK) {
		err = drv->cuStreamCreate(&st->stream, CU_STREAM_NON_BLOCKING);
		if (err != CUDA_SUCCESS) s = cu_fail(drv, err, "cuStreamCreate");
		leave(st);
	}
	if (s.code != TBCRT_OK) {
		(void)drv->cuDevicePrimaryCtxRelease_v2(st->dev);
		tbcrt__free(d->context, st);
		return s;
	}
	for (int i = 0; i < 3; i++) {
		st->limits.max_block[i] = (uint32_t)attribute(drv, st->dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i);
		st->limits.max_grid[i] = (uint32_t)attribute(drv, st->dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i);
		if (!st->limits.max_block[i]) st->limits.max_block[i] = 1;
		if (!st->limits.max_grid[i]) st->limits.max_grid[i] = 1;
	}
	st->limits.max_shared = d->info.local_memory_bytes;
	st->major = attribute(drv, st->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	st->minor = attribute(drv, st->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
	d->align_bytes = TBCRT_ARENA_ALIGN; /* cuMemAlloc gives 256; the arena's views need 64 */
	d->impl = st;
	return tbcrt__ok();
}

static void cu_close(tbcrt__device *d) {
	cu_state *st = d->impl;
	if (enter(st).code == TBCRT_OK) {
		(void)st->drv->cuStreamSynchronize(st->stream);
		(void)st->drv->cuStreamDestroy_v2(st->stream);
		leave(st);
	}
	(void)st->drv->cuDevicePrimaryCtxRelease_v2(st->dev);
	tbcrt__free(d->context, st);
	d->impl = NULL;
}

static void cu_release(tbcrt__device *d) { tbcrt__gpu_lib_release(d->native[0]); }

static tbcrt_status cu_buffer_alloc(tbcrt__device *d, tbcrt__buffer *b) {
	cu_state *st = d->impl;
	ENTER(st);
	CUdeviceptr p = 0;
	CUresult err = st->drv->cuMemAlloc_v2(&p, b->bytes ? (size_t)b->bytes : 1);
	leave(st);
	if (err != CUDA_SUCCESS) {
		tbcrt_status s = cu_fail(st->drv, err, "cuMemAlloc_v2");
		char what[64];
		snprintf(what, sizeof what, "a buffer of %llu bytes", (unsigned long long)b->bytes);
		return tbcrt__wrap(s, what);
	}
	b->impl = (void *)(uintptr_t)p;
	return tbcrt__ok();
}

static tbcrt_status cu_buffer_view(tbcrt__device *d, tbcrt__buffer *b) {
	b->impl = (void *)(uintptr_t)(tbcrt__gpu_address(b->parent) + b->offset);
	return tbcrt__ok();
}

static void cu_buffer_free(tbcrt__device *d, tbcrt__buffer *b) {
	cu_state *st = d->impl;
	if (b->parent || !b->impl || enter(st).code != TBCRT_OK) return;
	(void)st->drv->cuMemFree_v2((CUdeviceptr)tbcrt__gpu_address(b));
	leave(st);
}

/* Waits for the stream: errors of launches queued before show here. */
static tbcrt_status wait_stream(cu_state *st, const char *after) {
	CUresult err = st->drv->cuStreamSynchronize(st->stream);
	if (err == CUDA_SUCCESS) {
		st->last_kernel[0] = '\0';
		return tbcrt__ok();
	}
	char call[96];
	snprintf(call, sizeof call, "cuStreamSynchronize%s", after);
	return tbcrt__gpu_after_kernel(cu_fail(st->drv, err, call), st->last_kernel);
}

static tbcrt_status cu_write(tbcrt__device *d, tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes) {
	cu_state *st = d->impl;
	ENTER(st);
	CUresult err = st->drv->cuMemcpyHtoDAsync_v2((CUdeviceptr)(tbcrt__gpu_address(b) + offset), src, (size_t)bytes,
						     st->stream);
	tbcrt_status s = err == CUDA_SUCCESS ? wait_stream(st, " (after a write)")
					     : tbcrt__gpu_after_kernel(cu_fail(st->drv, err, "cuMemcpyHtoDAsync_v2"), st->last_kernel);
	leave(st);
	return s;
}

static tbcrt_status cu_read(tbcrt__device *d, const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes) {
	cu_state *st = d->impl;
	ENTER(st);
	CUresult err = st->drv->cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)(tbcrt__gpu_address(b) + offset), (size_t)bytes,
						     st->stream);
	tbcrt_status s = err == CUDA_SUCCESS ? wait_stream(st, " (after a read)")
					     : tbcrt__gpu_after_kernel(cu_fail(st->drv, err, "cuMemcpyDtoHAsync_v2"), st->last_kernel);
	leave(st);
	return s;
}

static tbcrt_status cu_copy(tbcrt__device *d, tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
			    uint64_t src_offset, uint64_t bytes) {
	cu_state *st = d->impl;
	ENTER(st);
	CUresult err = st->drv->cuMemcpyDtoDAsync_v2((CUdeviceptr)(tbcrt__gpu_address(dst) + dst_offset),
						     (CUdeviceptr)(tbcrt__gpu_address(src) + src_offset), (size_t)bytes,
						     st->stream);
	leave(st);
	return err == CUDA_SUCCESS ? tbcrt__ok() : cu_fail(st->drv, err, "cuMemcpyDtoDAsync_v2");
}

/* The target a program's options name ("sm_80", "sm_90a"): false when they
 * name none, which leaves the check to the driver. */
static bool target_of(const char *options, int *major, int *minor, bool *exact) {
	if (!options || strncmp(options, "sm_", 3) != 0) return false;
	char *end;
	long v = strtol(options + 3, &end, 10);
	if (v < 10 || v > 999 || end == options + 3) return false;
	*major = (int)(v / 10);
	*minor = (int)(v % 10);
	*exact = *end == 'a' || *end == 'f'; /* arch-specific features: that capability only */
	return true;
}

#define JIT_LOG_BYTES 8192

static tbcrt_status cu_program_build(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program *p) {
	cu_state *st = d->impl;
	if (desc->kind != TBCRT__PROGRAM_BINARY)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "program '%s' is %s; a CUDA device runs PTX (a binary program)", desc->name,
				  desc->kind == TBCRT__PROGRAM_SOURCE ? "OpenCL C source" : "host code for the CPU");
	int major, minor;
	bool exact;
	/* A cubin (an ELF object) runs on its major's later minors only; PTX
	 * is JIT-compiled for any later capability. */
	bool cubin = desc->size >= 4 && !memcmp(desc->bytes, "\177ELF", 4);
	if (target_of(desc->options, &major, &minor, &exact) &&
	    (exact || cubin ? major != st->major || (exact ? minor != st->minor : minor > st->minor)
			    : major * 10 + minor > st->major * 10 + st->minor))
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "program '%s' is %s for %s, which %s (compute capability %d.%d) cannot run", desc->name,
				  cubin ? "a cubin" : "PTX", desc->options, d->info.device_name, st->major, st->minor);
	/* The driver reads PTX up to a NUL; the table's text has none. */
	char *text = tbcrt__alloc(d->context, desc->size + 1, 1);
	char *logs = tbcrt__alloc(d->context, 2 * JIT_LOG_BYTES, 1);
	if (!text || !logs) {
		tbcrt__free(d->context, text);
		tbcrt__free(d->context, logs);
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory loading program '%s'", desc->name);
	}
	memcpy(text, desc->bytes, desc->size);
	text[desc->size] = '\0';
	char *error_log = logs, *info_log = logs + JIT_LOG_BYTES;
	error_log[0] = info_log[0] = '\0';
	int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
			 CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
	void *values[] = {error_log, (void *)(uintptr_t)JIT_LOG_BYTES, info_log, (void *)(uintptr_t)JIT_LOG_BYTES};
	CUmodule module = NULL;
	tbcrt_status s = enter(st);
	if (s.code == TBCRT_OK) {
		CUresult err = st->drv->cuModuleLoadDataEx(&module, text, 4, options, values);
		leave(st);
		if (err != CUDA_SUCCESS) {
			error_log[JIT_LOG_BYTES - 1] = '\0';
			tbcrt_status f = cu_fail(st->drv, err, "cuModuleLoadDataEx");
			if (err == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
				s = tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
					       "program '%s' is PTX of a newer version than %s (CUDA driver %d.%d) compiles; "
					       "update the driver (%s): ",
					       desc->name, d->info.name, st->drv->version / 1000, st->drv->version % 1000 / 10,
					       f.message);
			else
				s = tbcrt__err(f.code == TBCRT_ERR_NO_MEMORY ? f.code : TBCRT_ERR_BUILD_FAILED,
					       "program '%s' failed to build (%s): ", desc->name, f.message);
			tbcrt__gpu_append_log(&s, error_log);
		}
	}
	tbcrt__free(d->context, text);
	tbcrt__free(d->context, logs);
	if (s.code == TBCRT_OK) p->impl = module;
	return s;
}

static void cu_program_free(tbcrt__device *d, tbcrt__program *p) {
	cu_state *st = d->impl;
	if (!p->impl || enter(st).code != TBCRT_OK) return;
	(void)st->drv->cuModuleUnload(p->impl);
	leave(st);
}

static tbcrt_status cu_kernel_create(tbcrt__device *d, tbcrt__program *p, const char *name, tbcrt__kernel *k) {
	cu_state *st = d->impl;
	cu_kernel *ck = tbcrt__calloc(d->context, 1, sizeof *ck);
	if (!ck) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for kernel '%s'", name);
	tbcrt_status s = enter(st);
	if (s.code == TBCRT_OK) {
		CUresult err = st->drv->cuModuleGetFunction(&ck->f, p->impl, name);
		int max_threads = 0;
		if (err == CUDA_SUCCESS)
			err = st->drv->cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ck->f);
		if (err == CUDA_SUCCESS)
			err = st->drv->cuFuncGetAttribute(&ck->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, ck->f);
		if (err == CUDA_SUCCESS)
			err = st->drv->cuFuncGetAttribute(&ck->max_dynamic_shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
							 ck->f);
		leave(st);
		if (err != CUDA_SUCCESS) {
			char what[256];
			snprintf(what, sizeof what, "kernel '%s' of program '%s'", name, p->name);
			s = tbcrt__wrap(cu_fail(st->drv, err, "cuModuleGetFunction"), what);
		} else if (max_threads > 0 && (uint64_t)max_threads < k->max_group_size) {
			k->max_group_size = (uint64_t)max_threads;
		}
	}
	if (s.code != TBCRT_OK) {
		tbcrt__free(d->context, ck);
		return s;
	}
	k->impl = ck;
	return s;
}

static void cu_kernel_free(tbcrt__device *d, tbcrt__kernel *k) { tbcrt__free(d->context, k->impl); }

static tbcrt_status cu_launch(tbcrt__device *d, tbcrt__kernel *k, const tbcrt__launch_desc *l) {
	cu_state *st = d->impl;
	cu_kernel *ck = k->impl;
	tbcrt__gpu_launch g;
	tbcrt_status s = tbcrt__gpu_launch_prepare(k, l, &st->limits, &g);
	if (s.code == TBCRT_OK) s = tbcrt__gpu_check_shared(k, (uint64_t)ck->static_shared, g.dynamic_shared, &st->limits);
	if (s.code != TBCRT_OK) return s;
	ENTER(st);
	CUresult err = CUDA_SUCCESS;
	const char *call = "cuLaunchKernel";
	/* Past the default (48 KiB) a kernel must ask for its dynamic bytes. */
	if (g.dynamic_shared > (uint64_t)ck->max_dynamic_shared) {
		call = "cuFuncSetAttribute";
		err = st->drv->cuFuncSetAttribute(ck->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						  (int)g.dynamic_shared);
		if (err == CUDA_SUCCESS) ck->max_dynamic_shared = (int)g.dynamic_shared, call = "cuLaunchKernel";
	}
	if (err == CUDA_SUCCESS)
		err = st->drv->cuLaunchKernel(ck->f, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1], g.block[2],
					      (unsigned)g.dynamic_shared, st->stream, g.params, NULL);
	leave(st);
	if (err != CUDA_SUCCESS) return cu_fail(st->drv, err, call);
	tbcrt__copy_string(st->last_kernel, sizeof st->last_kernel, k->name);
	return tbcrt__ok();
}

static tbcrt_status cu_synchronize(tbcrt__device *d) {
	cu_state *st = d->impl;
	ENTER(st);
	tbcrt_status s = wait_stream(st, "");
	leave(st);
	return s;
}

/* ---- Timing: CUDA events on the stream ---- */
static tbcrt_status cu_event_record(tbcrt__device *d, void **out_event) {
	cu_state *st = d->impl;
	const cu_driver *drv = st->drv;
	if (!drv->cuEventCreate || !drv->cuEventRecord || !drv->cuEventSynchronize || !drv->cuEventElapsedTime ||
	    !drv->cuEventDestroy_v2)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET, "libcuda.so.1 lacks the event entry points");
	ENTER(st);
	CUevent e = NULL;
	const char *call = "cuEventCreate";
	CUresult err = drv->cuEventCreate(&e, 0);
	if (err == CUDA_SUCCESS) {
		call = "cuEventRecord";
		err = drv->cuEventRecord(e, st->stream);
		if (err != CUDA_SUCCESS) (void)drv->cuEventDestroy_v2(e);
	}
	leave(st);
	if (err != CUDA_SUCCESS) return cu_fail(drv, err, call);
	*out_event = e;
	return tbcrt__ok();
}

static tbcrt_status cu_event_elapsed(tbcrt__device *d, void *start, void *end, double *out_ms) {
	cu_state *st = d->impl;
	ENTER(st);
	float ms = 0;
	const char *call = "cuEventSynchronize";
	CUresult err = st->drv->cuEventSynchronize(end);
	if (err == CUDA_SUCCESS) call = "cuEventElapsedTime", err = st->drv->cuEventElapsedTime(&ms, start, end);
	leave(st);
	if (err != CUDA_SUCCESS) return tbcrt__gpu_after_kernel(cu_fail(st->drv, err, call), st->last_kernel);
	*out_ms = ms;
	return tbcrt__ok();
}

static void cu_event_free(tbcrt__device *d, void *event) {
	cu_state *st = d->impl;
	if (enter(st).code != TBCRT_OK) return;
	(void)st->drv->cuEventDestroy_v2(event);
	leave(st);
}

static const tbcrt__device_ops cuda_ops = {
	.kind = "cuda",
	.open = cu_open,
	.close = cu_close,
	.buffer_alloc = cu_buffer_alloc,
	.buffer_view = cu_buffer_view,
	.buffer_free = cu_buffer_free,
	.write = cu_write,
	.read = cu_read,
	.copy = cu_copy,
	.program_build = cu_program_build,
	.program_free = cu_program_free,
	.kernel_create = cu_kernel_create,
	.kernel_free = cu_kernel_free,
	.launch = cu_launch,
	.synchronize = cu_synchronize,
	.release = cu_release,
	.event_record = cu_event_record,
	.event_elapsed = cu_event_elapsed,
	.event_free = cu_event_free,
};
