/* The graph passes and the pipeline that runs them (docs/passes.md).
 *
 * Every pass takes a verified, shape-inferred module and leaves one that
 * verifies.  A pass reports only what is a bug in tbc or out of memory; an
 * op it cannot improve it leaves as it is. */
#ifndef TBC_PASSES_PASSES_H
#define TBC_PASSES_PASSES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"

/* ---- The passes ----------------------------------------------------------- */
bool tbc_pass_decompose(tbc_module *m, tbc_diags *d); /* passes/decompose.c */
bool tbc_pass_fold(tbc_module *m, tbc_diags *d);    /* passes/fold.c */
bool tbc_pass_simplify(tbc_module *m, tbc_diags *d); /* passes/simplify.c */
bool tbc_pass_cse(tbc_module *m, tbc_diags *d);     /* passes/cse.c */
bool tbc_pass_dce(tbc_module *m, tbc_diags *d);     /* passes/dce.c */
bool tbc_pass_fusion(tbc_module *m, tbc_diags *d);  /* passes/fusion.c */
bool tbc_pass_memplan(tbc_module *m, tbc_diags *d); /* passes/memplan.c */
/* Opt-in (tbc_pipeline_options.qdq_fusion): DequantizeLinear -> Conv /
 * MatMul -> QuantizeLinear into QLinearConv / QLinearMatMul, as
 * onnxruntime's graph optimizer does (not the model's float meaning bit
 * for bit: passes/qdq_fusion.c). */
bool tbc_pass_qdq_fusion(tbc_module *m, tbc_diags *d);

/* Precision lowering (passes/precision.c, docs/precision.md): float32
 * computation moved to `low` where the policy allows, with Casts at the
 * boundaries; run before folding, which turns casts of weights into weights
 * of the low type. */
typedef struct tbc_precision_options {
	tbc_dtype low;          /* TBC_DT_F16, TBC_DT_BF16, or TBC_DT_F8E4M3FN (weights only); F32 or UNDEFINED: nothing to do */
	bool keep_io_types;     /* float32 inputs and outputs stay float32 */
	const char *exclude;    /* comma list of op types and node names kept in float32 */
	/* Non-NULL: called with each op the pass moves to the low type (the
	 * accuracy budget's search, codegen/budget.c, lists its candidates so). */
	void (*on_lowered)(void *user, const tbc_op *op);
	void *on_lowered_user;
} tbc_precision_options;
typedef struct tbc_precision_stats {
	int ops_lowered;        /* ops that compute in the low type */
	int casts_inserted;
	int weights_e5m2;       /* fp8: weights stored as e5m2 (closer than e4m3), the others e4m3 */
} tbc_precision_stats;
bool tbc_pass_precision(tbc_module *m, const tbc_precision_options *o, tbc_precision_stats *st, tbc_diags *d);

/* Reverse-mode differentiation (passes/autodiff.c, docs/training.md):
 * appends to the main graph the ops computing the gradient of `loss` (a
 * float value of one element) by each of wrt[0..n_wrt) (float initializers
 * or inputs of the main graph); grads[i] receives wrt[i]'s gradient, a value
 * of its type (zeros when the loss does not depend on it).  Not a pipeline
 * pass: the training step (tbc_train_build) calls it before the pipeline.
 * An op on the way without a rule (ops.def's grad column) is an
 * UNSUPPORTED error naming it; on failure the module is as it was. */
bool tbc_autodiff(tbc_module *m, tbc_value *loss, int n_wrt, tbc_value *const *wrt, tbc_value **grads, tbc_diags *d);
bool tbc_autodiff_has_rule(tbc_opcode code);
/* Turns the main graph into a training step (passes/train.c): loss,
 * backward graph, optimizer update; sets m->state.  false with diagnostics
 * naming what is wrong (the module is then not to be used). */
bool tbc_train_build(tbc_module *m, const tbc_train_options *o, tbc_diags *d);

