/* indices = NonZero(x) for float32 x [N]: an int64 output [K] whose K the
 * run computes (sym_computed), allocated through host->alloc.  A NaN in x is
 * reported through host->error, to test run-time errors. */
#include <stdint.h>

#include "rt_artifact.h"

static const int64_t in_dims[1] = {-1};
static const int32_t in_sym[1] = {0};
static const int64_t out_dims[1] = {-1};
static const int32_t out_sym[1] = {1};
static const tbc_abi_tensor inputs[1] = {{"x", RT_F32, 1, in_dims, in_sym}};
static const tbc_abi_tensor outputs[1] = {{"indices", RT_I64, 1, out_dims, out_sym}};
static const char *const sym_names[2] = {"N", "K"};
static const uint8_t sym_computed[2] = {0, 1};

static uint64_t arena_bytes(const int64_t *syms) {
	(void)syms;
	return 0;
}

static int32_t run(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
		   const void *weights) {
	(void)arena;
	(void)weights;
	const float *x = in[0];
	int64_t count = 0;
	for (int64_t i = 0; i < syms[0]; i++) {
		if (x[i] != x[i]) return host->error(host->ctx, 3, "x holds NaN");
		count += x[i] != 0;
	}
	int64_t *idx = host->alloc(host->ctx, (uint64_t)count * sizeof *idx);
	if (!idx) return host->error(host->ctx, 4, "out of memory");
	/* Scratch that is not an output: the runtime frees it after the run. */
	if (!host->alloc(host->ctx, 100)) return host->error(host->ctx, 4, "out of memory");
	int64_t k = 0;
	for (int64_t i = 0; i < syms[0]; i++)
		if (x[i] != 0) idx[k++] = i;
	syms[1] = count;
	out[0] = idx;
	return 0;
}

static const tbc_abi_model model = {
	.magic = TBC_ABI_MAGIC,
	.abi_version = TBC_ABI_VERSION,
	.name = "nonzero",
	.target_triple = RT_TRIPLE,
	.cpu_features = "",
	.n_inputs = 1,
	.n_outputs = 1,
	.n_syms = 2,
	.inputs = inputs,
	.outputs = outputs,
	.sym_names = sym_names,
	.sym_computed = sym_computed,
	.arena_bytes = arena_bytes,
	.weights_hash = RT_XXH64_EMPTY,
	.run = run,
};

const tbc_abi_model *RT_DESCRIPTOR(void) {
	return &model;
}
