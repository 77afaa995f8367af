/* Reads a CUDA memory snapshot pickle into columns, a window of the file at a time.
 *
 * A snapshot of a long history holds a million trace entries, each a dict with a list of frames;
 * as Python objects they take six times the pickle's size. This decoder runs the pickle's opcodes
 * itself, for plain data only (dicts, lists, tuples, strings, bytes, numbers, booleans, None: no
 * global, no persistent id, nothing that could run code), and turns each trace entry (a dict with
 * a string "action", appended to a list) into one row of fixed-width columns as soon as it is
 * complete; its dict and frame list are then freed. Everything else becomes the usual objects.
 * A row keeps two things of its frames: the frame a report shows (the innermost one the caller's
 * classify marks as shown, else the outermost kept one, else the first) and its stack: the frames classify marks as kept
 * (attention functions, ops, autograd nodes), innermost first, interned. classify runs once per
 * distinct frame; frame dicts torch shares are looked up by identity.
 *
 * A pickle no pickler writes whose cost would be far beyond its size raises Refused: a memo index
 * beyond the objects stored so far (the unpickler would zero-fill a table that large), a trace entry
 * referenced twice (torch writes each once; a reference costs 2 bytes, a row 61).
 *
 * It only speeds up the common case. On anything it does not handle plainly (an opcode outside
 * that subset, a damaged or truncated stream) it raises Unsupported and
 * the caller loads the file with the plain unpickler (memory/safe_pickle.py), which judges it and
 * says what is wrong.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define ADDR_MASK 0x7fffffffffffffffULL /* as memory/timeline.py: addresses stored signed */
#define MAX_ACTIONS 30000
#define MEMO_SLACK 1024 /* memo indexes allowed beyond the number of objects stored so far */

