/* Dense host tensors. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int64_t tbc_shape_numel(int rank, const int64_t *dims) {
	if (rank < 0 || rank > TBC_MAX_RANK) return -1;
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0) return -1;
		if (dims[i] && n > INT64_MAX / dims[i]) return -1;
		n *= dims[i];
	}
	return n;
}

tbc_tensor *tbc_tensor_create(tbc_dtype dtype, int rank, const int64_t *dims) {
	if (!tbc_dtype_supported(dtype)) return NULL;
	int64_t n = tbc_shape_numel(rank, dims);
	size_t es = tbc_dtype_size(dtype);
	if (n < 0 || n > TBC_MAX_TENSOR_BYTES / (int64_t)es) return NULL;
	tbc_tensor *t = calloc(1, sizeof *t);
	if (!t) return NULL;
	t->dtype = dtype;
	t->rank = rank;
	for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
	t->numel = n;
	/* Never a zero-size malloc: empty tensors still get a valid pointer. */
	t->data = calloc((size_t)(n ? n : 1), es);
	if (!t->data) {
		free(t);
		return NULL;
	}
	return t;
}

void tbc_tensor_destroy(tbc_tensor *t) {
	if (!t) return;
	free(t->data);
	free(t);
}

tbc_tensor *tbc_tensor_clone(const tbc_tensor *t) {
	tbc_tensor *c = tbc_tensor_create(t->dtype, t->rank, t->dims);
	if (c) memcpy(c->data, t->data, (size_t)t->numel * tbc_dtype_size(t->dtype));
	return c;
}

tbc_tensor *tbc_tensor_scalar_f64(tbc_dtype dt, double v) {
	tbc_tensor *t = tbc_tensor_create(dt, 0, NULL);
	if (t) tbc_store_f64(dt, t->data, 0, v);
	return t;
}

bool tbc_tensor_same_shape(const tbc_tensor *a, const tbc_tensor *b) {
	if (a->rank != b->rank) return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dims[i] != b->dims[i]) return false;
	return true;
}

tbc_tensor *tbc_tensor_copy_to_arena(tbc_arena *a, const tbc_tensor *t) {
	tbc_tensor *c = tbc_arena_alloc(a, sizeof *c);
	if (!c) return NULL;
	*c = *t;
	size_t bytes = (size_t)t->numel * tbc_dtype_size(t->dtype);
	c->data = tbc_arena_alloc(a, bytes ? bytes : 1);
	if (!c->data) return NULL;
	memcpy(c->data, t->data, bytes);
	return c;
}
