/* Grouped sums, spans and positions over op columns, at C speed (see trace/columns.py, which holds the
 * Python loops these equal, and the callers: metrics, roofline timing, the memory section).
 *
 * A big trace has millions of ops and a few hundred groups (call, stage, pass). Summing per group in
 * Python was a loop over every op, several times over; here one pass builds each row's key from its
 * columns and adds in row order, with the same float operations as the Python loop, so the results
 * are identical.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "merge_sort.h"

/* The key of row i: the item of the one column, or the tuple of the columns' items; an empty item
 * (None or "") is none_as, as `stage or "other"` reads a stage. New reference. */
static PyObject *row_key(PyObject *cols, Py_ssize_t i, PyObject *none_as) {
    Py_ssize_t k = PyTuple_GET_SIZE(cols);
    PyObject *key = k == 1 ? NULL : PyTuple_New(k);
    if (k != 1 && key == NULL) return NULL;
    for (Py_ssize_t c = 0; c < k; c++) {
        PyObject *v = PyList_GET_ITEM(PyTuple_GET_ITEM(cols, c), i); /* i checked by walk */
        if (v == Py_None || (PyUnicode_Check(v) && PyUnicode_GET_LENGTH(v) == 0)) v = none_as;
        if (k == 1) return Py_NewRef(v);
        PyTuple_SET_ITEM(key, c, Py_NewRef(v));
    }
    return key;
}

/* Whether row i's key items are the very objects of row j's (then the key is the same). A key's
 * hash or equality may run Python code that shortens a column, so both rows are checked again. */
static int same_items(PyObject *cols, Py_ssize_t i, Py_ssize_t j) {
    for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(cols); c++) {
        PyObject *col = PyTuple_GET_ITEM(cols, c);
        if (i >= PyList_GET_SIZE(col) || j >= PyList_GET_SIZE(col)) return 0;
        if (PyList_GET_ITEM(col, i) != PyList_GET_ITEM(col, j)) return 0;
    }
    return 1;
}

static int check_args(PyObject *rows, PyObject *cols) {
    if (!PyList_Check(rows) || !PyTuple_Check(cols) || PyTuple_GET_SIZE(cols) < 1) {
        PyErr_SetString(PyExc_TypeError, "rows must be a list, cols a non-empty tuple of lists");
        return -1;
    }
    for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(cols); c++)
        if (!PyList_Check(PyTuple_GET_ITEM(cols, c))) {
            PyErr_SetString(PyExc_TypeError, "cols must be lists");
            return -1;
        }
    return 0;
}

/* The float64 column of a buffer. */
static int doubles(PyObject *o, Py_buffer *b) {
    if (PyObject_GetBuffer(o, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (b->itemsize != 8 || b->format == NULL || strcmp(b->format, "d") != 0) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_TypeError, "value columns must be float64 buffers (array('d'))");
        return -1;
    }
    return 0;
}

/* Walks rows, finding each row's entry (a list held by out, keyed by the row's key): the shared
 * loop of sums and spans. visit(entry, row, ctx) updates it; fresh(row, ctx) makes a new one. */
typedef int (*Visit)(PyObject *entry, Py_ssize_t row, void *ctx);
typedef PyObject *(*Fresh)(Py_ssize_t row, void *ctx);

static PyObject *walk(PyObject *rows, PyObject *cols, PyObject *none_as, Py_ssize_t n_values, Visit visit,
                      Fresh fresh, void *ctx) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    PyObject *entry = NULL; /* borrowed from out */
    Py_ssize_t last = -1;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(rows, r));
        if (i == -1 && PyErr_Occurred()) goto fail;
        if (i < 0 || i >= n_values) {
            PyErr_SetString(PyExc_IndexError, "a row outside the columns");
            goto fail;
        }
        for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(cols); c++)
            if (i >= PyList_GET_SIZE(PyTuple_GET_ITEM(cols, c))) {
                PyErr_SetString(PyExc_IndexError, "a row beyond a key column");
                goto fail;
            }
        if (last < 0 || !same_items(cols, i, last)) {
            PyObject *key = row_key(cols, i, none_as);
            if (key == NULL) goto fail;
            entry = PyDict_GetItemWithError(out, key);
            if (entry == NULL) {
                if (PyErr_Occurred() || (entry = fresh(i, ctx)) == NULL) {
                    Py_DECREF(key);
                    goto fail;
                }
                int rc = PyDict_SetItem(out, key, entry);
                Py_DECREF(entry); /* out holds it */
                if (rc < 0) {
                    Py_DECREF(key);
                    goto fail;
                }
                Py_DECREF(key);
                last = i;
                continue;
            }
            Py_DECREF(key);
        }
        last = i;
        if (visit(entry, i, ctx) < 0) goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

