/* Rematerialization: recompute values instead of keeping them alive, until
 * memory planning's arena fits a budget (docs/memory.md).
 *
 * First what costs no FLOPs: ops move later, to just before their first
 * reader (a transposed weight autodiff made early, a gradient computed
 * before the one read first), and earlier, to just after their inputs are
 * ready (an optimizer update, which frees its gradient), each move kept
 * only when memory planning's liveness profile (tbc_memplan_profile_make)
 * gets no worse (later) or better (earlier).
 *
 * Then, over and over: at the op at which the most bytes are live (the
 * peak), among the values live across it but not read there, picks one to
 * recompute: its producer, and the producers of its inputs that died
 * before that op (a chain of up to MAX_CHAIN ops), cloned just before the
 * first op after the peak that reads the value; every read of the chain's
 * values from there on reads the clones.  Candidates are ranked by
 * estimated FLOPs per byte-op they take off the profile above the floor
 * (what no order of the ops can go below): a value held across many of
 * the highest ops counts for all of them, not only at the peak.  The
 * cheapest few are applied, measured with the profile, and undone; the one
 * with the fewest FLOPs per byte-op actually taken off that lowers the
 * peak is kept (else the first that makes the profile better: the bytes
 * live at each op, largest first, compared in that order).  Matrix
 * products and convolutions are recomputed only when no other candidate
 * helps.  Once the peak is within the budget, memory planning places the
 * values and its arena decides: done, or go on (placement can leave gaps
 * the peak does not show).  No step depends on the budget, only when to
 * stop does.
 * Requires: a verified, inferred module after fusion (the last pass before
 * memory planning).  Guarantees: the module computes the same values with
 * the same ops (a clone is the same op on the same inputs, so it gives the
 * same bits; a move keeps every op after its inputs); a plan is in place
 * (tbc_pass_memplan has run). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

#define MAX_CHAIN 16     /* ops cloned for one value */
#define MAX_TRIES 6     /* candidates tried at one op before the next kind */
#define MAX_POSITIONS 8  /* ops tried, most bytes live first */

typedef struct remat {
	tbc_module *m;
	tbc_memplan_profile P;
	pass_ptrmap pos; /* op of the main graph -> position */
	int *order;      /* positions by live bytes, most first (ties: earlier first) */
	int64_t *sorted; /* live bytes in that order: the profile compared between changes */
	int64_t floor;   /* bytes live at an op below which saving counts nothing */
} remat;

typedef struct cand {
	tbc_value *v;
	int p;          /* the position it is taken off */
	int q;          /* position of the first read after p */
	double score;   /* cost per byte saved */
	int n_chain;
	tbc_op *chain[MAX_CHAIN]; /* v's producer first, then producers of its inputs */
} cand;

typedef struct ranked {
	int64_t live;
	int pos;
} ranked;

static int by_live(const void *a, const void *b) {
	const ranked *x = a, *y = b;
	if (x->live != y->live) return x->live > y->live ? -1 : 1;
	return x->pos - y->pos;
}

static void drop_profile(remat *R) {
	tbc_memplan_profile_free(&R->P);
	pass_map_free(&R->pos);
	free(R->order);
	free(R->sorted);
	R->order = NULL;
	R->sorted = NULL;
}

static bool profile(remat *R) {
	drop_profile(R);
	if (!tbc_memplan_profile_make(R->m, &R->P) || !pass_map_init(&R->pos, (size_t)R->P.n_ops + 1)) return false;
	R->order = malloc(((size_t)R->P.n_ops + 1) * sizeof *R->order);
	R->sorted = malloc(((size_t)R->P.n_ops + 1) * sizeof *R->sorted);
	if (!R->order || !R->sorted) return false;
	ranked *rk = malloc(((size_t)R->P.n_ops + 1) * sizeof *rk);
	if (!rk) return false;
	for (int p = 0; p < R->P.n_ops; p++) {
		pass_map_put(&R->pos, R->P.ops[p], p);
		rk[p] = (ranked){R->P.live[p], p};
	}
	qsort(rk, (size_t)R->P.n_ops, sizeof *rk, by_live);
	for (int k = 0; k < R->P.n_ops; k++) {
		R->order[k] = rk[k].pos;
		R->sorted[k] = rk[k].live;
	}
	free(rk);
	return true;
}

