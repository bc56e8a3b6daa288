/* Helpers shared by the seq family's kernels and shape rules (seq_*.c):
 * tensors as double arrays, dim arithmetic that keeps symbolic dims
 * symbolic, and small readers of constant scalar inputs. */
#ifndef TBC_IR_KERNELS_SEQ_COMMON_H
#define TBC_IR_KERNELS_SEQ_COMMON_H

#include "kernels.h"

/* Every element of t as double in a malloc'd array (never NULL for a
 * non-NULL result: at least one element is allocated); NULL on OOM. */
double *seq_load_f64(const tbc_tensor *t);
/* v rounded to dtype dt (what storing it and loading it back gives). */
double seq_round(tbc_dtype dt, double v);

/* Dim arithmetic: static when the operands are, a fresh symbol otherwise. */
tbc_dim seq_dim(int64_t size);
tbc_dim seq_dim_add(tbc_module *m, tbc_dim a, tbc_dim b);
tbc_dim seq_dim_mul(tbc_module *m, tbc_dim a, int64_t k);
/* a / k when a is static and divisible; false when static and not divisible. */
bool seq_dim_div(tbc_module *m, tbc_dim a, int64_t k, tbc_dim *out);
static inline bool seq_dim_known(tbc_dim d) { return !d.sym && d.size >= 0; }

/* Constant scalar (or one-element) integer / float input; false when the
 * input is absent or not a compile-time constant. */
bool seq_const_i64(const tbc_op *op, int index, int64_t *out);
bool seq_const_f64(const tbc_op *op, int index, double *out);
/* Type of input index, or NULL when it is omitted. */
static inline const tbc_type *seq_in_type(const tbc_op *op, int index) {
	return index < op->n_inputs && op->inputs[index] ? &op->inputs[index]->type : NULL;
}
static inline tbc_type *seq_out_type(tbc_op *op, int index) {
	return index < op->n_outputs && op->outputs[index] ? &op->outputs[index]->type : NULL;
}
static inline const tbc_tensor *seq_in(const tbc_op *op, const tbc_tensor *const *in, int index) {
	return index < op->n_inputs ? in[index] : NULL;
}
static inline bool seq_want(const tbc_op *op, int index) { return index < op->n_outputs && op->outputs[index]; }

#endif
