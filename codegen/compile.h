/* Internal: the shared step of every artifact kind (codegen/compile.c). */
#ifndef TBC_CODEGEN_COMPILE_H
#define TBC_CODEGEN_COMPILE_H

#include "codegen/target.h"

/* Called with the lowered program before code is emitted (the artifact
 * writer writes the header and external weights from it); false stops. */
typedef bool (*tbc_program_fn)(const kir_program *p, void *user, tbc_diags *d);

/* Lowers m and emits it with the CPU target: object code (one or more
 * objects; tbc_objects_free) or LLVM IR text.  o may be NULL (defaults); with_program may be NULL.
 * With info NULL nothing is emitted: with_program is then the only use of
 * the lowered program (running it under another target's kernels). */
tbc_code tbc_codegen(const tbc_module *m, const tbc_compile_options *o, const tbc_emit_info *info, tbc_diags *d,
		     tbc_program_fn with_program, void *user, tbc_objects *out);

/* Lowers m for the target t describes (a device's parallel form, instead of
 * the CPU's description) and hands the program to with_program; nothing is
 * emitted.  For running the program under that target's kernels without an
 * artifact (the conformance harness's opencl target). */
tbc_code tbc_codegen_for(const tbc_module *m, const tbc_compile_options *o, const tbc_target_desc *t, tbc_diags *d,
			 tbc_program_fn with_program, void *user);

#endif
