/* libtbcrt on well-formed artifacts: contexts, loading a shared object and a
 * linked-in descriptor, queries, binding, running with symbolic dims,
 * data-dependent outputs, embedded and external weights, caller-supplied
 * allocators, and the errors a caller gets for wrong inputs.  The artifacts
 * are hand-written C (tests/runtime/), built by runtime/CMakeLists.txt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/runtime/rt_test.h"

const tbc_abi_model *rt_add_descriptor(void);
const tbc_abi_model *rt_nonzero_descriptor(void);
const tbc_abi_model *rt_scale_descriptor(void);
const tbc_abi_model *rt_scale_external_descriptor(void);

static void bind_f32(tbcrt_session *s, uint32_t index, uint32_t rank, const int64_t *dims, const float *data,
		     size_t count) {
	RT_OK(tbcrt_session_bind_input(s, index, 1, rank, dims, data, count * sizeof(float)));
}

/* ---- contexts ---- */

static void context_thread_count_defaults_to_the_cpus_and_can_be_set(void **state) {
	(void)state;
	tbcrt_context *c = NULL;
	RT_OK(tbcrt_context_create(NULL, &c));
	uint32_t n = 0;
	RT_OK(tbcrt_context_thread_count(c, &n));
	assert_int_equal(n, (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
	RT_OK(tbcrt_context_set_thread_count(c, 3));
	RT_OK(tbcrt_context_thread_count(c, &n));
	assert_int_equal(n, 3);
	RT_OK(tbcrt_context_set_thread_count(c, 1));
	RT_OK(tbcrt_context_thread_count(c, &n));
	assert_int_equal(n, 1);
	RT_ERR(tbcrt_context_set_thread_count(c, TBCRT_MAX_THREADS + 1), TBCRT_ERR_LIMIT, "exceeds the limit");
	tbcrt_context_destroy(c);
	tbcrt_context_destroy(NULL);
}

static void counting_free(void *user, void *p);

static void context_create_checks_its_arguments(void **state) {
	(void)state;
	RT_ERR(tbcrt_context_create(NULL, NULL), TBCRT_ERR_INVALID_ARGUMENT, "out_context is NULL");
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.allocator.free = counting_free; /* free without alloc */
	tbcrt_context *c = (tbcrt_context *)&o;
	RT_ERR(tbcrt_context_create(&o, &c), TBCRT_ERR_INVALID_ARGUMENT, "both alloc and free");
	assert_null(c); /* out parameters are cleared first */
	tbcrt_context_options_init(&o);
	o.thread_count = TBCRT_MAX_THREADS + 1;
	RT_ERR(tbcrt_context_create(&o, &c), TBCRT_ERR_LIMIT, "thread count");
}

typedef struct {
	pthread_mutex_t mu;
	long live, total, misaligned;
} counting;

static void *counting_alloc(void *user, size_t bytes, size_t alignment) {
	counting *k = user;
	void *p = NULL;
	if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, bytes) != 0) return NULL;
	pthread_mutex_lock(&k->mu);
	k->live++;
	k->total++;
	k->misaligned += ((uintptr_t)p % alignment) != 0;
	pthread_mutex_unlock(&k->mu);
	return p;
}

static void counting_free(void *user, void *p) {
	counting *k = user;
	if (!p) return;
	pthread_mutex_lock(&k->mu);
	k->live--;
	pthread_mutex_unlock(&k->mu);
	free(p);
}

static void caller_allocator_sees_every_allocation_and_gets_all_back(void **state) {
	(void)state;
	counting k = {.mu = PTHREAD_MUTEX_INITIALIZER};
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = 2;
	o.allocator = (tbcrt_allocator){&k, counting_alloc, counting_free};
	tbcrt_context *c = NULL;
	RT_OK(tbcrt_context_create(&o, &c));
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_nonzero.so"), &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float x[5] = {0, 1, 0, 2, 3};
	int64_t dims[1] = {5};
	bind_f32(s, 0, 1, dims, x, 5);
	RT_OK(tbcrt_session_run(s));
	RT_OK(tbcrt_session_run(s));
	assert_true(k.live > 0);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
	assert_int_equal(k.live, 0);
	assert_true(k.total >= 6);
	assert_int_equal(k.misaligned, 0);
}

