/* A deep copy of a module, so that the compile paths can run the passes on
 * their own copy of a module the caller keeps (the API takes a const
 * module).  The copy is built in one fixed order (each graph's inputs,
 * constants, ops in order with their attributes and subgraphs, outputs), so
 * it is the same every time: compiling twice gives the same bytes.
 * Constant tensors are shared, not copied (weights can be large and nothing
 * writes a constant in place); everything else lives in the copy's arena. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct cloner {
	const tbc_module *src;
	tbc_module *dst;
	tbc_value **map; /* source value id -> copy */
	uint32_t n_map;  /* entries of map */
} cloner;

static bool copy_type(cloner *C, tbc_type *to, const tbc_type *from) {
	*to = *from;
	for (int d = 0; d < from->rank && d < TBC_MAX_RANK; d++)
		if (from->dims[d].sym && !(to->dims[d].sym = tbc_arena_strdup(C->dst->arena, from->dims[d].sym)))
			return false;
	return true;
}

static bool copy_value_fields(cloner *C, tbc_value *to, const tbc_value *from) {
	if (from->name && !to->name && !(to->name = tbc_arena_strdup(C->dst->arena, from->name))) return false;
	to->mem_offset = from->mem_offset;
	C->map[from->id] = to;
	if (from->svals) {
		to->svals = tbc_arena_array(C->dst->arena, (size_t)from->n_svals, sizeof *to->svals);
		if (!to->svals) return false;
		to->n_svals = from->n_svals;
		for (int i = 0; i < from->n_svals; i++) {
			to->svals[i] = from->svals[i];
			if (from->svals[i].sym && !(to->svals[i].sym = tbc_arena_strdup(C->dst->arena, from->svals[i].sym)))
				return false;
		}
	}
	return copy_type(C, &to->type, &from->type);
}

/* Within one module (tbc_op_clone) a value the copy does not define, read
 * from an enclosing graph, stays itself. */
static tbc_value *mapped(cloner *C, const tbc_value *v) {
	tbc_value *to = v && v->id < C->n_map ? C->map[v->id] : NULL;
	return !to && C->src == C->dst ? (tbc_value *)v : to;
}

static bool clone_graph(cloner *C, const tbc_graph *from, tbc_graph *to);

static void *dup_bytes(tbc_arena *a, const void *p, size_t n) {
	void *q = tbc_arena_alloc(a, n ? n : 1);
	if (q && n) memcpy(q, p, n);
	return q;
}

static bool copy_attr(cloner *C, tbc_op *op, const tbc_attr *from) {
	tbc_arena *a = C->dst->arena;
	tbc_attr *at = tbc_op_add_attr(op, from->name, from->kind);
	if (!at) return false;
	at->i = from->i;
	at->f = from->f;
	at->n = from->n;
	size_t n = from->n > 0 ? (size_t)from->n : 0;
	if (from->s) {
		char *s = tbc_arena_alloc(a, from->s_len + 1);
		if (!s) return false;
		memcpy(s, from->s, from->s_len);
		at->s = s;
		at->s_len = from->s_len;
	}
	if (from->ints && !(at->ints = dup_bytes(a, from->ints, n * sizeof *from->ints))) return false;
	if (from->floats && !(at->floats = dup_bytes(a, from->floats, n * sizeof *from->floats))) return false;
	if (from->strings) {
		if (!(at->strings = tbc_arena_array(a, n + 1, sizeof *at->strings))) return false;
		for (size_t i = 0; i < n; i++)
			if (from->strings[i] && !(at->strings[i] = tbc_arena_strdup(a, from->strings[i]))) return false;
	}
	size_t n_tensors = from->kind == TBC_ATTR_TENSOR ? 1 : n;
	if (from->tensors && !(at->tensors = dup_bytes(a, from->tensors, n_tensors * sizeof *from->tensors)))
		return false;
	if (from->graphs) {
		size_t n_graphs = from->kind == TBC_ATTR_GRAPH ? 1 : n;
		if (!(at->graphs = tbc_arena_array(a, n_graphs + 1, sizeof *at->graphs))) return false;
		for (size_t i = 0; i < n_graphs; i++) {
			const tbc_graph *g = from->graphs[i];
			if (!g) continue;
			tbc_graph *ng = tbc_graph_new(C->dst, op->graph, g->name);
			if (!ng) return false;
			ng->parent_op = op;
			at->graphs[i] = ng;
			if (!clone_graph(C, g, ng)) return false;
		}
	}
	return true;
}