typedef struct {
    const double *a, *b;
} Cols;

/* sums: [count, sum], the sum as Python's `total += v` from 0.0 */
static PyObject *sum_fresh(Py_ssize_t i, void *ctx) {
    const Cols *c = ctx;
    return Py_BuildValue("[nd]", (Py_ssize_t)1, c->a == NULL ? 0.0 : 0.0 + c->a[i]);
}

static int sum_visit(PyObject *entry, Py_ssize_t i, void *ctx) {
    const Cols *c = ctx;
    Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(entry, 0));
    PyObject *cnt = PyLong_FromSsize_t(n + 1);
    if (cnt == NULL) return -1;
    PyList_SetItem(entry, 0, cnt); /* steals */
    if (c->a != NULL) {
        PyObject *s = PyFloat_FromDouble(PyFloat_AS_DOUBLE(PyList_GET_ITEM(entry, 1)) + c->a[i]);
        if (s == NULL) return -1;
        PyList_SetItem(entry, 1, s);
    }
    return 0;
}

PyDoc_STRVAR(sums_doc,
"sums(rows, cols, none_as, values=None) -> dict\n\n"
"For each row (an index) in order, its key: the item of the one key column in cols (a tuple of\n"
"lists), or the tuple of their items, with None and \"\" read as none_as. Returns key -> [count, sum of\n"
"values[row]] (values: array('d'); the sum from 0.0, in row order; 0.0 without values), keys in\n"
"order of first appearance.");

static PyObject *sums(PyObject *self, PyObject *args) {
    PyObject *rows, *cols, *none_as, *values = Py_None, *out;
    Py_buffer vb = {0};
    Cols c = {NULL, NULL};
    Py_ssize_t n = PY_SSIZE_T_MAX;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO|O", &rows, &cols, &none_as, &values) || check_args(rows, cols) < 0) return NULL;
    if (values != Py_None) {
        if (doubles(values, &vb) < 0) return NULL;
        c.a = vb.buf;
        n = vb.len / 8;
    }
    out = walk(rows, cols, none_as, n, sum_visit, sum_fresh, &c);
    if (values != Py_None) PyBuffer_Release(&vb);
    return out;
}

/* spans: [first start, last end], as Python's min(lo, t) and max(hi, t + d) */
static PyObject *span_fresh(Py_ssize_t i, void *ctx) {
    const Cols *c = ctx;
    return Py_BuildValue("[dd]", c->a[i], c->a[i] + c->b[i]);
}

static int span_visit(PyObject *entry, Py_ssize_t i, void *ctx) {
    const Cols *c = ctx;
    double lo = PyFloat_AS_DOUBLE(PyList_GET_ITEM(entry, 0)), hi = PyFloat_AS_DOUBLE(PyList_GET_ITEM(entry, 1));
    double t = c->a[i], e = c->a[i] + c->b[i];
    if (t < lo) {
        PyObject *v = PyFloat_FromDouble(t);
        if (v == NULL) return -1;
        PyList_SetItem(entry, 0, v);
    }
    if (e > hi) {
        PyObject *v = PyFloat_FromDouble(e);
        if (v == NULL) return -1;
        PyList_SetItem(entry, 1, v);
    }
    return 0;
}

PyDoc_STRVAR(spans_doc,
"spans(rows, cols, none_as, ts, dur) -> dict\n\n"
"Keys as in sums. Returns key -> [least ts[row], greatest ts[row] + dur[row]] (array('d') columns).");

