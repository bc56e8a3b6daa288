/* Target hints for lowering.
 *
 * Lowering stays target-neutral: a hint only chooses sizes (a GEMM's register
 * tile), never instructions, and every choice is correct on every target.
 * The compile path (codegen/compile.c) asks the target for its hints
 * (tbc_cpu_tuning, codegen/cpu/cpu_target.c) and installs them for the
 * lowering that follows on the same thread; lowering without hints (tests
 * calling kir_lower directly) sees the defaults. */
#ifndef TBC_CODEGEN_TUNING_H
#define TBC_CODEGEN_TUNING_H

#include "tbc/tbc.h"

typedef struct kir_tuning {
	int vector_bytes; /* the widest SIMD register the target computes in: 16, 32, 64 */
	int vector_regs;  /* how many of them */
} kir_tuning;

/* The defaults: 32-byte vectors, 16 registers (x86-64 with AVX2). */
kir_tuning kir_tuning_default(void);
/* The hints lowering on this thread uses: the installed ones, else the
 * defaults. */
kir_tuning kir_tuning_current(void);
/* Installs t for lowering on this thread; NULL restores the defaults. */
void kir_tuning_set(const kir_tuning *t);

/* The CPU target's hints for the machine o compiles for (the host unless
 * o->target_triple / o->cpu say otherwise; named CPUs without explicit
 * features get the defaults). */
kir_tuning tbc_cpu_tuning(const tbc_compile_options *o);

#endif
