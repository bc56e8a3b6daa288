/* Kernel IR: the loop-level IR between the graph IR and the targets.
 *
 * A kernel is a function over buffers: nests of loops (marked parallel,
 * vector or sequential) whose bodies load, compute scalars, and store.  It is
 * target-neutral: the CPU, NVPTX, AMDGPU and OpenCL backends consume the same
 * kernels and differ only in how they map loops (threads and vectors on a
 * CPU, grids and blocks on a GPU).
 *
 * Conventions every producer and consumer relies on:
 *  - Buffers are dense, row-major, addressed by a linear element index (an
 *    index expression).  A buffer's dims are index expressions over the
 *    kernel's size parameters, so a symbolic batch stays symbolic.
 *  - Index arithmetic is int64 (KIR_INDEX).  Scalar values have an element
 *    dtype (tbc_dtype) or KIR_INDEX / bool.  Narrow floats (f16, bf16, f8) are
 *    loaded and stored in their storage type; arithmetic on them happens in
 *    f32 after an explicit cast, as the lowering writes it.
 *  - Parallel loops have independent iterations (no two iterations store to
 *    the same element, none reads what another stores).  A reduction is a
 *    sequential loop updating a scalar local inside the parallel nest.
 *  - The parallel form for devices (a "grouped" kernel, kir_kernel.group):
 *    the body is a nest of 1-3 `grid` loops, each iteration of the nest one
 *    work-group; the nest's body runs once per work-item of the group
 *    (local_id), items sharing `local` buffers and meeting at barriers.
 *    docs/kernel-ir.md has the rules; the evaluator runs groups one after
 *    another, their items phase by phase between barriers.
 *  - Everything lives in the kernel's arena: built once, never freed piecemeal.
 */
#ifndef TBC_CODEGEN_KIR_H
#define TBC_CODEGEN_KIR_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/dtype.h"
#include "ir/ir.h"

#define KIR_INDEX ((tbc_dtype)100) /* int64 index arithmetic */

typedef enum kir_loop_kind {
	KIR_LOOP_SEQUENTIAL = 0,
	KIR_LOOP_PARALLEL = 1, /* iterations independent: threads / grid */
	KIR_LOOP_VECTOR = 2,   /* iterations independent and contiguous: SIMD lanes */
	/* The global index space of a grouped kernel: one iteration per
	 * work-group, iterations independent; loop i of the nest is dim i. */
	KIR_LOOP_GRID = 3
} kir_loop_kind;

/* Where a buffer lives.  Global buffers are the kernel's arguments
 * (kir_kernel.buffers, bound by each launch); local buffers are a
 * work-group's own memory (kir_kernel.locals): static dims, uninitialised
 * when the group starts, shared by its items, gone when it ends. */
typedef enum kir_mem_space { KIR_MEM_GLOBAL = 0, KIR_MEM_LOCAL = 1 } kir_mem_space;

typedef enum kir_buffer_role {
	KIR_BUF_INPUT,  /* a graph input, read only */
	KIR_BUF_OUTPUT, /* a graph output */
	KIR_BUF_CONST,  /* weights, read only */
	KIR_BUF_TEMP,   /* an intermediate: placed in the arena by memory planning */
	/* The program's symbol values (int64, one per symbol, in program order):
	 * a shape kernel stores the symbols it computes there (data-dependent
	 * dims, run-time parameters); later kernels take them as sizes. */
	KIR_BUF_SYMS
} kir_buffer_role;

typedef enum kir_unop {
	KIR_NEG, KIR_ABS, KIR_NOT /* logical for bool, bitwise for ints */, KIR_SQRT, KIR_EXP, KIR_LOG,
	KIR_SIN, KIR_COS, KIR_TAN, KIR_ASIN, KIR_ACOS, KIR_ATAN, KIR_SINH, KIR_COSH, KIR_TANH,
	KIR_ASINH, KIR_ACOSH, KIR_ATANH, KIR_ERF, KIR_FLOOR, KIR_CEIL, KIR_ROUND_EVEN, KIR_TRUNC,
	KIR_ISNAN, KIR_ISINF, KIR_SIGN,
	KIR_EXPM1, KIR_LOG1P, /* exp(x) - 1 and log(1 + x), exact near 0 */
	KIR_UNOP_COUNT
} kir_unop;