static PyObject *spans(PyObject *self, PyObject *args) {
    PyObject *rows, *cols, *none_as, *ts, *dur, *out;
    Py_buffer tb, db;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO", &rows, &cols, &none_as, &ts, &dur) || check_args(rows, cols) < 0) return NULL;
    if (doubles(ts, &tb) < 0) return NULL;
    if (doubles(dur, &db) < 0) {
        PyBuffer_Release(&tb);
        return NULL;
    }
    Cols c = {tb.buf, db.buf};
    Py_ssize_t n = tb.len < db.len ? tb.len / 8 : db.len / 8;
    out = walk(rows, cols, none_as, n, span_visit, span_fresh, &c);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&db);
    return out;
}

/* factorize: each row's key number, keys numbered in order of first appearance */
typedef struct {
    int64_t *ids;
    Py_ssize_t row, n_keys;
} Ids;

static PyObject *id_fresh(Py_ssize_t i, void *ctx) {
    Ids *x = ctx;
    (void)i;
    x->ids[x->row++] = x->n_keys;
    return PyLong_FromSsize_t(x->n_keys++);
}

static int id_visit(PyObject *entry, Py_ssize_t i, void *ctx) {
    Ids *x = ctx;
    (void)i;
    x->ids[x->row++] = PyLong_AsSsize_t(entry);
    return 0;
}

PyDoc_STRVAR(factorize_doc,
"factorize(rows, cols, none_as) -> (ids, keys)\n\n"
"Keys as in sums. ids: each row's key as its number (bytes of an array(\"q\")); keys: the keys\n"
"by number, in order of first appearance.");

static PyObject *factorize(PyObject *self, PyObject *args) {
    PyObject *rows, *cols, *none_as, *out, *ids, *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &rows, &cols, &none_as) || check_args(rows, cols) < 0) return NULL;
    ids = PyBytes_FromStringAndSize(NULL, PyList_GET_SIZE(rows) * 8);
    if (ids == NULL) return NULL;
    Ids x = {(int64_t *)PyBytes_AS_STRING(ids), 0, 0};
    out = walk(rows, cols, none_as, PY_SSIZE_T_MAX, id_visit, id_fresh, &x);
    if (out != NULL) {
        PyObject *keys = PyDict_Keys(out);
        if (keys != NULL) result = PyTuple_Pack(2, ids, keys);
        Py_XDECREF(keys);
        Py_DECREF(out);
    }
    Py_DECREF(ids);
    return result;
}

PyDoc_STRVAR(positions_doc,
"positions(keys) -> dict\n\n"
"Each distinct item of the list keys -> the ascending list of its positions, in order of first\n"
"appearance.");

static PyObject *positions(PyObject *self, PyObject *args) {
    PyObject *keys, *out, *last_key = NULL, *last = NULL; /* last: borrowed from out */
    (void)self;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &keys)) return NULL;
    out = PyDict_New();
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        PyObject *at = NULL;
        if (k == last_key) {
            at = last; /* the same object as the row before: the same key */
        } else {
            Py_INCREF(k); /* held while its hash or equality may run Python code */
            at = PyDict_GetItemWithError(out, k);
            if (at == NULL && !PyErr_Occurred()) {
                at = PyList_New(0);
                if (at != NULL && PyDict_SetItem(out, k, at) < 0) Py_CLEAR(at);
                Py_XDECREF(at); /* out holds it */
            }
            Py_XSETREF(last_key, k);
            last = at;
        }
        PyObject *num = at == NULL ? NULL : PyLong_FromSsize_t(i);
        if (num == NULL || PyList_Append(at, num) < 0) {
            Py_XDECREF(num);
            Py_XDECREF(last_key);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(num);
    }
    Py_XDECREF(last_key);
    return out;
}

