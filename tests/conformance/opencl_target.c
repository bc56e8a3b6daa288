/* The conformance harness's `opencl` target: the model lowered as for the
 * CPU, every kernel printed as OpenCL C (codegen/opencl/), the whole program
 * built once for the first OpenCL device, and the host program run by
 * kir_program_run with each kernel launched on that device (buffers copied
 * in before a launch and back after it).  It checks the OpenCL C printer
 * against the ONNX node suite before artifacts carry OpenCL code. */
#define CL_TARGET_OPENCL_VERSION 120
#include "tests/conformance/opencl_target.h"

#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/compile.h"
#include "codegen/lower.h"
#include "codegen/opencl/opencl_c.h"
#include "ir/dtype.h"
#include "ir/ir.h"

typedef struct ocl_kernel {
	const kir_kernel *k;
	char name[80]; /* tbc_<kernel name>: lowering numbers them, so unique */
	tbc_ocl_kernel printed;
	cl_kernel cl;
} ocl_kernel;

typedef struct ocl_run {
	cl_device_id device;
	cl_context context;
	cl_command_queue queue;
	cl_program program;
	int n_kernels;
	ocl_kernel *kernels;
	tbc_tensor *const *in;
	size_t n_in, n_out;
	tbc_tensor **out;
	tbc_code rc;
} ocl_run;

static bool cl_fail(tbc_diags *d, const char *what, cl_int err) {
	tbc_diags_add(d, TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL, "OpenCL: %s failed (error %d)", what, (int)err);
	return false;
}

static bool open_device(ocl_run *r, tbc_diags *d) {
	cl_platform_id platforms[8];
	cl_uint n = 0;
	cl_int err = clGetPlatformIDs(8, platforms, &n);
	if (err != CL_SUCCESS || n == 0) return cl_fail(d, "clGetPlatformIDs (no OpenCL platform)", err);
	for (cl_uint i = 0; i < n && !r->device; i++) {
		cl_uint nd = 0;
		if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &r->device, &nd) != CL_SUCCESS || nd == 0)
			r->device = NULL;
	}
	if (!r->device) return cl_fail(d, "clGetDeviceIDs (no OpenCL device)", CL_DEVICE_NOT_FOUND);
	r->context = clCreateContext(NULL, 1, &r->device, NULL, NULL, &err);
	if (!r->context) return cl_fail(d, "clCreateContext", err);
	r->queue = clCreateCommandQueue(r->context, r->device, 0, &err);
	if (!r->queue) return cl_fail(d, "clCreateCommandQueue", err);
	return true;
}

