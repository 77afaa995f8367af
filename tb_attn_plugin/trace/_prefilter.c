/* Drops the trace events the analysis never reads before msgspec decodes them.
 *
 * Most events of a kineto trace are Python stack frames that the engine throws away at once;
 * creating a typed record for each of them was most of the decoding time. This scanner walks the
 * traceEvents array a chunk at a time, reads each event's "cat" and "name" strings without
 * decoding anything, and copies the events worth keeping into a new, smaller JSON array. It is
 * only an optimisation: events.py applies the same rules again after decoding, so whatever this
 * keeps in doubt (escapes, odd layouts, non-objects) is still judged there, and on anything it
 * does not understand (unbalanced brackets, an unterminated string, an array cut short) it says
 * so and the caller decodes the file without it. It runs without the GIL (see native.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_DEPTH 256 /* deeper nesting: give up, the careful path reports it */

typedef struct {
    const char *p; /* contents between the quotes */
    Py_ssize_t n;
    int escaped; /* contains a backslash: not compared, the event is kept */
    int seen;
} Str;

typedef struct {
    const char **cats; /* always kept */
    Py_ssize_t *cat_lens;
    Py_ssize_t n_cats;
    const char *frame_cat; /* kept only when the name starts with frame_prefix */
    Py_ssize_t frame_cat_len;
    const char *frame_prefix;
    Py_ssize_t frame_prefix_len;
    const char *other_name; /* any other category: kept only with this exact name */
    Py_ssize_t other_name_len;
} Rules;

static inline int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static inline Py_ssize_t skip_ws(const char *s, Py_ssize_t p, Py_ssize_t stop) {
    while (p < stop && is_ws(s[p])) p++;
    return p;
}

/* The last non-blank index before p (p > 0). */
static inline Py_ssize_t skip_back(const char *s, Py_ssize_t p) {
    p--;
    while (p > 0 && is_ws(s[p])) p--;
    return p;
}

/* s[p] is '"'; returns the index after the closing quote, or -1. Strings are most of a trace's
 * bytes (names, shapes' types), so this jumps between quotes with memchr and looks for
 * backslashes only in the span it jumped over. */
static Py_ssize_t scan_string(const char *s, Py_ssize_t p, Py_ssize_t stop, int *escaped) {
    p++;
    while (p < stop) {
        const char *q = memchr(s + p, '"', (size_t)(stop - p));
        if (q == NULL) return -1;
        Py_ssize_t end = q - s;
        const char *b = memchr(s + p, '\\', (size_t)(end - p));
        if (b == NULL) return end + 1;
        /* An escape before the quote: step over it and look again from there. */
        *escaped = 1;
        p = (b - s) + 2;
    }
    return -1;
}

/* Any JSON value starting at s[p]; returns the index after it, or -1. Brackets must match;
 * the rest of the syntax is left to msgspec (only kept events are ever decoded). */
static Py_ssize_t skip_value(const char *s, Py_ssize_t p, Py_ssize_t stop) {
    char stack[MAX_DEPTH];
    int depth = 0, esc = 0;
    if (p >= stop) return -1;
    if (s[p] == '"') return scan_string(s, p, stop, &esc);
    if (s[p] != '{' && s[p] != '[') {
        Py_ssize_t q = p;
        while (q < stop && !is_ws(s[q]) && s[q] != ',' && s[q] != '}' && s[q] != ']') q++;
        return q > p ? q : -1;
    }
    while (p < stop) {
        char c = s[p];
        if (c == '"') {
            p = scan_string(s, p, stop, &esc);
            if (p < 0) return -1;
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH) return -1;
            stack[depth++] = c == '{' ? '}' : ']';
        } else if (c == '}' || c == ']') {
            if (depth == 0 || stack[depth - 1] != c) return -1;
            if (--depth == 0) return p + 1;
        }
        p++;
    }
    return -1;
}

static inline int str_is(const Str *v, const char *lit, Py_ssize_t n) {
    return v->n == n && memcmp(v->p, lit, (size_t)n) == 0;
}

/* One event object at s[p] == '{': reads its top-level "cat" and "name" strings. Returns the
 * index after the closing brace, or -1. *doubt is set when the keys cannot be read plainly. */
