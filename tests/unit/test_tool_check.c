/* `tbc check` as a user runs it: targets that agree exit 0 with a table; a
 * node made wrong on the cpu target (the TEST-ONLY --test-perturb) exits 1
 * and --bisect names exactly that node, and nothing when nothing is wrong;
 * a missing --dim, a bad input file, an unknown or unavailable target each
 * stop it with a message naming what is wrong.  The model is
 * examples/models/tiny_cnn.onnx (conv1 relu1 pool1 conv2 relu2 gap flatten
 * fc softmax; batch N symbolic). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/support/need.h"
#include "tests/unit/support/pocl.h"
#include "tests/unit/support/command.h"

/* Runs `tbc check ARGS` (stdout and stderr together); *out_status its exit
 * status. */
/* `tbc check ARGS` run with the environment assignments env before it. */
static char *check_in(const char *env, const char *args, int *out_status) {
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "check %s", args);
	char *out = test_tbc(env, cmd, true, out_status);
	printf("$ tbc check %s\n%s[exit %d]\n", args, out, *out_status);
	return out;
}

static char *check(const char *args, int *out_status) { return check_in("", args, out_status); }

#define HAS(out, text)                                                                          \
	do {                                                                                    \
		if (!strstr((out), (text))) fail_msg("expected \"%s\" in:\n%s", (text), (out)); \
	} while (0)
#define HAS_NOT(out, text)                                                                         \
	do {                                                                                       \
		if (strstr((out), (text))) fail_msg("did not expect \"%s\" in:\n%s", (text), (out)); \
	} while (0)

#define CNN "examples/models/tiny_cnn.onnx"

static void interp_and_cpu_agree_and_it_exits_0(void **state) {
	(void)state;
	int status;
	char *out = check(CNN " --targets interp,cpu --dim N=2 --seed 5", &status);
	assert_int_equal(status, 0);
	HAS(out, "inputs: image f32[2,3,32,32] random (seed 5)");
	HAS(out, "target  output         max abs diff  max rel diff  verdict");
	HAS(out, "interp  probabilities             -             -  reference");
	HAS(out, "cpu     probabilities");
	HAS(out, "  ok\n");
	HAS(out, "result: the targets agree");
	free(out);
	/* --bisect with nothing wrong names nothing. */
	out = check(CNN " --dim N=1 --bisect", &status);
	assert_int_equal(status, 0);
	HAS(out, "bisect: the outputs agree; nothing to look for");
	HAS_NOT(out, "first diverging node");
	free(out);
}

/* The first wrong node, whichever window it falls in and whether or not
 * fusion merges it with its neighbours (relu1 into conv1). */
