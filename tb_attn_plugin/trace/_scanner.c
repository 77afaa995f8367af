/* Drops the trace events the analysis never reads before msgspec decodes them, and writes the kept
 * ones' fixed-width records.
 *
 * Most events of a kineto trace are Python stack frames that the engine throws away at once;
 * creating a typed record for each of them was most of the decoding time. This scanner walks the
 * traceEvents array a chunk at a time, reads each event's "cat" and "name" strings without
 * decoding anything, and copies the events worth keeping into a new, smaller JSON array. Routed
 * (see "Routing" below) it also sorts them into their lists, checks their times and writes a
 * record of each, which trace/table.py reads as numpy columns. Whatever it keeps in doubt
 * (escapes, odd layouts, non-objects) is judged by events.py after decoding, and on anything it
 * does not understand (unbalanced brackets, an unterminated string, an array cut short) it says
 * so and the caller decodes the file without it. It runs without the GIL (see native.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* A compact trace has no blanks between tokens: one compare settles most calls. */
static inline int is_ws(char c) { return (unsigned char)c <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t'); }

/* memcmp(a, b, n) == 0 for the short keys and names compared per event, without a call into libc:
 * eight bytes at a time, the last eight overlapping the ones before. */
static inline int same(const char *a, const char *b, Py_ssize_t n) {
    uint64_t x, y;
    for (Py_ssize_t i = 0; n < 8 && i < n; i++)
        if (a[i] != b[i]) return 0;
    for (Py_ssize_t i = 0; n >= 8; i = i + 8 < n - 8 ? i + 8 : n - 8) {
        memcpy(&x, a + i, 8), memcpy(&y, b + i, 8);
        if (x != y || i == n - 8) return x == y;
    }
    return 1;
}

/* The characters that end a number, true, false or null in a container: a blank, ',', '}' or ']'. */
static unsigned char ENDS_VALUE[256];

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

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR 1 /* eight bytes at a time, on little-endian GCC/Clang builds */
static const uint64_t ONES = 0x0101010101010101ull;

/* below_byte: the bytes of x whose value is below c (c <= 128); byte_is: those equal to c. Each is
 * flagged by its high bit. The lowest flagged byte is always a true one (a borrow can flag false ones
 * above it), so callers take the lowest. */
static inline uint64_t below_byte(uint64_t x, unsigned char c) { return (x - ONES * c) & ~x & (ONES << 7); }
static inline uint64_t byte_is(uint64_t x, unsigned char c) { return below_byte(x ^ (ONES * c), 1); }
#endif

/* The index of the first '"' or backslash in s[p..stop), or stop (or more). Strings are most of a
 * trace's bytes, and most are short keys and names: eight bytes at a time (SWAR) beats a memchr call
 * per quote and another per backslash. */
static inline Py_ssize_t quote_or_escape(const char *s, Py_ssize_t p, Py_ssize_t stop) {
#if defined(__SSE2__)
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
    for (; p + 16 <= stop; p += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + p));
        int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, b)));
        if (m) return p + __builtin_ctz(m);
    }
#elif defined(SWAR)
    for (; p + 8 <= stop; p += 8) {
        uint64_t x;
        memcpy(&x, s + p, 8);
        uint64_t hit = byte_is(x, '"') | byte_is(x, '\\');
        if (hit) return p + (__builtin_ctzll(hit) >> 3);
    }
#endif
    while (p < stop && s[p] != '"' && s[p] != '\\') p++;
    return p;
}

/* The index of the first byte in s[q..stop) that ends a number, true, false or null (ENDS_VALUE), or
 * stop. Eight bytes at a time as quote_or_escape: a byte below '-' (the blanks, ',' and a few more) or
 * a ']' or '}' is a candidate, and the byte loop settles it. */
static inline Py_ssize_t value_end(const char *s, Py_ssize_t q, Py_ssize_t stop) {
#ifdef SWAR
    for (; q + 8 <= stop; q += 8) {
        uint64_t x;
        memcpy(&x, s + q, 8);
        uint64_t hit = below_byte(x, '-') | byte_is(x, ']') | byte_is(x, '}');
        if (hit) {
            q += __builtin_ctzll(hit) >> 3;
            break;
        }
    }
#endif
    while (q < stop && !ENDS_VALUE[(unsigned char)s[q]]) q++;
    return q;
}

/* s[p] is '"'; returns the index after the closing quote, or -1. *escaped is set when the string
 * holds a backslash (the character after one is stepped over). */
static inline Py_ssize_t scan_string(const char *s, Py_ssize_t p, Py_ssize_t stop, int *escaped) {
    for (p++;;) {
        p = quote_or_escape(s, p, stop);
        if (p >= stop) return -1;
        if (s[p] == '"') return p + 1;
        *escaped = 1;
        p += 2;
    }
}

/* Any JSON value starting at s[p] (skip_value; skip_container: an object or array); returns the index
 * after it, or -1. Brackets must match; the rest of the syntax is left to msgspec (only kept events are
 * ever decoded). */
