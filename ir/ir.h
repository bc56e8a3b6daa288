/* The graph IR: SSA values with a dtype and a shape of static and symbolic
 * dims, canonical ops from ops.def, graphs owning their ops, a module owning
 * the arena every IR object lives in. */
#ifndef TBC_IR_IR_H
#define TBC_IR_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "dtype.h"
#include "tbc/tbc.h"

/* ---- Limits (docs/limits.md) --------------------------------------------- */
#define TBC_MAX_SUBGRAPH_DEPTH 32
#define TBC_MAX_TENSOR_BYTES ((int64_t)1 << 40)

/* ---- Ops ------------------------------------------------------------------ */
typedef enum tbc_opcode {
#define TBC_OP(id, onnx, min_in, max_in, min_out, max_out, cat, shape, interp, lower, grad) TBC_OP_##id,
#include "ops.def"
#undef TBC_OP
	TBC_OP_COUNT
} tbc_opcode;

typedef enum tbc_opcat {
	TBC_CAT_ELEMENTWISE, /* one output element from the same-index elements of broadcast inputs */
	TBC_CAT_REDUCTION,
	TBC_CAT_CONTRACTION, /* MatMul, Gemm, Einsum, Conv and kin */
	TBC_CAT_WINDOW,      /* pooling and other sliding windows */
	TBC_CAT_NORMALIZATION,
	TBC_CAT_DATA_MOVEMENT,
	TBC_CAT_QUANTIZATION,
	TBC_CAT_SEQUENCE,    /* recurrent nets, attention */
	TBC_CAT_SIGNAL,
	TBC_CAT_CONTROL_FLOW,
	TBC_CAT_OTHER,
	TBC_CAT_COUNT
} tbc_opcat;

typedef struct tbc_op tbc_op;
typedef struct tbc_graph tbc_graph;
typedef struct tbc_module tbc_module;
typedef struct tbc_infer tbc_infer;
typedef struct tbc_interp tbc_interp;

/* Sets the types of op's outputs from its inputs' types (and constant values
 * where a shape depends on them).  Reports through tbc_infer_error. */
typedef bool (*tbc_shape_fn)(tbc_infer *cx, tbc_op *op);
/* Computes outputs from inputs.  in[i] is NULL for an omitted optional input;
 * the kernel creates out[i] for every i < op->n_outputs (it may skip those
 * whose op->outputs[i] is NULL).  Returns 0, or tbc_interp_error(...). */
typedef int (*tbc_interp_fn)(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in,
			     tbc_tensor **out);

typedef struct tbc_opinfo {
	const char *name;      /* canonical name, used in the text form */
	const char *onnx_name; /* ONNX op_type */
	int min_inputs, max_inputs; /* max -1: variadic */
	int min_outputs, max_outputs;
	tbc_opcat category;
	tbc_shape_fn shape;
	tbc_interp_fn interp;
} tbc_opinfo;

extern const tbc_opinfo tbc_ops[TBC_OP_COUNT];
/* TBC_OP_COUNT when no canonical op has that ONNX name. */
tbc_opcode tbc_opcode_from_onnx(const char *onnx_name);
tbc_opcode tbc_opcode_from_name(const char *name);
const char *tbc_opcat_name(tbc_opcat c);

/* ---- Types ---------------------------------------------------------------- */
typedef struct tbc_dim {
	int64_t size;    /* >= 0 when static */
	const char *sym; /* non-NULL when symbolic (size is then -1) */
} tbc_dim;

typedef struct tbc_type {
	tbc_dtype dtype;
	int rank; /* -1: rank unknown */
	tbc_dim dims[TBC_MAX_RANK];
} tbc_type;

bool tbc_type_is_static(const tbc_type *t);
/* Product of static dims, -1 when any dim is symbolic or the rank unknown. */
int64_t tbc_type_numel(const tbc_type *t);
bool tbc_dim_eq(tbc_dim a, tbc_dim b);
/* Same known rank and every dim equal (tbc_dim_eq); dtypes not compared. */
bool tbc_type_same_dims(const tbc_type *a, const tbc_type *b);

