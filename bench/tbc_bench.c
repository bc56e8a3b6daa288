/* Times a model compiled by tbc for this CPU: JIT-compiles MODEL, binds the
 * inputs, runs it WARMUP times, then RUNS times, and prints the median and
 * the minimum milliseconds per run.  bench/compare.py runs it beside
 * onnxruntime.
 *
 *   usage: tbc-bench MODEL.onnx NAME=INPUT.npy ... [--threads N] [--runs N] [-O N]
 *                    [--precision fp32|fp16|bf16|fp8] [--qdq-fusion]
 *
 * MODEL may also be a shared object from `tbc compile -o x.so` (perf then
 * names the kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "../tools/timing.h"

static int diag_fail(tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[1024];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "tbc-bench: %s\n", buf);
	}
	return 1;
}

static int rt_fail(tbcrt_status st) {
	fprintf(stderr, "tbc-bench: %s (%s)\n", st.message, tbcrt_code_name(st.code));
	return 1;
}

int main(int argc, char **argv) {
	const char *path = NULL;
	int runs = 20, threads = 0, opt = 2, n_in = 0, precision = TBC_DT_F32, qdq_fusion = 0;
	char *names[64];
	const char *files[64];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-O") && i + 1 < argc) opt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
			const char *p = argv[++i];
			precision = !strcmp(p, "fp16")  ? TBC_DT_F16
				    : !strcmp(p, "bf16") ? TBC_DT_BF16
				    : !strcmp(p, "fp8")  ? TBC_DT_F8E4M3FN
				    : !strcmp(p, "fp32") ? TBC_DT_F32
							 : -1;
			if (precision < 0) {
				fprintf(stderr, "tbc-bench: --precision wants fp32, fp16, bf16 or fp8, got '%s'\n", p);
				return 2;
			}
		}
		else if (!strcmp(argv[i], "--qdq-fusion")) qdq_fusion = 1;
		else if (!path) path = argv[i];
		else if (strchr(argv[i], '=') && n_in < 64) {
			names[n_in] = argv[i];
			char *eq = strchr(argv[i], '=');
			*eq = 0;
			files[n_in++] = eq + 1;
		} else {
			fprintf(stderr, "usage: tbc-bench MODEL.onnx NAME=INPUT.npy ... [--threads N] [--runs N] [-O N] "
					"[--precision P] [--qdq-fusion]\n");
			return 2;
		}
	}
	if (!path || runs < 1) return 2;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	tbc_jit *jit = NULL;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.opt_level = opt;
	o.precision = precision;
	o.qdq_fusion = qdq_fusion;
	/* MODEL.so (tbc compile -o x.so): loaded by the runtime, so profilers
	 * see the kernels' symbols; anything else is JIT-compiled. */
	size_t plen = strlen(path);
	bool shared = plen > 3 && !strcmp(path + plen - 3, ".so");
	double t0 = now_ms();
	if (!shared &&
	    (tbc_module_load_onnx(path, d, &m) != TBC_OK || tbc_jit_compile(m, &o, d, &jit) != TBC_OK))
		return diag_fail(d);
	double compile_ms = now_ms() - t0;
	tbcrt_context *ctx;
	tbcrt_model *model;
	tbcrt_session *s;
	tbcrt_context_options co;
	tbcrt_context_options_init(&co);
	co.thread_count = (uint32_t)threads;
	tbcrt_status st = tbcrt_context_create(&co, &ctx);
	if (!tbcrt_status_is_ok(&st)) return rt_fail(st);
	st = shared ? tbcrt_model_load(ctx, path, &model) : tbcrt_model_from_descriptor(ctx, tbc_jit_descriptor(jit), NULL, &model);
	if (!tbcrt_status_is_ok(&st)) return rt_fail(st);
	st = tbcrt_session_create(model, &s);
	if (!tbcrt_status_is_ok(&st)) return rt_fail(st);
	tbc_tensor *in[64] = {0};
	for (int k = 0; k < n_in; k++) {
		uint32_t idx;
		st = tbcrt_model_find_input(model, names[k], &idx);
		if (!tbcrt_status_is_ok(&st)) return rt_fail(st);
		if (tbc_tensor_read_file(files[k], d, &in[k], NULL) != TBC_OK) return diag_fail(d);
		st = tbcrt_session_bind_input(s, idx, (int32_t)in[k]->dtype, (uint32_t)in[k]->rank, in[k]->dims, in[k]->data,
					      (size_t)in[k]->numel * tbc_dtype_size(in[k]->dtype));
		if (!tbcrt_status_is_ok(&st)) return rt_fail(st);
	}
	double *ms = calloc((size_t)runs, sizeof *ms);
	for (int r = -3; r < runs; r++) {
		double a = now_ms();
		st = tbcrt_session_run(s);
		if (!tbcrt_status_is_ok(&st)) return rt_fail(st);
		if (r >= 0) ms[r] = now_ms() - a;
	}
	qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
	uint32_t nt = 0;
	if (!tbcrt_status_is_ok((st = tbcrt_context_thread_count(ctx, &nt), &st))) return rt_fail(st);
	printf("median_ms %.3f min_ms %.3f compile_ms %.1f threads %u\n", ms[runs / 2], ms[0], compile_ms, nt);
	free(ms);
	for (int k = 0; k < n_in; k++) tbc_tensor_destroy(in[k]);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	tbc_jit_destroy(jit);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return 0;
}
