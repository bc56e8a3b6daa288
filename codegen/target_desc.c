/* The stock target descriptions (codegen/target_desc.h). */
#include "codegen/target_desc.h"

#include <string.h>

tbc_target_desc tbc_target_desc_cpu_default(void) {
	return (tbc_target_desc){
		.name = "cpu",
		.parallel = TBC_PAR_HOST_THREADS,
		.vector_bytes = 32,
		.vector_regs = 16,
		.workgroups = false,
		.local_mem_bytes = 0,
		.max_workgroup_size = 1,
		.subgroup_size = 1,
		.native_f16 = false,
		.native_bf16 = false,
		.native_f64 = true,
		.fma = true,
	};
}

tbc_target_desc tbc_target_desc_opencl_default(void) {
	return (tbc_target_desc){
		.name = "opencl",
		.parallel = TBC_PAR_GRID,
		.vector_bytes = 4,
		.vector_regs = 64,
		.workgroups = true,
		.local_mem_bytes = 32 * 1024,
		.max_workgroup_size = 64,
		.subgroup_size = 1,
		.native_f16 = false,
		.native_bf16 = false,
		.native_f64 = true,
		/* FP_CONTRACT OFF in every printed kernel (docs/opencl.md). */
		.fma = false,
	};
}

/* What the two GPU descriptions share: scalar work-items (their lanes are
 * the work-items), groups of up to 256, fp64, fused multiply-add for
 * kernels marked contract.  Narrow floats are computed in f32 (the LLVM
 * emitter holds them as bits, codegen/llvm/llvm_narrow.c). */
static tbc_target_desc gpu(const char *name, int64_t local_mem, int subgroup) {
	return (tbc_target_desc){
		.name = name,
		.parallel = TBC_PAR_GRID,
		.vector_bytes = 4,
		.vector_regs = 64,
		.workgroups = true,
		.local_mem_bytes = local_mem,
		.max_workgroup_size = 256,
		.subgroup_size = subgroup,
		.native_f16 = false,
		.native_bf16 = false,
		.native_f64 = true,
		.fma = true,
	};
}

tbc_target_desc tbc_target_desc_cuda(int sm) {
	tbc_target_desc t = gpu("cuda", 48 * 1024, 32);
	/* mma.sync.m16n8k16 with f16 and bf16 operands is sm_80's (sm_75 has
	 * f16 at m16n8k8 only, not used) */
	t.mma_f16 = t.mma_bf16 = sm >= 80;
	return t;
}

tbc_target_desc tbc_target_desc_rocm(const char *gfx) {
	/* gfx9 (gfx906 .. gfx942) runs wave64; gfx10 and later default to wave32 */
	bool gfx9 = !gfx || (strncmp(gfx, "gfx9", 4) == 0 && strlen(gfx) == 6);
	return gpu("rocm", 64 * 1024, gfx9 ? 64 : 32);
}
