/* The data-movement family (codegen/lower/data*.c): storage-typed buffer
 * views, strides, loop nests and the affine copy every pure data-movement op
 * reduces to, the parameters of shape kernels, and each op's lowering.  See
 * docs/lower-data.md. */
#ifndef TBC_CODEGEN_LOWER_DATA_H
#define TBC_CODEGEN_LOWER_DATA_H

#include "codegen/lower/lower_dyn.h"
#include "codegen/lower/lower_internal.h"

/* The unsigned integer type of an element's storage (u8, u16, u32, u64):
 * data movement copies bits, so every dtype the IR stores moves exactly,
 * f16, bf16, float8 and the one-per-byte 4- and 2-bit types included. */
tbc_dtype data_storage_type(tbc_dtype dt);
/* A kernel buffer for value v seen in its storage type (a read). */
kir_buffer *data_in(lk *l, const tbc_value *v);
/* The buffer op output v is written to, in its storage type; NULL after a
 * diagnostic. */
kir_buffer *data_out(lk *l, const tbc_value *v);
/* The storage bits of element i of data (of dtype dt) as a constant of the
 * storage type. */
kir_expr *data_bits(lk *l, tbc_dtype dt, const void *data, size_t i);
/* The storage bits of the value v converted to dtype dt. */
kir_expr *data_bits_of(lk *l, tbc_dtype dt, double v);

/* Row-major strides of type t as index expressions; returns the element
 * count. */
kir_expr *data_strides(lk *l, const tbc_type *t, kir_expr **strides);
/* Product of dims [lo, hi) of t. */
kir_expr *data_prod(lk *l, const tbc_type *t, int lo, int hi);
/* An index-typed value from an integer (or float: truncated) expression. */
kir_expr *data_to_index(lk *l, kir_expr *e);
/* v in [0, n): negative values count from the end, then clamped into range
 * (an out-of-range index reads the nearest element; see docs/lower-data.md;
 * the index ops check their indices first, data_wrap_checked). */
kir_expr *data_wrap_clamp(lk *l, kir_expr *v, kir_expr *n);
/* The same, with a check added to checks, to run before what uses the
 * index: v outside [-n, n) fails the run with msg, as the interpreter's
 * index check does (the clamp stays: no read or write leaves the buffer
 * on a device whose failed check lets the kernel go on). */
kir_expr *data_wrap_checked(lk *l, kir_expr *v, kir_expr *n, kir_block *checks, const char *msg);

/* Whether a tensor of type t holds elements: *always (static, non-zero
 * dims), *never (a static zero dim), else a run-time condition (returned). */
kir_expr *data_nonempty(lk *l, const tbc_type *t, bool *always, bool *never);
/* dst[di] = value, or the zero bits when cond (may be NULL: always) is false
 * at run time: guards loads from buffers that may be empty. */
kir_stmt *data_guarded_store(lk *l, kir_buffer *dst, kir_expr *di, kir_expr *cond, kir_expr *value);

/* ---- Loop nests ------------------------------------------------------------
 * Loops added outermost first.  A loop of static size 1 is not made: its
 * variable is the constant 0.  Kinds: the first loop parallel, the last
 * vector, the rest sequential, unless a loop is added as DL_SEQ. */
#define DL_MAX 24
typedef struct dloops {
	int n;
	kir_var *v[DL_MAX];
	kir_expr *size[DL_MAX];
	bool seq[DL_MAX];
} dloops;
kir_expr *dl_add(lk *l, dloops *d, kir_expr *size, bool sequential);
/* Wraps body (a statement list) in the loops. */
kir_stmt *dl_wrap(lk *l, dloops *d, kir_stmt *body);

/* ---- Affine copies -------------------------------------------------------
 * dst[dst_off + sum(i_d * dst_stride_d)] = src[src_off + sum(i_d * src_stride_d)]
 * over the box of sizes; dims of size 1 are dropped, and adjacent dims that
 * are contiguous in both buffers merge (when constant). */
typedef struct affine {
	int n;
	kir_expr *size[DL_MAX], *dst[DL_MAX], *src[DL_MAX];
	kir_expr *dst_off, *src_off;
} affine;
void aff_init(lk *l, affine *a);
void aff_dim(affine *a, kir_expr *size, kir_expr *dst_stride, kir_expr *src_stride);
kir_stmt *aff_copy(lk *l, affine *a, kir_buffer *dst, kir_buffer *src);

/* Kernel bodies and kernels (data.c). */
/* Adds s (may be NULL: nothing) to a kernel body. */
void data_add(lk *l, kir_block *b, kir_stmt *s);
/* Ends a kernel whose body may be empty (nothing to move: the kernel is
 * dropped, its launch never made). */
