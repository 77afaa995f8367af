/* The op tree, at C speed: what link.py's Python loop computes per thread, for a big trace.
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
#include <string.h>

#include "merge_sort.h"

typedef struct {
    double key, dur;
    Py_ssize_t i;
} Item;

/* (start, -duration, position): a total order, so the sort is stable whatever sort does it. */
static inline int item_before(const Item *a, const Item *b) {
    if (a->key != b->key) return a->key < b->key;
    if (a->dur != b->dur) return a->dur > b->dur;
    return a->i < b->i;
}

MERGE_SORT(sort_items, Item, item_before)

/* The values as the bytes of an array("q") (int64, native order). */
static PyObject *q_bytes(const Py_ssize_t *v, Py_ssize_t n) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (b == NULL) return NULL;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(b);
    for (Py_ssize_t k = 0; k < n; k++) out[k] = (int64_t)v[k];
    return b;
}

/* One thread's tree: ops[0..n) and ls[0..m) sorted by item_before. parent, send, depth, self_cpu
 * are written by position in that order; parent and subtree ends are op indices of the whole
 * list, where this thread's ops start at base; lop[ls[j].i] gets launch j's op (-1: none).
 * stack and ends are scratch of n entries. */
static void nest_core(const Item *ops, Py_ssize_t n, const Item *ls, Py_ssize_t m, Py_ssize_t base,
                      Py_ssize_t *parent, Py_ssize_t *send, Py_ssize_t *depth, double *self_cpu,
                      Py_ssize_t *stack, double *ends, Py_ssize_t *lop) {
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
    for (Py_ssize_t k = 0; k < n; k++)
        if (!(self_cpu[k] > 0)) self_cpu[k] = 0.0;
}

/* NaN has no place in the order (the sort needs a total one): the caller's Python loop decides. */
static int any_nan(const double *t, const double *d, Py_ssize_t n, const double *l, Py_ssize_t m) {
    for (Py_ssize_t k = 0; k < n; k++)
        if (t[k] != t[k] || d[k] != d[k]) return 1;
    for (Py_ssize_t j = 0; j < m; j++)
        if (l[j] != l[j]) return 1;
    return 0;
}

/* The working arrays of a tree of n ops and m launches: nest_core's items, scratch and results. */
typedef struct {
    Item *ops, *ls, *tmp; /* tmp: the sort's scratch, as many items as ops or launches */
    Py_ssize_t *parent, *send, *depth, *stack, *order, *lop;
    double *ends, *self_cpu;
    int borrowed; /* parent, send, depth, order, lop and self_cpu are the caller's (nest_all's out) */
} Tree;

