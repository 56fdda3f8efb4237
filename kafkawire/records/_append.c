/* The producer's per-record path in C: RecordAppender, the records section of a magic-2 batch
 * written one record at a time, exactly as kafkawire.records.appender.PyRecordAppender writes it
 * (that class is the reference and the fallback; tests/test_records_appender.py holds them to the
 * same bytes and the same exception types).
 *
 * append() checks every argument before it writes anything, sizes the record, answers -1 without
 * writing when a limit is given and the record would pass it, and otherwise grows the bytearray
 * once and lays the record out in place.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "structmember.h"

#define INT32_LIMIT 0x7FFFFFFF
#define INLINE_HEADERS 8

typedef struct {
    PyObject_HEAD
    PyObject *records;         /* bytearray */
    Py_ssize_t count;
    long long last_offset_delta;
    int has_base;
    long long base_timestamp;
    long long max_timestamp;
} Appender;

static inline uint32_t zigzag32(int32_t n) { return ((uint32_t)n << 1) ^ (uint32_t)(n >> 31); }
static inline uint64_t zigzag64(int64_t n) { return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63); }

static inline Py_ssize_t
unsigned_size(uint64_t raw)
{
    Py_ssize_t size = 1;
    while (raw >= 0x80) {
        raw >>= 7;
        size++;
    }
    return size;
}

static inline char *
put_unsigned(char *out, uint64_t raw)
{
    while (raw >= 0x80) {
        *out++ = (char)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (char)raw;
    return out;
}

/* A key, value or header value: None (length -1) or a contiguous buffer held until release_blob. */
typedef struct {
    Py_buffer view;
    Py_ssize_t length;  /* -1: null */
    int held;
} Blob;

static int
get_blob(PyObject *data, Blob *blob, const char *what)
{
    blob->held = 0;
    if (data == Py_None) {
        blob->length = -1;
        return 0;
    }
    if (PyBytes_CheckExact(data)) {
        blob->view.buf = PyBytes_AS_STRING(data);
        blob->length = PyBytes_GET_SIZE(data);
        return 0;
    }
    if (!PyObject_CheckBuffer(data)) {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes-like or None, not %.100s", what,
                     Py_TYPE(data)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(data, &blob->view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "record %s must be a contiguous buffer", what);
        return -1;
    }
    blob->held = 1;
    blob->length = blob->view.len;
    return 0;
}

static inline void
release_blob(Blob *blob)
{
    if (blob->held) {
        PyBuffer_Release(&blob->view);
        blob->held = 0;
    }
}

static inline Py_ssize_t
blob_size(Py_ssize_t length)
{
    return unsigned_size(zigzag32((int32_t)length)) + (length > 0 ? length : 0);
}

static inline char *
put_blob(char *out, const char *data, Py_ssize_t length)
{
    out = put_unsigned(out, zigzag32((int32_t)length));
    if (length > 0) {
        memcpy(out, data, (size_t)length);
        out += length;
    }
    return out;
}

typedef struct {
    const char *key;
    Py_ssize_t key_length;
    Blob value;
} HeaderBytes;

static int
check_timestamp(PyObject *value, const char *what, long long *out)
{
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(value)->tp_name);
        return -1;
    }
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%s %R is out of the int64 range", what, value);
        return -1;
    }
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int
appender_init(Appender *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"base_timestamp", NULL};
    PyObject *base = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:RecordAppender", names, &base))
        return -1;
    self->has_base = 0;
    if (base != Py_None) {
        if (check_timestamp(base, "base timestamp", &self->base_timestamp) < 0)
            return -1;
        self->has_base = 1;
    }
    PyObject *records = PyByteArray_FromStringAndSize(NULL, 0);
    if (records == NULL)
        return -1;
    Py_XSETREF(self->records, records);
    self->count = 0;
    self->last_offset_delta = -1;
    self->max_timestamp = -1;
    return 0;
}

