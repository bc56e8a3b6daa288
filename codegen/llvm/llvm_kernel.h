/* Kernel IR -> LLVM IR, shared by the targets that generate code through
 * LLVM (codegen/cpu/ now; NVPTX and AMDGPU next).
 *
 * A kernel body computes the same values on every target, so one emitter
 * writes it: types, expressions with codegen/kir/kir_sem.h's defined results
 * (division by zero, oversized shifts, NaN in min/max), casts and narrow
 * floats, loads and stores, sequential and vector loops with their
 * llvm.loop metadata, and the inline f32 math.  What differs is a small
 * table of hooks the target provides (llvm_hooks): how the outermost
 * parallel loop runs (a CPU outlines it and calls the host's parallel_for; a
 * GPU maps it onto its grid), how a failed check is reported (a CPU calls
 * the host's error callback; a GPU has no host to call), the address space
 * of buffers, and whether math may call libm. */
#ifndef TBC_CODEGEN_LLVM_LLVM_KERNEL_H
#define TBC_CODEGEN_LLVM_LLVM_KERNEL_H

#include <llvm-c/Core.h>

#include "codegen/kir/kir.h"
#include "ir/ir.h"

typedef struct llvm_fn llvm_fn;

typedef struct llvm_hooks {
	const char *name; /* the backend, in diagnostics ("cpu backend: ...") */
	/* The address space of buffer pointers and of the run's status word:
	 * 0 on a CPU, global memory on a GPU. */
	unsigned buffer_addrspace;
	/* Whether math without an inline form may become libm calls: the
	 * functions called by name (tan, atan, erf of f64, ...) and the
	 * intrinsics LLVM lowers to libm (exp, log, sin, cos, pow; all of f64).
	 * Without libm such an op is a diagnostic, never an unresolved
	 * symbol.  f32 exp, log, tanh and erf are inline polynomials always. */
	bool libm;
	/* Without libm: whether that math is computed by codegen/llvm/'s own
	 * implementations (llvm_soft_math.c, in f64) instead of refused. */
	bool soft_math;
	/* Whether a kernel takes a leading pointer for the hooks (llvm_fn.env):
	 * the CPU's host table, through which it calls parallel_for and error. */
	bool env_param;
	/* Emits s, a parallel loop not inside another one, at the builder's
	 * position in f.  Loops inside it are the target's to emit, normally
	 * with llvm_stmts on a llvm_fn whose parallel_mapped is set (they then
	 * run as ordinary loops). */
	void (*parallel_loop)(llvm_fn *f, const kir_stmt *s);
	/* Whether a vector loop not inside a parallel one goes to parallel_loop
	 * too (a GPU spreads it over its work-items as codegen/device/ plans). */
	bool map_vector_loops;
	/* Iterations of an independent loop a work-item runs per trip, their
	 * loads before their stores (llvm_unroll.c), where the target maps a
	 * parallel loop onto its work-items; 0 or 1: one at a time.  A GPU
	 * keeps that many loads in flight per work-item this way. */
	int interleave;
	/* Reports that check (a KIR_S_ERROR) failed: the first failure of a run
	 * wins; the builder is in a block of its own, which the emitter ends
	 * with a branch back to the code after the check. */
	void (*report_error)(llvm_fn *f, const kir_stmt *check);
	/* Grouped kernels (kernel IR's parallel form); a target without these
	 * refuses them.  Grid loops go to parallel_loop.  local_buffer gives
	 * the pointer to local buffer lb of f's kernel (made once per kernel,
	 * at the top of its function), local_id the item's position along dim
	 * d as an index (i64), barrier the group's barrier. */
	LLVMValueRef (*local_buffer)(llvm_fn *f, const kir_buffer *lb);
	LLVMValueRef (*local_id)(llvm_fn *f, int d);
	void (*barrier)(llvm_fn *f);
	/* A warp matrix multiply-accumulate (kir_mma) of a grouped kernel,
	 * for targets whose description declares it; NULL: refused. */
	void (*mma)(llvm_fn *f, const kir_mma *m);
	/* A byte dot-product tile (kir_dot4), for targets whose machine has
	 * it (llvm_cx.dot4_lanes); NULL: refused. */
	void (*dot4)(llvm_fn *f, const kir_dot4 *m);
	/* bf16 dot-product tiles (kir_tile2), for targets whose machine has
	 * them (llvm_cx.tile_bf16); NULL: refused. */
	void (*tile2)(llvm_fn *f, const kir_tile2 *m);
	/* Whether kernel IR's float multiply-add tiles (kir_fma_tile,
	 * llvm_fma_tile.c) are emitted: a CPU's (its description declares
	 * them where the machine has FMA); devices never receive them. */
	bool fma_tile;
	/* Whether a run of stores of locals to consecutive elements
	 * (buf[v + c], buf[v + c + 1], ...: a GEMM tile's row) is emitted as
	 * vector stores of the description's width (llvm_kernel.c). */
	bool row_stores;
} llvm_hooks;

