/* Shared by the lowering files (codegen/lower/lower*.c): the lowering context, the
 * kernel-under-construction helper, and each family's entry point. */
#ifndef TBC_CODEGEN_LOWER_INTERNAL_H
#define TBC_CODEGEN_LOWER_INTERNAL_H

#include "codegen/lower/lower.h"

typedef struct lower_cx {
	const tbc_module *m;
	const tbc_target_desc *target; /* sizes and shapes are chosen for it */
	kir_program *p;
	tbc_diags *d;
	int *buf_of; /* value id -> program buffer, -1 when none yet */
	int n_kernels;
	/* Memory planning, by value id: the program part holding the value (-1:
	 * not placed) and the value's life in positions of main-graph ops (from
	 * its definition to its last reader), for deciding when a reshape may
	 * share its input's storage. */
	int *val_part;
	int *life_start, *life_end;
	/* By value id: computed from the weights alone (a main-graph op, or a
	 * Fused one, whose every input is a constant or such a value), so a
	 * host-threads target computes it once per session
	 * (codegen/lower/load_time.c) and a kernel may lay it out for its
	 * reader once too.  NULL on grid targets. */
	bool *load_time;
	/* By value id: written by an earlier op's kernel (an activation a
	 * convolution applies as it stores, conv.c), so its op lowers to
	 * nothing. */
	bool *computed;
	int op_pos; /* position of the main-graph op being lowered */
	int body_depth; /* > 0 while lowering a control-flow body (codegen/lower/control.c) */
	int n_regions;  /* control-flow regions made so far: names their symbols */
} lower_cx;

/* A kernel being built and the program buffers its buffers bind.  first:
 * a kernel split off it (lk_split_first), launched before it. */
typedef struct lk {
	lower_cx *cx;
	kir_kernel *k;
	int n_args, cap_args;
	int *args;
	kir_kernel *first;
} lk;

bool lk_begin(lk *l, lower_cx *cx, const char *what);
/* The kernel buffer bound to program buffer pb (made once per kernel). */
kir_buffer *lk_buf(lk *l, int pb);
/* Binds the kernel's next buffer to program buffer pb; false when out of
 * memory. */
bool lk_bind(lk *l, int pb);
/* The kernel buffer holding value v (a constant gets its weights slot). */
kir_buffer *lk_value(lk *l, const tbc_value *v);
kir_expr *lk_dim(lk *l, tbc_dim d);
/* Verifies the kernel and appends its launch (for a grid target, the
 * launches of its device form: lower_device_form), after the launch of the
 * kernel split off it first, if any. */
bool lk_end(lk *l, kir_stmt *body);
/* Makes body, with the work-group and local buffers l's kernel has now, a
 * kernel of its own named after l's with suffix, launched before l's and
 * binding the same buffers (its sizes, variables and buffers are l's kernel's
 * at lk_end): a generator whose work needs two launches (split-K's partial
 * sums, then their sum: codegen/lower/gemm_splitk.c) builds both in one
 * kernel, sharing its buffers and expressions.  l's kernel goes on without
 * work-group or local buffers.  Once per kernel; false when out of memory. */
bool lk_split_first(lk *l, kir_stmt *body, const char *suffix);
/* The kernels k runs as on a grid target (codegen/lower/device_form.c): k
 * itself, a top-level nest flattened into one parallel loop, or parts of it
 * launched in order; *out an arena array of them.  Their count, -1 when out
 * of memory. */
int lower_device_form(kir_kernel *k, kir_kernel ***out);

/* ---- Data-dependent shapes -------------------------------------------------
 * A dim inference could not know (a fresh symbol from tbc_module_fresh_dim:
 * Reshape to a shape given at run time, NonZero's count, ...) becomes a
 * computed symbol of the program: a shape kernel of the defining op stores
 * its value into the program's symbol buffer, and every later kernel takes it
 * as a size like a symbol of the inputs.  Buffers sized by computed symbols
 * are allocated while running (kir_pbuf.dynamic).  A lowering may also
 * compute symbols for its own run-time parameters (a slice's start, ...).
 *
 * lower_op sends an op with an output dim not known yet to its family's
 * shape kernel (families.def), which emits the shape kernel first; the
 * family's lowering then asks for the result buffers as usual. */
/* The program symbol of that name (a derived dim is added on first use:
 * lower.c), -1 when there is none. */
int lower_find_sym(lower_cx *cx, const char *name);
bool lower_dim_known(lower_cx *cx, tbc_dim d);
bool lower_type_known(lower_cx *cx, const tbc_type *t);
/* Whether d is a computed symbol of the program (known only while running). */
bool lower_dim_computed(lower_cx *cx, tbc_dim d);
/* Registers the computed symbol named name (or finds it); its index. */
int lower_sym_computed(lower_cx *cx, const char *name);
/* The kernel's view of the program's symbol buffer (int64, one per symbol). */
kir_buffer *lk_syms(lk *l);
/* Appends to b what makes value (an index expression) the run-time size of
 * dim: a store into its symbol when the dim is not known yet, else a check
 * that it agrees with the compiled size; either way the run fails when it is
 * negative.  what names the dim in messages ("output dim 2 of Reshape"). */