static PyObject *Unsupported;
static PyObject *Refused;   /* a pickle no pickler writes that would cost far more than its size: never retried */
static PyObject *Tombstone; /* memo slot of an entry already turned into a row */
static PyObject *TokenTag;  /* (TokenTag, frame, stack): memo slot of a frame list already read */
#define SHOWN 1 /* classify's bits: a frame a report may show */
#define KEPT 2  /* a frame kept in the row's stack */
#define PYTHON 4 /* a Python frame: kept too while the distinct stacks are fewer than MAX_PYTHON_STACKS */
#define MAX_KEPT 64
#define MAX_PYTHON_STACKS 65536 /* beyond: a history of ever-new stacks keeps its rule frames only (memory) */

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int buf_put(Buf *b, const void *x, Py_ssize_t k) {
    if (b->n + k > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->n + k) cap *= 2;
        char *p = PyMem_Realloc(b->p, (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, x, (size_t)k);
    b->n += k;
    return 0;
}

enum { C_GROUP, C_ACTION, C_SIZE, C_ADDR, C_STREAM, C_TIME, C_TKIND, C_DFREE, C_FRAME, C_STACK, N_COLS };
static const char *col_names[N_COLS] = {"group", "action", "size", "addr", "stream", "time_us", "time_kind",
                                        "device_free", "frame", "stack"};

typedef struct {
    PyObject_HEAD
    PyObject **stack;
    Py_ssize_t *smemo;   /* per stack slot: the memo index it was stored at or fetched from, or -1 */
    Py_ssize_t *sframes; /* per stack slot (a dict): memo index of its "frames" value, or -1 */
    Py_ssize_t sn, scap;
    Py_ssize_t *marks;
    Py_ssize_t mn, mcap;
    PyObject **memo;
    Py_ssize_t memo_n, memo_cap, puts;
    PyObject *targets, *last_target;
    PyObject *target_group; /* {address of a list in targets: its group}: a lookup, not a scan per entry */
    Py_ssize_t last_group;
    PyObject *actions, *action_codes;
    PyObject *frames, *frame_codes, *stacks, *stack_codes, *classify;
    Buf fbits;           /* per frame code: classify's bits (one byte) */
    PyObject **pkeys;    /* identity table: frame dicts (held) -> frame code */
    int32_t *pvals;
    Py_ssize_t pcap, pn;
    PyObject *result;
    int stopped;
    Py_ssize_t tokens_pushed, tokens_used, rows;
    Buf col[N_COLS];
    PyObject *k_action, *k_addr, *k_size, *k_stream, *k_time, *k_dfree, *k_frames, *k_filename, *k_line, *k_name;
} Decoder;

static int unsupported(const char *why) {
    PyErr_SetString(Unsupported, why);
    return -1;
}

/* Any error but running out of memory means "not plain": the careful path judges the file. */
static int as_unsupported(void) {
    if (PyErr_ExceptionMatches(PyExc_MemoryError) || PyErr_ExceptionMatches(Unsupported) ||
        PyErr_ExceptionMatches(Refused))
        return -1;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *s = v ? PyObject_Str(v) : NULL;
    PyErr_Format(Unsupported, "%s", s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : "error");
    Py_XDECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    return -1;
}

static int push(Decoder *d, PyObject *o) { /* steals o */
    if (o == NULL) return as_unsupported();
    if (d->sn == d->scap) {
        Py_ssize_t cap = d->scap ? d->scap * 2 : 256;
        PyObject **s = PyMem_Realloc(d->stack, (size_t)cap * sizeof(PyObject *));
        if (s) d->stack = s;
        Py_ssize_t *m = s ? PyMem_Realloc(d->smemo, (size_t)cap * sizeof(Py_ssize_t)) : NULL;
        if (m) d->smemo = m;
        Py_ssize_t *f = m ? PyMem_Realloc(d->sframes, (size_t)cap * sizeof(Py_ssize_t)) : NULL;
        if (f == NULL) {
            Py_DECREF(o);
            PyErr_NoMemory();
            return -1;
        }
        d->sframes = f;
        d->scap = cap;
    }
    d->stack[d->sn] = o;
    d->smemo[d->sn] = -1;
    d->sframes[d->sn] = -1;
    d->sn++;
    return 0;
}

static void pop_to(Decoder *d, Py_ssize_t n) {
    while (d->sn > n) {
        d->sn--;
        Py_DECREF(d->stack[d->sn]);
    }
}

static Py_ssize_t mark_base(Decoder *d) { return d->mn ? d->marks[d->mn - 1] : 0; }

static int memo_put(Decoder *d, Py_ssize_t idx) {
    if (d->sn == 0) return unsupported("memo put on an empty stack");
    /* A pickler numbers its memo 0, 1, 2, ... (one index per stored object), so an index beyond the
     * number of stores so far (plus slack) is no pickler's: refused, as memo_scan does for the
     * plain unpickler, which would zero-fill a table as large as the index. */
    if (idx < 0 || idx > d->puts + MEMO_SLACK) {
        PyErr_Format(Refused, "memo index %zd after %zd stored objects (a pickler numbers them 0, 1, 2, ...)", idx,
                     d->puts);
        return -1;
    }
    d->puts++;
    if (idx >= d->memo_cap) {
        Py_ssize_t cap = d->memo_cap ? d->memo_cap : 1024;
        while (cap <= idx) cap *= 2;
        PyObject **m = PyMem_Realloc(d->memo, (size_t)cap * sizeof(PyObject *));
        if (m == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(m + d->memo_cap, 0, (size_t)(cap - d->memo_cap) * sizeof(PyObject *));
        d->memo = m;
        d->memo_cap = cap;
    }
    PyObject *o = d->stack[d->sn - 1];
    Py_INCREF(o);
    Py_XSETREF(d->memo[idx], o);
    if (idx >= d->memo_n) d->memo_n = idx + 1;
    d->smemo[d->sn - 1] = idx;
    return 0;
}

static int memo_get(Decoder *d, Py_ssize_t idx) {
    if (idx < 0 || idx >= d->memo_n || d->memo[idx] == NULL) return unsupported("memo index not stored");
    PyObject *o = d->memo[idx];
    if (o == Tombstone) {
        /* torch writes each trace entry once; a reference reused would make one entry cost a row each time. */
        PyErr_SetString(Refused, "one trace entry referenced more than once (a snapshot torch writes holds each once)");
        return -1;
    }
    if (PyTuple_CheckExact(o) && PyTuple_GET_SIZE(o) == 3 && PyTuple_GET_ITEM(o, 0) == TokenTag) d->tokens_pushed++;
    Py_INCREF(o);
    if (push(d, o) < 0) return -1;
    d->smemo[d->sn - 1] = idx;
    return 0;
}

static int64_t int_field(PyObject *dict, PyObject *key) {
    PyObject *x = PyDict_GetItemWithError(dict, key);
    if (x == NULL || !PyLong_CheckExact(x)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return (int64_t)v;
}

static Py_ssize_t ptr_slot(Decoder *d, PyObject *f) {
    size_t h = ((size_t)f >> 4) * 0x9E3779B97F4A7C15ULL;
    Py_ssize_t mask = d->pcap - 1, i = (Py_ssize_t)(h & (size_t)mask);
    while (d->pkeys[i] != NULL && d->pkeys[i] != f) i = (i + 1) & mask;
    return i;
}

static int ptr_put(Decoder *d, PyObject *f, int32_t code) {
    if ((d->pn + 1) * 2 > d->pcap) {
        Py_ssize_t old = d->pcap, cap = old ? old * 2 : 1024;
        PyObject **ok = d->pkeys;
        int32_t *ov = d->pvals;
        d->pkeys = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
        d->pvals = PyMem_Calloc((size_t)cap, sizeof(int32_t));
        if (!d->pkeys || !d->pvals) {
            PyMem_Free(d->pkeys);
            PyMem_Free(d->pvals);
            d->pkeys = ok;
            d->pvals = ov;
            PyErr_NoMemory();
            return -1;
        }
        d->pcap = cap;
        for (Py_ssize_t i = 0; i < old; i++)
            if (ok[i] != NULL) {
                Py_ssize_t j = ptr_slot(d, ok[i]);
                d->pkeys[j] = ok[i];
                d->pvals[j] = ov[i];
            }
        PyMem_Free(ok);
        PyMem_Free(ov);
    }
    Py_ssize_t i = ptr_slot(d, f);
    Py_INCREF(f);
    d->pkeys[i] = f;
    d->pvals[i] = code;
    d->pn++;
    return 0;
}

/* The code of frame dict f (-1: not a frame with a string filename), classifying a new one. */
static int frame_code(Decoder *d, PyObject *f, int32_t *out) {
    if (d->pcap) {
        Py_ssize_t i = ptr_slot(d, f);
        if (d->pkeys[i] == f) {
            *out = d->pvals[i];
            return 0;
        }
    }
    *out = -1;
    if (!PyDict_CheckExact(f)) return 0;
    PyObject *fn = PyDict_GetItemWithError(f, d->k_filename);
    if (fn == NULL || !PyUnicode_CheckExact(fn)) return PyErr_Occurred() ? as_unsupported() : 0;
    PyObject *line = PyDict_GetItemWithError(f, d->k_line);
    PyObject *name = PyDict_GetItemWithError(f, d->k_name);
    if (PyErr_Occurred()) return as_unsupported();
    PyObject *key = PyTuple_Pack(3, fn, line ? line : Py_None, name ? name : Py_None);
    if (key == NULL) return -1;
    PyObject *code = PyDict_GetItemWithError(d->frame_codes, key);
    int32_t k;
    if (code == NULL) {
        if (PyErr_Occurred()) { /* an unhashable line or name */
            Py_DECREF(key);
            return as_unsupported();
        }
        Py_ssize_t n = PyList_GET_SIZE(d->frames);
        if (n >= INT32_MAX - 1) {
            Py_DECREF(key);
            return unsupported("too many frames");
        }
        PyObject *bits = PyObject_CallFunctionObjArgs(d->classify, fn, name ? name : Py_None, NULL);
        long bv = bits ? PyLong_AsLong(bits) : -1;
        Py_XDECREF(bits);
        if (bv == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        int8_t b8 = (int8_t)(bv & (SHOWN | KEPT | PYTHON));
        code = PyLong_FromSsize_t(n);
        if (code == NULL || PyDict_SetItem(d->frame_codes, key, code) < 0 || PyList_Append(d->frames, key) < 0 ||
            buf_put(&d->fbits, &b8, 1) < 0) {
            Py_XDECREF(code);
            Py_DECREF(key);
            return -1;
        }
        Py_DECREF(code);
        k = (int32_t)n;
    } else {
        k = (int32_t)PyLong_AsLong(code);
    }
    Py_DECREF(key);
    /* Only dicts something else holds (the memo: torch shares them) go in the identity table, so it
     * never grows with frame dicts that are freed after their entry. */
    if (Py_REFCNT(f) > 1 && ptr_put(d, f, k) < 0) return -1;
    *out = k;
    return 0;
}

/* The row's frame (the innermost SHOWN one, else the outermost KEPT one, else the first) and stack (its KEPT frames, and its
 * PYTHON ones while there is room, innermost first, as an index into stacks; -1 when none). */
static int read_frames(Decoder *d, PyObject *list, int32_t *frame, int32_t *stack) {
    int32_t kept[MAX_KEPT], first = -1, shown = -1, rule = -1;
    int nk = 0;
    int8_t keep = PyDict_GET_SIZE(d->stack_codes) < MAX_PYTHON_STACKS ? (KEPT | PYTHON) : KEPT;
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t k;
        if (frame_code(d, PyList_GET_ITEM(list, i), &k) < 0) return -1;
        if (k < 0) continue;
        int8_t b = d->fbits.p[k];
        if (first < 0) first = k;
        if (shown < 0 && (b & SHOWN)) shown = k;
        if (b & KEPT) rule = k;
        if ((b & keep) && nk < MAX_KEPT) kept[nk++] = k;
    }
    *frame = shown >= 0 ? shown : rule >= 0 ? rule : first;
    *stack = -1;
    if (nk == 0) return 0;
    PyObject *key = PyTuple_New(nk);
    if (key == NULL) return -1;
    for (int i = 0; i < nk; i++) {
        PyObject *x = PyLong_FromLong(kept[i]);
        if (x == NULL) {
            Py_DECREF(key);
            return -1;
        }
        PyTuple_SET_ITEM(key, i, x);
    }
    PyObject *code = PyDict_GetItemWithError(d->stack_codes, key);
    if (code == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        Py_ssize_t m = PyList_GET_SIZE(d->stacks);
        code = m < INT32_MAX - 1 ? PyLong_FromSsize_t(m) : NULL;
        if (code == NULL || PyDict_SetItem(d->stack_codes, key, code) < 0 || PyList_Append(d->stacks, key) < 0) {
            Py_XDECREF(code);
            Py_DECREF(key);
            return code == NULL && !PyErr_Occurred() ? unsupported("too many stacks") : -1;
        }
        Py_DECREF(code);
        *stack = (int32_t)m;
    } else {
        *stack = (int32_t)PyLong_AsLong(code);
    }
    Py_DECREF(key);
    return 0;
}

static PyObject *token_for(int32_t frame, int32_t stack) {
    PyObject *f = PyLong_FromLong(frame), *s = PyLong_FromLong(stack);
    PyObject *t = f && s ? PyTuple_Pack(3, TokenTag, f, s) : NULL;
    Py_XDECREF(f);
    Py_XDECREF(s);
    return t;
}

/* The entry at stack slot ``slot`` becomes a row of group ``list``; its dict is dropped. */
static int to_row(Decoder *d, PyObject *list, Py_ssize_t slot, PyObject *action) {
    PyObject *e = d->stack[slot];
    Py_ssize_t m0 = d->smemo[slot];
    if (m0 >= 0 && m0 < d->memo_n && d->memo[m0] == Tombstone) { /* a copy fetched before its first became a row */
        PyErr_SetString(Refused, "one trace entry referenced more than once (a snapshot torch writes holds each once)");
        return -1;
    }
    int32_t group;
    if (list == d->last_target) {
        group = (int32_t)d->last_group;
    } else {
        /* targets holds each list, so its address names it while the decoder lives. */
        PyObject *addr = PyLong_FromVoidPtr(list);
        if (addr == NULL) return -1;
        PyObject *g = PyDict_GetItemWithError(d->target_group, addr);
        Py_ssize_t k;
        if (g != NULL) {
            k = PyLong_AsSsize_t(g);
        } else {
            k = PyList_GET_SIZE(d->targets);
            PyObject *kv = PyErr_Occurred() ? NULL : PyLong_FromSsize_t(k);
            if (kv == NULL || PyDict_SetItem(d->target_group, addr, kv) < 0 || PyList_Append(d->targets, list) < 0) {
                Py_XDECREF(kv);
                Py_DECREF(addr);
                return -1;
            }
            Py_DECREF(kv);
        }
        Py_DECREF(addr);
        d->last_target = list;
        d->last_group = k;
        group = (int32_t)k;
    }
    PyObject *code = PyDict_GetItemWithError(d->action_codes, action);
    int16_t a;
    if (code == NULL) {
        if (PyErr_Occurred()) return -1;
        Py_ssize_t k = PyList_GET_SIZE(d->actions);
        if (k >= MAX_ACTIONS) return unsupported("too many kinds of action");
        code = PyLong_FromSsize_t(k);
        if (code == NULL || PyDict_SetItem(d->action_codes, action, code) < 0 || PyList_Append(d->actions, action) < 0) {
            Py_XDECREF(code);
            return -1;
        }
        Py_DECREF(code);
        a = (int16_t)k;
    } else {
        a = (int16_t)PyLong_AsLong(code);
    }
    int64_t size = int_field(e, d->k_size), stream = int_field(e, d->k_stream), dfree = int_field(e, d->k_dfree);
    int64_t addr = 0;
    PyObject *x = PyDict_GetItemWithError(e, d->k_addr);
    if (x != NULL && PyLong_CheckExact(x)) {
        unsigned long long u = PyLong_AsUnsignedLongLongMask(x);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return as_unsupported();
        addr = (int64_t)(u & ADDR_MASK);
    }
    /* time_kind 1: a number of any kind (snapshot.py's has_time); time NaN: not a usable one. */
    double t = Py_NAN;
    int8_t tkind = 0;
    x = PyDict_GetItemWithError(e, d->k_time);
    if (x != NULL && (PyLong_Check(x) || PyFloat_Check(x))) {
        tkind = 1;
        if (PyLong_CheckExact(x)) {
            t = PyLong_AsDouble(x);
            if (t == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                t = Py_NAN;
            }
        } else if (PyFloat_CheckExact(x)) {
            t = PyFloat_AS_DOUBLE(x);
        }
    }
    int32_t frame = -1, stack = -1;
    x = PyDict_GetItemWithError(e, d->k_frames);
    if (x != NULL && PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == 3 && PyTuple_GET_ITEM(x, 0) == TokenTag) {
        frame = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(x, 1));
        stack = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(x, 2));
        d->tokens_used++;
    } else if (x != NULL && PyList_CheckExact(x)) {
        if (read_frames(d, x, &frame, &stack) < 0) return -1;
        Py_ssize_t m = d->sframes[slot];
        if (m >= 0 && m < d->memo_n && d->memo[m] == x) {
            /* Another entry may name the same list later: it then gets this row's frame and stack. */
            PyObject *tok = token_for(frame, stack);
            if (tok == NULL) return -1;
            Py_SETREF(d->memo[m], tok);
        }
    }
    if (PyErr_Occurred()) return -1;
    Py_ssize_t m = d->smemo[slot];
    if (m >= 0 && m < d->memo_n && d->memo[m] == e) {
        Py_INCREF(Tombstone);
        Py_SETREF(d->memo[m], Tombstone);
    }
    if (buf_put(&d->col[C_GROUP], &group, 4) < 0 || buf_put(&d->col[C_ACTION], &a, 2) < 0 ||
        buf_put(&d->col[C_SIZE], &size, 8) < 0 || buf_put(&d->col[C_ADDR], &addr, 8) < 0 ||
        buf_put(&d->col[C_STREAM], &stream, 8) < 0 || buf_put(&d->col[C_TIME], &t, 8) < 0 ||
        buf_put(&d->col[C_TKIND], &tkind, 1) < 0 || buf_put(&d->col[C_DFREE], &dfree, 8) < 0 ||
        buf_put(&d->col[C_FRAME], &frame, 4) < 0 || buf_put(&d->col[C_STACK], &stack, 4) < 0)
        return -1;
    d->rows++;
    return 0;
}

static int append_slot(Decoder *d, PyObject *list, Py_ssize_t slot) {
    PyObject *v = d->stack[slot];
    if (PyDict_CheckExact(v)) {
        PyObject *a = PyDict_GetItemWithError(v, d->k_action);
        if (a != NULL && PyUnicode_CheckExact(a)) return to_row(d, list, slot, a);
        if (PyErr_Occurred()) return as_unsupported();
    }
    return PyList_Append(list, v);
}

static void note_frames(Decoder *d, Py_ssize_t dict_slot, Py_ssize_t key_slot) {
    PyObject *k = d->stack[key_slot];
    if (PyUnicode_CheckExact(k) && (k == d->k_frames || PyUnicode_Compare(k, d->k_frames) == 0))
        d->sframes[dict_slot] = d->smemo[key_slot + 1];
}

static inline uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static PyObject *long_from(const unsigned char *p, Py_ssize_t n) {
    if (n == 0) return PyLong_FromLong(0);
    if (n <= 8) {
        uint64_t v = le(p, (int)n);
        if (n < 8 && (p[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n); /* sign-extend */
        return PyLong_FromLongLong((long long)v);
    }
    PyObject *b = PyBytes_FromStringAndSize((const char *)p, n);
    if (b == NULL) return NULL;
    PyObject *kw = Py_BuildValue("{s:O}", "signed", Py_True);
    PyObject *args = kw ? Py_BuildValue("(Os)", b, "little") : NULL;
    PyObject *meth = args ? PyObject_GetAttrString((PyObject *)&PyLong_Type, "from_bytes") : NULL;
    PyObject *r = meth ? PyObject_Call(meth, args, kw) : NULL;
    Py_XDECREF(meth);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(b);
    return r;
}

#define NEED(k)                                     \
    do {                                            \
        if ((Py_ssize_t)(k) > n - pos) goto more;   \
    } while (0)
#define TRY(x)                \
    do {                      \
        if ((x) < 0) goto fail; \
    } while (0)

static PyObject *Decoder_feed(Decoder *d, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, pos = 0;
    while (pos < n && !d->stopped) {
        unsigned char op = s[pos];
        Py_ssize_t len, base;
        switch (op) {
        case 0x80: /* PROTO */
            NEED(2);
            if (s[pos + 1] < 2 || s[pos + 1] > 5) {
                unsupported("pickle protocol");
                goto fail;
            }
            pos += 2;
            break;
        case 0x95: /* FRAME: a length hint */
            NEED(9);
            pos += 9;
            break;
        case '}':
            TRY(push(d, PyDict_New()));
            pos++;
            break;
        case ']':
            TRY(push(d, PyList_New(0)));
            pos++;
            break;
        case ')':
            TRY(push(d, PyTuple_New(0)));
            pos++;
            break;
        case 'N':
            Py_INCREF(Py_None);
            TRY(push(d, Py_None));
            pos++;
            break;
        case 0x88:
        case 0x89:
            TRY(push(d, PyBool_FromLong(op == 0x88)));
            pos++;
            break;
        case 'K':
            NEED(2);
            TRY(push(d, PyLong_FromLong(s[pos + 1])));
            pos += 2;
            break;
        case 'M':
            NEED(3);
            TRY(push(d, PyLong_FromLong((long)le(s + pos + 1, 2))));
            pos += 3;
            break;
        case 'J':
            NEED(5);
            TRY(push(d, PyLong_FromLong((long)(int32_t)(uint32_t)le(s + pos + 1, 4))));
            pos += 5;
            break;
        case 0x8a: /* LONG1 */
            NEED(2);
            len = s[pos + 1];
            NEED(2 + len);
            TRY(push(d, long_from(s + pos + 2, len)));
            pos += 2 + len;
            break;
        case 0x8b: /* LONG4 */
            NEED(5);
            len = (Py_ssize_t)(int32_t)(uint32_t)le(s + pos + 1, 4);
            if (len < 0) {
                unsupported("negative length");
                goto fail;
            }
            NEED(5 + len);
            TRY(push(d, long_from(s + pos + 5, len)));
            pos += 5 + len;
            break;
        case 'G': { /* BINFLOAT: big-endian IEEE 754 */
            NEED(9);
            uint64_t bits = 0;
            for (int i = 1; i <= 8; i++) bits = (bits << 8) | s[pos + i];
            double v;
            memcpy(&v, &bits, 8);
            TRY(push(d, PyFloat_FromDouble(v)));
            pos += 9;
            break;
        }
        case 0x8c: /* SHORT_BINUNICODE */
        case 'X':  /* BINUNICODE */
        case 0x8d: /* BINUNICODE8 */
        case 'C':  /* SHORT_BINBYTES */
        case 'B':  /* BINBYTES */
        case 0x8e: /* BINBYTES8 */ {
            int w = (op == 0x8c || op == 'C') ? 1 : (op == 'X' || op == 'B') ? 4 : 8;
            NEED(1 + w);
            uint64_t l = le(s + pos + 1, w);
            if (l > (uint64_t)PY_SSIZE_T_MAX / 2) {
                unsupported("string length");
                goto fail;
            }
            len = (Py_ssize_t)l;
            NEED(1 + w + len);
            const char *p = (const char *)s + pos + 1 + w;
            int text = op == 0x8c || op == 'X' || op == 0x8d;
            TRY(push(d, text ? PyUnicode_DecodeUTF8(p, len, "surrogatepass") : PyBytes_FromStringAndSize(p, len)));
            pos += 1 + w + len;
            break;
        }
        case '(': /* MARK */
            if (d->mn == d->mcap) {
                Py_ssize_t cap = d->mcap ? d->mcap * 2 : 64;
                Py_ssize_t *m = PyMem_Realloc(d->marks, (size_t)cap * sizeof(Py_ssize_t));
                if (m == NULL) {
                    PyErr_NoMemory();
                    goto fail;
                }
                d->marks = m;
                d->mcap = cap;
            }
            d->marks[d->mn++] = d->sn;
            pos++;
            break;
        case 't': /* TUPLE */
        case 0x85:
        case 0x86:
        case 0x87: {
            if (op == 't') {
                if (d->mn == 0) {
                    unsupported("no mark");
                    goto fail;
                }
                base = d->marks[--d->mn];
            } else {
                base = d->sn - (op - 0x84);
                if (base < mark_base(d)) {
                    unsupported("stack underflow");
                    goto fail;
                }
            }
            PyObject *t = PyTuple_New(d->sn - base);
            if (t == NULL) goto fail;
            for (Py_ssize_t i = base; i < d->sn; i++) {
                Py_INCREF(d->stack[i]);
                PyTuple_SET_ITEM(t, i - base, d->stack[i]);
            }
            pop_to(d, base);
            TRY(push(d, t));
            pos++;
            break;
        }
        case 's': /* SETITEM */
            if (d->sn - 3 < mark_base(d) || !PyDict_CheckExact(d->stack[d->sn - 3])) {
                unsupported("SETITEM without a dict");
                goto fail;
            }
            note_frames(d, d->sn - 3, d->sn - 2);
            if (PyDict_SetItem(d->stack[d->sn - 3], d->stack[d->sn - 2], d->stack[d->sn - 1]) < 0) {
                as_unsupported();
                goto fail;
            }
            pop_to(d, d->sn - 2);
            pos++;
            break;
        case 'u': /* SETITEMS */
            if (d->mn == 0) {
                unsupported("no mark");
                goto fail;
            }
            base = d->marks[--d->mn];
            if (base < 1 || base - 1 < mark_base(d) || (d->sn - base) % 2 || !PyDict_CheckExact(d->stack[base - 1])) {
                unsupported("SETITEMS without a dict");
                goto fail;
            }
            for (Py_ssize_t i = base; i < d->sn; i += 2) {
                note_frames(d, base - 1, i);
                if (PyDict_SetItem(d->stack[base - 1], d->stack[i], d->stack[i + 1]) < 0) {
                    as_unsupported();
                    goto fail;
                }
            }
            pop_to(d, base);
            pos++;
            break;
        case 'a': /* APPEND */
            if (d->sn - 2 < mark_base(d) || !PyList_CheckExact(d->stack[d->sn - 2])) {
                unsupported("APPEND without a list");
                goto fail;
            }
            TRY(append_slot(d, d->stack[d->sn - 2], d->sn - 1));
            pop_to(d, d->sn - 1);
            pos++;
            break;
        case 'e': /* APPENDS */
            if (d->mn == 0) {
                unsupported("no mark");
                goto fail;
            }
            base = d->marks[--d->mn];
            if (base < 1 || base - 1 < mark_base(d) || !PyList_CheckExact(d->stack[base - 1])) {
                unsupported("APPENDS without a list");
                goto fail;
            }
            for (Py_ssize_t i = base; i < d->sn; i++) TRY(append_slot(d, d->stack[base - 1], i));
            pop_to(d, base);
            pos++;
            break;
        case 0x94: /* MEMOIZE */
            TRY(memo_put(d, d->memo_n));
            pos++;
            break;
        case 'q':
            NEED(2);
            TRY(memo_put(d, s[pos + 1]));
            pos += 2;
            break;
        case 'r':
            NEED(5);
            TRY(memo_put(d, (Py_ssize_t)le(s + pos + 1, 4)));
            pos += 5;
            break;
        case 'h':
            NEED(2);
            TRY(memo_get(d, s[pos + 1]));
            pos += 2;
            break;
        case 'j':
            NEED(5);
            TRY(memo_get(d, (Py_ssize_t)le(s + pos + 1, 4)));
            pos += 5;
            break;
        case '.': /* STOP */
            if (d->sn != 1 || d->mn != 0) {
                unsupported("STOP with a stack that is not one value");
                goto fail;
            }
            d->sn = 0;
            d->result = d->stack[0];
            d->stopped = 1;
            pos++;
            break;
        default: {
            char why[64];
            snprintf(why, sizeof why, "opcode 0x%02x", op);
            unsupported(why);
            goto fail;
        }
        }
    }
more:
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

static void clear_memo(Decoder *d) {
    for (Py_ssize_t i = 0; i < d->memo_n; i++) Py_CLEAR(d->memo[i]);
    d->memo_n = 0;
    pop_to(d, 0);
}

/* (object, targets, actions, frames, stacks, {column: bytes}, rows); the decoder is spent afterwards. */
static PyObject *Decoder_result(Decoder *d, PyObject *unused) {
    if (!d->stopped) return PyErr_SetString(Unsupported, "the pickle ends before its STOP"), NULL;
    if (d->tokens_pushed != d->tokens_used)
        return PyErr_SetString(Unsupported, "a frame list shared outside the trace entries"), NULL;
    clear_memo(d); /* frees the frame dicts the entries named */
    PyObject *cols = PyDict_New();
    if (cols == NULL) return NULL;
    for (int i = 0; i < N_COLS; i++) {
        PyObject *b = PyBytes_FromStringAndSize(d->col[i].p ? d->col[i].p : "", d->col[i].n);
        PyMem_Free(d->col[i].p);
        d->col[i].p = NULL;
        d->col[i].n = d->col[i].cap = 0;
        if (b == NULL || PyDict_SetItemString(cols, col_names[i], b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(cols);
            return NULL;
        }
        Py_DECREF(b);
    }
    PyObject *r = Py_BuildValue("(OOOOONn)", d->result, d->targets, d->actions, d->frames, d->stacks, cols, d->rows);
    return r;
}

static int Decoder_init(Decoder *d, PyObject *args, PyObject *kw) {
    PyObject *classify;
    if (!PyArg_ParseTuple(args, "O", &classify)) return -1;
    if (!PyCallable_Check(classify)) return PyErr_SetString(PyExc_TypeError, "classify is not callable"), -1;
    Py_INCREF(classify);
    Py_XSETREF(d->classify, classify);
    d->targets = PyList_New(0);
    d->target_group = PyDict_New();
    d->actions = PyList_New(0);
    d->action_codes = PyDict_New();
    d->frames = PyList_New(0);
    d->frame_codes = PyDict_New();
    d->stacks = PyList_New(0);
    d->stack_codes = PyDict_New();
#define KEY(f, s) (d->f = PyUnicode_InternFromString(s))
    if (!d->targets || !d->target_group || !d->actions || !d->action_codes || !d->frames || !d->frame_codes || !d->stacks ||
        !d->stack_codes || !KEY(k_action, "action") || !KEY(k_addr, "addr") || !KEY(k_size, "size") ||
        !KEY(k_stream, "stream") || !KEY(k_time, "time_us") || !KEY(k_dfree, "device_free") ||
        !KEY(k_frames, "frames") || !KEY(k_filename, "filename") || !KEY(k_line, "line") || !KEY(k_name, "name"))
        return -1;
    d->last_group = -1;
    return 0;
}

static void Decoder_dealloc(Decoder *d) {
    clear_memo(d);
    PyMem_Free(d->memo);
    PyMem_Free(d->stack);
    PyMem_Free(d->smemo);
    PyMem_Free(d->sframes);
    PyMem_Free(d->marks);
    for (Py_ssize_t i = 0; i < d->pcap; i++) Py_XDECREF(d->pkeys[i]);
    PyMem_Free(d->pkeys);
    PyMem_Free(d->pvals);
    PyMem_Free(d->fbits.p);
    for (int i = 0; i < N_COLS; i++) PyMem_Free(d->col[i].p);
    Py_XDECREF(d->result);
    Py_XDECREF(d->targets);
    Py_XDECREF(d->target_group);
    Py_XDECREF(d->actions);
    Py_XDECREF(d->action_codes);
    Py_XDECREF(d->frames);
    Py_XDECREF(d->frame_codes);
    Py_XDECREF(d->stacks);
    Py_XDECREF(d->stack_codes);
    Py_XDECREF(d->classify);
    Py_XDECREF(d->k_action);
    Py_XDECREF(d->k_addr);
    Py_XDECREF(d->k_size);
    Py_XDECREF(d->k_stream);
    Py_XDECREF(d->k_time);
    Py_XDECREF(d->k_dfree);
    Py_XDECREF(d->k_frames);
    Py_XDECREF(d->k_filename);
    Py_XDECREF(d->k_line);
    Py_XDECREF(d->k_name);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyMethodDef Decoder_methods[] = {
    {"feed", (PyCFunction)Decoder_feed, METH_O,
     "feed(buffer) -> bytes used: runs the complete opcodes at the buffer's start; pass the rest again with more"},
    {"result", (PyCFunction)Decoder_result, METH_NOARGS,
     "result() -> (object, targets, actions, frames, stacks, columns, rows) once the pickle's STOP was fed"},
    {NULL, NULL, 0, NULL},
};

static PyObject *Decoder_stopped(Decoder *d, void *unused) { return PyBool_FromLong(d->stopped); }

static PyGetSetDef Decoder_getset[] = {
    {"stopped", (getter)Decoder_stopped, NULL, "whether the pickle's STOP was read", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tb_attn_plugin.memory._snapshot_decode.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Decoder(classify): a snapshot pickle in, trace entries out as columns. classify(filename, name) "
              "-> bits, once per distinct frame: 1, a frame a report may show (a row's frame is the first such, "
              "else its outermost kept one, else its first); 2, a frame kept in the row's stack (interned tuples of frame codes).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_methods = Decoder_methods,
    .tp_getset = Decoder_getset,
};

/* memo_scan(buffer) -> None, or (offset, index, stores): the first memo index (PUT or GET) beyond the
 * number of objects stored before it plus MEMO_SLACK. Runs every opcode of any protocol without
 * building anything, so the plain unpickler (memory/safe_pickle.py) is never handed an index that
 * makes it zero-fill a memo table of gigabytes. Stops quietly at an unknown opcode or the end of the
 * data: the unpickler stops there too. */
static Py_ssize_t line_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t pos) {
    const unsigned char *e = memchr(s + pos, '\n', (size_t)(n - pos));
    return e ? (Py_ssize_t)(e - s) : -1;
}

static PyObject *memo_scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, pos = 0, puts = 0, at = -1;
    long long idx = -1;
    while (pos < n) {
        unsigned char op = s[pos];
        Py_ssize_t arg_at = pos + 1, w = 0, e;
        long long got = -1;
        int put = 0;
        switch (op) {
        case 0x94: got = puts; put = 1; break; /* MEMOIZE */
        case 'q': case 'h': w = 1; break;
        case 'r': case 'j': w = 4; break;
        case 'p': case 'g': /* PUT / GET: a decimal index and a newline */
            e = line_end(s, n, arg_at);
            if (e < 0) goto done;
            got = 0;
            for (Py_ssize_t i = arg_at; i < e; i++) {
                if (s[i] < '0' || s[i] > '9') { if (s[i] == ' ' || s[i] == '\r') continue; goto done; }
                got = got * 10 + (s[i] - '0');
                if (got > ((long long)1 << 40)) break;
            }
            put = op == 'p';
            pos = e + 1;
            break;
        case 'K': case 0x80: case 0x82: w = 1; break;
        case 'M': case 0x83: w = 2; break;
        case 'J': case 0x84: w = 4; break;
        case 'G': case 0x95: w = 8; break;
        case 'I': case 'L': case 'F': case 'S': case 'V': case 'P': /* a newline-terminated argument */
            e = line_end(s, n, arg_at);
            if (e < 0) goto done;
            pos = e + 1;
            continue;
        case 'c': case 'i': /* two lines */
            e = line_end(s, n, arg_at);
            e = e < 0 ? -1 : line_end(s, n, e + 1);
            if (e < 0) goto done;
            pos = e + 1;
            continue;
        case 0x8a: case 'U': case 'C': case 0x8c: case 0x8b: case 'T': case 'X': case 'B': case 0x8d: case 0x8e:
        case 0x96: { /* a length, then that many bytes */
            int lw = (op == 0x8a || op == 'U' || op == 'C' || op == 0x8c) ? 1
                     : (op == 0x8b || op == 'T' || op == 'X' || op == 'B') ? 4 : 8;
            if (arg_at + lw > n) goto done;
            uint64_t l = le(s + arg_at, lw);
            if ((op == 0x8b || op == 'T') && (l & 0x80000000u)) goto done; /* negative: the unpickler refuses */
            if (l > (uint64_t)(n - arg_at - lw)) goto done;
            pos = arg_at + lw + (Py_ssize_t)l;
            continue;
        }
        case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89: case '0': case '1': case '2':
        case 'a': case 'e': case 's': case 'u': case 't': case 0x85: case 0x86: case 0x87: case 'l': case 'd':
        case 'o': case 'R': case 'b': case 0x81: case 0x92: case 0x93: case 0x8f: case 0x90: case 0x91: case 0x97:
        case 0x98: case 'Q':
            pos++;
            continue;
        case '.':
        default:
            goto done;
        }
        if (op != 'p' && op != 'g') {
            if (arg_at + w > n) goto done;
            if (op == 'q' || op == 'h' || op == 'r' || op == 'j') {
                got = (long long)le(s + arg_at, (int)w);
                put = op == 'q' || op == 'r';
            }
            pos = arg_at + w;
        }
        if (got >= 0) {
            if (got > puts + MEMO_SLACK) {
                at = arg_at - 1;
                idx = got;
                break;
            }
            puts += put;
        }
    }
done:
    PyBuffer_Release(&view);
    if (at < 0) Py_RETURN_NONE;
    return Py_BuildValue("(nLn)", at, idx, puts);
}

static PyMethodDef module_methods[] = {
    {"memo_scan", (PyCFunction)memo_scan, METH_O,
     "memo_scan(buffer) -> None, or (offset, index, stores) of the first memo index beyond the objects stored "
     "before it (plus 1024): an index no pickler writes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_snapshot_decode",
    "CUDA memory snapshot pickles into columns, for plain data only (see memory/fast_pickle.py).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__snapshot_decode(void) {
    if (PyType_Ready(&DecoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Unsupported = PyErr_NewException("tb_attn_plugin.memory._snapshot_decode.Unsupported", PyExc_ValueError, NULL);
    Tombstone = PyUnicode_FromString("<entry already read>");
    TokenTag = PyUnicode_FromString("<frame list already read>");
    Refused = PyErr_NewException("tb_attn_plugin.memory._snapshot_decode.Refused", PyExc_ValueError, NULL);
    if (!Unsupported || !Refused || !Tombstone || !TokenTag) return NULL;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddObject(m, "Unsupported", Unsupported) < 0)
        return NULL;
    Py_INCREF(Unsupported);
    Py_INCREF(Refused);
    if (PyModule_AddObject(m, "Refused", Refused) < 0) return NULL;
    return m;
}
