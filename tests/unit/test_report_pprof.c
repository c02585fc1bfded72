/* test_report_pprof.c - the pprof writer, decoded back with protobuf-c after gunzip. */
#include <stdint.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "test_report_util.h"

typedef Perftools__Profiles__Profile pb_t;

/* Gunzips the report P in pprof format and unpacks it; NULL on any failure. */
static pb_t *decode(report_profile_t *p, size_t *gz_len, char **raw)
{
    int rc = -1;
    FILE *f;
    char *gz = NULL;
    size_t len = 0;
    if (!(f = open_memstream(&gz, &len)))
        return NULL;
    rc = report_write(p, REPORT_FORMAT_PPROF, f, NULL);
    fclose(f);
    CHECK_INT(rc, ==, 0);
    CHECK(len > 18 && (unsigned char)gz[0] == 0x1f && (unsigned char)gz[1] == 0x8b);
    if (gz_len)
        *gz_len = len;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    z_stream z = {0};
    if (!buf || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        free(buf);
        free(gz);
        return NULL;
    }
    z.next_in = (unsigned char *)gz;
    z.avail_in = (uInt)len;
    int zr;
    do {
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        z.next_out = buf + n;
        z.avail_out = (uInt)(cap - n);
        zr = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
    } while (zr == Z_OK);
    inflateEnd(&z);
    CHECK_INT(zr, ==, Z_STREAM_END);
    pb_t *pb = zr == Z_STREAM_END ? perftools__profiles__profile__unpack(NULL, n, buf) : NULL;
    CHECK(pb != NULL);
    free(buf);
    if (raw)
        *raw = gz;
    else
        free(gz);
    return pb;
}

static const char *str(const pb_t *pb, int64_t i)
{
    if (i < 0 || (size_t)i >= pb->n_string_table)
        return "<bad index>";
    return pb->string_table[i];
}

static const Perftools__Profiles__Location *loc(const pb_t *pb, uint64_t id)
{
    for (size_t i = 0; i < pb->n_location; i++)
        if (pb->location[i]->id == id)
            return pb->location[i];
    return NULL;
}

static const Perftools__Profiles__Function *func(const pb_t *pb, uint64_t id)
{
    for (size_t i = 0; i < pb->n_function; i++)
        if (pb->function[i]->id == id)
            return pb->function[i];
    return NULL;
}

static const char *label_str(const pb_t *pb, const Perftools__Profiles__Sample *s, const char *k)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (!strcmp(str(pb, s->label[i]->key), k) && s->label[i]->str)
            return str(pb, s->label[i]->str);
    return NULL;
}

static int64_t label_num(const pb_t *pb, const Perftools__Profiles__Sample *s, const char *k)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (!strcmp(str(pb, s->label[i]->key), k))
            return s->label[i]->num;
    return -1;
}

static int type_index(const pb_t *pb, const char *type)
{
    for (size_t i = 0; i < pb->n_sample_type; i++)
        if (!strcmp(str(pb, pb->sample_type[i]->type), type))
            return (int)i;
    return -1;
}

static int64_t sum(const pb_t *pb, int t)
{
    int64_t s = 0;
    for (size_t i = 0; t >= 0 && i < pb->n_sample; i++)
        if ((size_t)t < pb->sample[i]->n_value)
            s += pb->sample[i]->value[t];
    return s;
}

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80             ? 0
                : (*p & 0xE0) == 0xC0 ? 1
                : (*p & 0xF0) == 0xE0 ? 2
                : (*p & 0xF8) == 0xF0 ? 3
                                      : -1;
        if (n < 0 || (n == 1 && *p < 0xC2))
            return 0;
        for (int i = 1; i <= n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n + 1;
    }
    return 1;
}

