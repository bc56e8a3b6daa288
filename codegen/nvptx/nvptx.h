/* The NVPTX target: a lowered program's kernels as PTX text through LLVM's
 * NVPTX backend (docs/gpu.md), in a device program table of kind
 * TBC_ABI_DEVICE_PTX whose options string is the architecture ("sm_80"). */
#ifndef TBC_CODEGEN_NVPTX_NVPTX_H
#define TBC_CODEGEN_NVPTX_NVPTX_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/device/device_program.h"

/* The architecture when none is named, and the PTX ISA version every
 * architecture gets (PTX 8.0: sm_90a needs it; ptxas from CUDA 12.0 on and
 * drivers from 525 on read it). */
#define TBC_NVPTX_DEFAULT_ARCH "sm_80"
#define TBC_NVPTX_PTX_VERSION "ptx80"

/* Whether arch (sm_75 ... sm_90a; NULL: the default) is one the target
 * compiles for; if not, a diagnostic listing those it accepts. */
bool tbc_nvptx_arch_check(const char *arch, tbc_diags *d);

/* Every kernel of p as PTX for arch (NULL: the default), each once, named
 * as tbc_dev_program_make names them (op_names: the ONNX nodes by
 * position, n_ops of them, may be NULL), and the table around the text
 * (code_size bytes, no NUL counted; out->code has one after them).  The
 * same program gives the same bytes.  False after a diagnostic. */
bool tbc_nvptx_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			    const char *arch, tbc_dev_program *out, tbc_diags *d);

/* The CUDA toolkit's ptxas: DIR/bin/ptxas for DIR cuda_path, else
 * $CUDA_PATH, else /usr/local/cuda (written to out either way); whether it
 * is there and executable. */
bool tbc_nvptx_find_ptxas(const char *cuda_path, char *out, size_t size);

/* ptx_size bytes of PTX assembled by `ptxas -arch=ARCH` into a cubin
 * (malloc'd, *cubin_size bytes: an ELF object for exactly that
 * architecture).  False after a diagnostic naming the target (cuda:ARCH)
 * with ptxas's messages. */
bool tbc_nvptx_assemble(const char *ptxas, const char *arch, const void *ptx, size_t ptx_size, void **cubin,
			size_t *cubin_size, tbc_diags *d);

#endif