/* ---- Attributes ----------------------------------------------------------- */
typedef enum tbc_attr_kind {
	TBC_ATTR_INT,
	TBC_ATTR_FLOAT,
	TBC_ATTR_STRING,
	TBC_ATTR_INTS,
	TBC_ATTR_FLOATS,
	TBC_ATTR_STRINGS,
	TBC_ATTR_TENSOR,
	TBC_ATTR_GRAPH,
	TBC_ATTR_GRAPHS,
	TBC_ATTR_TENSORS
} tbc_attr_kind;

typedef struct tbc_attr {
	const char *name;
	tbc_attr_kind kind;
	int64_t i;
	double f;
	const char *s; /* NUL-terminated; s_len bytes */
	size_t s_len;
	int n; /* element count of the list kinds */
	int64_t *ints;
	double *floats;
	const char **strings;
	tbc_tensor **tensors; /* TENSOR uses tensors[0] */
	tbc_graph **graphs;   /* GRAPH uses graphs[0] */
} tbc_attr;

/* One element of a shape tensor's value as inference knows it
 * (ir/symval.c, docs/symbolic-shapes.md): a constant, a symbolic dim's
 * name (plain or derived), or unknown. */
typedef struct tbc_sval {
	bool known;
	const char *sym; /* known and non-NULL: the value of the dim of this name */
	int64_t c;       /* known and sym NULL: this constant (any sign) */
} tbc_sval;

/* ---- Values and ops --------------------------------------------------------*/
typedef enum tbc_value_kind { TBC_VALUE_INPUT, TBC_VALUE_CONST, TBC_VALUE_RESULT } tbc_value_kind;

typedef struct tbc_use {
	tbc_op *op;
	int index;
	struct tbc_use *next;
} tbc_use;

typedef struct tbc_value {
	uint32_t id; /* unique in the module, dense from 0 */
	const char *name; /* ONNX name, or NULL */
	tbc_value_kind kind;
	tbc_type type;
	tbc_graph *graph; /* where it is defined */
	tbc_op *def;      /* RESULT: the defining op */
	int def_index;
	tbc_tensor *constant; /* CONST: the value, in the arena */
	tbc_use *uses;
	int64_t mem_offset; /* byte offset in the run's arena (passes/memplan.c); -1: not in the arena */
	/* The elements of an integer or bool value of at most TBC_MAX_RANK
	 * elements (a shape tensor) as inference knows them symbolically;
	 * NULL when it knows none (set by inference, ir/symval.c). */
	tbc_sval *svals;
	int n_svals;
} tbc_value;

struct tbc_op {
	tbc_opcode code;
	const char *name; /* ONNX node name, "" when it had none */
	int n_inputs;
	tbc_value **inputs; /* NULL: omitted optional input */
	int n_outputs;
	tbc_value **outputs; /* NULL: output not wanted */
	int n_attrs;
	tbc_attr *attrs;
	tbc_graph *graph;
	tbc_op *prev, *next;
};

struct tbc_graph {
	tbc_module *module;
	tbc_graph *parent; /* enclosing graph of a subgraph */
	tbc_op *parent_op;
	const char *name;
	int n_inputs, cap_inputs;
	tbc_value **inputs;
	int n_outputs, cap_outputs;
	tbc_value **outputs;
	int n_consts, cap_consts;
	tbc_value **consts;
	tbc_op *first, *last;
};

/* One piece of a training step's state (passes/train.c, docs/training.md):
 * main-graph input `input` holds it before a step, output `output` after;
 * init is its value before the first step (NULL: zeros). */
typedef struct tbc_state {
	int input, output;
	const tbc_tensor *init;
	bool weight; /* a trained weight, not the optimizer's */
} tbc_state;

struct tbc_module {
	tbc_arena *arena;
	tbc_graph *main;
	const char *path; /* source file, for diagnostics */
	int64_t ir_version, opset;
	const char *producer;
	uint32_t n_values; /* next value id */
	uint32_t n_syms;   /* fresh symbolic dims made so far */
	/* A training step's state (tbc_train_build); 0 for a model.  Not
	 * copied by tbc_module_clone: the compile path builds the step on its
	 * own copy. */
	int n_state;
	tbc_state *state;
};

