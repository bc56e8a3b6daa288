/* `tbc check MODEL --targets a,b,...`: runs the model on every target with
 * the same inputs (given, or random from --seed), compares each target's
 * outputs with the first target's, prints a table and exits non-zero on any
 * difference.  With --bisect it then finds the first node, in execution
 * order, whose output differs: it runs copies of the model that return
 * windows of intermediate values (tbc_module_expose_nodes) on both targets,
 * window after window, so memory stays bounded on large models.
 * Exit status: 0 the targets agree; 1 they differ or one failed to run;
 * 2 the command line, the model or an input is unusable; 3 a requested
 * target is not available in this build or on this machine. */
#include "check.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbc/abi.h"
#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "timing.h"

enum { CHECK_AGREE = 0, CHECK_DIFFER = 1, CHECK_USAGE = 2, CHECK_UNAVAILABLE = 3 };

/* What every target's run sees beside the model and the inputs. */
typedef struct check_env {
	const char *test_perturb_node; /* TEST ONLY: tbc_compile_options.test_perturb_node */
} check_env;

/* Runs m on inputs in graph order; out[0..n_out) receive tensors the caller
 * destroys.  On failure it prints why (naming the target) and returns false. */
typedef bool (*check_run_fn)(const check_env *env, const char *target, const tbc_module *m, tbc_tensor *const *in,
			     size_t n_in, tbc_tensor **out, size_t n_out);

static void print_diags(const char *target, const tbc_diags *d) {
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[2048];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		fprintf(stderr, "error: %s: %s\n", target, buf);
	}
}

/* ---- The targets ----------------------------------------------------------*/
static bool run_interp(const check_env *env, const char *target, const tbc_module *m, tbc_tensor *const *in,
		       size_t n_in, tbc_tensor **out, size_t n_out) {
	(void)env; /* the reference: nothing is compiled, nothing perturbed */
	tbc_diags *d = tbc_diags_create();
	bool ok = d && tbc_interpret(m, in, n_in, out, n_out, d) == TBC_OK;
	if (!ok) print_diags(target, d);
	tbc_diags_destroy(d);
	return ok;
}

static bool rt_ok(const char *target, tbcrt_status st) {
	if (tbcrt_status_is_ok(&st)) return true;
	fprintf(stderr, "error: %s: %s (%s)\n", target, st.message, tbcrt_code_name(st.code));
	return false;
}

/* Compiled in memory (the JIT) with code for `targets` and run by the
 * runtime on the device it chooses for such an artifact (the CPU for CPU
 * code, the first OpenCL device for OpenCL alone), as `tbc run --target
 * cpu|opencl` does. */
