/* The conformance harness's `opencl` target: the model compiled in memory
 * for the opencl target alone (tbc_jit_compile with TBC_TARGETS_OPENCL: a
 * descriptor holding the launch table and the OpenCL C, no CPU code) and
 * run by libtbcrt on the first OpenCL device -- the path of `tbc run
 * --target opencl` and of an artifact's session on opencl:N, so the node
 * suite checks the printer, the table and the runtime's device walk
 * together.  tbc_ocl_eval_kernel still runs one kernel alone over host
 * buffers (tests/unit/test_opencl_c.c). */
#include "tests/conformance/opencl_target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/compile.h"
#include "codegen/lower/lower.h"
#include "codegen/opencl/opencl_c.h"
#include "ir/dtype.h"
#include "ir/ir.h"
#include "runtime/device.h"
#include "runtime/internal.h"

typedef struct ocl_kernel {
	const kir_kernel *k;
	char name[80]; /* tbc_<kernel name>: lowering numbers them, so unique */
	tbc_ocl_kernel printed;
	tbcrt__kernel *kernel;
} ocl_kernel;

typedef struct ocl_run {
	tbcrt_context *context;
	tbcrt__device *device;
	tbcrt__program *program;
	int n_kernels;
	ocl_kernel *kernels;
} ocl_run;

static bool rt_fail(tbc_diags *d, const tbcrt_status *st) {
	tbc_diags_add(d, st->code == TBCRT_ERR_BUILD_FAILED ? TBC_ERR_INTERNAL : TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL,
		      "%s (%s)", st->message, tbcrt_code_name(st->code));
	return false;
}

static bool open_device(ocl_run *r, tbc_diags *d) {
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = 1;
	tbcrt_status st = tbcrt_context_create(&o, &r->context);
	if (st.code == TBCRT_OK) st = tbcrt__device_get(r->context, "opencl:0", &r->device);
	return st.code == TBCRT_OK || rt_fail(d, &st);
}

