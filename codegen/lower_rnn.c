/* Lowering of RNN, GRU and LSTM (work in progress). */
#include "codegen/lower_internal.h"

lower_result lower_family_rnn(lower_cx *cx, const tbc_op *op) {
	(void)cx, (void)op;
	return LOWER_NOT_MINE;
}
