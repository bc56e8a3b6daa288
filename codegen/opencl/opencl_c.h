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
	TBC_OCL_GRID = 1,
	/* A grouped kernel (the parallel form): work-groups of local_size
	 * items, each grid loop a group-stride loop over the groups of its dim,
	 * so any number of groups is correct. */
	TBC_OCL_GROUPS = 2
} tbc_ocl_shape;

typedef struct tbc_ocl_kernel {
	char *source;  /* malloc'd: the __kernel function (the preamble apart) */
	tbc_ocl_shape shape;
	/* The grid loop's trip count is (hi - lo + step - 1) / step of these
	 * (index expressions over the kernel's sizes); NULL for SINGLE. */
	const kir_expr *grid_lo, *grid_hi;
	int64_t grid_step;
	/* GROUPS: the grid loops (dim g: (hi - lo + step - 1) / step groups)
	 * and the work-group size (reqd_work_group_size); local_size all 0
	 * otherwise. */
	int n_groups;
	const kir_expr *group_lo[3], *group_hi[3];
	int64_t group_step[3];
	int64_t local_size[3];
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

/* The NDRange to launch a printed kernel with, given the values of k's size
 * parameters: dims (1-3), work-items per dim and the work-group size
 * (local all 0: any).  Each dim is capped at 65536 units (work-items of a
 * grid loop, groups of a grid loop): the loops stride over the rest. */
bool tbc_ocl_launch_geometry(const kir_kernel *k, const tbc_ocl_kernel *pk, const int64_t *sizes, uint32_t *dims,
			     uint64_t global[3], uint64_t local[3], tbc_diags *d);

#endif
