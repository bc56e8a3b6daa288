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

/* Builds run, arena_bytes and the descriptor of p in c->mod. */
bool cpu_emit_program(llvm_cx *c, const kir_program *p, const tbc_emit_info *info, const char *triple,
		      const char *features);

#endif