static bool run_compiled(const check_env *env, const char *target, unsigned targets, const tbc_module *m,
			 tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = targets;
	o.test_perturb_node = env->test_perturb_node;
	tbc_diags *d = tbc_diags_create();
	tbc_jit *jit = NULL;
	tbcrt_context *ctx = NULL;
	tbcrt_model *model = NULL;
	tbcrt_session *session = NULL;
	bool ok = d && tbc_jit_compile(m, &o, d, &jit) == TBC_OK;
	if (!ok) print_diags(target, d);
	ok = ok && rt_ok(target, tbcrt_context_create(NULL, &ctx)) &&
	     rt_ok(target, tbcrt_model_from_descriptor(ctx, tbc_jit_descriptor(jit), NULL, &model)) &&
	     rt_ok(target, tbcrt_session_create(model, &session));
	for (size_t i = 0; ok && i < n_in; i++) {
		const tbc_tensor *t = in[i];
		ok = rt_ok(target, tbcrt_session_bind_input(session, (uint32_t)i, (int32_t)t->dtype, (uint32_t)t->rank,
							    t->dims, t->data, (size_t)t->numel * tbc_dtype_size(t->dtype)));
	}
	ok = ok && rt_ok(target, tbcrt_session_run(session));
	for (size_t i = 0; ok && i < n_out; i++) {
		tbcrt_tensor t;
		ok = rt_ok(target, tbcrt_session_output(session, (uint32_t)i, &t));
		if (!ok) break;
		out[i] = tbc_tensor_create((tbc_dtype)t.dtype, (int)t.rank, t.dims);
		if (!out[i] || (size_t)out[i]->numel * tbc_dtype_size(out[i]->dtype) != t.bytes) {
			fprintf(stderr, "error: %s: output %zu cannot be copied out\n", target, i);
			ok = false;
			break;
		}
		if (t.bytes) memcpy(out[i]->data, t.data, t.bytes);
	}
	if (!ok)
		for (size_t i = 0; i < n_out; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	tbcrt_session_destroy(session);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(ctx);
	tbc_jit_destroy(jit);
	tbc_diags_destroy(d);
	return ok;
}

static bool run_cpu(const check_env *env, const char *target, const tbc_module *m, tbc_tensor *const *in,
		    size_t n_in, tbc_tensor **out, size_t n_out) {
	return run_compiled(env, target, TBC_TARGETS_CPU, m, in, n_in, out, n_out);
}

static bool run_opencl(const check_env *env, const char *target, const tbc_module *m, tbc_tensor *const *in,
		       size_t n_in, tbc_tensor **out, size_t n_out) {
	return run_compiled(env, target, TBC_TARGETS_OPENCL, m, in, n_in, out, n_out);
}

/* Whether this machine has an OpenCL device the runtime can use; else why
 * not, in why. */
static bool opencl_available(char *why, size_t size) {
	tbcrt_context *ctx = NULL;
	tbcrt_status st = tbcrt_context_create(NULL, &ctx);
	uint32_t n = 0;
	bool found = false;
	if (st.code == TBCRT_OK) st = tbcrt_device_count(ctx, &n);
	snprintf(why, size, "not available here: this machine has no OpenCL device (tbc doctor lists what it has)");
	for (uint32_t i = 0; st.code == TBCRT_OK && i < n && !found; i++) {
		tbcrt_device_info info;
		st = tbcrt_device_info_get(ctx, i, &info);
		if (st.code != TBCRT_OK || info.kind != TBCRT_DEVICE_OPENCL) continue;
		if (info.available) found = true;
		else snprintf(why, size, "not available here: %s: %s", info.name, info.unavailable_reason);
	}
	if (st.code != TBCRT_OK) snprintf(why, size, "not available here: %s", st.message);
	tbcrt_context_destroy(ctx);
	return found;
}

/* One row per target: a new target is a run function and a row.
 * available NULL: always there; else false (with the reason) when this
 * machine cannot run it. */
typedef struct check_target {
	const char *name;
	check_run_fn run;
	bool (*available)(char *why, size_t size);
} check_target;

static const check_target check_targets[] = {
	{"interp", run_interp, NULL},
	{"cpu", run_cpu, NULL},
	{"opencl", run_opencl, opencl_available},
};
#define N_CHECK_TARGETS (sizeof check_targets / sizeof *check_targets)

static const check_target *find_target(const char *name, size_t len) {
	for (size_t i = 0; i < N_CHECK_TARGETS; i++)
		if (strlen(check_targets[i].name) == len && !strncmp(check_targets[i].name, name, len)) return &check_targets[i];
	return NULL;
}

/* ---- Command line ---------------------------------------------------------*/
#define CHECK_MAX_TARGETS 8
#define CHECK_DEFAULT_RTOL 1e-3
#define CHECK_DEFAULT_ATOL 1e-5
/* Bytes of one window's intermediate values per target (--bisect without
 * --bisect-chunk): the next window holds about this much. */
#define CHECK_WINDOW_BYTES ((double)(256 << 20))

typedef struct check_dim {
	const char *name;
	int64_t value;
	const char *from; /* "--dim", or the input file that fixed it */
} check_dim;

typedef struct check_args {
	const char *model;
	const check_target *targets[CHECK_MAX_TARGETS];
	int n_targets;
	const char **in_names, **in_files;
	int n_in;
	check_dim *dims;
	int n_dims;
	uint64_t seed;
	double rtol, atol;
	bool bisect;
	long chunk; /* 0: windows sized by CHECK_WINDOW_BYTES */
	check_env env;
} check_args;

static bool parse_targets(check_args *a, const char *list) {
	a->n_targets = 0;
	for (const char *p = list;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const check_target *t = find_target(p, len);
		if (!t) {
			fprintf(stderr, "tbc check: unknown target '%.*s' in --targets (known:", (int)len, p);
			for (size_t i = 0; i < N_CHECK_TARGETS; i++)
				fprintf(stderr, "%s %s", i ? "," : "", check_targets[i].name);
			fprintf(stderr, ")\n");
			return false;
		}
		if (a->n_targets == CHECK_MAX_TARGETS) {
			fprintf(stderr, "tbc check: --targets lists more than %d targets\n", CHECK_MAX_TARGETS);
			return false;
		}
		a->targets[a->n_targets++] = t;
		if (!comma) break;
		p = comma + 1;
	}
	if (a->n_targets < 2) {
		fprintf(stderr, "tbc check: --targets needs two targets or more to compare (e.g. interp,cpu)\n");
		return false;
	}
	return true;
}

static bool parse_double(const char *opt, const char *s, double *out) {
	char *end;
	double v = strtod(s, &end);
	if (!*s || *end || !(v >= 0) || v > 1e30) {
		fprintf(stderr, "tbc check: %s wants a number >= 0, got '%s'\n", opt, s);
		return false;
	}
	*out = v;
	return true;
}

/* Returns false after printing the problem. */
static bool parse_args(check_args *a, int argc, char **argv) {
	a->rtol = CHECK_DEFAULT_RTOL;
	a->atol = CHECK_DEFAULT_ATOL;
	const char *targets = "interp,cpu";
	for (int i = 0; i < argc; i++) {
		const char *opt = argv[i];
		bool has = i + 1 < argc;
		if (!strcmp(opt, "--targets") && has) {
			targets = argv[++i];
		} else if ((!strcmp(opt, "--input") || !strcmp(opt, "--dim")) && has) {
			char *spec = argv[++i], *eq = strchr(spec, '=');
			bool input = !strcmp(opt, "--input");
			if (!eq || eq == spec || !eq[1]) {
				fprintf(stderr, "tbc check: %s wants %s, got '%s'\n", opt, input ? "NAME=FILE" : "NAME=SIZE", spec);
				return false;
			}
			*eq = 0;
			if (input) {
				a->in_names[a->n_in] = spec;
				a->in_files[a->n_in++] = eq + 1;
				continue;
			}
			char *end;
			long long v = strtoll(eq + 1, &end, 10);
			if (*end || v < 0 || v > ((long long)1 << 40)) {
				fprintf(stderr, "tbc check: --dim %s wants a size from 0 to 2^40, got '%s'\n", spec, eq + 1);
				return false;
			}
			for (int k = 0; k < a->n_dims; k++)
				if (!strcmp(a->dims[k].name, spec)) {
					fprintf(stderr, "tbc check: --dim %s given twice\n", spec);
					return false;
				}
			a->dims[a->n_dims++] = (check_dim){spec, (int64_t)v, "--dim"};
		} else if (!strcmp(opt, "--seed") && has) {
			char *end;
			const char *s = argv[++i];
			unsigned long long v = strtoull(s, &end, 10);
			if (!*s || *end || s[0] == '-') {
				fprintf(stderr, "tbc check: --seed wants a non-negative integer, got '%s'\n", s);
				return false;
			}
			a->seed = (uint64_t)v;
		} else if (!strcmp(opt, "--rtol") && has) {
			if (!parse_double(opt, argv[++i], &a->rtol)) return false;
		} else if (!strcmp(opt, "--atol") && has) {
			if (!parse_double(opt, argv[++i], &a->atol)) return false;
		} else if (!strcmp(opt, "--bisect")) {
			a->bisect = true;
		} else if (!strcmp(opt, "--bisect-chunk") && has) {
			char *end;
			a->chunk = strtol(argv[++i], &end, 10);
			if (*end || a->chunk < 1 || a->chunk > 1000000) {
				fprintf(stderr, "tbc check: --bisect-chunk wants a node count from 1 to 1000000, got '%s'\n",
					argv[i]);
				return false;
			}
		} else if (!strcmp(opt, "--test-perturb") && has) {
			/* TEST ONLY, not in --help: compile a deliberately wrong model
			 * (docs/check.md). */
			a->env.test_perturb_node = argv[++i];
		} else if (opt[0] == '-') {
			fprintf(stderr, "tbc check: unknown option '%s'%s (see tbc --help)\n", opt,
				has ? "" : " or it is missing its value");
			return false;
		} else if (!a->model) {
			a->model = opt;
		} else {
			fprintf(stderr, "tbc check: more than one MODEL ('%s' and '%s')\n", a->model, opt);
			return false;
		}
	}
	if (!a->model) {
		fprintf(stderr, "tbc check: need MODEL (see tbc --help)\n");
		return false;
	}
	return parse_targets(a, targets);
}

/* ---- Inputs ---------------------------------------------------------------*/
static check_dim *find_dim(check_args *a, const char *name) {
	for (int k = 0; k < a->n_dims; k++)
		if (!strcmp(a->dims[k].name, name)) return &a->dims[k];
	return NULL;
}

static void format_shape(tbc_dtype dt, int rank, const int64_t *dims, char *buf, size_t size) {
	size_t used = (size_t)snprintf(buf, size, "%s[", tbc_dtype_name(dt));
	for (int i = 0; i < rank && used < size; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? "," : "", dims[i]);
	if (used < size) snprintf(buf + used, size - used, "]");
}

static void format_tensor_shape(const tbc_tensor *t, char *buf, size_t size) {
	format_shape(t->dtype, t->rank, t->dims, buf, size);
}

/* Reads the given inputs, binds the symbolic dims they fix, then makes the
 * others at random.  Returns false after printing the problem. */
static bool make_inputs(check_args *a, const tbc_module *m, tbc_tensor **inputs) {
	size_t n = tbc_module_input_count(m);
	bool ok = true;
	for (int k = 0; k < a->n_in && ok; k++) {
		size_t i = 0;
		while (i < n && strcmp(tbc_module_input_name(m, i), a->in_names[k])) i++;
		if (i == n) {
			fprintf(stderr, "error: %s: the model has no input named '%s'\n", a->model, a->in_names[k]);
			return false;
		}
		if (inputs[i]) {
			fprintf(stderr, "error: input '%s' given twice\n", a->in_names[k]);
			return false;
		}
		tbc_diags *d = tbc_diags_create();
		ok = d && tbc_tensor_read_file(a->in_files[k], d, &inputs[i], NULL) == TBC_OK;
		if (!ok) {
			print_diags("input", d);
			if (!tbc_diags_count(d)) fprintf(stderr, "error: %s: cannot read this input file\n", a->in_files[k]);
		}
		tbc_diags_destroy(d);
		int64_t dims[TBC_MAX_RANK];
		const char *syms[TBC_MAX_RANK];
		int rank = ok ? tbc_module_input_shape(m, i, dims, syms) : -1;
		for (int e = 0; ok && rank == inputs[i]->rank && e < rank; e++) {
			if (!syms[e]) continue;
			check_dim *dim = find_dim(a, syms[e]);
			if (!dim) {
				a->dims[a->n_dims++] = (check_dim){syms[e], inputs[i]->dims[e], a->in_files[k]};
			} else if (dim->value != inputs[i]->dims[e]) {
				fprintf(stderr, "error: input '%s' (%s) has %s = %" PRId64 ", but %s gives %s = %" PRId64 "\n",
					a->in_names[k], a->in_files[k], syms[e], inputs[i]->dims[e], dim->from, syms[e],
					dim->value);
				ok = false;
			}
		}
	}
	/* Every --dim must name a symbolic dim of some input (a typo is not
	 * silently ignored). */
	for (int k = 0; k < a->n_dims && ok; k++) {
		bool used = false;
		for (size_t i = 0; i < n && !used; i++) {
			int64_t dims[TBC_MAX_RANK];
			const char *syms[TBC_MAX_RANK];
			int rank = tbc_module_input_shape(m, i, dims, syms);
			for (int e = 0; e < rank && !used; e++) used = syms[e] && !strcmp(syms[e], a->dims[k].name);
		}
		if (!used) {
			fprintf(stderr, "error: --dim %s: no input of %s has a symbolic dim of this name\n", a->dims[k].name,
				a->model);
			ok = false;
		}
	}
	for (size_t i = 0; i < n && ok; i++) {
		if (inputs[i]) continue;
		const char *name = tbc_module_input_name(m, i);
		int64_t dims[TBC_MAX_RANK];
		const char *syms[TBC_MAX_RANK];
		int rank = tbc_module_input_shape(m, i, dims, syms);
		tbc_dtype dt = tbc_module_input_dtype(m, i);
		if (rank < 0) {
			fprintf(stderr, "error: input '%s' has no known rank: give it with --input %s=FILE\n", name, name);
			ok = false;
			break;
		}
		for (int e = 0; e < rank; e++) {
			if (!syms[e]) continue;
			const check_dim *dim = find_dim(a, syms[e]);
			if (dim) {
				dims[e] = dim->value;
				continue;
			}
			fprintf(stderr,
				"error: input '%s' dim %d is symbolic ('%s'): give its size with --dim %s=SIZE "
				"(or the input with --input %s=FILE)\n",
				name, e, syms[e], syms[e], name);
			ok = false;
		}
		if (!ok) break;
		inputs[i] = tbc_tensor_create(dt, rank, dims);
		char shape[512];
		format_shape(dt, rank, dims, shape, sizeof shape);
		if (!inputs[i]) {
			fprintf(stderr, "error: input '%s': a random %s cannot be made (too large, or not a tensor type)\n",
				name, shape);
			ok = false;
		} else if (tbc_tensor_fill_random(inputs[i], a->seed * 0x9e3779b97f4a7c15ull + i) != TBC_OK) {
			fprintf(stderr, "error: input '%s': tbc check makes no random %s values; give --input %s=FILE\n",
				name, tbc_dtype_name(dt), name);
			ok = false;
		}
	}
	return ok;
}

/* ---- Running and comparing ------------------------------------------------*/
typedef struct target_run {
	const check_target *t;
	tbc_tensor **out;
	bool ok;
	double ms;
} target_run;

static void free_outputs(tbc_tensor **out, size_t n) {
	for (size_t i = 0; out && i < n; i++) tbc_tensor_destroy(out[i]);
	free(out);
}

static bool run_target(const check_args *a, const check_target *t, const tbc_module *m, tbc_tensor *const *in,
		       tbc_tensor ***out_tensors, double *ms) {
	size_t n_in = tbc_module_input_count(m), n_out = tbc_module_output_count(m);
	tbc_tensor **out = calloc(n_out + 1, sizeof *out);
	if (!out) return false;
	double t0 = now_ms();
	bool ok = t->run(&a->env, t->name, m, in, n_in, out, n_out);
	if (ms) *ms = now_ms() - t0;
	if (!ok) {
		free_outputs(out, n_out);
		out = NULL;
	}
	*out_tensors = out;
	return ok;
}

/* The verdict on one compared value; true when it agrees. */
static bool verdict(const tbc_tensor *got, const tbc_tensor *want, const tbc_compare_result *r, char *buf,
		    size_t size) {
	char g[256], w[256];
	format_tensor_shape(got, g, sizeof g);
	format_tensor_shape(want, w, sizeof w);
	if (!r->same_dtype) snprintf(buf, size, "DIFFERS: dtype %s, reference %s", tbc_dtype_name(got->dtype), tbc_dtype_name(want->dtype));
	else if (!r->same_shape) snprintf(buf, size, "DIFFERS: shape %s, reference %s", g, w);
	else if (r->n_nan_mismatched)
		snprintf(buf, size, "DIFFERS: NaN in one and not the other at %" PRId64 " of %" PRId64 " elements",
			 r->n_nan_mismatched, got->numel);
	else if (r->n_mismatched)
		snprintf(buf, size, "DIFFERS: %" PRId64 " of %" PRId64 " elements", r->n_mismatched, got->numel);
	else if (r->n_nan_both)
		snprintf(buf, size, "ok, but NaN in both at %" PRId64 " of %" PRId64 " elements", r->n_nan_both, got->numel);
	else snprintf(buf, size, "ok");
	return r->same_dtype && r->same_shape && !r->n_mismatched;
}

static void format_diff(double v, bool meaningful, char *buf, size_t size) {
	if (meaningful) snprintf(buf, size, "%.3g", v);
	else snprintf(buf, size, "-");
}

typedef struct row {
	const char *target, *output;
	char abs[32], rel[32], verdict[600];
} row;

static void print_table(const row *rows, size_t n) {
	int wt = 6, wo = 6;
	for (size_t i = 0; i < n; i++) {
		int lt = (int)strlen(rows[i].target), lo = (int)strlen(rows[i].output);
		wt = lt > wt ? lt : wt;
		wo = lo > wo ? lo : wo;
	}
	wo = wo > 48 ? 48 : wo;
	printf("%-*s  %-*s  %12s  %12s  %s\n", wt, "target", wo, "output", "max abs diff", "max rel diff", "verdict");
	for (size_t i = 0; i < n; i++)
		printf("%-*s  %-*s  %12s  %12s  %s\n", wt, rows[i].target, wo, rows[i].output, rows[i].abs, rows[i].rel,
		       rows[i].verdict);
}

/* ---- Bisection ------------------------------------------------------------*/
/* The shapes of values already seen, for describing a node's inputs. */
typedef struct shape_book {
	char **names, **shapes;
	size_t n, cap;
} shape_book;

static void book_put(shape_book *b, const char *name, const char *shape) {
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		char **nn = realloc(b->names, cap * sizeof *nn);
		if (!nn) return;
		b->names = nn;
		char **ns = realloc(b->shapes, cap * sizeof *ns);
		if (!ns) return;
		b->shapes = ns;
		b->cap = cap;
	}
	char *n = strdup(name), *s = strdup(shape);
	if (!n || !s) {
		free(n);
		free(s);
		return;
	}
	b->names[b->n] = n;
	b->shapes[b->n++] = s;
}

