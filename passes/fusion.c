/* Fusion: groups of ops that become one loop nest become one Fused op.
 *
 * Does: forms two kinds of group in each graph (bodies of control flow
 * included), then makes each group of two or more ops a Fused op whose
 * "body" graph holds them:
 *  - a reduction group: one Reduce* op (constant axes) with the elementwise
 *    ops that compute its input (its prologue, each broadcasting into the
 *    reduction's input shape) and the elementwise ops after it that work on
 *    its result (its epilogue, each of the result's shape);
 *  - a loop group: a chain of elementwise ops, rooted at the last one, whose
 *    results each have the root's shape or broadcast into it.
 * Elementwise means category TBC_CAT_ELEMENTWISE, or a per-tensor
 * QuantizeLinear / DequantizeLinear (pass_qdq_elementwise), with one result
 * and every input broadcasting into that result (Dropout is never fused).
 * Requires: a verified, inferred module.
 * Guarantees:
 *  - each Fused op is one loop nest: a loop group iterates over its root's
 *    shape, a reduction group over its reduction's input and output shapes;
 *  - values read only inside a group are internal to its body (no buffer);
 *    a value also read outside is an output of the Fused op, and only values
 *    of the iteration space (the root's shape; for a reduction, its input or
 *    result shape) may be, so every output is written by the loop nest;
 *  - the body reads nothing from outside: the Fused op's inputs are its
 *    inputs, except constants of at most FUSE_CONST_NUMEL elements, which
 *    are copied into the body (so reduction axes stay constant there);
 *  - no cycle: a group is formed only if no path leaves it and comes back
 *    (through single ops or groups formed before); ops that read a group's
 *    results and stood between its members move after the Fused op;
 *  - a result keeps its name and type, so the model's outputs do not change.
 * Not fused: data movement, contractions, windows, normalizations (their
 * own kernels), ops with subgraphs or effects, values of unknown rank, and
 * a reduction's result read back at the input's shape (x - ReduceMax(x)
 * needs a second pass over x: it starts a loop group of its own). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

#define FUSE_CONST_NUMEL 16

enum role { ROLE_NONE, ROLE_LOOP, ROLE_PROLOGUE, ROLE_REDUCE, ROLE_EPILOGUE };

typedef struct fuser {
	tbc_module *m;
	tbc_graph *g;
	tbc_diags *d;
	int n;          /* ops in g */
	tbc_op **ops;   /* by position */
	pass_ptrmap pos;     /* op -> position */
	int *user_start, *users; /* positions of the ops reading each op's results (CSR) */
	int *group;     /* group id by position, -1 none */
	int *role;
	int *stamp, stamp_now;
	int n_groups;
	int **members;  /* positions, ascending */
	int *n_members, *cap_members;
	bool oom;
} fuser;

/* ---- shapes ---- */
static bool same_dims(const tbc_type *a, const tbc_type *b) { return tbc_type_same_dims(a, b); }

/* v broadcasts into s: lined up on the right, each dim 1 or s's dim. */
static bool broadcasts_into(const tbc_type *v, const tbc_type *s) {
	if (v->rank < 0 || s->rank < 0 || v->rank > s->rank) return false;
	for (int i = 0; i < v->rank; i++) {
		tbc_dim vd = v->dims[i], sd = s->dims[i + s->rank - v->rank];
		if (!((!vd.sym && vd.size == 1) || tbc_dim_eq(vd, sd))) return false;
	}
	return true;
}

static bool is_elementwise(const tbc_op *op) {
	/* Dropout may draw random numbers; BitCast reinterprets storage bits,
	 * which a fused loop's scalar values (computed in wider types) do not
	 * have: both run as kernels of their own. */
	if (tbc_ops[op->code].category != TBC_CAT_ELEMENTWISE && !pass_qdq_elementwise(op)) return false;
	if (op->code == TBC_OP_Dropout || op->code == TBC_OP_BitCast) return false;
	if (op->n_outputs != 1 || !op->outputs[0] || pass_has_graph_attr(op) || pass_has_effects(op)) return false;
	const tbc_type *out = &op->outputs[0]->type;
	if (out->rank < 0) return false;
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && !broadcasts_into(&op->inputs[i]->type, out)) return false;
	return true;
}

static bool is_reduce(const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_ReduceL1: case TBC_OP_ReduceL2: case TBC_OP_ReduceLogSum: case TBC_OP_ReduceLogSumExp:
	case TBC_OP_ReduceMax: case TBC_OP_ReduceMean: case TBC_OP_ReduceMin: case TBC_OP_ReduceProd:
	case TBC_OP_ReduceSum: case TBC_OP_ReduceSumSquare: break;
	default: return false;
	}
	if (!op->outputs[0] || op->outputs[0]->type.rank < 0 || op->inputs[0]->type.rank < 0) return false;
	return op->n_inputs < 2 || !op->inputs[1] || op->inputs[1]->kind == TBC_VALUE_CONST;
}

