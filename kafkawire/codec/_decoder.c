/* The native decoder: one interpreter for the decode programs that codegen/programs.py writes into
 * each generated module (see kafkawire/codec/native.py).
 *
 * A program is compiled on its reader's first call into C arrays: slot offsets read from the generated
 * class's member descriptors, kinds as enums, constants as owned references. The interpreter then
 * builds the generated slotted objects directly (tp_alloc, then stores at the slot offsets) and
 * arrays as tuples of their exact size, as the Python readers do.
 *
 * Malformed input never becomes an error here: every read is checked against the bytes left (counts
 * before anything is allocated), and on any failure the reader calls the generated Python reader on
 * the same input, which raises the DecodeError with its field path and offset. The two paths accept
 * exactly the same inputs; tests/test_native_decoder.py checks both directions.
 */
#include "_programs.h"

typedef struct { Py_ssize_t offset; Value value; } FieldOp;
typedef struct { Py_ssize_t offset; PyObject *constant; } DefaultOp;
typedef struct { uint32_t tag; Py_ssize_t offset; Value value; } TagOp;

struct Program {
    PyTypeObject *cls;
    int flexible;
    int depth; /* structs nested below this one, itself included */
    Py_ssize_t n_fields, n_defaults, n_tags;
    FieldOp *fields;
    DefaultOp *defaults;
    TagOp *tags;
    Py_ssize_t unknown_tags_offset;
};

/* Set by configure() beside the uuid globals of _programs.h: SafeUUID.unknown and UUID's is_safe slot. */
static PyObject *uuid_unknown_safety;
static Py_ssize_t uuid_safe_offset;

/* ------------------------------------------------------------------------------------ reading */

typedef struct {
    const unsigned char *data;
    Py_ssize_t len;
    PyObject *buf;
    PyObject *view; /* the caller's memoryview, or NULL: slices are views of buf */
} Ctx;

static inline int
read_uvarint(const Ctx *c, Py_ssize_t *pos, uint64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t value = 0;
    int shift = 0;
    for (;;) {
        if (p >= c->len)
            return -1;
        unsigned int byte = c->data[p++];
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
        shift += 7;
        if (shift > 28)
            return -1;
    }
    if (value > 0xFFFFFFFFu)
        return -1;
    *pos = p;
    *out = value;
    return 0;
}

static inline uint16_t load16(const unsigned char *d) { return (uint16_t)((d[0] << 8) | d[1]); }

static inline uint32_t
load32(const unsigned char *d)
{
    return ((uint32_t)d[0] << 24) | ((uint32_t)d[1] << 16) | ((uint32_t)d[2] << 8) | d[3];
}

static inline uint64_t load64(const unsigned char *d) { return ((uint64_t)load32(d) << 32) | load32(d + 4); }

/* A length or count: compact (unsigned varint minus one) or classic (int16 for strings, else int32). */
static inline int
read_length(const Ctx *c, int compact, int width, Py_ssize_t *pos, int64_t *n)
{
    if (compact) {
        uint64_t value;
        if (read_uvarint(c, pos, &value) < 0)
            return -1;
        *n = (int64_t)value - 1;
        return 0;
    }
    Py_ssize_t p = *pos;
    if (c->len - p < width)
        return -1;
    *n = width == 2 ? (int64_t)(int16_t)load16(c->data + p) : (int64_t)(int32_t)load32(c->data + p);
    *pos = p + width;
    return 0;
}

static int
fixed_size(int kind)
{
    switch (kind) {
    case K_BOOL: case K_INT8: return 1;
    case K_INT16: case K_UINT16: return 2;
    case K_INT32: case K_UINT32: return 4;
    case K_INT64: case K_FLOAT64: return 8;
    default: return 0;
    }
}

/* A fixed-width value at d (the caller checked the bytes are there). */
static inline PyObject *
read_fixed(int kind, const unsigned char *d)
{
    switch (kind) {
    case K_BOOL: return PyBool_FromLong(d[0] != 0);
    case K_INT8: return PyLong_FromLong((int8_t)d[0]);
    case K_INT16: return PyLong_FromLong((int16_t)load16(d));
    case K_UINT16: return PyLong_FromLong(load16(d));
    case K_INT32: return PyLong_FromLong((int32_t)load32(d));
    case K_UINT32: return PyLong_FromUnsignedLong(load32(d));
    case K_INT64: return PyLong_FromLongLong((int64_t)load64(d));
    case K_FLOAT64: return PyFloat_FromDouble(PyFloat_Unpack8((const char *)d, 0));
    default: return NULL;
    }
}

