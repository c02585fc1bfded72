/* test_unwind_classify.c - the Python/native/system rules (the /proc parsers: test_proc_task.c). */
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "classify.h"
#include "sample.h"
#include "scry_err.h"
#include "check.h"

static unwind_frame_t nat(const char *sym, const char *lib, int in_py)
{
    unwind_frame_t f = {0};
    f.symbol = sym;
    f.lib = lib;
    f.in_python = (uint8_t)in_py;
    return f;
}

static void test_read_task(void)
{
    pid_t me = getpid(), tid = (pid_t)syscall(SYS_gettid);
    unwind_task_t t;
    CHECK_INT(unwind_read_task(me, tid, &t), ==, 0);
    CHECK_INT(t.state, ==, 'R');
    /* Reading our own syscall file shows the read() in progress or "running". */
    CHECK(t.sc.nr == PROC_SYSCALL_RUNNING || t.sc.nr == 0 || t.sc.nr == PROC_SYSCALL_UNKNOWN,
          "nr %ld", t.sc.nr);
    CHECK_INT(unwind_read_task(me, 0x7ffffff0, &t), ==, SCRY_E_GONE);
}

static void test_rules(void)
{
    unwind_classification_t c;
    unwind_task_t running = {'R', {PROC_SYSCALL_RUNNING, {0}, 0, 0}, 0};
    unwind_task_t sleeping = {'S', {230, {0}, 0, 0}, 0};
    unwind_task_t futex = {'S', {202, {0}, 0, 0}, 0};
    unwind_task_t disk = {'D', {PROC_SYSCALL_UNKNOWN, {0}, 0, 0}, 0};

    /* Off CPU. */
    CHECK(unwind_classify(&sleeping, NULL, 0, UNWIND_OP_CALL, &c) == 0);
    CHECK(c.cls == SCRY_CLASS_SYSTEM && (c.flags & UNWIND_CLASSIFY_SYSCALL) && c.syscall == 230);
    CHECK(unwind_classify(&disk, NULL, 0, 0, &c) == 0 && c.cls == SCRY_CLASS_SYSTEM);

    /* GIL wait: futex under take_gil (named, or unnamed in a stripped python). */
    unwind_frame_t gil[] = {nat("__futex_abstimed_wait_common", "libc.so.6", 0),
                            nat("pthread_cond_timedwait", "libc.so.6", 0),
                            nat("take_gil", "libpython3.11.so.1.0", 1),
                            nat("PyEval_RestoreThread", "libpython3.11.so.1.0", 1)};
    CHECK(unwind_classify(&futex, gil, 4, 0, &c) == 0);
    CHECK(c.cls == SCRY_CLASS_SYSTEM && (c.flags & UNWIND_CLASSIFY_GIL_WAIT));
    gil[2].symbol = NULL;
    CHECK(unwind_classify(&futex, gil, 4, 0, &c) == 0 && (c.flags & UNWIND_CLASSIFY_GIL_WAIT));
    /* A futex under a threading.Lock is not the GIL. */
    unwind_frame_t lock[] = {nat("__futex_abstimed_wait_common", "libc.so.6", 0),
                             nat("sem_clockwait", "libc.so.6", 0),
                             nat("PyThread_acquire_lock_timed", "libpython3.11.so.1.0", 1)};
    CHECK(unwind_classify(&futex, lock, 3, 0, &c) == 0);
    CHECK(c.cls == SCRY_CLASS_SYSTEM && !(c.flags & UNWIND_CLASSIFY_GIL_WAIT));

    /* Running, with a native stack. */
    unwind_frame_t eval[] = {nat("_PyEval_EvalFrameDefault", "libpython3.11.so.1.0", 1)};
    CHECK(unwind_classify(&running, eval, 1, 0, &c) == 0);
    CHECK_INT(c.cls, ==, SCRY_CLASS_PYTHON);
    /* CPython's own code under a call instruction: a C method (ndarray.tolist making
     * floats), as the perf sampler's instruction-pointer rule says. */
    CHECK(unwind_classify(&running, eval, 1, UNWIND_OP_CALL, &c) == 0);
    CHECK_INT(c.cls, ==, SCRY_CLASS_NATIVE);
    unwind_frame_t ext[] = {nat("SHA256_Update", "libcrypto.so.3", 0),
                            nat("_PyEval_EvalFrameDefault", "libpython3.11.so.1.0", 1)};
    CHECK(unwind_classify(&running, ext, 2, 0, &c) == 0 && c.cls == SCRY_CLASS_NATIVE);
    /* The C runtime is native, under CPython (bytes * n) as under an extension: the perf
     * sampler, with no caller, sees only the memcpy. */
    unwind_frame_t memcpy_py[] = {nat("__memmove_avx_unaligned", "libc.so.6", 0),
                                  nat("bytes_repeat", "libpython3.11.so.1.0", 1)};
    CHECK(unwind_classify(&running, memcpy_py, 2, 0, &c) == 0 && c.cls == SCRY_CLASS_NATIVE);
    CHECK_INT(unwind_ip_kind(0, &memcpy_py[0]), ==, UNWIND_IP_NATIVE);
    CHECK_INT(unwind_ip_kind(0, &eval[0]), ==, UNWIND_IP_CPYTHON);
    CHECK_INT(unwind_ip_kind(1, &eval[0]), ==, UNWIND_IP_KERNEL);
    unwind_frame_t memcpy_np[] = {nat("memcpy", "libc.so.6", 0),
                                  nat(NULL, "_multiarray_umath.so", 0)};
    CHECK(unwind_classify(&running, memcpy_np, 2, 0, &c) == 0 && c.cls == SCRY_CLASS_NATIVE);
    /* The static python executable counts as CPython. */
    unwind_frame_t stat_py[] = {nat(NULL, "python3.11", 1)};
    CHECK(unwind_classify(&running, stat_py, 1, 0, &c) == 0 && c.cls == SCRY_CLASS_PYTHON);

    /* Running, no native stack: the opcode decides. */
    CHECK(unwind_classify(&running, NULL, 0, UNWIND_OP_CALL, &c) == 0);
    CHECK(c.cls == SCRY_CLASS_NATIVE && (c.flags & UNWIND_CLASSIFY_NOSTACK));
    CHECK(unwind_classify(&running, NULL, 0, UNWIND_OP_CALL + 1, &c) == 0);
    CHECK_INT(c.cls, ==, SCRY_CLASS_PYTHON);
    /* Running without the GIL: C code that released it (a @ b in BLAS), any instruction;
     * holding it, or not known, the instruction decides; in a futex, the system's. */
    unwind_task_t nogil = running, held = running, nogil_futex = {'R', {202, {0}, 0, 0}, 0};
    nogil.gil = nogil_futex.gil = UNWIND_GIL_RELEASED;
    held.gil = UNWIND_GIL_HELD;
    CHECK(unwind_classify(&nogil, NULL, 0, UNWIND_OP_CALL + 1, &c) == 0);
    CHECK_INT(c.cls, ==, SCRY_CLASS_NATIVE);
    CHECK(unwind_classify(&held, NULL, 0, UNWIND_OP_CALL + 1, &c) == 0);
    CHECK_INT(c.cls, ==, SCRY_CLASS_PYTHON);
    CHECK(unwind_classify(&nogil_futex, NULL, 0, UNWIND_OP_CALL + 1, &c) == 0);
    CHECK_INT(c.cls, ==, SCRY_CLASS_SYSTEM);
    CHECK(unwind_classify(&sleeping, NULL, 0, 0, &c) == 0 && c.cls == SCRY_CLASS_SYSTEM);
    unwind_task_t unknown = {0, {PROC_SYSCALL_UNKNOWN, {0}, 0, 0}, 0};
    CHECK(unwind_classify(&unknown, NULL, 0, 99, &c) == 0 && c.cls == SCRY_CLASS_PYTHON);
    CHECK(unwind_classify(NULL, NULL, 0, 0, &c) == SCRY_E_INVAL);

    CHECK(unwind_syscall_blocks(202) && unwind_syscall_blocks(0) && !unwind_syscall_blocks(39));
}

int main(void)
{
    test_read_task();
    test_rules();
    return check_summary("test_unwind_classify");
}
