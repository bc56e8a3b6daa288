/* Shape kernels (codegen/lower/lower_dyn_*.c): a small sequential kernel that
 * reads an op's shape-giving tensors and its inputs' dims, checks them as the
 * interpreter does (run-time errors named after the node), and stores the
 * output dims into their computed symbols (docs/lower-dynamic.md). */
#ifndef TBC_CODEGEN_LOWER_DYN_H
#define TBC_CODEGEN_LOWER_DYN_H

#include "codegen/lower/lower_internal.h"

#define SHK_MAX_STORED 64

typedef struct shk {
	lk l;
	kir_kernel *k;
	kir_block b; /* the kernel's statements, in order */
	const tbc_op *op;
	char where[160]; /* "node 'x' (Reshape)": the prefix of run-time errors */
	int n_stored;    /* symbols this kernel stores */
	const char *stored[SHK_MAX_STORED];
} shk;

bool shk_begin(shk *s, lower_cx *cx, const tbc_op *op);
/* Verifies and launches the kernel. */
bool shk_end(shk *s);
/* Fails the run with "<where>: <message>" when cond holds. */
void shk_fail_if(shk *s, kir_expr *cond, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A scalar local holding value from here on. */
kir_expr *shk_let(shk *s, const char *name, kir_expr *value);
/* Element i of an integer tensor v, as an index. */
kir_expr *shk_elem(shk *s, const tbc_value *v, int64_t i);
/* Dim d of value v (a constant, or a symbol the kernel takes as a size). */
kir_expr *shk_dim_of(shk *s, const tbc_value *v, int d);
/* Output dim d of output o is value: stored when not known yet, else checked
 * (lower_shape_dim); a symbol this kernel stored already is left alone. */
bool shk_out_dim(shk *s, int o, int d, kir_expr *value);
/* The static length of 1-D input `input` (at most TBC_MAX_RANK); -1 with a
 * diagnostic naming `what` otherwise. */
int shk_static_len(lower_cx *cx, const tbc_op *op, int input, const char *what);
/* Stores value (>= 0: the runtime takes a negative computed symbol for one
 * never set) into the computed symbol named name, for a run-time parameter
 * later kernels take as a size; *out (may be NULL) is the dim that reads it. */
bool shk_store_sym(shk *s, const char *name, kir_expr *value, tbc_dim *out);

#endif
