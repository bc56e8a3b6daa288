/* The device program table (include/tbc/abi.h): read word by word with every
 * read inside the table, every count within what is left of it and the
 * documented limits, every index in range, the control markers nested, and
 * each input and output agreeing with the descriptor's.  What passes is
 * copied, so a table that lies can make a run fail but not read or write
 * outside what the runtime allocated. */
#include <stdio.h>
#include <string.h>

#include "device_table.h"

#define BAD(...) tbcrt__err(TBCRT_ERR_INVALID_ARTIFACT, "device code: " __VA_ARGS__)

struct tbcrt__dblock {
	struct tbcrt__dblock *next;
	_Alignas(16) unsigned char data[];
};

typedef struct reader {
	const tbcrt_context *c;
	tbcrt__dtable *t;
	const unsigned char *p;
	uint64_t n, at; /* words */
	bool oom;
} reader;

static void *take(reader *r, uint64_t count, size_t size) {
	uint64_t bytes;
	if (!tbcrt__mul_within(count ? count : 1, size, TBCRT_MAX_DEVICE_TABLE * 8, &bytes)) {
		r->oom = true;
		return NULL;
	}
	struct tbcrt__dblock *b = tbcrt__calloc(r->c, 1, sizeof *b + (size_t)bytes);
	if (!b) {
		r->oom = true;
		return NULL;
	}
	b->next = r->t->blocks;
	r->t->blocks = b;
	return b->data;
}

static bool word(reader *r, int64_t *out) {
	if (r->at >= r->n) return false;
	memcpy(out, r->p + r->at * 8, 8);
	r->at++;
	return true;
}

/* A count of things that take at least per_item words each: within what is
 * left of the table and limit. */
static bool count(reader *r, uint64_t per_item, uint64_t limit, uint32_t *out) {
	int64_t v;
	if (!word(r, &v) || v < 0 || (uint64_t)v > limit) return false;
	if (per_item && (uint64_t)v > (r->n - r->at) / per_item) return false;
	*out = (uint32_t)v;
	return true;
}

/* A string: its length, its bytes padded to words; NUL-terminated copy. */
static bool string(reader *r, uint64_t max, char **out, size_t *out_len) {
	int64_t len;
	if (!word(r, &len) || len < 0 || (uint64_t)len > max) return false;
	uint64_t words = ((uint64_t)len + 7) / 8;
	if (words > r->n - r->at) return false;
	char *s = take(r, (uint64_t)len + 1, 1);
	if (!s) return false;
	memcpy(s, r->p + r->at * 8, (size_t)len);
	s[len] = 0;
	r->at += words;
	*out = s;
	if (out_len) *out_len = (size_t)len;
	return true;
}