typedef enum kir_binop {
	KIR_ADD, KIR_SUB, KIR_MUL, KIR_DIV /* ints: truncating */, KIR_REM /* ints: C %, floats: fmod */,
	KIR_FLOORDIV, KIR_FLOORMOD /* index math: floor semantics */, KIR_MIN, KIR_MAX, KIR_POW,
	KIR_AND, KIR_OR, KIR_XOR, KIR_SHL, KIR_SHR, KIR_ATAN2, KIR_BINOP_COUNT
} kir_binop;

typedef enum kir_cmp { KIR_EQ, KIR_NE, KIR_LT, KIR_LE, KIR_GT, KIR_GE } kir_cmp;

typedef struct kir_buffer {
	int id; /* position in kir_kernel.buffers, or in .locals for a local buffer */
	kir_mem_space space;
	const char *name;
	tbc_dtype dtype;
	kir_buffer_role role;
	int rank;
	struct kir_expr *dims[TBC_MAX_RANK];
} kir_buffer;

typedef struct kir_var {
	int id;
	const char *name;
	tbc_dtype type;
	/* A float sum whose terms may be added in another order (set by
	 * lowering): the CPU backend marks the add that updates it
	 * reassociable, so a loop summing into it vectorizes with partial
	 * sums.  The evaluator adds in order. */
	bool reassoc;
} kir_var;

typedef enum kir_expr_kind {
	KIR_E_INT,    /* i: an integer constant of `type` */
	KIR_E_FLOAT,  /* f: a float constant of `type` */
	KIR_E_VAR,    /* var: a loop variable or scalar local */
	KIR_E_SIZE,   /* size: the kernel's size parameter number `size` */
	KIR_E_LOAD,   /* buf[a] */
	KIR_E_UNARY,  /* unop(a) */
	KIR_E_BINARY, /* binop(a, b) */
	KIR_E_CMP,    /* cmp(a, b): bool */
	KIR_E_SELECT, /* a ? b : c */
	KIR_E_CAST,   /* (type)a, with ONNX Cast semantics (saturate for float8) */
	KIR_E_LOCAL_ID /* index: the work-item's position in its group along dim `size` */
} kir_expr_kind;

typedef struct kir_expr {
	kir_expr_kind kind;
	tbc_dtype type;
	int64_t i;
	double f;
	int op; /* kir_unop / kir_binop / kir_cmp */
	int size;
	kir_var *var;
	kir_buffer *buf;
	struct kir_expr *a, *b, *c;
} kir_expr;

typedef enum kir_stmt_kind {
	KIR_S_FOR,   /* for var in [lo, hi) step `step`: body */
	KIR_S_STORE, /* buf[index] = value */
	KIR_S_SET,   /* var = value (scalar locals: accumulators) */
	KIR_S_IF,    /* if cond: body else: orelse */
	/* error message if cond: the run fails with `message` (the interpreter's
	 * error, e.g. integer division by zero).  What the kernel stores after a
	 * failed check is unspecified; no later kernel runs.  Backends report it
	 * through the host's error callback (include/tbc/abi.h). */
	KIR_S_ERROR,
	/* Every work-item of the group reaches it before any goes on; what
	 * items stored to local buffers before it, every item reads after it.
	 * Only at group-uniform points (docs/kernel-ir.md). */
	KIR_S_BARRIER,
	/* A warp's matrix multiply-accumulate (kir_mma, below): only in
	 * grouped kernels for targets that declare it, at group-uniform points
	 * as a barrier. */
	KIR_S_MMA,
	/* A CPU micro-tile of bf16 pair dot products summed in f32 (kir_dot2,
	 * below): only for targets that declare it. */
	KIR_S_DOT2,
	/* bf16 pair dot products over 16 x 16 f32 tiles (kir_tile2, below):
	 * only for targets that declare it. */
	KIR_S_TILE2,
	/* Byte dot products summed in int32 (kir_dot4, below): only for
	 * targets that declare it (tbc_target_desc.dot4_u8s8). */
	KIR_S_DOT4,
	/* A float micro-tile of fused multiply-adds (kir_fma_tile, below):
	 * only for targets that declare it (tbc_target_desc.fma_tile). */
	KIR_S_FMA_TILE
} kir_stmt_kind;

