/*  proto_data: the data plane, on governors' data and serve sockets: the
    reply body of LOGREAD (GREAD's and GFETCH's is the table's record
    SERVED; docs/protocol.md section 10),
    CHUNK's and PUT's checks of an offset.
    The messages themselves (OBJECT, CHUNK, CREDIT, SCHUNK, SCREDIT, GFETCH,
    GREAD, PUT, LOGREAD) are rows of proto_messages.def. */
#include "proto_internal.h"

//  CHUNK's and PUT's checks between fields, named in their SQ_BEGIN rows
//  (proto_table.c runs them after the last field). An offset is where a
//  range starts in the whole object.
static int
sqp_offset_in_size (mpr_t *r, uint64_t offset, uint64_t size)
{
    mpr_field (r, "size");
    if (offset > size)
        return mpr_fail (r, "offset past the end of the object");
    return 0;
}

int
sqp_offset_in_chunk (mpr_t *r, const void *msg)
{
    const sq_chunk_t *m = (const sq_chunk_t *) msg;
    return sqp_offset_in_size (r, m->offset, m->size);
}

int
sqp_offset_in_put (mpr_t *r, const void *msg)
{
    const sq_put_t *m = (const sq_put_t *) msg;
    return sqp_offset_in_size (r, m->offset, m->size);
}

//  The messages of this plane are in the table (proto_messages.def); here
//  are GFETCH's encoder of arguments and the reply bodies.

void
sq_gfetch_encode (sq_wbuf_t *w, uint32_t req, uint64_t key, const uint8_t *capability,
                  size_t capability_size)
{
    sq_gfetch_t m = { .req = req, .key = key,
                      .capability = { (const char *) capability,
                                      capability? (uint32_t) capability_size: 0 } };
    sq_msg_encode (w, SQ_MSG_GFETCH, &m);
}

void
sq_pack_logpart (msgpack_packer *pk, uint64_t next, uint64_t total, bool done)
{
    sq_logpart_t m = { next, total, done };
    sq_record_pack (pk, SQ_REC_LOGPART, &m);
}

int
sq_logpart_decode (const uint8_t *body, size_t size, uint64_t *next, uint64_t *total,
                   bool *done, sq_errbuf_t *err)
{
    sq_logpart_t m;
    if (sq_record_decode (SQ_REC_LOGPART, &m, body, size, "LOGREAD reply", err))
        return -1;
    *next = m.next;
    *total = m.total;
    *done = m.done;
    return 0;
}

