/* Load-time values: the part of a program that depends only on the weights.
 *
 * Does: marks the launches whose results depend on nothing but the weights
 * (kir_launch.init) -- the values constant folding left to the compiled
 * code because they are too large to store in the artifact (a Tile, Range
 * or Expand of small constants making a weight, and what is computed from
 * it) -- and gives every buffer they write that other launches read storage
 * of its own at the end of the arena's part 0, [init_begin, init_end), that
 * no other launch writes.  Their intermediates stay in the arena below
 * init_begin, where the run's own values go once they are done.
 * The CPU backend emits those launches as the descriptor's init (run once
 * per session, include/tbc/abi.h) and leaves them out of run; every other
 * runner (the kernel IR evaluator, the device tables) runs them in place,
 * where they compute the same.
 * A launch is one when it is a kernel outside every If/Loop region, takes
 * no symbol, and every buffer it binds is a weight or a statically sized
 * arena temporary that no other launch stores to; a temporary that other
 * launches read holds what one op stored (not scratch that several ops
 * reuse).  Requires: a lowered program, its temporaries placed.
 * Guarantees: the arena grows by the region; run never stores there; the
 * marked launches store only there and below init_begin. */
#include <stdlib.h>
#include <string.h>

#include "codegen/host/program.h"
#include "codegen/lower/lower_internal.h"

static bool has_graph_attr(const tbc_op *op) {
	for (int a = 0; a < op->n_attrs; a++)
		if (op->attrs[a].kind == TBC_ATTR_GRAPH || op->attrs[a].kind == TBC_ATTR_GRAPHS) return true;
	return false;
}

bool lower_mark_load_time(lower_cx *cx) {
	const tbc_module *m = cx->m;
	cx->load_time = calloc((size_t)m->n_values + 1, sizeof *cx->load_time);
	if (!cx->load_time) return false;
	for (const tbc_op *op = m->main->first; op; op = op->next) {
		/* A Fused body reads nothing but the Fused op's inputs (passes/fusion.c). */
		bool yes = op->n_inputs > 0 && (op->code == TBC_OP_Fused || !has_graph_attr(op));
		for (int i = 0; i < op->n_inputs && yes; i++) {
			const tbc_value *v = op->inputs[i];
			yes = !v || v->kind == TBC_VALUE_CONST || cx->load_time[v->id];
		}
		for (int i = 0; i < op->n_outputs && yes; i++) {
			const tbc_value *v = op->outputs[i];
			if (v && tbc_type_numel(&v->type) >= 0) cx->load_time[v->id] = true;
		}
	}
	return true;
}

static void mark_stores(const kir_stmt *s, bool *stored) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_STORE && s->buf->space == KIR_MEM_GLOBAL) stored[s->buf->id] = true;
		mark_stores(s->body, stored);
		mark_stores(s->orelse, stored);
	}
}

static int root_of(const kir_program *p, int b) { return p->bufs[b]->alias_of >= 0 ? p->bufs[b]->alias_of : b; }

/* Whether launch la, outside every region, could run before the inputs
 * exist: no symbols, nothing but weights and static temporaries. */
static bool eligible(const kir_program *p, const kir_launch *la) {
	if (la->ctl != KIR_CTL_KERNEL || la->kernel->n_sizes > 0) return false;
	for (int a = 0; a < la->kernel->n_buffers; a++) {
		const kir_pbuf *b = p->bufs[root_of(p, la->args[a])];
		if (b->role == KIR_BUF_CONST) continue;
		if (b->role != KIR_BUF_TEMP || b->dynamic || kir_pbuf_bytes(p, b, NULL) < 0) return false;
	}
	return true;
}

