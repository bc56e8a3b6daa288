/* Golden IR test runner.
 *
 *   tbc_golden [--update] FILE.ir...
 *
 * FILE lives in tests/golden/<pass>/ and holds an input module, a line
 * "# ---- expected ----", and the expected result: the module the pass
 * leaves, printed, or the "error: ..." lines it reports.  The runner parses
 * the input, verifies it, runs the pass named by the folder, verifies and
 * prints the result and compares.  It also checks the expected part is
 * itself canonical text.  With --update or TBC_UPDATE_GOLDEN=1 it rewrites
 * the expected part instead of failing.
 *
 * A pass joins by adding one row to `passes` below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"

#define SEPARATOR "# ---- expected ----\n"

typedef bool (*golden_pass_fn)(tbc_module *m, tbc_diags *d);

static bool pass_roundtrip(tbc_module *m, tbc_diags *d) {
	(void)m;
	(void)d;
	return true;
}

static bool pass_infer(tbc_module *m, tbc_diags *d) {
	tbc_infer cx = {.module = m, .diags = d};
	return tbc_infer_graph(&cx, m->main);
}

static const struct golden_pass {
	const char *name;
	golden_pass_fn run;
	unsigned input_flags, output_flags; /* tbc_verify_ex flags for the input and the result */
} passes[] = {
	{"roundtrip", pass_roundtrip, TBC_VERIFY_ALLOW_UNTYPED, TBC_VERIFY_ALLOW_UNTYPED},
	{"infer", pass_infer, TBC_VERIFY_ALLOW_UNTYPED, 0},
	{"decompose", tbc_pass_decompose, 0, 0},
	{"fold", tbc_pass_fold, 0, 0},
	{"simplify", tbc_pass_simplify, 0, 0},
	{"cse", tbc_pass_cse, 0, 0},
	{"dce", tbc_pass_dce, 0, 0},
	{"fusion", tbc_pass_fusion, 0, 0},
	{"qdq_fusion", tbc_pass_qdq_fusion, 0, 0},
};

/* ---- Files ---- */
static char *read_file(const char *path) {
	FILE *f = fopen(path, "rb");
	if (!f) return NULL;
	size_t cap = 4096, n = 0;
	char *s = malloc(cap);
	for (size_t k; s && (k = fread(s + n, 1, cap - n - 1, f)) > 0;) {
		n += k;
		if (cap - n - 1 == 0) {
			char *ns = realloc(s, cap * 2);
			if (!ns) {
				free(s);
				s = NULL;
				break;
			}
			s = ns;
			cap *= 2;
		}
	}
	fclose(f);
	if (s) s[n] = 0;
	return s;
}

static bool write_file(const char *path, const char *a, size_t an, const char *b) {
	FILE *f = fopen(path, "wb");
	if (!f) return false;
	bool ok = fwrite(a, 1, an, f) == an && fputs(b, f) >= 0;
	return fclose(f) == 0 && ok;
}

/* The pass is the name of the folder holding the file. */
static const struct golden_pass *pass_of(const char *path) {
	const char *end = strrchr(path, '/');
	if (!end) return NULL;
	const char *start = end;
	while (start > path && start[-1] != '/') start--;
	for (size_t i = 0; i < sizeof passes / sizeof *passes; i++)
		if (strlen(passes[i].name) == (size_t)(end - start) && !strncmp(passes[i].name, start, (size_t)(end - start)))
			return &passes[i];
	return NULL;
}

/* ---- Diff ---- */
typedef struct lines {
	const char **at;
	int *len;
	int n;
} lines;

static lines split_lines(const char *s) {
	lines l = {0};
	int cap = 0;
	while (*s) {
		const char *e = strchr(s, '\n');
		int len = e ? (int)(e - s) : (int)strlen(s);
		if (l.n == cap) {
			cap = cap ? cap * 2 : 64;
			l.at = realloc(l.at, (size_t)cap * sizeof *l.at);
			l.len = realloc(l.len, (size_t)cap * sizeof *l.len);
			if (!l.at || !l.len) exit(2);
		}
		l.at[l.n] = s;
		l.len[l.n++] = len;
		s += len + (e != NULL);
	}
	return l;
}

static bool line_eq(const lines *a, int i, const lines *b, int j) {
	return a->len[i] == b->len[j] && !memcmp(a->at[i], b->at[j], (size_t)a->len[i]);
}

/* A line diff from the longest common subsequence: "-" expected, "+" actual. */
static void print_diff(const char *want, const char *got) {
	lines a = split_lines(want), b = split_lines(got);
	size_t cells = (size_t)(a.n + 1) * (size_t)(b.n + 1);
	int *t = cells < 50u * 1000 * 1000 ? calloc(cells, sizeof *t) : NULL;
	if (!t) {
		int i = 0;
		while (i < a.n && i < b.n && line_eq(&a, i, &b, i)) i++;
		fprintf(stderr, "first difference at line %d\n", i + 1);
	} else {
#define T(i, j) t[(size_t)(i) * (size_t)(b.n + 1) + (size_t)(j)]
		for (int i = a.n - 1; i >= 0; i--)
			for (int j = b.n - 1; j >= 0; j--)
				T(i, j) = line_eq(&a, i, &b, j) ? T(i + 1, j + 1) + 1 : (T(i + 1, j) > T(i, j + 1) ? T(i + 1, j) : T(i, j + 1));
		fprintf(stderr, "--- expected\n+++ actual\n");
		int i = 0, j = 0;
		while (i < a.n || j < b.n) {
			if (i < a.n && j < b.n && line_eq(&a, i, &b, j)) {
				fprintf(stderr, " %.*s\n", a.len[i], a.at[i]);
				i++, j++;
			} else if (i < a.n && (j == b.n || T(i + 1, j) >= T(i, j + 1))) {
				fprintf(stderr, "-%.*s\n", a.len[i], a.at[i]);
				i++;
			} else {
				fprintf(stderr, "+%.*s\n", b.len[j], b.at[j]);
				j++;
			}
		}
#undef T
	}
	free(t);
	free(a.at);
	free(a.len);
	free(b.at);
	free(b.len);
}