/* As primitives.uuid_from_bytes: the shared zero UUID, or a UUID built without __init__. */
static PyObject *
make_uuid(const unsigned char *d)
{
    static const unsigned char zero[16];
    if (memcmp(d, zero, 16) == 0)
        return Py_NewRef(zero_uuid);
    PyObject *value = _PyLong_FromByteArray(d, 16, 0, 0);
    if (value == NULL)
        return NULL;
    PyObject *result = uuid_type->tp_alloc(uuid_type, 0);
    if (result == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    SLOT(result, uuid_int_offset) = value;
    SLOT(result, uuid_safe_offset) = Py_NewRef(uuid_unknown_safety);
    return result;
}

/* view[start:end], as the Python readers slice bytes and records fields. A one-dimensional byte view
 * is sliced by making a view of the same buffer and narrowing it before anyone sees it (what
 * slicing does, without the intermediate view of the whole input and the slice object). */
static PyObject *
slice_view(Ctx *c, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *base = c->view != NULL ? c->view : c->buf;
    if (c->view != NULL) {
        const Py_buffer *b = PyMemoryView_GET_BUFFER(c->view);
        if (b->ndim != 1 || b->itemsize != 1 || b->strides == NULL || b->strides[0] != 1
                || b->suboffsets != NULL || (b->format != NULL && strcmp(b->format, "B") != 0))
            return PySequence_GetSlice(c->view, start, end);
    }
    PyObject *view = PyMemoryView_FromObject(base);
    if (view == NULL)
        return NULL;
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    if (b->ndim != 1 || b->shape == NULL || b->len != c->len) {  /* not the buffer that was read */
        Py_DECREF(view);
        return NULL;
    }
    b->buf = (char *)b->buf + start;
    b->len = end - start;
    b->shape[0] = end - start;
    return view;
}

static PyObject *read_struct(Ctx *c, const Program *p, Py_ssize_t *pos);
static PyObject *read_value(Ctx *c, const Value *v, Py_ssize_t *pos);

static PyObject *
read_string(Ctx *c, const Value *v, Py_ssize_t *pos)
{
    int64_t n;
    Py_ssize_t p = *pos;
    if (read_length(c, v->flags & F_COMPACT, 2, &p, &n) < 0)
        return NULL;
    if (n == -1 && (v->flags & F_NULLABLE)) {
        *pos = p;
        Py_RETURN_NONE;
    }
    if (n < 0 || n > 0x7FFF || n > c->len - p)
        return NULL;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)c->data + p, (Py_ssize_t)n, NULL);
    if (text != NULL)
        *pos = p + (Py_ssize_t)n;
    return text;
}

static PyObject *
read_bytes(Ctx *c, const Value *v, Py_ssize_t *pos)
{
    int64_t n;
    Py_ssize_t p = *pos;
    if (read_length(c, v->flags & F_COMPACT, 4, &p, &n) < 0)
        return NULL;
    if (n == -1 && (v->flags & F_NULLABLE)) {
        *pos = p;
        Py_RETURN_NONE;
    }
    if (n < 0 || n > c->len - p)
        return NULL;
    PyObject *slice = slice_view(c, p, p + (Py_ssize_t)n);
    if (slice != NULL)
        *pos = p + (Py_ssize_t)n;
    return slice;
}

static PyObject *
read_array(Ctx *c, const Value *v, Py_ssize_t *pos)
{
    int64_t n;
    Py_ssize_t p = *pos;
    if (read_length(c, v->flags & F_COMPACT, 4, &p, &n) < 0)
        return NULL;
    if (n == -1 && (v->flags & F_NULLABLE)) {
        *pos = p;
        Py_RETURN_NONE;
    }
    const Value *e = v->element;
    int size = fixed_size(e->kind);
    Py_ssize_t left = c->len - p;
    /* The count is checked against the bytes left before the tuple is allocated. */
    if (n < 0 || n > left / (size ? size : v->min_size))
        return NULL;
    PyObject *items = PyTuple_New((Py_ssize_t)n);
    if (items == NULL)
        return NULL;
    if (size) {
        const unsigned char *d = c->data + p;
        for (Py_ssize_t i = 0; i < n; i++, d += size) {
            PyObject *item = read_fixed(e->kind, d);
            if (item == NULL)
                goto error;
            PyTuple_SET_ITEM(items, i, item);
        }
        p += (Py_ssize_t)n * size;
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = e->kind == K_STRUCT && !(e->flags & F_NULLABLE)
                ? read_struct(c, e->program, &p) : read_value(c, e, &p);
            if (item == NULL)
                goto error;
            PyTuple_SET_ITEM(items, i, item);
        }
    }
    *pos = p;
    return items;
