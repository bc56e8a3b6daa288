/* The tbc command: a thin client of the compiler library (include/tbc/tbc.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tbc/abi.h"
#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "check.h"
#include "train.h"
#include "timing.h"

static const char usage_text[] =
	"usage: tbc <command> [options]\n"
	"\n"
	"commands:\n"
	"  inspect MODEL              print the IR and a summary (ops by kind, parameters,\n"
	"                             inputs and outputs with shapes); for a compiled .so,\n"
	"                             its targets, each target's kernels and code sizes\n"
	"  compile MODEL -o OUT       compile MODEL; OUT ends in .o (object + OUT's .h),\n"
	"                             .so (shared object), .ll (LLVM IR, for reading), .cl\n"
	"                             (the kernels as OpenCL C; --target opencl), .ptx (PTX;\n"
	"                             --target cuda[:sm_XX]) or .hsaco (--target rocm[:gfxNNN])\n"
	"      -O0 .. -O3             optimization level (default -O2); -O1 is a fast compile\n"
	"                             (a short LLVM pipeline; its code runs up to ~10% slower)\n"
	"      --target LIST          what the artifact holds code for (default cpu): a list of\n"
	"                             cpu, opencl, cuda[:sm_XX] (default sm_80) and rocm[:gfxNNN]\n"
	"                             (default gfx90a), e.g. cpu,opencl,cuda:sm_80,rocm:gfx942;\n"
	"                             without cpu it runs on those devices only.  A value with\n"
	"                             a '-' is a TRIPLE (as --triple)\n"
	"      --cuda-path DIR        the CUDA toolkit (default $CUDA_PATH, else /usr/local/cuda):\n"
	"                             DIR/bin/ptxas assembles each cuda:sm_XX target's PTX into a\n"
	"                             cubin the artifact ships beside it, so that GPU loads it\n"
	"                             without a JIT; without ptxas the PTX alone (--stats says so)\n"
	"      --no-cubin             ship the PTX alone\n"
	"      --jobs N               threads for LLVM's work (default: one per CPU); the\n"
	"                             artifact is the same bytes whatever N is\n"
	"      --precision fp32|fp16|bf16|fp8   compute float32 models in that type where the\n"
	"                             policy allows (docs/precision.md; default fp32: unchanged);\n"
	"                             fp8: MatMul/Gemm/Conv weights and embeddings over 64 KiB\n"
	"                             stored as float8 e4m3 with a float32 scale per output\n"
	"                             channel, computing in float32\n"
	"      --no-keep-io-types     with --precision: float32 inputs and outputs lowered too\n"
	"      --qdq-fusion           DequantizeLinear -> Conv/MatMul -> QuantizeLinear (a QDQ\n"
	"                             model) as QLinearConv/QLinearMatMul: integer sums, one\n"
	"                             requantization, as onnxruntime; results may differ from\n"
	"                             the float model by one quantization step (off by default)\n"
	"      --precision-exclude LIST   op types and node names kept in float32\n"
	"      --accuracy-budget B    with --precision and --calibrate: keep nodes in float32 until\n"
	"                             the outputs meet B against the float32 model's on every\n"
	"                             set: rtol=R,atol=A | cosine=C | top1 (or several, with ',');\n"
	"                             prints the nodes kept and why (docs/precision.md)\n"
	"      --calibrate DIR        the calibration inputs: one subfolder of DIR per set, each\n"
	"                             holding NAME.npy for every model input\n"
	"      --budget-max-compiles N   the search's bound (default 64 compiles, 3..10000)\n"
	"      --triple TRIPLE        cross-compile (x86_64-..., aarch64-...); default the host\n"
	"      --cpu NAME             CPU to tune for and whose features to use (one LLVM knows:\n"
	"                             llc-19 -mtriple=TRIPLE -mcpu=help); the artifact lists them\n"
	"      --weights embed|external   weights inside the artifact (default) or in OUT.weights\n"
	"      --prefix NAME          C name of the descriptor in a .o (NAME_descriptor)\n"
	"      --stats                print per-pass times and the arena size vs its lower bound\n"
	"      --dump-after PASS      print the IR after PASS (or 'all') to stderr\n"
	"      --stats-json FILE      write the compile's figures as JSON (docs/memory.md): arena,\n"
	"                             its lower bound, weights, FLOPs, recomputed FLOPs, passes\n"
	"      --memory-budget B      recompute values instead of keeping them until memory\n"
	"                             planning's arena fits B: bytes (also 64K, 64M, 1G) or P%\n"
	"                             of the arena without a budget (docs/memory.md)\n"
	"      --train                compile a training step (docs/training.md): forward, loss,\n"
	"                             backward and the optimizer's update; the trainable weights\n"
	"                             and the optimizer's state live in the runtime's session\n"
	"      --loss KIND            cross-entropy:OUTPUT:LABEL (logits [N,C], LABEL int64 [N]),\n"
	"                             mse:OUTPUT:LABEL, or output:NAME (a scalar the model computes)\n"
	"      --optimizer OPT        sgd (default), momentum (--momentum M, 0.9), adamw (--beta1 0.9\n"
	"                             --beta2 0.999 --eps 1e-8 --weight-decay 0.01)\n"
	"      --lr X                 learning rate (default 0.01)\n"
	"      --trainable all|LIST   the initializers to train (default all: every float one of\n"
	"                             rank >= 1 the loss depends on); the others stay constants\n"
	"  run MODEL --input NAME=FILE ... --output-dir DIR [--target interp|cpu|opencl]\n"
	"      [--device DEVICE] [--threads N] [--runs N]\n"
	"                             run a model: MODEL.onnx with the reference interpreter\n"
	"                             (--target interp, the default), or compiled in memory for\n"
	"                             this CPU (--target cpu) or an OpenCL device (--target\n"
	"                             opencl); MODEL.so, a compiled artifact, with the runtime on\n"
	"                             the device it has code for (the CPU first), or --target\n"
	"                             cpu|opencl.  Inputs are .npy or ONNX TensorProto .pb files;\n"
	"                             each output is written as DIR/NAME.npy (characters outside\n"
	"                             A-Z a-z 0-9 . _ - in NAME become _)\n"
	"      --device DEVICE        the runtime's device by name: cpu, opencl:N (tbc doctor\n"
	"                             lists them); --target opencl is the first OpenCL device\n"
	"      --threads N            the runtime's threads (default: one per CPU)\n"
	"      --runs N               compiled code: run N more times, print the median and\n"
	"                             fastest milliseconds per run\n"
	"  train STEP.so --input NAME=FILE ... [--steps N] [--save DIR] [--threads N]\n"
	"                             run N training steps (default 1) of a step compiled with\n"
	"                             --train on the given batch, printing each step's loss;\n"
	"                             --save writes every trained weight as DIR/NAME.npy\n"
	"      --export OUT.onnx --model MODEL.onnx   write MODEL.onnx, the model the step was\n"
	"                             compiled from, with the trained weights as OUT.onnx\n"
	"      --device DEVICE        run the steps there (opencl:0, cuda:0: tbc doctor lists\n"
	"                             them); the weights and optimizer state stay on it\n"
	"  doctor                     print what this machine can run: the CPU and the features\n"
	"                             tbc uses, OpenCL platforms and devices, CUDA and HIP\n"
	"                             drivers, and the targets this tbc compiles for\n"
	"  check MODEL [--targets interp,cpu] [--input NAME=FILE ...] [--dim NAME=SIZE ...]\n"
	"      [--seed N] [--rtol R] [--atol A] [--bisect] [--bisect-chunk N]\n"
	"                             run MODEL on every target with the same inputs (those not\n"
	"                             given: random from --seed; --dim sizes symbolic dims) and\n"
	"                             compare each target's outputs with the first's (default\n"
	"                             rtol 1e-3, atol 1e-5); exit 0 when they agree, 1 when they\n"
	"                             differ, 2 on bad arguments, 3 when a target cannot run here.\n"
	"                             --bisect names the first node whose output differs,\n"
	"                             exposing --bisect-chunk nodes per run (default: by memory)\n"
	"\n"
	"options:\n"
	"  -h, --help                 show this help\n"
	"  --version                  show the version\n";

static void print_diags(const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[2048];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "error: %s\n", buf);
	}
}

static int fail(const tbc_diags *d, int code) {
	print_diags(d);
	return code;
}

static tbc_module *load(const char *path, tbc_diags *d) {
	tbc_module *m = NULL;
	if (tbc_module_load_onnx(path, d, &m) != TBC_OK) return NULL;
	return m;
}

static int rt_fail(const char *what, const tbcrt_status *st);

/* `tbc inspect model.so`: what a compiled artifact holds -- its inputs and
 * outputs, the CPU code, and per device target the code's size and every
 * kernel with its launch shape and size. */
