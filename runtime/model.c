/* Models: an artifact loaded from a shared object (dlopen, then the exported
 * `tbc_model_descriptor` function) or a descriptor linked into the program,
 * validated (validate.c) and queried.  Sessions hold a reference, so the
 * model may be destroyed before them. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "device_table.h"
#include "internal.h"

static void model_free(tbcrt_model *m) {
	tbcrt_context *c = m->context;
	tbcrt__dmodels_free(m);
	for (uint32_t i = 0; i < m->n_dtables; i++) tbcrt__dtable_free(c, m->dtables[i]);
	tbcrt__free(c, m->dtables);
	pthread_mutex_destroy(&m->device_lock);
	for (uint32_t i = 0; i < m->n_inputs; i++) tbcrt__free(c, m->inputs[i].name);
	for (uint32_t i = 0; i < m->n_outputs; i++) tbcrt__free(c, m->outputs[i].name);
	tbcrt__free(c, m->inputs);
	tbcrt__free(c, m->outputs);
	tbcrt__free(c, m->state);
	tbcrt__free(c, m->state_of_input);
	tbcrt__free(c, m->state_of_output);
	for (uint32_t i = 0; i < m->n_syms; i++) tbcrt__free(c, m->sym_names ? m->sym_names[i] : NULL);
	tbcrt__free(c, m->sym_names);
	tbcrt__free(c, m->sym_computed);
	tbcrt__free(c, m->sym_derived);
	tbcrt__free(c, m->sym_poly);
	tbcrt__free(c, m->name);
	tbcrt__free(c, m->target_triple);
	tbcrt__free(c, m->cpu_features);
	if (m->weights_map) munmap(m->weights_map, m->weights_map_size);
	if (m->dl) dlclose(m->dl);
	tbcrt__free(c, m);
	tbcrt__context_release(c);
}

void tbcrt__model_retain(tbcrt_model *m) {
	atomic_fetch_add(&m->refs, 1);
}

void tbcrt__model_release(tbcrt_model *m) {
	if (m && atomic_fetch_sub(&m->refs, 1) == 1) model_free(m);
}

void tbcrt_model_destroy(tbcrt_model *m) {
	tbcrt__model_release(m);
}

static tbcrt_model *model_new(tbcrt_context *c) {
	tbcrt_model *m = tbcrt__calloc(c, 1, sizeof *m);
	if (!m) return NULL;
	atomic_init(&m->refs, 1);
	m->context = c;
	pthread_mutex_init(&m->device_lock, NULL);
	tbcrt__context_retain(c);
	return m;
}

tbcrt_status tbcrt_model_from_descriptor(tbcrt_context *c, const tbc_abi_model *d, const char *weights_dir,
					 tbcrt_model **out_model) {
	if (!out_model) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_from_descriptor: out_model is NULL");
	*out_model = NULL;
	if (!c) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_from_descriptor: context is NULL");
	if (!d) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_from_descriptor: descriptor is NULL");
	tbcrt_model *m = model_new(c);
	if (!m) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_model_from_descriptor: out of memory");
	tbcrt_status s = tbcrt__model_adopt(m, d, weights_dir);
	if (s.code != TBCRT_OK) {
		model_free(m);
		return s;
	}
	*out_model = m;
	return s;
}

/* The folder of path ("." when it has none) into buf. */
static bool folder_of(const char *path, char *buf, size_t size) {
	const char *slash = strrchr(path, '/');
	if (!slash) {
		if (size < 2) return false;
		strcpy(buf, ".");
		return true;
	}
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= size) return false;
	memcpy(buf, path, n);
	buf[n] = '\0';
	return true;
}

