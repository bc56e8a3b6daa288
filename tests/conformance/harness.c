/* Conformance harness: runs the ONNX node test suite through a target and
 * compares every output with the expected one (rtol 1e-3, atol 1e-7, exact
 * for integers and bools, NaN equal to NaN, shapes and dtypes equal).
 *
 * Each case runs in a child process, so a crash or a hang is one failed
 * case, not a dead run.  The expected-failure list is strict: a case that
 * fails and is not listed fails the run, and so does a listed case that
 * passes, so the list only shrinks. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir/dtype.h"
#include "onnx/onnx.pb-c.h"
#include "ir/ir.h"
#include "tbc/abi.h"
#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/gpu_target.h"
#include "tests/conformance/opencl_target.h"

typedef enum { R_PASS, R_FAIL, R_UNSUPPORTED_OK, R_SKIP } result_kind;

#define MAX_TARGETS 8

typedef struct {
	result_kind result;
	char *xfail_reason; /* NULL when not listed */
	char message[512];
	double seconds;
} outcome;

typedef struct {
	char *name;
	bool in_scope;
	bool selected; /* by --filter */
	char **ops; /* op types in the model */
	int n_ops;
	outcome t[MAX_TARGETS]; /* per target run */
} test_case;

/* ---- Targets ------------------------------------------------------------ */
typedef struct target {
	const char *name;
	tbc_code (*run)(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			tbc_diags *d);
	/* Compiles and checks the code only (no device here): no outputs to
	 * compare. */
	bool compile_only;
} target;

/* Threads of the `cpu` target's runtime context: what users run on this
 * machine kind (2 cores), so chunked parallel loops are exercised. */
#define CPU_THREADS 2

/* The suite's tolerance (the report says it too). */
#define HARNESS_ATOL 1e-7
#define HARNESS_RTOL 1e-3

static tbc_code rt_error(tbc_diags *d, const char *what, const tbcrt_status *st) {
	tbc_diags_add(d, st->code == TBCRT_ERR_NO_MEMORY ? TBC_ERR_NO_MEMORY : TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL,
		      "%s: %s (%s)", what, st->message, tbcrt_code_name(st->code));
	return st->code == TBCRT_ERR_NO_MEMORY ? TBC_ERR_NO_MEMORY : TBC_ERR_RUNTIME;
}

/* One run of a compiled model through libtbcrt: bind, run, copy out. */
static tbc_code run_session(tbcrt_model *model, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			    tbc_diags *d) {
	tbcrt_session *s = NULL;
	tbcrt_status st = tbcrt_session_create(model, &s);
	if (!tbcrt_status_is_ok(&st)) return rt_error(d, "session", &st);
	tbc_code rc = TBC_OK;
	for (size_t i = 0; rc == TBC_OK && i < n_in; i++) {
		const tbc_tensor *t = in[i];
		st = tbcrt_session_bind_input(s, (uint32_t)i, (int32_t)t->dtype, (uint32_t)t->rank, t->dims, t->data,
					      (size_t)t->numel * tbc_dtype_size(t->dtype));
		if (!tbcrt_status_is_ok(&st)) rc = rt_error(d, "input", &st);
	}
	if (rc == TBC_OK) {
		st = tbcrt_session_run(s);
		if (!tbcrt_status_is_ok(&st)) rc = rt_error(d, "run", &st);
	}
	for (size_t i = 0; rc == TBC_OK && i < n_out; i++) {
		tbcrt_tensor t;
		st = tbcrt_session_output(s, (uint32_t)i, &t);
		if (!tbcrt_status_is_ok(&st)) {
			rc = rt_error(d, "output", &st);
			break;
		}
		out[i] = tbc_tensor_create((tbc_dtype)t.dtype, (int)t.rank, t.dims);
		if (!out[i] || (size_t)out[i]->numel * tbc_dtype_size(out[i]->dtype) != t.bytes) {
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "output %zu: %zu bytes do not fit its shape",
				      i, t.bytes);
			rc = TBC_ERR_INTERNAL;
			break;
		}
		if (t.bytes) memcpy(out[i]->data, t.data, t.bytes);
	}
	tbcrt_session_destroy(s);
	return rc;
}

