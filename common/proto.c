/*  proto: what every plane shares (frames, HELLO and its welcome, REPLY's
    kind BODY and its head,
    batched-message readers) and the helpers of proto_client.c,
    proto_governor.c and proto_data.c. Layouts: proto.h, docs/protocol.md. */
#include "proto_internal.h"
#include <math.h>
#include <stdio.h>

//  Records a decode error with the field it happened in, once.
int
sqp_error (mpr_t *r, sq_errbuf_t *err, const char *what)
{
    if (err) {
        const char *why = r && r->error? r->error: "invalid value";
        if (r && r->field && r->scope && strcmp (r->field, r->scope))
            snprintf (err->text, sizeof err->text, "%s: field '%s.%s': %s", what, r->scope,
                      r->field, why);
        else
        if (r && r->field)
            snprintf (err->text, sizeof err->text, "%s: field '%s': %s", what, r->field, why);
        else
            snprintf (err->text, sizeof err->text, "%s: %s", what, why);
    }
    return -1;
}

//  The end of a frame or a body read: nothing may follow.
int
sqp_end (mpr_t *r, sq_errbuf_t *err, const char *what)
{
    mpr_field (r, NULL);
    return mpr_end (r)? sqp_error (r, err, what): 0;
}

int
sqp_semantic (sq_errbuf_t *err, const char *text)
{
    if (err)
        snprintf (err->text, sizeof err->text, "%s", text);
    return -1;
}

//  Reads [type, ...] with an exact total field count and checks the type.
int
sqp_begin (mpr_t *r, const void *data, size_t size, uint32_t type, uint32_t fields)
{
    mpr_init (r, data, size);
    uint64_t t;
    mpr_field (r, "message");
    if (mpr_array_exact (r, fields))
        return -1;
    mpr_field (r, "type");
    if (mpr_uint (r, &t))
        return -1;
    if (t != type)
        return mpr_fail (r, "unexpected message type");
    return 0;
}

int
sq_proto_peek (const void *data, size_t size, uint32_t *type, uint32_t *req)
{
    mpr_t r;
    uint32_t n;
    mpr_init (&r, data, size);
    if (mpr_array (&r, &n) || n < 1 || mpr_u32 (&r, type))
        return -1;
    *req = 0;
    if (n >= 2 && mpr_peek (&r) == MPR_UINT) {
        uint64_t v;
        if (mpr_uint (&r, &v) == 0 && v <= UINT32_MAX)
            *req = (uint32_t) v;
    }
    return 0;
}

//  --------------------------------------------------------------------------

void
sq_wbuf_init (sq_wbuf_t *self)
{
    msgpack_sbuffer_init (&self->buf);
    msgpack_packer_init (&self->pk, &self->buf, msgpack_sbuffer_write);
}

void
sq_wbuf_reset (sq_wbuf_t *self)
{
    msgpack_sbuffer_clear (&self->buf);
}

void
sq_wbuf_release (sq_wbuf_t *self)
{
    msgpack_sbuffer_destroy (&self->buf);
    msgpack_sbuffer_init (&self->buf);
}

void
sq_pack_cstr (msgpack_packer *pk, const char *s)
{
    size_t n = s? strlen (s): 0;
    msgpack_pack_str (pk, n);
    msgpack_pack_str_body (pk, s? s: "", n);
}

void
sq_pack_mstr (msgpack_packer *pk, mpr_str_t s)
{
    msgpack_pack_str (pk, s.len);
    msgpack_pack_str_body (pk, s.len? s.ptr: "", s.len);
}