error:
    Py_DECREF(items);
    return NULL;
}

static PyObject *
read_value(Ctx *c, const Value *v, Py_ssize_t *pos)
{
    Py_ssize_t p = *pos;
    int size = fixed_size(v->kind);
    if (size) {
        if (c->len - p < size)
            return NULL;
        PyObject *value = read_fixed(v->kind, c->data + p);
        if (value != NULL)
            *pos = p + size;
        return value;
    }
    switch (v->kind) {
    case K_UUID: {
        if (c->len - p < 16)
            return NULL;
        PyObject *value = make_uuid(c->data + p);
        if (value != NULL)
            *pos = p + 16;
        return value;
    }
    case K_STRING: return read_string(c, v, pos);
    case K_BYTES:
    case K_RECORDS: return read_bytes(c, v, pos);
    case K_ARRAY: return read_array(c, v, pos);
    case K_STRUCT:
        if (v->flags & F_NULLABLE) {
            if (p >= c->len)
                return NULL;
            unsigned int marker = c->data[p];
            if (marker >= 0x80 || (marker == 0 && (v->flags & F_TAG_NULL))) {
                *pos = p + 1;
                Py_RETURN_NONE;
            }
            p += 1;
            PyObject *value = read_struct(c, v->program, &p);
            if (value != NULL)
                *pos = p;
            return value;
        }
        return read_struct(c, v->program, pos);
    default:
        return NULL;
    }
}

/* The tag section: known tags into their slots, the others kept raw in unknown_tags. */
static int
read_tags(Ctx *c, const Program *prog, PyObject *obj, Py_ssize_t *pos)
{
    Py_ssize_t p = *pos;
    if (p >= c->len)
        return -1;
    if (c->data[p] == 0) {
        *pos = p + 1;
        SLOT(obj, prog->unknown_tags_offset) = Py_NewRef(Py_None);
        return 0;
    }
    uint64_t count;
    if (read_uvarint(c, &p, &count) < 0 || (int64_t)count * 2 > c->len - p)
        return -1;
    PyObject *unknown = NULL;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t tag, size;
        if (read_uvarint(c, &p, &tag) < 0 || read_uvarint(c, &p, &size) < 0 || (int64_t)size > c->len - p)
            goto error;
        Py_ssize_t end = p + (Py_ssize_t)size;
        const TagOp *known = NULL;
        for (Py_ssize_t k = 0; k < prog->n_tags; k++) {
            if (prog->tags[k].tag == tag) {
                known = &prog->tags[k];
                break;
            }
        }
        if (known != NULL) {
            PyObject *value = read_value(c, &known->value, &p);
            if (value == NULL)
                goto error;
            if (p != end) {
                Py_DECREF(value);
                goto error;
            }
            Py_XSETREF(SLOT(obj, known->offset), value);
            continue;
        }
        if (unknown == NULL && (unknown = PyDict_New()) == NULL)
            goto error;
        PyObject *key = PyLong_FromUnsignedLongLong(tag);
        PyObject *raw = key ? PyBytes_FromStringAndSize((const char *)c->data + p, (Py_ssize_t)size) : NULL;
        int failed = raw == NULL || PyDict_SetItem(unknown, key, raw) < 0;
        Py_XDECREF(key);
        Py_XDECREF(raw);
        if (failed)
            goto error;
        p = end;
    }
    SLOT(obj, prog->unknown_tags_offset) = unknown ? unknown : Py_NewRef(Py_None);
    *pos = p;
    return 0;
error:
    Py_XDECREF(unknown);
    return -1;
}

