/* The IR verifier: checks the invariants every pass may rely on and every
 * pass must keep.  A failure is a bug in tbc, reported as TBC_ERR_INTERNAL
 * naming the op or value.  Checked:
 *   - structure: op lists well linked, no op or graph reachable twice (no
 *     cycles), subgraphs' parent and parent_op links, nesting depth;
 *   - SSA: one definition per value, with the kind and graph it claims;
 *     every use dominated (defined earlier in the same graph or in an
 *     enclosing graph before the op that owns the subgraph);
 *   - use lists: exactly one entry per use;
 *   - op arity within ops.def's bounds;
 *   - types: a supported dtype, rank <= TBC_MAX_RANK, dims static or named;
 *   - constants: data present and matching their type;
 *   - graph outputs defined. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Open-addressing set of pointers. */
typedef struct pset {
	const void **slots;
	size_t cap, n;
} pset;

static size_t phash(const void *p, size_t cap) {
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

/* 1: added, 0: already there, -1: out of memory. */
static int pset_add(pset *s, const void *p) {
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		const void **ns = calloc(cap, sizeof *ns);
		if (!ns) return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i]) {
				size_t h = phash(s->slots[i], cap);
				while (ns[h]) h = (h + 1) & (cap - 1);
				ns[h] = s->slots[i];
			}
		free(s->slots);
		s->slots = ns;
		s->cap = cap;
	}
	size_t h = phash(p, s->cap);
	while (s->slots[h]) {
		if (s->slots[h] == p) return 0;
		h = (h + 1) & (s->cap - 1);
	}
	s->slots[h] = p;
	s->n++;
	return 1;
}

static bool pset_has(const pset *s, const void *p) {
	if (!s->cap) return false;
	size_t h = phash(p, s->cap);
	while (s->slots[h]) {
		if (s->slots[h] == p) return true;
		h = (h + 1) & (s->cap - 1);
	}
	return false;
}

enum { UNSEEN, VISIBLE, GONE };

typedef struct verifier {
	const tbc_module *m;
	tbc_diags *d;
	unsigned flags;
	bool ok, fatal;
	pset ops, graphs;
	uint32_t *uses;       /* by value id: how many op inputs name it */
	unsigned char *state; /* by value id */
} verifier;

static const char *vname(const tbc_value *v, char *buf, size_t size) {
	return v ? tbc_value_display_name(v, buf, size) : "(null)";
}

