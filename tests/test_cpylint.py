"""Simple linters for the C-API mistakes that are easy to make and easy to catch in our two C files
(trace/_scanner.c, memory/_snapshot_decode.c), in the manner of msgspec's tests/unit/test_cpylint.py.
These are naive text checks: a line that is right but trips one carries ``/* cpylint-ignore */``.

- Code that runs with the GIL released (between Py_BEGIN_ALLOW_THREADS and Py_END_ALLOW_THREADS, and every
  static function of the file it calls, transitively) calls no C-API function that needs the GIL (only the
  PyMem_Raw* allocators are safe there), and does not return or jump out of the block.
- A function that takes a buffer (PyObject_GetBuffer) releases one (PyBuffer_Release).
- Every PyMem_* allocation is checked for NULL within the next few lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tb_attn_plugin"
SOURCES = sorted(ROOT.rglob("*.c"))
IGNORE = "cpylint-ignore"
GIL_FREE_API = re.compile(r"\bPyMem_Raw\w+$")  # the raw allocators need no GIL (Python's C-API docs, "Raw Memory Interface")
API_CALL = re.compile(r"\b(_?Py[A-Z]\w*)\s*\(")
DEF = re.compile(r"^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\([^;]*$")
ALLOC = re.compile(r"(\w+(?:->\w+|\.\w+)*(?:\[\w+\])?)\s*=\s*[^;=]*?\bPyMem_(?:Raw)?(?:Malloc|Calloc|Realloc)\s*\(")
CHECK_LINES = 3


def functions(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Each function defined at the top level: name -> (first body line, closing line), 0-based."""
    out: dict[str, tuple[int, int]] = {}
    i = 0
    while i < len(lines):
        m = DEF.match(lines[i])
        if m and not lines[i].startswith((" ", "\t", "#")) and not lines[i].rstrip().endswith(";"):
            j = i
            while j < len(lines) and "{" not in lines[j]:
                j += 1
            k = j + 1
            while k < len(lines) and not lines[k].startswith("}"):
                k += 1
            out[m.group(1)] = (j, k)
            i = k
        i += 1
    return out


def gil_free_lines(lines: list[str]) -> list[int]:
    """The lines that run without the GIL: the blocks, and the bodies of the file's functions they call."""
    funcs = functions(lines)
    called: set[str] = set()
    block_lines: list[int] = []
    inside = False
    for n, line in enumerate(lines):
        if "Py_BEGIN_ALLOW_THREADS" in line:
            inside = True
            continue
        if "Py_END_ALLOW_THREADS" in line:
            inside = False
            continue
        if inside:
            block_lines.append(n)
    out = list(block_lines)
    frontier = [lines[n] for n in block_lines]
    while frontier:
        text = "\n".join(frontier)
        frontier = []
        for name, (a, b) in funcs.items():
            if name not in called and re.search(rf"\b{re.escape(name)}\s*\(", text):
                called.add(name)
                out.extend(range(a, b))
                frontier.extend(lines[a:b])
    return sorted(set(out))


def lint_gil(lines: list[str]) -> list[str]:
    errors = []
    for n in gil_free_lines(lines):
        line = lines[n]
        if IGNORE in line:
            continue
        for m in API_CALL.finditer(line):
            if not GIL_FREE_API.search(m.group(1)):
                errors.append(f"line {n + 1}: {m.group(1)} called without the GIL")
    inside = False
    for n, line in enumerate(lines):
        if "Py_BEGIN_ALLOW_THREADS" in line:
            inside = True
        elif "Py_END_ALLOW_THREADS" in line:
            inside = False
        elif inside and IGNORE not in line and re.search(r"\b(return|goto)\b", line):
            errors.append(f"line {n + 1}: leaves a Py_BEGIN_ALLOW_THREADS block without Py_END_ALLOW_THREADS")
    if inside:
        errors.append("Py_BEGIN_ALLOW_THREADS without Py_END_ALLOW_THREADS")
    return errors


