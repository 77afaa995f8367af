/* Drops the trace events the analysis never reads before msgspec decodes them.
 *
 * Most events of a kineto trace are Python stack frames that the engine throws away at once;
 * creating a typed record for each of them was most of the decoding time. This scanner walks one
 * chunk of the traceEvents array (a comma-separated run of JSON values), reads each event's "cat"
 * and "name" strings without decoding anything, and copies the events worth keeping into a new
 * JSON array. It is only an optimisation: events.py applies the same rules again after decoding,
 * so whatever this keeps in doubt (escapes, odd layouts, non-objects) is still judged there, and
 * on anything it does not understand (unbalanced brackets, an unterminated string, a chunk cut
 * inside an event) it returns None and the caller decodes the chunk as it is.
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

/* s[p] is '"'; returns the index after the closing quote, or -1. */
static Py_ssize_t scan_string(const char *s, Py_ssize_t p, Py_ssize_t stop, int *escaped) {
    p++;
    while (p < stop) {
        char c = s[p];
        if (c == '"') return p + 1;
        if (c == '\\') {
            *escaped = 1;
            p += 2;
            continue;
        }
        p++;
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

/* Copies the kept events of s[start:stop] into out as "[e1,e2,...]". Returns the bytes written,
 * or -1 when the chunk is not a plain run of values. */
static Py_ssize_t filter(const char *s, Py_ssize_t start, Py_ssize_t stop, const Rules *r, char *out,
                         Py_ssize_t *dropped) {
    Py_ssize_t p = skip_ws(s, start, stop), o = 0;
    int first = 1;
    out[o++] = '[';
    while (p < stop) {
        Py_ssize_t e0 = p, e1;
        int keep = 1;
        if (s[p] == '{') {
            Str cat = {0}, name = {0};
            int doubt = 0;
            e1 = scan_event(s, p, stop, &cat, &name, &doubt);
            if (e1 < 0) return -1;
            keep = doubt || keep_event(r, &cat, &name);
        } else {
            e1 = skip_value(s, p, stop);
            if (e1 < 0) return -1;
        }
        if (keep) {
            if (!first) out[o++] = ',';
            memcpy(out + o, s + e0, (size_t)(e1 - e0));
            o += e1 - e0;
            first = 0;
        } else {
            (*dropped)++;
        }
        p = skip_ws(s, e1, stop);
        if (p < stop) {
            if (s[p] != ',') return -1;
            p = skip_ws(s, p + 1, stop);
            if (p >= stop) return -1; /* a trailing comma */
        }
    }
    out[o++] = ']';
    return o;
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

PyDoc_STRVAR(keep_events_doc,
"keep_events(text, start, stop, cats, frame_cat, frame_prefix, other_name) -> (bytes | None, int)\n\n"
"The events of text[start:stop] (a run of comma-separated JSON values) that the analysis may\n"
"use, as one JSON array, and how many were dropped. An event is kept when its \"cat\" is one\n"
"of cats; when it is frame_cat and its \"name\" starts with frame_prefix; when its \"name\" is\n"
"other_name; or when it cannot be judged without decoding. (None, 0) when the chunk is not a\n"
"plain run of values (the caller then decodes it unfiltered).");

static PyObject *keep_events(PyObject *self, PyObject *args) {
    Py_buffer text;
    Py_ssize_t start, stop, dropped = 0, n;
    PyObject *cats, *frame_cat, *frame_prefix, *other_name, *out = NULL, *result = NULL;
    Rules r = {0};
    if (!PyArg_ParseTuple(args, "y*nnO!SSS", &text, &start, &stop, &PyTuple_Type, &cats, &frame_cat,
                          &frame_prefix, &other_name))
        return NULL;
    if (start < 0 || stop > text.len || start > stop) {
        PyErr_SetString(PyExc_ValueError, "start and stop must lie within text");
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
    out = PyBytes_FromStringAndSize(NULL, stop - start + 2);
    if (out == NULL) goto done;
    /* The scan touches only these buffers (the caller's bytes are immutable): other threads,
     * TensorBoard's request handlers among them, run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    n = filter((const char *)text.buf, start, stop, &r, PyBytes_AS_STRING(out), &dropped);
    Py_END_ALLOW_THREADS
    if (n < 0) {
        Py_DECREF(out);
        result = Py_BuildValue("(On)", Py_None, (Py_ssize_t)0);
        goto done;
    }
    if (_PyBytes_Resize(&out, n) < 0) goto done;
    result = Py_BuildValue("(Nn)", out, dropped);
done:
    PyMem_Free((void *)r.cats);
    PyMem_Free(r.cat_lens);
    PyBuffer_Release(&text);
    return result;
}

static PyMethodDef methods[] = {
    {"keep_events", keep_events, METH_VARARGS, keep_events_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_prefilter",
    "Drops trace events the analysis never reads, before they are decoded (see events.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__prefilter(void) { return PyModule_Create(&module); }