tbcrt_status tbcrt_model_load(tbcrt_context *c, const char *path, tbcrt_model **out_model) {
	if (!out_model) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_load: out_model is NULL");
	*out_model = NULL;
	if (!c) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_load: context is NULL");
	if (!path || !*path) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_load: path is empty");
	/* dlopen searches the library path for a name without a slash; the
	 * caller means a file. */
	char file[4096 + 3], dir[4096];
	if (strlen(path) > 4096 || !folder_of(path, dir, sizeof dir))
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_load: path is too long");
	snprintf(file, sizeof file, "%s%s", strchr(path, '/') ? "" : "./", path);
	tbcrt_status s = tbcrt__elf_precheck(file);
	if (s.code != TBCRT_OK) return s;
	tbcrt_model *m = model_new(c);
	if (!m) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "tbcrt_model_load: out of memory");
	m->dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!m->dl) {
		const char *why = dlerror();
		model_free(m);
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "cannot load '%s': %s", path, why ? why : "dlopen failed");
	}
	dlerror();
	void *sym = dlsym(m->dl, "tbc_model_descriptor");
	if (!sym) {
		model_free(m);
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s' is not a tbc artifact: it exports no tbc_model_descriptor",
				  path);
	}
	tbcrt_segments seg;
	tbcrt__segments_of(sym, &seg);
	if (seg.count == 0 || !tbcrt__code_ok(&seg, sym)) {
		model_free(m);
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s': tbc_model_descriptor is not a function", path);
	}
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &sym, sizeof fn); /* object pointer to function pointer, as POSIX allows */
	const tbc_abi_model *d = fn();
	if (!d) {
		model_free(m);
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s': tbc_model_descriptor returned NULL", path);
	}
	/* The descriptor must lie in the artifact itself. */
	tbcrt_segments dseg;
	tbcrt__segments_of(d, &dseg);
	if (dseg.count == 0 || dseg.seg[0].lo != seg.seg[0].lo) {
		model_free(m);
		return tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "'%s': the descriptor does not lie in the artifact", path);
	}
	s = tbcrt__model_adopt(m, d, dir);
	if (s.code != TBCRT_OK) {
		model_free(m);
		char what[4200];
		snprintf(what, sizeof what, "'%s'", path);
		return tbcrt__wrap(s, what);
	}
	*out_model = m;
	return s;
}

tbcrt_status tbcrt_model_get_info(const tbcrt_model *m, tbcrt_model_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_get_info: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	if (!m) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_get_info: model is NULL");
	out_info->name = m->name;
	out_info->target_triple = m->target_triple;
	out_info->cpu_features = m->cpu_features;
	out_info->n_inputs = m->n_inputs;
	out_info->n_outputs = m->n_outputs;
	out_info->n_symbols = m->n_syms;
	out_info->weights_bytes = m->weights_size;
	out_info->weights_external = m->weights_external;
	out_info->load_time_bytes = m->init_end - m->init_begin;
	out_info->cpu_code = m->has_cpu_code;
	tbcrt_device_info ocl = {.kind = TBCRT_DEVICE_OPENCL};
	out_info->opencl_code = tbcrt__dtable_for(m, &ocl) != NULL;
	out_info->device_targets = m->device_targets;
	out_info->n_state = m->n_state;
	return tbcrt__ok();
}

tbcrt_status tbcrt_model_state_info(const tbcrt_model *m, uint32_t index, tbcrt_state_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_state_info: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	if (!m) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_state_info: model is NULL");
	if (index >= m->n_state)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "state index %u is out of range: model '%s' holds %u pieces of state",
				  index, m->name, m->n_state);
	const tbcrt__tensor *t = &m->inputs[m->state[index].input];
	out_info->name = t->name;
	out_info->input = m->state[index].input;
	out_info->output = m->state[index].output;
	out_info->dtype = t->dtype;
	out_info->rank = t->rank;
	out_info->dims = t->dims;
	out_info->weight = m->state[index].kind == TBC_ABI_STATE_WEIGHT;
	return tbcrt__ok();
}

static void fill_info(const tbcrt__tensor *t, tbcrt_tensor_info *o) {
	o->name = t->name;
	o->dtype = t->dtype;
	o->rank = t->rank;
	o->dims = t->dims;
	o->symbols = t->sym_names;
	o->data_dependent = t->data_dependent;
}

tbcrt_status tbcrt_model_input_info(const tbcrt_model *m, uint32_t index, tbcrt_tensor_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_input_info: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	if (!m) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_input_info: model is NULL");
	if (index >= m->n_inputs)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "input index %u is out of range: model '%s' has %u inputs", index,
				  m->name, m->n_inputs);
	fill_info(&m->inputs[index], out_info);
	return tbcrt__ok();
}

