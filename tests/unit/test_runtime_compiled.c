/* libtbcrt on artifacts the compiler writes: a model compiled to a shared
 * object (weights embedded or in a file beside it) and JIT-compiled in
 * memory, loaded and run through the runtime with a symbolic batch on
 * several threads, compared with the reference interpreter; and a few cases
 * of the ONNX node suite against their expected outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/unit/support/need.h"
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "tbc/abi_hash.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_test.h"
#include "tests/unit/support/files.h"

static void compile(const tbc_module *m, tbc_weights_mode weights, const char *path) {
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.weights = weights;
	compile_to(m, &o, path);
}

static void assert_close(const float *got, const float *want, int64_t n, const char *what) {
	for (int64_t i = 0; i < n; i++)
		if (!(fabsf(got[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i])))
			fail_msg("%s[%lld] = %.9g, expected %.9g", what, (long long)i, got[i], want[i]);
}

/* Runs dense_relu (y = Relu(x * W + b), x [N, 64]) through the runtime for
 * a few batch sizes and compares with the interpreter. */
static void check_dense_relu(tbcrt_model *model, const tbc_module *m) {
	tbcrt_tensor_info ti;
	RT_OK(tbcrt_model_input_info(model, 0, &ti));
	assert_string_equal(ti.name, "x");
	assert_int_equal(ti.rank, 2);
	assert_int_equal(ti.dims[0], -1); /* the batch stays symbolic */
	assert_int_equal(ti.dims[1], 64);
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(model, &s));
	const int64_t batches[] = {37, 1, 0, 200};
	for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
		int64_t n = batches[b], dims[2] = {n, 64};
		tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
		float *xv = x->data;
		for (int64_t i = 0; i < n * 64; i++) xv[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
		RT_OK(tbcrt_session_bind_input(s, 0, 1, 2, dims, x->data, (size_t)(n * 64 * 4)));
		RT_OK(tbcrt_session_run(s));
		tbcrt_tensor y;
		RT_OK(tbcrt_session_output(s, 0, &y));
		assert_int_equal(y.rank, 2);
		assert_int_equal(y.dims[0], n);
		assert_int_equal(y.dims[1], 64);
		tbc_tensor *want = NULL;
		tbc_diags *d = tbc_diags_create();
		assert_int_equal(tbc_interpret(m, &x, 1, &want, 1, d), TBC_OK);
		tbc_diags_destroy(d);
		assert_close(y.data, want->data, n * 64, "y");
		tbc_tensor_destroy(want);
		tbc_tensor_destroy(x);
	}
	tbcrt_session_destroy(s);
}

static const char *model_path(void) {
	static char path[512];
	const char *src = getenv("TBC_SOURCE_DIR");
	snprintf(path, sizeof path, "%s/tests/runtime/dense_relu.onnx", src ? src : ".");
	return path;
}

static void compiled_shared_object_runs_like_the_interpreter(void **state) {
	(void)state;
	tbc_module *m = load_onnx(model_path());
	char so[256];
	snprintf(so, sizeof so, "%s", tmp_path("dense.so"));
	compile(m, TBC_WEIGHTS_EMBED, so);
	tbcrt_context *c = rt_context(4);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_false(info.weights_external);
	assert_true(info.weights_bytes >= 2 * 64 * 4);
	check_dense_relu(model, m);
	RT_OK(tbcrt_context_set_thread_count(c, 1));
	check_dense_relu(model, m);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_module_destroy(m);
}

static void compiled_shared_object_with_external_weights_checks_them(void **state) {
	(void)state;
	tbc_module *m = load_onnx(model_path());
	char so[256], weights[300];
	snprintf(so, sizeof so, "%s", tmp_path("dense_ext.so"));
	snprintf(weights, sizeof weights, "%s.weights", so);
	compile(m, TBC_WEIGHTS_EXTERNAL, so);
	tbcrt_context *c = rt_context(2);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_true(info.weights_external);
	check_dense_relu(model, m);
	tbcrt_model_destroy(model);

	/* One flipped byte: the hash catches it. */
	FILE *f = fopen(weights, "r+b");
	assert_non_null(f);
	int ch = fgetc(f);
	fseek(f, 0, SEEK_SET);
	fputc(ch ^ 1, f);
	fclose(f);
	RT_ERR(tbcrt_model_load(c, so, &model), TBCRT_ERR_INVALID_ARTIFACT, "does not match the artifact (XXH64 hash differs)");
	assert_int_equal(unlink(weights), 0);
	RT_ERR(tbcrt_model_load(c, so, &model), TBCRT_ERR_INVALID_ARTIFACT, "cannot be opened");
	tbcrt_context_destroy(c);
	tbc_module_destroy(m);
}

