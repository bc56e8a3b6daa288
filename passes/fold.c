/* Constant folding.
 *
 * Does: evaluates every op whose inputs are all constants with the reference
 * interpreter's kernel (tbc_ops[code].interp) and replaces its results by
 * constants; folds Shape and Size of values whose shape is static (for
 * Shape, static within [start, end)) without reading the data.  Ops that
 * read a folded value are inferred again in the same walk, so a Reshape
 * whose shape became constant gets its static type, and so on down.
 * Requires: a verified, inferred module.
 * Guarantees: results are bit-identical to what the interpreter computes at
 * run time.  Not folded: ops with subgraphs, ops with effects (Dropout in
 * training mode), ops whose kernel reports an error (they fail at run time
 * as before), and results over TBC_FOLD_SMALL_BYTES that would be larger
 * than the constants they read, or over TBC_FOLD_MAX_BYTES at all, so
 * weights do not balloon (an Expand of a scalar stays an Expand).  A
 * constant result keeps the name of the value it replaces. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

typedef struct folder {
	tbc_module *m;
	tbc_diags *d;
	pass_bits changed; /* values whose type changed, or that became constants */
	bool any_changed;
	bool oom;
} folder;

static bool is_fresh_dim(const char *sym) {
	if (strncmp(sym, "_d", 2) || !sym[2]) return false;
	for (const char *p = sym + 2; *p; p++)
		if (*p < '0' || *p > '9') return false;
	return true;
}

/* The type re-inference gave, merged with what was known before: a static
 * dim wins; a fresh name made again by inference keeps the old name, which
 * later ops already use. */
static void merge_type(const tbc_type *old, tbc_type *now) {
	if (now->rank < 0) {
		*now = *old;
		return;
	}
	if (old->rank != now->rank) return;
	for (int i = 0; i < now->rank; i++) {
		tbc_dim o = old->dims[i], *n = &now->dims[i];
		if (!n->sym) continue;
		if (!o.sym || is_fresh_dim(n->sym)) *n = o;
	}
}

static void mark(folder *F, const tbc_value *v) {
	if (!pass_bits_set(&F->changed, v->id)) F->oom = true;
	F->any_changed = true;
}

static bool reads_changed(folder *F, const tbc_op *op) {
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && pass_bits_get(&F->changed, op->inputs[i]->id)) return true;
	return pass_has_graph_attr(op) && F->any_changed;
}

/* Whether some result of op has no rank yet: inference with static ranks
 * (below) may give it one. */
static bool unknown_rank(const tbc_op *op) {
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && op->outputs[i]->type.rank < 0) return true;
	return false;
}

/* Infers op again because an input changed; marks outputs whose type moved.
 * The rules run as compiled code needs them (static_ranks): this pipeline
 * compiles. */
static bool reinfer(folder *F, tbc_op *op) {
	tbc_type old[64];
	int n = op->n_outputs < 64 ? op->n_outputs : 64;
	for (int i = 0; i < n; i++)
		if (op->outputs[i]) old[i] = op->outputs[i]->type;
	tbc_infer cx = {.module = F->m, .diags = F->d, .static_ranks = true};
	if (!tbc_infer_op(&cx, op)) return false;
	for (int i = 0; i < n; i++) {
		tbc_value *v = op->outputs[i];
		if (!v) continue;
		merge_type(&old[i], &v->type);
		if (!pass_same_type(&old[i], &v->type)) mark(F, v);
	}
	return true;
}

/* Replaces op's result i by the constant t (copied into the arena). */
static bool replace_by_const(folder *F, tbc_op *op, int i, const tbc_tensor *t) {
	tbc_value *v = op->outputs[i];
	tbc_value *c = tbc_graph_add_const(op->graph, v->name, t);
	if (!c) {
		tbc_diags_op(F->d, TBC_ERR_NO_MEMORY, op, "out of memory");
		return false;
	}
	pass_replace_value(F->m, v, c);
	mark(F, c);
	return true;
}