/* Position in g of the op that defines v; -1 when v is not an op result of g. */
static int def_pos(const fuser *F, const tbc_value *v) {
	if (!v || v->kind != TBC_VALUE_RESULT || v->graph != F->g) return -1;
	return pass_map_get(&F->pos, v->def);
}

/* ---- analysis ---- */
static bool setup(fuser *F) {
	F->n = 0;
	for (tbc_op *op = F->g->first; op; op = op->next) F->n++;
	size_t n = (size_t)F->n + 1;
	F->ops = malloc(n * sizeof *F->ops);
	F->group = malloc(n * sizeof *F->group);
	F->role = calloc(n, sizeof *F->role);
	F->stamp = calloc(n, sizeof *F->stamp);
	F->user_start = calloc(n + 1, sizeof *F->user_start);
	if (!F->ops || !F->group || !F->role || !F->stamp || !F->user_start || !pass_map_init(&F->pos, n)) return false;
	int p = 0;
	for (tbc_op *op = F->g->first; op; op = op->next, p++) {
		F->ops[p] = op;
		F->group[p] = -1;
		pass_map_put(&F->pos, op, p);
	}
	/* Readers of each op's results, as positions of ops of g. */
	size_t total = 0;
	for (int q = 0; q < F->n; q++)
		for (int i = 0; i < F->ops[q]->n_outputs; i++)
			if (F->ops[q]->outputs[i]) total += tbc_value_use_count(F->ops[q]->outputs[i]);
	F->users = malloc((total + 1) * sizeof *F->users);
	if (!F->users) return false;
	size_t k = 0;
	for (int q = 0; q < F->n; q++) {
		F->user_start[q] = (int)k;
		for (int i = 0; i < F->ops[q]->n_outputs; i++) {
			const tbc_value *v = F->ops[q]->outputs[i];
			for (const tbc_use *u = v ? v->uses : NULL; u; u = u->next) {
				tbc_op *top = pass_top_op(F->g, u->op);
				if (top) F->users[k++] = pass_map_get(&F->pos, top);
			}
		}
	}
	F->user_start[F->n] = (int)k;
	return true;
}

static int new_group(fuser *F) {
	int id = F->n_groups++;
	int **nm = realloc(F->members, (size_t)F->n_groups * sizeof *nm);
	int *nn = realloc(F->n_members, (size_t)F->n_groups * sizeof *nn);
	int *nc = realloc(F->cap_members, (size_t)F->n_groups * sizeof *nc);
	if (nm) F->members = nm;
	if (nn) F->n_members = nn;
	if (nc) F->cap_members = nc;
	if (!nm || !nn || !nc) {
		F->oom = true;
		F->n_groups--;
		return -1;
	}
	F->members[id] = NULL;
	F->n_members[id] = F->cap_members[id] = 0;
	return id;
}

static void add_member(fuser *F, int gid, int p, int role) {
	if (F->n_members[gid] == F->cap_members[gid]) {
		int nc = F->cap_members[gid] ? F->cap_members[gid] * 2 : 8;
		int *nm = realloc(F->members[gid], (size_t)nc * sizeof *nm);
		if (!nm) {
			F->oom = true;
			return;
		}
		F->members[gid] = nm;
		F->cap_members[gid] = nc;
	}
	int *mb = F->members[gid], k = F->n_members[gid]++;
	while (k > 0 && mb[k - 1] > p) {
		mb[k] = mb[k - 1];
		k--;
	}
	mb[k] = p;
	F->group[p] = gid;
	F->role[p] = role;
}

static void drop_member(fuser *F, int gid, int p) {
	int *mb = F->members[gid], n = F->n_members[gid], k = 0;
	while (k < n && mb[k] != p) k++;
	if (k == n) return;
	memmove(mb + k, mb + k + 1, (size_t)(n - k - 1) * sizeof *mb);
	F->n_members[gid]--;
	F->group[p] = -1;
	F->role[p] = ROLE_NONE;
}

/* No path leaves group gid and comes back, going through single ops and
 * through groups formed before (a group reads all its inputs before it
 * writes any output, so reaching one member reaches all). */