static void jit_compiled_descriptor_runs_through_the_runtime(void **state) {
	(void)state;
	tbc_module *m = load_onnx(model_path());
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	tbc_jit *jit = NULL;
	assert_int_equal(tbc_jit_compile(m, &o, d, &jit), TBC_OK);
	/* ABI 7: the weights hash is XXH64 of the weights as they lie in the
	 * artifact. */
	const tbc_abi_model *desc = tbc_jit_descriptor(jit);
	assert_int_equal(desc->abi_version, 7);
	assert_non_null(desc->weights);
	assert_true(desc->weights_size >= 2 * 64 * 4);
	assert_true(desc->weights_hash == tbc_abi_xxh64(desc->weights, desc->weights_size));
	tbcrt_context *c = rt_context(3);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(jit), NULL, &model));
	check_dense_relu(model, m);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* ---- node suite cases ---- */

static void run_node_case(tbcrt_context *c, const char *name) {
	char dir[512], path[600];
	snprintf(dir, sizeof dir, "%s/%s", TBCRT_ONNX_TESTS, name); /* the suite, where CMake was told it is */
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	if (access(path, R_OK) != 0) TBC_TEST_NEEDS("the ONNX node suite (%s)", path);
	tbc_module *m = load_onnx(path);
	char so[256];
	(void)tmp_path(""); /* makes the folder */
	snprintf(so, sizeof so, "%s/%s.so", tbc_test_dir, name);
	compile(m, TBC_WEIGHTS_EMBED, so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(model, &s));
	tbc_diags *d = tbc_diags_create();
	tbc_tensor *inputs[8] = {0};
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	for (uint32_t i = 0; i < info.n_inputs; i++) {
		snprintf(path, sizeof path, "%s/test_data_set_0/input_%u.pb", dir, i);
		assert_int_equal(tbc_tensor_read_file(path, d, &inputs[i], NULL), TBC_OK);
		tbc_tensor *t = inputs[i];
		size_t bytes = (size_t)t->numel * tbc_dtype_size(t->dtype);
		RT_OK(tbcrt_session_bind_input(s, i, (int32_t)t->dtype, (uint32_t)t->rank, t->dims, t->data, bytes));
	}
	RT_OK(tbcrt_session_run(s));
	for (uint32_t o = 0; o < info.n_outputs; o++) {
		snprintf(path, sizeof path, "%s/test_data_set_0/output_%u.pb", dir, o);
		tbc_tensor *want = NULL;
		assert_int_equal(tbc_tensor_read_file(path, d, &want, NULL), TBC_OK);
		tbcrt_tensor got;
		RT_OK(tbcrt_session_output(s, o, &got));
		assert_int_equal(got.rank, (uint32_t)want->rank);
		for (int k = 0; k < want->rank; k++) assert_int_equal(got.dims[k], want->dims[k]);
		if (want->dtype == TBC_DT_F32) assert_close(got.data, want->data, want->numel, name);
		else assert_memory_equal(got.data, want->data, got.bytes);
		tbc_tensor_destroy(want);
	}
	for (uint32_t i = 0; i < info.n_inputs; i++) tbc_tensor_destroy(inputs[i]);
	tbc_diags_destroy(d);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbc_module_destroy(m);
}

static void node_suite_cases_run_compiled_through_the_runtime(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(2);
	/* The second line: output shapes the model computes while running
	 * (allocated through the runtime's host->alloc), one of them empty.
	 * The third: control flow (If, a Loop gathering rows, Scan), its regions
	 * run by the artifact's run() on the runtime's pool. */
	static const char *const cases[] = {"test_add", "test_add_bcast", "test_relu", "test_sigmoid",
					    "test_abs", "test_mul_bcast", "test_where_example",
					    "test_reshape_negative_dim", "test_expand_dim_changed", "test_unsqueeze_unsorted_axes",
					    "test_range_float_type_positive_delta", "test_constantofshape_int_shape_zero",
					    "test_if", "test_loop11", "test_scan9_sum", "test_range_int32_type_negative_delta_expanded"};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_node_case(c, cases[i]);
	tbcrt_context_destroy(c);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(compiled_shared_object_runs_like_the_interpreter),
		cmocka_unit_test(compiled_shared_object_with_external_weights_checks_them),
		cmocka_unit_test(jit_compiled_descriptor_runs_through_the_runtime),
		cmocka_unit_test(node_suite_cases_run_compiled_through_the_runtime),
	};
	return cmocka_run_group_tests(tests, NULL, tbc_test_remove_dir);
}
