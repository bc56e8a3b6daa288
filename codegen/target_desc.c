/* The stock target descriptions (codegen/target_desc.h). */
#include "codegen/target_desc.h"

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
