/*  proto_data: the data plane, on governors' data and serve sockets: the
    reply bodies of GREAD, GFETCH and LOGREAD (docs/protocol.md section 10).
    The messages themselves (OBJECT, CHUNK, CREDIT, SCHUNK, SCREDIT, GFETCH,
    GREAD, PUT, LOGREAD) are rows of proto_messages.def. */
#include "proto_internal.h"

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
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint64 (pk, next);
    msgpack_pack_uint64 (pk, total);
    if (done)
        msgpack_pack_true (pk);
    else
        msgpack_pack_false (pk);
}

int
sq_logpart_decode (const uint8_t *body, size_t size, uint64_t *next, uint64_t *total,
                   bool *done, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_array_exact (&r, 3);
    mpr_field (&r, "next");
    mpr_uint (&r, next);
    mpr_field (&r, "total");
    mpr_uint (&r, total);
    mpr_field (&r, "done");
    mpr_bool (&r, done);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "LOGREAD reply");
    return 0;
}

void
sq_pack_served (msgpack_packer *pk, uint64_t size, const char *content_type)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint64 (pk, size);
    sq_pack_cstr (pk, content_type);
}

int
sq_served_decode (const uint8_t *body, size_t size, uint64_t *object_size,
                  mpr_str_t *content_type, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_array_exact (&r, 2);
    mpr_field (&r, "size");
    mpr_uint (&r, object_size);
    mpr_field (&r, "content_type");
    mpr_str (&r, content_type, SQ_MAX_NAME);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "GREAD reply");
    return 0;
}
