/* Shared by the codegen unit tests (tests/unit/test_codegen*.c): building
 * small graphs with random inputs, and checking a graph by running it with
 * the reference interpreter (tbc_interpret), the kernel IR evaluator
 * (kir_program_eval: lowering alone) and JIT-compiled for the host
 * (tbc_jit_compile + a serial host), comparing all three.  Compiled once into
 * tbc_test_support (tests/CMakeLists.txt). */
#ifndef TBC_TESTS_CODEGEN_CHECK_H
#define TBC_TESTS_CODEGEN_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "codegen/lower/lower.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"

/* ---- Building graphs ---------------------------------------------------------*/
typedef struct model {
	tbc_module *m;
	tbc_tensor *in[8];
	int n_in;
	uint64_t seed;
} model;

model model_new(void);
/* Uniform in [0, 1), from the model's fixed-seed generator. */
double rnd(model *md);
/* Random values in [lo, hi): floored for integer dtypes, thresholded for bool. */
void fill(model *md, tbc_tensor *t, double lo, double hi);
/* A graph input whose dims are given as text: "2,3,N" (letters are symbolic);
 * the test tensor uses `sym_size` for the symbolic dims and values in [lo, hi). */
tbc_value *input_sym(model *md, tbc_dtype dt, const char *dims, int64_t sym_size, double lo, double hi);
/* input_sym with symbolic dims 3 and values in [-3, 3). */
tbc_value *input(model *md, tbc_dtype dt, const char *dims);
tbc_value *constant(model *md, tbc_dtype dt, int rank, const int64_t *dims, const double *vals);
/* An op with n of the inputs a, b, c and one output. */
tbc_op *node(model *md, tbc_opcode code, int n, tbc_value *a, tbc_value *b, tbc_value *c);
tbc_value *op1(model *md, tbc_opcode code, tbc_value *a);
tbc_value *op2(model *md, tbc_opcode code, tbc_value *a, tbc_value *b);
/* A graph input of dtype dt holding the n values v (rank 1; rank 0 when n
 * is 0 and v points at the scalar): a tensor the model reads while running,
 * such as a shape or axes. */
tbc_value *values_input(model *md, tbc_dtype dt, int n, const double *v);
void attr_int(tbc_op *op, const char *name, int64_t v);
/* An ints attribute of n values (copied into the op's module's arena). */
void attr_ints(tbc_op *op, const char *name, int n, const int64_t *v);

/* ---- Checking ----------------------------------------------------------------*/
void print_diags(tbc_diags *d);

/* Set by conversion tests: results must match the interpreter bit for bit. */
extern bool exact_bits;
/* The absolute part of compare's tolerance (1e-6 unless a test sets it):
 * long f32 sums (convolutions, GEMMs with fused multiply-adds) round on the
 * order of K * eps * |terms|, however small the result. */
extern double g_atol;
/* When nonzero, check_outputs runs the fusion pass after the interpreter and
 * wants this many Fused ops before lowering. */
extern int g_fuse;
/* The target the checks lower for (kir_lower); NULL: the CPU default
 * (tbc_target_desc_cpu_default).  JIT compiles describe the host.  When set,
 * the evaluator runs parallel, vector and grid loops backwards
 * (kir_eval_with), so iterations that are not independent show. */
extern const tbc_target_desc *g_target;
/* g_target, or the CPU default. */
const tbc_target_desc *lower_target(void);
/* When set, check_outputs and check_compiled_run_fails run the fold pass
 * after the interpreter, as compiling does (static ranks, an If with a
 * constant condition inlined), before lowering. */
extern bool g_fold;

/* Same dtype and dims; floats within 1e-6 + rtol*|want| (NaN matches NaN),
 * integers exactly; with exact_bits every element's bits too. */
void compare(const char *what, const tbc_tensor *want, const tbc_tensor *got, double rtol);
/* Infers, then runs the interpreter, the evaluator and the JIT (compiled
 * with options o, NULL for the defaults) on the graph whose outputs are outs
 * (n_out < 0: the outputs the graph has already); compares; frees the model. */
void check_outputs_with(model *md, int n_out, tbc_value **outs, double rtol, const tbc_compile_options *o);
void check_outputs(model *md, int n_out, tbc_value **outs, double rtol);
/* check_outputs of one output with rtol 1e-5. */
void check(model *md, tbc_value *out);
/* Lowering succeeds; the interpreter, the evaluator and the JIT all fail the
 * run (a run-time check), the interpreter with a message holding interp_text
 * and the compiled runs with one holding text (either NULL: any message)
 * and no outputs (out NULL: the graph's own outputs); frees the model. */
void check_run_fails_as(model *md, tbc_value *out, const char *interp_text, const char *text);
void check_run_fails(model *md, tbc_value *out);
/* The interpreter runs the graph (outputs: its own); after the fold pass the
 * evaluator and the JIT fail the run with a message holding text (a check
 * compiled code makes where the interpreter needs none); frees the model. */
void check_compiled_run_fails(model *md, const char *text);
/* Infers md (its outputs set) and runs it through the evaluator lowered
 * for t (*eval_out) and, when jit holds, JIT-compiled for the host
 * (*jit_out; NULL otherwise): for tests that compare compiled code with
 * the evaluator bit for bit.  The model stays the caller's. */
void eval_and_jit(model *md, const tbc_target_desc *t, bool jit, tbc_tensor **eval_out, tbc_tensor **jit_out);
/* The program's text (kir_program_print) of the graph with the outputs it
 * has, after inference and lowering; malloc'd.  Frees the model. */
char *lowered_text(model *md);
/* How many times `what` occurs in `text` (overlapping occurrences too). */
int text_count(const char *text, const char *what);
/* Lowering fails with `code` and a message containing `text` (out NULL: the
 * graph has its outputs already); frees the model. */
void check_lowering_fails(model *md, tbc_value *out, tbc_code code, const char *text);

#endif
