/* Kernel IR's warp matrix multiply-accumulate (kir_mma, codegen/kir/kir.h)
 * as NVIDIA's tensor-core instructions, sm_80 on:
 *
 *   - a's 16 x 16 tiles by ldmatrix.x4 (each lane gives the address of one
 *     row of 8: lanes 0-15 rows 0-15 of columns 0-7, lanes 16-31 the same
 *     rows of columns 8-15), which hands lane (g, t) exactly the pairs of
 *     mma's A fragment: rows g and g + 8, columns 2t, 2t + 1 and + 8;
 *   - b's 16 x 8 tiles, stored by rows of k, by ldmatrix.x4.trans two at a
 *     time (x2 for an odd last one): transposed, lane (g, t) gets rows 2t,
 *     2t + 1 (and + 8) of column g, the B fragment of mma's "col" layout;
 *   - mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 per
 *     pair of tiles, its four sums those kir_mma gives the lane (c0, c1 at
 *     row g, columns 2t, 2t + 1; c2, c3 at row g + 8).
 *
 * kir_mma's rules make the addresses 16-byte aligned (ldmatrix needs it):
 * pitches and offsets are multiples of 8 elements, and local buffers are
 * aligned to 16 bytes (llvm_gpu.c). */
#include <stdio.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"
#include "codegen/nvptx/nvptx_internal.h"

/* A call to intrinsic name, overloaded on n_over types. */
static LLVMValueRef call(llvm_cx *c, const char *name, LLVMTypeRef *over, size_t n_over, LLVMValueRef *args,
			 unsigned n) {
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, over, n_over);
	return LLVMBuildCall2(c->b, LLVMIntrinsicGetType(c->ctx, id, over, n_over), fn, args, n, "");
}

/* ldmatrix of 2 or 4 8x8 matrices of b16 (transposed when asked) from the
 * lane's row address p (shared memory): the lane's 32-bit registers. */
static void ldmatrix(llvm_cx *c, LLVMValueRef p, int n, bool trans, LLVMValueRef *out) {
	char name[80];
	snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d%s.b16", n, trans ? ".trans" : "");
	LLVMTypeRef pt = LLVMTypeOf(p);
	LLVMValueRef r = call(c, name, &pt, 1, &p, 1);
	for (int i = 0; i < n; i++) out[i] = LLVMBuildExtractValue(c->b, r, (unsigned)i, "");
}

/* The address of element at + row * ld + col of local buffer lb. */
static LLVMValueRef element(llvm_fn *f, const kir_buffer *lb, LLVMValueRef at, LLVMValueRef row, int64_t ld,
			    LLVMValueRef col) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef i = LLVMBuildAdd(b, at, LLVMBuildAdd(b, LLVMBuildMul(b, row, LLVMConstInt(c->i64, (unsigned long long)ld, 0), ""), col, ""), "");
	return LLVMBuildInBoundsGEP2(b, llvm_mem_type(c, lb->dtype), f->locals[lb->id], &i, 1, "");
}

void tbc_nvptx_mma(llvm_fn *f, const kir_mma *m) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef a_at = llvm_expr(f, m->a_at), b_at = llvm_expr(f, m->b_at);
	if (!a_at || !b_at) return;
	LLVMValueRef lane = LLVMBuildZExt(b, call(c, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0, NULL, 0), c->i64, "lane");
	LLVMValueRef l16 = LLVMBuildURem(b, lane, LLVMConstInt(c->i64, 16, 0), "");
	LLVMValueRef half8 = LLVMBuildMul(b, LLVMBuildUDiv(b, lane, LLVMConstInt(c->i64, 16, 0), ""), LLVMConstInt(c->i64, 8, 0), "");
	bool bf16 = m->a->dtype == TBC_DT_BF16;
	LLVMTypeRef h2 = LLVMVectorType(LLVMHalfTypeInContext(c->ctx), 2);
	/* The fragments: 4 registers per 16 x 16 tile of a, 2 per 16 x 8 of b. */
	LLVMValueRef af[8][4], bfr[8][2];
	for (int i = 0; i < m->mi; i++) {
		LLVMValueRef row = LLVMBuildAdd(b, l16, LLVMConstInt(c->i64, 16 * (unsigned)i, 0), "");
		ldmatrix(c, element(f, m->a, a_at, row, m->lda, half8), 4, false, af[i]);
	}
	for (int j = 0; j < m->ni; j += 2) {
		LLVMValueRef r[4];
		bool pair = j + 1 < m->ni;
		LLVMValueRef col = LLVMConstInt(c->i64, 8 * (unsigned)j, 0);
		if (pair) col = LLVMBuildAdd(b, col, half8, "");
		ldmatrix(c, element(f, m->b, b_at, l16, m->ldb, col), pair ? 4 : 2, true, r);
		bfr[j][0] = r[0], bfr[j][1] = r[1];
		if (pair) bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
	}
	const char *name = bf16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
	for (int i = 0; i < m->mi; i++)
		for (int j = 0; j < m->ni; j++) {
			LLVMValueRef args[10];
			for (int q = 0; q < 4; q++) args[q] = bf16 ? af[i][q] : LLVMBuildBitCast(b, af[i][q], h2, "");
			for (int q = 0; q < 2; q++) args[4 + q] = bf16 ? bfr[j][q] : LLVMBuildBitCast(b, bfr[j][q], h2, "");
			kir_var *const *acc = m->acc + (i * m->ni + j) * 4;
			for (int e = 0; e < 4; e++) args[6 + e] = LLVMBuildLoad2(b, c->f32, f->vars[acc[e]->id], "");
			LLVMValueRef d = call(c, name, NULL, 0, args, 10);
			for (int e = 0; e < 4; e++) LLVMBuildStore(b, LLVMBuildExtractValue(b, d, (unsigned)e, ""), f->vars[acc[e]->id]);
		}
}
