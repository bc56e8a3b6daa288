/* The GEMM generator (codegen/lower/matmul.c), shared by MatMul, Gemm and
 * Conv (codegen/lower/conv.c):
 *
 *   y[b](i, j) = epi(sum_k a[b](i, k) * b[b](k, j))   for b < NB, i < M, j < N
 *
 * with every operand addressed as base(b) + row * rs + col * cs.  See
 * docs/codegen.md ("MatMul, Gemm, Conv: the GEMM generator"). */
#ifndef TBC_CODEGEN_LOWER_GEMM_H
#define TBC_CODEGEN_LOWER_GEMM_H

#include "codegen/lower/lower_internal.h"

typedef struct gemm_operand {
	kir_buffer *buf;
	kir_expr *rs, *cs; /* row and column strides, in elements */
	/* B only: laid out in k pairs for kir_dot2 -- element (k, c) at
	 * (k / 2) * rs + 2 c + k % 2 (cs unused); the GEMM is then made of
	 * dot2 statements (gemm_dot2_wanted). */
	bool pairs;
	/* B only, > 0: in column panels of that many columns (gemm_const_panels)
	 * -- element (k, c) at (c / panel) * panel_stride + k * panel + c %
	 * panel (rs, cs unused). */
	int64_t panel;
	kir_expr *panel_stride;
} gemm_operand;

typedef struct gemm_spec {
	tbc_dtype ct;             /* compute type: f32, f64 or an integer type */
	kir_expr *M, *N, *K, *NB; /* sizes */
	gemm_operand a, b, y;
	void *ctx;
	/* Base offset of each operand for batch index `batch` (NULL: 0). */
	kir_expr *(*base)(void *ctx, lk *l, int which /* 0 a, 1 b, 2 y */, kir_expr *batch);
	/* The value stored for the sum acc (of type ct) at (batch, row, col);
	 * NULL: acc cast to y's dtype. */
	kir_expr *(*epi)(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col);
	/* The register tile's rows, when the caller chose them (0: the
	 * target's, gemm_tile_shape): a count that divides M wastes no rows. */
	int mr;
	/* A (or B, taps_b) read from a convolution's padded input planes
	 * rather than from an im2col matrix (conv.c, the direct forms): K is
	 * `taps` blocks of tk (the tap-major order k = t tk + c), and
	 * A(row, t tk + c) is at base + row a.rs + c a.cs + tshift[t] (B(t tk
	 * + c, col) at base + c b.rs + col b.cs + tshift[t]): a tap is a shift
	 * of the rows (the columns).  0 taps: as the strides say.  Only for
	 * the CPU nest's fma tiles (one per tap; a tile of the scalar k loop
	 * fails the kernel), without K blocks. */
	int64_t taps, tk;
	const int64_t *tshift;
	bool taps_b;
} gemm_spec;

/* The register tile of a CPU GEMM in the compute type ct on target t: mr
 * rows by nr contiguous columns (the vector direction). */
void gemm_tile_shape(const tbc_target_desc *t, tbc_dtype ct, int *mr, int *nr);

/* A constant B operand v, stored as a rows x cols matrix, laid out for
 * the kernel: transposed when asked (B stored N x K: its columns become
 * the contiguous vector direction), rows padded by 64 bytes where their
 * length in bytes is a multiple of 512 (such rows all fall into a few sets
 * of a cache, and a K block of B then misses L1: a 128x512 @ 512x2048
 * MatMul ran 1.5x slower than one with 2064 columns).  Sets o (buffer and
 * strides) and returns true; false, o untouched, when v is not a constant
 * or needs no change.  (Padding A's rows, the conv weights, measured no
 * gain on ResNet-50.) */
bool gemm_const_operand(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, gemm_operand *o);

/* Whether a GEMM of a bf16 A (k contiguous: a_k_contiguous) by a bf16 B
 * with N columns (-1: not known when compiling) has B laid out in k pairs
 * for kir_dot2 / kir_tile2 on target t (tbc_target_desc.dot_bf16): by
 * default where the target has AMX tiles (tile_bf16) or dot_bf16_default,
 * elsewhere when TBC_GEMM_DOT2=1 asks (TBC_GEMM_DOT2=0: never).  Then its
 * B must be laid out in pairs (gemm_const_pairs; Conv's im2col writes
 * them). */
