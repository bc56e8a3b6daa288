/* Helpers shared by the kernels: axes, strides, broadcasting, index walks. */
#include <stdio.h>

#include "kernels.h"

int tbc_interp_unsupported(tbc_interp *ip, const tbc_op *op) {
	tbc_diags_op(ip->diags, TBC_ERR_UNSUPPORTED, op, "op %s is not supported by the interpreter",
		     tbc_ops[op->code].onnx_name);
	return -1;
}

tbc_tensor *tbc_interp_new(tbc_interp *ip, const tbc_op *op, tbc_dtype dt, int rank, const int64_t *dims) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) {
		int64_t n = tbc_shape_numel(rank, dims);
		tbc_interp_error(ip, op, n < 0 ? "result shape is invalid or overflows"
					       : "cannot allocate a %s result of %lld elements",
				 tbc_dtype_name(dt), (long long)n);
	}
	return t;
}

bool tbc_norm_axis(int64_t axis, int rank, int *out) {
	if (axis < -(int64_t)rank || axis >= rank) return false;
	*out = (int)(axis < 0 ? axis + rank : axis);
	return true;
}

void tbc_strides(int rank, const int64_t *dims, int64_t *strides) {
	int64_t s = 1;
	for (int i = rank - 1; i >= 0; i--) {
		strides[i] = s;
		s *= dims[i];
	}
}

bool tbc_broadcast_dims(int ra, const int64_t *da, int rb, const int64_t *db, int *rank_out, int64_t *dims_out) {
	int r = ra > rb ? ra : rb;
	for (int i = 0; i < r; i++) {
		int ia = i - (r - ra), ib = i - (r - rb);
		int64_t a = ia >= 0 ? da[ia] : 1, b = ib >= 0 ? db[ib] : 1;
		if (a != b && a != 1 && b != 1) return false;
		dims_out[i] = a == 1 ? b : a;
	}
	*rank_out = r;
	return true;
}

void tbc_broadcast_strides(int rank_in, const int64_t *dims_in, int rank_out, int64_t *strides_out) {
	int64_t s[TBC_MAX_RANK];
	tbc_strides(rank_in, dims_in, s);
	for (int i = 0; i < rank_out; i++) {
		int k = i - (rank_out - rank_in);
		strides_out[i] = k < 0 || dims_in[k] == 1 ? 0 : s[k];
	}
}

bool tbc_index_next(int rank, const int64_t *dims, int64_t *idx) {
	for (int i = rank - 1; i >= 0; i--) {
		if (++idx[i] < dims[i]) return true;
		idx[i] = 0;
	}
	return false;
}

int64_t *tbc_tensor_i64s(const tbc_tensor *t) {
	int64_t *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
	if (!v) return NULL;
	for (int64_t i = 0; i < t->numel; i++) v[i] = tbc_get_i64(t, i);
	return v;
}

int tbc_interp_error(tbc_interp *ip, const tbc_op *op, const char *fmt, ...) {
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbc_diags_op(ip->diags, TBC_ERR_RUNTIME, op, "%s", msg);
	return -1;
}
