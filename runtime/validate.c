/* Descriptor validation: everything an artifact declares is checked before
 * the runtime relies on it, then copied into the model, so later code reads
 * only checked copies (the descriptor's run, arena_bytes and embedded weights
 * are the only things used from it afterwards).
 *
 * Order: identity (magic, ABI version) before any other field is read, since
 * another version may lay the struct out differently; then the target (the
 * triple, the CPU features); then the tables; then the functions; last the
 * weights, whose hash is the expensive part.  When the descriptor lies in a
 * loaded object, every pointer must point into that object's segments
 * (memcheck.c) and every function into its code. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "device_table.h"
#include "internal.h"

#define BAD(...) tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, __VA_ARGS__)

static int cmp_names(const void *a, const void *b) {
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice, or NULL. */
static const char *duplicate(const tbcrt_context *c, const char *const *names, uint32_t n, bool *oom) {
	*oom = false;
	if (n < 2) return NULL;
	const char **sorted = tbcrt__calloc(c, n, sizeof *sorted);
	if (!sorted) {
		*oom = true;
		return NULL;
	}
	memcpy(sorted, names, (size_t)n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, cmp_names);
	const char *dup = NULL;
	for (uint32_t i = 1; i < n && !dup; i++)
		if (!strcmp(sorted[i - 1], sorted[i])) dup = sorted[i];
	tbcrt__free(c, sorted);
	return dup;
}

static tbcrt_status check_tensor(const tbcrt_segments *seg, const tbc_abi_model *d, const uint8_t *computed,
				 const tbc_abi_tensor *t, const char *kind, uint32_t index, tbcrt__tensor *out,
				 char *const *sym_copies) {
	if (!tbcrt__string_ok(seg, t->name, TBCRT_MAX_NAME))
		return BAD("%s %u has no name, or its name is not a NUL-terminated string of at most %d bytes", kind, index,
			   TBCRT_MAX_NAME);
	const char *name = t->name;
	size_t esize = tbcrt_dtype_size(t->dtype);
	if (esize == 0)
		return BAD("%s '%s' has dtype %d (%s), which compiled code cannot hold", kind, name, (int)t->dtype,
			   tbcrt_dtype_name(t->dtype));
	if (t->rank < 0 || t->rank > TBCRT_MAX_RANK)
		return BAD("%s '%s' has rank %d; ranks go from 0 to %d", kind, name, (int)t->rank, TBCRT_MAX_RANK);
	out->dtype = t->dtype;
	out->rank = (uint32_t)t->rank;
	if (t->rank > 0 && !tbcrt__range_ok(seg, t->dims, (uint64_t)t->rank * sizeof *t->dims))
		return BAD("%s '%s': its dims table is missing or lies outside the artifact", kind, name);
	uint64_t bytes = esize;
	for (int32_t i = 0; i < t->rank; i++) {
		int64_t dim = t->dims[i];
		out->sym[i] = -1;
		out->sym_names[i] = NULL;
		if (dim >= 0) {
			out->dims[i] = dim;
			if (!tbcrt__mul_within(bytes, (uint64_t)dim, TBCRT_MAX_TENSOR_BYTES, &bytes))
				return tbcrt__err(TBCRT_ERR_LIMIT, "%s '%s': its static dims make more than %llu bytes", kind, name,
						  (unsigned long long)TBCRT_MAX_TENSOR_BYTES);
			continue;
		}
		if (!tbcrt__range_ok(seg, t->sym, (uint64_t)t->rank * sizeof *t->sym))
			return BAD("%s '%s' dim %d is symbolic but its sym table is missing or lies outside the artifact", kind,
				   name, (int)i);
		int32_t s = t->sym[i];
		if (s < 0 || (uint32_t)s >= d->n_syms)
			return BAD("%s '%s' dim %d names symbol %d; the artifact has %u symbols", kind, name, (int)i, (int)s,
				   d->n_syms);
		out->dims[i] = -1;
		out->sym[i] = s;
		out->sym_names[i] = sym_copies[s];
		if (computed && computed[s]) {
			if (!strcmp(kind, "input"))
				return BAD("input '%s' dim %d uses symbol '%s', which the model computes while running", name, (int)i,
					   sym_copies[s]);
			out->data_dependent = true;
		}
	}
	return tbcrt__ok();
}

