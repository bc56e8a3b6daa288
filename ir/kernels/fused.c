/* Fused: a group of ops made one by passes/fusion.c.  Its "body" graph takes
 * the op's inputs as its inputs and gives the op's outputs; the body reads
 * nothing from the graphs around it.  Its meaning is the body's: the shape
 * rule infers the body, the kernel runs it.  Lowering makes one loop nest of
 * it; here it is only as fast as its ops one by one. */
#include "kernels.h"

static bool same_type(const tbc_type *a, const tbc_type *b) {
	if (a->dtype != b->dtype || a->rank != b->rank) return false;
	for (int i = 0; i < a->rank; i++)
		if (!tbc_dim_eq(a->dims[i], b->dims[i])) return false;
	return true;
}

bool tbc_shape_Fused(tbc_infer *cx, tbc_op *op) {
	tbc_graph *body = tbc_attr_graph(op, "body");
	if (!body) return tbc_infer_error(cx, op, "Fused needs a body");
	if (body->n_inputs != op->n_inputs || body->n_outputs != op->n_outputs)
		return tbc_infer_error(cx, op, "the body takes %d inputs and gives %d outputs; the op has %d and %d",
				       body->n_inputs, body->n_outputs, op->n_inputs, op->n_outputs);
	/* The driver inferred the body with its declared input types.  Only when
	 * the op's inputs now say something else (a pass sharpened them) is the
	 * body inferred again: inference may name fresh dims, and names the rest
	 * of the graph already uses must stay. */
	bool changed = false;
	for (int i = 0; i < op->n_inputs; i++) {
		if (!op->inputs[i]) return tbc_infer_error(cx, op, "input %d of Fused is omitted", i);
		if (!same_type(&op->inputs[i]->type, &body->inputs[i]->type)) {
			body->inputs[i]->type = op->inputs[i]->type;
			changed = true;
		}
	}
	if (changed && !tbc_infer_graph(cx, body)) return false;
	for (int i = 0; i < op->n_outputs; i++)
		if (op->outputs[i]) op->outputs[i]->type = body->outputs[i]->type;
	return true;
}

int tbc_interp_Fused(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	if (!body || body->n_inputs != op->n_inputs || body->n_outputs != op->n_outputs)
		return tbc_interp_error(ip, op, "the body does not match the op");
	tbc_tensor **res = calloc((size_t)body->n_outputs + 1, sizeof *res);
	if (!res) return tbc_interp_error(ip, op, "out of memory");
	int rc = tbc_interp_graph(ip, body, in, op->n_inputs, res);
	for (int i = 0; i < body->n_outputs; i++) {
		if (rc == 0 && op->outputs[i]) out[i] = res[i];
		else tbc_tensor_destroy(res[i]);
	}
	free(res);
	return rc;
}