//  Resources map {name: amount}, or nil.
int
sqp_resources (mpr_t *r, sq_resource_t *out, uint32_t *n_out, uint32_t max)
{
    uint32_t n;
    *n_out = 0;
    if (mpr_try_nil (r))
        return 0;
    if (mpr_map (r, &n))
        return -1;
    if (n > max)
        return mpr_fail (r, "too many resource kinds");
    for (uint32_t i = 0; i < n; i++) {
        if (mpr_str (r, &out [i].name, SQ_MAX_NAME))
            return -1;
        if (out [i].name.len == 0)
            return mpr_fail (r, "empty resource name");
        if (mpr_str_eq (out [i].name, SQ_RES_GPUS)) {
            double gpus;
            if (mpr_double (r, &gpus))
                return -1;
            int64_t milli = gpus == 0? 0: sq_gpus_milli (gpus);
            if (milli < 0)
                return mpr_fail (r, "gpus must be a whole number, or a fraction below 1 "
                                    "in thousandths");
            out [i].amount = (uint64_t) milli;
        }
        else
        if (mpr_uint (r, &out [i].amount))
            return -1;
        for (uint32_t j = 0; j < i; j++)
            if (out [j].name.len == out [i].name.len
            &&  memcmp (out [j].name.ptr, out [i].name.ptr, out [i].name.len) == 0)
                return mpr_fail (r, "resource named twice");
    }
    *n_out = n;
    return 0;
}

void
sqp_pack_resources (msgpack_packer *pk, const sq_resource_t *res, uint32_t n)
{
    if (n == 0) {
        msgpack_pack_nil (pk);
        return;
    }
    msgpack_pack_map (pk, n);
    for (uint32_t i = 0; i < n; i++) {
        sq_pack_mstr (pk, res [i].name);
        if (!mpr_str_eq (res [i].name, SQ_RES_GPUS))
            msgpack_pack_uint64 (pk, res [i].amount);
        else
        if (res [i].amount % SQ_GPU_MILLI == 0)
            msgpack_pack_uint64 (pk, res [i].amount / SQ_GPU_MILLI);
        else
            msgpack_pack_double (pk, (double) res [i].amount / SQ_GPU_MILLI);
    }
}

int64_t
sq_gpus_milli (double gpus)
{
    //  Up to a million devices keeps every product below here exact.
    if (!(gpus >= 0.001 && gpus <= 1e6))
        return -1;
    double scaled = gpus * SQ_GPU_MILLI;
    int64_t milli = llround (scaled);
    if (fabs (scaled - (double) milli) > 1e-6 * (scaled > 1? scaled: 1))
        return -1;
    if (milli > SQ_GPU_MILLI && milli % SQ_GPU_MILLI)
        return -1;
    return milli;
}

void
sq_resource_format (const sq_resource_t *res, char *out, size_t size)
{
    int len = (int) (res->name.len > 64? 64: res->name.len);
    if (mpr_str_eq (res->name, SQ_RES_GPUS))
        snprintf (out, size, "%.*s=%g", len, res->name.ptr, (double) res->amount / SQ_GPU_MILLI);
    else
        snprintf (out, size, "%.*s=%llu", len, res->name.ptr, (unsigned long long) res->amount);
}

//  --------------------------------------------------------------------------
//  HELLO

//  type, req, version, role: before the role's record
#define S_HELLO_HEAD 4u

