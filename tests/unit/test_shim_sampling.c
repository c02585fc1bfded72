/* test_shim_sampling.c - the shim's sampling maths (strides, weights, libm-free log/exp)
 * and its live-block set, outside any process hooks. */
#include "shim_internal.h"

#include <math.h>
#include <stdio.h>

#include "check.h"

static void test_math(void)
{
    for (double x = 1e-300; x < 1e300; x *= 1.7) {
        double want = log(x);
        CHECK(fabs(shim__log(x) - want) <= 1e-12 * fmax(1.0, fabs(want)));
    }
    CHECK(shim__log(4.9e-324) < -744 && shim__log(4.9e-324) > -745); /* subnormal */
    for (double x = 0; x < 750; x += 0.013) {
        double want = exp(-x);
        CHECK(fabs(shim__expneg(x) - want) <= 1e-12 * want + 1e-300);
    }
    CHECK(shim__expneg(1e9) == 0.0);
}

static void test_strides(void)
{
    uint64_t st = 12345;
    for (uint64_t mean = 1000; mean <= 10000000; mean *= 10) {
        double sum = 0, sum2 = 0;
        int n = 400000;
        for (int i = 0; i < n; i++) {
            int64_t s = shim__stride(&st, mean);
            CHECK(s >= 1);
            sum += (double)s;
            sum2 += (double)s * (double)s;
        }
        double m = sum / n, sd = sqrt(sum2 / n - m * m);
        CHECK(fabs(m / (double)mean - 1) < 0.01);
        CHECK(fabs(sd / (double)mean - 1) < 0.02); /* exponential: sd == mean */
    }
    CHECK(shim__stride(&st, (uint64_t)1 << 62) <= (int64_t)1 << 50);
}

static void test_weights(void)
{
    CHECK(shim__weight(0, 1000) == 1000);
    CHECK(shim__weight(1, 1000000) >= 1000000 && shim__weight(1, 1000000) <= 1000001);
    CHECK(shim__weight(1000000000, 1000) == 1000000000);
    CHECK(shim__weight(5, 0) == 5);
    for (uint64_t s = 1; s < (1ull << 40); s = s * 3 + 1) {
        uint64_t w = shim__weight(s, 65536);
        double want = (double)s / -expm1(-(double)s / 65536.0);
        CHECK(w >= s && fabs((double)w - want) <= 1e-9 * want + 1);
    }
}

/* The estimator over a simulated allocation stream, exactly as the hooks run it. */
static void test_unbiased(void)
{
    const uint64_t mean = 512 * 1024;
    uint64_t sizes[] = {16, 433, 1033, 5000, 100033, 524288, 4194337, 33554432};
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        uint64_t rng = 99 + k, n = 0;
        int64_t left = shim__stride(&rng, mean);
        double est = 0, truth = 0;
        while (truth < 10e9) {
            uint64_t s = sizes[k];
            truth += (double)s;
            n++;
            if ((left -= (int64_t)s) < 0) {
                left = shim__stride(&rng, mean);
                est += (double)shim__weight(s, mean);
            }
        }
        printf("size %llu: estimate/truth %.4f over %llu allocations\n",
               (unsigned long long)sizes[k], est / truth, (unsigned long long)n);
        CHECK(fabs(est / truth - 1) < 0.03);
    }
}

static void test_live(void)
{
    shim__live_reset();
    uint64_t size, weight;
    uint8_t origin;
    CHECK(!shim__live_maybe((void *)0x7f0000001000));
    CHECK(shim__live_insert(0x7f0000001000, 10, 100, 1) == 0);
    CHECK(shim__live_maybe((void *)0x7f0000001000));
    CHECK(shim__live_remove(0x7f0000001010, &size, &weight, &origin) == -1);
    CHECK(shim__live_remove(0x7f0000001000, &size, &weight, &origin) == 0);
    CHECK(size == 10 && weight == 100 && origin == 1);
    CHECK(!shim__live_maybe((void *)0x7f0000001000));
    CHECK(shim__live_remove(0x7f0000001000, &size, &weight, &origin) == -1);
    CHECK(shim__live_insert(0, 1, 1, 0) == -1 && shim__live_insert(1, 1, 1, 0) == -1);
    /* fill to the bound: inserts fail cleanly, every tracked block comes back */
    uint64_t ok = 0;
    for (uint64_t i = 0; i < 200000; i++)
        ok += shim__live_insert(0x10000000 + i * 48, i, i + 1, 0) == 0;
    CHECK(ok > 50000 && ok < 200000 && shim__live_count() == ok);
    uint64_t back = 0, fp = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        if (shim__live_remove(0x10000000 + i * 48, &size, &weight, &origin) == 0) {
            CHECK(size == i && weight == i + 1);
            back++;
        }
    }
    CHECK(back == ok && shim__live_count() == 0);
    for (uint64_t i = 0; i < 100000; i++)
        fp += shim__live_maybe((void *)(0x20000000 + i * 64));
    CHECK_INT(fp, ==, 0); /* counters went back to 0 */
    /* churn: tombstones must not lose entries */
    for (int round = 0; round < 20; round++) {
        for (uint64_t i = 0; i < 5000; i++)
            CHECK(shim__live_insert(0x30000000 + (uint64_t)round * 0x1000000 + i * 32, 1, 2, 0) ==
                  0);
        for (uint64_t i = 0; i < 5000; i++)
            CHECK(shim__live_remove(0x30000000 + (uint64_t)round * 0x1000000 + i * 32, &size,
                                    &weight, &origin) == 0);
    }
    CHECK(shim__live_count() == 0);
}

int main(void)
{
    test_math();
    test_strides();
    test_weights();
    test_unbiased();
    test_live();
    return check_summary("test_shim_sampling");
}