static Py_ssize_t skip_container(const char *s, Py_ssize_t p, Py_ssize_t stop) {
    char stack[MAX_DEPTH];
    int depth = 0, esc = 0;
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

static inline Py_ssize_t skip_value(const char *s, Py_ssize_t p, Py_ssize_t stop) {
    int esc = 0;
    if (p >= stop) return -1;
    if (s[p] == '"') return scan_string(s, p, stop, &esc);
    if (s[p] == '{' || s[p] == '[') return skip_container(s, p, stop);
    Py_ssize_t q = value_end(s, p, stop);
    return q > p ? q : -1;
}

static inline int str_is(const Str *v, const char *lit, Py_ssize_t n) {
    return v->n == n && same(v->p, lit, n);
}

/* The walk over an object's members, shared by every reader below. member_key: the member whose
 * key starts at s[p] (a '"'): the key's contents are s[*k0..*k1), *kesc says it holds an escape,
 * and the index of its value is returned (whitespace skipped); -1 when it is not `"key": value`. */
static inline Py_ssize_t member_key(const char *s, Py_ssize_t p, Py_ssize_t stop, Py_ssize_t *k0, Py_ssize_t *k1, int *kesc) {
    if (p >= stop || s[p] != '"') return -1;
    *k0 = p + 1;
    p = scan_string(s, p, stop, kesc);
    if (p < 0) return -1;
    *k1 = p - 1;
    p = skip_ws(s, p, stop);
    if (p >= stop || s[p] != ':') return -1;
    p = skip_ws(s, p + 1, stop);
    return p < stop ? p : -1;
}

enum { OBJECT_ENDS = -2 };

/* member_next: after a member's value (s[p] just past it), the index of the next member's key, or
 * OBJECT_ENDS with *end just past the object's '}', or -1 when neither follows. */
static inline Py_ssize_t member_next(const char *s, Py_ssize_t p, Py_ssize_t stop, Py_ssize_t *end) {
    p = skip_ws(s, p, stop);
    if (p >= stop) return -1;
    if (s[p] == '}') {
        *end = p + 1;
        return OBJECT_ENDS;
    }
    if (s[p] != ',') return -1;
    return skip_ws(s, p + 1, stop);
}

/* Called by scan_event at the value of an "args" key (s[p]), with the cat and name read so far:
 * returns the index after the value when it read it, or -1 to have it skipped as any value. */
typedef Py_ssize_t (*ArgsFn)(void *ctx, const char *s, Py_ssize_t p, Py_ssize_t stop, const Str *cat,
                             const Str *name);

/* Where the members a record reads lie in an event's text: v[k] = [start, end) of SPAN_KEYS[k]'s
 * value, start -1 when absent; repeated: one of them appears twice. */
enum { S_TS, S_DUR, S_PID, S_TID, S_ID, S_ARGS, N_SPANS };
static const char *SPAN_KEYS[N_SPANS] = {"ts", "dur", "pid", "tid", "id", "args"};
static Py_ssize_t SPAN_LENS[N_SPANS]; /* strlen of each, set when the module loads (as INT_LENS) */
typedef struct {
    Py_ssize_t v[N_SPANS][2];
    int repeated, others; /* others: members neither spans nor cat, name and ph */
} Spans;

/* One event object at s[p] == '{': reads its top-level "cat" and "name" strings. Returns the
 * index after the closing brace, or -1. *doubt is set when the keys cannot be read plainly.
 * on_args (NULL: none) sees the value of each "args" key; sp (NULL: none) gets the spans. */
static Py_ssize_t scan_event(const char *s, Py_ssize_t p, Py_ssize_t stop, Str *cat, Str *name, Str *ph, int *doubt,
                             int *ph_doubt, ArgsFn on_args, void *ctx, Spans *sp) {
    if (sp != NULL) {
        sp->repeated = sp->others = 0;
        for (int k = 0; k < N_SPANS; k++) sp->v[k][0] = -1;
    }
    p = skip_ws(s, p + 1, stop);
    if (p < stop && s[p] == '}') return p + 1;
    for (;;) {
        int kesc = 0;
        Py_ssize_t k0, k1, end;
        p = member_key(s, p, stop, &k0, &k1, &kesc);
        if (p < 0) return -1;
        if (kesc) *doubt = 1;
        Str *slot = NULL;
        int *slot_doubt = doubt;
        if (k1 - k0 == 3 && memcmp(s + k0, "cat", 3) == 0) slot = cat;
        else if (k1 - k0 == 4 && memcmp(s + k0, "name", 4) == 0) slot = name;
        else if (k1 - k0 == 2 && memcmp(s + k0, "ph", 2) == 0) {
            slot = ph;
            slot_doubt = ph_doubt;
        }
        if (slot != NULL) {
            if (slot->seen) *slot_doubt = 1; /* a repeated key: let the decoder decide */
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
                *slot_doubt = 1; /* not a string: the decoder reports it */
                p = skip_value(s, p, stop);
                if (p < 0) return -1;
            }
        } else {
            Py_ssize_t v0 = p, v1 = on_args != NULL && k1 - k0 == 4 && memcmp(s + k0, "args", 4) == 0
                                ? on_args(ctx, s, p, stop, cat, name) : -1;
            p = v1 >= 0 ? v1 : skip_value(s, p, stop);
            if (p < 0) return -1;
            int k = 0;
            for (; sp != NULL && k1 - k0 <= 4 && k < N_SPANS; k++) {
                if (k1 - k0 != SPAN_LENS[k] || !same(s + k0, SPAN_KEYS[k], k1 - k0))
                    continue;
                sp->repeated |= sp->v[k][0] >= 0;
                sp->v[k][0] = v0;
                sp->v[k][1] = p;
                break;
            }
            if (sp != NULL) sp->others += k1 - k0 > 4 || k == N_SPANS;
        }
        p = member_next(s, p, stop, &end);
        if (p == OBJECT_ENDS) return end;
        if (p < 0) return -1;
    }
}

static int keep_event(const Rules *r, const Str *cat, const Str *name) {
    if (!cat->seen || cat->escaped || (name->seen && name->escaped)) return 1;
    for (Py_ssize_t i = 0; i < r->n_cats; i++)
        if (str_is(cat, r->cats[i], r->cat_lens[i])) return 1;
    if (str_is(cat, r->frame_cat, r->frame_cat_len))
        return name->seen && name->n >= r->frame_prefix_len
               && same(name->p, r->frame_prefix, r->frame_prefix_len);
    return name->seen && str_is(name, r->other_name, r->other_name_len);
}

/* ---- Routing: each kept event straight to its list, [memory] instants as fixed records ---------
 *
 * With a Route, the scanner applies the whole of events._Kept's rules instead of only the ones it
 * can judge from cat and name: ops, GPU activities, launches and flows go to one JSON array each
 * (so Python need not sort them into lists), events that fail the ph rule to a "rest" array (msgspec
 * still checks their fields, then they are counted and dropped, as before). Every kept event is read
 * into one fixed-width Rec (times, thread, category id, Args' int members): events with implausible
 * times are left out and counted here, ops, GPU activities and launches get their Rec beside their
 * JSON (trace/table.py turns those into columns), and a [memory] instant is only its Rec: no Python
 * object is made for it. Anything the rules cannot be applied to from the raw text (an escape where
 * it matters, a repeated key, a field of a type the decoder would refuse) makes the chunk "in
 * doubt": it is scanned again the plain way and Python judges it. */

/* arrays: [0, G_JSON); G_NAMES: the ops' names, G_NAMES + 1 the launches' */
enum { G_OPS, G_GPU, G_LAUNCH, G_FLOW, G_REST, G_NAMES, G_JSON = G_NAMES + 2, G_RECS, N_OUTS = G_RECS + 3 };

/* Names as an open-addressing set of (pointer, length) into bytes objects the caller holds. */
typedef struct {
    const char **p;
    Py_ssize_t *n;
    size_t cap; /* a power of two, or 0 for the empty set */
} NameSet;

static size_t name_hash(const char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static int nameset_has(const NameSet *set, const char *p, Py_ssize_t n) {
    if (set->cap == 0) return 0;
    for (size_t j = name_hash(p, n) & (set->cap - 1);; j = (j + 1) & (set->cap - 1)) {
        if (set->p[j] == NULL) return 0;
        if (set->n[j] == n && same(set->p[j], p, n)) return 1;
    }
}

/* Slimming (scan_events' slim): the members of a kept event's args the decoder declares are copied,
 * the others are checked to be plain JSON and left out, and so are the shapes of ops whose name
 * is in drop_shapes (the caller's keep_shapes said no to it): msgspec then parses only what the
 * analysis reads. A left-out value that is not plainly valid JSON puts the chunk in doubt. */
typedef struct {
    int on;
    const char **keys;
    Py_ssize_t *key_lens, n_keys;
    const char **shapes;
    Py_ssize_t *shape_lens, n_shapes;
    NameSet drop_shapes;
} Slim;

typedef struct {
    const char **cats[4];
    Py_ssize_t *lens[4];
    Py_ssize_t n[4];
    double max_ts, max_dur;
    Slim slim;
} Route;

/* Args' int members, in its order (trace/table.py's REC names them; a test holds the two equal). */
static const char *INT_KEYS[] = {"External id", "correlation", "Sequence number", "Fwd thread id", "device", "stream",
                                 "Bytes", "Total Allocated", "Device Type", "Addr", "Total Reserved", "Device Id"};
#define N_INTS 12
#define N_ARGS ((int64_t)1 << N_INTS) /* in nulls: no args object */
#define HAS_SHAPES (N_ARGS << 1) /* in nulls: the args hold shape members (a hint for _Kept's shape copying) */
#define HAS_JSON (N_ARGS << 2) /* in an op's or launch's nulls: its JSON is in its list's array (see scan_chunk) */

/* One kept event as the analysis reads it. cat: the category's index in the route (Python frames:
 * one past them; [memory] instants: -1); arg[k]: INT_KEYS[k], 0 with bit k of nulls when absent or null. */
typedef struct {
    double ts, dur;
    int64_t pid, tid, cat, arg[N_INTS], nulls;
} Rec;

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
    if (n == 1) o->buf[o->len] = *src; /* the separators and quotes: no call into libc */
    else memcpy(o->buf + o->len, src, (size_t)n);
    o->len += n;
    return 0;
}