/* The `cpu` target: JIT-compiled for the host and run by libtbcrt on its
 * thread pool, as an application runs a model. */
static tbc_code run_cpu_pool(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			     tbc_diags *d) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	tbc_jit *jit = NULL;
	tbc_code rc = tbc_jit_compile(m, NULL, d, &jit);
	if (rc != TBC_OK) return rc;
	tbcrt_context_options o;
	tbcrt_context_options_init(&o);
	o.thread_count = CPU_THREADS;
	tbcrt_context *c = NULL;
	tbcrt_model *model = NULL;
	tbcrt_status st = tbcrt_context_create(&o, &c);
	if (!tbcrt_status_is_ok(&st)) rc = rt_error(d, "context", &st);
	if (rc == TBC_OK) {
		st = tbcrt_model_from_descriptor(c, tbc_jit_descriptor(jit), NULL, &model);
		if (!tbcrt_status_is_ok(&st)) rc = rt_error(d, "model", &st);
	}
	if (rc == TBC_OK) rc = run_session(model, in, n_in, out, n_out, d);
	if (rc != TBC_OK)
		for (size_t i = 0; i < n_out; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
	return rc;
}

static const target targets[] = {
	{"interp", tbc_interpret, false},
	{"cpu", run_cpu_pool, false},
	/* The compiler library's own single-threaded host (tbc_run_cpu), for
	 * telling a runtime problem from a code generation one. */
	{"cpu-serial", tbc_run_cpu, false},
	/* Kernels printed as OpenCL C, run on the first OpenCL device under the
	 * host program (tests/conformance/opencl_target.c). */
	{"opencl", tbc_run_opencl, false},
	/* Compiled for NVIDIA and AMD GPUs and checked by ptxas and
	 * llvm-readelf-19, not run (tests/conformance/gpu_target.c). */
	{"cuda-sm_75", tbc_compile_cuda_sm75, true},
	{"cuda-sm_90", tbc_compile_cuda_sm90, true},
	{"rocm-gfx90a", tbc_compile_rocm_gfx90a, true},
	{"rocm-gfx942", tbc_compile_rocm_gfx942, true},
	/* The same kernels (lowered for the device's description) under the
	 * kernel IR evaluator: the parallel form checked without a device. */
	{"opencl-eval", tbc_run_device_eval, false},
};

/* ---- Small utilities ------------------------------------------------------*/
static char *xstrdup(const char *s) {
	char *r = strdup(s);
	if (!r) {
		perror("strdup");
		exit(2);
	}
	return r;
}

