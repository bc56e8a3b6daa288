/* Common subexpression elimination.
 *
 * Does: makes readers of a constant equal by value (same dtype, dims and
 * bytes) to an earlier visible one read that one, and readers of an op equal
 * to an earlier visible one (same opcode, same inputs, equal attributes,
 * same wanted results of the same types) read the earlier op's results.  A
 * value is visible where the text form lets it be read: earlier in its graph
 * or in the graphs around, before the op owning the subgraph.  The
 * duplicates are removed.
 * Requires: a verified, inferred module.
 * Guarantees: the module computes the same outputs.  Never merged: ops with
 * effects (Dropout in training mode), ops with subgraphs, results whose
 * inferred types differ (two NonZero of one input name two different
 * data-dependent dims), and a model output whose name would change.
 * Attribute floats compare by bits, so 0.0 and -0.0 differ and NaN equals
 * itself. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

typedef struct entry {
	uint64_t hash;
	tbc_value *konst; /* a constant, or */
	tbc_op *op;       /* an op */
} entry;

typedef struct cse {
	tbc_module *m;
	entry *e;
	size_t n, cap;
	bool oom;
} cse;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static size_t tensor_bytes(const tbc_tensor *t) {
	return (size_t)t->numel * tbc_dtype_size(t->dtype);
}

/* Hashes the type and at most 64 spans of 64 bytes spread over the data:
 * weights of hundreds of megabytes are not read whole to be told apart, and
 * equal hashes are confirmed byte by byte. */
static uint64_t hash_tensor(uint64_t h, const tbc_tensor *t) {
	h = fnv(h, &t->dtype, sizeof t->dtype);
	h = fnv(h, &t->rank, sizeof t->rank);
	h = fnv(h, t->dims, (size_t)t->rank * sizeof *t->dims);
	size_t n = tensor_bytes(t);
	if (n <= 64 * 64) return fnv(h, t->data, n);
	const unsigned char *b = t->data;
	for (size_t k = 0; k < 64; k++) h = fnv(h, b + (n - 64) / 63 * k, 64);
	return h;
}

static bool tensor_eq(const tbc_tensor *a, const tbc_tensor *b) {
	return a->dtype == b->dtype && a->rank == b->rank &&
	       !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims) &&
	       !memcmp(a->data, b->data, tensor_bytes(a));
}

static bool attr_eq(const tbc_attr *a, const tbc_attr *b) {
	if (a->kind != b->kind) return false;
	switch (a->kind) {
	case TBC_ATTR_INT: return a->i == b->i;
	case TBC_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
	case TBC_ATTR_STRING: return a->s_len == b->s_len && !memcmp(a->s, b->s, a->s_len);
	case TBC_ATTR_INTS: return a->n == b->n && !memcmp(a->ints, b->ints, (size_t)a->n * sizeof *a->ints);
	case TBC_ATTR_FLOATS: return a->n == b->n && !memcmp(a->floats, b->floats, (size_t)a->n * sizeof *a->floats);
	case TBC_ATTR_STRINGS:
		if (a->n != b->n) return false;
		for (int i = 0; i < a->n; i++)
			if (strcmp(a->strings[i], b->strings[i])) return false;
		return true;
	case TBC_ATTR_TENSOR: return tensor_eq(a->tensors[0], b->tensors[0]);
	case TBC_ATTR_TENSORS:
		if (a->n != b->n) return false;
		for (int i = 0; i < a->n; i++)
			if (!tensor_eq(a->tensors[i], b->tensors[i])) return false;
		return true;
	case TBC_ATTR_GRAPH:
	case TBC_ATTR_GRAPHS: return false;
	}
	return false;
}

static bool attrs_eq(const tbc_op *a, const tbc_op *b) {
	if (a->n_attrs != b->n_attrs) return false;
	for (int i = 0; i < a->n_attrs; i++) {
		const tbc_attr *other = tbc_op_attr(b, a->attrs[i].name);
		if (!other || !attr_eq(&a->attrs[i], other)) return false;
	}
	return true;
}

