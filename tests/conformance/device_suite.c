/* tbc-device-suite: runs artifacts compiled ahead (`tbc compile --target
 * cuda:sm_90 -o CASE/model.so`) on one device of this machine and compares
 * their outputs with the expected ones, as tbc-conformance does for the
 * targets it compiles in process.  It needs libtbcrt and no compiler (no
 * LLVM): it is what runs on a GPU machine where tbc itself is not built
 * (docs/gpu.md, "Running on a GPU").
 *
 * Each CASE folder holds model.so and test_data_set_K/input_I.pb and
 * output_I.pb (the ONNX node-test layout; output files absent: run only;
 * .npy files are read too).  The data sets run in order on one session, so
 * for a training step (`tbc compile --train`) set K is step K + 1: its
 * state (weights, optimizer slots) is the session's, neither bound nor
 * compared, and the outputs checked are the loss and the model's.  With
 * --record, each set's outputs are written (output_I.npy) instead of
 * compared: the expected steps of a training case come from the CPU here.
 * One line per case on stdout, written before the next case starts:
 *   PASS <case> <ms of the first run>[ median <ms> fastest <ms>] load <ms>
 * (load: the model loaded and a session made, the device's program built)
 *   FAIL <case> <message>
 * and a last line "done P passed F failed".  The exit status is 0 when every
 * case passed, 1 when one failed, 2 on bad arguments or a device this
 * machine lacks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "tests/conformance/compare.h"

#define MAX_IO 1024 /* a training step has an input and an output per piece of state */

typedef struct {
	tbcrt_context *ctx;
	uint32_t device;
	double atol, rtol;
	int runs; /* timed runs after the last data set was checked */
	bool profile; /* then as many runs again with the device's kernels timed */
	bool record;  /* write each set's outputs instead of comparing them */
} suite;

