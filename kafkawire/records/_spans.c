/* SpanBuilder: gathers byte spans of many record batches into the three buffers of one Arrow
 * binary (or string) array: a validity bitmap, int32 offsets and the bytes, end to end.
 *
 * RecordBatch.columns() leaves keys, values and header fields where they are in the batch's bytes
 * and gives their starts and lengths (-1 for null). A table of records wants them the other way
 * round: every value of a column in one buffer. This copies each span once, in C, so a column of a
 * hundred thousand values costs no Python object per value. The buffers are Arrow's layout, so the
 * caller wraps them with pyarrow.Array.from_buffers; nothing here imports pyarrow.
 *
 * append() checks every span against its batch's bytes before it copies any, and with utf8=True
 * checks that each span is well-formed UTF-8 (an Arrow string must be): a batch that fails appends
 * nothing, so the caller can read it another way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The data and offsets live in bytes objects grown in place, so finish() hands them over without a
 * copy (a fresh copy of tens of megabytes costs its page faults every time a table is cut). */
typedef struct {
    PyObject_HEAD
    int utf8;
    PyObject *data;              /* bytes; its size is the capacity */
    Py_ssize_t data_length;
    PyObject *offsets;           /* bytes of int32: count + 1 entries once anything was appended */
    Py_ssize_t count;
    uint8_t *validity;           /* NULL until the first null: all valid so far */
    Py_ssize_t validity_capacity, null_count;
} SpanBuilder;

/* Well-formed UTF-8 as Unicode defines it: no overlong forms, no surrogates, nothing past U+10FFFF. */
static int
valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t need;
        unsigned char low = 0x80, high = 0xBF;  /* the range of the second byte */
        if (b >= 0xC2 && b <= 0xDF)
            need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0)
                low = 0xA0;      /* overlong */
            else if (b == 0xED)
                high = 0x9F;     /* surrogates */
        }
        else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0)
                low = 0x90;      /* overlong */
            else if (b == 0xF4)
                high = 0x8F;     /* past U+10FFFF */
        }
        else
            return 0;
        if (need > n - i - 1)
            return 0;
        if (s[i + 1] < low || s[i + 1] > high)
            return 0;
        for (Py_ssize_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        i += need + 1;
    }
    return 1;
}

static int
grow(void **buffer, Py_ssize_t *capacity, Py_ssize_t needed, Py_ssize_t item_size)
{
    if (needed <= *capacity)
        return 0;
    Py_ssize_t capacity_now = *capacity ? *capacity : 64;
    while (capacity_now < needed)
        capacity_now *= 2;
    void *grown = PyMem_Realloc(*buffer, capacity_now * item_size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buffer = grown;
    *capacity = capacity_now;
    return 0;
}

/* A bytes object of at least `needed` bytes (its contents kept), grown by doubling. */
static int
grow_bytes(PyObject **bytes, Py_ssize_t needed)
{
    Py_ssize_t capacity = *bytes == NULL ? 0 : PyBytes_GET_SIZE(*bytes);
    if (needed <= capacity)
        return 0;
    Py_ssize_t capacity_now = capacity ? capacity : 256;
    while (capacity_now < needed)
        capacity_now *= 2;
    if (*bytes == NULL) {
        *bytes = PyBytes_FromStringAndSize(NULL, capacity_now);
        return *bytes == NULL ? -1 : 0;
    }
    return _PyBytes_Resize(bytes, capacity_now);  /* ours alone (refcount 1), so resized in place */
}

/* The validity bitmap, made when the first null arrives: every earlier value is valid. */
static int
start_validity(SpanBuilder *self, Py_ssize_t needed_values)
{
    Py_ssize_t bytes = (needed_values + 7) / 8;
    if (grow((void **)&self->validity, &self->validity_capacity, bytes, 1))
        return -1;
    memset(self->validity, 0, self->validity_capacity);
    for (Py_ssize_t i = 0; i < self->count; i++)
        self->validity[i / 8] |= (uint8_t)(1u << (i % 8));
    return 0;
}

static PyObject *
SpanBuilder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"utf8", NULL};
    int utf8 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", keywords, &utf8))
        return NULL;
    SpanBuilder *self = (SpanBuilder *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->utf8 = utf8;
    return (PyObject *)self;
}

