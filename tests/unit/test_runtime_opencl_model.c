/* OpenCL artifacts (docs/opencl.md): models compiled by tbc with the opencl
 * target -- the launch table and the OpenCL C in the descriptor -- loaded by
 * libtbcrt and run on its OpenCL device against the CPU and the node suite's
 * expected outputs; the device a session runs on, chosen or automatic; clear
 * statuses for a device an artifact has no code for and for a machine with
 * no OpenCL platform; the program cache across loads; a failed check naming
 * its kernel; and malformed tables, refused at load without a crash.
 *
 * No test here uses the JIT: under ASan this program takes full stacks on
 * malloc for PoCL's sake (support/pocl.h), and that unwinder deadlocks with
 * ORC registering its EH frames.  Artifacts are shared objects instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/unit/support/need.h"
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/device_table.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_device.h"
#include "tests/unit/support/files.h"
#include "tests/unit/support/codegen_check.h"
#include "tests/unit/support/command.h"

static void compile(const tbc_module *m, unsigned targets, const char *path) {
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = targets;
	compile_to(m, &o, path);
}

static const char *dense_path(void) {
	static char path[512];
	const char *src = getenv("TBC_SOURCE_DIR");
	snprintf(path, sizeof path, "%s/tests/runtime/dense_relu.onnx", src ? src : ".");
	return path;
}

/* A context whose opencl:0 is there, or the test is skipped (failed in CI). */
static tbcrt_context *ocl_context(uint32_t *out_index) {
	tbcrt_context *c = rt_context(2);
	(void)rt_device_or_skip(c, "opencl:0");
	RT_OK(tbcrt_device_find(c, "opencl:0", out_index));
	return c;
}

/* dense_relu (y = Relu(x W + b), x [N, 64]) for several batches on the
 * session's device against the interpreter. */
static void check_dense(tbcrt_session *s, const tbc_module *m) {
	const int64_t batches[] = {37, 1, 0, 200, 5};
	for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
		int64_t n = batches[b], dims[2] = {n, 64};
		tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
		float *xv = x->data;
		for (int64_t i = 0; i < n * 64; i++) xv[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
		RT_OK(tbcrt_session_bind_input(s, 0, 1, 2, dims, x->data, (size_t)(n * 64 * 4)));
		RT_OK(tbcrt_session_run(s));
		tbcrt_tensor y;
		RT_OK(tbcrt_session_output(s, 0, &y));
		assert_int_equal(y.dims[0], n);
		tbc_tensor *want = NULL;
		tbc_diags *d = tbc_diags_create();
		assert_int_equal(tbc_interpret(m, &x, 1, &want, 1, d), TBC_OK);
		tbc_diags_destroy(d);
		const float *got = y.data, *w = want->data;
		for (int64_t i = 0; i < n * 64; i++)
			if (!(fabsf(got[i] - w[i]) <= 1e-4f + 1e-4f * fabsf(w[i])))
				fail_msg("batch %lld: y[%lld] = %.9g, expected %.9g", (long long)n, (long long)i, got[i], w[i]);
		tbc_tensor_destroy(want);
		tbc_tensor_destroy(x);
	}
}

/* `tbc run` in another process (the ICD loader is opened once per process)
 * with TBCRT_OPENCL_LIBRARY pointing nowhere: an OpenCL-only artifact says
 * this machine has no OpenCL device, and a CPU-only one asked to run on
 * OpenCL says it holds no code for it. */
static char *run_tool(const char *args, int *out_status) {
	return test_tbc("TBCRT_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1", args, false, out_status);
}