int
sq_hello_decode (sq_hello_t *self, const void *data, size_t size, int *code,
                 sq_errbuf_t *err)
{
    mpr_t r;
    uint32_t n;
    uint64_t type;
    memset (self, 0, sizeof *self);
    *code = SQ_E_PROTOCOL;
    mpr_init (&r, data, size);
    mpr_field (&r, "message");
    mpr_array (&r, &n);
    mpr_field (&r, "type");
    mpr_uint (&r, &type);
    if (mpr_ok (&r) && type != SQ_MSG_HELLO)
        mpr_fail (&r, "expected HELLO first");
    if (mpr_ok (&r) && n < 3) {
        mpr_field (&r, "message");
        mpr_fail (&r, "wrong number of fields");
    }
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    if (!mpr_ok (&r))
        return sqp_error (&r, err, "HELLO");
    if (self->version != SQUALL_PROTOCOL_VERSION) {
        *code = SQ_E_VERSION;
        if (err)
            snprintf (err->text, sizeof err->text,
                      "protocol version %u is not supported: this peer speaks version %d",
                      self->version, SQUALL_PROTOCOL_VERSION);
        return -1;
    }
    mpr_str_t role;
    mpr_field (&r, "role");
    mpr_str (&r, &role, SQ_MAX_NAME);
    if (!mpr_ok (&r))
        return sqp_error (&r, err, "HELLO");
    if (mpr_str_eq (role, "client"))
        self->governor = false;
    else
    if (mpr_str_eq (role, "governor"))
        self->governor = true;
    else
        return sqp_semantic (err, "HELLO: field 'role': must be \"client\" or \"governor\"");
    //  The rest is the role's record of the table
    const sq_msg_desc_t *d = sq_record_desc (self->governor? SQ_REC_HELLO_GOVERNOR
                                                           : SQ_REC_HELLO_CLIENT);
    if (n != S_HELLO_HEAD + d->n_fields) {
        //  The count is the message's, whatever field was read last.
        char why [64];
        snprintf (why, sizeof why, "wrong number of fields (a %s's HELLO has %u)",
                  self->governor? "governor": "client", S_HELLO_HEAD + d->n_fields);
        mpr_field (&r, "message");
        mpr_fail (&r, why);
        return sqp_error (&r, err, "HELLO");
    }
    d->read (&r, self, d->n_fields);
    if (sqp_end (&r, err, "HELLO"))
        return -1;
    *code = SQ_OK;
    return 0;
}

//  [type, req, version, role] and the role's record's fields
static void
s_hello_encode (sq_wbuf_t *w, const sq_hello_t *hello)
{
    const sq_msg_desc_t *d = sq_record_desc (hello->governor? SQ_REC_HELLO_GOVERNOR
                                                            : SQ_REC_HELLO_CLIENT);
    msgpack_pack_array (&w->pk, S_HELLO_HEAD + d->n_fields);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w->pk, hello->req);
    msgpack_pack_uint32 (&w->pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w->pk, hello->governor? "governor": "client");
    d->pack (&w->pk, hello, d->n_fields);
}

static mpr_str_t
s_mstr (const char *s)
{
    return (mpr_str_t) { s? s: "", s? (uint32_t) strlen (s): 0 };
}

void
sq_hello_encode_client (sq_wbuf_t *w, uint32_t req, const char *name)
{
    sq_hello_t hello = { .req = req, .name = s_mstr (name) };
    s_hello_encode (w, &hello);
}

void
sq_hello_encode_governor (sq_wbuf_t *w, uint32_t req, const char *name,
                          uint64_t incarnation, const char *data_endpoint,
                          const char *serve_endpoint,
                          const sq_resource_t *resources, uint32_t n,
                          const char *previous_cluster, uint32_t previous_id)
{
    sq_hello_t hello = { .req = req, .governor = true, .name = s_mstr (name),
                         .incarnation = incarnation,
                         .data_endpoint = s_mstr (data_endpoint),
                         .serve_endpoint = s_mstr (serve_endpoint),
                         .previous = { s_mstr (previous_cluster), previous_id } };
    hello.n_resources = n < SQ_MAX_RESOURCES? n: SQ_MAX_RESOURCES;
    if (hello.n_resources)
        memcpy (hello.resources, resources, hello.n_resources * sizeof *resources);
    s_hello_encode (w, &hello);
}

void
sq_welcome_encode_client (sq_wbuf_t *w, uint32_t req, uint32_t id, uint64_t inline_max,
                          const char *cluster, uint64_t epoch, const char *tenant)
{
    sq_welcome_t m = { .id = id, .inline_max = inline_max,
                       .cluster = { cluster, cluster? (uint32_t) strlen (cluster): 0 },
                       .epoch = epoch,
                       .tenant = { tenant, tenant? (uint32_t) strlen (tenant): 0 } };
    sq_reply_begin (w, req);
    sq_record_pack (&w->pk, SQ_REC_WELCOME_CLIENT, &m);
}