/* Derived symbols (include/tbc/abi.h): every polynomial lies inside the
 * table and names only symbols of lower index that are not computed, so
 * tbc_abi_derive_syms reads nothing else and each symbol it reads is set
 * before it (from an input, or derived earlier). */
static tbcrt_status check_derived(tbcrt_model *m, const tbcrt_segments *seg, const tbc_abi_model *d) {
	const tbcrt_context *c = m->context;
	if (!d->sym_derived) {
		if (d->sym_poly || d->sym_poly_len) return BAD("the artifact has a sym_poly table but no sym_derived table");
		return tbcrt__ok();
	}
	if (!d->n_syms) return BAD("the artifact has a sym_derived table but no symbols");
	if (d->sym_poly_len > TBCRT_MAX_SYM_POLY)
		return tbcrt__err(TBCRT_ERR_LIMIT, "the artifact's sym_poly table has %llu entries; the limit is %d",
				  (unsigned long long)d->sym_poly_len, TBCRT_MAX_SYM_POLY);
	if (!tbcrt__range_ok(seg, d->sym_derived, (uint64_t)d->n_syms * sizeof *d->sym_derived))
		return BAD("the sym_derived table lies outside the artifact");
	if (d->sym_poly_len && !tbcrt__range_ok(seg, d->sym_poly, d->sym_poly_len * sizeof *d->sym_poly))
		return BAD("the sym_poly table is missing or lies outside the artifact");
	m->sym_derived = tbcrt__calloc(c, d->n_syms, sizeof *m->sym_derived);
	m->sym_poly = tbcrt__calloc(c, d->sym_poly_len ? d->sym_poly_len : 1, sizeof *m->sym_poly);
	if (!m->sym_derived || !m->sym_poly) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	memcpy(m->sym_derived, d->sym_derived, (size_t)d->n_syms * sizeof *m->sym_derived);
	if (d->sym_poly_len) memcpy(m->sym_poly, d->sym_poly, (size_t)d->sym_poly_len * sizeof *m->sym_poly);
	uint64_t len = d->sym_poly_len;
	for (uint32_t i = 0; i < d->n_syms; i++) {
		int32_t at = m->sym_derived[i];
		if (at < 0) {
			if (at != -1) return BAD("symbol '%s' has sym_derived %d; -1 or a table offset", m->sym_names[i], (int)at);
			continue;
		}
		if (m->sym_computed[i]) return BAD("symbol '%s' is both computed and derived", m->sym_names[i]);
		uint64_t q = (uint64_t)at;
		if (q >= len) return BAD("symbol '%s': its polynomial starts outside the sym_poly table", m->sym_names[i]);
		int64_t n_terms = m->sym_poly[q++];
		if (n_terms < 0 || n_terms > TBCRT_MAX_POLY_TERMS)
			return BAD("symbol '%s': its polynomial has %lld terms; 0 to %d", m->sym_names[i], (long long)n_terms,
				   TBCRT_MAX_POLY_TERMS);
		for (int64_t t = 0; t < n_terms; t++) {
			if (len - q < 2) return BAD("symbol '%s': its polynomial runs past the sym_poly table", m->sym_names[i]);
			int64_t degree = m->sym_poly[q + 1];
			q += 2;
			if (degree < 0 || degree > TBCRT_MAX_POLY_DEGREE)
				return BAD("symbol '%s': a term of degree %lld; 0 to %d", m->sym_names[i], (long long)degree,
					   TBCRT_MAX_POLY_DEGREE);
			if (len - q < (uint64_t)degree)
				return BAD("symbol '%s': its polynomial runs past the sym_poly table", m->sym_names[i]);
			for (int64_t k = 0; k < degree; k++, q++) {
				int64_t s = m->sym_poly[q];
				if (s < 0 || s >= (int64_t)i || m->sym_computed[s])
					return BAD("symbol '%s' is derived from symbol %lld, which is not a symbol of lower index set "
						   "before the run",
						   m->sym_names[i], (long long)s);
			}
		}
	}
	return tbcrt__ok();
}

