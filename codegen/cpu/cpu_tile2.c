/* Kernel IR's dot-product tiles (kir_tile2, codegen/kir/kir.h) as x86's
 * AMX: tileloadd and tdpbf16ps (bf16) or tdpbusd / tdpbssd (u8 / i8 by i8)
 * on the 8 tile registers.
 *
 *   the mt x nt tiles of 16 x 16 f32 or i32 sums live in tile registers
 *   across a loop over k in chunks of 64 bytes of a row (32 bf16 values,
 *   64 bytes): per chunk, mt tiles of a (16 rows, lda apart) and nt tiles
 *   of b (16 groups of G = 2 or 4 k values of 16 columns, groups ldb
 *   apart) are loaded and each (row, column) pair of tiles is updated by
 *   one instruction; an uneven last chunk has tiles of its own, narrower
 *   shape;
 *   the tiles start from zero, and after the loop each sum goes through a
 *   block of the stack into its accumulator's scalar local (acc += sum),
 *   so the rest of the kernel (the epilogue) is ordinary kernel IR.
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

/* &buf[at] for a bf16 (2-byte) or 8-bit buffer. */
static LLVMValueRef elem(llvm_fn *f, const kir_buffer *buf, LLVMValueRef at) {
	LLVMTypeRef t = buf->dtype == TBC_DT_BF16 ? f->c->i16 : f->c->i8;
	return LLVMBuildInBoundsGEP2(f->c->b, t, f->bufs[buf->id], &at, 1, "");
}

typedef struct tile_fns {
	LLVMValueRef load, dp, store;
	LLVMTypeRef load_t, dp_t, store_t;
	LLVMValueRef a_at, lda, lda2, b_at, ldb, ldb2; /* i64: elements, and pitches in bytes */
	int es, group; /* bytes of an element; k values of a group of b: 2 (bf16) or 4 */
} tile_fns;

/* One chunk of w k values at q (an i64): loads of a's and b's tiles, then
 * the products into acc.  a's tile: 16 rows of w values; b's: w / group
 * groups of 16 columns' group values (64 bytes). */
static void chunk(llvm_fn *f, const kir_tile2 *m, const tile_fns *t, LLVMValueRef q, int w, LLVMValueRef *acc) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef at[2], bt[2];
	for (int i = 0; i < m->mt; i++) {
		LLVMValueRef row = LLVMBuildMul(b, LLVMConstInt(c->i64, (unsigned long long)(16 * i), 0), t->lda, "");
		LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildAdd(b, t->a_at, row, ""), q, "");
		LLVMValueRef args[4] = {i16c(c, 16), i16c(c, t->es * w), elem(f, m->a, idx), t->lda2};
		at[i] = LLVMBuildCall2(b, t->load_t, t->load, args, 4, "atile");
	}
	LLVMValueRef prow = LLVMBuildMul(b, LLVMBuildSDiv(b, q, LLVMConstInt(c->i64, (unsigned long long)t->group, 0), ""), t->ldb, "");
	for (int j = 0; j < m->nt; j++) {
		LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildAdd(b, t->b_at, prow, ""),
					       LLVMConstInt(c->i64, (unsigned long long)(16 * t->group * j), 0), "");
		LLVMValueRef args[4] = {i16c(c, w / t->group), i16c(c, 64), elem(f, m->b, idx), t->ldb2};
		bt[j] = LLVMBuildCall2(b, t->load_t, t->load, args, 4, "btile");
	}
	for (int i = 0; i < m->mt; i++)
		for (int j = 0; j < m->nt; j++) {
			LLVMValueRef args[6] = {i16c(c, 16), i16c(c, 64), i16c(c, t->es * w), acc[i * m->nt + j], at[i], bt[j]};
			acc[i * m->nt + j] = LLVMBuildCall2(b, t->dp_t, t->dp, args, 6, "");
		}
}

