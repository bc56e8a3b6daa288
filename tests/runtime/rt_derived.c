/* y = x with a 0 between neighbours: float32 [n] -> [2*n - 1], where
 * 2*n - 1 is a derived symbol (include/tbc/abi.h: sym_derived, sym_poly):
 * the runtime evaluates it from n before the run and allocates y by it.
 * With RT_DERIVED_* defined, one of the tables is broken on purpose and the
 * load must refuse it. */
#include <stdint.h>

#include "rt_artifact.h"

static const int64_t dims[1] = {-1};
static const int32_t sym_x[1] = {0};
#ifdef RT_DERIVED_INPUT
static const int32_t sym_y[1] = {1};
static const tbc_abi_tensor inputs[2] = {{"x", RT_F32, 1, dims, sym_x}, {"z", RT_F32, 1, dims, sym_y}};
#else
static const int32_t sym_y[1] = {1};
static const tbc_abi_tensor inputs[1] = {{"x", RT_F32, 1, dims, sym_x}};
#endif
static const tbc_abi_tensor outputs[1] = {{"y", RT_F32, 1, dims, sym_y}};
static const char *const sym_names[2] = {"n", "2*n - 1"};
static const int32_t sym_derived[2] = {-1, 0};
#if defined(RT_DERIVED_FORWARD)
static const int64_t sym_poly[] = {2, 2, 1, 1, -1, 0}; /* names itself */
#elif defined(RT_DERIVED_DEGREE)
static const int64_t sym_poly[] = {2, 2, 99, 0, -1, 0};
#elif defined(RT_DERIVED_SHORT)
static const int64_t sym_poly[] = {2, 2, 1, 0, -1}; /* the last term lacks its degree */
#else
static const int64_t sym_poly[] = {2, 2, 1, 0, -1, 0};
#endif

static uint64_t arena_bytes(const int64_t *syms) {
	(void)syms;
	return 0;
}

static int32_t run(const tbc_abi_host *host, int64_t *syms, void *const *in, void **out, void *arena,
		   const void *weights) {
	(void)arena, (void)weights;
	if (syms[1] != 2 * syms[0] - 1) return host->error(host->ctx, 2, "the derived symbol was not set before the run");
	const float *x = in[0];
	float *y = out[0];
	for (int64_t i = 0; i < syms[1]; i++) y[i] = i % 2 ? 0.0f : x[i / 2];
	return 0;
}

static const tbc_abi_model model = {
	.magic = TBC_ABI_MAGIC,
	.abi_version = TBC_ABI_VERSION,
	.name = "derived",
	.target_triple = RT_TRIPLE,
	.cpu_features = "",
#ifdef RT_DERIVED_INPUT
	.n_inputs = 2,
#else
	.n_inputs = 1,
#endif
	.n_outputs = 1,
	.n_syms = 2,
	.inputs = inputs,
	.outputs = outputs,
	.sym_names = sym_names,
	.sym_computed = NULL,
	.arena_bytes = arena_bytes,
	.weights_hash = RT_XXH64_EMPTY,
	.run = run,
#ifdef RT_DERIVED_OUTSIDE
	.sym_derived = sym_derived,
	.sym_poly = sym_poly,
	.sym_poly_len = 1ull << 40,
#else
	.sym_derived = sym_derived,
	.sym_poly = sym_poly,
	.sym_poly_len = sizeof sym_poly / sizeof *sym_poly,
#endif
};

const tbc_abi_model *RT_DESCRIPTOR(void) {
	return &model;
}
