/* The log scanner's inner loops in C (CPython API only): topodoc.parsers.nccl_log._scan.
 *
 * Each function does, for one block of whole lines, exactly what the Python loop of the same name in
 * scan.py does (scan.py stays the fallback and the oracle: tests/test_nccl_log_cscan.py compares the
 * two on the real corpus, the goldens, generated logs and every block cut), but without a Python object
 * per line: only distinct keys (a connection line's prefix and text, a collective caller's prefix) and
 * the lines Python must read become objects.
 *
 *   channels(block)  -> None | (pairs {(prefix, text): lines}, firsts {(prefix, text): start},
 *                               prefixes {prefix: lines})           -- Scanner._connections' split
 *   records(block, repeats, wanted, worth, whos, conn_line, new, events)
 *                    -> (INFO records, colls {prefix: [n, first start, last message]})
 *                                                                    -- Scanner._records
 *   block(readinto, carry, size) -> (block, carry, read)            -- one step of _read_blocks, the block
 *                                                                       read in place, never copied
 *   gated(block, gates, until, events) -> None                       -- Scanner._gated, every gate in one
 *                                                                       pass (a two-byte filter)
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE 1 /* memrchr (pyconfig.h defines it so, where it does) */
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#define INFO " NCCL INFO "
#define INFO_LEN 11
#define CHANNEL " NCCL INFO Channel "
#define CHANNEL_LEN 19
#define OPCOUNT ": opCount "
#define OPCOUNT_LEN 10
#define LINE_LIMIT 4096
#define CARRY_ROOM 65536 /* block(): room kept for the carry */ /* scan.LINE_LIMIT: a longer line is read once, by the grammar */

/* how common a byte is in NCCL logs, lower is rarer: spaces and lowercase letters, then digits and
 * punctuation, then capitals (N, C, I, F, O, L are common in NCCL's own words but still beat the rest) */
static int rank(char c)
{
    if (c == ' ' || (c >= 'a' && c <= 'z'))
        return 4;
    if ((c >= '0' && c <= '9') || c == ':' || c == '.' || c == '[' || c == ']' || c == '/' || c == '-')
        return 3;
    if (c == 'N' || c == 'C' || c == 'I' || c == 'F' || c == 'O' || c == 'L' || c == 'A')
        return 2;
    return 1;
}

/* Python's bytes.find(sub, start, end): sub wholly inside [start, end); -1 when absent */
static Py_ssize_t find(const char *b, Py_ssize_t start, Py_ssize_t end, const char *sub, Py_ssize_t n)
{
    if (start < 0)
        start = 0;
    if (end - start < n)
        return -1;
    if (n == 0)
        return start;
    /* memchr (vectorised in every libc) for the needle's least common byte, then memcmp: memmem sets up
     * a table on every call, and this is called once per record */
    Py_ssize_t off = 0;
    for (Py_ssize_t k = 1; k < n && k < 8; k++)
        if (rank(sub[k]) < rank(sub[off]))
            off = k;
    Py_ssize_t i = start + off, last = end - n + off; /* candidate positions of that byte */
    while (i <= last) {
        const char *p = memchr(b + i, sub[off], (size_t)(last - i + 1));
        if (!p)
            return -1;
        Py_ssize_t at = (p - b) - off;
        if (memcmp(b + at, sub, (size_t)n) == 0)
            return at;
        i = (p - b) + 1;
    }
    return -1;
}

/* bytes.rfind(b"\n", low, at) + 1 (low: a newline before at, or 0): the start of the line holding at */
static Py_ssize_t line_start(const char *b, Py_ssize_t at, Py_ssize_t low)
{
#if defined(__GLIBC__)
    if (at > low) { /* glibc's memrchr is vectorised */
        const char *p = memrchr(b + low, '\n', (size_t)(at - low));
        return p ? p - b + 1 : 0;
    }
#else
    while (at > low) {
        if (b[at - 1] == '\n')
            return at;
        at--;
    }
#endif
    return 0;
}