static uint64_t hash_op(const tbc_op *op) {
	uint64_t h = fnv(14695981039346656037ull, &op->code, sizeof op->code);
	for (int i = 0; i < op->n_inputs; i++) {
		uint32_t id = op->inputs[i] ? op->inputs[i]->id : UINT32_MAX;
		h = fnv(h, &id, sizeof id);
	}
	return fnv(h, &op->n_outputs, sizeof op->n_outputs);
}

static bool ops_eq(const tbc_op *a, const tbc_op *b) {
	if (a->code != b->code || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs) return false;
	for (int i = 0; i < a->n_inputs; i++)
		if (a->inputs[i] != b->inputs[i]) return false;
	for (int i = 0; i < a->n_outputs; i++) {
		if (!a->outputs[i] != !b->outputs[i]) return false;
		if (a->outputs[i] && !pass_same_type(&a->outputs[i]->type, &b->outputs[i]->type)) return false;
	}
	return attrs_eq(a, b);
}

static bool push(cse *C, entry e) {
	if (C->n == C->cap) {
		size_t nc = C->cap ? C->cap * 2 : 256;
		entry *ne = realloc(C->e, nc * sizeof *ne);
		if (!ne) return C->oom = true, false;
		C->e = ne;
		C->cap = nc;
	}
	C->e[C->n++] = e;
	return true;
}

/* Replacing `from` by `to` must not rename a model output. */
static bool may_replace(const cse *C, const tbc_value *from, const tbc_value *to) {
	if (!pass_is_model_output(C->m, from)) return true;
	return from->name == to->name || (from->name && to->name && !strcmp(from->name, to->name));
}

static bool is_read(const cse *C, const tbc_value *v) {
	return v->uses || pass_is_returned(C->m, v);
}

static void cse_graph(cse *C, tbc_graph *g) {
	size_t scope = C->n;
	int kept = 0;
	for (int i = 0; i < g->n_consts; i++) {
		tbc_value *c = g->consts[i];
		uint64_t h = hash_tensor(14695981039346656037ull, c->constant);
		tbc_value *same = NULL;
		for (size_t k = 0; k < C->n && !same; k++)
			if (C->e[k].konst && C->e[k].hash == h && tensor_eq(C->e[k].konst->constant, c->constant) &&
			    may_replace(C, c, C->e[k].konst))
				same = C->e[k].konst;
		if (same) pass_replace_value(C->m, c, same);
		if (same && !is_read(C, c)) continue;
		g->consts[kept++] = c;
		if (!same && !push(C, (entry){h, c, NULL})) return;
	}
	g->n_consts = kept;
	for (tbc_op *op = g->first, *next; op; op = next) {
		next = op->next;
		if (pass_has_graph_attr(op)) {
			for (int a = 0; a < op->n_attrs; a++) {
				tbc_attr *at = &op->attrs[a];
				int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
				for (int k = 0; k < n && !C->oom; k++) cse_graph(C, at->graphs[k]);
			}
			continue;
		}
		if (pass_has_effects(op)) continue;
		uint64_t h = hash_op(op);
		tbc_op *same = NULL;
		for (size_t k = C->n; k-- > 0 && !same;)
			if (C->e[k].op && C->e[k].hash == h && ops_eq(C->e[k].op, op)) same = C->e[k].op;
		for (int i = 0; same && i < op->n_outputs; i++)
			if (op->outputs[i] && !may_replace(C, op->outputs[i], same->outputs[i])) same = NULL;
		if (!same) {
			if (!push(C, (entry){h, NULL, op})) return;
			continue;
		}
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i]) pass_replace_value(C->m, op->outputs[i], same->outputs[i]);
		pass_remove_op(op);
	}
	C->n = scope; /* what this graph defines is not visible after it */
}

bool tbc_pass_cse(tbc_module *m, tbc_diags *d) {
	cse C = {m, NULL, 0, 0, false};
	cse_graph(&C, m->main);
	free(C.e);
	if (C.oom) tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory");
	return !C.oom;
}