static const char *book_get(const shape_book *b, const char *name) {
	for (size_t i = b->n; i-- > 0;)
		if (!strcmp(b->names[i], name)) return b->shapes[i];
	return NULL;
}

static void book_free(shape_book *b) {
	for (size_t i = 0; i < b->n; i++) {
		free(b->names[i]);
		free(b->shapes[i]);
	}
	free(b->names);
	free(b->shapes);
}

static void print_node(const tbc_module *m, size_t j, size_t count, const shape_book *book) {
	tbc_node_info info;
	tbc_module_node_get(m, j, &info);
	printf("first diverging node: '%s' (%s), node %zu of %zu in execution order\n", info.name, info.op_type, j + 1,
	       count);
	printf("  inputs:");
	if (!info.n_inputs) printf(" none");
	for (size_t k = 0; k < info.n_inputs; k++) {
		char buf[64], type[512];
		const char *name = tbc_module_node_input_name(m, j, k, buf, sizeof buf);
		if (!name) {
			printf("%s (omitted)", k ? "," : "");
			continue;
		}
		const char *shape = book_get(book, name);
		if (!shape) {
			tbc_module_node_input_type(m, j, k, type, sizeof type);
			shape = type;
		}
		printf("%s %s %s", k ? "," : "", name, shape);
	}
	printf("\n");
}