static bool file_exists(const char *p) {
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void first_diag(tbc_diags *d, char *buf, size_t size) {
	if (tbc_diags_count(d))
		tbc_diag_format(tbc_diags_get(d, 0), buf, size);
	else
		snprintf(buf, size, "(no diagnostic)");
}

/* ---- Running one case (in the child) -----------------------------------------*/
static bool run_data_set(const target *tg, const tbc_module *m, const char *dir, char *msg, size_t size) {
	size_t n_in = tbc_module_input_count(m), n_out = tbc_module_output_count(m);
	tbc_tensor **in = calloc(n_in + 1, sizeof *in), **want = calloc(n_out + 1, sizeof *want),
		   **got = calloc(n_out + 1, sizeof *got);
	bool ok = in && want && got;
	char path[8192];
	tbc_diags *d = tbc_diags_create();
	for (size_t i = 0; ok && i < n_in; i++) {
		snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
		if (tbc_tensor_read_file(path, d, &in[i], NULL) != TBC_OK) {
			char e[400];
			first_diag(d, e, sizeof e);
			snprintf(msg, size, "reading input %zu: %s", i, e);
			ok = false;
		}
	}
	for (size_t i = 0; ok && i < n_out; i++) {
		snprintf(path, sizeof path, "%s/output_%zu.pb", dir, i);
		if (tbc_tensor_read_file(path, d, &want[i], NULL) != TBC_OK) {
			char e[400];
			first_diag(d, e, sizeof e);
			snprintf(msg, size, "reading expected output %zu: %s", i, e);
			ok = false;
		}
	}
	if (ok) {
		snprintf(path, sizeof path, "%s/input_%zu.pb", dir, n_in);
		if (file_exists(path)) {
			snprintf(msg, size, "the data set has more inputs than the model (%zu)", n_in);
			ok = false;
		}
	}
	if (ok && tg->run(m, in, n_in, got, n_out, d) != TBC_OK) {
		char e[480];
		first_diag(d, e, sizeof e);
		snprintf(msg, size, "%s", e);
		ok = false;
	}
	for (size_t i = 0; ok && !tg->compile_only && i < n_out; i++) {
		const char *name = tbc_module_output_name(m, i);
		ok = tbc_conf_compare(got[i], want[i], name ? name : "output", HARNESS_ATOL, HARNESS_RTOL, msg, size);
	}
	for (size_t i = 0; i < n_in; i++) tbc_tensor_destroy(in ? in[i] : NULL);
	for (size_t i = 0; i < n_out; i++) {
		tbc_tensor_destroy(want ? want[i] : NULL);
		tbc_tensor_destroy(got ? got[i] : NULL);
	}
	free(in);
	free(want);
	free(got);
	tbc_diags_destroy(d);
	return ok;
}

static result_kind run_case(const target *tg, const char *root, const test_case *c, char *msg, size_t size) {
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/model.onnx", root, c->name);
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	tbc_code code = tbc_module_load_onnx(path, d, &m);
	if (code != TBC_OK) {
		char e[480];
		first_diag(d, e, sizeof e);
		snprintf(msg, size, "%s", e);
		tbc_diags_destroy(d);
		return !c->in_scope && code == TBC_ERR_UNSUPPORTED ? R_UNSUPPORTED_OK : R_FAIL;
	}
	tbc_diags_destroy(d);
	if (!c->in_scope) {
		tbc_module_destroy(m);
		snprintf(msg, size, "out-of-scope case loaded without an 'unsupported' error");
		return R_FAIL;
	}
	bool ok = true;
	int sets = 0;
	for (int k = 0; ok; k++) {
		snprintf(path, sizeof path, "%s/%s/test_data_set_%d", root, c->name, k);
		struct stat st;
		if (stat(path, &st) != 0) break;
		sets++;
		ok = run_data_set(tg, m, path, msg, size);
	}
	tbc_module_destroy(m);
	if (ok && sets == 0) {
		snprintf(msg, size, "no test data sets");
		return R_FAIL;
	}
	return ok ? R_PASS : R_FAIL;
}

/* ---- Op types of a case, for the report -----------------------------------------*/
static void add_op(test_case *c, const char *op) {
	for (int i = 0; i < c->n_ops; i++)
		if (!strcmp(c->ops[i], op)) return;
	c->ops = realloc(c->ops, (size_t)(c->n_ops + 1) * sizeof *c->ops);
	if (!c->ops) exit(2);
	c->ops[c->n_ops++] = xstrdup(op);
}

static void collect_ops(test_case *c, const Onnx__GraphProto *g, int depth) {
	if (!g || depth > 8) return;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (n->op_type) add_op(c, n->op_type);
		for (size_t a = 0; a < n->n_attribute; a++) {
			collect_ops(c, n->attribute[a]->g, depth + 1);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++) collect_ops(c, n->attribute[a]->graphs[k], depth + 1);
		}
	}
}

static void read_ops(test_case *c, const char *root) {
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/model.onnx", root, c->name);
	FILE *f = fopen(path, "rb");
	if (!f) return;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
	if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, (size_t)n, buf);
		if (mp) {
			collect_ops(c, mp->graph, 0);
			onnx__model_proto__free_unpacked(mp, NULL);
		}
	}
	free(buf);
	fclose(f);
}

