/* Reduction spaces: the loop structure shared by the reductions
 * (codegen/lower/reduce.c), the normalizations (codegen/lower/norm.c) and
 * fused reductions (codegen/lower/fused_reduce.c).  Private to those files.
 *
 * A space is a shape (usually the reduced input's) whose dims are either
 * kept or reduced.  The kernel is parallel over the kept dims (one output
 * point per iteration) and, inside each point, runs one or more sequential
 * passes over the reduced dims that update scalar locals (accumulators).
 * After the passes the point body computes its results from the locals. */
#ifndef TBC_CODEGEN_LOWER_REDUCE_H
#define TBC_CODEGEN_LOWER_REDUCE_H

#include "codegen/lower/lower_internal.h"

typedef struct rspace {
	lk *l;
	kir_kernel *k;
	int rank;
	bool has_dims;                /* dims[] is valid (the space came from a type) */
	tbc_dim dims[TBC_MAX_RANK];
	kir_expr *size[TBC_MAX_RANK];
	bool mask[TBC_MAX_RANK];      /* reduced */
	kir_var *kvar[TBC_MAX_RANK];  /* kept dims' loop variables (NULL: size 1) */
	kir_var *rvar[TBC_MAX_RANK];  /* the current pass's variables over reduced dims */
	kir_expr *cur[TBC_MAX_RANK];  /* the current index along each dim (NULL: out of scope) */
	bool reverse;                 /* passes run the reduced dims backwards (CumSum reverse) */
	/* The parallel form (rs_group): a work-group of `group` items per
	 * output point, each pass split among the items (%r from local_id(0) in
	 * steps of group) and each accumulator combined by a tree in local
	 * memory after it; 0: one point per iteration of a parallel loop. */
	int64_t group;
	kir_var *rlin;
	kir_block point;              /* statements per output point */
	kir_block inner;              /* statements of the open pass */
	bool in_pass;
	bool point_has_loops;
	/* Set by the caller for the open pass when its iterations are
	 * independent (each stores its own element and carries no scalar to
	 * the next, as Softmax's last pass): in the parallel form its loop is
	 * then parallel, which a GPU runs several iterations at a time with
	 * their loads first (codegen/llvm/llvm_unroll.c).  Cleared by
	 * rs_pass_end. */
	bool independent_pass;
} rspace;

/* A space over the dims of type t (mask: the reduced dims). */
bool rs_begin_type(lk *l, rspace *s, const tbc_type *t, const bool *mask);
/* A space over explicit sizes (a reshaped view). */
bool rs_begin_sizes(lk *l, rspace *s, int rank, kir_expr *const *sizes, const bool *mask);
/* Opens a pass over the reduced dims: statements go to s->inner; s->cur holds
 * the full point.  rs_pass_end appends the loops to the point body. */
void rs_pass_begin(rspace *s);
void rs_pass_end(rspace *s);
/* Row-major index of the current point in the whole space / over the kept
 * dims (the reduction's output, with or without keepdims). */
kir_expr *rs_linear(rspace *s);
kir_expr *rs_out_linear(rspace *s);
/* Index into a tensor of type t that broadcasts (numpy, from the right) into
 * the frame: frame dims are space dims map[0..n) (-1: a dim of size 1). */
kir_expr *rs_index_map(rspace *s, const tbc_type *t, int n, const int *map);
/* t broadcasting into the whole space (needs has_dims). */
kir_expr *rs_index(rspace *s, const tbc_type *t);
/* A scalar local set to e in the open pass (or the point body). */
kir_expr *rs_local(rspace *s, const char *name, kir_expr *e);
void rs_set(rspace *s, kir_var *v, kir_expr *e);
/* The number of points a pass visits (the product of the reduced sizes). */
kir_expr *rs_count(rspace *s);
/* Wraps the point body in the kept loops (outermost parallel; in the
 * parallel form one grid loop over the points). */
kir_stmt *rs_finish(rspace *s);
/* Chooses the parallel form when the target runs a grid of work-groups and
 * the passes are long (256 elements or more, or symbolic, or a contiguous
 * row of at least a group's items); call before the first pass.  Then every accumulator of a pass must be combined with
 * rs_group_combine after it, and stores guarded with rs_store. */
bool rs_group(rspace *s);
/* After a pass: every item's v combined with op (add, mul, min, max) into
 * every item's v. */
void rs_group_combine(rspace *s, kir_var *v, kir_binop op);
/* buf[idx] = value in the point body (by one item in the parallel form). */
void rs_store(rspace *s, kir_buffer *buf, kir_expr *idx, kir_expr *value);

/* The Reduce* family. */
typedef enum rkind {
	RK_SUM, RK_MEAN, RK_PROD, RK_MAX, RK_MIN, RK_L1, RK_L2, RK_SUMSQ, RK_LOGSUM, RK_LOGSUMEXP
} rkind;
bool rk_of(tbc_opcode code, rkind *out);
/* The value being reduced at the current point of an open pass (in dtype
 * `dt`); `first` is true in the first pass only. */
typedef kir_expr *(*rs_elem_fn)(void *ctx, rspace *s, bool first);
/* Adds the passes of reduction `kind` over elements of dtype dt to the point
 * body; returns the result (dtype dt) as an expression valid in the point
 * body, NULL with a diagnostic for op when it cannot lower. */
kir_expr *rs_reduce(rspace *s, const tbc_op *op, rkind kind, tbc_dtype dt, rs_elem_fn elem, void *ctx);
/* The reduced-dims mask of a Reduce* op over an input of rank `rank`, from
 * its constant axes; false when the axes are not constant. */
bool rs_reduce_mask(const tbc_op *op, int rank, bool *mask);
/* A Reduce* op whose axes are a run-time input: codegen/lower/reduce.c
 * (also declared in lower_internal.h, for lower_op's dynamic families). */
lower_result lower_dyn_reduce(lower_cx *cx, const tbc_op *op);

#endif
