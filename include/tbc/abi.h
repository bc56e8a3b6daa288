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
/* 2: derived symbols (sym_derived, sym_poly); 3: device code (device_code);
 * 4: device code for several targets (a directory of tables, below);
 * 5: load-time values (init, init_begin, init_end);
 * 6: a training step's state (n_state, state);
 * 7: weights_hash is XXH64 (include/tbc/abi_hash.h), no longer FNV-1a 64.
 * The runtime loads versions TBC_ABI_VERSION_MIN to TBC_ABI_VERSION: a
 * newer version only appends fields or changes what a field means (7's
 * hash), and the runtime reads an older descriptor's fields only (a version
 * 2 one has no device code) and checks its hash as that version defined it. */
#define TBC_ABI_VERSION 7u
#define TBC_ABI_VERSION_MIN 2u

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

/* ABI 6: one piece of a training step's state (docs/training.md): a
 * trainable weight or an optimizer slot.  The run reads it from input
 * `input` and writes its next value to output `output` (same dtype and
 * static shape); the runtime session holds it between runs.  Its value
 * before the first run is init_offset bytes into the weights, or zeros when
 * init_offset is TBC_ABI_STATE_ZEROS.  kind: TBC_ABI_STATE_WEIGHT for a
 * trained weight (named as the model's initializer), TBC_ABI_STATE_OPTIMIZER
 * for the optimizer's own state. */
#define TBC_ABI_STATE_ZEROS UINT64_MAX
#define TBC_ABI_STATE_WEIGHT 1u
#define TBC_ABI_STATE_OPTIMIZER 2u
typedef struct tbc_abi_state {
	uint32_t input, output;
	uint64_t init_offset;
	uint32_t kind;
	uint32_t reserved; /* 0 */
} tbc_abi_state;

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
	 * aligned; weights_hash is the hash of the bytes, checked at load: from
	 * ABI 7 XXH64 with seed 0 (tbc_abi_xxh64, include/tbc/abi_hash.h), in
	 * versions 2-6 FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
	 * 0x100000001b3, one byte at a time).  The runtime picks the hash by
	 * abi_version, so older artifacts still load.  Like the rest of the ABI
	 * this is for little-endian targets (x86-64, AArch64). */
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
	/* ---- ABI 3 ----
	 * Code for a device other than the host CPU: a device program table
	 * (below) of device_code_size bytes, 8-byte aligned; NULL and 0 when the
	 * artifact holds CPU code only.  run and arena_bytes are NULL when it
	 * holds no CPU code (`tbc compile --target opencl`): such an artifact
	 * runs on a device only. */
	const void *device_code;
	uint64_t device_code_size;
	/* ---- ABI 5 ----
	 * Load-time values (docs/load-time.md): what depends only on the
	 * weights but was too large to fold into them.  init stores them into
	 * bytes [init_begin, init_end) of an arena (64-byte aligned, at least
	 * init_end bytes), using bytes below init_begin as scratch; run reads
	 * them there and never stores there (the bytes below init_begin are
	 * its own again).  The caller runs init once per arena before its first
	 * run, and keeps those bytes when it moves to a larger arena (or runs
	 * init again).  init returns like run (0, or the code it passed to
	 * host->error); it may call host->parallel_for and host->error, never
	 * host->alloc.  NULL (and init_begin == init_end) when there are none, and
	 * for a device-only artifact.  A device table computes them at each
	 * run itself. */
	uint64_t init_begin, init_end;
	int32_t (*init)(const tbc_abi_host *host, void *arena, const void *weights);
	/* ---- ABI 6 ----
	 * A training step's state, n_state entries (NULL and 0 for a model). */
	uint32_t n_state;
	const tbc_abi_state *state;
} tbc_abi_model;