/* ---- the add artifact: y = a + b over [N, 4] ---- */

static void check_add(tbcrt_session *s, int64_t n) {
	float *a = malloc((size_t)n * 4 * sizeof *a), *b = malloc((size_t)n * 4 * sizeof *b);
	for (int64_t i = 0; i < n * 4; i++) {
		a[i] = (float)i;
		b[i] = 0.5f * (float)i;
	}
	int64_t dims[2] = {n, 4};
	bind_f32(s, 0, 2, dims, a, (size_t)n * 4);
	bind_f32(s, 1, 2, dims, b, (size_t)n * 4);
	RT_OK(tbcrt_session_run(s));
	tbcrt_tensor y;
	RT_OK(tbcrt_session_output(s, 0, &y));
	assert_int_equal(y.dtype, 1);
	assert_int_equal(y.rank, 2);
	assert_int_equal(y.dims[0], n);
	assert_int_equal(y.dims[1], 4);
	assert_int_equal(y.bytes, (size_t)n * 16);
	const float *yv = y.data;
	for (int64_t i = 0; i < n * 4; i++)
		if (yv[i] != 1.5f * (float)i) fail_msg("y[%lld] = %g, expected %g", (long long)i, yv[i], 1.5 * (double)i);
	int64_t nv = 0;
	RT_OK(tbcrt_session_symbol(s, "N", &nv));
	assert_int_equal(nv, n);
	free(a);
	free(b);
}

