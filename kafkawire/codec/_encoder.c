/* The native encoder: one interpreter for the encode programs that codegen/encode_programs.py writes
 * into each generated module (see kafkawire/codec/native.py).
 *
 * A program is compiled on first use into C arrays (slot offsets read from the generated class's
 * member descriptors, kinds as enums, defaults as owned references). The message is walked twice:
 * the size pass counts bytes (a struct's fixed-width fields and an array of fixed-width elements at
 * once, from the program and the array's length, and only lengths of bytes values), then the write
 * pass checks every value and writes it into the one buffer allocated for that count. Every write is
 * bounds-checked and the write pass must end exactly where the size pass did, so a value the size
 * pass did not check, or one changed between the passes, cannot overrun the buffer: it falls back.
 *
 * Anything the walk does not take (a wrong type, an int out of its range, a string that is not
 * UTF-8-encodable or too long, a null where none is allowed, a non-default value in a field the
 * version lacks, tags in a version without them, a subclass) is not an error here: the entry points
 * return None and the caller runs the generated Python writer, which raises its EncodeError (or writes
 * what it writes). The Python writers are the reference; tests/codec/test_native_encoder.py checks
 * that both write the same bytes.
 */
#include "_programs.h"

/* When a field counts as set: the writers' ``differs`` (codegen/render.py), by the field's default. */
enum How { H_EQ, H_NULL, H_STRUCT, H_EMPTY };

#define MAX_TAGS 64  /* known tagged fields of one struct */

typedef struct { Py_ssize_t offset; Value value; PyObject *attr; } FieldOp;
typedef struct { Py_ssize_t offset; int how; PyObject *constant; } CheckOp;
typedef struct {
    uint32_t tag;
    Py_ssize_t offset;
    Value value;
    int how;
    PyObject *constant;
    CheckOp *empty; /* how == H_STRUCT: the struct's _is_default checks (n_empty of them), or NULL */
    Py_ssize_t n_empty;
} TagOp;

struct Program {
    PyTypeObject *cls;
    int flexible;
    int depth;
    Py_ssize_t n_fields, n_checks, n_tags;
    FieldOp *fields;
    CheckOp *checks;
    TagOp *tags;
    Py_ssize_t unknown_tags_offset;
    /* The size pass: the fixed-width fields' bytes in all, and the other fields (indexes in fields). */
    Py_ssize_t fixed_bytes, n_sized;
    Py_ssize_t *sized;
};

/* Set by configure() beside the uuid globals of _programs.h: the ABSENT sentinel of lazy struct fields. */
static PyObject *absent;
static PyObject *str_is_default;

/* ------------------------------------------------------------------------------------ writing */

/* One walk: out == NULL counts bytes into pos; otherwise writes them at out[pos], pos < cap. With
 * parts set (a list), non-null records values outside tag sections become pieces of their own: the
 * bytes before each are appended as a bytes object, then the value itself. */
typedef struct {
    unsigned char *out;
    Py_ssize_t pos, cap;
    PyObject *parts;
    Py_ssize_t chunk;    /* where the bytes not yet in parts start */
    Py_ssize_t external; /* bytes in the separate pieces */
    int split;           /* records values become pieces (off inside tag sections) */
} Enc;

static inline int
put(Enc *e, const void *data, Py_ssize_t n)
{
    if (e->out != NULL) {
        if (n > e->cap - e->pos)
            return -1;
        memcpy(e->out + e->pos, data, (size_t)n);
    }
    e->pos += n;
    return 0;
}

static inline int
put_be(Enc *e, uint64_t value, int width)
{
    if (e->out == NULL) {
        e->pos += width;
        return 0;
    }
    if (width > e->cap - e->pos)
        return -1;
    unsigned char *d = e->out + e->pos;
    switch (width) {
    case 1: d[0] = (unsigned char)value; break;
    case 2: { uint16_t v = __builtin_bswap16((uint16_t)value); memcpy(d, &v, 2); break; }
    case 4: { uint32_t v = __builtin_bswap32((uint32_t)value); memcpy(d, &v, 4); break; }
    default: { uint64_t v = __builtin_bswap64(value); memcpy(d, &v, 8); break; }
    }
    e->pos += width;
    return 0;
}

/* The bytes a fixed-width kind takes; 0 for the others. */
static inline int
fixed_width(int kind)
{
    switch (kind) {
    case K_BOOL: case K_INT8: return 1;
    case K_INT16: case K_UINT16: return 2;
    case K_INT32: case K_UINT32: return 4;
    case K_INT64: case K_FLOAT64: return 8;
    case K_UUID: return 16;
    default: return 0;
    }
}

