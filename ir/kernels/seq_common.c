/* Helpers shared by the seq family (see seq_common.h). */
#include "seq_common.h"

double *seq_load_f64(const tbc_tensor *t) {
	double *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
	if (!v) return NULL;
	for (int64_t i = 0; i < t->numel; i++) v[i] = tbc_get_f64(t, i);
	return v;
}

double seq_round(tbc_dtype dt, double v) {
	unsigned char buf[16];
	tbc_store_f64(dt, buf, 0, v);
	return tbc_load_f64(dt, buf, 0);
}

tbc_dim seq_dim(int64_t size) { return (tbc_dim){size, NULL}; }

tbc_dim seq_dim_add(tbc_module *m, tbc_dim a, tbc_dim b) {
	if (seq_dim_known(a) && seq_dim_known(b)) return seq_dim(a.size + b.size);
	if (seq_dim_known(b) && b.size == 0) return a;
	if (seq_dim_known(a) && a.size == 0) return b;
	return tbc_module_fresh_dim(m);
}

tbc_dim seq_dim_mul(tbc_module *m, tbc_dim a, int64_t k) {
	if (seq_dim_known(a)) return seq_dim(a.size * k);
	if (k == 1) return a;
	return tbc_module_fresh_dim(m);
}

bool seq_dim_div(tbc_module *m, tbc_dim a, int64_t k, tbc_dim *out) {
	if (k <= 0) return false;
	if (seq_dim_known(a)) {
		if (a.size % k) return false;
		*out = seq_dim(a.size / k);
		return true;
	}
	*out = k == 1 ? a : tbc_module_fresh_dim(m);
	return true;
}

bool seq_const_i64(const tbc_op *op, int index, int64_t *out) {
	const tbc_tensor *t = tbc_input_const(op, index);
	if (!t || t->numel != 1) return false;
	*out = tbc_dtype_is_float(t->dtype) ? (int64_t)tbc_get_f64(t, 0) : tbc_get_i64(t, 0);
	return true;
}

bool seq_const_f64(const tbc_op *op, int index, double *out) {
	const tbc_tensor *t = tbc_input_const(op, index);
	if (!t || t->numel != 1) return false;
	*out = tbc_get_f64(t, 0);
	return true;
}
