/* test_report_memory.c - alloc/free matching against a reference model (randomised),
 * trend decimation, leak score, footprint bounds. Uses the internal tables. */
#include "test_report_util.h"

#include "report_internal.h"

#define POOL  4096
#define NLINE 7

typedef struct model {
    int live[POOL];
    int line[POOL];
    uint64_t bytes[POOL];
    int64_t net[NLINE];
    uint64_t unmatched;
} model_t;

static unsigned long long rng = 88172645463325252ULL;
static uint64_t next(void)
{
    return check_rand64(&rng);
}

int main(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    static model_t md;
    scry_frame_t lines[NLINE][1];
    char file[32];
    for (int i = 0; i < NLINE; i++) {
        snprintf(file, sizeof file, "m%d.py", i);
        lines[i][0] = PY("f", file, i + 1);
    }
    for (int op = 0; op < 300000; op++) {
        int a = (int)(next() % POOL);
        uint64_t addr = 0x7f0000000000ULL + (uint64_t)a * 48; /* clustered addresses */
        if (next() % 2) {
            int l = (int)(next() % NLINE);
            uint64_t bytes = 1 + next() % 100000;
            add_mem(p, lines[l], 1, SCRY_METRIC_ALLOC, 0, bytes, addr, (uint64_t)op * 1000);
            md.live[a] = 1, md.line[a] = l, md.bytes[a] = bytes;
            md.net[l] += (int64_t)bytes;
        } else {
            int l = (int)(next() % NLINE);
            add_mem(p, lines[l], 1, SCRY_METRIC_FREE, 0, 0, addr, (uint64_t)op * 1000);
            if (md.live[a]) {
                md.live[a] = 0;
                md.net[md.line[a]] -= (int64_t)md.bytes[a];
            } else {
                md.unmatched++;
            }
        }
    }
    /* re-allocating a live address replaces it: the model keeps the old bytes in the net,
     * so compare nets only through what both count: recompute from the model's view */
    int64_t total = 0;
    for (uint32_t i = 0; i < p->nlines; i++) {
        const report__line_t *l = &p->lines[i];
        int k = l->line - 1;
        CHECK(k >= 0 && k < NLINE);
        if (k >= 0 && k < NLINE)
            CHECK(l->net == md.net[k]);
        CHECK(l->ntrend <= REPORT__TREND_MAX);
        CHECK(l->peak >= l->net);
        total += l->net;
    }
    CHECK(p->mem_net == total);
    CHECK(p->unmatched_frees == md.unmatched);
    CHECK(p->nfoot <= REPORT__FOOT_MAX && p->nfoot > 0);
    for (uint32_t i = 1; i < p->nfoot; i++)
        CHECK(p->foot[i - 1].t_s <= p->foot[i].t_s);
    uint32_t live = 0;
    for (int a = 0; a < POOL; a++)
        live += (uint32_t)md.live[a];
    CHECK(p->amap_count == live);
    report_profile_free(p);

    /* trend: the net at the end of each 100 ms slice; past 27 slices every line's slices
     * double in width (slice i keeps old slice 2i+1) */
    p = report_profile_new(&m);
    scry_frame_t tf[] = {PY("grow", "trend.py", 4)};
    for (int i = 0; i < 27; i++)
        add_mem(p, tf, 1, SCRY_METRIC_ALLOC, 0, 1u << 20, 0x1000 + (uint64_t)i * 0x100,
                1000000000ull + (uint64_t)i * 100000000ull);
    const report__line_t *tl = p->nlines ? &p->lines[0] : NULL;
    CHECK(tl && tl->ntrend == 27 && tl->trend[0] == 1.0f && tl->trend[26] == 27.0f);
    add_mem(p, tf, 1, SCRY_METRIC_ALLOC, 0, 1u << 20, 0x9000, 1000000000ull + 27 * 100000000ull);
    tl = &p->lines[0];
    CHECK(tl->ntrend == 14 && p->trend_bucket_ns == 200000000ull);
    for (int i = 0; i < 13; i++)
        CHECK(tl->trend[i] == (float)(2 * i + 2));
    CHECK(tl->trend[13] == 28.0f);
    /* a gap carries the net forward */
    add_mem(p, tf, 1, SCRY_METRIC_ALLOC, 0, 1u << 20, 0xa000, 1000000000ull + 33 * 100000000ull);
    tl = &p->lines[0];
    CHECK(tl->ntrend == 17 && tl->trend[15] == 28.0f && tl->trend[16] == 29.0f);
    report_profile_free(p);

    /* leak score */
    report__line_t k = {0};
    int growing;
    CHECK(report__leak_score(&k, &growing) == 0.0 && !growing);
    k.allocs = 20, k.net = 100, k.peak = 100;
    CHECK(report__leak_score(&k, &growing) > 0.95 && growing);
    k.frees = 10, k.net = 50;
    CHECK(report__leak_score(&k, &growing) < 0.6 && !growing);

    /* JSON string helper */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(report_json_fputs(f, "a\"b\\c\n\x01\xc3\xa9\xff") == 0);
    fclose(f);
    CHECK(buf && strcmp(buf, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\xef\xbf\xbd\"") == 0);
    free(buf);
    return test_done("test_report_memory");
}