/* Compares the outputs of node j in one window's results; true when they all
 * agree.  On the first that differs it prints the report. */
static bool compare_node(const check_args *a, const tbc_module *m, const tbc_module *copy, size_t j, size_t count,
			 tbc_tensor **ref, tbc_tensor **got, shape_book *book) {
	tbc_node_info info;
	tbc_module_node_get(m, j, &info);
	size_t n_copy_out = tbc_module_output_count(copy);
	for (size_t k = 0; k < info.n_outputs; k++) {
		char buf[64];
		const char *name = tbc_module_node_output_name(m, j, k, buf, sizeof buf);
		if (!name) continue;
		size_t o = 0;
		while (o < n_copy_out && strcmp(tbc_module_output_name(copy, o), name)) o++;
		if (o == n_copy_out) continue; /* not returned: cannot be compared */
		tbc_compare_result r;
		tbc_tensor_compare(got[o], ref[o], a->rtol, a->atol, &r);
		char v[600], shape[512];
		format_tensor_shape(ref[o], shape, sizeof shape);
		if (verdict(got[o], ref[o], &r, v, sizeof v)) {
			book_put(book, name, shape);
			continue;
		}
		print_node(m, j, count, book);
		printf("  output %s %s: %s", name, shape, v);
		if (r.same_dtype && r.same_shape)
			printf("; max abs diff %.3g, max rel diff %.3g; first at element %" PRId64 ": %.9g, reference %.9g",
			       r.max_abs_diff, r.max_rel_diff, r.first_mismatch, r.first_got, r.first_want);
		printf("\n");
		return false;
	}
	return true;
}