/* Shape(x) when the dims it returns are static; Size(x) when x's are. */
static int fold_shape_size(folder *F, tbc_op *op) {
	const tbc_type *t = &op->inputs[0]->type;
	if (t->rank < 0) return 0;
	int64_t dims[TBC_MAX_RANK];
	int n = 0;
	if (op->code == TBC_OP_Size) {
		int64_t numel = tbc_type_numel(t);
		if (numel < 0) return 0;
		dims[n++] = numel;
	} else {
		int64_t start = tbc_attr_int(op, "start", 0), end = tbc_attr_int(op, "end", t->rank);
		if (start < 0) start += t->rank;
		if (end < 0) end += t->rank;
		start = start < 0 ? 0 : start > t->rank ? t->rank : start;
		end = end < 0 ? 0 : end > t->rank ? t->rank : end;
		for (int64_t k = start; k < end; k++) {
			if (t->dims[k].sym) return 0;
			dims[n++] = t->dims[k].size;
		}
	}
	int64_t len = n;
	tbc_tensor *r = op->code == TBC_OP_Size ? tbc_tensor_create(TBC_DT_I64, 0, NULL)
						: tbc_tensor_create(TBC_DT_I64, 1, &len);
	if (!r) {
		tbc_diags_op(F->d, TBC_ERR_NO_MEMORY, op, "out of memory");
		return -1;
	}
	memcpy(r->data, dims, (size_t)n * sizeof *dims);
	bool ok = replace_by_const(F, op, 0, r);
	tbc_tensor_destroy(r);
	return ok ? 1 : -1;
}

static int64_t tensor_bytes(const tbc_tensor *t) {
	return t->numel * (int64_t)tbc_dtype_size(t->dtype);
}

static bool size_ok(int64_t out_bytes, int64_t in_bytes) {
	return out_bytes <= TBC_FOLD_SMALL_BYTES || (out_bytes <= in_bytes && out_bytes <= TBC_FOLD_MAX_BYTES);
}

/* Folds op if it can: 1 folded, 0 left alone, -1 error. */
static int try_fold(folder *F, tbc_op *op) {
	if (pass_has_graph_attr(op) || pass_has_effects(op) || op->n_inputs == 0) return 0;
	if ((op->code == TBC_OP_Shape || op->code == TBC_OP_Size) && op->inputs[0]->kind != TBC_VALUE_CONST)
		return fold_shape_size(F, op);
	int64_t in_bytes = 0;
	for (int i = 0; i < op->n_inputs; i++) {
		if (!op->inputs[i]) continue;
		if (op->inputs[i]->kind != TBC_VALUE_CONST) return 0;
		in_bytes += tensor_bytes(op->inputs[i]->constant);
	}
	/* Refuse before computing when the inferred types already say too much. */
	int64_t out_bytes = 0;
	for (int i = 0; i < op->n_outputs; i++) {
		if (!op->outputs[i]) continue;
		int64_t b = pass_value_bytes(op->outputs[i]);
		if (b < 0 && in_bytes > TBC_FOLD_MAX_BYTES) return 0;
		if (b > 0) out_bytes += b;
	}
	if (!size_ok(out_bytes, in_bytes)) return 0;

	const tbc_tensor *args[256];
	tbc_tensor *res[256];
	if (op->n_inputs > 256 || op->n_outputs > 256) return 0;
	for (int i = 0; i < op->n_inputs; i++) args[i] = op->inputs[i] ? op->inputs[i]->constant : NULL;
	for (int i = 0; i < op->n_outputs; i++) res[i] = NULL;
	/* A kernel's complaint is not the compiler's: the op stays and reports
	 * at run time, so its diagnostics go to a scratch list. */
	tbc_diags *scratch = tbc_diags_create();
	if (!scratch) return -1;
	tbc_interp ip = {.module = F->m, .diags = scratch};
	int rc = tbc_ops[op->code].interp(&ip, op, args, res);
	tbc_diags_destroy(scratch);
	bool fold = rc == 0;
	out_bytes = 0;
	for (int i = 0; fold && i < op->n_outputs; i++) {
		if (!op->outputs[i]) continue;
		const tbc_type *ty = &op->outputs[i]->type;
		/* A result that contradicts the inferred type is left to the
		 * interpreter's own check to report at run time. */
		if (!res[i] || res[i]->dtype != ty->dtype || (ty->rank >= 0 && res[i]->rank != ty->rank)) fold = false;
		for (int k = 0; fold && ty->rank >= 0 && k < ty->rank; k++)
			if (!ty->dims[k].sym && ty->dims[k].size != res[i]->dims[k]) fold = false;
		if (fold) out_bytes += tensor_bytes(res[i]);
	}
	if (fold && !size_ok(out_bytes, in_bytes)) fold = false;
	int result = 0;
	if (fold) {
		result = 1;
		for (int i = 0; i < op->n_outputs && result == 1; i++)
			if (op->outputs[i] && !replace_by_const(F, op, i, res[i])) result = -1;
	}
	for (int i = 0; i < op->n_outputs; i++) tbc_tensor_destroy(res[i]);
	return result;
}