/* A matrix multiply-accumulate of the subgroups of 32 items (warps) of a
 * group, m16n8k16 with f16 or bf16 operands in local memory and f32 sums
 * in each item's locals -- the tensor-core instruction (mma.sync) of
 * NVIDIA GPUs from sm_80, which only a target declaring it receives
 * (tbc_target_desc.mma_f16 / mma_bf16).  Items are numbered x + gx * (y +
 * gy * z) in the group; item n is lane n % 32 of its warp, with g = lane / 4
 * and t = lane % 4.  Every item computes, for i < mi, j < ni, e < 4:
 *
 *   r = 16 i + g + 8 (e / 2),  c = 8 j + 2 t + e % 2
 *   acc[(i * ni + j) * 4 + e] += sum over q < 16 of a[a_at + r * lda + q] * b[b_at + q * ldb + c]
 *
 * (the sum of the exact products and the accumulator rounded to f32 once
 * by the evaluator; a device rounds within a few f32 ulps of that: the
 * kernel must be marked contract).  So the item's sums are the ones the
 * instruction's fragment layout gives lane n, and each item's result
 * depends on local memory and its own accumulators alone.  Rules: a and b
 * are local buffers of one dtype, f16 or bf16; lda and ldb multiples of 8;
 * a_at and b_at multiples of 8 on which the items of a warp agree (the
 * evaluator checks both), so the rows a device loads are 16-byte aligned
 * (ldmatrix). */
typedef struct kir_mma {
	int mi, ni;                 /* 16-row tiles of a, 8-column tiles of b: 1 .. 8 each */
	struct kir_buffer *a, *b;   /* local buffers, f16 or bf16 */
	struct kir_expr *a_at, *b_at;
	int64_t lda, ldb;           /* row pitches, in elements */
	struct kir_var **acc;       /* mi * ni * 4 f32 locals */
} kir_mma;

/* A micro-tile of bf16 pair dot products with f32 sums -- x86's
 * vdpbf16ps (AVX512_BF16), which only a target declaring it receives
 * (tbc_target_desc.dot_bf16).  For r < mr, c < nc (nc = 16 * nv), pairs
 * p < ceil(kn / 2), in that order of p:
 *
 *   a1 = 2p + 1 < kn ? a[a_at[r] + 2p + 1] : +0,  a0 = a[a_at[r] + 2p]
 *   b0 = b[b_at + p * ldb + 2c],  b1 = b[b_at + p * ldb + 2c + 1]
 *   acc[r * nc + c] = ftz(fma(daz(a1), daz(b1), daz(acc)))
 *   acc[r * nc + c] = ftz(fma(daz(a0), daz(b0), acc))
 *
 * daz: a subnormal input (bf16 operand or f32 accumulator) read as a zero
 * of its sign; fma: the exact product plus the accumulator rounded once to
 * f32, to nearest even; ftz: a subnormal result becomes a zero of its sign;
 * a NaN result has an unspecified payload.  That is the instruction's
 * arithmetic, the odd element of a pair first (checked against the CPU by
 * unit.test_dot2).  a holds each row's k values contiguously; b is laid
 * out in k pairs (gemm's "pairs" layout): b1 is read even for an odd kn's
 * last pair (it must be there, zero). */