static inline int
uvarint_size(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline int
put_uvarint(Enc *e, uint64_t v)
{
    if (e->out == NULL) {
        e->pos += uvarint_size(v);
        return 0;
    }
    unsigned char b[10];
    int n = 0;
    while (v >= 0x80) {
        b[n++] = (unsigned char)(v & 0x7F) | 0x80;
        v >>= 7;
    }
    b[n++] = (unsigned char)v;
    return put(e, b, n);
}

/* A length or count: n + 1 as a varint when compact, else int16 (strings) or int32; -1 is null. */
static inline int
put_length(Enc *e, int compact, int width, Py_ssize_t n)
{
    if (compact)
        return put_uvarint(e, (uint64_t)(n + 1));
    return put_be(e, (uint64_t)(int64_t)n, width);
}

/* The bytes of a bytes or records value the Python writer takes as they are: bytes, bytearray, or a
 * one-dimensional byte memoryview (whose len() is its size). 1: found, 0: not such a value. */
static int
byte_span(PyObject *v, const char **data, Py_ssize_t *len)
{
    if (PyBytes_CheckExact(v)) {
        *data = PyBytes_AS_STRING(v);
        *len = PyBytes_GET_SIZE(v);
        return 1;
    }
    if (PyByteArray_CheckExact(v)) {
        *data = PyByteArray_AS_STRING(v);
        *len = PyByteArray_GET_SIZE(v);
        return 1;
    }
    if (PyMemoryView_Check(v)) {
        Py_buffer view;
        if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) < 0) { /* released, or not contiguous */
            PyErr_Clear();
            return 0;
        }
        const Py_buffer *own = PyMemoryView_GET_BUFFER(v);
        int ok = own->ndim == 1 && own->itemsize == 1;
        *data = view.buf;
        *len = view.len;
        PyBuffer_Release(&view); /* the memoryview keeps its exporter alive */
        return ok;
    }
    return 0;
}

/* byte_span's length alone: a memoryview's without taking a buffer of it (1: found, 0: not such a value). */
static inline int
byte_length(PyObject *v, Py_ssize_t *len)
{
    if (PyBytes_CheckExact(v)) {
        *len = PyBytes_GET_SIZE(v);
        return 1;
    }
    if (PyByteArray_CheckExact(v)) {
        *len = PyByteArray_GET_SIZE(v);
        return 1;
    }
    if (PyMemoryView_Check(v)) {
        const Py_buffer *own = PyMemoryView_GET_BUFFER(v);
        *len = own->len;
        return own->ndim == 1 && own->itemsize == 1;
    }
    return 0;
}

static int encode_struct(Enc *e, const Program *p, PyObject *obj);
static int size_struct(Enc *e, const Program *p, PyObject *obj);
static int encode_tags(Enc *e, const Program *p, PyObject *obj);

static int
encode_fixed(Enc *e, int kind, PyObject *v)
{
    if (kind == K_BOOL) {
        if (v != Py_True && v != Py_False)
            return -1;
        unsigned char b = v == Py_True;
        return put(e, &b, 1);
    }
    if (kind == K_FLOAT64) {
        double d;
        if (PyFloat_CheckExact(v))
            d = PyFloat_AS_DOUBLE(v);
        else if (PyLong_CheckExact(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred())
                return -1;
        }
        else
            return -1;
        char b[8];
        if (PyFloat_Pack8(d, b, 0) < 0)
            return -1;
        return put(e, b, 8);
    }
    if (!PyLong_Check(v))
        return -1;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()))
        return -1;
    switch (kind) {
    case K_INT8:
        return x < -128 || x > 127 ? -1 : put_be(e, (uint64_t)x, 1);
    case K_INT16:
        return x < -32768 || x > 32767 ? -1 : put_be(e, (uint64_t)x, 2);
    case K_UINT16:
        return x < 0 || x > 0xFFFF ? -1 : put_be(e, (uint64_t)x, 2);
    case K_INT32:
        return x < INT32_MIN || x > INT32_MAX ? -1 : put_be(e, (uint64_t)x, 4);
    case K_UINT32:
        return x < 0 || x > 0xFFFFFFFFLL ? -1 : put_be(e, (uint64_t)x, 4);
    default: /* K_INT64 */
        return put_be(e, (uint64_t)x, 8);
    }
}