static Py_ssize_t scan_event(const char *s, Py_ssize_t p, Py_ssize_t stop, Str *cat, Str *name, int *doubt) {
    p = skip_ws(s, p + 1, stop);
    if (p < stop && s[p] == '}') return p + 1;
    while (p < stop) {
        int kesc = 0;
        Py_ssize_t k0, k1;
        if (s[p] != '"') return -1;
        k0 = p + 1;
        p = scan_string(s, p, stop, &kesc);
        if (p < 0) return -1;
        k1 = p - 1;
        if (kesc) *doubt = 1;
        p = skip_ws(s, p, stop);
        if (p >= stop || s[p] != ':') return -1;
        p = skip_ws(s, p + 1, stop);
        if (p >= stop) return -1;
        Str *slot = NULL;
        if (k1 - k0 == 3 && memcmp(s + k0, "cat", 3) == 0) slot = cat;
        else if (k1 - k0 == 4 && memcmp(s + k0, "name", 4) == 0) slot = name;
        if (slot != NULL) {
            if (slot->seen) *doubt = 1; /* a repeated key: let the decoder decide */
            slot->seen = 1;
            if (s[p] == '"') {
                int vesc = 0;
                Py_ssize_t v0 = p + 1;
                p = scan_string(s, p, stop, &vesc);
                if (p < 0) return -1;
                slot->p = s + v0;
                slot->n = p - 1 - v0;
                slot->escaped = vesc;
            } else {
                *doubt = 1; /* not a string: the decoder reports it */
                p = skip_value(s, p, stop);
                if (p < 0) return -1;
            }
        } else {
            p = skip_value(s, p, stop);
            if (p < 0) return -1;
        }
        p = skip_ws(s, p, stop);
        if (p >= stop) return -1;
        if (s[p] == '}') return p + 1;
        if (s[p] != ',') return -1;
        p = skip_ws(s, p + 1, stop);
    }
    return -1;
}

static int keep_event(const Rules *r, const Str *cat, const Str *name) {
    if (!cat->seen || cat->escaped || (name->seen && name->escaped)) return 1;
    for (Py_ssize_t i = 0; i < r->n_cats; i++)
        if (str_is(cat, r->cats[i], r->cat_lens[i])) return 1;
    if (str_is(cat, r->frame_cat, r->frame_cat_len))
        return name->seen && name->n >= r->frame_prefix_len
               && memcmp(name->p, r->frame_prefix, (size_t)r->frame_prefix_len) == 0;
    return name->seen && str_is(name, r->other_name, r->other_name_len);
}

typedef struct {
    char *buf; /* raw memory: grown without the GIL */
    Py_ssize_t len, cap;
} Out;

static int out_put(Out *o, const char *src, Py_ssize_t n) {
    if (o->len + n > o->cap) {
        Py_ssize_t cap = o->cap * 2 > o->len + n ? o->cap * 2 : o->len + n;
        char *b = PyMem_RawRealloc(o->buf, (size_t)cap);
        if (b == NULL) return -1;
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, src, (size_t)n);
    o->len += n;
    return 0;
}

enum { SCAN_OK = 0, SCAN_NOT_PLAIN = -1, SCAN_NO_MEMORY = -2 };

/* Reads the event array from s[pos] (just after its '[' or after a ',') until at least `budget`
 * bytes are consumed or the array's ']' is reached, and writes the kept events to out as one
 * JSON array. *next is where the following call starts (or the index of ']'), *done says the
 * array ended. */
static int scan_chunk(const char *s, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t budget, const Rules *r, Out *out,
                      Py_ssize_t *dropped, Py_ssize_t *next, int *done, int partial) {
    Py_ssize_t p = skip_ws(s, pos, stop);
    int first = 1;
    if (out_put(out, "[", 1) < 0) return SCAN_NO_MEMORY;
    if (p < stop && s[p] == ']' && pos > 0 && s[skip_back(s, pos)] == '[') {
        *done = 1; /* an empty array */
        *next = p;
        return out_put(out, "]", 1) < 0 ? SCAN_NO_MEMORY : SCAN_OK;
    }
    while (p < stop) {
        Py_ssize_t e0 = p, e1, mark = out->len, dropped0 = *dropped;
        int keep = 1, was_first = first;
        if (s[p] == '{') {
            Str cat = {0}, name = {0};
            int doubt = 0;
            e1 = scan_event(s, p, stop, &cat, &name, &doubt);
            if (e1 < 0 && partial) goto more; /* the window may end inside this event */
            if (e1 < 0) return SCAN_NOT_PLAIN;
            keep = doubt || keep_event(r, &cat, &name);
        } else {
            e1 = skip_value(s, p, stop);
            if (e1 < 0 && partial) goto more;
            if (e1 < 0) return SCAN_NOT_PLAIN;
        }
        if (keep) {
            if ((!first && out_put(out, ",", 1) < 0) || out_put(out, s + e0, e1 - e0) < 0) return SCAN_NO_MEMORY;
            first = 0;
        } else {
            (*dropped)++;
        }
        p = skip_ws(s, e1, stop);
        if (p >= stop && partial) goto more; /* the separator after it is in the next window */
        if (p >= stop) return SCAN_NOT_PLAIN; /* cut short: no closing bracket */
        if (s[p] == ']') {
            *done = 1;
            *next = p;
            break;
        }
        if (s[p] != ',') return SCAN_NOT_PLAIN;
        p = skip_ws(s, p + 1, stop);
        if (p < stop && s[p] == ']') return SCAN_NOT_PLAIN; /* a trailing comma */
        if (p - pos >= budget) {
            *next = p;
            break;
        }
        continue;
    more:
        /* Streaming (partial): this event is not complete in the window. Undo it, and go on from
         * its start once the caller has appended the next piece of the file. */
        out->len = mark;
        first = was_first;
        *dropped = dropped0;
        *next = e0;
        return out_put(out, "]", 1) < 0 ? SCAN_NO_MEMORY : SCAN_OK;
    }
    if (p >= stop && partial) {
        *next = p; /* the window ended just after a ',': the next event starts in the next one */
        return out_put(out, "]", 1) < 0 ? SCAN_NO_MEMORY : SCAN_OK;
    }
    if (p >= stop) return SCAN_NOT_PLAIN;
    return out_put(out, "]", 1) < 0 ? SCAN_NO_MEMORY : SCAN_OK;
}

