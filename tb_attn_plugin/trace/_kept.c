/* The per-event work over decoded events at C speed: keeping them (events._Kept) and, for link,
 * reading their threads, times and args as columns.
 *
 * After msgspec decodes a chunk, every kept event is checked for plausible times, its repeated
 * strings and ids are replaced by one shared object each, and the shapes of ops nobody reads are
 * dropped. In Python that was a few attribute reads and writes per event, a fifth of the time of
 * a big trace. These functions do exactly what the Python code beside them in events.py does
 * (the tests compare the two), through the ordinary attribute protocol, so they hold for any
 * object with those attributes and never assume msgspec's layout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

static PyObject *s_ph, *s_cat, *s_name, *s_pid, *s_tid, *s_ts, *s_dur, *s_args;
static PyObject *s_dims, *s_types, *s_concrete, *s_strides;
#define N_SHAPE_FIELDS 4 /* dims_raw, types_raw, concrete_raw, strides_raw */

/* lo < v < hi (lo <= v when lo_closed), as Python compares: NaN is never inside. Returns 1, 0, or -1. */
static int within(PyObject *v, double lo, double hi, int lo_closed) {
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        return (lo_closed ? lo <= x : lo < x) && x < hi;
    }
    /* Not a float (an int, say, from an Event built in Python): compare as Python would. */
    PyObject *l = PyFloat_FromDouble(lo), *h = PyFloat_FromDouble(hi);
    int a = -1, b = -1;
    if (l != NULL && h != NULL) {
        a = PyObject_RichCompareBool(l, v, lo_closed ? Py_LE : Py_LT);
        if (a == 1) b = PyObject_RichCompareBool(v, h, Py_LT);
    }
    Py_XDECREF(l);
    Py_XDECREF(h);
    return a < 0 ? -1 : (a == 0 ? 0 : b);
}

/* within() of the attribute */
static int attr_within(PyObject *o, PyObject *attr, double lo, double hi, int lo_closed) {
    PyObject *v = PyObject_GetAttr(o, attr);
    if (v == NULL) return -1;
    int r = within(v, lo, hi, lo_closed);
    Py_DECREF(v);
    return r;
}

/* o.attr = shared.setdefault(o.attr, o.attr) */
static int share_attr(PyObject *o, PyObject *attr, PyObject *shared) {
    PyObject *v = PyObject_GetAttr(o, attr);
    if (v == NULL) return -1;
    PyObject *s = PyDict_SetDefault(shared, v, v); /* borrowed */
    int rc = 0;
    if (s == NULL) rc = -1;
    else if (s != v) rc = PyObject_SetAttr(o, attr, s);
    Py_DECREF(v);
    return rc;
}

/* Where a type keeps its plain object fields (ph, cat, name, pid, tid, ts, dur): the offsets of
 * their member descriptors, as __slots__ and msgspec Structs declare them. Found from the type's
 * own descriptors (never assumed); a type without such fields takes the attribute protocol. The
 * slots are what that protocol reads and writes for these types, only without its lookups. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[7];
} Layout;

static int layout_of(PyTypeObject *t, PyObject **attrs, int n, Layout *L) {
    L->type = NULL;
    for (int k = 0; k < n; k++) {
        PyObject *d = PyObject_GetAttr((PyObject *)t, attrs[k]);
        if (d == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type);
        if (ok) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            ok = m->type == T_OBJECT_EX && !(m->flags & READONLY);
            L->off[k] = m->offset;
        }
        Py_DECREF(d);
        if (!ok) return 0;
    }
    L->type = t;
    return 1;
}

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* keep_sane's work on one event through its slots: 1 kept, 0 insane, -1 error, 2 a slot is empty
 * (the caller takes the attribute protocol, which raises as Python would). */