/* The arrays of T not already set (borrowed ones are). */
static int tree_alloc(Tree *T, Py_ssize_t n, Py_ssize_t m) {
    size_t nn = (size_t)(n + 1), mm = (size_t)(m + 1);
    T->ops = PyMem_Malloc(sizeof(Item) * nn);
    T->ls = PyMem_Malloc(sizeof(Item) * mm);
    T->tmp = PyMem_Malloc(sizeof(Item) * (nn > mm ? nn : mm));
    T->stack = PyMem_Malloc(sizeof(Py_ssize_t) * nn);
    T->ends = PyMem_Malloc(sizeof(double) * nn);
    if (!T->borrowed) {
        T->parent = PyMem_Malloc(sizeof(Py_ssize_t) * nn);
        T->send = PyMem_Malloc(sizeof(Py_ssize_t) * nn);
        T->depth = PyMem_Malloc(sizeof(Py_ssize_t) * nn);
        T->order = PyMem_Malloc(sizeof(Py_ssize_t) * nn);
        T->lop = PyMem_Malloc(sizeof(Py_ssize_t) * mm);
        T->self_cpu = PyMem_Malloc(sizeof(double) * nn);
    }
    if (!T->ops || !T->ls || !T->tmp || !T->parent || !T->send || !T->depth || !T->stack || !T->order || !T->lop || !T->ends
        || !T->self_cpu) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void tree_free(Tree *T) {
    PyMem_Free(T->ops);
    PyMem_Free(T->ls);
    PyMem_Free(T->tmp);
    PyMem_Free(T->stack);
    PyMem_Free(T->ends);
    if (!T->borrowed) {
        PyMem_Free(T->parent);
        PyMem_Free(T->send);
        PyMem_Free(T->depth);
        PyMem_Free(T->order);
        PyMem_Free(T->lop);
        PyMem_Free(T->self_cpu);
    }
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
    Tree T = {0};
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
    if (tree_alloc(&T, n, m) < 0) goto done;
    const double *t = ts.buf, *d = dur.buf, *lt = lts.buf;
    if (any_nan(t, d, n, lt, m)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) T.ops[k] = (Item){t[k], d[k], k};
    /* Launches by start time only: equal starts keep their order (the duration field is unused). */
    for (Py_ssize_t j = 0; j < m; j++) T.ls[j] = (Item){lt[j], 0.0, j};
    sort_items(T.ops, n, T.tmp);
    sort_items(T.ls, m, T.tmp);

    nest_core(T.ops, n, T.ls, m, base, T.parent, T.send, T.depth, T.self_cpu, T.stack, T.ends, T.lop);
    for (Py_ssize_t k = 0; k < n; k++) T.order[k] = T.ops[k].i;
    result = Py_BuildValue("(NNNNNN)", q_bytes(T.order, n), q_bytes(T.parent, n), q_bytes(T.send, n),
                           q_bytes(T.depth, n),
                           PyBytes_FromStringAndSize((const char *)T.self_cpu, n * (Py_ssize_t)sizeof(double)),
                           q_bytes(T.lop, m));
done:
    tree_free(&T);
    PyBuffer_Release(&ts);
    PyBuffer_Release(&dur);
    PyBuffer_Release(&lts);
    return result;
}

/* nest_all's work once its arrays exist: counting-sort the ops and launches by thread, sort and
 * nest each thread, and lay out the order's columns. Needs no GIL. -1 when a thread number is
 * outside [0, nth). */
static int nest_threads(Tree *T, const int64_t *ot, const double *t, const double *d, Py_ssize_t n,
                        const int64_t *lt, const double *l, Py_ssize_t m, Py_ssize_t nth, Py_ssize_t *ostart,
                        Py_ssize_t *lstart, Py_ssize_t *fill, Py_ssize_t *thread, double *sts, double *sdur) {
    /* Each thread's ops (and launches) contiguous, in list order: a counting sort. */
    for (Py_ssize_t k = 0; k < n; k++) {
        if (ot[k] < 0 || ot[k] >= nth) return -1;
        ostart[ot[k] + 1]++;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        if (lt[j] < 0 || lt[j] >= nth) return -1;
        lstart[lt[j] + 1]++;
    }
    for (Py_ssize_t q = 0; q < nth; q++) {
        ostart[q + 1] += ostart[q];
        lstart[q + 1] += lstart[q];
    }
    for (Py_ssize_t k = 0; k < n; k++) T->ops[ostart[ot[k]] + fill[ot[k]]++] = (Item){t[k], d[k], k};
    memset(fill, 0, sizeof(Py_ssize_t) * ((size_t)nth + 2));
    for (Py_ssize_t j = 0; j < m; j++) T->ls[lstart[lt[j]] + fill[lt[j]]++] = (Item){l[j], 0.0, j};
    for (Py_ssize_t q = 0; q < nth; q++) {
        Py_ssize_t b = ostart[q], c = ostart[q + 1] - b, lb = lstart[q], lc = lstart[q + 1] - lb;
        /* the position in the list breaks ties, as the per-thread position does in nest() */
        sort_items(T->ops + b, c, T->tmp);
        sort_items(T->ls + lb, lc, T->tmp);
        nest_core(T->ops + b, c, T->ls + lb, lc, b, T->parent + b, T->send + b, T->depth + b, T->self_cpu + b,
                  T->stack, T->ends, T->lop);
        for (Py_ssize_t k = b; k < b + c; k++) thread[k] = q;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        T->order[k] = T->ops[k].i;
        sts[k] = T->ops[k].key;
        sdur[k] = T->ops[k].dur;
    }
    return 0;
}

PyDoc_STRVAR(nest_all_doc,
"nest_all(thread, ts, dur, n_threads, launch_thread, launch_ts[, op_rank, launch_rank])\n"
"    -> (order, parent, subtree_end, depth, self_cpu, ts, dur, thread, launch_op)\n\n"
"nest() for every thread at once. Ops: thread (int64, in [0, n_threads)), start and duration\n"
"(float64) per op in list order; launches: thread and start. Threads come in their number's\n"
"order, each one's ops contiguous and sorted by (start, -duration), stably. order: each position's\n"
"op (its index in the given list); parent, subtree_end, depth, self_cpu, ts, dur and thread follow\n"
"the order, parent and subtree_end as positions; launch_op[j]: the position of launch j's op (-1:\n"
"none). Bytes of arrays: \"d\" for self_cpu, ts, dur, else \"q\". None when any time is NaN.\n"
"op_rank, launch_rank (int64): when given, an op's thread is op_rank[thread[i]] (a launch's\n"
"launch_rank[launch_thread[j]]), as _kept.columns numbers threads per list. flags (bytes, one per\n"
"op in list order; None: none): when given, a tenth result holds them in the order's order.\n"
"lists (a tuple of lists of one item per op, in list order): when given, the last result is a\n"
"tuple of new lists of the same items in the order's order. out (a tuple of nine writable int64 /\n"
"float64 buffers, array('q') and array('d'), of the columns' lengths): the nine columns are written\n"
"there, and the results are those objects, not bytes.");

static PyObject *nest_all(PyObject *self, PyObject *args) {
    Py_buffer th, ts, dur, lth, lts, orank = {0}, lrank = {0}, flags = {0};
    Py_ssize_t nth;
    PyObject *result = NULL, *oflags = Py_None, *ordered = NULL, *lists = NULL, *permuted = NULL, *out = NULL;
    Py_buffer ob[9];
    int n_ob = 0;
    Tree T = {0};
    Py_ssize_t *ostart = NULL, *lstart = NULL, *fill = NULL, *thread = NULL;
    int64_t *oth = NULL, *lthr = NULL;
    double *sts = NULL, *sdur = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*ny*y*|y*y*OO!O!", &th, &ts, &dur, &nth, &lth, &lts, &orank, &lrank, &oflags,
                          &PyTuple_Type, &lists, &PyTuple_Type, &out))
        return NULL;
    Py_ssize_t n = ts.len / 8, m = lts.len / 8;
    if (oflags != Py_None && PyObject_GetBuffer(oflags, &flags, PyBUF_SIMPLE) < 0) goto done;
    if (ts.len % 8 || dur.len != ts.len || th.len != ts.len || lts.len % 8 || lth.len != lts.len || nth < 0
        || orank.len % 8 || lrank.len % 8 || (orank.buf == NULL) != (lrank.buf == NULL)
        || (flags.buf != NULL && flags.len != n)) {
        PyErr_SetString(PyExc_ValueError, "columns of mismatched lengths");
        goto done;
    }
    if (out != NULL) {
        /* order, parent, subtree_end, depth: int64 of n; self_cpu, ts, dur: float64 of n; thread: int64
         * of n; launch_op: int64 of m. Written in place (Py_ssize_t is int64 where this is built). */
        static const char kinds[9] = {'q', 'q', 'q', 'q', 'd', 'd', 'd', 'q', 'q'};
        if (PyTuple_GET_SIZE(out) != 9 || sizeof(Py_ssize_t) != sizeof(int64_t)) {
            PyErr_SetString(PyExc_ValueError, "out must be nine buffers (and Py_ssize_t int64)");
            goto done;
        }
        for (; n_ob < 9; n_ob++) {
            Py_buffer *b = &ob[n_ob];
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(out, n_ob), b, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
                goto done;
            if (b->itemsize != 8 || b->format == NULL || b->format[0] != kinds[n_ob] || b->format[1] != 0
                || b->len != 8 * (n_ob == 8 ? m : n)) {
                PyBuffer_Release(b);
                PyErr_SetString(PyExc_ValueError, "out buffers of the wrong kind or length");
                goto done;
            }
        }
        T.order = ob[0].buf;
        T.parent = ob[1].buf;
        T.send = ob[2].buf;
        T.depth = ob[3].buf;
        T.self_cpu = ob[4].buf;
        T.lop = ob[8].buf;
        T.borrowed = 1;
    }
    for (Py_ssize_t q = 0; lists != NULL && q < PyTuple_GET_SIZE(lists); q++) {
        PyObject *l = PyTuple_GET_ITEM(lists, q);
        if (!PyList_Check(l) || PyList_GET_SIZE(l) != n) {
            PyErr_SetString(PyExc_ValueError, "lists must be lists of one item per op");
            goto done;
        }
    }
    const int64_t *ot = th.buf, *lt = lth.buf;
    if (orank.buf != NULL) {
        /* each list's own thread numbers, through its rank table, to the common ones */
        const int64_t *ro = orank.buf, *rl = lrank.buf;
        Py_ssize_t no = orank.len / 8, nl = lrank.len / 8;
        oth = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
        lthr = PyMem_Malloc(sizeof(int64_t) * (size_t)(m + 1));
        if (oth == NULL || lthr == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t k = 0; k < n; k++) {
            if (ot[k] < 0 || ot[k] >= no) goto bad_thread;
            oth[k] = ro[ot[k]];
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            if (lt[j] < 0 || lt[j] >= nl) goto bad_thread;
            lthr[j] = rl[lt[j]];
        }
        ot = oth;
        lt = lthr;
    }
    const double *t = ts.buf, *d = dur.buf, *l = lts.buf;
    if (any_nan(t, d, n, l, m)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (tree_alloc(&T, n, m) < 0) goto done;
    ostart = PyMem_Calloc((size_t)nth + 2, sizeof(Py_ssize_t));
    lstart = PyMem_Calloc((size_t)nth + 2, sizeof(Py_ssize_t));
    fill = PyMem_Calloc((size_t)nth + 2, sizeof(Py_ssize_t));
    if (out != NULL) { /* written in place, freed by their owners */
        sts = ob[5].buf;
        sdur = ob[6].buf;
        thread = ob[7].buf;
    } else {
        thread = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
        sts = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
        sdur = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    }
    if (!ostart || !lstart || !fill || !thread || !sts || !sdur) {
        PyErr_NoMemory();
        goto done;
    }
    /* The sort and the nesting touch no Python object: other threads (the caller's overlapped
     * Python work, link.py) run meanwhile. */
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    bad = nest_threads(&T, ot, t, d, n, lt, l, m, nth, ostart, lstart, fill, thread, sts, sdur);
    Py_END_ALLOW_THREADS
    if (bad) goto bad_thread;
    if (flags.buf != NULL) {
        ordered = PyBytes_FromStringAndSize(NULL, n);
        if (ordered == NULL) goto done;
        char *o = PyBytes_AS_STRING(ordered);
        const char *f = flags.buf;
        for (Py_ssize_t k = 0; k < n; k++) o[k] = f[T.order[k]];
    }
    if (lists != NULL) {
        /* The same items in the order's order (each list checked above; nothing ran since). */
        permuted = PyTuple_New(PyTuple_GET_SIZE(lists));
        if (permuted == NULL) goto done;
        for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(lists); q++) {
            PyObject *src = PyTuple_GET_ITEM(lists, q), *dst = PyList_New(n);
            if (dst == NULL || PyList_GET_SIZE(src) != n) {
                Py_XDECREF(dst);
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a list changed length");
                goto done;
            }
            for (Py_ssize_t k = 0; k < n; k++) PyList_SET_ITEM(dst, k, Py_NewRef(PyList_GET_ITEM(src, T.order[k])));
            PyTuple_SET_ITEM(permuted, q, dst);
        }
    }
    PyObject *cols = out != NULL ? Py_NewRef(out)
                                 : Py_BuildValue("(NNNNNNNNN)", q_bytes(T.order, n), q_bytes(T.parent, n),
                                                 q_bytes(T.send, n), q_bytes(T.depth, n),
                                                 PyBytes_FromStringAndSize((const char *)T.self_cpu, n * 8),
                                                 PyBytes_FromStringAndSize((const char *)sts, n * 8),
                                                 PyBytes_FromStringAndSize((const char *)sdur, n * 8), q_bytes(thread, n),
                                                 q_bytes(T.lop, m));
    if (cols == NULL) goto done;
    if (ordered == NULL && permuted == NULL) {
        result = cols;
    } else {
        /* the nine columns, then the flags and the lists that were asked for, in that order */
        Py_ssize_t extra = (ordered != NULL) + (permuted != NULL);
        result = PyTuple_New(9 + extra);
        if (result != NULL) {
            for (Py_ssize_t k = 0; k < 9; k++) PyTuple_SET_ITEM(result, k, Py_NewRef(PyTuple_GET_ITEM(cols, k)));
            Py_ssize_t at = 9;
            if (ordered != NULL) PyTuple_SET_ITEM(result, at++, Py_NewRef(ordered));
            if (permuted != NULL) PyTuple_SET_ITEM(result, at++, Py_NewRef(permuted));
        }
        Py_DECREF(cols);
    }
    goto done;