static int
encode_uuid(Enc *e, PyObject *v)
{
    unsigned char b[16] = {0};
    if (v != zero_uuid) {
        if (!Py_IS_TYPE(v, uuid_type))
            return -1;
        PyObject *value = SLOT(v, uuid_int_offset);
        if (value == NULL || !PyLong_CheckExact(value))
            return -1;
        if (e->out != NULL) {
#if PY_VERSION_HEX >= 0x030D0000
            Py_ssize_t n = PyLong_AsNativeBytes(value, b, 16, Py_ASNATIVEBYTES_BIG_ENDIAN
                                                | Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
            if (n < 0 || n > 16)
                return -1;
#else
            if (_PyLong_AsByteArray((PyLongObject *)value, b, 16, 0, 0) < 0)
                return -1;
#endif
        }
    }
    return put(e, b, 16);
}

static inline int
encode_fixed_or_uuid(Enc *e, int kind, PyObject *v)
{
    return kind == K_UUID ? encode_uuid(e, v) : encode_fixed(e, kind, v);
}

static int
encode_null(Enc *e, const Value *v)
{
    if (!(v->flags & F_NULLABLE))
        return -1;
    if (v->kind == K_STRUCT) {
        unsigned char b = (v->flags & F_TAG_NULL) ? 0x00 : 0xFF;
        return put(e, &b, 1);
    }
    return put_length(e, v->flags & F_COMPACT, v->kind == K_STRING ? 2 : 4, -1);
}

/* A records value kept as a piece of its own (see Enc). */
static int
encode_part(Enc *e, PyObject *value, Py_ssize_t len)
{
    if (e->out == NULL) {
        e->external += len;
        return 0;
    }
    PyObject *chunk = PyBytes_FromStringAndSize((const char *)e->out + e->chunk, e->pos - e->chunk);
    int failed = chunk == NULL || PyList_Append(e->parts, chunk) < 0 || PyList_Append(e->parts, value) < 0;
    Py_XDECREF(chunk);
    e->chunk = e->pos;
    return failed ? -1 : 0;
}

static int
encode_value(Enc *e, const Value *v, PyObject *value)
{
    switch (v->kind) {
    case K_UUID:
        return encode_uuid(e, value);
    case K_STRING: {
        if (value == Py_None)
            return encode_null(e, v);
        if (!PyUnicode_CheckExact(value))
            return -1;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(value, &n);
        if (s == NULL || n > 0x7FFF)
            return -1;
        if (put_length(e, v->flags & F_COMPACT, 2, n) < 0)
            return -1;
        return put(e, s, n);
    }
    case K_BYTES:
    case K_RECORDS: {
        if (value == Py_None)
            return encode_null(e, v);
        const char *data = NULL;
        Py_ssize_t n;
        int piece = e->split && v->kind == K_RECORDS;
        /* The size pass takes only lengths (a memoryview's without taking a buffer of it); the write
         * pass checks the value, and a length that differs from the size pass's makes it fall back. */
        int span = e->out == NULL || piece ? byte_length(value, &n) : byte_span(value, &data, &n);
        if (!span) {
            if (!piece || (n = PyObject_Length(value)) < 0)
                return -1;
        }
        if ((!(v->flags & F_COMPACT) && n > INT32_MAX) || put_length(e, v->flags & F_COMPACT, 4, n) < 0)
            return -1;
        if (n == 0 && span) /* empty bytes: nothing to write (an empty file slice stays a piece, for its owner) */
            return 0;
        if (piece)
            return encode_part(e, value, n);
        if (e->out == NULL) {
            e->pos += n;
            return 0;
        }
        return put(e, data, n);
    }
    case K_ARRAY: {
        if (value == Py_None)
            return encode_null(e, v);
        if (!PyList_CheckExact(value) && !PyTuple_CheckExact(value))
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
        if ((!(v->flags & F_COMPACT) && n > INT32_MAX) || put_length(e, v->flags & F_COMPACT, 4, n) < 0)
            return -1;
        int width = fixed_width(v->element->kind);
        if (e->out == NULL && width) { /* the write pass checks the elements */
            e->pos += n * width;
            return 0;
        }
        /* A list can change length while Python code runs (a comparison in a struct's checks). */
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(value); i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(value, i);
            Py_INCREF(item);
            int failed = encode_value(e, v->element, item);
            Py_DECREF(item);
            if (failed)
                return -1;
        }
        return PySequence_Fast_GET_SIZE(value) == n ? 0 : -1;
    }
    case K_STRUCT:
        if (value == Py_None)
            return encode_null(e, v);
        if (v->flags & F_NULLABLE) {
            unsigned char marker = 1;
            if (put(e, &marker, 1) < 0)
                return -1;
        }
        return encode_struct(e, v->program, value);
    default:
        return encode_fixed(e, v->kind, value);
    }
}

/* Whether a field holds other than its default, as the writers' ``differs``: 1, 0, or -1 (error). */
static int
differs(int how, PyObject *value, PyObject *constant)
{
    switch (how) {
    case H_NULL:
        return value != Py_None;
    case H_EMPTY: {
        if (value == Py_None)
            return 1;
        Py_ssize_t n = PyObject_Length(value);
        return n < 0 ? -1 : n != 0;
    }
    case H_STRUCT: {
        if (value == absent)
            return 0;
        if (value == Py_None)
            return 1;
        PyObject *result = PyObject_CallMethodNoArgs(value, str_is_default);
        if (result == NULL)
            return -1;
        int is_default = PyObject_IsTrue(result);
        Py_DECREF(result);
        return is_default < 0 ? -1 : !is_default;
    }
    default:
        if (value == constant) /* small ints and interned strings: most defaults */
            return 0;
        return PyObject_RichCompareBool(value, constant, Py_NE);
    }
}

/* differs for a tagged field; a struct defaulting to an empty one is checked here field by field
 * rather than by calling its _is_default. */
static int
tag_differs(const TagOp *t, PyObject *value)
{
    if (t->empty == NULL || value == absent || value == Py_None || !Py_IS_TYPE(value, t->value.program->cls))
        return differs(t->how, value, t->constant);
    for (Py_ssize_t i = 0; i < t->n_empty; i++) {
        PyObject *field = SLOT(value, t->empty[i].offset);
        if (field == NULL)
            return -1;
        Py_INCREF(field);
        int set = differs(t->empty[i].how, field, t->empty[i].constant);
        Py_DECREF(field);
        if (set != 0)
            return set;
    }
    PyObject *unknown = SLOT(value, t->value.program->unknown_tags_offset);
    if (unknown == NULL)
        return -1;
    if (unknown == Py_None)
        return 0;
    return PyDict_CheckExact(unknown) ? PyDict_GET_SIZE(unknown) != 0 : PyObject_IsTrue(unknown);
}