/* An int64 column of a buffer. */
static int int64s(PyObject *o, Py_buffer *b) {
    if (PyObject_GetBuffer(o, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (b->itemsize != 8 || b->format == NULL || (strcmp(b->format, "q") != 0 && strcmp(b->format, "l") != 0)) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_TypeError, "columns must be int64 buffers (array('q'))");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(byte_counts_doc,
"byte_counts(delta, pair, slot) -> (allocs, zeros, allocated, unpaired_frees, live_at_end, inside) or None\n\n"
"One pass over a memory timeline's int64 columns (array('q'), of one length): the allocations\n"
"(delta > 0), the events of no size, the bytes allocated, the frees of no allocation (delta < 0,\n"
"pair < 0), the allocations never freed (delta > 0, pair < 0), and the allocations inside some call\n"
"(slot >= 0) as the bytes of an array('q') of their indices. None when the bytes allocated do\n"
"not fit in int64 (columns.byte_counts then adds them as Python ints).");

static PyObject *byte_counts(PyObject *self, PyObject *args) {
    PyObject *od, *op, *os, *result = NULL, *inside = NULL;
    Py_buffer bd = {0}, bp = {0}, bs = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &od, &op, &os)) return NULL;
    if (int64s(od, &bd) < 0) return NULL;
    if (int64s(op, &bp) < 0) goto done;
    if (int64s(os, &bs) < 0) goto done;
    if (bp.len != bd.len || bs.len != bd.len) {
        PyErr_SetString(PyExc_ValueError, "columns of mismatched lengths");
        goto done;
    }
    Py_ssize_t n = bd.len / 8, allocs = 0, zeros = 0, unpaired = 0, live_end = 0, m = 0;
    const int64_t *d = bd.buf, *pr = bp.buf, *sl = bs.buf;
    int64_t allocated = 0;
    int overflow = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (d[i] > 0) {
            allocs++;
            overflow |= __builtin_add_overflow(allocated, d[i], &allocated);
            live_end += pr[i] < 0;
            m += sl[i] >= 0;
        } else if (d[i] == 0) {
            zeros++;
        } else {
            unpaired += pr[i] < 0;
        }
    }
    if (overflow) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    inside = PyBytes_FromStringAndSize(NULL, m * 8);
    if (inside == NULL) goto done;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(inside);
    for (Py_ssize_t i = 0, k = 0; i < n; i++)
        if (d[i] > 0 && sl[i] >= 0) at[k++] = i;
    result = Py_BuildValue("(nnLnnO)", allocs, zeros, (long long)allocated, unpaired, live_end, inside);
done:
    Py_XDECREF(inside);
    if (bd.buf != NULL) PyBuffer_Release(&bd);
    if (bp.buf != NULL) PyBuffer_Release(&bp);
    if (bs.buf != NULL) PyBuffer_Release(&bs);
    return result;
}

PyDoc_STRVAR(masked_sums_doc,
"masked_sums(mask, keys, values) -> (total, sums)\n\n"
"Over the rows whose mask byte is not 0, in row order: the sum of values[row] from 0.0, and key\n"
"-> the sum of values[row] from 0.0 over the rows of that key (keys[row], a list), keys in order\n"
"of first appearance. mask: bytes of one length with keys and values (float64).");

