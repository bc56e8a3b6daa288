/* The pass pipeline: the passes in the order they run, top to bottom, with
 * the verifier after each one (when asked) and the IR text dumped after the
 * one named by --dump-after.  Also the table of passes by name.
 *
 * Order and why:
 *   decompose composite ops into lowered ops, at every level: lowering needs it;
 *   qdq_fusion (when asked, passes/qdq_fusion.c) DequantizeLinear -> Conv ->
 *            QuantizeLinear into QLinearConv, before fold turns the weights'
 *            DequantizeLinear into float constants;
 *   fold     constants first, so shapes sharpen before anything looks at them;
 *   simplify algebraic rewrites over what folding made constant (a
 *            BatchNormalization into the Conv before it);
 *   precision (when asked, passes/precision.c) float32 to float16/bfloat16,
 *            then fold again: casts of weights become lowered weights;
 *   cse      merges what folding made equal (and duplicate weights);
 *   dce      removes what folding and merging left unread;
 *   fusion   groups what is left into loop nests;
 *   remat    (with a memory budget, passes/remat.c) recomputes values instead
 *            of keeping them, on fused groups as lowering will see them;
 *   memplan  last: it places the values that remain, fused groups included.
 * At -O0 only decomposition and memory planning run (and remat, asked for):
 * code generation needs both, and an unoptimized build should otherwise show
 * the graph as imported. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "ir/clock.h"

const tbc_pass_info tbc_pass_table[] = {
	{"decompose", tbc_pass_decompose, "rewrite composite ops (Attention, RotaryEmbedding, losses) into lowered ops"},
	{"fold", tbc_pass_fold, "evaluate ops whose inputs are constants; Shape/Size of static shapes"},
	{"simplify", tbc_pass_simplify, "algebraic rewrites: an inference BatchNormalization into the Conv it reads"},
	{"cse", tbc_pass_cse, "merge equal constants and equal ops"},
	{"dce", tbc_pass_dce, "remove ops and constants nobody reads"},
	{"fusion", tbc_pass_fusion, "group elementwise chains and reductions into Fused ops"},
	{"memplan", tbc_pass_memplan, "place intermediates in one arena"},
	{"qdq_fusion", tbc_pass_qdq_fusion, "(--qdq-fusion) DequantizeLinear -> Conv/MatMul -> QuantizeLinear into QLinearConv/QLinearMatMul"},
};
const int tbc_pass_count = (int)(sizeof tbc_pass_table / sizeof *tbc_pass_table);

const tbc_pass_info *tbc_pass_find(const char *name) {
	for (int i = 0; i < tbc_pass_count; i++)
		if (!strcmp(tbc_pass_table[i].name, name)) return &tbc_pass_table[i];
	return NULL;
}

tbc_pipeline_options tbc_pipeline_defaults(void) {
	tbc_pipeline_options o = {0};
	o.opt_level = 2;
#ifndef NDEBUG
	o.verify = true;
#endif
	return o;
}

typedef struct runner {
	tbc_module *m;
	const tbc_pipeline_options *opt;
	tbc_diags *d;
} runner;

static bool dump(const runner *R, const char *pass) {
	const char *want = R->opt->dump_after;
	if (!want || (strcmp(want, "all") && strcmp(want, pass))) return true;
	char *text = R->opt->dump_max_const_bytes ? tbc_print_abridged(R->m, R->opt->dump_max_const_bytes)
						  : tbc_print(R->m);
	if (!text) {
		tbc_diags_add(R->d, TBC_ERR_NO_MEMORY, R->m->path, NULL, NULL, NULL, "out of memory printing the IR");
		return false;
	}
	FILE *f = R->opt->dump_file ? R->opt->dump_file : stderr;
	fprintf(f, "# ---- IR after %s ----\n%s", pass, text);
	free(text);
	return true;
}

/* After a pass that started at t0 and returned ok: its time, the verifier,
 * the dump. */
static bool finish(const runner *R, const char *name, double t0, bool ok) {
	tbc_pipeline_stats *st = R->opt->stats;
	if (st && st->n_passes < TBC_PIPELINE_MAX_PASSES) {
		st->passes[st->n_passes].name = name;
		st->passes[st->n_passes++].seconds = tbc_seconds_now() - t0;
	}
	if (!ok) return false;
	if (R->opt->verify && !tbc_verify(R->m, R->d)) {
		tbc_diags_add(R->d, TBC_ERR_INTERNAL, R->m->path, NULL, NULL, NULL,
			      "the IR does not verify after pass '%s' (bug in tbc)", name);
		return false;
	}
	return dump(R, name);
}

static bool run(const runner *R, const char *name, tbc_pass_fn pass) {
	double t0 = tbc_seconds_now();
	return finish(R, name, t0, pass(R->m, R->d));
}

bool tbc_run_pipeline(tbc_module *m, const tbc_pipeline_options *opt, tbc_diags *d) {
	tbc_pipeline_options defaults = tbc_pipeline_defaults();
	if (!opt) opt = &defaults;
	if (opt->dump_after && strcmp(opt->dump_after, "all") && !tbc_pass_find(opt->dump_after) &&
	    strcmp(opt->dump_after, "precision") && strcmp(opt->dump_after, "remat")) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL,
			      "--dump-after: no pass is named '%s'", opt->dump_after);
		return false;
	}
	const runner R = {m, opt, d};
	if (opt->verify && !tbc_verify(m, d)) return false;

	if (!run(&R, "decompose", tbc_pass_decompose)) return false; /* every level: needed to lower */
	if (opt->qdq_fusion && !run(&R, "qdq_fusion", tbc_pass_qdq_fusion)) return false;
	if (opt->opt_level >= 1) {
		if (!run(&R, "fold", tbc_pass_fold)) return false;
		if (!run(&R, "simplify", tbc_pass_simplify)) return false;
	}
	/* Asked for, at any level: after simplify (a BatchNormalization already
	 * in its Conv), and folded after, so the weights are stored lowered. */
	const tbc_precision_options *po = opt->precision;
	if (po && po->low != TBC_DT_F32 && po->low != TBC_DT_UNDEFINED) {
		double t0 = tbc_seconds_now();
		bool ok = tbc_pass_precision(m, po, opt->stats ? &opt->stats->precision : NULL, d);
		if (!finish(&R, "precision", t0, ok)) return false;
		if (!run(&R, "fold", tbc_pass_fold)) return false;
	}
	if (opt->opt_level >= 1) {
		if (!run(&R, "cse", tbc_pass_cse)) return false;
		if (!run(&R, "dce", tbc_pass_dce)) return false;
		if (!run(&R, "fusion", tbc_pass_fusion)) return false;
	}
	if (opt->remat) {
		double t0 = tbc_seconds_now();
		bool ok = tbc_pass_remat(m, opt->remat, opt->stats ? &opt->stats->remat : NULL, d);
		if (!finish(&R, "remat", t0, ok)) return false;
	}
	if (!run(&R, "memplan", tbc_pass_memplan)) return false;
	return !opt->stats || tbc_memplan_measure(m, &opt->stats->memplan, d);
}
