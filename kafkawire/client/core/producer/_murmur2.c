/* Kafka's key hash in C: murmur2 exactly as Java's Utils.murmur2 computes it, and the partition a
 * keyed record goes to (toPositive(murmur2(key)) % partitions). The Python functions in
 * kafkawire/client/core/producer/partitioner.py are the reference and the fallback; tests hold them equal. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int32_t
murmur2(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5BD1E995;
    uint32_t h = 0x9747B28C ^ (uint32_t)length;
    Py_ssize_t whole = length - length % 4;
    for (Py_ssize_t i = 0; i < whole; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 | (uint32_t)data[i + 2] << 16
                     | (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (length - whole) {  /* Java falls through the same way */
    case 3:
        h ^= (uint32_t)data[whole + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[whole + 1] << 8;
        /* fall through */
    case 1:
        h ^= data[whole];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static int
get_key(PyObject *key, Py_buffer *view)
{
    if (PyObject_GetBuffer(key, view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "a key to hash must be bytes-like, not %.100s", Py_TYPE(key)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *
py_murmur2(PyObject *module, PyObject *key)
{
    Py_buffer view;
    if (get_key(key, &view) < 0)
        return NULL;
    int32_t h = murmur2(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(h);
}

static PyObject *
partition_for_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "partition_for_key(key, num_partitions) takes 2 arguments");
        return NULL;
    }
    long partitions = PyLong_AsLong(args[1]);
    if (partitions == -1 && PyErr_Occurred())
        return NULL;
    if (partitions <= 0) {
        PyErr_Format(PyExc_ValueError, "a topic needs at least one partition, got %ld", partitions);
        return NULL;
    }
    Py_buffer view;
    if (get_key(args[0], &view) < 0)
        return NULL;
    uint32_t positive = (uint32_t)murmur2(view.buf, view.len) & 0x7FFFFFFF;  /* Utils.toPositive */
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)positive % partitions);
}

static PyMethodDef methods[] = {
    {"murmur2", py_murmur2, METH_O, "murmur2(key) -> int: Java's Utils.murmur2 (a signed 32-bit int)."},
    {"partition_for_key", (PyCFunction)(void (*)(void))partition_for_key, METH_FASTCALL,
     "partition_for_key(key, num_partitions) -> int: toPositive(murmur2(key)) % num_partitions."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_murmur2", "Kafka's key hash in C.", -1, methods};

PyMODINIT_FUNC
PyInit__murmur2(void)
{
    return PyModule_Create(&module);
}
