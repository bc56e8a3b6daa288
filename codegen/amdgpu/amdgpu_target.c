/* The AMDGPU target (amdgpu.h): llvm_gpu.h's kernels with AMD's ids,
 * barrier and kernel attributes, emitted as an object and linked into a
 * code object.
 *
 * Kernels take the amdgpu_kernel calling convention and
 * "amdgpu-flat-work-group-size" = "1,N": N the work-group of a grouped
 * kernel, 1024 (any group HIP launches) otherwise.  Ids: workitem.id and
 * workgroup.id; sizes from the dispatch packet (llvm.amdgcn.dispatch.ptr,
 * hsa_kernel_dispatch_packet_t: workgroup_size_x at byte 4 as u16,
 * grid_size_x at byte 12 as u32, OpenCL's global size), groups =
 * ceil(grid / group).  The barrier is s_barrier between workgroup-scope
 * release and acquire fences (a helper parsed from IR text: LLVM 19's C
 * API makes fences of system scope only).  Address spaces: 1 global,
 * 3 LDS.  Code object version 5 (module flag amdhsa_code_object_version). */
#include "codegen/amdgpu/amdgpu.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm-c/IRReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>

#include "codegen/llvm/llvm_gpu.h"
#include "codegen/device/device_files.h"
#include "tbc/abi.h"
#include "tbc/tbc.h"

extern char **environ;

static const char *const gfxs[] = {"gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942",
				   "gfx1030", "gfx1100", "gfx1101", "gfx1102"};

bool tbc_amdgpu_gfx_check(const char *gfx, tbc_diags *d) {
	return tbc_dev_arch_check("rocm", "GPU", gfx, gfxs, sizeof gfxs / sizeof *gfxs, d);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_llvm(void) {
	LLVMInitializeAMDGPUTargetInfo();
	LLVMInitializeAMDGPUTarget();
	LLVMInitializeAMDGPUTargetMC();
	LLVMInitializeAMDGPUAsmPrinter();
}

static LLVMValueRef id(llvm_cx *c, const char *what, int d) {
	char name[64];
	snprintf(name, sizeof name, "llvm.amdgcn.%s.id.%c", what, "xyz"[d]);
	return llvm_gpu_intrinsic(c, name, NULL, 0);
}
static LLVMValueRef item_id(llvm_cx *c, int d) { return id(c, "workitem", d); }
static LLVMValueRef group_id(llvm_cx *c, int d) { return id(c, "workgroup", d); }

/* A field of the dispatch packet: bytes at offset, as an i32. */
static LLVMValueRef packet_field(llvm_cx *c, unsigned offset, LLVMTypeRef t) {
	LLVMValueRef p = llvm_gpu_intrinsic(c, "llvm.amdgcn.dispatch.ptr", NULL, 0);
	LLVMValueRef off = LLVMConstInt(c->i64, offset, 0);
	LLVMValueRef at = LLVMBuildInBoundsGEP2(c->b, c->i8, p, &off, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(c->b, t, at, "");
	LLVMSetAlignment(v, t == c->i16 ? 2 : 4);
	LLVMSetMetadata(v, LLVMGetMDKindIDInContext(c->ctx, "invariant.load", 14), LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, NULL, 0)));
	return t == c->i32 ? v : LLVMBuildZExt(c->b, v, c->i32, "");
}
static LLVMValueRef group_size(llvm_cx *c, int d) { return packet_field(c, 4 + 2 * (unsigned)d, c->i16); }
static LLVMValueRef global_size(llvm_cx *c, int d) { return packet_field(c, 12 + 4 * (unsigned)d, c->i32); }
static LLVMValueRef n_groups(llvm_cx *c, int d) {
	LLVMValueRef g = group_size(c, d);
	LLVMValueRef t = LLVMBuildAdd(c->b, global_size(c, d), LLVMBuildSub(c->b, g, LLVMConstInt(c->i32, 1, 0), ""), "");
	return LLVMBuildUDiv(c->b, t, g, "");
}

static void barrier(llvm_cx *c) {
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, "tbc.barrier");
	LLVMBuildCall2(c->b, LLVMFunctionType(c->void_t, NULL, 0, 0), fn, NULL, 0, "");
}

static bool prepare_module(llvm_cx *c) {
	LLVMAddModuleFlag(c->mod, LLVMModuleFlagBehaviorError, "amdhsa_code_object_version", 26,
			  LLVMValueAsMetadata(LLVMConstInt(c->i32, TBC_AMDGPU_CODE_OBJECT_VERSION * 100, 0)));
	char ir[1024];
	snprintf(ir, sizeof ir,
		 "target datalayout = \"%s\"\ntarget triple = \"%s\"\n"
		 "define void @tbc.barrier() #0 {\n"
		 "  fence syncscope(\"workgroup\") release\n"
		 "  call void @llvm.amdgcn.s.barrier()\n"
		 "  fence syncscope(\"workgroup\") acquire\n"
		 "  ret void\n}\n"
		 "declare void @llvm.amdgcn.s.barrier() #1\n"
		 "attributes #0 = { alwaysinline convergent nounwind }\n"
		 "attributes #1 = { convergent nocallback nofree nounwind willreturn }\n",
		 LLVMGetDataLayoutStr(c->mod), LLVMGetTarget(c->mod));
	LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, strlen(ir), "tbc.barrier");
	LLVMModuleRef m = NULL;
	char *err = NULL;
	if (!mb || LLVMParseIRInContext(c->ctx, mb, &m, &err)) { /* takes mb either way */
		llvm_fail(c, TBC_ERR_INTERNAL, "the barrier helper: %s", err ? err : "out of memory");
		LLVMDisposeMessage(err);
		return false;
	}
	if (LLVMLinkModules2(c->mod, m)) /* takes m */
		return llvm_fail(c, TBC_ERR_INTERNAL, "linking the barrier helper");
	/* external while linking (the linker drops unused internal functions) */
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, "tbc.barrier");
	if (!fn) return llvm_fail(c, TBC_ERR_INTERNAL, "the barrier helper is missing");
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	return true;
}