static Py_ssize_t line_end(const char *b, Py_ssize_t at, Py_ssize_t n)
{
    const char *p = memchr(b + at, '\n', (size_t)(n - at));
    return p ? p - b : -1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* 1..max ASCII digits at b[*i] followed by sep (slen bytes) before n; advances *i past sep */
static int digits_then(const char *b, Py_ssize_t *i, Py_ssize_t n, int max, const char *sep, Py_ssize_t slen)
{
    Py_ssize_t j = *i;
    while (j < n && is_digit(b[j]))
        j++;
    if (j == *i || j - *i > max || n - j < slen || memcmp(b + j, sep, (size_t)slen) != 0)
        return 0;
    *i = j + slen;
    return 1;
}

static int starts(const char *b, Py_ssize_t at, Py_ssize_t n, const char *lit)
{
    size_t len = strlen(lit);
    return n - at >= (Py_ssize_t)len && memcmp(b + at, lit, len) == 0;
}

/* scan.py's _NCCL lookahead: records with nothing to learn, dropped (at: the "NCCL") */
static int dropped(const char *b, Py_ssize_t at, Py_ssize_t n)
{
    Py_ssize_t i = at + 4;
    if (!starts(b, i, n, " INFO "))
        return 0;
    i += 6;
    if (starts(b, i, n, "Tree") || starts(b, i, n, "Pattern ") || starts(b, i, n, "NVLS Head")
        || starts(b, i, n, " "))
        return 1;
    if (starts(b, i, n, "Channel ") && i + 8 < n && is_digit(b[i + 8]))
        return 1;
    if (starts(b, i, n, "Ring ")) {
        i += 5;
        return digits_then(b, &i, n, 4, " : ", 3) && digits_then(b, &i, n, 9, " -> ", 4)
            && digits_then(b, &i, n, 9, " -> ", 4);
    }
    return 0;
}

/* -- a table of distinct (span, span) keys, in first-seen order --------------------------------------- */

typedef struct {
    Py_ssize_t a, alen, b, blen; /* blen -1: the b"\0" marker of scan.py */
    uint64_t hash;
    Py_ssize_t count, first, last, lastlen;
} Entry;

typedef struct {
    Entry *e;
    Py_ssize_t n, cap;
    Py_ssize_t *slots; /* index + 1 into e, 0: free */
    Py_ssize_t mask;
} Table;

static uint64_t mix(uint64_t h, const char *p, Py_ssize_t len)
{
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    while (len-- > 0)
        h = (h ^ (unsigned char)*p++) * 0x100000001b3ULL;
    return h;
}

static uint64_t key_hash(const char *b, Py_ssize_t a, Py_ssize_t alen, Py_ssize_t c, Py_ssize_t clen)
{
    uint64_t h = mix(0xcbf29ce484222325ULL ^ (uint64_t)alen, b + a, alen);
    if (clen >= 0)
        h = mix(h ^ ((uint64_t)clen << 1), b + c, clen);
    else
        h ^= 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 31);
}

static int table_init(Table *t)
{
    t->n = 0;
    t->cap = 64;
    t->mask = 127;
    t->e = PyMem_Malloc(sizeof(Entry) * (size_t)t->cap);
    t->slots = PyMem_Calloc((size_t)t->mask + 1, sizeof(Py_ssize_t));
    if (!t->e || !t->slots) {
        PyMem_Free(t->e);
        PyMem_Free(t->slots);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void table_free(Table *t)
{
    PyMem_Free(t->e);
    PyMem_Free(t->slots);
}

static int table_grow(Table *t)
{
    Py_ssize_t mask = t->mask * 2 + 1;
    Py_ssize_t *slots = PyMem_Calloc((size_t)mask + 1, sizeof(Py_ssize_t));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < t->n; k++) {
        Py_ssize_t s = (Py_ssize_t)(t->e[k].hash & (uint64_t)mask);
        while (slots[s])
            s = (s + 1) & mask;
        slots[s] = k + 1;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return 0;
}

/* the entry for key (a, alen, c, clen) of block b, made (count 0) when new; NULL on memory error */
static Entry *table_get(Table *t, const char *b, Py_ssize_t a, Py_ssize_t alen, Py_ssize_t c, Py_ssize_t clen)
{
    uint64_t h = key_hash(b, a, alen, c, clen);
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)t->mask);
    while (t->slots[s]) {
        Entry *e = &t->e[t->slots[s] - 1];
        if (e->hash == h && e->alen == alen && e->blen == clen && memcmp(b + e->a, b + a, (size_t)alen) == 0
            && (clen <= 0 || memcmp(b + e->b, b + c, (size_t)clen) == 0))
            return e;
        s = (s + 1) & t->mask;
    }
    if (t->n == t->cap) {
        Entry *grown = PyMem_Realloc(t->e, sizeof(Entry) * (size_t)t->cap * 2);
        if (!grown) {
            PyErr_NoMemory();
            return NULL;
        }
        t->e = grown;
        t->cap *= 2;
    }
    Entry *e = &t->e[t->n++];
    e->a = a;
    e->alen = alen;
    e->b = c;
    e->blen = clen;
    e->hash = h;
    e->count = 0;
    e->first = e->last = e->lastlen = 0;
    t->slots[s] = t->n;
    if (t->n * 2 > t->mask && table_grow(t) < 0)
        return NULL;
    return &t->e[t->n - 1];
}

static PyObject *span(const char *b, Py_ssize_t at, Py_ssize_t len)
{
    if (len < 0)
        return PyBytes_FromStringAndSize("\0", 1);
    return PyBytes_FromStringAndSize(b + at, len);
}

static PyObject *pair_of(const char *b, const Entry *e)
{
    PyObject *x = span(b, e->a, e->alen), *y = span(b, e->b, e->blen);
    PyObject *pair = (x && y) ? PyTuple_Pack(2, x, y) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return pair;
}

