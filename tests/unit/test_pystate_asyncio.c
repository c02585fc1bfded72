/* test_pystate_asyncio.c - the _AsyncioDebug block parser (pystate/asyncio.c) on the real
 * blocks of Debian's 3.14.10 and 3.15.2, and on every single-field corruption of them: a
 * size of 0 or over its bound, an offset outside or misaligned, the TaskObj field order the
 * derived fields rely on, an interpreter size that is not the one _Py_DebugOffsets gives,
 * thread fields inside PyThreadState. (The walk is tested on live targets by
 * tests/func/async and fuzzed by tests/fuzz/fuzz_pystate_asyncio.c.) */
#include "asyncio.h"
#include "check.h"
#include "scry_err.h"

#include <string.h>

/* readelf -x .AsyncioDebug of each build, as 13 words */
static const uint64_t b314[13] = {168,    136,   96,  108, 109, 128, 152,
                                  225864, 10880, 936, 864, 872, 880};
static const uint64_t b315[13] = {168,    136,   96,   108,  109,  128, 152,
                                  226240, 10856, 1104, 1024, 1032, 1048};

static pystate_layout_t layout_for(uint64_t interp_size)
{
    pystate_layout_t L;
    memset(&L, 0, sizeof L);
    L.object_type = 8;
    L.interp_size = (int64_t)interp_size;
    L.tstate_size = 320; /* sizeof(PyThreadState) is below the asyncio fields */
    return L;
}

static int parse(const uint64_t *v, const pystate_layout_t *L, pystate_async_offsets_t *o)
{
    char why[160];
    return pystate_async_offsets_parse(v, 13 * 8, L, o, why, sizeof why);
}

static void real_block(const uint64_t *b, const char *what)
{
    pystate_layout_t L = layout_for(b[7]);
    pystate_async_offsets_t o;
    CHECK_INT(parse(b, &L, &o), ==, 0, "%s parses", what);
    CHECK_INT(o.task_loop, ==, 16, "%s loop after the object header", what);
    CHECK_INT(o.task_state, ==, 104, "%s fut_state after awaited_by", what);
    CHECK_INT(o.task_fut_waiter, ==, 120, "%s fut_waiter before the coroutine", what);
    CHECK_INT(o.tstate_tasks_head, ==, (long long)b[12], "%s thread list head", what);

    /* every single-word corruption that breaks a promise is refused */
    static const uint64_t bad[] = {0, 1, 3, 4097, 1u << 21, UINT64_MAX};
    for (int w = 0; w < 13; w++) {
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            uint64_t v[13];
            memcpy(v, b, sizeof v);
            v[w] = bad[k];
            /* in bounds, so harmless: the list head at 0, a larger thread state */
            if (v[w] == b[w] || (w == 8 && bad[k] == 0) || (w == 9 && bad[k] == 4097))
                continue;
            int rc = parse(v, &L, &o);
            CHECK(rc == SCRY_E_CORRUPT, "%s: word %d = %llu accepted (rc %d)", what, w,
                  (unsigned long long)bad[k], rc);
        }
    }
    /* the interpreter size must be _Py_DebugOffsets' */
    pystate_layout_t L2 = layout_for(b[7] + 8);
    CHECK_INT(parse(b, &L2, &o), ==, SCRY_E_CORRUPT, "%s other interpreter size", what);
    /* thread fields inside PyThreadState (before its end) are refused */
    pystate_layout_t L3 = layout_for(b[7]);
    L3.tstate_size = (int64_t)b[10] + 8;
    CHECK_INT(parse(b, &L3, &o), ==, SCRY_E_CORRUPT, "%s thread fields inside PyThreadState", what);
    /* the field order the derived fields rely on */
    uint64_t v[13];
    memcpy(v, b, sizeof v);
    v[3] = b[3] + 1; /* is_task no longer right after fut_state */
    v[4] = v[3] + 1;
    CHECK_INT(parse(v, &L, &o), ==, SCRY_E_CORRUPT, "%s is_task moved", what);
    memcpy(v, b, sizeof v);
    v[1] = b[1] + 8; /* name no longer right after the coroutine */
    CHECK_INT(parse(v, &L, &o), ==, SCRY_E_CORRUPT, "%s name moved", what);
}

int main(void)
{
    real_block(b314, "3.14");
    real_block(b315, "3.15");
    pystate_layout_t L = layout_for(b314[7]);
    pystate_async_offsets_t o;
    CHECK_INT(pystate_async_offsets_parse(b314, 100, &L, &o, NULL, 0), ==, SCRY_E_INVAL,
              "short block");
    CHECK_INT(pystate_async_offsets_parse(NULL, 104, &L, &o, NULL, 0), ==, SCRY_E_INVAL, "NULL");
    CHECK_STR(pystate_task_state_name(PYSTATE_TASK_RUNNING), ==, "running", "state name");
    CHECK_STR(pystate_task_state_name(99), ==, "pending", "unknown state name");
    return check_summary("test_pystate_asyncio");
}