static PyObject *masked_sums(PyObject *self, PyObject *args) {
    PyObject *omask, *keys, *ovals, *index = NULL, *order = NULL, *out = NULL, *result = NULL, *last_key = NULL;
    Py_buffer bm = {0}, bv = {0};
    double *acc = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!O", &omask, &PyList_Type, &keys, &ovals)) return NULL;
    if (PyObject_GetBuffer(omask, &bm, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (doubles(ovals, &bv) < 0) goto done;
    Py_ssize_t n = bm.len;
    if (bv.len != n * 8 || PyList_GET_SIZE(keys) != n) {
        PyErr_SetString(PyExc_ValueError, "mask, keys and values of mismatched lengths");
        goto done;
    }
    index = PyDict_New(); /* key -> its number */
    order = PyList_New(0); /* the keys by number */
    acc = PyMem_Malloc(sizeof(double) * 16);
    Py_ssize_t cap = 16, last = -1; /* last: last_key's number; last_key a reference of our own, as a key's
                                      * hash or equality may change the list */
    if (index == NULL || order == NULL || acc == NULL) goto done;
    const unsigned char *m = bm.buf;
    const double *v = bv.buf;
    double total = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!m[i]) continue;
        total += v[i];
        if (i >= PyList_GET_SIZE(keys)) {
            PyErr_SetString(PyExc_ValueError, "keys changed length");
            goto done;
        }
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (key != last_key) { /* a step's ops are runs: most rows reuse the last key */
            PyObject *at = PyDict_GetItemWithError(index, key);
            if (at != NULL) {
                last = PyLong_AsSsize_t(at);
            } else {
                if (PyErr_Occurred()) goto done;
                last = PyList_GET_SIZE(order);
                if (last == cap) {
                    double *grown = PyMem_Realloc(acc, sizeof(double) * (size_t)(cap *= 2));
                    if (grown == NULL) goto done;
                    acc = grown;
                }
                acc[last] = 0.0;
                PyObject *num = PyLong_FromSsize_t(last);
                int bad = num == NULL || PyDict_SetItem(index, key, num) < 0 || PyList_Append(order, key) < 0;
                Py_XDECREF(num);
                if (bad) goto done;
            }
            Py_XSETREF(last_key, Py_NewRef(key));
        }
        acc[last] += v[i];
    }
    out = PyDict_New();
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(order); k++) {
        PyObject *f = PyFloat_FromDouble(acc[k]);
        int bad = f == NULL || PyDict_SetItem(out, PyList_GET_ITEM(order, k), f) < 0;
        Py_XDECREF(f);
        if (bad) goto done;
    }
    result = Py_BuildValue("(dO)", total, out);
done:
    Py_XDECREF(last_key);
    Py_XDECREF(out);
    Py_XDECREF(index);
    Py_XDECREF(order);
    PyMem_Free(acc);
    PyBuffer_Release(&bm);
    if (bv.buf != NULL) PyBuffer_Release(&bv);
    return result;
}

PyDoc_STRVAR(nonnegative_doc,
"nonnegative(values) -> list\n\n"
"The positions, ascending, of the items of the list values (ints) that are >= 0.");

static PyObject *nonnegative(PyObject *self, PyObject *args) {
    PyObject *values, *out;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &values)) return NULL;
    out = PyList_New(0);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (!PyLong_CheckExact(v)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "values must be ints");
            return NULL;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow < 0 || (overflow == 0 && x < 0)) continue;
        PyObject *num = PyLong_FromSsize_t(i);
        if (num == NULL || PyList_Append(out, num) < 0) {
            Py_XDECREF(num);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(num);
    }
    return out;
}

PyDoc_STRVAR(picked_doc,
"picked(rows, keys, wanted, values) -> list\n\n"
"values[row] (float64) for each row (a list of indices into keys, a list) whose key is in the\n"
"set or frozenset wanted, in row order.");

static PyObject *picked(PyObject *self, PyObject *args) {
    PyObject *rows, *keys, *wanted, *ovals, *out = NULL;
    Py_buffer bv = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyList_Type, &rows, &PyList_Type, &keys, &wanted, &ovals)) return NULL;
    if (!PyAnySet_Check(wanted)) {
        PyErr_SetString(PyExc_TypeError, "wanted must be a set or frozenset");
        return NULL;
    }
    if (doubles(ovals, &bv) < 0) return NULL;
    const double *v = bv.buf;
    Py_ssize_t nv = bv.len / 8;
    out = PyList_New(0);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(rows); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(rows, k));
        if (i == -1 && PyErr_Occurred()) goto fail;
        if (i < 0 || i >= PyList_GET_SIZE(keys) || i >= nv) {
            PyErr_SetString(PyExc_IndexError, "a row outside the columns");
            goto fail;
        }
        PyObject *key = Py_NewRef(PyList_GET_ITEM(keys, i)); /* its hash may run code that changes keys */
        int in = PySet_Contains(wanted, key);
        Py_DECREF(key);
        if (in < 0) goto fail;
        if (!in) continue;
        PyObject *f = PyFloat_FromDouble(v[i]);
        if (f == NULL || PyList_Append(out, f) < 0) {
            Py_XDECREF(f);
            goto fail;
        }
        Py_DECREF(f);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&bv);
    return out;
}