static int put_int(PyObject *dict, PyObject *key, Py_ssize_t value)
{
    PyObject *v = PyLong_FromSsize_t(value);
    int rc = v ? PyDict_SetItem(dict, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

/* -- channels ------------------------------------------------------------------------------------------ */

static PyObject *channels(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    const char *b = buf.buf;
    Py_ssize_t n = buf.len;
    Py_ssize_t m = find(b, 0, n, CHANNEL, CHANNEL_LEN);
    if (m < 0) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    Table pairs, tails;
    PyObject *counts = NULL, *firsts = NULL, *prefixes = NULL, *result = NULL;
    if (table_init(&pairs) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (table_init(&tails) < 0) {
        table_free(&pairs);
        PyBuffer_Release(&buf);
        return NULL;
    }
    Py_ssize_t piece = 0; /* start of the piece before marker m */
    while (m >= 0) {
        /* the prefix: the end of the piece before the marker, after its last newline */
        Py_ssize_t tail = m;
        while (tail > piece && b[tail - 1] != '\n')
            tail--;
        Py_ssize_t after = m + CHANNEL_LEN;
        Py_ssize_t next = find(b, after, n, CHANNEL, CHANNEL_LEN);
        Py_ssize_t stop = next < 0 ? n : next; /* the piece after the marker: [after, stop) */
        Py_ssize_t i = find(b, after, after + 16 < stop ? after + 16 : stop, " : ", 3);
        Py_ssize_t j = line_end(b, after, stop);
        Py_ssize_t rest = -1, rlen = -1;
        if (i >= 0 && j > i && !(j - i == 4 && b[i + 3] == '\0')) { /* a text of one NUL is the marker */
            rest = i + 3;
            rlen = j - rest;
        }
        Entry *e = table_get(&pairs, b, tail, m - tail, rest, rlen);
        if (!e)
            goto done;
        if (e->count++ == 0)
            e->first = tail;
        e = table_get(&tails, b, tail, m - tail, 0, 0);
        if (!e)
            goto done;
        e->count++;
        piece = after;
        m = next;
    }
    counts = PyDict_New();
    firsts = PyDict_New();
    prefixes = PyDict_New();
    if (!counts || !firsts || !prefixes)
        goto done;
    for (Py_ssize_t k = 0; k < pairs.n; k++) {
        PyObject *pair = pair_of(b, &pairs.e[k]);
        int rc = pair ? put_int(counts, pair, pairs.e[k].count) : -1;
        if (rc == 0)
            rc = put_int(firsts, pair, pairs.e[k].first);
        Py_XDECREF(pair);
        if (rc < 0)
            goto done;
    }
    for (Py_ssize_t k = 0; k < tails.n; k++) {
        PyObject *key = span(b, tails.e[k].a, tails.e[k].alen);
        int rc = key ? put_int(prefixes, key, tails.e[k].count) : -1;
        Py_XDECREF(key);
        if (rc < 0)
            goto done;
    }
    result = PyTuple_Pack(3, counts, firsts, prefixes);
done:
    Py_XDECREF(counts);
    Py_XDECREF(firsts);
    Py_XDECREF(prefixes);
    table_free(&pairs);
    table_free(&tails);
    PyBuffer_Release(&buf);
    return result;
}

/* -- records ------------------------------------------------------------------------------------------- */

static int event(PyObject *events, Py_ssize_t start, long kind, PyObject *data)
{
    PyObject *ev = Py_BuildValue("(nlO)", start, kind, data);
    int rc = ev ? PyList_Append(events, ev) : -1;
    Py_XDECREF(ev);
    return rc;
}

static int coll_head(const char *m)
{
    static const char heads[][5] = {"AllR", "AllG", "Redu", "Broa", "Send", "Recv", "AllT", "Gath", "Scat", "Allt"};
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++)
        if (memcmp(m, heads[k], 4) == 0)
            return 1;
    return 0;
}

/* scan.py's _opcount when the word after ": opCount " is 1-16 hex digits (its first 16 characters
 * when longer), as int(word, 16); -1: let Python read it (a sign, "0x", a space of another kind) */
static long long opcount(const char *m, Py_ssize_t len)
{
    Py_ssize_t at = find(m, 0, len, OPCOUNT, OPCOUNT_LEN);
    if (at <= 0)
        return -1;
    Py_ssize_t i = at + OPCOUNT_LEN, k = 0;
    unsigned long long v = 0;
    for (; i < len && m[i] != ' ' && k < 16; i++, k++) {
        char c = m[i];
        int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + (unsigned long long)d;
    }
    if (k == 0 || v > (unsigned long long)LLONG_MAX)
        return -1;
    return (long long)v;
}

/* scan.py's _fold_colls for a block whose collective callers all have their process (procs: prefix ->
 * (host, pid)) in the table (known: LogState.colls, (host, pid) -> [count, evidence, opCount]) and a
 * plain opCount: the counts added and the last opCount set, in the block's order, as _fold_colls would.
 * 1 when done, 0 when any caller needs Python (nothing changed), -1 on error. */
static int fold_known(const char *b, const Table *table, PyObject *procs, PyObject *known)
{
    PyObject **entries = PyMem_Calloc((size_t)table->n, sizeof(PyObject *));
    long long *ops = PyMem_Calloc((size_t)table->n, sizeof(long long));
    int rc = 1;
    if (!entries || !ops) {
        PyMem_Free(entries);
        PyMem_Free(ops);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < table->n && rc == 1; k++) { /* every caller resolved first: nothing changed */
        const Entry *e = &table->e[k];
        PyObject *key = PyBytes_FromStringAndSize(b + e->a, e->alen);
        if (!key) {
            rc = -1;
            break;
        }
        PyObject *proc = PyDict_GetItemWithError(procs, key);
        Py_DECREF(key);
        PyObject *entry = proc ? PyDict_GetItemWithError(known, proc) : NULL;
        if (PyErr_Occurred())
            rc = -1;
        else if (!entry || !PyList_CheckExact(entry) || PyList_GET_SIZE(entry) < 3)
            rc = 0;
        else if ((ops[k] = opcount(b + e->last, e->lastlen)) < 0)
            rc = 0;
        else
            entries[k] = entry;
    }
    for (Py_ssize_t k = 0; k < table->n && rc == 1; k++) {
        PyObject *sum = NULL, *count = PyLong_FromSsize_t(table->e[k].count);
        PyObject *op = PyLong_FromUnsignedLongLong((unsigned long long)ops[k]);
        if (count && op)
            sum = PyNumber_Add(PyList_GET_ITEM(entries[k], 0), count);
        Py_XDECREF(count);
        if (!sum || !op) {
            Py_XDECREF(sum);
            Py_XDECREF(op);
            rc = -1;
            break;
        }
        PyList_SetItem(entries[k], 0, sum); /* steals the references */
        PyList_SetItem(entries[k], 2, op);
    }
    PyMem_Free(entries);
    PyMem_Free(ops);
    return rc;
}

static PyObject *records(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *block, *repeats, *wanted, *worth, *whos, *conn_line, *new, *events, *procs = NULL, *known = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "SO!O!OO!OO!O!|O!O!", &block, &PySet_Type, &repeats, &PyDict_Type, &wanted, &worth,
                          &PyDict_Type, &whos, &conn_line, &PyDict_Type, &new, &PyList_Type, &events, &PyDict_Type,
                          &procs, &PyDict_Type, &known))
        return NULL;
    if (PyObject_GetBuffer(block, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *b = buf.buf;
    Py_ssize_t n = buf.len, infos = 0, info_end = 0;
    Py_ssize_t line_stop = -1, start = 0, info_at = -1; /* the line of the last hit: end, start, INFO */
    int long_line = 0;
    PyObject *colls = NULL, *result = NULL, *tail = NULL, *msg = NULL;
    Table table;
    if (table_init(&table) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    for (Py_ssize_t at = find(b, 0, n, "NCCL", 4); at >= 0; at = find(b, at + 4, n, "NCCL", 4)) {
        int info = starts(b, at + 4, n, " INFO ");
        if (info && at >= 1 && b[at - 1] == ' ' && at - 1 >= info_end) { /* block.count(b" NCCL INFO ") */
            infos++;
            info_end = at + 10;
        }
        if (dropped(b, at, n))
            continue;
        if (at > line_stop) { /* the first hit of a line: its bounds and first INFO marker, once */
            start = line_start(b, at, line_stop < 0 ? 0 : line_stop);
            line_stop = line_end(b, at, n);
            if (line_stop < 0)
                line_stop = n;
            info_at = find(b, start, line_stop, INFO, INFO_LEN);
            long_line = line_stop - start > LINE_LIMIT;
            if (long_line && event(events, start, 0, Py_None) < 0)
                goto done;
        }
        if (long_line)
            continue;
        if (!info || at == start || b[at - 1] != ' ') {
            if ((info_at < 0 || info_at + INFO_LEN > at) && event(events, start, 0, Py_None) < 0)
                goto done;
            continue;
        }
        Py_ssize_t end = line_stop < n ? line_stop : n - 1; /* block[x:-1] without a newline, as scan.py */
        Py_ssize_t m0 = at + 10, mlen = end > m0 ? end - m0 : 0, t0 = start, tlen = at - 1 - start;
        const char *m = b + m0;
        if (mlen >= 4 && (memcmp(m, "Chan", 4) == 0 || memcmp(m, "Ring", 4) == 0)) {
            msg = PyBytes_FromStringAndSize(m, mlen);
            tail = PyBytes_FromStringAndSize(b + t0, tlen);
            if (!msg || !tail)
                goto done;
            PyObject *r = PyObject_CallFunction(conn_line, "OnOOOO", block, start, msg, tail, new, events);
            Py_CLEAR(msg);
            Py_CLEAR(tail);
            if (!r)
                goto done;
            Py_DECREF(r);
            continue;
        }
        if (mlen >= 4 && coll_head(m)) {
            Py_ssize_t op = find(m, 0, mlen < 40 ? mlen : 40, OPCOUNT, OPCOUNT_LEN);
            if (op > 0 && find(b, t0, t0 + tlen, "NCCL", 4) < 0) {
                Entry *e = table_get(&table, b, t0, tlen, 0, 0);
                if (!e)
                    goto done;
                if (e->count++ == 0)
                    e->first = start;
                e->last = m0;
                e->lastlen = mlen;
                continue;
            }
        }
        tail = PyBytes_FromStringAndSize(b + t0, tlen);
        msg = PyBytes_FromStringAndSize(m, mlen);
        PyObject *key = (tail && msg) ? PyTuple_Pack(2, tail, msg) : NULL;
        if (!key)
            goto done;
        int seen = PySet_Contains(repeats, key);
        if (seen != 0) {
            Py_DECREF(key);
            if (seen < 0)
                goto done;
            Py_CLEAR(tail);
            Py_CLEAR(msg);
            continue;
        }
        PyObject *w = PyDict_GetItemWithError(wanted, msg);
        int good;
        if (w) {
            good = PyObject_IsTrue(w);
        } else if (PyErr_Occurred()) {
            good = -1;
        } else {
            w = PyObject_CallOneArg(worth, msg);
            good = w ? PyObject_IsTrue(w) : -1;
            Py_XDECREF(w);
        }
        if (good == 0)
            good = find(b, t0, t0 + tlen, "NCCL", 4) >= 0 || find(m, 0, mlen, " NCCL ", 6) >= 0;
        if (good < 0) {
            Py_DECREF(key);
            goto done;
        }
        int rc = 0;
        if (good) {
            rc = event(events, start, 1, key);
        } else {
            int known = PyDict_Contains(whos, tail);
            rc = known < 0 ? -1 : (known ? 0 : event(events, start, 4, tail));
        }
        Py_DECREF(key);
        Py_CLEAR(tail);
        Py_CLEAR(msg);
        if (rc < 0)
            goto done;
    }
    colls = PyDict_New();
    if (!colls)
        goto done;
    if (procs && known && table.n) {
        int folded = fold_known(b, &table, procs, known);
        if (folded < 0)
            goto done;
        if (folded)
            table.n = 0; /* every caller's process already had its entry: added to it here */
    }
    for (Py_ssize_t k = 0; k < table.n; k++) {
        Entry *e = &table.e[k];
        PyObject *key = PyBytes_FromStringAndSize(b + e->a, e->alen);
        PyObject *entry = NULL;
        if (key) {
            long long op = opcount(b + e->last, e->lastlen);
            entry = op >= 0 ? Py_BuildValue("[nnK]", e->count, e->first, (unsigned long long)op)
                            : Py_BuildValue("[nny#]", e->count, e->first, b + e->last, e->lastlen);
        }
        int rc = entry ? PyDict_SetItem(colls, key, entry) : -1;
        Py_XDECREF(key);
        Py_XDECREF(entry);
        if (rc < 0)
            goto done;
    }
    result = Py_BuildValue("(nO)", infos, colls);
done:
    Py_XDECREF(tail);
    Py_XDECREF(msg);
    Py_XDECREF(colls);
    table_free(&table);
    PyBuffer_Release(&buf);
    return result;
}

/* -- gated --------------------------------------------------------------------------------------------- */

#define MAX_GATES 256

static int gated_slow(const char *b, Py_ssize_t until, Py_ssize_t n, const char **gate, const Py_ssize_t *glen,
                      Py_ssize_t count, PyObject *events)
{
    /* scan.py's loop, gate by gate (gates of one byte or holding a newline), events in its order */
    for (Py_ssize_t g = 0; g < count; g++) {
        Py_ssize_t at = find(b, 0, until, gate[g], glen[g]);
        while (at >= 0) {
            Py_ssize_t start = line_start(b, at, 0), end = line_end(b, at, n);
            if (end < 0)
                end = n - 1;
            if (find(b, start, end, INFO, INFO_LEN) < 0 && event(events, start, 0, Py_None) < 0)
                return -1;
            at = find(b, end + 1, until, gate[g], glen[g]);
        }
    }
    return 0;
}

/* how common a byte is in logs (a rough rank: letters, digits and punctuation of NCCL and training
 * output are common; capitals and rare punctuation are not) */
static int common(char c)
{
    if (c == ' ' || c == 'e' || c == 'a' || c == 'n' || c == 'o' || c == 'r' || c == 't' || c == 'i' || c == 's')
        return 3;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == '.' || c == '[' || c == ']')
        return 2;
    if (c == 'N' || c == 'C' || c == 'I' || c == 'F' || c == 'O' || c == 'L')
        return 2;
    return 1;
}

#if defined(__GNUC__) || defined(__clang__)
typedef unsigned char v16 __attribute__((vector_size(16)));
typedef signed char m16 __attribute__((vector_size(16)));
#endif

typedef struct {
    const char **gate;
    const Py_ssize_t *glen;
    Py_ssize_t count;
    Py_ssize_t off[MAX_GATES];
    unsigned char pair[MAX_GATES][2];
    unsigned char first[256]; /* 1 for the first byte of a gate's pair */
#if defined(__GNUC__) || defined(__clang__)
    v16 one[MAX_GATES], two[MAX_GATES];
#endif
} Gates;

/* where a gate whose chosen pair of bytes is at i starts (it ends before until), or -1 */
static Py_ssize_t gate_from(const char *b, Py_ssize_t i, Py_ssize_t until, const Gates *gs)
{
    Py_ssize_t best = -1;
    for (Py_ssize_t g = 0; g < gs->count; g++) {
        Py_ssize_t at = i - gs->off[g];
        if (at >= 0 && (unsigned char)b[i] == gs->pair[g][0] && (unsigned char)b[i + 1] == gs->pair[g][1]
            && at + gs->glen[g] <= until && memcmp(b + at, gs->gate[g], (size_t)gs->glen[g]) == 0
            && (best < 0 || at < best))
            best = at;
    }
    return best;
}

/* the start of the first gate whose pair of bytes begins in [i, to) (and that ends before until), or -1;
 * sixteen positions at a time with GCC/clang vectors (SSE2, NEON) */
static Py_ssize_t first_gate(const char *b, Py_ssize_t i, Py_ssize_t to, Py_ssize_t until, const Gates *gs)
{
    Py_ssize_t hit;
#if defined(__GNUC__) || defined(__clang__)
    /* sixteen positions at a time up to the region's end and a little past it: a gate found past it is
     * in the INFO line that follows, which the caller reads (no event) and steps over */
    for (; i < to && i + 17 <= until; i += 16) {
        v16 x, y;
        memcpy(&x, b + i, 16);
        memcpy(&y, b + i + 1, 16);
        m16 acc = (x == gs->one[0]) & (y == gs->two[0]);
        for (Py_ssize_t g = 1; g < gs->count; g++)
            acc |= (x == gs->one[g]) & (y == gs->two[g]);
        uint64_t lo, hi;
        memcpy(&lo, &acc, 8);
        memcpy(&hi, (const char *)&acc + 8, 8);
        while (lo | hi) {
            int k = lo ? __builtin_ctzll(lo) >> 3 : 8 + (__builtin_ctzll(hi) >> 3);
            hit = gate_from(b, i + k, until, gs);
            if (hit >= 0)
                return hit;
            if (k < 8)
                lo &= ~(0xffULL << (8 * k));
            else
                hi &= ~(0xffULL << (8 * (k - 8)));
        }
    }
#endif
    for (; i < to && i + 1 < until; i++)
        if (gs->first[(unsigned char)b[i]] && (hit = gate_from(b, i, until, gs)) >= 0)
            return hit;
    return -1;
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define HAVE_AVX2_PATH 1
#include <immintrin.h>

static int wide; /* the CPU has AVX2 (set at import; wide(False) turns the AVX2 paths off, for tests) */

/* Teddy (Hyperscan's multi-literal prefilter) on x86-64 CPUs with AVX2, chosen at run time (the
 * extension is built for baseline x86-64): each gate's pair of bytes in one of eight buckets, a byte's
 * buckets looked up by its low and its high nibble (PSHUFB), so thirty-two positions cost the same few
 * instructions whatever the number of gates; a position whose two bytes may begin a gate is checked by
 * gate_from, as in first_gate */
typedef struct {
    unsigned char lo0[16], hi0[16], lo1[16], hi1[16];
} Teddy;

static void teddy_init(Teddy *t, const Gates *gs)
{
    memset(t, 0, sizeof *t);
    for (Py_ssize_t g = 0; g < gs->count; g++) {
        unsigned char bit = (unsigned char)(1u << (g % 8)), x = gs->pair[g][0], y = gs->pair[g][1];
        t->lo0[x & 15] |= bit;
        t->hi0[x >> 4] |= bit;
        t->lo1[y & 15] |= bit;
        t->hi1[y >> 4] |= bit;
    }
}

/* first_gate over [i, until) (every position: the caller steps over INFO lines itself) */
__attribute__((target("avx2"))) static Py_ssize_t teddy_first(const char *b, Py_ssize_t i, Py_ssize_t until,
                                                              const Gates *gs, const Teddy *t)
{
    const __m256i nib = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
    const __m256i lo0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t->lo0));
    const __m256i hi0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t->hi0));
    const __m256i lo1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t->lo1));
    const __m256i hi1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t->hi1));
    for (; i + 33 <= until; i += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(b + i));
        __m256i y = _mm256_loadu_si256((const __m256i *)(b + i + 1));
        __m256i m = _mm256_and_si256(
            _mm256_and_si256(_mm256_shuffle_epi8(lo0, _mm256_and_si256(x, nib)),
                             _mm256_shuffle_epi8(hi0, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib))),
            _mm256_and_si256(_mm256_shuffle_epi8(lo1, _mm256_and_si256(y, nib)),
                             _mm256_shuffle_epi8(hi1, _mm256_and_si256(_mm256_srli_epi16(y, 4), nib))));
        unsigned mask = ~(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(m, zero));
        while (mask) {
            Py_ssize_t hit = gate_from(b, i + __builtin_ctz(mask), until, gs);
            if (hit >= 0)
                return hit;
            mask &= mask - 1;
        }
    }
    Py_ssize_t hit;
    for (; i + 1 < until; i++)
        if (gs->first[(unsigned char)b[i]] && (hit = gate_from(b, i, until, gs)) >= 0)
            return hit;
    return -1;
}
#endif