static void
appender_dealloc(Appender *self)
{
    Py_XDECREF(self->records);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* append(key, value, headers, timestamp, offset_delta=None, limit=-1) -> int */
static PyObject *
appender_append(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 4 || nargs > 6) {
        PyErr_Format(PyExc_TypeError, "append() takes from 4 to 6 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->records == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "RecordAppender.__init__ was not called");
        return NULL;
    }
    PyObject *headers = args[2];
    long long timestamp, offset_delta, limit = -1;
    if (check_timestamp(args[3], "timestamp", &timestamp) < 0)
        return NULL;
    if (nargs < 5 || args[4] == Py_None) {
        offset_delta = self->last_offset_delta + 1;
    } else {
        if (!PyLong_Check(args[4])) {
            PyErr_Format(PyExc_TypeError, "offset delta must be an int, not %.100s", Py_TYPE(args[4])->tp_name);
            return NULL;
        }
        int overflow;
        offset_delta = PyLong_AsLongLongAndOverflow(args[4], &overflow);
        if (offset_delta == -1 && PyErr_Occurred())
            return NULL;
        if (overflow < 0 || (!overflow && offset_delta <= self->last_offset_delta)) {
            PyErr_Format(PyExc_ValueError, "offset delta %R does not follow %lld", args[4], self->last_offset_delta);
            return NULL;
        }
        if (overflow > 0 || offset_delta > INT32_LIMIT) {
            PyErr_Format(PyExc_ValueError, "offset delta %R is out of the int32 range", args[4]);
            return NULL;
        }
    }
    if (nargs == 6) {
        limit = PyLong_AsLongLong(args[5]);
        if (limit == -1 && PyErr_Occurred())
            return NULL;
    }

    Blob key, value;
    HeaderBytes inline_headers[INLINE_HEADERS];
    HeaderBytes *parsed = inline_headers;
    Py_ssize_t header_count = 0, ready = 0;
    PyObject *result = NULL;
    key.held = value.held = 0;
    if (get_blob(args[0], &key, "key") < 0)
        return NULL;
    if (get_blob(args[1], &value, "value") < 0)
        goto done;
    if (!PyTuple_Check(headers) && !PyList_Check(headers)) {
        PyErr_Format(PyExc_TypeError, "record headers must be a tuple or list, not %.100s", Py_TYPE(headers)->tp_name);
        goto done;
    }
    header_count = PySequence_Fast_GET_SIZE(headers);
    if (header_count > INLINE_HEADERS) {
        parsed = PyMem_Malloc(sizeof(HeaderBytes) * (size_t)header_count);
        if (parsed == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Py_ssize_t headers_size = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(headers); i++) {
        PyObject *header = PySequence_Fast_GET_ITEM(headers, i);
        if ((!PyTuple_Check(header) && !PyList_Check(header)) || PySequence_Fast_GET_SIZE(header) != 2) {
            PyErr_Format(PyExc_TypeError, "a record header must be a (key, value) pair, not %R", header);
            goto done;
        }
        PyObject *header_key = PySequence_Fast_GET_ITEM(header, 0);
        if (header_key == Py_None) {
            PyErr_SetString(PyExc_ValueError, "a header key cannot be null");
            goto done;
        }
        if (!PyUnicode_Check(header_key)) {
            PyErr_Format(PyExc_TypeError, "a header key must be a str, not %.100s", Py_TYPE(header_key)->tp_name);
            goto done;
        }
        HeaderBytes *h = &parsed[ready];
        h->key = PyUnicode_AsUTF8AndSize(header_key, &h->key_length);
        if (h->key == NULL)
            goto done;
        if (get_blob(PySequence_Fast_GET_ITEM(header, 1), &h->value, "header value") < 0)
            goto done;
        ready++;
        if (h->key_length > INT32_LIMIT || h->value.length > INT32_LIMIT) {
            PyErr_SetString(PyExc_ValueError, "a record field exceeds the int32 length limit");
            goto done;
        }
        headers_size += blob_size(h->key_length) + blob_size(h->value.length);
    }
    if (key.length > INT32_LIMIT || value.length > INT32_LIMIT) {
        PyErr_SetString(PyExc_ValueError, "a record field exceeds the int32 length limit");
        goto done;
    }
    long long base = self->has_base ? self->base_timestamp : timestamp;
    int64_t delta = (int64_t)((uint64_t)timestamp - (uint64_t)base);  /* wraps as Java's long does */
    Py_ssize_t body = 1 + unsigned_size(zigzag64(delta)) + unsigned_size(zigzag32((int32_t)offset_delta))
                      + blob_size(key.length) + blob_size(value.length)
                      + unsigned_size(zigzag32((int32_t)header_count)) + headers_size;
    if (body > INT32_LIMIT) {
        PyErr_Format(PyExc_ValueError, "a record of %zd bytes exceeds the int32 length limit", body);
        goto done;
    }
    Py_ssize_t size = unsigned_size(zigzag32((int32_t)body)) + body;
    Py_ssize_t before = PyByteArray_GET_SIZE(self->records);
    if (limit >= 0 && before + size > limit) {
        result = PyLong_FromLong(-1);
        goto done;
    }
    if (PyByteArray_Resize(self->records, before + size) < 0)
        goto done;
    char *out = PyByteArray_AS_STRING(self->records) + before;
    out = put_unsigned(out, zigzag32((int32_t)body));
    *out++ = 0;  /* attributes: unused in v2 records */
    out = put_unsigned(out, zigzag64(delta));
    out = put_unsigned(out, zigzag32((int32_t)offset_delta));
    out = put_blob(out, key.view.buf, key.length);
    out = put_blob(out, value.view.buf, value.length);
    out = put_unsigned(out, zigzag32((int32_t)header_count));
    for (Py_ssize_t i = 0; i < header_count; i++) {
        out = put_blob(out, parsed[i].key, parsed[i].key_length);
        out = put_blob(out, parsed[i].value.view.buf, parsed[i].value.length);
    }
    self->has_base = 1;
    self->base_timestamp = base;
    self->count++;
    self->last_offset_delta = offset_delta;
    if (timestamp > self->max_timestamp)
        self->max_timestamp = timestamp;
    result = PyLong_FromSsize_t(size);
done:
    release_blob(&key);
    release_blob(&value);
    for (Py_ssize_t i = 0; i < ready; i++)
        release_blob(&parsed[i].value);
    if (parsed != inline_headers)
        PyMem_Free(parsed);
    return result;
}

static PyObject *
get_size(Appender *self, void *closure)
{
    return PyLong_FromSsize_t(PyByteArray_GET_SIZE(self->records));
}

static PyObject *
get_base_timestamp(Appender *self, void *closure)
{
    if (!self->has_base)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(self->base_timestamp);
}

static PyObject *
appender_repr(Appender *self)
{
    return PyUnicode_FromFormat("RecordAppender(count=%zd, size=%zd)", self->count,
                                PyByteArray_GET_SIZE(self->records));
}

static PyMethodDef appender_methods[] = {
    {"append", (PyCFunction)(void (*)(void))appender_append, METH_FASTCALL,
     "append(key, value, headers, timestamp, offset_delta=None, limit=-1) -> int\n"
     "Write one record; the bytes it took, or -1 (nothing written) when limit >= 0 and the section would\n"
     "grow past it."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef appender_members[] = {
    {"records", T_OBJECT_EX, offsetof(Appender, records), READONLY, "The records written (a bytearray)."},
    {"count", T_PYSSIZET, offsetof(Appender, count), READONLY, "Records written."},
    {"last_offset_delta", T_LONGLONG, offsetof(Appender, last_offset_delta), READONLY,
     "The last record's offset delta (-1 before the first)."},
    {"max_timestamp", T_LONGLONG, offsetof(Appender, max_timestamp), READONLY,
     "The largest timestamp written (-1 before the first)."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef appender_getset[] = {
    {"size", (getter)get_size, NULL, "Bytes written so far.", NULL},
    {"base_timestamp", (getter)get_base_timestamp, NULL, "The timestamp deltas' base (None before the first).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkawire.records._append.RecordAppender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordAppender(base_timestamp=None): a magic-2 batch's records section (see\n"
              "kafkawire.records.appender).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)appender_init,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_repr = (reprfunc)appender_repr,
    .tp_methods = appender_methods,
    .tp_members = appender_members,
    .tp_getset = appender_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_append", "kafkawire's native record appender.", -1,
                                    NULL};

PyMODINIT_FUNC
PyInit__append(void)
{
    if (PyType_Ready(&AppenderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "RecordAppender", (PyObject *)&AppenderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
