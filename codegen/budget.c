/* The accuracy budget's search (docs/precision.md): which nodes a float16 or
 * bfloat16 compile keeps in float32 so that its outputs stay within a budget
 * of the float32 model's on calibration inputs.
 *
 * The float32 model and each candidate are JIT-compiled for this host and
 * run by the serial host (tbc_jit_compile, tbc_abi_run_serial: what
 * tbc_run_cpu does) on every calibration set.  The candidates are the named
 * nodes the precision pass lowers, in execution order; the search is
 * onnxconverter-common's auto_mixed_precision bisection: the lowered set
 * grows one segment of nodes at a time (the largest undecided first); a
 * segment whose lowering keeps the budget joins it, one that breaks it is
 * split in two, and a single node that breaks it stays float32 -- the
 * reason recorded is what lowering it did.  The assignment returned is
 * always the last one that met the budget (or every candidate float32), so
 * a search stopped by its bound on compiles returns a correct, if more
 * float32, model.
 *
 * Requires: keep_io_types (the lowered model's interface is the float32
 * one's).  Guarantees: on success, compiling with the returned exclusions
 * meets the budget on the calibration sets (it was measured so). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "passes/passes.h"
#include "tbc/abi.h"
#include "ir/clock.h"

/* The bound on compiles (the reference and everything lowered included). */
#define TBC_BUDGET_DEFAULT_COMPILES 64
#define TBC_BUDGET_MAX_COMPILES_LIMIT 10000

/* ---- The budget -------------------------------------------------------------*/
typedef struct budget {
	bool tol, cos, top1;
	double rtol, atol, cosine;
} budget;

static bool parse_number(const char *s, size_t n, double *out) {
	char buf[64];
	if (!n || n >= sizeof buf) return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	char *end;
	double v = strtod(buf, &end);
	if (*end || !isfinite(v)) return false;
	*out = v;
	return true;
}

static bool parse_budget(const char *spec, double *rtol, double *atol, double *cosine, bool *top1, tbc_diags *d) {
	budget b = {0};
	bool seen_rtol = false, seen_atol = false;
	const char *p = spec ? spec : "";
	if (!*p) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
			      "the accuracy budget is empty: give rtol=R,atol=A, cosine=C or top1");
		return false;
	}
	while (*p) {
		size_t n = strcspn(p, ",");
		const char *eq = memchr(p, '=', n);
		size_t key = eq ? (size_t)(eq - p) : n;
		double v = 0;
		bool has_value = eq != NULL, number = has_value && parse_number(eq + 1, n - key - 1, &v);
#define KEY(k) (key == strlen(k) && !strncmp(p, k, key))
		const char *why = NULL;
		if (KEY("top1")) {
			if (has_value) why = "top1 takes no value";
			else if (b.top1) why = "top1 is given twice";
			b.top1 = true;
		} else if (KEY("rtol") || KEY("atol") || KEY("cosine")) {
			bool *seen = KEY("rtol") ? &seen_rtol : KEY("atol") ? &seen_atol : &b.cos;
			if (!number) why = "wants a number";
			else if (*seen) why = "is given twice";
			else if (KEY("cosine") && !(v > 0 && v <= 1)) why = "is a cosine similarity: above 0, at most 1";
			else if (!KEY("cosine") && v < 0) why = "cannot be negative";
			*seen = true;
			if (KEY("rtol")) b.rtol = v;
			else if (KEY("atol")) b.atol = v;
			else b.cosine = v;
		} else {
			why = "is not rtol=R, atol=A, cosine=C or top1";
		}
#undef KEY
		if (why) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "accuracy budget '%s': '%.*s' %s", spec,
				      (int)n, p, why);
			return false;
		}
		p += n;
		if (*p == ',') {
			p++;
			if (!*p) {
				tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
					      "accuracy budget '%s': ends with a comma", spec);
				return false;
			}
		}
	}
	if (rtol) *rtol = seen_rtol || seen_atol ? b.rtol : -1;
	if (atol) *atol = seen_rtol || seen_atol ? b.atol : -1;
	if (cosine) *cosine = b.cos ? b.cosine : -1;
	if (top1) *top1 = b.top1;
	return true;
}

/* ---- Calibration sets ---------------------------------------------------------*/
typedef struct calib_set {
	char *name;          /* the subfolder's */
	tbc_tensor **inputs; /* in graph-input order */
} calib_set;

typedef struct calib {
	calib_set *sets;
	size_t n, n_inputs;
} calib;