static int sane_by_slots(PyObject *e, const Layout *L, PyObject *shared, double max_ts, double max_dur) {
    for (int k = 0; k < 7; k++)
        if (SLOT(e, L->off[k]) == NULL) return 2;
    int ok = within(SLOT(e, L->off[5]), -max_ts, max_ts, 0);
    if (ok == 1) ok = within(SLOT(e, L->off[6]), 0.0, max_dur, 1);
    if (ok <= 0) return ok;
    for (int k = 0; k < 5; k++) {
        PyObject *v = SLOT(e, L->off[k]);
        PyObject *s = PyDict_SetDefault(shared, v, v); /* borrowed */
        if (s == NULL) return -1;
        if (s != v) {
            Py_INCREF(s);
            SLOT(e, L->off[k]) = s;
            Py_DECREF(v);
        }
    }
    return 1;
}

PyDoc_STRVAR(keep_sane_doc,
"keep_sane(events, shared, max_ts, max_dur) -> (kept, insane)\n\n"
"The events whose ts lies in (-max_ts, max_ts) and whose dur lies in [0, max_dur) (NaN in\n"
"neither), in order, with how many were left out. Each kept event's ph, cat, name, pid and tid\n"
"are replaced by shared.setdefault(value, value).");

static PyObject *keep_sane(PyObject *self, PyObject *args) {
    PyObject *events, *shared, *kept = NULL;
    double max_ts, max_dur;
    Py_ssize_t insane = 0;
    PyObject *attrs[5] = {s_ph, s_cat, s_name, s_pid, s_tid};
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!dd", &PyList_Type, &events, &PyDict_Type, &shared, &max_ts, &max_dur))
        return NULL;
    PyObject *slot_attrs[7] = {s_ph, s_cat, s_name, s_pid, s_tid, s_ts, s_dur};
    Layout L = {0};
    kept = PyList_New(0);
    if (kept == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        if (Py_TYPE(e) != L.type && i == 0) layout_of(Py_TYPE(e), slot_attrs, 7, &L);
        if (Py_TYPE(e) == L.type) {
            int got = sane_by_slots(e, &L, shared, max_ts, max_dur);
            if (got < 0) goto fail;
            if (got == 0) {
                insane++;
                continue;
            }
            if (got == 1) {
                if (PyList_Append(kept, e) < 0) goto fail;
                continue;
            }
        }
        int ok = attr_within(e, s_ts, -max_ts, max_ts, 0);
        if (ok == 1) ok = attr_within(e, s_dur, 0.0, max_dur, 1);
        if (ok < 0) goto fail;
        if (!ok) {
            insane++;
            continue;
        }
        for (int k = 0; k < 5; k++)
            if (share_attr(e, attrs[k], shared) < 0) goto fail;
        if (PyList_Append(kept, e) < 0) goto fail;
    }
    return Py_BuildValue("(Nn)", kept, insane);
fail:
    Py_DECREF(kept);
    return NULL;
}

/* a.attr = raw_type(bytes(a.attr)) unless it is null */
static int copy_raw(PyObject *a, PyObject *attr, PyObject *null, PyObject *raw_type) {
    PyObject *v = PyObject_GetAttr(a, attr);
    if (v == NULL) return -1;
    int rc = 0;
    if (v != null) {
        PyObject *b = PyBytes_FromObject(v);
        PyObject *r = b == NULL ? NULL : PyObject_CallOneArg(raw_type, b);
        rc = r == NULL ? -1 : PyObject_SetAttr(a, attr, r);
        Py_XDECREF(b);
        Py_XDECREF(r);
    }
    Py_DECREF(v);
    return rc;
}

PyDoc_STRVAR(detach_shapes_doc,
"detach_shapes(ops, keep, cache, null, raw_type) -> None\n\n"
"For each op whose args hold any of dims_raw, types_raw, concrete_raw, strides_raw other than null: when\n"
"keep(op.name) (remembered in cache, name -> bool), each such field becomes\n"
"raw_type(bytes(field)), a copy that does not hold the decoded chunk; else all four become null.");

