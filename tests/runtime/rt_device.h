/* Helpers of the device tests (tests/unit/test_runtime_device*.c). */
#ifndef RT_DEVICE_H
#define RT_DEVICE_H

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "tests/runtime/rt_test.h"

/* PoCL caches built kernels under $POCL_CACHE_DIR, else under $HOME, which
 * may not be writable: give it a fresh folder unless one is chosen. */
static char rt_pocl_dir[] = "/tmp/tbc-pocl-cache-XXXXXX";
static bool rt_pocl_dir_made;

static inline int rt_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* Removes the folder rt_device_setup made, at exit. */
static inline void rt_device_cleanup(void) {
	if (rt_pocl_dir_made) nftw(rt_pocl_dir, rt_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void rt_device_setup(void) {
	if (getenv("POCL_CACHE_DIR") || !mkdtemp(rt_pocl_dir)) return;
	setenv("POCL_CACHE_DIR", rt_pocl_dir, 0);
	rt_pocl_dir_made = true;
	atexit(rt_device_cleanup);
}

/* The device of that name, opened; when it is unavailable the test is
 * skipped, saying why -- except for OpenCL under CI=true, where PoCL must
 * be there and a missing platform fails. */
static inline tbcrt__device *rt_device_or_skip(tbcrt_context *ctx, const char *name) {
	tbcrt__device *d = NULL;
	tbcrt_status s = tbcrt__device_get(ctx, name, &d);
	if (s.code == TBCRT_OK) return d;
	const char *ci = getenv("CI");
	if (s.code == TBCRT_ERR_DEVICE_UNAVAILABLE && !(ci && !strcmp(ci, "true") && !strncmp(name, "opencl", 6))) {
		printf("skipped: %s (%s)\n", name, s.message);
		tbcrt_context_destroy(ctx);
		skip();
	}
	tbcrt_context_destroy(ctx);
	fail_msg("device %s: %s: %s", name, tbcrt_code_name(s.code), s.message);
	return NULL;
}

/* Under AddressSanitizer: PoCL's compiler (its own LLVM, inside libpocl)
 * keeps memory until exit, and LeakSanitizer can only tell it apart by the
 * stack, which the fast unwinder loses in libraries built without frame
 * pointers.  So allocations take full stacks, and leaks whose stack passes
 * through libpocl or the ICD loader -- and nothing else -- are suppressed.
 * Both hooks are read by the sanitizer runtime; elsewhere they are unused.
 * (One definition per test program: include this header once.) */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
	return "fast_unwind_on_malloc=0";
}
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
	return "leak:libpocl.so\nleak:libOpenCL.so\n";
}

#endif
