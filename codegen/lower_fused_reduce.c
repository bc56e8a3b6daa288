/* Fused regions that hold a reduction. */
#include "codegen/lower_internal.h"

lower_result lower_fused_reduce(lower_cx *cx, const tbc_op *op) {
	(void)cx;
	(void)op;
	return LOWER_NOT_MINE;
}
