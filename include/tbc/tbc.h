/* tbc compiler library: import ONNX models, inspect them, run them with the
 * reference interpreter.  The `tbc` command is a thin client of this header. */
#ifndef TBC_TBC_H
#define TBC_TBC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TBC_VERSION_MAJOR 0
#define TBC_VERSION_MINOR 1
#define TBC_VERSION_PATCH 0
#define TBC_VERSION_STRING "0.1.0"

/* The version of the LLVM this library was built with ("19.1.7"). */
const char *tbc_llvm_version(void);

/* Element types.  The values are ONNX's TensorProto.DataType numbers and are
 * never renumbered. */
typedef enum tbc_dtype {
	TBC_DT_UNDEFINED = 0,
	TBC_DT_F32 = 1,
	TBC_DT_U8 = 2,
	TBC_DT_I8 = 3,
	TBC_DT_U16 = 4,
	TBC_DT_I16 = 5,
	TBC_DT_I32 = 6,
	TBC_DT_I64 = 7,
	TBC_DT_STRING = 8,
	TBC_DT_BOOL = 9,
	TBC_DT_F16 = 10,
	TBC_DT_F64 = 11,
	TBC_DT_U32 = 12,
	TBC_DT_U64 = 13,
	TBC_DT_C64 = 14,
	TBC_DT_C128 = 15,
	TBC_DT_BF16 = 16,
	TBC_DT_F8E4M3FN = 17,
	TBC_DT_F8E4M3FNUZ = 18,
	TBC_DT_F8E5M2 = 19,
	TBC_DT_F8E5M2FNUZ = 20,
	TBC_DT_U4 = 21,
	TBC_DT_I4 = 22,
	TBC_DT_F4E2M1 = 23,
	TBC_DT_F8E8M0 = 24,
	TBC_DT_U2 = 25,
	TBC_DT_I2 = 26,
	TBC_DT_F6E2M3 = 27, /* IR version 14: known, not yet computed with */
	TBC_DT_F6E3M2 = 28,
	TBC_DT_COUNT = 29
} tbc_dtype;

/* Result codes.  Values are explicit and never renumbered. */
typedef enum tbc_code {
	TBC_OK = 0,
	TBC_ERR_INVALID_MODEL = 1, /* malformed or inconsistent input */
	TBC_ERR_UNSUPPORTED = 2,   /* valid ONNX that tbc does not handle */
	TBC_ERR_IO = 3,            /* a file could not be read or written */
	TBC_ERR_NO_MEMORY = 4,
	TBC_ERR_INVALID_ARGUMENT = 5, /* the caller passed something wrong */
	TBC_ERR_RUNTIME = 6,       /* an op failed while running */
	TBC_ERR_INTERNAL = 7       /* a broken invariant: a bug in tbc */
} tbc_code;

/* ---- Diagnostics ----------------------------------------------------------
 * Every error carries where it comes from: the file, the ONNX node (name and
 * op type) and the tensor it concerns, where known. */
typedef struct tbc_diags tbc_diags;

typedef struct tbc_diag {
	tbc_code code;
	const char *file;    /* model file, or NULL */
	const char *node;    /* ONNX node name, or NULL */
	const char *op_type; /* ONNX op type, or NULL */
	const char *tensor;  /* tensor or value name, or NULL */
	const char *message;
} tbc_diag;

tbc_diags *tbc_diags_create(void);
void tbc_diags_destroy(tbc_diags *d);
size_t tbc_diags_count(const tbc_diags *d);
const tbc_diag *tbc_diags_get(const tbc_diags *d, size_t i);
/* "file: node 'n' (Op): tensor 't': message" into buf (truncated to size). */
void tbc_diag_format(const tbc_diag *diag, char *buf, size_t size);

/* ---- Tensors --------------------------------------------------------------
 * A dense host tensor.  Sub-byte types (int4, uint4, float4e2m1, int2, uint2) hold one
 * element per byte; every other type is stored in its natural width. */
#define TBC_MAX_RANK 16

typedef struct tbc_tensor {
	tbc_dtype dtype;
	int rank;
	int64_t dims[TBC_MAX_RANK];
	int64_t numel;
	void *data;
} tbc_tensor;