typedef struct kir_dot2 {
	int mr, nv;                 /* rows 1 .. 8, vectors of 16 columns 1 .. 4 */
	struct kir_buffer *a, *b;   /* bf16 */
	struct kir_expr *a_at[8];   /* index: element of a(r, 0) */
	struct kir_expr *b_at, *ldb, *kn; /* index */
	struct kir_var **acc;       /* mr * nv * 16 f32 locals */
} kir_dot2;
/* A block of mt x nt tiles of 16 x 16 sums of dot products -- x86's AMX,
 * which only a target declaring it receives (tbc_target_desc.tile_bf16,
 * tile_i8).  Two forms, by a's dtype:
 *
 * bf16 (tdpbf16ps): f32 sums of bf16 pairs.  With a(r, q) = a[a_at + r *
 * lda + q] and b(q, c) = b[b_at + (q / 2) * ldb + 2 c + q % 2] (b in k
 * pairs, as for kir_dot2), for r < 16 mt, c < 16 nt: t = +0, then for each
 * chunk of 32 k values [q0, q0 + w) in order of q0 (w = 32, the last chunk
 * kn - q0):
 *
 *   e = 0, o = 0
 *   for p < w / 2:  e = ftz(fma(daz(a(r, q0 + 2p)), daz(b(q0 + 2p, c)), e))
 *                   o = ftz(fma(daz(a(r, q0 + 2p + 1)), daz(b(q0 + 2p + 1, c)), o))
 *   t = ftz(t + ftz(e + o))
 *
 * and last acc[r * 16 nt + c] = acc + t (an f32 add, rounded to nearest:
 * the tile starts from zero, so an accumulator of +0 -- the GEMMs' -- gets
 * exactly the instruction's sum over all chunks).
 *
 * (daz, fma, ftz as for kir_dot2).  That is the instruction's arithmetic
 * as Intel's manual states it -- each chunk's even and odd products summed
 * apart from zero, then added to the accumulator -- and as this CPU
 * computes it (checked bit for bit by unit.test_tile2).  kn even (every
 * row's last pair is in a).
 *
 * u8 or i8 a, i8 b (tdpbusd, tdpbssd): int32 sums of byte products, b in
 * groups of 4 along k (kir_dot4's layout: b(q, c) = b[b_at + (q / 4) *
 * ldb + 4 c + q % 4]):
 *
 *   acc[r * 16 nt + c] += sum over q < kn of a(r, q) * b(q, c)
 *
 * wrapping in int32 (exact, so in any order); a read as unsigned (u8) or
 * signed (i8) as its dtype says.  kn a multiple of 4.
 *
 * Rules: a and b global buffers; acc f32 (bf16) or i32 (8-bit) locals. */
typedef struct kir_tile2 {
	int mt, nt;                 /* tiles of 16 rows, of 16 columns: 1 .. 2 each */
	struct kir_buffer *a, *b;   /* bf16 and bf16, or u8 / i8 and i8 */
	struct kir_expr *a_at, *lda, *b_at, *ldb; /* index */
	int64_t kn;                 /* k values: bf16 even, 8-bit a multiple of 4, >= 2 */
	struct kir_var **acc;       /* 16 mt x 16 nt f32 (bf16) or i32 locals, row-major */
} kir_tile2;
/* Whether a tile2 is of the 8-bit form (tdpbusd / tdpbssd). */
static inline bool kir_tile2_is_int8(const kir_tile2 *m) { return m->a->dtype != TBC_DT_BF16; }
/* A register tile of an integer GEMM summing products of 8-bit operands
 * four at a time into int32 -- x86's vpdpbusd (AVX-512 VNNI), which only a
 * target declaring it receives (tbc_target_desc.dot4_u8s8).  For r < mr,
 * c < nc and g < groups:
 *
 *   acc[r * nc + c] += sum over q < 4 of ua(a[a_at[r] + 4 g + q]) * b[b_at + g * ldb + 4 c + q]
 *
 * with ua(x) = x for a u8 buffer a and x + 128 for an i8 one (the
 * instruction multiplies unsigned by signed bytes: a signed a is read with
 * its sign bit flipped), b i8 (B packed in groups of 4 along k: the 4
 * bytes of a column's group side by side), the sums wrapping in int32 as
 * the instruction's do.  Integer sums are exact, so any order gives the
 * same bits.  Rules: mr 1 .. KIR_DOT4_MAX_MR, nc a multiple of 16 up to
 * 64, ldb >= 4 nc, acc the kernel's i32 locals. */
