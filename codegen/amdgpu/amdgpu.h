/* The AMDGPU target: a lowered program's kernels as an HSA code object
 * (an ELF shared object) through LLVM's AMDGPU backend and ld.lld-19
 * (docs/gpu.md), in a device program table of kind
 * TBC_ABI_DEVICE_AMDGPU_ELF whose options string is the GPU ("gfx90a"). */
#ifndef TBC_CODEGEN_AMDGPU_AMDGPU_H
#define TBC_CODEGEN_AMDGPU_AMDGPU_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/device/device_program.h"

#define TBC_AMDGPU_DEFAULT_GFX "gfx90a"
/* The code object version every kernel is written for (module flag
 * amdhsa_code_object_version; ROCm 5.0 and later load it). */
#define TBC_AMDGPU_CODE_OBJECT_VERSION 5

/* Whether gfx (NULL: the default) is a GPU the target compiles for; if
 * not, a diagnostic listing those it accepts. */
bool tbc_amdgpu_gfx_check(const char *gfx, tbc_diags *d);

/* Every kernel of p as one code object for gfx (NULL: the default), named
 * as tbc_dev_program_make names them, and the table around it.  The
 * object is linked by ld.lld-19 (on PATH, else /usr/bin/ld.lld-19): a
 * diagnostic saying so when it is missing.  The same program gives the
 * same bytes.  False after a diagnostic. */
bool tbc_amdgpu_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			     const char *gfx, tbc_dev_program *out, tbc_diags *d);

#endif
