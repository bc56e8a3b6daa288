/* TEST ONLY: a deliberately wrong model for testing `tbc check --bisect`
 * (tbc_compile_options.test_perturb_node; codegen/test_fault.c). */
#ifndef TBC_CODEGEN_TEST_FAULT_H
#define TBC_CODEGEN_TEST_FAULT_H

#include "ir/ir.h"

/* Makes output 0 of the main graph's first node named `node` one more than
 * it should be (a bool: its negation) for every reader, model outputs
 * included.  false with a diagnostic when there is no such node or its
 * output is not numeric. */
bool tbc_test_perturb_node(tbc_module *m, const char *node, tbc_diags *d);

#endif