#define KIR_DOT4_MAX_MR 12
typedef struct kir_dot4 {
	int mr, nc;
	struct kir_buffer *a, *b;
	struct kir_expr *a_at[KIR_DOT4_MAX_MR]; /* element index of row r's k = 0 */
	struct kir_expr *b_at, *groups;          /* index expressions */
	int64_t ldb;                             /* elements between groups of b */
	struct kir_var **acc;                    /* mr * nc i32 locals */
} kir_dot4;

/* A register tile of a float GEMM with fused multiply-adds -- a CPU's FMA
 * unit on vector accumulators, which only a target declaring it receives
 * (tbc_target_desc.fma_tile).  For k in [klo, khi) in order, r < mr and
 * c < nc:
 *
 *   acc[r * nc + c] = fma(a[a_at[r] + k * a_ks], b[b_at + k * ldb + c], acc[r * nc + c])
 *
 * fma: the exact product plus the accumulator rounded once to the
 * accumulators' type, to nearest even (C's fmaf / fma); a NaN result has
 * an unspecified payload.  Each accumulator is its own chain in k order,
 * so the order of r and c within a step does not matter.  b's nc columns
 * of a k are contiguous (the vector direction).  Rules: a, b and the
 * accumulators one type, f32 or f64; mr 1 .. KIR_FMA_TILE_MAX_MR, nc 1 ..
 * KIR_FMA_TILE_MAX_NC; only in kernels marked contract (a product added
 * with one rounding, where the interpreter rounds twice).
 *
 * Resuming (y non-NULL; a GEMM's K blocks, whose partial sums go through
 * y): before the first step, where `resume` holds,
 *
 *   acc[r * nc + c] = y[y_at[r] + c]
 *
 * (y of the accumulators' type, its nc columns contiguous); elsewhere the
 * sums start from acc as without y.  A target loads a row's vectors. */
#define KIR_FMA_TILE_MAX_MR 8
#define KIR_FMA_TILE_MAX_NC 64
typedef struct kir_fma_tile {
	int mr, nc;
	struct kir_buffer *a, *b;                   /* f32 or f64, the accumulators' type */
	struct kir_expr *a_at[KIR_FMA_TILE_MAX_MR]; /* index: element of a(r, 0) */
	struct kir_expr *a_ks;                      /* index: elements between a's k values */
	struct kir_expr *b_at, *ldb;                /* index: element of b(0, 0); between b's rows */
	struct kir_expr *klo, *khi;                 /* index: the k range */
	struct kir_var **acc;                       /* mr * nc locals, row-major */
	struct kir_buffer *y;                       /* NULL, or where the sums resume from */
	struct kir_expr *y_at[KIR_FMA_TILE_MAX_MR]; /* index: element of y(r, 0) */
	struct kir_expr *resume;                    /* bool: start from y */
} kir_fma_tile;

typedef struct kir_stmt {
	kir_stmt_kind kind;
	kir_var *var;
	kir_expr *lo, *hi;
	int64_t step;
	kir_loop_kind loop;
	kir_buffer *buf;
	kir_expr *index, *value, *cond;
	struct kir_stmt *body, *orelse; /* lists linked by next */
	struct kir_stmt *next;
	const char *message; /* KIR_S_ERROR */
	const kir_mma *mma;  /* KIR_S_MMA */
	const kir_dot2 *dot2; /* KIR_S_DOT2 */
	const kir_tile2 *tile2; /* KIR_S_TILE2 */
	const kir_dot4 *dot4; /* KIR_S_DOT4 */
	const kir_fma_tile *fma_tile; /* KIR_S_FMA_TILE */
} kir_stmt;

