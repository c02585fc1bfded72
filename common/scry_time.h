/* scry_time.h - the one monotonic clock of scry (header-only, so the shim can use it
 * without linking scry_common). */
#ifndef SCRY_TIME_H
#define SCRY_TIME_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC. Never fails (the clock exists on every Linux). */
static inline uint64_t scry_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
