/* Import of one NodeProto: a Constant becomes a CONST value, a call of a
 * model-local function is inlined, anything else becomes the canonical op of
 * its op_type with its attributes (subgraphs imported as nested graphs) and
 * is then rewritten into the newest opset's form (canon.c). */
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

#define NERR(code, ...) TBC_FE_ERR(cx, code, nname, op_type, NULL, __VA_ARGS__)

static bool is_onnx_domain(const char *d) { return !*d || !strcmp(d, "ai.onnx"); }

/* ---- Attributes ---------------------------------------------------------- */
/* protobuf-c leaves data NULL for empty bytes. */
static const char *bytes_dup(tbc_arena *ar, ProtobufCBinaryData b) {
	return b.len ? tbc_arena_strndup(ar, (const char *)b.data, b.len) : tbc_arena_strdup(ar, "");
}

static bool import_subgraph(tbc_fe *cx, tbc_op *op, tbc_fe_scope *outer, const Onnx__GraphProto *gp,
			    tbc_graph **out) {
	const char *nname = op->name, *op_type = tbc_ops[op->code].onnx_name;
	if (cx->graph_depth >= TBC_MAX_SUBGRAPH_DEPTH)
		return NERR(TBC_ERR_UNSUPPORTED, "subgraphs are nested deeper than the limit of %d", TBC_MAX_SUBGRAPH_DEPTH);
	tbc_graph *sg = tbc_graph_new(cx->m, op->graph, tbc_fe_str(gp->name));
	if (!sg) return NERR(TBC_ERR_NO_MEMORY, "out of memory");
	sg->parent_op = op;
	tbc_fe_scope scope = {.parent = outer};
	cx->graph_depth++;
	bool ok = tbc_fe_import_graph(cx, sg, gp, &scope);
	cx->graph_depth--;
	tbc_fe_scope_free(&scope);
	*out = sg;
	return ok;
}

