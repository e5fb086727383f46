/*
 * clock.h - milliseconds on the monotonic clock, for deadlines, timeouts and
 * ages: what every part of the hub that waits or measures uses, so that none
 * of them jumps when the wall clock is set.
 */
#ifndef YURTHUB_UTIL_CLOCK_H
#define YURTHUB_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now, in milliseconds of CLOCK_MONOTONIC. */
int64_t clock_now_ms(void);
/* Milliseconds from t0 (a CLOCK_MONOTONIC time) to now; negative when t0 is
 * ahead (a deadline not reached). */
int64_t clock_ms_since(const struct timespec *t0);

#endif