/* One more item of the JSON array o: a ',' unless it is the *first, then src[0..n). */
static int put_item(Out *o, int *first, const char *src, Py_ssize_t n) {
    if ((!*first && out_put(o, ",", 1) < 0) || out_put(o, src, n) < 0) return -1;
    *first = 0;
    return 0;
}

/* A JSON integer s[p..q) (no fraction, no exponent) within +-INT64_MAX into *v: 1, else 0. */
static int json_int(const char *s, Py_ssize_t p, Py_ssize_t q, int64_t *v) {
    int neg = 0;
    if (p < q && s[p] == '-') {
        neg = 1;
        p++;
    }
    Py_ssize_t n = q - p;
    if (n < 1 || n > 19 || (s[p] == '0' && n > 1)) return 0;
    uint64_t x = 0;
    for (; p < q; p++) {
        if (s[p] < '0' || s[p] > '9') return 0;
        x = x * 10 + (uint64_t)(s[p] - '0'); /* 19 digits fit in uint64 */
    }
    if (x > (uint64_t)INT64_MAX) return 0;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return 1;
}

#ifdef __SIZEOF_INT128__
/* m / 10^frac (m past 2^53, frac <= 19) rounded to nearest, ties to even, as strtod rounds it: the
 * quotient to 64 bits past the point in 128-bit integers, cut to 53 bits, the remainder as the
 * sticky bit. Kineto's microsecond times have 17 digits, past Clinger's exact path. 0: a quotient
 * of too few bits (below 2^-11), left to strtod. */
static int decimal_ratio(uint64_t m, Py_ssize_t frac, double *v) {
    uint64_t d = 1;
    for (Py_ssize_t k = 0; k < frac; k++) d *= 10;
    unsigned __int128 n = (unsigned __int128)m << 64, q = n / d, one = 1;
    uint64_t hi = (uint64_t)(q >> 64);
    int bits = hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll((uint64_t)q), shift = bits - 53;
    if (shift < 1) return 0;
    uint64_t mant = (uint64_t)(q >> shift);
    unsigned __int128 rest = q & ((one << shift) - 1), half = one << (shift - 1);
    if (rest > half || (rest == half && (n % d != 0 || (mant & 1)))) mant++;
    *v = ldexp((double)mant, shift - 64);
    return 1;
}
#endif

/* A JSON number s[p..q) (the grammar exactly, as msgspec reads it) into *v: 1, else 0. */
static int json_number(const char *s, Py_ssize_t p, Py_ssize_t q, double *v) {
    static const double p10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    Py_ssize_t i = p, digits = 0, frac = 0;
    uint64_t m = 0;
    char tmp[64];
    int neg = i < q && s[i] == '-', expo = 0;
    i += neg;
    if (i >= q) return 0;
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9')
        for (; i < q && s[i] >= '0' && s[i] <= '9'; i++, digits++) m = digits < 19 ? m * 10 + (uint64_t)(s[i] - '0') : m;
    else return 0;
    if (i < q && s[i] == '.') {
        i++;
        if (i >= q || s[i] < '0' || s[i] > '9') return 0;
        for (; i < q && s[i] >= '0' && s[i] <= '9'; i++, digits++, frac++) m = digits < 19 ? m * 10 + (uint64_t)(s[i] - '0') : m;
    }
    if (i < q && (s[i] == 'e' || s[i] == 'E')) {
        expo = 1;
        i++;
        if (i < q && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= q || s[i] < '0' || s[i] > '9') return 0;
        while (i < q && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i != q) return 0;
    /* Clinger's fast path: a mantissa and a power of ten both exact in a double give the correctly
     * rounded quotient, the value strtod gives; anything else takes strtod. */
    if (!expo && digits <= 19 && m <= ((uint64_t)1 << 53) && frac <= 22) {
        *v = neg ? -((double)m / p10[frac]) : (double)m / p10[frac];
        return 1;
    }
#ifdef __SIZEOF_INT128__
    if (!expo && digits <= 19 && frac <= 19 && decimal_ratio(m, frac, v)) {
        *v = neg ? -*v : *v;
        return 1;
    }
#endif
    if (q - p >= (Py_ssize_t)sizeof(tmp)) return 0;
    memcpy(tmp, s + p, (size_t)(q - p));
    tmp[q - p] = 0;
    errno = 0;
    *v = strtod(tmp, NULL);
    return errno == 0 && isfinite(*v);
}

static inline int key_is(const char *s, Py_ssize_t k0, Py_ssize_t k1, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(k1 - k0) == n && memcmp(s + k0, lit, n) == 0;
}

static inline int is_null(const char *s, Py_ssize_t p, Py_ssize_t q) {
    return q - p == 4 && memcmp(s + p, "null", 4) == 0;
}

/* The value s[p..q) as an int field of Args (int | None): 1 stored, 0 null, -1 the decoder's call. */
static int int_field(const char *s, Py_ssize_t p, Py_ssize_t q, int64_t *v) {
    if (is_null(s, p, q)) return 0;
    return json_int(s, p, q, v) ? 1 : -1;
}

/* One member "key": s[v0..v1) of a kept event's args into r: every int member Args declares is
 * checked for its type, as msgspec would (seen: the ones met so far). 1 for one of those, 0 for
 * any other member, -1 when in doubt. */
static Py_ssize_t INT_LENS[N_INTS];

static int arg_member(const char *s, Py_ssize_t k0, Py_ssize_t k1, Py_ssize_t v0, Py_ssize_t v1, Rec *r, int *seen) {
    for (int k = 0; k < N_INTS; k++) {
        if (k1 - k0 != INT_LENS[k] || !same(s + k0, INT_KEYS[k], INT_LENS[k])) continue;
        if (*seen & (1 << k)) return -1; /* a repeated key */
        *seen |= 1 << k;
        int got = int_field(s, v0, v1, &r->arg[k]);
        if (got < 0) return -1;
        if (got) r->nulls &= ~((int64_t)1 << k);
        return 1;
    }
    Py_ssize_t n = k1 - k0;
    if ((n == 10 && (memcmp(s + k0, "Input Dims", 10) == 0 || memcmp(s + k0, "Input type", 10) == 0))
        || (n == 15 && memcmp(s + k0, "Concrete Inputs", 15) == 0) || (n == 13 && memcmp(s + k0, "Input Strides", 13) == 0))
        r->nulls |= HAS_SHAPES;
    return 0;
}

/* The args object at s[p] == '{' of a kept event into r; returns the index after it, or -1 when in doubt. */
static Py_ssize_t event_args(const char *s, Py_ssize_t p, Py_ssize_t stop, Rec *r) {
    int seen = 0;
    p = skip_ws(s, p + 1, stop);
    if (p < stop && s[p] == '}') return p + 1;
    for (;;) {
        int kesc = 0;
        Py_ssize_t k0, k1, end;
        p = member_key(s, p, stop, &k0, &k1, &kesc);
        if (p < 0 || kesc) return -1;
        Py_ssize_t v0 = p;
        p = skip_value(s, p, stop);
        if (p < 0 || arg_member(s, k0, k1, v0, p, r, &seen) < 0) return -1;
        p = member_next(s, p, stop, &end);
        if (p == OBJECT_ENDS) return end;
        if (p < 0) return -1;
    }
}

/* A kept event's Rec, from its spans (scan_event; its ph, cat and name are strings there): 1 kept,
 * 0 insane times (left out and counted), -1 in doubt. Absent fields read as the decoder's defaults.
 * args (or NULL): the args' members as read while they were slimmed (slim_args), instead of read again. */
static int event_record(const char *s, const Spans *sp, const Route *rt, Rec *r, const Rec *args) {
    memset(r, 0, sizeof(*r));
    r->nulls = (N_ARGS << 1) - 1;
    if (sp->repeated) return -1; /* the decoder's call */
    const Py_ssize_t *v = sp->v[S_TS];
    if (v[0] >= 0 && !json_number(s, v[0], v[1], &r->ts)) return -1;
    v = sp->v[S_DUR];
    if (v[0] >= 0 && !json_number(s, v[0], v[1], &r->dur)) return -1;
    v = sp->v[S_PID];
    if (v[0] >= 0 && !json_int(s, v[0], v[1], &r->pid)) return -1; /* a string pid: Python's call */
    v = sp->v[S_TID];
    if (v[0] >= 0 && !json_int(s, v[0], v[1], &r->tid)) return -1;
    int64_t x;
    v = sp->v[S_ID];
    if (v[0] >= 0 && s[v[0]] != '"' && !json_int(s, v[0], v[1], &x) && !is_null(s, v[0], v[1])) return -1;
    v = sp->v[S_ARGS];
    if (v[0] >= 0 && s[v[0]] == '{') {
        r->nulls &= ~(int64_t)N_ARGS;
        if (args != NULL) memcpy(r->arg, args->arg, sizeof(r->arg)), r->nulls = args->nulls;
        else if (event_args(s, v[0], v[1], r) != v[1]) return -1;
    } else if (v[0] >= 0 && !is_null(s, v[0], v[1])) {
        return -1;
    }
    return -rt->max_ts < r->ts && r->ts < rt->max_ts && 0.0 <= r->dur && r->dur < rt->max_dur;
}

/* The list of a routed category (-1: none), and its index among all the route's categories (*id).
 * The last category looked up is remembered (m): a trace's events come in runs of one category. */
typedef struct { const char *p; Py_ssize_t n; int g; int64_t id; } CatMemo;
static int cat_group(const Route *rt, CatMemo *m, const Str *cat, int64_t *id) {
    if (m->p != NULL && str_is(cat, m->p, m->n)) return *id = m->id, m->g;
    int g = 0;
    for (*id = 0; g < 4; g++)
        for (Py_ssize_t i = 0; i < rt->n[g]; i++, ++*id)
            if (str_is(cat, rt->cats[g][i], rt->lens[g][i])) goto found;
    g = -1;
found:
    *m = (CatMemo){cat->p, cat->n, g, *id};
    return g;
}

/* The ph rule of each list (events._Kept.add). */
static int ph_ok(int g, const Str *ph) {
    if (!ph->seen || ph->n != 1) return 0;
    char c = ph->p[0];
    if (g == G_FLOW) return c == 's' || c == 'f';
    if (g == G_JSON) return c == 'i' || c == 'I'; /* [memory] instants */
    return c == 'X';
}

enum { SCAN_OK = 0, SCAN_NOT_PLAIN = -1, SCAN_NO_MEMORY = -2, SCAN_DOUBT = -3 };

/* A byte no string of the strict subset holds (strict_value, printable): a control character, DEL, a
 * backslash or a byte past ASCII; not_plain16 flags those of 16 (signed, those past ASCII are below 0x20). */
static inline int not_plain(unsigned char ch) { return ch < 0x20 || ch >= 0x7f || ch == '\\'; }
#if defined(__SSE2__)
static inline __m128i not_plain16(__m128i x) {
    __m128i odd = _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)), _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)));
    return _mm_or_si128(odd, _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')));
}
#endif

