/* Text form parser (placeholder until the text form lands). */
#include "ir.h"

tbc_module *tbc_parse(const char *text, const char *filename, tbc_diags *d) {
	(void)text;
	tbc_diags_add(d, TBC_ERR_UNSUPPORTED, filename, NULL, NULL, NULL, "the text-form parser is not written yet");
	return NULL;
}