static void cpu_and_opencl_artifact_runs_on_both(void **state) {
	(void)state;
	uint32_t ocl;
	tbcrt_context *c = ocl_context(&ocl);
	tbc_module *m = load_onnx(dense_path());
	char so[256];
	snprintf(so, sizeof so, "%s", tmp_path("dense_both.so"));
	compile(m, TBC_TARGETS_CPU | TBC_TARGETS_OPENCL, so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_true(info.cpu_code);
	assert_true(info.opencl_code);
	assert_string_equal(info.device_targets, "opencl");
	/* What it holds, as tbc inspect lists it. */
	tbcrt_device_code_info dc;
	RT_OK(tbcrt_model_device_code(model, 0, &dc));
	assert_string_equal(dc.target, "opencl");
	assert_string_equal(dc.format, "OpenCL C source");
	assert_true(dc.code_bytes > 1000 && dc.n_kernels >= 1 && dc.n_launches >= dc.n_kernels);
	tbcrt_kernel_info ki;
	RT_OK(tbcrt_model_device_kernel(model, 0, 0, &ki));
	assert_true(!strncmp(ki.name, "tbc_k0_", 7) && ki.code_bytes > 0 && ki.code_bytes < dc.code_bytes);
	RT_ERR(tbcrt_model_device_kernel(model, 0, dc.n_kernels, &ki), TBCRT_ERR_INVALID_ARGUMENT, "there is no");
	RT_ERR(tbcrt_model_device_code(model, 1, &dc), TBCRT_ERR_INVALID_ARGUMENT, "holds 1 device code tables");
	char args[600];
	int status;
	snprintf(args, sizeof args, "inspect '%s'", so);
	char *listing = run_tool(args, &status);
	if (status != 0 || !strstr(listing, "opencl: OpenCL C source, ") || !strstr(listing, "tbc_k0_") || !strstr(listing, "cpu: "))
		fail_msg("tbc inspect: status %d:\n%s", status, listing);
	free(listing);
	tbcrt_session *auto_s = NULL;
	RT_OK(tbcrt_session_create(model, &auto_s)); /* CPU code first */
	uint32_t dev = 99;
	RT_OK(tbcrt_session_device(auto_s, &dev));
	assert_int_equal(dev, 0);
	check_dense(auto_s, m);
	tbcrt_session *s = rt_session_on(model, ocl);
	check_dense(s, m);
	tbcrt_session_destroy(s);
	tbcrt_session_destroy(auto_s);

	/* The program cache: a second load of the same artifact, and a second
	 * session, build nothing. */
	tbcrt__device *d = NULL;
	RT_OK(tbcrt__device_get(c, "opencl:0", &d));
	uint64_t builds = tbcrt__device_builds(d);
	tbcrt_model *again = NULL;
	RT_OK(tbcrt_model_load(c, so, &again));
	s = rt_session_on(again, ocl);
	check_dense(s, m);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(again);
	assert_int_equal(tbcrt__device_builds(d), builds);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_module_destroy(m);
}

static void opencl_artifact_refuses_the_cpu_and_cpu_artifact_refuses_opencl(void **state) {
	(void)state;
	uint32_t ocl;
	tbcrt_context *c = ocl_context(&ocl);
	tbc_module *m = load_onnx(dense_path());
	char so[256], cpu_so[256];
	snprintf(so, sizeof so, "%s", tmp_path("dense_ocl.so"));
	snprintf(cpu_so, sizeof cpu_so, "%s", tmp_path("dense_cpu.so"));
	compile(m, TBC_TARGETS_OPENCL, so);
	compile(m, 0, cpu_so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_false(info.cpu_code);
	assert_true(info.opencl_code);
	assert_string_equal(info.cpu_features, "");
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(model, &s)); /* no CPU code: the first OpenCL device */
	uint32_t dev = 99;
	RT_OK(tbcrt_session_device(s, &dev));
	assert_int_equal(dev, ocl);
	check_dense(s, m);
	tbcrt_session_destroy(s);
	tbcrt_session_options o;
	tbcrt_session_options_init(&o);
	o.device = 0;
	s = (tbcrt_session *)1;
	RT_ERR(tbcrt_session_create_with(model, &o, &s), TBCRT_ERR_UNSUPPORTED_TARGET, "holds no CPU code");
	assert_null(s);
	o.device = 1000;
	RT_ERR(tbcrt_session_create_with(model, &o, &s), TBCRT_ERR_INVALID_ARGUMENT, "out of range");
	tbcrt_model_destroy(model);

	RT_OK(tbcrt_model_load(c, cpu_so, &model));
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_true(info.cpu_code);
	assert_false(info.opencl_code);
	o.device = ocl;
	RT_ERR(tbcrt_session_create_with(model, &o, &s), TBCRT_ERR_UNSUPPORTED_TARGET, "holds no code for opencl:0");
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_module_destroy(m);
}

static void no_opencl_platform_is_a_clear_status(void **state) {
	(void)state;
	tbc_module *m = load_onnx(dense_path());
	char so[256], cpu_so[256], x[256], args[2048];
	snprintf(so, sizeof so, "%s", tmp_path("dense_ocl_only.so"));
	snprintf(cpu_so, sizeof cpu_so, "%s", tmp_path("dense_cpu_only.so"));
	snprintf(x, sizeof x, "%s", tmp_path("x.npy"));
	compile(m, TBC_TARGETS_OPENCL, so);
	compile(m, 0, cpu_so);
	tbc_module_destroy(m);
	int64_t dims[2] = {3, 64};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, 2, dims);
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_tensor_write_npy(x, t, d), TBC_OK);
	tbc_diags_destroy(d);
	tbc_tensor_destroy(t);
	int status;
	snprintf(args, sizeof args, "run '%s' --input x='%s' --output-dir '%s'", so, x, tmp_path("out"));
	char *out = run_tool(args, &status);
	if (status != 1 || !strstr(out, "holds code for opencl only, and this machine has no device that runs it: no OpenCL"))
		fail_msg("status %d:\n%s", status, out);
	free(out);
	snprintf(args, sizeof args, "run '%s' --target opencl --input x='%s' --output-dir '%s'", cpu_so, x, tmp_path("out"));
	out = run_tool(args, &status);
	if (status != 1 || !strstr(out, "no OpenCL ICD loader")) fail_msg("status %d:\n%s", status, out);
	free(out);
}