/* Is profile a (n_a ops) better than b: in the order of their largest
 * values, the first that differs smaller (a missing op counts 0)?  The peak
 * first, then how many ops are at it, then the next highest, and so on. */
static bool better(const int64_t *a, int n_a, const int64_t *b, int n_b) {
	for (int k = 0; k < n_a || k < n_b; k++) {
		int64_t x = k < n_a ? a[k] : 0, y = k < n_b ? b[k] : 0;
		if (x != y) return x < y;
	}
	return false;
}

/* The bytes live above the floor, summed over the ops: what a change
 * takes off it is what the choice between candidates weighs, so that a
 * value kept across many ops at the top of the profile counts for all
 * of them, not only at the peak. */
static double area(const remat *R) {
	double a = 0;
	for (int p = 0; p < R->P.n_ops; p++)
		if (R->P.live[p] > R->floor) a += (double)(R->P.live[p] - R->floor);
	return a;
}

static int top_pos(const remat *R, tbc_op *op) {
	tbc_op *top = pass_top_op(R->m->main, op);
	return top ? pass_map_get(&R->pos, top) : -1;
}

static bool is_heavy(const tbc_op *op) {
	if (tbc_ops[op->code].category == TBC_CAT_CONTRACTION) return true;
	if (op->code != TBC_OP_Fused) return false;
	const tbc_graph *body = tbc_attr_graph(op, "body");
	for (const tbc_op *o = body ? body->first : NULL; o; o = o->next)
		if (is_heavy(o)) return true;
	return false;
}

/* May op run a second time, with the same results? */
static bool clonable(const remat *R, const tbc_op *op, bool heavy_ok) {
	if (op->graph != R->m->main || pass_has_effects(op)) return false;
	if (op->code != TBC_OP_Fused && pass_has_graph_attr(op)) return false;
	if (!heavy_ok && is_heavy(op)) return false;
	/* The clone's results are fresh values memory planning places (a
	 * copy of a model output too): their size must be static. */
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && pass_value_bytes(op->outputs[i]) < 0) return false;
	return true;
}

static bool in_chain(const cand *c, const tbc_op *op) {
	for (int i = 0; i < c->n_chain; i++)
		if (c->chain[i] == op) return true;
	return false;
}

static double elements(const tbc_op *op) {
	double n = 0;
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i] && op->outputs[i]->type.rank >= 0) n += (double)tbc_type_numel(&op->outputs[i]->type);
	return n;
}

/* The producers to clone for v (live across the peak p, read next at q)
 * and what that saves at p: v's bytes less those of inputs that would now
 * live across p.  false when v is no candidate. */
static bool plan_chain(const remat *R, tbc_value *v, int p, int q, bool heavy_ok, cand *c) {
	const tbc_memplan_profile *P = &R->P;
	c->v = v;
	c->q = q;
	c->n_chain = 0;
	if (!clonable(R, v->def, heavy_ok)) return false;
	c->chain[c->n_chain++] = v->def;
	int64_t kept = 0;
	tbc_value *kept_v[64];
	int n_kept = 0;
	for (int k = 0; k < c->n_chain; k++) {
		const tbc_op *op = c->chain[k];
		for (int i = 0; i < op->n_inputs; i++) {
			tbc_value *u = op->inputs[i];
			if (!u || u->kind != TBC_VALUE_RESULT || in_chain(c, u->def)) continue;
			int s = u->id < P->n_values ? P->start[u->id] : -1;
			if (s < 0 || P->end[u->id] >= p) continue; /* not in the arena, or live at p already */
			bool seen = false;
			for (int j = 0; j < n_kept && !seen; j++) seen = kept_v[j] == u;
			if (seen) continue;
			if (c->n_chain < MAX_CHAIN && clonable(R, u->def, heavy_ok)) {
				c->chain[c->n_chain++] = u->def;
				continue;
			}
			if (n_kept == 64) return false;
			kept_v[n_kept++] = u;
			kept += P->bytes[u->id];
		}
	}
	int64_t saved = P->bytes[v->id] - kept;
	if (saved <= 0) return false;
	double cost = 0;
	for (int k = 0; k < c->n_chain; k++) cost += tbc_op_flops(c->chain[k]) + elements(c->chain[k]);
	/* What it takes off the area: at each op from its last read up to p
	 * until the clone, the bytes saved, as far as they are above the floor. */
	int from = P->start[v->id];
	for (const tbc_use *u = v->uses; u; u = u->next) {
		int at = top_pos(R, u->op);
		if (at <= p && at > from) from = at;
	}
	double off = 0;
	for (int k = from + 1; k < q; k++)
		if (P->live[k] > R->floor) off += (double)(P->live[k] - R->floor < saved ? P->live[k] - R->floor : saved);
	if (off <= 0) return false;
	c->score = cost / off;
	return true;
}