static int as_bytes(PyObject *o, const char **p, Py_ssize_t *n, const char *what) {
    if (!PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
        return -1;
    }
    *p = PyBytes_AS_STRING(o);
    *n = PyBytes_GET_SIZE(o);
    return 0;
}

PyDoc_STRVAR(scan_events_doc,
"scan_events(text, pos, budget, cats, frame_cat, frame_prefix, other_name, partial=False)\n"
"    -> (bytes | None, dropped, next, done)\n\n"
"Reads the trace's event array from text[pos] (just after its '[' or after the ',' where the\n"
"previous call stopped) for about `budget` bytes, and returns the events the analysis may use\n"
"as one JSON array, how many it dropped, where to go on, and whether the array ended (then\n"
"`next` is the index of its ']'). An event is kept when its \"cat\" is one of cats; when it\n"
"is frame_cat and its \"name\" starts with frame_prefix; when its \"name\" is other_name; or\n"
"when it cannot be judged without decoding. The first item is None when the text is not a\n"
"plain array of values from pos (cut short, unbalanced, a stray character): the caller then\n"
"decodes the file without this scanner. With partial, text is a window of a file being\n"
"streamed: where the window ends inside an event, the call returns the events before it, done\n"
"False and `next` at that event's start, to be called again on a window that starts there.");

static PyObject *scan_events(PyObject *self, PyObject *args) {
    Py_buffer text;
    Py_ssize_t pos, budget, dropped = 0, next = 0;
    int done = 0, rc, partial = 0;
    PyObject *cats, *frame_cat, *frame_prefix, *other_name, *result = NULL;
    Rules r = {0};
    Out out = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!SSS|p", &text, &pos, &budget, &PyTuple_Type, &cats, &frame_cat,
                          &frame_prefix, &other_name, &partial))
        return NULL;
    if (pos < 0 || pos > text.len) {
        PyErr_SetString(PyExc_ValueError, "pos must lie within text");
        goto done;
    }
    r.n_cats = PyTuple_GET_SIZE(cats);
    r.cats = PyMem_Malloc(sizeof(char *) * (size_t)(r.n_cats + 1));
    r.cat_lens = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(r.n_cats + 1));
    if (r.cats == NULL || r.cat_lens == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < r.n_cats; i++)
        if (as_bytes(PyTuple_GET_ITEM(cats, i), &r.cats[i], &r.cat_lens[i], "cats") < 0) goto done;
    if (as_bytes(frame_cat, &r.frame_cat, &r.frame_cat_len, "frame_cat") < 0
        || as_bytes(frame_prefix, &r.frame_prefix, &r.frame_prefix_len, "frame_prefix") < 0
        || as_bytes(other_name, &r.other_name, &r.other_name_len, "other_name") < 0)
        goto done;
    /* The scan touches only the caller's immutable bytes and raw memory of its own, so other
     * threads run meanwhile: the next chunk is scanned while Python decodes this one. */
    Py_BEGIN_ALLOW_THREADS
    /* Room for half of what this chunk reads (a trace keeps about that); grown when needed. */
    out.cap = ((budget > 0 && budget < text.len - pos) ? budget : text.len - pos) / 2 + 4096;
    out.buf = PyMem_RawMalloc((size_t)out.cap);
    rc = out.buf == NULL ? SCAN_NO_MEMORY
                         : scan_chunk((const char *)text.buf, pos, text.len, budget, &r, &out, &dropped, &next, &done, partial);
    Py_END_ALLOW_THREADS
    if (rc == SCAN_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == SCAN_NOT_PLAIN) {
        result = Py_BuildValue("(Onnn)", Py_None, (Py_ssize_t)0, (Py_ssize_t)0, (Py_ssize_t)0);
        goto done;
    }
    result = Py_BuildValue("(y#nnO)", out.buf, out.len, dropped, next, done ? Py_True : Py_False);
done:
    PyMem_RawFree(out.buf);
    PyMem_Free((void *)r.cats);
    PyMem_Free(r.cat_lens);
    PyBuffer_Release(&text);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_events", scan_events, METH_VARARGS, scan_events_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_prefilter",
    "Drops trace events the analysis never reads, before they are decoded (see events.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__prefilter(void) { return PyModule_Create(&module); }