typedef struct { uint64_t tag; PyObject *value; const TagOp *known; } TagItem;

static int
compare_tags(const void *a, const void *b)
{
    const TagItem *x = a, *y = b;
    if (x->tag != y->tag)
        return (x->tag > y->tag) - (x->tag < y->tag);
    return (x->known == NULL) - (y->known == NULL); /* a known tag before an unknown one of its number */
}

/* One tagged value: its size, then its bytes, with records written inline. */
static int
encode_tagged(Enc *e, const TagItem *item)
{
    int split = e->split;
    Enc sizer = {NULL, 0, 0, NULL, 0, 0, 0};
    const char *data = NULL;
    Py_ssize_t n;
    int failed = 0;
    if (item->known == NULL) {
        if (!byte_span(item->value, &data, &n))
            return -1;
    }
    else {
        failed = encode_value(&sizer, &item->known->value, item->value);
        n = sizer.pos;
    }
    if (failed || put_uvarint(e, item->tag) < 0 || put_uvarint(e, (uint64_t)n) < 0)
        return -1;
    if (data != NULL || item->known == NULL)
        return put(e, data, n);
    Py_ssize_t start = e->pos;
    e->split = 0;
    failed = encode_value(e, &item->known->value, item->value);
    e->split = split;
    return failed || e->pos - start != n ? -1 : 0;
}

