/* The consumer's hot loop in C: a v2 batch's records (already checked and decompressed) read into
 * one row per record, exactly as kafkawire.records.batch._read_rows builds them:
 *
 *     context + (offset, timestamp, key, value, headers, key_size, value_size)
 *
 * with offsets and timestamps wrapped to int64 as Java's long arithmetic leaves them, every
 * timestamp replaced by fixed_timestamp when one is given (LogAppendTime batches), keys and values
 * as bytes (None when null), headers as a tuple of Header(str, bytes | None).
 *
 * This reader never raises for malformed records: it returns None, and the caller runs the Python
 * reader on the same bytes, which raises the RecordsError with its path and offset. So the errors
 * are the Python reader's by construction, and this file only has to be right about good input and
 * safe (no read past the end, nothing allocated from an unchecked count) about bad input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MIN_RECORD_SIZE 7
#define MALFORMED 1

typedef struct {
    const unsigned char *data;
    Py_ssize_t size;
    Py_ssize_t pos;
} Cursor;

/* An unsigned varint of at most max_bytes bytes and bits bits (ByteUtils.readVarint/readVarlong). */
static int
read_unsigned(Cursor *c, int max_bytes, int bits, uint64_t *out)
{
    uint64_t value = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (c->pos >= c->size)
            return MALFORMED;
        unsigned char byte = c->data[c->pos++];
        uint64_t part = (uint64_t)(byte & 0x7F);
        if (shift == 63 && part > 1)
            return MALFORMED;  /* the last byte carries more bits than the type has */
        value |= part << shift;
        if (byte < 0x80) {
            if (bits < 64 && (value >> bits))
                return MALFORMED;
            *out = value;
            return 0;
        }
        shift += 7;
    }
    return MALFORMED;  /* longer than max_bytes */
}

static inline int
read_varint(Cursor *c, int32_t *out)
{
    const unsigned char *d = c->data;
    if (c->pos < c->size && d[c->pos] < 0x80) {  /* the common one-byte case */
        uint32_t raw = d[c->pos++];
        *out = (int32_t)((raw >> 1) ^ (~(raw & 1) + 1));
        return 0;
    }
    uint64_t raw;
    if (read_unsigned(c, 5, 32, &raw))
        return MALFORMED;
    uint32_t r = (uint32_t)raw;
    *out = (int32_t)((r >> 1) ^ (~(r & 1) + 1));
    return 0;
}

static inline int
read_varlong(Cursor *c, int64_t *out)
{
    uint64_t raw;
    if (read_unsigned(c, 10, 64, &raw))
        return MALFORMED;
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    return 0;
}

static inline int64_t
wrapping_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* bytes for a length >= 0, None for -1; anything else or a length past `end` is malformed. */
static int
read_blob(Cursor *c, Py_ssize_t end, int32_t length, PyObject **out)
{
    if (length == -1) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return 0;
    }
    if (length < 0 || length > end - c->pos)
        return MALFORMED;
    *out = PyBytes_FromStringAndSize((const char *)c->data + c->pos, length);
    if (*out == NULL)
        return -1;
    c->pos += length;
    return 0;
}

static PyObject *header_type;  /* kafkawire.records.record.Header, set by set_header_type */

static int
read_headers(Cursor *c, Py_ssize_t end, PyObject **out)
{
    int32_t count;
    if (read_varint(c, &count) || count < 0 || count > (end - c->pos) / 2)
        return MALFORMED;
    if (count == 0) {
        *out = PyTuple_New(0);
        return *out == NULL ? -1 : 0;
    }
    PyObject *headers = PyTuple_New(count);
    if (headers == NULL)
        return -1;
    for (int32_t h = 0; h < count; h++) {
        int32_t key_length, value_length;
        if (read_varint(c, &key_length) || key_length < 0 || key_length > end - c->pos)
            goto malformed;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)c->data + c->pos, key_length, "replace");
        if (key == NULL)
            goto error;
        c->pos += key_length;
        PyObject *value;
        int failed = read_varint(c, &value_length);
        if (!failed)
            failed = read_blob(c, end, value_length, &value);
        if (failed) {
            Py_DECREF(key);
            if (failed < 0)
                goto error;
            goto malformed;
        }
        PyObject *header = ((PyTypeObject *)header_type)->tp_alloc((PyTypeObject *)header_type, 2);
        if (header == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        PyTuple_SET_ITEM(header, 0, key);
        PyTuple_SET_ITEM(header, 1, value);
        PyTuple_SET_ITEM(headers, h, header);
    }
    *out = headers;
    return 0;
malformed:
    Py_DECREF(headers);
    return MALFORMED;
error:
    Py_DECREF(headers);
    return -1;
}

