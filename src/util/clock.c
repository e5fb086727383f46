/*
 * clock.c - the monotonic milliseconds of clock.h.
 */
#include "util/clock.h"

int64_t clock_now_ms(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
		return 0; /* cannot fail with a valid clock id */
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int64_t clock_ms_since(const struct timespec *t0)
{
	struct timespec now;
	if (clock_gettime(CLOCK_MONOTONIC, &now) < 0)
		return 0;
	return (int64_t)(now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}
