/* The CPU target's parts: the hooks through which kernel bodies (emitted
 * by codegen/llvm/) use the host (cpu_hooks.c), CPU and feature names
 * (cpu_features.c), the program's run/arena_bytes/descriptor
 * (cpu_module.c), the target machine and tbc_target_cpu (cpu_target.c). */
#ifndef TBC_CODEGEN_CPU_CPU_H
#define TBC_CODEGEN_CPU_CPU_H

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/llvm/llvm_kernel.h"
#include "codegen/target.h"

/* Kernels take the host table (include/tbc/abi.h's tbc_abi_host) first;
 * the outermost parallel loop is outlined and run through its
 * parallel_for, a failed check reported through its error (cpu_hooks.c). */
extern const llvm_hooks cpu_llvm_hooks;
/* The work a chunk of a parallel loop holds at least (codegen/cpu/cpu_hooks.c
 * estimates an iteration's: about one unit per scalar statement run); a
 * loop with less in all runs on the calling thread.  Measured on the bench
 * set and the README's example at two threads (docs/performance.md). */
#define CPU_PAR_GRAIN_WORK 4096
/* tbc_abi_host as LLVM sees it: {ctx, parallel_for, alloc, error}. */
LLVMTypeRef cpu_host_type(llvm_cx *c);

/* CPU and feature names (cpu_features.c).  triple is x86_64 or aarch64. */
/* Whether LLVM knows cpu for the triple's architecture. */
bool cpu_name_known(const char *triple, const char *cpu);
/* Whether every entry of a feature list ("+avx2,-fma") names a feature LLVM
 * knows; else false with the first bad entry in bad. */
bool cpu_features_known(const char *triple, const char *features, char *bad, size_t bad_size);
/* The features of runtime/cpu_features.def that the named CPU has, as a
 * list "+a,+b" (LLVMDisposeMessage); NULL when out of memory. */
char *cpu_named_features(LLVMTargetRef target, const char *triple, const char *cpu);

/* The features an artifact lists for the runtime to check (malloc'd): those
 * of `all` that are on ("+avx2"), less the ones LLVM emits only for
 * intrinsics (runtime/cpu_features.def), which tbc's code never uses. */
char *cpu_listed_features(const char *triple, const char *all);

/* Kernel IR's byte dot-product tile (kir_dot4) as vpdpbusd on 512-bit
 * (AVX-512 VNNI) or 256-bit (AVX-VNNI) vectors (cpu_dot4.c); only where
 * llvm_cx.dot4_lanes is set. */
void cpu_emit_dot4(llvm_fn *f, const kir_dot4 *m);
/* A kir_tile2 as AMX tiles (cpu_tile2.c), for machines with amx-bf16. */
void cpu_emit_tile2(llvm_fn *f, const kir_tile2 *m);

/* Which LLVM module each kernel goes in (cpu_module.c).  The kernels are
 * split over up to CPU_MAX_KERNEL_MODULES modules of their own, one per
 * CPU_MODULE_MIN_COST of their canonical text, compiled in parallel beside
 * the host module (cpu_target.c); below that (a small program) every
 * kernel stays in the host module. */
enum { CPU_MAX_KERNEL_MODULES = 8, CPU_MODULE_MIN_COST = 40000 };
typedef struct cpu_kernel_plan {
	int n_modules; /* kernel modules: 0 when every kernel is in the host module */
	int *same_as;  /* per launch: the earlier launch whose function it calls, or -1 */
	int *module;   /* per launch with its own function: its kernel module, or -1 (the host's) */
} cpu_kernel_plan;
bool cpu_plan_kernels(const kir_program *p, cpu_kernel_plan *plan);
void cpu_kernel_plan_free(cpu_kernel_plan *plan);

/* Builds run, arena_bytes and the descriptor of p in c->mod (the host
 * module), with the kernels plan puts there; the others declared.  With
 * data_obj non-NULL and an ELF triple, the weights and the device code go
 * into an object of their own there (cpu_data_object; NULL when there are
 * none), else into c->mod. */
bool cpu_emit_program(llvm_cx *c, const cpu_kernel_plan *plan, const kir_program *p, const tbc_emit_info *info,
		      const char *triple, const char *features, void **data_obj, size_t *data_obj_size);

/* Constant data as an ELF relocatable object written without LLVM
 * (cpu_data_object.c): each blob a read-only section with a hidden global
 * symbol at its start.  A blob's bytes are data, or (fill non-NULL) what
 * fill(fill_ctx, dst) writes at dst, its place in the object: size bytes,
 * into zeroed memory. */
typedef struct cpu_data_blob {
	const char *symbol;
	const void *data;
	void (*fill)(void *fill_ctx, void *dst);
	void *fill_ctx;
	size_t size, align;
} cpu_data_blob;
/* The ELF machine (EM_X86_64, EM_AARCH64) of an ELF triple; 0 for others
 * (Mach-O, COFF), whose data stays in LLVM's module. */
uint16_t cpu_elf_machine(const char *triple);
/* The object in malloc'd memory, and (out_offsets non-NULL) where each
 * blob's bytes start in it; false when out of memory. */
bool cpu_data_object(uint16_t machine, const cpu_data_blob *blobs, int n, void **out, size_t *out_size,
		     size_t *out_offsets);
/* The kernels plan puts in kernel module `module`, into c->mod. */
bool cpu_emit_kernel_module(llvm_cx *c, const cpu_kernel_plan *plan, int module, const kir_program *p,
			    const char *prefix);

#endif