/* Folding leaves results of at most this many bytes as constants without
 * asking more; up to TBC_FOLD_MAX_BYTES only when the result is no larger
 * than the constants it reads (weights never grow). */
#define TBC_FOLD_SMALL_BYTES ((int64_t)64 << 10)
#define TBC_FOLD_MAX_BYTES ((int64_t)64 << 20)

/* ---- Memory planning (passes/memplan.c) -----------------------------------
 * The arena is a row of parts.  Part 0 holds values of static shape; each
 * further part holds the values whose size is a static number of bytes times
 * one product of symbols (batch N: the part "N"; N and T: "N*T").  A part's
 * size is `bytes` times its product; part k starts where part k-1 ends.  A
 * value's mem_offset is its offset inside its part, in bytes per unit of the
 * product (for part 0, plain bytes), so with every symbol's run-time value
 *   address = arena + sum over parts j < k of bytes_j * product_j
 *                   + mem_offset * product_k.
 * Offsets and part sizes are multiples of 64, so every address is 64-byte
 * aligned whatever the symbols are.  Values whose size depends on a symbol
 * no model input carries (computed while running: NonZero's count) have no
 * place (mem_offset -1): code generation allocates them at run time. */
#define TBC_ARENA_ALIGN 64

typedef struct tbc_memplan_part {
	int n_syms;                      /* 0 for part 0 */
	const char *syms[TBC_MAX_RANK];  /* sorted by name; a symbol may repeat */
	int64_t bytes;                   /* per unit of the product of syms */
} tbc_memplan_part;

/* The parts of the plan m holds, in order; returns how many (<= max, more
 * are not written; part 0 is always there). */
int tbc_memplan_layout(const tbc_module *m, tbc_memplan_part *out, int max);
/* Index of v's part in that layout; -1 when v has no place. */
int tbc_memplan_part_of(const tbc_memplan_part *parts, int n_parts, const tbc_value *v);

typedef struct tbc_memplan_stats {
	/* Bytes, with every symbol set to 1 (batch 1). */
	int64_t arena_bytes;  /* size of the arena the plan needs */
	int64_t lower_bound;  /* largest sum of bytes of values live at one op (in-place pairs once) */
	int64_t total_bytes;  /* sum of the bytes of all placed values: the memory without reuse */
	int64_t n_placed;     /* values given an offset */
	int64_t n_in_place;   /* of those, sharing their input's memory */
	int64_t n_unplaced;   /* intermediates left out: size known only while running */
	int n_parts;
} tbc_memplan_stats;

/* The figures of the plan the module holds (after tbc_pass_memplan). */
bool tbc_memplan_measure(const tbc_module *m, tbc_memplan_stats *out, tbc_diags *d);
/* Checks a plan: offsets aligned, inside their part, and no two values of
 * one part live at the same op overlap (except an op's output written in
 * place over an input that dies there).  Part sizes come from
 * tbc_memplan_layout. */
bool tbc_memplan_check(const tbc_module *m, tbc_diags *d);
/* Bytes the plan of m needs with every symbol set to 1. */
int64_t tbc_memplan_arena_bytes(const tbc_module *m);

/* The liveness of m as memory planning sees it before placing anything
 * (its analysis and its in-place choices, passes/memplan.c), bytes with
 * every symbol 1: the ops of the main graph by position; by value id, the
 * first and last op of each value planning places (-1 for others), its
 * aligned bytes and its buffer (an in-place result shares its input's);
 * live[p] the bytes of the buffers live at op p and peak their largest.
 * Placement can only need more than peak (fragmentation), never less.
 * op_bound: the largest sum over one op of its placed inputs and results,
 * which no schedule or recomputation can go below. */
