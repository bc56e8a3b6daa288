/* What a test program running OpenCL kernels on PoCL needs: a PoCL cache
 * folder of its own, and LeakSanitizer told about PoCL's compiler.  Include
 * once per test program (it defines the sanitizer hooks). */
#ifndef TBC_TEST_POCL_H
#define TBC_TEST_POCL_H

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* PoCL caches built kernels under $POCL_CACHE_DIR, else under $HOME, which
 * may not be writable: give it a fresh folder unless one is chosen. */
static char tbc_pocl_dir[] = "/tmp/tbc-pocl-cache-XXXXXX";
static bool tbc_pocl_dir_made;

static inline int tbc_pocl_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* Removes the folder tbc_pocl_setup made, at exit. */
static inline void tbc_pocl_cleanup(void) {
	if (tbc_pocl_dir_made) nftw(tbc_pocl_dir, tbc_pocl_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void tbc_pocl_setup(void) {
	if (getenv("POCL_CACHE_DIR") || !mkdtemp(tbc_pocl_dir)) return;
	setenv("POCL_CACHE_DIR", tbc_pocl_dir, 0);
	tbc_pocl_dir_made = true;
	atexit(tbc_pocl_cleanup);
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