/* The JSON value at s[p] in a strict subset of the grammar: strings of printable ASCII without
 * escapes, numbers as json_number reads them, true, false, null, and arrays and objects of those
 * up to 64 deep. Returns the index after it, or -1 for anything else (valid JSON outside the
 * subset included: the caller's doubt then lets msgspec judge it). */
static Py_ssize_t strict_value(const char *s, Py_ssize_t p, Py_ssize_t q, int depth) {
    if (p >= q) return -1;
    char c = s[p];
    if (c == '"') {
        p++;
#if defined(__SSE2__)
        for (; p + 16 <= q; p += 16) { /* on to the first byte the loop below must judge */
            __m128i x = _mm_loadu_si128((const __m128i *)(s + p));
            int m = _mm_movemask_epi8(_mm_or_si128(not_plain16(x), _mm_cmpeq_epi8(x, _mm_set1_epi8('"'))));
            if (m) { p += __builtin_ctz(m); break; }
        }
#endif
        for (; p < q; p++) {
            if (s[p] == '"') return p + 1;
            if (not_plain((unsigned char)s[p])) return -1;
        }
        return -1;
    }
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        if (depth >= 64) return -1;
        p = skip_ws(s, p + 1, q);
        if (p < q && s[p] == close) return p + 1;
        for (;;) {
            if (c == '{') {
                if (p >= q || s[p] != '"') return -1;
                p = strict_value(s, p, q, depth + 1);
                if (p < 0) return -1;
                p = skip_ws(s, p, q);
                if (p >= q || s[p] != ':') return -1;
                p = skip_ws(s, p + 1, q);
            }
            p = strict_value(s, p, q, depth + 1);
            if (p < 0) return -1;
            p = skip_ws(s, p, q);
            if (p >= q) return -1;
            if (s[p] == close) return p + 1;
            if (s[p] != ',') return -1;
            p = skip_ws(s, p + 1, q);
        }
    }
    if (c == 't') return q - p >= 4 && memcmp(s + p, "true", 4) == 0 ? p + 4 : -1;
    if (c == 'f') return q - p >= 5 && memcmp(s + p, "false", 5) == 0 ? p + 5 : -1;
    if (c == 'n') return q - p >= 4 && memcmp(s + p, "null", 4) == 0 ? p + 4 : -1;
    /* A number: -?(0|[1-9][0-9]*)(.[0-9]+)?, at most 32 characters, so it is finite whatever it
     * decodes to (no exponent: the subset leaves those to msgspec). */
    Py_ssize_t i = p;
    if (i < q && s[i] == '-') i++;
    if (i < q && s[i] == '0') i++;
    else if (i < q && s[i] >= '1' && s[i] <= '9') while (i < q && s[i] >= '0' && s[i] <= '9') i++;
    else return -1;
    if (i < q && s[i] == '.') {
        i++;
        if (i >= q || s[i] < '0' || s[i] > '9') return -1;
        while (i < q && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < q && (s[i] == 'e' || s[i] == 'E')) return -1;
    return i - p <= 32 ? i : -1;
}

/* Whether s[p..q) is printable ASCII without a backslash (every string in it then within strict_value's). */
static int printable(const char *s, Py_ssize_t p, Py_ssize_t q) {
#if defined(__SSE2__)
    for (; p + 16 <= q; p += 16)
        if (_mm_movemask_epi8(not_plain16(_mm_loadu_si128((const __m128i *)(s + p))))) return 0;
#endif
    for (; p < q; p++)
        if (not_plain((unsigned char)s[p])) return 0;
    return 1;
}

static int key_in(const char *s, Py_ssize_t k0, Py_ssize_t k1, const char **keys, const Py_ssize_t *lens, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (lens[i] == k1 - k0 && same(s + k0, keys[i], lens[i])) return 1;
    return 0;
}

/* The args object at s[p] == '{' of a kept event, slimmed into o, the members kept read into r too
 * (or NULL) as event_args reads them, *others counting those that are not Args' ints. Returns the
 * index after it, -1 in doubt, -2 out of memory. */
