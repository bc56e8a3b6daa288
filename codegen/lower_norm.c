/* Normalizations: LayerNormalization, RMSNormalization, BatchNormalization (inference), InstanceNormalization, GroupNormalization, LpNormalization. */
#include "codegen/lower_internal.h"

lower_result lower_family_norm(lower_cx *cx, const tbc_op *op) {
	(void)cx;
	(void)op;
	return LOWER_NOT_MINE;
}