/* ---- If ----------------------------------------------------------------------*/
static bool oom_at(folder *F, const tbc_op *op) {
	tbc_diags_op(F->d, TBC_ERR_NO_MEMORY, op, "out of memory");
	return false;
}

/* Moves op from its graph to just before `before` (in another graph), with
 * the values it defines and the subgraphs it holds. */
static void move_op(tbc_op *op, tbc_op *before) {
	pass_unlink(op);
	pass_insert_before(op, before);
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i]) op->outputs[i]->graph = before->graph;
	for (int a = 0; a < op->n_attrs; a++) {
		tbc_attr *at = &op->attrs[a];
		int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
		for (int k = 0; k < n; k++) at->graphs[k]->parent = before->graph;
	}
}

/* An If whose condition is a constant is its taken branch: the branch's
 * constants become the enclosing graph's, its ops move in front of the If,
 * and the If's results become the branch's.  A result that some graph
 * returns (its name is the model's) or that the branch only passes through
 * (a value from outside) gets an Identity under the If's result name.
 * *resume is the first op the walk should look at next. */
static bool inline_if(folder *F, tbc_op *op, tbc_op **resume) {
	const tbc_tensor *ct = tbc_input_const(op, 0);
	tbc_graph *g = op->graph, *taken = tbc_attr_graph(op, tbc_load_i64(ct->dtype, ct->data, 0) ? "then_branch" : "else_branch");
	for (int i = 0; i < taken->n_consts; i++) {
		tbc_value *c = taken->consts[i];
		tbc_value *nc = tbc_graph_add_const_shared(g, c->name, c->constant);
		if (!nc) return oom_at(F, op);
		pass_replace_value(F->m, c, nc);
	}
	taken->n_consts = 0;
	bool inner[256];
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *b = taken->outputs[i];
		inner[i] = b->kind == TBC_VALUE_RESULT && b->graph == taken;
	}
	tbc_op *first = NULL;
	while (taken->first) {
		tbc_op *o = taken->first;
		move_op(o, op);
		if (!first) first = o;
	}
	for (int i = 0; i < op->n_outputs; i++) {
		tbc_value *v = op->outputs[i], *b = taken->outputs[i];
		if (!v) continue;
		tbc_value *r = b;
		if (b->kind == TBC_VALUE_CONST) {
			r = tbc_graph_add_const_shared(g, v->name, b->constant);
		} else if (!inner[i] || pass_is_returned(F->m, v)) {
			tbc_op *id = tbc_op_new(g, TBC_OP_Identity, op->name, 1, &b, 1);
			if (id) {
				move_op(id, op);
				id->outputs[0]->name = v->name;
				id->outputs[0]->type = b->type;
				if (!first) first = id;
				r = id->outputs[0];
			} else {
				r = NULL;
			}
		}
		if (!r) return oom_at(F, op);
		pass_replace_value(F->m, v, r);
		mark(F, r);
	}
	*resume = first ? first : op->next;
	pass_remove_op(op);
	return true;
}

/* Whether op's inputs broadcast multidirectionally (numpy) into its result. */
static bool numpy_broadcasts(const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_Add: case TBC_OP_Sub: case TBC_OP_Mul: case TBC_OP_Div: case TBC_OP_Pow: case TBC_OP_Mod:
	case TBC_OP_BitShift: case TBC_OP_BitwiseAnd: case TBC_OP_BitwiseOr: case TBC_OP_BitwiseXor:
	case TBC_OP_And: case TBC_OP_Or: case TBC_OP_Xor: case TBC_OP_Equal: case TBC_OP_Greater:
	case TBC_OP_GreaterOrEqual: case TBC_OP_Less: case TBC_OP_LessOrEqual: case TBC_OP_Max: case TBC_OP_Min:
	case TBC_OP_Mean: case TBC_OP_Sum: case TBC_OP_Where: return true;
	default: return false;
	}
}

