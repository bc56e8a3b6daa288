/* The NVPTX target (nvptx.h): llvm_gpu.h's kernels with NVIDIA's ids,
 * barrier and kernel marks, emitted as PTX.
 *
 * Kernels are marked both ways LLVM knows: the ptx_kernel calling
 * convention and nvvm.annotations ("kernel"; "maxntid{x,y,z}" = the
 * work-group of a grouped kernel, so ptxas may budget registers for it).
 * Address spaces: 1 global (buffers, the status word), 3 shared (local
 * buffers).  Ids are the PTX special registers (tid, ctaid, ntid,
 * nctaid), the barrier bar.sync 0 (llvm.nvvm.barrier0, which also orders
 * shared memory among the block); kernel IR's mma as tensor-core
 * instructions (nvptx_mma.c). */
#include "codegen/nvptx/nvptx.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/Target.h>

#include "codegen/llvm/llvm_gpu.h"
#include "codegen/nvptx/nvptx_internal.h"
#include "tbc/abi.h"
#include "tbc/tbc.h"

static const char *const archs[] = {"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};

bool tbc_nvptx_arch_check(const char *arch, tbc_diags *d) {
	return tbc_dev_arch_check("cuda", "architecture", arch, archs, sizeof archs / sizeof *archs, d);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_llvm(void) {
	LLVMInitializeNVPTXTargetInfo();
	LLVMInitializeNVPTXTarget();
	LLVMInitializeNVPTXTargetMC();
	LLVMInitializeNVPTXAsmPrinter();
}

static LLVMValueRef sreg(llvm_cx *c, const char *reg, int d) {
	char name[64];
	snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", reg, "xyz"[d]);
	return llvm_gpu_intrinsic(c, name, NULL, 0);
}
static LLVMValueRef item_id(llvm_cx *c, int d) { return sreg(c, "tid", d); }
static LLVMValueRef group_id(llvm_cx *c, int d) { return sreg(c, "ctaid", d); }
static LLVMValueRef group_size(llvm_cx *c, int d) { return sreg(c, "ntid", d); }
static LLVMValueRef n_groups(llvm_cx *c, int d) { return sreg(c, "nctaid", d); }
static LLVMValueRef global_size(llvm_cx *c, int d) {
	return LLVMBuildNUWMul(c->b, group_size(c, d), n_groups(c, d), "");
}
static void barrier(llvm_cx *c) { llvm_gpu_intrinsic(c, "llvm.nvvm.barrier0", NULL, 0); }
static bool prepare_module(llvm_cx *c) {
	(void)c;
	return true;
}

static void annotate(llvm_cx *c, LLVMValueRef fn, const char *key, int value) {
	LLVMMetadataRef ops[3] = {LLVMValueAsMetadata(fn), LLVMMDStringInContext2(c->ctx, key, strlen(key)),
				  LLVMValueAsMetadata(LLVMConstInt(c->i32, (unsigned)value, 0))};
	LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations", LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, ops, 3)));
}

static void mark_kernel(llvm_cx *c, LLVMValueRef fn, const tbc_dev_kernel *k) {
	annotate(c, fn, "kernel", 1);
	if (k->plan.shape != TBC_DEV_GROUPS) return;
	static const char *const keys[3] = {"maxntidx", "maxntidy", "maxntidz"};
	for (int d = 0; d < 3; d++) annotate(c, fn, keys[d], k->plan.local_size[d] > 0 ? (int)k->plan.local_size[d] : 1);
}

static const llvm_gpu_arch nvptx_arch = {
	.name = "nvptx",
	.triple = "nvptx64-nvidia-cuda",
	.global_as = 1,
	.local_as = 3,
	.kernel_cc = LLVMPTXKernelCallConv,
	.item_id = item_id,
	.group_id = group_id,
	.group_size = group_size,
	.n_groups = n_groups,
	.global_size = global_size,
	.barrier = barrier,
	.prepare_module = prepare_module,
	.mma = tbc_nvptx_mma,
	.mark_kernel = mark_kernel,
};

typedef struct ptx_job {
	const char *arch;
} ptx_job;

static bool emit_ptx(void *user, const kir_program *p, const char *model_name, const tbc_dev_kernel *ks, int n,
		     void **code, size_t *size, tbc_diags *d) {
	(void)p;
	const ptx_job *job = user;
	pthread_once(&init_once, init_llvm);
	char *err = NULL;
	LLVMTargetRef target;
	if (LLVMGetTargetFromTriple(nvptx_arch.triple, &target, &err)) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "nvptx backend: %s", err ? err : "no target");
		LLVMDisposeMessage(err);
		return false;
	}
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, nvptx_arch.triple, job->arch, "+" TBC_NVPTX_PTX_VERSION,
							  LLVMCodeGenLevelDefault, LLVMRelocDefault, LLVMCodeModelDefault);
	if (!tm) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "nvptx backend: no target machine for %s", job->arch);
		return false;
	}
	bool ok = llvm_gpu_compile(&nvptx_arch, tm, model_name, ks, n, 2, LLVM_OUT_ASSEMBLY, code, size, d);
	LLVMDisposeTargetMachine(tm);
	return ok;
}

bool tbc_nvptx_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			    const char *arch, tbc_dev_program *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	if (!tbc_nvptx_arch_check(arch, d)) return false;
	ptx_job job = {arch ? arch : TBC_NVPTX_DEFAULT_ARCH};
	tbc_dev_target t = {TBC_ABI_DEVICE_PTX, job.arch, emit_ptx, &job};
	return tbc_dev_program_make(p, model_name, op_names, n_ops, &t, out, d);
}