static tbcrt_status check_tables(tbcrt_model *m, const tbcrt_segments *seg, const tbc_abi_model *d) {
	const tbcrt_context *c = m->context;
	if (d->n_inputs > TBCRT_MAX_TENSORS || d->n_outputs > TBCRT_MAX_TENSORS || d->n_syms > TBCRT_MAX_TENSORS)
		return tbcrt__err(TBCRT_ERR_LIMIT, "the artifact declares %u inputs, %u outputs and %u symbols; the limit is %d each",
				  d->n_inputs, d->n_outputs, d->n_syms, TBCRT_MAX_TENSORS);
	if (d->n_inputs && !tbcrt__range_ok(seg, d->inputs, (uint64_t)d->n_inputs * sizeof *d->inputs))
		return BAD("the inputs table of %u entries is missing or lies outside the artifact", d->n_inputs);
	if (d->n_outputs && !tbcrt__range_ok(seg, d->outputs, (uint64_t)d->n_outputs * sizeof *d->outputs))
		return BAD("the outputs table of %u entries is missing or lies outside the artifact", d->n_outputs);
	if (d->n_syms && !tbcrt__range_ok(seg, d->sym_names, (uint64_t)d->n_syms * sizeof *d->sym_names))
		return BAD("the symbol names table of %u entries is missing or lies outside the artifact", d->n_syms);
	if (d->n_syms && d->sym_computed && !tbcrt__range_ok(seg, d->sym_computed, d->n_syms))
		return BAD("the sym_computed table lies outside the artifact");

	m->n_syms = d->n_syms;
	if (d->n_syms) {
		m->sym_names = tbcrt__calloc(c, d->n_syms, sizeof *m->sym_names);
		m->sym_computed = tbcrt__calloc(c, d->n_syms, 1);
		if (!m->sym_names || !m->sym_computed) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	}
	for (uint32_t i = 0; i < d->n_syms; i++) {
		if (!tbcrt__string_ok(seg, d->sym_names[i], TBCRT_MAX_NAME))
			return BAD("symbol %u has no name, or its name is not a NUL-terminated string of at most %d bytes", i,
				   TBCRT_MAX_NAME);
		if (!(m->sym_names[i] = tbcrt__strdup(c, d->sym_names[i])))
			return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		m->sym_computed[i] = d->sym_computed && d->sym_computed[i];
	}
	bool oom;
	const char *dup = duplicate(c, (const char *const *)m->sym_names, m->n_syms, &oom);
	if (oom) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	if (dup) return BAD("two symbols are named '%s'", dup);

	const uint8_t *computed = d->n_syms ? m->sym_computed : NULL;
	struct {
		const char *kind;
		uint32_t n;
		const tbc_abi_tensor *src;
		tbcrt__tensor **dst;
		uint32_t *count;
	} sides[2] = {{"input", d->n_inputs, d->inputs, &m->inputs, &m->n_inputs},
		      {"output", d->n_outputs, d->outputs, &m->outputs, &m->n_outputs}};
	for (int k = 0; k < 2; k++) {
		if (sides[k].n == 0) continue;
		tbcrt__tensor *ts = tbcrt__calloc(c, sides[k].n, sizeof *ts);
		if (!ts) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		*sides[k].dst = ts;
		for (uint32_t i = 0; i < sides[k].n; i++) {
			tbcrt_status s =
				check_tensor(seg, d, computed, &sides[k].src[i], sides[k].kind, i, &ts[i], m->sym_names);
			if (s.code != TBCRT_OK) return s;
			if (!(ts[i].name = tbcrt__strdup(c, sides[k].src[i].name)))
				return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
			*sides[k].count = i + 1;
		}
		const char **names = tbcrt__calloc(c, sides[k].n, sizeof *names);
		if (!names) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		for (uint32_t i = 0; i < sides[k].n; i++) names[i] = ts[i].name;
		dup = duplicate(c, names, sides[k].n, &oom);
		tbcrt__free(c, names);
		if (oom) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		if (dup) return BAD("two %ss are named '%s'", sides[k].kind, dup);
	}

	tbcrt_status st = check_derived(m, seg, d);
	if (st.code != TBCRT_OK) return st;
	for (uint32_t i = 0; m->sym_derived && i < m->n_inputs; i++)
		for (uint32_t k = 0; k < m->inputs[i].rank; k++)
			if (m->inputs[i].sym[k] >= 0 && m->sym_derived[m->inputs[i].sym[k]] >= 0)
				return BAD("input '%s' dim %u uses symbol '%s', which the model derives from other symbols",
					   m->inputs[i].name, k, m->sym_names[m->inputs[i].sym[k]]);
	/* A symbol the model neither computes nor derives takes its value from
	 * an input. */
	for (uint32_t s = 0; s < m->n_syms; s++) {
		if (m->sym_computed[s] || (m->sym_derived && m->sym_derived[s] >= 0)) continue;
		bool found = false;
		for (uint32_t i = 0; i < m->n_inputs && !found; i++)
			for (uint32_t k = 0; k < m->inputs[i].rank && !found; k++) found = m->inputs[i].sym[k] == (int32_t)s;
		if (!found) return BAD("symbol '%s' is neither the dim of an input nor computed by the model", m->sym_names[s]);
	}
	return tbcrt__ok();
}

