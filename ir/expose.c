/* What `tbc check` needs to compare targets value by value: the inputs'
 * shapes, the main graph's nodes in the order they run, and a copy of a
 * module that returns chosen intermediate values as extra graph outputs.
 * Returning a value is how it is exposed on every target alike: the
 * interpreter keeps it, and compiled code must materialize a graph output
 * (fusion keeps values inside a group only when nothing else reads them). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ir.h"

int tbc_module_input_shape(const tbc_module *m, size_t i, int64_t *dims, const char **syms) {
	if (!m || i >= tbc_module_input_count(m)) return -1;
	const tbc_type *t = &m->main->inputs[i]->type;
	if (t->rank < 0 || t->rank > TBC_MAX_RANK) return -1;
	for (int k = 0; k < t->rank; k++) {
		dims[k] = t->dims[k].sym ? -1 : t->dims[k].size;
		if (syms) syms[k] = t->dims[k].sym;
	}
	return t->rank;
}

size_t tbc_module_node_count(const tbc_module *m) {
	size_t n = 0;
	for (const tbc_op *op = m ? m->main->first : NULL; op; op = op->next) n++;
	return n;
}

static const tbc_op *node_at(const tbc_module *m, size_t i) {
	const tbc_op *op = m ? m->main->first : NULL;
	for (; op && i; i--) op = op->next;
	return op;
}

static const char *op_type_name(const tbc_op *op) {
	const tbc_opinfo *info = &tbc_ops[op->code];
	return info->onnx_name && info->onnx_name[0] ? info->onnx_name : info->name;
}

tbc_code tbc_module_node_get(const tbc_module *m, size_t i, tbc_node_info *out_info) {
	memset(out_info, 0, sizeof *out_info);
	const tbc_op *op = node_at(m, i);
	if (!op) return TBC_ERR_INVALID_ARGUMENT;
	out_info->name = op->name ? op->name : "";
	out_info->op_type = op_type_name(op);
	out_info->n_inputs = (size_t)op->n_inputs;
	out_info->n_outputs = (size_t)op->n_outputs;
	return TBC_OK;
}

static const char *value_name(const tbc_value *v, char *buf, size_t size) {
	if (!v) return NULL;
	if (size) buf[0] = 0;
	return tbc_value_display_name(v, buf, size);
}

const char *tbc_module_node_input_name(const tbc_module *m, size_t i, size_t k, char *buf, size_t size) {
	const tbc_op *op = node_at(m, i);
	return op && k < (size_t)op->n_inputs ? value_name(op->inputs[k], buf, size) : NULL;
}

const char *tbc_module_node_output_name(const tbc_module *m, size_t i, size_t k, char *buf, size_t size) {
	const tbc_op *op = node_at(m, i);
	return op && k < (size_t)op->n_outputs ? value_name(op->outputs[k], buf, size) : NULL;
}

void tbc_module_node_input_type(const tbc_module *m, size_t i, size_t k, char *buf, size_t size) {
	if (!size) return;
	buf[0] = 0;
	const tbc_op *op = node_at(m, i);
	if (!op || k >= (size_t)op->n_inputs || !op->inputs[k]) return;
	const tbc_type *t = &op->inputs[k]->type;
	size_t used = (size_t)snprintf(buf, size, "%s[", tbc_dtype_name(t->dtype));
	if (t->rank < 0 || t->rank > TBC_MAX_RANK) used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "*");
	for (int d = 0; d >= 0 && d < t->rank && d < TBC_MAX_RANK && used < size; d++) {
		const tbc_dim *dim = &t->dims[d];
		if (dim->sym)
			used += (size_t)snprintf(buf + used, size - used, "%s%s", d ? "," : "", dim->sym);
		else
			used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", dim->size);
	}
	if (used < size) snprintf(buf + used, size - used, "]");
}

static bool is_returned(const tbc_graph *g, const tbc_value *v) {
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == v) return true;
	return false;
}

tbc_code tbc_module_expose_nodes(const tbc_module *m, const size_t *nodes, size_t n_nodes, tbc_diags *diags,
				 tbc_module **out_module) {
	*out_module = NULL;
	if (!m || (n_nodes && !nodes)) {
		tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "no module or no node list");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	size_t count = tbc_module_node_count(m);
	for (size_t j = 0; j < n_nodes; j++)
		if (nodes[j] >= count) {
			tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL,
				      "node %zu does not exist (the main graph has %zu)", nodes[j], count);
			return TBC_ERR_INVALID_ARGUMENT;
		}
	/* The copy's ops are in the same order as m's (ir/clone.c): index both. */
	tbc_module *copy = tbc_module_clone(m);
	const tbc_op **src = calloc(count + 1, sizeof *src);
	tbc_op **dst = calloc(count + 1, sizeof *dst);
	tbc_code rc = copy && src && dst ? TBC_OK : TBC_ERR_NO_MEMORY;
	size_t n = 0;
	const tbc_op *s = m->main->first;
	tbc_op *c = copy ? copy->main->first : NULL;
	for (; rc == TBC_OK && s && c && n < count; s = s->next, c = c->next, n++) {
		src[n] = s;
		dst[n] = c;
	}
	if (rc == TBC_OK && (n != count || s || c)) {
		tbc_diags_add(diags, TBC_ERR_INTERNAL, m->path, NULL, NULL, NULL,
			      "the copy of the module has other nodes than the module (bug in tbc)");
		rc = TBC_ERR_INTERNAL;
	}
	for (size_t j = 0; rc == TBC_OK && j < n_nodes; j++) {
		tbc_op *op = dst[nodes[j]];
		for (int k = 0; rc == TBC_OK && k < op->n_outputs; k++) {
			tbc_value *v = op->outputs[k];
			/* Compiled code returns only tensors of known rank. */
			if (!v || is_returned(copy->main, v) || v->type.rank < 0 || !tbc_dtype_supported(v->type.dtype))
				continue;
			if (!v->name) {
				char name[32];
				snprintf(name, sizeof name, "%%%" PRIu32, src[nodes[j]]->outputs[k]->id);
				v->name = tbc_arena_strdup(copy->arena, name);
			}
			if (!v->name || !tbc_graph_add_output(copy->main, v)) rc = TBC_ERR_NO_MEMORY;
		}
	}
	if (rc == TBC_ERR_NO_MEMORY)
		tbc_diags_add(diags, rc, m->path, NULL, NULL, NULL, "out of memory exposing intermediate values");
	free(src);
	free(dst);
	if (rc != TBC_OK) {
		tbc_module_destroy(copy);
		return rc;
	}
	*out_module = copy;
	return TBC_OK;
}