/* ---- One file ---- */

/* Appends each diagnostic as "error: ..." to a new string. */
static char *format_errors(const tbc_diags *d) {
	size_t cap = 256, n = 0;
	char *s = malloc(cap);
	if (!s) return NULL;
	s[0] = 0;
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char line[1400], msg[1200];
		tbc_diag_format(tbc_diags_get(d, i), msg, sizeof msg);
		int k = snprintf(line, sizeof line, "error: %s\n", msg);
		if (k < 0) continue;
		while (n + (size_t)k + 1 > cap) {
			char *ns = realloc(s, cap *= 2);
			if (!ns) {
				free(s);
				return NULL;
			}
			s = ns;
		}
		memcpy(s + n, line, (size_t)k + 1);
		n += (size_t)k;
	}
	return s;
}

/* Runs the pass on the input text: the printed result or the errors. */
static char *run_pass(const struct golden_pass *pass, const char *input, const char *path) {
	tbc_diags *d = tbc_diags_create();
	char *out = NULL;
	tbc_module *m = tbc_parse(input, path, d);
	if (m && tbc_verify_ex(m, d, pass->input_flags) && pass->run(m, d) && tbc_verify_ex(m, d, pass->output_flags)) out = tbc_print(m);
	if (!out) out = format_errors(d);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return out;
}

static bool run_file(const char *path, bool update) {
	const struct golden_pass *pass = pass_of(path);
	if (!pass) {
		fprintf(stderr, "%s: the folder names no known pass\n", path);
		return false;
	}
	char *text = read_file(path);
	if (!text) {
		fprintf(stderr, "%s: cannot read\n", path);
		return false;
	}
	char *sep = NULL;
	if (!strncmp(text, SEPARATOR, strlen(SEPARATOR))) sep = text;
	else if ((sep = strstr(text, "\n" SEPARATOR))) sep++;
	size_t input_len = sep ? (size_t)(sep - text) : strlen(text);
	char *input = malloc(input_len + 1);
	memcpy(input, text, input_len);
	input[input_len] = 0;
	const char *want = sep ? sep + strlen(SEPARATOR) : NULL;
	/* Messages name the file by its base name, so the expected text does not
	 * depend on where the checkout is. */
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char *got = run_pass(pass, input, base);
	bool ok = got != NULL;
	if (ok && (!want || strcmp(want, got))) {
		if (update) {
			const char *head = sep ? text : input;
			size_t head_len = sep ? input_len + strlen(SEPARATOR) : input_len;
			char *prefix = malloc(head_len + strlen(SEPARATOR) + 2);
			memcpy(prefix, head, head_len);
			if (!sep) {
				/* The input may lack a final newline. */
				if (head_len && prefix[head_len - 1] != '\n') prefix[head_len++] = '\n';
				memcpy(prefix + head_len, SEPARATOR, strlen(SEPARATOR));
				head_len += strlen(SEPARATOR);
			}
			ok = write_file(path, prefix, head_len, got);
			fprintf(stderr, "%s: %s\n", path, ok ? "updated" : "cannot write");
			free(prefix);
		} else {
			fprintf(stderr, "%s: the %s pass does not give the expected text\n", path, pass->name);
			if (want) print_diff(want, got);
			else fprintf(stderr, "no \"%.*s\" line; the pass gives:\n%s", (int)strlen(SEPARATOR) - 1, SEPARATOR, got);
			fprintf(stderr, "(TBC_UPDATE_GOLDEN=1 rewrites the expected part)\n");
			ok = false;
		}
	}
	/* The expected module must itself be canonical: it parses and prints back unchanged. */
	if (ok && want && strncmp(want, "error: ", 7)) {
		tbc_diags *d = tbc_diags_create();
		tbc_module *m = tbc_parse(want, base, d);
		char *again = m ? tbc_print(m) : NULL;
		if (!again || strcmp(again, want)) {
			fprintf(stderr, "%s: the expected part does not print back unchanged\n", path);
			if (again) print_diff(want, again);
			ok = false;
		}
		free(again);
		tbc_module_destroy(m);
		tbc_diags_destroy(d);
	}
	free(got);
	free(input);
	free(text);
	return ok;
}

int main(int argc, char **argv) {
	const char *env = getenv("TBC_UPDATE_GOLDEN");
	bool update = env && *env && strcmp(env, "0");
	int failed = 0, files = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--update")) {
			update = true;
			continue;
		}
		files++;
		if (!run_file(argv[i], update)) failed++;
	}
	if (!files) {
		fprintf(stderr, "usage: tbc_golden [--update] FILE.ir...\n");
		return 2;
	}
	return failed ? 1 : 0;
}