/* One record at c->pos into `row` (items 4..10); 0, MALFORMED or -1 (a Python error is set). */
static int
read_record(Cursor *c, int64_t base_offset, int64_t base_timestamp, PyObject *fixed_timestamp, PyObject *row)
{
    int32_t length, offset_delta, key_length, value_length;
    int64_t timestamp_delta;
    if (read_varint(c, &length) || length < MIN_RECORD_SIZE - 1 || length > c->size - c->pos)
        return MALFORMED;
    Py_ssize_t end = c->pos + length;
    c->pos += 1;  /* attributes: unused */
    if (read_varlong(c, &timestamp_delta) || read_varint(c, &offset_delta))
        return MALFORMED;
    PyObject *offset = PyLong_FromLongLong(wrapping_add(base_offset, offset_delta));
    if (offset == NULL)
        return -1;
    PyTuple_SET_ITEM(row, 4, offset);
    PyObject *timestamp;
    if (fixed_timestamp != Py_None) {
        Py_INCREF(fixed_timestamp);
        timestamp = fixed_timestamp;
    } else if ((timestamp = PyLong_FromLongLong(wrapping_add(base_timestamp, timestamp_delta))) == NULL) {
        return -1;
    }
    PyTuple_SET_ITEM(row, 5, timestamp);
    int failed;
    PyObject *blob;
    if ((failed = read_varint(c, &key_length)) || (failed = read_blob(c, end, key_length, &blob)))
        return failed;
    PyTuple_SET_ITEM(row, 6, blob);
    if ((failed = read_varint(c, &value_length)) || (failed = read_blob(c, end, value_length, &blob)))
        return failed;
    PyTuple_SET_ITEM(row, 7, blob);
    PyObject *headers;
    if ((failed = read_headers(c, end, &headers)))
        return failed;
    PyTuple_SET_ITEM(row, 8, headers);
    if (c->pos != end)
        return MALFORMED;
    PyObject *size = PyLong_FromLong(key_length);
    if (size == NULL)
        return -1;
    PyTuple_SET_ITEM(row, 9, size);
    if ((size = PyLong_FromLong(value_length)) == NULL)
        return -1;
    PyTuple_SET_ITEM(row, 10, size);
    return 0;
}

static PyObject *
read_rows(PyObject *module, PyObject *args)
{
    Py_buffer buffer;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    PyObject *fixed_timestamp, *context;
    PyTypeObject *row_type;
    if (!PyArg_ParseTuple(args, "y*nLLOO!O!", &buffer, &count, &base_offset, &base_timestamp, &fixed_timestamp,
                          &PyTuple_Type, &context, &PyType_Type, &row_type))
        return NULL;
    PyObject *rows = NULL;
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_header_type() was not called");
        goto done;
    }
    if (PyTuple_GET_SIZE(context) != 4) {
        PyErr_SetString(PyExc_ValueError, "the context must be a tuple of four values");
        goto done;
    }
    if (!PyType_IsSubtype(row_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "row_type must be tuple or a subclass of it");
        goto done;
    }
    if (fixed_timestamp != Py_None && !PyLong_Check(fixed_timestamp)) {
        PyErr_SetString(PyExc_TypeError, "fixed_timestamp must be an int or None");
        goto done;
    }
    Cursor c = {(const unsigned char *)buffer.buf, buffer.len, 0};
    if (count < 0 || count > c.size / MIN_RECORD_SIZE) {
        rows = Py_NewRef(Py_None);  /* the Python reader says why */
        goto done;
    }
    rows = PyList_New(count);
    if (rows == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = row_type == &PyTuple_Type ? PyTuple_New(11) : row_type->tp_alloc(row_type, 11);
        if (row == NULL)
            goto fail;
        for (int k = 0; k < 4; k++) {
            PyObject *value = PyTuple_GET_ITEM(context, k);
            Py_INCREF(value);
            PyTuple_SET_ITEM(row, k, value);
        }
        PyList_SET_ITEM(rows, i, row);  /* owned by the list from here: freed with it on failure */
        int failed = read_record(&c, base_offset, base_timestamp, fixed_timestamp, row);
        if (failed < 0)
            goto fail;
        if (failed) {
            Py_SETREF(rows, Py_NewRef(Py_None));
            goto done;
        }
    }
    if (c.pos != c.size)
        Py_SETREF(rows, Py_NewRef(Py_None));
    goto done;
fail:
    Py_CLEAR(rows);
done:
    PyBuffer_Release(&buffer);
    return rows;
}

static PyObject *
set_header_type(PyObject *module, PyObject *type)
{
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the header type must be a subclass of tuple");
        return NULL;
    }
    Py_XSETREF(header_type, Py_NewRef(type));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read_rows", read_rows, METH_VARARGS,
     "read_rows(data, count, base_offset, base_timestamp, fixed_timestamp, context, row_type) -> list | None\n"
     "The rows of RecordBatch.rows; None when the records are malformed (the Python reader says why)."},
    {"set_header_type", set_header_type, METH_O, "The tuple subclass headers are made of (records.Header)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows", "kafkawire's native record reader.", -1,
                                    methods};

PyMODINIT_FUNC
PyInit__rows(void)
{
    return PyModule_Create(&module);
}