static int inspect_artifact(const char *path) {
	tbcrt_context *ctx = NULL;
	tbcrt_model *art = NULL;
	tbcrt_status st = tbcrt_context_create(NULL, &ctx);
	if (st.code == TBCRT_OK) st = tbcrt_model_load(ctx, path, &art);
	tbcrt_model_info info;
	if (st.code == TBCRT_OK) st = tbcrt_model_get_info(art, &info);
	if (st.code != TBCRT_OK) {
		int rc = rt_fail(path, &st);
		tbcrt_model_destroy(art);
		tbcrt_context_destroy(ctx);
		return rc;
	}
	printf("artifact %s: model '%s'\n", path, info.name);
	printf("  weights: %" PRIu64 " bytes%s\n", info.weights_bytes, info.weights_external ? " (external file)" : "");
	if (info.load_time_bytes)
		printf("  load-time values: %" PRIu64 " bytes, computed from the weights once per session\n",
		       info.load_time_bytes);
	for (uint32_t i = 0; i < info.n_inputs + info.n_outputs; i++) {
		bool in = i < info.n_inputs;
		tbcrt_tensor_info t;
		st = in ? tbcrt_model_input_info(art, i, &t) : tbcrt_model_output_info(art, i - info.n_inputs, &t);
		if (st.code != TBCRT_OK) continue;
		printf("  %s %s: %s[", in ? "input " : "output", t.name, tbcrt_dtype_name(t.dtype));
		for (uint32_t k = 0; k < t.rank; k++)
			if (t.dims[k] >= 0) printf("%s%" PRId64, k ? ", " : "", t.dims[k]);
			else printf("%s%s", k ? ", " : "", t.symbols && t.symbols[k] ? t.symbols[k] : "?");
		printf("]\n");
	}
	printf("targets:\n");
	if (info.cpu_code) printf("  cpu: %s%s%s\n", info.target_triple, info.cpu_features[0] ? ", " : "", info.cpu_features);
	static const char *const shapes[] = {"one work-item", "grid-stride", "work-groups"};
	for (uint32_t i = 0;; i++) {
		tbcrt_device_code_info dc;
		if (tbcrt_model_device_code(art, i, &dc).code != TBCRT_OK) break;
		printf("  %s: %s, %" PRIu64 " bytes, %u kernels, %u launches\n", dc.target, dc.format, dc.code_bytes,
		       dc.n_kernels, dc.n_launches);
		if (dc.cubin_bytes) printf("    cubin: %" PRIu64 " bytes (%s machine code; other GPUs JIT the PTX)\n", dc.cubin_bytes,
					   strchr(dc.target, ':') ? strchr(dc.target, ':') + 1 : dc.target);
		else if (!strcmp(dc.format, "PTX")) printf("    cubin: none (the driver JIT-compiles the PTX)\n");
		for (uint32_t k = 0; k < dc.n_kernels; k++) {
			tbcrt_kernel_info ki;
			if (tbcrt_model_device_kernel(art, i, k, &ki).code != TBCRT_OK) continue;
			printf("    %-48s %s", ki.name, ki.shape < 3 ? shapes[ki.shape] : "?");
			for (int g = 0; ki.shape == 2 && g < 3 && ki.group_size[g]; g++) printf("%s%u", g ? "x" : " of ", ki.group_size[g]);
			if (ki.code_bytes) printf(", %" PRIu64 " bytes", ki.code_bytes);
			printf("\n");
		}
	}
	tbcrt_model_destroy(art);
	tbcrt_context_destroy(ctx);
	return 0;
}

