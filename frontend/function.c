/* Model-local functions (ModelProto.functions) are inlined where they are
 * called.  The body is imported in a scope of its own that sees only the
 * formal inputs (bound to the caller's values); values the body defines get
 * a prefix unique to the call so inlined names never clash; attribute
 * references (ref_attr_name) resolve to the caller's attributes, then to the
 * function's defaults (attribute_proto), else the attribute is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

/* FunctionProto.attribute_proto: newer than some system onnx.proto files, so
 * we read it from protobuf-c's unknown fields when the generated code lacks it. */
#define FUNCTION_ATTRIBUTE_PROTO_FIELD 11

static bool is_onnx_domain(const char *d) { return !*d || !strcmp(d, "ai.onnx"); }

static int64_t onnx_opset_of(Onnx__OperatorSetIdProto *const *ops, size_t n, int64_t dflt) {
	for (size_t i = 0; i < n; i++)
		if (is_onnx_domain(tbc_fe_str(ops[i]->domain)) && ops[i]->has_version) return ops[i]->version;
	return dflt;
}

/* protobuf-c keeps an unknown length-delimited field with its length varint
 * in front; the pre-scan has checked the bytes, we check them again. */
static bool skip_length_prefix(const ProtobufCMessageUnknownField *u, const uint8_t **body, size_t *len) {
	uint64_t n = 0;
	size_t i = 0;
	for (int shift = 0; i < u->len && shift < 64; shift += 7) {
		uint8_t b = u->data[i++];
		n |= (uint64_t)(b & 0x7F) << shift;
		if (!(b & 0x80)) {
			if (n != u->len - i) return false;
			*body = u->data + i;
			*len = (size_t)n;
			return true;
		}
	}
	return false;
}

bool tbc_fe_functions_init(tbc_fe *cx, const Onnx__ModelProto *mp) {
	if (!mp->n_functions) return true;
	cx->functions = calloc(mp->n_functions, sizeof *cx->functions);
	if (!cx->functions) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, "out of memory");
	cx->n_functions = mp->n_functions;
	for (size_t i = 0; i < mp->n_functions; i++) {
		const Onnx__FunctionProto *fp = mp->functions[i];
		tbc_fe_function *f = &cx->functions[i];
		f->proto = fp;
		f->opset = onnx_opset_of(fp->opset_import, fp->n_opset_import, cx->opset);
		const ProtobufCMessage *base = &fp->base;
		size_t n = 0;
		for (unsigned k = 0; k < base->n_unknown_fields; k++)
			if (base->unknown_fields[k].tag == FUNCTION_ATTRIBUTE_PROTO_FIELD) n++;
		if (!n) continue;
		f->defaults = calloc(n, sizeof *f->defaults);
		if (!f->defaults) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, "out of memory");
		for (unsigned k = 0; k < base->n_unknown_fields; k++) {
			const ProtobufCMessageUnknownField *u = &base->unknown_fields[k];
			if (u->tag != FUNCTION_ATTRIBUTE_PROTO_FIELD) continue;
			Onnx__AttributeProto *a = NULL;
			const uint8_t *body;
			size_t len;
			if (u->wire_type == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED && skip_length_prefix(u, &body, &len))
				a = onnx__attribute_proto__unpack(NULL, len, body);
			if (!a)
				return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL,
						  "function '%s' has a malformed default attribute", tbc_fe_str(fp->name));
			f->defaults[f->n_defaults++] = a;
		}
	}
	return true;
}

void tbc_fe_functions_free(tbc_fe *cx) {
	for (size_t i = 0; i < cx->n_functions; i++) {
		for (size_t k = 0; k < cx->functions[i].n_defaults; k++)
			onnx__attribute_proto__free_unpacked(cx->functions[i].defaults[k], NULL);
		free(cx->functions[i].defaults);
	}
	free(cx->functions);
	cx->functions = NULL;
	cx->n_functions = 0;
}

