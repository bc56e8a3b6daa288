/* The OpenCL device: every device of every platform the ICD loader finds is
 * one registry entry, "opencl:N" in platform order.  Opening one makes a
 * context and an in-order queue for it alone.  Reads and writes block (the
 * host memory may go once they return); launches and device copies are
 * queued, and synchronize (clFinish) reports what they did wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device.h"
#include "cl_loader.h"

typedef struct cl_device_state {
	const tbcrt__cl *cl;
	cl_device_id device;
	cl_context context;
	cl_command_queue queue;
	/* $TBCRT_OPENCL_BUILD_OPTIONS when the device was opened: added to
	 * every program's options (-DTBC_NO_FP64 plays a device without fp64) */
	char extra_options[256];
} cl_device_state;

/* A failed OpenCL call, by the call's name and the error's. */
static tbcrt_status cl_fail(cl_int err, const char *call) {
	char buf[32];
	tbcrt_code code = TBCRT_ERR_DEVICE;
	if (err == CL_OUT_OF_HOST_MEMORY || err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_INVALID_BUFFER_SIZE)
		code = TBCRT_ERR_NO_MEMORY;
	return tbcrt__err(code, "%s failed: %s (%d)", call, tbcrt__cl_error_name(err, buf, sizeof buf), (int)err);
}

static const tbcrt__device_ops opencl_ops;

