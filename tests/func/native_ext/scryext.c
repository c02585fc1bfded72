/* scryext.c - a tiny CPython extension for scry's native-unwinding tests.
 *
 * Built during the test run against the target interpreter's headers:
 *   cc -shared -fPIC -O1 -g -I<prefix>/include/pythonX.Y scryext.c -o scryext.so
 * scryext.burn(seconds)        burns CPU in scry_native_burn (a named noinline function)
 * scryext.deep(depth, seconds) recurses DEPTH times in scry_native_recurse, then burns
 * Works with Python 2.7 and 3.6+.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) double scry_native_burn(double seconds)
{
    volatile double acc = 0.0;
    double end = now_s() + seconds;
    do {
        for (int i = 0; i < 2000000; i++)
            acc = acc * 0.999999 + (double)i * 1e-9;
    } while (now_s() < end);
    return acc;
}

__attribute__((noinline)) double scry_native_recurse(int depth, double seconds)
{
    if (depth <= 0)
        return scry_native_burn(seconds);
    double r = scry_native_recurse(depth - 1, seconds);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return r + 1.0;
}

static PyObject *scryext_burn(PyObject *self, PyObject *args)
{
    double seconds;
    if (!PyArg_ParseTuple(args, "d", &seconds))
        return NULL;
    return PyFloat_FromDouble(scry_native_burn(seconds));
}

static PyObject *scryext_deep(PyObject *self, PyObject *args)
{
    int depth;
    double seconds;
    if (!PyArg_ParseTuple(args, "id", &depth, &seconds))
        return NULL;
    return PyFloat_FromDouble(scry_native_recurse(depth, seconds));
}

static PyMethodDef scryext_methods[] = {
    {"burn", scryext_burn, METH_VARARGS, "burn CPU in C for the given seconds"},
    {"deep", scryext_deep, METH_VARARGS, "recurse in C, then burn"},
    {NULL, NULL, 0, NULL},
};

#if PY_MAJOR_VERSION >= 3
static struct PyModuleDef scryext_module = {
    PyModuleDef_HEAD_INIT, "scryext", NULL, -1, scryext_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_scryext(void)
{
    return PyModule_Create(&scryext_module);
}
#else
PyMODINIT_FUNC initscryext(void)
{
    Py_InitModule("scryext", scryext_methods);
}
#endif
