/* The broadcasting elementwise engine: every elementwise kernel is a scalar
 * definition (one function per arithmetic domain) handed to ew_map, which
 * broadcasts the inputs, loads each element in the domain, calls the scalar
 * function and stores the result.
 *
 * Domains: floats compute in double and round on store; signed integers and
 * bool compute exactly in int64, unsigned integers exactly in uint64, and the
 * store wraps to the element width (two's complement, as numpy does). */
#ifndef TBC_IR_KERNELS_ELEMENTWISE_H
#define TBC_IR_KERNELS_ELEMENTWISE_H

#include "kernels.h"

/* Per-call parameters of a scalar definition (attributes, bounds) and the
 * channel through which a scalar function reports bad data. */
typedef struct ew_ctx {
	double a, b;       /* float parameters: alpha, beta, bias, lambd, clip bounds */
	int64_t ia, ib;    /* the same for the int64 domain */
	uint64_t ua, ub;   /* and the uint64 domain */
	int64_t flag;      /* an integer attribute: fmod, direction, approximate */
	int bits;          /* width in bits of the element type of the domain input */
	int n;             /* number of inputs */
	const char *error; /* set by a scalar function: the kernel fails with it */
} ew_ctx;

typedef double (*ew_f64_fn)(ew_ctx *c, const double *x);
typedef int64_t (*ew_i64_fn)(ew_ctx *c, const int64_t *x);
typedef uint64_t (*ew_u64_fn)(ew_ctx *c, const uint64_t *x);

/* A scalar definition.  f is required.  Without i, integer inputs go through
 * f (only for ops whose spec allows no integers).  Without u, unsigned inputs
 * go through i: right for ops that are the same bits either way (add, mul,
 * bitwise), wrong for div, compare, min/max, shifts, which must give u. */
typedef struct ew_def {
	ew_f64_fn f;
	ew_i64_fn i;
	ew_u64_fn u;
} ew_def;

/* Computes out[0] = def(in[0..n-1]) with multidirectional broadcasting.  The
 * domain comes from the dtype of in[domain_input]; the result has dtype
 * out_dt.  ctx may be NULL.  Returns 0 or the interp error. */
int ew_map(tbc_interp *ip, const tbc_op *op, const ew_def *def, ew_ctx *ctx, int n, const tbc_tensor *const *in,
	   int domain_input, tbc_dtype out_dt, tbc_tensor **out);

/* The common shapes of a call: a unary or an n-ary op whose result has the
 * dtype of input 0. */
int ew_unary(tbc_interp *ip, const tbc_op *op, const ew_def *def, ew_ctx *ctx, const tbc_tensor *const *in,
	     tbc_tensor **out);
int ew_nary(tbc_interp *ip, const tbc_op *op, const ew_def *def, ew_ctx *ctx, const tbc_tensor *const *in,
	    tbc_tensor **out);
/* n-ary with a bool result (comparisons, logic). */
int ew_nary_bool(tbc_interp *ip, const tbc_op *op, const ew_def *def, const tbc_tensor *const *in,
		 tbc_tensor **out);

/* Defines tbc_interp_<Op> as a call of ew_unary / ew_nary with def and no ctx. */
#define EW_UNARY_KERNEL(Op, def)                                                                    \
	int tbc_interp_##Op(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { \
		return ew_unary(ip, op, &(def), NULL, in, out);                                      \
	}
#define EW_NARY_KERNEL(Op, def)                                                                     \
	int tbc_interp_##Op(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { \
		return ew_nary(ip, op, &(def), NULL, in, out);                                       \
	}
#define EW_BOOL_KERNEL(Op, def)                                                                     \
	int tbc_interp_##Op(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { \
		return ew_nary_bool(ip, op, &(def), in, out);                                        \
	}

#endif
