/* From an LLVM module to code: data layout, verifier, the new pass manager
 * and emission to memory, the same for every LLVM target; and the version
 * of the LLVM tbc links. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/llvm/llvm_machine.h"
#include "ir/clock.h"

static char llvm_version[32];
static pthread_once_t llvm_version_once = PTHREAD_ONCE_INIT;
static void format_llvm_version(void) {
	unsigned major, minor, patch;
	LLVMGetVersion(&major, &minor, &patch);
	snprintf(llvm_version, sizeof llvm_version, "%u.%u.%u", major, minor, patch);
}

const char *tbc_llvm_version(void) {
	pthread_once(&llvm_version_once, format_llvm_version);
	return llvm_version;
}

LLVMCodeGenOptLevel llvm_codegen_level(int opt_level) {
	return opt_level <= 0   ? LLVMCodeGenLevelNone
	       : opt_level == 1 ? LLVMCodeGenLevelLess
	       : opt_level == 2 ? LLVMCodeGenLevelDefault
				: LLVMCodeGenLevelAggressive;
}

void llvm_module_set_machine(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *triple) {
	LLVMSetTarget(mod, triple);
	LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(mod, dl);
	LLVMDisposeTargetData(dl);
}

bool llvm_module_verify(LLVMModuleRef mod, const char *backend, tbc_diags *d) {
	char *err = NULL;
	bool ok = !LLVMVerifyModule(mod, LLVMReturnStatusAction, &err);
	if (!ok)
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "%s backend: invalid LLVM IR: %.400s", backend,
			      err ? err : "");
	LLVMDisposeMessage(err);
	return ok;
}

/* -O1's pipeline: the passes tbc's kernels need and little else
 * (docs/compile-time.md).  Inlining (the outlined parallel bodies' helpers),
 * SROA for the kernels' locals, loops rotated with their invariants hoisted
 * so that the loop vectorizer takes the elementwise loops, unrolling, and
 * the SLP vectorizer for the GEMM tiles' straight-line epilogues; no GVN,
 * DSE or module-wide passes.  InstCombine as LLVM's own pipelines run it:
 * `instcombine` written in a pipeline's text verifies that one iteration
 * reached a fixed point and aborts the process where it did not (a check
 * for LLVM's own tests; Winograd's 7 x 7 transforms tripped it).
 * Measured against default<O2> on the bench set (docs/performance.md):
 * 1.6-2x less LLVM time, code 0-11% slower on the CNNs and the encoders. */
static const char o1_pipeline[] =
	"cgscc(inline),function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(loop-rotate,licm),"
	"indvars,loop-vectorize,loop-unroll,slp-vectorizer,instcombine<no-verify-fixpoint>,simplifycfg)";

bool llvm_module_optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, int opt_level, const char *backend,
			  tbc_diags *d) {
	char passes[32];
	int level = opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level;
	snprintf(passes, sizeof passes, "default<O%d>", level);
	/* TBC_LLVM_PASSES: another pipeline (opt's -passes syntax), for measuring */
	const char *custom = getenv("TBC_LLVM_PASSES");
	const char *pipeline = custom && *custom ? custom : level == 1 ? o1_pipeline : passes;
	LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(po, level >= 2);
	LLVMPassBuilderOptionsSetSLPVectorization(po, level >= 2);
	LLVMPassBuilderOptionsSetLoopUnrolling(po, level >= 2);
	LLVMErrorRef e = LLVMRunPasses(mod, pipeline, tm, po);
	LLVMDisposePassBuilderOptions(po);
	if (!e) return true;
	char *msg = LLVMGetErrorMessage(e);
	tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "%s backend: passes: %s", backend, msg);
	LLVMDisposeErrorMessage(msg);
	return false;
}

/* A malloc'd copy of n bytes with a NUL after them (text IR and assembly
 * read as strings; an object's callers ignore it). */
static bool copy_out(const char *data, size_t n, void **out_data, size_t *out_size) {
	char *p = malloc(n + 1);
	if (!p) return false;
	memcpy(p, data, n);
	p[n] = 0;
	*out_data = p;
	*out_size = n;
	return true;
}

/* Loop strength reduction (LSR) is a third of the code generator's time on
 * tbc's CPU kernels at -O1 and gains them 1-2% (docs/compile-time.md).  Its
 * only switch is LLVM's command-line option -disable-lsr, one setting for
 * the whole process, read when an emission builds its code generator's
 * passes.  So the emissions in flight all share one setting: one that wants
 * the other waits until they are done, then sets it.  Emissions of one
 * setting run side by side. */
