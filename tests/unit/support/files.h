/* Scratch files and models for tests that compile to files: a folder of the
 * test program's own under /tmp, an ONNX model loaded or the test failed
 * with the loader's message, a compile to a file or the test failed with
 * the compiler's.  Include after cmocka.h. */
#ifndef TBC_TEST_FILES_H
#define TBC_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>

#include "tbc/tbc.h"

static char tbc_test_dir[64];

/* name in the test program's scratch folder (made on first use). */
static inline const char *tmp_path(const char *name) {
	static char buf[256];
	if (!tbc_test_dir[0]) {
		snprintf(tbc_test_dir, sizeof tbc_test_dir, "/tmp/tbc-test-XXXXXX");
		assert_non_null(mkdtemp(tbc_test_dir));
	}
	snprintf(buf, sizeof buf, "%s/%s", tbc_test_dir, name);
	return buf;
}

/* A cmocka group teardown: removes the scratch folder, if one was made. */
static inline int tbc_test_remove_dir(void **state) {
	(void)state;
	if (tbc_test_dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tbc_test_dir);
		if (system(cmd) != 0) return -1;
	}
	return 0;
}

static inline void tbc_test_fail_with(const char *what, tbc_diags *d) {
	char buf[512];
	tbc_diag_format(tbc_diags_get(d, 0), buf, sizeof buf);
	fail_msg("%s: %s", what, buf);
}

static inline tbc_module *load_onnx(const char *path) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	if (tbc_module_load_onnx(path, d, &m) != TBC_OK) tbc_test_fail_with(path, d);
	tbc_diags_destroy(d);
	return m;
}

static inline void compile_to(const tbc_module *m, const tbc_compile_options *o, const char *path) {
	tbc_diags *d = tbc_diags_create();
	if (tbc_compile_to_file(m, o, path, d) != TBC_OK) tbc_test_fail_with(path, d);
	tbc_diags_destroy(d);
}

#endif
