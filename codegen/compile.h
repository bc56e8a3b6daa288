/* Internal: the shared step of every artifact kind (codegen/compile.c). */
#ifndef TBC_CODEGEN_COMPILE_H
#define TBC_CODEGEN_COMPILE_H

#include "codegen/target.h"

/* Lowers m and emits it with the CPU target: object code (or LLVM IR text)
 * in malloc'd memory.  o may be NULL (defaults). */
tbc_code tbc_codegen(const tbc_module *m, const tbc_compile_options *o, const tbc_emit_info *info, tbc_diags *d,
		     void **out_data, size_t *out_size);

#endif