/* Node suite cases compiled for cpu,opencl and run on OpenCL: data-dependent
 * outputs (NonZero, Compress), control flow (If, a Loop, Scan). */
static void run_node_case(tbcrt_context *c, uint32_t ocl, const char *name) {
	char dir[512], path[600];
	snprintf(dir, sizeof dir, "%s/%s", TBCRT_ONNX_TESTS, name);
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	if (access(path, R_OK) != 0) TBC_TEST_NEEDS("the ONNX node suite (%s)", path);
	tbc_module *m = load_onnx(path);
	char so[256];
	(void)tmp_path("");
	snprintf(so, sizeof so, "%s/%s.so", tbc_test_dir, name);
	compile(m, TBC_TARGETS_CPU | TBC_TARGETS_OPENCL, so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_session *s = rt_session_on(model, ocl);
	tbc_diags *d = tbc_diags_create();
	tbc_tensor *inputs[8] = {0};
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	for (uint32_t i = 0; i < info.n_inputs; i++) {
		snprintf(path, sizeof path, "%s/test_data_set_0/input_%u.pb", dir, i);
		assert_int_equal(tbc_tensor_read_file(path, d, &inputs[i], NULL), TBC_OK);
		tbc_tensor *t = inputs[i];
		RT_OK(tbcrt_session_bind_input(s, i, (int32_t)t->dtype, (uint32_t)t->rank, t->dims, t->data,
					       (size_t)t->numel * tbc_dtype_size(t->dtype)));
	}
	for (int run = 0; run < 2; run++) { /* the second run reuses the session's buffers */
		RT_OK(tbcrt_session_run(s));
		for (uint32_t o = 0; o < info.n_outputs; o++) {
			snprintf(path, sizeof path, "%s/test_data_set_0/output_%u.pb", dir, o);
			tbc_tensor *want = NULL;
			assert_int_equal(tbc_tensor_read_file(path, d, &want, NULL), TBC_OK);
			tbcrt_tensor got;
			RT_OK(tbcrt_session_output(s, o, &got));
			assert_int_equal(got.rank, (uint32_t)want->rank);
			for (int k = 0; k < want->rank; k++) assert_int_equal(got.dims[k], want->dims[k]);
			if (want->dtype == TBC_DT_F32) {
				const float *g = got.data, *w = want->data;
				for (int64_t i = 0; i < want->numel; i++)
					if (!(fabsf(g[i] - w[i]) <= 1e-4f + 1e-4f * fabsf(w[i])))
						fail_msg("%s: output %u [%lld] = %g, expected %g", name, o, (long long)i, g[i], w[i]);
			} else {
				assert_memory_equal(got.data, want->data, got.bytes);
			}
			tbc_tensor_destroy(want);
		}
	}
	for (uint32_t i = 0; i < info.n_inputs; i++) tbc_tensor_destroy(inputs[i]);
	tbc_diags_destroy(d);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbc_module_destroy(m);
}

static void node_cases_run_on_opencl(void **state) {
	(void)state;
	uint32_t ocl;
	tbcrt_context *c = ocl_context(&ocl);
	static const char *const cases[] = {"test_add_bcast", "test_gather_0", "test_nonzero_example", "test_compress_0",
					    "test_range_float_type_positive_delta", "test_constantofshape_int_shape_zero",
					    "test_if", "test_loop11", "test_scan9_sum"};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_node_case(c, ocl, cases[i]);
	tbcrt_context_destroy(c);
}

/* A check that fails on the device (ReduceSum told to reduce axis 1 twice)
 * fails the run with the check's message and the kernel's name. */
static void failed_check_names_its_kernel(void **state) {
	(void)state;
	uint32_t ocl;
	tbcrt_context *c = ocl_context(&ocl);
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3");
	tbc_value *axes = values_input(&md, TBC_DT_I64, 2, (const double[]){1, 1});
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_ReduceSum, x, axes));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	char so[256];
	snprintf(so, sizeof so, "%s", tmp_path("repeated_axis.so"));
	compile(md.m, TBC_TARGETS_OPENCL, so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_session *s = rt_session_on(model, ocl);
	for (int i = 0; i < md.n_in; i++) {
		tbc_tensor *t = md.in[i];
		RT_OK(tbcrt_session_bind_input(s, (uint32_t)i, (int32_t)t->dtype, (uint32_t)t->rank, t->dims, t->data,
					       (size_t)t->numel * tbc_dtype_size(t->dtype)));
	}
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_RUN_FAILED, "is repeated");
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_RUN_FAILED, "in kernel tbc_k");
	tbcrt_tensor y;
	RT_ERR(tbcrt_session_output(s, 0, &y), TBCRT_ERR_NOT_READY, "no successful run");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
	tbcrt_context_destroy(c);
}