static bool identifier(const char *s) {
	if (!*s || (*s >= '0' && *s <= '9')) return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

bool tbcrt__dbuf_bytes(const tbcrt__dtable *t, const tbcrt__dbuf *b, const int64_t *syms, uint64_t *out) {
	uint64_t n = tbcrt_dtype_size(b->dtype);
	for (uint32_t d = 0; d < b->rank; d++) {
		int64_t v = b->dims[d] >= 0 ? b->dims[d] : syms ? syms[-1 - b->dims[d]] : -1;
		(void)t;
		if (v < 0 || !tbcrt__mul_within(n, (uint64_t)v, TBCRT_MAX_TENSOR_BYTES, &n)) return false;
	}
	*out = n;
	return true;
}

static tbcrt_status read_expr(reader *r, uint32_t n_sizes, tbcrt__dexpr *e, const char *kname) {
	if (!count(r, 2, TBCRT_MAX_EXPR_OPS, &e->n)) return BAD("kernel '%s': a grid expression's length", kname);
	e->ops = take(r, (uint64_t)e->n * 2, sizeof *e->ops);
	if (!e->ops) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	int depth = 0;
	for (uint32_t i = 0; i < e->n; i++) {
		int64_t op, v;
		if (!word(r, &op) || !word(r, &v)) return BAD("kernel '%s': a grid expression is cut short", kname);
		if (op < TBC_ABI_EXPR_CONST || op > TBC_ABI_EXPR_MAX)
			return BAD("kernel '%s': grid expression operation %lld", kname, (long long)op);
		if (op == TBC_ABI_EXPR_SIZE && (v < 0 || (uint64_t)v >= n_sizes))
			return BAD("kernel '%s': a grid expression reads size %lld of %u", kname, (long long)v, n_sizes);
		depth += op <= TBC_ABI_EXPR_SIZE ? 1 : -1;
		if (depth < 1) return BAD("kernel '%s': a grid expression pops more than it pushed", kname);
		e->ops[2 * i] = op;
		e->ops[2 * i + 1] = v;
	}
	if (depth != 1) return BAD("kernel '%s': a grid expression leaves %d values", kname, depth);
	return tbcrt__ok();
}

static tbcrt_status read_bufs(reader *r, const tbcrt_model *m) {
	tbcrt__dtable *t = r->t;
	if (!count(r, 9, 1u << 24, &t->n_bufs)) return BAD("the buffer count");
	t->bufs = take(r, t->n_bufs, sizeof *t->bufs);
	if (!t->bufs) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < t->n_bufs; i++) {
		tbcrt__dbuf *b = &t->bufs[i];
		int64_t v[9];
		for (int k = 0; k < 9; k++)
			if (!word(r, &v[k])) return BAD("buffer %u is cut short", i);
		if (v[0] < TBC_ABI_BUF_INPUT || v[0] > TBC_ABI_BUF_SYMS) return BAD("buffer %u has role %lld", i, (long long)v[0]);
		if (tbcrt_dtype_size((int32_t)v[1]) == 0 || v[1] != (int32_t)v[1])
			return BAD("buffer %u has dtype %lld, which compiled code cannot hold", i, (long long)v[1]);
		if (v[3] < -1 || v[3] >= (int64_t)t->n_bufs || v[3] == (int64_t)i)
			return BAD("buffer %u aliases buffer %lld of %u", i, (long long)v[3], t->n_bufs);
		if (v[4] & ~3ll) return BAD("buffer %u has flags %lld", i, (long long)v[4]);
		if (v[8] < 0 || v[8] > TBCRT_MAX_RANK) return BAD("buffer %u has rank %lld", i, (long long)v[8]);
		b->role = (int32_t)v[0];
		b->dtype = (int32_t)v[1];
		b->io_index = v[2] >= 0 && v[2] < INT32_MAX ? (int32_t)v[2] : -1;
		b->alias_of = (int32_t)v[3];
		b->flags = (uint32_t)v[4];
		b->offset = v[5];
		b->part = v[6] >= -1 && v[6] < INT32_MAX ? (int32_t)v[6] : -2;
		b->part_offset = v[7];
		b->rank = (uint32_t)v[8];
		for (uint32_t d = 0; d < b->rank; d++) {
			if (!word(r, &b->dims[d])) return BAD("buffer %u is cut short", i);
			if (b->dims[d] < 0 && -1 - b->dims[d] >= (int64_t)m->n_syms)
				return BAD("buffer %u dim %u names symbol %lld of %u", i, d, (long long)(-1 - b->dims[d]), m->n_syms);
		}
		if (b->flags && b->role != TBC_ABI_BUF_TEMP && b->role != TBC_ABI_BUF_OUTPUT)
			return BAD("buffer %u is dynamic but neither an output nor a temporary", i);
	}
	/* Aliases point at a root of the same role; roots' own facts hold. */
	for (uint32_t i = 0; i < t->n_bufs; i++) {
		const tbcrt__dbuf *b = &t->bufs[i];
		if (b->alias_of >= 0) {
			const tbcrt__dbuf *root = &t->bufs[b->alias_of];
			if (root->alias_of != -1 || root->role != b->role)
				return BAD("buffer %u aliases buffer %d, which is an alias or of another role", i, (int)b->alias_of);
			continue;
		}
		uint64_t bytes;
		switch (b->role) {
		case TBC_ABI_BUF_CONST:
			if (!tbcrt__dbuf_bytes(t, b, NULL, &bytes)) return BAD("constant buffer %u has symbolic or huge dims", i);
			if (b->offset < 0 || (uint64_t)b->offset > m->weights_size || bytes > m->weights_size - (uint64_t)b->offset)
				return BAD("constant buffer %u (%llu bytes at %lld) lies outside the %llu bytes of weights", i,
					   (unsigned long long)bytes, (long long)b->offset, (unsigned long long)m->weights_size);
			break;
		case TBC_ABI_BUF_TEMP:
			if (b->part < -1) return BAD("buffer %u lies in arena part %d", i, (int)b->part);
			if (b->part >= 0 && (b->part_offset < 0 || b->part_offset > (int64_t)TBCRT_MAX_TENSOR_BYTES))
				return BAD("buffer %u has part offset %lld", i, (long long)b->part_offset);
			break;
		case TBC_ABI_BUF_SYMS:
			if ((int32_t)i != t->syms_buf || b->dtype != 7 || b->rank != 1 || b->dims[0] != (int64_t)m->n_syms)
				return BAD("buffer %u holds the symbols but is not int64[%u] or not the table's symbol buffer", i,
					   m->n_syms);
			break;
		case TBC_ABI_BUF_INPUT:
			if (b->io_index < 0 || (uint32_t)b->io_index >= m->n_inputs)
				return BAD("input buffer %u is input %d of %u", i, (int)b->io_index, m->n_inputs);
			break;
		case TBC_ABI_BUF_OUTPUT:
			if (b->io_index < 0 || (uint32_t)b->io_index >= m->n_outputs)
				return BAD("output buffer %u is output %d of %u", i, (int)b->io_index, m->n_outputs);
			break;
		}
	}
	return tbcrt__ok();
}

