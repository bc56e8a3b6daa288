/* What the GPU targets of LLVM (codegen/nvptx/, codegen/amdgpu/) share:
 * kernels written as codegen/device/'s launch plans say, through the
 * kernel-body emitter's hooks (llvm_kernel.h).
 *
 *  - GRID: the plan's loop is a grid-stride loop over global ids,
 *    for (i = lo + gid * step; i < hi; i += global_size * step);
 *  - GROUPS: grid loop d is a group-stride loop over the group ids of dim
 *    d, local buffers are internal globals in the local address space (one
 *    per local buffer, named tbc.k<index>.<kernel>.l<n>), local_id(d) the
 *    item's id in its group, barriers the target's;
 *  - SINGLE: the kernel's entry returns at once on every work-item but
 *    global id 0 (of dim 0), which runs the body;
 *  - a failed check stores its 1-based number into the status word by an
 *    atomic compare-and-swap from 0 (the first failure wins) and the item
 *    goes on (stores after a failure are unspecified; no item stops short
 *    of a barrier the others wait at);
 *  - math without libm from llvm_soft_math.c.
 * Kernels are correct for any number of work-items and groups (>= 1).
 *
 * A kernel's entry is an external function named as the device program
 * names it (tbc_dev_kernel.name), of the target's kernel calling
 * convention, taking the kernel's buffers (global pointers), its sizes
 * (i64) and, when it can fail, the status word (a global i32 pointer): the
 * OpenCL target's order (docs/opencl.md).  It calls the body (internal,
 * always inlined), tbc.k<index>.<kernel>.
 *
 * NVPTX and AMDGPU differ only in llvm_gpu_arch. */
#ifndef TBC_CODEGEN_LLVM_LLVM_GPU_H
#define TBC_CODEGEN_LLVM_LLVM_GPU_H

#include "codegen/device/device_program.h"
#include "codegen/llvm/llvm_kernel.h"
#include "codegen/llvm/llvm_machine.h"

typedef struct llvm_gpu_arch {
	const char *name;   /* the backend, in diagnostics: "nvptx", "amdgpu" */
	const char *triple; /* nvptx64-nvidia-cuda, amdgcn-amd-amdhsa */
	unsigned global_as; /* buffers and the status word */
	unsigned local_as;  /* local buffers (shared memory, LDS) */
	LLVMCallConv kernel_cc;
	/* i32 values at c->b's position: the item's id in its group, the
	 * group's id, items per group and groups along dim d (0-2), and
	 * work-items along dim 0 in all. */
	LLVMValueRef (*item_id)(llvm_cx *c, int d);
	LLVMValueRef (*group_id)(llvm_cx *c, int d);
	LLVMValueRef (*group_size)(llvm_cx *c, int d);
	LLVMValueRef (*n_groups)(llvm_cx *c, int d);
	LLVMValueRef (*global_size)(llvm_cx *c, int d);
	/* The group's barrier, ordering local memory. */
	void (*barrier)(llvm_cx *c);
	/* Before any kernel: module flags, helpers.  False after a diagnostic. */
	bool (*prepare_module)(llvm_cx *c);
	/* A warp matrix multiply-accumulate (kir_mma; NULL: the target has
	 * none), with f's accumulators and local buffers. */
	void (*mma)(llvm_fn *f, const kir_mma *m);
	/* Marks fn as the entry of kernel k (annotations, attributes). */
	void (*mark_kernel)(llvm_cx *c, LLVMValueRef fn, const tbc_dev_kernel *k);
} llvm_gpu_arch;

/* The kernels ks (n of them) as one module for tm (made for a->triple),
 * optimized at opt_level (0-3) and emitted as what (PTX text is the
 * assembly of NVPTX; AMDGPU's object is then linked by its target).  The
 * code in malloc'd memory with a NUL after it (*size does not count it);
 * false after a diagnostic.  dump_ir (may be NULL): the optimized module
 * as text IR too, for reading. */
bool llvm_gpu_compile(const llvm_gpu_arch *a, LLVMTargetMachineRef tm, const char *module_name,
		      const tbc_dev_kernel *ks, int n, int opt_level, llvm_output what, void **code, size_t *size,
		      tbc_diags *d);

/* The hooks of a GPU target (for tests that drive llvm_emit_kernel
 * directly): c->target must point at an llvm_gpu_state. */
typedef struct llvm_gpu_state {
	const llvm_gpu_arch *arch;
	const tbc_dev_plan *plan; /* the kernel being emitted */
} llvm_gpu_state;
llvm_hooks llvm_gpu_hooks(const llvm_gpu_arch *a);

/* Shared by the arch tables: a call to intrinsic name (not overloaded) of
 * n arguments at c->b's position. */
LLVMValueRef llvm_gpu_intrinsic(llvm_cx *c, const char *name, LLVMValueRef *args, unsigned n);
/* A string attribute on fn. */
void llvm_gpu_fn_attr(llvm_cx *c, LLVMValueRef fn, const char *key, const char *value);

#endif
