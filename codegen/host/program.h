/* The host program: what every target runs.
 *
 * A program holds its buffers (graph inputs and outputs, constants in one
 * weights blob, arena temporaries), its kernels, and the launches in order,
 * each binding a kernel's buffers and size parameters to the program's, with
 * control markers for If/Loop/Scan regions.  Symbolic dims of the graph
 * inputs become the program's symbols, given at run time
 * (tbc_abi_model.sym_names).  Lowering (codegen/lower/) builds it; each
 * target compiles its kernels and either compiles the run sequence (the CPU:
 * codegen/cpu/cpu_module.c) or carries it as data for the runtime to walk
 * (devices). */
#ifndef TBC_CODEGEN_HOST_PROGRAM_H
#define TBC_CODEGEN_HOST_PROGRAM_H

#include "codegen/kir/kir.h"

#define KIR_ALIGN 64 /* weights and arena placements */

typedef struct kir_pbuf {
	int id;
	const char *name;      /* a C identifier made from the value's name */
	const char *onnx_name; /* the value's own name, or NULL */
	kir_buffer_role role;
	tbc_type type;              /* dtype and dims, static or symbolic */
	int io_index;               /* INPUT / OUTPUT: position among the graph's inputs / outputs */
	const tbc_tensor *constant; /* CONST: the value */
	/* CONST laid out for a GEMM (lower_const_matrix), when pitch > 0: the
	 * constant read as a rows x cols matrix, transposed when asked, each
	 * row of that padded with zeros to pitch elements; type is then
	 * [rows or cols, pitch].  With pairs (a bf16 GEMM's B for kir_dot2),
	 * element (i, j) of that matrix (i < K rows) is at (i / 2) * 2 pitch +
	 * 2 j + i % 2 instead: k pairs side by side, type [ceil(K / 2),
	 * 2 pitch].  With panel > 0 (a matrix-vector GEMM's B, streamed once:
	 * gemm_const_panels) element (i, j) of the K x N matrix is at
	 * (j / panel) pitch + i panel + j % panel -- columns in panels of
	 * `panel`, each panel's K rows contiguous, panels pitch >= K panel
	 * elements apart, the last one padded with zeros -- type
	 * [ceil(N / panel), pitch]. */
	struct {
		int64_t rows, cols, pitch, panel;
		bool transpose, pairs;
	} lay;
	/* CONST: byte offset in the weights.  TEMP: byte offset in the arena, or
	 * -1 when the size is symbolic (placed at run time after the static
	 * part, in buffer order). */
	int64_t offset;
	int alias_of; /* -1, or the buffer whose storage this one shares (Reshape) */
	/* TEMP: the arena part holding it (kir_program.parts) and its offset in
	 * the part, in bytes per unit of the part's symbol product; part -1 when
	 * memory planning did not place it (placed at run time after the parts,
	 * in buffer order).  Part 0 is static: there part_offset == offset. */
	int part;
	int64_t part_offset;
	/* TEMP scratch holding no graph value (lower_temp_buf): the position of
	 * the op that made it, >= 0; -1 otherwise.  Scratch lives from the first
	 * to the last op whose launches use it and is placed apart from scratch
	 * living at the same time only. */
	int scratch_of;
	/* TEMP or OUTPUT whose size depends on symbols computed while running
	 * (kir_program.sym_computed): not in the arena; allocated through the
	 * host (tbc_abi_host.alloc) just before the first launch using it, once
	 * the launches before have computed its symbols. */
	bool dynamic;
	/* dynamic TEMP whose contents survive its growth: when a launch needs it
	 * larger, the runner copies what it held into the new memory, which it
	 * makes at least twice as large (a Loop's gathered rows, one more per
	 * iteration when the trip count is unknown). */
	bool keep;
} kir_pbuf;

/* A part of the arena (passes/memplan.c's layout): `bytes` times the product
 * of the symbols syms[0..n_syms) (none for part 0, the static part).  Part k
 * starts where part k-1 ends. */
typedef struct kir_part {
	int n_syms;
	int syms[TBC_MAX_RANK]; /* program symbols; one may repeat (N*N) */
	int64_t bytes;
} kir_part;

/* What a launch is: a kernel call, or a control marker of a program-level
 * region (If, Loop and Scan bodies, docs/lower-control.md).  Markers name
 * program symbols; regions nest properly and every marker has its match.
 *  IF c        runs the launches up to the matching ELSE when syms[c] != 0,
 *              else those from ELSE to the matching END_IF;
 *  LOOP i n c  syms[i] = 0, then while syms[i] < syms[n] (n -1: no bound) and
 *              syms[c] != 0 (c -1: no condition) runs the launches up to the
 *              matching END_LOOP and adds 1 to syms[i]; after it syms[i] is
 *              the number of iterations run.
 * The symbols a marker names are computed ones (kir_program.sym_computed):
 * kernels store c and n, the runner keeps i.  A dynamic buffer's memory is
 * checked at each launch using it and grown when its size (from the symbols
 * at that point) exceeds what it has (a body may compute other sizes in each
 * iteration). */
typedef enum kir_ctl {
	KIR_CTL_KERNEL = 0,
	KIR_CTL_IF,
	KIR_CTL_ELSE,
	KIR_CTL_END_IF,
	KIR_CTL_LOOP,
	KIR_CTL_END_LOOP
} kir_ctl;