static size_t exposed_bytes(const tbc_module *copy, size_t first, tbc_tensor **ref) {
	size_t bytes = 0;
	for (size_t o = first; o < tbc_module_output_count(copy); o++)
		if (ref[o]) bytes += (size_t)ref[o]->numel * tbc_dtype_size(ref[o]->dtype);
	return bytes;
}

/* Finds the first node whose output differs between the reference target
 * and t.  Returns CHECK_DIFFER when it names one (or a run failed),
 * CHECK_AGREE when every exposed value agreed. */
static int bisect(const check_args *a, const check_target *reference, const check_target *t, const tbc_module *m,
		  tbc_tensor *const *inputs) {
	size_t count = tbc_module_node_count(m), n_model_out = tbc_module_output_count(m);
	size_t *nodes = calloc(count + 1, sizeof *nodes);
	shape_book book = {0};
	for (size_t i = 0; i < tbc_module_input_count(m); i++) {
		char shape[512];
		format_tensor_shape(inputs[i], shape, sizeof shape);
		book_put(&book, tbc_module_input_name(m, i), shape);
	}
	printf("\nbisect: %s against %s over %zu nodes\n", t->name, reference->name, count);
	double t0 = now_ms();
	size_t window = a->chunk ? (size_t)a->chunk : 64, runs = 0;
	int rc = CHECK_AGREE;
	bool found = false;
	for (size_t begin = 0; nodes && begin < count && !found && rc == CHECK_AGREE;) {
		size_t end = begin + window < count ? begin + window : count;
		for (size_t j = begin; j < end; j++) nodes[j - begin] = j;
		tbc_diags *d = tbc_diags_create();
		tbc_module *copy = NULL;
		tbc_tensor **ref = NULL, **got = NULL;
		if (!d || tbc_module_expose_nodes(m, nodes, end - begin, d, &copy) != TBC_OK) {
			print_diags("bisect", d);
			rc = CHECK_DIFFER;
		}
		bool ran = rc == CHECK_AGREE && run_target(a, reference, copy, inputs, &ref, NULL) &&
			   run_target(a, t, copy, inputs, &got, NULL);
		runs++;
		if (rc == CHECK_AGREE && !ran) {
			fprintf(stderr, "error: bisect: the model with nodes %zu to %zu returned did not run (above)\n",
				begin + 1, end);
			rc = CHECK_DIFFER;
		}
		for (size_t j = begin; ran && j < end && !found; j++)
			found = !compare_node(a, m, copy, j, count, ref, got, &book);
		if (ran && !found && !a->chunk) {
			/* Size the next window so its values take about CHECK_WINDOW_BYTES. */
			double per_node = (double)exposed_bytes(copy, n_model_out, ref) / (double)(end - begin);
			double w = per_node > 0 ? CHECK_WINDOW_BYTES / per_node : 4096;
			window = w < 1 ? 1 : w > 4096 ? 4096 : (size_t)w;
		}
		size_t n_copy_out = copy ? tbc_module_output_count(copy) : 0;
		free_outputs(ref, n_copy_out);
		free_outputs(got, n_copy_out);
		tbc_module_destroy(copy);
		tbc_diags_destroy(d);
		begin = end;
	}
	if (!nodes) {
		fprintf(stderr, "error: bisect: out of memory\n");
		rc = CHECK_DIFFER;
	}
	if (found) rc = CHECK_DIFFER;
	else if (rc == CHECK_AGREE)
		printf("no node's output differs beyond tolerance when exposed: the difference comes from how the model "
		       "is compiled with its intermediates hidden (fusion, memory reuse), not from one node's kernel\n");
	printf("bisect: %zu run%s of each target, %.1f s\n", runs, runs == 1 ? "" : "s", (now_ms() - t0) / 1e3);
	free(nodes);
	book_free(&book);
	return rc;
}