static Py_ssize_t slim_args(const char *s, Py_ssize_t p, Py_ssize_t e1, const Slim *sl, int no_shapes, Out *o, Rec *r,
                            int *others) {
    int first = 1, seen = 0;
    if (out_put(o, "{", 1) < 0) return -2;
    p = skip_ws(s, p + 1, e1);
    if (p < e1 && s[p] == '}') return out_put(o, "}", 1) < 0 ? -2 : p + 1;
    for (;;) {
        int kesc = 0;
        Py_ssize_t k0, k1, end;
        Py_ssize_t v0 = member_key(s, p, e1, &k0, &k1, &kesc);
        if (v0 < 0 || kesc) return -1;
        int keep = key_in(s, k0, k1, sl->keys, sl->key_lens, sl->n_keys)
                   && !(no_shapes && key_in(s, k0, k1, sl->shapes, sl->shape_lens, sl->n_shapes));
        /* a member left out is read once, by the strict check, which also finds its end */
        Py_ssize_t v1 = keep ? skip_value(s, v0, e1) : strict_value(s, v0, e1, 0);
        int got = keep && r != NULL && v1 >= 0 ? arg_member(s, k0, k1, v0, v1, r, &seen) : 0;
        if (v1 < 0 || got < 0) return -1;
        if (keep) {
            *others += !got;
            /* from the key's opening quote to the value's end, as written */
            if (put_item(o, &first, s + k0 - 1, v1 - (k0 - 1)) < 0) return -2;
        }
        p = member_next(s, v1, e1, &end);
        if (p == OBJECT_ENDS) return out_put(o, "}", 1) < 0 ? -2 : end;
        if (p < 0) return -1;
    }
}

/* The kept event s[e0..e1) into o, its args slimmed (no_shapes: without the shape members too).
 * SCAN_OK, SCAN_DOUBT or SCAN_NO_MEMORY. */
static int put_slim(const char *s, Py_ssize_t e0, Py_ssize_t e1, const Slim *sl, int no_shapes, Out *o) {
    Py_ssize_t p = skip_ws(s, e0 + 1, e1), copied = e0;
    int seen_args = 0, others = 0;
    if (p < e1 && s[p] != '}') {
        for (;;) {
            int kesc = 0;
            Py_ssize_t k0, k1, end;
            Py_ssize_t v0 = member_key(s, p, e1, &k0, &k1, &kesc);
            if (v0 < 0 || kesc) return SCAN_DOUBT;
            Py_ssize_t v1;
            if (key_is(s, k0, k1, "args") && s[v0] == '{') {
                if (seen_args++) return SCAN_DOUBT; /* a repeated key: the decoder decides */
                if (out_put(o, s + copied, v0 - copied) < 0) return SCAN_NO_MEMORY;
                v1 = slim_args(s, v0, e1, sl, no_shapes, o, NULL, &others);
                if (v1 == -2) return SCAN_NO_MEMORY;
                if (v1 < 0) return SCAN_DOUBT;
                copied = v1;
            } else {
                if (key_is(s, k0, k1, "args")) seen_args++;
                v1 = skip_value(s, v0, e1);
                if (v1 < 0) return SCAN_DOUBT;
            }
            p = member_next(s, v1, e1, &end);
            if (p == OBJECT_ENDS) break;
            if (p < 0) return SCAN_DOUBT;
        }
    }
    return out_put(o, s + copied, e1 - copied) < 0 ? SCAN_NO_MEMORY : SCAN_OK;
}

/* The list an event joins, from its cat and name: a G_* value, -1 for none (dropped, or decoded and
 * dropped when it has no "cat"), or SCAN_DOUBT. *cid: the category's id (Rec.cat). */
static int event_group(const Rules *r, const Route *rt, CatMemo *m, const Str *cat, const Str *name, int64_t *cid) {
    int g = cat->seen ? cat_group(rt, m, cat, cid) : -1; /* no "cat": the decoder's default, "" */
    if (g >= 0) return g;
    *cid = -1;
    /* Python frames (ops when nn.Module scopes) and any other category ([memory] instants). */
    int frame = cat->seen && str_is(cat, r->frame_cat, r->frame_cat_len);
    if (name->seen && name->escaped) return SCAN_DOUBT;
    if (frame) {
        *cid = rt->n[0] + rt->n[1] + rt->n[2] + rt->n[3];
        return name->seen && name->n >= r->frame_prefix_len
               && same(name->p, r->frame_prefix, r->frame_prefix_len) ? G_OPS : -1;
    }
    return name->seen && str_is(name, r->other_name, r->other_name_len) ? G_JSON : -1;
}

/* Whether an event of list g with this name leaves its shapes out (an op keep_shapes said no to). */
static int no_shapes(const Route *rt, int g, const Str *name) {
    return g == G_OPS && name->seen && !name->escaped && nameset_has(&rt->slim.drop_shapes, name->p, name->n);
}

/* Slimming in the same walk as the scan: when an event's cat and name come before its args (as
 * kineto writes them) and put it in a slimmed list, its args are slimmed as they are read, instead
 * of read twice (a [memory] instant's are read for its record, not skipped first). Anything else (and
 * any failure, a window's end included) is left to put_slim and event_record. */
typedef struct {
    const Rules *r;
    const Route *rt;
    Out out; /* the slimmed args of the event being scanned (slimmed) */
    Rec args; /* their members, or a [memory] instant's, read here (read): event_record's args */
    Py_ssize_t a0, a1; /* where its args value lies in the text */
    int read, slimmed, args_seen, others; /* others: args members kept that are not Args' ints (slim_args) */
    int grouped, group; /* the event's event_group, when this hook worked it out (its cat and name are final then) */
    int64_t cid;
    CatMemo memo; /* event_group's */
} SlimHook;

static Py_ssize_t slim_hook(void *ctx, const char *s, Py_ssize_t p, Py_ssize_t stop, const Str *cat, const Str *name) {
    SlimHook *h = ctx;
    if (h->args_seen++ || s[p] != '{' || !cat->seen || cat->escaped || !name->seen || name->escaped) return -1;
    int g = h->group = event_group(h->r, h->rt, &h->memo, cat, name, &h->cid);
    h->grouped = 1;
    if (g != G_OPS && g != G_GPU && g != G_LAUNCH && g != G_JSON) return -1;
    h->out.len = h->others = 0;
    memset(h->args.arg, 0, sizeof(h->args.arg)), h->args.nulls = N_ARGS - 1; /* an args object, nothing read yet */
    /* a [memory] instant's args only read (it becomes its record), the others' slimmed as they are read */
    Py_ssize_t end = g == G_JSON ? event_args(s, p, stop, &h->args)
                                 : slim_args(s, p, stop, &h->rt->slim, no_shapes(h->rt, g, name), &h->out, &h->args, &h->others);
    if (end < 0) return -1;
    h->read = 1;
    h->slimmed = g != G_JSON;
    h->a0 = p;
    h->a1 = end;
    return end;
}

/* Reads the event array from s[pos] (just after its '[' or after a ',') until at least `budget`
 * bytes are consumed or the array's ']' is reached; *next is where the following call starts (or the
 * index of ']'), *done says the array ended. Without a Route (rt NULL) the events worth keeping
 * (keep_event) go to outs[G_REST] as one JSON array. With one, each kept event is written to its
 * list's array (outs[G_OPS..G_REST]; an op's or a launch's name to outs[G_NAMES] or outs[G_NAMES + 1]
 * too), its Rec to outs[G_RECS + list] and each [memory] instant to outs[G_JSON] as a Rec.
 * SCAN_DOUBT: an event the rules cannot be applied to from its text; the caller scans the chunk
 * again without the Route. */
