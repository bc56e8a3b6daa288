/* The thread pool behind tbc_abi_host.parallel_for.
 *
 * threads - 1 workers wait for work; a parallel loop publishes it (a new
 * generation), hands out chunks of at least `grain` iterations (the calling
 * thread takes chunks too), and returns when every worker has checked in.
 *
 * The iterations are cut into one contiguous range per thread, each with its
 * own counter: thread i takes the chunks of range i first, front to back,
 * then what is left of the others' (i + 1, i + 2, ..), so an uneven or
 * delayed thread is still covered.  The same iterations of consecutive
 * loops so land on the same thread as long as nothing is stolen: a kernel
 * reading what the one before it wrote over the same outer dims (a pack
 * after a plane copy, elementwise chains) finds it in its own core's cache.
 * One shared counter had handed chunks out alternately, so about half of
 * every intermediate crossed between cores, and a line written by one core
 * and rewritten by the other moved each time (docs/performance.md, the
 * nineteenth session).  Waiting spins briefly before it sleeps on a
 * condition variable, on both sides: a model runs its parallel kernels back
 * to back, and waking a sleeping thread costs tens of microseconds (more in
 * a virtual machine), as much as a small kernel.  One loop runs on the pool at a time: a loop
 * started while another runs (a second session on another thread, or a body
 * that itself calls parallel_for) runs inline on its own thread instead of
 * waiting, so the pool can never deadlock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

typedef void (*body_fn)(void *, int64_t, int64_t);

struct tbcrt_pool {
	pthread_mutex_t submit; /* held for a whole loop, and while resizing */
	pthread_mutex_t mu;     /* guards sleeping on wake / done */
	pthread_cond_t wake, done;
	uint32_t n_workers;
	pthread_t *workers;
	/* A loop's fields are written before its generation is released, and
	 * read after a worker acquires it. */
	_Atomic uint64_t generation;
	uint64_t base_generation; /* generation when the workers started */
	_Atomic bool stop;
	_Atomic uint32_t pending; /* workers yet to finish the current loop */
	uint32_t sleeping;        /* workers waiting on wake (under mu) */
	bool waiting;             /* the caller waits on done (under mu) */
	body_fn body;
	void *closure;
	int64_t chunk;
	struct pool_range *ranges; /* n_workers + 1: thread i's iterations, in ranges_mem */
	void *ranges_mem;
	struct worker_arg *args;   /* n_workers */
};

/* Thread i's iterations [next, end), taken a chunk at a time; a cache line
 * each, so that the threads' counters do not share one. */
typedef struct pool_range {
	_Alignas(64) _Atomic int64_t next;
	int64_t end;
} pool_range;

typedef struct worker_arg {
	tbcrt_pool *p;
	uint32_t id; /* 1 .. n_workers: the caller is 0 */
} worker_arg;

/* Spins of a waiting thread before it sleeps: some tens of microseconds. */
#define SPINS 4000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static _Thread_local bool in_loop;

uint32_t tbcrt__online_cpus(void) {
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1) return 1;
	if (n > TBCRT_MAX_THREADS) return TBCRT_MAX_THREADS;
	return (uint32_t)n;
}

/* Thread id's own range, then the others' in turn. */
static void take_chunks(tbcrt_pool *p, uint32_t id) {
	uint32_t t = p->n_workers + 1;
	for (uint32_t j = 0; j < t; j++) {
		pool_range *r = &p->ranges[(id + j) % t];
		for (;;) {
			int64_t begin = atomic_fetch_add_explicit(&r->next, p->chunk, memory_order_relaxed);
			if (begin >= r->end) break;
			int64_t end = r->end - begin > p->chunk ? begin + p->chunk : r->end;
			p->body(p->closure, begin, end);
		}
	}
}

static void *worker_main(void *arg) {
	tbcrt_pool *p = ((worker_arg *)arg)->p;
	uint32_t id = ((worker_arg *)arg)->id;
	in_loop = true; /* a body's nested parallel_for runs inline */
	uint64_t seen = p->base_generation;
	for (;;) {
		for (int i = 0; i < SPINS && !atomic_load_explicit(&p->stop, memory_order_relaxed) &&
				atomic_load_explicit(&p->generation, memory_order_acquire) == seen;
		     i++)
			cpu_relax();
		if (atomic_load_explicit(&p->generation, memory_order_acquire) == seen) {
			pthread_mutex_lock(&p->mu);
			p->sleeping++;
			while (!atomic_load(&p->stop) && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
			p->sleeping--;
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->stop)) break;
		seen = atomic_load_explicit(&p->generation, memory_order_acquire);
		take_chunks(p, id);
		if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
			pthread_mutex_lock(&p->mu);
			if (p->waiting) pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->mu);
		}
	}
	return NULL;
}