/* The device program table (ABI 3; docs/opencl.md, "The artifact").  What
 * the runtime walks to run the model on a device: the program's buffers, the
 * kernels' source and the launches with the If/Loop markers between them.
 * Every field is a little-endian 64-bit word (int64); a string is its length
 * in bytes, then its bytes, padded with zeros to a multiple of 8.
 *
 *   magic TBC_ABI_DEVICE_MAGIC, version TBC_ABI_DEVICE_VERSION,
 *   kind (TBC_ABI_DEVICE_*), source (string: the code), options (string)
 *   n_syms (the descriptor's), syms_buf (the buffer of role SYMS, or -1)
 *   n_bufs, then per buffer: role (TBC_ABI_BUF_*), dtype (tbc_dtype; 7,
 *     int64, for SYMS), io_index, alias_of (-1 or a buffer that aliases
 *     nothing), flags (1 dynamic: sized by computed symbols, allocated when
 *     first used; 2 keep: its contents survive its growth), offset (CONST:
 *     bytes into the weights), part (TEMP: arena part or -1), part_offset
 *     (bytes per unit of the part's symbol product), rank, then rank dims
 *     (>= 0 static; -1 - s: symbol s)
 *   n_parts, then per part: bytes, n_syms, that many symbols
 *   n_inputs, their buffers; n_outputs, their buffers (descriptor order)
 *   n_kernels, then per kernel: name (string: the __kernel in source),
 *     n_buffers, n_sizes, shape (0: one work-item, 1: a grid-stride loop,
 *     2: work-groups, the kernel IR's parallel form), n_dims (1-3; 1 for
 *     shapes 0 and 1), then per dim: the step, lo and hi of the loop that
 *     dim strides (index expressions over the kernel's sizes: a count, then
 *     that many (op, value) pairs in postfix, TBC_ABI_EXPR_*) and the
 *     work-group size (0 for shapes 0 and 1: any).  The NDRange: per dim
 *     units = ceil((hi - lo) / step), at most 65536 (the loops stride over
 *     the rest), times the work-group size for shape 2; work-items of a
 *     shape-1 kernel.  Then per buffer a flag (1: the kernel stores to it),
 *     per buffer the bytes of an element, its rank and its dims (index
 *     expressions: the runtime checks before each launch that every buffer
 *     bound holds what the kernel may touch), n_messages, that many strings
 *     (the checks' messages; a kernel with n_messages > 0 takes a status
 *     word after its sizes)
 *   n_launches, then per launch: ctl (TBC_ABI_CTL_*), ctl_sym[3], kernel
 *     (-1 for a marker), then for a kernel its n_buffers program buffers
 *     and n_sizes program symbols
 *   version 3 appends: binary (string): the source assembled for the
 *     options' architecture, empty when there is none.  Only a PTX table
 *     has one: a cubin (an ELF object of NVIDIA's, `ptxas -arch=sm_XX` of
 *     the table's PTX), which the runtime loads instead of having the
 *     driver JIT-compile the PTX when the device runs it (docs/gpu-runtime.md)
 *
 * The runtime reads versions TBC_ABI_DEVICE_VERSION_MIN to
 * TBC_ABI_DEVICE_VERSION (a version 2 table has no binary).
 *
 * Kernel arguments are the kernel's buffers in order, then its sizes as
 * int64 scalars, then the status word (int32) when it has checks: for
 * OpenCL buffer objects, for CUDA and HIP device pointers (the status word
 * an int32 *), the same order for every kind. */
#define TBC_ABI_DEVICE_MAGIC 0x3156454443424554ull /* "TBCDEV1" */
#define TBC_ABI_DEVICE_VERSION 3 /* 2: launch geometry per dim, work-groups; 3: binary (cubin) */
#define TBC_ABI_DEVICE_VERSION_MIN 2
/* Kinds of device code: what a table's source is, and what its options say. */
#define TBC_ABI_DEVICE_OPENCL_C 1   /* OpenCL C 1.2 text; options: the build options */
#define TBC_ABI_DEVICE_PTX 2        /* PTX text; options: the architecture ("sm_80") */
#define TBC_ABI_DEVICE_AMDGPU_ELF 3 /* an AMDGPU code object; options: the processor ("gfx942") */

/* ABI 4: device_code is one table, or a directory of tables when the
 * artifact holds code for several device targets (`--target
 * cpu,opencl,cuda:sm_80,rocm:gfx942`), each table for one target (its kind
 * and options say which):
 *
 *   magic TBC_ABI_DEVICES_MAGIC, n_tables, then per table its offset (bytes
 *   from the directory's start, a multiple of 8) and its size in bytes; the
 *   tables follow, in the order the targets were named. */
#define TBC_ABI_DEVICES_MAGIC 0x3153564544434254ull /* "TBCDEVS1" */
#define TBC_ABI_MAX_DEVICE_TABLES 16

enum {
	TBC_ABI_BUF_INPUT = 0,
	TBC_ABI_BUF_OUTPUT = 1,
	TBC_ABI_BUF_CONST = 2,
	TBC_ABI_BUF_TEMP = 3,
	TBC_ABI_BUF_SYMS = 4
};
enum {
	TBC_ABI_CTL_KERNEL = 0,
	TBC_ABI_CTL_IF = 1,       /* ctl_sym[0]: the condition */
	TBC_ABI_CTL_ELSE = 2,
	TBC_ABI_CTL_END_IF = 3,
	TBC_ABI_CTL_LOOP = 4,     /* counter, trip count (-1: none), condition (-1: none) */
	TBC_ABI_CTL_END_LOOP = 5
};
enum {
	TBC_ABI_EXPR_CONST = 0, /* pushes value */
	TBC_ABI_EXPR_SIZE = 1,  /* pushes the kernel's size number value */
	TBC_ABI_EXPR_ADD = 2,   /* the others pop b, then a, and push a op b */
	TBC_ABI_EXPR_SUB = 3,
	TBC_ABI_EXPR_MUL = 4,
	TBC_ABI_EXPR_DIV = 5,   /* truncating */
	TBC_ABI_EXPR_REM = 6,
	TBC_ABI_EXPR_FLOORDIV = 7,
	TBC_ABI_EXPR_FLOORMOD = 8,
	TBC_ABI_EXPR_MIN = 9,
	TBC_ABI_EXPR_MAX = 10
};

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
