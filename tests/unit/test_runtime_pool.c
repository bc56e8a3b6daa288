/* The runtime's thread pool (host->parallel_for) and its view of the host
 * CPU (target triple, features).  Uses the runtime's internal header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/unit/support/need.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/internal.h"
#include "tests/runtime/rt_test.h"

typedef struct {
	_Atomic int *hits;
	int64_t grain, n;
	_Atomic int short_chunks; /* chunks below grain that are not the last */
	_Atomic int calls;
} cover;

static void cover_body(void *arg, int64_t begin, int64_t end) {
	cover *c = arg;
	atomic_fetch_add(&c->calls, 1);
	if (end - begin < c->grain && end != c->n) atomic_fetch_add(&c->short_chunks, 1);
	for (int64_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void parallel_for_runs_every_index_once_in_chunks_of_at_least_grain(void **state) {
	(void)state;
	const uint32_t threads[] = {1, 2, 3, 8};
	const int64_t ns[] = {0, 1, 7, 64, 1000, 4097};
	const int64_t grains[] = {-5, 0, 1, 3, 16, 5000};
	for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
		tbcrt_context *ctx = rt_context(threads[t]);
		for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
			for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
				int64_t n = ns[a];
				_Atomic int *hits = calloc((size_t)n + 1, sizeof *hits);
				cover c = {.hits = hits, .grain = grains[g] < 1 ? 1 : grains[g], .n = n};
				tbcrt__pool_parallel_for(ctx->pool, cover_body, &c, n, grains[g]);
				for (int64_t i = 0; i < n; i++)
					if (hits[i] != 1)
						fail_msg("threads %u n %lld grain %lld: index %lld ran %d times", threads[t], (long long)n,
							 (long long)grains[g], (long long)i, (int)hits[i]);
				assert_int_equal(c.short_chunks, 0);
				if (n == 0) assert_int_equal(c.calls, 0);
				free(hits);
			}
		tbcrt_context_destroy(ctx);
	}
}

typedef struct {
	_Atomic int entered;
	_Atomic int saw_company;
} company;

/* Each chunk waits (up to a second) for a chunk on another thread: with
 * several threads, two chunks do run at once. */
static void company_body(void *arg, int64_t begin, int64_t end) {
	(void)begin, (void)end;
	company *c = arg;
	atomic_fetch_add(&c->entered, 1);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (atomic_load(&c->entered) >= 2) {
			atomic_store(&c->saw_company, 1);
			return;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 2) return;
	}
}

static void parallel_for_uses_more_than_one_thread(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(4);
	company c = {0};
	tbcrt__pool_parallel_for(ctx->pool, company_body, &c, 4, 1);
	assert_true(c.saw_company);
	tbcrt_context_destroy(ctx);
}

/* Each thread's first chunk waits (up to two seconds) for the other's, then
 * says where it began. */
typedef struct {
	pthread_t caller;
	company met;
	_Atomic int64_t caller_first, worker_first;
} firsts;

static void firsts_body(void *arg, int64_t begin, int64_t end) {
	(void)end;
	firsts *f = arg;
	_Atomic int64_t *mine = pthread_equal(pthread_self(), f->caller) ? &f->caller_first : &f->worker_first;
	int64_t none = -1;
	if (atomic_compare_exchange_strong(mine, &none, begin)) company_body(&f->met, begin, end);
}

/* The iterations are one contiguous range per thread, taken front to back
 * first: the caller starts at 0, the worker at the middle (8 chunks of 1 on
 * two threads: 4 each), whoever gets there first; so a loop's halves land
 * on the same threads as the loop's before. */
static void parallel_for_gives_each_thread_its_own_range_first(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(2);
	for (int run = 0; run < 3; run++) {
		firsts f = {.caller = pthread_self(), .caller_first = -1, .worker_first = -1};
		tbcrt__pool_parallel_for(ctx->pool, firsts_body, &f, 8, 1);
		assert_true(f.met.saw_company);
		assert_int_equal(f.caller_first, 0);
		assert_int_equal(f.worker_first, 4);
	}
	tbcrt_context_destroy(ctx);
}

typedef struct {
	tbcrt_pool *pool;
	_Atomic int64_t sum;
} nested;

