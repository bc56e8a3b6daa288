/* Helpers of the data-movement family; the kernels and shape rules live in
 * data_shape.c (views and shape queries), data_layout.c (transpose, concat,
 * split, slice, tile, expand, depth/space), data_pad.c (Pad, CenterCropPad),
 * data_index.c (gathers, scatters, OneHot) and data_select.c (Compress,
 * NonZero, Unique, Trilu, ReverseSequence, Range, EyeLike). */
#include "data.h"
#include "ir/symdim.h"

int tbc_data_const_ints(const tbc_op *op, int index, int64_t *vals, int max) {
	const tbc_tensor *t = tbc_input_const(op, index);
	if (!t) return -1;
	if (!tbc_dtype_is_int(t->dtype) || t->rank > 1 || t->numel > max) return -2;
	for (int64_t i = 0; i < t->numel; i++) vals[i] = tbc_get_i64(t, i);
	return (int)t->numel;
}

int64_t tbc_data_static_len(const tbc_type *t) {
	if (t->rank == 0) return 1;
	if (t->rank == 1 && !t->dims[0].sym) return t->dims[0].size;
	return -1;
}

void tbc_data_set_out(tbc_infer *cx, tbc_op *op, int i, tbc_dtype dt, int rank, const int64_t *dims) {
	if (i >= op->n_outputs || !op->outputs[i]) return;
	tbc_type *t = &op->outputs[i]->type;
	memset(t, 0, sizeof *t);
	t->dtype = dt;
	t->rank = rank;
	for (int d = 0; d < rank; d++)
		t->dims[d] = dims[d] >= 0 ? (tbc_dim){dims[d], NULL} : tbc_module_fresh_dim(cx->module);
}

tbc_dim tbc_data_dim_product(tbc_infer *cx, int n, const tbc_dim *dims) {
	int64_t p = 1;
	int n_sym = 0, sym = -1;
	for (int i = 0; i < n; i++) {
		if (dims[i].sym) {
			n_sym++;
			sym = i;
		} else if (dims[i].size == 0) {
			return (tbc_dim){0, NULL};
		} else {
			p = p > INT64_MAX / dims[i].size ? INT64_MAX : p * dims[i].size;
		}
	}
	if (n_sym == 0) return (tbc_dim){p, NULL};
	if (n_sym == 1 && p == 1) return dims[sym];
	/* A product of symbols is a derived dim (batch*seq), equal to itself
	 * however it was reached. */
	tbc_dim r = {1, NULL};
	for (int i = 0; i < n && (r.sym || r.size >= 0); i++) r = tbc_dim_mul(cx->module, r, dims[i]);
	return r.sym || r.size >= 0 ? r : tbc_module_fresh_dim(cx->module);
}

void tbc_data_copy_strided(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
			   int64_t offset, const int64_t *strides) {
	int64_t n = tbc_shape_numel(rank, dims);
	if (n <= 0) return;
	int64_t idx[TBC_MAX_RANK] = {0};
	int64_t off = offset;
	char *d = dst;
	const char *s = src;
	for (int64_t k = 0; k < n; k++) {
		memcpy(d + (size_t)k * es, s + (size_t)off * es, es);
		/* Advance the odometer, keeping the source offset in step. */
		for (int i = rank - 1; i >= 0; i--) {
			if (++idx[i] < dims[i]) {
				off += strides[i];
				break;
			}
			off -= strides[i] * (dims[i] - 1);
			idx[i] = 0;
		}
	}
}

bool tbc_data_parse_reduction(const char *s, tbc_data_reduction *out) {
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	for (int i = 0; i < 5; i++)
		if (!strcmp(s, names[i])) {
			*out = (tbc_data_reduction)i;
			return true;
		}
	return false;
}

void tbc_data_reduce_elem(tbc_dtype dt, void *dst, int64_t di, const void *src, int64_t si, tbc_data_reduction r) {
	size_t es = tbc_dtype_size(dt);
	if (r == TBC_DATA_RED_NONE) {
		memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
		return;
	}
	if (dt == TBC_DT_BOOL) {
		bool a = tbc_load_i64(dt, dst, (size_t)di) != 0, b = tbc_load_i64(dt, src, (size_t)si) != 0;
		bool v = r == TBC_DATA_RED_ADD || r == TBC_DATA_RED_MAX ? (a || b) : (a && b);
		tbc_store_i64(dt, dst, (size_t)di, v);
	} else if (tbc_dtype_is_float(dt)) {
		double a = tbc_load_f64(dt, dst, (size_t)di), b = tbc_load_f64(dt, src, (size_t)si), v;
		switch (r) {
		case TBC_DATA_RED_ADD: v = a + b; break;
		case TBC_DATA_RED_MUL: v = a * b; break;
		case TBC_DATA_RED_MAX: v = isnan(a) || isnan(b) ? NAN : (a > b ? a : b); break;
		default: v = isnan(a) || isnan(b) ? NAN : (a < b ? a : b); break;
		}
		tbc_store_f64(dt, dst, (size_t)di, v);
	} else if (tbc_dtype_is_signed(dt)) {
		int64_t a = tbc_load_i64(dt, dst, (size_t)di), b = tbc_load_i64(dt, src, (size_t)si), v;
		switch (r) {
		/* Wrap like the fixed-width type does: compute in uint64. */
		case TBC_DATA_RED_ADD: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
		case TBC_DATA_RED_MUL: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
		case TBC_DATA_RED_MAX: v = a > b ? a : b; break;
		default: v = a < b ? a : b; break;
		}
		tbc_store_i64(dt, dst, (size_t)di, v);
	} else {
		uint64_t a = tbc_load_u64(dt, dst, (size_t)di), b = tbc_load_u64(dt, src, (size_t)si), v;
		switch (r) {
		case TBC_DATA_RED_ADD: v = a + b; break;
		case TBC_DATA_RED_MUL: v = a * b; break;
		case TBC_DATA_RED_MAX: v = a > b ? a : b; break;
		default: v = a < b ? a : b; break;
		}
		tbc_store_u64(dt, dst, (size_t)di, v);
	}
}