static PyObject *
read_struct(Ctx *c, const Program *prog, Py_ssize_t *pos)
{
    PyObject *obj = prog->cls->tp_alloc(prog->cls, 0);
    if (obj == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < prog->n_fields; i++) {
        const FieldOp *f = &prog->fields[i];
        PyObject *value = f->value.kind == K_STRUCT && !(f->value.flags & F_NULLABLE)
            ? read_struct(c, f->value.program, pos) : read_value(c, &f->value, pos);
        if (value == NULL)
            goto error;
        SLOT(obj, f->offset) = value; /* compile() checked every slot is set once */
    }
    for (Py_ssize_t i = 0; i < prog->n_defaults; i++)
        SLOT(obj, prog->defaults[i].offset) = Py_NewRef(prog->defaults[i].constant);
    if (prog->flexible) {
        if (read_tags(c, prog, obj, pos) < 0)
            goto error;
    }
    else {
        SLOT(obj, prog->unknown_tags_offset) = Py_NewRef(Py_None);
    }
    return obj;
error:
    Py_DECREF(obj);
    return NULL;
}

/* ---------------------------------------------------------------------------------- compiling */

static void
free_program(Program *p)
{
    if (p == NULL)
        return;
    for (Py_ssize_t i = 0; p->fields && i < p->n_fields; i++)
        free_value(&p->fields[i].value);
    for (Py_ssize_t i = 0; p->defaults && i < p->n_defaults; i++)
        Py_XDECREF(p->defaults[i].constant);
    for (Py_ssize_t i = 0; p->tags && i < p->n_tags; i++)
        free_value(&p->tags[i].value);
    PyMem_Free(p->fields);
    PyMem_Free(p->defaults);
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
compare_offsets(const void *a, const void *b)
{
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

/* Every object slot of the class is stored exactly once by the program (fields, defaults and
 * unknown_tags; tagged fields overwrite their default), so no slot is left empty. */
static int
check_slots(const Program *p)
{
    Py_ssize_t count = p->n_fields + p->n_defaults + 1;
    Py_ssize_t *offsets = PyMem_Calloc((size_t)count, sizeof(Py_ssize_t));
    if (offsets == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < p->n_fields; i++)
        offsets[k++] = p->fields[i].offset;
    for (Py_ssize_t i = 0; i < p->n_defaults; i++)
        offsets[k++] = p->defaults[i].offset;
    offsets[k++] = p->unknown_tags_offset;
    qsort(offsets, (size_t)count, sizeof(Py_ssize_t), compare_offsets);
    int ok = 1;
    for (Py_ssize_t i = 1; i < count; i++)
        ok &= offsets[i] != offsets[i - 1];
    for (Py_ssize_t i = 0; i < p->n_tags; i++) {
        int found = 0;
        for (Py_ssize_t j = 0; j < p->n_defaults; j++)
            found |= p->tags[i].offset == p->defaults[j].offset;
        ok &= found;
    }
    PyMem_Free(offsets);
    Py_ssize_t members = 0, pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(p->cls->tp_dict, &pos, &key, &value)) {
        if (Py_IS_TYPE(value, &PyMemberDescr_Type)
                && ((PyMemberDescrObject *)value)->d_member->type == T_OBJECT_EX)
            members++;
    }
    if (!ok || members != count) {
        PyErr_Format(PyExc_ValueError, "the program of %s does not store each of its %zd slots once",
                     p->cls->tp_name, members);
        return -1;
    }
    return 0;
}

static int
build_program(PyObject *t, Program *p)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5 || !PyType_Check(PyTuple_GET_ITEM(t, 0))
            || !PyTuple_Check(PyTuple_GET_ITEM(t, 2)) || !PyTuple_Check(PyTuple_GET_ITEM(t, 3))
            || !PyTuple_Check(PyTuple_GET_ITEM(t, 4))) {
        PyErr_SetString(PyExc_TypeError, "a program is (class, flexible, fields, defaults, tagged)");
        return -1;
    }
    p->cls = (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(t, 0));
    if ((p->flexible = PyObject_IsTrue(PyTuple_GET_ITEM(t, 1))) < 0)
        return -1;
    PyObject *fields = PyTuple_GET_ITEM(t, 2), *defaults = PyTuple_GET_ITEM(t, 3);
    PyObject *tagged = PyTuple_GET_ITEM(t, 4);
    if (!p->flexible && PyTuple_GET_SIZE(tagged)) {
        PyErr_SetString(PyExc_ValueError, "tagged fields in a program that is not flexible");
        return -1;
    }
    p->n_fields = PyTuple_GET_SIZE(fields);
    p->n_defaults = PyTuple_GET_SIZE(defaults);
    p->n_tags = PyTuple_GET_SIZE(tagged);
    p->fields = PyMem_Calloc((size_t)p->n_fields + 1, sizeof(FieldOp));
    p->defaults = PyMem_Calloc((size_t)p->n_defaults + 1, sizeof(DefaultOp));
    p->tags = PyMem_Calloc((size_t)p->n_tags + 1, sizeof(TagOp));
    if (!p->fields || !p->defaults || !p->tags) {
        PyErr_NoMemory();
        return -1;
    }
    p->depth = 1;
    for (Py_ssize_t i = 0; i < p->n_fields; i++) {
        PyObject *op = PyTuple_GET_ITEM(fields, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 2) {
            PyErr_Format(PyExc_TypeError, "a field op is (slot, value), not %R", op);
            return -1;
        }
        if (slot_offset(p->cls, PyTuple_GET_ITEM(op, 0), 1, &p->fields[i].offset) < 0
                || parse_value(PyTuple_GET_ITEM(op, 1), &p->fields[i].value, 0) < 0)
            return -1;
        p->depth = Py_MAX(p->depth, 1 + p->fields[i].value.depth);
    }
    for (Py_ssize_t i = 0; i < p->n_defaults; i++) {
        PyObject *op = PyTuple_GET_ITEM(defaults, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 2) {
            PyErr_Format(PyExc_TypeError, "a default is (slot, constant), not %R", op);
            return -1;
        }
        if (slot_offset(p->cls, PyTuple_GET_ITEM(op, 0), 1, &p->defaults[i].offset) < 0)
            return -1;
        p->defaults[i].constant = Py_NewRef(PyTuple_GET_ITEM(op, 1));
    }
    for (Py_ssize_t i = 0; i < p->n_tags; i++) {
        PyObject *op = PyTuple_GET_ITEM(tagged, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 3) {
            PyErr_Format(PyExc_TypeError, "a tagged op is (tag, slot, value), not %R", op);
            return -1;
        }
        unsigned long long tag = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(op, 0));
        if (PyErr_Occurred())
            return -1;
        if (tag > 0xFFFFFFFFull) {
            PyErr_Format(PyExc_ValueError, "tag %llu out of range", tag);
            return -1;
        }
        p->tags[i].tag = (uint32_t)tag;
        if (slot_offset(p->cls, PyTuple_GET_ITEM(op, 1), 1, &p->tags[i].offset) < 0
                || parse_value(PyTuple_GET_ITEM(op, 2), &p->tags[i].value, 0) < 0)
            return -1;
        p->depth = Py_MAX(p->depth, 1 + p->tags[i].value.depth);
    }
    PyObject *unknown = PyUnicode_FromString("unknown_tags");
    if (unknown == NULL)
        return -1;
    int failed = slot_offset(p->cls, unknown, 1, &p->unknown_tags_offset);
    Py_DECREF(unknown);
    if (failed || check_slots(p) < 0)
        return -1;
    if (p->depth > MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "the program of %s nests deeper than %d", p->cls->tp_name, MAX_DEPTH);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------- Reader */