/* NULL when the shape overflows, is negative, exceeds limits or memory runs out. */
tbc_tensor *tbc_tensor_create(tbc_dtype dtype, int rank, const int64_t *dims);
void tbc_tensor_destroy(tbc_tensor *t);
size_t tbc_dtype_size(tbc_dtype dtype);
const char *tbc_dtype_name(tbc_dtype dtype);

/* ---- Models ---------------------------------------------------------------*/
typedef struct tbc_module tbc_module;

/* Reads and imports an ONNX model.  On failure *out_module is NULL and the
 * reasons are in diags. */
tbc_code tbc_module_load_onnx(const char *path, tbc_diags *diags, tbc_module **out_module);
tbc_code tbc_module_load_onnx_memory(const void *data, size_t size, const char *base_dir,
				     const char *display_name, tbc_diags *diags,
				     tbc_module **out_module);
void tbc_module_destroy(tbc_module *m);

size_t tbc_module_input_count(const tbc_module *m);
size_t tbc_module_output_count(const tbc_module *m);
const char *tbc_module_input_name(const tbc_module *m, size_t i);
const char *tbc_module_output_name(const tbc_module *m, size_t i);
tbc_dtype tbc_module_input_dtype(const tbc_module *m, size_t i);

/* Text form of the IR; the caller frees the string with free(). */
char *tbc_module_print(const tbc_module *m);
/* The same with constants larger than max_const_bytes elided, for reading
 * (the parser refuses it). */
char *tbc_module_print_abridged(const tbc_module *m, size_t max_const_bytes);
/* Human summary: ops by kind, parameter count and bytes, inputs and outputs. */
char *tbc_module_summary(const tbc_module *m);

/* Runs the reference interpreter.  inputs are in graph-input order; on success
 * out_outputs[i] receives a tensor the caller destroys. */
tbc_code tbc_interpret(const tbc_module *m, tbc_tensor *const *inputs, size_t n_inputs,
		       tbc_tensor **out_outputs, size_t n_outputs, tbc_diags *diags);

/* ---- Tensor files ---------------------------------------------------------*/
/* .npy (by the NPY magic) or an ONNX TensorProto .pb. */
tbc_code tbc_tensor_read_file(const char *path, tbc_diags *diags, tbc_tensor **out_tensor,
			      char **out_name);
tbc_code tbc_tensor_write_npy(const char *path, const tbc_tensor *t, tbc_diags *diags);

/* ---- Writing a model back (frontend/export.c) ------------------------------
 * The ONNX model at model_path written to out_path as it is, except that each
 * named initializer of its main graph takes the tensor given (of its dtype
 * and dims: else an error naming it), stored inline; other initializers kept
 * outside the model are read in too, so the file stands alone.  A name the
 * model has no initializer for is an error.  How `tbc train --export` writes
 * the trained weights (docs/training.md). */
typedef struct tbc_named_tensor {
	const char *name;
	const tbc_tensor *tensor;
} tbc_named_tensor;
tbc_code tbc_onnx_write_with_initializers(const char *model_path, const tbc_named_tensor *values, size_t n_values,
					  const char *out_path, tbc_diags *diags);

/* ---- Compiling to native code (codegen/) -----------------------------------
 * The compile paths run the pass pipeline (passes/passes.h: folding, CSE,
 * DCE, fusion at -O1 and up; memory planning always) on their own copy of
 * the module, then lower it.  Symbolic dims of the inputs stay symbolic: the artifact takes them
 * at run time.  The compiled model is a tbc_abi_model (include/tbc/abi.h). */
typedef enum tbc_weights_mode {
	TBC_WEIGHTS_EMBED = 0,   /* in the artifact, 64-byte aligned */
	TBC_WEIGHTS_EXTERNAL = 1 /* in a file beside it, "<artifact>.weights" */
} tbc_weights_mode;

/* ---- Training steps (passes/train.c, docs/training.md) ---------------------
 * A compile with train set builds one training step: the forward pass, the
 * loss, the backward pass and the optimizer update.  The step's inputs are
 * the model's inputs, then the label (cross-entropy and mse); its outputs
 * `loss`, then the model's outputs.  The trainable weights and the
 * optimizer's state are state (tbc_abi_model.state): inputs and outputs the
 * runtime session holds and carries from one run to the next. */