static tbcrt_status check_weights(tbcrt_model *m, const tbcrt_segments *seg, const tbc_abi_model *d,
				  const char *base_dir) {
	if (d->weights && d->weights_file)
		return BAD("the artifact has both embedded weights and a weights file; it may have one");
	m->weights_size = d->weights_size;
	if (d->weights) {
		if (d->weights_size > TBCRT_MAX_TENSOR_BYTES * 64)
			return tbcrt__err(TBCRT_ERR_LIMIT, "the artifact's weights are larger than the limit");
		if (!tbcrt__range_ok(seg, d->weights, d->weights_size))
			return BAD("the artifact's %llu bytes of embedded weights lie outside it (truncated?)",
				   (unsigned long long)d->weights_size);
		if (tbcrt__weights_hash(d->abi_version, d->weights, d->weights_size) != d->weights_hash)
			return BAD("the embedded weights do not match their hash (%s): the artifact is corrupt",
				   tbcrt__weights_hash_name(d->abi_version));
		m->weights = d->weights;
		return tbcrt__ok();
	}
	if (d->weights_file) {
		if (!tbcrt__string_ok(seg, d->weights_file, TBCRT_MAX_NAME))
			return BAD("the weights file name is not a NUL-terminated string of at most %d bytes", TBCRT_MAX_NAME);
		if (!base_dir)
			return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT,
					  "the artifact's weights are in the file '%s'; pass the folder that holds it", d->weights_file);
		m->weights_external = true;
		tbcrt_status s = tbcrt__weights_map(base_dir, d->weights_file, d->weights_size, d->abi_version, d->weights_hash,
						    &m->weights_map, &m->weights_map_size);
		m->weights = m->weights_map;
		return s;
	}
	if (d->weights_size != 0)
		return BAD("the artifact declares %llu bytes of weights but neither embeds them nor names a file",
			   (unsigned long long)d->weights_size);
	return tbcrt__ok();
}

/* A training step's state (ABI 6): each entry pairs an input and an output
 * of one dtype and one static shape, each used once, its first value inside
 * the weights or zeros. */
