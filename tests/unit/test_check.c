/* What `tbc check` takes from the compiler library: the main graph's nodes
 * in execution order, copies of a module returning intermediate values
 * (which the compiled code must materialize even inside a fused group),
 * seeded random tensors, the comparison of two tensors, and the TEST-ONLY
 * perturbation of one node (tbc_compile_options.test_perturb_node).  The
 * model is examples/models/tiny_cnn.onnx: conv1, relu1, pool1, conv2,
 * relu2, gap, flatten, fc, softmax, batch N symbolic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbc/tbc.h"

static tbc_module *tiny_cnn(void) {
	char path[512];
	const char *src = getenv("TBC_SOURCE_DIR");
	snprintf(path, sizeof path, "%s/examples/models/tiny_cnn.onnx", src ? src : ".");
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	assert_int_equal(tbc_module_load_onnx(path, d, &m), TBC_OK);
	tbc_diags_destroy(d);
	return m;
}

static tbc_tensor *image(int64_t n, uint64_t seed) {
	int64_t dims[4] = {n, 3, 32, 32};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, 4, dims);
	assert_non_null(t);
	assert_int_equal(tbc_tensor_fill_random(t, seed), TBC_OK);
	return t;
}

static size_t output_named(const tbc_module *m, const char *name) {
	for (size_t i = 0; i < tbc_module_output_count(m); i++)
		if (!strcmp(tbc_module_output_name(m, i), name)) return i;
	fail_msg("no output named %s", name);
	return 0;
}

static void nodes_are_listed_in_execution_order_with_names_ops_and_types(void **state) {
	(void)state;
	tbc_module *m = tiny_cnn();
	static const char *const names[] = {"conv1", "relu1", "pool1", "conv2", "relu2", "gap", "flatten", "fc", "softmax"};
	static const char *const ops[] = {"Conv", "Relu", "MaxPool", "Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"};
	assert_int_equal(tbc_module_node_count(m), 9);
	for (size_t i = 0; i < 9; i++) {
		tbc_node_info info;
		assert_int_equal(tbc_module_node_get(m, i, &info), TBC_OK);
		assert_string_equal(info.name, names[i]);
		assert_string_equal(info.op_type, ops[i]);
	}
	tbc_node_info info;
	assert_int_equal(tbc_module_node_get(m, 9, &info), TBC_ERR_INVALID_ARGUMENT);
	char buf[64], type[128];
	assert_string_equal(tbc_module_node_input_name(m, 0, 0, buf, sizeof buf), "image");
	assert_string_equal(tbc_module_node_input_name(m, 0, 1, buf, sizeof buf), "conv1.w");
	assert_string_equal(tbc_module_node_output_name(m, 2, 0, buf, sizeof buf), "p1");
	assert_null(tbc_module_node_output_name(m, 2, 1, buf, sizeof buf));
	tbc_module_node_input_type(m, 0, 0, type, sizeof type);
	assert_string_equal(type, "f32[N,3,32,32]");
	tbc_module_node_input_type(m, 3, 1, type, sizeof type);
	assert_string_equal(type, "f32[16,8,3,3]");
	int64_t dims[TBC_MAX_RANK];
	const char *syms[TBC_MAX_RANK];
	assert_int_equal(tbc_module_input_shape(m, 0, dims, syms), 4);
	assert_int_equal(dims[0], -1);
	assert_string_equal(syms[0], "N");
	assert_int_equal(dims[1], 3);
	assert_null(syms[1]);
	assert_int_equal(tbc_module_input_shape(m, 1, dims, syms), -1);
	tbc_module_destroy(m);
}

/* relu1 is fused into conv1's loop nest when nothing else reads conv1's
 * result; returned, c1 is materialized, and both targets give it. */