static bool convex(fuser *F, int gid) {
	int hi = F->members[gid][F->n_members[gid] - 1];
	int stamp = ++F->stamp_now;
	int cap = F->n + 1, top = 0;
	int *stack = malloc((size_t)cap * sizeof *stack);
	if (!stack) {
		F->oom = true;
		return false;
	}
	bool ok = true;
	/* Seed: readers of the group's results that are not in the group. */
	for (int k = 0; k < F->n_members[gid]; k++) {
		int p = F->members[gid][k];
		for (int u = F->user_start[p]; u < F->user_start[p + 1]; u++) {
			int q = F->users[u];
			if (F->group[q] != gid && F->stamp[q] != stamp) {
				F->stamp[q] = stamp;
				stack[top++] = q;
			}
		}
	}
	while (top > 0 && ok) {
		int q = stack[--top];
		int x = F->group[q];
		int from_n = 1, *from = &q;
		if (x >= 0) { /* a formed group: all its results are reached */
			from = F->members[x];
			from_n = F->n_members[x];
		} else if (q > hi) {
			continue; /* ops after the group's last member cannot feed it */
		}
		for (int k = 0; k < from_n && ok; k++) {
			int p = from[k];
			F->stamp[p] = stamp;
			for (int u = F->user_start[p]; u < F->user_start[p + 1]; u++) {
				int r = F->users[u];
				if (F->group[r] == gid) {
					ok = false;
					break;
				}
				if (F->stamp[r] != stamp && top < cap) {
					F->stamp[r] = stamp;
					stack[top++] = r;
				}
			}
		}
	}
	free(stack);
	return ok;
}

/* Is v read by anything outside group gid (an op, or a graph's return)? */
static bool read_outside(const fuser *F, const tbc_value *v, int gid) {
	for (const tbc_use *u = v->uses; u; u = u->next) {
		tbc_op *top = pass_top_op(F->g, u->op);
		int p = top ? pass_map_get(&F->pos, top) : -1;
		if (p < 0 || F->group[p] != gid) return true;
	}
	return pass_is_returned(F->m, v);
}

/* Tries to add the op at p to gid; keeps it only if the group stays convex. */
static bool try_add(fuser *F, int gid, int p, int role) {
	add_member(F, gid, p, role);
	if (F->oom) return false;
	if (convex(F, gid)) return true;
	drop_member(F, gid, p);
	return false;
}

/* Pulls elementwise producers into gid: results that broadcast into space,
 * read only inside the group or of the space's exact shape. */
static void pull_producers(fuser *F, int gid, int root, const tbc_type *space, int role) {
	int *work = malloc(((size_t)F->n + 1) * sizeof *work);
	if (!work) {
		F->oom = true;
		return;
	}
	int top = 0;
	work[top++] = root;
	while (top > 0 && !F->oom) {
		const tbc_op *op = F->ops[work[--top]];
		/* A reduction pulls only into its data input. */
		int n_in = is_reduce(op) ? 1 : op->n_inputs;
		for (int i = 0; i < n_in; i++) {
			int p = def_pos(F, op->inputs[i]);
			if (p < 0 || F->group[p] >= 0 || !is_elementwise(F->ops[p])) continue;
			const tbc_value *v = F->ops[p]->outputs[0];
			if (!broadcasts_into(&v->type, space)) continue;
			F->group[p] = gid; /* so uses by itself count as inside */
			bool outside = read_outside(F, v, gid);
			F->group[p] = -1;
			if (outside && !same_dims(&v->type, space)) continue;
			if (try_add(F, gid, p, role)) work[top++] = p;
		}
	}
	free(work);
}

static void form_reduction(fuser *F, int r) {
	tbc_op *R = F->ops[r];
	int gid = new_group(F);
	if (gid < 0) return;
	add_member(F, gid, r, ROLE_REDUCE);
	const tbc_type *in = &R->inputs[0]->type, *out = &R->outputs[0]->type;
	pull_producers(F, gid, r, in, ROLE_PROLOGUE);
	/* Epilogue: later elementwise ops of the result's shape whose inputs from
	 * the group are the reduction's result or other epilogue values. */
	for (int p = r + 1; p < F->n && !F->oom; p++) {
		tbc_op *op = F->ops[p];
		if (F->group[p] >= 0 || !is_elementwise(op) || !same_dims(&op->outputs[0]->type, out)) continue;
		bool reads_result = false, legal = true;
		for (int i = 0; i < op->n_inputs; i++) {
			int q = def_pos(F, op->inputs[i]);
			if (q < 0 || F->group[q] != gid) continue;
			if (F->role[q] == ROLE_REDUCE || F->role[q] == ROLE_EPILOGUE) reads_result = true;
			else legal = false;
		}
		if (reads_result && legal) try_add(F, gid, p, ROLE_EPILOGUE);
	}
}