static int by_score(const void *a, const void *b) {
	const cand *x = a, *y = b;
	if (x->score != y->score) return x->score < y->score ? -1 : 1;
	return x->v->id < y->v->id ? -1 : x->v->id > y->v->id; /* deterministic */
}

/* Candidates at the peak, cheapest first; returns how many (out malloc'd). */
static int candidates(const remat *R, int p, bool heavy_ok, cand **out) {
	const tbc_memplan_profile *P = &R->P;
	int n = 0;
	*out = NULL;
	cand *cs = malloc(((size_t)P->n_values + 1) * sizeof *cs);
	if (!cs) return -1;
	for (uint32_t id = 0; id < P->n_values; id++) {
		if (P->start[id] < 0 || P->start[id] >= p || P->end[id] <= p) continue;
		tbc_op *def = NULL;
		tbc_value *v = NULL;
		/* The value of this id: a result of a top-level op defined before p. */
		def = P->ops[P->start[id]];
		for (int i = 0; i < def->n_outputs && !v; i++)
			if (def->outputs[i] && def->outputs[i]->id == id) v = def->outputs[i];
		if (!v) continue;
		int q = -1;
		bool read_at_p = false;
		for (const tbc_use *u = v->uses; u; u = u->next) {
			int at = top_pos(R, u->op);
			if (at == p) read_at_p = true;
			if (at > p && (q < 0 || at < q)) q = at;
		}
		if (read_at_p || q < 0 || pass_is_returned(R->m, v)) continue;
		if (plan_chain(R, v, p, q, heavy_ok, &cs[n])) {
			cs[n].p = p;
			n++;
		}
	}
	qsort(cs, (size_t)n, sizeof *cs, by_score);
	*out = cs;
	return n;
}

typedef struct redirect {
	tbc_op *op;
	int index;
	tbc_value *was; /* what it read before */
} redirect;

typedef struct applied {
	int n_clones;
	tbc_op *clones[MAX_CHAIN];
	int n_reads;
	redirect *reads; /* reads redirected to a clone; malloc'd */
	double flops;
} applied;

/* Clones c's chain before the op at c->q and makes the reads of the
 * chain's values from there on read the clones: c->v's, and those of the
 * values recomputed on the way (the originals then die earlier too).
 * false when out of memory (nothing changed). */