static int scan_chunk(const char *s, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t budget, const Rules *r,
                       const Route *rt, Out *outs, Py_ssize_t *dropped, Py_ssize_t *insane, Py_ssize_t *next,
                       int *done, int partial, SlimHook *hook) {
    Py_ssize_t p = skip_ws(s, pos, stop);
    int first[G_JSON] = {1, 1, 1, 1, 1, 1, 1};
    for (int g = 0; g < G_JSON; g++)
        if ((rt != NULL || g == G_REST) && out_put(&outs[g], "[", 1) < 0) return SCAN_NO_MEMORY;
    if (p < stop && s[p] == ']' && pos > 0 && s[skip_back(s, pos)] == '[') {
        *done = 1;
        *next = p;
        goto close;
    }
    while (p < stop) {
        Py_ssize_t e0 = p, e1, mark[N_OUTS], dropped0 = *dropped, insane0 = *insane;
        int first0[G_JSON];
        for (int g = 0; g < N_OUTS; g++) mark[g] = outs[g].len;
        memcpy(first0, first, sizeof(first));
        Str cat = {0}, name = {0}, ph = {0};
        int doubt = 0, ph_doubt = 0;
        hook->read = hook->slimmed = hook->args_seen = hook->grouped = 0;
        Spans sp;
        e1 = s[p] != '{' ? skip_value(s, p, stop)
             : scan_event(s, p, stop, &cat, &name, &ph, &doubt, &ph_doubt, rt != NULL && rt->slim.on ? slim_hook : NULL,
                          hook, rt != NULL ? &sp : NULL);
        if (e1 < 0 && partial) goto more;
        if (e1 < 0) return SCAN_NOT_PLAIN;
        /* An item that is no event object is handed on only when it is plain JSON; junk (b"\x00", b"1\x00")
         * never is: the whole text goes to the decoder, which words what is wrong. */
        if (s[p] != '{' && strict_value(s, e0, e1, 0) != e1) return SCAN_NOT_PLAIN;
        if (rt == NULL) { /* the plain way: kept unless keep_event drops it (not an object: for the decoder to word) */
            int keep = s[p] != '{' || doubt || keep_event(r, &cat, &name);
            *dropped += !keep;
            if (keep && put_item(&outs[G_REST], &first[G_REST], s + e0, e1 - e0) < 0) return SCAN_NO_MEMORY;
            goto separator;
        }
        if (s[p] != '{') return SCAN_DOUBT; /* not an event object: the decoder words it */
        if (doubt || ph_doubt || cat.escaped || (ph.seen && ph.escaped) || hook->args_seen > 1) return SCAN_DOUBT;
        int64_t cid = hook->cid;
        int g = hook->grouped ? hook->group : event_group(r, rt, &hook->memo, &cat, &name, &cid);
        if (g == SCAN_DOUBT) return SCAN_DOUBT;
        Rec rec;
        int sane = 1;
        if (g >= 0 && ph_ok(g, &ph)) {
            sane = event_record(s, &sp, rt, &rec, hook->read ? &hook->args : NULL);
            if (sane < 0) return SCAN_DOUBT;
            rec.cat = cid;
            *insane += !sane;
        }
        if (g < 0 && cat.seen) {
            (*dropped)++;
        } else if (g < 0 || !ph_ok(g, &ph)) {
            /* Fails a rule, but the plain scan would have kept it (no "cat"): decoded, then dropped. */
            if (put_item(&outs[G_REST], &first[G_REST], s + e0, e1 - e0) < 0) return SCAN_NO_MEMORY;
        } else if (g == G_JSON) {
            if (sane && out_put(&outs[G_JSON], (const char *)&rec, sizeof(rec)) < 0) return SCAN_NO_MEMORY;
        } else if (sane) {
            Py_ssize_t at = outs[g].len;
            if (!first[g] && out_put(&outs[g], ",", 1) < 0) return SCAN_NO_MEMORY;
            /* an op's or launch's name also as one string of an array of their own: Python keeps those as columns */
            int named = g == G_OPS || g == G_LAUNCH, nm = G_NAMES + (g == G_LAUNCH);
            if (named && ((!first[nm] && out_put(&outs[nm], ",", 1) < 0) || out_put(&outs[nm], "\"", 1) < 0
                          || out_put(&outs[nm], name.seen ? name.p : "", name.seen ? name.n : 0) < 0
                          || out_put(&outs[nm], "\"", 1) < 0))
                return SCAN_NO_MEMORY;
            first[nm] &= !named;
            if (rt->slim.on && g != G_FLOW && hook->slimmed) {
                /* slimmed while scanned (slim_hook): the text around the args, and its slim copy */
                if (out_put(&outs[g], s + e0, hook->a0 - e0) < 0 || out_put(&outs[g], hook->out.buf, hook->out.len) < 0
                    || out_put(&outs[g], s + hook->a1, e1 - hook->a1) < 0)
                    return SCAN_NO_MEMORY;
            } else if (rt->slim.on && g != G_FLOW) {
                int got = put_slim(s, e0, e1, &rt->slim, no_shapes(rt, g, &name), &outs[g]);
                if (got != SCAN_OK) return got;
            } else if (out_put(&outs[g], s + e0, e1 - e0) < 0) {
                return SCAN_NO_MEMORY;
            }
            /* An op or launch written in the strict subset, without shapes, is only its record and name:
             * Python reads nothing more of it, and there is nothing left for msgspec to check. Most are
             * known to be from the walk: printable, and only members event_record and slim_args checked. */
            const Py_ssize_t *ts = sp.v[S_TS], *dur = sp.v[S_DUR];
            int known = hook->slimmed && !hook->others && !sp.others && sp.v[S_ID][0] < 0
                        && (ts[0] < 0 || strict_value(s, ts[0], ts[1], 0) == ts[1])
                        && (dur[0] < 0 || strict_value(s, dur[0], dur[1], 0) == dur[1])
                        && printable(outs[g].buf, at + !first[g], outs[g].len);
            if (!named || (rec.nulls & HAS_SHAPES)
                || (!known && strict_value(outs[g].buf, at + !first[g], outs[g].len, 0) != outs[g].len))
                first[g] = 0, rec.nulls |= named ? HAS_JSON : 0;
            else
                outs[g].len = at;
            if (g != G_FLOW && out_put(&outs[G_RECS + g], (const char *)&rec, sizeof(rec)) < 0) return SCAN_NO_MEMORY;
        }
    separator:
        p = skip_ws(s, e1, stop);
        if (p >= stop && partial) goto more;
        if (p >= stop) return SCAN_NOT_PLAIN;
        if (s[p] == ']') {
            *done = 1;
            *next = p;
            goto close;
        }
        if (s[p] != ',') return SCAN_NOT_PLAIN;
        p = skip_ws(s, p + 1, stop);
        if (p < stop && s[p] == ']') return SCAN_NOT_PLAIN;
        if (p >= stop && !partial) return SCAN_NOT_PLAIN; /* cut after a ',': no next position inside the text */
        if (p - pos >= budget) {
            *next = p;
            goto close;
        }
        continue;
    more:
        /* Streaming (partial): this event is not complete in the window. Undo it, and go on from
         * its start once the caller has appended the next piece of the file. */
        for (int g = 0; g < N_OUTS; g++) outs[g].len = mark[g];
        memcpy(first, first0, sizeof(first));
        *dropped = dropped0;
        *insane = insane0;
        *next = e0;
        goto close;
    }
    if (p >= stop && partial) {
        *next = p; /* the window ended just after a ',': the next event starts in the next one */
        goto close;
    }
    return SCAN_NOT_PLAIN; /* cut short: no closing bracket */
close:
    for (int g = 0; g < G_JSON; g++)
        if ((rt != NULL || g == G_REST) && out_put(&outs[g], "]", 1) < 0) return SCAN_NO_MEMORY;
    return SCAN_OK;
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

static int bytes_items(PyObject *t, const char ***items, Py_ssize_t **lens, Py_ssize_t *n, const char *what) {
    if (!PyTuple_Check(t)) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of bytes", what);
        return -1;
    }
    *n = PyTuple_GET_SIZE(t);
    *items = PyMem_Malloc(sizeof(char *) * (size_t)(*n + 1));
    *lens = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(*n + 1));
    if (*items == NULL || *lens == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++)
        if (as_bytes(PyTuple_GET_ITEM(t, i), &(*items)[i], &(*lens)[i], what) < 0) return -1;
    return 0;
}

