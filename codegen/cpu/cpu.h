/* The CPU target's parts: kernel IR -> LLVM IR (cpu_kernel.c), the program's
 * run/arena_bytes/descriptor (cpu_module.c), target machine, passes and
 * object emission (cpu_target.c). */
#ifndef TBC_CODEGEN_CPU_CPU_H
#define TBC_CODEGEN_CPU_CPU_H

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/target.h"

typedef struct cpu_cx {
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr, void_t;
	LLVMTypeRef host_t;      /* tbc_abi_host */
	LLVMTypeRef par_body_t;  /* void (ptr closure, i64 begin, i64 end) */
	LLVMTypeRef par_for_t;   /* tbc_abi_host.parallel_for */
	unsigned loop_md_kind;
	/* The target description's (codegen/target_desc.h): GEMM kernels were tiled for
	 * vectors this wide, so they ask LLVM for them. */
	int vector_bytes;
	int n_messages; /* error messages emitted so far (their globals' names) */
	tbc_diags *d;
	bool failed;
} cpu_cx;

/* The LLVM function of kernel k: void (ptr host, ptr bufs..., i64 sizes...). */
LLVMValueRef cpu_emit_kernel(cpu_cx *c, const kir_kernel *k, int index);
/* The LLVM type of a kernel IR scalar type; NULL (and a diagnostic) when the
 * CPU backend does not handle it yet. */
LLVMTypeRef cpu_type(cpu_cx *c, tbc_dtype t);
bool cpu_fail(cpu_cx *c, tbc_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A private constant C string holding text (an error message), named by
 * position so that the module is deterministic. */
LLVMValueRef cpu_message(cpu_cx *c, const char *text);

/* Narrow floats (cpu_narrow.c): held as their bits (i16 / i8); converted
 * exactly as ir/dtype.c converts. */
LLVMValueRef cpu_narrow_to_f32(cpu_cx *c, tbc_dtype t, LLVMValueRef bits);
/* x an f32 or f64 value; rounds once to nearest even.  saturate: float8
 * out of range gives the largest finite value (else infinity or NaN). */
LLVMValueRef cpu_float_to_narrow(cpu_cx *c, tbc_dtype t, LLVMValueRef x, bool saturate);
LLVMValueRef cpu_narrow_const(cpu_cx *c, tbc_dtype t, double v);

/* f32 exp, log, tanh and erf as inline polynomials (cpu_math.c); NULL for
 * other ops. */
LLVMValueRef cpu_math_f32(cpu_cx *c, kir_unop op, LLVMValueRef x);

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

/* Builds run, arena_bytes and the descriptor of p in c->mod. */
bool cpu_emit_program(cpu_cx *c, const kir_program *p, const tbc_emit_info *info, const char *triple,
		      const char *features);

#endif
