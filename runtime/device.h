/* The device interface: one struct of function pointers per kind of device
 * (the CPU, OpenCL, CUDA, HIP), as QBE's Target or ggml's backend
 * interface.  Private to libtbcrt: applications see only the enumeration in
 * tbc/runtime.h (tbcrt_device_count, tbcrt_device_info).
 *
 * A context holds a registry of the devices of this machine, built on first
 * use: "cpu", "opencl:N" (every device of every OpenCL platform), "cuda:N"
 * and "hip:N" (every device their drivers find), and for a driver that is
 * missing or finds nothing one entry ("opencl", "cuda", "hip") that says why.  A device is opened once per context and shared by the
 * context's users; its calls are serialized by the device's lock.
 *
 * device.c checks every argument (ranges, sizes, work-group shapes) before a
 * device's function sees it, keeps the program cache and the arenas, so a
 * device implements only what differs between devices. */
#ifndef TBCRT_DEVICE_H
#define TBCRT_DEVICE_H

#include "internal.h"

typedef struct tbcrt__device tbcrt__device;
typedef struct tbcrt__buffer tbcrt__buffer;
typedef struct tbcrt__program tbcrt__program;
typedef struct tbcrt__kernel tbcrt__kernel;
typedef struct tbcrt__arena tbcrt__arena;

/* ---- Programs ---- */
typedef enum tbcrt__program_kind {
	TBCRT__PROGRAM_SOURCE = 0, /* OpenCL C text */
	TBCRT__PROGRAM_BINARY = 1, /* a device binary (clGetProgramInfo's CL_PROGRAM_BINARIES, PTX, ...) */
	TBCRT__PROGRAM_HOST = 2    /* the CPU: a table of tbcrt__host_kernel, code already in this process */
} tbcrt__program_kind;

/* The CPU's kernel ABI: called once per work-group, with the group's place
 * in the grid; the function loops over the group's items itself, so a
 * barrier is the end of a loop.  args[i] is the buffer's data for a buffer,
 * a pointer to the value for a scalar, the group's scratch for local memory. */
typedef struct tbcrt__cpu_group {
	uint32_t dims;
	uint64_t group_id[3], local_size[3], global_size[3];
} tbcrt__cpu_group;
typedef void (*tbcrt__cpu_kernel_fn)(const tbcrt__cpu_group *group, void *const *args);
typedef struct tbcrt__host_kernel {
	const char *name;
	tbcrt__cpu_kernel_fn fn;
} tbcrt__host_kernel;

typedef struct tbcrt__program_desc {
	tbcrt__program_kind kind;
	const char *name;    /* for messages: the artifact's or the kernel's name */
	const void *bytes;   /* source text (no NUL needed), a binary, or tbcrt__host_kernel[] */
	size_t size;         /* bytes of it */
	const char *options; /* build options; NULL: none */
} tbcrt__program_desc;

/* ---- Launches ---- */
typedef enum tbcrt__arg_kind {
	TBCRT__ARG_BUFFER = 0,
	TBCRT__ARG_SCALAR = 1, /* bytes of value, copied at launch */
	TBCRT__ARG_LOCAL = 2   /* bytes of work-group local memory */
} tbcrt__arg_kind;

typedef struct tbcrt__arg {
	tbcrt__arg_kind kind;
	const tbcrt__buffer *buffer;
	const void *value;
	size_t bytes;
} tbcrt__arg;

#define TBCRT__MAX_ARGS 64
typedef struct tbcrt__launch_desc {
	uint32_t dims;      /* 1..3 */
	uint64_t global[3]; /* work-items per dim */
	uint64_t local[3];  /* work-group size per dim, dividing global; all 0: the device chooses */
	uint32_t n_args;
	const tbcrt__arg *args;
} tbcrt__launch_desc;

/* ---- What a device implements ----
 * Called with the device locked and arguments already checked. */