static int cmd_inspect(int argc, char **argv) {
	if (argc != 1) {
		fprintf(stderr, "tbc inspect: expected one MODEL argument\n");
		return 2;
	}
	size_t len = strlen(argv[0]);
	if (len > 3 && !strcmp(argv[0] + len - 3, ".so")) return inspect_artifact(argv[0]);
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = load(argv[0], d);
	if (!m) {
		int rc = fail(d, 1);
		tbc_diags_destroy(d);
		return rc;
	}
	/* Weights beyond a few KiB are elided: inspect is for reading. */
	char *ir = tbc_module_print_abridged(m, 4096);
	char *summary = tbc_module_summary(m);
	if (ir) fputs(ir, stdout);
	if (summary) printf("\n%s", summary);
	free(ir);
	free(summary);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return 0;
}

/* Output file names: every character outside [A-Za-z0-9._-] becomes '_'; with
 * the .npy suffix even "." or ".." name a plain file inside DIR. */
static void sanitize(const char *name, char *out, size_t size) {
	size_t i = 0;
	for (; name[i] && i + 1 < size; i++) {
		char c = name[i];
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
			  c == '_' || c == '-';
		out[i] = ok ? c : '_';
	}
	out[i] = 0;
}

static bool ends_with(const char *s, const char *suffix) {
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

static int rt_fail(const char *what, const tbcrt_status *st) {
	fprintf(stderr, "error: %s: %s (%s)\n", what, st->message, tbcrt_code_name(st->code));
	return 1;
}

/* Runs a loaded artifact with the runtime: binds the inputs (graph order),
 * lets the session allocate the outputs, and copies them out. */
/* Runs the bound session `runs` more times and prints the median and the
 * fastest run (the first run, which outputs come from, warms caches). */
static int time_runs(tbcrt_session *session, const char *what, long runs) {
	double *ms = calloc((size_t)runs, sizeof *ms);
	if (!ms) return 1;
	for (long r = 0; r < runs; r++) {
		double t0 = now_ms();
		tbcrt_status st = tbcrt_session_run(session);
		if (!tbcrt_status_is_ok(&st)) {
			free(ms);
			return rt_fail(what, &st);
		}
		ms[r] = now_ms() - t0;
	}
	qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
	printf("time: median %.3f ms, fastest %.3f ms over %ld runs\n", ms[runs / 2], ms[0], runs);
	free(ms);
	return 0;
}

static tbcrt_status tbcrt__ok_status(void) {
	tbcrt_status s;
	memset(&s, 0, sizeof s);
	return s;
}

/* The first available OpenCL device, or the status of the first one. */
static tbcrt_status first_opencl(tbcrt_context *ctx, uint32_t *out) {
	uint32_t n = 0;
	tbcrt_status st = tbcrt_device_count(ctx, &n), first = tbcrt__ok_status();
	bool seen = false;
	for (uint32_t i = 0; st.code == TBCRT_OK && i < n; i++) {
		tbcrt_device_info info;
		st = tbcrt_device_info_get(ctx, i, &info);
		if (st.code != TBCRT_OK || info.kind != TBCRT_DEVICE_OPENCL) continue;
		if (info.available) {
			*out = i;
			return st;
		}
		if (!seen) {
			seen = true;
			first.code = TBCRT_ERR_DEVICE_UNAVAILABLE;
			snprintf(first.message, sizeof first.message, "%s: %s", info.name, info.unavailable_reason);
		}
	}
	if (st.code != TBCRT_OK) return st;
	if (!seen) {
		first.code = TBCRT_ERR_DEVICE_UNAVAILABLE;
		snprintf(first.message, sizeof first.message, "this machine has no OpenCL device");
	}
	return first;
}

static int run_artifact(tbcrt_model *model, const tbcrt_session_options *so, const char *what, tbc_tensor **inputs,
			size_t n_in, tbc_tensor **outputs, size_t n_out, long runs) {
	tbcrt_session *session = NULL;
	tbcrt_status st = tbcrt_session_create_with(model, so, &session);
	if (!tbcrt_status_is_ok(&st)) return rt_fail(what, &st);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n_in; i++) {
		const tbc_tensor *t = inputs[i];
		st = tbcrt_session_bind_input(session, (uint32_t)i, (int32_t)t->dtype, (uint32_t)t->rank, t->dims, t->data,
					      (size_t)t->numel * tbc_dtype_size(t->dtype));
		if (!tbcrt_status_is_ok(&st)) rc = rt_fail(what, &st);
	}
	if (rc == 0) {
		st = tbcrt_session_run(session);
		if (!tbcrt_status_is_ok(&st)) rc = rt_fail(what, &st);
	}
	if (rc == 0 && runs > 0) rc = time_runs(session, what, runs);
	for (size_t i = 0; rc == 0 && i < n_out; i++) {
		tbcrt_tensor out;
		st = tbcrt_session_output(session, (uint32_t)i, &out);
		if (!tbcrt_status_is_ok(&st)) {
			rc = rt_fail(what, &st);
			break;
		}
		outputs[i] = tbc_tensor_create((tbc_dtype)out.dtype, (int)out.rank, out.dims);
		if (!outputs[i] || (size_t)outputs[i]->numel * tbc_dtype_size(outputs[i]->dtype) != out.bytes) {
			fprintf(stderr, "error: %s: output %zu cannot be copied out\n", what, i);
			rc = 1;
			break;
		}
		memcpy(outputs[i]->data, out.data, out.bytes);
	}
	tbcrt_session_destroy(session);
	return rc;
}