static bool import_attr(tbc_fe *cx, tbc_op *op, tbc_fe_scope *scope, const char *name,
			const Onnx__AttributeProto *a) {
	const char *nname = op->name, *op_type = tbc_ops[op->code].onnx_name;
	tbc_arena *ar = cx->m->arena;
	int type = a->has_type ? (int)a->type : 0;
	if (!type) {
		/* IR version 1 attributes carry no type: infer it from the field set. */
		if (a->has_f) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
		else if (a->has_i) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
		else if (a->has_s) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
		else if (a->t) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
		else if (a->g) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
		else if (a->n_floats) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
		else if (a->n_ints) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
		else if (a->n_strings) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
		else if (a->n_tensors) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
		else if (a->n_graphs) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
		else return NERR(TBC_ERR_INVALID_MODEL, "attribute '%s' has no type and no value", name);
	}
	tbc_attr *at;
	switch (type) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
		if (!(at = tbc_op_add_attr(op, name, TBC_ATTR_INT))) break;
		at->i = a->i;
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
		if (!(at = tbc_op_add_attr(op, name, TBC_ATTR_FLOAT))) break;
		at->f = a->f;
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
		if (!(at = tbc_op_add_attr(op, name, TBC_ATTR_STRING))) break;
		at->s = bytes_dup(ar, a->s);
		at->s_len = a->s.len;
		if (!at->s) break;
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
		if (a->n_ints > INT32_MAX) break;
		if (!(at = tbc_op_add_attr(op, name, TBC_ATTR_INTS))) break;
		at->n = (int)a->n_ints;
		if (!(at->ints = tbc_arena_array(ar, a->n_ints ? a->n_ints : 1, sizeof *at->ints))) break;
		if (a->n_ints) memcpy(at->ints, a->ints, a->n_ints * sizeof *at->ints);
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
		if (a->n_floats > INT32_MAX) break;
		if (!(at = tbc_op_add_attr(op, name, TBC_ATTR_FLOATS))) break;
		at->n = (int)a->n_floats;
		if (!(at->floats = tbc_arena_array(ar, a->n_floats ? a->n_floats : 1, sizeof *at->floats))) break;
		for (size_t i = 0; i < a->n_floats; i++) at->floats[i] = a->floats[i];
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
		if (a->n_strings > INT32_MAX) break;
		if (!(at = tbc_op_add_attr(op, name, TBC_ATTR_STRINGS))) break;
		at->n = (int)a->n_strings;
		if (!(at->strings = tbc_arena_array(ar, a->n_strings ? a->n_strings : 1, sizeof *at->strings))) break;
		for (size_t i = 0; i < a->n_strings; i++)
			if (!(at->strings[i] = bytes_dup(ar, a->strings[i])))
				goto oom;
		return true;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: {
		bool one = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
		size_t n = one ? 1 : a->n_tensors;
		if (one && !a->t) return NERR(TBC_ERR_INVALID_MODEL, "tensor attribute '%s' has no tensor", name);
		if (n > INT32_MAX) break;
		if (!(at = tbc_op_add_attr(op, name, one ? TBC_ATTR_TENSOR : TBC_ATTR_TENSORS))) break;
		at->n = (int)n;
		if (!(at->tensors = tbc_arena_array(ar, n ? n : 1, sizeof *at->tensors))) break;
		for (size_t i = 0; i < n; i++) {
			tbc_tensor *t = NULL;
			if (tbc_fe_tensor_from_proto(one ? a->t : a->tensors[i], cx->base_dir, cx->file, cx->diags, &t))
				return NERR(tbc_diags_first_code(cx->diags), "attribute '%s' holds a bad tensor", name);
			if (!tbc_fe_count_tensor(cx, t, nname, op_type)) {
				tbc_tensor_destroy(t);
				return false;
			}
			at->tensors[i] = tbc_tensor_copy_to_arena(ar, t);
			tbc_tensor_destroy(t);
			if (!at->tensors[i]) goto oom;
		}
		return true;
	}
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: {
		bool one = type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
		size_t n = one ? 1 : a->n_graphs;
		if (one && !a->g) return NERR(TBC_ERR_INVALID_MODEL, "graph attribute '%s' has no graph", name);
		if (n > INT32_MAX) break;
		if (!(at = tbc_op_add_attr(op, name, one ? TBC_ATTR_GRAPH : TBC_ATTR_GRAPHS))) break;
		at->n = (int)n;
		if (!(at->graphs = tbc_arena_array(ar, n ? n : 1, sizeof *at->graphs))) break;
		for (size_t i = 0; i < n; i++)
			if (!import_subgraph(cx, op, scope, one ? a->g : a->graphs[i], &at->graphs[i])) return false;
		return true;
	}
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: {
		tbc_tensor *t = NULL;
		if (!a->sparse_tensor) return NERR(TBC_ERR_INVALID_MODEL, "attribute '%s' has no sparse tensor", name);
		if (tbc_fe_tensor_from_sparse(a->sparse_tensor, cx->base_dir, cx->file, cx->diags, &t)) return false;
		if (!tbc_fe_count_tensor(cx, t, nname, op_type)) {
			tbc_tensor_destroy(t);
			return false;
		}
		at = tbc_op_add_attr(op, name, TBC_ATTR_TENSOR);
		bool ok = at && (at->tensors = tbc_arena_array(ar, 1, sizeof *at->tensors)) &&
			  (at->tensors[0] = tbc_tensor_copy_to_arena(ar, t));
		tbc_tensor_destroy(t);
		if (!ok) goto oom;
		at->n = 1;
		return true;
	}
	default:
		return NERR(TBC_ERR_UNSUPPORTED, "attribute '%s' has a kind tbc does not support (%d)", name, type);
	}
oom:
	return NERR(TBC_ERR_NO_MEMORY, "out of memory for attribute '%s'", name);
}