void
sq_welcome_encode_governor (sq_wbuf_t *w, uint32_t req, uint32_t id, uint32_t heartbeat_ms,
                            uint64_t inline_max, const char *cluster, uint64_t epoch,
                            bool reattached, const uint8_t *secret, uint64_t broker_ms)
{
    sq_welcome_t m = { .id = id, .heartbeat_ms = heartbeat_ms, .inline_max = inline_max,
                       .cluster = { cluster, cluster? (uint32_t) strlen (cluster): 0 },
                       .epoch = epoch, .reattached = reattached,
                       .secret = { (const char *) secret, secret? SQ_SECRET_LEN: 0 },
                       .broker_ms = broker_ms };
    sq_reply_begin (w, req);
    sq_record_pack (&w->pk, SQ_REC_WELCOME_GOVERNOR, &m);
}

int
sq_welcome_decode (sq_welcome_t *self, bool governor, const uint8_t *body, size_t size,
                   sq_errbuf_t *err)
{
    return sq_record_decode (governor? SQ_REC_WELCOME_GOVERNOR: SQ_REC_WELCOME_CLIENT,
                             self, body, size, "HELLO reply", err);
}

//  --------------------------------------------------------------------------
//  REPLY

//  A REPLY's body: any value when its code is SQ_OK (the request's own,
//  kept as its bytes), else the record FAULT; a code that is none is
//  refused here, before the body
void
sqp_kind_read_body (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_reply_t *m = (sq_reply_t *) msg;
    if (m->code >= SQ_E_COUNT_)
        mpr_fail (r, "unknown error code");
    else
    if (m->code == SQ_OK)
        mpr_skip (r, &m->body, &m->body_size);
    else
        sq_record_read (r, SQ_REC_FAULT, &m->fault, "body");
}

void
sqp_kind_pack_body (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_reply_t *m = (const sq_reply_t *) msg;
    if (m->code != SQ_OK)
        sqp_pack_FAULT (pk, &m->fault);
    else
    if (m->body && m->body_size)
        msgpack_pack_str_body (pk, m->body, m->body_size);     //  raw
    else
        msgpack_pack_nil (pk);
}

int
sq_reply_decode (sq_reply_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return sqp_decode_REPLY (self, data, size, err);
}

void
sq_reply_begin (sq_wbuf_t *w, uint32_t req)
{
    msgpack_pack_array (&w->pk, 4);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_REPLY);
    msgpack_pack_uint32 (&w->pk, req);
    msgpack_pack_uint32 (&w->pk, SQ_OK);
}

void
sq_reply_encode_error (sq_wbuf_t *w, uint32_t req, int code, const char *message,
                       uint32_t id, uint32_t root)
{
    sq_reply_t m = { .req = req, .code = (uint32_t) code,
                     .fault = { s_mstr (message), id, root } };
    sq_msg_encode (w, SQ_MSG_REPLY, &m);
}

//  --------------------------------------------------------------------------
//  Simple requests

int
sqp_ids (mpr_t *r, uint32_t **ids, uint32_t *n_ids)
{
    uint32_t n;
    if (mpr_array (r, &n))
        return -1;
    *ids = NULL;
    *n_ids = 0;
    if (n == 0)
        return 0;
    *ids = (uint32_t *) malloc (sizeof (uint32_t) * n);
    if (!*ids)
        return mpr_fail (r, "out of memory");
    if (sqp_u32s (r, *ids, n))
        return -1;
    *n_ids = n;
    return 0;
}

int
sqp_u32s (mpr_t *r, uint32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (mpr_u32 (r, &ids [i]))
            return -1;
    return 0;
}

void
sqp_pack_ids (msgpack_packer *pk, const uint32_t *ids, uint32_t n)
{
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint32 (pk, ids [i]);
}

//  --------------------------------------------------------------------------
//  Iterating readers

int
sqp_iter_begin (sq_iter_t *self, const void *data, size_t size, uint32_t type,
              sq_errbuf_t *err, const char *what)
{
    memset (self, 0, sizeof *self);
    self->err = err;
    sqp_begin (&self->r, data, size, type, 2);
    mpr_field (&self->r, "elements");
    mpr_array (&self->r, &self->left);
    if (!mpr_ok (&self->r))
        return sqp_error (&self->r, err, what);
    return 0;
}