static int cmd_run(int argc, char **argv) {
	const char *model = NULL, *outdir = NULL, *target = NULL, *device = NULL;
	const char **in_names = calloc((size_t)argc + 1, sizeof *in_names);
	const char **in_files = calloc((size_t)argc + 1, sizeof *in_files);
	int n_in = 0, rc = 2;
	long threads = 0, runs = 0;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	tbc_jit *jit = NULL;
	tbcrt_context *ctx = NULL;
	tbcrt_model *art = NULL;
	tbc_tensor **inputs = NULL, **outputs = NULL;
	size_t n_model_in = 0, n_model_out = 0;
	const char **model_in_names = NULL, **model_out_names = NULL;
	if (!in_names || !in_files || !d) goto done;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--input") && i + 1 < argc) {
			char *spec = argv[++i], *eq = strchr(spec, '=');
			if (!eq) {
				fprintf(stderr, "tbc run: --input wants NAME=FILE, got '%s'\n", spec);
				goto done;
			}
			*eq = 0;
			in_names[n_in] = spec;
			in_files[n_in++] = eq + 1;
		} else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
			outdir = argv[++i];
		} else if (!strcmp(argv[i], "--target") && i + 1 < argc) {
			target = argv[++i];
		} else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			device = argv[++i];
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			char *end;
			threads = strtol(argv[++i], &end, 10);
			if (*end || threads < 0) {
				fprintf(stderr, "tbc run: --threads wants a count, got '%s'\n", argv[i]);
				goto done;
			}
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			char *end;
			runs = strtol(argv[++i], &end, 10);
			if (*end || runs < 1 || runs > 1000000) {
				fprintf(stderr, "tbc run: --runs wants a count from 1 to 1000000, got '%s'\n", argv[i]);
				goto done;
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "tbc run: unknown option '%s'\n", argv[i]);
			goto done;
		} else if (!model) {
			model = argv[i];
		} else {
			fprintf(stderr, "tbc run: more than one MODEL ('%s' and '%s')\n", model, argv[i]);
			goto done;
		}
	}
	if (!model || !outdir) {
		fprintf(stderr, "tbc run: need MODEL and --output-dir DIR (see tbc --help)\n");
		goto done;
	}
	bool artifact = ends_with(model, ".so");
	/* --device names the device; --target its kind (or the interpreter). */
	if (device && !target) target = strncmp(device, "opencl", 6) ? "cpu" : "opencl";
	if (!target) target = artifact ? "auto" : "interp";
	bool opencl = !strcmp(target, "opencl");
	if (strcmp(target, "interp") && strcmp(target, "cpu") && !opencl && strcmp(target, "auto")) {
		fprintf(stderr, "tbc run: unknown --target '%s' (interp, cpu or opencl)\n", target);
		goto done;
	}
	if (!strcmp(target, "interp") && (artifact || device)) {
		fprintf(stderr, "tbc run: --target interp runs an .onnx model on the interpreter, on no device\n");
		goto done;
	}
	if (device && strncmp(device, target, strlen(target))) {
		fprintf(stderr, "tbc run: --device %s is not a device of --target %s\n", device, target);
		goto done;
	}
	if (runs && !strcmp(target, "interp")) {
		fprintf(stderr, "tbc run: --runs times compiled code: give a .so or --target cpu|opencl\n");
		goto done;
	}
	rc = 1;
	if (strcmp(target, "interp")) {
		tbcrt_context_options co;
		tbcrt_context_options_init(&co);
		co.thread_count = (uint32_t)threads;
		tbcrt_status st = tbcrt_context_create(&co, &ctx);
		if (!tbcrt_status_is_ok(&st)) {
			rt_fail("runtime", &st);
			goto done;
		}
	}
	if (artifact) {
		tbcrt_status st = tbcrt_model_load(ctx, model, &art);
		if (!tbcrt_status_is_ok(&st)) {
			rt_fail(model, &st);
			goto done;
		}
	} else {
		m = load(model, d);
		if (!m) goto done;
		if (strcmp(target, "interp")) {
			tbc_compile_options o;
			tbc_compile_options_init(&o);
			o.targets = opencl ? TBC_TARGETS_OPENCL : TBC_TARGETS_CPU;
			if (tbc_jit_compile(m, &o, d, &jit) != TBC_OK) goto done;
			tbcrt_status st = tbcrt_model_from_descriptor(ctx, tbc_jit_descriptor(jit), NULL, &art);
			if (!tbcrt_status_is_ok(&st)) {
				rt_fail(model, &st);
				goto done;
			}
		}
	}
	if (art) {
		tbcrt_model_info info;
		tbcrt_status st = tbcrt_model_get_info(art, &info);
		if (!tbcrt_status_is_ok(&st)) {
			rt_fail(model, &st);
			goto done;
		}
		n_model_in = info.n_inputs;
		n_model_out = info.n_outputs;
	} else {
		n_model_in = tbc_module_input_count(m);
		n_model_out = tbc_module_output_count(m);
	}
	inputs = calloc(n_model_in + 1, sizeof *inputs);
	outputs = calloc(n_model_out + 1, sizeof *outputs);
	model_in_names = calloc(n_model_in + 1, sizeof *model_in_names);
	model_out_names = calloc(n_model_out + 1, sizeof *model_out_names);
	if (!inputs || !outputs || !model_in_names || !model_out_names) goto done;
	for (size_t i = 0; i < n_model_in; i++) {
		if (art) {
			tbcrt_tensor_info ti;
			tbcrt_status st = tbcrt_model_input_info(art, (uint32_t)i, &ti);
			if (!tbcrt_status_is_ok(&st)) {
				rt_fail(model, &st);
				goto done;
			}
			model_in_names[i] = ti.name;
		} else {
			model_in_names[i] = tbc_module_input_name(m, i);
		}
	}
	for (size_t i = 0; i < n_model_out; i++) {
		if (art) {
			tbcrt_tensor_info ti;
			tbcrt_status st = tbcrt_model_output_info(art, (uint32_t)i, &ti);
			if (!tbcrt_status_is_ok(&st)) {
				rt_fail(model, &st);
				goto done;
			}
			model_out_names[i] = ti.name;
		} else {
			model_out_names[i] = tbc_module_output_name(m, i);
		}
	}
	for (int k = 0; k < n_in; k++) {
		size_t i = 0;
		while (i < n_model_in && strcmp(model_in_names[i], in_names[k])) i++;
		if (i == n_model_in) {
			fprintf(stderr, "error: %s: the model has no input named '%s'\n", model, in_names[k]);
			goto done;
		}
		if (inputs[i]) {
			fprintf(stderr, "error: input '%s' given twice\n", in_names[k]);
			goto done;
		}
		if (tbc_tensor_read_file(in_files[k], d, &inputs[i], NULL) != TBC_OK) goto done;
	}
	for (size_t i = 0; i < n_model_in; i++)
		if (!inputs[i]) {
			fprintf(stderr, "error: %s: input '%s' was not given (--input %s=FILE)\n", model, model_in_names[i],
				model_in_names[i]);
			goto done;
		}
	if (art) {
		tbcrt_session_options so;
		tbcrt_session_options_init(&so);
		const char *want = device ? device : !strcmp(target, "cpu") ? "cpu" : NULL;
		tbcrt_status st = tbcrt__ok_status();
		if (want) st = tbcrt_device_find(ctx, want, &so.device);
		else if (opencl) st = first_opencl(ctx, &so.device);
		if (!tbcrt_status_is_ok(&st)) {
			rt_fail(model, &st);
			goto done;
		}
		if (run_artifact(art, &so, model, inputs, n_model_in, outputs, n_model_out, runs) != 0) goto done;
	} else if (tbc_interpret(m, inputs, n_model_in, outputs, n_model_out, d) != TBC_OK) {
		goto done;
	}
	if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "error: %s: cannot create directory: %s\n", outdir, strerror(errno));
		goto done;
	}
	for (size_t i = 0; i < n_model_out; i++) {
		char name[512], path[4096];
		sanitize(model_out_names[i], name, sizeof name);
		snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
		if (tbc_tensor_write_npy(path, outputs[i], d) != TBC_OK) goto done;
		printf("%s\n", path);
	}
	rc = 0;
