/* Target hints for lowering (codegen/tuning.h). */
#include "codegen/tuning.h"

#include <stdbool.h>

static _Thread_local kir_tuning current;
static _Thread_local bool installed;

kir_tuning kir_tuning_default(void) { return (kir_tuning){.vector_bytes = 32, .vector_regs = 16}; }

kir_tuning kir_tuning_current(void) { return installed ? current : kir_tuning_default(); }

void kir_tuning_set(const kir_tuning *t) {
	installed = t != NULL;
	if (t) current = *t;
}