typedef struct tbcrt__device_ops {
	const char *kind; /* "cpu", "opencl" */
	/* Opens the device of registry entry info (its handle in info_native). */
	tbcrt_status (*open)(tbcrt__device *d);
	void (*close)(tbcrt__device *d);
	/* A buffer of at least bytes (>= 1), or a view of parent at offset
	 * (aligned to align_bytes); impl is the device's handle. */
	tbcrt_status (*buffer_alloc)(tbcrt__device *d, tbcrt__buffer *b);
	tbcrt_status (*buffer_view)(tbcrt__device *d, tbcrt__buffer *b);
	void (*buffer_free)(tbcrt__device *d, tbcrt__buffer *b);
	tbcrt_status (*write)(tbcrt__device *d, tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes);
	tbcrt_status (*read)(tbcrt__device *d, const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes);
	tbcrt_status (*copy)(tbcrt__device *d, tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
			     uint64_t src_offset, uint64_t bytes);
	tbcrt_status (*program_build)(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program *p);
	void (*program_free)(tbcrt__device *d, tbcrt__program *p);
	tbcrt_status (*kernel_create)(tbcrt__device *d, tbcrt__program *p, const char *name, tbcrt__kernel *k);
	void (*kernel_free)(tbcrt__device *d, tbcrt__kernel *k);
	tbcrt_status (*launch)(tbcrt__device *d, tbcrt__kernel *k, const tbcrt__launch_desc *l);
	tbcrt_status (*synchronize)(tbcrt__device *d);
	/* Optional: frees what enumeration attached to native[] (a driver
	 * library shared by a context's devices), when the registry goes. */
	void (*release)(tbcrt__device *d);
	/* Optional (timing, the GPUs): an event queued after the work queued so
	 * far; the milliseconds from start to end once the device has passed
	 * both (it waits for end); freeing one. */
	tbcrt_status (*event_record)(tbcrt__device *d, void **out_event);
	tbcrt_status (*event_elapsed)(tbcrt__device *d, void *start, void *end, double *out_ms);
	void (*event_free)(tbcrt__device *d, void *event);
} tbcrt__device_ops;

struct tbcrt__device {
	const tbcrt__device_ops *ops;
	tbcrt_context *context;
	tbcrt_device_info info;
	void *native[2];     /* what enumeration found (cl_platform_id, cl_device_id, ...) */
	void *impl;          /* the open device's state */
	uint64_t align_bytes; /* views (arena sub-allocations) start at multiples of this */
	pthread_mutex_t lock;
	struct tbcrt__cache_entry *cache; /* the programs built, newest first */
	uint64_t builds;                  /* programs actually built (not found in the cache) */
};

struct tbcrt__buffer {
	tbcrt__device *device;
	uint64_t bytes;
	const tbcrt__buffer *parent; /* a view's buffer, else NULL */
	uint64_t offset;             /* a view's offset in parent */
	void *impl;                  /* cl_mem; host memory on the CPU */
};

struct tbcrt__program {
	tbcrt__device *device;
	atomic_int refs;
	char *name;
	void *impl;
};

struct tbcrt__kernel {
	tbcrt__program *program;
	char *name;
	void *impl;
	uint64_t max_group_size; /* the most work-items of one group this kernel allows */
};

/* ---- The registry (device.c) ---- */
/* Looks a device up by name ("cpu", "opencl:0", "cuda:0", ...) and opens it
 * if needed; the device lives as long as the context.  A device this machine
 * lacks is TBCRT_ERR_DEVICE_UNAVAILABLE, saying why. */
tbcrt_status tbcrt__device_get(tbcrt_context *c, const char *name, tbcrt__device **out_device);
/* Frees the registry and closes its devices (context.c, at destroy). */
void tbcrt__devices_release(tbcrt_context *c);
/* How many programs the device built rather than found in its cache. */
uint64_t tbcrt__device_builds(tbcrt__device *d);
/* Drops the cache's programs (device_program.c, when the device closes). */
void tbcrt__program_cache_clear(tbcrt__device *d);