bad_thread:
    PyErr_SetString(PyExc_ValueError, "a thread outside [0, n_threads)");
done:
    tree_free(&T);
    PyMem_Free(oth);
    PyMem_Free(lthr);
    if (orank.buf != NULL) PyBuffer_Release(&orank);
    if (lrank.buf != NULL) PyBuffer_Release(&lrank);
    if (flags.buf != NULL) PyBuffer_Release(&flags);
    Py_XDECREF(ordered);
    Py_XDECREF(permuted);
    PyMem_Free(ostart);
    PyMem_Free(lstart);
    PyMem_Free(fill);
    if (out == NULL) {
        PyMem_Free(thread);
        PyMem_Free(sts);
        PyMem_Free(sdur);
    }
    for (int k = 0; k < n_ob; k++) PyBuffer_Release(&ob[k]);
    PyBuffer_Release(&th);
    PyBuffer_Release(&ts);
    PyBuffer_Release(&dur);
    PyBuffer_Release(&lth);
    PyBuffer_Release(&lts);
    return result;
}

/* ---- Which op holds each event ------------------------------------------------------------- */

static Py_ssize_t lower_bound(const double *v, Py_ssize_t n, double x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static Py_ssize_t upper_bound(const double *v, Py_ssize_t n, double x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < v[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

PyDoc_STRVAR(innermost_doc,
"innermost(ev_t, ev_thread, n_threads, ops, ts, dur, op_block, block_thread, depth) -> (winner, touched)\n\n"
"Events (time-sorted times, float64, and their thread, int64 in [0, n_threads)) against ops (int64\n"
"indices into the op columns ts and dur (float64), op_block and depth (int64); block_thread maps an\n"
"op's block to an event thread, -1 for none). For each op in the given order, the events of its\n"
"thread in [ts, ts + dur] (bisect_left / bisect_right) go to it when it is deeper than the op they\n"
"have (the first such op on a tie). winner: per event, the op index it went to (-1: none); touched:\n"
"the ops whose window held any event, in order. Both int64 bytes. memory/attribute.py's Python\n"
"loop computes the same.");

static PyObject *innermost(PyObject *self, PyObject *args) {
    Py_buffer et, eth, ops, ts, dur, blk, bth, dep;
    Py_ssize_t nth;
    PyObject *result = NULL;
    Py_ssize_t *start = NULL, *fill = NULL, *idx = NULL;
    double *times = NULL;
    int64_t *winner = NULL, *best = NULL, *touched = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*y*y*y*y*", &et, &eth, &nth, &ops, &ts, &dur, &blk, &bth, &dep)) return NULL;
    Py_ssize_t n = et.len / 8, m = ops.len / 8, nops = ts.len / 8, nblk = bth.len / 8;
    if (et.len % 8 || eth.len != et.len || ops.len % 8 || ts.len % 8 || dur.len != ts.len || blk.len != ts.len
        || dep.len != ts.len || bth.len % 8 || nth < 0) {
        PyErr_SetString(PyExc_ValueError, "columns of mismatched lengths");
        goto done;
    }
    const double *t = et.buf, *ot = ts.buf, *od = dur.buf;
    const int64_t *th = eth.buf, *op = ops.buf, *ob = blk.buf, *bt = bth.buf, *dp = dep.buf;
    start = PyMem_Calloc((size_t)nth + 1, sizeof(Py_ssize_t));
    fill = PyMem_Calloc((size_t)nth + 1, sizeof(Py_ssize_t));
    idx = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    times = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    winner = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    best = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    touched = PyMem_Malloc(sizeof(int64_t) * (size_t)(m + 1));
    if (!start || !fill || !idx || !times || !winner || !best || !touched) {
        PyErr_NoMemory();
        goto done;
    }
    /* Each thread's events, contiguous and in time order (a counting sort keeps their order). */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (th[i] < 0 || th[i] >= nth) {
            PyErr_SetString(PyExc_ValueError, "an event thread outside [0, n_threads)");
            goto done;
        }
        start[th[i] + 1]++;
    }
    for (Py_ssize_t k = 0; k < nth; k++) start[k + 1] += start[k];
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = start[th[i]] + fill[th[i]]++;
        idx[at] = i;
        times[at] = t[i];
        winner[i] = -1;
        best[i] = -1;
    }
    Py_ssize_t nt = 0;
    for (Py_ssize_t q = 0; q < m; q++) {
        int64_t j = op[q];
        if (j < 0 || j >= nops || ob[j] < 0 || ob[j] >= nblk) {
            PyErr_SetString(PyExc_ValueError, "an op outside the columns");
            goto done;
        }
        int64_t k = bt[ob[j]];
        if (k < 0 || k >= nth) continue;
        const double *tk = times + start[k];
        Py_ssize_t len = start[k + 1] - start[k];
        Py_ssize_t a = lower_bound(tk, len, ot[j]), b = upper_bound(tk, len, ot[j] + od[j]);
        if (a >= b) continue;
        touched[nt++] = j;
        for (Py_ssize_t x = a; x < b; x++) {
            Py_ssize_t i = idx[start[k] + x];
            if (dp[j] > best[i]) {
                best[i] = dp[j];
                winner[i] = j;
            }
        }
    }
    result = Py_BuildValue("(y#y#)", (const char *)winner, n * 8, (const char *)touched, nt * 8);
done:
    PyMem_Free(start);
    PyMem_Free(fill);
    PyMem_Free(idx);
    PyMem_Free(times);
    PyMem_Free(winner);
    PyMem_Free(best);
    PyMem_Free(touched);
    PyBuffer_Release(&et);
    PyBuffer_Release(&eth);
    PyBuffer_Release(&ops);
    PyBuffer_Release(&ts);
    PyBuffer_Release(&dur);
    PyBuffer_Release(&blk);
    PyBuffer_Release(&bth);
    PyBuffer_Release(&dep);
    return result;
}

static PyMethodDef methods[] = {
    {"nest", nest, METH_VARARGS, nest_doc},
    {"nest_all", nest_all, METH_VARARGS, nest_all_doc},
    {"innermost", innermost, METH_VARARGS, innermost_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nest", "The op tree, at C speed (see link.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nest(void) { return PyModule_Create(&module); }