static void inner_body(void *arg, int64_t begin, int64_t end) {
	nested *k = arg;
	for (int64_t i = begin; i < end; i++) atomic_fetch_add(&k->sum, i);
}

static void outer_body(void *arg, int64_t begin, int64_t end) {
	nested *k = arg;
	for (int64_t i = begin; i < end; i++) tbcrt__pool_parallel_for(k->pool, inner_body, k, 100, 1);
}

static void nested_parallel_for_runs_inline_without_deadlock(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(3);
	nested k = {ctx->pool, 0};
	tbcrt__pool_parallel_for(ctx->pool, outer_body, &k, 10, 1);
	assert_int_equal(k.sum, 10 * 4950);
	tbcrt_context_destroy(ctx);
}

typedef struct {
	tbcrt_pool *pool;
	_Atomic int64_t sum;
} shared_run;

static void *loop_thread(void *arg) {
	shared_run *k = arg;
	for (int r = 0; r < 200; r++) tbcrt__pool_parallel_for(k->pool, inner_body, k, 1000, 10);
	return NULL;
}

static void loops_from_several_threads_all_complete(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(3);
	shared_run k = {ctx->pool, 0};
	pthread_t th[4];
	for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, loop_thread, (void *)&k), 0);
	for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
	assert_int_equal(k.sum, (int64_t)4 * 200 * 499500);
	tbcrt_context_destroy(ctx);
}

static void *resize_thread(void *arg) {
	tbcrt_context *ctx = arg;
	for (uint32_t r = 0; r < 20; r++) RT_OK(tbcrt_context_set_thread_count(ctx, 1 + r % 4));
	return NULL;
}

static void thread_count_changes_while_loops_run(void **state) {
	(void)state;
	tbcrt_context *ctx = rt_context(2);
	shared_run k = {ctx->pool, 0};
	pthread_t looper, resizer;
	assert_int_equal(pthread_create(&looper, NULL, loop_thread, &k), 0);
	assert_int_equal(pthread_create(&resizer, NULL, resize_thread, ctx), 0);
	pthread_join(looper, NULL);
	pthread_join(resizer, NULL);
	assert_int_equal(k.sum, (int64_t)200 * 499500);
	tbcrt_context_destroy(ctx);
}

static tbcrt_context *resize_ctx;
static _Atomic int resize_refused;

static void resize_body(void *arg, int64_t begin, int64_t end) {
	(void)arg, (void)begin, (void)end;
	tbcrt_status s = tbcrt_context_set_thread_count(resize_ctx, 2);
	if (s.code == TBCRT_ERR_INVALID_ARGUMENT && strstr(s.message, "inside a parallel loop")) atomic_fetch_add(&resize_refused, 1);
}

static void thread_count_cannot_change_inside_a_loop(void **state) {
	(void)state;
	resize_ctx = rt_context(2);
	tbcrt__pool_parallel_for(resize_ctx->pool, resize_body, NULL, 4, 1);
	assert_int_equal(resize_refused, 4);
	tbcrt_context_destroy(resize_ctx);
}

/* ---- the host ---- */

static void host_triple_matches_this_machine(void **state) {
	(void)state;
#if defined(__x86_64__)
	RT_OK(tbcrt__check_triple("x86_64-pc-linux-gnu"));
	RT_OK(tbcrt__check_triple("x86_64-unknown-linux-gnu"));
	RT_OK(tbcrt__check_triple("x86_64"));
	RT_ERR(tbcrt__check_triple("aarch64-unknown-linux-gnu"), TBCRT_ERR_UNSUPPORTED_TARGET, "this host is x86_64-linux");
	RT_ERR(tbcrt__check_triple("x86_64-apple-darwin"), TBCRT_ERR_UNSUPPORTED_TARGET, "compiled for 'x86_64-apple-darwin'");
	RT_ERR(tbcrt__check_triple("i686-pc-linux-gnu"), TBCRT_ERR_UNSUPPORTED_TARGET, "i686");
#elif defined(__aarch64__)
	RT_OK(tbcrt__check_triple("aarch64-unknown-linux-gnu"));
	RT_OK(tbcrt__check_triple("arm64-unknown-linux-gnu"));
	RT_ERR(tbcrt__check_triple("x86_64-pc-linux-gnu"), TBCRT_ERR_UNSUPPORTED_TARGET, "this host is aarch64-linux");
#endif
}