static PyObject *gated(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *gates, *events;
    Py_ssize_t until;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!nO!", &buf, &PyTuple_Type, &gates, &until, &PyList_Type, &events))
        return NULL;
    const char *b = buf.buf;
    Py_ssize_t n = buf.len, count = PyTuple_GET_SIZE(gates);
    const char *gate[MAX_GATES];
    Py_ssize_t glen[MAX_GATES];
    int slow = count > MAX_GATES;
    if (until > n)
        until = n;
    if (until < 0)
        until = 0;
    for (Py_ssize_t g = 0; g < count && g < MAX_GATES; g++) { /* every gate read, even once one makes it slow */
        PyObject *item = PyTuple_GET_ITEM(gates, g);
        if (!PyBytes_Check(item)) {
            PyBuffer_Release(&buf);
            PyErr_SetString(PyExc_TypeError, "gates must be bytes");
            return NULL;
        }
        gate[g] = PyBytes_AS_STRING(item);
        glen[g] = PyBytes_GET_SIZE(item);
        if (glen[g] < 2 || memchr(gate[g], '\n', (size_t)glen[g]))
            slow = 1;
    }
    if (slow) {
        /* the Python loop's own order (gate by gate) */
        int rc = count > MAX_GATES ? -2 : gated_slow(b, until, n, gate, glen, count, events);
        PyBuffer_Release(&buf);
        if (rc == -2) {
            PyErr_SetString(PyExc_ValueError, "too many gates");
            return NULL;
        }
        if (rc < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    /* one pass: the positions where two bytes begin a gate, sixteen at a time (GCC/clang vectors: SSE2,
     * NEON), each checked against the gates; a line is listed once (scan.py lists it once per gate; the
     * walk reads a start once) */
    /* each gate is looked for by the two bytes of it least common in logs (at its offset in the gate) */
    Gates gs;
    gs.gate = gate;
    gs.glen = glen;
    gs.count = count;
    memset(gs.first, 0, sizeof gs.first);
    for (Py_ssize_t g = 0; g < count; g++) {
        Py_ssize_t best = 0;
        for (Py_ssize_t k = 1; k + 1 < glen[g]; k++)
            if (common(gate[g][k]) + common(gate[g][k + 1]) < common(gate[g][best]) + common(gate[g][best + 1]))
                best = k;
        gs.off[g] = best;
        gs.pair[g][0] = (unsigned char)gate[g][best];
        gs.pair[g][1] = (unsigned char)gate[g][best + 1];
        gs.first[gs.pair[g][0]] = 1;
#if defined(__GNUC__) || defined(__clang__)
        for (int k = 0; k < 16; k++) {
            gs.one[g][k] = gs.pair[g][0];
            gs.two[g][k] = gs.pair[g][1];
        }
#endif
    }
#ifdef HAVE_AVX2_PATH
    if (count > 0 && wide) {
        /* every position scanned (Teddy costs less than stepping over the INFO lines), a hit in a line
         * holding NCCL's INFO marker passed over with its line: the same lines listed, in order */
        Teddy t;
        teddy_init(&t, &gs);
        Py_ssize_t i = 0;
        while (i + 1 < until) {
            Py_ssize_t hit = teddy_first(b, i, until, &gs, &t);
            if (hit < 0)
                break;
            Py_ssize_t start = line_start(b, hit, 0), end = line_end(b, hit, n);
            if (end < 0)
                end = n - 1;
            if (find(b, start, end, INFO, INFO_LEN) < 0 && event(events, start, 0, Py_None) < 0) {
                PyBuffer_Release(&buf);
                return NULL;
            }
            if (end < hit)
                break;
            i = end + 1;
        }
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
#endif
    /* lines holding NCCL's INFO marker are never listed: skipped, found by one memmem pass */
    Py_ssize_t i = 0, info = count > 0 ? find(b, 0, until, INFO, INFO_LEN) : -1;
    while (count > 0 && i + 1 < until) {
        if (info >= 0 && info < i)
            info = find(b, i, until, INFO, INFO_LEN);
        Py_ssize_t ls = info >= 0 ? line_start(b, info, 0) : until;
        Py_ssize_t hit = i < ls ? first_gate(b, i, ls, until, &gs) : -1;
        if (hit < 0) {
            if (info < 0)
                break;
            Py_ssize_t le = line_end(b, info, n);
            if (le < 0)
                break;
            i = le + 1;
            info = find(b, i, until, INFO, INFO_LEN);
            continue;
        }
        Py_ssize_t start = line_start(b, hit, 0), end = line_end(b, hit, n);
        if (end < 0)
            end = n - 1;
        if (find(b, start, end, INFO, INFO_LEN) < 0 && event(events, start, 0, Py_None) < 0) {
            PyBuffer_Release(&buf);
            return NULL;
        }
        if (end < hit)
            break; /* no newline after the hit: the block's end */
        i = end + 1;
    }
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
}

/* -- block ---------------------------------------------------------------------------------------------- */

/* scan.py's _read_blocks, one step, without copying the block: ``carry`` (the open line so far) and up to
 * ``size`` bytes read by ``readinto`` straight into the bytes object that becomes the block, cut after its
 * last newline (the object's size set down), the bytes after it the new carry.
 *   block(readinto, carry, size) -> (block, carry, bytes read): block b"" when no line ended */
static PyObject *block(PyObject *self, PyObject *args)
{
    PyObject *readinto, *carry;
    Py_ssize_t size;
    (void)self;
    if (!PyArg_ParseTuple(args, "OSn", &readinto, &carry, &size))
        return NULL;
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "size must be positive");
        return NULL;
    }
    Py_ssize_t clen = PyBytes_GET_SIZE(carry);
    if (clen > PY_SSIZE_T_MAX - size) {
        PyErr_NoMemory();
        return NULL;
    }
    /* one size for every block whose carry is under 64 KiB (nearly all): the allocator then hands back
     * the memory of the block before, where a new size each time gets fresh pages (a page fault per 4 KiB,
     * as costly as the copy this function avoids) */
    PyObject *out = PyBytes_FromStringAndSize(NULL, (clen < CARRY_ROOM ? CARRY_ROOM : clen) + size);
    if (!out)
        return NULL;
    char *b = PyBytes_AS_STRING(out);
    memcpy(b, PyBytes_AS_STRING(carry), (size_t)clen);
    PyObject *view = PyMemoryView_FromMemory(b + clen, size, PyBUF_WRITE);
    if (!view) {
        Py_DECREF(out);
        return NULL;
    }
    PyObject *got = PyObject_CallOneArg(readinto, view);
    int held = Py_REFCNT(view) > 1; /* the stream kept the view: the object must not move under it */
    Py_DECREF(view);
    Py_ssize_t n = got == Py_None ? 0 : got ? PyLong_AsSsize_t(got) : -1;
    Py_XDECREF(got);
    if (held) {
        /* the view the stream kept points into out without owning it: out is left alive (a leak of one
         * block, for a stream no caller passes: scan.py gives only files, gzip, BytesIO and parts) rather
         * than freed under the view */
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_OSError, "readinto kept its buffer");
        return NULL;
    }
    if (!got || (n == -1 && PyErr_Occurred())) {
        Py_DECREF(out);
        return NULL;
    }
    if (n < 0 || n > size) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_OSError, "readinto returned a bad count");
        return NULL;
    }
    Py_ssize_t total = clen + n, cut = total;
    while (cut > clen && b[cut - 1] != '\n') /* the carry holds no newline */
        cut--;
    if (cut == clen) /* no line ended in what was read: all of it is carried */
        cut = 0;
    PyObject *rest = PyBytes_FromStringAndSize(b + cut, total - cut);
    if (!rest) {
        Py_DECREF(out);
        return NULL;
    }
    if (cut == 0) {
        Py_DECREF(out);
        out = PyBytes_FromStringAndSize(NULL, 0);
    } else {
        /* the block is the object's first cut bytes: its size set down in place (a new object, no hash
         * yet, ours alone), never copied nor reallocated (a realloc would move it to fresh pages, which
         * cost as much as the copy) */
        Py_SET_SIZE(out, cut);
        b[cut] = '\0';
    }
    if (!out) {
        Py_DECREF(rest);
        return NULL;
    }
    PyObject *result = Py_BuildValue("(NNn)", out, rest, n);
    return result;
}