static void calib_free(calib *c) {
	for (size_t s = 0; s < c->n; s++) {
		for (size_t i = 0; c->sets[s].inputs && i < c->n_inputs; i++) tbc_tensor_destroy(c->sets[s].inputs[i]);
		free(c->sets[s].inputs);
		free(c->sets[s].name);
	}
	free(c->sets);
	memset(c, 0, sizeof *c);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entries of dir (sorted, without . and ..), each malloc'd; NULL with
 * a diagnostic when it cannot be read. */
static char **list_dir(const char *dir, size_t *out_n, tbc_diags *d) {
	*out_n = 0;
	DIR *h = opendir(dir);
	if (!h) {
		tbc_diags_add(d, TBC_ERR_IO, dir, NULL, NULL, NULL, "cannot read the calibration folder: %s", strerror(errno));
		return NULL;
	}
	size_t n = 0, cap = 16;
	char **names = malloc(cap * sizeof *names);
	for (struct dirent *e; names && (e = readdir(h));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
		if (n == cap) {
			char **grown = realloc(names, (cap *= 2) * sizeof *names);
			if (!grown) break;
			names = grown;
		}
		if (!(names[n] = strdup(e->d_name))) break;
		n++;
	}
	closedir(h);
	if (!names) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, dir, NULL, NULL, NULL, "out of memory listing the folder");
		return NULL;
	}
	qsort(names, n, sizeof *names, cmp_str);
	*out_n = n;
	return names;
}

static void free_names(char **names, size_t n) {
	for (size_t i = 0; names && i < n; i++) free(names[i]);
	free(names);
}

/* a/b into buf; false with a diagnostic when it does not fit. */
static bool join_path(char *buf, size_t size, const char *a, const char *b, tbc_diags *d) {
	int n = snprintf(buf, size, "%s/%s", a, b);
	if (n >= 0 && (size_t)n < size) return true;
	tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, a, NULL, NULL, NULL, "the path to '%s' is too long", b);
	return false;
}

static bool is_dir(const char *path) {
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void shape_text(tbc_dtype dt, int rank, const int64_t *dims, const char **syms, char *buf, size_t size) {
	size_t used = (size_t)snprintf(buf, size, "%s[", tbc_dtype_name(dt));
	for (int k = 0; k < rank && used < size; k++) {
		if (syms && syms[k]) used += (size_t)snprintf(buf + used, size - used, "%s%s", k ? "," : "", syms[k]);
		else used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, k ? "," : "", dims[k]);
	}
	if (used < size) snprintf(buf + used, size - used, "]");
}

/* Checks a set's tensor for input i: dtype, rank, static dims, and each
 * symbolic dim the same within the set (bound[] by symbol, in order of
 * first sight). */
static bool input_matches(const tbc_module *m, size_t i, const tbc_tensor *t, const char *path, const char **bound_syms,
			  int64_t *bound_vals, size_t *n_bound, tbc_diags *d) {
	int64_t dims[TBC_MAX_RANK];
	const char *syms[TBC_MAX_RANK];
	int rank = tbc_module_input_shape(m, i, dims, syms);
	tbc_dtype dt = tbc_module_input_dtype(m, i);
	char want[512], got[512];
	shape_text(dt, rank < 0 ? 0 : rank, dims, syms, want, sizeof want);
	shape_text(t->dtype, t->rank, t->dims, NULL, got, sizeof got);
	bool ok = t->dtype == dt && (rank < 0 || rank == t->rank);
	for (int k = 0; ok && rank >= 0 && k < rank; k++) {
		if (!syms[k]) {
			ok = dims[k] < 0 || dims[k] == t->dims[k];
			continue;
		}
		size_t b = 0;
		while (b < *n_bound && strcmp(bound_syms[b], syms[k])) b++;
		if (b == *n_bound) {
			bound_syms[b] = syms[k];
			bound_vals[b] = t->dims[k];
			(*n_bound)++;
		} else if (bound_vals[b] != t->dims[k]) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, tbc_module_input_name(m, i),
				      "%s = %" PRId64 " here, but %" PRId64 " in another input of this set", syms[k], t->dims[k],
				      bound_vals[b]);
			return false;
		}
	}
	if (!ok)
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, tbc_module_input_name(m, i),
			      "calibration input is %s, the model's input '%s' is %s", got, tbc_module_input_name(m, i), want);
	return ok;
}