typedef enum tbc_loss_kind {
	TBC_LOSS_CROSS_ENTROPY = 1, /* OUTPUT logits [N, C], LABEL int64 [N]: mean over the batch */
	TBC_LOSS_MSE = 2,           /* mean of (OUTPUT - LABEL)^2, LABEL of OUTPUT's type */
	TBC_LOSS_OUTPUT = 3         /* OUTPUT is the loss already: a float scalar */
} tbc_loss_kind;
typedef enum tbc_optimizer_kind {
	TBC_OPT_SGD = 1,      /* w -= lr * g */
	TBC_OPT_MOMENTUM = 2, /* v = momentum * v + g; w -= lr * v */
	TBC_OPT_ADAMW = 3     /* Adam with decoupled weight decay (Loshchilov & Hutter), bias-corrected */
} tbc_optimizer_kind;
typedef struct tbc_train_options {
	tbc_loss_kind loss;
	const char *output; /* the model output the loss reads */
	const char *label;  /* the label input's name (made when the model has none of that name) */
	tbc_optimizer_kind optimizer;
	double lr, momentum, beta1, beta2, eps, weight_decay;
	/* NULL or "all": every float initializer of rank >= 1 the loss depends
	 * on; else a comma list of initializer names.  The others stay constants. */
	const char *trainable;
} tbc_train_options;
/* Defaults: SGD, lr 0.01, momentum 0.9, beta1 0.9, beta2 0.999, eps 1e-8,
 * weight_decay 0.01 (AdamW's), trainable all; no loss (set one). */
void tbc_train_options_init(tbc_train_options *o);
/* "cross-entropy:OUTPUT:LABEL", "mse:OUTPUT:LABEL" or "output:NAME" into o
 * (the names point into spec). */
tbc_code tbc_train_parse_loss(tbc_train_options *o, char *spec, tbc_diags *diags);