def lint_buffers(lines: list[str]) -> list[str]:
    errors = []
    for name, (a, b) in functions(lines).items():
        body = lines[a:b]
        takes = [a + i for i, line in enumerate(body) if "PyObject_GetBuffer" in line and IGNORE not in line]
        if takes and not any("PyBuffer_Release" in line for line in body):
            errors.append(f"line {takes[0] + 1}: {name} takes a buffer and never releases one")
    return errors


def lint_allocations(lines: list[str]) -> list[str]:
    errors = []
    for n, line in enumerate(lines):
        m = ALLOC.search(line)
        if not m or IGNORE in line:
            continue
        var = re.escape(m.group(1))
        after = "\n".join(lines[n:n + 1 + CHECK_LINES])
        checked = re.search(rf"!\s*{var}\b|\b{var}\s*==\s*NULL|\b{var}\s*\?|\b{var}\s*&&|&&\s*{var}\b|if\s*\(\s*{var}\s*\)", after)
        if not checked:
            errors.append(f"line {n + 1}: {m.group(1)} from PyMem_* is not checked for NULL")
    return errors


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_c_sources_pass_the_lints(path):
    lines = path.read_text().splitlines()
    errors = lint_gil(lines) + lint_buffers(lines) + lint_allocations(lines)
    assert not errors, f"{path.relative_to(ROOT.parent)}:\n" + "\n".join(errors)


def test_there_are_sources_to_lint():
    assert {p.name for p in SOURCES} >= {"_scanner.c", "_snapshot_decode.c"}


# Each lint catches what it is for: small wrong programs.

def test_a_python_call_without_the_gil_is_caught():
    src = """static int helper(PyObject *o) {
    return PyList_Size(o) > 0;
}
static PyObject *scan(PyObject *self, PyObject *o) {
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = helper(o);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(r);
}""".splitlines()
    errors = lint_gil(src)
    assert errors == ["line 2: PyList_Size called without the GIL"]


def test_raw_allocators_are_allowed_without_the_gil():
    src = """static PyObject *scan(PyObject *self, PyObject *o) {
    char *b;
    Py_BEGIN_ALLOW_THREADS
    b = PyMem_RawMalloc(16);
    Py_END_ALLOW_THREADS
    if (!b) return PyErr_NoMemory();
    PyMem_RawFree(b);
    Py_RETURN_NONE;
}""".splitlines()
    assert lint_gil(src) == []


def test_a_return_inside_the_block_is_caught():
    src = """static PyObject *scan(PyObject *self, PyObject *o) {
    Py_BEGIN_ALLOW_THREADS
    if (o == NULL) return NULL;
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}""".splitlines()
    assert lint_gil(src) == ["line 3: leaves a Py_BEGIN_ALLOW_THREADS block without Py_END_ALLOW_THREADS"]


def test_a_buffer_never_released_is_caught():
    src = """static PyObject *f(PyObject *self, PyObject *o) {
    Py_buffer v;
    if (PyObject_GetBuffer(o, &v, PyBUF_SIMPLE) < 0) return NULL;
    return PyLong_FromSsize_t(v.len);
}""".splitlines()
    assert lint_buffers(src) == ["line 3: f takes a buffer and never releases one"]


def test_an_unchecked_allocation_is_caught_and_a_checked_one_is_not():
    bad = """static int grow(Buf *b, Py_ssize_t cap) {
    b->p = PyMem_Realloc(b->p, (size_t)cap);
    b->cap = cap;
    b->n = 0;
    b->k = 0;
    return 0;
}""".splitlines()
    good = """static int grow(Buf *b, Py_ssize_t cap) {
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) return -1;
    b->p = p;
    return 0;
}""".splitlines()
    assert lint_allocations(bad) == ["line 2: b->p from PyMem_* is not checked for NULL"]
    assert lint_allocations(good) == []
