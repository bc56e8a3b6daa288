/* Kernel IR's bf16 dot-product tiles (kir_tile2, codegen/kir/kir.h) as
 * x86's AMX: tileloadd and tdpbf16ps on the 8 tile registers.
 *
 *   the mt x nt tiles of 16 x 16 f32 sums live in tile registers across
 *   a loop over k in chunks of 32 values: per chunk, mt tiles of a (16
 *   rows of 32 bf16, rows lda apart) and nt tiles of b (16 k pairs of 16
 *   columns, pairs ldb apart) are loaded and each (row, column) pair of
 *   tiles is updated by one tdpbf16ps; an uneven last chunk (kn % 32) has
 *   tiles of its own, narrower shape;
 *   the sums come from and go back to the accumulators' scalar locals
 *   through a block of the stack before and after the loop, so the rest of
 *   the kernel (the epilogue) is ordinary kernel IR.
 *
 * LLVM's AMX intrinsics of the ".internal" form take each tile's shape
 * (rows, bytes per row) as operands; LLVM writes the tile configuration
 * (ldtilecfg) from them and releases the tiles on return.  Only a target
 * whose description declares the statement receives one
 * (tbc_target_desc.tile_bf16, from the machine's amx-tile and amx-bf16);
 * the artifact then lists both features, and the runtime asks the kernel
 * for the tile state (arch_prctl) before it runs any code
 * (runtime/cpu.c). */
#include <string.h>

#include "codegen/cpu/cpu.h"

static LLVMValueRef intrinsic(llvm_cx *c, const char *name, LLVMTypeRef *type) {
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	if (!id) {
		llvm_fail(c, TBC_ERR_INTERNAL, "LLVM has no %s", name);
		return NULL;
	}
	*type = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
	return LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
}

static LLVMValueRef i16c(llvm_cx *c, int v) { return LLVMConstInt(c->i16, (unsigned long long)v, 0); }

/* &buf[at] for a bf16 buffer (2-byte elements). */
static LLVMValueRef elem(llvm_fn *f, const kir_buffer *buf, LLVMValueRef at) {
	return LLVMBuildInBoundsGEP2(f->c->b, f->c->i16, f->bufs[buf->id], &at, 1, "");
}

typedef struct tile_fns {
	LLVMValueRef load, dp, store;
	LLVMTypeRef load_t, dp_t, store_t;
	LLVMValueRef a_at, lda, lda2, b_at, ldb, ldb2; /* i64: elements, and pitches in bytes */
} tile_fns;

/* One chunk of w k values at q (an i64): loads of a's and b's tiles, then
 * the products into acc. */
static void chunk(llvm_fn *f, const kir_tile2 *m, const tile_fns *t, LLVMValueRef q, int w, LLVMValueRef *acc) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef at[2], bt[2];
	for (int i = 0; i < m->mt; i++) {
		LLVMValueRef row = LLVMBuildMul(b, LLVMConstInt(c->i64, (unsigned long long)(16 * i), 0), t->lda, "");
		LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildAdd(b, t->a_at, row, ""), q, "");
		LLVMValueRef args[4] = {i16c(c, 16), i16c(c, 2 * w), elem(f, m->a, idx), t->lda2};
		at[i] = LLVMBuildCall2(b, t->load_t, t->load, args, 4, "atile");
	}
	LLVMValueRef prow = LLVMBuildMul(b, LLVMBuildSDiv(b, q, LLVMConstInt(c->i64, 2, 0), ""), t->ldb, "");
	for (int j = 0; j < m->nt; j++) {
		LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildAdd(b, t->b_at, prow, ""), LLVMConstInt(c->i64, (unsigned long long)(32 * j), 0), "");
		LLVMValueRef args[4] = {i16c(c, w / 2), i16c(c, 64), elem(f, m->b, idx), t->ldb2};
		bt[j] = LLVMBuildCall2(b, t->load_t, t->load, args, 4, "btile");
	}
	for (int i = 0; i < m->mt; i++)
		for (int j = 0; j < m->nt; j++) {
			LLVMValueRef args[6] = {i16c(c, 16), i16c(c, 64), i16c(c, 2 * w), acc[i * m->nt + j], at[i], bt[j]};
			acc[i * m->nt + j] = LLVMBuildCall2(b, t->dp_t, t->dp, args, 6, "");
		}
}