tbc_fe_function *tbc_fe_find_function(tbc_fe *cx, const char *domain, const char *name) {
	/* A standard op is never overridden by a function of the same name. */
	if (is_onnx_domain(domain) && (tbc_fe_canon_opcode(name) != TBC_OP_COUNT || !strcmp(name, "Constant")))
		return NULL;
	for (size_t i = 0; i < cx->n_functions; i++) {
		const Onnx__FunctionProto *fp = cx->functions[i].proto;
		if (!strcmp(tbc_fe_str(fp->name), name) && !strcmp(tbc_fe_str(fp->domain), domain))
			return &cx->functions[i];
	}
	return NULL;
}

bool tbc_fe_resolve_attrs(tbc_fe *cx, const Onnx__NodeProto *n, tbc_fe_attr_ref **out, size_t *n_out) {
	*out = NULL;
	*n_out = 0;
	if (!n->n_attribute) return true;
	tbc_fe_attr_ref *r = calloc(n->n_attribute, sizeof *r);
	if (!r) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n->n_attribute; i++) {
		const Onnx__AttributeProto *a = n->attribute[i];
		const char *name = tbc_fe_str(a->name), *ref = tbc_fe_str(a->ref_attr_name);
		if (!*name) {
			free(r);
			return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, tbc_fe_str(n->name), tbc_fe_str(n->op_type), NULL,
					  "attribute %zu has no name", i);
		}
		if (!*ref) {
			r[k++] = (tbc_fe_attr_ref){name, a};
			continue;
		}
		const tbc_fe_call *call = cx->call;
		if (!call) {
			free(r);
			return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, tbc_fe_str(n->name), tbc_fe_str(n->op_type), NULL,
					  "attribute '%s' refers to '%s' outside a function body", name, ref);
		}
		const Onnx__AttributeProto *found = NULL;
		for (size_t j = 0; j < call->n_attrs && !found; j++)
			if (!strcmp(call->attrs[j].name, ref)) found = call->attrs[j].a;
		for (size_t j = 0; j < call->fn->n_defaults && !found; j++)
			if (!strcmp(tbc_fe_str(call->fn->defaults[j]->name), ref)) found = call->fn->defaults[j];
		if (found) r[k++] = (tbc_fe_attr_ref){name, found};
	}
	*out = r;
	*n_out = k;
	return true;
}

bool tbc_fe_count_tensor(tbc_fe *cx, const tbc_tensor *t, const char *node, const char *op_type) {
	if (!cx->call) return true;
	size_t bytes = (size_t)t->numel * tbc_dtype_size(t->dtype);
	if (bytes > TBC_MAX_INLINED_BYTES - cx->inlined_bytes)
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, node, op_type, NULL,
				  "inlining model-local functions would copy more than %zu MiB of tensors",
				  TBC_MAX_INLINED_BYTES >> 20);
	cx->inlined_bytes += bytes;
	return true;
}

/* Binds the caller's output name to v, the value the body computed for a
 * formal output: renames v when the call defined it, else copies it through
 * an Identity so the output has a value of its own. */
static bool bind_output(tbc_fe *cx, tbc_graph *g, tbc_fe_scope *scope, const char *oname, tbc_value *v,
			uint32_t first_id, const char *prefix) {
	const char *vname = tbc_fe_value_name(cx, oname);
	if (!vname) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, oname, "out of memory");
	bool own = v->id >= first_id && v->kind == TBC_VALUE_RESULT && v->name &&
		   !strncmp(v->name, prefix, strlen(prefix));
	if (own) {
		v->name = vname;
	} else {
		tbc_op *id = tbc_op_new(g, TBC_OP_Identity, "", 1, &v, 1);
		if (!id) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, oname, "out of memory");
		id->outputs[0]->name = vname;
		v = id->outputs[0];
	}
	if (tbc_fe_scope_has_local(scope, oname))
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, NULL, NULL, oname,
				  "output '%s' redefines a name already defined in this graph (values must have one definition)",
				  oname);
	if (!tbc_fe_scope_put(scope, oname, v)) return TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, NULL, NULL, oname, "out of memory");
	return true;
}

