/* The capture readers' per-packet loop in C: runs of pcapng Enhanced Packet Blocks and of pcap records,
 * each frame's Ethernet (VLAN tags too), IPv4 or IPv6 and TCP headers parsed into a Packet or PacketRef.
 *
 * Only the common case is read here; at the first block or record that is anything else (another block
 * type, a length that cannot be right, an unknown interface, a link type other than Ethernet, IPv6
 * extension headers, a fragment, a header cut short, not TCP...) the run stops before it and returns,
 * and the Python reader (pcapng_reader.pcapng_blocks, pcap_reader.pcap_records, with
 * packet_headers.decode_packet) reads that one as it always does, then calls here again. So the Python
 * code stays the reference and the fallback; tests hold the two equal. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define EPB_TYPE 6
#define EPB_SIZE 28
#define TRAILER_SIZE 4
#define MIN_BLOCK 12
#define MAX_PCAPNG_BLOCK (64 << 20)
#define PCAP_RECORD_SIZE 16
#define LINKTYPE_ETHERNET 1
#define MAX_INTERFACES 64
#define RUN_PACKETS 512         /* packets per call: a bounded list, the first ones soon to the reader */

static PyTypeObject *packet_type, *packet_ref_type;
static PyObject *v6_text;       /* packet_headers._v6_text: the address text Python gives (inet_ntop) */

/* Address text per address, direct-mapped: a capture has few addresses. */
#define V4_SLOTS 4096
#define V6_SLOTS 256
static struct { uint32_t key; PyObject *text; } v4_cache[V4_SLOTS];
static struct { unsigned char key[16]; PyObject *text; } v6_cache[V6_SLOTS];

static inline uint16_t be16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint32_t u32(const unsigned char *p, int big)
{
    return big ? be32(p) : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]);
}

static PyObject *
v4_address(const unsigned char *raw)  /* a new reference */
{
    uint32_t key = be32(raw);
    unsigned slot = (key ^ key >> 12 ^ key >> 24) % V4_SLOTS;
    if (v4_cache[slot].text == NULL || v4_cache[slot].key != key) {
        PyObject *text = PyUnicode_FromFormat("%u.%u.%u.%u", raw[0], raw[1], raw[2], raw[3]);
        if (text == NULL)
            return NULL;
        Py_XSETREF(v4_cache[slot].text, text);
        v4_cache[slot].key = key;
    }
    Py_INCREF(v4_cache[slot].text);
    return v4_cache[slot].text;
}

static PyObject *
v6_address(const unsigned char *raw)
{
    unsigned slot = 0;
    for (int i = 0; i < 16; i++)
        slot = slot * 31 + raw[i];
    slot %= V6_SLOTS;
    if (v6_cache[slot].text == NULL || memcmp(v6_cache[slot].key, raw, 16) != 0) {
        PyObject *text = PyObject_CallFunction(v6_text, "y#", (const char *)raw, (Py_ssize_t)16);
        if (text == NULL)
            return NULL;
        if (!PyUnicode_Check(text)) {
            Py_DECREF(text);
            PyErr_SetString(PyExc_TypeError, "the IPv6 address text must be a str");
            return NULL;
        }
        Py_XSETREF(v6_cache[slot].text, text);
        memcpy(v6_cache[slot].key, raw, 16);
    }
    Py_INCREF(v6_cache[slot].text);
    return v6_cache[slot].text;
}

/* What the headers of one frame say, when they are the common case. */
typedef struct {
    const unsigned char *src, *dst;
    int v6;
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    Py_ssize_t payload_start, captured_end, ip_end;
} Segment;

/* 1 when the frame of ``captured`` bytes at ``off`` (``wire`` on the wire) is an Ethernet frame of a
 * TCP segment in IPv4 or IPv6 without extension headers, as packet_headers.decode_packet reads it to a
 * Packet; 0 for everything else (decode_packet says what). */