static int
encode_tags(Enc *e, const Program *p, PyObject *obj)
{
    PyObject *unknown = SLOT(obj, p->unknown_tags_offset);
    if (unknown == NULL || (unknown != Py_None && !PyDict_CheckExact(unknown)))
        return -1;
    Py_ssize_t n_unknown = unknown == Py_None ? 0 : PyDict_GET_SIZE(unknown);
    if (!p->flexible)
        return n_unknown ? -1 : 0;
    if (p->n_tags == 0 && n_unknown == 0)
        return put_uvarint(e, 0);
    TagItem stack[MAX_TAGS + 16];
    TagItem *items = stack;
    if (p->n_tags + n_unknown > (Py_ssize_t)(sizeof(stack) / sizeof(stack[0]))) {
        items = PyMem_Malloc(sizeof(TagItem) * (size_t)(p->n_tags + n_unknown));
        if (items == NULL)
            return -1;
    }
    Py_ssize_t count = 0;
    int failed = 0;
    for (Py_ssize_t i = 0; i < p->n_tags && !failed; i++) {
        const TagOp *t = &p->tags[i];
        PyObject *value = SLOT(obj, t->offset);
        int set = value == NULL ? -1 : tag_differs(t, value);
        failed = set < 0;
        if (set > 0)
            items[count++] = (TagItem){t->tag, value, t};
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (!failed && n_unknown && PyDict_Next(unknown, &pos, &key, &value)) {
        uint64_t tag = PyLong_CheckExact(key) ? PyLong_AsUnsignedLongLong(key) : (uint64_t)-1;
        if (tag == (uint64_t)-1 && PyErr_Occurred())
            PyErr_Clear();
        failed = tag > 0xFFFFFFFFull;
        items[count++] = (TagItem){tag, value, NULL};
    }
    /* The values stay referenced while Python code may run (a struct's checks in encode_value). */
    for (Py_ssize_t i = 0; i < count && !failed; i++)
        Py_INCREF(items[i].value);
    if (!failed) {
        Py_ssize_t taken = count;
        if (n_unknown)  /* the known ones are in tag order already */
            qsort(items, (size_t)count, sizeof(TagItem), compare_tags);
        failed = put_uvarint(e, (uint64_t)count) < 0;
        for (Py_ssize_t i = 0; i < count && !failed; i++)
            failed = encode_tagged(e, &items[i]) < 0;
        for (Py_ssize_t i = 0; i < taken; i++)
            Py_DECREF(items[i].value);
    }
    if (items != stack)
        PyMem_Free(items);
    return failed ? -1 : 0;
}

/* One field of obj, held while it is encoded (Python code may run and replace the slot's value). */
static int
encode_field(Enc *e, const FieldOp *f, PyObject *obj)
{
    PyObject *value = SLOT(obj, f->offset);
    if (value == NULL)
        return -1;
    if (value == absent && f->attr != NULL)  /* the property builds the default, as the writer's read does */
        value = PyObject_GetAttr(obj, f->attr);
    else
        Py_INCREF(value);
    if (value == NULL)
        return -1;
    int failed = encode_value(e, &f->value, value);
    Py_DECREF(value);
    return failed ? -1 : 0;
}

static int
encode_struct(Enc *e, const Program *p, PyObject *obj)
{
    if (!Py_IS_TYPE(obj, p->cls))
        return -1;
    if (e->out == NULL)
        return size_struct(e, p, obj);
    for (Py_ssize_t i = 0; i < p->n_fields; i++) {
        const FieldOp *f = &p->fields[i];
        if (fixed_width(f->value.kind)) { /* no Python code runs: the slot's reference is enough */
            PyObject *value = SLOT(obj, f->offset);
            if (value == NULL || encode_fixed_or_uuid(e, f->value.kind, value) < 0)
                return -1;
            continue;
        }
        if (encode_field(e, f, obj) < 0)
            return -1;
    }
    for (Py_ssize_t i = 0; i < p->n_checks; i++) {
        const CheckOp *c = &p->checks[i];
        PyObject *value = SLOT(obj, c->offset);
        if (value == NULL)
            return -1;
        Py_INCREF(value);
        int set = differs(c->how, value, c->constant);
        Py_DECREF(value);
        if (set != 0)  /* refused (or the check failed): the Python writer raises */
            return -1;
    }
    return encode_tags(e, p, obj);
}

/* The size pass of encode_struct: the fixed-width fields at once, the others walked; the refusals
 * are left to the write pass. */
static int
size_struct(Enc *e, const Program *p, PyObject *obj)
{
    e->pos += p->fixed_bytes;
    for (Py_ssize_t k = 0; k < p->n_sized; k++) {
        if (encode_field(e, &p->fields[p->sized[k]], obj) < 0)
            return -1;
    }
    return encode_tags(e, p, obj);
}

/* ---------------------------------------------------------------------------------- compiling */

static const char *HOW_NAMES[] = {"eq", "null", "struct", "empty"};

static void
free_program(Program *p)
{
    if (p == NULL)
        return;
    for (Py_ssize_t i = 0; p->fields && i < p->n_fields; i++) {
        free_value(&p->fields[i].value);
        Py_XDECREF(p->fields[i].attr);
    }
    for (Py_ssize_t i = 0; p->checks && i < p->n_checks; i++)
        Py_XDECREF(p->checks[i].constant);
    for (Py_ssize_t i = 0; p->tags && i < p->n_tags; i++) {
        free_value(&p->tags[i].value);
        Py_XDECREF(p->tags[i].constant);
        for (Py_ssize_t j = 0; p->tags[i].empty && j < p->tags[i].n_empty; j++)
            Py_XDECREF(p->tags[i].empty[j].constant);
        PyMem_Free(p->tags[i].empty);
    }
    PyMem_Free(p->fields);
    PyMem_Free(p->sized);
    PyMem_Free(p->checks);
    PyMem_Free(p->tags);
    Py_XDECREF(p->cls);
    PyMem_Free(p);
}

static Program *
new_program(void)
{
    return PyMem_Calloc(1, sizeof(Program));
}

static int
program_depth(const Program *p)
{
    return p->depth;
}

static int
parse_how(PyObject *name, int *how)
{
    for (int i = 0; i < (int)(sizeof(HOW_NAMES) / sizeof(HOW_NAMES[0])); i++) {
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, HOW_NAMES[i]) == 0) {
            *how = i;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown default check %R", name);
    return -1;
}

/* A tagged struct's empty-struct checks: (slot, how, default) of its class's fields. */
static int
parse_empty(TagOp *t, PyObject *checks)
{
    if (!PyTuple_Check(checks))
        return 0; /* no checks: _is_default is called */
    PyTypeObject *cls = t->value.program->cls;
    t->n_empty = PyTuple_GET_SIZE(checks);
    t->empty = PyMem_Calloc((size_t)t->n_empty + 1, sizeof(CheckOp));
    if (t->empty == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < t->n_empty; i++) {
        PyObject *op = PyTuple_GET_ITEM(checks, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 3) {
            PyErr_Format(PyExc_TypeError, "an empty-struct check is (slot, how, default), not %R", op);
            return -1;
        }
        if (slot_offset(cls, PyTuple_GET_ITEM(op, 0), 0, &t->empty[i].offset) < 0
                || parse_how(PyTuple_GET_ITEM(op, 1), &t->empty[i].how) < 0)
            return -1;
        t->empty[i].constant = Py_NewRef(PyTuple_GET_ITEM(op, 2));
    }
    return 0;
}

static int
build_program(PyObject *t, Program *p)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5 || !PyType_Check(PyTuple_GET_ITEM(t, 0))
            || !PyTuple_Check(PyTuple_GET_ITEM(t, 2)) || !PyTuple_Check(PyTuple_GET_ITEM(t, 3))
            || !PyTuple_Check(PyTuple_GET_ITEM(t, 4))) {
        PyErr_SetString(PyExc_TypeError, "an encode program is (class, flexible, fields, checks, tagged)");
        return -1;
    }
    p->cls = (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(t, 0));
    if ((p->flexible = PyObject_IsTrue(PyTuple_GET_ITEM(t, 1))) < 0)
        return -1;
    PyObject *fields = PyTuple_GET_ITEM(t, 2), *checks = PyTuple_GET_ITEM(t, 3), *tagged = PyTuple_GET_ITEM(t, 4);
    p->n_fields = PyTuple_GET_SIZE(fields);
    p->n_checks = PyTuple_GET_SIZE(checks);
    p->n_tags = PyTuple_GET_SIZE(tagged);
    if ((!p->flexible && p->n_tags) || p->n_tags > MAX_TAGS) {
        PyErr_SetString(PyExc_ValueError, "tagged fields in a program that is not flexible, or too many");
        return -1;
    }
    p->fields = PyMem_Calloc((size_t)p->n_fields + 1, sizeof(FieldOp));
    p->checks = PyMem_Calloc((size_t)p->n_checks + 1, sizeof(CheckOp));
    p->tags = PyMem_Calloc((size_t)p->n_tags + 1, sizeof(TagOp));
    p->sized = PyMem_Calloc((size_t)p->n_fields + 1, sizeof(Py_ssize_t));
    if (!p->fields || !p->checks || !p->tags || !p->sized) {
        PyErr_NoMemory();
        return -1;
    }
    p->depth = 1;
    for (Py_ssize_t i = 0; i < p->n_fields; i++) {
        PyObject *op = PyTuple_GET_ITEM(fields, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) < 2 || PyTuple_GET_SIZE(op) > 3) {
            PyErr_Format(PyExc_TypeError, "a field op is (slot, value[, attribute]), not %R", op);
            return -1;
        }
        if (slot_offset(p->cls, PyTuple_GET_ITEM(op, 0), 0, &p->fields[i].offset) < 0
                || parse_value(PyTuple_GET_ITEM(op, 1), &p->fields[i].value, 0) < 0)
            return -1;
        if (PyTuple_GET_SIZE(op) == 3)
            p->fields[i].attr = Py_NewRef(PyTuple_GET_ITEM(op, 2));
        p->depth = Py_MAX(p->depth, 1 + p->fields[i].value.depth);
        int width = fixed_width(p->fields[i].value.kind);
        p->fixed_bytes += width;
        if (!width)
            p->sized[p->n_sized++] = i;
    }
    for (Py_ssize_t i = 0; i < p->n_checks; i++) {
        PyObject *op = PyTuple_GET_ITEM(checks, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 3) {
            PyErr_Format(PyExc_TypeError, "a check is (slot, how, default), not %R", op);
            return -1;
        }
        if (slot_offset(p->cls, PyTuple_GET_ITEM(op, 0), 0, &p->checks[i].offset) < 0
                || parse_how(PyTuple_GET_ITEM(op, 1), &p->checks[i].how) < 0)
            return -1;
        p->checks[i].constant = Py_NewRef(PyTuple_GET_ITEM(op, 2));
    }
    for (Py_ssize_t i = 0; i < p->n_tags; i++) {
        PyObject *op = PyTuple_GET_ITEM(tagged, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 5) {
            PyErr_Format(PyExc_TypeError, "a tagged op is (tag, slot, value, how, default), not %R", op);
            return -1;
        }
        unsigned long long tag = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(op, 0));
        if (PyErr_Occurred())
            return -1;
        if (tag > 0xFFFFFFFFull || (i > 0 && tag <= p->tags[i - 1].tag)) {
            PyErr_Format(PyExc_ValueError, "tag %llu out of range or out of order", tag);
            return -1;
        }
        p->tags[i].tag = (uint32_t)tag;
        if (slot_offset(p->cls, PyTuple_GET_ITEM(op, 1), 0, &p->tags[i].offset) < 0
                || parse_value(PyTuple_GET_ITEM(op, 2), &p->tags[i].value, 0) < 0
                || parse_how(PyTuple_GET_ITEM(op, 3), &p->tags[i].how) < 0)
            return -1;
        p->tags[i].constant = Py_NewRef(PyTuple_GET_ITEM(op, 4));
        if (p->tags[i].how == H_STRUCT && p->tags[i].value.kind == K_STRUCT
                && parse_empty(&p->tags[i], p->tags[i].constant) < 0)
            return -1;
        p->depth = Py_MAX(p->depth, 1 + p->tags[i].value.depth);
    }
    PyObject *unknown = PyUnicode_FromString("unknown_tags");
    if (unknown == NULL)
        return -1;
    int failed = slot_offset(p->cls, unknown, 0, &p->unknown_tags_offset);
    Py_DECREF(unknown);
    if (failed)
        return -1;
    if (p->depth > MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "the program of %s nests deeper than %d", p->cls->tp_name, MAX_DEPTH);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ Encoder */

