/*
 * Two per-record hot loops of kpybroker.protocol in C, each the compiled form of a Python
 * walk that stays the reference (and the fallback where this module was not built):
 *
 *   well_framed: record_framing.check_framing_python, the walk over every compressed
 *     batch produced, which cost about a microsecond a record in Python (docs/limits.md);
 *   scan_keys: records.scan_record_keys, the log cleaner's walk over every record it
 *     compacts.
 *
 * Neither raises Kafka's errors: well_framed answers False, scan_keys None, and the
 * Python wrapper runs the Python walk to raise the message (so the messages and the
 * numbers they quote live in one place, and a refused batch pays what it paid before).
 * scan_keys also answers None where it is unsure (a varint past 64 bits, an offset past
 * int64), and the Python walk decides. Every read is bounded (hostile input).
 *
 * well_framed's verdict must be the Python walk's for every input
 * (tests/unit/test_record_framing.py checks it differentially), quirks included:
 *   - varints are read raw (zigzag: the low bit is the sign), at most 10 bytes;
 *   - the timestamp delta is stepped over byte by byte, however long;
 *   - the offset delta of the first 64 records is read as one byte;
 *   - reads are bounded by the section only, a record's end is checked after it.
 * A read past the section is a refusal, as Python's IndexError is.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A varint's raw value, saturated: a 10-byte varint can carry 70 bits, and any value
 * past 64 bits only matters as "too large" (a length past the data, a delta or a
 * header count that cannot match), so its bits above the sign are set instead. */
#define SATURATED(raw) ((UINT64_MAX & ~(uint64_t)1) | ((raw) & 1))

/* Read the varint at *pos into *raw and step past it; 0 when it runs past `end` or over
 * 10 bytes. *overflow tells whether it carried bits past 64, which *raw then lacks. */
static int read_raw_varint(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, uint64_t *raw,
                           int *overflow)
{
    uint64_t value = 0;
    *overflow = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= end)
            return 0;
        uint8_t byte = data[(*pos)++];
        uint64_t bits = byte & 0x7F;
        if (shift == 63 && (bits >> 1) != 0)
            *overflow = 1;
        value |= bits << shift;
        if (byte < 0x80) {
            *raw = value;
            return 1;
        }
    }
    return 0;
}

/* read_raw_varint for the framing walk, saturated past 64 bits. */
static int read_uvarint(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, uint64_t *raw)
{
    int overflow;
    if (!read_raw_varint(data, end, pos, raw, &overflow))
        return 0;
    if (overflow)
        *raw = SATURATED(*raw);
    return 1;
}

/* Step *pos (at most `end`) over a length-prefixed field (key, value, header value)
 * whose raw length is `raw`: nothing when null (negative). A skip past the data leaves
 * *pos at end + 1, past it as the Python walk's position would be: every later read
 * is then refused, and so is the check of the record's or the section's end. */
static void skip_field(Py_ssize_t end, Py_ssize_t *pos, uint64_t raw)
{
    if (raw & 1)
        return;
    uint64_t length = raw >> 1;
    *pos = length > (uint64_t)(end - *pos) ? end + 1 : *pos + (Py_ssize_t)length;
}

/* Step over a record's header count and headers (record_framing._skip_headers); 0 when
 * the Python walk refuses them. `record_end` bounds the count, the section the reads. */
static int skip_headers(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos,
                        Py_ssize_t record_end)
{
    uint64_t raw;
    if (!read_uvarint(data, end, pos, &raw) || raw & 1)
        return 0; /* cut short, or a negative count */
    uint64_t count = raw >> 1;
    if (*pos > record_end || count > (uint64_t)(record_end - *pos))
        return 0; /* more headers than bytes left in the record */
    for (uint64_t i = 0; i < count; i++) {
        if (!read_uvarint(data, end, pos, &raw) || raw & 1)
            return 0; /* cut short, or a negative key size */
        skip_field(end, pos, raw);
        if (!read_uvarint(data, end, pos, &raw))
            return 0;
        skip_field(end, pos, raw);
    }
    return 1;
}

/* The walk itself (record_framing.check_framing_python): 1 when `data` holds exactly
 * `record_count` records, each within `max_record_size`, with offset deltas 0, 1, 2... */
static int well_framed(const uint8_t *data, Py_ssize_t end, long long record_count,
                       long long max_record_size)
{
    Py_ssize_t pos = 0;
    for (long long index = 0; index < record_count; index++) {
        uint64_t raw;
        if (pos >= end || !read_uvarint(data, end, &pos, &raw))
            return 0;
        uint64_t length = raw >> 1; /* at most 2**63 - 1: fits a long long */
        if (raw & 1 || (long long)length > max_record_size || length > (uint64_t)(end - pos))
            return 0;
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos++; /* attributes */
        while (pos < end && data[pos] >= 0x80) /* the timestamp delta, value unused */
            pos++;
        if (pos >= end)
            return 0;
        if (index < 64) { /* the offset delta, as the Python walk reads it: one byte */
            if (pos + 1 >= end)
                return 0;
            raw = data[pos + 1];
            pos += 2;
        } else {
            pos++;
            if (!read_uvarint(data, end, &pos, &raw))
                return 0;
        }
        if (raw != (uint64_t)index << 1)
            return 0;
        for (int field = 0; field < 2; field++) { /* the key, then the value */
            if (!read_uvarint(data, end, &pos, &raw))
                return 0;
            skip_field(end, &pos, raw);
        }
        if (pos >= end)
            return 0;
        if (data[pos] == 0) /* no headers, the usual case */
            pos++;
        else if (!skip_headers(data, end, &pos, record_end))
            return 0;
        if (pos != record_end)
            return 0;
    }
    return pos == end;
}