/* Input or output i of the descriptor is buffer at, with its dtype and dims. */
static tbcrt_status check_io(const tbcrt__dtable *t, const tbcrt__tensor *io, int32_t at, int role, const char *kind,
			     uint32_t i) {
	if (at < 0 || (uint32_t)at >= t->n_bufs) return BAD("%s %u is buffer %d of %u", kind, i, (int)at, t->n_bufs);
	const tbcrt__dbuf *b = &t->bufs[at];
	if (b->role != role || b->alias_of != -1 || b->io_index != (int32_t)i || b->dtype != io->dtype || b->rank != io->rank)
		return BAD("%s '%s' is buffer %d, which is not that %s or not of its dtype and rank", kind, io->name, (int)at,
			   kind);
	for (uint32_t d = 0; d < b->rank; d++)
		if (b->dims[d] != (io->sym[d] >= 0 ? -1 - io->sym[d] : io->dims[d]))
			return BAD("%s '%s' dim %u differs from the descriptor's", kind, io->name, d);
	if (role == TBC_ABI_BUF_INPUT ? b->flags != 0 : ((b->flags & TBCRT__DBUF_DYNAMIC) != 0) != io->data_dependent)
		return BAD("%s '%s': the table and the descriptor disagree on whether its size is data dependent", kind,
			   io->name);
	return tbcrt__ok();
}