static void add_shared_object_describes_its_inputs_and_outputs(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_add.so"), &m));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(m, &info));
	assert_string_equal(info.name, "add");
	assert_string_equal(info.cpu_features, "");
	assert_int_equal(info.n_inputs, 2);
	assert_int_equal(info.n_outputs, 1);
	assert_int_equal(info.n_symbols, 1);
	assert_int_equal(info.weights_bytes, 0);
	tbcrt_tensor_info t;
	RT_OK(tbcrt_model_input_info(m, 1, &t));
	assert_string_equal(t.name, "b");
	assert_int_equal(t.dtype, 1);
	assert_int_equal(t.rank, 2);
	assert_int_equal(t.dims[0], -1); /* symbolic */
	assert_string_equal(t.symbols[0], "N");
	assert_int_equal(t.dims[1], 4);
	assert_null(t.symbols[1]);
	RT_OK(tbcrt_model_output_info(m, 0, &t));
	assert_string_equal(t.name, "y");
	assert_false(t.data_dependent);
	RT_ERR(tbcrt_model_input_info(m, 2, &t), TBCRT_ERR_INVALID_ARGUMENT, "input index 2 is out of range");
	assert_null(t.name);
	uint32_t idx = 9;
	RT_OK(tbcrt_model_find_input(m, "b", &idx));
	assert_int_equal(idx, 1);
	RT_OK(tbcrt_model_find_output(m, "y", &idx));
	assert_int_equal(idx, 0);
	RT_ERR(tbcrt_model_find_input(m, "c", &idx), TBCRT_ERR_INVALID_ARGUMENT, "no input named 'c'");
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void add_shared_object_runs_any_batch_on_any_thread_count(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_add.so"), &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	check_add(s, 3);
	check_add(s, 1);
	check_add(s, 0); /* an empty batch is a valid shape */
	RT_OK(tbcrt_context_set_thread_count(c, 4));
	check_add(s, 1000); /* a bigger arena and output */
	check_add(s, 7);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void add_linked_descriptor_runs_like_the_shared_object(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(2);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, rt_add_descriptor(), NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	check_add(s, 33);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void output_bound_to_caller_memory_receives_the_result(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, rt_add_descriptor(), NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {10, 20, 30, 40, 50, 60, 70, 80}, y[8] = {0};
	int64_t dims[2] = {2, 4};
	bind_f32(s, 0, 2, dims, a, 8);
	bind_f32(s, 1, 2, dims, b, 8);
	RT_OK(tbcrt_session_bind_output(s, 0, y, sizeof y));
	RT_OK(tbcrt_session_run(s));
	assert_true(y[0] == 11 && y[7] == 88);
	tbcrt_tensor t;
	RT_OK(tbcrt_session_output(s, 0, &t));
	assert_ptr_equal(t.data, y);
	/* Too small for the batch: refused before the model runs. */
	RT_OK(tbcrt_session_bind_output(s, 0, y, sizeof y - 1));
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_SHAPE_MISMATCH, "output 'y': shape [2,4] float32 needs 32 bytes; the bound buffer holds 31");
	RT_ERR(tbcrt_session_output(s, 0, &t), TBCRT_ERR_NOT_READY, "no successful run");
	/* Unbinding gives the output back to the session. */
	RT_OK(tbcrt_session_bind_output(s, 0, NULL, 0));
	RT_OK(tbcrt_session_run(s));
	RT_OK(tbcrt_session_output(s, 0, &t));
	assert_ptr_not_equal(t.data, y);
	assert_true(((const float *)t.data)[3] == 44);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

/* ---- wrong inputs: errors name the input and what was expected ---- */

static void input_of_the_wrong_dtype_is_refused_naming_both(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, rt_add_descriptor(), NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	double a[8] = {0};
	int64_t dims[2] = {2, 4};
	RT_ERR(tbcrt_session_bind_input(s, 0, 11, 2, dims, a, sizeof a), TBCRT_ERR_DTYPE_MISMATCH,
	       "input 'a': given float64, the model takes float32");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void input_of_the_wrong_shape_is_refused_naming_the_expected_shape(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, rt_add_descriptor(), NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float a[64] = {0};
	int64_t d35[2] = {3, 5}, d4[1] = {4}, dneg[2] = {-2, 4}, d24[2] = {2, 4};
	RT_ERR(tbcrt_session_bind_input(s, 0, 1, 2, d35, a, sizeof a), TBCRT_ERR_SHAPE_MISMATCH,
	       "input 'a': given shape [3,5], the model takes [N,4] (dim 1 must be 4)");
	RT_ERR(tbcrt_session_bind_input(s, 0, 1, 1, d4, a, sizeof a), TBCRT_ERR_SHAPE_MISMATCH,
	       "input 'a': given rank 1, the model takes rank 2 [N,4]");
	RT_ERR(tbcrt_session_bind_input(s, 0, 1, 2, dneg, a, sizeof a), TBCRT_ERR_SHAPE_MISMATCH, "dim 0 is negative");
	RT_ERR(tbcrt_session_bind_input(s, 0, 1, 2, d24, a, 31), TBCRT_ERR_SHAPE_MISMATCH,
	       "input 'a': shape [2,4] float32 needs 32 bytes; the buffer holds 31");
	RT_ERR(tbcrt_session_bind_input(s, 0, 1, 2, d24, NULL, 32), TBCRT_ERR_INVALID_ARGUMENT, "data is NULL");
	RT_ERR(tbcrt_session_bind_input(s, 2, 1, 2, d24, a, 32), TBCRT_ERR_INVALID_ARGUMENT, "input index 2");
	int64_t huge[2] = {INT64_MAX / 2, 4};
	RT_ERR(tbcrt_session_bind_input(s, 0, 1, 2, huge, a, sizeof a), TBCRT_ERR_LIMIT, "larger than the limit");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void symbolic_dims_must_agree_across_inputs(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, rt_add_descriptor(), NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float a[12] = {0}, b[8] = {0};
	int64_t d3[2] = {3, 4}, d2[2] = {2, 4};
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_NOT_READY, "input 'a' is not bound");
	bind_f32(s, 0, 2, d3, a, 12);
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_NOT_READY, "input 'b' is not bound");
	bind_f32(s, 1, 2, d2, b, 8);
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_SHAPE_MISMATCH,
	       "input 'b' dim 0 is 2, but symbol 'N' is 3 from input 'a' dim 0");
	int64_t v;
	RT_ERR(tbcrt_session_symbol(s, "N", &v), TBCRT_ERR_NOT_READY, "no successful run");
	RT_ERR(tbcrt_session_symbol(s, "M", &v), TBCRT_ERR_INVALID_ARGUMENT, "no symbol named 'M'");
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

/* ---- data-dependent outputs ---- */

static void nonzero_output_size_comes_from_the_run(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(2);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_nonzero.so"), &m));
	tbcrt_tensor_info ti;
	RT_OK(tbcrt_model_output_info(m, 0, &ti));
	assert_true(ti.data_dependent);
	assert_string_equal(ti.symbols[0], "K");
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	int64_t buf[8];
	RT_ERR(tbcrt_session_bind_output(s, 0, buf, sizeof buf), TBCRT_ERR_INVALID_ARGUMENT,
	       "output 'indices' has a data-dependent size");
	float x[6] = {0, 3, 0, 0, -1, 2};
	int64_t dims[1] = {6};
	bind_f32(s, 0, 1, dims, x, 6);
	RT_OK(tbcrt_session_run(s));
	tbcrt_tensor t;
	RT_OK(tbcrt_session_output(s, 0, &t));
	assert_int_equal(t.dtype, 7);
	assert_int_equal(t.rank, 1);
	assert_int_equal(t.dims[0], 3);
	assert_int_equal(t.bytes, 24);
	const int64_t *idx = t.data;
	assert_true(idx[0] == 1 && idx[1] == 4 && idx[2] == 5);
	int64_t k;
	RT_OK(tbcrt_session_symbol(s, "K", &k));
	assert_int_equal(k, 3);
	/* A second run replaces (and frees) the first run's output. */
	float zeros[6] = {0};
	bind_f32(s, 0, 1, dims, zeros, 6);
	RT_OK(tbcrt_session_run(s));
	RT_OK(tbcrt_session_output(s, 0, &t));
	assert_int_equal(t.dims[0], 0);
	assert_int_equal(t.bytes, 0);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void error_reported_while_running_becomes_the_status(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, rt_nonzero_descriptor(), NULL, &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float x[3] = {1, NAN, 2};
	int64_t dims[1] = {3};
	bind_f32(s, 0, 1, dims, x, 3);
	RT_ERR(tbcrt_session_run(s), TBCRT_ERR_RUN_FAILED, "model 'nonzero' failed (code 3): x holds NaN");
	tbcrt_tensor t;
	RT_ERR(tbcrt_session_output(s, 0, &t), TBCRT_ERR_NOT_READY, "output 'indices': the session has no successful run");
	x[1] = 0;
	RT_OK(tbcrt_session_run(s)); /* the session recovers */
	RT_OK(tbcrt_session_output(s, 0, &t));
	assert_int_equal(t.dims[0], 2);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

/* ---- weights ---- */

static void check_scale(tbcrt_model *m) {
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	float x[4] = {1, 1, 2, 2};
	int64_t dims[1] = {4};
	bind_f32(s, 0, 1, dims, x, 4);
	RT_OK(tbcrt_session_run(s));
	tbcrt_tensor t;
	RT_OK(tbcrt_session_output(s, 0, &t));
	const float *y = t.data;
	assert_true(y[0] == 1 && y[1] == 2 && y[2] == 6 && y[3] == 8);
	tbcrt_session_destroy(s);
}

static void embedded_weights_are_checked_and_used(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_scale.so"), &m));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(m, &info));
	assert_int_equal(info.weights_bytes, 16);
	assert_false(info.weights_external);
	check_scale(m);
	tbcrt_model_destroy(m);
	RT_OK(tbcrt_model_from_descriptor(c, rt_scale_descriptor(), NULL, &m));
	check_scale(m);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

/* A scratch folder holding a copy of rt_scale_external.so and, unless
 * weights is NULL, rt_scale.bin with those bytes. */
static char *scratch_with_weights(const void *weights, size_t bytes) {
	static char dir[64];
	snprintf(dir, sizeof dir, "/tmp/tbcrt-test-XXXXXX");
	assert_non_null(mkdtemp(dir));
	char path[8192];
	snprintf(path, sizeof path, "cp '%s' '%s/model.so'", rt_artifact("rt_scale_external.so"), dir);
	assert_int_equal(system(path), 0);
	if (weights) {
		snprintf(path, sizeof path, "%s/rt_scale.bin", dir);
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(weights, 1, bytes, f), bytes);
		fclose(f);
	}
	return dir;
}

static void remove_scratch(const char *dir) {
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static tbcrt_status load_in(tbcrt_context *c, const char *dir, tbcrt_model **m) {
	char path[256];
	snprintf(path, sizeof path, "%s/model.so", dir);
	return tbcrt_model_load(c, path, m);
}

static void external_weights_are_mapped_from_the_artifacts_folder(void **state) {
	(void)state;
	const float w[4] = {1, 2, 3, 4};
	char *dir = scratch_with_weights(w, sizeof w);
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	RT_OK(load_in(c, dir, &m));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(m, &info));
	assert_true(info.weights_external);
	check_scale(m);
	tbcrt_model_destroy(m);
	/* The .o + .h path names the folder itself. */
	RT_OK(tbcrt_model_from_descriptor(c, rt_scale_external_descriptor(), dir, &m));
	check_scale(m);
	tbcrt_model_destroy(m);
	RT_ERR(tbcrt_model_from_descriptor(c, rt_scale_external_descriptor(), NULL, &m), TBCRT_ERR_INVALID_ARGUMENT,
	       "weights are in the file 'rt_scale.bin'; pass the folder that holds it");
	assert_null(m);
	tbcrt_context_destroy(c);
	remove_scratch(dir);
}

static void external_weights_missing_short_or_different_are_refused(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m = NULL;
	char *dir = scratch_with_weights(NULL, 0);
	RT_ERR(load_in(c, dir, &m), TBCRT_ERR_INVALID_ARTIFACT, "weights file 'rt_scale.bin' in");
	assert_null(m);
	remove_scratch(dir);

	const float w3[3] = {1, 2, 3};
	dir = scratch_with_weights(w3, sizeof w3);
	RT_ERR(load_in(c, dir, &m), TBCRT_ERR_INVALID_ARTIFACT, "weights file 'rt_scale.bin' holds 12 bytes; the artifact needs 16");
	remove_scratch(dir);

	const float other[4] = {1, 2, 3, 5};
	dir = scratch_with_weights(other, sizeof other);
	RT_ERR(load_in(c, dir, &m), TBCRT_ERR_INVALID_ARTIFACT, "does not match the artifact (FNV-1a 64 hash differs)");
	remove_scratch(dir);

	/* A symbolic link to good weights is still refused. */
	const float w[4] = {1, 2, 3, 4};
	dir = scratch_with_weights(NULL, 0);
	char path[256], target[256];
	snprintf(target, sizeof target, "%s/real.bin", dir);
	FILE *f = fopen(target, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(w, 1, sizeof w, f), sizeof w);
	fclose(f);
	snprintf(path, sizeof path, "%s/rt_scale.bin", dir);
	assert_int_equal(symlink("real.bin", path), 0);
	RT_ERR(load_in(c, dir, &m), TBCRT_ERR_INVALID_ARTIFACT, "'rt_scale.bin' is a symbolic link");
	remove_scratch(dir);

	/* A directory where the file should be. */
	dir = scratch_with_weights(NULL, 0);
	snprintf(path, sizeof path, "%s/rt_scale.bin", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	RT_ERR(load_in(c, dir, &m), TBCRT_ERR_INVALID_ARTIFACT, "is not a regular file");
	remove_scratch(dir);
	tbcrt_context_destroy(c);
}

/* ---- lifetimes and threads ---- */

static void handles_may_be_destroyed_in_any_order(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(2);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_add.so"), &m));
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m, &s));
	tbcrt_context_destroy(c);
	tbcrt_model_destroy(m);
	check_add(s, 5); /* the session keeps both alive */
	tbcrt_session_destroy(s);
	tbcrt_session_destroy(NULL);
	tbcrt_model_destroy(NULL);
}

typedef struct {
	tbcrt_model *model;
	int64_t n;
	int runs;
} worker_args;

static void *session_worker(void *arg) {
	worker_args *w = arg;
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(w->model, &s));
	for (int i = 0; i < w->runs; i++) check_add(s, w->n + i);
	tbcrt_session_destroy(s);
	return NULL;
}

static void sessions_on_several_threads_share_one_context(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(3);
	tbcrt_model *m = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_add.so"), &m));
	pthread_t th[3];
	worker_args args[3];
	for (int i = 0; i < 3; i++) {
		args[i] = (worker_args){m, 100 * (i + 1), 20};
		assert_int_equal(pthread_create(&th[i], NULL, session_worker, &args[i]), 0);
	}
	for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
	tbcrt_model_destroy(m);
	tbcrt_context_destroy(c);
}

static void loading_the_same_artifact_twice_gives_two_models(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(1);
	tbcrt_model *m1 = NULL, *m2 = NULL;
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_add.so"), &m1));
	RT_OK(tbcrt_model_load(c, rt_artifact("rt_add.so"), &m2));
	assert_ptr_not_equal(m1, m2);
	tbcrt_model_destroy(m1);
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(m2, &s));
	check_add(s, 2); /* still mapped: dlopen counts references */
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(m2);
	tbcrt_context_destroy(c);
}

static void dtype_names_and_sizes_follow_onnx_numbering(void **state) {
	(void)state;
	assert_int_equal(tbcrt_dtype_size(1), 4);
	assert_string_equal(tbcrt_dtype_name(1), "float32");
	assert_int_equal(tbcrt_dtype_size(7), 8);
	assert_int_equal(tbcrt_dtype_size(15), 16);
	assert_string_equal(tbcrt_dtype_name(16), "bfloat16");
	assert_int_equal(tbcrt_dtype_size(22), 1); /* int4: one element per byte */
	assert_int_equal(tbcrt_dtype_size(8), 0);  /* string: not in compiled code */
	assert_int_equal(tbcrt_dtype_size(27), 0);
	assert_int_equal(tbcrt_dtype_size(-1), 0);
	assert_string_equal(tbcrt_dtype_name(99), "unknown");
	assert_string_equal(tbcrt_code_name(TBCRT_ERR_SHAPE_MISMATCH), "shape mismatch");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(context_thread_count_defaults_to_the_cpus_and_can_be_set),
		cmocka_unit_test(context_create_checks_its_arguments),
		cmocka_unit_test(caller_allocator_sees_every_allocation_and_gets_all_back),
		cmocka_unit_test(add_shared_object_describes_its_inputs_and_outputs),
		cmocka_unit_test(add_shared_object_runs_any_batch_on_any_thread_count),
		cmocka_unit_test(add_linked_descriptor_runs_like_the_shared_object),
		cmocka_unit_test(output_bound_to_caller_memory_receives_the_result),
		cmocka_unit_test(input_of_the_wrong_dtype_is_refused_naming_both),
		cmocka_unit_test(input_of_the_wrong_shape_is_refused_naming_the_expected_shape),
		cmocka_unit_test(symbolic_dims_must_agree_across_inputs),
		cmocka_unit_test(nonzero_output_size_comes_from_the_run),
		cmocka_unit_test(error_reported_while_running_becomes_the_status),
		cmocka_unit_test(embedded_weights_are_checked_and_used),
		cmocka_unit_test(external_weights_are_mapped_from_the_artifacts_folder),
		cmocka_unit_test(external_weights_missing_short_or_different_are_refused),
		cmocka_unit_test(handles_may_be_destroyed_in_any_order),
		cmocka_unit_test(sessions_on_several_threads_share_one_context),
		cmocka_unit_test(loading_the_same_artifact_twice_gives_two_models),
		cmocka_unit_test(dtype_names_and_sizes_follow_onnx_numbering),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