/* scan_events' slim argument, (arg_keys, shape_keys, drop_shapes): three tuples of bytes, which the
 * caller holds for the call (the set points into them). */
static int slim_rules(PyObject *t, Slim *sl) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
        PyErr_SetString(PyExc_TypeError, "slim must be (arg_keys, shape_keys, drop_shapes)");
        return -1;
    }
    const char **names = NULL;
    Py_ssize_t *lens = NULL, n = 0;
    if (bytes_items(PyTuple_GET_ITEM(t, 0), &sl->keys, &sl->key_lens, &sl->n_keys, "slim arg_keys") < 0
        || bytes_items(PyTuple_GET_ITEM(t, 1), &sl->shapes, &sl->shape_lens, &sl->n_shapes, "slim shape_keys") < 0)
        return -1;
    int rc = bytes_items(PyTuple_GET_ITEM(t, 2), &names, &lens, &n, "slim drop_shapes");
    if (rc == 0) {
        size_t cap = 8;
        while (cap < 2 * (size_t)n + 2) cap *= 2;
        sl->drop_shapes.p = PyMem_Calloc(cap, sizeof(char *));
        sl->drop_shapes.n = PyMem_Calloc(cap, sizeof(Py_ssize_t));
        if (sl->drop_shapes.p == NULL || sl->drop_shapes.n == NULL) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            sl->drop_shapes.cap = cap;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (nameset_has(&sl->drop_shapes, names[i], lens[i])) continue;
                size_t j = name_hash(names[i], lens[i]) & (cap - 1);
                while (sl->drop_shapes.p[j] != NULL) j = (j + 1) & (cap - 1);
                sl->drop_shapes.p[j] = names[i];
                sl->drop_shapes.n[j] = lens[i];
            }
            sl->on = 1;
        }
    }
    PyMem_Free((void *)names);
    PyMem_Free(lens);
    return rc;
}

PyDoc_STRVAR(scan_events_doc,
"scan_events(text, pos, budget, cats, frame_cat, frame_prefix, other_name, partial=False, route=None,\n"
"            slim=None)\n"
"    -> (bytes | tuple | None, dropped, next, done)\n\n"
"Reads the trace's event array from text[pos] (just after its '[' or after the ',' where the\n"
"previous call stopped) for about `budget` bytes, and returns the events the analysis may use\n"
"as one JSON array, how many it dropped, where to go on, and whether the array ended (then\n"
"`next` is the index of its ']'). An event is kept when its \"cat\" is one of cats; when it\n"
"is frame_cat and its \"name\" starts with frame_prefix; when its \"name\" is other_name; or\n"
"when it cannot be judged without decoding. The first item is None when the text is not a\n"
"plain array of values from pos (cut short, unbalanced, a stray character): the caller then\n"
"decodes the file without this scanner. With partial, text is a window of a file being\n"
"streamed: where the window ends inside an event, the call returns the events before it, done\n"
"False and `next` at that event's start, to be called again on a window that starts there.\n\n"
"route=(ops_cats, gpu_cats, launch_cats, flow_cats, max_ts, max_dur) applies all of the keeping\n"
"rules: the first item is then (ops, gpu, launches, flows, rest, memory, op_recs, gpu_recs,\n"
"launch_recs, insane, op_names, launch_names): a JSON array per list, the events that fail the ph\n"
"rule (rest), the [memory] instants as Rec records, the Recs of the ops, GPU activities and launches\n"
"(one per event kept, in order; trace/table.py reads them; an op's or launch's JSON is in its array\n"
"only where its Rec's nulls has the JSON bit), how many kept events had implausible times (left out\n"
"of every list), and the ops' and the launches' names as two JSON arrays of strings (\"\" where none). When some event of the chunk cannot be judged from its text, the first\n"
"item is the plain JSON array instead.\n\n"
"slim=(arg_keys, shape_keys, drop_shapes), with a route: each kept op, GPU activity and launch keeps\n"
"only the args members named in arg_keys, and an op whose name is in drop_shapes none of those in\n"
"shape_keys; every member left out must be plain JSON (printable ASCII strings without escapes),\n"
"else the chunk is handed back as plain JSON.");

static PyObject *scan_events(PyObject *self, PyObject *args) {
    Py_buffer text;
    Py_ssize_t pos, budget, dropped = 0, next = 0, insane = 0;
    int done = 0, rc, partial = 0, routed = 0;
    PyObject *cats, *frame_cat, *frame_prefix, *other_name, *route = Py_None, *slim = Py_None, *result = NULL;
    Rules r = {0};
    Route rt = {0};
    Out outs[N_OUTS] = {{0}};
    SlimHook hook = {.r = &r, .rt = &rt};
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!SSS|pOO", &text, &pos, &budget, &PyTuple_Type, &cats, &frame_cat,
                          &frame_prefix, &other_name, &partial, &route, &slim))
        return NULL;
    if (pos < 0 || pos > text.len) {
        PyErr_SetString(PyExc_ValueError, "pos must lie within text");
        goto done;
    }
    if (bytes_items(cats, &r.cats, &r.cat_lens, &r.n_cats, "cats") < 0) goto done;
    if (as_bytes(frame_cat, &r.frame_cat, &r.frame_cat_len, "frame_cat") < 0
        || as_bytes(frame_prefix, &r.frame_prefix, &r.frame_prefix_len, "frame_prefix") < 0
        || as_bytes(other_name, &r.other_name, &r.other_name_len, "other_name") < 0)
        goto done;
    if (route != Py_None) {
        if (!PyTuple_Check(route) || PyTuple_GET_SIZE(route) != 6) {
            PyErr_SetString(PyExc_TypeError, "route must be (ops_cats, gpu_cats, launch_cats, flow_cats, max_ts, max_dur)");
            goto done;
        }
        for (int g = 0; g < 4; g++)
            if (bytes_items(PyTuple_GET_ITEM(route, g), &rt.cats[g], &rt.lens[g], &rt.n[g], "route cats") < 0) goto done;
        rt.max_ts = PyFloat_AsDouble(PyTuple_GET_ITEM(route, 4));
        rt.max_dur = PyFloat_AsDouble(PyTuple_GET_ITEM(route, 5));
        if (PyErr_Occurred()) goto done;
        routed = 1;
        if (slim != Py_None && slim_rules(slim, &rt.slim) < 0) goto done;
    }
    /* The scan touches only the caller's immutable bytes and raw memory of its own, so other
     * threads run meanwhile: the next chunk is scanned while Python decodes this one. */
    Py_BEGIN_ALLOW_THREADS
    rc = scan_chunk((const char *)text.buf, pos, text.len, budget, &r, routed ? &rt : NULL, outs, &dropped, &insane,
                    &next, &done, partial, &hook);
    if (rc == SCAN_DOUBT) { /* again, the plain way */
        for (int g = 0; g < N_OUTS; g++) outs[g].len = 0;
        dropped = insane = next = done = routed = 0;
        rc = scan_chunk((const char *)text.buf, pos, text.len, budget, &r, NULL, outs, &dropped, &insane, &next, &done,
                        partial, &hook);
    }
    Py_END_ALLOW_THREADS
    if (rc == SCAN_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == SCAN_NOT_PLAIN) {
        result = Py_BuildValue("(Onnn)", Py_None, (Py_ssize_t)0, (Py_ssize_t)0, (Py_ssize_t)0);
        goto done;
    }
