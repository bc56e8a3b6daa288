/* Lowering of BitCast, Dropout in training mode and other single ops (work in progress). */
#include "codegen/lower_internal.h"

lower_result lower_family_misc(lower_cx *cx, const tbc_op *op) {
	(void)cx, (void)op;
	return LOWER_NOT_MINE;
}