typedef struct kir_kernel {
	tbc_arena *arena;
	const char *name;
	int n_buffers;
	kir_buffer **buffers;
	int n_sizes;
	const char **size_names; /* symbolic dims the kernel takes at run time */
	int n_vars;
	kir_stmt *body;
	/* Added with the builder: every var, indexed by id, and whether building
	 * ran out of memory (the builder then returns NULL and sets it). */
	kir_var **vars;
	bool failed;
	/* Floating multiply-adds may fuse into one rounding (an FMA).  Set by
	 * generators whose accumulation order already differs from the
	 * interpreter's (GEMM, convolution), never by kernels that must match it
	 * bit for bit (casts, quantization). */
	bool contract;
	/* A grouped kernel (the parallel form for devices): work-items per
	 * group along each of group_dims dims (1-3; 0: not grouped), and its
	 * local buffers. */
	int group_dims;
	int64_t group[3];
	int n_locals;
	kir_buffer **locals;
	/* kir_var_new's count of variables per name stem (kir.c) */
	void *stems;
	int n_stems, stem_cap;
} kir_kernel;

/* Classes of value types every consumer asks about (index is neither). */
static inline bool kir_type_is_float(tbc_dtype t) { return t != KIR_INDEX && tbc_dtype_is_float(t); }
/* f16, bf16, float8, float4: stored narrow, computed in f32 after a cast. */
static inline bool kir_type_is_narrow_float(tbc_dtype t) {
	return kir_type_is_float(t) && t != TBC_DT_F32 && t != TBC_DT_F64;
}
static inline bool kir_type_is_unsigned(tbc_dtype t) { return t != KIR_INDEX && tbc_dtype_is_unsigned(t); }

/* ---- Builder (codegen/kir/kir.c) -------------------------------------------------
 * Constructors take and return arena nodes; a NULL operand gives NULL (and
 * out-of-memory sets k->failed), so a caller checks once at the end.  Result
 * types follow the operands: binary/unary as the operand (ISNAN, ISINF: bool),
 * compare: bool, select: the arms.  Index (KIR_INDEX) arithmetic on constants
 * folds, and x + 0, x * 1, x * 0 simplify, so printed kernels stay readable. */
kir_kernel *kir_kernel_new(tbc_arena *arena, const char *name);
/* A copy of k (its statements shared) whose arrays and name counts are its
 * own, so that either may add buffers and variables; NULL when out of memory. */
kir_kernel *kir_kernel_copy(const kir_kernel *k);
/* The size parameter named name, added when new; returns its number. */
int kir_size_param(kir_kernel *k, const char *name);
kir_buffer *kir_buffer_new(kir_kernel *k, const char *name, tbc_dtype dtype, kir_buffer_role role, int rank,
			   kir_expr *const *dims);
/* A loop variable or scalar local; names are made unique ("i", "i.1", ...). */
kir_var *kir_var_new(kir_kernel *k, const char *name, tbc_dtype type);

kir_expr *kir_e_int(kir_kernel *k, tbc_dtype type, int64_t v);
kir_expr *kir_e_index(kir_kernel *k, int64_t v); /* an int of type KIR_INDEX */
kir_expr *kir_e_float(kir_kernel *k, tbc_dtype type, double v);
kir_expr *kir_e_var(kir_kernel *k, kir_var *v);
kir_expr *kir_e_size(kir_kernel *k, int size);
kir_expr *kir_e_load(kir_kernel *k, kir_buffer *b, kir_expr *index);
kir_expr *kir_e_unary(kir_kernel *k, kir_unop op, kir_expr *a);
kir_expr *kir_e_binary(kir_kernel *k, kir_binop op, kir_expr *a, kir_expr *b);
kir_expr *kir_e_cmp(kir_kernel *k, kir_cmp op, kir_expr *a, kir_expr *b);
kir_expr *kir_e_select(kir_kernel *k, kir_expr *cond, kir_expr *a, kir_expr *b);
kir_expr *kir_e_cast(kir_kernel *k, tbc_dtype type, kir_expr *a); /* a itself when already of type */
/* A cast to a float8 type without saturation (ONNX Cast saturate=0): out of
 * range gives infinity, or NaN where the format has no infinity.  Marked by
 * op == KIR_CAST_NO_SATURATE on the KIR_E_CAST node; prints as
 * "f8e4m3fn.nosat(x)". */
