/* The op table built from ops.def, and attribute access. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

const tbc_opinfo tbc_ops[TBC_OP_COUNT] = {
#define TBC_OP(id, onnx, min_in, max_in, min_out, max_out, cat, shape, interp, lower, grad) \
	[TBC_OP_##id] = {#id, onnx, min_in, max_in, min_out, max_out, cat, shape, interp},
#include "ops.def"
#undef TBC_OP
};

tbc_opcode tbc_opcode_from_onnx(const char *onnx_name) {
	for (int i = 0; i < TBC_OP_COUNT; i++)
		if (!strcmp(tbc_ops[i].onnx_name, onnx_name)) return (tbc_opcode)i;
	return TBC_OP_COUNT;
}

tbc_opcode tbc_opcode_from_name(const char *name) {
	for (int i = 0; i < TBC_OP_COUNT; i++)
		if (!strcmp(tbc_ops[i].name, name)) return (tbc_opcode)i;
	return TBC_OP_COUNT;
}

const char *tbc_opcat_name(tbc_opcat c) {
	static const char *const names[TBC_CAT_COUNT] = {
		"elementwise", "reduction", "contraction", "window", "normalization", "data movement",
		"quantization", "sequence", "signal", "control flow", "other"};
	return (unsigned)c < TBC_CAT_COUNT ? names[c] : "?";
}

const tbc_attr *tbc_op_attr(const tbc_op *op, const char *name) {
	for (int i = 0; i < op->n_attrs; i++)
		if (!strcmp(op->attrs[i].name, name)) return &op->attrs[i];
	return NULL;
}

int64_t tbc_attr_int(const tbc_op *op, const char *name, int64_t dflt) {
	const tbc_attr *a = tbc_op_attr(op, name);
	if (!a) return dflt;
	if (a->kind == TBC_ATTR_INT) return a->i;
	/* A float where an int belongs: the value converts, saturating, since
	 * a model is untrusted and C leaves out-of-range conversion undefined. */
	if (a->kind == TBC_ATTR_FLOAT) {
		if (isnan(a->f)) return dflt;
		if (a->f >= 9223372036854775807.0) return INT64_MAX;
		if (a->f <= -9223372036854775808.0) return INT64_MIN;
		return (int64_t)a->f;
	}
	return dflt;
}

double tbc_attr_float(const tbc_op *op, const char *name, double dflt) {
	const tbc_attr *a = tbc_op_attr(op, name);
	if (!a) return dflt;
	if (a->kind == TBC_ATTR_FLOAT) return a->f;
	if (a->kind == TBC_ATTR_INT) return (double)a->i;
	return dflt;
}

const char *tbc_attr_string(const tbc_op *op, const char *name, const char *dflt) {
	const tbc_attr *a = tbc_op_attr(op, name);
	return a && a->kind == TBC_ATTR_STRING ? a->s : dflt;
}

int tbc_attr_ints(const tbc_op *op, const char *name, const int64_t **out) {
	const tbc_attr *a = tbc_op_attr(op, name);
	*out = NULL;
	if (!a || a->kind != TBC_ATTR_INTS) return -1;
	*out = a->ints;
	return a->n;
}

int tbc_attr_floats(const tbc_op *op, const char *name, const double **out) {
	const tbc_attr *a = tbc_op_attr(op, name);
	*out = NULL;
	if (!a || a->kind != TBC_ATTR_FLOATS) return -1;
	*out = a->floats;
	return a->n;
}

const tbc_tensor *tbc_attr_tensor(const tbc_op *op, const char *name) {
	const tbc_attr *a = tbc_op_attr(op, name);
	return a && a->kind == TBC_ATTR_TENSOR ? a->tensors[0] : NULL;
}

tbc_graph *tbc_attr_graph(const tbc_op *op, const char *name) {
	const tbc_attr *a = tbc_op_attr(op, name);
	return a && a->kind == TBC_ATTR_GRAPH ? a->graphs[0] : NULL;
}
