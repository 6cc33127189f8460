/*  proto_data: the data plane, on governors' data and serve sockets: OBJECT,
    CHUNK, CREDIT (governor to governor), GFETCH, GREAD, PUT and their reply
    bodies (client to governor) (docs/protocol.md section 10). */
#include "proto_internal.h"

//  OBJECT, GFETCH -----------------------------------------------------------

int
sq_object_decode (sq_object_msg_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_OBJECT, 6);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    mpr_field (&r, "size");
    mpr_uint (&r, &self->size);
    mpr_field (&r, "content_type");
    mpr_str (&r, &self->content_type, SQ_MAX_NAME);
    mpr_field (&r, "from");
    mpr_u32 (&r, &self->from);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "OBJECT");
    return 0;
}

void
sq_object_encode (sq_wbuf_t *w, const sq_object_msg_t *m)
{
    msgpack_pack_array (&w->pk, 6);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_OBJECT);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->version);
    msgpack_pack_uint64 (&w->pk, m->size);
    sq_pack_mstr (&w->pk, m->content_type);
    msgpack_pack_uint32 (&w->pk, m->from);
}

int
sq_gfetch_decode (sq_gfetch_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_GFETCH, 4);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "capability");
    sqp_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "GFETCH");
    return 0;
}

void
sq_gfetch_encode (sq_wbuf_t *w, uint32_t req, uint64_t key, const uint8_t *capability,
                  size_t capability_size)
{
    msgpack_pack_array (&w->pk, 4);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_GFETCH);
    msgpack_pack_uint32 (&w->pk, req);
    msgpack_pack_uint64 (&w->pk, key);
    sqp_pack_bin_or_nil (&w->pk, capability, capability_size);
}

//  --------------------------------------------------------------------------
//  Chunked copies and ranged reads

int
sq_chunk_decode (sq_chunk_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_CHUNK, 9);
    mpr_field (&r, "transfer");
    mpr_u32 (&r, &self->transfer);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    mpr_field (&r, "offset");
    mpr_uint (&r, &self->offset);
    mpr_field (&r, "size");
    mpr_uint (&r, &self->size);
    mpr_field (&r, "content_type");
    mpr_str (&r, &self->content_type, SQ_MAX_NAME);
    mpr_field (&r, "from");
    mpr_u32 (&r, &self->from);
    mpr_field (&r, "reply_to");
    mpr_str (&r, &self->reply_to, SQ_MAX_NAME);
    if (mpr_ok (&r) && self->offset > self->size)
        mpr_fail (&r, "offset past the end of the object");
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "CHUNK");
    return 0;
}

void
sq_chunk_encode (sq_wbuf_t *w, const sq_chunk_t *m)
{
    msgpack_pack_array (&w->pk, 9);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_CHUNK);
    msgpack_pack_uint32 (&w->pk, m->transfer);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->version);
    msgpack_pack_uint64 (&w->pk, m->offset);
    msgpack_pack_uint64 (&w->pk, m->size);
    sq_pack_mstr (&w->pk, m->content_type);
    msgpack_pack_uint32 (&w->pk, m->from);
    sq_pack_mstr (&w->pk, m->reply_to);
}

int
sq_credit_decode (sq_credit_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_CREDIT, 4);
    mpr_field (&r, "transfer");
    mpr_u32 (&r, &self->transfer);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "credits");
    mpr_u32 (&r, &self->credits);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "CREDIT");
    return 0;
}

void
sq_credit_encode (sq_wbuf_t *w, const sq_credit_t *m)
{
    msgpack_pack_array (&w->pk, 4);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_CREDIT);
    msgpack_pack_uint32 (&w->pk, m->transfer);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->credits);
}

//  --------------------------------------------------------------------------
//  Streams

int
sq_schunk_decode (sq_schunk_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_SCHUNK, 8);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    mpr_field (&r, "consumer");
    mpr_uint (&r, &self->consumer);
    mpr_field (&r, "offset");
    mpr_uint (&r, &self->offset);
    mpr_field (&r, "end");
    mpr_bool (&r, &self->end);
    mpr_field (&r, "from");
    mpr_u32 (&r, &self->from);
    mpr_field (&r, "reply_to");
    mpr_str (&r, &self->reply_to, SQ_MAX_NAME);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "SCHUNK");
    return 0;
}