/* A zigzag varint within `end` as an int64; 0 when it runs past `end`, over 10 bytes or
 * past 64 bits (scan_keys then leaves the batch to the Python walk). */
static int read_varint64(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, int64_t *value)
{
    uint64_t raw;
    int overflow;
    if (!read_raw_varint(data, end, pos, &raw, &overflow) || overflow)
        return 0;
    *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 1;
}

/* Append `item` to `list`, giving up the reference; 0 on a Python error. */
static int append(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return 0;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed == 0;
}

/* The walk of records.scan_record_keys: fills `offsets`, `keys` and `null_values` and
 * counts `*null_keys`. 1 when done, 0 when the Python walk must decide (it raises, or a
 * value is past 64 bits), -1 on a Python error.
 *
 * Where the Python walk succeeds, every read it made lies within the record (it checks
 * that the key ends before the record does, and positions only grow), so bounding each
 * read by the record's end here refuses nothing it accepts. */
static int scan_keys(const uint8_t *data, Py_ssize_t end, Py_ssize_t record_count,
                     long long base_offset, PyObject *offsets, PyObject *keys,
                     PyObject *null_values, Py_ssize_t *null_keys)
{
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < record_count; i++) {
        int64_t length, delta, key_length;
        long long offset;
        if (!read_varint64(data, end, &pos, &length) || length < 1 || length > end - pos)
            return 0;
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos++; /* attributes, then the timestamp delta, skipped */
        while (pos < record_end && data[pos] >= 0x80)
            pos++;
        if (++pos > record_end)
            return 0;
        if (!read_varint64(data, record_end, &pos, &delta)
            || __builtin_add_overflow(base_offset, delta, &offset))
            return 0;
        if (!append(offsets, PyLong_FromLongLong(offset)))
            return -1;
        if (!read_varint64(data, record_end, &pos, &key_length))
            return 0;
        if (key_length < 0) {
            ++*null_keys;
            if (!append(keys, Py_NewRef(Py_None)))
                return -1;
        } else {
            if (key_length >= record_end - pos)
                return 0; /* the key must end before the record: its value follows */
            PyObject *key = PyBytes_FromStringAndSize((const char *)data + pos, key_length);
            if (!append(keys, key))
                return -1;
            pos += (Py_ssize_t)key_length;
        }
        if (pos >= record_end)
            return 0;
        if (data[pos] & 1 && !append(null_values, PyLong_FromSsize_t(i)))
            return -1; /* a negative value length: a tombstone */
        uint64_t unused;
        int overflow;
        if (!read_raw_varint(data, record_end, &pos, &unused, &overflow))
            return 0; /* the value's length must fit the record; the rest is not read */
        pos = record_end;
    }
    return pos == end;
}

static PyObject *py_scan_keys(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    Py_ssize_t record_count;
    long long base_offset;
    if (!PyArg_ParseTuple(args, "y*nL:scan_keys", &view, &record_count, &base_offset))
        return NULL;
    PyObject *offsets = PyList_New(0), *keys = PyList_New(0), *null_values = PyList_New(0);
    PyObject *result = NULL;
    Py_ssize_t null_keys = 0;
    if (offsets && keys && null_values) {
        int done = scan_keys(view.buf, view.len, record_count, base_offset, offsets, keys,
                             null_values, &null_keys);
        if (done > 0)
            result = Py_BuildValue("OOnO", offsets, keys, null_keys, null_values);
        else if (done == 0)
            result = Py_NewRef(Py_None);
    }
    Py_XDECREF(offsets);
    Py_XDECREF(keys);
    Py_XDECREF(null_values);
    PyBuffer_Release(&view);
    return result;
}

/* An int argument clamped to a long long: a count or a maximum beyond it behaves as
 * the largest (or smallest) one, which is what the Python walk's unbounded ints do. */
static int clamped(PyObject *number, long long *out)
{
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (overflow)
        *out = overflow > 0 ? LLONG_MAX : LLONG_MIN;
    return !(*out == -1 && PyErr_Occurred());
}

static PyObject *py_well_framed(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "well_framed(section, record_count, max_record_size) takes 3 arguments");
        return NULL;
    }
    long long record_count, max_record_size;
    if (!clamped(args[1], &record_count) || !clamped(args[2], &max_record_size))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int verdict; /* the walk touches no Python object: other threads may run meanwhile */
    Py_BEGIN_ALLOW_THREADS
    verdict = well_framed(view.buf, view.len, record_count, max_record_size);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyBool_FromLong(verdict);
}

static PyMethodDef methods[] = {
    {"well_framed", (PyCFunction)(void (*)(void))py_well_framed, METH_FASTCALL,
     "well_framed(section, record_count, max_record_size) -> bool\n\n"
     "Whether record_framing.check_framing_python accepts the section."},
    {"scan_keys", py_scan_keys, METH_VARARGS,
     "scan_keys(section, record_count, base_offset) -> (offsets, keys, null_keys, "
     "null_values) | None\n\n"
     "records.scan_record_keys over a decompressed section; None where the Python walk "
     "must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_record_walks",
    .m_doc = "Compiled record walks of kpybroker.protocol (record_framing, records).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__record_walks(void) { return PyModule_Create(&module); }