static void test_names(void)
{
    CHECK(report_format_parse("pprof") == REPORT_FORMAT_PPROF);
    CHECK(report_format_parse("pb") == REPORT_FORMAT_PPROF);
    CHECK(report_format_parse("html") == REPORT_FORMAT_HTML);
    CHECK(REPORT_FORMAT_HTML == 5 && REPORT_FORMAT_PPROF == 6);
    CHECK(!strcmp(report_format_name(REPORT_FORMAT_PPROF), "pprof"));
    CHECK(!strcmp(report_format_name(REPORT_FORMAT_HTML), "html"));
}

static void test_cpu_and_memory(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t a[] = {PY("compute", "/srv/app.py", 12), PY("main", "/srv/app.py", 30),
                        PY("<module>", "/srv/app.py", 40)};
    scry_frame_t b[] = {NAT("cblas_ddot", "libopenblas.so.0"), PY("compute", "/srv/app.py", 14),
                        PY("main", "/srv/app.py", 30), PY("<module>", "/srv/app.py", 40)};
    scry_frame_t c[] = {PY("bad\xff\xfename", "/srv/app.py", 50)};
    uint64_t t = 1000;
    add_cpu_10ms(p, a, 3, SCRY_CLASS_PYTHON, 1, 6, &t);
    add_cpu_10ms(p, b, 4, SCRY_CLASS_NATIVE, 1, 3, &t);
    add_cpu(p, a, 3, SCRY_CLASS_SYSTEM, 20000000, 2, t += 10000000);
    add_cpu(p, c, 1, SCRY_CLASS_PYTHON, 5000000, 2, t += 10000000);
    /* memory: 3 MB allocated on line 12, 1 MB of it freed, 2 MB copied on line 14 */
    for (int i = 0; i < 3; i++)
        add_mem(p, a, 3, SCRY_METRIC_ALLOC, 0, 1 << 20, 0x10000 + 0x1000 * (uint64_t)i, t += 1000);
    add_mem(p, b + 1, 3, SCRY_METRIC_FREE, 0, 1 << 20, 0x10000, t += 1000);
    add_mem(p, b + 1, 3, SCRY_METRIC_COPY, 1, 2 << 20, 0, t += 1000);
    report_end_t end = {.duration_s = 1.5, .gil_fraction = -1};
    report_profile_set_end(p, &end);

    char *raw1 = NULL, *raw2 = NULL;
    size_t len1 = 0, len2 = 0;
    pb_t *pb = decode(p, &len1, &raw1);
    pb_t *pb2 = decode(p, &len2, &raw2);
    CHECK(len1 == len2 && raw1 && raw2 && memcmp(raw1, raw2, len1) == 0); /* deterministic */
    free(raw1);
    free(raw2);
    perftools__profiles__profile__free_unpacked(pb2, NULL);
    if (!pb) {
        report_profile_free(p);
        return;
    }
    /* string table */
    CHECK(pb->n_string_table > 0 && !strcmp(pb->string_table[0], ""));
    for (size_t i = 0; i < pb->n_string_table; i++)
        CHECK(valid_utf8(pb->string_table[i]));
    for (size_t i = 1; i < pb->n_string_table; i++) /* no duplicates */
        for (size_t j = i + 1; j < pb->n_string_table; j++)
            CHECK(strcmp(pb->string_table[i], pb->string_table[j]) != 0);
    /* sample types */
    CHECK_INT(pb->n_sample_type, ==, 5);
    static const char *const types[][2] = {{"samples", "count"},
                                           {"cpu", "nanoseconds"},
                                           {"alloc_space", "bytes"},
                                           {"copy_space", "bytes"},
                                           {"inuse_space", "bytes"}};
    for (size_t i = 0; i < 5 && i < pb->n_sample_type; i++) {
        CHECK(!strcmp(str(pb, pb->sample_type[i]->type), types[i][0]));
        CHECK(!strcmp(str(pb, pb->sample_type[i]->unit), types[i][1]));
    }
    CHECK(!strcmp(str(pb, pb->default_sample_type), "cpu"));
    CHECK(pb->period_type && !strcmp(str(pb, pb->period_type->type), "cpu") &&
          !strcmp(str(pb, pb->period_type->unit), "nanoseconds"));
    CHECK_INT(pb->period, ==, 10000000); /* 100 Hz */
    CHECK(pb->time_nanos == m.start_unix_ns);
    CHECK_INT(pb->duration_nanos, ==, 1500000000);
    CHECK(pb->n_comment >= 1 && strstr(str(pb, pb->comment[0]), "pid 4242"));
    /* totals */
    CHECK(sum(pb, type_index(pb, "samples")) == 11);
    CHECK(sum(pb, type_index(pb, "cpu")) == 6 * 10000000 + 3 * 10000000 + 20000000 + 5000000);
    CHECK(sum(pb, type_index(pb, "alloc_space")) == 3 << 20);
    CHECK(sum(pb, type_index(pb, "copy_space")) == 2 << 20);
    CHECK(sum(pb, type_index(pb, "inuse_space")) == 2 << 20);
    /* every sample: one value per type, resolvable locations, leaf first, labels */
    int seen_native = 0, seen_thread2 = 0;
    for (size_t i = 0; i < pb->n_sample; i++) {
        const Perftools__Profiles__Sample *s = pb->sample[i];
        CHECK(s->n_value == pb->n_sample_type);
        CHECK(s->n_location_id >= 1);
        for (size_t k = 0; k < s->n_location_id; k++) {
            const Perftools__Profiles__Location *l = loc(pb, s->location_id[k]);
            CHECK(l && l->n_line == 1 && func(pb, l->line[0]->function_id));
        }
        const Perftools__Profiles__Location *leaf = loc(pb, s->location_id[0]);
        const Perftools__Profiles__Location *root = loc(pb, s->location_id[s->n_location_id - 1]);
        if (!leaf || !root)
            continue;
        const char *leaf_fn = str(pb, func(pb, leaf->line[0]->function_id)->name);
        if (s->n_location_id > 1)
            CHECK(!strcmp(str(pb, func(pb, root->line[0]->function_id)->name), "<module>"));
        const char *cls = label_str(pb, s, "class");
        CHECK(cls != NULL);
        CHECK(label_num(pb, s, "thread_id") == 1 || label_num(pb, s, "thread_id") == 2);
        if (!strcmp(leaf_fn, "cblas_ddot")) {
            seen_native = 1;
            CHECK(!strcmp(cls, "native"));
            CHECK(s->value[0] == 3 && s->value[1] == 30000000);
            const Perftools__Profiles__Function *fn = func(pb, leaf->line[0]->function_id);
            CHECK(!strcmp(str(pb, fn->filename), "libopenblas.so.0"));
            CHECK(!strcmp(str(pb, fn->system_name), "cblas_ddot"));
            CHECK(leaf->line[0]->line == 0);
            const Perftools__Profiles__Location *caller = loc(pb, s->location_id[1]);
            CHECK(caller && caller->line[0]->line == 14);
        }
        if (label_num(pb, s, "thread_id") == 1)
            CHECK(label_str(pb, s, "thread_name") &&
                  !strcmp(label_str(pb, s, "thread_name"), "MainThread"));
        if (label_num(pb, s, "thread_id") == 2 && !strcmp(leaf_fn, "compute")) {
            seen_thread2 = 1;
            CHECK(!strcmp(cls, "system"));
            CHECK(label_str(pb, s, "thread_name") == NULL);
        }
    }
    CHECK(seen_native && seen_thread2);
    /* functions: one per (name, file), start_line the smallest line seen */
    int ncompute = 0;
    for (size_t i = 0; i < pb->n_function; i++) {
        const Perftools__Profiles__Function *fn = pb->function[i];
        CHECK(fn->id == i + 1);
        if (!strcmp(str(pb, fn->name), "compute")) {
            ncompute++;
            CHECK(!strcmp(str(pb, fn->filename), "/srv/app.py"));
            CHECK_INT(fn->system_name, ==, 0); /* Python: no system name (see fmt_pprof.c) */
            CHECK_INT(fn->start_line, ==, 12);
        }
        if (!strncmp(str(pb, fn->name), "bad", 3))
            CHECK(strstr(str(pb, fn->name), "\xef\xbf\xbd") != NULL); /* U+FFFD */
    }
    CHECK_INT(ncompute, ==, 1);
    /* one location per distinct frame: compute:12, compute:14 are two */
    int n12 = 0, n14 = 0;
    for (size_t i = 0; i < pb->n_location; i++) {
        const Perftools__Profiles__Location *l = pb->location[i];
        const char *fn = str(pb, func(pb, l->line[0]->function_id)->name);
        if (!strcmp(fn, "compute"))
            l->line[0]->line == 12 ? n12++ : l->line[0]->line == 14 ? n14++ : 0;
    }
    CHECK(n12 == 1 && n14 == 1);
    perftools__profiles__profile__free_unpacked(pb, NULL);
    report_profile_free(p);
}