static double now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static bool is_file(const char *p) {
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool rt_ok(tbcrt_status st, const char *what, char *msg, size_t size) {
	if (tbcrt_status_is_ok(&st)) return true;
	snprintf(msg, size, "%s: %s (%s)", what, st.message, tbcrt_code_name(st.code));
	return false;
}

static bool read_tensor(const char *path, tbc_tensor **out, char *msg, size_t size) {
	tbc_diags *d = tbc_diags_create();
	bool ok = tbc_tensor_read_file(path, d, out, NULL) == TBC_OK;
	if (!ok) {
		char e[400] = "(no diagnostic)";
		if (tbc_diags_count(d)) tbc_diag_format(tbc_diags_get(d, 0), e, sizeof e);
		snprintf(msg, size, "%s", e);
	}
	tbc_diags_destroy(d);
	return ok;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

typedef struct {
	const char *name;
	double ms, launches;
} kernel_time;

static int by_ms(const void *a, const void *b) {
	double x = ((const kernel_time *)a)->ms, y = ((const kernel_time *)b)->ms;
	return (x < y) - (x > y);
}

/* s->runs more runs with the device's kernels timed: the device time per run
 * and the kernels that take most of it, on stdout before the case's line. */
static bool profile_runs(const suite *s, tbcrt_session *ses, char *msg, size_t size) {
	bool ok = rt_ok(tbcrt_session_set_profiling(ses, true), "profiling", msg, size);
	for (int r = 0; ok && r < s->runs; r++) ok = rt_ok(tbcrt_session_run(ses), "profiled run", msg, size);
	tbcrt_session_profile p;
	if (ok) ok = rt_ok(tbcrt_session_get_profile(ses, &p), "profile", msg, size);
	kernel_time *k = ok ? calloc(p.n_kernels + 1, sizeof *k) : NULL;
	ok = ok && k;
	double sum = 0;
	for (uint32_t i = 0; ok && i < p.n_kernels; i++) {
		tbcrt_kernel_profile kp;
		ok = rt_ok(tbcrt_session_kernel_profile(ses, i, &kp), "kernel profile", msg, size);
		k[i] = (kernel_time){kp.name, kp.ms / (double)p.runs, (double)kp.launches / (double)p.runs};
		sum += k[i].ms;
	}
	if (ok) {
		qsort(k, p.n_kernels, sizeof *k, by_ms);
		printf("  profile: %.3f ms of device time per run, %.3f ms in kernels, %u kernels\n",
		       p.device_ms / (double)p.runs, sum, p.n_kernels);
		for (uint32_t i = 0; i < p.n_kernels && i < 12 && k[i].ms > 0; i++)
			printf("  %8.3f ms %5.1f%% %6.1f launches  %s\n", k[i].ms, sum > 0 ? 100 * k[i].ms / sum : 0.0,
			       k[i].launches, k[i].name);
	}
	free(k);
	if (ok) ok = rt_ok(tbcrt_session_set_profiling(ses, false), "profiling off", msg, size);
	return ok;
}

/* Whether input (is_input) or output `index` is a piece of a training
 * step's state, which the session binds and carries itself. */
static bool is_state(const tbcrt_model *model, uint32_t n_state, uint32_t index, bool is_input) {
	for (uint32_t i = 0; i < n_state; i++) {
		tbcrt_state_info si;
		tbcrt_status st = tbcrt_model_state_info(model, i, &si);
		if (tbcrt_status_is_ok(&st) && (is_input ? si.input : si.output) == index) return true;
	}
	return false;
}

/* DIR/NAME_I.pb, else DIR/NAME_I.npy when that exists. */
static void data_file(char *path, size_t size, const char *dir, const char *name, uint32_t i) {
	snprintf(path, size, "%s/%s_%u.pb", dir, name, i);
	if (!is_file(path)) snprintf(path, size, "%s/%s_%u.npy", dir, name, i);
}

/* Binds one data set's inputs, runs, compares the outputs it has files for
 * (or, recording, writes them). */
static bool run_set(const suite *s, tbcrt_session *ses, const tbcrt_model *model, const char *dir, bool first_set,
		    bool timed, char *msg, size_t size, char *timing, size_t timing_size) {
	tbcrt_model_info info;
	if (!rt_ok(tbcrt_model_get_info(model, &info), "model info", msg, size)) return false;
	if (info.n_inputs > MAX_IO || info.n_outputs > MAX_IO) {
		snprintf(msg, size, "more than %d inputs or outputs", MAX_IO);
		return false;
	}
	tbc_tensor *in[MAX_IO] = {0};
	char path[8300]; /* dir is at most 8191 characters (run_case) */
	bool ok = true;
	for (uint32_t i = 0; ok && i < info.n_inputs; i++) {
		if (is_state(model, info.n_state, i, true)) continue;
		data_file(path, sizeof path, dir, "input", i);
		ok = read_tensor(path, &in[i], msg, size);
		if (ok)
			ok = rt_ok(tbcrt_session_bind_input(ses, i, (int32_t)in[i]->dtype, (uint32_t)in[i]->rank,
							    in[i]->dims, in[i]->data,
							    (size_t)in[i]->numel * tbc_dtype_size(in[i]->dtype)),
				   "binding an input", msg, size);
	}
	double t0 = now_ms();
	if (ok) ok = rt_ok(tbcrt_session_run(ses), "run", msg, size);
	double first = now_ms() - t0;
	for (uint32_t i = 0; ok && s->record && i < info.n_outputs; i++) {
		tbcrt_tensor got;
		if (is_state(model, info.n_state, i, false)) continue;
		ok = rt_ok(tbcrt_session_output(ses, i, &got), "reading an output", msg, size);
		tbc_tensor *g = ok ? tbc_tensor_create((tbc_dtype)got.dtype, (int)got.rank, got.dims) : NULL;
		ok = ok && g && (size_t)g->numel * tbc_dtype_size(g->dtype) == got.bytes;
		if (ok && got.bytes) memcpy(g->data, got.data, got.bytes);
		snprintf(path, sizeof path, "%s/output_%u.npy", dir, i);
		if (ok && tbc_tensor_write_npy(path, g, NULL) != TBC_OK) {
			snprintf(msg, size, "cannot write output_%u.npy of %.900s", i, dir);
			ok = false;
		}
		tbc_tensor_destroy(g);
	}
	for (uint32_t i = 0; ok && !s->record && i < info.n_outputs; i++) {
		data_file(path, sizeof path, dir, "output", i);
		if (!is_file(path)) continue;
		tbc_tensor *want = NULL;
		tbcrt_tensor got;
		ok = read_tensor(path, &want, msg, size) &&
		     rt_ok(tbcrt_session_output(ses, i, &got), "reading an output", msg, size);
		if (ok) {
			tbc_tensor *g = tbc_tensor_create((tbc_dtype)got.dtype, (int)got.rank, got.dims);
			ok = g && (size_t)g->numel * tbc_dtype_size(g->dtype) == got.bytes;
			if (!ok) snprintf(msg, size, "output %u: %zu bytes do not fit its shape", i, got.bytes);
			if (ok && got.bytes) memcpy(g->data, got.data, got.bytes);
			tbcrt_tensor_info oi;
			if (ok) ok = rt_ok(tbcrt_model_output_info(model, i, &oi), "output info", msg, size);
			if (ok) ok = tbc_conf_compare(g, want, oi.name, s->atol, s->rtol, msg, size);
			tbc_tensor_destroy(g);
		}
		tbc_tensor_destroy(want);
	}
	if (ok && first_set) snprintf(timing, timing_size, "%.3f", first);
	if (ok && timed && s->runs > 0) {
		double *ms = malloc((size_t)s->runs * sizeof *ms);
		ok = ms != NULL;
		for (int r = 0; ok && r < s->runs; r++) {
			double t = now_ms();
			ok = rt_ok(tbcrt_session_run(ses), "timed run", msg, size);
			ms[r] = now_ms() - t;
		}
		if (ok) {
			qsort(ms, (size_t)s->runs, sizeof *ms, cmp_double);
			size_t n = strlen(timing);
			snprintf(timing + n, timing_size - n, " median %.3f fastest %.3f", ms[s->runs / 2], ms[0]);
		}
		free(ms);
	}
	if (ok && timed && s->profile && s->runs > 0) ok = profile_runs(s, ses, msg, size);
	for (uint32_t i = 0; i < info.n_inputs; i++) tbc_tensor_destroy(in[i]);
	return ok;
}

static bool run_case(const suite *s, const char *dir, char *msg, size_t size, char *timing, size_t timing_size) {
	char path[8192];
	snprintf(path, sizeof path, "%s/model.so", dir);
	tbcrt_model *model = NULL;
	tbcrt_session *ses = NULL;
	tbcrt_session_options o;
	tbcrt_session_options_init(&o);
	o.device = s->device;
	double t0 = now_ms();
	bool ok = rt_ok(tbcrt_model_load(s->ctx, path, &model), "loading model.so", msg, size) &&
		  rt_ok(tbcrt_session_create_with(model, &o, &ses), "session", msg, size);
	double load = now_ms() - t0; /* a device program's build (PTX JIT) included */
	int sets = 0;
	struct stat st;
	for (;; sets++) {
		snprintf(path, sizeof path, "%s/test_data_set_%d", dir, sets);
		if (stat(path, &st) != 0) break;
	}
	/* timed after the last set: a training step's runs change its state */
	for (int k = 0; ok && k < sets; k++) {
		snprintf(path, sizeof path, "%s/test_data_set_%d", dir, k);
		ok = run_set(s, ses, model, path, k == 0, k == sets - 1, msg, size, timing, timing_size);
		if (!ok && sets > 1) { /* which set (a training step's step k + 1) */
			char what[1024];
			snprintf(what, sizeof what, "test_data_set_%d: %s", k, msg);
			snprintf(msg, size, "%s", what);
		}
	}
	if (ok && !sets) {
		snprintf(msg, size, "no test_data_set_0");
		ok = false;
	}
	if (ok) {
		/* and what the device loaded: a cubin, or PTX it JIT-compiled */
		tbcrt_session_stats stats;
		bool known = tbcrt_session_get_stats(ses, &stats).code == TBCRT_OK && stats.device_code;
		size_t n = strlen(timing);
		snprintf(timing + n, timing_size - n, " load %.1f%s%s%s", load, known ? " (" : "",
			 known ? stats.device_code : "", known ? ")" : "");
	}
	tbcrt_session_destroy(ses);
	tbcrt_model_destroy(model);
	return ok;
}

static const char *base_name(const char *p) {
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/') n--;
	static char buf[4096];
	snprintf(buf, sizeof buf, "%.*s", (int)n, p);
	char *slash = strrchr(buf, '/');
	return slash ? slash + 1 : buf;
}

static void usage(void) {
	fputs("usage: tbc-device-suite --device NAME [--rtol R] [--atol A] [--runs N [--profile]] [--threads N]\n"
	      "                        [--record] CASE_DIR...\n"
	      "  runs CASE_DIR/model.so on device NAME (cpu, opencl:0, cuda:0, hip:0: `tbc doctor` lists them)\n"
	      "  with every CASE_DIR/test_data_set_K/input_I.pb and compares output_I.pb (default rtol 1e-3,\n"
	      "  atol 1e-7, the conformance suite's); --runs N times N more runs of the last data set;\n"
	      "  --profile then N more with each kernel timed on the device (CUDA, HIP); --record writes\n"
	      "  each set's outputs as output_I.npy instead of comparing (a training step: set K is step K+1)\n",
	      stderr);
}

int main(int argc, char **argv) {
	suite s = {.atol = 1e-7, .rtol = 1e-3};
	const char *device = NULL;
	uint32_t threads = 0;
	int first_case = argc;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if (!strcmp(a, "--device") && has) device = argv[++i];
		else if (!strcmp(a, "--rtol") && has) s.rtol = atof(argv[++i]);
		else if (!strcmp(a, "--atol") && has) s.atol = atof(argv[++i]);
		else if (!strcmp(a, "--runs") && has) s.runs = atoi(argv[++i]);
		else if (!strcmp(a, "--profile")) s.profile = true;
		else if (!strcmp(a, "--record")) s.record = true;
		else if (!strcmp(a, "--threads") && has) threads = (uint32_t)atoi(argv[++i]);
		else if (a[0] == '-') {
			usage();
			return 2;
		} else {
			first_case = i;
			break;
		}
	}
	if (!device || first_case == argc || s.runs < 0 || !(s.rtol >= 0) || !(s.atol >= 0)) {
		usage();
		return 2;
	}
	tbcrt_context_options co;
	tbcrt_context_options_init(&co);
	co.thread_count = threads;
	char msg[1024];
	if (!rt_ok(tbcrt_context_create(&co, &s.ctx), "context", msg, sizeof msg) ||
	    !rt_ok(tbcrt_device_find(s.ctx, device, &s.device), "device", msg, sizeof msg)) {
		fprintf(stderr, "tbc-device-suite: %s\n", msg);
		tbcrt_context_destroy(s.ctx);
		return 2;
	}
	tbcrt_device_info di;
	if (!rt_ok(tbcrt_device_info_get(s.ctx, s.device, &di), "device info", msg, sizeof msg) || !di.available) {
		fprintf(stderr, "tbc-device-suite: device %s is unavailable: %s\n", device,
			di.available ? msg : di.unavailable_reason);
		tbcrt_context_destroy(s.ctx);
		return 2;
	}
	printf("device %s: %s (%s%s%s), %s, %u compute units, %.1f GiB\n", di.name, di.device_name, di.vendor,
	       di.arch[0] ? ", " : "", di.arch, di.version, di.compute_units,
	       (double)di.global_memory_bytes / (1024.0 * 1024 * 1024));
	fflush(stdout);
	int passed = 0, failed = 0;
	for (int i = first_case; i < argc; i++) {
		char timing[128] = "";
		msg[0] = 0;
		const char *name = base_name(argv[i]);
		if (run_case(&s, argv[i], msg, sizeof msg, timing, sizeof timing)) {
			passed++;
			printf("PASS %s %s\n", name, timing);
		} else {
			failed++;
			for (char *c = msg; *c; c++)
				if (*c == '\n' || *c == '\r') *c = ' ';
			printf("FAIL %s %s\n", name, msg);
		}
		fflush(stdout);
	}
	printf("done %d passed %d failed\n", passed, failed);
	tbcrt_context_destroy(s.ctx);
	return failed ? 1 : 0;
}