static void err_value(verifier *V, const tbc_value *v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void err_value(verifier *V, const tbc_value *v, const char *fmt, ...) {
	char msg[512], nb[32];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	V->ok = false;
	tbc_diags_add(V->d, TBC_ERR_INTERNAL, V->m->path, NULL, NULL, vname(v, nb, sizeof nb),
		      "IR verifier: %s (bug in tbc)", msg);
}

static void err_op(verifier *V, const tbc_op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void err_op(verifier *V, const tbc_op *op, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	V->ok = false;
	bool known = (unsigned)op->code < TBC_OP_COUNT;
	tbc_diags_add(V->d, TBC_ERR_INTERNAL, V->m->path, op->name, known ? tbc_ops[op->code].name : "?", NULL,
		      "IR verifier: %s (bug in tbc)", msg);
}

static void err_graph(verifier *V, const tbc_graph *g, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void err_graph(verifier *V, const tbc_graph *g, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	V->ok = false;
	tbc_diags_add(V->d, TBC_ERR_INTERNAL, V->m->path, NULL, NULL, NULL, "IR verifier: graph '%s': %s (bug in tbc)",
		      g && g->name ? g->name : "?", msg);
}

static int n_graphs_of(const tbc_attr *at) {
	if (at->kind == TBC_ATTR_GRAPH) return 1;
	if (at->kind == TBC_ATTR_GRAPHS) return at->n > 0 ? at->n : 0;
	return 0;
}

/* ---- Pass 1: structure.  Collects live ops and counts uses; stops the
 * verifier (fatal) when walking further could loop forever. */
static void walk_structure(verifier *V, const tbc_graph *g, const tbc_graph *parent, const tbc_op *parent_op, int depth) {
	if (depth > TBC_MAX_SUBGRAPH_DEPTH) {
		err_graph(V, g, "nested deeper than %d", TBC_MAX_SUBGRAPH_DEPTH);
		V->fatal = true;
		return;
	}
	int r = pset_add(&V->graphs, g);
	if (r <= 0) {
		V->ok = false;
		if (r == 0) err_graph(V, g, "reachable twice (a cycle of subgraphs, or one graph shared by two ops)");
		V->fatal = true;
		return;
	}
	if (g->module != V->m) err_graph(V, g, "belongs to another module");
	if (g->parent != parent) err_graph(V, g, "parent link is wrong");
	if (g->parent_op != parent_op) err_graph(V, g, "parent_op link is wrong");
	if (g->n_inputs < 0 || g->n_outputs < 0 || g->n_consts < 0 || (g->n_inputs && !g->inputs) ||
	    (g->n_outputs && !g->outputs) || (g->n_consts && !g->consts)) {
		err_graph(V, g, "value lists are malformed");
		V->fatal = true;
		return;
	}
	const tbc_op *prev = NULL;
	for (const tbc_op *op = g->first; op; prev = op, op = op->next) {
		int r2 = pset_add(&V->ops, op);
		if (r2 <= 0) {
			V->ok = false;
			if (r2 == 0) err_graph(V, g, "op list has a cycle or shares an op with another list");
			V->fatal = true;
			return;
		}
		if (op->prev != prev) err_op(V, op, "prev link is wrong");
		if (op->graph != g) err_op(V, op, "graph link does not name the graph that lists it");
		if (op->n_inputs < 0 || op->n_outputs < 0 || op->n_attrs < 0 || (op->n_inputs && !op->inputs) ||
		    (op->n_outputs && !op->outputs) || (op->n_attrs && !op->attrs)) {
			err_op(V, op, "operand lists are malformed");
			V->fatal = true;
			return;
		}
		for (int i = 0; i < op->n_inputs; i++) {
			const tbc_value *v = op->inputs[i];
			if (v && v->id < V->m->n_values) V->uses[v->id]++;
		}
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = n_graphs_of(at);
			if (n && !at->graphs) {
				err_op(V, op, "attribute '%s' has no graphs", at->name ? at->name : "?");
				continue;
			}
			for (int k = 0; k < n && !V->fatal; k++) {
				if (!at->graphs[k]) err_op(V, op, "attribute '%s' has a NULL graph", at->name ? at->name : "?");
				else walk_structure(V, at->graphs[k], g, op, depth + 1);
			}
			if (V->fatal) return;
		}
	}
	if (g->last != prev) err_graph(V, g, "last link is wrong");
}

/* ---- Pass 2: SSA, types, uses ---- */
static void check_type(verifier *V, const tbc_value *v) {
	const tbc_type *t = &v->type;
	bool untyped_ok = (V->flags & TBC_VERIFY_ALLOW_UNTYPED) && v->kind == TBC_VALUE_RESULT;
	if (untyped_ok && t->dtype == TBC_DT_UNDEFINED && t->rank < 0) return;
	if (!tbc_dtype_supported(t->dtype))
		err_value(V, v, "element type %s (%d) is not supported", tbc_dtype_name(t->dtype), (int)t->dtype);
	if (t->rank < -1 || t->rank > TBC_MAX_RANK) {
		err_value(V, v, "rank %d is outside -1..%d", t->rank, TBC_MAX_RANK);
		return;
	}
	for (int i = 0; i < t->rank; i++) {
		const tbc_dim *dm = &t->dims[i];
		if (dm->sym ? !*dm->sym : dm->size < 0) err_value(V, v, "dim %d is neither static nor named", i);
	}
}

static void check_const(verifier *V, const tbc_value *v) {
	const tbc_tensor *c = v->constant;
	if (!c || !c->data) {
		err_value(V, v, "constant has no data");
		return;
	}
	const tbc_type *t = &v->type;
	bool same = c->dtype == t->dtype && c->rank == t->rank && c->rank >= 0 && c->rank <= TBC_MAX_RANK;
	for (int i = 0; same && i < c->rank; i++) same = !t->dims[i].sym && t->dims[i].size == c->dims[i];
	if (!same) {
		err_value(V, v, "constant data (%s, rank %d) does not match the value's type", tbc_dtype_name(c->dtype), c->rank);
		return;
	}
	if (tbc_shape_numel(c->rank, c->dims) != c->numel) err_value(V, v, "constant's element count does not match its dims");
}

static void check_uses(verifier *V, const tbc_value *v) {
	uint32_t want = V->uses[v->id], n = 0, limit = want + 64; /* a bound, in case the list loops */
	for (const tbc_use *u = v->uses; u; u = u->next) {
		if (++n > limit) break;
		if (!u->op || !pset_has(&V->ops, u->op)) {
			err_value(V, v, "use list names an op that is not in any graph");
			continue;
		}
		if (u->index < 0 || u->index >= u->op->n_inputs || u->op->inputs[u->index] != v)
			err_value(V, v, "use list entry (input %d of %s) does not match the op's inputs", u->index,
				  (unsigned)u->op->code < TBC_OP_COUNT ? tbc_ops[u->op->code].name : "?");
	}
	if (n > limit) err_value(V, v, "use list has more than %" PRIu32 " entries but the value is an input %" PRIu32 " times", limit, want);
	else if (n != want) err_value(V, v, "use list has %" PRIu32 " entries but the value is an input %" PRIu32 " times", n, want);
}

static void define(verifier *V, const tbc_value *v, const tbc_graph *g, tbc_value_kind kind, const tbc_op *op, int index) {
	if (v->id >= V->m->n_values) {
		err_value(V, v, "id %" PRIu32 " is not below the module's value count %" PRIu32, v->id, V->m->n_values);
		return;
	}
	if (V->state[v->id] != UNSEEN) {
		err_value(V, v, "defined more than once");
		return;
	}
	V->state[v->id] = VISIBLE;
	static const char *const kinds[] = {"graph input", "constant", "op result"};
	if (v->kind != kind)
		err_value(V, v, "is a %s but its kind says %s", kinds[kind], (unsigned)v->kind < 3 ? kinds[v->kind] : "?");
	if (v->graph != g) err_value(V, v, "graph link does not name the graph that defines it");
	if (kind == TBC_VALUE_RESULT && (v->def != op || v->def_index != index))
		err_value(V, v, "def link does not name output %d of the op that defines it", index);
	check_type(V, v);
	if (kind == TBC_VALUE_CONST) check_const(V, v);
	check_uses(V, v);
}

static void hide(verifier *V, const tbc_value *v) {
	if (v && v->id < V->m->n_values && V->state[v->id] == VISIBLE) V->state[v->id] = GONE;
}

static bool has_use(const tbc_value *v, const tbc_op *op, int index, uint32_t limit) {
	uint32_t n = 0;
	for (const tbc_use *u = v->uses; u && n <= limit; u = u->next, n++)
		if (u->op == op && u->index == index) return true;
	return false;
}

static void check_op(verifier *V, const tbc_op *op);

static void check_graph(verifier *V, const tbc_graph *g) {
	for (int i = 0; i < g->n_inputs; i++) {
		if (!g->inputs[i]) err_graph(V, g, "input %d is NULL", i);
		else define(V, g->inputs[i], g, TBC_VALUE_INPUT, NULL, 0);
	}
	for (int i = 0; i < g->n_consts; i++) {
		if (!g->consts[i]) err_graph(V, g, "constant %d is NULL", i);
		else define(V, g->consts[i], g, TBC_VALUE_CONST, NULL, 0);
	}
	for (const tbc_op *op = g->first; op; op = op->next) check_op(V, op);
	char nb[32];
	for (int i = 0; i < g->n_outputs; i++) {
		const tbc_value *v = g->outputs[i];
		if (!v) err_graph(V, g, "output %d is NULL", i);
		else if (v->id >= V->m->n_values || V->state[v->id] != VISIBLE)
			err_graph(V, g, "output %d (%s) is not defined in the graph or an enclosing one", i, vname(v, nb, sizeof nb));
	}
	for (int i = 0; i < g->n_inputs; i++) hide(V, g->inputs[i]);
	for (int i = 0; i < g->n_consts; i++) hide(V, g->consts[i]);
	for (const tbc_op *op = g->first; op; op = op->next)
		for (int i = 0; i < op->n_outputs; i++) hide(V, op->outputs[i]);
}

static void check_op(verifier *V, const tbc_op *op) {
	if ((unsigned)op->code >= TBC_OP_COUNT) {
		err_op(V, op, "opcode %d is not in ops.def", (int)op->code);
		return;
	}
	const tbc_opinfo *info = &tbc_ops[op->code];
	if (op->n_inputs < info->min_inputs || (info->max_inputs >= 0 && op->n_inputs > info->max_inputs))
		err_op(V, op, "has %d inputs; ops.def allows %d to %d", op->n_inputs, info->min_inputs, info->max_inputs);
	if (op->n_outputs < info->min_outputs || (info->max_outputs >= 0 && op->n_outputs > info->max_outputs))
		err_op(V, op, "has %d outputs; ops.def allows %d to %d", op->n_outputs, info->min_outputs, info->max_outputs);
	char nb[32];
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *v = op->inputs[i];
		if (!v) continue;
		if (v->id >= V->m->n_values) {
			err_op(V, op, "input %d has id %" PRIu32 ", not below the module's value count", i, v->id);
			continue;
		}
		if (V->state[v->id] != VISIBLE)
			err_op(V, op, "input %d (%s) is not defined before this op in its graph or an enclosing one", i,
			       vname(v, nb, sizeof nb));
		if (!has_use(v, op, i, V->uses[v->id]))
			err_op(V, op, "input %d (%s) is missing from the value's use list", i, vname(v, nb, sizeof nb));
	}
	for (int a = 0; a < op->n_attrs; a++) {
		const tbc_attr *at = &op->attrs[a];
		if (!at->name) err_op(V, op, "attribute %d has no name", a);
		if ((at->kind == TBC_ATTR_TENSOR && (!at->tensors || !at->tensors[0])) ||
		    ((at->kind == TBC_ATTR_TENSORS) && at->n > 0 && !at->tensors))
			err_op(V, op, "tensor attribute '%s' has no tensor", at->name ? at->name : "?");
		int n = n_graphs_of(at);
		for (int k = 0; k < n && at->graphs; k++)
			if (at->graphs[k]) check_graph(V, at->graphs[k]);
	}
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i]) define(V, op->outputs[i], op->graph, TBC_VALUE_RESULT, op, i);
}

bool tbc_verify_ex(const tbc_module *m, tbc_diags *d, unsigned flags) {
	if (!m || !m->main) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "IR verifier: no module or no main graph (bug in tbc)");
		return false;
	}
	verifier V = {.m = m, .d = d, .flags = flags, .ok = true};
	size_t n = m->n_values ? m->n_values : 1;
	V.uses = calloc(n, sizeof *V.uses);
	V.state = calloc(n, sizeof *V.state);
	if (!V.uses || !V.state) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory");
		V.ok = false;
	} else {
		walk_structure(&V, m->main, NULL, NULL, 0);
		if (!V.fatal) check_graph(&V, m->main);
	}
	free(V.uses);
	free(V.state);
	free(V.ops.slots);
	free(V.graphs.slots);
	return V.ok;
}

bool tbc_verify(const tbc_module *m, tbc_diags *d) { return tbc_verify_ex(m, d, 0); }
