/* Private to the quantization ops' lowering: helpers of codegen/lower/quant.c
 * that the integer convolutions (codegen/lower/quant_conv.c) share. */
#ifndef TBC_CODEGEN_LOWER_QUANT_INTERNAL_H
#define TBC_CODEGEN_LOWER_QUANT_INTERNAL_H

#include "codegen/lower/lower_internal.h"

/* "<op>: <why> has no lowering yet", LOWER_FAILED. */
lower_result quant_refuse(lower_cx *cx, const tbc_op *op, const char *why);
/* The integer range of a quantized integer type; false for other types. */
bool quant_int_range(tbc_dtype dt, double *lo, double *hi);
/* Whether every dim of t is static. */
bool quant_static_type(const tbc_type *t);
/* select(isnan(v), 0, clamp(v, lo, hi)) in v's float type. */
kir_expr *quant_clamp_nan0(lk *l, kir_expr *v, double lo, double hi);
/* Whether parameter p (NULL: absent, true) is one value or a 1-D one of
 * len values (*per); else a diagnostic naming `what`, false. */
bool quant_vec_param(lower_cx *cx, const tbc_op *op, const tbc_value *p, int64_t len, const char *what, bool *per);
/* Whether v is a constant of zeros (a zero point that shifts nothing). */
bool quant_zero_const(const tbc_value *v);
/* Whether integer v is a constant of one value throughout, *out. */
bool quant_uniform_const(const tbc_value *v, int64_t *out);
/* v - zp into int16 scratch (see quant.c); the program buffer or -1. */
int quant_shift_operand(lower_cx *cx, const tbc_op *op, const tbc_value *v, const tbc_type *vt, const tbc_value *zv, bool per,
			bool per_col);
/* The type an integer GEMM of these operands sums in exactly (quant.c). */
tbc_dtype quant_exact_ct(tbc_dtype adt, tbc_dtype bdt, bool a_shifted, bool b_shifted, tbc_dim K);

/* ConvInteger and QLinearConv (codegen/lower/quant_conv.c). */
lower_result lower_qconv(lower_cx *cx, const tbc_op *op, bool qlinear);

#endif