static bool clone_graph(cloner *C, const tbc_graph *from, tbc_graph *to) {
	for (int i = 0; i < from->n_inputs; i++) {
		const tbc_value *v = from->inputs[i];
		tbc_value *nv = tbc_graph_add_input(to, v->name, NULL);
		if (!nv || !copy_value_fields(C, nv, v)) return false;
	}
	for (int i = 0; i < from->n_consts; i++) {
		const tbc_value *v = from->consts[i];
		tbc_value *nv = tbc_graph_add_const_shared(to, v->name, v->constant);
		if (!nv || !copy_value_fields(C, nv, v)) return false;
	}
	tbc_value *small[16];
	for (const tbc_op *op = from->first; op; op = op->next) {
		tbc_value **ins = op->n_inputs <= 16 ? small : tbc_arena_array(C->dst->arena, (size_t)op->n_inputs, sizeof *ins);
		if (!ins) return false;
		for (int i = 0; i < op->n_inputs; i++) {
			ins[i] = op->inputs[i] ? mapped(C, op->inputs[i]) : NULL;
			if (op->inputs[i] && !ins[i]) return false; /* used before its definition: not a valid module */
		}
		tbc_op *nop = tbc_op_new(to, op->code, op->name, op->n_inputs, ins, op->n_outputs);
		if (!nop) return false;
		for (int i = 0; i < op->n_outputs; i++) {
			if (!op->outputs[i]) {
				nop->outputs[i] = NULL;
				continue;
			}
			if (!copy_value_fields(C, nop->outputs[i], op->outputs[i])) return false;
		}
		for (int a = 0; a < op->n_attrs; a++)
			if (!copy_attr(C, nop, &op->attrs[a])) return false;
	}
	for (int i = 0; i < from->n_outputs; i++) {
		tbc_value *v = mapped(C, from->outputs[i]);
		if (!v || !tbc_graph_add_output(to, v)) return false;
	}
	return true;
}

tbc_module *tbc_module_clone(const tbc_module *m) {
	if (!m || !m->main) return NULL;
	tbc_module *c = tbc_module_new(m->path);
	if (!c) return NULL;
	cloner C = {m, c, tbc_arena_array(c->arena, (size_t)m->n_values + 1, sizeof(tbc_value *)), m->n_values};
	c->ir_version = m->ir_version;
	c->opset = m->opset;
	c->n_syms = m->n_syms;
	if (m->producer) c->producer = tbc_arena_strdup(c->arena, m->producer);
	if (m->main->name) c->main->name = tbc_arena_strdup(c->arena, m->main->name);
	if (!C.map || !clone_graph(&C, m->main, c->main)) {
		tbc_module_destroy(c);
		return NULL;
	}
	return c;
}

tbc_op *tbc_op_clone(tbc_op *op) {
	tbc_module *m = op->graph->module;
	cloner C = {m, m, calloc((size_t)m->n_values + 1, sizeof(tbc_value *)), m->n_values};
	tbc_op *nop = C.map ? tbc_op_new(op->graph, op->code, op->name, op->n_inputs, op->inputs, op->n_outputs) : NULL;
	bool ok = nop != NULL;
	for (int i = 0; ok && i < op->n_outputs; i++) {
		if (!op->outputs[i]) {
			nop->outputs[i] = NULL;
			continue;
		}
		/* A copy of the value, not of its name: names stay unique. */
		tbc_value *nv = nop->outputs[i];
		ok = copy_type(&C, &nv->type, &op->outputs[i]->type);
		nv->mem_offset = -1;
		nv->svals = op->outputs[i]->svals; /* same arena: shared, never written */
		nv->n_svals = op->outputs[i]->n_svals;
	}
	for (int a = 0; ok && a < op->n_attrs; a++) ok = copy_attr(&C, nop, &op->attrs[a]);
	free(C.map);
	return ok ? nop : NULL;
}
