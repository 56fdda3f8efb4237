/* The consumer's hot loop in C: a v2 batch's records (already checked and decompressed) read into
 * one row per record, exactly as kafkawire.records.batch._read_rows builds them:
 *
 *     context + (offset, timestamp, key, value, headers, key_size, value_size)
 *
 * with offsets and timestamps wrapped to int64 as Java's long arithmetic leaves them, every
 * timestamp replaced by fixed_timestamp when one is given (LogAppendTime batches), keys and values
 * as bytes (None when null), headers as a tuple of Header(str, bytes | None). read_columns reads
 * the same records into the buffers of RecordBatch.columns' arrays, as _read_records does;
 * check_records reads them the same way for the broker's validation, keeping nothing per record.
 *
 * These readers never raise for malformed records: it returns None, and the caller runs the Python
 * reader on the same bytes, which raises the RecordsError with its path and offset. So the errors
 * are the Python reader's by construction, and this file only has to be right about good input and
 * safe (no read past the end, nothing allocated from an unchecked count) about bad input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

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

/* The offset of the record at c->pos and where it ends, without reading its fields; 0 or MALFORMED. */
static int
peek_record(Cursor c, int64_t base_offset, int64_t *offset, Py_ssize_t *end)
{
    int32_t length, offset_delta;
    int64_t timestamp_delta;
    if (read_varint(&c, &length) || length < MIN_RECORD_SIZE - 1 || length > c.size - c.pos)
        return MALFORMED;
    *end = c.pos + length;
    c.pos += 1;  /* attributes */
    if (read_varlong(&c, &timestamp_delta) || read_varint(&c, &offset_delta) || c.pos > *end)
        return MALFORMED;
    *offset = wrapping_add(base_offset, offset_delta);
    return 0;
}