static void
reset(SpanBuilder *self)
{
    Py_CLEAR(self->data);
    Py_CLEAR(self->offsets);
    PyMem_Free(self->validity);
    self->validity = NULL;
    self->data_length = self->count = self->validity_capacity = self->null_count = 0;
}

static void
SpanBuilder_dealloc(SpanBuilder *self)
{
    reset(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A buffer of C ints (an array('i') or bytes laid out as one). */
static int
get_ints(PyObject *object, Py_buffer *view, const char *name)
{
    if (PyObject_GetBuffer(object, view, PyBUF_SIMPLE))
        return -1;
    if (view->len % (Py_ssize_t)sizeof(int32_t)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of int32", name, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
SpanBuilder_append(SpanBuilder *self, PyObject *args)
{
    PyObject *data_object, *starts_object, *lengths_object;
    if (!PyArg_ParseTuple(args, "OOO", &data_object, &starts_object, &lengths_object))
        return NULL;
    Py_buffer data, starts_view, lengths_view;
    if (PyObject_GetBuffer(data_object, &data, PyBUF_SIMPLE))
        return NULL;
    PyObject *result = NULL;
    int have_starts = 0, have_lengths = 0;
    if (get_ints(starts_object, &starts_view, "starts"))
        goto done;
    have_starts = 1;
    if (get_ints(lengths_object, &lengths_view, "lengths"))
        goto done;
    have_lengths = 1;
    if (starts_view.len != lengths_view.len) {
        PyErr_SetString(PyExc_ValueError, "starts and lengths differ in length");
        goto done;
    }
    Py_ssize_t n = starts_view.len / (Py_ssize_t)sizeof(int32_t);
    const unsigned char *bytes = (const unsigned char *)data.buf;
    Py_ssize_t added = 0, nulls = 0;
    /* Check everything before copying anything: a failed batch leaves the builder as it was. */
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t start, length;
        memcpy(&start, (const char *)starts_view.buf + i * sizeof(int32_t), sizeof start);
        memcpy(&length, (const char *)lengths_view.buf + i * sizeof(int32_t), sizeof length);
        if (length == -1) {
            nulls++;
            continue;
        }
        if (length < -1 || start < 0 || start > data.len || length > data.len - start) {
            PyErr_Format(PyExc_ValueError, "span %zd (start %d, length %d) is outside the %zd bytes given",
                         i, start, length, data.len);
            goto done;
        }
        if (self->utf8 && !valid_utf8(bytes + start, length)) {
            result = Py_NewRef(Py_False);
            goto done;
        }
        added += length;
    }
    if (added > INT32_MAX - self->data_length) {
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of values in one array (int32 offsets)");
        goto done;
    }
    if (grow_bytes(&self->data, self->data_length + added)
        || grow_bytes(&self->offsets, (self->count + n + 1) * (Py_ssize_t)sizeof(int32_t)))
        goto done;
    char *out = PyBytes_AS_STRING(self->data);
    int32_t *offsets = (int32_t *)PyBytes_AS_STRING(self->offsets);  /* bytes data is malloc-aligned */
    if (self->count == 0)
        offsets[0] = 0;
    if (nulls && self->validity == NULL && start_validity(self, self->count + n))
        goto done;
    if (self->validity != NULL) {
        Py_ssize_t old = self->validity_capacity;
        if (grow((void **)&self->validity, &self->validity_capacity, (self->count + n + 7) / 8, 1))
            goto done;
        memset(self->validity + old, 0, self->validity_capacity - old);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t start, length;
        memcpy(&start, (const char *)starts_view.buf + i * sizeof(int32_t), sizeof start);
        memcpy(&length, (const char *)lengths_view.buf + i * sizeof(int32_t), sizeof length);
        Py_ssize_t index = self->count + i;
        if (length > 0) {
            memcpy(out + self->data_length, bytes + start, length);
            self->data_length += length;
        }
        offsets[index + 1] = (int32_t)self->data_length;
        if (self->validity != NULL && length != -1)
            self->validity[index / 8] |= (uint8_t)(1u << (index % 8));
    }
    self->count += n;
    self->null_count += nulls;
    result = Py_NewRef(Py_True);
done:
    if (have_starts)
        PyBuffer_Release(&starts_view);
    if (have_lengths)
        PyBuffer_Release(&lengths_view);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *
SpanBuilder_finish(SpanBuilder *self, PyObject *unused)
{
    /* An empty builder still gives the one offset (0) an empty array has. */
    if (grow_bytes(&self->offsets, sizeof(int32_t)) || grow_bytes(&self->data, 1))
        return NULL;
    if (self->count == 0)
        ((int32_t *)PyBytes_AS_STRING(self->offsets))[0] = 0;
    if (_PyBytes_Resize(&self->offsets, (self->count + 1) * (Py_ssize_t)sizeof(int32_t))
        || _PyBytes_Resize(&self->data, self->data_length)) {
        reset(self);  /* out of memory: _PyBytes_Resize freed the object; what was held is gone */
        return NULL;
    }
    PyObject *validity = self->null_count
        ? PyBytes_FromStringAndSize((const char *)self->validity, (self->count + 7) / 8)
        : Py_NewRef(Py_None);
    if (validity == NULL)
        return NULL;
    PyObject *result = Py_BuildValue("(nnNOO)", self->count, self->null_count, validity, self->offsets, self->data);
    if (result != NULL)
        reset(self);
    return result;
}

static Py_ssize_t
SpanBuilder_length(SpanBuilder *self)
{
    return self->count;
}

static PyObject *
SpanBuilder_get_nbytes(SpanBuilder *self, void *closure)
{
    return PyLong_FromSsize_t(self->data_length);
}

static PyMethodDef SpanBuilder_methods[] = {
    {"append", (PyCFunction)SpanBuilder_append, METH_VARARGS,
     "append(data, starts, lengths) -> bool\n"
     "Append data[start:start + length] for each span (a null for length -1); starts and lengths are buffers of\n"
     "int32 (array('i')). False, with nothing appended, when utf8=True and a span is not well-formed UTF-8.\n"
     "ValueError for a span outside data."},
    {"finish", (PyCFunction)SpanBuilder_finish, METH_NOARGS,
     "finish() -> (length, null_count, validity bitmap or None, int32 offsets, data), as Arrow lays out a binary\n"
     "array; the builder is empty afterwards."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef SpanBuilder_getset[] = {
    {"nbytes", (getter)SpanBuilder_get_nbytes, NULL, "Bytes of values held.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods SpanBuilder_as_sequence = {.sq_length = (lenfunc)SpanBuilder_length};

static PyTypeObject SpanBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkawire.records._spans.SpanBuilder",
    .tp_basicsize = sizeof(SpanBuilder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SpanBuilder(utf8=False): byte spans gathered into the buffers of one Arrow binary/string array.",
    .tp_new = SpanBuilder_new,
    .tp_dealloc = (destructor)SpanBuilder_dealloc,
    .tp_methods = SpanBuilder_methods,
    .tp_getset = SpanBuilder_getset,
    .tp_as_sequence = &SpanBuilder_as_sequence,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_spans",
                                    "Byte spans gathered into Arrow-layout buffers.", -1, NULL};

PyMODINIT_FUNC
PyInit__spans(void)
{
    if (PyType_Ready(&SpanBuilderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "SpanBuilder", (PyObject *)&SpanBuilderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
