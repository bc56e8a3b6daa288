/* What a target tells lowering about itself.
 *
 * Lowering stays target-neutral: a description only chooses sizes and
 * shapes (a GEMM's register tile, a work-group's size, whether a tile is
 * staged in local memory), never instructions, and every choice computes
 * the same values on every target.  The compile path asks the target for
 * its description (tbc_target.describe, codegen/target.h) and passes it to
 * kir_lower explicitly; tests that lower directly pass one of the
 * descriptions below. */
#ifndef TBC_CODEGEN_TARGET_DESC_H
#define TBC_CODEGEN_TARGET_DESC_H

#include <stdbool.h>
#include <stdint.h>

/* How a target runs a kernel's parallel loops. */
typedef enum tbc_parallel_map {
	/* The outermost parallel loop is split across the host's threads; the
	 * loops inside run in the thread, innermost ones vectorized (CPUs). */
	TBC_PAR_HOST_THREADS = 0,
	/* The parallel loops are the global index space of a grid of
	 * work-groups (OpenCL NDRange, CUDA grid, HIP grid). */
	TBC_PAR_GRID = 1,
} tbc_parallel_map;

typedef struct tbc_target_desc {
	const char *name;          /* "cpu", "opencl", ... */
	tbc_parallel_map parallel;
	/* The widest vector register one thread (work-item) computes in, in
	 * bytes, and how many it has: 16/32/64 on CPUs; 4 on GPUs, whose lanes
	 * are work-items. */
	int vector_bytes;
	int vector_regs;
	/* Work-groups: items that share local memory and meet at barriers.
	 * local_mem_bytes is what one group may use (0: none);
	 * max_workgroup_size the items in one group; subgroup_size the items
	 * that run in lockstep (a warp, a wavefront; 1 on CPUs). */
	bool workgroups;
	int64_t local_mem_bytes;
	int max_workgroup_size;
	int subgroup_size;
	/* Dtypes the device computes natively; the others are computed in a
	 * wider type with kir_sem.h's conversions. */
	bool native_f16, native_bf16, native_f64;
	bool fma; /* kernels marked contract may fuse a * b + c */
	/* The warp matrix multiply-accumulate of kernel IR (kir_mma: m16n8k16,
	 * f32 sums) with f16 and with bf16 operands: NVIDIA's mma.sync from
	 * sm_80.  A GEMM on such operands is then made of it (gemm_mma.c);
	 * a target without it never receives one. */
	bool mma_f16, mma_bf16;
	/* The CPU micro-tile of bf16 pair dot products with f32 sums (kir_dot2:
	 * x86's vdpbf16ps, AVX512_BF16 with 512-bit vectors).  A GEMM of bf16
	 * operands is then made of it (matmul.c); a target without it never
	 * receives one. */
	bool dot_bf16;
	/* bf16 GEMMs are made of dot2 without TBC_GEMM_DOT2=1 asking (AMD's
	 * cores; TBC_GEMM_DOT2=0 still turns it off). */
	bool dot_bf16_default;
	/* A GEMM of one row tile (a matrix-vector product) reads its constant
	 * B from column panels (kir_pbuf.lay.panel): each parallel chunk then
	 * streams contiguous memory; so does a convolution computed transposed
	 * (codegen/lower/conv.c), its W^T.  The CPU's, when no device program
	 * shares its weights. */
	bool gemv_panels;
	/* Tiles of 16 x 16 f32 sums of bf16 pair dot products (kir_tile2:
	 * x86's AMX-BF16 tdpbf16ps).  A bf16 GEMM with B in pairs is then made
	 * of them where M >= 16 and K is even (codegen/lower/matmul.c). */
	bool tile_bf16;
	/* Their 8-bit form (kir_tile2 of u8/i8 by i8: AMX-INT8's tdpbusd and
	 * tdpbssd): the integer GEMMs of codegen/lower/quant_vnni.c are then
	 * made of them where M >= 16 (kir_dot4 elsewhere). */
	bool tile_i8;
	/* Kernel IR's byte dot product (kir_dot4: u8 x i8 in groups of 4
	 * summed into int32): x86's vpdpbusd with AVX-512 VNNI.  Integer
	 * GEMMs are then made of it (codegen/lower/quant_vnni.c); a target
	 * without it never receives one. */
	bool dot4_u8s8;
	/* Kernel IR's float multiply-add tile (kir_fma_tile: a GEMM's register
	 * tile of f32 or f64 sums held in vectors, one fused multiply-add per
	 * product): a CPU with FMA.  Float GEMMs whose operands are of the
	 * compute type are then made of it (codegen/lower/matmul.c) instead of
	 * scalar sums LLVM's SLP vectorizer packs; a target without it (every
	 * device) never receives one. */
	bool fma_tile;
	/* The fma tile's y operand (a K block's resume from y, vector loads)
	 * in use; false: the GEMM's scalar loads and selects (for measuring). */
	bool fma_tile_y;
	/* A GEMM's stores of a tile row as y(row, col0) + c: index forms the
	 * CPU's LLVM emitter stores as vectors (llvm_hooks.row_stores); false:
	 * y's general index per element (for measuring). */
	bool gemm_row_stores;

	/* How much parallel work fills the device: compute_units
	 * multiprocessors (SMs, CUs) of a typical device of the kind, each
	 * wanting about items_per_unit work-items in flight to hide its
	 * memory latency.  Lowering splits work that would leave
	 * multiprocessors idle where it can (a GEMM with fewer tiles than
	 * units sums K in slices, as many as make that many items:
	 * codegen/lower/gemm_splitk.c).  0 on CPUs (their threads are the
	 * host's). */
	int compute_units;
	int items_per_unit;
} tbc_target_desc;

/* x86-64 with AVX2 (32-byte vectors, 16 registers): the CPU target's
 * description when nothing better is known, and what tests lower for. */
tbc_target_desc tbc_target_desc_cpu_default(void);

/* An OpenCL 1.2 device about which nothing more is known at compile time:
 * the 32 KiB of local memory OpenCL 1.2 guarantees every non-custom device,
 * groups of 64 items (every GPU and CPU driver takes more; the runtime
 * checks the device's limit when it loads the program), no fp16, and fp64
 * where the device has it: printed kernels that compute in double have a
 * float variant for devices without (docs/opencl.md).  Filled by 16 groups
 * of 64 (a small GPU; a CPU driver's cores are fewer). */
tbc_target_desc tbc_target_desc_opencl_default(void);

/* An NVIDIA GPU of compute capability sm / 10 (75 .. 90; docs/gpu.md):
 * the 48 KiB of shared memory a block may hold without opting in, blocks
 * of up to 256 threads (the lowering's groups are 64; 256 leaves ptxas 255
 * registers a thread on every architecture), warps of 32, fp64; tensor
 * cores (mma m16n8k16 for f16 and bf16) from sm_80; the SMs of the
 * architecture's data-centre part (132 for sm_90: H100 SXM, H200), 1024
 * threads in flight on each. */
tbc_target_desc tbc_target_desc_cuda(int sm);

/* An AMD GPU (gfx90a, gfx942, gfx1100, ...): 64 KiB of LDS a group, groups
 * of up to 256 items, wavefronts of 64 (gfx9) or 32 (gfx10 and later,
 * whose default is wave32), fp64; the CUs of the architecture's largest
 * part (304 for gfx942: MI300X), 1024 items in flight on each. */
tbc_target_desc tbc_target_desc_rocm(const char *gfx);

#endif