bool data_finish(lk *l, kir_block *b);
/* Ends a kernel with nothing to do: no launch. */
bool data_no_kernel(lk *l);
/* Begins op's kernel, named after the op. */
bool data_begin(lk *l, lower_cx *cx, const tbc_op *op);
/* Fills every element of dst (type t) with value. */
kir_stmt *data_fill(lk *l, kir_buffer *dst, const tbc_type *t, kir_expr *value);
/* Whether t has a static dim of 0. */
bool data_empty_type(const tbc_type *t);

/* Shape kernels' parameters (data.c). */
/* max(lo, min(v, hi)). */
kir_expr *data_clamp(shk *s, kir_expr *v, kir_expr *lo, kir_expr *hi);
/* A run-time parameter of the op (>= 0: the runtime takes a negative
 * computed symbol for one never set) as a computed symbol named after the
 * op's position; *out is the dim later kernels read it through. */
bool data_param_sym(shk *s, const char *what, int d, kir_expr *value, tbc_dim *out);
/* The length of a parameter tensor (a scalar counts 1); -1 (with a
 * diagnostic) when it is not static, not 1-D or longer than max. */
int data_param_len(lower_cx *cx, const tbc_op *op, int input, int max, const char *what);
/* Axes given while running (n values of input `input`), normalised against
 * rank and checked in range and distinct, into out; NULL input: 0..n-1. */
bool data_load_axes(shk *s, const tbc_value *axes, int n, int rank, const char *twice, kir_expr **out);
/* Whether dim d may be named by axes: always when they are given while
 * running, else when the constant list holds it. */
bool data_maybe_axis(const tbc_op *op, int input, int n, int rank, int d);

/* The family's entries (data.c): the lowering of op, and the shape kernel
 * of op when its output shape is given by a tensor's values while running
 * (LOWER_SHAPED: the lowering follows; LOWER_OK: it lowered the data too). */
lower_result lower_family_data(lower_cx *cx, const tbc_op *op);
lower_result lower_family_data_shape(lower_cx *cx, const tbc_op *op);

/* Per-op lowerings. */
/* data_copy.c */
bool lower_data_transpose(lower_cx *cx, const tbc_op *op);
bool lower_data_slice(lower_cx *cx, const tbc_op *op);
bool lower_data_concat(lower_cx *cx, const tbc_op *op);
bool lower_data_split(lower_cx *cx, const tbc_op *op);
bool lower_data_expand(lower_cx *cx, const tbc_op *op);
bool lower_data_tile(lower_cx *cx, const tbc_op *op);
bool lower_data_depth_space(lower_cx *cx, const tbc_op *op);
bool lower_data_slice_dyn(lower_cx *cx, const tbc_op *op);
bool lower_data_split_dyn(lower_cx *cx, const tbc_op *op);
bool lower_data_concat_shape(lower_cx *cx, const tbc_op *op);
/* data_index.c */
bool lower_data_gather(lower_cx *cx, const tbc_op *op);
bool lower_data_gather_elements(lower_cx *cx, const tbc_op *op);
bool lower_data_gather_nd(lower_cx *cx, const tbc_op *op);
bool lower_data_scatter_elements(lower_cx *cx, const tbc_op *op);
bool lower_data_scatter_nd(lower_cx *cx, const tbc_op *op);
bool lower_data_onehot(lower_cx *cx, const tbc_op *op);
bool lower_data_onehot_shape(lower_cx *cx, const tbc_op *op);
bool lower_data_reverse_sequence(lower_cx *cx, const tbc_op *op);
bool lower_data_tensor_scatter(lower_cx *cx, const tbc_op *op);
/* data_pad.c */
bool lower_data_pad(lower_cx *cx, const tbc_op *op);
bool lower_data_pad_dyn(lower_cx *cx, const tbc_op *op);
bool lower_data_center_crop_pad(lower_cx *cx, const tbc_op *op);
bool lower_data_center_crop_pad_shape(lower_cx *cx, const tbc_op *op);
/* data_gen.c */
bool lower_data_shape(lower_cx *cx, const tbc_op *op);
bool lower_data_size(lower_cx *cx, const tbc_op *op);
bool lower_data_constant_of_shape(lower_cx *cx, const tbc_op *op);
bool lower_data_range(lower_cx *cx, const tbc_op *op);
bool lower_data_trilu(lower_cx *cx, const tbc_op *op);
bool lower_data_eye_like(lower_cx *cx, const tbc_op *op);
/* data_more.c */
bool lower_data_topk(lower_cx *cx, const tbc_op *op);
bool lower_data_topk_shape(lower_cx *cx, const tbc_op *op);
bool lower_data_affine_grid(lower_cx *cx, const tbc_op *op);
bool lower_data_affine_grid_shape(lower_cx *cx, const tbc_op *op);
bool lower_data_col2im(lower_cx *cx, const tbc_op *op);

#endif