bool gemm_dot2_wanted(const tbc_target_desc *t, tbc_dtype a, tbc_dtype b, bool a_k_contiguous, int64_t n);
/* M of a GEMM whose rows are known only while running. */
#define GEMM_M_RUNTIME ((int64_t)-1)
/* A constant B (rows x cols, transposed when asked: K x N as the GEMM
 * reads it) in column panels for a GEMM of M rows on target t, when that
 * fits: M static and within one row tile (a matrix-vector product, B read
 * once: each parallel chunk then streams one contiguous panel instead of
 * a strided block of rows), or M GEMM_M_RUNTIME (one row in a decode
 * step, hundreds in a prefill: the panel is the block a row tile reads
 * either way), the target's (tbc_target_desc.gemv_panels).
 * Sets o; false, o untouched, otherwise. */
bool gemm_const_panels(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t M, tbc_dtype ct,
		       gemm_operand *o);
/* A constant B (rows x cols, transposed when asked: K x N as the GEMM
 * reads it) in column panels of the register tile's width (gemm_tile_shape),
 * padded as gemm_const_panels pads them, for a GEMM of any M: each column
 * tile then streams one contiguous K x NR panel.  False, o untouched, when
 * v is not a constant or N is not a whole number of panels (the last tile
 * would overlap two). */
bool gemm_const_tile_panels(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, tbc_dtype ct,
			    gemm_operand *o);
/* The elements from one such panel of K rows and nr columns to the next:
 * K nr, and a cache line more where that is a multiple of 512 bytes. */
int64_t gemm_tile_panel_stride(int64_t K, int64_t nr, int64_t elem_bytes);
/* gemm_const_operand in k pairs (gemm_operand.pairs) for a constant v;
 * false, o untouched, when v is not a constant. */
bool gemm_const_pairs(lk *l, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, gemm_operand *o);

/* Appends the GEMM's loop nest to the kernel under construction; returns the
 * statement (NULL when out of memory). */
kir_stmt *gemm_generate(lk *l, const gemm_spec *s);

/* The parallel form for device targets (codegen/lower/gemm_grid.c):
 * whether the target wants it (TBC_PAR_GRID with work-groups), and the
 * grouped kernel's nest (tiles staged in local memory, several outputs per
 * work-item).  gemm_generate calls it when wanted. */
bool gemm_grid_wanted(const lk *l);
kir_stmt *gemm_generate_grid(lk *l, const gemm_spec *s);

/* The grid loops of a work-group per TM x TN tile (gemm_grid.c): bv (when
 * batched) over `batches`, bi over M's tiles, bj over N's, body inside; an
 * empty nest when M, N or the batch nb is 0.  The grouped and tensor-core
 * forms share it. */
kir_stmt *gemm_tile_nest(kir_kernel *k, const gemm_spec *s, int64_t tm, int64_t tn, int64_t nb, kir_var *bi,
			 kir_var *bj, kir_var *bv, kir_expr *batches, kir_stmt *body);

/* The tensor-core form (codegen/lower/gemm_mma.c): f16 or bf16 operands
 * summed in f32 by kernel IR's warp matrix multiply-accumulate, for
 * targets declaring it (tbc_target_desc.mma_f16 / mma_bf16).  gemm_generate
 * calls it when wanted, in place of gemm_generate_grid. */
bool gemm_mma_wanted(const lk *l, const gemm_spec *s);
kir_stmt *gemm_generate_mma(lk *l, const gemm_spec *s);

/* Split-K for the grouped form (codegen/lower/gemm_splitk.c): whether and
 * how a GEMM of TM x TN tiles of `items` work-items stepping TK deep sums K
 * in slices.  part NULL: one pass.  Else slices (the count) and steps (TK
 * steps of each slice, every one but the last that deep) are expressions of
 * the sizes: constants for a batch known when compiling; for a batch known
 * only while running (dynamic), 1 where that batch fills the device, and
 * then the grouped kernel stores y itself and the sum kernel runs no item. */
typedef struct gemm_splitk {
	kir_buffer *part; /* f32 partials [slice][batch][row][col], arena scratch */
	kir_expr *slices, *steps;
	bool dynamic;
	int64_t part_elems;
} gemm_splitk;

/* Fills sk for s; false when out of memory. */
bool gemm_splitk_plan(lk *l, const gemm_spec *s, int64_t tm, int64_t tn, int64_t tk, int64_t items, gemm_splitk *sk);
/* Where the partial sums of (batch, 0, 0) of slice `slice` begin; those of
 * (batch, row, col) are row * N + col further. */
kir_expr *gemm_splitk_base(kir_kernel *k, const gemm_spec *s, kir_expr *slice, kir_expr *batch);
/* The kernel summing the partials, slice 0 first, then the epilogue. */
kir_stmt *gemm_splitk_sum(lk *l, const gemm_spec *s, const gemm_splitk *sk);

#endif