//  A reply's body that is a list, [head..., [elements]] (WAIT's, TASKS'),
//  or only [elements] with no heads (SESSIONS'): reads the heads, uints
//  named in heads, into values, and opens the list of at most max
//  elements, named list, failing with too_many beyond it; their count in
//  *count if count.
int
sqp_list_begin (sq_iter_t *self, const uint8_t *body, size_t size, const char *what,
                const char *const *heads, uint64_t *values, uint32_t n_heads,
                const char *list, uint32_t max, const char *too_many, uint32_t *count,
                sq_errbuf_t *err)
{
    memset (self, 0, sizeof *self);
    self->err = err;
    mpr_t *r = &self->r;
    mpr_init (r, body, size);
    if (n_heads) {
        mpr_field (r, "body");
        mpr_array_exact (r, n_heads + 1);
    }
    for (uint32_t i = 0; i < n_heads; i++) {
        mpr_field (r, heads [i]);
        mpr_uint (r, &values [i]);
    }
    mpr_field (r, list);
    mpr_array (r, &self->left);
    if (mpr_ok (r) && self->left > max)
        mpr_fail (r, too_many);
    if (!mpr_ok (r))
        return sqp_error (r, err, what);
    if (count)
        *count = self->left;
    return 0;
}

//  The list's next element, a record of the table
int
sqp_list_next (sq_iter_t *self, uint32_t record, void *elem, const char *entry,
               const char *what)
{
    int more = sqp_iter_more (self, what);
    if (more > 0 && sq_record_read (&self->r, record, elem, entry))
        return sqp_error (&self->r, self->err, what);
    return more;
}

void
sqp_pack_list_head (msgpack_packer *pk, const uint64_t *heads, uint32_t n_heads,
                    uint32_t listed)
{
    msgpack_pack_array (pk, n_heads + 1);
    for (uint32_t i = 0; i < n_heads; i++)
        msgpack_pack_uint64 (pk, heads [i]);
    msgpack_pack_array (pk, listed);
}

//  0 at a clean end, 1 when an element follows, -1 on error.
int
sqp_iter_more (sq_iter_t *self, const char *what)
{
    if (!mpr_ok (&self->r))
        return sqp_error (&self->r, self->err, what);
    if (self->left == 0) {
        mpr_field (&self->r, NULL);
        if (mpr_end (&self->r))
            return sqp_error (&self->r, self->err, what);
        return 0;
    }
    self->left--;
    return 1;
}

void *
sqp_scratch (sq_iter_t *self, size_t bytes)
{
    if (bytes > self->scratch_cap) {
        void *p = realloc (self->scratch, bytes);
        if (!p) {
            mpr_fail (&self->r, "out of memory");
            return NULL;
        }
        self->scratch = p;
        self->scratch_cap = bytes;
    }
    return self->scratch;
}

void
sq_iter_release (sq_iter_t *self)
{
    free (self->scratch);
    self->scratch = NULL;
    self->scratch_cap = 0;
}

int
sqp_frame_index (mpr_t *r, int32_t *frame)
{
    int64_t f;
    if (mpr_int (r, &f))
        return -1;
    if (f < SQ_FRAME_STREAM || f >= SQ_MAX_FRAMES)
        return mpr_fail (r, "frame index out of range");
    *frame = (int32_t) f;
    return 0;
}

void
sq_batch_header (sq_wbuf_t *w, uint32_t type, uint32_t count)
{
    msgpack_pack_array (&w->pk, 2);
    msgpack_pack_uint32 (&w->pk, type);
    msgpack_pack_array (&w->pk, count);
}

void
sq_reply_encode_nil (sq_wbuf_t *w, uint32_t req)
{
    sq_reply_begin (w, req);
    msgpack_pack_nil (&w->pk);
}

int
sq_nil_decode (const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_nil (&r);
    return sqp_end (&r, err, "reply");
}

int
sq_opaque_check (const void *data, size_t size)
{
    if (size > SQ_MAX_CONFIG)
        return -1;
    mpr_t r;
    mpr_init (&r, data, size);
    mpr_skip (&r, NULL, NULL);
    return mpr_end (&r)? -1: 0;
}
