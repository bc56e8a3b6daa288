/* Seconds on the monotonic clock: what the compiler's --stats timings,
 * the pass pipeline and the precision budget measure with. */
#ifndef TBC_IR_CLOCK_H
#define TBC_IR_CLOCK_H

#include <time.h>

static inline double tbc_seconds_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