static tbcrt_status read_kernels(reader *r) {
	tbcrt__dtable *t = r->t;
	if (!count(r, 8, 1u << 20, &t->n_kernels)) return BAD("the kernel count");
	t->kernels = take(r, t->n_kernels, sizeof *t->kernels);
	if (!t->kernels) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < t->n_kernels; i++) {
		tbcrt__dkernel *k = &t->kernels[i];
		int64_t shape;
		if (!string(r, 256, &k->name, NULL) || !identifier(k->name))
			return BAD("kernel %u's name is cut short or not an identifier of at most 256 bytes", i);
		if (!count(r, 0, TBCRT__MAX_ARGS, &k->n_buffers) || !count(r, 0, TBCRT__MAX_ARGS, &k->n_sizes) ||
		    !word(r, &shape) || shape < 0 || shape > 2 || !count(r, 1, 3, &k->n_dims) || (shape < 2 && k->n_dims != 1))
			return BAD("kernel '%s': its argument counts, shape or dims", k->name);
		k->shape = (int32_t)shape;
		uint64_t group_items = 1;
		for (uint32_t g = 0; g < k->n_dims; g++) {
			int64_t step, local;
			if (!word(r, &step) || step < 1) return BAD("kernel '%s': dim %u's step", k->name, g);
			k->step[g] = step;
			tbcrt_status s = read_expr(r, k->n_sizes, &k->lo[g], k->name);
			if (s.code == TBCRT_OK) s = read_expr(r, k->n_sizes, &k->hi[g], k->name);
			if (s.code != TBCRT_OK) return s;
			/* OpenCL devices take at least 1 item a group and no device
			 * takes more than 1024 (the device refuses what it cannot run). */
			if (!word(r, &local) || (shape < 2 ? local != 0 : local < 1 || local > 1024))
				return BAD("kernel '%s': dim %u's work-group size", k->name, g);
			k->local[g] = (uint32_t)local;
			group_items *= shape < 2 ? 1 : (uint64_t)local;
		}
		if (group_items > 1024) return BAD("kernel '%s': work-groups of %llu items", k->name, (unsigned long long)group_items);
		k->stored = take(r, k->n_buffers, 1);
		if (!k->stored) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		for (uint32_t b = 0; b < k->n_buffers; b++) {
			int64_t v;
			if (!word(r, &v) || (v != 0 && v != 1)) return BAD("kernel '%s': buffer %u's store flag", k->name, b);
			k->stored[b] = (uint8_t)v;
		}
		k->elem_bytes = take(r, k->n_buffers, sizeof *k->elem_bytes);
		k->rank = take(r, k->n_buffers, sizeof *k->rank);
		k->dims = take(r, (uint64_t)k->n_buffers * TBCRT_MAX_RANK, sizeof *k->dims);
		if (!k->elem_bytes || !k->rank || !k->dims) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		tbcrt_status s;
		for (uint32_t b = 0; b < k->n_buffers; b++) {
			int64_t v;
			if (!word(r, &v) || v < 1 || v > 16 || !count(r, 3, TBCRT_MAX_RANK, &k->rank[b]))
				return BAD("kernel '%s': buffer %u's element size or rank", k->name, b);
			k->elem_bytes[b] = (uint32_t)v;
			for (uint32_t d = 0; d < k->rank[b]; d++)
				if ((s = read_expr(r, k->n_sizes, &k->dims[b * TBCRT_MAX_RANK + d], k->name)).code != TBCRT_OK)
					return s;
		}
		if (!count(r, 1, 65536, &k->n_messages)) return BAD("kernel '%s': its message count", k->name);
		if (k->n_buffers + k->n_sizes + (k->n_messages ? 1 : 0) > TBCRT__MAX_ARGS)
			return tbcrt__err(TBCRT_ERR_LIMIT, "device code: kernel '%s' takes more than %d arguments", k->name,
					  TBCRT__MAX_ARGS);
		k->messages = take(r, k->n_messages, sizeof *k->messages);
		if (!k->messages) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		for (uint32_t j = 0; j < k->n_messages; j++)
			if (!string(r, TBCRT_MAX_NAME, &k->messages[j], NULL))
				return BAD("kernel '%s': message %u is cut short or longer than %d bytes", k->name, j, TBCRT_MAX_NAME);
	}
	return tbcrt__ok();
}