static void kernel_name(const kir_kernel *k, char *out, size_t size) {
	size_t n = (size_t)snprintf(out, size, "tbc_%s", k->name);
	for (size_t i = 4; i < n && i < size; i++)
		if (!((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') || (out[i] >= '0' && out[i] <= '9')))
			out[i] = '_';
}

/* Prints the kernels into one source and builds it (each kernel once). */
static bool build_program(ocl_run *r, const kir_kernel *const *ks, int n, const char *build_options, tbc_diags *d) {
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
	char options[256];
	snprintf(options, sizeof options, "-cl-std=CL1.2%s%s", build_options ? " " : "", build_options ? build_options : "");
	tbcrt__program_desc desc = {TBCRT__PROGRAM_SOURCE, "model.cl", src, strlen(src), options};
	tbcrt_status st = tbcrt__program_load(r->device, &desc, &r->program);
	free(src);
	if (st.code != TBCRT_OK) return rt_fail(d, &st);
	for (int i = 0; i < r->n_kernels; i++) {
		st = tbcrt__kernel_create(r->program, r->kernels[i].name, &r->kernels[i].kernel);
		if (st.code != TBCRT_OK) return rt_fail(d, &st);
	}
	return true;
}

static size_t elem_bytes(tbc_dtype t) { return t == KIR_INDEX ? 8 : tbc_dtype_size(t); }

static bool launch(void *ctx, const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	ocl_run *r = ctx;
	ocl_kernel *ok = NULL;
	for (int i = 0; i < r->n_kernels && !ok; i++)
		if (r->kernels[i].k == k) ok = &r->kernels[i];
	if (!ok) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "kernel %s was not printed", k->name);
		return false;
	}
	const tbc_ocl_kernel *pk = &ok->printed;
	int n_args = k->n_buffers + k->n_sizes + (pk->plan.can_fail ? 1 : 0);
	tbcrt__buffer **bufs = calloc((size_t)k->n_buffers + 2, sizeof *bufs); /* + status */
	uint64_t *bytes = calloc((size_t)k->n_buffers + 1, sizeof *bytes);
	tbcrt__arg *args = calloc((size_t)n_args + 1, sizeof *args);
	int64_t *scalars = calloc((size_t)k->n_sizes + 1, sizeof *scalars);
	tbcrt_status st = tbcrt__ok();
	bool good = bufs && bytes && args && scalars;
	int a = 0;
	for (int b = 0; b < k->n_buffers && good; b++) {
		const kir_buffer *kb = k->buffers[b];
		int64_t n = 1;
		for (int i = 0; i < kb->rank && good; i++) {
			int64_t dim = 0;
			good = kir_eval_index(k, kb->dims[i], sizes, &dim, d);
			n *= dim;
		}
		bytes[b] = (uint64_t)n * elem_bytes(kb->dtype);
		if (good) st = tbcrt__buffer_alloc(r->device, bytes[b] ? bytes[b] : 64, &bufs[b]);
		if (good && st.code == TBCRT_OK && bytes[b]) st = tbcrt__buffer_write(bufs[b], 0, buffers[b], bytes[b]);
		good = good && st.code == TBCRT_OK;
		args[a++] = (tbcrt__arg){TBCRT__ARG_BUFFER, bufs[b], NULL, 0};
	}
	for (int s = 0; s < k->n_sizes && good; s++) {
		scalars[s] = sizes[s];
		args[a++] = (tbcrt__arg){TBCRT__ARG_SCALAR, NULL, &scalars[s], sizeof scalars[s]};
	}
	tbcrt__buffer *status = NULL;
	int32_t zero = 0;
	if (good && pk->plan.can_fail) {
		st = tbcrt__buffer_alloc(r->device, sizeof zero, &status);
		if (st.code == TBCRT_OK) st = tbcrt__buffer_write(status, 0, &zero, sizeof zero);
		good = st.code == TBCRT_OK;
		args[a++] = (tbcrt__arg){TBCRT__ARG_BUFFER, status, NULL, 0};
	}
	tbcrt__launch_desc l = {.n_args = (uint32_t)a, .args = args};
	good = good && tbc_dev_launch_geometry(k, &pk->plan, sizes, &l.dims, l.global, l.local, d);
	if (good) {
		st = tbcrt__launch(ok->kernel, &l);
		good = st.code == TBCRT_OK;
	}
	for (int b = 0; b < k->n_buffers && good; b++)
		if (pk->plan.stored[b] && bytes[b]) {
			st = tbcrt__buffer_read(bufs[b], 0, buffers[b], bytes[b]);
			good = st.code == TBCRT_OK;
		}
	if (good && status) {
		int32_t code = 0;
		st = tbcrt__buffer_read(status, 0, &code, sizeof code);
		good = st.code == TBCRT_OK;
		if (good && code > 0 && code <= pk->plan.n_messages) {
			tbc_diags_add(d, TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL, "%s", pk->plan.errors[code - 1]->message);
			good = false;
			st = tbcrt__ok();
		}
	}
	if (st.code != TBCRT_OK) rt_fail(d, &st);
	for (int b = 0; bufs && b < k->n_buffers; b++) tbcrt__buffer_free(bufs[b]);
	tbcrt__buffer_free(status);
	free(bufs);
	free(bytes);
	free(args);
	free(scalars);
	return good;
}

static void close_run(ocl_run *r) {
	for (int i = 0; i < r->n_kernels; i++) {
		tbcrt__kernel_destroy(r->kernels[i].kernel);
		tbc_ocl_kernel_free(&r->kernels[i].printed);
	}
	free(r->kernels);
	tbcrt__program_release(r->program);
	tbcrt_context_destroy(r->context); /* closes the device */
}

bool tbc_ocl_available(void) {
	ocl_run r = {0};
	tbc_diags *d = tbc_diags_create();
	bool ok = d && open_device(&r, d);
	close_run(&r);
	tbc_diags_destroy(d);
	return ok;
}

bool tbc_ocl_eval_kernel(const kir_kernel *k, void *const *buffers, const int64_t *sizes, const char *build_options,
			 tbc_diags *d) {
	ocl_run r = {0};
	bool ok = open_device(&r, d) && build_program(&r, &k, 1, build_options, d) && launch(&r, k, buffers, sizes, d);
	close_run(&r);
	return ok;
}

/* Runs the bound session and copies its outputs into new tensors. */
static tbc_code run_session(tbcrt_model *model, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			    tbc_diags *d) {
	tbcrt_context *ctx = model->context;
	tbcrt_session_options so;
	tbcrt_session_options_init(&so);
	tbcrt_session *s = NULL;
	tbcrt_status st = tbcrt_device_find(ctx, "opencl:0", &so.device);
	if (st.code == TBCRT_OK) st = tbcrt_session_create_with(model, &so, &s);
	if (st.code == TBCRT_OK && (n_in != model->n_inputs || n_out != model->n_outputs))
		st = tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "the model takes %u inputs and gives %u outputs", model->n_inputs,
				model->n_outputs);
	for (size_t i = 0; st.code == TBCRT_OK && i < n_in; i++)
		st = tbcrt_session_bind_input(s, (uint32_t)i, (int32_t)in[i]->dtype, (uint32_t)in[i]->rank, in[i]->dims,
					      in[i]->data, (size_t)in[i]->numel * tbc_dtype_size(in[i]->dtype));
	if (st.code == TBCRT_OK) st = tbcrt_session_run(s);
	for (size_t i = 0; st.code == TBCRT_OK && i < n_out; i++) {
		tbcrt_tensor t;
		st = tbcrt_session_output(s, (uint32_t)i, &t);
		if (st.code != TBCRT_OK) break;
		out[i] = tbc_tensor_create((tbc_dtype)t.dtype, (int)t.rank, t.dims);
		if (!out[i]) st = tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		else if (t.bytes) memcpy(out[i]->data, t.data, t.bytes);
	}
	tbcrt_session_destroy(s);
	if (st.code == TBCRT_OK) return TBC_OK;
	/* A failed check is the model's run-time error, as the interpreter's. */
	tbc_diags_add(d, st.code == TBCRT_ERR_RUN_FAILED ? TBC_ERR_RUNTIME : TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL,
		      "%s (%s)", st.message, tbcrt_code_name(st.code));
	return st.code == TBCRT_ERR_RUN_FAILED ? TBC_ERR_RUNTIME : TBC_ERR_INTERNAL;
}

