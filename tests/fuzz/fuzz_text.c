/* libFuzzer harness over the IR text parser: any input parses or fails
 * cleanly, and whatever parses round-trips (print(parse(print(m))) ==
 * print(m)) and goes through the verifier without crashing.  Seeds:
 * tests/golden/ (docs/ir.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	char *text = malloc(size + 1);
	if (!text) return 0;
	memcpy(text, data, size);
	text[size] = 0;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "fuzz.ir", d);
	if (m) {
		char *a = tbc_print(m);
		tbc_module *m2 = a ? tbc_parse(a, "fuzz2.ir", d) : NULL;
		char *b = m2 ? tbc_print(m2) : NULL;
		if (a && (!b || strcmp(a, b))) abort(); /* the printed text must read back to itself */
		tbc_verify_ex(m, d, TBC_VERIFY_ALLOW_UNTYPED);
		free(tbc_module_summary(m));
		free(a);
		free(b);
		tbc_module_destroy(m2);
	}
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	free(text);
	return 0;
}
