/* The contract between code tbc generates and the runtime (libtbcrt).
 *
 * A compiled model exports one descriptor.  In a shared object it is the
 * function `tbc_model_descriptor`; in a relocatable object it is
 * `<prefix>_descriptor`, declared in the generated header, so several models
 * link into one program.  Generated code calls nothing but what the host
 * table hands it, so an artifact needs no library beyond libc and libm.
 *
 * Everything here is versioned by TBC_ABI_VERSION: a change to any struct
 * bumps it, and the runtime refuses an artifact of another version. */
#ifndef TBC_ABI_H
#define TBC_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TBC_ABI_MAGIC 0x31434254u /* "TBC1" little-endian */
#define TBC_ABI_VERSION 2u /* 2: derived symbols (sym_derived, sym_poly) */

/* One input or output.  dims[i] >= 0 is static; dims[i] < 0 means symbolic,
 * with sym[i] the index of the symbol in tbc_abi_model.sym_names. */
typedef struct tbc_abi_tensor {
	const char *name;
	int32_t dtype; /* tbc_dtype */
	int32_t rank;
	const int64_t *dims;
	const int32_t *sym;
} tbc_abi_tensor;

/* What the runtime provides to generated code. */
typedef struct tbc_abi_host {
	void *ctx;
	/* Runs body(closure, begin, end) over [0, n) split into chunks of at least
	 * grain iterations, on the runtime's thread pool; returns when all are done. */
	void (*parallel_for)(void *ctx, void (*body)(void *closure, int64_t begin, int64_t end), void *closure,
			     int64_t n, int64_t grain);
	/* Memory for values whose size is only known while running (data-dependent
	 * shapes); freed by the runtime after the run.  NULL when out of memory. */
	void *(*alloc)(void *ctx, uint64_t bytes);
	/* Reports a run-time error (an index out of range, ...); run then returns it. */
	int32_t (*error)(void *ctx, int32_t code, const char *message);
} tbc_abi_host;

typedef struct tbc_abi_model {
	uint32_t magic;       /* TBC_ABI_MAGIC */
	uint32_t abi_version; /* TBC_ABI_VERSION */
	const char *name;
	const char *target_triple;
	const char *cpu_features; /* "+avx2,+fma,..." the code needs; "" when none */
	uint32_t n_inputs, n_outputs, n_syms;
	const tbc_abi_tensor *inputs;
	const tbc_abi_tensor *outputs;
	const char *const *sym_names;
	/* sym_computed[i] != 0: symbol i is data dependent (NonZero's count, ...);
	 * run computes it, and outputs that use it are allocated through
	 * host->alloc and returned in outputs[]. */
	const uint8_t *sym_computed;
	/* Bytes of scratch memory (64-byte aligned) a run needs, given the symbol
	 * values (same order as sym_names). */
	uint64_t (*arena_bytes)(const int64_t *syms);
	/* Weights: embedded (weights != NULL) or in a separate file the runtime maps
	 * (weights_file, relative to the artifact); weights_size bytes, 64-byte
	 * aligned; weights_hash is FNV-1a 64 of the bytes, checked at load. */
	const void *weights;
	const char *weights_file;
	uint64_t weights_size;
	uint64_t weights_hash;
	/* Runs the model: 0 on success, else the code passed to host->error.
	 * syms holds n_syms values: the caller fills those taken from inputs, run
	 * fills the computed ones.  outputs[i] is caller memory for outputs of
	 * known size, and set by run for outputs of data-dependent size. */
	int32_t (*run)(const tbc_abi_host *host, int64_t *syms, void *const *inputs, void **outputs, void *arena,
		       const void *weights);
	/* Derived symbols (docs/symbolic-shapes.md): sym_derived[i] >= 0 makes
	 * symbol i a polynomial over symbols of lower index that are not
	 * computed (`past_seq + seq`, `batch*seq`); its terms start at
	 * sym_poly[sym_derived[i]]: the term count, then per term its coefficient,
	 * its degree and that many symbol indices (a symbol repeated for a
	 * power).  -1: not derived.  The caller evaluates them with
	 * tbc_abi_derive_syms once the inputs' symbols are set, before
	 * arena_bytes and run, so they size the arena and the outputs like the
	 * inputs' symbols do.  NULL (and sym_poly_len 0) when none is derived. */
	const int32_t *sym_derived;
	const int64_t *sym_poly;
	uint64_t sym_poly_len;
} tbc_abi_model;

/* Sets every derived symbol of syms (n_syms values, the inputs' symbols set)
 * in index order.  Returns n_syms, or the index of the first one whose value
 * overflows int64 or is negative (the inputs' sizes make no valid shape for
 * it).  The tables must be valid: the runtime checks an artifact's before
 * it runs one (runtime/validate.c). */
static inline uint32_t tbc_abi_derive_syms(uint32_t n_syms, const int32_t *sym_derived, const int64_t *sym_poly,
					   int64_t *syms) {
	for (uint32_t i = 0; sym_derived && i < n_syms; i++) {
		if (sym_derived[i] < 0) continue;
		const int64_t *q = sym_poly + sym_derived[i];
		int64_t n_terms = *q++, sum = 0;
		for (int64_t t = 0; t < n_terms; t++) {
			int64_t v = q[0], degree = q[1];
			for (int64_t k = 0; k < degree; k++)
				if (__builtin_mul_overflow(v, syms[q[2 + k]], &v)) return i;
			if (__builtin_add_overflow(sum, v, &sum)) return i;
			q += 2 + degree;
		}
		if (sum < 0) return i;
		syms[i] = sum;
	}
	return n_syms;
}

typedef const tbc_abi_model *(*tbc_abi_descriptor_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