static tbcrt_status read_launches(reader *r, const tbcrt_model *m) {
	tbcrt__dtable *t = r->t;
	if (!count(r, 5, 1u << 24, &t->n_launches)) return BAD("the launch count");
	t->launches = take(r, t->n_launches, sizeof *t->launches);
	int32_t *open = take(r, t->n_launches, sizeof *open);
	if (!t->launches || !open) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	uint32_t depth = 0;
	for (uint32_t l = 0; l < t->n_launches; l++) {
		tbcrt__dlaunch *la = &t->launches[l];
		int64_t v[5];
		for (int k = 0; k < 5; k++)
			if (!word(r, &v[k])) return BAD("launch %u is cut short", l);
		if (v[0] < TBC_ABI_CTL_KERNEL || v[0] > TBC_ABI_CTL_END_LOOP) return BAD("launch %u has ctl %lld", l, (long long)v[0]);
		la->ctl = (int32_t)v[0];
		la->match = -1;
		for (int j = 0; j < 3; j++) {
			if (v[1 + j] < -1 || v[1 + j] >= (int64_t)m->n_syms)
				return BAD("launch %u names symbol %lld of %u", l, (long long)v[1 + j], m->n_syms);
			la->ctl_sym[j] = (int32_t)v[1 + j];
			if (la->ctl_sym[j] >= 0 && !m->sym_computed[la->ctl_sym[j]])
				return BAD("launch %u's marker names symbol '%s', which the model does not compute", l,
					   m->sym_names[la->ctl_sym[j]]);
		}
		bool need0 = la->ctl == TBC_ABI_CTL_IF || la->ctl == TBC_ABI_CTL_LOOP;
		if (need0 && la->ctl_sym[0] < 0) return BAD("launch %u: an If or Loop marker without its symbol", l);
		switch (la->ctl) {
		case TBC_ABI_CTL_KERNEL: break;
		case TBC_ABI_CTL_IF:
		case TBC_ABI_CTL_LOOP: open[depth++] = (int32_t)l; break;
		case TBC_ABI_CTL_ELSE:
			if (!depth || t->launches[open[depth - 1]].ctl != TBC_ABI_CTL_IF) return BAD("launch %u: an Else without its If", l);
			t->launches[open[depth - 1]].match = (int32_t)l;
			open[depth - 1] = (int32_t)l;
			break;
		case TBC_ABI_CTL_END_IF:
		case TBC_ABI_CTL_END_LOOP: {
			int32_t want = la->ctl == TBC_ABI_CTL_END_IF ? TBC_ABI_CTL_ELSE : TBC_ABI_CTL_LOOP;
			if (!depth || t->launches[open[depth - 1]].ctl != want) return BAD("launch %u: an end marker without its start", l);
			t->launches[open[depth - 1]].match = (int32_t)l;
			la->match = open[depth - 1];
			depth--;
			break;
		}
		}
		if (la->ctl != TBC_ABI_CTL_KERNEL) {
			if (v[4] != -1) return BAD("launch %u: a marker names kernel %lld", l, (long long)v[4]);
			la->kernel = -1;
			continue;
		}
		if (v[4] < 0 || v[4] >= (int64_t)t->n_kernels) return BAD("launch %u runs kernel %lld of %u", l, (long long)v[4], t->n_kernels);
		la->kernel = (int32_t)v[4];
		const tbcrt__dkernel *k = &t->kernels[la->kernel];
		la->args = take(r, k->n_buffers, sizeof *la->args);
		la->syms = take(r, k->n_sizes, sizeof *la->syms);
		if (!la->args || !la->syms) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
		for (uint32_t a = 0; a < k->n_buffers; a++) {
			int64_t x;
			if (!word(r, &x) || x < 0 || x >= (int64_t)t->n_bufs)
				return BAD("launch %u of kernel '%s': argument %u is not one of the %u buffers", l, k->name, a, t->n_bufs);
			la->args[a] = (int32_t)x;
		}
		for (uint32_t s = 0; s < k->n_sizes; s++) {
			int64_t x;
			if (!word(r, &x) || x < 0 || x >= (int64_t)m->n_syms)
				return BAD("launch %u of kernel '%s': size %u is not one of the %u symbols", l, k->name, s, m->n_syms);
			la->syms[s] = (int32_t)x;
		}
	}
	if (depth) return BAD("an If or Loop marker has no end");
	return tbcrt__ok();
}