static bool apply(remat *R, const cand *c, applied *a) {
	memset(a, 0, sizeof *a);
	tbc_op *at = R->P.ops[c->q];
	/* In program order: the chain's ops sorted by position. */
	tbc_op *order[MAX_CHAIN];
	int n = c->n_chain;
	for (int i = 0; i < n; i++) order[i] = c->chain[i];
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && pass_map_get(&R->pos, order[k]) < pass_map_get(&R->pos, order[k - 1]); k--) {
			tbc_op *t = order[k];
			order[k] = order[k - 1];
			order[k - 1] = t;
		}
	size_t n_uses = 0;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < order[i]->n_outputs; k++)
			if (order[i]->outputs[k]) n_uses += tbc_value_use_count(order[i]->outputs[k]);
	a->reads = malloc((n_uses + 1) * sizeof *a->reads);
	if (!a->reads) return false;
	for (int i = 0; i < n; i++) {
		tbc_op *cl = tbc_op_clone(order[i]);
		if (!cl) {
			for (int k = a->n_clones - 1; k >= 0; k--) pass_remove_op(a->clones[k]);
			free(a->reads);
			a->reads = NULL;
			a->n_clones = 0;
			return false;
		}
		pass_unlink(cl);
		pass_insert_before(cl, at);
		a->clones[a->n_clones++] = cl;
		a->flops += tbc_op_flops(cl);
		/* Inputs made by an earlier clone read it. */
		for (int k = 0; k < cl->n_inputs; k++) {
			tbc_value *u = cl->inputs[k];
			for (int j = 0; u && j < i; j++)
				if (u->def == order[j]) tbc_op_set_input(cl, k, a->clones[j]->outputs[u->def_index]);
		}
	}
	/* Collect the late reads first (the clones are not in the profile:
	 * position -1): redirecting edits the use lists. */
	for (int i = 0; i < n; i++)
		for (int k = 0; k < order[i]->n_outputs; k++) {
			tbc_value *v = order[i]->outputs[k];
			for (const tbc_use *u = v ? v->uses : NULL; u; u = u->next)
				if (top_pos(R, u->op) >= c->q) a->reads[a->n_reads++] = (redirect){u->op, u->index, v};
		}
	for (int i = 0; i < a->n_reads; i++) {
		tbc_value *v = a->reads[i].was;
		for (int j = 0; j < n; j++)
			if (order[j] == v->def) tbc_op_set_input(a->reads[i].op, a->reads[i].index, a->clones[j]->outputs[v->def_index]);
	}
	return true;
}

static void revert(applied *a) {
	for (int i = 0; i < a->n_reads; i++) tbc_op_set_input(a->reads[i].op, a->reads[i].index, a->reads[i].was);
	for (int k = a->n_clones - 1; k >= 0; k--) pass_remove_op(a->clones[k]);
	free(a->reads);
	memset(a, 0, sizeof *a);
}

/* ---- Moving ops later (no FLOPs) ----
 * An op that runs long before its first reader keeps its results alive
 * for nothing: autodiff places the transposed weights of the backward
 * pass, and constants expanded to shapes, where the forward pass is, and
 * computes a gradient before the one read first.  Such an op moves to
 * just before its first reader when the inputs it alone kept alive
 * (those not read from there on) hold no more bytes than its results: no
 * op then has more bytes live.  Each move is checked with the profile and
 * undone when it makes it worse (in-place and view sharing change with
 * the order). */
static bool movable(const remat *R, const tbc_op *op) {
	if (op->graph != R->m->main || pass_has_effects(op)) return false;
	if (op->code != TBC_OP_Fused && pass_has_graph_attr(op)) return false;
	return op->n_outputs > 0;
}

/* The position of op's first reader, or -1 when it has none or a result
 * is returned. */
static int first_reader(const remat *R, const tbc_op *op) {
	int q = -1;
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *v = op->outputs[i];
		if (!v) continue;
		if (pass_is_returned(R->m, v)) return -1;
		for (const tbc_use *u = v->uses; u; u = u->next) {
			int at = top_pos(R, u->op);
			if (at >= 0 && (q < 0 || at < q)) q = at;
		}
	}
	return q;
}

/* Is input u of op read at or after position q by another op? */
static bool read_from(const remat *R, const tbc_value *u, const tbc_op *op, int q) {
	for (const tbc_use *use = u->uses; use; use = use->next) {
		tbc_op *top = pass_top_op(R->m->main, use->op);
		if (top != op && top && pass_map_get(&R->pos, top) >= q) return true;
	}
	return false;
}

static int64_t placed_bytes(const remat *R, const tbc_value *v) {
	return v && v->id < R->P.n_values && R->P.start[v->id] >= 0 ? R->P.bytes[v->id] : 0;
}