static int
read_segment(const unsigned char *b, Py_ssize_t off, Py_ssize_t captured, Py_ssize_t wire, long linktype,
             Segment *s)
{
    Py_ssize_t end = off + captured, wire_end = off + wire, l3, l4, ip_end;
    if (linktype != LINKTYPE_ETHERNET || captured < 14)
        return 0;
    unsigned ethertype = be16(b + off + 12);
    l3 = off + 14;
    while (ethertype == 0x8100 || ethertype == 0x88A8 || ethertype == 0x9100) {  /* VLAN tags */
        if (l3 + 4 > end)
            return 0;
        ethertype = be16(b + l3 + 2);
        l3 += 4;
    }
    if (ethertype == 0x0800) {
        if (l3 + 20 > end)
            return 0;
        unsigned version_ihl = b[l3];
        Py_ssize_t header_length = (version_ihl & 0x0F) * 4;
        if (version_ihl >> 4 != 4 || header_length < 20)
            return 0;
        if (be16(b + l3 + 6) & 0x3FFF || b[l3 + 9] != 6)  /* a fragment; not TCP */
            return 0;
        Py_ssize_t total_length = be16(b + l3 + 2);
        if (total_length) {  /* 0: a TSO super-segment, the frame's length is right */
            if (total_length < header_length)
                return 0;
            ip_end = l3 + total_length < wire_end ? l3 + total_length : wire_end;
        }
        else
            ip_end = wire_end;
        l4 = l3 + header_length;
        s->src = b + l3 + 12;
        s->dst = b + l3 + 16;
        s->v6 = 0;
    }
    else if (ethertype == 0x86DD) {
        if (l3 + 40 > end)
            return 0;
        if (be32(b + l3) >> 28 != 6 || b[l3 + 6] != 6)  /* not version 6; extension headers or not TCP */
            return 0;
        Py_ssize_t payload_length = be16(b + l3 + 4);
        ip_end = payload_length ? l3 + 40 + payload_length : wire_end;
        if (ip_end > wire_end)
            ip_end = wire_end;
        l4 = l3 + 40;
        s->src = b + l3 + 8;
        s->dst = b + l3 + 24;
        s->v6 = 1;
    }
    else
        return 0;
    if (l4 + 20 > end)
        return 0;
    Py_ssize_t payload_start = l4 + (b[l4 + 12] >> 4) * 4;
    if (payload_start < l4 + 20 || payload_start > ip_end || payload_start > end)
        return 0;
    s->sport = be16(b + l4);
    s->dport = be16(b + l4 + 2);
    s->seq = be32(b + l4 + 4);
    s->ack = be32(b + l4 + 8);
    s->flags = b[l4 + 13];
    s->payload_start = payload_start;
    s->captured_end = ip_end < end ? ip_end : end;
    s->ip_end = ip_end;
    return 1;
}

/* The Packet (payload a slice of ``buf``: bytes of bytes or mmap, a view of a memoryview) or, with
 * ``refs``, the PacketRef of a segment; a new reference. */
static PyObject *
make_packet(PyObject *buf, const Segment *s, long long order, long long ts_ns, int refs)
{
    PyTypeObject *type = refs ? packet_ref_type : packet_type;
    Py_ssize_t n = refs ? 12 : 11;
    PyObject *items[12];
    memset(items, 0, sizeof(items));
    items[0] = PyLong_FromLongLong(order);
    items[1] = PyLong_FromLongLong(ts_ns);
    items[2] = s->v6 ? v6_address(s->src) : v4_address(s->src);
    items[3] = PyLong_FromLong(s->sport);
    items[4] = s->v6 ? v6_address(s->dst) : v4_address(s->dst);
    items[5] = PyLong_FromLong(s->dport);
    items[6] = PyLong_FromUnsignedLong(s->seq);
    items[7] = PyLong_FromUnsignedLong(s->ack);
    items[8] = PyLong_FromLong(s->flags);
    if (refs) {
        items[9] = PyLong_FromSsize_t(s->payload_start);
        items[10] = PyLong_FromSsize_t(s->captured_end - s->payload_start);
        items[11] = PyLong_FromSsize_t(s->ip_end - s->captured_end);
    }
    else {
        items[9] = PySequence_GetSlice(buf, s->payload_start, s->captured_end);
        items[10] = PyLong_FromSsize_t(s->ip_end - s->captured_end);
    }
    PyObject *packet = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL)
            goto done;
    packet = type->tp_alloc(type, n);
    if (packet == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(packet, i, items[i]);  /* the tuple takes the reference */
        items[i] = NULL;
    }
done:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(items[i]);
    return packet;
}

static int
check_configured(void)
{
    if (packet_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kafkawire.capture.files._packets.configure() was not called");
        return -1;
    }
    return 0;
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *packet, *ref, *text;
    if (!PyArg_ParseTuple(args, "O!O!O:configure", &PyType_Type, &packet, &PyType_Type, &ref, &text))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)packet, &PyTuple_Type)
            || !PyType_IsSubtype((PyTypeObject *)ref, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "Packet and PacketRef must be tuple types");
        return NULL;
    }
    Py_INCREF(packet);
    Py_INCREF(ref);
    Py_INCREF(text);
    Py_XSETREF(packet_type, (PyTypeObject *)packet);
    Py_XSETREF(packet_ref_type, (PyTypeObject *)ref);
    Py_XSETREF(v6_text, text);
    Py_RETURN_NONE;
}