bool tbc_fe_inline_call(tbc_fe *cx, tbc_graph *g, tbc_fe_scope *scope, const Onnx__NodeProto *n,
			tbc_fe_function *fn) {
	const char *nname = tbc_fe_str(n->name), *op_type = tbc_fe_str(n->op_type);
	const Onnx__FunctionProto *fp = fn->proto;
	if (fn->active)
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, NULL, "function '%s' calls itself", op_type);
	if (cx->call_depth >= TBC_MAX_FUNCTION_DEPTH)
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, nname, op_type, NULL,
				  "function calls are nested deeper than the limit of %d", TBC_MAX_FUNCTION_DEPTH);
	if (fp->n_node > TBC_MAX_INLINED_NODES - cx->n_inlined)
		return TBC_FE_ERR(cx, TBC_ERR_UNSUPPORTED, nname, op_type, NULL,
				  "inlining model-local functions would create more than %d nodes", TBC_MAX_INLINED_NODES);
	cx->n_inlined += fp->n_node;
	if (n->n_input > fp->n_input || n->n_output > fp->n_output)
		return TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, NULL,
				  "function '%s' takes %zu inputs and %zu outputs, the node has %zu and %zu", op_type,
				  fp->n_input, fp->n_output, n->n_input, n->n_output);
	tbc_fe_call call = {.outer = cx->call, .fn = fn};
	if (!tbc_fe_resolve_attrs(cx, n, &call.attrs, &call.n_attrs)) return false;
	tbc_fe_scope fscope = {0};
	bool ok = false;
	for (size_t i = 0; i < fp->n_input; i++) {
		const char *iname = i < n->n_input ? tbc_fe_str(n->input[i]) : "";
		tbc_value *v = *iname ? tbc_fe_scope_lookup(scope, iname) : &tbc_fe_omitted;
		if (!v) {
			TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, iname, "input '%s' is not defined", iname);
			goto out;
		}
		if (!tbc_fe_scope_put(&fscope, tbc_fe_str(fp->input[i]), v)) {
			TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, nname, op_type, NULL, "out of memory");
			goto out;
		}
	}
	char buf[64];
	snprintf(buf, sizeof buf, "__%u/", cx->n_calls++);
	const char *outer = cx->call ? cx->call->prefix : "";
	size_t len = strlen(outer) + strlen(op_type) + strlen(buf) + 1;
	char *prefix = tbc_arena_alloc(cx->m->arena, len);
	if (!prefix) {
		TBC_FE_ERR(cx, TBC_ERR_NO_MEMORY, nname, op_type, NULL, "out of memory");
		goto out;
	}
	snprintf(prefix, len, "%s%s%s", outer, op_type, buf);
	call.prefix = prefix;
	uint32_t first_id = cx->m->n_values;
	const tbc_fe_call *saved_call = cx->call;
	int64_t saved_opset = cx->opset;
	cx->call = &call;
	cx->opset = fn->opset;
	cx->call_depth++;
	fn->active = true;
	ok = true;
	for (size_t i = 0; i < fp->n_node && ok; i++) ok = tbc_fe_import_node(cx, g, &fscope, fp->node[i]);
	fn->active = false;
	cx->call_depth--;
	cx->opset = saved_opset;
	cx->call = saved_call;
	for (size_t i = 0; i < n->n_output && ok; i++) {
		const char *oname = tbc_fe_str(n->output[i]), *formal = tbc_fe_str(fp->output[i]);
		if (!*oname) continue;
		tbc_value *v = tbc_fe_scope_lookup(&fscope, formal);
		if (!v || v == &tbc_fe_omitted) {
			ok = TBC_FE_ERR(cx, TBC_ERR_INVALID_MODEL, nname, op_type, formal,
					"function '%s' never defines its output '%s'", op_type, formal);
			break;
		}
		ok = bind_output(cx, g, scope, oname, v, first_id, prefix);
	}
out:
	tbc_fe_scope_free(&fscope);
	free(call.attrs);
	return ok;
}
