/* Helpers shared by the passes (passes/util.h). */
#include "passes/util.h"

#include <stdlib.h>
#include <string.h>

void pass_unlink(tbc_op *op) {
	tbc_graph *g = op->graph;
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

static void drop_uses_within(tbc_graph *g) {
	for (tbc_op *o = g->first; o; o = o->next) {
		for (int i = 0; i < o->n_inputs; i++) tbc_op_set_input(o, i, NULL);
		for (int a = 0; a < o->n_attrs; a++) {
			const tbc_attr *at = &o->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++) drop_uses_within(at->graphs[k]);
		}
	}
}

void pass_remove_op(tbc_op *op) {
	for (int a = 0; a < op->n_attrs; a++) {
		const tbc_attr *at = &op->attrs[a];
		int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
		for (int k = 0; k < n; k++) drop_uses_within(at->graphs[k]);
	}
	tbc_op_remove(op);
}

void pass_insert_before(tbc_op *op, tbc_op *before) {
	tbc_graph *g = before->graph;
	op->graph = g;
	op->next = before;
	op->prev = before->prev;
	if (before->prev)
		before->prev->next = op;
	else
		g->first = op;
	before->prev = op;
}

void pass_insert_after(tbc_op *op, tbc_op *after) {
	tbc_graph *g = after->graph;
	op->graph = g;
	op->prev = after;
	op->next = after->next;
	if (after->next)
		after->next->prev = op;
	else
		g->last = op;
	after->next = op;
}

tbc_op *pass_top_op(const tbc_graph *g, tbc_op *op) {
	while (op && op->graph != g) op = op->graph->parent_op;
	return op;
}

bool pass_has_graph_attr(const tbc_op *op) {
	for (int a = 0; a < op->n_attrs; a++)
		if (op->attrs[a].kind == TBC_ATTR_GRAPH || op->attrs[a].kind == TBC_ATTR_GRAPHS) return true;
	return false;
}

static int attr_graph_count(const tbc_attr *at) {
	if (at->kind == TBC_ATTR_GRAPH) return 1;
	if (at->kind == TBC_ATTR_GRAPHS) return at->n;
	return 0;
}

bool pass_each_graph(tbc_graph *g, pass_graph_fn fn, void *ctx) {
	if (!fn(g, ctx)) return false;
	for (tbc_op *op = g->first; op; op = op->next)
		for (int a = 0; a < op->n_attrs; a++)
			for (int k = 0; k < attr_graph_count(&op->attrs[a]); k++)
				if (!pass_each_graph(op->attrs[a].graphs[k], fn, ctx)) return false;
	return true;
}

static bool returns(const tbc_graph *g, const tbc_value *v) {
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == v) return true;
	for (const tbc_op *op = g->first; op; op = op->next)
		for (int a = 0; a < op->n_attrs; a++)
			for (int k = 0; k < attr_graph_count(&op->attrs[a]); k++)
				if (returns(op->attrs[a].graphs[k], v)) return true;
	return false;
}

bool pass_is_returned(const tbc_module *m, const tbc_value *v) {
	/* Only v's graph and graphs nested in it can see v. */
	(void)m;
	return returns(v->graph, v);
}

bool pass_is_model_output(const tbc_module *m, const tbc_value *v) {
	for (int i = 0; i < m->main->n_outputs; i++)
		if (m->main->outputs[i] == v) return true;
	return false;
}

static void replace_returned(tbc_graph *g, tbc_value *from, tbc_value *to) {
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == from) g->outputs[i] = to;
	for (tbc_op *op = g->first; op; op = op->next)
		for (int a = 0; a < op->n_attrs; a++)
			for (int k = 0; k < attr_graph_count(&op->attrs[a]); k++)
				replace_returned(op->attrs[a].graphs[k], from, to);
}

void pass_replace_value(tbc_module *m, tbc_value *from, tbc_value *to) {
	(void)m;
	while (from->uses) {
		tbc_use *u = from->uses;
		tbc_op_set_input(u->op, u->index, to);
	}
	replace_returned(from->graph, from, to);
}

bool pass_has_effects(const tbc_op *op) {
	if (op->code == TBC_OP_Dropout && op->n_inputs > 2 && op->inputs[2]) {
		/* training_mode: only a constant false makes Dropout an identity. */
		const tbc_tensor *t = tbc_input_const(op, 2);
		if (!t || t->numel != 1 || tbc_load_i64(t->dtype, t->data, 0) != 0) return true;
	}
	for (int a = 0; a < op->n_attrs; a++)
		for (int k = 0; k < attr_graph_count(&op->attrs[a]); k++)
			for (const tbc_op *o = op->attrs[a].graphs[k]->first; o; o = o->next)
				if (pass_has_effects(o)) return true;
	return false;
}

