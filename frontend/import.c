/* Import of a GraphProto into an IR graph: initializers and Constant nodes
 * become CONST values, graph inputs become INPUT values with their declared
 * types (dim_param -> named symbolic dim, missing dim -> fresh symbolic dim),
 * nodes become ops, names are resolved through lexically nested scopes.
 * An initializer that is also a graph input is a constant with a default
 * value: we treat it as a constant. */
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

bool tbc_fe_err(tbc_fe *cx, tbc_code code, const char *node, const char *op_type, const char *tensor,
		const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	tbc_diags_addv(cx->diags, code, cx->file, node, op_type, tensor, fmt, ap);
	va_end(ap);
	return false;
}

tbc_value tbc_fe_omitted;

/* ---- Scopes: open-addressing hash maps of name -> value ------------------ */
static uint64_t hash(const char *s) {
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

void tbc_fe_scope_free(tbc_fe_scope *s) {
	free(s->keys);
	free(s->vals);
	free(s->later);
	s->keys = s->later = NULL;
	s->vals = NULL;
	s->n = s->cap = s->n_later = s->cap_later = 0;
}

static size_t slot_of(const char **keys, size_t cap, const char *name) {
	size_t i = (size_t)hash(name) & (cap - 1);
	while (keys[i] && strcmp(keys[i], name)) i = (i + 1) & (cap - 1);
	return i;
}

static bool set_insert(const char ***keys, tbc_value ***vals, size_t *n, size_t *cap, const char *name,
		       tbc_value *v) {
	if (2 * (*n + 1) > *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		const char **nk = calloc(nc, sizeof *nk);
		tbc_value **nv = vals ? calloc(nc, sizeof *nv) : NULL;
		if (!nk || (vals && !nv)) {
			free(nk);
			free(nv);
			return false;
		}
		for (size_t i = 0; i < *cap; i++)
			if ((*keys)[i]) {
				size_t j = slot_of(nk, nc, (*keys)[i]);
				nk[j] = (*keys)[i];
				if (vals) nv[j] = (*vals)[i];
			}
		free(*keys);
		*keys = nk;
		if (vals) {
			free(*vals);
			*vals = nv;
		}
		*cap = nc;
	}
	size_t j = slot_of(*keys, *cap, name);
	if (!(*keys)[j]) (*n)++;
	(*keys)[j] = name;
	if (vals) (*vals)[j] = v;
	return true;
}

bool tbc_fe_scope_put(tbc_fe_scope *s, const char *name, tbc_value *v) {
	return set_insert(&s->keys, &s->vals, &s->n, &s->cap, name, v);
}

bool tbc_fe_scope_has_local(const tbc_fe_scope *s, const char *name) {
	return s->cap && s->keys[slot_of(s->keys, s->cap, name)];
}

tbc_value *tbc_fe_scope_lookup(const tbc_fe_scope *s, const char *name) {
	for (; s; s = s->parent)
		if (s->cap) {
			size_t j = slot_of(s->keys, s->cap, name);
			if (s->keys[j]) return s->vals[j];
		}
	return NULL;
}

bool tbc_fe_scope_is_later(const tbc_fe_scope *s, const char *name) {
	return s->cap_later && s->later[slot_of(s->later, s->cap_later, name)];
}

const char *tbc_fe_value_name(tbc_fe *cx, const char *name) {
	const char *prefix = cx->call ? cx->call->prefix : "";
	size_t a = strlen(prefix), b = strlen(name);
	char *r = tbc_arena_alloc(cx->m->arena, a + b + 1);
	if (!r) return NULL;
	memcpy(r, prefix, a);
	memcpy(r + a, name, b + 1);
	return r;
}

/* ---- Types --------------------------------------------------------------- */
/* The declared type of a graph input or output.  *has_type is false when the
 * ValueInfo carries none (allowed for subgraph inputs). */
static bool import_type(tbc_fe *cx, const Onnx__ValueInfoProto *vi, tbc_type *t, bool *has_type) {
	const char *name = tbc_fe_str(vi->name);
	memset(t, 0, sizeof *t);
	t->rank = -1;
	*has_type = false;
	const Onnx__TypeProto *tp = vi->type;
	if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return true;
	if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, NULL, NULL, name,
				  "only tensor types are supported (sequence, map, optional and sparse types are not)");
	const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
	int et = tt->has_elem_type ? tt->elem_type : 0;
	if (et != 0 && !tbc_dtype_valid(et))
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, name, "unknown element type %d", et);
	if (et != 0 && !tbc_dtype_supported((tbc_dtype)et))
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, NULL, NULL, name, "element type %s is not supported",
				  tbc_dtype_name((tbc_dtype)et));
	t->dtype = (tbc_dtype)et;
	*has_type = et != 0;
	if (!tt->shape) return true;
	if (tt->shape->n_dim > TBC_MAX_RANK)
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, NULL, NULL, name, "rank %zu exceeds the limit of %d",
				  tt->shape->n_dim, TBC_MAX_RANK);
	t->rank = (int)tt->shape->n_dim;
	for (int i = 0; i < t->rank; i++) {
		const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
			if (d->dim_value < 0)
				return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, name, "dim %d is negative (%lld)", i,
						  (long long)d->dim_value);
			t->dims[i] = (tbc_dim){d->dim_value, NULL};
		} else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
			   *d->dim_param) {
			const char *sym = tbc_arena_strdup(cx->m->arena, d->dim_param);
			if (!sym) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, name, "out of memory");
			t->dims[i] = (tbc_dim){-1, sym};
		} else {
			t->dims[i] = tbc_module_fresh_dim(cx->m);
		}
	}
	return true;
}

