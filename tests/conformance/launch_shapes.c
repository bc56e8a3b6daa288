/* tbc-launch-shapes: how each kernel of a model would run on a device.
 *
 * Lowers each model given (an .onnx path, or a node case's folder) for
 * tbc_target_desc_opencl_default() and prints one line per kernel:
 *
 *   model  kernel  shape  extent  work  verdict
 *
 * shape is kir_kernel_launch_shape's (groups, grid, single), extent the
 * work-items or work-groups the launch spreads over (the grid loop's trip
 * count, or the groups), work an estimate of the loop iterations the kernel
 * runs in all (static trip counts; symbolic sizes count as `--sym N`, 64 by
 * default; a bound that depends on another loop counts as 1; a grouped
 * kernel's work is one item's), and verdict `serial` for a SINGLE kernel
 * of 1024 iterations or more, `narrow` for a launch of under 4096
 * work-items each running 256 iterations or more: the kernels issue 11 §2
 * wants in the parallel form (docs/parallel-form.md).  --bad prints only
 * those; --print S prints the kernels whose name holds S.  Lowering only: nothing runs, so the whole node suite takes
 * seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/compile.h"
#include "codegen/lower/lower.h"
#include "tbc/tbc.h"

typedef struct survey {
	const char *model;
	int64_t sym;
	bool bad_only;
	const char *print; /* kernels whose name holds this are printed (kir_print) */
	int n_single, n_narrow, n_kernels;
} survey;

/* The value of an index expression with every size parameter at sym; false
 * when it reads a variable or loads. */
static bool eval(const kir_kernel *k, const kir_expr *e, int64_t sym, int64_t *out) {
	int64_t sizes[256];
	for (int i = 0; i < 256; i++) sizes[i] = sym;
	if (k->n_sizes > 256) return false;
	return kir_eval_index(k, e, sizes, out, NULL);
}

static int64_t trips(const kir_kernel *k, const kir_stmt *s, int64_t sym) {
	int64_t lo, hi;
	if (!eval(k, s->lo, sym, &lo) || !eval(k, s->hi, sym, &hi)) return 1;
	return hi > lo ? (hi - lo + s->step - 1) / s->step : 0;
}

static double work(const kir_kernel *k, const kir_stmt *s, int64_t sym) {
	double w = 0;
	for (; s; s = s->next) {
		switch (s->kind) {
		case KIR_S_FOR: w += (double)trips(k, s, sym) * (1 + work(k, s->body, sym)); break;
		case KIR_S_IF: {
			double a = work(k, s->body, sym), b = work(k, s->orelse, sym);
			w += 1 + (a > b ? a : b);
			break;
		}
		default: w += 1; break;
		}
	}
	return w;
}

static const char *shape_name(kir_launch_shape s) {
	return s == KIR_LAUNCH_GROUPS ? "groups" : s == KIR_LAUNCH_GRID ? "grid" : "single";
}

static bool each_kernel(const kir_program *p, void *user, tbc_diags *d) {
	(void)d;
	survey *sv = user;
	for (int i = 0; i < p->n_launches; i++) {
		const kir_kernel *k = p->launches[i].kernel;
		bool seen = false;
		for (int j = 0; k && j < i && !seen; j++) seen = p->launches[j].kernel == k;
		if (!k || seen) continue;
		kir_launch_shape shape = kir_kernel_launch_shape(k);
		double w = work(k, k->body, sv->sym);
		int64_t extent = 1;
		if (shape == KIR_LAUNCH_GRID) {
			extent = trips(k, kir_kernel_grid_loop(k), sv->sym);
		} else if (shape == KIR_LAUNCH_GROUPS) {
			const kir_stmt *g = k->body;
			for (int dim = 0; dim < 3 && g && g->kind == KIR_S_FOR && g->loop == KIR_LOOP_GRID; dim++, g = g->body)
				extent *= trips(k, g, sv->sym);
		}
		/* Work-items the launch runs, and the iterations each runs. */
		double units = (double)(extent ? extent : 1) * (double)kir_group_items(k);
		double per_unit = w / (double)(extent ? extent : 1);
		const char *verdict = "ok";
		if (shape == KIR_LAUNCH_SINGLE && w >= 1024) verdict = "serial", sv->n_single++;
		else if (shape != KIR_LAUNCH_SINGLE && units < 4096 && per_unit >= 256) verdict = "narrow", sv->n_narrow++;
		sv->n_kernels++;
		if (sv->bad_only && !strcmp(verdict, "ok")) continue;
		printf("%s\t%s\t%s\t%lld\t%.0f\t%s\n", sv->model, k->name, shape_name(shape), (long long)extent, w, verdict);
		if (sv->print && strstr(k->name, sv->print)) {
			char *text = kir_print(k);
			if (text) fputs(text, stdout);
			free(text);
		}
	}
	return true;
}

static void usage(void) {
	fputs("usage: tbc-launch-shapes [--bad] [--sym N] [--print KERNEL] MODEL.onnx|CASE_DIR ...\n"
	      "       tbc-launch-shapes [--bad] [--sym N] [--print KERNEL] -   (paths from standard input, one a line)\n",
	      stderr);
}

static void one(survey *sv, const char *arg) {
	char path[4096];
	struct stat st;
	if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/model.onnx", arg);
	else snprintf(path, sizeof path, "%s", arg);
	sv->model = arg;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	if (tbc_module_load_onnx(path, d, &m) != TBC_OK) {
		printf("%s\t-\tnot-loaded\t0\t0\t-\n", arg);
	} else {
		tbc_target_desc desc = tbc_target_desc_opencl_default();
		if (tbc_codegen_for(m, NULL, &desc, d, each_kernel, sv) != TBC_OK) printf("%s\t-\tnot-lowered\t0\t0\t-\n", arg);
	}
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

int main(int argc, char **argv) {
	survey sv = {.sym = 64};
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (!strcmp(argv[i], "--bad")) sv.bad_only = true;
		else if (!strcmp(argv[i], "--sym") && i + 1 < argc) sv.sym = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--print") && i + 1 < argc) sv.print = argv[++i];
		else return usage(), 2;
	}
	if (i >= argc) return usage(), 2;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "-")) {
			one(&sv, argv[i]);
			continue;
		}
		char line[4096];
		while (fgets(line, sizeof line, stdin)) {
			line[strcspn(line, "\n")] = 0;
			if (line[0]) one(&sv, line);
		}
	}
	fprintf(stderr, "%d kernels: %d serial (SINGLE), %d narrow\n", sv.n_kernels, sv.n_single, sv.n_narrow);
	return 0;
}