typedef struct tbc_compile_options {
	int opt_level;             /* 0..3 (default 2) */
	const char *target_triple; /* NULL: the host; x86_64 and aarch64 triples are known */
	const char *cpu;           /* NULL: the host's CPU for the host triple, "generic" for others;
				      else a name LLVM knows for the triple (llc -mcpu=help) */
	const char *features;      /* NULL: the host's features when cpu is the host's, else the CPU's own;
				      else "+name,-name,..." of features LLVM knows */
	tbc_weights_mode weights;
	const char *prefix;        /* C identifier before "_descriptor" in a .o; NULL: "model" */
	int stats;                 /* nonzero: print per-pass times, arena size and lower bound (stats_file) */
	/* Added with the pass pipeline in the compile paths. */
	const char *dump_after;    /* a pass name or "all": print the IR after it (dump_file) */
	FILE *dump_file;           /* NULL: stderr */
	FILE *stats_file;          /* NULL: stderr */
	struct tbc_compile_stats *stats_out; /* non-NULL: filled with the figures --stats prints */
	/* TEST ONLY (tbc check's tests): non-NULL compiles a deliberately wrong
	 * model, output 0 of the main graph's node of this ONNX name plus 1
	 * (a bool flipped), to check that tbc check --bisect finds it.  Never
	 * set it otherwise. */
	const char *test_perturb_node;
	/* What the artifact holds code for (TBC_TARGETS_* bits; 0: the CPU alone).
	 * With OPENCL the kernels are also printed as OpenCL C and the artifact
	 * carries them with the launch and buffer tables (include/tbc/abi.h,
	 * device_code); without CPU it holds no CPU code and runs on an OpenCL
	 * device only (docs/opencl.md). */
	unsigned targets;
	/* GPU targets, a comma list of cuda[:sm_XX] and rocm[:gfxNNN] (NULL or
	 * "": none), each a device program in the artifact after OpenCL's, in
	 * this order (docs/gpu.md). */
	const char *gpu_targets;
	/* Precision lowering (docs/precision.md): TBC_DT_F16 or TBC_DT_BF16
	 * moves float32 computation to that type where the policy allows;
	 * TBC_DT_F8E4M3FN stores the weights of MatMul, Gemm and Conv as float8
	 * e4m3 with one float32 scale per output channel (computing in float32);
	 * TBC_DT_F32 (init's default) keeps the model's precision.
	 * keep_io_types (init: true) keeps float32 inputs and outputs;
	 * precision_exclude is a comma list of op types and node names kept in
	 * float32. */
	int precision;
	int keep_io_types;
	const char *precision_exclude;
	/* Non-NULL: compile a training step (above) instead of the model. */
	const tbc_train_options *train;
	/* Accuracy budget (docs/precision.md; added last, so the fields before
	 * keep their offsets): with precision F16, BF16 or F8E4M3FN,
	 * accuracy_budget ("rtol=R,atol=A", "cosine=C", "top1", or several of
	 * them comma-separated, all to be met) and calibrate (a folder with one
	 * subfolder per set of inputs, NAME.npy per model input) make the
	 * compile first search, by bisection, for the nodes to keep in float32
	 * (tbc_precision_search), then compile with them excluded.  The search
	 * compiles at most budget_max_compiles times (0: 64; 3 to 10000) and
	 * writes its report (the nodes kept and why) to stats_file. */
	const char *accuracy_budget;
	const char *calibrate;
	int budget_max_compiles;
	/* A memory budget (docs/memory.md): values are recomputed instead of
	 * kept alive until memory planning's arena (every symbol 1) fits it.
	 * memory_budget_bytes > 0: that many bytes; else memory_budget_percent
	 * in (0, 100]: that share of the arena without a budget; both 0: no
	 * budget.  One that cannot be met is an INVALID_ARGUMENT error stating
	 * the smallest arena reached. */
	int64_t memory_budget_bytes;
	double memory_budget_percent;
	/* NVIDIA cubins (docs/gpu.md; added last, as above): each cuda:sm_XX
	 * table of an artifact also holds its PTX assembled by ptxas for that
	 * architecture, when ptxas is found at CUDA_DIR/bin/ptxas (CUDA_DIR:
	 * cuda_path, else $CUDA_PATH, else /usr/local/cuda); without ptxas the
	 * PTX alone (a line in the stats says so).  no_cubin nonzero: never. */
	const char *cuda_path;
	int no_cubin;
	/* QDQ fusion (docs/lower-quant.md; added last, as above): nonzero
	 * rewrites DequantizeLinear -> Conv / MatMul -> QuantizeLinear into
	 * QLinearConv / QLinearMatMul (integer sums, one requantization), as
	 * onnxruntime's graph optimizer does.  Results then follow onnxruntime,
	 * not the model's float meaning: they may differ from the interpreter's
	 * by one quantization step.  0 (init's default): off. */
	int qdq_fusion;
	/* Threads for LLVM's work (added last, as above): the CPU code is
	 * split into several LLVM modules, compiled in parallel and linked
	 * together; the split does not depend on this, so the artifact's bytes
	 * do not either.  0 (init's default): one per CPU of this machine. */
	int compile_threads;
} tbc_compile_options;

#define TBC_TARGETS_CPU 1u
#define TBC_TARGETS_OPENCL 2u

/* What a compile measured (tbc_compile_options.stats_out).  Byte counts
 * take every symbolic dim as 1. */