static tbcrt_status read_all(reader *r, const tbcrt_model *m) {
	tbcrt__dtable *t = r->t;
	int64_t magic = 0, version = 0, kind = 0, v;
	if (!word(r, &magic) || (uint64_t)magic != TBC_ABI_DEVICE_MAGIC) return BAD("the table's magic is wrong");
	if (!word(r, &version) || version < TBC_ABI_DEVICE_VERSION_MIN || version > TBC_ABI_DEVICE_VERSION)
		return tbcrt__err(TBCRT_ERR_ABI_VERSION, "device code: table version %lld; this runtime reads versions %d to %d",
				  (long long)version, TBC_ABI_DEVICE_VERSION_MIN, TBC_ABI_DEVICE_VERSION);
	if (!word(r, &kind) || !tbcrt__dtable_kind_name((int32_t)kind) || kind != (int32_t)kind)
		return tbcrt__err(TBCRT_ERR_UNSUPPORTED_TARGET,
				  "device code of kind %lld; this runtime runs OpenCL C (%d), PTX (%d) and AMDGPU code "
				  "objects (%d)",
				  (long long)kind, TBC_ABI_DEVICE_OPENCL_C, TBC_ABI_DEVICE_PTX, TBC_ABI_DEVICE_AMDGPU_ELF);
	t->kind = (int32_t)kind;
	size_t options_len;
	if (!string(r, TBCRT_MAX_DEVICE_TABLE, &t->source, &t->source_size) || !t->source_size)
		return BAD("the %s is missing or cut short", tbcrt__dtable_kind_name(t->kind));
	if (!string(r, TBCRT_MAX_NAME, &t->options, &options_len) || strlen(t->options) != options_len)
		return BAD("the options are cut short or hold a NUL");
	if (kind == TBC_ABI_DEVICE_OPENCL_C) snprintf(t->target, sizeof t->target, "opencl");
	else if (!options_len || options_len > 24 || strspn(t->options, "abcdefghijklmnopqrstuvwxyz0123456789_") != options_len)
		return BAD("the %s code names no architecture (options '%s')", kind == TBC_ABI_DEVICE_PTX ? "PTX" : "AMDGPU",
			   t->options);
	else snprintf(t->target, sizeof t->target, "%s:%s", kind == TBC_ABI_DEVICE_PTX ? "cuda" : "rocm", t->options);
	t->source_hash = tbcrt__fnv1a64(t->source, t->source_size);
	if (!count(r, 0, TBCRT_MAX_TENSORS, &t->n_syms) || t->n_syms != m->n_syms)
		return BAD("the table has %u symbols; the descriptor %u", t->n_syms, m->n_syms);
	if (!word(r, &v) || v < -1 || v > INT32_MAX) return BAD("the symbol buffer");
	t->syms_buf = (int32_t)v;
	tbcrt_status s = read_bufs(r, m);
	if (s.code != TBCRT_OK && r->oom) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	if (s.code != TBCRT_OK) return s;
	if (t->syms_buf >= (int32_t)t->n_bufs || (t->syms_buf >= 0 && t->bufs[t->syms_buf].role != TBC_ABI_BUF_SYMS))
		return BAD("the symbol buffer %d is not a buffer of role SYMS", (int)t->syms_buf);
	if (!count(r, 2, 1u << 20, &t->n_parts)) return BAD("the arena part count");
	t->parts = take(r, t->n_parts, sizeof *t->parts);
	if (!t->parts) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	for (uint32_t j = 0; j < t->n_parts; j++) {
		tbcrt__dpart *q = &t->parts[j];
		if (!word(r, &q->bytes) || q->bytes < 0 || q->bytes > (int64_t)TBCRT_MAX_TENSOR_BYTES ||
		    !count(r, 1, TBCRT_MAX_RANK, &q->n_syms))
			return BAD("arena part %u", j);
		for (uint32_t k = 0; k < q->n_syms; k++) {
			if (!word(r, &v) || v < 0 || v >= (int64_t)m->n_syms || m->sym_computed[v])
				return BAD("arena part %u: a symbol that is not one set before the run", j);
			q->syms[k] = (int32_t)v;
		}
	}
	for (uint32_t i = 0; i < t->n_bufs; i++) /* now that the parts are known */
		if (t->bufs[i].role == TBC_ABI_BUF_TEMP && t->bufs[i].alias_of < 0 && t->bufs[i].part >= (int32_t)t->n_parts)
			return BAD("buffer %u lies in arena part %d of %u", i, (int)t->bufs[i].part, t->n_parts);
	if (!count(r, 1, TBCRT_MAX_TENSORS, &t->n_inputs) || t->n_inputs != m->n_inputs)
		return BAD("the table has %u inputs; the descriptor %u", t->n_inputs, m->n_inputs);
	t->inputs = take(r, t->n_inputs, sizeof *t->inputs);
	if (!t->inputs) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < t->n_inputs; i++) {
		if (!word(r, &v) || v < 0 || v > INT32_MAX) return BAD("input %u's buffer", i);
		t->inputs[i] = (int32_t)v;
		if ((s = check_io(t, &m->inputs[i], t->inputs[i], TBC_ABI_BUF_INPUT, "input", i)).code != TBCRT_OK) return s;
	}
	if (!count(r, 1, TBCRT_MAX_TENSORS, &t->n_outputs) || t->n_outputs != m->n_outputs)
		return BAD("the table has %u outputs; the descriptor %u", t->n_outputs, m->n_outputs);
	t->outputs = take(r, t->n_outputs, sizeof *t->outputs);
	if (!t->outputs) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < t->n_outputs; i++) {
		if (!word(r, &v) || v < 0 || v > INT32_MAX) return BAD("output %u's buffer", i);
		t->outputs[i] = (int32_t)v;
		if ((s = check_io(t, &m->outputs[i], t->outputs[i], TBC_ABI_BUF_OUTPUT, "output", i)).code != TBCRT_OK) return s;
	}
	if ((s = read_kernels(r)).code != TBCRT_OK || (s = read_launches(r, m)).code != TBCRT_OK) return s;
	if (version >= 3) {
		if (!string(r, TBCRT_MAX_DEVICE_TABLE, &t->binary, &t->binary_size)) return BAD("the binary is cut short");
		if (t->binary_size && kind != TBC_ABI_DEVICE_PTX)
			return BAD("a table of %s holds a binary (only PTX has one: a cubin)", tbcrt__dtable_kind_name(t->kind));
		if (t->binary_size && (t->binary_size < 64 || memcmp(t->binary, "\177ELF", 4)))
			return BAD("the PTX's cubin (%zu bytes) is not an ELF object", t->binary_size);
		if (!t->binary_size) t->binary = NULL;
	}
	if (r->at != r->n) return BAD("%llu bytes follow the table", (unsigned long long)(r->n - r->at) * 8);
	return tbcrt__ok();
}