static bool calib_load_set(const tbc_module *m, const char *dir, const char *name, calib_set *set, tbc_diags *d) {
	size_t n_in = tbc_module_input_count(m);
	char path[4096];
	if (!join_path(path, sizeof path, dir, name, d)) return false;
	set->name = strdup(name);
	set->inputs = calloc(n_in + 1, sizeof *set->inputs);
	if (!set->name || !set->inputs) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, path, NULL, NULL, NULL, "out of memory");
		return false;
	}
	size_t n_files;
	char **files = list_dir(path, &n_files, d);
	if (!files) return false;
	const char *bound_syms[TBC_MAX_RANK * 8];
	int64_t bound_vals[TBC_MAX_RANK * 8];
	size_t n_bound = 0;
	bool ok = true;
	for (size_t f = 0; ok && f < n_files; f++) {
		char file[4096];
		if (!join_path(file, sizeof file, path, files[f], d)) {
			ok = false;
			break;
		}
		size_t len = strlen(files[f]);
		if (len <= 4 || strcmp(files[f] + len - 4, ".npy")) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, file, NULL, NULL, NULL,
				      "not an input file: a calibration set holds NAME.npy for each model input");
			ok = false;
			break;
		}
		files[f][len - 4] = 0;
		size_t i = 0;
		while (i < n_in && strcmp(tbc_module_input_name(m, i), files[f])) i++;
		if (i == n_in) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, file, NULL, NULL, files[f], "the model has no input named '%s'",
				      files[f]);
			ok = false;
			break;
		}
		ok = tbc_tensor_read_file(file, d, &set->inputs[i], NULL) == TBC_OK;
		if (ok && n_bound + TBC_MAX_RANK > sizeof bound_vals / sizeof *bound_vals) {
			tbc_diags_add(d, TBC_ERR_UNSUPPORTED, file, NULL, NULL, NULL, "too many symbolic dims in one set");
			ok = false;
		}
		ok = ok && input_matches(m, i, set->inputs[i], file, bound_syms, bound_vals, &n_bound, d);
	}
	for (size_t i = 0; ok && i < n_in; i++)
		if (!set->inputs[i]) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, tbc_module_input_name(m, i),
				      "the calibration set has no %s.npy for the model's input '%s'", tbc_module_input_name(m, i),
				      tbc_module_input_name(m, i));
			ok = false;
		}
	free_names(files, n_files);
	return ok;
}

/* Every subfolder of dir is one set (sorted by name). */
static bool calib_load(const tbc_module *m, const char *dir, calib *c, tbc_diags *d) {
	memset(c, 0, sizeof *c);
	c->n_inputs = tbc_module_input_count(m);
	if (!is_dir(dir)) {
		tbc_diags_add(d, TBC_ERR_IO, dir, NULL, NULL, NULL, "the calibration folder does not exist or is not a folder");
		return false;
	}
	size_t n;
	char **names = list_dir(dir, &n, d);
	if (!names) return false;
	c->sets = calloc(n + 1, sizeof *c->sets);
	bool ok = c->sets != NULL;
	const char *stray = NULL;
	for (size_t k = 0; ok && k < n; k++) {
		char path[4096];
		if (!join_path(path, sizeof path, dir, names[k], d)) {
			ok = false;
			break;
		}
		if (!is_dir(path)) {
			if (!stray) stray = names[k];
			continue;
		}
		ok = calib_load_set(m, dir, names[k], &c->sets[c->n++], d);
	}
	if (ok && !c->n) {
		if (stray)
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, dir, NULL, NULL, NULL,
				      "the calibration folder has no subfolder: each set of inputs is a subfolder of NAME.npy "
				      "files (found '%s' at the top)",
				      stray);
		else
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, dir, NULL, NULL, NULL,
				      "the calibration folder is empty: each set of inputs is a subfolder of NAME.npy files");
		ok = false;
	}
	free_names(names, n);
	if (!ok) calib_free(c);
	return ok;
}

/* ---- Candidates: the named nodes the pass lowers --------------------------------*/
typedef struct cand {
	char *name, *op_type;
	bool kept;   /* float32 in the answer */
	char *why;   /* why it is kept */
} cand;

typedef struct cand_list {
	cand *v;
	size_t n, cap;
	size_t n_unnamed; /* lowered ops that have no name (or a name with a comma): not movable */
	bool oom;
} cand_list;

static void on_lowered(void *user, const tbc_op *op) {
	cand_list *L = user;
	const char *name = op->name;
	if (!name || !*name || strchr(name, ',')) {
		L->n_unnamed++;
		return;
	}
	for (size_t i = 0; i < L->n; i++)
		if (!strcmp(L->v[i].name, name)) return; /* one ONNX node imported as a few ops */
	if (L->n == L->cap) {
		size_t cap = L->cap ? L->cap * 2 : 32;
		cand *grown = realloc(L->v, cap * sizeof *grown);
		if (!grown) {
			L->oom = true;
			return;
		}
		L->v = grown;
		L->cap = cap;
	}
	cand *c = &L->v[L->n];
	memset(c, 0, sizeof *c);
	c->name = strdup(name);
	c->op_type = strdup(tbc_ops[op->code].onnx_name);
	if (!c->name || !c->op_type) {
		free(c->name);
		free(c->op_type);
		L->oom = true;
		return;
	}
	L->n++;
}

