/* What the native decoder (_decoder.c) and encoder (_encoder.c) share: the values of the programs that
 * codegen writes into each generated module, and compiling a program tuple once into C arrays.
 *
 * Each including file defines ``struct Program`` (its own ops) and the functions declared below:
 * new_program (a zeroed Program), build_program (a program tuple into one), free_program and
 * program_depth.
 */
#ifndef KAFKAWIRE_PROGRAMS_H
#define KAFKAWIRE_PROGRAMS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

enum Kind {
    K_BOOL, K_INT8, K_INT16, K_UINT16, K_INT32, K_UINT32, K_INT64, K_FLOAT64,
    K_UUID, K_STRING, K_BYTES, K_RECORDS, K_ARRAY, K_STRUCT
};

/* Value flags, as codegen/programs.py writes them. */
#define F_COMPACT 1
#define F_NULLABLE 2
#define F_TAG_NULL 4 /* a nullable struct in a tag section: a 0 marker byte is null */

#define MAX_DEPTH 64 /* programs nest far less; a deeper one is refused at compile time */

typedef struct Program Program;

typedef struct Value {
    int kind;
    int flags;
    int depth;             /* structs nested in this value */
    Py_ssize_t min_size;   /* array: the fewest bytes one element takes */
    struct Value *element; /* array */
    Program *program;      /* struct */
} Value;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* Set by each module's configure(): uuid.UUID, the shared zero UUID and UUID's int slot offset. */
static PyTypeObject *uuid_type;
static PyObject *zero_uuid;
static Py_ssize_t uuid_int_offset;

/* Compiled programs by the address of their tuple: {address: (capsule, tuple)}. The tuple is kept so
 * that its address is never reused; programs live as long as the process, like the classes. */
static PyObject *compiled_programs;
static PyObject *compiling; /* addresses of programs being compiled: a cycle is refused */

static Program *new_program(void);
static int build_program(PyObject *t, Program *p);
static void free_program(Program *p);
static int program_depth(const Program *p);

static int
init_programs(void)
{
    compiled_programs = PyDict_New();
    compiling = PySet_New(NULL);
    return compiled_programs == NULL || compiling == NULL ? -1 : 0;
}

static const struct { const char *name; int kind; } KIND_NAMES[] = {
    {"bool", K_BOOL}, {"int8", K_INT8}, {"int16", K_INT16}, {"uint16", K_UINT16}, {"int32", K_INT32},
    {"uint32", K_UINT32}, {"int64", K_INT64}, {"float64", K_FLOAT64}, {"uuid", K_UUID},
    {"string", K_STRING}, {"bytes", K_BYTES}, {"records", K_RECORDS}, {"array", K_ARRAY},
    {"struct", K_STRUCT},
};

static Program *compile_program(PyObject *program);

static void
free_value(Value *v)
{
    if (v->element != NULL) {
        free_value(v->element);
        PyMem_Free(v->element);
        v->element = NULL;
    }
}

/* A program value, (kind, flags), (kind, flags, program) or (kind, flags, min_size, element). */
static int
parse_value(PyObject *t, Value *v, int is_element)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {
        PyErr_Format(PyExc_TypeError, "a program value must be a (kind, flags, ...) tuple, not %R", t);
        return -1;
    }
    PyObject *name = PyTuple_GET_ITEM(t, 0);
    v->kind = -1;
    for (size_t i = 0; i < sizeof(KIND_NAMES) / sizeof(KIND_NAMES[0]); i++) {
        if (PyUnicode_CompareWithASCIIString(name, KIND_NAMES[i].name) == 0) {
            v->kind = KIND_NAMES[i].kind;
            break;
        }
    }
    long flags = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
    if (flags == -1 && PyErr_Occurred())
        return -1;
    Py_ssize_t expected = v->kind == K_ARRAY ? 4 : v->kind == K_STRUCT ? 3 : 2;
    if (v->kind < 0 || PyTuple_GET_SIZE(t) != expected || flags & ~(F_COMPACT | F_NULLABLE | F_TAG_NULL)
            || ((flags & F_TAG_NULL) && !(v->kind == K_STRUCT && (flags & F_NULLABLE)))
            || (is_element && (flags & F_NULLABLE))) {
        PyErr_Format(PyExc_ValueError, "unsupported program value %R", t);
        return -1;
    }
    v->flags = (int)flags;
    if (v->kind == K_ARRAY) {
        v->min_size = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
        if (v->min_size == -1 && PyErr_Occurred())
            return -1;
        if (v->min_size < 1) {
            PyErr_Format(PyExc_ValueError, "array element size below 1 in %R", t);
            return -1;
        }
        v->element = PyMem_Calloc(1, sizeof(Value));
        if (v->element == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (parse_value(PyTuple_GET_ITEM(t, 3), v->element, 1) < 0)
            return -1;
        if (v->element->kind == K_ARRAY) {
            PyErr_SetString(PyExc_ValueError, "arrays of arrays are not supported");
            return -1;
        }
        v->depth = v->element->depth;
    }
    else if (v->kind == K_STRUCT) {
        v->program = compile_program(PyTuple_GET_ITEM(t, 2));
        if (v->program == NULL)
            return -1;
        v->depth = program_depth(v->program);
    }
    else if (v->kind == K_UUID && uuid_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return -1;
    }
    return 0;
}

/* The offset of the object slot ``name`` of ``cls`` (a T_OBJECT_EX member; writable if asked). */
static int
slot_offset(PyTypeObject *cls, PyObject *name, int writable, Py_ssize_t *offset)
{
    PyObject *descr = PyUnicode_Check(name) ? PyDict_GetItemWithError(cls->tp_dict, name) : NULL;
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s has no slot %R", cls->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (writable && (member->flags & READONLY))) {
        PyErr_Format(PyExc_TypeError, "%s.%U is not a%s object slot", cls->tp_name, name,
                     writable ? " writable" : "n");
        return -1;
    }
    *offset = member->offset;
    return 0;
}

/* The compiled program of a program tuple, compiled on first use (NULL with an exception set). */
static Program *
compile_program(PyObject *program)
{
    PyObject *key = PyLong_FromVoidPtr(program);
    if (key == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(compiled_programs, key);
    if (entry != NULL) {
        Py_DECREF(key);
        return PyCapsule_GetPointer(PyTuple_GET_ITEM(entry, 0), NULL);
    }
    Program *p = NULL;
    int busy = PyErr_Occurred() ? -1 : PySet_Contains(compiling, key);
    if (busy != 0) {
        if (busy > 0)
            PyErr_SetString(PyExc_ValueError, "a program contains itself");
        goto error;
    }
    if (PySet_Add(compiling, key) < 0)
        goto error;
    p = new_program();
    if (p == NULL) {
        PyErr_NoMemory();
        PySet_Discard(compiling, key);
        goto error;
    }
    int failed = build_program(program, p);
    if (PySet_Discard(compiling, key) < 0 || failed)
        goto error;
    PyObject *capsule = PyCapsule_New(p, NULL, NULL);
    entry = capsule ? PyTuple_Pack(2, capsule, program) : NULL;
    Py_XDECREF(capsule);
    if (entry == NULL || PyDict_SetItem(compiled_programs, key, entry) < 0) {
        Py_XDECREF(entry);
        goto error;
    }
    Py_DECREF(entry);
    Py_DECREF(key);
    return p;
error:
    free_program(p);
    Py_DECREF(key);
    return NULL;
}

#endif /* KAFKAWIRE_PROGRAMS_H */
