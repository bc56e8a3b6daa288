/* Shape and type inference: the driver and the rules many ops share.  Rules
 * of single ops live beside their kernels (ir/kernels/). */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"

bool tbc_infer_error(tbc_infer *cx, const tbc_op *op, const char *fmt, ...) {
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbc_diags_op(cx->diags, TBC_ERR_INVALID_MODEL, op, "%s", msg);
	return false;
}

const tbc_tensor *tbc_input_const(const tbc_op *op, int index) {
	if (index >= op->n_inputs || !op->inputs[index]) return NULL;
	const tbc_value *v = op->inputs[index];
	return v->kind == TBC_VALUE_CONST ? v->constant : NULL;
}

bool tbc_infer_op(tbc_infer *cx, tbc_op *op) {
	/* Control-flow rules infer their bodies themselves: a body's input types
	 * come from the op's inputs (ONNX lets a subgraph leave them undeclared). */
	bool own_bodies = tbc_ops[op->code].category == TBC_CAT_CONTROL_FLOW;
	for (int i = 0; i < op->n_attrs && !own_bodies; i++) {
		const tbc_attr *a = &op->attrs[i];
		if (a->kind == TBC_ATTR_GRAPH || a->kind == TBC_ATTR_GRAPHS)
			for (int k = 0; k < (a->kind == TBC_ATTR_GRAPH ? 1 : a->n); k++)
				if (!tbc_infer_graph(cx, a->graphs[k])) return false;
	}
	for (int i = 0; i < op->n_inputs; i++) {
		const tbc_value *v = op->inputs[i];
		if (v && !tbc_dtype_supported(v->type.dtype))
			return tbc_infer_error(cx, op, "input %d has no usable element type (%s)", i,
					       tbc_dtype_name(v->type.dtype));
	}
	if (!tbc_ops[op->code].shape(cx, op)) return false;
	tbc_symval_infer(cx, op);
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *v = op->outputs[i];
		if (v && !tbc_dtype_supported(v->type.dtype)) {
			tbc_diags_op(cx->diags, TBC_ERR_INTERNAL, op,
				     "shape rule left output %d without a type (bug in tbc)", i);
			return false;
		}
	}
	return true;
}

bool tbc_infer_graph(tbc_infer *cx, tbc_graph *g) {
	for (tbc_op *op = g->first; op; op = op->next)
		if (!tbc_infer_op(cx, op)) return false;
	return true;
}

bool tbc_shape_same_as_input0(tbc_infer *cx, tbc_op *op) {
	(void)cx;
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i]) op->outputs[i]->type = op->inputs[0]->type;
	return true;
}

bool tbc_broadcast_types(tbc_infer *cx, const tbc_op *op, int n, const tbc_type *const *in, tbc_type *out) {
	int rank = 0;
	for (int k = 0; k < n; k++) {
		if (!in[k]) continue;
		if (in[k]->rank < 0) {
			out->rank = -1;
			return true;
		}
		if (in[k]->rank > rank) rank = in[k]->rank;
	}
	out->rank = rank;
	for (int d = 0; d < rank; d++) {
		tbc_dim r = {1, NULL};
		for (int k = 0; k < n; k++) {
			if (!in[k]) continue;
			int off = d - (rank - in[k]->rank);
			if (off < 0) continue;
			tbc_dim x = in[k]->dims[off];
			if (!x.sym && x.size == 1) continue;
			if (!r.sym && r.size == 1) {
				r = x;
			} else if (tbc_dim_eq(r, x)) {
				continue;
			} else if (r.sym && !x.sym) {
				r = x; /* a symbolic dim must be 1 or this size */
			} else if (!r.sym && x.sym) {
				continue;
			} else if (r.sym && x.sym) {
				r = tbc_module_fresh_dim(cx->module);
			} else {
				return tbc_infer_error(cx, op, "shapes cannot broadcast: dim %d is %lld and %lld", d,
						       (long long)r.size, (long long)x.size);
			}
		}
		out->dims[d] = r;
	}
	return true;
}

static bool broadcast(tbc_infer *cx, tbc_op *op, tbc_dtype dt) {
	const tbc_type *in[64];
	int n = op->n_inputs < 64 ? op->n_inputs : 64;
	for (int i = 0; i < n; i++) in[i] = op->inputs[i] ? &op->inputs[i]->type : NULL;
	tbc_type t;
	memset(&t, 0, sizeof t);
	if (!tbc_broadcast_types(cx, op, n, in, &t)) return false;
	t.dtype = dt;
	op->outputs[0]->type = t;
	return true;
}

bool tbc_shape_broadcast(tbc_infer *cx, tbc_op *op) { return broadcast(cx, op, op->inputs[0]->type.dtype); }
bool tbc_shape_broadcast_bool(tbc_infer *cx, tbc_op *op) { return broadcast(cx, op, TBC_DT_BOOL); }