bool kir_program_split_init(kir_program *p) {
	int nl = p->n_launches, nb = p->n_bufs;
	bool *cand = calloc((size_t)nl + 1, sizeof *cand);
	bool *tainted = calloc((size_t)nb + 1, sizeof *tainted);
	bool *moved = calloc((size_t)nb + 1, sizeof *moved);
	int *writer = malloc(((size_t)nb + 1) * sizeof *writer); /* op of the candidates storing it; -2: several */
	bool **stored = calloc((size_t)nl + 1, sizeof *stored);
	bool ok = cand && tainted && moved && writer && stored;
	int depth = 0;
	for (int l = 0; ok && l < nl; l++) {
		const kir_launch *la = &p->launches[l];
		if (la->ctl == KIR_CTL_IF || la->ctl == KIR_CTL_LOOP) depth++;
		if (la->ctl == KIR_CTL_END_IF || la->ctl == KIR_CTL_END_LOOP) depth--;
		if (la->ctl != KIR_CTL_KERNEL) continue;
		stored[l] = calloc((size_t)la->kernel->n_buffers + 1, sizeof **stored);
		if (!stored[l]) ok = false;
		else mark_stores(la->kernel->body, stored[l]);
		cand[l] = ok && depth == 0 && eligible(p, la);
	}
	/* A temporary some other launch stores to is not the candidates' alone;
	 * neither is one that launches outside read after several ops stored it.
	 * Each candidate losing its place may taint more: until nothing moves. */
	for (bool changed = ok; changed;) {
		changed = false;
		for (int b = 0; b < nb; b++) writer[b] = -1;
		for (int l = 0; l < nl; l++) {
			const kir_launch *la = &p->launches[l];
			if (la->ctl != KIR_CTL_KERNEL) continue;
			for (int a = 0; a < la->kernel->n_buffers; a++) {
				int r = root_of(p, la->args[a]);
				if (!stored[l][a]) continue;
				if (!cand[l]) tainted[r] = true;
				else writer[r] = writer[r] == -1 || writer[r] == la->op_pos ? la->op_pos : -2;
			}
		}
		for (int l = 0; l < nl; l++) {
			const kir_launch *la = &p->launches[l];
			if (la->ctl != KIR_CTL_KERNEL || cand[l]) continue;
			for (int a = 0; a < la->kernel->n_buffers; a++) {
				int r = root_of(p, la->args[a]);
				if (writer[r] == -2) tainted[r] = true;
			}
		}
		for (int l = 0; l < nl; l++) {
			const kir_launch *la = &p->launches[l];
			if (!cand[l]) continue;
			for (int a = 0; a < la->kernel->n_buffers && cand[l]; a++)
				if (tainted[root_of(p, la->args[a])]) cand[l] = false, changed = true;
		}
	}
	/* What run reads of theirs moves to the region, after everything placed
	 * in part 0.  What only they read (a Range feeding the Mod that makes
	 * a weight) stays where it was placed: memory planning placed it apart
	 * from every value living at the same time, which the candidates, run
	 * in the same order, still are; run overwrites it before reading it. */
	bool *run_reads = calloc((size_t)nb + 1, sizeof *run_reads);
	if (!run_reads) ok = false;
	for (int l = 0; ok && l < nl; l++) {
		const kir_launch *la = &p->launches[l];
		if (la->ctl != KIR_CTL_KERNEL || cand[l]) continue;
		for (int a = 0; a < la->kernel->n_buffers; a++) run_reads[root_of(p, la->args[a])] = true;
	}
	int64_t begin = p->parts[0].bytes, end = begin;
	for (int l = 0; ok && l < nl; l++) {
		p->launches[l].init = cand[l];
		if (!cand[l]) continue;
		const kir_launch *la = &p->launches[l];
		for (int a = 0; a < la->kernel->n_buffers; a++) {
			int r = root_of(p, la->args[a]);
			kir_pbuf *b = p->bufs[r];
			if (b->role != KIR_BUF_TEMP || moved[r] || !run_reads[r]) continue;
			moved[r] = true;
			b->part = 0;
			b->offset = b->part_offset = end;
			end += (kir_pbuf_bytes(p, b, NULL) + KIR_ALIGN - 1) / KIR_ALIGN * KIR_ALIGN;
		}
	}
	for (int i = 0; ok && i < nb; i++) {
		kir_pbuf *b = p->bufs[i];
		if (b->alias_of < 0 || !moved[b->alias_of]) continue;
		b->part = 0;
		b->offset = b->part_offset = p->bufs[b->alias_of]->offset;
	}
	if (ok) {
		p->parts[0].bytes = end;
		p->arena_static = (uint64_t)end;
		p->init_begin = (uint64_t)begin;
		p->init_end = (uint64_t)end;
	}
	for (int l = 0; stored && l < nl; l++) free(stored[l]);
	free(stored);
	free(run_reads);
	free(cand);
	free(tainted);
	free(moved);
	free(writer);
	return ok;
}