/* ---- Lists -----------------------------------------------------------------------*/
static char **read_lines(const char *path, int *n_out) {
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "tbc-conformance: cannot open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	char **lines = NULL;
	int n = 0;
	char buf[4096];
	while (fgets(buf, sizeof buf, f)) {
		buf[strcspn(buf, "\r\n")] = 0;
		char *s = buf;
		while (*s == ' ' || *s == '\t') s++;
		if (!*s || *s == '#') continue;
		lines = realloc(lines, (size_t)(n + 1) * sizeof *lines);
		if (!lines) exit(2);
		lines[n++] = xstrdup(s);
	}
	fclose(f);
	*n_out = n;
	return lines;
}

static test_case *find_case(test_case *cs, int n, const char *name) {
	for (int i = 0; i < n; i++)
		if (!strcmp(cs[i].name, name)) return &cs[i];
	return NULL;
}

/* ---- Report ------------------------------------------------------------------------*/
typedef struct {
	const char *op;
	int cases, passed[MAX_TARGETS];
} op_row;

static int cmp_row(const void *a, const void *b) { return strcmp(((const op_row *)a)->op, ((const op_row *)b)->op); }

/* names[0..n_t): the columns; those from n_run on were not run here but
 * recorded (their xfail lists, which their whole runs check strictly). */
static void write_report(const char *path, const char *const *names, int n_t, int n_run, test_case *cs, int n) {
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "tbc-conformance: cannot write %s: %s\n", path, strerror(errno));
		exit(2);
	}
	op_row *rows = NULL;
	int nr = 0, in_scope = 0, passed[MAX_TARGETS] = {0};
	for (int i = 0; i < n; i++) {
		if (!cs[i].in_scope) continue;
		in_scope++;
		for (int t = 0; t < n_t; t++) passed[t] += cs[i].t[t].result == R_PASS;
		for (int k = 0; k < cs[i].n_ops; k++) {
			op_row *r = NULL;
			for (int j = 0; j < nr; j++)
				if (!strcmp(rows[j].op, cs[i].ops[k])) r = &rows[j];
			if (!r) {
				rows = realloc(rows, (size_t)(nr + 1) * sizeof *rows);
				if (!rows) exit(2);
				r = &rows[nr++];
				*r = (op_row){cs[i].ops[k], 0, {0}};
			}
			r->cases++;
			for (int t = 0; t < n_t; t++) r->passed[t] += cs[i].t[t].result == R_PASS;
		}
	}
	qsort(rows, (size_t)nr, sizeof *rows, cmp_row);
	fprintf(f, "# Conformance\n\n");
	fprintf(f, "Generated by `tbc-conformance --report` (tests/conformance/) from the ONNX node test suite\n"
		   "(../shared/onnx-tests/node, ONNX 1.23.0). Do not edit by hand: `ctest -R conformance` rewrites it.\n\n");
	fprintf(f, "Outputs are compared with rtol 1e-3 and atol 1e-7, exactly for integers and bools;\n"
		   "in-scope cases are those ../shared/tools/scope.py accepts. Failing cases and their reasons\n"
		   "are in tests/conformance/<target>.xfail. Targets: `interp` is the reference interpreter,\n"
		   "`cpu` compiles for the host CPU through LLVM (JIT) and runs the result with libtbcrt on\n"
		   "its thread pool (2 threads).\n");
	bool compile_only = false;
	for (int t = n_run; t < n_t; t++) {
		const target *tg = NULL;
		for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
			if (!strcmp(targets[i].name, names[t])) tg = &targets[i];
		if (tg && tg->compile_only) {
			compile_only = true;
			continue;
		}
		/* `cuda`: the suite run on an NVIDIA GPU by tbc-device-suite, from
		 * artifacts compiled here (docs/gpu.md) */
		const char *doc = !strcmp(names[t], "cuda") ? "gpu" : names[t];
		fprintf(f, "`%s`'s column is not run by this command: it is every in-scope case but those\n"
			   "tests/conformance/%s.xfail lists, which the whole column's run checks strictly (an\n"
			   "unexpected pass fails it too); docs/%s.md has that run's command, date and device.\n",
			names[t], names[t], doc);
	}
	if (compile_only)
		fprintf(f, "The `cuda-*` and `rocm-*` columns are compile-only (no GPU on these machines): the\n"
			   "model compiled for that GPU, its PTX assembled by ptxas or its code object read by\n"
			   "llvm-readelf-19; recorded the same way from their xfail lists, which their whole runs\n"
			   "check strictly; docs/gpu.md has the command.\n");
	fprintf(f, "\n");
	fprintf(f, "## Totals\n\n| target | in-scope cases | passed | share |\n|---|---:|---:|---:|\n");
	for (int t = 0; t < n_t; t++)
		fprintf(f, "| %s | %d | %d | %.1f%% |\n", names[t], in_scope, passed[t],
			in_scope ? 100.0 * passed[t] / in_scope : 0.0);
	fprintf(f, "\n## By op\n\nA case counts for every op type its model contains (expanded function\n"
		   "tests therefore count for their constituent ops too).\n\n| op | cases |");
	for (int t = 0; t < n_t; t++) fprintf(f, " %s |", names[t]);
	fprintf(f, "\n|---|---:|");
	for (int t = 0; t < n_t; t++) fprintf(f, "---:|");
	fprintf(f, "\n");
	for (int i = 0; i < nr; i++) {
		fprintf(f, "| %s | %d |", rows[i].op, rows[i].cases);
		for (int t = 0; t < n_t; t++) fprintf(f, " %d |", rows[i].passed[t]);
		fprintf(f, "\n");
	}
	free(rows);
	fclose(f);
}