static void bisect_names_exactly_the_perturbed_node(void **state) {
	(void)state;
	static const char *const cases[][2] = {
		{"conv1", "Conv"}, {"relu1", "Relu"}, {"pool1", "MaxPool"}, {"relu2", "Relu"}, {"softmax", "Softmax"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		for (int chunk = 0; chunk < 2; chunk++) {
			char args[256], want[128];
			snprintf(args, sizeof args, CNN " --dim N=2 --bisect --test-perturb %s%s", cases[i][0],
				 chunk ? " --bisect-chunk 2" : "");
			int status;
			char *out = check(args, &status);
			assert_int_equal(status, 1);
			HAS(out, "result: the targets DIFFER");
			HAS(out, "DIFFERS: 20 of 20 elements");
			HAS(out, "bisect: cpu against interp over 9 nodes");
			snprintf(want, sizeof want, "first diverging node: '%s' (%s), node", cases[i][0], cases[i][1]);
			HAS(out, want);
			HAS(out, "max abs diff 1, ");
			/* One report: the first node only. */
			assert_null(strstr(strstr(out, "first diverging node") + 1, "first diverging node"));
			free(out);
		}
	}
	int status;
	char *out = check(CNN " --dim N=2 --bisect --test-perturb pool1", &status);
	HAS(out, "first diverging node: 'pool1' (MaxPool), node 3 of 9 in execution order\n"
		 "  inputs: r1 f32[2,8,32,32]\n"
		 "  output p1 f32[2,8,16,16]: DIFFERS: 4096 of 4096 elements; max abs diff 1,");
	free(out);
	/* fc's output feeds a softmax over the same axis: one more everywhere
	 * changes nothing, so the targets agree and nothing is named. */
	out = check(CNN " --dim N=2 --bisect --test-perturb fc", &status);
	assert_int_equal(status, 0);
	HAS_NOT(out, "first diverging node");
	free(out);
}

static void a_symbolic_dim_without_dim_is_an_error_naming_the_input_and_the_dim(void **state) {
	(void)state;
	int status;
	char *out = check(CNN, &status);
	assert_int_equal(status, 2);
	HAS(out, "error: input 'image' dim 0 is symbolic ('N'): give its size with --dim N=SIZE");
	free(out);
	out = check(CNN " --dim M=2", &status);
	assert_int_equal(status, 2);
	HAS(out, "--dim M: no input of " CNN " has a symbolic dim of this name");
	free(out);
	out = check(CNN " --dim N=x", &status);
	assert_int_equal(status, 2);
	HAS(out, "--dim N wants a size");
	free(out);
}

static void an_input_file_fixes_the_dims_it_has(void **state) {
	(void)state;
	int status;
	char *out = check(CNN " --input image=examples/models/tiny_cnn.image.npy", &status);
	assert_int_equal(status, 0);
	HAS(out, "inputs: image f32[2,3,32,32] from examples/models/tiny_cnn.image.npy\n");
	free(out);
	out = check(CNN " --input image=examples/models/tiny_cnn.image.npy --dim N=3", &status);
	assert_int_equal(status, 2);
	HAS(out, "error: input 'image' (examples/models/tiny_cnn.image.npy) has N = 2, but --dim gives N = 3");
	free(out);
}

static void a_bad_input_file_is_named(void **state) {
	(void)state;
	int status;
	char *out = check(CNN " --input image=/nonexistent/x.npy", &status);
	assert_int_equal(status, 2);
	HAS(out, "/nonexistent/x.npy");
	free(out);
	/* A file that is neither .npy nor a TensorProto: the model itself. */
	out = check(CNN " --input image=" CNN, &status);
	assert_int_equal(status, 2);
	HAS(out, "error: input: " CNN);
	free(out);
	out = check(CNN " --input picture=examples/models/tiny_cnn.image.npy", &status);
	assert_int_equal(status, 2);
	HAS(out, "the model has no input named 'picture'");
	free(out);
	out = check("/nonexistent/model.onnx --dim N=1", &status);
	assert_int_equal(status, 2);
	HAS(out, "/nonexistent/model.onnx");
	free(out);
}

static void an_unknown_target_is_named_and_an_unavailable_one_is_not_a_pass(void **state) {
	(void)state;
	int status;
	char *out = check(CNN " --dim N=1 --targets interp,gpu", &status);
	assert_int_equal(status, 2);
	HAS(out, "unknown target 'gpu' in --targets (known: interp, cpu, opencl)");
	free(out);
	out = check(CNN " --dim N=1 --targets interp", &status);
	assert_int_equal(status, 2);
	HAS(out, "needs two targets or more");
	free(out);
	/* A machine without OpenCL: the runtime finds no ICD loader. */
	out = check_in("TBCRT_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1", CNN " --dim N=1 --targets interp,cpu,opencl", &status);
	assert_int_equal(status, 3);
	HAS(out, "target 'opencl' is not available here");
	HAS_NOT(out, "result:");
	free(out);
	out = check(CNN " --dim N=1 --frobnicate", &status);
	assert_int_equal(status, 2);
	HAS(out, "unknown option '--frobnicate'");
	free(out);
}

/* OpenCL (PoCL here) agrees with the interpreter and the CPU, and a wrong
 * node compiled for OpenCL is named by --bisect.  PoCL's compiler keeps
 * memory to the end of the process, so a sanitizer build of tbc does not
 * look for leaks in these runs (tests/unit/support/pocl.h). */
#define NO_LEAK_CHECK "ASAN_OPTIONS=detect_leaks=0"
static void opencl_agrees_and_bisect_names_a_wrong_node_there(void **state) {
	(void)state;
	tbc_pocl_setup();
	int status;
	char *out = check_in(NO_LEAK_CHECK, CNN " --dim N=2 --targets interp,cpu,opencl", &status);
	if (strstr(out, "target 'opencl' is not available here")) {
		free(out);
		TBC_TEST_NEEDS("an OpenCL device");
	}
	assert_int_equal(status, 0);
	HAS(out, "opencl");
	free(out);
	out = check_in(NO_LEAK_CHECK, CNN " --dim N=2 --targets interp,opencl --test-perturb relu1 --bisect", &status);
	assert_int_equal(status, 1);
	HAS(out, "bisect: opencl against interp over 9 nodes");
	HAS(out, "first diverging node: 'relu1' (Relu), node");
	free(out);
}

/* Bools and integers, made at random (bool 0/1, ints in [0, 10)), from the
 * ONNX node suite when it is there. */
static void bool_and_integer_inputs_are_made_too(void **state) {
	(void)state;
	const char *dir = getenv("TBC_SOURCE_DIR");
	char model[1024];
	snprintf(model, sizeof model, "%s/../shared/onnx-tests/node/test_where_long_example/model.onnx", dir ? dir : ".");
	if (access(model, R_OK) != 0) TBC_TEST_NEEDS("the ONNX node tests (%s)", model);
	char args[1200];
	snprintf(args, sizeof args, "%s --seed 3", model);
	int status;
	char *out = check(args, &status);
	assert_int_equal(status, 0);
	HAS(out, "condition bool[2,2] random, x i64[2,2] random, y i64[2,2] random");
	free(out);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(interp_and_cpu_agree_and_it_exits_0),
		cmocka_unit_test(bisect_names_exactly_the_perturbed_node),
		cmocka_unit_test(a_symbolic_dim_without_dim_is_an_error_naming_the_input_and_the_dim),
		cmocka_unit_test(an_input_file_fixes_the_dims_it_has),
		cmocka_unit_test(a_bad_input_file_is_named),
		cmocka_unit_test(an_unknown_target_is_named_and_an_unavailable_one_is_not_a_pass),
		cmocka_unit_test(opencl_agrees_and_bisect_names_a_wrong_node_there),
		cmocka_unit_test(bool_and_integer_inputs_are_made_too),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