/* One LLVM module being emitted. */
typedef struct llvm_cx {
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr, void_t;
	LLVMTypeRef buf_ptr; /* a pointer in hooks->buffer_addrspace */
	const llvm_hooks *hooks;
	unsigned loop_md_kind;
	/* The target description's (codegen/target_desc.h): GEMM kernels were
	 * tiled for vectors this wide, so they ask LLVM for them. */
	int vector_bytes;
	int n_messages; /* error messages emitted so far (their globals' names) */
	/* f16 <-> f32 conversions are instructions (x86 F16C, AArch64's fcvt):
	 * llvm_narrow.c then converts through LLVM's half type (vcvtph2ps,
	 * vcvtps2ph), never a libcall; false: with integer code. */
	bool f16_hw;
	/* kir_dot2 statements are vdpbf16ps (llvm_dot2.c); the target's
	 * description declared them (tbc_target_desc.dot_bf16). */
	bool dot_bf16;
	/* kir_tile2 statements are AMX tiles (hooks->tile2); the target's
	 * description declared them (tbc_target_desc.tile_bf16). */
	bool tile_bf16;
	/* ... and their 8-bit form (tbc_target_desc.tile_i8). */
	bool tile_i8;
	/* The machine has AVX-512 VNNI (vpdpbusd on 512-bit vectors): kernel
	 * IR's dot4 (cpu_dot4.c) on 16 i32 lanes; with AVX-VNNI alone, on 8
	 * (256-bit vectors); 0: none.  Set by the CPU target from its features. */
	int dot4_lanes;
	void *target;   /* the target's own state, for its hooks */
	tbc_diags *d;
	bool failed;
} llvm_cx;

/* A context, module and builder with LLVM's remarks silenced (a loop the
 * vectorizer declined is not the user's business; errors reach us through
 * return values). */
void llvm_cx_init(llvm_cx *c, const char *module_name, const llvm_hooks *hooks, int vector_bytes, tbc_diags *d);
void llvm_cx_dispose(llvm_cx *c);

/* The LLVM type of a kernel IR scalar type; NULL (and a diagnostic) when
 * the backend does not handle it yet. */
