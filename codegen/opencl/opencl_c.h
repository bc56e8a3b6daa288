/* The OpenCL C printer: kernel IR -> OpenCL C 1.2 source, one __kernel per
 * kernel.  docs/opencl.md says how loops map to work-items and how values
 * are represented. */
#ifndef TBC_CODEGEN_OPENCL_C_H
#define TBC_CODEGEN_OPENCL_C_H

#include <stdbool.h>

#include "codegen/kir/kir.h"

/* How a printed kernel is launched. */
typedef enum tbc_ocl_shape {
	/* One work-item runs the whole body (sequential statements, or more than
	 * one parallel loop at the top). */
	TBC_OCL_SINGLE = 0,
	/* The body's one top-level parallel loop is spread over the work-items
	 * (grid-stride, so any global size is correct); what comes before it
	 * stores nothing and every work-item runs it. */
	TBC_OCL_GRID = 1
} tbc_ocl_shape;

typedef struct tbc_ocl_kernel {
	char *source;  /* malloc'd: the __kernel function (the preamble apart) */
	tbc_ocl_shape shape;
	/* The grid loop's trip count is (hi - lo + step - 1) / step of these
	 * (index expressions over the kernel's sizes); NULL for SINGLE. */
	const kir_expr *grid_lo, *grid_hi;
	int64_t grid_step;
	/* Arguments: the kernel's buffers in order, then its sizes (long), then
	 * `status` (__global int *) when the kernel can fail: status[0] becomes
	 * the 1-based number of the first failed check, messages[number - 1]. */
	bool has_status;
	int n_messages;
	const char **messages; /* the kernel's own strings */
	bool *stored;          /* per buffer: the kernel stores to it */
} tbc_ocl_kernel;

/* The definitions every printed kernel needs (codegen/opencl/preamble.cl). */
const char *tbc_ocl_preamble(void);

/* Prints k as a __kernel named fn_name (a C identifier).  False, with a
 * message in d, for a construct OpenCL C 1.2 cannot express. */
bool tbc_ocl_print_kernel(const kir_kernel *k, const char *fn_name, tbc_ocl_kernel *out, tbc_diags *d);
void tbc_ocl_kernel_free(tbc_ocl_kernel *k);

#endif
