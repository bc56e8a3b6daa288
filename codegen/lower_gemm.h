/* The GEMM generator (codegen/lower_matmul.c), shared by MatMul, Gemm and
 * Conv (codegen/lower_conv.c):
 *
 *   y[b](i, j) = epi(sum_k a[b](i, k) * b[b](k, j))   for b < NB, i < M, j < N
 *
 * with every operand addressed as base(b) + row * rs + col * cs.  See
 * docs/codegen.md ("MatMul, Gemm, Conv: the GEMM generator"). */
#ifndef TBC_CODEGEN_LOWER_GEMM_H
#define TBC_CODEGEN_LOWER_GEMM_H

#include "codegen/lower_internal.h"

typedef struct gemm_operand {
	kir_buffer *buf;
	kir_expr *rs, *cs; /* row and column strides, in elements */
} gemm_operand;

typedef struct gemm_spec {
	tbc_dtype ct;             /* compute type: f32, f64 or an integer type */
	kir_expr *M, *N, *K, *NB; /* sizes */
	gemm_operand a, b, y;
	void *ctx;
	/* Base offset of each operand for batch index `batch` (NULL: 0). */
	kir_expr *(*base)(void *ctx, lk *l, int which /* 0 a, 1 b, 2 y */, kir_expr *batch);
	/* The value stored for the sum acc (of type ct) at (batch, row, col);
	 * NULL: acc cast to y's dtype. */
	kir_expr *(*epi)(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col);
} gemm_spec;

/* Appends the GEMM's loop nest to the kernel under construction; returns the
 * statement (NULL when out of memory). */
kir_stmt *gemm_generate(lk *l, const gemm_spec *s);

#endif
