/* Wall-clock timing shared by `tbc run --runs` and bench/tbc-bench. */
#ifndef TBC_TOOLS_TIMING_H
#define TBC_TOOLS_TIMING_H

#include <time.h>

static inline double now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* qsort order of doubles, for medians. */
static inline int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

#endif