done:
	if (rc == 1) print_diags(d);
	for (size_t i = 0; inputs && i < n_model_in; i++) tbc_tensor_destroy(inputs[i]);
	for (size_t i = 0; outputs && i < n_model_out; i++) tbc_tensor_destroy(outputs[i]);
	free(inputs);
	free(outputs);
	free(model_in_names);
	free(model_out_names);
	free(in_names);
	free(in_files);
	tbcrt_model_destroy(art);
	tbcrt_context_destroy(ctx);
	tbc_jit_destroy(jit);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return rc;
}

/* --target's list: cpu and opencl set bits, cuda[:sm_XX] and rocm[:gfxNNN]
 * go to o->gpu_targets (gpu, checked when compiling). */
static bool parse_targets(const char *list, tbc_compile_options *o, char *gpu, size_t gpu_size) {
	o->targets = 0;
	gpu[0] = 0;
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ",");
		if (len == 3 && !strncmp(p, "cpu", 3)) o->targets |= TBC_TARGETS_CPU;
		else if (len == 6 && !strncmp(p, "opencl", 6)) o->targets |= TBC_TARGETS_OPENCL;
		else if ((len >= 4 && !strncmp(p, "cuda", 4) && (len == 4 || p[4] == ':')) ||
			 (len >= 4 && !strncmp(p, "rocm", 4) && (len == 4 || p[4] == ':'))) {
			size_t at = strlen(gpu);
			if (at + len + 2 > gpu_size) {
				fprintf(stderr, "tbc compile: --target lists too many targets\n");
				return false;
			}
			snprintf(gpu + at, gpu_size - at, "%s%.*s", at ? "," : "", (int)len, p);
		} else {
			fprintf(stderr,
				"tbc compile: --target is a list of cpu, opencl, cuda[:sm_XX] and rocm[:gfxNNN] (or a triple "
				"with '-'), got '%.*s'\n",
				(int)len, p);
			return false;
		}
		p += len;
		if (*p == ',') p++;
	}
	o->gpu_targets = gpu[0] ? gpu : NULL;
	if (!o->targets && !gpu[0]) {
		fprintf(stderr, "tbc compile: --target names no target\n");
		return false;
	}
	return true;
}

/* A number option's value, or false with a message. */
static bool number_arg(const char *opt, const char *v, double *out) {
	char *end;
	double x = strtod(v, &end);
	if (end == v || *end || !isfinite(x)) {
		fprintf(stderr, "tbc compile: %s wants a number, got '%s'\n", opt, v);
		return false;
	}
	*out = x;
	return true;
}

