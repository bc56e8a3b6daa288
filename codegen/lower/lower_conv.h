/* Private to the conv family's lowering (codegen/lower/lower_conv*.c). */
#ifndef TBC_CODEGEN_LOWER_CONV_H
#define TBC_CODEGEN_LOWER_CONV_H

#include "codegen/lower/lower_internal.h"

/* ConvTranspose, MaxUnpool, GridSample, RoiAlign, DeformConv
 * (codegen/lower/conv_more.c):
 * LOWER_NOT_MINE for any other op. */
lower_result lower_conv_more(lower_cx *cx, const tbc_op *op);

#endif