#define KIR_CAST_NO_SATURATE 1
kir_expr *kir_e_cast_nosat(kir_kernel *k, tbc_dtype type, kir_expr *a);
/* A cast of a narrow float to f32 or f64 whose NaN results may have any sign
 * and payload (an operand of arithmetic, whose NaN results IEEE 754 leaves
 * to the hardware anyway; docs/kernel-ir.md): the CPU then converts f16 in
 * one instruction, without making its NaNs canonical.  Every other value is
 * the cast's.  Marked by op == KIR_CAST_ANY_NAN; prints as "f32.anynan(x)".
 * From any other type it is kir_e_cast. */
#define KIR_CAST_ANY_NAN 2
kir_expr *kir_e_cast_any_nan(kir_kernel *k, tbc_dtype type, kir_expr *a);
/* Index shorthands. */
kir_expr *kir_e_add(kir_kernel *k, kir_expr *a, kir_expr *b);
kir_expr *kir_e_mul(kir_kernel *k, kir_expr *a, kir_expr *b);
/* The value of an index expression when it is a constant. */
bool kir_e_const_index(const kir_expr *e, int64_t *out);

/* A statement list under construction. */
typedef struct kir_block {
	kir_stmt *first, *last;
} kir_block;
void kir_block_add(kir_kernel *k, kir_block *b, kir_stmt *s); /* NULL s marks k->failed */

kir_stmt *kir_s_for(kir_kernel *k, kir_var *var, kir_expr *lo, kir_expr *hi, int64_t step, kir_loop_kind loop,
		    kir_stmt *body);
kir_stmt *kir_s_store(kir_kernel *k, kir_buffer *b, kir_expr *index, kir_expr *value);
kir_stmt *kir_s_set(kir_kernel *k, kir_var *var, kir_expr *value);
kir_stmt *kir_s_if(kir_kernel *k, kir_expr *cond, kir_stmt *body, kir_stmt *orelse);
/* Fails the run with message when cond (bool) holds; message is copied. */
kir_stmt *kir_s_error(kir_kernel *k, kir_expr *cond, const char *message);
/* Whether the kernel has an error statement (a backend checks after it). */
bool kir_kernel_can_fail(const kir_kernel *k);

/* ---- The parallel form (grouped kernels) ---------------------------------------
 * k becomes grouped with work-groups of size[0] x ... x size[dims - 1]
 * items (dims 1-3); its body is then a nest of KIR_LOOP_GRID loops. */
void kir_kernel_set_group(kir_kernel *k, int dims, const int64_t *size);
static inline bool kir_kernel_is_grouped(const kir_kernel *k) { return k->group_dims > 0; }
static inline int64_t kir_group_items(const kir_kernel *k) {
	int64_t n = 1;
	for (int d = 0; d < k->group_dims; d++) n *= k->group[d];
	return n;
}
/* How a device runs a kernel: as work-groups (a grouped kernel), as
 * work-items striding over one top-level parallel loop (GRID: the body is
 * that loop, after statements that store nothing and set nothing its bounds
 * read, which every work-item runs), or on one work-item (SINGLE: anything
 * else, e.g. sequential code, or two parallel loops whose second may read
 * what the first stored).  A device backend maps the first
 * two to its grid; a SINGLE kernel runs the whole body on one work-item.
 * Lowering for a TBC_PAR_GRID target aims for GROUPS or GRID. */
typedef enum kir_launch_shape {
	KIR_LAUNCH_SINGLE = 0,
	KIR_LAUNCH_GRID = 1,
	KIR_LAUNCH_GROUPS = 2
} kir_launch_shape;
kir_launch_shape kir_kernel_launch_shape(const kir_kernel *k);
/* The loop a GRID kernel's work-items stride over; NULL for other shapes. */
const kir_stmt *kir_kernel_grid_loop(const kir_kernel *k);
/* A local buffer of static dims (rank >= 1), in k->locals. */
kir_buffer *kir_local_new(kir_kernel *k, const char *name, tbc_dtype dtype, int rank, const int64_t *dims);
kir_expr *kir_e_local_id(kir_kernel *k, int dim);
kir_stmt *kir_s_barrier(kir_kernel *k);
/* A warp matrix multiply-accumulate (kir_mma); m and its acc array are
 * copied. */