#define TBC_STATS_MAX_PASSES 16
typedef struct tbc_compile_stats {
	int n_passes;
	struct {
		const char *name; /* static string */
		double seconds;
	} passes[TBC_STATS_MAX_PASSES];
	double lower_seconds;   /* graph IR -> kernel IR */
	double codegen_seconds; /* kernel IR -> object code (LLVM) */
	int n_kernels;
	uint64_t weights_bytes;
	int64_t arena_bytes;    /* the arena a run needs */
	int64_t plan_bytes;     /* of which memory planning's values (the rest: kernels' scratch) */
	int64_t lower_bound;    /* the largest sum of bytes of values live at once */
	int64_t unshared_bytes; /* every intermediate in its own buffer */
	int lowered;            /* 0: lowering failed; arena_bytes is then memory planning's */
	/* Precision lowering: the weights' bytes before it and after the passes
	 * (the graph's constants), ops computing in the low type, Casts made,
	 * and with fp8 the weights stored as e5m2 (the others e4m3). */
	int64_t weights_bytes_fp32, weights_bytes_lowered;
	int precision_ops, precision_casts, precision_e5m2;
	/* The accuracy budget's search: compiles it made (the float32
	 * reference included, the artifact's own not), its seconds, and the
	 * lowered nodes it kept in float32. */
	int budget_compiles, budget_kept;
	double budget_seconds;
	/* Estimated floating-point operations of one run (the graph after the
	 * passes, recomputation included; passes/cost.c), of which recomputed. */
	double flops, recompute_flops;
	/* No order of the ops and no recomputation needs less than this:
	 * the largest sum over one op of its planned inputs and results. */
	int64_t op_lower_bound;
	/* With a memory budget: memory planning's arena without recomputation,
	 * the budget in bytes, the ops cloned; 0 without one. */
	int64_t plan_bytes_unconstrained, memory_budget_bytes;
	int recompute_ops;
	/* LLVM's share (codegen_seconds) in parts: building the IR, then the
	 * modules' passes and code generation (wall time on llvm_threads
	 * threads; llvm_module_seconds is the sum of the modules' own times). */
	double llvm_ir_seconds, llvm_compile_seconds, llvm_module_seconds;
	int llvm_modules, llvm_threads;
} tbc_compile_stats;

void tbc_compile_options_init(tbc_compile_options *o);

/* Whether this machine has what compiling for target ("cpu", "opencl",
 * "cuda", "rocm") needs beyond the library (rocm: the linker ld.lld-19);
 * why holds what is missing, or where the tool is.  "cuda-cubin": whether
 * cuda targets get cubins (ptxas at $CUDA_PATH/bin, else
 * /usr/local/cuda/bin; why: its path). */
int tbc_target_can_compile(const char *target, char *why, size_t why_size);

/* Writes an artifact chosen by path's extension: "x.o" (a relocatable object
 * and "x.h" declaring <prefix>_descriptor, the inputs and the outputs), "x.so"
 * (a shared object exporting tbc_model_descriptor, linked by the system
 * linker), "x.ll" (LLVM IR, for reading), "x.cl" (the kernels as OpenCL C,
 * for reading or another OpenCL host; targets must include OPENCL), "x.ptx"
 * (the first cuda target's PTX), "x.hsaco" (the first rocm target's code
 * object).  External weights go to
 * "<path>.weights". */
tbc_code tbc_compile_to_file(const tbc_module *m, const tbc_compile_options *o, const char *path,
			     tbc_diags *diags);

/* The accuracy budget's search alone (o->accuracy_budget, o->calibrate,
 * o->precision; docs/precision.md): the float32 model and candidates that
 * keep some lowered nodes in float32 are JIT-compiled for this host and run
 * on every calibration set, bisecting over the named nodes the precision
 * pass lowers.  On success *out_exclude (free() it) is the comma list to
 * compile with as precision_exclude: o's own list, then the nodes kept.
 * Errors: a malformed budget, a calibration folder whose files do not match
 * the model's inputs (the file named), a budget no assignment meets (the
 * best reached said); o->stats_out gets the budget_* figures. */
tbc_code tbc_precision_search(const tbc_module *m, const tbc_compile_options *o, tbc_diags *diags,
			      char **out_exclude);

/* Compiles in memory with LLVM's ORC JIT for the host; writes no file. */
typedef struct tbc_jit tbc_jit;
struct tbc_abi_model;
tbc_code tbc_jit_compile(const tbc_module *m, const tbc_compile_options *o, tbc_diags *diags,
			 tbc_jit **out_jit);
const struct tbc_abi_model *tbc_jit_descriptor(const tbc_jit *jit);
void tbc_jit_destroy(tbc_jit *jit);
/* Runs a compiled model on host tensors on the calling thread (a minimal
 * host; the runtime library has the threaded one).  Inputs in graph order;
 * out_outputs[i] receive tensors the caller destroys. */
tbc_code tbc_abi_run_serial(const struct tbc_abi_model *model, tbc_tensor *const *inputs, size_t n_inputs,
			    tbc_tensor **out_outputs, size_t n_outputs, tbc_diags *diags);