bool lower_shape_dim(lk *l, kir_block *b, const tbc_op *op, tbc_dim dim, const char *what, kir_expr *value);

/* The program buffer of value v: made for constants on first use. */
int lower_value_buf(lower_cx *cx, const tbc_value *v);
/* Constant v read as a rows x cols matrix (its dims folded so) and laid
 * out for a GEMM: transposed when asked, each row then padded to pitch
 * elements (>= its length).  One buffer per constant and layout. */
int lower_const_matrix(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t pitch);
/* The same matrix in column panels of `panel`, `stride` elements apart
 * (kir_pbuf.lay.panel: a matrix-vector product's B, read once, each panel
 * one stream). */
int lower_const_panels(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t panel,
		       int64_t stride);
/* The same in k pairs (kir_pbuf.lay.pairs): B of a bf16 GEMM made of
 * kir_dot2, its K rows (cols when transposed) side by side in pairs. */
int lower_const_pairs(lower_cx *cx, const tbc_value *v, int64_t rows, int64_t cols, bool transpose, int64_t pitch);
/* The buffer an op writes its output i to: the graph output it is, or a new
 * temporary. */
int lower_result_buf(lower_cx *cx, const tbc_value *v);
/* A new constant of lowering's own (weights laid out for a kernel: int8
 * GEMMs' packed B, its column sums), dims static, zero-filled; *out_data
 * (in the program's arena) is for the caller to fill.  -1 when out of
 * memory. */
int lower_const_new(lower_cx *cx, tbc_dtype dt, int rank, const int64_t *dims, const char *name, void **out_data);
/* A fresh temporary holding no graph value (scratch one kernel writes and a
 * later one reads, e.g. im2col): placed apart from every planned value. */
int lower_temp_buf(lower_cx *cx, const tbc_type *type, const char *name);
/* Scratch [n, per] named name (im2col's matrix, the GEMM's packed panels):
 * one buffer shared by every kernel asking with the same name, dtype and
 * leading dim (launches run in order, and each such kernel is done with it
 * when it ends), grown to the largest. */
int lower_shared_temp(lower_cx *cx, const char *name, tbc_dtype dt, tbc_dim n, int64_t per);
/* As lower_result_buf, but v gets storage of its own, apart from the place
 * memory planning gave it (an output that may not overwrite an input). */
int lower_result_buf_apart(lower_cx *cx, const tbc_value *v);
/* Whether the storage of values a and b (placed, or to be placed where
 * memory planning put them) may overlap; false for storage outside the
 * planned arena. */
bool lower_storage_overlaps(lower_cx *cx, const tbc_value *a, const tbc_value *b);
/* Makes v share the storage of value src (a no-op reshape), or copies. */
bool lower_alias(lower_cx *cx, const tbc_value *v, const tbc_value *src);
/* Copies program buffer src into dst (same element count and dtype). */
bool lower_copy(lower_cx *cx, int dst, int src);
/* Marks cx->load_time for the ops of the main graph; false when out of memory. */
bool lower_mark_load_time(lower_cx *cx);
/* Makes v's buffer share program buffer src's storage (v's type may name
 * its dims otherwise: the caller makes them agree). */
bool lower_alias_buf(lower_cx *cx, const tbc_value *v, int src);
/* Lowers one op (of the main graph or of a body). */
bool lower_op(lower_cx *cx, const tbc_op *op);
/* Appends a control marker launch (kir_ctl, codegen/lower/lower.h). */
bool lower_marker(lower_cx *cx, kir_ctl ctl, int s0, int s1, int s2);
/* If, Loop and Scan as program-level regions: codegen/lower/control.c. */
bool lower_control(lower_cx *cx, const tbc_op *op);