tbcrt_status tbcrt__buffer_alloc(tbcrt__device *d, uint64_t bytes, tbcrt__buffer **out_buffer);
void tbcrt__buffer_free(tbcrt__buffer *b);
/* A view of bytes (>= 1) of parent (not itself a view) at offset, a multiple
 * of the device's align_bytes; freed with tbcrt__buffer_free. */
tbcrt_status tbcrt__buffer_view(const tbcrt__buffer *parent, uint64_t offset, uint64_t bytes,
				tbcrt__buffer **out_buffer);
tbcrt_status tbcrt__buffer_write(tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes);
tbcrt_status tbcrt__buffer_read(const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes);
tbcrt_status tbcrt__buffer_copy(tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
				uint64_t src_offset, uint64_t bytes);

/* One buffer a session's values are carved from: alloc hands out views of it
 * while they fit and a buffer of their own otherwise (freed the same way,
 * with tbcrt__buffer_free); reset makes the whole arena free again. */
tbcrt_status tbcrt__arena_create(tbcrt__device *d, uint64_t bytes, tbcrt__arena **out_arena);
tbcrt_status tbcrt__arena_alloc(tbcrt__arena *a, uint64_t bytes, tbcrt__buffer **out_buffer);
void tbcrt__arena_reset(tbcrt__arena *a);
void tbcrt__arena_destroy(tbcrt__arena *a);

/* Builds a program, or returns the one built before from the same bytes,
 * kind and options on this device (the cache).  Release each one loaded. */
tbcrt_status tbcrt__program_load(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program **out_program);
void tbcrt__program_release(tbcrt__program *p);
tbcrt_status tbcrt__kernel_create(tbcrt__program *p, const char *name, tbcrt__kernel **out_kernel);
void tbcrt__kernel_destroy(tbcrt__kernel *k);
/* Queues the kernel; errors it causes may show at the next synchronize. */
tbcrt_status tbcrt__launch(tbcrt__kernel *k, const tbcrt__launch_desc *l);
tbcrt_status tbcrt__device_synchronize(tbcrt__device *d);
/* Timing on the device's own clock (CUDA and HIP events): a mark queued
 * after the work queued so far, and the milliseconds between two marks.
 * TBCRT_ERR_UNSUPPORTED_TARGET on a device that cannot time its work. */
typedef struct tbcrt__event tbcrt__event;
tbcrt_status tbcrt__event_record(tbcrt__device *d, tbcrt__event **out_event);
tbcrt_status tbcrt__event_elapsed(const tbcrt__event *start, const tbcrt__event *end, double *out_ms);
void tbcrt__event_free(tbcrt__event *e);

/* ---- What each device folder provides to the registry ----
 * enumerate appends its devices with tbcrt__registry_add; a driver that is
 * missing adds one entry, unavailable, whose reason says why. */
typedef struct tbcrt__registry tbcrt__registry;
tbcrt_status tbcrt__registry_add(tbcrt__registry *r, const tbcrt__device_ops *ops, const tbcrt_device_info *info,
				 void *native0, void *native1);
tbcrt_status tbcrt__cpu_enumerate(tbcrt_context *c, tbcrt__registry *r);
tbcrt_status tbcrt__opencl_enumerate(tbcrt_context *c, tbcrt__registry *r);
tbcrt_status tbcrt__cuda_enumerate(tbcrt_context *c, tbcrt__registry *r);
tbcrt_status tbcrt__hip_enumerate(tbcrt_context *c, tbcrt__registry *r);

/* Copies src into a fixed-size field, truncating. */
void tbcrt__copy_string(char *dst, size_t size, const char *src);
/* A registry entry for a driver reached by dlopen: info named and of that
 * kind, the library opened; NULL (and info unavailable, saying "no WHAT
 * (dlerror)") when it is not installed. */
void *tbcrt__driver_open(tbcrt_device_info *info, const char *name, tbcrt_device_kind kind, const char *library,
			 const char *what);

#endif