/* ---- Constant ------------------------------------------------------------- */
static bool import_constant(tbc_fe *cx, tbc_graph *g, tbc_fe_scope *scope, const Onnx__NodeProto *n,
			    const tbc_fe_attr_ref *attrs, size_t n_attrs) {
	const char *nname = tbc_fe_str(n->name), *op_type = "Constant";
	if (n->n_output != 1 || !*tbc_fe_str(n->output[0]))
		return NERR(TBC_ERR_INVALID_MODEL, "Constant must have exactly one named output");
	if (n_attrs != 1)
		return NERR(TBC_ERR_INVALID_MODEL, "Constant must have exactly one value attribute, it has %zu", n_attrs);
	const char *an = attrs[0].name;
	const Onnx__AttributeProto *a = attrs[0].a;
	tbc_tensor *t = NULL;
	if (!strcmp(an, "value")) {
		if (!a->t) return NERR(TBC_ERR_INVALID_MODEL, "Constant 'value' holds no tensor");
		if (tbc_fe_tensor_from_proto(a->t, cx->base_dir, cx->file, cx->diags, &t)) return false;
	} else if (!strcmp(an, "sparse_value")) {
		if (!a->sparse_tensor) return NERR(TBC_ERR_INVALID_MODEL, "Constant 'sparse_value' holds no tensor");
		if (tbc_fe_tensor_from_sparse(a->sparse_tensor, cx->base_dir, cx->file, cx->diags, &t)) return false;
	} else if (!strcmp(an, "value_float") || !strcmp(an, "value_int")) {
		bool f = an[6] == 'f';
		t = tbc_tensor_create(f ? TBC_DT_F32 : TBC_DT_I64, 0, NULL);
		if (t && f) ((float *)t->data)[0] = a->f;
		if (t && !f) ((int64_t *)t->data)[0] = a->i;
	} else if (!strcmp(an, "value_floats") || !strcmp(an, "value_ints")) {
		bool f = an[6] == 'f';
		int64_t len = (int64_t)(f ? a->n_floats : a->n_ints);
		t = tbc_tensor_create(f ? TBC_DT_F32 : TBC_DT_I64, 1, &len);
		if (t && len) memcpy(t->data, f ? (void *)a->floats : (void *)a->ints, (size_t)len * (f ? 4 : 8));
	} else if (!strcmp(an, "value_string") || !strcmp(an, "value_strings")) {
		return NERR(TBC_ERR_UNSUPPORTED, "string constants are not supported");
	} else {
		return NERR(TBC_ERR_INVALID_MODEL, "Constant has an unknown attribute '%s'", an);
	}
	if (!t) return NERR(TBC_ERR_NO_MEMORY, "out of memory");
	const char *oname = n->output[0];
	if (!tbc_fe_count_tensor(cx, t, nname, op_type)) {
		tbc_tensor_destroy(t);
		return false;
	}
	tbc_value *v = tbc_graph_add_const(g, tbc_fe_value_name(cx, oname), t);
	tbc_tensor_destroy(t);
	if (!v) return NERR(TBC_ERR_NO_MEMORY, "out of memory");
	if (tbc_fe_scope_has_local(scope, oname))
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, oname,
				  "output '%s' redefines a name already defined in this graph (values must have one definition)",
				  oname);
	if (!tbc_fe_scope_put(scope, oname, v)) return NERR(TBC_ERR_NO_MEMORY, "out of memory");
	return true;
}

/* ---- Ops ------------------------------------------------------------------ */
/* Before canonicalisation: canon.c may rely on the required outputs. */
static bool check_outputs(tbc_fe *cx, const tbc_op *op, const char *nname, const char *op_type) {
	const tbc_opinfo *oi = &tbc_ops[op->code];
	if (op->n_outputs < oi->min_outputs)
		return NERR(TBC_ERR_INVALID_MODEL, "needs at least %d outputs, has %d", oi->min_outputs, op->n_outputs);
	/* Only optional outputs may be omitted (""): the first min_outputs are required. */
	for (int i = 0; i < oi->min_outputs; i++)
		if (!op->outputs[i]) return NERR(TBC_ERR_INVALID_MODEL, "required output %d is omitted", i);
	return true;
}

static bool check_arity(tbc_fe *cx, const tbc_op *op, const char *nname, const char *op_type) {
	const tbc_opinfo *oi = &tbc_ops[op->code];
	if (op->n_inputs < oi->min_inputs)
		return NERR(TBC_ERR_INVALID_MODEL, "needs at least %d inputs, has %d", oi->min_inputs, op->n_inputs);
	/* Dropout's fourth input is tbc's own (a training step's seed offset). */
	int max_inputs = op->code == TBC_OP_Dropout ? 3 : oi->max_inputs;
	if (max_inputs >= 0 && op->n_inputs > max_inputs)
		return NERR(TBC_ERR_INVALID_MODEL, "takes at most %d inputs, has %d", max_inputs, op->n_inputs);
	if (op->n_outputs < oi->min_outputs)
		return NERR(TBC_ERR_INVALID_MODEL, "needs at least %d outputs, has %d", oi->min_outputs, op->n_outputs);
	if (oi->max_outputs >= 0 && op->n_outputs > oi->max_outputs)
		return NERR(TBC_ERR_INVALID_MODEL, "has at most %d outputs, has %d", oi->max_outputs, op->n_outputs);
	/* The first min_inputs inputs are required (ops.def), except Loop's M
	 * and cond and Scan-8's sequence_lens, which may be omitted (""). */
	int first = op->code == TBC_OP_Loop ? 2 : op->code == TBC_OP_Scan && cx->opset < 9 ? 1 : 0;
	for (int i = first; i < oi->min_inputs && i < op->n_inputs; i++)
		if (!op->inputs[i]) return NERR(TBC_ERR_INVALID_MODEL, "required input %d is missing", i);
	/* Variadic ops whose every input is required (ONNX: not "optional"). */
	switch (op->code) {
	case TBC_OP_Concat: case TBC_OP_Max: case TBC_OP_Min: case TBC_OP_Mean: case TBC_OP_Sum: case TBC_OP_Einsum:
		for (int i = 0; i < op->n_inputs; i++)
			if (!op->inputs[i]) return NERR(TBC_ERR_INVALID_MODEL, "required input %d is missing", i);
		break;
	default: break;
	}
	/* Only optional outputs may be omitted (""): the first min_outputs are required. */
	for (int i = 0; i < oi->min_outputs && i < op->n_outputs; i++)
		if (!op->outputs[i]) return NERR(TBC_ERR_INVALID_MODEL, "required output %d is omitted", i);
	return true;
}