typedef struct {
    PyObject_HEAD
    PyObject *program;  /* the program tuple */
    PyObject *fallback; /* the generated Python reader */
    PyObject *error;    /* why the program did not compile, or NULL */
    Program *compiled;
    vectorcallfunc vectorcall;
} Reader;

static int
reader_compile(Reader *r)
{
    if (r->compiled != NULL)
        return 0;
    if (r->error != NULL) {
        PyErr_SetObject(PyExc_ValueError, r->error);
        return -1;
    }
    r->compiled = compile_program(r->program);
    if (r->compiled != NULL)
        return 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    r->error = value ? PyObject_Str(value) : PyUnicode_FromString("unknown error");
    PyErr_Restore(type, value, tb);
    if (r->error == NULL)  /* even the message failed: keep the reader falling back */
        r->error = Py_NewRef(Py_None);
    return -1;
}

/* The native read of (buf, pos, view): the object (and its end in *end), or NULL, with or without an
 * exception set, for anything it does not decode. */
static PyObject *
run(Reader *r, PyObject *buf, Py_ssize_t pos, PyObject *view, Py_ssize_t *end)
{
    if (reader_compile(r) < 0)
        return NULL;
    if (!(PyBytes_CheckExact(buf) || PyByteArray_CheckExact(buf) || PyMemoryView_Check(buf))
            || !(view == Py_None || PyMemoryView_Check(view)))
        return NULL;
    if (PyBytes_CheckExact(buf)) {  /* immutable: read in place, no buffer export needed */
        if (pos < 0 || pos > PyBytes_GET_SIZE(buf))
            return NULL;
        Ctx c = {(const unsigned char *)PyBytes_AS_STRING(buf), PyBytes_GET_SIZE(buf), buf,
                 view == Py_None ? NULL : view};
        PyObject *obj = read_struct(&c, r->compiled, &pos);
        *end = pos;
        return obj;
    }
    /* A bytearray or memoryview stays exported (a bytearray cannot be resized) while it is read. */
    Py_buffer buffer;
    if (PyObject_GetBuffer(buf, &buffer, PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *obj = NULL;
    /* Python readers index buf: only a plain byte buffer reads the same here. */
    if (buffer.itemsize == 1 && (buffer.format == NULL || strcmp(buffer.format, "B") == 0)
            && pos >= 0 && pos <= buffer.len) {
        Ctx c = {buffer.buf, buffer.len, buf, view == Py_None ? NULL : view};
        obj = read_struct(&c, r->compiled, &pos);
        *end = pos;
    }
    PyBuffer_Release(&buffer);
    return obj;
}

/* run() as the generated readers return: (object, end). */
static PyObject *
run_pair(Reader *r, PyObject *buf, PyObject *pos_obj, PyObject *view)
{
    if (!PyLong_CheckExact(pos_obj))
        return NULL;
    Py_ssize_t end, pos = PyLong_AsSsize_t(pos_obj);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    PyObject *obj = run(r, buf, pos, view, &end);
    if (obj == NULL)
        return NULL;
    PyObject *end_obj = PyLong_FromSsize_t(end);
    PyObject *result = end_obj ? PyTuple_Pack(2, obj, end_obj) : NULL;
    Py_XDECREF(end_obj);
    Py_DECREF(obj);
    return result;
}

static PyObject *
reader_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Reader *r = (Reader *)self;
    if (PyVectorcall_NARGS(nargsf) == 3 && kwnames == NULL && (r->compiled != NULL || r->error == NULL)) {
        PyObject *result = run_pair(r, args[0], args[1], args[2]);
        if (result != NULL)
            return result;
        PyErr_Clear();
    }
    /* Anything the native path did not decode: the Python reader decodes it or raises the error. */
    return PyObject_Vectorcall(r->fallback, args, nargsf, kwnames);
}

static PyObject *
reader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *program, *fallback;
    static char *names[] = {"program", "fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Reader", names, &program, &fallback))
        return NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    Reader *r = (Reader *)type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    r->program = Py_NewRef(program);
    r->fallback = Py_NewRef(fallback);
    r->vectorcall = reader_vectorcall;
    return (PyObject *)r;
}

