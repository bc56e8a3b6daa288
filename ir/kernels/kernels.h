/* What every kernel file needs: the IR, the kernel and shape-rule
 * declarations of ops.def, and small shared helpers for indexing and
 * broadcasting.  Kernels are the reference semantics: clear beats fast. */
#ifndef TBC_IR_KERNELS_H
#define TBC_IR_KERNELS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ir.h"

#define TBC_OP(id, onnx, min_in, max_in, min_out, max_out, cat, shape, interp, lower, grad)       \
	bool shape(tbc_infer *cx, tbc_op *op);                                       \
	int interp(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out);
#include "../ops.def"
#undef TBC_OP

/* "op X is not implemented by the interpreter" as an UNSUPPORTED error. */
int tbc_interp_unsupported(tbc_interp *ip, const tbc_op *op);
/* Allocates a result or reports out-of-memory / too-large on op. */
tbc_tensor *tbc_interp_new(tbc_interp *ip, const tbc_op *op, tbc_dtype dt, int rank, const int64_t *dims);

/* Normalizes axis (negative counts from the end) into [0, rank); false when
 * out of range. */
bool tbc_norm_axis(int64_t axis, int rank, int *out);

/* Row-major strides of dims. */
void tbc_strides(int rank, const int64_t *dims, int64_t *strides);

/* Multidirectional (numpy) broadcast of two shapes; false when incompatible. */
bool tbc_broadcast_dims(int ra, const int64_t *da, int rb, const int64_t *db, int *rank_out,
			int64_t *dims_out);
/* Strides for reading a tensor of shape (rank_in, dims_in) broadcast to an
 * output of rank rank_out: broadcast dims get stride 0. */
void tbc_broadcast_strides(int rank_in, const int64_t *dims_in, int rank_out, int64_t *strides_out);

/* Iterates a multi-index over dims in row-major order.  Returns false after
 * the last index. */
bool tbc_index_next(int rank, const int64_t *dims, int64_t *idx);

/* Reads an integer tensor (any int dtype) into a malloc'd int64 array of
 * numel elements; NULL on allocation failure. */
int64_t *tbc_tensor_i64s(const tbc_tensor *t);
/* Element i of any tensor as double / int64 (convenience wrappers). */
static inline double tbc_get_f64(const tbc_tensor *t, int64_t i) { return tbc_load_f64(t->dtype, t->data, (size_t)i); }
static inline int64_t tbc_get_i64(const tbc_tensor *t, int64_t i) { return tbc_load_i64(t->dtype, t->data, (size_t)i); }
static inline void tbc_set_f64(tbc_tensor *t, int64_t i, double v) { tbc_store_f64(t->dtype, t->data, (size_t)i, v); }
static inline void tbc_set_i64(tbc_tensor *t, int64_t i, int64_t v) { tbc_store_i64(t->dtype, t->data, (size_t)i, v); }

#endif
