/* Reductions (Reduce*, ArgMax/ArgMin, CumSum/CumProd) and the softmaxes. */
#include "codegen/lower_internal.h"

lower_result lower_family_reduce(lower_cx *cx, const tbc_op *op) {
	(void)cx;
	(void)op;
	return LOWER_NOT_MINE;
}