static int
reader_traverse(Reader *r, visitproc visit, void *arg)
{
    Py_VISIT(r->program);
    Py_VISIT(r->fallback);
    return 0;
}

static int
reader_clear(Reader *r)
{
    Py_CLEAR(r->program);
    Py_CLEAR(r->fallback);
    Py_CLEAR(r->error);
    return 0;
}

static void
reader_dealloc(Reader *r)
{
    PyObject_GC_UnTrack(r);
    reader_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *
reader_compile_method(Reader *r, PyObject *unused)
{
    if (reader_compile(r) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
reader_try_native(Reader *r, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "try_native(buf, pos, view)");
        return NULL;
    }
    if (reader_compile(r) < 0)
        return NULL;
    PyObject *result = run_pair(r, args[0], args[1], args[2]);
    if (result == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return result;
}

static PyObject *
reader_repr(Reader *r)
{
    PyObject *cls = PyTuple_Check(r->program) && PyTuple_GET_SIZE(r->program) > 0
        ? PyTuple_GET_ITEM(r->program, 0) : Py_None;
    return PyUnicode_FromFormat("<native reader of %R, falling back to %R>", cls, r->fallback);
}

static PyMethodDef reader_methods[] = {
    {"compile", (PyCFunction)reader_compile_method, METH_NOARGS,
     "Compile the program now (normally done on the first call); raises why it does not compile."},
    {"try_native", (PyCFunction)(void (*)(void))reader_try_native, METH_FASTCALL,
     "try_native(buf, pos, view): the native read as (object, end), or None where the reader would "
     "fall back to the Python reader."},
    {NULL},
};

static PyMemberDef reader_members[] = {
    {"program", T_OBJECT, offsetof(Reader, program), READONLY, "the decode program"},
    {"fallback", T_OBJECT, offsetof(Reader, fallback), READONLY, "the generated Python reader"},
    {NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkawire.codec._decoder.Reader",
    .tp_doc = "Reader(program, fallback): a generated reader's native twin, called as reader(buf, pos, view).",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = reader_new,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Reader, vectorcall),
    .tp_repr = (reprfunc)reader_repr,
    .tp_methods = reader_methods,
    .tp_members = reader_members,
};

/* ------------------------------------------------------------------------------------- Decode */

/* A generated message class's ``decode``: the short path of Message.decode (a small bytes or
 * bytearray body, a native reader, a clean read) without the Python frame; everything else (a
 * memoryview, a large body with its GC pause, an unknown version, an error, trailing bytes with
 * exact=True) goes to Message.decode itself, so the two behave the same by construction. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *python_decode; /* Message.decode's function, called as (cls, buf, version, ...) */
    vectorcallfunc vectorcall;
} Decode;

static PyObject *str_readers, *str_exact;

static PyObject *
decode_delegate(Decode *d, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8];
    PyObject **stack = total + 1 <= 8 ? small : PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    stack[0] = (PyObject *)d->cls;
    memcpy(stack + 1, args, (size_t)total * sizeof(PyObject *));
    PyObject *result = PyObject_Vectorcall(d->python_decode, stack, (size_t)nargs + 1, kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return result;
}

/* Message.decode's short path takes bodies of at most this many bytes (base._PAUSE_GC_ABOVE, which
 * base.pause_gc_above() passes on through set_pause_gc_above()). */
static double pause_gc_above = 64 * 1024;

static PyObject *
set_pause_gc_above(PyObject *module, PyObject *size)
{
    double value = PyFloat_AsDouble(size);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    pause_gc_above = value;
    Py_RETURN_NONE;
}

static PyObject *
decode_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Decode *d = (Decode *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *exact = NULL;
    if (nargs == 3 && kwnames == NULL)
        exact = args[2];
    else if (nargs == 2 && kwnames != NULL && PyTuple_GET_SIZE(kwnames) == 1
             && PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0))
             && PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), str_exact) == 0)
        exact = args[2];
    else if (nargs != 2 || kwnames != NULL)
        return decode_delegate(d, args, nargsf, kwnames);
    PyObject *buf = args[0];
    Py_ssize_t len;
    if (PyBytes_CheckExact(buf))
        len = PyBytes_GET_SIZE(buf);
    else if (PyByteArray_CheckExact(buf))
        len = PyByteArray_GET_SIZE(buf);
    else
        return decode_delegate(d, args, nargsf, kwnames);
    if ((double)len > pause_gc_above)
        return decode_delegate(d, args, nargsf, kwnames);
    PyObject *readers = _PyType_Lookup(d->cls, str_readers);
    PyObject *reader = readers && PyDict_CheckExact(readers) ? PyDict_GetItemWithError(readers, args[1]) : NULL;
    if (reader == NULL || !Py_IS_TYPE(reader, &ReaderType)) {
        PyErr_Clear();
        return decode_delegate(d, args, nargsf, kwnames);
    }
    Py_ssize_t end;
    PyObject *obj = run((Reader *)reader, buf, 0, Py_None, &end);
    if (obj != NULL && exact != NULL) {
        int strict = PyObject_IsTrue(exact);
        if (strict < 0 || (strict && end != len))  /* Message.decode raises */
            Py_CLEAR(obj);
    }
    if (obj == NULL) {
        PyErr_Clear();
        return decode_delegate(d, args, nargsf, kwnames);
    }
    return obj;
}

