/* Private to the conv family's lowering (codegen/lower/conv.c, conv_more.c). */
#ifndef TBC_CODEGEN_LOWER_CONV_H
#define TBC_CODEGEN_LOWER_CONV_H

#include "codegen/lower/lower_internal.h"
#include "ir/kernels/conv_util.h"

/* ConvTranspose, MaxUnpool, GridSample, RoiAlign, DeformConv
 * (codegen/lower/conv_more.c):
 * LOWER_NOT_MINE for any other op. */
lower_result lower_conv_more(lower_cx *cx, const tbc_op *op);

/* A convolution as GEMMs over an im2col scratch (Conv, DeformConv): per
 * batch-and-group b, y[b] = W[b mod G] * col[b] + bias, G groups of Mg
 * output channels and Kg = (input channels per group) * kernel taps, P
 * output positions; M all output channels. */
typedef struct conv_gemm {
	int64_t G, Mg, Kg, P, M;
	/* Elements from one row of col to the next where im2col pads its rows
	 * (conv.c, lower_conv); 0: P. */
	int64_t colp;
	kir_buffer *bias;
	tbc_dtype ct, yt;
	/* col is laid out in k pairs for kir_dot2 (gemm_operand.pairs): row k,
	 * column p of a matrix at (k - k % 2) P + 2 p + k % 2 (Kg even). */
	bool pairs;
	/* Computed transposed (conv_gemm_launch): y^T = col^T W^T, the
	 * positions the GEMM's rows and the output channels its columns. */
	bool transposed;
	int64_t wt_group; /* transposed: elements from a group's W^T panels to the next's */
	/* The direct form (conv.c, conv_direct): A is the padded input planes,
	 * an image a_img elements from the next and a group a_grp; y's rows
	 * (the GEMM's M) are yrows a channel, junk columns included. */
	int64_t a_img, a_grp, yrows;
	/* An elementwise op on y alone (Relu, Clip with constant bounds) that
	 * the stores apply (conv_activation): the kernel then writes its
	 * result instead of y.  NULL: none. */
	const tbc_op *act;
	lower_cx *cx;
} conv_gemm;
/* v (of y's dtype) with c's activation applied, or v where c has none;
 * NULL with a diagnostic when it cannot lower. */
kir_expr *conv_act(const conv_gemm *c, kir_kernel *k, kir_expr *v);
/* gemm_spec's base (which: 0 W, 1 col, 2 y) and epilogue (+ bias, cast to
 * yt) for a conv_gemm context (codegen/lower/conv.c). */
kir_expr *conv_gemm_base(void *ctx, lk *l, int which, kir_expr *batch);
kir_expr *conv_gemm_epi(void *ctx, lk *l, kir_expr *acc, kir_expr *batch, kir_expr *row, kir_expr *col);
/* The kernel y[b] = W[b mod G] * col[b] + bias over batch * G GEMMs (W the
 * weights wv, bias bv or NULL, col and y program buffers, col of dtype
 * col_dt), computed transposed where that wastes less of the register tile
 * (conv.c, conv_transposed_rows; sets c->transposed). */
lower_result conv_gemm_launch(lower_cx *cx, const char *name, conv_gemm *c, const tbc_value *wv, const tbc_value *bv,
			      int colb, int yb, tbc_dim batch, tbc_dtype col_dt);

/* A row of padded planes (conv.c): where inside, pl[out ..] = pw zeros,
 * x[in .. in + W), zeros up to Wrow elements; elsewhere Wrow zeros. */
kir_stmt *conv_padded_row(kir_kernel *k, kir_buffer *x, kir_buffer *pl, kir_expr *out, kir_expr *in, kir_expr *inside,
			  kir_expr *zero, int64_t pw, int64_t W, int64_t Wrow);

/* The register tile's rows when conv c's GEMM is computed transposed
 * (positions as rows, W^T's panels), 0 when it is not (conv.c). */
int conv_transposed_rows(const lower_cx *cx, const conv_gemm *c, const tbc_value *wv, tbc_dtype xt);
/* The same from the GEMM's shape alone, for weights whose transposed panels
 * are laid out some other way (Winograd's U computed when loading). */
int conv_transposed_tile_rows(const lower_cx *cx, const conv_gemm *c);

/* Winograd F(2x2, 3x3) or F(4x4, 3x3) (codegen/lower/conv_winograd.c):
 * whether conv c (geometry g, weights wv, input dtype xt) takes it, and its
 * kernels (the input's planes, their transform, 16 or 36 GEMMs over the
 * channels, the output transform + bias, y's rows copied out) writing y
 * (buffer yb) from x (xb, C channels). */
bool conv_winograd_wanted(const lower_cx *cx, const conv_gemm *c, const conv_geom *g, const tbc_value *wv, tbc_dtype xt);
lower_result conv_winograd(lower_cx *cx, const conv_geom *g, const conv_gemm *c, const tbc_value *wv, const tbc_value *bv,
			   int xb, int yb, tbc_dim nd, int64_t C);

/* Shared by the conv family's files (codegen/lower/conv.c). */
lower_result conv_failed(bool ok); /* LOWER_OK or LOWER_FAILED */
/* "op X <why> has no lowering yet", LOWER_FAILED. */
lower_result conv_refuse(lower_cx *cx, const tbc_op *op, const char *why);
/* Whether dims from..rank-1 of t are static. */
bool conv_static_dims(const tbc_type *t, int from);
/* Whether t has a static dim of 0. */
bool conv_static_empty(const tbc_type *t);
/* Compute type of a float op over dt (narrow floats in f32); false for
 * other types. */
bool conv_float_ct(tbc_dtype dt, tbc_dtype *ct);

#endif
