/* Sliding-window geometry shared by the conv family; see conv_util.h. */
#include <float.h>
#include <stdio.h>

#include "conv_util.h"

const char *conv_attr_str(const tbc_op *op, const char *name, const char *dflt) {
	const char *s = tbc_attr_string(op, name, dflt);
	return s ? s : dflt;
}

bool conv_read_autopad(const tbc_op *op, conv_autopad *out) {
	const char *s = conv_attr_str(op, "auto_pad", "NOTSET");
	if (!strcmp(s, "NOTSET") || !*s) *out = AUTOPAD_NOTSET;
	else if (!strcmp(s, "SAME_UPPER")) *out = AUTOPAD_SAME_UPPER;
	else if (!strcmp(s, "SAME_LOWER")) *out = AUTOPAD_SAME_LOWER;
	else if (!strcmp(s, "VALID")) *out = AUTOPAD_VALID;
	else return false;
	return true;
}

const char *conv_geom_read(conv_geom *g, const tbc_op *op, int nsp, const int64_t *kernel, bool use_dilations,
			   bool use_ceil) {
	memset(g, 0, sizeof *g);
	if (nsp < 1 || nsp > CONV_MAX_SPATIAL) return "the input needs at least one spatial dim (rank >= 3)";
	g->nsp = nsp;
	if (!conv_read_autopad(op, &g->auto_pad)) return "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID";
	g->ceil_mode = use_ceil && tbc_attr_int(op, "ceil_mode", 0) != 0;

	const int64_t *v;
	int n = tbc_attr_ints(op, "kernel_shape", &v);
	if (n >= 0) {
		if (n != nsp) return "kernel_shape must have one value per spatial dim";
		for (int i = 0; i < nsp; i++) g->kernel[i] = v[i];
	} else if (kernel) {
		for (int i = 0; i < nsp; i++) g->kernel[i] = kernel[i];
	} else {
		return "attribute kernel_shape is required";
	}
	for (int i = 0; i < nsp; i++)
		if (g->kernel[i] <= 0) return "kernel_shape values must be positive";
	if (kernel)
		for (int i = 0; i < nsp; i++)
			if (kernel[i] >= 0 && kernel[i] != g->kernel[i])
				return "kernel_shape does not match the weight's spatial dims";

	n = tbc_attr_ints(op, "strides", &v);
	if (n > 0 && n != nsp) return "strides must have one value per spatial dim";
	for (int i = 0; i < nsp; i++) {
		g->stride[i] = n > 0 ? v[i] : 1;
		if (g->stride[i] <= 0) return "strides must be positive";
	}
	n = use_dilations ? tbc_attr_ints(op, "dilations", &v) : -1;
	if (n > 0 && n != nsp) return "dilations must have one value per spatial dim";
	for (int i = 0; i < nsp; i++) {
		g->dil[i] = n > 0 ? v[i] : 1;
		if (g->dil[i] <= 0) return "dilations must be positive";
	}
	n = tbc_attr_ints(op, "pads", &v);
	if (n > 0 && n != 2 * nsp) return "pads must have two values per spatial dim";
	for (int i = 0; i < nsp; i++) {
		g->pad_begin[i] = n > 0 ? v[i] : 0;
		g->pad_end[i] = n > 0 ? v[nsp + i] : 0;
		if (g->pad_begin[i] < 0 || g->pad_end[i] < 0) return "pads must not be negative";
		if (g->kernel[i] > ((int64_t)1 << 40) || g->dil[i] > ((int64_t)1 << 20) ||
		    g->pad_begin[i] > ((int64_t)1 << 40) || g->pad_end[i] > ((int64_t)1 << 40) ||
		    g->stride[i] > ((int64_t)1 << 40))
			return "window attributes are out of range";
	}
	int64_t ksz = 1;
	for (int i = 0; i < nsp; i++) {
		ksz *= g->kernel[i];
		if (ksz > ((int64_t)1 << 31)) return "the window has more than 2^31 elements";
	}
	for (int i = 0; i < nsp; i++) g->in[i] = g->out[i] = -1;
	return NULL;
}

const char *conv_geom_resolve(conv_geom *g) {
	for (int i = 0; i < g->nsp; i++) {
		int64_t eff = (g->kernel[i] - 1) * g->dil[i] + 1, s = g->stride[i], in = g->in[i];
		bool same = g->auto_pad == AUTOPAD_SAME_UPPER || g->auto_pad == AUTOPAD_SAME_LOWER;
		if (g->auto_pad == AUTOPAD_VALID) g->pad_begin[i] = g->pad_end[i] = 0;
		g->keeps[i] = s == 1 && (same || g->pad_begin[i] + g->pad_end[i] == eff - 1);
		if (in < 0) {
			g->out[i] = -1;
			continue;
		}
		if (same) {
			/* out = ceil(in / s); the padding makes the last window fit. */
			int64_t r = in % s, total = eff - (r ? r : s);
			if (total < 0) total = 0;
			int64_t small = total / 2, big = total - small;
			g->pad_begin[i] = g->auto_pad == AUTOPAD_SAME_UPPER ? small : big;
			g->pad_end[i] = g->auto_pad == AUTOPAD_SAME_UPPER ? big : small;
		}
		int64_t num = in + g->pad_begin[i] + g->pad_end[i] - eff;
		if (num < 0) return "the window (kernel_shape with dilations) is larger than the padded input";
		int64_t out = (g->ceil_mode ? (num + s - 1) / s : num / s) + 1;
		/* ceil_mode: a window that would start in the end padding is dropped. */
		if (g->ceil_mode && (out - 1) * s >= in + g->pad_begin[i]) out--;
		g->out[i] = out;
	}
	return NULL;
}

void conv_geom_type_dims(tbc_infer *cx, const conv_geom *g, const tbc_type *x, tbc_type *y) {
	for (int i = 0; i < g->nsp; i++) {
		if (g->out[i] >= 0) y->dims[2 + i] = (tbc_dim){g->out[i], NULL};
		else if (g->keeps[i]) y->dims[2 + i] = x->dims[2 + i];
		else y->dims[2 + i] = tbc_module_fresh_dim(cx->module);
	}
}

int64_t conv_prod(int from, int rank, const int64_t *dims) {
	int64_t p = 1;
	for (int i = from; i < rank; i++) p *= dims[i];
	return p;
}

double *conv_load_all(const tbc_tensor *t) {
	double *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
	if (!v) return NULL;
	for (int64_t i = 0; i < t->numel; i++) v[i] = tbc_get_f64(t, i);
	return v;
}

bool conv_is_float_dtype(tbc_dtype dt) {
	return dt == TBC_DT_F32 || dt == TBC_DT_F64 || dt == TBC_DT_F16 || dt == TBC_DT_BF16;
}

bool conv_is_int8_dtype(tbc_dtype dt) { return dt == TBC_DT_I8 || dt == TBC_DT_U8; }

double conv_dtype_float_max(tbc_dtype dt) {
	switch (dt) {
	case TBC_DT_F32: return FLT_MAX;
	case TBC_DT_F16: return 65504.0;
	case TBC_DT_BF16: return 3.38953138925153547590470800371487866880e38;
	case TBC_DT_F8E4M3FN: return 448.0;
	case TBC_DT_F8E4M3FNUZ: return 240.0;
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ: return 57344.0;
	case TBC_DT_F4E2M1: return 6.0;
	default: return 0.0;
	}
}