void cpu_emit_tile2(llvm_fn *f, const kir_tile2 *m) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	tile_fns t;
	bool int8 = kir_tile2_is_int8(m);
	const char *dp = !int8 ? "llvm.x86.tdpbf16ps.internal"
		       : m->a->dtype == TBC_DT_U8 ? "llvm.x86.tdpbusd.internal"
						   : "llvm.x86.tdpbssd.internal";
	t.es = int8 ? 1 : 2, t.group = int8 ? 4 : 2;
	LLVMTypeRef zero_t;
	LLVMValueRef zero;
	if (!(t.load = intrinsic(c, "llvm.x86.tileloadd64.internal", &t.load_t)) || !(t.dp = intrinsic(c, dp, &t.dp_t)) ||
	    !(t.store = intrinsic(c, "llvm.x86.tilestored64.internal", &t.store_t)) ||
	    !(zero = intrinsic(c, "llvm.x86.tilezero.internal", &zero_t)))
		return;
	t.a_at = llvm_expr(f, m->a_at), t.lda = llvm_expr(f, m->lda);
	t.b_at = llvm_expr(f, m->b_at), t.ldb = llvm_expr(f, m->ldb);
	if (!t.a_at || !t.lda || !t.b_at || !t.ldb) return;
	LLVMValueRef esz = LLVMConstInt(c->i64, (unsigned long long)t.es, 0);
	t.lda2 = LLVMBuildMul(b, t.lda, esz, "lda.bytes"), t.ldb2 = LLVMBuildMul(b, t.ldb, esz, "ldb.bytes");
	int rows = 16 * m->mt, cols = 16 * m->nt, n = m->mt * m->nt;

	/* The sums' block of the stack, rows x cols f32 or i32, made at the
	 * top of the function (an alloca in a loop would grow the stack). */
	LLVMTypeRef st = int8 ? c->i32 : c->f32;
	LLVMTypeRef blk_t = LLVMArrayType2(st, (uint64_t)(rows * cols));
	LLVMBuilderRef eb = LLVMCreateBuilderInContext(c->ctx);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first) LLVMPositionBuilderBefore(eb, first);
	else LLVMPositionBuilderAtEnd(eb, entry);
	LLVMValueRef blk = LLVMBuildAlloca(eb, blk_t, "tile2.sums");
	LLVMSetAlignment(blk, 64);
	LLVMDisposeBuilder(eb);
	/* The tiles start from zero (tilezero: no store before the loop,
	 * which LLVM would make a memset call, after which it must load the
	 * tile configuration again); the accumulators are added after. */
	LLVMValueRef stride = LLVMConstInt(c->i64, (unsigned long long)(4 * cols), 0);
	LLVMValueRef tile_at[4], acc0[4];
	for (int i = 0; i < m->mt; i++)
		for (int j = 0; j < m->nt; j++) {
			LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)(16 * i * cols + 16 * j), 0);
			tile_at[i * m->nt + j] = LLVMBuildInBoundsGEP2(b, st, blk, &idx, 1, "");
			LLVMValueRef args[2] = {i16c(c, 16), i16c(c, 64)};
			acc0[i * m->nt + j] = LLVMBuildCall2(b, zero_t, zero, args, 2, "ctile");
		}

	/* Whole chunks of 64 bytes of a row in a loop, then the last, narrower one. */
	int64_t cw = 64 / t.es, whole = m->kn / cw;
	int rest = (int)(m->kn % cw);
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
		chunk(f, m, &t, q, (int)cw, acc);
		LLVMValueRef q1 = LLVMBuildAdd(b, q, LLVMConstInt(c->i64, (unsigned long long)cw, 0), "");
		LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
		LLVMValueRef more = LLVMBuildICmp(b, LLVMIntSLT, q1, LLVMConstInt(c->i64, (unsigned long long)(cw * whole), 0), "");
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
	if (rest) chunk(f, m, &t, LLVMConstInt(c->i64, (unsigned long long)(cw * whole), 0), rest, acc);

	/* The sums back to the locals. */
	for (int i = 0; i < n; i++) {
		LLVMValueRef args[5] = {i16c(c, 16), i16c(c, 64), tile_at[i], stride, acc[i]};
		LLVMBuildCall2(b, t.store_t, t.store, args, 5, "");
	}
	for (int i = 0; i < rows * cols; i++) { /* acc += the tile's sum */
		LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)i, 0);
		LLVMValueRef p = LLVMBuildInBoundsGEP2(b, st, blk, &idx, 1, "");
		LLVMValueRef x = LLVMBuildLoad2(b, st, f->vars[m->acc[i]->id], ""), y = LLVMBuildLoad2(b, st, p, "");
		LLVMBuildStore(b, int8 ? LLVMBuildAdd(b, x, y, "") : LLVMBuildFAdd(b, x, y, ""), f->vars[m->acc[i]->id]);
	}
}