static void stop_workers(const tbcrt_context *c, tbcrt_pool *p) {
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	for (uint32_t i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
	tbcrt__free(c, p->workers);
	tbcrt__free(c, p->args);
	tbcrt__free(c, p->ranges_mem);
	p->workers = NULL;
	p->args = NULL;
	p->ranges = NULL, p->ranges_mem = NULL;
	p->n_workers = 0;
	atomic_store(&p->stop, false);
}

static tbcrt_status start_workers(const tbcrt_context *c, tbcrt_pool *p, uint32_t threads) {
	if (threads == 0) threads = tbcrt__online_cpus();
	if (threads > TBCRT_MAX_THREADS)
		return tbcrt__err(TBCRT_ERR_LIMIT, "thread count %u exceeds the limit of %u", threads, TBCRT_MAX_THREADS);
	uint32_t want = threads - 1;
	if (want == 0) return tbcrt__ok();
	p->base_generation = atomic_load(&p->generation); /* no loop runs: start_workers holds submit or is in create */
	p->workers = tbcrt__calloc(c, want, sizeof *p->workers);
	p->args = tbcrt__calloc(c, want, sizeof *p->args);
	p->ranges_mem = tbcrt__calloc(c, (size_t)threads + 1, sizeof *p->ranges);
	if (!p->workers || !p->args || !p->ranges_mem) {
		tbcrt__free(c, p->workers);
		tbcrt__free(c, p->args);
		tbcrt__free(c, p->ranges_mem);
		p->workers = NULL, p->args = NULL, p->ranges_mem = NULL;
		return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for %u worker threads", want);
	}
	p->ranges = (pool_range *)(((uintptr_t)p->ranges_mem + 63) & ~(uintptr_t)63); /* one spare: room to align */
	for (uint32_t i = 0; i < want; i++) {
		p->args[i] = (worker_arg){p, i + 1};
		int rc = pthread_create(&p->workers[i], NULL, worker_main, &p->args[i]);
		if (rc != 0) {
			stop_workers(c, p);
			return tbcrt__err(rc == EAGAIN ? TBCRT_ERR_LIMIT : TBCRT_ERR_NO_MEMORY,
					  "cannot start worker thread %u of %u: %s", i + 1, want, strerror(rc));
		}
		p->n_workers = i + 1;
	}
	return tbcrt__ok();
}

tbcrt_status tbcrt__pool_create(const tbcrt_context *c, uint32_t threads, tbcrt_pool **out_pool) {
	*out_pool = NULL;
	tbcrt_pool *p = tbcrt__calloc(c, 1, sizeof *p);
	if (!p) return tbcrt__err(TBCRT_ERR_NO_MEMORY, "out of memory for the thread pool");
	pthread_mutex_init(&p->submit, NULL);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	tbcrt_status s = start_workers(c, p, threads);
	if (s.code != TBCRT_OK) {
		tbcrt__pool_destroy(c, p);
		return s;
	}
	*out_pool = p;
	return s;
}

void tbcrt__pool_destroy(const tbcrt_context *c, tbcrt_pool *p) {
	if (!p) return;
	stop_workers(c, p);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->submit);
	tbcrt__free(c, p);
}

tbcrt_status tbcrt__pool_resize(const tbcrt_context *c, tbcrt_pool *p, uint32_t threads) {
	if (threads > TBCRT_MAX_THREADS)
		return tbcrt__err(TBCRT_ERR_LIMIT, "thread count %u exceeds the limit of %u", threads, TBCRT_MAX_THREADS);
	if (in_loop) return tbcrt__err(TBCRT_ERR_INVALID_ARGUMENT, "the thread count cannot change inside a parallel loop");
	pthread_mutex_lock(&p->submit);
	stop_workers(c, p);
	tbcrt_status s = start_workers(c, p, threads);
	pthread_mutex_unlock(&p->submit);
	return s;
}

uint32_t tbcrt__pool_threads(const tbcrt_pool *p) {
	return p->n_workers + 1;
}

void tbcrt__pool_parallel_for(tbcrt_pool *p, body_fn body, void *closure, int64_t n, int64_t grain) {
	if (n <= 0) return;
	if (grain < 1) grain = 1;
	if (in_loop || n <= grain || pthread_mutex_trylock(&p->submit) != 0) {
		body(closure, 0, n);
		return;
	}
	if (p->n_workers == 0) {
		pthread_mutex_unlock(&p->submit);
		body(closure, 0, n);
		return;
	}
	/* About four chunks per thread balances uneven chunks without making
	 * the counter hot. */
	int64_t parts = (int64_t)(p->n_workers + 1) * 4;
	int64_t chunk = n / parts + (n % parts != 0);
	if (chunk < grain) chunk = grain;
	p->body = body;
	p->closure = closure;
	p->chunk = chunk;
	/* whole chunks a range: every chunk but the loop's last is `chunk` long
	 * and starts at a multiple of it, as from one counter */
	uint32_t t = p->n_workers + 1;
	int64_t chunks = n / chunk + (n % chunk != 0);
	for (uint32_t i = 0; i < t; i++) {
		int64_t first = chunks / t * i + chunks % t * i / t, last = chunks / t * (i + 1) + chunks % t * (i + 1) / t;
		atomic_store_explicit(&p->ranges[i].next, first * chunk, memory_order_relaxed);
		p->ranges[i].end = last * chunk < n ? last * chunk : n;
	}
	atomic_store_explicit(&p->pending, p->n_workers, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_release); /* publishes the fields above */
	/* Workers that went to sleep need the signal; one about to sleep checks
	 * the generation under mu first, so taking mu here loses no wakeup. */
	pthread_mutex_lock(&p->mu);
	if (p->sleeping) pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);

	in_loop = true;
	take_chunks(p, 0);
	in_loop = false;

	for (int i = 0; i < SPINS && atomic_load_explicit(&p->pending, memory_order_acquire) != 0; i++) cpu_relax();
	if (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) {
		pthread_mutex_lock(&p->mu);
		p->waiting = true;
		while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->done, &p->mu);
		p->waiting = false;
		pthread_mutex_unlock(&p->mu);
	}
	pthread_mutex_unlock(&p->submit);
}
