/* Private to the conv family's lowering (codegen/lower/conv.c, conv_more.c). */
#ifndef TBC_CODEGEN_LOWER_CONV_H
#define TBC_CODEGEN_LOWER_CONV_H

#include "codegen/lower/lower_internal.h"

/* ConvTranspose, MaxUnpool, GridSample, RoiAlign, DeformConv
 * (codegen/lower/conv_more.c):
 * LOWER_NOT_MINE for any other op. */
lower_result lower_conv_more(lower_cx *cx, const tbc_op *op);

/* Shared by the conv family's files (codegen/lower/conv.c). */
lower_result conv_failed(bool ok); /* LOWER_OK or LOWER_FAILED */
/* "op X <why> has no lowering yet", LOWER_FAILED. */
lower_result conv_refuse(lower_cx *cx, const tbc_op *op, const char *why);
/* Whether dims from..rank-1 of t are static. */
bool conv_static_dims(const tbc_type *t, int from);
/* Whether t has a static dim of 0. */
bool conv_static_empty(const tbc_type *t);
/* Compute type of a float op over dt (narrow floats in f32); false for
 * other types. */
bool conv_float_ct(tbc_dtype dt, tbc_dtype *ct);

#endif