static tbcrt_status check_state(tbcrt_model *m, const tbcrt_segments *seg, const tbc_abi_model *d) {
	const tbcrt_context *c = m->context;
	if (!d->n_state) return tbcrt__ok();
	if (d->n_state > m->n_inputs || d->n_state > m->n_outputs || !d->state ||
	    !tbcrt__range_ok(seg, d->state, (uint64_t)d->n_state * sizeof *d->state))
		return BAD("the artifact's %u pieces of training state are more than its inputs or outputs, or lie outside it",
			   d->n_state);
	m->state = tbcrt__calloc(c, d->n_state, sizeof *m->state);
	m->state_of_input = tbcrt__calloc(c, m->n_inputs, sizeof *m->state_of_input);
	m->state_of_output = tbcrt__calloc(c, m->n_outputs, sizeof *m->state_of_output);
	if (!m->state || !m->state_of_input || !m->state_of_output) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < m->n_inputs; i++) m->state_of_input[i] = -1;
	for (uint32_t i = 0; i < m->n_outputs; i++) m->state_of_output[i] = -1;
	for (uint32_t k = 0; k < d->n_state; k++) {
		tbc_abi_state st = d->state[k];
		if (st.input >= m->n_inputs || st.output >= m->n_outputs || m->state_of_input[st.input] >= 0 ||
		    m->state_of_output[st.output] >= 0)
			return BAD("training state %u names input %u and output %u: out of range or used twice", k, st.input,
				   st.output);
		const tbcrt__tensor *in = &m->inputs[st.input], *out = &m->outputs[st.output];
		bool same = in->dtype == out->dtype && in->rank == out->rank && !out->data_dependent;
		for (uint32_t i = 0; same && i < in->rank; i++) same = in->sym[i] < 0 && out->sym[i] < 0 && in->dims[i] == out->dims[i];
		if (!same)
			return BAD("training state '%s' and its next value '%s' differ in dtype or shape, or are not static",
				   in->name, out->name);
		uint64_t bytes = tbcrt_dtype_size(in->dtype);
		for (uint32_t i = 0; i < in->rank; i++)
			if (!tbcrt__mul_within(bytes, (uint64_t)in->dims[i], TBCRT_MAX_TENSOR_BYTES, &bytes))
				return tbcrt__err(TBCRT_ERR_LIMIT, "training state '%s' is larger than the limit", in->name);
		if (st.init_offset != TBC_ABI_STATE_ZEROS &&
		    (st.init_offset > m->weights_size || bytes > m->weights_size - st.init_offset || st.init_offset % 8))
			return BAD("training state '%s' starts from bytes %llu..%llu, outside the %llu bytes of weights", in->name,
				   (unsigned long long)st.init_offset, (unsigned long long)(st.init_offset + bytes),
				   (unsigned long long)m->weights_size);
		if ((st.kind != TBC_ABI_STATE_WEIGHT && st.kind != TBC_ABI_STATE_OPTIMIZER) || st.reserved)
			return BAD("training state '%s' is of unknown kind %u", in->name, st.kind);
		m->state[k] = st;
		m->state_of_input[st.input] = (int32_t)k;
		m->state_of_output[st.output] = (int32_t)k;
	}
	m->n_state = d->n_state;
	return tbcrt__ok();
}