static void cands_free(cand_list *L) {
	for (size_t i = 0; i < L->n; i++) {
		free(L->v[i].name);
		free(L->v[i].op_type);
		free(L->v[i].why);
	}
	free(L->v);
	memset(L, 0, sizeof *L);
}

static bool list_candidates(const tbc_module *m, const tbc_compile_options *o, cand_list *L, tbc_diags *d) {
	memset(L, 0, sizeof *L);
	tbc_module *work = tbc_module_clone(m);
	if (!work) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory copying the module");
		return false;
	}
	tbc_pipeline_options po = tbc_pipeline_defaults();
	po.opt_level = o->opt_level < 0 ? 0 : o->opt_level;
	tbc_precision_options prec = {.low = (tbc_dtype)o->precision,
				      .keep_io_types = true,
				      .exclude = o->precision_exclude,
				      .on_lowered = on_lowered,
				      .on_lowered_user = L};
	po.precision = &prec;
	bool ok = tbc_run_pipeline(work, &po, d);
	tbc_module_destroy(work);
	if (ok && L->oom) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory listing the lowered nodes");
		ok = false;
	}
	if (!ok) cands_free(L);
	return ok;
}

/* ---- Running and measuring -------------------------------------------------------*/
typedef struct outputs {
	tbc_tensor **t; /* [set][output] */
	size_t n_sets, n_out;
} outputs;

static void outputs_free(outputs *r) {
	for (size_t i = 0; r->t && i < r->n_sets * r->n_out; i++) tbc_tensor_destroy(r->t[i]);
	free(r->t);
	memset(r, 0, sizeof *r);
}

typedef struct search {
	const tbc_module *m;
	const tbc_compile_options *o;
	budget b;
	calib cal;
	outputs ref;
	cand_list c;
	size_t n_out;
	int compiles, max_compiles;
	tbc_diags *d;
} search;

/* Compiles m with the given exclusions (precision F32 for the reference)
 * for this host and runs it on every set. */
static tbc_code run_with(search *S, int precision, const char *exclude, outputs *out) {
	memset(out, 0, sizeof *out);
	tbc_compile_options o = *S->o;
	o.precision = precision;
	o.precision_exclude = exclude;
	o.accuracy_budget = NULL;
	o.calibrate = NULL;
	o.stats = 0;
	o.stats_out = NULL;
	o.dump_after = NULL;
	o.targets = TBC_TARGETS_CPU; /* measured on this CPU (docs/precision.md) */
	o.gpu_targets = NULL;
	o.cpu = NULL;
	o.features = NULL;
	tbc_jit *jit = NULL;
	S->compiles++;
	tbc_code rc = tbc_jit_compile(S->m, &o, S->d, &jit);
	if (rc != TBC_OK) return rc;
	out->n_sets = S->cal.n;
	out->n_out = S->n_out;
	out->t = calloc(out->n_sets * out->n_out + 1, sizeof *out->t);
	if (!out->t) rc = TBC_ERR_NO_MEMORY;
	for (size_t s = 0; rc == TBC_OK && s < S->cal.n; s++) {
		rc = tbc_abi_run_serial(tbc_jit_descriptor(jit), S->cal.sets[s].inputs, S->cal.n_inputs,
					out->t + s * out->n_out, out->n_out, S->d);
		if (rc != TBC_OK)
			tbc_diags_add(S->d, rc, S->m->path, NULL, NULL, NULL, "running calibration set '%s' failed",
				      S->cal.sets[s].name);
	}
	tbc_jit_destroy(jit);
	if (rc != TBC_OK) outputs_free(out);
	return rc;
}

/* How a candidate's outputs compare with the reference's. */
typedef struct verdict {
	bool met;
	char what[512]; /* the first criterion missed, where; or the figures when met */
	double min_cos;
	int64_t tol_bad, top1_bad, top1_rows;
	double max_abs;
} verdict;

static bool float_type(tbc_dtype t) { return t == TBC_DT_F32 || t == TBC_DT_F64; }

static double at(const tbc_tensor *t, int64_t i) {
	return t->dtype == TBC_DT_F32 ? (double)((const float *)t->data)[i] : ((const double *)t->data)[i];
}