/* --memory-budget: "P%" (0 < P <= 100) or bytes with an optional K, M or G
 * (binary: 1024, 1024^2, 1024^3; "KiB" and "MiB" too).  false with a message. */
static bool budget_arg(const char *v, tbc_compile_options *o) {
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	bool ok = end != v && isfinite(x) && errno == 0 && !isspace((unsigned char)v[0]);
	if (ok && !strcmp(end, "%")) {
		if (x > 0 && x <= 100) {
			o->memory_budget_percent = x;
			return true;
		}
	} else if (ok) {
		double scale = 0;
		if (!*end || !strcmp(end, "B")) scale = 1;
		else if (!strcmp(end, "K") || !strcmp(end, "KiB")) scale = 1024.0;
		else if (!strcmp(end, "M") || !strcmp(end, "MiB")) scale = 1024.0 * 1024;
		else if (!strcmp(end, "G") || !strcmp(end, "GiB")) scale = 1024.0 * 1024 * 1024;
		double bytes = x * scale;
		if (scale > 0 && bytes >= 1 && bytes < 9.0e18 && bytes == floor(bytes)) {
			o->memory_budget_bytes = (int64_t)bytes;
			return true;
		}
	}
	fprintf(stderr,
		"tbc compile: --memory-budget wants a number of bytes (1048576, 64K, 64M, 1G) or a percentage of the "
		"arena without a budget (0 < P%% <= 100, e.g. 50%%), got '%s'\n",
		v);
	return false;
}

/* --stats-json: the figures of a compile as one JSON object. */
static bool write_stats_json(const char *path, const tbc_compile_stats *st) {
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "tbc compile: --stats-json: cannot write '%s': %s\n", path, strerror(errno));
		return false;
	}
	fprintf(f, "{\n  \"arena_bytes\": %" PRId64 ",\n", st->arena_bytes);
	fprintf(f, "  \"plan_bytes\": %" PRId64 ",\n", st->plan_bytes);
	fprintf(f, "  \"scratch_bytes\": %" PRId64 ",\n", st->arena_bytes - st->plan_bytes);
	fprintf(f, "  \"arena_lower_bound_bytes\": %" PRId64 ",\n", st->op_lower_bound);
	fprintf(f, "  \"live_peak_bytes\": %" PRId64 ",\n", st->lower_bound);
	fprintf(f, "  \"unshared_bytes\": %" PRId64 ",\n", st->unshared_bytes);
	fprintf(f, "  \"weights_bytes\": %" PRIu64 ",\n", st->weights_bytes);
	fprintf(f, "  \"flops\": %.0f,\n", st->flops);
	fprintf(f, "  \"recompute_flops\": %.0f,\n", st->recompute_flops);
	fprintf(f, "  \"recompute_ops\": %d,\n", st->recompute_ops);
	fprintf(f, "  \"memory_budget_bytes\": %" PRId64 ",\n", st->memory_budget_bytes);
	fprintf(f, "  \"plan_bytes_unconstrained\": %" PRId64 ",\n", st->memory_budget_bytes ? st->plan_bytes_unconstrained : st->plan_bytes);
	fprintf(f, "  \"kernels\": %d,\n", st->n_kernels);
	fprintf(f, "  \"lower_ms\": %.3f,\n  \"codegen_ms\": %.3f,\n", st->lower_seconds * 1e3, st->codegen_seconds * 1e3);
	fprintf(f, "  \"llvm_modules\": %d,\n  \"llvm_threads\": %d,\n  \"llvm_ir_ms\": %.3f,\n  \"llvm_module_ms\": %.3f,\n",
		st->llvm_modules, st->llvm_threads, st->llvm_ir_seconds * 1e3, st->llvm_module_seconds * 1e3);
	fprintf(f, "  \"passes\": [");
	for (int i = 0; i < st->n_passes; i++)
		fprintf(f, "%s\n    {\"name\": \"%s\", \"ms\": %.3f}", i ? "," : "", st->passes[i].name,
			st->passes[i].seconds * 1e3);
	fprintf(f, "\n  ]\n}\n");
	bool ok = !ferror(f);
	ok = fclose(f) == 0 && ok;
	if (!ok) fprintf(stderr, "tbc compile: --stats-json: error writing '%s'\n", path);
	return ok;
}

