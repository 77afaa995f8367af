/* A merge sort with the comparison inlined, for arrays of small structs: the op tree's items
 * (_nest.c) and a memory timeline's allocation events (_columns.c). qsort calls its comparison
 * through a pointer for every pair; with it inlined the sort of a big trace's ops takes about a
 * third of the time.
 *
 * MERGE_SORT(name, T, before) defines static void name(T *v, Py_ssize_t n, T *tmp): v sorted by
 * before(a, b) (const T * each; a strict total order, so the result is the one any sort gives),
 * with tmp as scratch of n items. Runs of 32 are insertion-sorted, then merged bottom-up between
 * v and tmp; two runs already in order are copied, not merged (traces come nearly sorted). */
#ifndef TB_ATTN_MERGE_SORT_H
#define TB_ATTN_MERGE_SORT_H

#include <string.h>

#define MERGE_SORT(name, T, before)                                                                    \
    static void name(T *v, Py_ssize_t n, T *tmp) {                                                     \
        const Py_ssize_t RUN = 32;                                                                     \
        for (Py_ssize_t lo = 0; lo < n; lo += RUN) {                                                   \
            Py_ssize_t hi = lo + RUN < n ? lo + RUN : n;                                               \
            for (Py_ssize_t k = lo + 1; k < hi; k++) {                                                 \
                T x = v[k];                                                                            \
                Py_ssize_t j = k;                                                                      \
                while (j > lo && before(&x, &v[j - 1])) {                                              \
                    v[j] = v[j - 1];                                                                   \
                    j--;                                                                               \
                }                                                                                      \
                v[j] = x;                                                                              \
            }                                                                                          \
        }                                                                                              \
        T *src = v, *dst = tmp;                                                                        \
        for (Py_ssize_t width = RUN; width < n; width *= 2) {                                          \
            for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {                                         \
                Py_ssize_t mid = lo + width < n ? lo + width : n;                                      \
                Py_ssize_t hi = lo + 2 * width < n ? lo + 2 * width : n;                               \
                Py_ssize_t a = lo, b = mid, o = lo;                                                    \
                if (mid < hi && !before(&src[mid], &src[mid - 1])) {                                   \
                    memcpy(dst + lo, src + lo, sizeof(T) * (size_t)(hi - lo));                         \
                    continue;                                                                          \
                }                                                                                      \
                while (a < mid && b < hi) dst[o++] = before(&src[b], &src[a]) ? src[b++] : src[a++];   \
                while (a < mid) dst[o++] = src[a++];                                                   \
                while (b < hi) dst[o++] = src[b++];                                                    \
            }                                                                                          \
            T *t = src;                                                                                \
            src = dst;                                                                                 \
            dst = t;                                                                                   \
        }                                                                                              \
        if (src != v) memcpy(v, src, sizeof(T) * (size_t)n);                                           \
    }

#endif