void cpu_emit_tile2(llvm_fn *f, const kir_tile2 *m) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	tile_fns t;
	if (!(t.load = intrinsic(c, "llvm.x86.tileloadd64.internal", &t.load_t)) ||
	    !(t.dp = intrinsic(c, "llvm.x86.tdpbf16ps.internal", &t.dp_t)) ||
	    !(t.store = intrinsic(c, "llvm.x86.tilestored64.internal", &t.store_t)))
		return;
	t.a_at = llvm_expr(f, m->a_at), t.lda = llvm_expr(f, m->lda);
	t.b_at = llvm_expr(f, m->b_at), t.ldb = llvm_expr(f, m->ldb);
	if (!t.a_at || !t.lda || !t.b_at || !t.ldb) return;
	LLVMValueRef two = LLVMConstInt(c->i64, 2, 0);
	t.lda2 = LLVMBuildMul(b, t.lda, two, "lda.bytes"), t.ldb2 = LLVMBuildMul(b, t.ldb, two, "ldb.bytes");
	int rows = 16 * m->mt, cols = 16 * m->nt, n = m->mt * m->nt;

	/* The sums' block of the stack, rows x cols f32, made at the top of
	 * the function (an alloca in a loop would grow the stack). */
	LLVMTypeRef blk_t = LLVMArrayType2(c->f32, (uint64_t)(rows * cols));
	LLVMBuilderRef eb = LLVMCreateBuilderInContext(c->ctx);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first) LLVMPositionBuilderBefore(eb, first);
	else LLVMPositionBuilderAtEnd(eb, entry);
	LLVMValueRef blk = LLVMBuildAlloca(eb, blk_t, "tile2.sums");
	LLVMSetAlignment(blk, 64);
	LLVMDisposeBuilder(eb);
	for (int i = 0; i < rows * cols; i++) {
		LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)i, 0);
		LLVMValueRef p = LLVMBuildInBoundsGEP2(b, c->f32, blk, &idx, 1, "");
		LLVMBuildStore(b, LLVMBuildLoad2(b, c->f32, f->vars[m->acc[i]->id], ""), p);
	}
	LLVMValueRef stride = LLVMConstInt(c->i64, (unsigned long long)(4 * cols), 0);
	LLVMValueRef tile_at[4], acc0[4];
	for (int i = 0; i < m->mt; i++)
		for (int j = 0; j < m->nt; j++) {
			LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)(16 * i * cols + 16 * j), 0);
			tile_at[i * m->nt + j] = LLVMBuildInBoundsGEP2(b, c->f32, blk, &idx, 1, "");
			LLVMValueRef args[4] = {i16c(c, 16), i16c(c, 64), tile_at[i * m->nt + j], stride};
			acc0[i * m->nt + j] = LLVMBuildCall2(b, t.load_t, t.load, args, 4, "ctile");
		}

	/* Whole chunks of 32 k values in a loop, then the last, narrower one. */
	int64_t whole = m->kn / 32;
	int rest = (int)(m->kn % 32);
	LLVMValueRef acc[4];
	memcpy(acc, acc0, sizeof acc);
	if (whole > 0) {
		LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
		LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "tile2");
		LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "tile2.done");
		LLVMBuildBr(b, body);
		LLVMPositionBuilderAtEnd(b, body);
		LLVMValueRef q = LLVMBuildPhi(b, c->i64, "q"), phi[4];
		for (int i = 0; i < n; i++) phi[i] = acc[i] = LLVMBuildPhi(b, LLVMTypeOf(acc0[i]), "acc");
		chunk(f, m, &t, q, 32, acc);
		LLVMValueRef q1 = LLVMBuildAdd(b, q, LLVMConstInt(c->i64, 32, 0), "");
		LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
		LLVMValueRef more = LLVMBuildICmp(b, LLVMIntSLT, q1, LLVMConstInt(c->i64, (unsigned long long)(32 * whole), 0), "");
		llvm_mark_loop(f, LLVMBuildCondBr(b, more, body, done), false);
		LLVMBasicBlockRef in[2] = {pre, from};
		LLVMValueRef qv[2] = {LLVMConstInt(c->i64, 0, 0), q1};
		LLVMAddIncoming(q, qv, in, 2);
		for (int i = 0; i < n; i++) {
			LLVMValueRef av[2] = {acc0[i], acc[i]};
			LLVMAddIncoming(phi[i], av, in, 2);
		}
		LLVMPositionBuilderAtEnd(b, done);
	}
	if (rest) chunk(f, m, &t, LLVMConstInt(c->i64, (unsigned long long)(32 * whole), 0), rest, acc);

	/* The sums back to the locals. */
	for (int i = 0; i < n; i++) {
		LLVMValueRef args[5] = {i16c(c, 16), i16c(c, 64), tile_at[i], stride, acc[i]};
		LLVMBuildCall2(b, t.store_t, t.store, args, 5, "");
	}
	for (int i = 0; i < rows * cols; i++) {
		LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)i, 0);
		LLVMValueRef p = LLVMBuildInBoundsGEP2(b, c->f32, blk, &idx, 1, "");
		LLVMBuildStore(b, LLVMBuildLoad2(b, c->f32, p, ""), f->vars[m->acc[i]->id]);
	}
}