static PyObject *
decode_get(PyObject *self, PyObject *obj, PyObject *type)
{
    Decode *d = (Decode *)self;
    if (type == NULL)
        type = (PyObject *)Py_TYPE(obj);
    if (type == (PyObject *)d->cls)
        return Py_NewRef(self);
    /* A subclass: Message.decode bound to it, as the classmethod would be. */
    return PyMethod_New(d->python_decode, type);
}

static PyObject *
decode_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *cls, *python_decode;
    static char *names[] = {"cls", "python_decode", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O:Decode", names, &PyType_Type, &cls, &python_decode))
        return NULL;
    if (!PyFunction_Check(python_decode)) {
        PyErr_SetString(PyExc_TypeError, "python_decode must be a function (Message.decode.__func__)");
        return NULL;
    }
    Decode *d = (Decode *)type->tp_alloc(type, 0);
    if (d == NULL)
        return NULL;
    d->cls = (PyTypeObject *)Py_NewRef(cls);
    d->python_decode = Py_NewRef(python_decode);
    d->vectorcall = decode_vectorcall;
    return (PyObject *)d;
}

static int
decode_traverse(Decode *d, visitproc visit, void *arg)
{
    Py_VISIT(d->cls);
    Py_VISIT(d->python_decode);
    return 0;
}