/* (address, stream, position) of one allocation event, sorted (merge_sort.h) so that the events of
 * one address and stream come together, in file order. */
typedef struct {
    int64_t addr, stream;
    Py_ssize_t i;
} AddrItem;

static inline int addr_before(const AddrItem *a, const AddrItem *b) {
    if (a->addr != b->addr) return a->addr < b->addr;
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->i < b->i;
}

MERGE_SORT(sort_addr_items, AddrItem, addr_before)

PyDoc_STRVAR(pairs_doc,
"pairs(delta, addr, stream) -> bytes\n\n"
"Each allocation (delta > 0) paired with the next free (delta < 0) of its address on its stream,\n"
"as memory.timeline.Timeline._pair's loop pairs them (a later allocation of an address still open\n"
"takes its place): the bytes of an array('q'), the pair's index or -1, over int64 columns of one\n"
"length. Sorting, not hashing, brings an address's events together, so no file can make it slow.");

static PyObject *pairs(PyObject *self, PyObject *args) {
    PyObject *od, *oa, *os, *result = NULL;
    Py_buffer bd = {0}, ba = {0}, bs = {0};
    AddrItem *items = NULL, *tmp = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &od, &oa, &os)) return NULL;
    if (int64s(od, &bd) < 0) return NULL;
    if (int64s(oa, &ba) < 0) goto done;
    if (int64s(os, &bs) < 0) goto done;
    if (ba.len != bd.len || bs.len != bd.len) {
        PyErr_SetString(PyExc_ValueError, "columns of mismatched lengths");
        goto done;
    }
    Py_ssize_t n = bd.len / 8, m = 0;
    const int64_t *d = bd.buf, *ad = ba.buf, *st = bs.buf;
    result = PyBytes_FromStringAndSize(NULL, n * 8);
    items = PyMem_Malloc(sizeof(AddrItem) * (size_t)(n + 1));
    tmp = PyMem_Malloc(sizeof(AddrItem) * (size_t)(n + 1));
    if (result == NULL || items == NULL || tmp == NULL) {
        if (result != NULL) PyErr_NoMemory();
        Py_CLEAR(result);
        goto done;
    }
    int64_t *pair = (int64_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        pair[i] = -1;
        if (d[i] != 0) items[m++] = (AddrItem){ad[i], st[i], i};
    }
    sort_addr_items(items, m, tmp);
    /* Per address and stream, in file order: the open allocation, if any, pairs with the next free. */
    Py_ssize_t open = -1;
    for (Py_ssize_t k = 0; k < m; k++) {
        if (k > 0 && (items[k].addr != items[k - 1].addr || items[k].stream != items[k - 1].stream)) open = -1;
        Py_ssize_t i = items[k].i;
        if (d[i] > 0) {
            open = i;
        } else if (open >= 0) {
            pair[i] = open;
            pair[open] = i;
            open = -1;
        }
    }
    Py_END_ALLOW_THREADS
done:
    PyMem_Free(items);
    PyMem_Free(tmp);
    if (bd.buf != NULL) PyBuffer_Release(&bd);
    if (ba.buf != NULL) PyBuffer_Release(&ba);
    if (bs.buf != NULL) PyBuffer_Release(&bs);
    return result;
}

static PyMethodDef methods[] = {
    {"pairs", pairs, METH_VARARGS, pairs_doc},
    {"picked", picked, METH_VARARGS, picked_doc},
    {"nonnegative", nonnegative, METH_VARARGS, nonnegative_doc},
    {"masked_sums", masked_sums, METH_VARARGS, masked_sums_doc},
    {"byte_counts", byte_counts, METH_VARARGS, byte_counts_doc},
    {"positions", positions, METH_VARARGS, positions_doc},
    {"factorize", factorize, METH_VARARGS, factorize_doc},
    {"sums", sums, METH_VARARGS, sums_doc},
    {"spans", spans, METH_VARARGS, spans_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns", "Grouped sums, spans and positions over op columns, at C speed (see columns.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