typedef struct tbc_memplan_profile {
	int n_ops;
	tbc_op **ops;
	int64_t *live;
	int64_t peak, op_bound;
	uint32_t n_values;
	int *start, *end, *buf;
	int64_t *bytes;
} tbc_memplan_profile;
bool tbc_memplan_profile_make(const tbc_module *m, tbc_memplan_profile *out); /* false: out of memory */
/* Does memory planning place op's result in its input's buffer (a view:
 * Identity, Reshape, Flatten, Squeeze, Unsqueeze)? */
bool tbc_memplan_is_view(const tbc_op *op);
void tbc_memplan_profile_free(tbc_memplan_profile *p);

/* Estimated floating-point operations of one op (a Fused op: its body)
 * and of the main graph's ops (passes/cost.c); symbols count 1. */
double tbc_op_flops(const tbc_op *op);
double tbc_module_flops(const tbc_module *m);

/* ---- Rematerialization under a memory budget (passes/remat.c) -------------
 * Recomputes values instead of keeping them alive until memory planning's
 * arena (symbols 1) fits budget_bytes, or, when that is 0, budget_percent
 * of the arena without recomputation.  Leaves a plan in place (it runs
 * memory planning).  A budget it cannot reach is an INVALID_ARGUMENT error
 * naming --memory-budget and the smallest arena it reached (the module
 * then holds its last plan). */
typedef struct tbc_remat_options {
	int64_t budget_bytes;  /* > 0: the budget in bytes */
	double budget_percent; /* used when budget_bytes is 0: (0, 100] */
} tbc_remat_options;
typedef struct tbc_remat_stats {
	int64_t arena_before, arena_after; /* memory planning's arena without and with recomputation */
	int64_t budget;                    /* in bytes */
	double recompute_flops;            /* the ops added, by tbc_op_flops */
	int ops_cloned, values_recomputed;
} tbc_remat_stats;
bool tbc_pass_remat(tbc_module *m, const tbc_remat_options *o, tbc_remat_stats *st, tbc_diags *d);

/* ---- Registry: passes by name (golden tests, --dump-after) ----------------- */
typedef bool (*tbc_pass_fn)(tbc_module *m, tbc_diags *d);
typedef struct tbc_pass_info {
	const char *name;
	tbc_pass_fn run;
	const char *what; /* one line, for --help */
} tbc_pass_info;

extern const tbc_pass_info tbc_pass_table[];
extern const int tbc_pass_count;
const tbc_pass_info *tbc_pass_find(const char *name);

/* ---- Pipeline (passes/pipeline.c) ----------------------------------------- */
#define TBC_PIPELINE_MAX_PASSES 16

typedef struct tbc_pipeline_stats {
	int n_passes;
	struct {
		const char *name;
		double seconds;
	} passes[TBC_PIPELINE_MAX_PASSES];
	tbc_memplan_stats memplan;
	tbc_precision_stats precision;
	tbc_remat_stats remat;
} tbc_pipeline_stats;

typedef struct tbc_pipeline_options {
	int opt_level;          /* 0: only what code generation needs; 1..3: all passes */
	bool verify;            /* run the verifier after every pass */
	const char *dump_after; /* a pass name, "all", or NULL */
	FILE *dump_file;        /* where dumps go; NULL: stderr */
	size_t dump_max_const_bytes; /* 0: print constants whole (parses back); else abridge */
	tbc_pipeline_stats *stats; /* NULL: not recorded */
	const tbc_precision_options *precision; /* NULL: the model's own precision */
	const tbc_remat_options *remat; /* NULL: no memory budget (no recomputation) */
	bool qdq_fusion;        /* run tbc_pass_qdq_fusion after decompose (any level) */
} tbc_pipeline_options;

/* Defaults: -O2, verify in debug builds (no NDEBUG), no dump, no stats. */
tbc_pipeline_options tbc_pipeline_defaults(void);
/* Runs the passes in order; false with diagnostics when one fails. */
bool tbc_run_pipeline(tbc_module *m, const tbc_pipeline_options *opt, tbc_diags *d);

#endif