static void form_loop(fuser *F, int root) {
	int gid = new_group(F);
	if (gid < 0) return;
	add_member(F, gid, root, ROLE_LOOP);
	pull_producers(F, gid, root, &F->ops[root]->outputs[0]->type, ROLE_LOOP);
}

/* ---- rewriting ---- */
static bool is_member(const fuser *F, int gid, const tbc_op *op) {
	if (!op || op->graph != F->g) return false;
	int p = pass_map_get(&F->pos, op);
	return p >= 0 && F->group[p] == gid;
}

static bool is_small_const(const tbc_value *v) {
	return v->kind == TBC_VALUE_CONST && v->constant->numel <= FUSE_CONST_NUMEL;
}

typedef struct vlist {
	tbc_value **v;
	int n, cap;
} vlist;

static int vlist_find(const vlist *l, const tbc_value *v) {
	for (int i = 0; i < l->n; i++)
		if (l->v[i] == v) return i;
	return -1;
}

static bool vlist_add(vlist *l, tbc_value *v) {
	if (vlist_find(l, v) >= 0) return true;
	if (l->n == l->cap) {
		int nc = l->cap ? l->cap * 2 : 8;
		tbc_value **nv = realloc(l->v, (size_t)nc * sizeof *nv);
		if (!nv) return false;
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = v;
	return true;
}

static void replace_returned_outside(tbc_graph *g, const tbc_graph *body, tbc_value *from, tbc_value *to) {
	if (g == body) return;
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == from) g->outputs[i] = to;
	for (tbc_op *op = g->first; op; op = op->next)
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++) replace_returned_outside(at->graphs[k], body, from, to);
		}
}

/* Does op (or an op in its subgraphs) read a result of group gid, of the
 * Fused op, or of an op already moved after it (moved: their results' ids;
 * a Fused op an earlier group made has no position, so marks by position
 * would miss it)? */
static bool reads_group(const fuser *F, int gid, const tbc_op *fused, const pass_bits *moved, const tbc_op *op) {
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *v = op->inputs[i];
		if (!v || v->kind != TBC_VALUE_RESULT) continue;
		if (v->def == fused || pass_bits_get(moved, v->id)) return true;
		int q = def_pos(F, v);
		if (q >= 0 && F->group[q] == gid) return true;
	}
	for (int a = 0; a < op->n_attrs; a++) {
		const tbc_attr *at = &op->attrs[a];
		int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
		for (int k = 0; k < n; k++)
			for (const tbc_op *o = at->graphs[k]->first; o; o = o->next)
				if (reads_group(F, gid, fused, moved, o)) return true;
	}
	return false;
}

static bool oom(fuser *F) {
	F->oom = true;
	return false;
}