static void exposed_values_come_after_the_outputs_and_match_on_both_targets(void **state) {
	(void)state;
	tbc_module *m = tiny_cnn();
	tbc_diags *d = tbc_diags_create();
	size_t nodes[] = {0, 1, 8}; /* softmax's result is the model's output: not repeated */
	tbc_module *copy = NULL;
	assert_int_equal(tbc_module_expose_nodes(m, nodes, 3, d, &copy), TBC_OK);
	assert_int_equal(tbc_module_output_count(copy), 3);
	assert_string_equal(tbc_module_output_name(copy, 0), "probabilities");
	assert_string_equal(tbc_module_output_name(copy, 1), "c1");
	assert_string_equal(tbc_module_output_name(copy, 2), "r1");
	assert_int_equal(tbc_module_output_count(m), 1); /* the original is left alone */
	tbc_tensor *in = image(2, 7);
	tbc_tensor *want[3] = {NULL}, *got[3] = {NULL};
	assert_int_equal(tbc_interpret(copy, &in, 1, want, 3, d), TBC_OK);
	assert_int_equal(tbc_run_cpu(copy, &in, 1, got, 3, d), TBC_OK);
	for (int i = 0; i < 3; i++) {
		tbc_compare_result r;
		tbc_tensor_compare(got[i], want[i], 1e-4, 1e-5, &r);
		assert_true(r.same_dtype && r.same_shape);
		assert_int_equal(r.n_mismatched, 0);
		tbc_tensor_destroy(want[i]);
		tbc_tensor_destroy(got[i]);
	}
	size_t bad = 9;
	tbc_module *none = NULL;
	assert_int_equal(tbc_module_expose_nodes(m, &bad, 1, d, &none), TBC_ERR_INVALID_ARGUMENT);
	assert_null(none);
	tbc_tensor_destroy(in);
	tbc_module_destroy(copy);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static void random_tensors_are_reproducible_and_in_range_per_dtype(void **state) {
	(void)state;
	int64_t dims[1] = {4096};
	tbc_tensor *a = tbc_tensor_create(TBC_DT_F32, 1, dims), *b = tbc_tensor_create(TBC_DT_F32, 1, dims);
	assert_int_equal(tbc_tensor_fill_random(a, 42), TBC_OK);
	assert_int_equal(tbc_tensor_fill_random(b, 42), TBC_OK);
	assert_memory_equal(a->data, b->data, 4096 * sizeof(float));
	assert_int_equal(tbc_tensor_fill_random(b, 43), TBC_OK);
	assert_memory_not_equal(a->data, b->data, 4096 * sizeof(float));
	float lo = 1, hi = -1;
	for (int i = 0; i < 4096; i++) {
		float v = ((float *)a->data)[i];
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	assert_true(lo >= -1.0f && lo < -0.9f && hi < 1.0f && hi > 0.9f);
	tbc_tensor_destroy(a);
	tbc_tensor_destroy(b);

	static const struct {
		tbc_dtype dt;
		int64_t max; /* largest value expected */
	} ints[] = {{TBC_DT_I64, 9}, {TBC_DT_U8, 9}, {TBC_DT_I8, 9}, {TBC_DT_I4, 7}, {TBC_DT_U2, 3}, {TBC_DT_BOOL, 1}};
	for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
		tbc_tensor *t = tbc_tensor_create(ints[k].dt, 1, dims);
		assert_int_equal(tbc_tensor_fill_random(t, 1), TBC_OK);
		int64_t seen_max = 0;
		for (int i = 0; i < 4096; i++) {
			int64_t v = ints[k].dt == TBC_DT_I64 ? ((int64_t *)t->data)[i]
				    : ints[k].dt == TBC_DT_I8 ? ((int8_t *)t->data)[i]
							     : ((uint8_t *)t->data)[i];
			assert_true(v >= 0 && v <= ints[k].max);
			seen_max = v > seen_max ? v : seen_max;
		}
		assert_int_equal(seen_max, ints[k].max);
		tbc_tensor_destroy(t);
	}
	tbc_tensor *s = tbc_tensor_create(TBC_DT_STRING, 1, dims);
	if (s) assert_int_equal(tbc_tensor_fill_random(s, 1), TBC_ERR_UNSUPPORTED);
	tbc_tensor_destroy(s);
}

static tbc_tensor *f32(int n, const float *v) {
	int64_t dims[1] = {n};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, 1, dims);
	memcpy(t->data, v, (size_t)n * sizeof *v);
	return t;
}

