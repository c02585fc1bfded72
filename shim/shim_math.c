/* shim_math.c - random strides and the unbiased weight of a sample, without libm.
 *
 * Sampling model: the bytes a thread allocates form one long line; sample points are a
 * Poisson process on it with mean spacing MEAN. A block of SIZE bytes contains at least
 * one point with probability p = 1 - exp(-SIZE/MEAN), independently of the past (the
 * exponential stride is memoryless), so reporting a sampled block with weight SIZE/p is
 * an unbiased estimate of the bytes allocated: E[weight * 1{sampled}] = SIZE.
 */
#include "shim_internal.h"

#include <string.h>

#define SHIM_LN2 0.69314718055994530942

uint64_t shim__rand64(uint64_t *state)
{
    uint64_t x = *state;
    if (x == 0)
        x = 0x2545f4914f6cdd1dull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

double shim__log(double x)
{
    if (!(x > 0))
        return -1e300;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff);
    if (e == 0) {                /* subnormal: scale up */
        x *= 4503599627370496.0; /* 2^52 */
        memcpy(&bits, &x, sizeof bits);
        e = (int)((bits >> 52) & 0x7ff) - 52;
    }
    e -= 1023;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1,2) */
    double m;
    memcpy(&m, &bits, sizeof m);
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e += 1;
    }
    /* ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.1716 */
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double t =
        s2 * (1.0 / 3 +
              s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 * (1.0 / 11 + s2 * (1.0 / 13))))));
    return e * SHIM_LN2 + 2.0 * s * (1.0 + t);
}

double shim__expneg(double x)
{
    if (!(x >= 0))
        return 1.0;
    if (x > 700)
        return 0.0;
    /* exp(-x) = 2^-k * exp(-r), x = k ln2 + r, 0 <= r < ln2 */
    int k = (int)(x / SHIM_LN2);
    double r = x - k * SHIM_LN2;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 20; i++) {
        term *= -r / i;
        sum += term;
    }
    uint64_t bits = (uint64_t)(1023 - k) << 52; /* k <= 1010: a normal number */
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return sum * scale;
}

int64_t shim__stride(uint64_t *state, uint64_t mean)
{
    /* U uniform in (0,1]: 53 random bits, +1 so that it is never 0 */
    double u = ((double)(shim__rand64(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double s = -shim__log(u) * (double)mean;
    if (!(s >= 1.0))
        return 1;
    if (s > 1125899906842624.0) /* 2^50 */
        return (int64_t)1 << 50;
    return (int64_t)s;
}

uint64_t shim__weight(uint64_t size, uint64_t mean)
{
    if (mean == 0)
        return size ? size : 1;
    if (size == 0)
        return mean;
    double x = (double)size / (double)mean;
    double p;
    if (x < 1e-4)
        p = x * (1.0 - x * (0.5 - x / 6.0));
    else if (x > 40)
        return size;
    else
        p = 1.0 - shim__expneg(x);
    double w = (double)size / p;
    if (w > 1.8e19)
        return UINT64_MAX;
    uint64_t wi = (uint64_t)(w + 0.5);
    return wi < size ? size : wi;
}