typedef struct {
    PyObject_HEAD
    PyObject *program; /* the program tuple */
    PyObject *error;   /* why the program did not compile, or NULL */
    Program *compiled;
} Encoder;

static PyTypeObject EncoderType;

static const Program *
encoder_program(PyObject *self)
{
    if (!Py_IS_TYPE(self, &EncoderType))
        return NULL;
    Encoder *enc = (Encoder *)self;
    if (enc->compiled == NULL && enc->error == NULL) {
        enc->compiled = compile_program(enc->program);
        if (enc->compiled == NULL) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            enc->error = value ? PyObject_Str(value) : NULL;
            if (enc->error == NULL) {
                PyErr_Clear();
                enc->error = Py_NewRef(Py_None);
            }
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
    }
    return enc->compiled;
}

/* The messages of a frame: ``count`` (encoder, message) pairs, written one after the other. */
typedef struct { const Program *programs[2]; PyObject *messages[2]; Py_ssize_t count; } Batch;

static int
walk(Enc *e, const Batch *b, int prefix, Py_ssize_t frame_size)
{
    if (prefix && put_be(e, (uint64_t)frame_size, 4) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        if (encode_struct(e, b->programs[i], b->messages[i]) < 0)
            return -1;
    }
    return 0;
}

/* The size pass: the bytes of the batch (prefix included) in *main, those of separate pieces in
 * *external. -1 when the Python writer must take over. */