/* ---- Graphs -------------------------------------------------------------- */
static bool define(tbc_fe *cx, tbc_fe_scope *scope, const char *name, tbc_value *v, const char *what) {
	if (tbc_fe_scope_has_local(scope, name))
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, name,
				  "%s '%s' redefines a name already defined in this graph (values must have one definition)",
				  what, name);
	if (!tbc_fe_scope_put(scope, name, v)) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, name, "out of memory");
	return true;
}

/* The weights are decoded: drop protobuf-c's copy of their bytes now rather
 * than when the whole ModelProto is freed, so a large model is held about
 * once, not twice.  (protobuf-c allocates each bytes field on its own with
 * malloc, and skips NULL ones when freeing the message.) */
static void release_raw_data(Onnx__TensorProto *tp) {
	if (!tp->has_raw_data || !tp->raw_data.data) return;
	free(tp->raw_data.data);
	tp->raw_data.data = NULL;
	tp->raw_data.len = 0;
}

static bool add_initializers(tbc_fe *cx, tbc_graph *g, const Onnx__GraphProto *gp, tbc_fe_scope *scope) {
	for (size_t i = 0; i < gp->n_initializer; i++) {
		const Onnx__TensorProto *tp = gp->initializer[i];
		const char *name = tbc_fe_str(tp->name);
		if (!*name) return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL, "initializer %zu has no name", i);
		tbc_tensor *t = NULL;
		if (tbc_fe_tensor_from_proto(tp, cx->base_dir, cx->file, cx->diags, &t)) return false;
		if (!cx->call) release_raw_data(gp->initializer[i]); /* a function body may be imported again */
		if (!tbc_fe_count_tensor(cx, t, NULL, NULL)) {
			tbc_tensor_destroy(t);
			return false;
		}
		tbc_value *v = tbc_graph_add_const(g, tbc_fe_value_name(cx, name), t);
		tbc_tensor_destroy(t);
		if (!v) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, name, "out of memory");
		if (!define(cx, scope, name, v, "initializer")) return false;
	}
	for (size_t i = 0; i < gp->n_sparse_initializer; i++) {
		const Onnx__SparseTensorProto *sp = gp->sparse_initializer[i];
		const char *name = sp->values ? tbc_fe_str(sp->values->name) : "";
		if (!*name) return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL, "sparse initializer %zu has no name", i);
		tbc_tensor *t = NULL;
		if (tbc_fe_tensor_from_sparse(sp, cx->base_dir, cx->file, cx->diags, &t)) return false;
		if (!tbc_fe_count_tensor(cx, t, NULL, NULL)) {
			tbc_tensor_destroy(t);
			return false;
		}
		tbc_value *v = tbc_graph_add_const(g, tbc_fe_value_name(cx, name), t);
		tbc_tensor_destroy(t);
		if (!v) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, name, "out of memory");
		if (!define(cx, scope, name, v, "initializer")) return false;
	}
	return true;
}

static bool add_inputs(tbc_fe *cx, tbc_graph *g, const Onnx__GraphProto *gp, tbc_fe_scope *scope) {
	for (size_t i = 0; i < gp->n_input; i++) {
		const Onnx__ValueInfoProto *vi = gp->input[i];
		const char *name = tbc_fe_str(vi->name);
		if (!*name) return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL, "graph input %zu has no name", i);
		tbc_value *init = tbc_fe_scope_lookup(scope, name);
		if (init && tbc_fe_scope_has_local(scope, name) && init->kind == TBC_VALUE_CONST) continue;
		tbc_type t;
		bool has_type;
		if (!import_type(cx, vi, &t, &has_type)) return false;
		if (!has_type && !g->parent)
			return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, name, "graph input '%s' has no tensor type", name);
		tbc_value *v = tbc_graph_add_input(g, tbc_fe_value_name(cx, name), &t);
		if (!v) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, name, "out of memory");
		if (!define(cx, scope, name, v, "graph input")) return false;
	}
	return true;
}

static bool note_later(tbc_fe *cx, const Onnx__GraphProto *gp, tbc_fe_scope *scope) {
	for (size_t i = 0; i < gp->n_node; i++)
		for (size_t k = 0; k < gp->node[i]->n_output; k++) {
			const char *o = tbc_fe_str(gp->node[i]->output[k]);
			if (*o && !set_insert(&scope->later, NULL, &scope->n_later, &scope->cap_later, o, NULL))
				return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, "out of memory");
		}
	return true;
}

/* Declared types of the main graph's outputs, checked after inference. */
static bool add_outputs(tbc_fe *cx, tbc_graph *g, const Onnx__GraphProto *gp, tbc_fe_scope *scope) {
	for (size_t i = 0; i < gp->n_output; i++) {
		const char *name = tbc_fe_str(gp->output[i]->name);
		tbc_value *v = *name ? tbc_fe_scope_lookup(scope, name) : NULL;
		if (!v || v == &tbc_fe_omitted)
			return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, name,
					  "graph output '%s' is not defined by any node, input or initializer", name);
		tbc_type t;
		bool has_type;
		if (!import_type(cx, gp->output[i], &t, &has_type)) return false;
		if (!tbc_graph_add_output(g, v)) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, name, "out of memory");
	}
	return true;
}

bool tbc_fe_import_graph(tbc_fe *cx, tbc_graph *g, const Onnx__GraphProto *gp, tbc_fe_scope *scope) {
	if (!add_initializers(cx, g, gp, scope) || !add_inputs(cx, g, gp, scope) || !note_later(cx, gp, scope))
		return false;
	for (size_t i = 0; i < gp->n_node; i++)
		if (!tbc_fe_import_node(cx, g, scope, gp->node[i])) return false;
	return add_outputs(cx, g, gp, scope);
}