static double cosine_of(const tbc_tensor *got, const tbc_tensor *want, bool *finite) {
	double dot = 0, ng = 0, nw = 0;
	*finite = true;
	for (int64_t i = 0; i < want->numel; i++) {
		double g = at(got, i), w = at(want, i);
		if (!isfinite(g) || !isfinite(w)) {
			*finite = false;
			return -INFINITY;
		}
		dot += g * w;
		ng += g * g;
		nw += w * w;
	}
	if (ng == 0 && nw == 0) return 1;
	if (ng == 0 || nw == 0) return 0;
	return dot / (sqrt(ng) * sqrt(nw));
}

/* Rows (every index but the last axis) whose argmax differs; NaN is never
 * the argmax of a row, so a row of the candidate with a NaN the reference
 * has not differs unless its largest finite element agrees. */
static int64_t top1_differs(const tbc_tensor *got, const tbc_tensor *want, int64_t *rows) {
	int64_t cols = want->rank ? want->dims[want->rank - 1] : 1;
	*rows = cols ? want->numel / cols : 0;
	int64_t bad = 0;
	for (int64_t r = 0; r < *rows; r++) {
		int64_t ag = -1, aw = -1;
		for (int64_t k = 0; k < cols; k++) {
			double g = at(got, r * cols + k), w = at(want, r * cols + k);
			if (!isnan(g) && (ag < 0 || g > at(got, r * cols + ag))) ag = k;
			if (!isnan(w) && (aw < 0 || w > at(want, r * cols + aw))) aw = k;
		}
		bool nan_g = false;
		for (int64_t k = 0; k < cols; k++) nan_g |= isnan(at(got, r * cols + k)) && !isnan(at(want, r * cols + k));
		if (ag != aw || nan_g) bad++;
	}
	return bad;
}

static void judge(const search *S, const outputs *got, verdict *v) {
	memset(v, 0, sizeof *v);
	v->min_cos = 1;
	v->met = true;
	const budget *b = &S->b;
	for (size_t s = 0; s < S->cal.n; s++)
		for (size_t k = 0; k < S->n_out; k++) {
			const tbc_tensor *g = got->t[s * S->n_out + k], *w = S->ref.t[s * S->n_out + k];
			const char *name = tbc_module_output_name(S->m, k), *set = S->cal.sets[s].name;
			tbc_compare_result cr;
			bool fl = float_type(w->dtype) && g->dtype == w->dtype && g->numel == w->numel;
			/* Non-float outputs (and any change of type or shape) must be exact. */
			tbc_tensor_compare(g, w, fl && b->tol ? b->rtol : 0, fl && b->tol ? b->atol : 0, &cr);
			bool exact_needed = !fl || b->tol;
			if (!cr.same_dtype || !cr.same_shape) {
				if (v->met)
					snprintf(v->what, sizeof v->what, "output '%s' changed its type or shape (set '%s')", name, set);
				v->met = false;
				continue;
			}
			if (exact_needed && cr.n_mismatched) {
				if (v->met || !v->tol_bad)
					snprintf(v->what, sizeof v->what,
						 "%" PRId64 " of %" PRId64 " elements of output '%s' outside %s (max abs diff %.3g; set '%s')",
						 cr.n_mismatched, w->numel, name,
						 fl ? "the budget's rtol/atol" : "exact equality (not a float output)",
						 cr.max_abs_diff, set);
				v->met = false;
				v->tol_bad += cr.n_mismatched;
			}
			if (fl && cr.max_abs_diff > v->max_abs) v->max_abs = cr.max_abs_diff;
			/* Whatever the budget: no inf or NaN where float32 has none. */
			int64_t nonfinite = 0;
			for (int64_t i = 0; fl && i < w->numel; i++) nonfinite += !isfinite(at(g, i)) && isfinite(at(w, i));
			if (nonfinite) {
				if (v->met)
					snprintf(v->what, sizeof v->what, "output '%s' is not finite (set '%s')", name, set);
				v->met = false;
			}
			if (fl && b->cos) {
				bool finite;
				double c = cosine_of(g, w, &finite);
				if (c < v->min_cos) v->min_cos = c;
				if (c < b->cosine) {
					if (v->met && finite)
						snprintf(v->what, sizeof v->what, "cosine %.6f < %g on output '%s' (set '%s')", c,
							 b->cosine, name, set);
					else if (v->met)
						snprintf(v->what, sizeof v->what, "output '%s' is not finite (set '%s')", name, set);
					v->met = false;
				}
			}
			if (fl && b->top1) {
				int64_t rows;
				int64_t bad = top1_differs(g, w, &rows);
				v->top1_rows += rows;
				if (bad) {
					if (v->met)
						snprintf(v->what, sizeof v->what,
							 "argmax differs in %" PRId64 " of %" PRId64 " rows of output '%s' (set '%s')", bad,
							 rows, name, set);
					v->met = false;
				}
				v->top1_bad += bad;
			}
		}
	if (v->met) {
		size_t n = 0;
		n += (size_t)snprintf(v->what + n, sizeof v->what - n, "max abs diff %.3g", v->max_abs);
		if (b->cos && n < sizeof v->what) n += (size_t)snprintf(v->what + n, sizeof v->what - n, ", min cosine %.6f", v->min_cos);
		if (b->top1 && n < sizeof v->what)
			snprintf(v->what + n, sizeof v->what - n, ", argmax agrees in %" PRId64 " of %" PRId64 " rows",
				 v->top1_rows - v->top1_bad, v->top1_rows);
	}
}