/* ---- Enumeration ---- */
static void platform_string(const tbcrt__cl *cl, cl_platform_id p, cl_platform_info what, char *buf, size_t size) {
	if (cl->clGetPlatformInfo(p, what, size, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
	buf[size - 1] = '\0';
}

static void device_string(const tbcrt__cl *cl, cl_device_id d, cl_device_info what, char *buf, size_t size) {
	if (cl->clGetDeviceInfo(d, what, size, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
	buf[size - 1] = '\0';
}

/* The value of an integer property; 0 when the query fails. */
static uint64_t device_number(const tbcrt__cl *cl, cl_device_id d, cl_device_info what, size_t bytes) {
	union {
		cl_uint u32;
		cl_ulong u64;
		size_t size;
	} v;
	memset(&v, 0, sizeof v);
	if (cl->clGetDeviceInfo(d, what, bytes, &v, NULL) != CL_SUCCESS) return 0;
	return bytes == sizeof(cl_uint) ? v.u32 : bytes == sizeof(cl_ulong) ? v.u64 : v.size;
}

static bool has_extension(const tbcrt_context *c, const tbcrt__cl *cl, cl_device_id d, const char *ext) {
	size_t size = 0;
	if (cl->clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS || !size) return false;
	char *all = tbcrt__alloc(c, size + 1, 1);
	if (!all) return false;
	bool found = false;
	if (cl->clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, size, all, NULL) == CL_SUCCESS) {
		all[size] = '\0';
		size_t n = strlen(ext);
		for (const char *p = strstr(all, ext); p && !found; p = strstr(p + 1, ext))
			found = (p == all || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0');
	}
	tbcrt__free(c, all);
	return found;
}

static tbcrt_status add_unavailable(tbcrt__registry *r, const char *reason) {
	tbcrt_device_info info;
	memset(&info, 0, sizeof info);
	tbcrt__copy_string(info.name, sizeof info.name, "opencl");
	info.kind = TBCRT_DEVICE_OPENCL;
	tbcrt__copy_string(info.unavailable_reason, sizeof info.unavailable_reason, reason);
	return tbcrt__registry_add(r, &opencl_ops, &info, NULL, NULL);
}

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

tbcrt_status tbcrt__opencl_enumerate(tbcrt_context *c, tbcrt__registry *r) {
	const char *reason;
	const tbcrt__cl *cl = tbcrt__cl_load(&reason);
	if (!cl) return add_unavailable(r, reason);
	cl_platform_id platforms[MAX_PLATFORMS];
	cl_uint n_platforms = 0;
	cl_int err = cl->clGetPlatformIDs(MAX_PLATFORMS, platforms, &n_platforms);
	if (err != CL_SUCCESS || !n_platforms) {
		char buf[32], why[160];
		snprintf(why, sizeof why, "the ICD loader finds no OpenCL platform (%s; see /etc/OpenCL/vendors)",
			 err == CL_SUCCESS ? "none installed" : tbcrt__cl_error_name(err, buf, sizeof buf));
		return add_unavailable(r, why);
	}
	if (n_platforms > MAX_PLATFORMS) n_platforms = MAX_PLATFORMS;
	uint32_t index = 0;
	for (cl_uint p = 0; p < n_platforms; p++) {
		cl_device_id devices[MAX_DEVICES];
		cl_uint n_devices = 0;
		if (cl->clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devices, &n_devices) != CL_SUCCESS)
			continue; /* a platform without devices */
		if (n_devices > MAX_DEVICES) n_devices = MAX_DEVICES;
		for (cl_uint i = 0; i < n_devices; i++) {
			cl_device_id d = devices[i];
			tbcrt_device_info info;
			memset(&info, 0, sizeof info);
			snprintf(info.name, sizeof info.name, "opencl:%u", index++);
			info.kind = TBCRT_DEVICE_OPENCL;
			info.available = true;
			platform_string(cl, platforms[p], CL_PLATFORM_NAME, info.platform_name, sizeof info.platform_name);
			platform_string(cl, platforms[p], CL_PLATFORM_VERSION, info.platform_version,
					sizeof info.platform_version);
			device_string(cl, d, CL_DEVICE_NAME, info.device_name, sizeof info.device_name);
			device_string(cl, d, CL_DEVICE_VENDOR, info.vendor, sizeof info.vendor);
			device_string(cl, d, CL_DEVICE_VERSION, info.version, sizeof info.version);
			device_string(cl, d, CL_DRIVER_VERSION, info.driver_version, sizeof info.driver_version);
			info.compute_units = (uint32_t)device_number(cl, d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cl_uint));
			info.global_memory_bytes = device_number(cl, d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(cl_ulong));
			info.local_memory_bytes = device_number(cl, d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(cl_ulong));
			info.max_alloc_bytes = device_number(cl, d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(cl_ulong));
			info.max_work_group_size = device_number(cl, d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(size_t));
			info.fp16 = has_extension(c, cl, d, "cl_khr_fp16");
			info.fp64 = device_number(cl, d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof(cl_ulong)) != 0 ||
				    has_extension(c, cl, d, "cl_khr_fp64");
			tbcrt_status s = tbcrt__registry_add(r, &opencl_ops, &info, platforms[p], d);
			if (s.code != TBCRT_OK) return s;
		}
	}
	if (!index) return add_unavailable(r, "the OpenCL platforms have no devices");
	return tbcrt__ok();
}

/* ---- The open device ---- */
static tbcrt_status cl_open(tbcrt__device *d) {
	const char *reason;
	const tbcrt__cl *cl = tbcrt__cl_load(&reason);
	cl_device_state *st = tbcrt__calloc(d->context, 1, sizeof *st);
	if (!st) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory opening the device");
	st->cl = cl;
	st->device = d->native[1];
	const char *extra = getenv("TBCRT_OPENCL_BUILD_OPTIONS");
	if (extra && strlen(extra) >= sizeof st->extra_options) {
		tbcrt__free(d->context, st);
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "TBCRT_OPENCL_BUILD_OPTIONS is longer than %zu characters",
				  sizeof st->extra_options - 1);
	}
	if (extra) strcpy(st->extra_options, extra);
	cl_int err;
	cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->native[0], 0};
	st->context = cl->clCreateContext(props, 1, &st->device, NULL, NULL, &err);
	if (err != CL_SUCCESS) {
		tbcrt__free(d->context, st);
		return cl_fail(err, "clCreateContext");
	}
	st->queue = cl->clCreateCommandQueue(st->context, st->device, 0, &err);
	if (err != CL_SUCCESS) {
		cl->clReleaseContext(st->context);
		tbcrt__free(d->context, st);
		return cl_fail(err, "clCreateCommandQueue");
	}
	/* Sub-buffers must start at CL_DEVICE_MEM_BASE_ADDR_ALIGN (in bits). */
	uint64_t bits = device_number(cl, st->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(cl_uint));
	d->align_bytes = bits / 8 > TBCRT_ARENA_ALIGN ? bits / 8 : TBCRT_ARENA_ALIGN;
	d->impl = st;
	return tbcrt__ok();
}

static void cl_close(tbcrt__device *d) {
	cl_device_state *st = d->impl;
	st->cl->clFinish(st->queue);
	st->cl->clReleaseCommandQueue(st->queue);
	st->cl->clReleaseContext(st->context);
	tbcrt__free(d->context, st);
	d->impl = NULL;
}

