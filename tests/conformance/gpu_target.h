/* The conformance harness's compile-only GPU targets (gpu_target.c):
 * cuda-sm_75, cuda-sm_90, rocm-gfx90a and rocm-gfx942. */
#ifndef TBC_TESTS_GPU_TARGET_H
#define TBC_TESTS_GPU_TARGET_H
#include <stddef.h>

#include "tbc/tbc.h"

/* The model lowered for the GPU's description, its device program made
 * (PTX, or a code object) and checked by the vendor's tool: ptxas for the
 * architecture, or llvm-readelf-19 --notes naming every kernel.  No
 * outputs: the harness compares nothing for a compile-only target.  The
 * signature of tbc_interpret. */
tbc_code tbc_compile_cuda_sm75(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			       tbc_diags *d);
tbc_code tbc_compile_cuda_sm90(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			       tbc_diags *d);
tbc_code tbc_compile_rocm_gfx90a(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out,
				 size_t n_out, tbc_diags *d);
tbc_code tbc_compile_rocm_gfx942(const tbc_module *m, tbc_tensor *const *in, size_t n_in, tbc_tensor **out,
				 size_t n_out, tbc_diags *d);
#endif
