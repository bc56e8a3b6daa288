/* From an LLVM module to code, for any LLVM target: what the targets'
 * emit functions share once their module is built (codegen/cpu/cpu_target.c;
 * NVPTX and AMDGPU next).  Choosing the target machine (triple, CPU,
 * features) stays with each target.  backend names the target in
 * diagnostics ("cpu backend: passes: ..."). */
#ifndef TBC_CODEGEN_LLVM_LLVM_MACHINE_H
#define TBC_CODEGEN_LLVM_LLVM_MACHINE_H

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "ir/ir.h"

/* The code generator's optimization level for -O0 .. -O3. */
LLVMCodeGenOptLevel llvm_codegen_level(int opt_level);

/* Gives mod tm's triple and data layout, before anything is emitted into
 * it (types' sizes and alignments come from the layout). */
void llvm_module_set_machine(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *triple);

/* LLVM's verifier: invalid IR is a bug of ours, an internal error. */
bool llvm_module_verify(LLVMModuleRef mod, const char *backend, tbc_diags *d);

/* LLVM's new pass manager for tm: default<O0>, <O2>, <O3> (the loop and
 * SLP vectorizers and loop unrolling from -O2), and at -O1 tbc's own short
 * pipeline, a fast compile that keeps what the kernels need. */
bool llvm_module_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level, const char *backend,
			  tbc_diags *d);

typedef enum llvm_output {
	LLVM_OUT_IR,       /* text LLVM IR, for reading */
	LLVM_OUT_OBJECT,   /* tm's object file */
	LLVM_OUT_ASSEMBLY, /* tm's assembly (PTX is the NVPTX target's) */
} llvm_output;

/* mod as what, in malloc'd memory followed by a NUL that out_size does not
 * count (text IR and assembly are strings).  False after a diagnostic, or
 * with none when out of memory.  strength_reduce false: without the code
 * generator's loop strength reduction (-O1 on the CPU; docs/compile-time.md),
 * an LLVM setting of the whole process, so emissions that want the other
 * setting wait for these to finish. */
bool llvm_module_emit(LLVMModuleRef mod, LLVMTargetMachineRef tm, llvm_output what, bool strength_reduce,
		      const char *backend, tbc_diags *d, void **out_data, size_t *out_size);

/* One module's way to code on a thread of its own (llvm_jobs_run): the
 * module (in a context no other job uses, built by `build` there or
 * before) and a target machine of its own;
 * verified, optimized at opt_level and emitted as what into data/size,
 * diagnostics into d (a tbc_diags of its own).  ok, data, size and seconds
 * (the job's own time) are the results. */
typedef struct llvm_job {
	/* Non-NULL: builds the module first, on the job's thread (false: it
	 * failed, with a diagnostic in d). */
	bool (*build)(struct llvm_job *j);
	void *user;
	LLVMModuleRef mod;
	LLVMTargetMachineRef tm;
	int opt_level;
	llvm_output what;
	bool strength_reduce; /* as llvm_module_emit's */
	const char *backend;
	tbc_diags *d;
	void *data;
	size_t size;
	bool ok;
	double seconds, build_seconds; /* the job's, and of them building the module */
} llvm_job;

/* Runs the n jobs on min(threads, n) threads (the calling one among them),
 * each thread taking the next job not yet taken, in order.  Returns whether
 * every job succeeded. */
bool llvm_jobs_run(llvm_job *jobs, int n, int threads);

#endif