/* FNV-1a 32 of a case name: --sample's choice, independent of the other cases. */
static unsigned name_hash(const char *s) {
	unsigned h = 2166136261u;
	for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* ---- Main --------------------------------------------------------------------------*/
static void usage(void) {
	fputs("usage: tbc-conformance --cases DIR [--target T[,T...]] [--scope FILE] [--xfail-dir DIR]\n"
	      "                       [--report FILE.md] [--filter SUBSTR] [--sample K] [--jobs N] [--timeout SEC] [-v]\n"
	      "                       [--write-xfail] [--report-recorded T]\n"
	      "  --target       interp (default), cpu, or a comma-separated list\n"
	      "  --scope FILE   in-scope case names, one a line (scope.py --list); without it every case is in scope\n"
	      "  --xfail-dir D  expected failures in D/<target>.xfail: 'case  reason' per line; strict both ways\n"
	      "  --xfail FILE   the same for a single target\n"
	      "  --report-recorded T  also a column for target T, not run here: every in-scope case but\n"
	      "                 those D/T.xfail lists (what T's whole, strict run last found)\n"
	      "  --write-xfail  rewrite the expected-failure files from this run (reasons: the failure messages,\n"
	      "                 kept where a case was listed already)\n"
	      "  --filter S     only cases whose name contains S (no strictness about unlisted cases)\n"
	      "  --sample K     a fixed 1/K of the cases, chosen by a hash of each name (stable as the suite\n"
	      "                 grows); strict about those (CI's sample of slow targets)\n",
	      stderr);
}

static void load_xfail(const char *path, test_case *cs, int n, int t, int *bad_lists) {
	int k;
	char **lines = read_lines(path, &k);
	for (int i = 0; i < k; i++) {
		char *sp = lines[i] + strcspn(lines[i], " \t");
		char *reason = sp;
		while (*reason == ' ' || *reason == '\t') reason++;
		*sp = 0;
		test_case *c = find_case(cs, n, lines[i]);
		if (!c) {
			fprintf(stderr, "tbc-conformance: %s lists an unknown case %s\n", path, lines[i]);
			++*bad_lists;
		} else if (!*reason) {
			fprintf(stderr, "tbc-conformance: %s: %s has no reason\n", path, lines[i]);
			++*bad_lists;
		} else {
			c->t[t].xfail_reason = xstrdup(reason);
		}
		free(lines[i]);
	}
	free(lines);
}

/* The failure message without the cases folder in front: reasons stay short
 * and do not depend on where the suite lives. */
static const char *short_reason(const char *msg, const char *root) {
	const char *p = strstr(msg, root);
	if (p == msg) {
		p += strlen(root);
		while (*p == '/') p++;
		return p;
	}
	return msg;
}

static void write_xfail(const char *path, const target *tg, test_case *cs, int n, int t, const char *root) {
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "tbc-conformance: cannot write %s: %s\n", path, strerror(errno));
		exit(2);
	}
	fprintf(f, "# Expected failures of the %s target: 'case  reason'.\n"
		   "# Strict both ways: a failing case missing here fails the run, and so does a listed case\n"
		   "# that passes, so the list only shrinks.\n", tg->name);
	for (int i = 0; i < n; i++) {
		outcome *o = &cs[i].t[t];
		if (!cs[i].in_scope || o->result == R_PASS) continue;
		const char *reason = o->xfail_reason ? o->xfail_reason : short_reason(o->message, root);
		char clean[512];
		snprintf(clean, sizeof clean, "%s", *reason ? reason : "fails");
		for (char *q = clean; *q; q++)
			if (*q == '\n' || *q == '\r') *q = ' ';
		fprintf(f, "%s  %s\n", cs[i].name, clean);
	}
	fclose(f);
}