/* ---- Malformed tables ---- */

/* The source string's words: the table's first three words, then its
 * length; the mutations skip its text (any bytes are a valid string). */
static size_t source_words(const int64_t *w) { return 4 + ((size_t)w[3] + 7) / 8; }

static void malformed_device_tables_are_refused_at_load(void **state) {
	(void)state;
	tbc_module *m = load_onnx(dense_path());
	char so[256];
	snprintf(so, sizeof so, "%s", tmp_path("dense_tables.so"));
	compile(m, TBC_TARGETS_CPU | TBC_TARGETS_OPENCL, so);
	/* The descriptor copied out of the object, its table into the heap:
	 * the runtime then checks it field by field (no segments to hold it to),
	 * which is what a table that lies inside its object gets too. */
	void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(dl);
	void *sym = dlsym(dl, "tbc_model_descriptor");
	assert_non_null(sym);
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &sym, sizeof fn);
	const tbc_abi_model *good = fn();
	assert_non_null(good->device_code);
	size_t n = (size_t)good->device_code_size / 8;
	int64_t *w = malloc(n * 8);
	assert_non_null(w);
	tbc_abi_model desc = *good;
	desc.device_code = w;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *model = NULL;
	memcpy(w, good->device_code, n * 8);
	RT_OK(tbcrt_model_from_descriptor(c, &desc, NULL, &model)); /* the copy itself is good */
	tbcrt_model_destroy(model);

	/* Cut short at every word. */
	for (size_t k = 0; k < n; k++) {
		desc.device_code_size = k * 8;
		tbcrt_status st = tbcrt_model_from_descriptor(c, &desc, NULL, &model);
		if (st.code == TBCRT_OK) fail_msg("a table cut to %zu of %zu words loaded", k, n);
		assert_null(model);
		assert_true(st.message[0] != 0);
	}
	desc.device_code_size = n * 8 + 4;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_INVALID_ARTIFACT, "whole 8-byte words");
	desc.device_code_size = n * 8;
	desc.device_code = NULL;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_INVALID_ARTIFACT, "device code");
	desc.device_code = w;

	/* Every word of the tables set to values a broken or hostile writer
	 * would put there: each load is refused with a message, or loads a
	 * table whose every index is still in range, and then runs on OpenCL
	 * (when there is a device) to a result or a status (ASan watches). */
	uint32_t ocl = 0;
	tbcrt__device *dev = NULL;
	bool have_ocl = tbcrt__device_get(c, "opencl:0", &dev).code == TBCRT_OK &&
			tbcrt_device_find(c, "opencl:0", &ocl).code == TBCRT_OK;
	static float xs[5 * 64];
	const int64_t xdims[2] = {5, 64};
	size_t ran = 0;
	static const int64_t evil[] = {-1, 0, 1, 2, 5, INT32_MAX, (int64_t)1 << 40, INT64_MAX, INT64_MIN};
	size_t refused = 0, loaded = 0;
	for (size_t k = 0; k < n; k++) {
		if (k >= 3 && k < source_words(good->device_code)) continue;
		int64_t keep = w[k];
		for (size_t e = 0; e < sizeof evil / sizeof *evil; e++) {
			if (evil[e] == keep) continue;
			w[k] = evil[e];
			tbcrt_status st = tbcrt_model_from_descriptor(c, &desc, NULL, &model);
			if (st.code == TBCRT_OK) {
				loaded++;
				tbcrt_session_options so;
				tbcrt_session_options_init(&so);
				so.device = ocl;
				tbcrt_session *s = NULL;
				if (have_ocl && tbcrt_session_create_with(model, &so, &s).code == TBCRT_OK &&
				    tbcrt_session_bind_input(s, 0, 1, 2, xdims, xs, sizeof xs).code == TBCRT_OK)
					ran += tbcrt_session_run(s).code == TBCRT_OK;
				tbcrt_session_destroy(s);
				tbcrt_model_destroy(model);
			} else {
				refused++;
				assert_null(model);
				assert_true(st.message[0] != 0);
			}
		}
		w[k] = keep;
	}
	printf("malformed tables: %zu refused, %zu loaded (values the checks allow), %zu of those ran\n", refused,
	       loaded, ran);
	assert_true(refused > loaded);

	/* A few named ones. */
	w[0] ^= 1;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_INVALID_ARTIFACT, "magic");
	w[0] ^= 1;
	w[1] = 99;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_ABI_VERSION, "table version 99");
	w[1] = TBC_ABI_DEVICE_VERSION;
	w[2] = 7;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_UNSUPPORTED_TARGET, "device code of kind 7");
	w[2] = TBC_ABI_DEVICE_OPENCL_C;
	/* A version 2 descriptor carries no device code: its fields are not
	 * read.  Its weights hash is FNV-1a 64 (XXH64 from version 7). */
	uint64_t xxh64 = desc.weights_hash;
	desc.abi_version = 2;
	desc.weights_hash = tbcrt__fnv1a64(desc.weights, desc.weights_size);
	desc.device_code = (const void *)(uintptr_t)1;
	RT_OK(tbcrt_model_from_descriptor(c, &desc, NULL, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_false(info.opencl_code);
	tbcrt_model_destroy(model);
	desc.abi_version = 1;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_ABI_VERSION, "versions 2 to 7");
	desc.abi_version = TBC_ABI_VERSION;
	desc.weights_hash = xxh64;
	desc.device_code = w;
	/* No CPU code and no device code: nothing to run. */
	desc.run = NULL;
	desc.arena_bytes = NULL;
	desc.device_code = NULL;
	desc.device_code_size = 0;
	RT_ERR(tbcrt_model_from_descriptor(c, &desc, NULL, &model), TBCRT_ERR_INVALID_ARTIFACT, "run function is NULL");

	free(w);
	tbcrt_context_destroy(c);
	dlclose(dl);
	tbc_module_destroy(m);
}

int main(void) {
	tbc_pocl_setup();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cpu_and_opencl_artifact_runs_on_both),
		cmocka_unit_test(opencl_artifact_refuses_the_cpu_and_cpu_artifact_refuses_opencl),
		cmocka_unit_test(no_opencl_platform_is_a_clear_status),
		cmocka_unit_test(node_cases_run_on_opencl),
		cmocka_unit_test(failed_check_names_its_kernel),
		cmocka_unit_test(malformed_device_tables_are_refused_at_load),
	};
	return cmocka_run_group_tests(tests, NULL, tbc_test_remove_dir);
}
