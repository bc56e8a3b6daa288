/* Deliberately broken artifacts, one per RT_BROKEN_* definition; each must
 * be refused at load with a clear status. */
#include <stddef.h>
#include <stdint.h>

#include "rt_artifact.h"

static const int64_t dims[1] = {4};
static const tbc_abi_tensor tensors[1] = {{"x", RT_F32, 1, dims, NULL}};
static const float w[16] __attribute__((aligned(64), unused)) = {1};

static uint64_t arena_bytes(const int64_t *syms) {
	(void)syms;
	return 0;
}

static __attribute__((unused)) int32_t run(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
		   const void *weights) {
	(void)host, (void)syms, (void)in, (void)out, (void)arena, (void)weights;
	return 0;
}

/* Names input 3 of a model of one input. */
static const tbc_abi_state bad_state[1] __attribute__((unused)) = {
	{.input = 3, .output = 0, .init_offset = TBC_ABI_STATE_ZEROS, .kind = TBC_ABI_STATE_WEIGHT}};

static __attribute__((unused)) int32_t init(const tbc_abi_host *host, void *arena, const void *weights) {
	(void)host, (void)arena, (void)weights;
	return 0;
}

static const tbc_abi_model model __attribute__((unused)) = {
#ifdef RT_BROKEN_MAGIC
	.magic = 0xdeadbeef,
#else
	.magic = TBC_ABI_MAGIC,
#endif
#ifdef RT_BROKEN_VERSION
	.abi_version = 99,
#elif defined(RT_BROKEN_V4_INIT)
	.abi_version = 4, /* its load-time fields are not read: it has none */
#elif defined(RT_BROKEN_V5_STATE)
	.abi_version = 5, /* its state fields are not read: it has none */
#else
	.abi_version = TBC_ABI_VERSION,
#endif
	.name = "broken",
#ifdef RT_BROKEN_TRIPLE
	.target_triple = RT_OTHER_TRIPLE,
#else
	.target_triple = RT_TRIPLE,
#endif
#ifdef RT_BROKEN_FEATURES
	.cpu_features = "+sse2,+xop", /* AMD Bulldozer's XOP: absent on current CPUs */
#else
	.cpu_features = "",
#endif
	.n_inputs = 1,
	.n_outputs = 1,
	.inputs = tensors,
	.outputs = tensors,
	.arena_bytes = arena_bytes,
#ifdef RT_BROKEN_HASH
	.weights = w,
	.weights_size = sizeof w,
	.weights_hash = 12345,
#elif defined(RT_BROKEN_WEIGHTS_SIZE)
	.weights = w,
	.weights_size = 1ull << 32, /* far past the object's end */
	.weights_hash = 12345,
#else
	.weights_hash = RT_XXH64_EMPTY, /* no weights: checked only against an empty file */
#endif
#ifndef RT_BROKEN_NULL_RUN
	.run = run,
#endif
#if defined(RT_BROKEN_INIT_NOT_CODE) || defined(RT_BROKEN_V4_INIT)
	.init_end = 64,
	.init = (int32_t (*)(const tbc_abi_host *, void *, const void *))(uintptr_t)w,
#elif defined(RT_BROKEN_INIT_RANGE)
	.init_begin = 128,
	.init_end = 64,
	.init = init,
#endif
#if defined(RT_BROKEN_STATE_RANGE) || defined(RT_BROKEN_V5_STATE)
	.n_state = 1,
	.state = bad_state,
#endif
};

#ifndef RT_BROKEN_NO_SYMBOL
const tbc_abi_model *RT_DESCRIPTOR(void) {
#ifdef RT_BROKEN_NULL_DESCRIPTOR
	return NULL;
#else
	return &model;
#endif
}
#else
RT_EXPORT const tbc_abi_model *some_other_name(void);
const tbc_abi_model *some_other_name(void) {
	return &model;
}
#endif