static PyObject *detach_shapes(PyObject *self, PyObject *args) {
    PyObject *ops, *keep, *cache, *null, *raw_type;
    PyObject *fields[N_SHAPE_FIELDS] = {s_dims, s_types, s_concrete, s_strides};
    (void)self;
    PyObject *ev_attrs[2] = {s_args, s_name};
    Layout EL = {0}, AL = {0};
    if (!PyArg_ParseTuple(args, "O!OO!OO", &PyList_Type, &ops, &keep, &PyDict_Type, &cache, &null, &raw_type))
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ops); i++) {
        PyObject *e = PyList_GET_ITEM(ops, i);
        if (i == 0) layout_of(Py_TYPE(e), ev_attrs, 2, &EL);
        if (Py_TYPE(e) == EL.type) {
            /* The common case through the slots: shapes on an op whose name the cache already
             * judged not worth keeping are dropped in place; anything else takes the path below. */
            PyObject *a = SLOT(e, EL.off[0]), *name = SLOT(e, EL.off[1]);
            if (a != NULL && a != Py_None && AL.type == NULL) layout_of(Py_TYPE(a), fields, N_SHAPE_FIELDS, &AL);
            if (a == Py_None) continue;
            if (a != NULL && name != NULL && Py_TYPE(a) == AL.type) {
                PyObject **f[N_SHAPE_FIELDS] = {&SLOT(a, AL.off[0]), &SLOT(a, AL.off[1]), &SLOT(a, AL.off[2]),
                                                &SLOT(a, AL.off[3])};
                if (*f[0] == NULL || *f[1] == NULL || *f[2] == NULL || *f[3] == NULL) goto generic;
                if (*f[0] == null && *f[1] == null && *f[2] == null && *f[3] == null) continue;
                PyObject *verdict = PyDict_GetItemWithError(cache, name); /* borrowed */
                if (verdict == NULL && PyErr_Occurred()) return NULL;
                if (verdict == Py_False) {
                    for (int k = 0; k < N_SHAPE_FIELDS; k++) {
                        PyObject *old = *f[k];
                        Py_INCREF(null);
                        *f[k] = null;
                        Py_DECREF(old);
                    }
                    continue;
                }
            }
        }
    generic:;
        PyObject *a = PyObject_GetAttr(e, s_args);
        if (a == NULL) return NULL;
        int any = 0, rc = 0;
        if (a != Py_None) {
            for (int k = 0; k < N_SHAPE_FIELDS && !any && rc == 0; k++) {
                PyObject *v = PyObject_GetAttr(a, fields[k]);
                if (v == NULL) rc = -1;
                else {
                    any = v != null;
                    Py_DECREF(v);
                }
            }
        }
        if (any && rc == 0) {
            PyObject *name = PyObject_GetAttr(e, s_name);
            PyObject *verdict = NULL;
            int yes = -1;
            if (name != NULL) {
                verdict = PyDict_GetItemWithError(cache, name); /* borrowed */
                if (verdict != NULL) {
                    yes = PyObject_IsTrue(verdict);
                } else if (!PyErr_Occurred()) {
                    PyObject *r = PyObject_CallOneArg(keep, name);
                    if (r != NULL) {
                        yes = PyObject_IsTrue(r);
                        if (yes >= 0 && PyDict_SetItem(cache, name, yes ? Py_True : Py_False) < 0) yes = -1;
                        Py_DECREF(r);
                    }
                }
                Py_DECREF(name);
            }
            if (yes < 0) rc = -1;
            for (int k = 0; k < N_SHAPE_FIELDS && rc == 0; k++)
                rc = yes ? copy_raw(a, fields[k], null, raw_type) : PyObject_SetAttr(a, fields[k], null);
        }
        Py_DECREF(a);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* e.attr through slot k of layout L when e's type has it, else the attribute protocol. New reference. */
static PyObject *get_field(PyObject *e, const Layout *L, int k, PyObject *attr) {
    if (Py_TYPE(e) == L->type) {
        PyObject *v = SLOT(e, L->off[k]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(e, attr);
}

PyDoc_STRVAR(columns_doc,
"columns(events[, index, keys]) -> (thread, keys, ts, dur) or None\n\n"
"The events' threads and times as columns. keys: each distinct (pid, tid) in order of first\n"
"appearance, as a dict keys those tuples (index, a dict, and keys, a list, when given, number the\n"
"threads on from an earlier call's and are extended in place: columns gathered chunk by chunk);\n"
"thread[i]: event i's index into keys (bytes of an\n"
"array(\"q\")); ts, dur: its start and duration (bytes of an array(\"d\")). None when any ts or dur\n"
"is not a float, or is NaN (link's Python loop then decides, as it does for such events).");

static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *list, *events = NULL, *index = NULL, *keys = NULL, *th = NULL, *tb = NULL, *db = NULL;
    PyObject *last_pid = NULL, *last_tid = NULL, *result = NULL;
    Py_ssize_t last = -1;
    (void)self;
    PyObject *given_index = NULL, *given_keys = NULL;
    if (!PyArg_ParseTuple(args, "O!|O!O!", &PyList_Type, &list, &PyDict_Type, &given_index, &PyList_Type, &given_keys))
        return NULL;
    if ((given_index == NULL) != (given_keys == NULL) || (given_index && PyDict_GET_SIZE(given_index) != PyList_GET_SIZE(given_keys))) {
        PyErr_SetString(PyExc_ValueError, "index and keys go together, one entry per key");
        return NULL;
    }
    events = PySequence_Tuple(list); /* attribute hooks cannot change its length under us */
    if (events == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(events);
    index = given_index ? Py_NewRef(given_index) : PyDict_New();
    keys = given_keys ? Py_NewRef(given_keys) : PyList_New(0);
    th = PyBytes_FromStringAndSize(NULL, n * 8);
    tb = PyBytes_FromStringAndSize(NULL, n * 8);
    db = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!index || !keys || !th || !tb || !db) goto done;
    int64_t *thv = (int64_t *)PyBytes_AS_STRING(th);
    double *tv = (double *)PyBytes_AS_STRING(tb), *dv = (double *)PyBytes_AS_STRING(db);
    PyObject *attrs[4] = {s_pid, s_tid, s_ts, s_dur};
    Layout L = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(events, i);
        if (i == 0) layout_of(Py_TYPE(e), attrs, 4, &L);
        PyObject *v[4] = {NULL, NULL, NULL, NULL};
        int ok = 1;
        for (int k = 0; k < 4 && ok; k++) ok = (v[k] = get_field(e, &L, k, attrs[k])) != NULL;
        if (ok && (!PyFloat_CheckExact(v[2]) || !PyFloat_CheckExact(v[3])
                   || PyFloat_AS_DOUBLE(v[2]) != PyFloat_AS_DOUBLE(v[2])
                   || PyFloat_AS_DOUBLE(v[3]) != PyFloat_AS_DOUBLE(v[3]))) {
            for (int k = 0; k < 4; k++) Py_XDECREF(v[k]);
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (ok) {
            tv[i] = PyFloat_AS_DOUBLE(v[2]);
            dv[i] = PyFloat_AS_DOUBLE(v[3]);
            /* Consecutive events of one thread share their pid and tid objects (_Kept shares them). */
            if (v[0] != last_pid || v[1] != last_tid) {
                PyObject *key = PyTuple_Pack(2, v[0], v[1]);
                PyObject *at = key == NULL ? NULL : PyDict_GetItemWithError(index, key); /* borrowed */
                if (at != NULL) {
                    last = PyLong_AsSsize_t(at);
                } else if (key != NULL && !PyErr_Occurred()) {
                    last = PyList_GET_SIZE(keys);
                    PyObject *num = PyLong_FromSsize_t(last);
                    ok = num != NULL && PyDict_SetItem(index, key, num) == 0 && PyList_Append(keys, key) == 0;
                    Py_XDECREF(num);
                } else {
                    ok = 0;
                }
                Py_XDECREF(key);
                Py_XSETREF(last_pid, Py_NewRef(v[0]));
                Py_XSETREF(last_tid, Py_NewRef(v[1]));
            }
            thv[i] = last;
        }
        for (int k = 0; k < 4; k++) Py_XDECREF(v[k]);
        if (!ok) goto done;
    }
    result = PyTuple_Pack(4, th, keys, tb, db);
done:
    Py_XDECREF(last_pid);
    Py_XDECREF(last_tid);
    Py_XDECREF(events);
    Py_XDECREF(index);
    Py_XDECREF(keys);
    Py_XDECREF(th);
    Py_XDECREF(tb);
    Py_XDECREF(db);
    return result;
}

PyDoc_STRVAR(arg_values_doc,
"arg_values(events, attr[, base]) -> (indices, values)\n\n"
"The events whose args is not None and whose args.<attr> is not None: their positions (plus base)\n"
"and those values, two lists in order.");

static PyObject *arg_values(PyObject *self, PyObject *args) {
    PyObject *list, *attr, *events, *idx = NULL, *vals = NULL, *result = NULL;
    (void)self;
    Py_ssize_t base = 0;
    if (!PyArg_ParseTuple(args, "O!U|n", &PyList_Type, &list, &attr, &base)) return NULL;
    events = PySequence_Tuple(list);
    if (events == NULL) return NULL;
    idx = PyList_New(0);
    vals = PyList_New(0);
    if (!idx || !vals) goto done;
    PyObject *ev_attrs[1] = {s_args}, *a_attrs[1] = {attr};
    Layout EL = {0}, AL = {0};
    int args_tried = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(events); i++) {
        PyObject *e = PyTuple_GET_ITEM(events, i);
        if (i == 0) layout_of(Py_TYPE(e), ev_attrs, 1, &EL);
        PyObject *a = get_field(e, &EL, 0, s_args);
        if (a == NULL) goto done;
        if (a == Py_None) {
            Py_DECREF(a);
            continue;
        }
        if (!args_tried) {
            layout_of(Py_TYPE(a), a_attrs, 1, &AL);
            args_tried = 1;
        }
        PyObject *v = get_field(a, &AL, 0, attr);
        Py_DECREF(a);
        if (v == NULL) goto done;
        int ok = 1;
        if (v != Py_None) {
            PyObject *num = PyLong_FromSsize_t(base + i);
            ok = num != NULL && PyList_Append(idx, num) == 0 && PyList_Append(vals, v) == 0;
            Py_XDECREF(num);
        }
        Py_DECREF(v);
        if (!ok) goto done;
    }
    result = PyTuple_Pack(2, idx, vals);
done:
    Py_DECREF(events);
    Py_XDECREF(idx);
    Py_XDECREF(vals);
    return result;
}

static PyMethodDef methods[] = {
    {"keep_sane", keep_sane, METH_VARARGS, keep_sane_doc},
    {"detach_shapes", detach_shapes, METH_VARARGS, detach_shapes_doc},
    {"columns", columns, METH_VARARGS, columns_doc},
    {"arg_values", arg_values, METH_VARARGS, arg_values_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kept",
    "Per-event work over decoded trace events at C speed: keeping them (events._Kept), reading them as columns (link).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__kept(void) {
    const char *names[] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "dims_raw", "types_raw",
                           "concrete_raw", "strides_raw"};
    PyObject **slots[] = {&s_ph, &s_cat, &s_name, &s_pid, &s_tid, &s_ts, &s_dur, &s_args, &s_dims, &s_types,
                          &s_concrete, &s_strides};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *slots[i] = PyUnicode_InternFromString(names[i]);
        if (*slots[i] == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