static int
measure(const Batch *b, int prefix, int split, Py_ssize_t *main, Py_ssize_t *external)
{
    Enc sizer = {NULL, 0, 0, NULL, 0, 0, split};
    if (walk(&sizer, b, prefix, 0) < 0)
        return -1;
    *main = sizer.pos;
    *external = sizer.external;
    if (prefix && sizer.pos + sizer.external - 4 > INT32_MAX)
        return -1;
    return 0;
}

/* Fallback: clear what the walk left and return None, for the caller to run the Python writer. */
static PyObject *
fall_back(void)
{
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception))
        return NULL; /* KeyboardInterrupt and the like: not ours to swallow */
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *
encode_bytes(const Batch *b, int prefix)
{
    Py_ssize_t main, external;
    if (measure(b, prefix, 0, &main, &external) < 0)
        return fall_back();
    PyObject *out = PyBytes_FromStringAndSize(NULL, main);
    if (out == NULL)
        return NULL;
    Enc e = {(unsigned char *)PyBytes_AS_STRING(out), 0, main, NULL, 0, 0, 0};
    if (walk(&e, b, prefix, main - 4) < 0 || e.pos != main) {
        Py_DECREF(out);
        return fall_back();
    }
    return out;
}

static PyObject *
encode_list(const Batch *b, int prefix)
{
    Py_ssize_t main, external;
    if (measure(b, prefix, 1, &main, &external) < 0)
        return fall_back();
    unsigned char *buffer = PyMem_Malloc((size_t)main + 1);
    PyObject *parts = PyList_New(0);
    if (buffer == NULL || parts == NULL) {
        PyMem_Free(buffer);
        Py_XDECREF(parts);
        return PyErr_NoMemory();
    }
    Enc e = {buffer, 0, main, parts, 0, 0, 1};
    int failed = walk(&e, b, prefix, main + external - 4) < 0 || e.pos != main;
    PyObject *tail = failed ? NULL : PyBytes_FromStringAndSize((const char *)buffer + e.chunk, e.pos - e.chunk);
    failed = failed || tail == NULL || PyList_Append(parts, tail) < 0;
    Py_XDECREF(tail);
    PyMem_Free(buffer);
    if (failed) {
        Py_DECREF(parts);
        return fall_back();
    }
    return parts;
}

static int
one(PyObject *self, PyObject *message, Batch *b)
{
    b->programs[0] = encoder_program(self);
    b->messages[0] = message;
    b->count = 1;
    return b->programs[0] == NULL ? -1 : 0;
}

static PyObject *
encoder_encode(PyObject *self, PyObject *message)
{
    Batch b;
    return one(self, message, &b) < 0 ? fall_back() : encode_bytes(&b, 0);
}

static PyObject *
encoder_encode_parts(PyObject *self, PyObject *message)
{
    Batch b;
    return one(self, message, &b) < 0 ? fall_back() : encode_list(&b, 0);
}

/* encode_into(message, buffer, offset): the end offset, or None when the Python writer must take over
 * or the body does not fit (the caller raises). */
static PyObject *
encoder_encode_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Batch b;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_into(message, buffer, offset)");
        return NULL;
    }
    Py_ssize_t offset = PyLong_AsSsize_t(args[2]);
    Py_ssize_t main, external;
    if ((offset == -1 && PyErr_Occurred()) || one(self, args[0], &b) < 0
            || measure(&b, 0, 0, &main, &external) < 0)
        return fall_back();
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return fall_back();
    PyObject *result;
    if (view.itemsize != 1 || offset < 0 || offset > view.len || main > view.len - offset)
        result = fall_back();
    else {
        Enc e = {(unsigned char *)view.buf + offset, 0, main, NULL, 0, 0, 0};
        result = walk(&e, &b, 0, 0) < 0 || e.pos != main ? fall_back() : PyLong_FromSsize_t(offset + main);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
encoder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *program;
    if (!PyArg_ParseTuple(args, "O!:Encoder", &PyTuple_Type, &program))
        return NULL;
    Encoder *enc = (Encoder *)type->tp_alloc(type, 0);
    if (enc != NULL)
        enc->program = Py_NewRef(program);
    return (PyObject *)enc;
}

static int
encoder_traverse(Encoder *enc, visitproc visit, void *arg)
{
    Py_VISIT(enc->program);
    return 0;
}

static int
encoder_clear(Encoder *enc)
{
    Py_CLEAR(enc->program);
    return 0;
}

static void
encoder_dealloc(Encoder *enc)
{
    PyObject_GC_UnTrack(enc);
    encoder_clear(enc);
    Py_CLEAR(enc->error);
    Py_TYPE(enc)->tp_free((PyObject *)enc);
}

static PyObject *
encoder_compile(PyObject *self, PyObject *unused)
{
    if (encoder_program(self) != NULL)
        Py_RETURN_NONE;
    Encoder *enc = (Encoder *)self;
    PyErr_SetObject(PyExc_ValueError, enc->error);
    return NULL;
}

static PyMethodDef encoder_methods[] = {
    {"encode", encoder_encode, METH_O, "encode(message): the body as bytes, or None (use the Python writer)."},
    {"encode_parts", encoder_encode_parts, METH_O,
     "encode_parts(message): the body as bytes pieces and records values, or None."},
    {"encode_into", (PyCFunction)(void (*)(void))encoder_encode_into, METH_FASTCALL,
     "encode_into(message, buffer, offset): the end offset, or None."},
    {"compile", encoder_compile, METH_NOARGS, "Compile the program now; ValueError if it does not compile."},
    {NULL},
};