/* Moves ops later, last first; returns how many moved (-1: out of memory). */
static int sink_ops(remat *R) {
	int moved = 0;
	for (int p = R->P.n_ops - 1; p >= 0; p--) {
		tbc_op *op = R->P.ops[p];
		if (!movable(R, op)) continue;
		int q = first_reader(R, op);
		if (q <= p + 1) continue;
		int64_t longer = 0, shorter = 0;
		for (int i = 0; i < op->n_inputs; i++) {
			const tbc_value *u = op->inputs[i];
			bool seen = false;
			for (int k = 0; k < i && !seen; k++) seen = op->inputs[k] == u;
			if (u && !seen && u->kind == TBC_VALUE_RESULT && !read_from(R, u, op, q)) longer += placed_bytes(R, u);
		}
		for (int i = 0; i < op->n_outputs; i++) shorter += placed_bytes(R, op->outputs[i]);
		if (longer > shorter) continue;
		int n_before = R->P.n_ops;
		int64_t *before = malloc(((size_t)n_before + 1) * sizeof *before);
		if (!before) return -1;
		memcpy(before, R->sorted, (size_t)n_before * sizeof *before);
		tbc_op *was_before = op->next;
		pass_unlink(op);
		pass_insert_before(op, R->P.ops[q]);
		if (!profile(R)) {
			free(before);
			return -1;
		}
		if (better(before, n_before, R->sorted, R->P.n_ops)) {
			pass_unlink(op);
			pass_insert_before(op, was_before);
			if (!profile(R)) {
				free(before);
				return -1;
			}
		} else {
			moved++;
		}
		free(before);
	}
	return moved;
}

/* ---- Moving ops earlier (no FLOPs) ----
 * The converse: an op run long after its inputs are ready keeps them alive
 * for nothing (a training step's optimizer updates run at its end and
 * keep every gradient until then).  Such an op moves to just after the
 * last op that makes one of its inputs, taking along the ops that compute
 * its other inputs from the model's inputs and constants alone (the step
 * number's factors of an optimizer); kept only when the profile gets no
 * worse. */

/* Does op compute only from values outside the arena (through at most
 * depth such ops)? */
static bool from_sources(const remat *R, const tbc_op *op, int depth) {
	if (!movable(R, op) || depth > 4) return false;
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *u = op->inputs[i];
		if (!u || u->kind != TBC_VALUE_RESULT) continue;
		if (u->def->graph != R->m->main || !from_sources(R, u->def, depth + 1)) return false;
	}
	return true;
}

/* Adds to list (in no particular order) op's producers after position t
 * that compute from sources, then op; false when a producer after t does
 * not. */
static bool pull(const remat *R, tbc_op *op, int t, tbc_op **list, int *n, int max) {
	for (int i = 0; i < op->n_inputs; i++) {
		tbc_value *u = op->inputs[i];
		if (!u || u->kind != TBC_VALUE_RESULT) continue;
		int at = top_pos(R, u->def);
		if (at <= t) continue;
		bool seen = false;
		for (int k = 0; k < *n && !seen; k++) seen = list[k] == u->def;
		if (seen) continue;
		bool view = movable(R, u->def) && tbc_memplan_is_view(u->def);
		if ((!view && !from_sources(R, u->def, 0)) || !pull(R, u->def, t, list, n, max)) return false;
	}
	if (*n == max) return false;
	list[(*n)++] = op;
	return true;
}