#define OUT_BYTES(g) (outs[g].buf ? outs[g].buf : ""), outs[g].len /* a record output may be unallocated */
    if (routed)
        result = Py_BuildValue("((y#y#y#y#y#y#y#y#y#ny#y#)nnO)", OUT_BYTES(G_OPS), OUT_BYTES(G_GPU), OUT_BYTES(G_LAUNCH),
                               OUT_BYTES(G_FLOW), OUT_BYTES(G_REST), OUT_BYTES(G_JSON), OUT_BYTES(G_RECS + G_OPS), OUT_BYTES(G_RECS + G_GPU),
                               OUT_BYTES(G_RECS + G_LAUNCH), insane, OUT_BYTES(G_NAMES), OUT_BYTES(G_NAMES + 1), dropped, next,
                               done ? Py_True : Py_False);
    else
        result = Py_BuildValue("(y#nnO)", OUT_BYTES(G_REST), dropped, next, done ? Py_True : Py_False);
done:
    PyMem_RawFree(hook.out.buf);
    for (int g = 0; g < N_OUTS; g++) PyMem_RawFree(outs[g].buf);
    for (int g = 0; g < 4; g++) {
        PyMem_Free((void *)rt.cats[g]);
        PyMem_Free(rt.lens[g]);
    }
    PyMem_Free((void *)rt.slim.keys);
    PyMem_Free(rt.slim.key_lens);
    PyMem_Free((void *)rt.slim.shapes);
    PyMem_Free(rt.slim.shape_lens);
    PyMem_Free((void *)rt.slim.drop_shapes.p);
    PyMem_Free(rt.slim.drop_shapes.n);
    PyMem_Free((void *)r.cats);
    PyMem_Free(r.cat_lens);
    PyBuffer_Release(&text);
    return result;
}

/* ---- The op tree's one sequential pass ------------------------------------------------------ */

PyDoc_STRVAR(nest_sorted_doc,
"nest_sorted(ts, dur, op_at, lts, launch_at, parent, subtree_end, depth, launch_op)\n\n"
"The stack pass of the op tree (trace/link.py), over numpy buffers. ts, dur (float64): the ops in\n"
"tree order (by thread, then start, then longest first); op_at (int64, one more than threads):\n"
"where each thread's ops start; lts (float64): the launches' starts, by thread and time, and\n"
"launch_at where each thread's launches start. Each op's parent is the innermost op still open\n"
"when it starts (an op closes at the first later start at or past its end and the ends of every\n"
"op opened after it, as a stack pops), its depth the number of ops open, its subtree the range of\n"
"the order up to the op at which it closed; a launch belongs to the innermost op open just before\n"
"it. Writes parent, subtree_end, depth (int64, per op) and launch_op (int64, per launch; -1:\n"
"none). ValueError on lengths or thread offsets that do not fit.");

static int nest_buffer(PyObject *o, Py_buffer *b, int writable, Py_ssize_t item) {
    if (PyObject_GetBuffer(o, b, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (b->len % item) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_ValueError, "nest_sorted: a buffer of partial items");
        return -1;
    }
    return 0;
}

static int offsets_ok(const int64_t *at, Py_ssize_t nth, Py_ssize_t n) {
    if (nth < 1 || at[0] != 0 || at[nth - 1] != n) return 0;
    for (Py_ssize_t k = 1; k < nth; k++)
        if (at[k] < at[k - 1]) return 0;
    return 1;
}

static PyObject *nest_sorted(PyObject *self, PyObject *args) {
    PyObject *o[9];
    Py_buffer b[9];
    int got = 0;
    PyObject *result = NULL;
    int64_t *stack = NULL;
    double *ends = NULL;
    (void)self;
    if (!PyArg_UnpackTuple(args, "nest_sorted", 9, 9, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    for (; got < 9; got++)
        if (nest_buffer(o[got], &b[got], got >= 5, 8) < 0) goto done;
    Py_ssize_t n = b[0].len / 8, m = b[3].len / 8, nth = b[2].len / 8;
    const double *ts = b[0].buf, *dur = b[1].buf, *lts = b[3].buf;
    const int64_t *op_at = b[2].buf, *l_at = b[4].buf;
    int64_t *parent = b[5].buf, *send = b[6].buf, *depth = b[7].buf, *lop = b[8].buf;
    if (b[1].len != b[0].len || b[5].len != b[0].len || b[6].len != b[0].len || b[7].len != b[0].len
        || b[8].len != b[3].len || b[4].len != b[2].len || !offsets_ok(op_at, nth, n) || !offsets_ok(l_at, nth, m)) {
        PyErr_SetString(PyExc_ValueError, "nest_sorted: columns of mismatched lengths or offsets");
        goto done;
    }
    stack = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    ends = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    if (!stack || !ends) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t + 1 < nth; t++) {
        Py_ssize_t sp = 0, li = l_at[t], lend = l_at[t + 1], end_all = op_at[t + 1];
        for (Py_ssize_t i = op_at[t]; i < end_all; i++) {
            double start = ts[i];
            for (; li < lend && lts[li] < start; li++) {
                while (sp > 0 && ends[sp - 1] <= lts[li]) send[stack[--sp]] = i;
                lop[li] = sp > 0 ? stack[sp - 1] : -1;
            }
            while (sp > 0 && ends[sp - 1] <= start) send[stack[--sp]] = i;
            parent[i] = sp > 0 ? stack[sp - 1] : -1;
            depth[i] = sp; /* the stack holds exactly the op's ancestors */
            stack[sp] = i;
            ends[sp++] = start + dur[i];
        }
        for (; li < lend; li++) {
            while (sp > 0 && ends[sp - 1] <= lts[li]) send[stack[--sp]] = end_all;
            lop[li] = sp > 0 ? stack[sp - 1] : -1;
        }
        while (sp > 0) send[stack[--sp]] = end_all;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(stack);
    PyMem_Free(ends);
    while (got > 0) PyBuffer_Release(&b[--got]);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_events", scan_events, METH_VARARGS, scan_events_doc},
    {"nest_sorted", nest_sorted, METH_VARARGS, nest_sorted_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scanner",
    "Drops trace events the analysis never reads before they are decoded, and writes the kept ones' records.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__scanner(void) {
    for (int k = 0; k < N_INTS; k++) INT_LENS[k] = (Py_ssize_t)strlen(INT_KEYS[k]);
    for (int k = 0; k < N_SPANS; k++) SPAN_LENS[k] = (Py_ssize_t)strlen(SPAN_KEYS[k]);
    for (const char *c = " \n\r\t,}]"; *c; c++) ENDS_VALUE[(unsigned char)*c] = 1;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "REC_SIZE", (long)sizeof(Rec)) < 0) Py_CLEAR(m);
    return m;
}
