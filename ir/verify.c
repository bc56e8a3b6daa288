/* IR verifier (placeholder until the verifier lands). */
#include "ir.h"

bool tbc_verify(const tbc_module *m, tbc_diags *d) {
	(void)m;
	(void)d;
	return true;
}