/* Measures the assignment that keeps the candidates marked in keep[]
 * (plus the user's exclusions) float32. */
static tbc_code try_keep(search *S, const bool *keep, verdict *v) {
	size_t len = (S->o->precision_exclude ? strlen(S->o->precision_exclude) : 0) + 2;
	for (size_t i = 0; i < S->c.n; i++) len += strlen(S->c.v[i].name) + 1;
	char *ex = malloc(len);
	if (!ex) return TBC_ERR_NO_MEMORY;
	size_t n = (size_t)snprintf(ex, len, "%s", S->o->precision_exclude ? S->o->precision_exclude : "");
	for (size_t i = 0; i < S->c.n; i++)
		if (keep[i]) n += (size_t)snprintf(ex + n, len - n, "%s%s", n ? "," : "", S->c.v[i].name);
	outputs got;
	tbc_code rc = run_with(S, S->o->precision, ex, &got);
	free(ex);
	if (rc != TBC_OK) return rc;
	judge(S, &got, v);
	outputs_free(&got);
	return TBC_OK;
}

/* ---- The search ---------------------------------------------------------------*/
typedef enum seg_state { SEG_UNKNOWN, SEG_GOOD, SEG_BAD } seg_state;
typedef struct segment {
	size_t begin, end;
	seg_state state;
} segment;

static const char *precision_name(int p) { return p == TBC_DT_BF16 ? "bf16" : p == TBC_DT_F8E4M3FN ? "fp8" : "fp16"; }

/* Bisection over the candidates.  keep[] ends as the answer. */
static tbc_code bisect(search *S, bool *keep, verdict *best, FILE *rep) {
	size_t n = S->c.n;
	segment *segs = calloc(2 * n + 2, sizeof *segs);
	bool *trial = calloc(n + 1, sizeof *trial);
	if (!segs || !trial) {
		free(segs);
		free(trial);
		return TBC_ERR_NO_MEMORY;
	}
	size_t n_segs = 0;
	/* The whole list failed already (lowering everything): split it. */
	if (n == 1) segs[n_segs++] = (segment){0, 1, SEG_BAD};
	else {
		segs[n_segs++] = (segment){0, n / 2, SEG_UNKNOWN};
		segs[n_segs++] = (segment){n / 2, n, SEG_UNKNOWN};
	}
	if (n == 1) {
		char buf[600];
		snprintf(buf, sizeof buf, "lowering it: %s", best->what);
		S->c.v[0].why = strdup(buf);
	}
	for (size_t i = 0; i < n; i++) keep[i] = true;
	tbc_code rc = TBC_OK;
	for (;;) {
		size_t pick = n_segs;
		for (size_t k = 0; k < n_segs; k++)
			if (segs[k].state == SEG_UNKNOWN &&
			    (pick == n_segs || segs[k].end - segs[k].begin > segs[pick].end - segs[pick].begin))
				pick = k;
		if (pick == n_segs) break;
		if (S->compiles >= S->max_compiles) break;
		for (size_t k = 0; k < n_segs; k++)
			for (size_t i = segs[k].begin; i < segs[k].end; i++) trial[i] = !(segs[k].state == SEG_GOOD || k == pick);
		verdict v;
		rc = try_keep(S, trial, &v);
		if (rc != TBC_OK) break;
		segment *sg = &segs[pick];
		size_t tried_begin = sg->begin, tried_end = sg->end;
		if (v.met) {
			sg->state = SEG_GOOD;
			memcpy(keep, trial, n * sizeof *keep);
			*best = v;
		} else if (sg->end - sg->begin == 1) {
			sg->state = SEG_BAD;
			char buf[600];
			snprintf(buf, sizeof buf, "lowering it: %s", v.what);
			S->c.v[sg->begin].why = strdup(buf);
		} else {
			size_t mid = sg->begin + (sg->end - sg->begin) / 2;
			segment right = {mid, sg->end, SEG_UNKNOWN};
			sg->end = mid;
			memmove(&segs[pick + 2], &segs[pick + 1], (n_segs - pick - 1) * sizeof *segs);
			segs[pick + 1] = right;
			n_segs++;
		}
		if (S->o->stats) {
			size_t before = 0;
			for (size_t i = 0; i < n; i++) before += !trial[i];
			before -= tried_end - tried_begin;
			fprintf(rep, "tbc: accuracy budget: compile %d: lowering '%s'%s%s%s (%zu node%s) beside %zu lowered: %s, %s\n",
				S->compiles, S->c.v[tried_begin].name, tried_end - tried_begin > 1 ? " .. '" : "",
				tried_end - tried_begin > 1 ? S->c.v[tried_end - 1].name : "", tried_end - tried_begin > 1 ? "'" : "",
				tried_end - tried_begin, tried_end - tried_begin == 1 ? "" : "s", before, v.met ? "met" : "missed",
				v.what);
		}
	}
	for (size_t k = 0; rc == TBC_OK && k < n_segs; k++)
		if (segs[k].state == SEG_UNKNOWN)
			for (size_t i = segs[k].begin; i < segs[k].end; i++) {
				char buf[200];
				snprintf(buf, sizeof buf, "undecided when the search's bound of %d compiles was reached", S->max_compiles);
				S->c.v[i].why = strdup(buf);
			}
	free(segs);
	free(trial);
	return rc;
}

