/* y = x * w for float32 [4], w = {1, 2, 3, 4} from the weights: embedded, or
 * with RT_EXTERNAL in the file rt_scale.bin next to the artifact (the tests
 * write it).  A version 6 descriptor, so its hash is FNV-1a 64 of the 16
 * bytes: the runtime still loads artifacts of before ABI 7 (XXH64), and
 * these are the tests that check the old hash on a model that runs. */
#include <stdint.h>

#include "rt_artifact.h"

static const int64_t dims[1] = {4};
static const tbc_abi_tensor inputs[1] = {{"x", RT_F32, 1, dims, NULL}};
static const tbc_abi_tensor outputs[1] = {{"y", RT_F32, 1, dims, NULL}};

#ifndef RT_EXTERNAL
static const float w[4] __attribute__((aligned(64))) = {1, 2, 3, 4};
#endif

static uint64_t arena_bytes(const int64_t *syms) {
	(void)syms;
	return 0;
}

static int32_t run(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
		   const void *weights) {
	(void)host;
	(void)syms;
	(void)arena;
	const float *x = in[0], *wt = weights;
	float *y = out[0];
	for (int i = 0; i < 4; i++) y[i] = x[i] * wt[i];
	return 0;
}

static const tbc_abi_model model = {
	.magic = TBC_ABI_MAGIC,
	.abi_version = 6,
#ifdef RT_EXTERNAL
	.name = "scale_external",
	.weights_file = "rt_scale.bin",
#else
	.name = "scale",
	.weights = w,
#endif
	.target_triple = RT_TRIPLE,
	.cpu_features = "",
	.n_inputs = 1,
	.n_outputs = 1,
	.inputs = inputs,
	.outputs = outputs,
	.arena_bytes = arena_bytes,
	.weights_size = 16,
	.weights_hash = 0x8faa0a18faf0fb98ull,
	.run = run,
};

const tbc_abi_model *RT_DESCRIPTOR(void) {
	return &model;
}
