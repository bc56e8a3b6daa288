/* Building and editing the graph IR. */
#include <stdio.h>
#include <string.h>

#include "ir.h"

tbc_module *tbc_module_new(const char *path) {
	tbc_arena *a = tbc_arena_create();
	if (!a) return NULL;
	tbc_module *m = tbc_arena_alloc(a, sizeof *m);
	if (!m) {
		tbc_arena_destroy(a);
		return NULL;
	}
	m->arena = a;
	m->path = path ? tbc_arena_strdup(a, path) : NULL;
	m->main = tbc_graph_new(m, NULL, "main");
	if (!m->main) {
		tbc_arena_destroy(a);
		return NULL;
	}
	return m;
}

void tbc_module_destroy(tbc_module *m) {
	if (m) tbc_arena_destroy(m->arena);
}

tbc_graph *tbc_graph_new(tbc_module *m, tbc_graph *parent, const char *name) {
	tbc_graph *g = tbc_arena_alloc(m->arena, sizeof *g);
	if (!g) return NULL;
	g->module = m;
	g->parent = parent;
	g->name = tbc_arena_strdup(m->arena, name ? name : "");
	return g;
}

/* Appends v to an arena array that doubles when full. */
static bool push(tbc_arena *a, tbc_value ***arr, int *n, int *cap, tbc_value *v) {
	if (*n == *cap) {
		int nc = *cap ? *cap * 2 : 4;
		tbc_value **na = tbc_arena_array(a, (size_t)nc, sizeof *na);
		if (!na) return false;
		if (*n) memcpy(na, *arr, (size_t)*n * sizeof *na);
		*arr = na;
		*cap = nc;
	}
	(*arr)[(*n)++] = v;
	return true;
}

static tbc_value *new_value(tbc_graph *g, const char *name, tbc_value_kind kind) {
	tbc_module *m = g->module;
	tbc_value *v = tbc_arena_alloc(m->arena, sizeof *v);
	if (!v) return NULL;
	v->id = m->n_values++;
	v->name = name ? tbc_arena_strdup(m->arena, name) : NULL;
	v->kind = kind;
	v->graph = g;
	v->type.rank = -1;
	v->mem_offset = -1;
	return v;
}

tbc_value *tbc_graph_add_input(tbc_graph *g, const char *name, const tbc_type *type) {
	tbc_value *v = new_value(g, name, TBC_VALUE_INPUT);
	if (!v) return NULL;
	if (type) v->type = *type;
	if (!push(g->module->arena, &g->inputs, &g->n_inputs, &g->cap_inputs, v)) return NULL;
	return v;
}

tbc_value *tbc_graph_add_const(tbc_graph *g, const char *name, const tbc_tensor *value) {
	tbc_value *v = new_value(g, name, TBC_VALUE_CONST);
	if (!v) return NULL;
	v->constant = tbc_tensor_copy_to_arena(g->module->arena, value);
	if (!v->constant) return NULL;
	tbc_type_set(&v->type, value->dtype, value->rank, value->dims);
	if (!push(g->module->arena, &g->consts, &g->n_consts, &g->cap_consts, v)) return NULL;
	return v;
}

tbc_value *tbc_graph_add_const_shared(tbc_graph *g, const char *name, tbc_tensor *value) {
	tbc_value *v = new_value(g, name, TBC_VALUE_CONST);
	if (!v) return NULL;
	v->constant = value;
	tbc_type_set(&v->type, value->dtype, value->rank, value->dims);
	if (!push(g->module->arena, &g->consts, &g->n_consts, &g->cap_consts, v)) return NULL;
	return v;
}

bool tbc_graph_add_output(tbc_graph *g, tbc_value *v) {
	return push(g->module->arena, &g->outputs, &g->n_outputs, &g->cap_outputs, v);
}

static void add_use(tbc_op *op, int index, tbc_value *v) {
	tbc_use *u = tbc_arena_alloc(op->graph->module->arena, sizeof *u);
	if (!u) return;
	u->op = op;
	u->index = index;
	u->next = v->uses;
	v->uses = u;
}

static void drop_use(tbc_op *op, int index, tbc_value *v) {
	for (tbc_use **p = &v->uses; *p; p = &(*p)->next)
		if ((*p)->op == op && (*p)->index == index) {
			*p = (*p)->next;
			return;
		}
}

tbc_op *tbc_op_new(tbc_graph *g, tbc_opcode code, const char *name, int n_inputs,
		   tbc_value *const *inputs, int n_outputs) {
	tbc_arena *a = g->module->arena;
	tbc_op *op = tbc_arena_alloc(a, sizeof *op);
	if (!op) return NULL;
	op->code = code;
	op->graph = g;
	op->name = tbc_arena_strdup(a, name ? name : "");
	op->n_inputs = n_inputs;
	op->inputs = tbc_arena_array(a, (size_t)(n_inputs ? n_inputs : 1), sizeof *op->inputs);
	op->n_outputs = n_outputs;
	op->outputs = tbc_arena_array(a, (size_t)(n_outputs ? n_outputs : 1), sizeof *op->outputs);
	if (!op->inputs || !op->outputs) return NULL;
	for (int i = 0; i < n_inputs; i++)
		if (inputs && inputs[i]) tbc_op_set_input(op, i, inputs[i]);
	for (int i = 0; i < n_outputs; i++) {
		tbc_value *v = new_value(g, NULL, TBC_VALUE_RESULT);
		if (!v) return NULL;
		v->def = op;
		v->def_index = i;
		op->outputs[i] = v;
	}
	op->prev = g->last;
	if (g->last)
		g->last->next = op;
	else
		g->first = op;
	g->last = op;
	return op;
}

