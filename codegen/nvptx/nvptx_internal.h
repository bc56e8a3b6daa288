/* What the NVPTX target's files share (not for other modules). */
#ifndef TBC_CODEGEN_NVPTX_NVPTX_INTERNAL_H
#define TBC_CODEGEN_NVPTX_NVPTX_INTERNAL_H

#include "codegen/llvm/llvm_kernel.h"

/* Kernel IR's warp matrix multiply-accumulate (kir_mma) as ldmatrix and
 * mma.sync m16n8k16 (nvptx_mma.c): llvm_gpu_arch.mma of the target, whose
 * descriptions declare it from sm_80 (tbc_target_desc_cuda). */
void tbc_nvptx_mma(llvm_fn *f, const kir_mma *m);

#endif
