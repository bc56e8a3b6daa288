/* Floating-point operations an op performs, estimated from its types: the
 * cost model of rematerialization (passes/remat.c) and the `flops` figure
 * of --stats-json.  Multiply-add counts 2; every element an elementwise op
 * makes counts 1 (a transcendental too); a reduction or a window counts the
 * elements it reads (times the window); moving data counts nothing.
 * Symbolic dims count 1, like every byte count of the statistics. */
#include "passes/passes.h"

static double numel(const tbc_value *v) {
	if (!v || v->type.rank < 0) return 0;
	double n = 1;
	for (int i = 0; i < v->type.rank; i++) n *= v->type.dims[i].sym ? 1.0 : (double)v->type.dims[i].size;
	return n;
}

static double dim(const tbc_value *v, int i) {
	if (!v || i < 0 || i >= v->type.rank || v->type.dims[i].sym) return 1;
	return (double)v->type.dims[i].size;
}

static double window(const tbc_op *op) {
	const int64_t *k = NULL;
	int n = tbc_attr_ints(op, "kernel_shape", &k);
	double w = 1;
	for (int i = 0; i < n; i++) w *= (double)k[i];
	return w;
}

double tbc_op_flops(const tbc_op *op) {
	const tbc_value *x = op->n_inputs > 0 ? op->inputs[0] : NULL;
	const tbc_value *w = op->n_inputs > 1 ? op->inputs[1] : NULL;
	const tbc_value *y = op->n_outputs > 0 ? op->outputs[0] : NULL;
	switch (op->code) {
	case TBC_OP_MatMul: return 2 * numel(y) * dim(x, x ? x->type.rank - 1 : 0);
	case TBC_OP_Gemm: {
		double k = dim(x, tbc_attr_int(op, "transA", 0) ? 0 : 1);
		return 2 * numel(y) * k + (op->n_inputs > 2 && op->inputs[2] ? numel(y) : 0);
	}
	case TBC_OP_Conv: /* W [Cout, Cin/group, k...] */
		return 2 * numel(y) * (dim(w, 0) > 0 ? numel(w) / dim(w, 0) : 0);
	case TBC_OP_ConvTranspose: /* W [Cin, Cout/group, k...] */
		return 2 * numel(x) * (dim(w, 0) > 0 ? numel(w) / dim(w, 0) : 0);
	case TBC_OP_Fused: {
		const tbc_graph *body = tbc_attr_graph(op, "body");
		double n = 0;
		for (const tbc_op *o = body ? body->first : NULL; o; o = o->next) n += tbc_op_flops(o);
		return n;
	}
	default: break;
	}
	switch (tbc_ops[op->code].category) {
	case TBC_CAT_ELEMENTWISE: return numel(y);
	case TBC_CAT_REDUCTION: return numel(x);
	case TBC_CAT_NORMALIZATION: return 5 * numel(x); /* mean, variance (or max, sum), scale */
	case TBC_CAT_WINDOW: return numel(y) * window(op);
	case TBC_CAT_CONTRACTION: return 2 * numel(y) * dim(x, x ? x->type.rank - 1 : 0);
	default: return 0;
	}
}

double tbc_module_flops(const tbc_module *m) {
	double n = 0;
	for (const tbc_op *op = m->main->first; op; op = op->next) n += tbc_op_flops(op);
	return n;
}