tbcrt_status tbcrt_model_output_info(const tbcrt_model *m, uint32_t index, tbcrt_tensor_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_output_info: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	if (!m) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_output_info: model is NULL");
	if (index >= m->n_outputs)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "output index %u is out of range: model '%s' has %u outputs", index,
				  m->name, m->n_outputs);
	fill_info(&m->outputs[index], out_info);
	return tbcrt__ok();
}

static tbcrt_status find(const tbcrt_model *m, const tbcrt__tensor *ts, uint32_t n, const char *kind, const char *name,
			 uint32_t *out_index) {
	if (!out_index) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_find_%s: out_index is NULL", kind);
	*out_index = 0;
	if (!m || !name) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_find_%s: model or name is NULL", kind);
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(ts[i].name, name)) {
			*out_index = i;
			return tbcrt__ok();
		}
	return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "model '%s' has no %s named '%s'", m->name, kind, name);
}

tbcrt_status tbcrt_model_find_input(const tbcrt_model *m, const char *name, uint32_t *out_index) {
	return find(m, m ? m->inputs : NULL, m ? m->n_inputs : 0, "input", name, out_index);
}

tbcrt_status tbcrt_model_find_output(const tbcrt_model *m, const char *name, uint32_t *out_index) {
	return find(m, m ? m->outputs : NULL, m ? m->n_outputs : 0, "output", name, out_index);
}

/* ---- Device code ----------------------------------------------------------*/

tbcrt_status tbcrt_model_device_code(const tbcrt_model *m, uint32_t index, tbcrt_device_code_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_device_code: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	if (!m) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_device_code: model is NULL");
	if (index >= m->n_dtables)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "model '%s' holds %u device code tables; there is no %u", m->name,
				  m->n_dtables, index);
	const tbcrt__dtable *t = m->dtables[index];
	out_info->target = t->target;
	out_info->format = tbcrt__dtable_kind_name(t->kind);
	out_info->code_bytes = t->source_size;
	out_info->n_kernels = t->n_kernels;
	out_info->n_launches = t->n_launches;
	out_info->cubin_bytes = t->kind == TBC_ABI_DEVICE_PTX ? t->binary_size : 0;
	return tbcrt__ok();
}

/* Where kernel name's entry starts in text code, or -1. */
static int64_t entry_at(const tbcrt__dtable *t, const char *name) {
	const char *lead = t->kind == TBC_ABI_DEVICE_PTX ? ".entry " : "void ";
	size_t nl = strlen(lead), n = strlen(name);
	for (size_t at = 0; at + nl + n < t->source_size; at++)
		if (!memcmp(t->source + at, lead, nl) && !memcmp(t->source + at + nl, name, n) &&
		    t->source[at + nl + n] == '(')
			return (int64_t)at;
	return -1;
}

tbcrt_status tbcrt_model_device_kernel(const tbcrt_model *m, uint32_t index, uint32_t kernel,
				       tbcrt_kernel_info *out_info) {
	if (!out_info) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "tbcrt_model_device_kernel: out_info is NULL");
	memset(out_info, 0, sizeof *out_info);
	tbcrt_device_code_info code;
	tbcrt_status s = tbcrt_model_device_code(m, index, &code);
	if (s.code != TBCRT_OK) return s;
	const tbcrt__dtable *t = m->dtables[index];
	if (kernel >= t->n_kernels)
		return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "device code %s holds %u kernels; there is no %u", t->target,
				  t->n_kernels, kernel);
	const tbcrt__dkernel *k = &t->kernels[kernel];
	out_info->name = k->name;
	out_info->shape = (uint32_t)k->shape;
	for (int d = 0; d < 3; d++) out_info->group_size[d] = k->shape == 2 ? k->local[d] : 0;
	out_info->n_buffers = k->n_buffers;
	if (t->kind == TBC_ABI_DEVICE_AMDGPU_ELF) return tbcrt__ok();
	int64_t at = entry_at(t, k->name), next = (int64_t)t->source_size;
	for (uint32_t j = 0; at >= 0 && j < t->n_kernels; j++) {
		int64_t other = j == kernel ? -1 : entry_at(t, t->kernels[j].name);
		if (other > at && other < next) next = other;
	}
	out_info->code_bytes = at >= 0 ? (uint64_t)(next - at) : 0;
	return tbcrt__ok();
}
