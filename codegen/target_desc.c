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
		.gemv_panels = true,
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
		.compute_units = 16,
		.items_per_unit = 64,
	};
}

/* What the two GPU descriptions share: scalar work-items (their lanes are
 * the work-items), groups of up to 256, fp64, fused multiply-add for
 * kernels marked contract.  Narrow floats are computed in f32 (the LLVM
 * emitter holds them as bits, codegen/llvm/llvm_narrow.c). */
static tbc_target_desc gpu(const char *name, int64_t local_mem, int subgroup, int units) {
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
		.compute_units = units,
		/* Half of the 2048 threads an SM of sm_80 and sm_90 (or a CU's 32
		 * wave64s) holds: enough to hide memory latency, and what a GEMM
		 * tile's 128 registers a thread leave room for. */
		.items_per_unit = 1024,
	};
}

/* The multiprocessors of each architecture's data-centre (or largest)
 * part: what a kernel must fill.  A smaller part of the same architecture
 * is filled by it too; a larger one is rare. */
static int cuda_sms(int sm) {
	switch (sm) {
	case 75: return 40;  /* T4 */
	case 80: return 108; /* A100 */
	case 86: return 84;  /* A40 */
	case 87: return 16;  /* Jetson AGX Orin */
	case 89: return 142; /* L40S */
	default: return 132; /* sm_90, sm_90a: H100 SXM, H200 */
	}
}

static int rocm_cus(const char *gfx) {
	static const struct {
		const char *gfx;
		int cus;
	} parts[] = {{"gfx906", 60},   /* MI50 */
		     {"gfx908", 120},  /* MI100 */
		     {"gfx90a", 110},  /* MI250X, per die */
		     {"gfx940", 228},  /* MI300A */
		     {"gfx941", 304},  /* MI300X (early) */
		     {"gfx942", 304},  /* MI300X */
		     {"gfx1030", 80},  /* RX 6900 XT */
		     {"gfx1100", 96},  /* RX 7900 XTX */
		     {"gfx1101", 60},  /* RX 7800 XT */
		     {"gfx1102", 32}}; /* RX 7600 */
	for (size_t i = 0; gfx && i < sizeof parts / sizeof *parts; i++)
		if (!strcmp(gfx, parts[i].gfx)) return parts[i].cus;
	return 110; /* the default architecture's */
}

tbc_target_desc tbc_target_desc_cuda(int sm) {
	/* sm_75 .. sm_90a agree on everything described here but their SMs */
	tbc_target_desc t = gpu("cuda", 48 * 1024, 32, cuda_sms(sm));
	/* mma.sync.m16n8k16 with f16 and bf16 operands is sm_80's (sm_75 has
	 * f16 at m16n8k8 only, not used) */
	t.mma_f16 = t.mma_bf16 = sm >= 80;
	return t;
}

tbc_target_desc tbc_target_desc_rocm(const char *gfx) {
	/* gfx9 (gfx906 .. gfx942) runs wave64; gfx10 and later default to wave32 */
	bool gfx9 = !gfx || (strncmp(gfx, "gfx9", 4) == 0 && strlen(gfx) == 6);
	return gpu("rocm", 64 * 1024, gfx9 ? 64 : 32, rocm_cus(gfx));
}