/* ---- The command ----------------------------------------------------------*/
int tbc_cmd_check(int argc, char **argv) {
	check_args a;
	memset(&a, 0, sizeof a);
	a.in_names = calloc((size_t)argc + 1, sizeof *a.in_names);
	a.in_files = calloc((size_t)argc + 1, sizeof *a.in_files);
	tbc_module *m = NULL;
	tbc_tensor **inputs = NULL;
	target_run *runs = NULL;
	row *rows = NULL;
	size_t n_in = 0, n_out = 0;
	int rc = CHECK_USAGE;
	/* Bindings from --dim, then one per input dim a file fixes. */
	a.dims = calloc((size_t)argc + (size_t)argc * TBC_MAX_RANK + 1, sizeof *a.dims);
	if (!a.in_names || !a.in_files || !a.dims) goto done;
	if (!parse_args(&a, argc, argv)) goto done;

	/* A requested target that cannot run here is not a pass. */
	for (int k = 0; k < a.n_targets; k++) {
		char why[600];
		if (a.targets[k]->available && !a.targets[k]->available(why, sizeof why)) {
			fprintf(stderr, "tbc check: target '%s' is %s\n", a.targets[k]->name, why);
			rc = CHECK_UNAVAILABLE;
		}
	}
	if (rc == CHECK_UNAVAILABLE) goto done;

	tbc_diags *d = tbc_diags_create();
	if (!d || tbc_module_load_onnx(a.model, d, &m) != TBC_OK) {
		print_diags("model", d);
		tbc_diags_destroy(d);
		goto done;
	}
	tbc_diags_destroy(d);
	n_in = tbc_module_input_count(m);
	n_out = tbc_module_output_count(m);
	inputs = calloc(n_in + 1, sizeof *inputs);
	runs = calloc((size_t)a.n_targets, sizeof *runs);
	rows = calloc((size_t)a.n_targets * (n_out + 1) + 1, sizeof *rows);
	if (!inputs || !runs || !rows || !make_inputs(&a, m, inputs)) goto done;

	printf("model: %s\ninputs:", a.model);
	bool any_random = false;
	for (size_t i = 0; i < n_in; i++) {
		char shape[512];
		format_tensor_shape(inputs[i], shape, sizeof shape);
		bool given = false;
		for (int k = 0; k < a.n_in; k++)
			if (!strcmp(a.in_names[k], tbc_module_input_name(m, i))) {
				printf("%s %s %s from %s", i ? "," : "", tbc_module_input_name(m, i), shape, a.in_files[k]);
				given = true;
			}
		if (!given) printf("%s %s %s random", i ? "," : "", tbc_module_input_name(m, i), shape);
		any_random |= !given;
	}
	if (!n_in) printf(" none");
	if (any_random) printf(" (seed %" PRIu64 ")", a.seed);
	printf("\ntolerance: |got - reference| <= %g + %g * |reference|; integers and bools exact\n", a.atol, a.rtol);
	fflush(stdout);

	rc = CHECK_AGREE;
	for (int k = 0; k < a.n_targets; k++) {
		runs[k].t = a.targets[k];
		runs[k].ok = run_target(&a, a.targets[k], m, inputs, &runs[k].out, &runs[k].ms);
		if (!runs[k].ok) rc = CHECK_DIFFER;
	}
	size_t n_rows = 0;
	bool nan_both = false;
	bool *differs = calloc((size_t)a.n_targets + 1, sizeof *differs);
	for (int k = 0; k < a.n_targets; k++) {
		const target_run *r = &runs[k], *ref = &runs[0];
		for (size_t o = 0; o < n_out || (!n_out && o == 0); o++) {
			row *w = &rows[n_rows++];
			w->target = r->t->name;
			w->output = n_out ? tbc_module_output_name(m, o) : "-";
			if (!w->output) w->output = "?";
			snprintf(w->abs, sizeof w->abs, "-");
			snprintf(w->rel, sizeof w->rel, "-");
			if (!r->ok) {
				snprintf(w->verdict, sizeof w->verdict, "FAILED to run (errors above)");
			} else if (k == 0) {
				snprintf(w->verdict, sizeof w->verdict, "reference");
			} else if (!ref->ok) {
				snprintf(w->verdict, sizeof w->verdict, "not compared: the reference failed");
			} else if (n_out) {
				tbc_compare_result cr;
				tbc_tensor_compare(r->out[o], ref->out[o], a.rtol, a.atol, &cr);
				bool meaningful = cr.same_dtype && cr.same_shape;
				format_diff(cr.max_abs_diff, meaningful, w->abs, sizeof w->abs);
				format_diff(cr.max_rel_diff, meaningful, w->rel, sizeof w->rel);
				nan_both |= cr.n_nan_both > 0;
				if (!verdict(r->out[o], ref->out[o], &cr, w->verdict, sizeof w->verdict)) {
					rc = CHECK_DIFFER;
					if (differs) differs[k] = true;
				}
			} else {
				snprintf(w->verdict, sizeof w->verdict, "ok (no outputs)");
			}
		}
	}
	print_table(rows, n_rows);
	if (nan_both)
		printf("note: NaN where the reference has NaN counts as agreeing; random inputs may be outside what the "
		       "model expects (give them with --input NAME=FILE)\n");
	printf("time:");
	for (int k = 0; k < a.n_targets; k++)
		printf("%s %s %.1f ms", k ? "," : "", runs[k].t->name, runs[k].ms);
	printf(" (compiling included)\n");
	printf("%s\n", rc == CHECK_AGREE ? "result: the targets agree" : "result: the targets DIFFER");
	if (a.bisect && rc != CHECK_AGREE) {
		for (int k = 1; k < a.n_targets; k++)
			if (differs && differs[k]) bisect(&a, a.targets[0], a.targets[k], m, inputs);
	} else if (a.bisect) {
		printf("bisect: the outputs agree; nothing to look for\n");
	}
	free(differs);
done:
	for (int k = 0; runs && k < a.n_targets; k++) free_outputs(runs[k].out, n_out);
	for (size_t i = 0; inputs && i < n_in; i++) tbc_tensor_destroy(inputs[i]);
	free(inputs);
	free(runs);
	free(rows);
	tbc_module_destroy(m);
	free(a.in_names);
	free(a.in_files);
	free(a.dims);
	return rc;
}