void tbc_op_set_input(tbc_op *op, int index, tbc_value *v) {
	if (op->inputs[index]) drop_use(op, index, op->inputs[index]);
	op->inputs[index] = v;
	if (v) add_use(op, index, v);
}

bool tbc_op_resize_inputs(tbc_op *op, int n_inputs) {
	if (n_inputs <= op->n_inputs) {
		for (int i = n_inputs; i < op->n_inputs; i++) tbc_op_set_input(op, i, NULL);
		op->n_inputs = n_inputs;
		return true;
	}
	tbc_value **in = tbc_arena_array(op->graph->module->arena, (size_t)n_inputs, sizeof *in);
	if (!in) return false;
	if (op->n_inputs) memcpy(in, op->inputs, (size_t)op->n_inputs * sizeof *in);
	op->inputs = in;
	op->n_inputs = n_inputs;
	return true;
}

void tbc_op_remove(tbc_op *op) {
	tbc_graph *g = op->graph;
	for (int i = 0; i < op->n_inputs; i++) tbc_op_set_input(op, i, NULL);
	if (op->prev)
		op->prev->next = op->next;
	else
		g->first = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else
		g->last = op->prev;
	op->prev = op->next = NULL;
}

void tbc_value_replace_uses(tbc_value *from, tbc_value *to) {
	while (from->uses) {
		tbc_use *u = from->uses;
		tbc_op_set_input(u->op, u->index, to);
	}
	for (tbc_graph *g = from->graph; g; g = g->parent)
		for (int i = 0; i < g->n_outputs; i++)
			if (g->outputs[i] == from) g->outputs[i] = to;
}

size_t tbc_value_use_count(const tbc_value *v) {
	size_t n = 0;
	for (const tbc_use *u = v->uses; u; u = u->next) n++;
	return n;
}

tbc_attr *tbc_op_add_attr(tbc_op *op, const char *name, tbc_attr_kind kind) {
	tbc_arena *a = op->graph->module->arena;
	tbc_attr *attrs = tbc_arena_array(a, (size_t)op->n_attrs + 1, sizeof *attrs);
	if (!attrs) return NULL;
	if (op->n_attrs) memcpy(attrs, op->attrs, (size_t)op->n_attrs * sizeof *attrs);
	op->attrs = attrs;
	tbc_attr *at = &attrs[op->n_attrs++];
	at->name = tbc_arena_strdup(a, name);
	at->kind = kind;
	return at;
}

bool tbc_op_remove_attr(tbc_op *op, const char *name) {
	for (int i = 0; i < op->n_attrs; i++)
		if (!strcmp(op->attrs[i].name, name)) {
			memmove(&op->attrs[i], &op->attrs[i + 1], (size_t)(op->n_attrs - i - 1) * sizeof *op->attrs);
			op->n_attrs--;
			return true;
		}
	return false;
}

const char *tbc_value_display_name(const tbc_value *v, char *buf, size_t size) {
	if (v->name) return v->name;
	snprintf(buf, size, "%%%u", v->id);
	return buf;
}

tbc_dim tbc_module_fresh_dim(tbc_module *m) {
	char name[32];
	snprintf(name, sizeof name, "_d%u", m->n_syms++);
	return (tbc_dim){-1, tbc_arena_strdup(m->arena, name)};
}

/* ---- Types ---- */
bool tbc_type_is_static(const tbc_type *t) {
	if (t->rank < 0) return false;
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i].sym) return false;
	return true;
}

int64_t tbc_type_numel(const tbc_type *t) {
	if (!tbc_type_is_static(t)) return -1;
	int64_t d[TBC_MAX_RANK];
	for (int i = 0; i < t->rank; i++) d[i] = t->dims[i].size;
	return tbc_shape_numel(t->rank, d);
}

bool tbc_dim_eq(tbc_dim a, tbc_dim b) {
	if (a.sym || b.sym) return a.sym && b.sym && !strcmp(a.sym, b.sym);
	return a.size == b.size;
}

bool tbc_type_same_dims(const tbc_type *a, const tbc_type *b) {
	if (a->rank != b->rank || a->rank < 0) return false;
	for (int i = 0; i < a->rank; i++)
		if (!tbc_dim_eq(a->dims[i], b->dims[i])) return false;
	return true;
}

void tbc_type_set(tbc_type *t, tbc_dtype dt, int rank, const int64_t *dims) {
	memset(t, 0, sizeof *t);
	t->dtype = dt;
	t->rank = rank;
	for (int i = 0; i < rank && i < TBC_MAX_RANK; i++) t->dims[i] = (tbc_dim){dims[i], NULL};
}

void tbc_type_set_unknown_dims(tbc_module *m, tbc_type *t, tbc_dtype dt, int rank) {
	memset(t, 0, sizeof *t);
	t->dtype = dt;
	t->rank = rank;
	for (int i = 0; i < rank && i < TBC_MAX_RANK; i++) t->dims[i] = tbc_module_fresh_dim(m);
}
