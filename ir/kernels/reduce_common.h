/* Helpers shared by the reduce family's files (reduce*.c): element
 * comparison across dtypes, integer limits, axis lists, broadcasting a small
 * operand (scale, bias, weight) to a shape.  Private to those files. */
#ifndef TBC_IR_KERNELS_REDUCE_COMMON_H
#define TBC_IR_KERNELS_REDUCE_COMMON_H

#include <stdio.h>

#include "kernels.h"

/* Unsigned integers and bool compare as uint64, signed integers as int64,
 * floats as double. */
typedef enum tbc_red_class { TBC_RED_FLOAT, TBC_RED_SIGNED, TBC_RED_UNSIGNED } tbc_red_class;
tbc_red_class tbc_red_class_of(tbc_dtype dt);

/* Three-way comparison of t[i] and t[j]; NaN is greater than every number
 * and equal to NaN (numpy's sort order). */
int tbc_red_cmp(const tbc_tensor *t, int64_t i, int64_t j);

/* Smallest and largest value of an integer or bool dtype. */
void tbc_red_int_limits(tbc_dtype dt, int64_t *min, uint64_t *max);

/* Reads a rank-0 or one-element integer tensor. */
bool tbc_red_scalar_int(const tbc_tensor *t, int64_t *out);

/* numpy broadcast of t to the shape (rank, dims) as a malloc'd array of
 * doubles; NULL when the shapes do not broadcast (*bad set) or memory runs
 * out (*bad clear). */
double *tbc_red_expand_f64(const tbc_tensor *t, int rank, const int64_t *dims, bool *bad);

/* True when a type of rank trank can be broadcast (numpy, from the right) to
 * the type x; symbolic dims are assumed to fit. */
bool tbc_red_type_broadcasts_to(const tbc_type *t, const tbc_type *x);

/* Loads a whole tensor as doubles / int64 (malloc'd; NULL when out of memory). */
double *tbc_red_load_f64s(const tbc_tensor *t);

/* For each element of x (row-major), the flat index of the element it reduces
 * to when the axes in mask are reduced (keepdims layout); NULL when out of
 * memory. */
int64_t *tbc_red_output_map(const tbc_tensor *x, const bool *mask);

#endif