static tbcrt_status cl_buffer_alloc(tbcrt__device *d, tbcrt__buffer *b) {
	cl_device_state *st = d->impl;
	cl_int err;
	b->impl = st->cl->clCreateBuffer(st->context, CL_MEM_READ_WRITE, b->bytes ? (size_t)b->bytes : 1, NULL, &err);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clCreateBuffer");
}

static tbcrt_status cl_buffer_view(tbcrt__device *d, tbcrt__buffer *b) {
	cl_device_state *st = d->impl;
	cl_buffer_region region = {(size_t)b->offset, b->bytes ? (size_t)b->bytes : 1};
	cl_int err;
	b->impl = st->cl->clCreateSubBuffer(b->parent->impl, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region,
					    &err);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clCreateSubBuffer");
}

static void cl_buffer_free(tbcrt__device *d, tbcrt__buffer *b) {
	cl_device_state *st = d->impl;
	if (b->impl) st->cl->clReleaseMemObject(b->impl);
}

static tbcrt_status cl_write(tbcrt__device *d, tbcrt__buffer *b, uint64_t offset, const void *src, uint64_t bytes) {
	cl_device_state *st = d->impl;
	cl_int err = st->cl->clEnqueueWriteBuffer(st->queue, b->impl, CL_TRUE, (size_t)offset, (size_t)bytes, src, 0,
						  NULL, NULL);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clEnqueueWriteBuffer");
}

static tbcrt_status cl_read(tbcrt__device *d, const tbcrt__buffer *b, uint64_t offset, void *dst, uint64_t bytes) {
	cl_device_state *st = d->impl;
	cl_int err = st->cl->clEnqueueReadBuffer(st->queue, b->impl, CL_TRUE, (size_t)offset, (size_t)bytes, dst, 0,
						 NULL, NULL);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clEnqueueReadBuffer");
}

static tbcrt_status cl_copy(tbcrt__device *d, tbcrt__buffer *dst, uint64_t dst_offset, const tbcrt__buffer *src,
			    uint64_t src_offset, uint64_t bytes) {
	cl_device_state *st = d->impl;
	cl_int err = st->cl->clEnqueueCopyBuffer(st->queue, src->impl, dst->impl, (size_t)src_offset,
						 (size_t)dst_offset, (size_t)bytes, 0, NULL, NULL);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clEnqueueCopyBuffer");
}

/* The build log, after "program 'name' failed to build (CL_...): ". */
static tbcrt_status build_failure(tbcrt__device *d, cl_program prog, const char *name, cl_int err) {
	cl_device_state *st = d->impl;
	char buf[32];
	tbcrt_status s = tbcrt__err(TBCRT_ERR_BUILD_FAILED, "program '%s' failed to build (%s): ", name,
				    tbcrt__cl_error_name(err, buf, sizeof buf));
	size_t size = 0;
	if (st->cl->clGetProgramBuildInfo(prog, st->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) != CL_SUCCESS)
		return s;
	char *log = tbcrt__alloc(d->context, size + 1, 1);
	if (!log) return s;
	if (st->cl->clGetProgramBuildInfo(prog, st->device, CL_PROGRAM_BUILD_LOG, size, log, NULL) == CL_SUCCESS) {
		log[size] = '\0';
		const char *p = log;
		while (*p == ' ' || *p == '\n') p++;
		size_t at = strlen(s.message);
		tbcrt__copy_string(s.message + at, sizeof s.message - at, *p ? p : "(the build log is empty)");
	}
	tbcrt__free(d->context, log);
	return s;
}

static tbcrt_status cl_program_build(tbcrt__device *d, const tbcrt__program_desc *desc, tbcrt__program *p) {
	cl_device_state *st = d->impl;
	cl_int err = CL_SUCCESS;
	cl_program prog = NULL;
	if (desc->kind == TBCRT__PROGRAM_SOURCE) {
		const char *text = desc->bytes;
		size_t len = desc->size;
		prog = st->cl->clCreateProgramWithSource(st->context, 1, &text, &len, &err);
	} else if (desc->kind == TBCRT__PROGRAM_BINARY) {
		const unsigned char *bin = desc->bytes;
		size_t len = desc->size;
		cl_int bin_status = CL_SUCCESS;
		prog = st->cl->clCreateProgramWithBinary(st->context, 1, &st->device, &len, &bin, &bin_status, &err);
		if (err == CL_SUCCESS && bin_status != CL_SUCCESS) err = bin_status;
		if (err != CL_SUCCESS && prog) st->cl->clReleaseProgram(prog);
	} else {
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "program '%s' is host code for the CPU; an OpenCL device runs OpenCL C or its binaries",
				  desc->name);
	}
	if (err != CL_SUCCESS) {
		tbcrt_status s = cl_fail(err, desc->kind == TBCRT__PROGRAM_SOURCE ? "clCreateProgramWithSource"
										 : "clCreateProgramWithBinary");
		return tbcrt__wrap(s, desc->name);
	}
	char options[512];
	if ((size_t)snprintf(options, sizeof options, "%s%s%s", desc->options ? desc->options : "",
			     st->extra_options[0] ? " " : "", st->extra_options) >= sizeof options) {
		st->cl->clReleaseProgram(prog);
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "program '%s': its build options are too long", desc->name);
	}
	err = st->cl->clBuildProgram(prog, 1, &st->device, options, NULL, NULL);
	if (err != CL_SUCCESS) {
		tbcrt_status s = build_failure(d, prog, desc->name, err);
		st->cl->clReleaseProgram(prog);
		return s;
	}
	p->impl = prog;
	return tbcrt__ok();
}