static PyMemberDef encoder_members[] = {
    {"program", T_OBJECT, offsetof(Encoder, program), READONLY, "the encode program"},
    {NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkawire.codec._encoder.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = encoder_new,
    .tp_dealloc = (destructor)encoder_dealloc,
    .tp_traverse = (traverseproc)encoder_traverse,
    .tp_clear = (inquiry)encoder_clear,
    .tp_methods = encoder_methods,
    .tp_members = encoder_members,
};

/* ------------------------------------------------------------------------------ Message.encode */

/* Message.encode as a method descriptor: the class's native encoder of the version (from _ENCODERS)
 * without a Python frame, and the Python method (encode_fallback) for everything else. Small
 * messages spend as long in a Python frame as in encoding. */
static PyObject *encode_fallback;
static PyObject *str_encoders;

static PyObject *
message_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs == 1 && kwnames == NULL) {
        PyObject *encoders = _PyType_Lookup(Py_TYPE(self), str_encoders);
        PyObject *encoder = encoders != NULL && PyDict_CheckExact(encoders)
            ? PyDict_GetItemWithError(encoders, args[0]) : NULL;
        Batch b;
        if (encoder != NULL && one(encoder, self, &b) == 0) {
            PyObject *data = encode_bytes(&b, 0);
            if (data != Py_None)
                return data; /* the bytes, or NULL for an error that is not ours to swallow */
            Py_DECREF(data);
        }
        PyErr_Clear();
    }
    if (encode_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure_encode() was not called");
        return NULL;
    }
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **all = total < 8 ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)(total + 1));
    if (all == NULL)
        return PyErr_NoMemory();
    all[0] = self;
    memcpy(all + 1, args, sizeof(PyObject *) * (size_t)total);
    PyObject *result = PyObject_Vectorcall(encode_fallback, all, (size_t)nargs + 1, kwnames);
    if (all != small)
        PyMem_Free(all);
    return result;
}

static PyMethodDef message_encode_def = {
    "encode", (PyCFunction)(void (*)(void))message_encode, METH_FASTCALL | METH_KEYWORDS,
    "encode(version): the body of this message written at version.",
};

/* encode_method(Message, python_encode): the method descriptor to set as Message.encode. */
static PyObject *
encode_method(PyObject *module, PyObject *args)
{
    PyObject *type, *fallback;
    if (!PyArg_ParseTuple(args, "O!O:encode_method", &PyType_Type, &type, &fallback))
        return NULL;
    Py_XSETREF(encode_fallback, Py_NewRef(fallback));
    return PyDescr_NewMethod((PyTypeObject *)type, &message_encode_def);
}

/* ------------------------------------------------------------------------------------- module */

/* frame(header_encoder, header, body_encoder, body, parts): the int32 size prefix, the header and the
 * body in one allocation (bytes), or with parts true as encode_parts' pieces; None to fall back. */
static PyObject *
frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "frame(header_encoder, header, body_encoder, body, parts)");
        return NULL;
    }
    int parts = PyObject_IsTrue(args[4]);
    if (parts < 0)
        return NULL;
    Batch b = {{encoder_program(args[0]), NULL}, {args[1], args[3]}, 2};
    b.programs[1] = b.programs[0] == NULL ? NULL : encoder_program(args[2]);
    if (b.programs[1] == NULL)
        return fall_back();
    return parts ? encode_list(&b, 1) : encode_bytes(&b, 1);
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *type, *zero, *sentinel;
    if (!PyArg_ParseTuple(args, "O!OO:configure", &PyType_Type, &type, &zero, &sentinel))
        return NULL;
    PyObject *int_name = PyUnicode_FromString("int");
    Py_ssize_t offset;
    int failed = int_name == NULL || slot_offset((PyTypeObject *)type, int_name, 0, &offset) < 0;
    Py_XDECREF(int_name);
    if (failed)
        return NULL;
    Py_XSETREF(uuid_type, (PyTypeObject *)Py_NewRef(type));
    Py_XSETREF(zero_uuid, Py_NewRef(zero));
    Py_XSETREF(absent, Py_NewRef(sentinel));
    uuid_int_offset = offset;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(uuid_class, zero_uuid, absent): uuid values and the lazy struct sentinel."},
    {"encode_method", encode_method, METH_VARARGS,
     "encode_method(Message, python_encode): Message.encode with the native encoders first."},
    {"frame", (PyCFunction)(void (*)(void))frame, METH_FASTCALL,
     "frame(header_encoder, header, body_encoder, body, parts): a size-prefixed frame, or None."},
    {NULL},
};

static struct PyModuleDef encoder_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkawire.codec._encoder",
    .m_doc = "The native encoder of kafkawire's generated codecs (see kafkawire.codec.native).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__encoder(void)
{
    if (PyType_Ready(&EncoderType) < 0)
        return NULL;
    str_is_default = PyUnicode_InternFromString("_is_default");
    str_encoders = PyUnicode_InternFromString("_ENCODERS");
    if (str_is_default == NULL || str_encoders == NULL || init_programs() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&encoder_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