static PyObject *
read_rows(PyObject *module, PyObject *args)
{
    Py_buffer buffer;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    long long first = INT64_MIN, last = INT64_MAX;
    PyObject *fixed_timestamp, *context, *tail = NULL;
    PyTypeObject *row_type;
    if (!PyArg_ParseTuple(args, "y*nLLOO!O!|O!LL", &buffer, &count, &base_offset, &base_timestamp, &fixed_timestamp,
                          &PyTuple_Type, &context, &PyType_Type, &row_type, &PyTuple_Type, &tail, &first, &last))
        return NULL;
    Py_ssize_t tail_size = tail == NULL ? 0 : PyTuple_GET_SIZE(tail);
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
    int bounded = first != INT64_MIN || last != INT64_MAX;
    rows = PyList_New(bounded ? 0 : count);
    if (rows == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (bounded) {  /* records outside [first, last] are stepped over, not made into rows */
            int64_t offset;
            Py_ssize_t end;
            if (peek_record(c, base_offset, &offset, &end)) {
                Py_SETREF(rows, Py_NewRef(Py_None));
                goto done;
            }
            if (offset < first || offset > last) {
                c.pos = end;
                continue;
            }
        }
        PyObject *row = row_type == &PyTuple_Type ? PyTuple_New(11 + tail_size)
                                                  : row_type->tp_alloc(row_type, 11 + tail_size);
        if (row == NULL)
            goto fail;
        for (int k = 0; k < 4; k++) {
            PyObject *value = PyTuple_GET_ITEM(context, k);
            Py_INCREF(value);
            PyTuple_SET_ITEM(row, k, value);
        }
        for (Py_ssize_t k = 0; k < tail_size; k++) {
            PyObject *value = PyTuple_GET_ITEM(tail, k);
            Py_INCREF(value);
            PyTuple_SET_ITEM(row, 11 + k, value);
        }
        if (bounded) {
            if (PyList_Append(rows, row) < 0) {
                Py_DECREF(row);
                goto fail;
            }
            Py_DECREF(row);  /* owned by the list from here: freed with it on failure */
        } else {
            PyList_SET_ITEM(rows, i, row);  /* owned by the list from here: freed with it on failure */
        }
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

/* ---- read_columns: the twin of kafkawire.records.batch._read_records -------------------------------
 *
 * The same records read into columns rather than rows: positions and lengths in `data`, offsets and
 * timestamps, written straight into bytes objects laid out as the RecordColumns arrays ('q' is long
 * long, 'i' is int, native byte order), so the caller turns each into an array with one memcpy. */

enum {
    OFFSETS, TIMESTAMPS, KEY_STARTS, KEY_LENGTHS, VALUE_STARTS, VALUE_LENGTHS, HEADERS_AT,
    HEADER_KEY_STARTS, HEADER_KEY_LENGTHS, HEADER_VALUE_STARTS, HEADER_VALUE_LENGTHS, COLUMN_COUNT
};
#define RECORD_COLUMNS HEADER_KEY_STARTS  /* the columns before it have a size known from the count */

/* memcpy, not a cast: a bytes object's buffer carries no alignment promise. */
static inline void
put_int(char *column, Py_ssize_t index, int value)
{
    memcpy(column + index * (Py_ssize_t)sizeof(int), &value, sizeof(int));
}

static inline void
put_long(char *column, Py_ssize_t index, long long value)
{
    memcpy(column + index * (Py_ssize_t)sizeof(long long), &value, sizeof(long long));
}

/* The four header columns, grown together: how many headers a batch has is known only at the end. */
typedef struct {
    int *items[4];  /* key starts, key lengths, value starts, value lengths */
    Py_ssize_t length, capacity;
} HeaderColumns;

static int
push_header(HeaderColumns *headers, int key_start, int key_length, int value_start, int value_length)
{
    if (headers->length == headers->capacity) {
        /* doubling: a header takes at least two bytes, so this stays within the records' size */
        Py_ssize_t capacity = headers->capacity ? headers->capacity * 2 : 16;
        for (int k = 0; k < 4; k++) {
            int *grown = PyMem_Realloc(headers->items[k], capacity * sizeof(int));
            if (grown == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            headers->items[k] = grown;
        }
        headers->capacity = capacity;
    }
    Py_ssize_t h = headers->length++;
    headers->items[0][h] = key_start;
    headers->items[1][h] = key_length;
    headers->items[2][h] = value_start;
    headers->items[3][h] = value_length;
    return 0;
}

static void
free_headers(HeaderColumns *headers)
{
    for (int k = 0; k < 4; k++)
        PyMem_Free(headers->items[k]);
}

/* A length-prefixed field: its start (just after the length) and length (-1 for null, when allowed). */
static inline int
read_span(Cursor *c, int null_allowed, int *start, int *length)
{
    int32_t n;
    if (read_varint(c, &n) || n < -null_allowed || n > c->size - c->pos)
        return MALFORMED;
    *start = (int)c->pos;
    *length = n;
    if (n > 0)
        c->pos += n;
    return 0;
}

typedef struct {
    int64_t base_offset, base_timestamp, fixed_timestamp;
    int has_fixed_timestamp;  /* LogAppendTime: every record gets fixed_timestamp */
} Bases;

/* Record `index` at c->pos into the columns; 0, MALFORMED or -1 (a Python error is set).
 *
 * The record's fields are read through a cursor that ends where the record does. The Python reader
 * reads on to the end of the records instead, but any field that crosses the record's end leaves it
 * past that end, which it reports: so the two fail on the same records. */
static int
read_record_columns(Cursor *c, Py_ssize_t index, const Bases *bases, char **columns, HeaderColumns *headers)
{
    int32_t length, offset_delta, count;
    int64_t timestamp_delta;
    int start, span;
    if (read_varint(c, &length) || length < MIN_RECORD_SIZE - 1 || length > c->size - c->pos)
        return MALFORMED;
    Cursor record = {c->data, c->pos + length, c->pos + 1};  /* + 1: the attributes, unused */
    if (read_varlong(&record, &timestamp_delta) || read_varint(&record, &offset_delta))
        return MALFORMED;
    put_long(columns[OFFSETS], index, wrapping_add(bases->base_offset, offset_delta));
    put_long(columns[TIMESTAMPS], index, bases->has_fixed_timestamp
                                             ? bases->fixed_timestamp
                                             : wrapping_add(bases->base_timestamp, timestamp_delta));
    if (read_span(&record, 1, &start, &span))
        return MALFORMED;
    put_int(columns[KEY_STARTS], index, start);
    put_int(columns[KEY_LENGTHS], index, span);
    if (read_span(&record, 1, &start, &span))
        return MALFORMED;
    put_int(columns[VALUE_STARTS], index, start);
    put_int(columns[VALUE_LENGTHS], index, span);
    if (read_varint(&record, &count) || count < 0 || count > (record.size - record.pos) / 2)
        return MALFORMED;
    for (int32_t h = 0; h < count; h++) {
        int key_start, key_length, value_start, value_length;
        if (read_span(&record, 0, &key_start, &key_length) || read_span(&record, 1, &value_start, &value_length))
            return MALFORMED;
        if (push_header(headers, key_start, key_length, value_start, value_length))
            return -1;
    }
    if (record.pos != record.size)
        return MALFORMED;
    put_int(columns[HEADERS_AT], index + 1, (int)headers->length);
    c->pos = record.pos;
    return 0;
}

static PyObject *
read_columns(PyObject *module, PyObject *args)
{
    Py_buffer buffer;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    PyObject *fixed_timestamp;
    if (!PyArg_ParseTuple(args, "y*nLLO", &buffer, &count, &base_offset, &base_timestamp, &fixed_timestamp))
        return NULL;
    PyObject *result = NULL;
    PyObject *buffers[COLUMN_COUNT] = {NULL};
    char *columns[RECORD_COLUMNS];
    HeaderColumns headers = {{NULL, NULL, NULL, NULL}, 0, 0};
    Bases bases = {base_offset, base_timestamp, 0, fixed_timestamp != Py_None};
    if (bases.has_fixed_timestamp) {
        if (!PyLong_Check(fixed_timestamp)) {
            PyErr_SetString(PyExc_TypeError, "fixed_timestamp must be an int or None");
            goto done;
        }
        bases.fixed_timestamp = PyLong_AsLongLong(fixed_timestamp);
        if (bases.fixed_timestamp == -1 && PyErr_Occurred())
            goto done;
    }
    Cursor c = {(const unsigned char *)buffer.buf, buffer.len, 0};
    /* A count that cannot fit is the Python reader's to report; positions past INT_MAX do not fit
     * an 'i' array (the Python reader fails on those too). */
    if (count < 0 || count > c.size / MIN_RECORD_SIZE || c.size > INT_MAX) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (int k = 0; k < RECORD_COLUMNS; k++) {
        Py_ssize_t items = k == HEADERS_AT ? count + 1 : count;
        Py_ssize_t item_size = k == OFFSETS || k == TIMESTAMPS ? sizeof(long long) : sizeof(int);
        if ((buffers[k] = PyBytes_FromStringAndSize(NULL, items * item_size)) == NULL)
            goto done;
        columns[k] = PyBytes_AS_STRING(buffers[k]);
    }
    put_int(columns[HEADERS_AT], 0, 0);
    for (Py_ssize_t i = 0; i < count; i++) {
        int failed = read_record_columns(&c, i, &bases, columns, &headers);
        if (failed < 0)
            goto done;
        if (failed) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (c.pos != c.size) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (int k = 0; k < 4; k++) {
        buffers[RECORD_COLUMNS + k] = PyBytes_FromStringAndSize((const char *)headers.items[k],
                                                                headers.length * (Py_ssize_t)sizeof(int));
        if (buffers[RECORD_COLUMNS + k] == NULL)
            goto done;
    }
    if ((result = PyTuple_New(COLUMN_COUNT)) == NULL)
        goto done;
    for (int k = 0; k < COLUMN_COUNT; k++) {
        PyTuple_SET_ITEM(result, k, buffers[k]);  /* the tuple takes the reference */
        buffers[k] = NULL;
    }
done:
    for (int k = 0; k < COLUMN_COUNT; k++)
        Py_XDECREF(buffers[k]);
    free_headers(&headers);
    PyBuffer_Release(&buffer);
    return result;
}

/* One record at c->pos checked as read_record_columns reads it, nothing stored: its timestamp delta,
 * offset delta and whether its key is null. 0 or MALFORMED. */
static int
check_record(Cursor *c, int64_t *timestamp_delta, int32_t *offset_delta, int *null_key)
{
    int32_t length, count;
    int start, span;
    if (read_varint(c, &length) || length < MIN_RECORD_SIZE - 1 || length > c->size - c->pos)
        return MALFORMED;
    Cursor record = {c->data, c->pos + length, c->pos + 1};  /* + 1: the attributes, unused */
    if (read_varlong(&record, timestamp_delta) || read_varint(&record, offset_delta))
        return MALFORMED;
    if (read_span(&record, 1, &start, &span))
        return MALFORMED;
    *null_key = span < 0;
    if (read_span(&record, 1, &start, &span))
        return MALFORMED;
    if (read_varint(&record, &count) || count < 0 || count > (record.size - record.pos) / 2)
        return MALFORMED;
    for (int32_t h = 0; h < count; h++) {
        if (read_span(&record, 0, &start, &span) || read_span(&record, 1, &start, &span))
            return MALFORMED;
    }
    if (record.pos != record.size)
        return MALFORMED;
    c->pos = record.pos;
    return 0;
}

/* What a broker's validation needs of a batch's records, in one pass that keeps nothing per record:
 * (lowest timestamp, highest timestamp, whether a key is null, whether the offset deltas are 0..count-1),
 * the timestamps as base_timestamp + delta; None when the records are malformed (as read_columns). */
static PyObject *
check_records(PyObject *module, PyObject *args)
{
    Py_buffer buffer;
    Py_ssize_t count;
    long long base_timestamp;
    if (!PyArg_ParseTuple(args, "y*nL", &buffer, &count, &base_timestamp))
        return NULL;
    Cursor c = {(const unsigned char *)buffer.buf, buffer.len, 0};
    PyObject *result = NULL;
    int64_t lowest = INT64_MAX, highest = INT64_MIN;
    int null_keys = 0, in_order = 1;
    if (count < 0 || count > c.size / MIN_RECORD_SIZE || c.size > INT_MAX)
        goto malformed;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t timestamp_delta;
        int32_t offset_delta;
        int null_key;
        if (check_record(&c, &timestamp_delta, &offset_delta, &null_key))
            goto malformed;
        int64_t timestamp = wrapping_add(base_timestamp, timestamp_delta);
        if (timestamp < lowest)
            lowest = timestamp;
        if (timestamp > highest)
            highest = timestamp;
        null_keys |= null_key;
        in_order &= offset_delta == i;
    }
    if (c.pos != c.size || count == 0)
        goto malformed;
    result = Py_BuildValue("(LLOO)", (long long)lowest, (long long)highest, null_keys ? Py_True : Py_False,
                           in_order ? Py_True : Py_False);
    PyBuffer_Release(&buffer);
    return result;
malformed:
    PyBuffer_Release(&buffer);
    Py_RETURN_NONE;
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
     "read_rows(data, count, base_offset, base_timestamp, fixed_timestamp, context, row_type[, tail, first, last])\n"
     "-> list | None\n"
     "The rows of RecordBatch.rows (each ending with the values of `tail`, only the records with offsets\n"
     "first..last); None when the records are malformed (the Python reader says why)."},
    {"read_columns", read_columns, METH_VARARGS,
     "read_columns(data, count, base_offset, base_timestamp, fixed_timestamp) -> tuple | None\n"
     "The buffers of RecordBatch.columns' arrays (offsets, timestamps, key starts and lengths, value starts and\n"
     "lengths, headers_at, header key starts and lengths, header value starts and lengths) as bytes; None when\n"
     "the records are malformed (the Python reader says why)."},
    {"check_records", check_records, METH_VARARGS,
     "check_records(data, count, base_timestamp) -> (lowest, highest, null key, offsets in order) | None\n"
     "A batch's records checked as read_columns reads them, nothing kept per record; None when malformed."},
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