static int cmd_compile(int argc, char **argv) {
	const char *model = NULL, *out = NULL;
	static char gpu[512];
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	tbc_train_options to;
	tbc_train_options_init(&to);
	bool train = false;
	char *loss = NULL;
	const char *stats_json = NULL;
	tbc_compile_stats stats;
	static const struct {
		const char *opt;
		size_t offset;
	} numbers[] = {
		{"--lr", offsetof(tbc_train_options, lr)},
		{"--momentum", offsetof(tbc_train_options, momentum)},
		{"--beta1", offsetof(tbc_train_options, beta1)},
		{"--beta2", offsetof(tbc_train_options, beta2)},
		{"--eps", offsetof(tbc_train_options, eps)},
		{"--weight-decay", offsetof(tbc_train_options, weight_decay)},
	};
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		size_t k = 0;
		while (k < sizeof numbers / sizeof *numbers && strcmp(a, numbers[k].opt)) k++;
		if (k < sizeof numbers / sizeof *numbers && has) {
			if (!number_arg(a, argv[++i], (double *)((char *)&to + numbers[k].offset))) return 2;
			continue;
		}
		if (!strcmp(a, "-o") && has) out = argv[++i];
		else if (!strcmp(a, "--train")) train = true;
		else if (!strcmp(a, "--loss") && has) loss = argv[++i];
		else if (!strcmp(a, "--trainable") && has) to.trainable = argv[++i];
		else if (!strcmp(a, "--optimizer") && has) {
			const char *p = argv[++i];
			if (!strcmp(p, "sgd")) to.optimizer = TBC_OPT_SGD;
			else if (!strcmp(p, "momentum")) to.optimizer = TBC_OPT_MOMENTUM;
			else if (!strcmp(p, "adamw")) to.optimizer = TBC_OPT_ADAMW;
			else {
				fprintf(stderr, "tbc compile: --optimizer is sgd, momentum or adamw, got '%s'\n", p);
				return 2;
			}
		}
		else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o.opt_level = a[2] - '0';
		else if (!strcmp(a, "--triple") && has) o.target_triple = argv[++i];
		else if (!strcmp(a, "--target") && has) {
			const char *t = argv[++i];
			if (strchr(t, '-')) o.target_triple = t; /* an LLVM triple, as before --triple */
			else if (!parse_targets(t, &o, gpu, sizeof gpu)) return 2;
		}
		else if (!strcmp(a, "--cpu") && has) o.cpu = argv[++i];
		else if (!strcmp(a, "--precision") && has) {
			const char *p = argv[++i];
			if (!strcmp(p, "fp32")) o.precision = TBC_DT_F32;
			else if (!strcmp(p, "fp16")) o.precision = TBC_DT_F16;
			else if (!strcmp(p, "bf16")) o.precision = TBC_DT_BF16;
			else if (!strcmp(p, "fp8")) o.precision = TBC_DT_F8E4M3FN;
			else {
				fprintf(stderr, "tbc compile: --precision is fp32, fp16, bf16 or fp8, got '%s'\n", p);
				return 2;
			}
		} else if (!strcmp(a, "--keep-io-types")) o.keep_io_types = 1;
		else if (!strcmp(a, "--no-keep-io-types")) o.keep_io_types = 0;
		else if (!strcmp(a, "--precision-exclude") && has) o.precision_exclude = argv[++i];
		else if (!strcmp(a, "--accuracy-budget") && has) o.accuracy_budget = argv[++i];
		else if (!strcmp(a, "--calibrate") && has) o.calibrate = argv[++i];
		else if (!strcmp(a, "--budget-max-compiles") && has) {
			char *end;
			const char *v = argv[++i];
			long n = strtol(v, &end, 10);
			if (!*v || *end || n < 3 || n > 10000) {
				fprintf(stderr, "tbc compile: --budget-max-compiles wants a count from 3 to 10000, got '%s'\n", v);
				return 2;
			}
			o.budget_max_compiles = (int)n;
		}
		else if (!strcmp(a, "--prefix") && has) o.prefix = argv[++i];
		else if (!strcmp(a, "--jobs") && has) {
			char *end;
			const char *v = argv[++i];
			long n = strtol(v, &end, 10);
			if (!*v || *end || n < 1 || n > 64) {
				fprintf(stderr, "tbc compile: --jobs wants a count of threads from 1 to 64, got '%s'\n", v);
				return 2;
			}
			o.compile_threads = (int)n;
		}
		else if (!strcmp(a, "--stats")) o.stats = 1;
		else if (!strcmp(a, "--stats-json") && has) stats_json = argv[++i];
		else if (!strcmp(a, "--memory-budget") && has) {
			if (!budget_arg(argv[++i], &o)) return 2;
		}
		else if (!strcmp(a, "--cuda-path") && has) o.cuda_path = argv[++i];
		else if (!strcmp(a, "--no-cubin")) o.no_cubin = 1;
		else if (!strcmp(a, "--qdq-fusion")) o.qdq_fusion = 1;
		else if (!strcmp(a, "--dump-after") && has) o.dump_after = argv[++i];
		else if (!strcmp(a, "--weights") && has) {
			const char *w = argv[++i];
			if (!strcmp(w, "embed")) o.weights = TBC_WEIGHTS_EMBED;
			else if (!strcmp(w, "external")) o.weights = TBC_WEIGHTS_EXTERNAL;
			else {
				fprintf(stderr, "tbc compile: --weights is embed or external, got '%s'\n", w);
				return 2;
			}
		} else if (a[0] == '-') {
			fprintf(stderr, "tbc compile: unknown option '%s' (see tbc --help)\n", a);
			return 2;
		} else if (!model) {
			model = a;
		} else {
			fprintf(stderr, "tbc compile: more than one MODEL ('%s' and '%s')\n", model, a);
			return 2;
		}
	}
	if (!model || !out) {
		fprintf(stderr, "tbc compile: need MODEL and -o OUT (see tbc --help)\n");
		return 2;
	}
	if ((o.accuracy_budget != NULL) != (o.calibrate != NULL) || (o.budget_max_compiles && !o.accuracy_budget)) {
		fprintf(stderr, "tbc compile: %s\n",
			o.accuracy_budget ? "--accuracy-budget needs --calibrate DIR (one subfolder of NAME.npy per input set)"
			: o.calibrate	  ? "--calibrate is for --accuracy-budget"
					  : "--budget-max-compiles is for --accuracy-budget");
		return 2;
	}
	if (o.accuracy_budget && o.precision == TBC_DT_F32) {
		fprintf(stderr, "tbc compile: --accuracy-budget searches a lowering: give --precision fp16, bf16 or fp8\n");
		return 2;
	}
	if (!ends_with(out, ".o") && !ends_with(out, ".so") && !ends_with(out, ".ll") && !ends_with(out, ".cl") &&
	    !ends_with(out, ".ptx") && !ends_with(out, ".hsaco")) {
		fprintf(stderr, "tbc compile: OUT must end in .o, .so, .ll, .cl, .ptx or .hsaco, got '%s'\n", out);
		return 2;
	}
	/* What a .cl, .ptx or .hsaco holds, when --target does not say */
	if (ends_with(out, ".cl") && !o.targets && !o.gpu_targets) o.targets = TBC_TARGETS_OPENCL;
	if (ends_with(out, ".ptx") && !o.targets && !o.gpu_targets) o.gpu_targets = "cuda";
	if (ends_with(out, ".hsaco") && !o.targets && !o.gpu_targets) o.gpu_targets = "rocm";
	tbc_diags *d = tbc_diags_create();
	if (train != (loss != NULL)) {
		fprintf(stderr, "tbc compile: %s\n", train ? "--train needs --loss KIND" : "--loss is for --train");
		tbc_diags_destroy(d);
		return 2;
	}
	if (train) {
		if (tbc_train_parse_loss(&to, loss, d) != TBC_OK) {
			print_diags(d);
			tbc_diags_destroy(d);
			return 2;
		}
		o.train = &to;
	}
	if (stats_json) o.stats_out = &stats;
	tbc_module *m = load(model, d);
	int rc = m && tbc_compile_to_file(m, &o, out, d) == TBC_OK ? 0 : 1;
	if (rc) print_diags(d);
	if (!rc && stats_json && !write_stats_json(stats_json, &stats)) rc = 1;
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return rc;
}