bool tbc_fe_import_node(tbc_fe *cx, tbc_graph *g, tbc_fe_scope *scope, const Onnx__NodeProto *n) {
	const char *nname = tbc_fe_str(n->name), *op_type = tbc_fe_str(n->op_type);
	const char *domain = tbc_fe_str(n->domain);
	if (!*op_type) return NERR(TBC_ERR_INVALID_MODEL, "node has no op_type");
	if (n->n_input > 4096 || n->n_output > 4096)
		return NERR(TBC_ERR_UNSUPPORTED, "node has more than 4096 inputs or outputs");
	tbc_fe_function *fn = tbc_fe_find_function(cx, domain, op_type);
	if (fn) return tbc_fe_inline_call(cx, g, scope, n, fn);
	if (!is_onnx_domain(domain))
		return NERR(TBC_ERR_UNSUPPORTED, "domain '%s' is not supported (only ai.onnx)", domain);
	if (cx->opset < 0) return NERR(TBC_ERR_INVALID_MODEL, "the model has no opset_import for the ai.onnx domain");

	tbc_fe_attr_ref *attrs = NULL;
	size_t n_attrs = 0;
	if (!tbc_fe_resolve_attrs(cx, n, &attrs, &n_attrs)) return false;
	bool ok = false;
	if (!strcmp(op_type, "Constant")) {
		ok = import_constant(cx, g, scope, n, attrs, n_attrs);
		free(attrs);
		return ok;
	}
	tbc_value **in = NULL;
	tbc_opcode code = tbc_fe_canon_opcode(op_type);
	if (code == TBC_OP_COUNT) {
		NERR(TBC_ERR_UNSUPPORTED, "op '%s' is not supported", op_type);
		goto out;
	}
	in = calloc(n->n_input ? n->n_input : 1, sizeof *in);
	if (!in) {
		NERR(TBC_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n->n_input; i++) {
		const char *iname = tbc_fe_str(n->input[i]);
		if (!*iname) continue;
		in[i] = tbc_fe_scope_lookup(scope, iname);
		if (in[i] == &tbc_fe_omitted) {
			in[i] = NULL;
			continue;
		}
		if (!in[i]) {
			if (tbc_fe_scope_is_later(scope, iname))
				TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, iname,
					   "input '%s' is produced by a later node: the graph has a cycle or is not in "
					   "topological order", iname);
			else
				TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, iname, "input '%s' is not defined", iname);
			goto out;
		}
	}
	tbc_op *op = tbc_op_new(g, code, nname, (int)n->n_input, in, (int)n->n_output);
	if (!op) {
		NERR(TBC_ERR_NO_MEMORY, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n_attrs; i++) {
		if (tbc_op_attr(op, attrs[i].name)) {
			NERR(TBC_ERR_INVALID_MODEL, "attribute '%s' is given twice", attrs[i].name);
			goto out;
		}
		if (!import_attr(cx, op, scope, attrs[i].name, attrs[i].a)) goto out;
	}
	for (size_t i = 0; i < n->n_output; i++) {
		const char *oname = tbc_fe_str(n->output[i]);
		if (!*oname) {
			op->outputs[i] = NULL;
			continue;
		}
		if (tbc_fe_scope_has_local(scope, oname)) {
			TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, oname,
				   "output '%s' redefines a name already defined in this graph (values must have one "
				   "definition)", oname);
			goto out;
		}
		op->outputs[i]->name = tbc_fe_value_name(cx, oname);
		if (!op->outputs[i]->name || !tbc_fe_scope_put(scope, oname, op->outputs[i])) {
			NERR(TBC_ERR_NO_MEMORY, "out of memory");
			goto out;
		}
	}
	if (!check_outputs(cx, op, nname, op_type) || !tbc_fe_canon_op(op, op_type, cx->opset, cx->diags)) goto out;
	ok = check_arity(cx, op, nname, op_type);
out:
	free(in);
	free(attrs);
	return ok;
}