tbcrt_status tbcrt__model_adopt(tbcrt_model *m, const tbc_abi_model *d, const char *base_dir) {
	const tbcrt_context *c = m->context;
	tbcrt_segments seg;
	tbcrt__segments_of(d, &seg);
	if (!tbcrt__range_ok(&seg, d, 2 * sizeof(uint32_t)))
		return BAD("the descriptor lies outside the artifact");
	if (d->magic != TBC_ABI_MAGIC)
		return BAD("not a tbc artifact: the descriptor's magic is 0x%08x, expected 0x%08x (\"TBC1\")", d->magic,
			   TBC_ABI_MAGIC);
	if (d->abi_version < TBC_ABI_VERSION_MIN || d->abi_version > TBC_ABI_VERSION)
		return tbcrt__err(TBCRT_ERR_ABI_VERSION,
				  "the artifact uses ABI version %u; this runtime runs versions %u to %u (recompile the model "
				  "with a matching tbc)",
				  d->abi_version, TBC_ABI_VERSION_MIN, TBC_ABI_VERSION);
	/* Each version reads only the fields it has: version 2 ends before the
	 * device code, versions 3 and 4 before the load-time values, version 5
	 * before the training state. */
	bool v3 = d->abi_version >= 3, v5 = d->abi_version >= 5, v6 = d->abi_version >= 6;
	size_t desc_size = v6   ? sizeof *d
			   : v5 ? offsetof(tbc_abi_model, n_state)
			   : v3 ? offsetof(tbc_abi_model, init_begin)
				: offsetof(tbc_abi_model, device_code);
	if (!tbcrt__range_ok(&seg, d, desc_size))
		return BAD("the descriptor is truncated");
	if (!tbcrt__string_ok(&seg, d->name, TBCRT_MAX_NAME))
		return BAD("the model's name is missing or not a NUL-terminated string of at most %d bytes", TBCRT_MAX_NAME);
	if (!tbcrt__string_ok(&seg, d->target_triple, TBCRT_MAX_NAME))
		return BAD("the target triple is missing or not a NUL-terminated string");
	if (!tbcrt__string_ok(&seg, d->cpu_features, TBCRT_MAX_NAME))
		return BAD("the CPU feature list is missing or not a NUL-terminated string (\"\" when none)");
	if (!(m->name = tbcrt__strdup(c, d->name)) || !(m->target_triple = tbcrt__strdup(c, d->target_triple)) ||
	    !(m->cpu_features = tbcrt__strdup(c, d->cpu_features)))
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	tbcrt_status s = tbcrt__check_triple(m->target_triple);
	if (s.code != TBCRT_OK) return s;
	if ((s = tbcrt__check_features(m->cpu_features)).code != TBCRT_OK) return s;
	if ((s = check_tables(m, &seg, d)).code != TBCRT_OK) return s;
	const void *device_code = v3 ? d->device_code : NULL;
	uint64_t device_code_size = v3 ? d->device_code_size : 0;
	if (!device_code != !device_code_size)
		return BAD("the descriptor's device code is %s", device_code ? "empty" : "NULL but has a size");
	/* No CPU code (run and arena_bytes both NULL): a device-only artifact. */
	m->has_cpu_code = d->run || d->arena_bytes || !device_code;
	if (m->has_cpu_code && !tbcrt__code_ok(&seg, (const void *)(uintptr_t)d->run))
		return BAD("the descriptor's run function is %s", d->run ? "not code of the artifact" : "NULL");
	if (m->has_cpu_code && !tbcrt__code_ok(&seg, (const void *)(uintptr_t)d->arena_bytes))
		return BAD("the descriptor's arena_bytes function is %s", d->arena_bytes ? "not code of the artifact" : "NULL");
	if ((s = check_weights(m, &seg, d, base_dir)).code != TBCRT_OK) return s;
	if (v5 && (d->init || d->init_begin != d->init_end)) {
		if (!m->has_cpu_code) return BAD("a device-only artifact has load-time values for the CPU");
		if (!tbcrt__code_ok(&seg, (const void *)(uintptr_t)d->init))
			return BAD("the descriptor's init function is %s", d->init ? "not code of the artifact" : "NULL");
		if (d->init_begin > d->init_end || d->init_end > TBCRT_MAX_TENSOR_BYTES || d->init_begin % 64)
			return BAD("the load-time values' bytes [%llu, %llu) of the arena are not a valid aligned range",
				   (unsigned long long)d->init_begin, (unsigned long long)d->init_end);
		m->init = d->init;
		m->init_begin = d->init_begin;
		m->init_end = d->init_end;
	}
	if (v6 && (s = check_state(m, &seg, d)).code != TBCRT_OK) return s;
	if (device_code) {
		if (!tbcrt__range_ok(&seg, device_code, device_code_size))
			return BAD("the %llu bytes of device code lie outside the artifact", (unsigned long long)device_code_size);
		if ((s = tbcrt__dcode_read(m, device_code, device_code_size)).code != TBCRT_OK) return s;
	}
	m->desc = d;
	return tbcrt__ok();
}
