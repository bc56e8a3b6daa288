/* MatMul and Gemm: a tiled generator. */
#include "codegen/lower_internal.h"

lower_result lower_family_matmul(lower_cx *cx, const tbc_op *op) {
	(void)cx;
	(void)op;
	return LOWER_NOT_MINE;
}