static pthread_mutex_t lsr_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lsr_free = PTHREAD_COND_INITIALIZER;
static int lsr_holders;	    /* emissions in flight, all of them with lsr_disabled */
static bool lsr_disabled; /* the setting tbc last gave LLVM (LLVM's default: on) */

static void lsr_hold(bool disable) {
	pthread_mutex_lock(&lsr_lock);
	while (lsr_holders > 0 && lsr_disabled != disable) pthread_cond_wait(&lsr_free, &lsr_lock);
	if (lsr_disabled != disable) {
		const char *argv[] = {"tbc", disable ? "-disable-lsr=true" : "-disable-lsr=false"};
		LLVMParseCommandLineOptions(2, argv, NULL);
		lsr_disabled = disable;
	}
	lsr_holders++;
	pthread_mutex_unlock(&lsr_lock);
}

static void lsr_release(void) {
	pthread_mutex_lock(&lsr_lock);
	if (--lsr_holders == 0) pthread_cond_broadcast(&lsr_free);
	pthread_mutex_unlock(&lsr_lock);
}

bool llvm_module_emit(LLVMModuleRef mod, LLVMTargetMachineRef tm, llvm_output what, bool strength_reduce,
		      const char *backend, tbc_diags *d, void **out_data, size_t *out_size) {
	*out_data = NULL;
	*out_size = 0;
	if (what == LLVM_OUT_IR) {
		char *text = LLVMPrintModuleToString(mod);
		bool ok = copy_out(text, strlen(text), out_data, out_size);
		LLVMDisposeMessage(text);
		return ok;
	}
	char *err = NULL;
	LLVMMemoryBufferRef buf = NULL;
	LLVMCodeGenFileType type = what == LLVM_OUT_ASSEMBLY ? LLVMAssemblyFile : LLVMObjectFile;
	lsr_hold(!strength_reduce);
	LLVMBool failed = LLVMTargetMachineEmitToMemoryBuffer(tm, mod, type, &err, &buf);
	lsr_release();
	if (failed) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "%s backend: emitting code: %s", backend,
			      err ? err : "");
		LLVMDisposeMessage(err);
		return false;
	}
	bool ok = copy_out(LLVMGetBufferStart(buf), LLVMGetBufferSize(buf), out_data, out_size);
	LLVMDisposeMemoryBuffer(buf);
	return ok;
}

typedef struct job_queue {
	llvm_job *jobs;
	int n;
	int next; /* the next job to take, under lock */
	pthread_mutex_t lock;
} job_queue;

static void run_job(llvm_job *j) {
	double t0 = tbc_seconds_now();
	if (j->build && !j->build(j)) {
		j->ok = false;
		j->build_seconds = j->seconds = tbc_seconds_now() - t0;
		return;
	}
	j->build_seconds = tbc_seconds_now() - t0;
	j->ok = llvm_module_verify(j->mod, j->backend, j->d) &&
		llvm_module_optimize(j->mod, j->tm, j->opt_level, j->backend, j->d) &&
		llvm_module_emit(j->mod, j->tm, j->what, j->strength_reduce, j->backend, j->d, &j->data, &j->size);
	j->seconds = tbc_seconds_now() - t0;
}

static void *job_worker(void *arg) {
	job_queue *q = arg;
	for (;;) {
		pthread_mutex_lock(&q->lock);
		int i = q->next < q->n ? q->next++ : -1;
		pthread_mutex_unlock(&q->lock);
		if (i < 0) return NULL;
		run_job(&q->jobs[i]);
	}
}

bool llvm_jobs_run(llvm_job *jobs, int n, int threads) {
	job_queue q = {.jobs = jobs, .n = n, .next = 0};
	pthread_mutex_init(&q.lock, NULL);
	if (threads > n) threads = n;
	if (threads > 64) threads = 64;
	pthread_t tid[64];
	int started = 0;
	/* The calling thread is one of them; a thread that cannot be started
	 * leaves its share to the ones that could. */
	for (int t = 1; t < threads; t++)
		if (pthread_create(&tid[started], NULL, job_worker, &q) == 0) started++;
	job_worker(&q);
	for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
	pthread_mutex_destroy(&q.lock);
	bool ok = true;
	for (int i = 0; i < n; i++) ok &= jobs[i].ok;
	return ok;
}