static char *join_kept(const search *S) {
	size_t len = (S->o->precision_exclude ? strlen(S->o->precision_exclude) : 0) + 2;
	for (size_t i = 0; i < S->c.n; i++) len += strlen(S->c.v[i].name) + 1;
	char *ex = malloc(len);
	if (!ex) return NULL;
	size_t n = (size_t)snprintf(ex, len, "%s", S->o->precision_exclude ? S->o->precision_exclude : "");
	for (size_t i = 0; i < S->c.n; i++)
		if (S->c.v[i].kept) n += (size_t)snprintf(ex + n, len - n, "%s%s", n ? "," : "", S->c.v[i].name);
	return ex;
}

tbc_code tbc_precision_search(const tbc_module *m, const tbc_compile_options *o, tbc_diags *d, char **out_exclude) {
	*out_exclude = NULL;
	double t0 = tbc_seconds_now();
	if (!m || !o) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "no module or options");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	const char *path = m->path;
	if (o->precision != TBC_DT_F16 && o->precision != TBC_DT_BF16 && o->precision != TBC_DT_F8E4M3FN) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL,
			      "an accuracy budget needs a lower precision to search (--precision fp16, bf16 or fp8)");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	if (!o->calibrate || !*o->calibrate) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL,
			      "an accuracy budget needs calibration inputs (--calibrate DIR)");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	if (!o->keep_io_types) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, path, NULL, NULL, NULL,
			      "an accuracy budget compares with the float32 model at the same interface: it needs "
			      "--keep-io-types (the default)");
		return TBC_ERR_UNSUPPORTED;
	}
	if (o->train) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, path, NULL, NULL, NULL, "an accuracy budget is for models, not training steps");
		return TBC_ERR_UNSUPPORTED;
	}
	if (o->budget_max_compiles < 0 || o->budget_max_compiles > TBC_BUDGET_MAX_COMPILES_LIMIT) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL,
			      "the search's bound on compiles is from 3 to %d (0: %d), got %d", TBC_BUDGET_MAX_COMPILES_LIMIT,
			      TBC_BUDGET_DEFAULT_COMPILES, o->budget_max_compiles);
		return TBC_ERR_INVALID_ARGUMENT;
	}
	search S;
	memset(&S, 0, sizeof S);
	S.m = m;
	S.o = o;
	S.d = d;
	S.n_out = tbc_module_output_count(m);
	S.max_compiles = o->budget_max_compiles ? o->budget_max_compiles : TBC_BUDGET_DEFAULT_COMPILES;
	if (S.max_compiles < 3) S.max_compiles = 3; /* the reference, everything lowered, and one step */
	double cos;
	if (!parse_budget(o->accuracy_budget, &S.b.rtol, &S.b.atol, &cos, &S.b.top1, d)) return TBC_ERR_INVALID_ARGUMENT;
	S.b.tol = S.b.rtol >= 0;
	if (!S.b.tol) S.b.rtol = S.b.atol = 0;
	S.b.cos = cos > 0;
	S.b.cosine = cos;
	FILE *rep = o->stats_file ? o->stats_file : stderr;
	tbc_code rc = calib_load(m, o->calibrate, &S.cal, d) ? TBC_OK : tbc_diags_first_code(d);
	if (rc == TBC_OK && !list_candidates(m, o, &S.c, d)) rc = tbc_diags_first_code(d);
	if (rc == TBC_OK) rc = run_with(&S, TBC_DT_F32, o->precision_exclude, &S.ref);
	verdict v;
	memset(&v, 0, sizeof v);
	if (rc == TBC_OK) {
		/* The float32 model against itself: a budget it misses (its own
		 * output not finite, for a cosine) no assignment meets. */
		judge(&S, &S.ref, &v);
		if (!v.met) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL,
				      "no assignment can meet the accuracy budget '%s': the float32 model's own outputs miss "
				      "it: %s",
				      o->accuracy_budget, v.what);
			rc = TBC_ERR_INVALID_ARGUMENT;
		}
	}
	bool *keep = rc == TBC_OK ? calloc(S.c.n + 1, sizeof *keep) : NULL;
	if (rc == TBC_OK && !keep) rc = TBC_ERR_NO_MEMORY;
	if (rc == TBC_OK) {
		fprintf(rep, "tbc: accuracy budget '%s' for %s: %zu calibration set%s, %zu lowered node%s to search",
			o->accuracy_budget, precision_name(o->precision), S.cal.n, S.cal.n == 1 ? "" : "s", S.c.n,
			S.c.n == 1 ? "" : "s");
		if (S.c.n_unnamed) fprintf(rep, " (%zu more without a name stay lowered)", S.c.n_unnamed);
		fprintf(rep, "\n");
		rc = try_keep(&S, keep, &v); /* keep[] all false: everything lowered */
	}
	bool met = rc == TBC_OK && v.met;
	if (rc == TBC_OK) {
		fprintf(rep, "tbc: accuracy budget: %s everywhere the policy allows: %s%s\n", precision_name(o->precision),
			v.met ? "met, " : "missed, ", v.what);
		if (!v.met && S.c.n) {
			rc = bisect(&S, keep, &v, rep);
			met = rc == TBC_OK;
			/* No segment was lowered: the answer is every candidate float32,
			 * which differs from the reference only by the unnamed lowered
			 * ops (or the user's own choices); measure it. */
			bool any_lowered = false;
			for (size_t i = 0; i < S.c.n; i++) any_lowered |= !keep[i];
			if (rc == TBC_OK && !any_lowered) {
				if (S.c.n_unnamed) {
					rc = try_keep(&S, keep, &v);
					met = rc == TBC_OK && v.met;
				} else {
					judge(&S, &S.ref, &v); /* identical to the float32 model */
				}
			}
		}
		if (rc == TBC_OK && !met) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, path, NULL, NULL, NULL,
				      "no assignment can meet the accuracy budget '%s': with every lowered node that has a name "
				      "in float32 (%zu), the best reached is: %s; %zu lowered node%s without a name cannot be moved "
				      "back (name them in the model)",
				      o->accuracy_budget, S.c.n, v.what, S.c.n_unnamed, S.c.n_unnamed == 1 ? "" : "s");
			rc = TBC_ERR_INVALID_ARGUMENT;
		}
	}
	if (rc == TBC_OK) {
		size_t n_kept = 0;
		for (size_t i = 0; i < S.c.n; i++) {
			S.c.v[i].kept = keep[i];
			if (!keep[i]) continue;
			n_kept++;
			fprintf(rep, "tbc: kept in float32: '%s' (%s): %s\n", S.c.v[i].name, S.c.v[i].op_type,
				S.c.v[i].why ? S.c.v[i].why : "in a segment that broke the budget");
		}
		fprintf(rep, "tbc: accuracy budget met with %zu of %zu lowered nodes kept in float32: %s\n", n_kept, S.c.n,
			v.what);
		double secs = tbc_seconds_now() - t0;
		if (o->stats)
			fprintf(rep, "tbc: accuracy budget search: %d compiles (bound %d), %zu runs each, %.3f s\n", S.compiles,
				S.max_compiles, S.cal.n, secs);
		if (o->stats_out) {
			o->stats_out->budget_compiles = S.compiles;
			o->stats_out->budget_seconds = secs;
			o->stats_out->budget_kept = (int)n_kept;
		}
		*out_exclude = join_kept(&S);
		if (!*out_exclude) rc = TBC_ERR_NO_MEMORY;
	}
	free(keep);
	cands_free(&S.c);
	outputs_free(&S.ref);
	calib_free(&S.cal);
	return rc;
}
