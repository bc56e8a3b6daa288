/* Helpers shared by the data-movement family (ir/kernels/data*.c): reading
 * constant index inputs in shape rules, strided element copies, index
 * wrapping and the element reductions of the Scatter ops.  Data movement is
 * dtype-agnostic: elements are moved as bytes of tbc_dtype_size(). */
#ifndef TBC_IR_KERNELS_DATA_H
#define TBC_IR_KERNELS_DATA_H

#include <stdio.h>

#include "kernels.h"

/* Values of constant integer input `index` (rank 0 or 1) into vals[0..max).
 * Returns the count; -1 when the input is absent or not a constant; -2 when
 * it is not an integer tensor of rank <= 1 or holds more than max values. */
int tbc_data_const_ints(const tbc_op *op, int index, int64_t *vals, int max);

/* Length of a 1-D value whose type is t (1 for a scalar), -1 when unknown. */
int64_t tbc_data_static_len(const tbc_type *t);

/* Sets output i (when wanted) to dtype/rank with dims[d] static when
 * dims[d] >= 0, fresh symbolic when -1.  rank -1: rank unknown. */
void tbc_data_set_out(tbc_infer *cx, tbc_op *op, int i, tbc_dtype dt, int rank, const int64_t *dims);

/* Product of dims as a tbc_dim: static when all are static, the dim itself
 * when there is one, a derived dim (batch*seq) when that fits, otherwise
 * fresh. */
tbc_dim tbc_data_dim_product(tbc_infer *cx, int n, const tbc_dim *dims);

/* dst[i] for every multi-index i over dims (row-major) = src[offset + sum(i[d] * strides[d])],
 * elements of es bytes; strides may be zero or negative. */
void tbc_data_copy_strided(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
			   int64_t offset, const int64_t *strides);

/* Index v of an axis of size n, negative counting from the end; false when
 * outside [-n, n). */
static inline bool tbc_data_wrap_index(int64_t v, int64_t n, int64_t *out) {
	if (v < -n || v >= n) return false;
	*out = v < 0 ? v + n : v;
	return true;
}

/* The reduction attribute of ScatterElements / ScatterND. */
typedef enum tbc_data_reduction {
	TBC_DATA_RED_NONE,
	TBC_DATA_RED_ADD,
	TBC_DATA_RED_MUL,
	TBC_DATA_RED_MAX,
	TBC_DATA_RED_MIN
} tbc_data_reduction;
bool tbc_data_parse_reduction(const char *s, tbc_data_reduction *out);
/* dst[di] = dst[di] (op) src[si]: integers exactly in 64 bits, floats in
 * double rounded on store, bool as numpy does (add = or, mul = and). */
void tbc_data_reduce_elem(tbc_dtype dt, void *dst, int64_t di, const void *src, int64_t si, tbc_data_reduction r);

#endif
