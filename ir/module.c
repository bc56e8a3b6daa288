/* The public view of a module: its inputs and outputs. */
#include "ir.h"

size_t tbc_module_input_count(const tbc_module *m) { return (size_t)m->main->n_inputs; }
size_t tbc_module_output_count(const tbc_module *m) { return (size_t)m->main->n_outputs; }
const char *tbc_module_input_name(const tbc_module *m, size_t i) {
	return i < tbc_module_input_count(m) ? m->main->inputs[i]->name : NULL;
}
const char *tbc_module_output_name(const tbc_module *m, size_t i) {
	return i < tbc_module_output_count(m) ? m->main->outputs[i]->name : NULL;
}
tbc_dtype tbc_module_input_dtype(const tbc_module *m, size_t i) {
	return i < tbc_module_input_count(m) ? m->main->inputs[i]->type.dtype : TBC_DT_UNDEFINED;
}
char *tbc_module_print(const tbc_module *m) { return tbc_print(m); }
char *tbc_module_print_abridged(const tbc_module *m, size_t max_const_bytes) {
	return tbc_print_abridged(m, max_const_bytes);
}