tbc_code tbc_run_opencl(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			tbc_diags *d) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_OPENCL;
	tbc_jit *jit = NULL;
	tbc_code rc = tbc_jit_compile(m, &o, d, &jit);
	tbcrt_context *ctx = NULL;
	tbcrt_model *model = NULL;
	if (rc == TBC_OK) {
		tbcrt_context_options co;
		tbcrt_context_options_init(&co);
		co.thread_count = 1;
		tbcrt_status st = tbcrt_context_create(&co, &ctx);
		if (st.code == TBCRT_OK) st = tbcrt_model_from_descriptor(ctx, tbc_jit_descriptor(jit), NULL, &model);
		if (st.code != TBCRT_OK) {
			rt_fail(d, &st);
			rc = TBC_ERR_INTERNAL;
		}
	}
	if (rc == TBC_OK) rc = run_session(model, in, n_in, out, n_out, d);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	tbc_jit_destroy(jit);
	if (rc != TBC_OK)
		for (size_t i = 0; i < n_out; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	return rc;
}

/* ---- The device's kernels under the evaluator -------------------------------------
 * Each kernel's parallel, vector and grid loops run backwards (kir_eval_with). */
typedef struct eval_run {
	tbc_tensor *const *in;
	size_t n_in;
	tbc_tensor **out;
	size_t n_out;
	tbc_code rc;
} eval_run;

/* Independent iterations backwards: a race a device could hit gives
 * another result than the interpreter's. */
static bool eval_reversed(void *ctx, const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	(void)ctx;
	kir_eval_options o = {.reverse_parallel = true};
	return kir_eval_with(k, buffers, sizes, &o, d);
}

static bool eval_program(const kir_program *p, void *user, tbc_diags *d) {
	eval_run *r = user;
	kir_kernel_runner runner = {eval_reversed, NULL};
	r->rc = kir_program_run(p, &runner, r->in, r->n_in, r->out, r->n_out, d);
	return true;
}

tbc_code tbc_run_device_eval(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			     tbc_diags *d) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	tbc_target_desc desc = tbc_target_desc_opencl_default();
	eval_run r = {in, n_in, out, n_out, TBC_OK};
	tbc_code rc = tbc_codegen_for(m, NULL, &desc, d, eval_program, &r);
	if (rc == TBC_OK) rc = r.rc;
	if (rc != TBC_OK)
		for (size_t i = 0; i < n_out; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	return rc;
}