LLVMTypeRef llvm_type(llvm_cx *c, tbc_dtype t);
/* Records the first failure as "<backend> backend: message"; false. */
bool llvm_fail(llvm_cx *c, tbc_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A private constant C string holding text (an error message), named by
 * position so that the module is deterministic. */
LLVMValueRef llvm_message(llvm_cx *c, const char *text);

/* The LLVM function of kernel k, named tbc.k<index>.<name> with internal
 * linkage: void ([ptr env,] ptr bufs..., i64 sizes... [, ptr status]), the
 * status word only when the kernel can fail (kir_kernel_can_fail).  NULL
 * after a diagnostic. */
LLVMValueRef llvm_emit_kernel(llvm_cx *c, const kir_kernel *k, int index);
/* That function's type in c's context (to declare it in another module);
 * NULL when out of memory. */
LLVMTypeRef llvm_kernel_type(llvm_cx *c, const kir_kernel *k);

/* ---- For the hooks ---------------------------------------------------------
 * The state of one function being emitted for a kernel: the kernel's own,
 * or one a hook made for part of it (an outlined parallel body). */
typedef struct llvm_memo_entry llvm_memo_entry;
struct llvm_fn {
	llvm_cx *c;
	const kir_kernel *k;
	int index; /* the kernel's position in the program (names) */
	LLVMValueRef fn;
	LLVMValueRef env;    /* hooks->env_param's pointer; NULL without one */
	LLVMValueRef status; /* the run's status word; NULL when the kernel cannot fail */
	/* Per kernel buffer, size parameter and variable: its pointer, its
	 * value, its alloca (llvm_var_slots). */
	LLVMValueRef *bufs, *sizes, *vars;
	LLVMValueRef *locals; /* per local buffer of a grouped kernel: its pointer */
	/* Inside a parallel loop the target mapped: parallel loops are then
	 * emitted as ordinary loops. */
	bool parallel_mapped;
	/* The access group (a distinct empty node) of every buffer load and
	 * store inside an innermost parallel or vector loop, and whether the
	 * builder is inside one: such loops carry llvm.loop.parallel_accesses,
	 * so LLVM vectorizes them without run-time alias checks (an in-place
	 * elementwise kernel would fail those checks and stay scalar). */
	LLVMMetadataRef group;
	bool in_parallel;
	int n_outlined; /* functions made for parts of this kernel so far (names) */
	/* Expressions already emitted in the current statement, by node. */
	llvm_memo_entry *memo;
	size_t memo_cap, memo_n;
	/* Per variable: the vector whose lane lane_at[i] its last set stored
	 * (a tile's sums, a run of sets emitted as one vector: llvm_kernel.c's
	 * lanes), valid while lane_gen[i] == lane_epoch.  The epoch moves on at
	 * every statement with control flow, so a vector is only used where
	 * it dominates. */
	LLVMValueRef *lane_vec, *lane_slot; /* the vector, and the slot it was recorded for */
	int *lane_at;
	unsigned *lane_gen;
	unsigned lane_epoch;
	bool set_lanes; /* runs of sets as vectors (hooks->row_stores; TBC_SET_LANES=0 off) */
};

/* A function for part of f's kernel, emitted into fn: f's kernel, context,
 * access group and status, fresh value arrays and no expressions
 * remembered.  False (after a diagnostic) when out of memory; llvm_fn_free
 * either way. */
bool llvm_fn_part(llvm_fn *part, const llvm_fn *f, LLVMValueRef fn);
void llvm_fn_free(llvm_fn *f);
/* Allocas for every variable of the kernel at the builder's position (the
 * top of the function's entry block). */
void llvm_var_slots(llvm_fn *f);

/* A register tile's sums (dot2, dot4, fma tiles) between the kernel's
 * scalar locals and vector registers: the n locals vars (of LLVM type elt)
 * as one <n x elt> vector, and a vector's n lanes stored back to them. */
LLVMValueRef llvm_vars_vector(llvm_fn *f, struct kir_var *const *vars, int n, LLVMTypeRef elt);
/* x in every one of `lanes` lanes (a broadcast) at the builder's position. */
LLVMValueRef llvm_splat(llvm_cx *c, LLVMValueRef x, unsigned lanes);
void llvm_vector_vars(llvm_fn *f, LLVMValueRef v, struct kir_var *const *vars, int n);

/* A kir_dot2 (llvm_dot2.c): vdpbf16ps over zmm registers. */
void llvm_dot2(llvm_fn *f, const kir_dot2 *m);
/* A kir_fma_tile (llvm_fma_tile.c): llvm.fma on vectors of the
 * description's width (llvm_cx.vector_bytes). */
void llvm_fma_tile(llvm_fn *f, const kir_fma_tile *m);

/* The value of e at the builder's position; NULL after a diagnostic. */
LLVMValueRef llvm_expr(llvm_fn *f, const kir_expr *e);
/* Emits the statements from s on; llvm_stmt s alone. */
void llvm_stmts(llvm_fn *f, const kir_stmt *s);
void llvm_stmt(llvm_fn *f, const kir_stmt *s);
/* Whether s or a statement after it holds a loop (if not, a loop around
 * them is innermost). */
bool llvm_has_loop(const kir_stmt *s);
/* Attaches llvm.loop metadata to a loop's latch branch: mustprogress, and
 * for an innermost parallel or vector loop, vectorize.enable and
 * parallel_accesses over f's access group. */
void llvm_mark_loop(llvm_fn *f, LLVMValueRef latch_br, bool vectorize);
/* An internal nounwind function. */
LLVMValueRef llvm_new_function(llvm_cx *c, const char *name, LLVMTypeRef ty);
/* GEMM and convolution kernels (the contracting ones) are register-tiled
 * for the description's vector width; a CPU whose LLVM tuning prefers
 * narrower vectors (skylake-avx512 prefers 256 bits) would spill, so
 * functions emitted for them ask for the width. */
void llvm_prefer_tiled_width(const llvm_fn *f, LLVMValueRef fn);

#endif