static void test_empty_and_cpu_only(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    pb_t *pb = decode(p, NULL, NULL);
    if (pb) {
        CHECK_INT(pb->n_sample, ==, 0);
        CHECK_INT(pb->n_sample_type, ==, 2);
        CHECK(pb->n_string_table > 0 && !strcmp(pb->string_table[0], ""));
        CHECK(!strcmp(str(pb, pb->default_sample_type), "cpu"));
        perftools__profiles__profile__free_unpacked(pb, NULL);
    }
    /* CPU samples without weights: cpu = samples x period */
    scry_frame_t a[] = {PY("f", "x.py", 1)};
    add_cpu(p, a, 1, SCRY_CLASS_PYTHON, 0, 1, 5);
    add_cpu(p, a, 1, SCRY_CLASS_PYTHON, 0, 1, 6);
    add_cpu(p, NULL, 0, SCRY_CLASS_NATIVE, 0, 1, 7); /* no frame at all */
    pb = decode(p, NULL, NULL);
    if (pb) {
        CHECK_INT(pb->n_sample_type, ==, 2);
        CHECK(sum(pb, 0) == 3);
        CHECK(sum(pb, 1) == 3 * 10000000);
        int unknown = 0;
        for (size_t i = 0; i < pb->n_sample; i++) {
            const Perftools__Profiles__Location *l = loc(pb, pb->sample[i]->location_id[0]);
            CHECK(l != NULL);
            if (l && !strcmp(str(pb, func(pb, l->line[0]->function_id)->name), "<unknown>"))
                unknown++;
        }
        CHECK_INT(unknown, ==, 1);
        perftools__profiles__profile__free_unpacked(pb, NULL);
    }
    report_profile_free(p);
}

static void test_memory_only(void)
{
    report_meta_t m = test_meta();
    report_profile_t *p = report_profile_new(&m);
    scry_frame_t a[] = {PY("alloc", "m.py", 3)};
    add_mem(p, a, 1, SCRY_METRIC_ALLOC, 1, 4096, 0x5000, 10);
    pb_t *pb = decode(p, NULL, NULL);
    if (pb) {
        CHECK(type_index(pb, "cpu") < 0 && type_index(pb, "samples") < 0);
        CHECK(type_index(pb, "alloc_space") == 0 && type_index(pb, "copy_space") == 1);
        CHECK(type_index(pb, "inuse_space") < 0); /* no frees seen */
        CHECK(!strcmp(str(pb, pb->default_sample_type), "alloc_space"));
        CHECK(sum(pb, 0) == 4096);
        CHECK(pb->n_sample == 1 && !strcmp(label_str(pb, pb->sample[0], "class"), "native"));
        perftools__profiles__profile__free_unpacked(pb, NULL);
    }
    report_profile_free(p);
}

int main(void)
{
    test_names();
    test_cpu_and_memory();
    test_empty_and_cpu_only();
    test_memory_only();
    return test_done("test_report_pprof");
}
