/* The machine's streaming memory bandwidth, the yardstick for memory-bound
 * kernels (matrix-vector products: bench/matvec.py).  Two kernels over
 * arrays far larger than the caches, split evenly over N threads:
 *
 *   copy: b[i] = a[i]        (GB/s counts the bytes read and written)
 *   read: s += a[i]          (GB/s counts the bytes read; the sum is kept)
 *
 * Each is timed RUNS times after one warm-up; the best run is reported, as
 * STREAM does.
 *
 *   usage: tbc-stream [--threads N] [--mb MB] [--runs N]
 *   prints: copy GBPS read GBPS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
	float *a, *b;
	size_t lo, hi;
	int kind; /* 0 copy, 1 read */
	double sum;
} job;

static void *work(void *p) {
	job *j = p;
	if (j->kind == 0) {
		memcpy(j->b + j->lo, j->a + j->lo, (j->hi - j->lo) * sizeof(float));
	} else { /* four independent vector sums: the loads, not the adds, bound it */
		typedef float v16 __attribute__((vector_size(64)));
		v16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
		size_t i = j->lo;
		for (; i + 64 <= j->hi; i += 64) {
			v16 x0, x1, x2, x3;
			memcpy(&x0, j->a + i, 64), memcpy(&x1, j->a + i + 16, 64);
			memcpy(&x2, j->a + i + 32, 64), memcpy(&x3, j->a + i + 48, 64);
			s0 += x0, s1 += x1, s2 += x2, s3 += x3;
		}
		double t = 0;
		for (; i < j->hi; i++) t += j->a[i];
		v16 s = s0 + s1 + s2 + s3;
		for (int k = 0; k < 16; k++) t += s[k];
		j->sum = t;
	}
	return NULL;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The best of runs timings of kind over n floats, in seconds. */
static double best(float *a, float *b, size_t n, int threads, int kind, int runs, double *sink) {
	pthread_t tid[64];
	job jobs[64];
	double t_best = 1e30;
	for (int r = 0; r <= runs; r++) {
		double t0 = now();
		for (int t = 0; t < threads; t++) {
			jobs[t] = (job){a, b, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads, kind, 0};
			if (t) pthread_create(&tid[t], NULL, work, &jobs[t]);
		}
		work(&jobs[0]);
		for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
		double dt = now() - t0;
		for (int t = 0; t < threads; t++) *sink += jobs[t].sum;
		if (r > 0 && dt < t_best) t_best = dt; /* run 0 warms up */
	}
	return t_best;
}

int main(int argc, char **argv) {
	int threads = 1, runs = 10;
	size_t mb = 512;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = (size_t)atol(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: tbc-stream [--threads N] [--mb MB] [--runs N]\n");
			return 2;
		}
	}
	if (threads < 1 || threads > 64 || runs < 1 || mb < 1) {
		fprintf(stderr, "tbc-stream: threads 1..64, runs and mb at least 1\n");
		return 2;
	}
	size_t n = mb * 1024 * 1024 / sizeof(float);
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	if (!a || !b) {
		fprintf(stderr, "tbc-stream: out of memory for 2 x %zu MB\n", mb);
		return 1;
	}
	for (size_t i = 0; i < n; i++) a[i] = (float)(i % 7), b[i] = 0; /* touch every page */
	double sink = 0;
	double tc = best(a, b, n, threads, 0, runs, &sink), tr = best(a, b, n, threads, 1, runs, &sink);
	double bytes = (double)n * sizeof(float);
	printf("copy %.2f read %.2f\n", 2 * bytes / tc / 1e9, bytes / tr / 1e9);
	if (sink == -1) printf("%g\n", sink); /* keep the sums */
	free(a);
	free(b);
	return 0;
}
