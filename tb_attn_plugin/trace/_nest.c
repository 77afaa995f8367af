/* The op tree of one thread, at C speed: what link.py's Python loop computes, for a big trace.
 *
 * Ops are ordered by (start, -duration), stably, and nest by time: each op's parent is the
 * innermost op still open when it starts, and its subtree is the contiguous range of the order up
 * to the first op that starts after it ended. Each launch belongs to the innermost op open just
 * before it. The same float comparisons and sums as link._nest_python, in the same order, so the
 * results are identical (tests compare the two).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    double key, dur;
    Py_ssize_t i;
} Item;

/* (start, -duration, position): a total order, so the sort is stable whatever qsort does. */
static int by_start(const void *pa, const void *pb) {
    const Item *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* The values as the bytes of an array("q") (int64, native order). */
static PyObject *q_bytes(const Py_ssize_t *v, Py_ssize_t n) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (b == NULL) return NULL;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(b);
    for (Py_ssize_t k = 0; k < n; k++) out[k] = (int64_t)v[k];
    return b;
}

PyDoc_STRVAR(nest_doc,
"nest(ts, dur, launch_ts, base) -> (order, parent, subtree_end, depth, self_cpu, launch_op)\n\n"
"Each result is the bytes of an array: \"q\" (int64), self_cpu \"d\".\n"
"One thread's ops (start and duration, float buffers of one length) and launches (start times).\n"
"order: the ops' positions sorted by (start, -duration), stably. parent, subtree_end, depth and\n"
"self_cpu follow that order; parent and subtree_end are indices into the whole op list, where\n"
"this thread's ops start at base (parent -1: none). launch_op[j]: the op index of launch j\n"
"(-1: none). None when any time is NaN.");

static PyObject *nest(PyObject *self, PyObject *args) {
    Py_buffer ts, dur, lts;
    Py_ssize_t base, n, m;
    PyObject *result = NULL;
    Item *ops = NULL, *ls = NULL;
    Py_ssize_t *parent = NULL, *send = NULL, *depth = NULL, *stack = NULL, *lop = NULL, *order = NULL;
    double *ends = NULL, *self_cpu = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &ts, &dur, &lts, &base)) return NULL;
    if (ts.len != dur.len || ts.len % sizeof(double) || lts.len % sizeof(double) || base < 0) {
        PyErr_SetString(PyExc_ValueError, "ts and dur must be float buffers of one length, base >= 0");
        goto done;
    }
    n = ts.len / (Py_ssize_t)sizeof(double);
    m = lts.len / (Py_ssize_t)sizeof(double);
    if (n > PY_SSIZE_T_MAX - base) {
        PyErr_SetString(PyExc_OverflowError, "too many ops");
        goto done;
    }
    ops = PyMem_Malloc(sizeof(Item) * (size_t)(n + 1));
    ls = PyMem_Malloc(sizeof(Item) * (size_t)(m + 1));
    parent = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    send = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    depth = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    stack = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    order = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    lop = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(m + 1));
    ends = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    self_cpu = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    if (!ops || !ls || !parent || !send || !depth || !stack || !order || !lop || !ends || !self_cpu) {
        PyErr_NoMemory();
        goto done;
    }
    const double *t = ts.buf, *d = dur.buf, *lt = lts.buf;
    /* NaN has no place in the order (qsort needs a total one): the caller's Python loop decides. */
    for (Py_ssize_t k = 0; k < n; k++)
        if (t[k] != t[k] || d[k] != d[k]) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    for (Py_ssize_t j = 0; j < m; j++)
        if (lt[j] != lt[j]) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    for (Py_ssize_t k = 0; k < n; k++) ops[k] = (Item){t[k], d[k], k};
    /* Launches by start time only: equal starts keep their order (the duration field is unused). */
    for (Py_ssize_t j = 0; j < m; j++) ls[j] = (Item){lt[j], 0.0, j};
    qsort(ops, (size_t)n, sizeof(Item), by_start);
    qsort(ls, (size_t)m, sizeof(Item), by_start);

    Py_ssize_t sp = 0, li = 0, end_all = base + n;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = base + k;
        double start = ops[k].key;
        while (li < m && ls[li].key < start) {
            double at = ls[li].key;
            while (sp > 0 && ends[sp - 1] <= at) send[stack[--sp]] = i;
            lop[ls[li].i] = sp > 0 ? base + stack[sp - 1] : -1;
            li++;
        }
        while (sp > 0 && ends[sp - 1] <= start) send[stack[--sp]] = i;
        parent[k] = sp > 0 ? base + stack[sp - 1] : -1;
        depth[k] = sp; /* the stack holds exactly the op's ancestors */
        stack[sp] = k;
        ends[sp] = start + ops[k].dur;
        sp++;
    }
    while (li < m) {
        double at = ls[li].key;
        while (sp > 0 && ends[sp - 1] <= at) send[stack[--sp]] = end_all;
        lop[ls[li].i] = sp > 0 ? base + stack[sp - 1] : -1;
        li++;
    }
    while (sp > 0) send[stack[--sp]] = end_all;

    /* Self time: each op's duration less its children's, subtracted in the order link.py does. */
    for (Py_ssize_t k = 0; k < n; k++) self_cpu[k] = ops[k].dur;
    for (Py_ssize_t k = 0; k < n; k++)
        if (parent[k] >= 0) self_cpu[parent[k] - base] -= ops[k].dur;
    for (Py_ssize_t k = 0; k < n; k++) order[k] = ops[k].i;

    for (Py_ssize_t k = 0; k < n; k++)
        if (!(self_cpu[k] > 0)) self_cpu[k] = 0.0;
    result = Py_BuildValue("(NNNNNN)", q_bytes(order, n), q_bytes(parent, n), q_bytes(send, n), q_bytes(depth, n),
                           PyBytes_FromStringAndSize((const char *)self_cpu, n * (Py_ssize_t)sizeof(double)),
                           q_bytes(lop, m));
done:
    PyMem_Free(ops);
    PyMem_Free(ls);
    PyMem_Free(parent);
    PyMem_Free(send);
    PyMem_Free(depth);
    PyMem_Free(stack);
    PyMem_Free(order);
    PyMem_Free(lop);
    PyMem_Free(ends);
    PyMem_Free(self_cpu);
    PyBuffer_Release(&ts);
    PyBuffer_Release(&dur);
    PyBuffer_Release(&lts);
    return result;
}

static PyMethodDef methods[] = {
    {"nest", nest, METH_VARARGS, nest_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nest", "The op tree of one thread, at C speed (see link.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nest(void) { return PyModule_Create(&module); }
