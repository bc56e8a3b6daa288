/* Data movement: Transpose, Slice, Gather*, Concat, Split, Expand, Pad, Tile and kin. */
#include "codegen/lower_internal.h"

lower_result lower_family_data(lower_cx *cx, const tbc_op *op) {
	(void)cx;
	(void)op;
	return LOWER_NOT_MINE;
}