/* JIT-compiles m, runs it once, frees it: the conformance harness's "cpu"
 * target (the same signature as tbc_interpret). */
tbc_code tbc_run_cpu(const tbc_module *m, tbc_tensor *const *inputs, size_t n_inputs, tbc_tensor **out_outputs,
		     size_t n_outputs, tbc_diags *diags);

/* ---- Checking targets against each other (tbc check) ----------------------
 * Input shapes for making inputs, the main graph's nodes in the order they
 * run, and copies of a module that return chosen intermediate values, so
 * that two targets can be compared value by value (docs/check.md). */

/* Input i's rank (-1 when unknown or i is out of range); dims[0..rank) get
 * its dims (-1 for a symbolic one) and, when syms is non-NULL, syms[k] the
 * symbolic dim's name or NULL.  dims and syms hold TBC_MAX_RANK entries. */
int tbc_module_input_shape(const tbc_module *m, size_t i, int64_t *dims, const char **syms);

/* The main graph's nodes in execution order (a topological order); the
 * ops of If, Loop and Scan bodies belong to the node that holds them.  One
 * ONNX node may import as a few nodes of the same name. */
typedef struct tbc_node_info {
	const char *name;    /* ONNX node name; "" when it had none */
	const char *op_type; /* ONNX op type */
	size_t n_inputs, n_outputs;
} tbc_node_info;

size_t tbc_module_node_count(const tbc_module *m);
tbc_code tbc_module_node_get(const tbc_module *m, size_t i, tbc_node_info *out_info);
/* The name of node i's input or output k (buf holds "%ID" for a value the
 * model left unnamed: the text form's name); NULL for an omitted input, an
 * unwanted output, or i or k out of range. */
const char *tbc_module_node_input_name(const tbc_module *m, size_t i, size_t k, char *buf, size_t size);
const char *tbc_module_node_output_name(const tbc_module *m, size_t i, size_t k, char *buf, size_t size);
/* The inferred type of node i's input k as the text form writes it,
 * "f32[batch,128]", into buf ("" when there is none). */
void tbc_module_node_input_type(const tbc_module *m, size_t i, size_t k, char *buf, size_t size);

/* A copy of m whose main graph also returns every output of nodes[0..n)
 * (indices as for tbc_module_node_get), after the model's own outputs, in
 * order, each value once (one m returns already is not repeated), except
 * those whose rank inference left unknown or whose type is not numeric
 * (compiled code cannot return them).  They are named as
 * tbc_module_node_output_name says.  A returned value is
 * materialized by every target: fusion cannot keep it in registers.  m must
 * outlive the copy (constants are shared). */
tbc_code tbc_module_expose_nodes(const tbc_module *m, const size_t *nodes, size_t n_nodes, tbc_diags *diags,
				 tbc_module **out_module);

/* Fills t with reproducible pseudo-random values for seed: floats uniform
 * in [-1, 1), integers in [0, 10) (within the type's range), bools 0 or 1. */
tbc_code tbc_tensor_fill_random(tbc_tensor *t, uint64_t seed);

/* How far got is from want.  Float elements are close when
 * |got - want| <= atol + rtol * |want|, NaN matches only NaN and an
 * infinity only itself; integers and bools compare exactly. */
typedef struct tbc_compare_result {
	int same_dtype, same_shape;   /* nothing else is filled when either is 0 */
	int64_t n_mismatched;         /* elements not close (NaN pattern included) */
	int64_t n_nan_mismatched;     /* of those, NaN in one and not the other */
	int64_t n_nan_both;           /* elements NaN in both (close, but worth saying) */
	int64_t first_mismatch;       /* flat index of the first, -1 when none */
	double first_got, first_want; /* the elements there */
	double max_abs_diff;          /* over elements finite in both */
	double max_rel_diff;          /* |got - want| / |want| over those with want != 0 */
} tbc_compare_result;

void tbc_tensor_compare(const tbc_tensor *got, const tbc_tensor *want, double rtol, double atol,
			tbc_compare_result *out);

#ifdef __cplusplus
}
#endif
#endif