static void compare_reports_differences_nan_patterns_shapes_and_dtypes(void **state) {
	(void)state;
	const float want_v[4] = {1.0f, -2.0f, NAN, 0.0f};
	const float close_v[4] = {1.0005f, -2.0f, NAN, 0.0f};
	const float far_v[4] = {1.0f, -2.5f, 3.0f, 0.0f};
	tbc_tensor *want = f32(4, want_v), *close = f32(4, close_v), *far = f32(4, far_v);
	tbc_compare_result r;
	tbc_tensor_compare(close, want, 1e-3, 0, &r);
	assert_true(r.same_dtype && r.same_shape);
	assert_int_equal(r.n_mismatched, 0);
	assert_int_equal(r.n_nan_both, 1);
	assert_true(fabs(r.max_abs_diff - 0.0005) < 1e-6);
	tbc_tensor_compare(far, want, 1e-3, 1e-5, &r);
	assert_int_equal(r.n_mismatched, 2);
	assert_int_equal(r.n_nan_mismatched, 1);
	assert_int_equal(r.first_mismatch, 1);
	assert_true(r.first_got == -2.5 && r.first_want == -2.0);
	assert_true(fabs(r.max_abs_diff - 0.5) < 1e-9 && fabs(r.max_rel_diff - 0.25) < 1e-9);
	tbc_tensor *short_one = f32(3, want_v);
	tbc_tensor_compare(short_one, want, 1, 1, &r);
	assert_false(r.same_shape);
	int64_t dims[1] = {4};
	tbc_tensor *ints = tbc_tensor_create(TBC_DT_I32, 1, dims), *ints2 = tbc_tensor_create(TBC_DT_I32, 1, dims);
	tbc_tensor_compare(ints, want, 1, 1, &r);
	assert_false(r.same_dtype);
	((int32_t *)ints2->data)[3] = 1; /* integers compare exactly whatever the tolerance */
	tbc_tensor_compare(ints2, ints, 1, 1, &r);
	assert_int_equal(r.n_mismatched, 1);
	assert_int_equal(r.first_mismatch, 3);
	for (tbc_tensor **t = (tbc_tensor *[]){want, close, far, short_one, ints, ints2, NULL}; *t; t++) tbc_tensor_destroy(*t);
}

/* TEST ONLY option: pool1's output is one more on the compiled target,
 * for every reader, and only there. */
static void test_perturb_node_adds_one_to_that_node_only(void **state) {
	(void)state;
	tbc_module *m = tiny_cnn();
	tbc_diags *d = tbc_diags_create();
	size_t nodes[] = {1, 2};
	tbc_module *copy = NULL;
	assert_int_equal(tbc_module_expose_nodes(m, nodes, 2, d, &copy), TBC_OK);
	tbc_tensor *in = image(1, 3);
	tbc_tensor *want[3] = {NULL}, *got[3] = {NULL};
	assert_int_equal(tbc_interpret(copy, &in, 1, want, 3, d), TBC_OK);
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.test_perturb_node = "pool1";
	tbc_jit *jit = NULL;
	assert_int_equal(tbc_jit_compile(copy, &o, d, &jit), TBC_OK);
	assert_int_equal(tbc_abi_run_serial(tbc_jit_descriptor(jit), &in, 1, got, 3, d), TBC_OK);
	size_t r1 = output_named(copy, "r1"), p1 = output_named(copy, "p1");
	tbc_compare_result r;
	tbc_tensor_compare(got[r1], want[r1], 1e-4, 1e-5, &r);
	assert_int_equal(r.n_mismatched, 0);
	for (int64_t i = 0; i < got[p1]->numel; i++)
		assert_true(fabs(((float *)got[p1]->data)[i] - ((float *)want[p1]->data)[i] - 1.0f) < 1e-5);
	tbc_tensor_compare(got[0], want[0], 1e-3, 1e-5, &r);
	assert_true(r.n_mismatched > 0); /* the softmax downstream moved */
	for (int i = 0; i < 3; i++) {
		tbc_tensor_destroy(want[i]);
		tbc_tensor_destroy(got[i]);
	}
	tbc_jit_destroy(jit);

	o.test_perturb_node = "no-such-node";
	assert_int_not_equal(tbc_jit_compile(m, &o, d, &jit), TBC_OK);
	assert_null(jit);
	char msg[512];
	tbc_diag_format(tbc_diags_get(d, tbc_diags_count(d) - 1), msg, sizeof msg);
	assert_non_null(strstr(msg, "no-such-node"));
	tbc_tensor_destroy(in);
	tbc_module_destroy(copy);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nodes_are_listed_in_execution_order_with_names_ops_and_types),
		cmocka_unit_test(exposed_values_come_after_the_outputs_and_match_on_both_targets),
		cmocka_unit_test(random_tensors_are_reproducible_and_in_range_per_dtype),
		cmocka_unit_test(compare_reports_differences_nan_patterns_shapes_and_dtypes),
		cmocka_unit_test(test_perturb_node_adds_one_to_that_node_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