/* ---- tbc doctor ---- */
static void print_bytes(const char *what, uint64_t bytes) {
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) v /= 1024, u++;
	printf(", %s %.*f %s", what, u ? 1 : 0, v, units[u]);
}

static void print_device(const tbcrt_device_info *i) {
	if (!i->available) {
		printf("%-10s unavailable: %s\n", i->name, i->unavailable_reason);
		return;
	}
	printf("%-10s %s\n", i->name, i->device_name);
	if (i->kind == TBCRT_DEVICE_OPENCL) printf("%-10s platform %s (%s)\n", "", i->platform_name, i->platform_version);
	printf("%-10s %s", "", i->version);
	if (i->driver_version[0]) printf(", driver %s", i->driver_version);
	printf("\n%-10s %u %s", "", i->compute_units, i->kind == TBCRT_DEVICE_CPU ? "threads" : "compute units");
	print_bytes("memory", i->global_memory_bytes);
	print_bytes("local", i->local_memory_bytes);
	print_bytes("largest buffer", i->max_alloc_bytes);
	printf(", work-group %llu, fp16 %s, fp64 %s\n", (unsigned long long)i->max_work_group_size, i->fp16 ? "yes" : "no",
	       i->fp64 ? "yes" : "no");
	if (i->features[0])
		printf("%-10s %s: %s\n", "", i->kind == TBCRT_DEVICE_CPU ? "features tbc uses" : "compute capability",
		       i->features);
}

/* A missing driver is a line of the report, not a failure: exit 0 unless
 * the runtime itself cannot start. */
static int cmd_doctor(int argc, char **argv) {
	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "tbc doctor: takes no arguments\n");
		return 2;
	}
	tbcrt_context *ctx;
	tbcrt_status s = tbcrt_context_create(NULL, &ctx);
	uint32_t n = 0;
	if (s.code == TBCRT_OK) s = tbcrt_device_count(ctx, &n);
	if (s.code != TBCRT_OK) {
		fprintf(stderr, "tbc doctor: %s\n", s.message);
		tbcrt_context_destroy(ctx);
		return 1;
	}
	printf("devices (libtbcrt %s):\n", TBCRT_VERSION_STRING);
	for (uint32_t k = 0; k < n; k++) {
		tbcrt_device_info info;
		s = tbcrt_device_info_get(ctx, k, &info);
		if (s.code == TBCRT_OK) print_device(&info);
		else printf("device %u: %s\n", k, s.message);
	}
	tbcrt_context_destroy(ctx);
	/* What codegen/ can emit (codegen/cpu/cpu_target.c initializes the
	 * LLVM targets linked in); the others are planned. */
	char lld[512], ptxas[512];
	int cubins = tbc_target_can_compile("cuda-cubin", ptxas, sizeof ptxas);
	printf("\ntargets this tbc compiles for:\n"
	       "  cpu        x86_64, aarch64 (LLVM 19): yes\n"
	       "  opencl     OpenCL C 1.2: artifacts (--target opencl, cpu,opencl, ...), .cl source\n"
	       "  cuda       PTX 8.0 (LLVM NVPTX) for sm_75 .. sm_90a: artifacts (--target cuda[:sm_XX]), .ptx\n"
	       "             cubins in artifacts: %s%s\n"
	       "  rocm       code objects v5 (LLVM AMDGPU) for gfx906 .. gfx1102: artifacts (--target rocm[:gfxNNN]),\n"
	       "             .hsaco; linked by ld.lld-19: %s\n",
	       cubins ? "yes, ptxas at " : "none (PTX only): ", ptxas,
	       tbc_target_can_compile("rocm", lld, sizeof lld) ? "found" : lld);
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("tbc %s\nLLVM %s (code for x86-64 and AArch64 CPUs)\nartifact ABI %u\n", TBC_VERSION_STRING,
		       tbc_llvm_version(), (unsigned)TBC_ABI_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 2, argv + 2);
	if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
	if (!strcmp(cmd, "compile")) return cmd_compile(argc - 2, argv + 2);
	if (!strcmp(cmd, "doctor")) return cmd_doctor(argc - 2, argv + 2);
	if (!strcmp(cmd, "train")) return tbc_cmd_train(argc - 2, argv + 2);
	if (!strcmp(cmd, "check")) return tbc_cmd_check(argc - 2, argv + 2);
	fprintf(stderr, "tbc: unknown command '%s' (see tbc --help)\n", cmd);
	return 2;
}