/* -- newlines ------------------------------------------------------------------------------------------ */

#ifdef HAVE_AVX2_PATH
/* the newlines in [*i, end), thirty-two bytes at a time, *i left where fewer than 32 remain */
__attribute__((target("avx2"))) static Py_ssize_t newlines32(const unsigned char *b, Py_ssize_t *i, Py_ssize_t end)
{
    const __m256i nl = _mm256_set1_epi8('\n');
    Py_ssize_t count = 0, k = *i;
    for (; k + 32 <= end; k += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(b + k));
        count += __builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, nl)));
    }
    *i = k;
    return count;
}
#endif

/* bytes.count(b"\n", start, end), eight bytes at a time (thirty-two with AVX2) */
static PyObject *newlines(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t start = 0, end = PY_SSIZE_T_MAX;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*|nn", &buf, &start, &end))
        return NULL;
    const unsigned char *b = buf.buf;
    Py_ssize_t n = buf.len, count = 0;
    if (end > n)
        end = n;
    if (start < 0)
        start = 0;
    Py_ssize_t i = start;
#ifdef HAVE_AVX2_PATH
    if (end - start >= 256 && wide)
        count = newlines32(b, &i, end);
#endif
    const uint64_t ones = 0x0101010101010101ULL, low = 0x7f7f7f7f7f7f7f7fULL;
    for (; i + 8 <= end; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        w ^= ones * '\n';
        /* 0x80 in each byte of w that is zero (exact: no borrow between bytes) */
        uint64_t z = ~(((w & low) + low) | w | low);
        count += (Py_ssize_t)(((z >> 7) * ones) >> 56);
    }
    for (; i < end; i++)
        count += b[i] == '\n';
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(count);
}

