/* What a test does when something it needs is absent (the ONNX node suite,
 * the bench models onnxruntime's .venv makes, a file of the host): outside
 * CI it is skipped with a line saying why; in CI (CI=true) a missing suite or
 * oracle is a failure, since cmocka and ctest would count the skip as a pass.
 * Include after <cmocka.h>. */
#ifndef TBC_TEST_NEED_H
#define TBC_TEST_NEED_H
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool tbc_test_in_ci(void) {
	const char *ci = getenv("CI");
	return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

#define TBC_TEST_NEEDS(...)                                                        \
	do {                                                                       \
		if (tbc_test_in_ci()) {                                            \
			print_error("missing in CI (CI=true), so this fails: ");    \
			print_error(__VA_ARGS__);                                  \
			print_error("\n");                                         \
			fail();                                                    \
		}                                                                  \
		print_message("skipped: ");                                        \
		print_message(__VA_ARGS__);                                        \
		print_message("\n");                                               \
		skip();                                                            \
	} while (0)

#endif