/* Moves ops earlier, first first; returns how many moved (-1: out of memory). */
static int hoist_ops(remat *R) {
	int moved = 0;
	enum { MAX_PULL = 16 };
	for (int p = 0; p < R->P.n_ops; p++) {
		tbc_op *op = R->P.ops[p];
		/* A view frees nothing (it shares its input's buffer) and, moved
		 * up to its input, would keep it from being recomputed. */
		if (!movable(R, op) || tbc_memplan_is_view(op) || from_sources(R, op, 0)) continue;
		/* After the last input made by an op that does not compute from sources. */
		int t = -1;
		for (int i = 0; i < op->n_inputs; i++) {
			tbc_value *u = op->inputs[i];
			if (!u || u->kind != TBC_VALUE_RESULT) continue;
			/* A view goes along with it: what counts is what it views. */
			while (u->kind == TBC_VALUE_RESULT && u->def->graph == R->m->main && tbc_memplan_is_view(u->def) &&
			       u->def->n_inputs > 0 && u->def->inputs[0])
				u = u->def->inputs[0];
			if (u->kind != TBC_VALUE_RESULT) continue;
			tbc_op *top = pass_top_op(R->m->main, u->def);
			int at = top ? pass_map_get(&R->pos, top) : -1;
			if (at > t && !from_sources(R, u->def, 0)) t = at;
		}
		if (t < 0 || t + 1 >= p) continue;
		tbc_op *list[MAX_PULL];
		int n = 0;
		if (!pull(R, op, t, list, &n, MAX_PULL)) continue;
		/* In program order (a producer before its readers). */
		for (int i = 1; i < n; i++)
			for (int k = i; k > 0 && pass_map_get(&R->pos, list[k]) < pass_map_get(&R->pos, list[k - 1]); k--) {
				tbc_op *x = list[k];
				list[k] = list[k - 1];
				list[k - 1] = x;
			}
		/* Before the first op after t that is not moved (a moved op
		 * already there stays where it is, in order). */
		tbc_op *at = R->P.ops[t + 1];
		for (bool in_list = true; in_list;) {
			in_list = false;
			for (int i = 0; i < n && !in_list; i++) in_list = list[i] == at;
			if (in_list) at = at->next;
		}
		if (!at || pass_map_get(&R->pos, at) > p) continue; /* in place already */
		int n_before = R->P.n_ops;
		int64_t *before = malloc(((size_t)n_before + 1) * sizeof *before);
		tbc_op **was = malloc((size_t)n * sizeof *was);
		if (!before || !was) {
			free(before);
			free(was);
			return -1;
		}
		memcpy(before, R->sorted, (size_t)n_before * sizeof *before);
		for (int i = 0; i < n; i++) was[i] = list[i]->prev; /* never NULL: after t */
		int at_pos = pass_map_get(&R->pos, at);
		for (int i = 0; i < n; i++) {
			if (pass_map_get(&R->pos, list[i]) < at_pos) continue; /* already in place */
			pass_unlink(list[i]);
			pass_insert_before(list[i], at);
		}
		/* Kept only when it helps: a move that merely trades one value
		 * for another of its size (a transpose next to what it reads)
		 * would leave remat a longer chain to recompute. */
		bool ok = profile(R);
		if (ok && !better(R->sorted, R->P.n_ops, before, n_before)) {
			/* Back, first first: each after the op that preceded it. */
			for (int i = 0; i < n; i++) {
				if (was[i]->next == list[i]) continue;
				pass_unlink(list[i]);
				pass_insert_after(list[i], was[i]);
			}
			ok = profile(R);
		} else if (ok) {
			moved++;
		}
		free(before);
		free(was);
		if (!ok) return -1;
	}
	return moved;
}

static int64_t plan_arena(tbc_module *m, tbc_diags *d) {
	if (!tbc_pass_memplan(m, d)) return -1;
	return tbc_memplan_arena_bytes(m);
}

static bool oom(tbc_diags *d, const tbc_module *m) {
	tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory choosing values to recompute");
	return false;
}

/* One step: at the op with the most bytes live, then (when nothing helps
 * there) at the next ones, the cheapest candidate whose change makes the
 * profile better, products and convolutions only when no other candidate
 * at any of those ops does; false when none does (or out of memory:
 * *failed). */
