/* Lowering: graph IR -> a host program of kernel IR (codegen/host/program.h).
 * One file per op family, static and dynamic shapes together. */
#ifndef TBC_CODEGEN_LOWER_H
#define TBC_CODEGEN_LOWER_H

#include "codegen/host/program.h"
#include "codegen/target_desc.h"

/* Lowers the main graph of m (after shape inference and any passes) for the
 * target t describes.  An op without a lowering is TBC_ERR_UNSUPPORTED
 * "op X has no lowering yet". */
tbc_code kir_lower(const tbc_module *m, const tbc_target_desc *t, tbc_arena *arena, tbc_diags *d,
		   kir_program **out);

#endif