static void cl_program_free(tbcrt__device *d, tbcrt__program *p) {
	cl_device_state *st = d->impl;
	if (p->impl) st->cl->clReleaseProgram(p->impl);
}

static tbcrt_status cl_kernel_create(tbcrt__device *d, tbcrt__program *p, const char *name, tbcrt__kernel *k) {
	cl_device_state *st = d->impl;
	cl_int err;
	cl_kernel kernel = st->cl->clCreateKernel(p->impl, name, &err);
	if (err != CL_SUCCESS) {
		char what[256];
		snprintf(what, sizeof what, "kernel '%s' of program '%s'", name, p->name);
		return tbcrt__wrap(cl_fail(err, "clCreateKernel"), what);
	}
	size_t group = 0;
	if (st->cl->clGetKernelWorkGroupInfo(kernel, st->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof group, &group, NULL) ==
		    CL_SUCCESS &&
	    group && group < k->max_group_size)
		k->max_group_size = group;
	k->impl = kernel;
	return tbcrt__ok();
}

static void cl_kernel_free(tbcrt__device *d, tbcrt__kernel *k) {
	cl_device_state *st = d->impl;
	if (k->impl) st->cl->clReleaseKernel(k->impl);
}

static tbcrt_status cl_launch(tbcrt__device *d, tbcrt__kernel *k, const tbcrt__launch_desc *l) {
	cl_device_state *st = d->impl;
	for (uint32_t i = 0; i < l->n_args; i++) {
		const tbcrt__arg *a = &l->args[i];
		cl_int err;
		if (a->kind == TBCRT__ARG_BUFFER) err = st->cl->clSetKernelArg(k->impl, i, sizeof(cl_mem), &a->buffer->impl);
		else if (a->kind == TBCRT__ARG_SCALAR) err = st->cl->clSetKernelArg(k->impl, i, a->bytes, a->value);
		else err = st->cl->clSetKernelArg(k->impl, i, a->bytes, NULL);
		if (err != CL_SUCCESS) {
			char what[48];
			snprintf(what, sizeof what, "argument %u", i);
			return tbcrt__wrap(cl_fail(err, "clSetKernelArg"), what);
		}
	}
	size_t global[3], local[3];
	for (uint32_t i = 0; i < l->dims; i++) {
		global[i] = (size_t)l->global[i];
		local[i] = (size_t)l->local[i];
	}
	cl_int err = st->cl->clEnqueueNDRangeKernel(st->queue, k->impl, l->dims, NULL, global, l->local[0] ? local : NULL,
						    0, NULL, NULL);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clEnqueueNDRangeKernel");
}

static tbcrt_status cl_synchronize(tbcrt__device *d) {
	cl_device_state *st = d->impl;
	cl_int err = st->cl->clFinish(st->queue);
	return err == CL_SUCCESS ? tbcrt__ok() : cl_fail(err, "clFinish");
}

static const tbcrt__device_ops opencl_ops = {
	.kind = "opencl",
	.open = cl_open,
	.close = cl_close,
	.buffer_alloc = cl_buffer_alloc,
	.buffer_view = cl_buffer_view,
	.buffer_free = cl_buffer_free,
	.write = cl_write,
	.read = cl_read,
	.copy = cl_copy,
	.program_build = cl_program_build,
	.program_free = cl_program_free,
	.kernel_create = cl_kernel_create,
	.kernel_free = cl_kernel_free,
	.launch = cl_launch,
	.synchronize = cl_synchronize,
};