static bool one_static_element(const tbc_value *v) {
	const tbc_type *t = &v->type;
	if (t->rank < 0 || t->rank > 1) return false;
	return t->rank == 0 || (!t->dims[0].sym && t->dims[0].size == 1);
}

bool pass_qdq_elementwise(const tbc_op *op) {
	bool q = op->code == TBC_OP_QuantizeLinear;
	if ((!q && op->code != TBC_OP_DequantizeLinear) || op->n_outputs != 1 || !op->outputs[0] || op->n_inputs < 2)
		return false;
	const tbc_value *x = op->inputs[0], *s = op->inputs[1], *z = op->n_inputs > 2 ? op->inputs[2] : NULL;
	if (!x || !s || !one_static_element(s) || (z && !one_static_element(z))) return false;
	if (tbc_attr_int(op, "block_size", 0) != 0 || s->type.dtype != TBC_DT_F32) return false;
	tbc_dtype f = q ? x->type.dtype : op->outputs[0]->type.dtype;
	tbc_dtype i = q ? op->outputs[0]->type.dtype : x->type.dtype;
	if (f != TBC_DT_F32 || (q && tbc_attr_int(op, "precision", 0) != 0)) return false;
	if (z && z->type.dtype != i) return false;
	switch (i) {
	case TBC_DT_U8: case TBC_DT_I8: case TBC_DT_U16: case TBC_DT_I16: return true;
	case TBC_DT_I32: return !q;
	default: return false;
	}
}

int64_t pass_value_bytes(const tbc_value *v) {
	int64_t n = tbc_type_numel(&v->type);
	size_t es = tbc_dtype_size(v->type.dtype);
	if (n < 0 || es == 0 || n > INT64_MAX / (int64_t)es) return -1;
	return n * (int64_t)es;
}

bool pass_same_type(const tbc_type *a, const tbc_type *b) {
	if (a->dtype != b->dtype || a->rank != b->rank) return false;
	for (int i = 0; i < a->rank; i++)
		if (!tbc_dim_eq(a->dims[i], b->dims[i])) return false;
	return true;
}

bool pass_bits_get(const pass_bits *b, uint32_t i) {
	return i < b->n && (b->bits[i / 8] >> (i % 8) & 1);
}

bool pass_bits_set(pass_bits *b, uint32_t i) {
	if (i >= b->n) {
		uint32_t n = b->n ? b->n : 256;
		while (n <= i) n *= 2;
		uint8_t *nb = realloc(b->bits, n / 8);
		if (!nb) return false;
		memset(nb + b->n / 8, 0, (n - b->n) / 8);
		b->bits = nb;
		b->n = n;
	}
	b->bits[i / 8] |= (uint8_t)(1u << (i % 8));
	return true;
}

void pass_bits_free(pass_bits *b) {
	free(b->bits);
	b->bits = NULL;
	b->n = 0;
}

static size_t ptr_hash(const void *p, size_t cap) {
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

bool pass_map_init(pass_ptrmap *mp, size_t n) {
	mp->cap = 16;
	while (mp->cap < n * 2) mp->cap *= 2;
	mp->keys = calloc(mp->cap, sizeof *mp->keys);
	mp->vals = calloc(mp->cap, sizeof *mp->vals);
	return mp->keys && mp->vals;
}

void pass_map_put(pass_ptrmap *mp, const void *k, int v) {
	size_t i = ptr_hash(k, mp->cap);
	while (mp->keys[i] && mp->keys[i] != k) i = (i + 1) & (mp->cap - 1);
	mp->keys[i] = k;
	mp->vals[i] = v;
}

int pass_map_get(const pass_ptrmap *mp, const void *k) {
	size_t i = ptr_hash(k, mp->cap);
	while (mp->keys[i]) {
		if (mp->keys[i] == k) return mp->vals[i];
		i = (i + 1) & (mp->cap - 1);
	}
	return -1;
}

void pass_map_free(pass_ptrmap *mp) {
	free(mp->keys);
	free(mp->vals);
	mp->keys = NULL;
	mp->vals = NULL;
}