/* wide(on) -> bool: the AVX2 paths used or not (only where the CPU has AVX2); returns the old setting */
static PyObject *wide_paths(PyObject *self, PyObject *arg)
{
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
#ifdef HAVE_AVX2_PATH
    int old = wide;
    wide = on && __builtin_cpu_supports("avx2");
    return PyBool_FromLong(old);
#else
    (void)on;
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"wide", wide_paths, METH_O, "wide(on) -> bool: use the AVX2 paths (where the CPU has AVX2); the old setting."},
    {"newlines", newlines, METH_VARARGS, "bytes.count(b'\\n', start, end)."},
    {"block", block, METH_VARARGS, "(block of whole lines, carry, bytes read): one step of scan._read_blocks."},
    {"channels", channels, METH_VARARGS, "A block's connection lines folded: (pairs, firsts, prefixes) or None."},
    {"records", records, METH_VARARGS, "A block's NCCL records: (INFO records, collective calls per prefix)."},
    {"gated", gated, METH_VARARGS, "The lines before until holding a gate and no INFO record, as events."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "The log scanner's inner loops in C (scan.py is the fallback and oracle).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void)
{
#ifdef HAVE_AVX2_PATH
    __builtin_cpu_init();
    wide = __builtin_cpu_supports("avx2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "LINE_LIMIT", LINE_LIMIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