static bool step(remat *R, tbc_remat_stats *st, bool *failed) {
	*failed = false;
	int n_before = R->P.n_ops;
	int64_t *before = malloc(((size_t)n_before + 1) * sizeof *before);
	if (!before) {
		*failed = true;
		return false;
	}
	memcpy(before, R->sorted, (size_t)n_before * sizeof *before);
	/* The floor of the area the choices weigh: what no order of these ops
	 * can go below (not the budget: the steps must not depend on it);
	 * none when the peak is there already (recomputing can lower it). */
	R->floor = R->P.op_bound < R->P.peak ? R->P.op_bound : 0;
	double area_before = area(R);
	bool done = false;
	for (int heavy_ok = 0; heavy_ok <= 1 && !done && !*failed; heavy_ok++) {
		for (int k = 0; k < MAX_POSITIONS && k < n_before && !done && !*failed; k++) {
			int p = R->order[k];
			cand *cs = NULL;
			int n = candidates(R, p, heavy_ok != 0, &cs);
			if (n < 0) *failed = true;
			/* Of the candidates tried, the one that lowers the peak at the
			 * fewest FLOPs per byte it actually comes down; else the first
			 * (cheapest as estimated) that makes the profile better. */
			int pick = -1, first_better = -1;
			double pick_ratio = 0;
			for (int i = 0; i < n && i < MAX_TRIES && !*failed; i++) {
				applied a;
				if (!apply(R, &cs[i], &a) || !profile(R)) {
					*failed = true;
					break;
				}
				bool good = better(R->sorted, R->P.n_ops, before, n_before);
				int64_t drop = before[0] - R->sorted[0];
				double off = area_before - area(R);
				if (good && first_better < 0) first_better = i;
				if (good && drop > 0) {
					double ratio = (a.flops + 1.0) / (off > 0 ? off : 1.0);
					if (pick < 0 || ratio < pick_ratio) {
						pick = i;
						pick_ratio = ratio;
					}
				}
				revert(&a);
				if (!profile(R)) *failed = true;
			}
			if (pick < 0) pick = first_better;
			if (pick >= 0 && !*failed) {
				applied a;
				if (!apply(R, &cs[pick], &a) || !profile(R)) {
					*failed = true;
				} else {
					st->recompute_flops += a.flops;
					st->ops_cloned += a.n_clones;
					st->values_recomputed++;
					free(a.reads);
					done = true;
				}
			}
			free(cs);
		}
	}
	free(before);
	return done;
}

bool tbc_pass_remat(tbc_module *m, const tbc_remat_options *o, tbc_remat_stats *st_out, tbc_diags *d) {
	tbc_remat_stats st;
	memset(&st, 0, sizeof st);
	if (o->budget_bytes < 0 || (o->budget_bytes == 0 && !(o->budget_percent > 0 && o->budget_percent <= 100))) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL,
			      "--memory-budget: a number of bytes > 0 or a percentage in (0, 100], got %" PRId64 " bytes, %g%%",
			      o->budget_bytes, o->budget_percent);
		return false;
	}
	int64_t arena = plan_arena(m, d);
	if (arena < 0) return false;
	st.arena_before = st.arena_after = arena;
	st.budget = o->budget_bytes > 0 ? o->budget_bytes : (int64_t)((double)arena * o->budget_percent / 100.0);
	remat R = {.m = m};
	bool ok = true, failed = false;
	int64_t best = arena;
	int n_ops = 0;
	for (tbc_op *op = m->main->first; op; op = op->next) n_ops++;
	int max_steps = 4 * n_ops + 64;
	if (arena > st.budget && !profile(&R)) ok = oom(d, m);
	/* Free first: ops moved to their readers. */
	if (ok && arena > st.budget) {
		int moved = sink_ops(&R);
		int hoisted = moved < 0 ? 0 : hoist_ops(&R);
		if (hoisted < 0) moved = -1;
		else moved += hoisted;
		if (moved < 0) ok = oom(d, m);
		else if (moved > 0 && (arena = plan_arena(m, d)) < 0) ok = false;
		if (ok && arena < best) best = arena;
	}
	/* The steps do not depend on the budget, only when to stop does: the
	 * smallest arena seen on the way is what a budget of that size reaches. */
	for (int n = 0; ok && arena > st.budget && n < max_steps; n++) {
		if (!step(&R, &st, &failed)) {
			if (failed) ok = oom(d, m);
			break;
		}
		if ((arena = plan_arena(m, d)) < 0) ok = false;
		if (ok && arena < best) best = arena;
	}
	st.arena_after = arena;
	if (ok && arena > st.budget) {
		double base = st.arena_before > 0 ? (double)st.arena_before : 1.0;
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL,
			      "--memory-budget: %" PRId64 " bytes (%.1f%% of the arena without a budget, %" PRId64
			      " bytes) cannot be met: recomputation reaches %" PRId64 " bytes (%.1f%%) at the smallest"
			      " (no order of these ops needs less than %" PRId64 " bytes)",
			      st.budget, 100.0 * (double)st.budget / base, st.arena_before, best, 100.0 * (double)best / base,
			      R.P.op_bound);
		ok = false;
	}
	drop_profile(&R);
	if (st_out) *st_out = st;
	return ok;
}