tbcrt_status tbcrt__dtable_read(const tbcrt_model *m, const void *bytes, uint64_t size, tbcrt__dtable **out_table) {
	*out_table = NULL;
	if (size > TBCRT_MAX_DEVICE_TABLE)
		return tbcrt__err(TBCRT_ERR_LIMIT, "device code: a table of %llu bytes; the limit is %llu",
				  (unsigned long long)size, (unsigned long long)TBCRT_MAX_DEVICE_TABLE);
	if (size % 8) return BAD("the table's %llu bytes are not whole 8-byte words", (unsigned long long)size);
	tbcrt__dtable *t = tbcrt__calloc(m->context, 1, sizeof *t);
	if (!t) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	reader r = {.c = m->context, .t = t, .p = bytes, .n = size / 8};
	tbcrt_status s = read_all(&r, m);
	if (s.code != TBCRT_OK && r.oom) s = tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory reading the device code");
	if (s.code != TBCRT_OK) {
		tbcrt__dtable_free(m->context, t);
		return s;
	}
	*out_table = t;
	return s;
}

void tbcrt__dtable_free(const tbcrt_context *c, tbcrt__dtable *t) {
	if (!t) return;
	for (struct tbcrt__dblock *b = t->blocks, *next; b; b = next) {
		next = b->next;
		tbcrt__free(c, b);
	}
	tbcrt__free(c, t);
}

/* ---- Several targets ----------------------------------------------------*/

static tbcrt_status dcode_add(tbcrt_model *m, const void *bytes, uint64_t size) {
	if (m->n_dtables == TBC_ABI_MAX_DEVICE_TABLES)
		return BAD("more than %d device tables", TBC_ABI_MAX_DEVICE_TABLES);
	tbcrt__dtable *t = NULL;
	tbcrt_status s = tbcrt__dtable_read(m, bytes, size, &t);
	if (s.code != TBCRT_OK) return s;
	for (uint32_t i = 0; i < m->n_dtables; i++)
		if (!strcmp(m->dtables[i]->target, t->target)) {
			tbcrt__dtable_free(m->context, t);
			return BAD("two device tables for %s", m->dtables[i]->target);
		}
	m->dtables[m->n_dtables++] = t;
	size_t at = strlen(m->device_targets);
	snprintf(m->device_targets + at, sizeof m->device_targets - at, "%s%s", at ? "," : "", t->target);
	return tbcrt__ok();
}