/* decode_packet(buf, off, captured, wire, linktype, order, ts_ns, refs): the Packet (PacketRef) that
 * packet_headers.decode_packet gives, or None where it is not the common case (the Python code says). */
static PyObject *
decode_packet(PyObject *module, PyObject *args)
{
    PyObject *buf;
    Py_ssize_t off, captured, wire;
    long linktype;
    long long order, ts_ns;
    int refs;
    if (!PyArg_ParseTuple(args, "OnnnlLLp:decode_packet", &buf, &off, &captured, &wire, &linktype, &order,
                          &ts_ns, &refs))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Segment s;
    PyObject *result = NULL;
    if (off < 0 || captured < 0 || wire < captured || off + captured > view.len
            || !read_segment(view.buf, off, captured, wire, linktype, &s)) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    else
        result = make_packet(buf, &s, order, ts_ns, refs);
    PyBuffer_Release(&view);
    return result;
}

/* The start of a run: ``buf``'s bytes in ``view`` (``data_end`` kept within them) and an empty list for
 * its packets; NULL (the view released) on error. */
static PyObject *
start_run(PyObject *buf, Py_buffer *view, Py_ssize_t *data_end)
{
    if (PyObject_GetBuffer(buf, view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (*data_end > view->len)
        *data_end = view->len;
    PyObject *packets = PyList_New(0);
    if (packets == NULL)
        PyBuffer_Release(view);
    return packets;
}

/* Appends the segment's packet to a run's list; -1 on error. */
static int
add_packet(PyObject *packets, PyObject *buf, const Segment *s, long long order, long long ts_ns, int refs)
{
    PyObject *packet = make_packet(buf, s, order, ts_ns, refs);
    if (packet == NULL)
        return -1;
    int failed = PyList_Append(packets, packet);
    Py_DECREF(packet);
    return failed;
}

typedef struct { int usable; long linktype; unsigned long long multiplier, divisor; long long offset; } Interface;

/* pcapng_run(buf, pos, stop, data_end, order_base, interfaces, big_endian, refs) ->
 * (packets, pos, last_ts): the Enhanced Packet Blocks from ``pos`` read while they are the common case
 * (see the top of the file), at most RUN_PACKETS; ``pos`` where the run stopped (unchanged if the
 * first block is not one: the caller reads it), ``last_ts`` the last one's time (None if none). */
static PyObject *
pcapng_run(PyObject *module, PyObject *args)
{
    PyObject *buf, *interfaces;
    Py_ssize_t pos, stop, data_end;
    long long order_base;
    int big, refs;
    if (!PyArg_ParseTuple(args, "OnnnLO!pp:pcapng_run", &buf, &pos, &stop, &data_end, &order_base,
                          &PyList_Type, &interfaces, &big, &refs))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    Interface known[MAX_INTERFACES];
    Py_ssize_t count = PyList_GET_SIZE(interfaces);
    if (count > MAX_INTERFACES)
        count = MAX_INTERFACES;  /* packets of the others stop the run: Python reads them */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *facts = PyList_GET_ITEM(interfaces, i);
        Interface *at = &known[i];
        at->usable = 0;
        if (!PyTuple_Check(facts) || PyTuple_GET_SIZE(facts) != 4)
            continue;
        int overflows[4];
        at->linktype = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(facts, 0), &overflows[0]);
        long long multiplier = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(facts, 1), &overflows[1]);
        long long divisor = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(facts, 2), &overflows[2]);
        at->offset = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(facts, 3), &overflows[3]);
        if (PyErr_Occurred())
            return NULL;
        /* An offset past int64 (or odd factors) is left to Python's integers. */
        if (!(overflows[0] | overflows[1] | overflows[2] | overflows[3]) && multiplier >= 0
                && multiplier <= 1000000000LL && divisor > 0) {
            at->multiplier = (unsigned long long)multiplier;
            at->divisor = (unsigned long long)divisor;
            at->usable = 1;
        }
    }
    Py_buffer view;
    PyObject *packets = start_run(buf, &view, &data_end);
    if (packets == NULL)
        return NULL;
    const unsigned char *b = view.buf;
    long long last_ts = 0;
    int any = 0;
    while (pos >= 0 && pos < stop && PyList_GET_SIZE(packets) < RUN_PACKETS) {
        if (pos + MIN_BLOCK > data_end)
            break;
        uint32_t length = u32(b + pos + 4, big);
        if (u32(b + pos, big) != EPB_TYPE || length < EPB_SIZE + TRAILER_SIZE || length > MAX_PCAPNG_BLOCK
                || length & 3 || pos + (Py_ssize_t)length > data_end
                || u32(b + pos + length - TRAILER_SIZE, big) != length)
            break;
        uint32_t interface = u32(b + pos + 8, big);
        if (interface >= (uint32_t)count || !known[interface].usable)
            break;
        const Interface *facts = &known[interface];
        uint64_t raw = (uint64_t)u32(b + pos + 12, big) << 32 | u32(b + pos + 16, big);
        __int128 ts = (__int128)((unsigned __int128)raw * facts->multiplier / facts->divisor) + facts->offset;
        if (ts > INT64_MAX || ts < INT64_MIN)
            break;
        uint32_t captured = u32(b + pos + 20, big), original = u32(b + pos + 24, big);
        if (EPB_SIZE + (uint64_t)captured > length - TRAILER_SIZE)
            break;
        Segment s;
        if (!read_segment(b, pos + EPB_SIZE, captured, original > captured ? original : captured,
                          facts->linktype, &s))
            break;
        if (add_packet(packets, buf, &s, order_base + pos, (long long)ts, refs) < 0)
            goto fail;
        last_ts = (long long)ts;
        any = 1;
        pos += length;
    }
    PyBuffer_Release(&view);
    PyObject *last = any ? PyLong_FromLongLong(last_ts) : (Py_INCREF(Py_None), Py_None);
    if (last == NULL) {
        Py_DECREF(packets);
        return NULL;
    }
    return Py_BuildValue("(NnN)", packets, pos, last);