/* Uses of an If result whose branches give ranks r < R, where the one of
 * rank r can take R - r leading unit dims without changing anything: every
 * reader is a broadcasting elementwise op with another operand of rank >= R
 * (the result's rank is then R either way, and broadcasting adds the unit
 * dims itself) or reads only its dtype (CastLike's target), and no graph
 * returns it. */
static bool pads_safely(folder *F, const tbc_value *v, int R) {
	if (!v->uses || pass_is_returned(F->m, v)) return false;
	for (const tbc_use *u = v->uses; u; u = u->next) {
		const tbc_op *o = u->op;
		if (o->code == TBC_OP_CastLike && u->index == 1) continue;
		if (!numpy_broadcasts(o)) return false;
		bool wide = false;
		for (int k = 0; k < o->n_inputs; k++)
			if (k != u->index && o->inputs[k] && o->inputs[k] != v && o->inputs[k]->type.rank >= R) wide = true;
		if (!wide) return false;
	}
	return true;
}

/* An If with a run-time condition whose branches give one result ranks that
 * differ, where that is safe (pads_safely): the lower-ranked branch
 * unsqueezes its result at the front, so the result has one rank and the
 * code after it can be compiled (compiled code needs every rank). */
static bool unify_if_ranks(folder *F, tbc_op *op) {
	bool changed = false;
	for (int i = 0; i < op->n_outputs; i++) {
		tbc_value *v = op->outputs[i];
		if (!v || v->type.rank >= 0) continue;
		tbc_graph *br[2] = {tbc_attr_graph(op, "then_branch"), tbc_attr_graph(op, "else_branch")};
		int r0 = br[0]->outputs[i]->type.rank, r1 = br[1]->outputs[i]->type.rank;
		if (r0 < 0 || r1 < 0 || r0 == r1) continue;
		int R = r0 > r1 ? r0 : r1;
		if (!pads_safely(F, v, R)) continue;
		tbc_graph *low = br[r0 < r1 ? 0 : 1];
		tbc_value *x = low->outputs[i];
		int64_t n = R - x->type.rank, axes[TBC_MAX_RANK];
		for (int k = 0; k < n; k++) axes[k] = k;
		tbc_tensor *t = tbc_tensor_create(TBC_DT_I64, 1, &n);
		if (!t) return oom_at(F, op);
		memcpy(t->data, axes, (size_t)n * sizeof *axes);
		tbc_value *c = tbc_graph_add_const(low, NULL, t);
		tbc_tensor_destroy(t);
		tbc_value *in[2] = {x, c};
		tbc_op *u = c ? tbc_op_new(low, TBC_OP_Unsqueeze, op->name, 2, in, 1) : NULL;
		if (!u) return oom_at(F, op);
		tbc_infer cx = {.module = F->m, .diags = F->d, .static_ranks = true};
		if (!tbc_infer_op(&cx, u)) return false;
		low->outputs[i] = u->outputs[0];
		changed = true;
	}
	return !changed || reinfer(F, op);
}

static bool fold_graph(folder *F, tbc_graph *g) {
	for (tbc_op *op = g->first, *next; op; op = next) {
		next = op->next;
		if (op->code == TBC_OP_If && op->n_outputs <= 256) {
			const tbc_tensor *ct = tbc_input_const(op, 0);
			if (ct && ct->numel == 1) {
				if (!inline_if(F, op, &next)) return false;
				continue;
			}
		}
		for (int a = 0; a < op->n_attrs; a++) {
			tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++)
				if (!fold_graph(F, at->graphs[k])) return false;
		}
		if ((reads_changed(F, op) || unknown_rank(op)) && !reinfer(F, op)) return false;
		if (op->code == TBC_OP_If && !unify_if_ranks(F, op)) return false;
		int r = try_fold(F, op);
		if (r < 0 || F->oom) {
			if (F->oom) tbc_diags_op(F->d, TBC_ERR_NO_MEMORY, op, "out of memory");
			return false;
		}
		if (r > 0) tbc_op_remove(op);
	}
	return true;
}

bool tbc_pass_fold(tbc_module *m, tbc_diags *d) {
	folder F = {m, d, {0}, false, false};
	bool ok = fold_graph(&F, m->main);
	pass_bits_free(&F.changed);
	return ok;
}