static void kernel_name(const kir_kernel *k, char *out, size_t size) {
	size_t n = (size_t)snprintf(out, size, "tbc_%s", k->name);
	for (size_t i = 4; i < n && i < size; i++)
		if (!((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') || (out[i] >= '0' && out[i] <= '9')))
			out[i] = '_';
}

/* Prints the kernels into one source and builds it (each kernel once). */
static bool build_program(ocl_run *r, const kir_kernel *const *ks, int n, tbc_diags *d) {
	r->kernels = calloc((size_t)n + 1, sizeof *r->kernels);
	if (!r->kernels) return false;
	char *src = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&src, &size);
	if (!f) return false;
	fputs(tbc_ocl_preamble(), f);
	bool ok = true;
	for (int l = 0; l < n && ok; l++) {
		const kir_kernel *k = ks[l];
		if (!k) continue;
		bool seen = false;
		for (int i = 0; i < r->n_kernels; i++) seen |= r->kernels[i].k == k;
		if (seen) continue;
		ocl_kernel *slot = &r->kernels[r->n_kernels];
		kernel_name(k, slot->name, sizeof slot->name);
		ok = tbc_ocl_print_kernel(k, slot->name, &slot->printed, d);
		if (!ok) break;
		slot->k = k;
		r->n_kernels++;
		fprintf(f, "\n%s", slot->printed.source);
	}
	fclose(f);
	if (!ok) {
		free(src);
		return false;
	}
	if (getenv("TBC_OCL_DUMP")) fputs(src, stderr);
	cl_int err;
	const char *srcs[1] = {src};
	r->program = clCreateProgramWithSource(r->context, 1, srcs, NULL, &err);
	if (!r->program) {
		free(src);
		return cl_fail(d, "clCreateProgramWithSource", err);
	}
	err = clBuildProgram(r->program, 1, &r->device, "-cl-std=CL1.2", NULL, NULL);
	free(src);
	if (err != CL_SUCCESS) {
		size_t n = 0;
		clGetProgramBuildInfo(r->program, r->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
		char *log = malloc(n + 1);
		if (log && clGetProgramBuildInfo(r->program, r->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS) {
			log[n] = 0;
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "OpenCL build failed:\n%.3000s", log);
		}
		free(log);
		return false;
	}
	for (int i = 0; i < r->n_kernels; i++) {
		r->kernels[i].cl = clCreateKernel(r->program, r->kernels[i].name, &err);
		if (!r->kernels[i].cl) return cl_fail(d, "clCreateKernel", err);
	}
	return true;
}

static size_t elem_bytes(tbc_dtype t) { return t == KIR_INDEX ? 8 : tbc_dtype_size(t); }

static bool launch(void *ctx, const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	ocl_run *r = ctx;
	ocl_kernel *ok = NULL;
	for (int i = 0; i < r->n_kernels && !ok; i++)
		if (r->kernels[i].k == k) ok = &r->kernels[i];
	if (!ok) return cl_fail(d, "a kernel the program did not print", CL_INVALID_KERNEL);
	const tbc_ocl_kernel *pk = &ok->printed;
	cl_mem *mems = calloc((size_t)k->n_buffers + 1, sizeof *mems);
	size_t *bytes = calloc((size_t)k->n_buffers + 1, sizeof *bytes);
	cl_mem status = NULL;
	bool good = mems && bytes;
	cl_int err = CL_SUCCESS;
	cl_uint arg = 0;
	for (int b = 0; b < k->n_buffers && good; b++) {
		const kir_buffer *kb = k->buffers[b];
		int64_t n = 1;
		for (int i = 0; i < kb->rank && good; i++) {
			int64_t dim;
			good = kir_eval_index(k, kb->dims[i], sizes, &dim, d);
			n *= dim;
		}
		bytes[b] = (size_t)n * elem_bytes(kb->dtype);
		if (!good) break;
		mems[b] = bytes[b] ? clCreateBuffer(r->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes[b], buffers[b], &err)
				   : clCreateBuffer(r->context, CL_MEM_READ_WRITE, 64, NULL, &err);
		good = mems[b] && clSetKernelArg(ok->cl, arg++, sizeof(cl_mem), &mems[b]) == CL_SUCCESS;
		if (!good) cl_fail(d, "a buffer argument", err);
	}
	for (int s = 0; s < k->n_sizes && good; s++) {
		cl_long v = sizes[s];
		good = clSetKernelArg(ok->cl, arg++, sizeof v, &v) == CL_SUCCESS;
	}
	if (good && pk->has_status) {
		cl_int zero = 0;
		status = clCreateBuffer(r->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero, &err);
		good = status && clSetKernelArg(ok->cl, arg++, sizeof(cl_mem), &status) == CL_SUCCESS;
	}
	size_t global = 1;
	if (good && pk->shape == TBC_OCL_GRID) {
		int64_t lo = 0, hi = 0;
		good = kir_eval_index(k, pk->grid_lo, sizes, &lo, d) && kir_eval_index(k, pk->grid_hi, sizes, &hi, d);
		int64_t trips = good && hi > lo ? (hi - lo + pk->grid_step - 1) / pk->grid_step : 0;
		global = trips < 1 ? 1 : trips > 65536 ? 65536 : (size_t)trips;
	}
	if (good) {
		err = clEnqueueNDRangeKernel(r->queue, ok->cl, 1, NULL, &global, NULL, 0, NULL, NULL);
		if (err != CL_SUCCESS) good = cl_fail(d, "clEnqueueNDRangeKernel", err);
	}
	for (int b = 0; b < k->n_buffers && good; b++)
		if (pk->stored[b] && bytes[b]) {
			err = clEnqueueReadBuffer(r->queue, mems[b], CL_TRUE, 0, bytes[b], buffers[b], 0, NULL, NULL);
			if (err != CL_SUCCESS) good = cl_fail(d, "clEnqueueReadBuffer", err);
		}
	if (good && status) {
		cl_int code = 0;
		err = clEnqueueReadBuffer(r->queue, status, CL_TRUE, 0, sizeof code, &code, 0, NULL, NULL);
		if (err != CL_SUCCESS) good = cl_fail(d, "clEnqueueReadBuffer", err);
		else if (code > 0 && code <= pk->n_messages) {
			tbc_diags_add(d, TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL, "%s", pk->messages[code - 1]);
			good = false;
		}
	}
	if (good) clFinish(r->queue);
	for (int b = 0; mems && b < k->n_buffers; b++)
		if (mems[b]) clReleaseMemObject(mems[b]);
	if (status) clReleaseMemObject(status);
	free(mems);
	free(bytes);
	return good;
}

static bool run_program(const kir_program *p, void *user, tbc_diags *d) {
	ocl_run *r = user;
	const kir_kernel **ks = calloc((size_t)p->n_launches + 1, sizeof *ks);
	for (int l = 0; ks && l < p->n_launches; l++)
		if (p->launches[l].ctl == KIR_CTL_KERNEL) ks[l] = p->launches[l].kernel;
	bool built = ks && open_device(r, d) && build_program(r, ks, p->n_launches, d);
	free(ks);
	if (!built) {
		r->rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_INTERNAL;
		return false;
	}
	kir_kernel_runner runner = {launch, r};
	r->rc = kir_program_run(p, &runner, r->in, r->n_in, r->out, r->n_out, d);
	return r->rc == TBC_OK;
}

static void close_run(ocl_run *r) {
	for (int i = 0; i < r->n_kernels; i++) {
		if (r->kernels[i].cl) clReleaseKernel(r->kernels[i].cl);
		tbc_ocl_kernel_free(&r->kernels[i].printed);
	}
	free(r->kernels);
	if (r->program) clReleaseProgram(r->program);
	if (r->queue) clReleaseCommandQueue(r->queue);
	if (r->context) clReleaseContext(r->context);
}

bool tbc_ocl_available(void) {
	cl_uint n = 0;
	return clGetPlatformIDs(0, NULL, &n) == CL_SUCCESS && n > 0;
}

bool tbc_ocl_eval_kernel(const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	ocl_run r = {.rc = TBC_OK};
	bool ok = open_device(&r, d) && build_program(&r, &k, 1, d) && launch(&r, k, buffers, sizes, d);
	close_run(&r);
	return ok;
}

tbc_code tbc_run_opencl(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			tbc_diags *d) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	ocl_run r = {.in = in, .n_in = n_in, .out = out, .n_out = n_out, .rc = TBC_OK};
	void *data = NULL;
	size_t size = 0;
	tbc_code rc = tbc_codegen(m, NULL, NULL, d, run_program, &r, &data, &size);
	if (rc == TBC_OK) rc = r.rc;
	close_run(&r);
	if (rc != TBC_OK)
		for (size_t i = 0; i < n_out; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	return rc;
}
