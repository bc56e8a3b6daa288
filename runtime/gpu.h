/* What the CUDA and HIP devices share (runtime/cuda/, runtime/hip/): the
 * driver library's lifetime, a failed driver call as a status, OpenCL-style
 * launch geometry turned into a grid of blocks, and kernel arguments laid
 * out the way both drivers take them.  Neither device includes or links a
 * vendor header or library: each declares the few types and entry points it
 * uses and finds them with dlsym (docs/gpu-runtime.md). */
#ifndef TBCRT_GPU_H
#define TBCRT_GPU_H

#include "device.h"

/* The head of a device's table of driver entry points: one per context,
 * shared by the context's entries of that kind (native[0]) and closed
 * (dlclose) when the last of them is freed. */
typedef struct tbcrt__gpu_lib {
	atomic_int refs;
	const tbcrt_context *context;
	void *dl;
} tbcrt__gpu_lib;

/* Allocates bytes (the device's table, tbcrt__gpu_lib first) holding dl,
 * one reference; NULL when out of memory (dl is then closed). */
void *tbcrt__gpu_lib_create(const tbcrt_context *c, void *dl, size_t bytes);
void tbcrt__gpu_lib_retain(tbcrt__gpu_lib *lib);
void tbcrt__gpu_lib_release(tbcrt__gpu_lib *lib);

/* "CALL failed: NAME (TEXT)" as code, the driver's error number after the
 * text when it has no name. */
tbcrt_status tbcrt__gpu_fail(tbcrt_code code, const char *call, int err, const char *name, const char *text);

/* A device's device pointer, held in a tbcrt__buffer's impl. */
static inline uint64_t tbcrt__gpu_address(const tbcrt__buffer *b) { return (uint64_t)(uintptr_t)b->impl; }

/* The block size a launch gets when it leaves the choice to the device
 * (local all 0): the kernels tbc emits for GPUs stride over their index
 * space, so they are correct for any number of threads >= 1. */
#define TBCRT__GPU_DEFAULT_BLOCK 256u
/* Bytes of kernel arguments one launch passes (CUDA's classic limit). */
#define TBCRT__GPU_MAX_PARAM_BYTES 4096u

typedef struct tbcrt__gpu_limits {
	uint32_t max_block[3]; /* threads per block in each dim */
	uint32_t max_grid[3];  /* blocks in each dim */
	uint64_t max_shared;   /* bytes of shared memory (LDS) one block may use, static and dynamic */
} tbcrt__gpu_limits;

/* A launch as the drivers take it. */
typedef struct tbcrt__gpu_launch {
	uint32_t grid[3], block[3];
	/* kernelParams: per argument other than local memory, a pointer to its
	 * value (a buffer's device address, a scalar's bytes). */
	void *params[TBCRT__MAX_ARGS];
	uint32_t n_params;
	uint64_t addresses[TBCRT__MAX_ARGS];
	/* The same arguments as one parameter block (HIP's `extra`): each at a
	 * multiple of its natural alignment (its size's largest power of two
	 * dividing it, at most 16). */
	_Alignas(16) unsigned char packed[TBCRT__GPU_MAX_PARAM_BYTES];
	size_t packed_bytes;
	/* Dynamic shared memory: the TBCRT__ARG_LOCAL arguments' bytes, each
	 * rounded up to 16, in argument order (they are not kernel parameters;
	 * a kernel finds them at those offsets in its dynamic shared memory). */
	uint64_t dynamic_shared;
} tbcrt__gpu_launch;

/* Turns l into grid, blocks and arguments for kernel k: per dim grid =
 * ceil(global / block), capped at the device's limit (the kernels stride
 * over the rest); local all 0 gives blocks of TBCRT__GPU_DEFAULT_BLOCK (at
 * most the kernel's limit) in dim 0.  A block past the device's limits or
 * arguments past TBCRT__GPU_MAX_PARAM_BYTES are TBCRT_ERR_LIMIT naming the
 * kernel and the limit. */
tbcrt_status tbcrt__gpu_launch_prepare(const tbcrt__kernel *k, const tbcrt__launch_desc *l,
				       const tbcrt__gpu_limits *limits, tbcrt__gpu_launch *out);

/* Checks the shared memory a launch needs (the kernel's static bytes and
 * the launch's dynamic ones) against the device's limit per block. */
tbcrt_status tbcrt__gpu_check_shared(const tbcrt__kernel *k, uint64_t static_bytes, uint64_t dynamic_bytes,
				     const tbcrt__gpu_limits *limits);

/* Appends " (after kernel 'NAME', the last one launched)" to an error that
 * may come from a launch earlier on the stream; last may be empty. */
tbcrt_status tbcrt__gpu_after_kernel(tbcrt_status s, const char *last);

/* Copies a driver's log into the status after its message, without
 * leading blank lines; "(the log is empty)" when it is. */
void tbcrt__gpu_append_log(tbcrt_status *s, const char *log);

#endif