typedef struct {
	pid_t pid;
	int fd, idx;
	struct timespec start;
} child;

/* Runs the selected cases on one target, `jobs` children at a time; each
 * child writes its verdict into a pipe. */
static void run_target(const target *tg, int t, const char *root, test_case *cs, int n, int jobs, int timeout) {
	child *running = calloc((size_t)jobs, sizeof *running);
	if (!running) exit(2);
	int next = 0, active = 0;
	while (next < n || active) {
		while (active < jobs && next < n) {
			int i = next++;
			if (!cs[i].selected) continue;
			int p[2];
			if (pipe(p)) {
				perror("pipe");
				exit(2);
			}
			fflush(NULL);
			pid_t pid = fork();
			if (pid == 0) {
				close(p[0]);
				alarm((unsigned)timeout);
				char msg[512] = "";
				result_kind r = run_case(tg, root, &cs[i], msg, sizeof msg);
				char out[600];
				int len = snprintf(out, sizeof out, "%d %s", (int)r, msg);
				if (write(p[1], out, (size_t)(len < (int)sizeof out ? len : (int)sizeof out - 1)) < 0) _exit(3);
				_exit(0);
			}
			close(p[1]);
			running[active] = (child){pid, p[0], i, {0, 0}};
			clock_gettime(CLOCK_MONOTONIC, &running[active].start);
			active++;
		}
		if (!active) break;
		int status;
		pid_t pid = wait(&status);
		if (pid < 0) break;
		for (int k = 0; k < active; k++) {
			if (running[k].pid != pid) continue;
			outcome *o = &cs[running[k].idx].t[t];
			char buf[600] = "";
			ssize_t len = read(running[k].fd, buf, sizeof buf - 1);
			close(running[k].fd);
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			o->seconds = (double)(now.tv_sec - running[k].start.tv_sec) +
				     (double)(now.tv_nsec - running[k].start.tv_nsec) * 1e-9;
			if (WIFSIGNALED(status)) {
				o->result = R_FAIL;
				snprintf(o->message, sizeof o->message, "crashed with signal %d%s", WTERMSIG(status),
					 WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
			} else if (len <= 0 || WEXITSTATUS(status) != 0) {
				o->result = R_FAIL;
				snprintf(o->message, sizeof o->message, "child exited with status %d", WEXITSTATUS(status));
			} else {
				buf[len] = 0;
				char *sp = strchr(buf, ' ');
				o->result = (result_kind)atoi(buf);
				snprintf(o->message, sizeof o->message, "%s", sp ? sp + 1 : "");
			}
			running[k] = running[--active];
			break;
		}
	}
	free(running);
}

/* Prints the verdicts of one target; returns the number of problems that
 * fail the run. */
static int judge(const target *tg, int t, test_case *cs, int n, bool strict, bool verbose) {
	int in_scope = 0, passed = 0, failed = 0, xfailed = 0, unexpected_fail = 0, unexpected_pass = 0, oos_bad = 0;
	for (int i = 0; i < n; i++) {
		test_case *c = &cs[i];
		outcome *o = &c->t[t];
		if (!c->selected) continue;
		if (!c->in_scope) {
			if (o->result != R_UNSUPPORTED_OK) {
				oos_bad++;
				printf("FAIL   %s %s (out of scope): %s\n", tg->name, c->name, o->message);
			} else if (verbose) {
				printf("unsup  %s %s: %s\n", tg->name, c->name, o->message);
			}
			continue;
		}
		in_scope++;
		if (o->result == R_PASS) {
			passed++;
			if (o->xfail_reason) {
				unexpected_pass++;
				printf("XPASS  %s %s: listed as failing (%s) but passes: remove it from the list\n", tg->name,
				       c->name, o->xfail_reason);
			} else if (verbose) {
				printf("ok     %s %s (%.2fs)\n", tg->name, c->name, o->seconds);
			}
		} else {
			failed++;
			if (o->xfail_reason) {
				xfailed++;
				if (verbose) printf("xfail  %s %s: %s\n", tg->name, c->name, o->message);
			} else {
				unexpected_fail++;
				printf("FAIL   %s %s: %s\n", tg->name, c->name, o->message);
			}
		}
	}
	printf("%s: %d in-scope cases, %d passed, %d failed (%d expected), %d unexpected passes, "
	       "%d out-of-scope cases without an unsupported error\n",
	       tg->name, in_scope, passed, failed, xfailed, unexpected_pass, oos_bad);
	return oos_bad + (strict ? unexpected_fail + unexpected_pass : failed);
}

int main(int argc, char **argv) {
	const char *root = NULL, *scope = NULL, *xfail = NULL, *xfail_dir = NULL, *report = NULL, *filter = NULL;
	int sample = 0;
	char tnames[256] = "interp";
	const char *recorded[MAX_TARGETS];
	int n_rec = 0;
	int jobs = 1, timeout = 120;
	bool verbose = false, rewrite = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--cases") && v) root = argv[++i];
		else if (!strcmp(a, "--scope") && v) scope = argv[++i];
		else if (!strcmp(a, "--xfail") && v) xfail = argv[++i];
		else if (!strcmp(a, "--xfail-dir") && v) xfail_dir = argv[++i];
		else if (!strcmp(a, "--report") && v) report = argv[++i];
		else if (!strcmp(a, "--report-recorded") && v && n_rec < MAX_TARGETS) recorded[n_rec++] = argv[++i];
		else if (!strcmp(a, "--filter") && v) filter = argv[++i];
		else if (!strcmp(a, "--sample") && v) sample = atoi(argv[++i]);
		else if (!strcmp(a, "--target") && v) snprintf(tnames, sizeof tnames, "%s", argv[++i]);
		else if (!strcmp(a, "--jobs") && v) jobs = atoi(argv[++i]);
		else if (!strcmp(a, "--timeout") && v) timeout = atoi(argv[++i]);
		else if (!strcmp(a, "--write-xfail")) rewrite = true;
		else if (!strcmp(a, "-v")) verbose = true;
		else {
			usage();
			return 2;
		}
	}
	if (!root) {
		usage();
		return 2;
	}
	const target *tgs[MAX_TARGETS];
	int n_t = 0;
	for (char *save = NULL, *tok = strtok_r(tnames, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const target *tg = NULL;
		for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
			if (!strcmp(targets[i].name, tok)) tg = &targets[i];
		if (!tg || n_t == MAX_TARGETS) {
			fprintf(stderr, "tbc-conformance: unknown target '%s'\n", tok);
			return 2;
		}
		tgs[n_t++] = tg;
	}
	if (n_t + n_rec > MAX_TARGETS || (n_rec && (!report || !xfail_dir))) {
		fprintf(stderr, "tbc-conformance: --report-recorded needs --report and --xfail-dir, and at most %d columns\n",
			MAX_TARGETS);
		return 2;
	}
	if (xfail && n_t != 1) {
		fprintf(stderr, "tbc-conformance: --xfail takes one target; use --xfail-dir for several\n");
		return 2;
	}
	if (jobs < 1) jobs = 1;

	DIR *dir = opendir(root);
	if (!dir) {
		fprintf(stderr, "tbc-conformance: cannot open %s: %s\n", root, strerror(errno));
		return 2;
	}
	char **names = NULL;
	int n = 0;
	for (struct dirent *e; (e = readdir(dir));) {
		if (strncmp(e->d_name, "test_", 5)) continue;
		names = realloc(names, (size_t)(n + 1) * sizeof *names);
		if (!names) return 2;
		names[n++] = xstrdup(e->d_name);
	}
	closedir(dir);
	qsort(names, (size_t)n, sizeof *names, cmp_str);
	test_case *cs = calloc((size_t)(n ? n : 1), sizeof *cs);
	if (!cs) return 2;
	for (int i = 0; i < n; i++) {
		cs[i].name = names[i];
		cs[i].in_scope = scope == NULL;
		cs[i].selected = (!filter || strstr(names[i], filter)) && (sample <= 1 || name_hash(names[i]) % (unsigned)sample == 0);
		for (int t = 0; t < MAX_TARGETS; t++) cs[i].t[t].result = cs[i].selected ? R_FAIL : R_SKIP;
	}
	free(names);
	int bad_lists = 0;
	if (scope) {
		int k;
		char **lines = read_lines(scope, &k);
		for (int i = 0; i < k; i++) {
			test_case *c = find_case(cs, n, lines[i]);
			if (c)
				c->in_scope = true;
			else
				fprintf(stderr, "tbc-conformance: scope names an unknown case %s\n", lines[i]), bad_lists++;
			free(lines[i]);
		}
		free(lines);
	}
	char xpaths[MAX_TARGETS][4096];
	for (int t = 0; t < n_t; t++) {
		xpaths[t][0] = 0;
		if (xfail)
			snprintf(xpaths[t], sizeof xpaths[t], "%s", xfail);
		else if (xfail_dir)
			snprintf(xpaths[t], sizeof xpaths[t], "%s/%s.xfail", xfail_dir, tgs[t]->name);
		if (xpaths[t][0] && !(rewrite && !file_exists(xpaths[t]))) load_xfail(xpaths[t], cs, n, t, &bad_lists);
	}
	if (report)
		for (int i = 0; i < n; i++)
			if (cs[i].selected) read_ops(&cs[i], root);

	int bad = bad_lists;
	bool strict = (xfail || xfail_dir) && !filter && !rewrite;
	for (int t = 0; t < n_t; t++) {
		run_target(tgs[t], t, root, cs, n, jobs, timeout);
		int b = judge(tgs[t], t, cs, n, strict, verbose);
		int passed = 0;
		for (int i = 0; i < n; i++) passed += cs[i].in_scope && cs[i].t[t].result == R_PASS;
		/* The closing line CI reads. */
		printf("%s: %d passed, %d failed\n", tgs[t]->name, passed, b);
		bad += b;
		if (rewrite && xpaths[t][0] && !filter && sample <= 1) write_xfail(xpaths[t], tgs[t], cs, n, t, root);
	}
	if (report && !filter && sample <= 1) {
		/* Recorded columns: pass unless their xfail list names the case. */
		const char *names_all[MAX_TARGETS];
		for (int t = 0; t < n_t; t++) names_all[t] = tgs[t]->name;
		for (int r = 0; r < n_rec; r++) {
			int slot = n_t + r;
			names_all[slot] = recorded[r];
			char path[4096];
			snprintf(path, sizeof path, "%s/%s.xfail", xfail_dir, recorded[r]);
			int bad_rec = 0;
			load_xfail(path, cs, n, slot, &bad_rec);
			bad += bad_rec;
			for (int i = 0; i < n; i++) cs[i].t[slot].result = cs[i].t[slot].xfail_reason ? R_FAIL : R_PASS;
		}
		write_report(report, names_all, n_t + n_rec, n_t, cs, n);
	}
	for (int i = 0; i < n; i++) {
		free(cs[i].name);
		for (int t = 0; t < MAX_TARGETS; t++) free(cs[i].t[t].xfail_reason);
		for (int k = 0; k < cs[i].n_ops; k++) free(cs[i].ops[k]);
		free(cs[i].ops);
	}
	free(cs);
	return bad && !rewrite ? 1 : 0;
}
