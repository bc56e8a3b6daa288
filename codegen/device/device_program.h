/* A lowered program as a device program: what every device target (OpenCL
 * C, NVPTX, AMDGPU) shares.  Each kernel gets a launch plan -- how its
 * loops map onto the device's grid, which buffers it stores, its checks'
 * messages -- and the program gets the device program table of
 * include/tbc/abi.h (buffers, kernels with their launch geometry, launches
 * and control markers) that libtbcrt walks on a device.  A target supplies
 * only the code: it writes every kernel of the list it is given, under the
 * name given and with the loops mapped as the plan says, and this file lays
 * the table out around it.
 *
 * Determinism: everything is written in program order from the program's
 * own numbers and names; no pointer or hash reaches the bytes. */
#ifndef TBC_CODEGEN_DEVICE_DEVICE_PROGRAM_H
#define TBC_CODEGEN_DEVICE_DEVICE_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

#include "codegen/host/program.h"

/* How a kernel is launched on a device. */
typedef enum tbc_dev_shape {
	/* One work-item runs the whole body (sequential statements, or more than
	 * one parallel loop at the top); the others return at once. */
	TBC_DEV_SINGLE = 0,
	/* The body's one top-level parallel loop is spread over the work-items
	 * (grid-stride, so any number of work-items is correct); what comes
	 * before it stores nothing and every work-item runs it. */
	TBC_DEV_GRID = 1,
	/* A grouped kernel (kernel IR's parallel form): work-groups of
	 * local_size items, grid loop g a group-stride loop over the groups of
	 * dim g, so any number of groups is correct. */
	TBC_DEV_GROUPS = 2
} tbc_dev_shape;

typedef struct tbc_dev_plan {
	tbc_dev_shape shape;
	const kir_stmt *grid;         /* GRID: the loop spread over the work-items */
	int n_groups;                 /* GROUPS: the grid loops, outermost first */
	const kir_stmt *groups[3];
	int64_t local_size[3];        /* GROUPS: the work-group size; all 0 otherwise */
	int n_dims;                   /* dims of the launch (1-3) */
	/* Checks: a kernel that can fail takes a status word after its sizes;
	 * a failed check stores its 1-based number, messages[number - 1], the
	 * KIR_S_ERROR statements in program order. */
	bool can_fail;
	int n_messages;
	const kir_stmt **errors;      /* the KIR_S_ERROR statements, numbered from 1 */
	bool *stored;                 /* per buffer: the kernel stores to it */
} tbc_dev_plan;

/* Plans k; false (after a diagnostic) when out of memory. */
bool tbc_dev_plan_make(const kir_kernel *k, tbc_dev_plan *out, tbc_diags *d);
void tbc_dev_plan_free(tbc_dev_plan *p);
/* The grid dim (0-2) loop s is mapped to, or -1 when it is an ordinary loop
 * of a work-item. */
int tbc_dev_plan_dim(const tbc_dev_plan *p, const kir_stmt *s);
/* The 1-based number of check s (a KIR_S_ERROR of the kernel), 0 if none. */
int tbc_dev_plan_error(const tbc_dev_plan *p, const kir_stmt *s);

/* The launch for the values of k's size parameters: dims (1-3), work-items
 * per dim and the work-group size (local all 0: any).  Each dim is capped
 * at TBC_DEV_MAX_UNITS units (work-items of a grid loop, groups of a grid
 * loop): the loops stride over the rest. */
#define TBC_DEV_MAX_UNITS 65536
bool tbc_dev_launch_geometry(const kir_kernel *k, const tbc_dev_plan *p, const int64_t *sizes, uint32_t *dims,
			     uint64_t global[3], uint64_t local[3], tbc_diags *d);

/* One distinct kernel of the program, as a target writes it. */
typedef struct tbc_dev_kernel {
	const kir_kernel *k;
	const char *node; /* the ONNX node it came from, or NULL */
	char name[80];    /* tbc_<kernel>_<node>: C identifier characters only */
	tbc_dev_plan plan;
} tbc_dev_kernel;

/* What a target gives the table: its code for the kernels. */
typedef struct tbc_dev_target {
	int kind;            /* TBC_ABI_DEVICE_* (include/tbc/abi.h) */
	const char *options; /* the table's options string (build options, the GPU's name) */
	/* Writes the code of ks (n of them, each once) into malloc'd memory
	 * (*code, *size bytes); false after a diagnostic. */
	bool (*emit)(void *user, const kir_program *p, const char *model_name, const tbc_dev_kernel *ks, int n,
		     void **code, size_t *size, tbc_diags *d);
	void *user;
} tbc_dev_target;

/* What tbc_dev_program_make makes; free with tbc_dev_program_free. */
typedef struct tbc_dev_program {
	void *code; /* the target's code (OpenCL C text, PTX text, a code object) */
	size_t code_size;
	void *table; /* the device program table, holding the code */
	size_t table_size;
} tbc_dev_program;

/* Plans every kernel of p (each once, named after the lowering's kernel and
 * the ONNX node it came from: op_names[launch.op_pos], n_ops of them, may be
 * NULL), has t write their code and lays out the table.  The same program
 * gives the same bytes. */
bool tbc_dev_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			  const tbc_dev_target *t, tbc_dev_program *out, tbc_diags *d);
void tbc_dev_program_free(tbc_dev_program *o);
/* Sets the table's binary (include/tbc/abi.h, version 3: a PTX table's
 * cubin) to size bytes of bin (copied), once per table (it replaces the
 * empty binary tbc_dev_program_make ends the table with); false when out
 * of memory. */
bool tbc_dev_program_set_binary(tbc_dev_program *o, const void *bin, size_t size);

/* Whether arch is one of the n names accepted (NULL: the target's default,
 * accepted); otherwise a diagnostic "<target>: unknown <what> '<arch>';
 * accepted: ..." listing them. */
bool tbc_dev_arch_check(const char *target, const char *what, const char *arch, const char *const *accepted, size_t n,
			tbc_diags *d);

#endif