/* Whether /proc/cpuinfo's flags line holds flag. */
static int cpuinfo_has(const char *flag) {
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f) return -1;
	char line[8192];
	int found = -1;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "flags", 5) != 0 && strncmp(line, "Features", 8) != 0) continue;
		found = 0;
		for (char *tok = strtok(strchr(line, ':') + 1, " \n"); tok; tok = strtok(NULL, " \n"))
			if (!strcmp(tok, flag)) found = 1;
		break;
	}
	fclose(f);
	return found;
}

static void host_features_agree_with_the_kernels_view(void **state) {
	(void)state;
#if defined(__x86_64__)
	assert_int_equal(tbcrt__host_has_feature("sse2"), 1);
	assert_int_equal(tbcrt__host_has_feature("64bit"), 1);
	/* LLVM's name, then the kernel's (/proc/cpuinfo) name. */
	static const char *const pairs[][2] = {
		{"sse3", "pni"},     {"ssse3", "ssse3"},   {"sse4.1", "sse4_1"}, {"sse4.2", "sse4_2"}, {"avx", "avx"},
		{"avx2", "avx2"},    {"fma", "fma"},       {"f16c", "f16c"},     {"bmi", "bmi1"},      {"bmi2", "bmi2"},
		{"popcnt", "popcnt"}, {"aes", "aes"},      {"pclmul", "pclmulqdq"}, {"movbe", "movbe"}, {"adx", "adx"},
		{"sha", "sha_ni"},   {"avx512f", "avx512f"}, {"avx512bw", "avx512bw"}, {"avx512vl", "avx512vl"},
		{"avx512vnni", "avx512_vnni"}, {"vaes", "vaes"}, {"gfni", "gfni"}, {"rdrnd", "rdrand"}, {"rdseed", "rdseed"},
		{"lzcnt", "abm"},    {"xop", "xop"},       {"fma4", "fma4"},     {"clwb", "clwb"},     {"xsave", "xsave"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
		int kernel = cpuinfo_has(pairs[i][1]);
		if (kernel < 0) TBC_TEST_NEEDS("a flags line in /proc/cpuinfo");
		int ours = tbcrt__host_has_feature(pairs[i][0]);
		/* Linux hides RDSEED where it is known to be unreliable (AMD Zen 5)
		 * while CPUID still reports it; the runtime reads CPUID, as LLVM's
		 * host detection does when it writes an artifact's features, so it
		 * must accept what the kernel hides there. */
		if (ours == 1 && kernel == 0 && !strcmp(pairs[i][0], "rdseed")) continue;
		if (ours != kernel)
			fail_msg("feature '%s': runtime says %d, /proc/cpuinfo '%s' says %d", pairs[i][0], ours, pairs[i][1],
				 kernel);
	}
#endif
	assert_int_equal(tbcrt__host_has_feature("no-such-feature"), -1);
}

static void feature_list_of_this_host_is_accepted(void **state) {
	(void)state;
	RT_OK(tbcrt__check_features(""));
#if defined(__x86_64__)
	RT_OK(tbcrt__check_features("+64bit,+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87"));
	if (tbcrt__host_has_feature("avx512f") == 0)
		RT_ERR(tbcrt__check_features("+sse2,+avx512f"), TBCRT_ERR_UNSUPPORTED_TARGET,
		       "needs CPU feature 'avx512f', which this x86_64-linux CPU lacks");
#endif
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parallel_for_runs_every_index_once_in_chunks_of_at_least_grain),
		cmocka_unit_test(parallel_for_uses_more_than_one_thread),
		cmocka_unit_test(parallel_for_gives_each_thread_its_own_range_first),
		cmocka_unit_test(nested_parallel_for_runs_inline_without_deadlock),
		cmocka_unit_test(loops_from_several_threads_all_complete),
		cmocka_unit_test(thread_count_changes_while_loops_run),
		cmocka_unit_test(thread_count_cannot_change_inside_a_loop),
		cmocka_unit_test(host_triple_matches_this_machine),
		cmocka_unit_test(host_features_agree_with_the_kernels_view),
		cmocka_unit_test(feature_list_of_this_host_is_accepted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