tbcrt_status tbcrt__dcode_read(tbcrt_model *m, const void *bytes, uint64_t size) {
	m->dtables = tbcrt__calloc(m->context, TBC_ABI_MAX_DEVICE_TABLES, sizeof *m->dtables);
	if (!m->dtables) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory");
	const int64_t *w = bytes;
	if (size < 16 || size % 8 || (uint64_t)w[0] != TBC_ABI_DEVICES_MAGIC) return dcode_add(m, bytes, size);
	uint64_t n_words = size / 8;
	int64_t n = w[1];
	if (n < 1 || n > TBC_ABI_MAX_DEVICE_TABLES || (uint64_t)(2 + 2 * n) > n_words)
		return BAD("the device code directory lists %lld tables", (long long)n);
	for (int64_t i = 0; i < n; i++) {
		int64_t off = w[2 + 2 * i], bytes_i = w[3 + 2 * i];
		if (off < (2 + 2 * n) * 8 || off % 8 || bytes_i <= 0 || (uint64_t)off > size || (uint64_t)bytes_i > size - (uint64_t)off)
			return BAD("device table %lld of the directory lies outside it", (long long)i);
		tbcrt_status s = dcode_add(m, (const char *)bytes + off, (uint64_t)bytes_i);
		if (s.code != TBCRT_OK) return s;
	}
	return tbcrt__ok();
}

/* The number of an architecture name after its prefix ("sm_86" -> 86), -1
 * when it is not one; *accel: the "a" suffix (sm_90a). */
static int arch_number(const char *name, const char *prefix, bool *accel) {
	size_t n = strlen(prefix);
	if (strncmp(name, prefix, n)) return -1;
	int v = 0, digits = 0;
	const char *p = name + n;
	for (; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) v = v * 10 + (*p - '0');
	*accel = *p == 'a';
	return digits ? v : -1;
}

const tbcrt__dtable *tbcrt__dtable_for(const tbcrt_model *m, const tbcrt_device_info *info) {
	const tbcrt__dtable *best = NULL;
	int best_sm = -1;
	for (uint32_t i = 0; i < m->n_dtables; i++) {
		const tbcrt__dtable *t = m->dtables[i];
		switch (info->kind) {
		case TBCRT_DEVICE_OPENCL:
			if (t->kind == TBC_ABI_DEVICE_OPENCL_C) return t;
			break;
		case TBCRT_DEVICE_CUDA: {
			bool accel = false, dev_accel = false;
			int sm = t->kind == TBC_ABI_DEVICE_PTX ? arch_number(t->options, "sm_", &accel) : -1;
			int have = arch_number(info->arch, "sm_", &dev_accel);
			if (sm < 0 || have < 0 || sm > have || (accel && sm != have)) break;
			if (sm > best_sm || (sm == best_sm && accel)) best = t, best_sm = sm;
			break;
		}
		case TBCRT_DEVICE_HIP: {
			/* "gfx90a:sramecc+:xnack-"; unknown (""): the first code object,
			 * which the driver refuses if it is for another GPU */
			size_t len = strcspn(info->arch, ":");
			if (t->kind == TBC_ABI_DEVICE_AMDGPU_ELF &&
			    (!len || (strlen(t->options) == len && !strncmp(t->options, info->arch, len))))
				return t;
			break;
		}
		default: break;
		}
	}
	return best;
}

bool tbcrt__dtable_cubin_runs(const tbcrt__dtable *t, const tbcrt_device_info *info) {
	if (!t->binary_size || t->kind != TBC_ABI_DEVICE_PTX || info->kind != TBCRT_DEVICE_CUDA) return false;
	bool accel = false, dev_accel = false;
	int sm = arch_number(t->options, "sm_", &accel), have = arch_number(info->arch, "sm_", &dev_accel);
	/* "sm_86": major 8, minor 6; "sm_100": major 10, minor 0 */
	if (sm < 0 || have < 0 || sm / 10 != have / 10 || sm % 10 > have % 10) return false;
	return !accel || sm == have;
}

const char *tbcrt__dtable_kind_name(int32_t kind) {
	switch (kind) {
	case TBC_ABI_DEVICE_OPENCL_C: return "OpenCL C source";
	case TBC_ABI_DEVICE_PTX: return "PTX";
	case TBC_ABI_DEVICE_AMDGPU_ELF: return "AMDGPU code object";
	}
	return NULL;
}