/* ---- Building ------------------------------------------------------------- */
tbc_module *tbc_module_new(const char *path);
tbc_graph *tbc_graph_new(tbc_module *m, tbc_graph *parent, const char *name);
tbc_value *tbc_graph_add_input(tbc_graph *g, const char *name, const tbc_type *type);
/* The tensor is copied into the arena. */
tbc_value *tbc_graph_add_const(tbc_graph *g, const char *name, const tbc_tensor *value);
/* As tbc_graph_add_const, but the value refers to `value` itself (not
 * copied), which must outlive the module (tbc_module_clone). */
tbc_value *tbc_graph_add_const_shared(tbc_graph *g, const char *name, tbc_tensor *value);
bool tbc_graph_add_output(tbc_graph *g, tbc_value *v);
/* A deep copy of m (ir/clone.c): graphs, values, ops, attributes, subgraphs,
 * types and names, built in the same order every time (deterministic).
 * Constant tensors are shared with m, not copied: m must outlive the copy.
 * NULL when out of memory. */
tbc_module *tbc_module_clone(const tbc_module *m);
/* A copy of op appended at the end of its graph: the same inputs, fresh
 * unnamed results of the same types, attributes and subgraphs copied (a
 * subgraph reading a value of an enclosing graph reads the same value).
 * NULL when out of memory (a partial copy may be left unlinked). */
tbc_op *tbc_op_clone(tbc_op *op);
/* Creates an op with n_outputs fresh RESULT values of undefined type, appended
 * at the end of g.  Inputs may be NULL (omitted). */
tbc_op *tbc_op_new(tbc_graph *g, tbc_opcode code, const char *name, int n_inputs,
		   tbc_value *const *inputs, int n_outputs);
void tbc_op_set_input(tbc_op *op, int index, tbc_value *v);
/* Grows or shrinks the input list; new slots are NULL. */
bool tbc_op_resize_inputs(tbc_op *op, int n_inputs);
/* Unlinks op from its graph; its outputs must have no uses. */
void tbc_op_remove(tbc_op *op);
void tbc_value_replace_uses(tbc_value *from, tbc_value *to);
size_t tbc_value_use_count(const tbc_value *v);
tbc_attr *tbc_op_add_attr(tbc_op *op, const char *name, tbc_attr_kind kind);
bool tbc_op_remove_attr(tbc_op *op, const char *name);
const char *tbc_value_display_name(const tbc_value *v, char *buf, size_t size);
/* A new symbolic dim with a unique name. */
tbc_dim tbc_module_fresh_dim(tbc_module *m);
tbc_tensor *tbc_tensor_copy_to_arena(tbc_arena *a, const tbc_tensor *t);

/* ---- Attribute access ----------------------------------------------------- */
const tbc_attr *tbc_op_attr(const tbc_op *op, const char *name);
int64_t tbc_attr_int(const tbc_op *op, const char *name, int64_t dflt);
double tbc_attr_float(const tbc_op *op, const char *name, double dflt);
const char *tbc_attr_string(const tbc_op *op, const char *name, const char *dflt);
/* List attributes: returns the element count (or -1 when absent) and sets *out. */
int tbc_attr_ints(const tbc_op *op, const char *name, const int64_t **out);
int tbc_attr_floats(const tbc_op *op, const char *name, const double **out);
const tbc_tensor *tbc_attr_tensor(const tbc_op *op, const char *name);
tbc_graph *tbc_attr_graph(const tbc_op *op, const char *name);

/* ---- Diagnostics (implementation of tbc_diags) -----------------------------*/
void tbc_diags_add(tbc_diags *d, tbc_code code, const char *file, const char *node,
		   const char *op_type, const char *tensor, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));
void tbc_diags_addv(tbc_diags *d, tbc_code code, const char *file, const char *node,
		    const char *op_type, const char *tensor, const char *fmt, va_list ap)
	__attribute__((format(printf, 7, 0)));