kir_stmt *kir_s_mma(kir_kernel *k, const kir_mma *m);
/* A bf16 pair dot-product micro-tile (kir_dot2); d and its acc array are
 * copied. */
kir_stmt *kir_s_dot2(kir_kernel *k, const kir_dot2 *d);
/* Whether a kernel holds a kir_dot2 (which only targets declaring
 * dot_bf16 run). */
bool kir_kernel_has_dot2(const kir_kernel *k);
/* A block of bf16 pair dot-product tiles (kir_tile2), copied as for dot2. */
kir_stmt *kir_s_tile2(kir_kernel *k, const kir_tile2 *d);
/* A byte dot-product tile (kir_dot4); d and its acc array are copied. */
kir_stmt *kir_s_dot4(kir_kernel *k, const kir_dot4 *d);
/* A float multiply-add tile (kir_fma_tile); d and its acc array are copied. */
kir_stmt *kir_s_fma_tile(kir_kernel *k, const kir_fma_tile *d);
/* Bytes of k's local buffers together. */
int64_t kir_local_bytes(const kir_kernel *k);

/* ---- Printer, verifier (codegen/kir/kir.c), evaluator (codegen/kir/kir_eval.c) ----- */
/* The text form (docs/kernel-ir.md), malloc'd; NULL when out of memory. */
char *kir_print(const kir_kernel *k);
/* The kernel as kir_print prints it without its name, its buffers by their
 * place (b0, b1, ...; l0 ... for local ones) and reassociable variables
 * marked: two kernels with the same canonical text compute the same thing
 * on the buffers they are given, so one compiled function can serve both
 * (malloc'd; NULL when out of memory). */
char *kir_print_canonical(const kir_kernel *k);
const char *kir_type_name(tbc_dtype t); /* "f32", ..., "index" */
const char *kir_unop_name(kir_unop op);
const char *kir_binop_name(kir_binop op);
/* Checks the rules of docs/kernel-ir.md; reports each broken one to d (may be
 * NULL) as TBC_ERR_INTERNAL. */
bool kir_verify(const kir_kernel *k, tbc_diags *d);
/* Whether a grouped kernel fits the target's work-groups: group size at
 * most max_workgroup_size items, local buffers at most local_mem_bytes.
 * An ungrouped kernel fits every target. */
struct tbc_target_desc;
bool kir_fits_target(const kir_kernel *k, const struct tbc_target_desc *t, tbc_diags *d);
/* Runs k over host buffers (buffers[i] for k->buffers[i], dense, in the
 * buffer's dtype) with sizes[j] the value of size parameter j.  Every load
 * and store is bounds-checked against the buffer's dims; false (with a
 * message in d) on a violation.  A grouped kernel runs its groups in order,
 * each group's items statement by statement (a barrier is then a point
 * every item has reached); a barrier reached by some items only, a read of
 * local memory no item stored, and two items touching one local element
 * between barriers (one of them storing) are errors. */
bool kir_eval(const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d);
/* kir_eval in another schedule: with reverse_parallel, parallel, vector and
 * grid loops run from their last iteration to their first, so a kernel whose
 * "independent" iterations are not (two storing one element, one reading
 * what another stores) gives another result than in order: a device may run
 * them in any order (the conformance harness's opencl-eval target). */
typedef struct kir_eval_options {
	bool reverse_parallel;
} kir_eval_options;
bool kir_eval_with(const kir_kernel *k, void *const *buffers, const int64_t *sizes, const kir_eval_options *o,
		   tbc_diags *d);
/* The value of an index expression over k's sizes alone (a buffer's dim, a
 * loop bound): false when it loads or reads a variable. */
bool kir_eval_index(const kir_kernel *k, const kir_expr *e, const int64_t *sizes, int64_t *out, tbc_diags *d);

#endif