typedef struct kir_launch {
	kir_kernel *kernel; /* NULL for a marker */
	int *args; /* program buffer of each kernel buffer */
	int *syms; /* program symbol of each kernel size parameter */
	int op_pos; /* position in the main graph of the op it belongs to */
	/* Computes a value that depends only on the weights (a load-time
	 * value, docs/load-time.md): the CPU's init runs it once per session,
	 * its run skips it; the kernel IR evaluator and the device tables run
	 * it in its place every time. */
	bool init;
	kir_ctl ctl;
	int ctl_sym[3]; /* IF: cond; LOOP: counter, trip count, cond (-1: none) */
} kir_launch;

/* A training step's state (tbc_state): input `input` before a run,
 * output `output` after; init_buf the CONST buffer of its value before the
 * first run, -1 for zeros. */
typedef struct kir_state {
	int input, output, init_buf;
	bool weight;
} kir_state;

typedef struct kir_program {
	tbc_arena *arena;
	const char *name;
	int n_syms;
	const char **sym_names;
	/* sym_computed[s]: symbol s is computed by a shape kernel while running
	 * (a data-dependent dim or a run-time parameter), not read from the
	 * inputs' shapes.  Kernels computing symbols bind the program buffer
	 * syms_buf (role KIR_BUF_SYMS; -1 when none does). */
	bool *sym_computed;
	/* sym_derived[s]: symbol s is a derived dim (ir/symdim.h: its name is a
	 * polynomial over symbols of lower index, none computed), evaluated from
	 * the inputs' symbols before the run, so buffers sized by it are placed
	 * in the arena like a dynamic batch's (docs/symbolic-shapes.md). */
	bool *sym_derived;
	int syms_buf;
	int n_bufs, cap_bufs;
	kir_pbuf **bufs;
	int n_inputs, n_outputs;
	int *inputs, *outputs; /* program buffers in graph order */
	int n_launches, cap_launches;
	kir_launch *launches;
	uint64_t weights_size; /* bytes of the weights blob */
	uint64_t arena_static; /* bytes of the arena placed at compile time (part 0) */
	/* Bytes [init_begin, init_end) of part 0 hold the load-time values and
	 * the scratch of the launches computing them (kir_launch.init), apart
	 * from everything else: no other launch writes there.  Equal when the
	 * program has none. */
	uint64_t init_begin, init_end;
	int n_parts;           /* >= 1 once lowered */
	kir_part *parts;
	int n_state;
	kir_state *state;
} kir_program;

/* Every kernel's text form with the launches between them; malloc'd. */
char *kir_program_print(const kir_program *p);

/* Bytes of buffer b given the symbol values; -1 on overflow. */
int64_t kir_pbuf_bytes(const kir_program *p, const kir_pbuf *b, const int64_t *syms);
/* Arena offsets of every buffer given the symbol values (offsets[i] -1 for
 * buffers not in the arena); returns the arena's size in bytes, -1 on
 * overflow.  The parts come first (part k at the sum of the sizes of parts
 * before it); temporaries memory planning did not place follow, in buffer
 * order, each 64-byte aligned.  A backend computes the same at run time. */
int64_t kir_program_layout(const kir_program *p, const int64_t *syms, int64_t *offsets);
/* The weights blob: weights_size bytes, each constant at its offset. */
void kir_program_weights(const kir_program *p, void *dst);

/* Marks the launches that compute load-time values (kir_launch.init) and
 * moves every buffer they write into a region of its own at the end of the
 * arena's part 0 (kir_program.init_begin/init_end); codegen/lower/load_time.c. */
bool kir_program_split_init(kir_program *p);

/* The matching marker of each control marker (kir_ctl): IF -> its ELSE,
 * ELSE -> its END_IF, LOOP <-> END_LOOP, END_IF -> its ELSE; -1 for
 * kernels.  false when the markers do not nest (IF needs an ELSE). */
bool kir_program_match(const kir_program *p, int *match);

/* Runs the program with the kernel IR evaluator (for tests: lowering checked
 * without LLVM).  Inputs in graph order; out[i] receive new tensors. */
tbc_code kir_program_eval(const kir_program *p, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			  tbc_diags *d);

/* The same with each kernel run by runner->run (buffers and sizes as
 * kir_eval takes them): a device backend's kernels checked under the host
 * program without an artifact (the conformance harness's opencl target). */
typedef struct kir_kernel_runner {
	bool (*run)(void *ctx, const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d);
	void *ctx;
} kir_kernel_runner;
tbc_code kir_program_run(const kir_program *p, const kir_kernel_runner *runner, tbc_tensor *const *in, size_t n_in,
			 tbc_tensor **out, size_t n_out, tbc_diags *d);

/* Reads the symbol values from the inputs' shapes; false (with a message) when
 * an input's rank, dims or dtype do not fit the program. */
bool kir_program_bind_syms(const kir_program *p, tbc_tensor *const *in, size_t n_in, int64_t *syms, tbc_diags *d);
/* The derived symbols as the ABI holds them (include/tbc/abi.h): derived[s]
 * (n_syms entries) and the polynomials, *out_poly (malloc'd, *out_len
 * entries; NULL and 0 when no symbol is derived).  False when out of memory
 * or when a derived symbol's name does not read back (a bug). */
bool kir_program_derived_table(const kir_program *p, int32_t *derived, int64_t **out_poly, size_t *out_len);

#endif