/* An error about op (its node name and op type are filled in). */
void tbc_diags_op(tbc_diags *d, tbc_code code, const tbc_op *op, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
tbc_code tbc_diags_first_code(const tbc_diags *d);

/* ---- Verifier and text form ----------------------------------------------- */
bool tbc_verify(const tbc_module *m, tbc_diags *d);
/* Flags of tbc_verify_ex.  ALLOW_UNTYPED: op results may still lack a type
 * (dtype undefined, rank -1), as before shape inference. */
#define TBC_VERIFY_ALLOW_UNTYPED 1u
bool tbc_verify_ex(const tbc_module *m, tbc_diags *d, unsigned flags);
char *tbc_print(const tbc_module *m); /* malloc'd */
/* As tbc_print, but constants over max_const_bytes print as "<N bytes elided>"
 * (for reading, e.g. tbc inspect; the parser refuses such text). */
char *tbc_print_abridged(const tbc_module *m, size_t max_const_bytes);
tbc_module *tbc_parse(const char *text, const char *filename, tbc_diags *d);

/* ---- Shape inference ------------------------------------------------------ */
struct tbc_infer {
	tbc_module *module;
	tbc_diags *diags;
	/* Compiled code fixes every rank before running (the compile pipeline's
	 * passes set this): a rule whose result rank would depend on whether a
	 * symbolic dim is 1 assumes it is not, and lowering checks that at run
	 * time (Squeeze without axes).  The interpreter's inference leaves such
	 * ranks unknown. */
	bool static_ranks;
};
/* Infers every op of g (and its subgraphs) in order. */
bool tbc_infer_graph(tbc_infer *cx, tbc_graph *g);
bool tbc_infer_op(tbc_infer *cx, tbc_op *op);
bool tbc_infer_error(tbc_infer *cx, const tbc_op *op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Shared rules. */
bool tbc_shape_same_as_input0(tbc_infer *cx, tbc_op *op);   /* every output: type of input 0 */
bool tbc_shape_broadcast(tbc_infer *cx, tbc_op *op);        /* multidirectional broadcast, dtype of input 0 */
bool tbc_shape_broadcast_bool(tbc_infer *cx, tbc_op *op);   /* broadcast, bool result */
bool tbc_broadcast_types(tbc_infer *cx, const tbc_op *op, int n, const tbc_type *const *in, tbc_type *out);
void tbc_type_set(tbc_type *t, tbc_dtype dt, int rank, const int64_t *dims);
/* Rank known, every dim fresh-symbolic. */
void tbc_type_set_unknown_dims(tbc_module *m, tbc_type *t, tbc_dtype dt, int rank);
/* Symbolic values of shape tensors (ir/symval.c).  tbc_symval_infer sets
 * the svals of op's results from its inputs' (called by tbc_infer_op after
 * the op's rule).  tbc_input_svals gives input `index`'s elements (from its
 * constant or its svals) into out[0..TBC_MAX_RANK): the count, or -1 when
 * neither is known (absent input, graph input, too long, not an integer). */
void tbc_symval_infer(tbc_infer *cx, tbc_op *op);
int tbc_input_svals(const tbc_op *op, int index, tbc_sval *out);
int tbc_value_svals(const tbc_value *v, tbc_sval *out);
/* The dim an element gives: static for a constant >= 0, symbolic for a
 * name; {-1, NULL} otherwise (negative or unknown). */
tbc_dim tbc_sval_dim(tbc_sval s);
/* Constant value of an input, or NULL when it is not a compile-time constant. */
const tbc_tensor *tbc_input_const(const tbc_op *op, int index);

/* ---- Reference interpreter -----------------------------------------------  */
struct tbc_interp {
	const tbc_module *module;
	tbc_diags *diags;
	struct tbc_slot *env; /* indexed by value id */
	bool check_types;     /* compare every result with its inferred type */
	/* The main graph's inputs (with check_types): a symbolic dim of a result
	 * whose value follows from the inputs' dims (an input's symbol, or a
	 * derived one such as past_seq + seq) is compared too.  NULL: not. */
	const tbc_tensor *const *main_inputs;
};
int tbc_interp_error(tbc_interp *ip, const tbc_op *op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Runs g with the given inputs (borrowed); outer-scope values come from the
 * enclosing run.  out[i] receive new tensors the caller destroys. */
int tbc_interp_graph(tbc_interp *ip, const tbc_graph *g, const tbc_tensor *const *in, int n_in,
		     tbc_tensor **out);

/* ---- Tensors -------------------------------------------------------------- */
tbc_tensor *tbc_tensor_clone(const tbc_tensor *t);
tbc_tensor *tbc_tensor_scalar_f64(tbc_dtype dt, double v);
/* Product of dims with overflow and size checks; -1 when invalid. */
int64_t tbc_shape_numel(int rank, const int64_t *dims);
bool tbc_tensor_same_shape(const tbc_tensor *a, const tbc_tensor *b);

#endif