static int
decode_clear(Decode *d)
{
    Py_CLEAR(d->cls);
    Py_CLEAR(d->python_decode);
    return 0;
}

static void
decode_dealloc(Decode *d)
{
    PyObject_GC_UnTrack(d);
    decode_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *
decode_getdoc(Decode *d, void *closure)
{
    return PyObject_GetAttrString(d->python_decode, "__doc__");
}

static PyObject *
decode_getname(Decode *d, void *closure)
{
    return PyUnicode_FromString("decode");
}

static PyObject *
decode_getqualname(Decode *d, void *closure)
{
    return PyUnicode_FromFormat("%s.decode", _PyType_Name(d->cls));
}

static PyGetSetDef decode_getset[] = {
    {"__doc__", (getter)decode_getdoc, NULL, NULL, NULL},
    {"__name__", (getter)decode_getname, NULL, NULL, NULL},
    {"__qualname__", (getter)decode_getqualname, NULL, NULL, NULL},
    {NULL},
};

static PyMemberDef decode_members[] = {
    {"python_decode", T_OBJECT, offsetof(Decode, python_decode), READONLY, "Message.decode's function"},
    {NULL},
};

static PyTypeObject DecodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkawire.codec._decoder.Decode",
    .tp_basicsize = sizeof(Decode),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = decode_new,
    .tp_dealloc = (destructor)decode_dealloc,
    .tp_traverse = (traverseproc)decode_traverse,
    .tp_clear = (inquiry)decode_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Decode, vectorcall),
    .tp_descr_get = decode_get,
    .tp_getset = decode_getset,
    .tp_members = decode_members,
};

/* ------------------------------------------------------------------------------------- module */

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *type, *zero, *unknown;
    if (!PyArg_ParseTuple(args, "O!OO:configure", &PyType_Type, &type, &zero, &unknown))
        return NULL;
    Py_ssize_t int_offset, safe_offset;
    PyObject *int_name = PyUnicode_FromString("int"), *safe_name = PyUnicode_FromString("is_safe");
    int failed = !int_name || !safe_name
        || slot_offset((PyTypeObject *)type, int_name, 1, &int_offset) < 0
        || slot_offset((PyTypeObject *)type, safe_name, 1, &safe_offset) < 0;
    Py_XDECREF(int_name);
    Py_XDECREF(safe_name);
    if (failed)
        return NULL;
    if (!PyObject_TypeCheck(zero, (PyTypeObject *)type)) {
        PyErr_SetString(PyExc_TypeError, "the zero uuid must be a uuid");
        return NULL;
    }
    Py_XSETREF(uuid_type, (PyTypeObject *)Py_NewRef(type));
    Py_XSETREF(zero_uuid, Py_NewRef(zero));
    Py_XSETREF(uuid_unknown_safety, Py_NewRef(unknown));
    uuid_int_offset = int_offset;
    uuid_safe_offset = safe_offset;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(uuid_class, zero_uuid, unknown_safety): how uuid values are built."},
    {"set_pause_gc_above", set_pause_gc_above, METH_O,
     "set_pause_gc_above(size): Decode leaves bodies above size bytes to Message.decode."},
    {NULL},
};

static struct PyModuleDef decoder_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkawire.codec._decoder",
    .m_doc = "The native decoder of kafkawire's generated codecs (see kafkawire.codec.native).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__decoder(void)
{
    if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&DecodeType) < 0)
        return NULL;
    str_readers = PyUnicode_InternFromString("_READERS");
    str_exact = PyUnicode_InternFromString("exact");
    if (!str_readers || !str_exact)
        return NULL;
    if (init_programs() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&decoder_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Reader", (PyObject *)&ReaderType) < 0
            || PyModule_AddObjectRef(module, "Decode", (PyObject *)&DecodeType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
