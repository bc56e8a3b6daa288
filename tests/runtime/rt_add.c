/* y = a + b over float32 [N, 4], N symbolic.  The sum goes through the arena
 * (arena_bytes(N) = N * 16) and both loops through host->parallel_for, as
 * generated code does; a misaligned arena is reported through host->error. */
#include <stdint.h>

#include "rt_artifact.h"

static const int64_t dims[2] = {-1, 4};
static const int32_t sym[2] = {0, -1};
static const tbc_abi_tensor inputs[2] = {{"a", RT_F32, 2, dims, sym}, {"b", RT_F32, 2, dims, sym}};
static const tbc_abi_tensor outputs[1] = {{"y", RT_F32, 2, dims, sym}};
static const char *const sym_names[1] = {"N"};

static uint64_t arena_bytes(const int64_t *syms) {
	return (uint64_t)syms[0] * 4 * sizeof(float);
}

typedef struct {
	const float *a, *b;
	float *t, *y;
} closure;

static void add_body(void *c, int64_t begin, int64_t end) {
	closure *k = c;
	for (int64_t i = begin; i < end; i++) k->t[i] = k->a[i] + k->b[i];
}

static void copy_body(void *c, int64_t begin, int64_t end) {
	closure *k = c;
	for (int64_t i = begin; i < end; i++) k->y[i] = k->t[i];
}

static int32_t run(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
		   const void *weights) {
	(void)weights;
	int64_t n = syms[0] * 4;
	if (n > 0 && ((uintptr_t)arena % 64) != 0) return host->error(host->ctx, 2, "the arena is not 64-byte aligned");
	closure k = {in[0], in[1], arena, out[0]};
	host->parallel_for(host->ctx, add_body, &k, n, 16);
	host->parallel_for(host->ctx, copy_body, &k, n, 16);
	return 0;
}

static const tbc_abi_model model = {
	.magic = TBC_ABI_MAGIC,
	.abi_version = TBC_ABI_VERSION,
	.name = "add",
	.target_triple = RT_TRIPLE,
	.cpu_features = "",
	.n_inputs = 2,
	.n_outputs = 1,
	.n_syms = 1,
	.inputs = inputs,
	.outputs = outputs,
	.sym_names = sym_names,
	.sym_computed = NULL,
	.arena_bytes = arena_bytes,
	.weights = NULL,
	.weights_file = NULL,
	.weights_size = 0,
	.weights_hash = RT_XXH64_EMPTY,
	.run = run,
};

const tbc_abi_model *RT_DESCRIPTOR(void) {
	return &model;
}
