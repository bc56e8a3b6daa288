/* Running commands from unit tests (command.h). */
#include "tests/unit/support/command.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

char *test_command_output(const char *cmd, int *status) {
	char *full = NULL;
	assert_true(asprintf(&full, "%s 2>&1", cmd) >= 0);
	FILE *p = popen(full, "r");
	free(full);
	assert_non_null(p);
	size_t cap = 1 << 16, n = 0, got;
	char *out = malloc(cap);
	assert_non_null(out);
	while ((got = fread(out + n, 1, cap - 1 - n, p)) > 0) {
		n += got;
		if (n + 1 == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
	}
	out[n] = '\0';
	int st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

char *test_tbc(const char *env, const char *args, bool in_source, int *status) {
	const char *bin = getenv("TBC_BINARY_DIR"), *src = getenv("TBC_SOURCE_DIR");
	char *cmd = NULL;
	assert_true(asprintf(&cmd, "%s%s%s%s '%s/tbc' %s", in_source ? "cd '" : "", in_source ? (src ? src : ".") : "",
			     in_source ? "' && " : "", env, bin ? bin : "build", args) >= 0);
	char *out = test_command_output(cmd, status);
	free(cmd);
	return out;
}