static void mark_kernel(llvm_cx *c, LLVMValueRef fn, const tbc_dev_kernel *k) {
	int64_t items = 1024;
	if (k->plan.shape == TBC_DEV_GROUPS) {
		items = 1;
		for (int d = 0; d < 3; d++) items *= k->plan.local_size[d] > 0 ? k->plan.local_size[d] : 1;
	}
	char v[32];
	snprintf(v, sizeof v, "1,%lld", (long long)items);
	llvm_gpu_fn_attr(c, fn, "amdgpu-flat-work-group-size", v);
}

static const llvm_gpu_arch amdgpu_arch = {
	.name = "amdgpu",
	.triple = "amdgcn-amd-amdhsa",
	.global_as = 1,
	.local_as = 3,
	.kernel_cc = LLVMAMDGPUKERNELCallConv,
	.item_id = item_id,
	.group_id = group_id,
	.group_size = group_size,
	.n_groups = n_groups,
	.global_size = global_size,
	.barrier = barrier,
	.prepare_module = prepare_module,
	.mark_kernel = mark_kernel,
};

/* ---- Linking: ld.lld-19 -shared ---------------------------------------------*/
static bool link_code_object(const void *obj, size_t obj_size, void **code, size_t *size, tbc_diags *d) {
	char lld[4096];
	if (!tbc_find_lld(lld, sizeof lld)) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, NULL,
			      "amdgpu backend: ld.lld-19 is neither on PATH nor at /usr/bin/ld.lld-19; it links the code object "
			      "(Debian/Ubuntu: apt-get install lld-19)");
		return false;
	}
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp) tmp = "/tmp";
	char dir[4096], in[4200], out[4200], err_path[4200];
	snprintf(dir, sizeof dir, "%s/tbc-amdgpu-XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		tbc_diags_add(d, TBC_ERR_IO, NULL, NULL, NULL, NULL, "amdgpu backend: a temporary folder in %s: %s", tmp, strerror(errno));
		return false;
	}
	snprintf(in, sizeof in, "%s/kernels.o", dir);
	snprintf(out, sizeof out, "%s/kernels.hsaco", dir);
	snprintf(err_path, sizeof err_path, "%s/lld.err", dir);
	bool ok = tbc_dev_write_new_file(in, obj, obj_size);
	if (!ok) {
		tbc_diags_add(d, TBC_ERR_IO, NULL, NULL, NULL, NULL, "amdgpu backend: writing %s", in);
	} else {
		char *argv[] = {lld, "-shared", "--no-undefined", "-o", out, in, NULL};
		int rc, status;
		ok = tbc_dev_run_tool(lld, argv, err_path, &rc, &status);
		(void)status;
		if (!ok) {
			void *msg = NULL;
			size_t n = 0;
			if (!tbc_dev_read_file(err_path, &msg, &n, 1 << 16)) msg = NULL;
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "amdgpu backend: %s failed: %.400s", lld,
				      rc ? strerror(rc) : msg ? (char *)msg : "");
			free(msg);
		} else if (!tbc_dev_read_file(out, code, size, (size_t)1 << 31)) {
			ok = false;
			tbc_diags_add(d, TBC_ERR_IO, NULL, NULL, NULL, NULL, "amdgpu backend: reading %s", out);
		}
	}
	unlink(in);
	unlink(out);
	unlink(err_path);
	rmdir(dir);
	return ok;
}

typedef struct hsaco_job {
	const char *gfx;
} hsaco_job;

static bool emit_hsaco(void *user, const kir_program *p, const char *model_name, const tbc_dev_kernel *ks, int n,
		       void **code, size_t *size, tbc_diags *d) {
	(void)p;
	const hsaco_job *job = user;
	pthread_once(&init_once, init_llvm);
	char *err = NULL;
	LLVMTargetRef target;
	if (LLVMGetTargetFromTriple(amdgpu_arch.triple, &target, &err)) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "amdgpu backend: %s", err ? err : "no target");
		LLVMDisposeMessage(err);
		return false;
	}
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, amdgpu_arch.triple, job->gfx, "", LLVMCodeGenLevelDefault,
							  LLVMRelocPIC, LLVMCodeModelDefault);
	if (!tm) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "amdgpu backend: no target machine for %s", job->gfx);
		return false;
	}
	void *obj = NULL;
	size_t obj_size = 0;
	bool ok = llvm_gpu_compile(&amdgpu_arch, tm, model_name, ks, n, 2, LLVM_OUT_OBJECT, &obj, &obj_size, d);
	LLVMDisposeTargetMachine(tm);
	ok = ok && link_code_object(obj, obj_size, code, size, d);
	free(obj);
	return ok;
}

bool tbc_amdgpu_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			     const char *gfx, tbc_dev_program *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	if (!tbc_amdgpu_gfx_check(gfx, d)) return false;
	hsaco_job job = {gfx ? gfx : TBC_AMDGPU_DEFAULT_GFX};
	tbc_dev_target t = {TBC_ABI_DEVICE_AMDGPU_ELF, job.gfx, emit_hsaco, &job};
	return tbc_dev_program_make(p, model_name, op_names, n_ops, &t, out, d);
}