void
sq_schunk_encode (sq_wbuf_t *w, const sq_schunk_t *m)
{
    msgpack_pack_array (&w->pk, 8);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_SCHUNK);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->version);
    msgpack_pack_uint64 (&w->pk, m->consumer);
    msgpack_pack_uint64 (&w->pk, m->offset);
    if (m->end)
        msgpack_pack_true (&w->pk);
    else
        msgpack_pack_false (&w->pk);
    msgpack_pack_uint32 (&w->pk, m->from);
    sq_pack_mstr (&w->pk, m->reply_to);
}

int
sq_scredit_decode (sq_scredit_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_SCREDIT, 5);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    mpr_field (&r, "consumer");
    mpr_uint (&r, &self->consumer);
    mpr_field (&r, "credits");
    mpr_u32 (&r, &self->credits);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "SCREDIT");
    return 0;
}

void
sq_scredit_encode (sq_wbuf_t *w, const sq_scredit_t *m)
{
    msgpack_pack_array (&w->pk, 5);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_SCREDIT);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->version);
    msgpack_pack_uint64 (&w->pk, m->consumer);
    msgpack_pack_uint32 (&w->pk, m->credits);
}

int
sq_gread_decode (sq_gread_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_GREAD, 6);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "offset");
    mpr_uint (&r, &self->offset);
    mpr_field (&r, "length");
    mpr_uint (&r, &self->length);
    if (mpr_ok (&r) && self->length > SQ_CHUNK_MAX)
        mpr_fail (&r, "longer than a chunk may be");
    mpr_field (&r, "capability");
    sqp_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "GREAD");
    return 0;
}

void
sq_gread_encode (sq_wbuf_t *w, const sq_gread_t *m)
{
    msgpack_pack_array (&w->pk, 6);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_GREAD);
    msgpack_pack_uint32 (&w->pk, m->req);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint64 (&w->pk, m->offset);
    msgpack_pack_uint64 (&w->pk, m->length);
    sqp_pack_bin_or_nil (&w->pk, (const uint8_t *) m->capability.ptr, m->capability.len);
}

int
sq_put_decode (sq_put_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_PUT, 7);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "offset");
    mpr_uint (&r, &self->offset);
    mpr_field (&r, "size");
    mpr_uint (&r, &self->size);
    if (mpr_ok (&r) && self->offset > self->size)
        mpr_fail (&r, "offset past the end of the object");
    mpr_field (&r, "content_type");
    mpr_str (&r, &self->content_type, SQ_MAX_NAME);
    mpr_field (&r, "capability");
    sqp_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "PUT");
    return 0;
}

void
sq_put_encode (sq_wbuf_t *w, const sq_put_t *m)
{
    msgpack_pack_array (&w->pk, 7);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_PUT);
    msgpack_pack_uint32 (&w->pk, m->req);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint64 (&w->pk, m->offset);
    msgpack_pack_uint64 (&w->pk, m->size);
    sq_pack_mstr (&w->pk, m->content_type);
    sqp_pack_bin_or_nil (&w->pk, (const uint8_t *) m->capability.ptr, m->capability.len);
}

int
sq_logread_decode (sq_logread_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    sqp_begin (&r, data, size, SQ_MSG_LOGREAD, 8);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "task");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "attempt");
    mpr_u32 (&r, &self->attempt);
    mpr_field (&r, "stream");
    mpr_u32 (&r, &self->stream);
    if (mpr_ok (&r) && self->stream != SQ_LOG_STDOUT && self->stream != SQ_LOG_STDERR)
        mpr_fail (&r, "not 1 (stdout) or 2 (stderr)");
    mpr_field (&r, "offset");
    mpr_uint (&r, &self->offset);
    mpr_field (&r, "length");
    mpr_uint (&r, &self->length);
    if (mpr_ok (&r) && self->length > SQ_LOGREAD_MAX)
        mpr_fail (&r, "longer than a log read may be");
    mpr_field (&r, "capability");
    sqp_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return sqp_error (&r, err, "LOGREAD");
    return 0;
}

void
sq_logread_encode (sq_wbuf_t *w, const sq_logread_t *m)
{
    msgpack_pack_array (&w->pk, 8);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_LOGREAD);
    msgpack_pack_uint32 (&w->pk, m->req);
    msgpack_pack_uint64 (&w->pk, m->key);
    msgpack_pack_uint32 (&w->pk, m->attempt);
    msgpack_pack_uint32 (&w->pk, m->stream);
    msgpack_pack_uint64 (&w->pk, m->offset);
    msgpack_pack_uint64 (&w->pk, m->length);
    sqp_pack_bin_or_nil (&w->pk, (const uint8_t *) m->capability.ptr, m->capability.len);
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
