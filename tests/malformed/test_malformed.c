/* Loads every model of the malformed corpus (tests/malformed/expected.txt)
 * and checks the result code, that the message names the problem, that it
 * names the file, and that no module is left behind on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"

static const char *dir = "tests/malformed";

static bool mentions(const tbc_diags *d, const char *needle, char *first, size_t size) {
	bool found = false;
	first[0] = 0;
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char msg[1024];
		tbc_diag_format(tbc_diags_get(d, i), msg, sizeof msg);
		if (i == 0) snprintf(first, size, "%s", msg);
		/* The message itself: the formatted line also holds the file name. */
		const char *text = tbc_diags_get(d, i)->message;
		if (text && strstr(text, needle)) found = true;
	}
	return found;
}

static tbc_code load(const char *path, bool infer, tbc_diags *d, tbc_module **m) {
	if (infer) return tbc_module_load_onnx(path, d, m);
	uint8_t *buf;
	size_t size;
	tbc_code rc = tbc_fe_read_file(path, TBC_MAX_MODEL_BYTES, d, &buf, &size);
	if (rc) return rc;
	tbc_fe_options opt = {.skip_infer = true};
	rc = tbc_fe_load(buf, size, dir, path, &opt, d, m);
	free(buf);
	return rc;
}

static void every_corpus_model_fails_as_expected(void **state) {
	(void)state;
	char list[4096];
	snprintf(list, sizeof list, "%s/expected.txt", dir);
	FILE *f = fopen(list, "r");
	assert_non_null(f);
	char line[1024];
	int n = 0, failures = 0, pending = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || line[0] == '#') continue;
		char file[256], flags[64];
		int code, off = 0;
		if (sscanf(line, "%255s %d %63s %n", file, &code, flags, &off) != 3) fail_msg("bad line: %s", line);
		const char *want = line + off;
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, file);
		tbc_diags *d = tbc_diags_create();
		tbc_module *m = NULL;
		tbc_code rc = load(path, strcmp(flags, "noinfer") != 0, d, &m);
		char first[1024];
		bool named = code == 0 || mentions(d, want, first, sizeof first);
		bool file_named = code == 0 || (tbc_diags_count(d) && tbc_diags_get(d, 0)->file &&
					     strstr(tbc_diags_get(d, 0)->file, file));
		bool ok = (int)rc == code && named && file_named && ((rc == TBC_OK) == (m != NULL));
		if (code == 0 && rc != TBC_OK) mentions(d, "", first, sizeof first);
		const char *verdict = ok ? "ok" : "FAIL";
		if (!ok && !strcmp(flags, "rule") && rc != TBC_OK && !m) {
			verdict = "pending (shape rule)";
			pending++;
		} else if (!ok) {
			failures++;
		}
		printf("%-40s %-8s want %d '%s', got %d: %s\n", file, verdict, code, want, rc, code == 0 && rc == 0 ? "loaded" : first);
		tbc_module_destroy(m);
		tbc_diags_destroy(d);
		n++;
	}
	fclose(f);
	printf("%d models, %d failures, %d pending on shape rules\n", n, failures, pending);
	assert_true(n > 0);
	assert_int_equal(failures, 0);
}

int main(int argc, char **argv) {
	if (argc > 1) dir = argv[1];
	const struct CMUnitTest tests[] = {cmocka_unit_test(every_corpus_model_fails_as_expected)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