bool lower_unsupported(lower_cx *cx, const tbc_op *op);
bool lower_error(lower_cx *cx, const tbc_op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- Loop nests over a shape ---------------------------------------------
 * A nest over out_type's dims with the outermost loop parallel and the
 * innermost vector; dims whose broadcast pattern is the same for every
 * operand are merged.  operands[i] are the types read at broadcast indices. */
typedef struct nest {
	const tbc_type *out;
	int rank;                       /* loops after merging */
	int first[TBC_MAX_RANK];        /* loop g covers output dims [first[g], first[g + 1]) */
	kir_var *vars[TBC_MAX_RANK];
	kir_expr *size[TBC_MAX_RANK];
	kir_loop_kind kinds[TBC_MAX_RANK];
	kir_expr *linear;               /* row-major index into the output */
	kir_block body;                 /* the statements of the innermost body */
} nest;

bool nest_build(lk *l, nest *n, const tbc_type *out_type, int n_operands, const tbc_type *const *operands);
/* Index into an operand of type t (one of those given to nest_build, or any
 * type that broadcasts the same way) at the nest's current point. */
kir_expr *nest_index(lk *l, const nest *n, const tbc_type *t);
/* Wraps n->body in the loops; returns the statement to add. */
kir_stmt *nest_finish(lk *l, nest *n);

/* ---- Families ------------------------------------------------------------*/
/* Whether op has a scalar definition (the elementwise table). */
bool lower_ew_supported(const tbc_op *op);
bool lower_elementwise(lower_cx *cx, const tbc_op *op);
/* The scalar value of elementwise op's output 0 from its inputs' values x (in
 * their storage types, NULL: omitted); NULL with a diagnostic when this
 * instance cannot lower. */
kir_expr *lower_ew_expr(lower_cx *cx, kir_kernel *k, const tbc_op *op, kir_expr **x);
/* As lower_ew_expr, with the run-time checks the value needs (integer
 * division by zero) appended to checks: add them to the body before the
 * value's first use.  lower_ew_expr refuses an op needing a check. */
kir_expr *lower_ew_expr_checked(lower_cx *cx, kir_kernel *k, const tbc_op *op, kir_expr **x, kir_block *checks);
/* A scalar constant operand v inline (a float or integer literal of its
 * dtype); NULL when v is not one. */
kir_expr *lower_scalar_const(kir_kernel *k, const tbc_value *v);
bool lower_fused(lower_cx *cx, const tbc_op *op);

/* A family's entries (codegen/lower/families.def; an op's family is a column
 * of ir/ops.def) return LOWER_OK or LOWER_FAILED (with a diagnostic), or
 * LOWER_NOT_MINE for an op, or a form of it, they do not lower.
 * LOWER_SHAPED (shape kernels only): the op's shape kernel is emitted and
 * its output dims are known now; the family's lowering follows. */
typedef enum lower_result { LOWER_NOT_MINE = -1, LOWER_FAILED = 0, LOWER_OK = 1, LOWER_SHAPED = 2 } lower_result;
lower_result lower_family_reduce(lower_cx *cx, const tbc_op *op);  /* codegen/lower/reduce.c */
lower_result lower_family_norm(lower_cx *cx, const tbc_op *op);    /* codegen/lower/norm.c */
lower_result lower_family_matmul(lower_cx *cx, const tbc_op *op);  /* codegen/lower/matmul.c */
lower_result lower_family_conv(lower_cx *cx, const tbc_op *op);    /* codegen/lower/conv.c */
lower_result lower_family_conv_shape(lower_cx *cx, const tbc_op *op); /* codegen/lower/conv.c */
lower_result lower_family_data(lower_cx *cx, const tbc_op *op);    /* codegen/lower/data.c */
lower_result lower_family_quant(lower_cx *cx, const tbc_op *op);   /* codegen/lower/quant.c */
/* One element of QuantizeLinear / DequantizeLinear from x, its scale and zero
 * point (NULL: none) in their own types; run-time checks go into `checks`
 * (codegen/lower/quant.c; the op's types already checked). */
kir_expr *quant_qdq_value(kir_kernel *k, const tbc_op *op, kir_expr *x, kir_expr *scale, kir_expr *zero_point,
			  kir_block *checks);
lower_result lower_family_rnn(lower_cx *cx, const tbc_op *op);     /* codegen/lower/rnn.c */
lower_result lower_family_signal(lower_cx *cx, const tbc_op *op);  /* codegen/lower/signal.c */
lower_result lower_family_misc(lower_cx *cx, const tbc_op *op);    /* codegen/lower/misc.c */
/* Ops with data-dependent output shapes (see above). */
lower_result lower_dyn_shape(lower_cx *cx, const tbc_op *op); /* codegen/lower/shape.c: Reshape, Expand, ... */
lower_result lower_dyn_select(lower_cx *cx, const tbc_op *op); /* codegen/lower/select.c: NonZero, Unique, NMS, ... */
/* MaxUnpool's output_shape given while running (codegen/lower/select.c, with
 * the shape kernels it shares); the conv family's shape kernel. */
lower_result lower_max_unpool_shape(lower_cx *cx, const tbc_op *op);
lower_result lower_family_data_shape(lower_cx *cx, const tbc_op *op); /* codegen/lower/data.c: Slice, Split, Pad, TopK, ... */
lower_result lower_dyn_reduce(lower_cx *cx, const tbc_op *op); /* codegen/lower/reduce.c: Reduce* with run-time axes */
lower_result lower_dyn_resize(lower_cx *cx, const tbc_op *op); /* codegen/lower/resize.c: Resize (its shape known or not) */
lower_result lower_dyn_signal(lower_cx *cx, const tbc_op *op); /* codegen/lower/signal.c: DFT along a run-time axis */
/* A Fused region holding a reduction (elementwise prologue, one Reduce*,
 * elementwise epilogue): codegen/lower/fused_reduce.c. */
lower_result lower_fused_reduce(lower_cx *cx, const tbc_op *op);

#endif