/* Makes group gid one Fused op. */
static bool build(fuser *F, int gid) {
	tbc_graph *g = F->g;
	int nm = F->n_members[gid];
	tbc_op *last = F->ops[F->members[gid][nm - 1]];
	vlist ins = {0}, consts = {0}, outs = {0};
	bool ok = true;
	for (int k = 0; k < nm && ok; k++) {
		tbc_op *op = F->ops[F->members[gid][k]];
		for (int i = 0; i < op->n_inputs && ok; i++) {
			tbc_value *v = op->inputs[i];
			if (!v || is_member(F, gid, v->def)) continue;
			ok = vlist_add(is_small_const(v) ? &consts : &ins, v);
		}
		if (ok && read_outside(F, op->outputs[0], gid)) ok = vlist_add(&outs, op->outputs[0]);
	}
	if (ok && outs.n == 0) { /* nothing reads the group: leave it to dce */
		free(ins.v);
		free(consts.v);
		return true;
	}
	tbc_graph *body = ok ? tbc_graph_new(F->m, g, "fused") : NULL;
	tbc_op *fused = body ? tbc_op_new(g, TBC_OP_Fused, last->name, ins.n, ins.v, outs.n) : NULL;
	tbc_attr *at = fused ? tbc_op_add_attr(fused, "body", TBC_ATTR_GRAPH) : NULL;
	if (at) at->graphs = tbc_arena_array(F->m->arena, 1, sizeof *at->graphs);
	if (!at || !at->graphs) {
		free(ins.v);
		free(consts.v);
		free(outs.v);
		return oom(F);
	}
	at->n = 1;
	at->graphs[0] = body;
	body->parent_op = fused;
	pass_unlink(fused);
	pass_insert_after(fused, last);

	/* The body's inputs and constants stand for the outer values. */
	tbc_value **inner_in = calloc((size_t)ins.n + 1, sizeof *inner_in);
	tbc_value **inner_c = calloc((size_t)consts.n + 1, sizeof *inner_c);
	if (!inner_in || !inner_c) ok = false;
	for (int i = 0; ok && i < ins.n; i++) ok = (inner_in[i] = tbc_graph_add_input(body, NULL, &ins.v[i]->type)) != NULL;
	for (int i = 0; ok && i < consts.n; i++) ok = (inner_c[i] = tbc_graph_add_const(body, NULL, consts.v[i]->constant)) != NULL;
	/* Outside readers of group results read the Fused op's results. */
	for (int i = 0; ok && i < outs.n; i++) {
		tbc_value *v = outs.v[i], *r = fused->outputs[i];
		r->type = v->type;
		r->name = v->name;
		for (tbc_use *u = v->uses, *next; u; u = next) {
			next = u->next;
			if (!is_member(F, gid, u->op)) tbc_op_set_input(u->op, u->index, r);
		}
		replace_returned_outside(F->m->main, body, v, r);
		ok = tbc_graph_add_output(body, v);
	}
	/* Move the members into the body, reading the body's values. */
	for (int k = 0; ok && k < nm; k++) {
		tbc_op *op = F->ops[F->members[gid][k]];
		for (int i = 0; i < op->n_inputs; i++) {
			tbc_value *v = op->inputs[i];
			if (!v || is_member(F, gid, v->def)) continue;
			int j = vlist_find(&ins, v);
			tbc_op_set_input(op, i, j >= 0 ? inner_in[j] : inner_c[vlist_find(&consts, v)]);
		}
	}
	/* Ops between the members that read the group's results now follow the
	 * Fused op, in their order; the group is convex, so none of them feeds a
	 * member. */
	tbc_op *first = NULL;
	for (tbc_op *op = g->first; op && !first; op = op->next)
		if (is_member(F, gid, op)) first = op;
	pass_bits moved = {0};
	tbc_op *after = fused;
	for (tbc_op *op = first, *next; ok && op && op != fused; op = next) {
		next = op->next;
		if (is_member(F, gid, op) || !reads_group(F, gid, fused, &moved, op)) continue;
		for (int i = 0; ok && i < op->n_outputs; i++)
			if (op->outputs[i]) ok = pass_bits_set(&moved, op->outputs[i]->id);
		pass_unlink(op);
		pass_insert_after(op, after);
		after = op;
	}
	pass_bits_free(&moved);
	for (int k = 0; ok && k < nm; k++) {
		tbc_op *op = F->ops[F->members[gid][k]];
		pass_unlink(op);
		op->graph = body;
		op->prev = body->last;
		op->next = NULL;
		if (body->last)
			body->last->next = op;
		else
			body->first = op;
		body->last = op;
		op->outputs[0]->graph = body;
	}
	free(inner_in);
	free(inner_c);
	free(ins.v);
	free(consts.v);
	free(outs.v);
	return ok || oom(F);
}

static void release(fuser *F) {
	for (int i = 0; i < F->n_groups; i++) free(F->members[i]);
	free(F->members);
	free(F->n_members);
	free(F->cap_members);
	free(F->ops);
	free(F->group);
	free(F->role);
	free(F->stamp);
	free(F->user_start);
	free(F->users);
	pass_map_free(&F->pos);
}

static bool fuse_graph(tbc_module *m, tbc_graph *g, tbc_diags *d) {
	for (tbc_op *op = g->first; op; op = op->next) {
		if (op->code == TBC_OP_Fused) continue;
		for (int a = 0; a < op->n_attrs; a++) {
			tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++)
				if (!fuse_graph(m, at->graphs[k], d)) return false;
		}
	}
	fuser F = {0};
	F.m = m;
	F.g = g;
	F.d = d;
	bool ok = setup(&F);
	for (int p = 0; ok && p < F.n && !F.oom; p++)
		if (F.group[p] < 0 && is_reduce(F.ops[p])) form_reduction(&F, p);
	for (int p = F.n - 1; ok && p >= 0 && !F.oom; p--)
		if (F.group[p] < 0 && is_elementwise(F.ops[p])) form_loop(&F, p);
	for (int gid = 0; ok && gid < F.n_groups && !F.oom; gid++)
		if (F.n_members[gid] >= 2) ok = build(&F, gid);
	if (!ok || F.oom) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory in fusion");
		ok = false;
	}
	release(&F);
	return ok;
}

bool tbc_pass_fusion(tbc_module *m, tbc_diags *d) {
	return fuse_graph(m, m->main, d);
}