fail:
    Py_DECREF(packets);
    PyBuffer_Release(&view);
    return NULL;
}

/* pcap_run(buf, pos, stop, data_end, order_base, big_endian, frac_ns, linktype, max_incl, refs) ->
 * (packets, pos): the pcap records from ``pos`` read while they are the common case, as pcapng_run. */
static PyObject *
pcap_run(PyObject *module, PyObject *args)
{
    PyObject *buf;
    Py_ssize_t pos, stop, data_end, max_incl;
    long long order_base, frac_ns;
    long linktype;
    int big, refs;
    if (!PyArg_ParseTuple(args, "OnnnLpLlnp:pcap_run", &buf, &pos, &stop, &data_end, &order_base, &big,
                          &frac_ns, &linktype, &max_incl, &refs))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    if (frac_ns != 1 && frac_ns != 1000) {
        PyErr_SetString(PyExc_ValueError, "frac_ns must be 1 or 1000");
        return NULL;
    }
    Py_buffer view;
    PyObject *packets = start_run(buf, &view, &data_end);
    if (packets == NULL)
        return NULL;
    const unsigned char *b = view.buf;
    while (pos >= 0 && pos < stop && PyList_GET_SIZE(packets) < RUN_PACKETS) {
        Py_ssize_t data = pos + PCAP_RECORD_SIZE;
        if (data > data_end)
            break;
        uint32_t sec = u32(b + pos, big), frac = u32(b + pos + 4, big);
        uint32_t incl = u32(b + pos + 8, big), orig = u32(b + pos + 12, big);
        if ((Py_ssize_t)incl > max_incl || !(incl || orig) || data + (Py_ssize_t)incl > data_end)
            break;
        Segment s;
        if (!read_segment(b, data, incl, orig > incl ? orig : incl, linktype, &s))
            break;
        long long ts = (long long)sec * 1000000000LL + (long long)frac * frac_ns;
        if (add_packet(packets, buf, &s, order_base + pos, ts, refs) < 0)
            goto fail;
        pos = data + incl;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", packets, pos);
fail:
    Py_DECREF(packets);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(Packet, PacketRef, v6_text): the types to build"},
    {"decode_packet", decode_packet, METH_VARARGS, "one frame's Packet in the common case, else None"},
    {"pcapng_run", pcapng_run, METH_VARARGS, "a run of common Enhanced Packet Blocks"},
    {"pcap_run", pcap_run, METH_VARARGS, "a run of common pcap records"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_packets", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__packets(void)
{
    return PyModule_Create(&module);
}
