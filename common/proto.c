/*  proto: encoders and strict decoders of every squall message.
    Layouts are documented in proto.h and docs/protocol.md. */
#include "proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Records a decode error with the field it happened in, once.
static int
s_error (mpr_t *r, sq_errbuf_t *err, const char *what)
{
    if (err) {
        const char *why = r && r->error? r->error: "invalid value";
        if (r && r->field)
            snprintf (err->text, sizeof err->text, "%s: field '%s': %s", what, r->field, why);
        else
            snprintf (err->text, sizeof err->text, "%s: %s", what, why);
    }
    return -1;
}

static int
s_semantic (sq_errbuf_t *err, const char *text)
{
    if (err)
        snprintf (err->text, sizeof err->text, "%s", text);
    return -1;
}

//  Reads [type, ...] with an exact total field count and checks the type.
static int
s_begin (mpr_t *r, const void *data, size_t size, uint32_t type, uint32_t fields)
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

static void
s_pack_int_or_nil (msgpack_packer *pk, uint32_t value)
{
    if (value)
        msgpack_pack_uint32 (pk, value);
    else
        msgpack_pack_nil (pk);
}

static int
s_opt_u32 (mpr_t *r, uint32_t *value)
{
    if (mpr_try_nil (r)) {
        *value = 0;
        return 0;
    }
    return mpr_u32 (r, value);
}

//  Exactly `len` bytes of bin, or nil (value->len 0).
static int
s_opt_bin (mpr_t *r, mpr_str_t *value, uint32_t len)
{
    value->ptr = NULL;
    value->len = 0;
    if (mpr_try_nil (r))
        return 0;
    if (mpr_bin (r, value, len))
        return -1;
    if (value->len != len)
        return mpr_fail (r, "wrong number of bytes");
    return 0;
}

//  bin of at most `max` bytes, or nil (value->len 0).
static int
s_opt_bin_max (mpr_t *r, mpr_str_t *value, uint32_t max)
{
    value->ptr = NULL;
    value->len = 0;
    if (mpr_try_nil (r))
        return 0;
    return mpr_bin (r, value, max);
}

static void
s_pack_bin_or_nil (msgpack_packer *pk, const uint8_t *bytes, size_t size)
{
    if (!bytes || !size) {
        msgpack_pack_nil (pk);
        return;
    }
    msgpack_pack_bin (pk, size);
    msgpack_pack_bin_body (pk, bytes, size);
}

//  Resources map {name: amount}, or nil.
static int
s_resources (mpr_t *r, sq_resource_t *out, uint32_t *n_out, uint32_t max)
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
        if (mpr_str (r, &out [i].name, SQ_MAX_NAME) || mpr_uint (r, &out [i].amount))
            return -1;
        if (out [i].name.len == 0)
            return mpr_fail (r, "empty resource name");
        for (uint32_t j = 0; j < i; j++)
            if (out [j].name.len == out [i].name.len
            &&  memcmp (out [j].name.ptr, out [i].name.ptr, out [i].name.len) == 0)
                return mpr_fail (r, "resource named twice");
    }
    *n_out = n;
    return 0;
}

static void
s_pack_resources (msgpack_packer *pk, const sq_resource_t *res, uint32_t n)
{
    if (n == 0) {
        msgpack_pack_nil (pk);
        return;
    }
    msgpack_pack_map (pk, n);
    for (uint32_t i = 0; i < n; i++) {
        sq_pack_mstr (pk, res [i].name);
        msgpack_pack_uint64 (pk, res [i].amount);
    }
}

//  --------------------------------------------------------------------------
//  HELLO

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
    if (mpr_ok (&r) && n < 3)
        mpr_fail (&r, "wrong number of fields");
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "version");
    mpr_u32 (&r, &self->version);
    if (!mpr_ok (&r))
        return s_error (&r, err, "HELLO");
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
        return s_error (&r, err, "HELLO");
    if (mpr_str_eq (role, "client"))
        self->governor = false;
    else
    if (mpr_str_eq (role, "governor"))
        self->governor = true;
    else
        return s_semantic (err, "HELLO: field 'role': must be \"client\" or \"governor\"");
    if (n != (self->governor? 10u: 5u)) {
        mpr_fail (&r, "wrong number of fields");
        return s_error (&r, err, "HELLO");
    }
    mpr_field (&r, "name");
    mpr_str (&r, &self->name, SQ_MAX_NAME);
    if (self->governor) {
        mpr_field (&r, "incarnation");
        mpr_uint (&r, &self->incarnation);
        mpr_field (&r, "data_endpoint");
        mpr_str (&r, &self->data_endpoint, SQ_MAX_NAME);
        mpr_field (&r, "serve_endpoint");
        mpr_str (&r, &self->serve_endpoint, SQ_MAX_NAME);
        mpr_field (&r, "resources");
        s_resources (&r, self->resources, &self->n_resources, SQ_MAX_RESOURCES);
        mpr_field (&r, "previous");
        if (mpr_ok (&r) && !mpr_try_nil (&r)) {
            mpr_array_exact (&r, 2);
            mpr_field (&r, "previous.cluster");
            mpr_str (&r, &self->previous_cluster, SQ_MAX_NAME);
            if (mpr_ok (&r) && self->previous_cluster.len == 0)
                mpr_fail (&r, "empty");
            mpr_field (&r, "previous.governor");
            mpr_u32 (&r, &self->previous_id);
        }
    }
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "HELLO");
    *code = SQ_OK;
    return 0;
}

void
sq_hello_encode_client (sq_wbuf_t *w, uint32_t req, const char *name)
{
    msgpack_pack_array (&w->pk, 5);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w->pk, req);
    msgpack_pack_uint32 (&w->pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w->pk, "client");
    sq_pack_cstr (&w->pk, name);
}

void
sq_hello_encode_governor (sq_wbuf_t *w, uint32_t req, const char *name,
                          uint64_t incarnation, const char *data_endpoint,
                          const char *serve_endpoint,
                          const sq_resource_t *resources, uint32_t n,
                          const char *previous_cluster, uint32_t previous_id)
{
    msgpack_pack_array (&w->pk, 10);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w->pk, req);
    msgpack_pack_uint32 (&w->pk, SQUALL_PROTOCOL_VERSION);
    sq_pack_cstr (&w->pk, "governor");
    sq_pack_cstr (&w->pk, name);
    msgpack_pack_uint64 (&w->pk, incarnation);
    sq_pack_cstr (&w->pk, data_endpoint);
    sq_pack_cstr (&w->pk, serve_endpoint);
    s_pack_resources (&w->pk, resources, n);
    if (previous_cluster && *previous_cluster) {
        msgpack_pack_array (&w->pk, 2);
        sq_pack_cstr (&w->pk, previous_cluster);
        msgpack_pack_uint32 (&w->pk, previous_id);
    }
    else
        msgpack_pack_nil (&w->pk);
}

void
sq_welcome_encode_client (sq_wbuf_t *w, uint32_t req, uint32_t id, uint64_t inline_max,
                          const char *cluster, uint64_t epoch, const char *tenant)
{
    sq_reply_begin (w, req);
    msgpack_pack_array (&w->pk, 5);
    msgpack_pack_uint32 (&w->pk, id);
    msgpack_pack_uint64 (&w->pk, inline_max);
    sq_pack_cstr (&w->pk, cluster);
    msgpack_pack_uint64 (&w->pk, epoch);
    if (tenant)
        sq_pack_cstr (&w->pk, tenant);
    else
        msgpack_pack_nil (&w->pk);
}

void
sq_welcome_encode_governor (sq_wbuf_t *w, uint32_t req, uint32_t id, uint32_t heartbeat_ms,
                            uint64_t inline_max, const char *cluster, uint64_t epoch,
                            bool reattached, const uint8_t *secret, uint64_t broker_ms)
{
    sq_reply_begin (w, req);
    msgpack_pack_array (&w->pk, 8);
    msgpack_pack_uint32 (&w->pk, id);
    msgpack_pack_uint32 (&w->pk, heartbeat_ms);
    msgpack_pack_uint64 (&w->pk, inline_max);
    sq_pack_cstr (&w->pk, cluster);
    msgpack_pack_uint64 (&w->pk, epoch);
    if (reattached)
        msgpack_pack_true (&w->pk);
    else
        msgpack_pack_false (&w->pk);
    s_pack_bin_or_nil (&w->pk, secret, SQ_SECRET_LEN);
    msgpack_pack_uint64 (&w->pk, broker_ms);
}

int
sq_welcome_decode (sq_welcome_t *self, bool governor, const uint8_t *body, size_t size,
                   sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    mpr_init (&r, body, size);
    mpr_field (&r, "welcome");
    mpr_array_exact (&r, governor? 8: 5);
    mpr_field (&r, "id");
    mpr_u32 (&r, &self->id);
    if (governor) {
        mpr_field (&r, "heartbeat_ms");
        mpr_u32 (&r, &self->heartbeat_ms);
        if (mpr_ok (&r) && (self->heartbeat_ms == 0 || self->heartbeat_ms > 3600000))
            mpr_fail (&r, "out of range");
    }
    mpr_field (&r, "inline_max");
    mpr_uint (&r, &self->inline_max);
    mpr_field (&r, "cluster");
    mpr_str (&r, &self->cluster, SQ_MAX_NAME);
    mpr_field (&r, "epoch");
    mpr_uint (&r, &self->epoch);
    if (governor) {
        mpr_field (&r, "reattached");
        mpr_bool (&r, &self->reattached);
        mpr_field (&r, "secret");
        s_opt_bin (&r, &self->secret, SQ_SECRET_LEN);
        mpr_field (&r, "broker_ms");
        mpr_uint (&r, &self->broker_ms);
    }
    else {
        mpr_field (&r, "tenant");
        if (mpr_ok (&r) && !mpr_try_nil (&r))
            mpr_str (&r, &self->tenant, SQ_MAX_NAME);
    }
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "HELLO reply");
    return 0;
}

//  --------------------------------------------------------------------------
//  REPLY

int
sq_reply_decode (sq_reply_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    if (s_begin (&r, data, size, SQ_MSG_REPLY, 4))
        return s_error (&r, err, "REPLY");
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "code");
    mpr_u32 (&r, &self->code);
    mpr_field (&r, "body");
    if (mpr_ok (&r) && self->code >= SQ_E_COUNT_)
        mpr_fail (&r, "unknown error code");
    if (mpr_ok (&r) && self->code == SQ_OK)
        mpr_skip (&r, &self->body, &self->body_size);
    else
    if (mpr_ok (&r)) {
        mpr_array_exact (&r, 3);
        mpr_field (&r, "message");
        mpr_str (&r, &self->message, SQ_MAX_MESSAGE);
        mpr_field (&r, "id");
        s_opt_u32 (&r, &self->err_id);
        mpr_field (&r, "root");
        s_opt_u32 (&r, &self->err_root);
    }
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "REPLY");
    return 0;
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
    msgpack_pack_array (&w->pk, 4);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_REPLY);
    msgpack_pack_uint32 (&w->pk, req);
    msgpack_pack_uint32 (&w->pk, (uint32_t) code);
    msgpack_pack_array (&w->pk, 3);
    sq_pack_cstr (&w->pk, message);
    s_pack_int_or_nil (&w->pk, id);
    s_pack_int_or_nil (&w->pk, root);
}

//  --------------------------------------------------------------------------
//  Simple requests

static int
s_ids (mpr_t *r, uint32_t **ids, uint32_t *n_ids)
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
    for (uint32_t i = 0; i < n; i++)
        if (mpr_u32 (r, &(*ids) [i]))
            return -1;
    *n_ids = n;
    return 0;
}

const char *
sq_msg_name (uint32_t type)
{
    switch (type) {
        case SQ_MSG_HELLO: return "HELLO";
        case SQ_MSG_REPLY: return "REPLY";
        case SQ_MSG_SESSION_OPEN: return "SESSION_OPEN";
        case SQ_MSG_SESSION_CLOSE: return "SESSION_CLOSE";
        case SQ_MSG_SUBMIT: return "SUBMIT";
        case SQ_MSG_KEEP: return "KEEP";
        case SQ_MSG_UNKEEP: return "UNKEEP";
        case SQ_MSG_WAIT: return "WAIT";
        case SQ_MSG_FETCH: return "FETCH";
        case SQ_MSG_CANCEL: return "CANCEL";
        case SQ_MSG_INFO: return "INFO";
        case SQ_MSG_PING: return "PING";
        case SQ_MSG_RESUME: return "RESUME";
        case SQ_MSG_UPLOAD: return "UPLOAD";
        case SQ_MSG_UPDATE: return "UPDATE";
        case SQ_MSG_HEARTBEAT: return "HEARTBEAT";
        case SQ_MSG_LOAD: return "LOAD";
        case SQ_MSG_BYE: return "BYE";
        case SQ_MSG_ASSIGN: return "ASSIGN";
        case SQ_MSG_SEND: return "SEND";
        case SQ_MSG_DROP: return "DROP";
        case SQ_MSG_STOP: return "STOP";
        case SQ_MSG_RETRACT: return "RETRACT";
        case SQ_MSG_KEYS: return "KEYS";
        case SQ_MSG_OBJECT: return "OBJECT";
        case SQ_MSG_CHUNK: return "CHUNK";
        case SQ_MSG_CREDIT: return "CREDIT";
        case SQ_MSG_GFETCH: return "GFETCH";
        case SQ_MSG_GREAD: return "GREAD";
        case SQ_MSG_PUT: return "PUT";
        default: return NULL;
    }
}

int
sq_request_decode (sq_request_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    uint32_t type, req;
    memset (self, 0, sizeof *self);
    if (sq_proto_peek (data, size, &type, &req))
        return s_semantic (err, "request: not a msgpack array starting with a type");
    uint32_t fields;
    switch (type) {
        case SQ_MSG_SESSION_OPEN: case SQ_MSG_INFO: case SQ_MSG_PING:
            fields = 2; break;
        case SQ_MSG_SESSION_CLOSE:
            fields = 3; break;
        case SQ_MSG_KEEP: case SQ_MSG_UNKEEP: case SQ_MSG_CANCEL: case SQ_MSG_RESUME:
            fields = 4; break;
        case SQ_MSG_FETCH:
            fields = 5; break;
        case SQ_MSG_WAIT: case SQ_MSG_UPLOAD:
            fields = 6; break;
        default:
            return s_semantic (err, "unknown message type (not a client request)");
    }
    mpr_t r;
    self->type = type;
    s_begin (&r, data, size, type, fields);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    if (fields >= 3) {
        mpr_field (&r, "session");
        mpr_u32 (&r, &self->session);
    }
    switch (type) {
        case SQ_MSG_KEEP: case SQ_MSG_UNKEEP: case SQ_MSG_CANCEL:
            mpr_field (&r, "ids");
            s_ids (&r, &self->ids, &self->n_ids);
            break;
        case SQ_MSG_FETCH:
            mpr_field (&r, "id");
            mpr_u32 (&r, &self->id);
            mpr_field (&r, "timeout_ms");
            mpr_int (&r, &self->timeout_ms);
            break;
        case SQ_MSG_RESUME:
            mpr_field (&r, "token");
            mpr_bin (&r, &self->token, SQ_TOKEN_LEN);
            if (mpr_ok (&r) && self->token.len != SQ_TOKEN_LEN)
                mpr_fail (&r, "wrong number of bytes");
            break;
        case SQ_MSG_UPLOAD:
            mpr_field (&r, "id");
            mpr_u32 (&r, &self->id);
            mpr_field (&r, "size");
            mpr_uint (&r, &self->size);
            mpr_field (&r, "governor");
            mpr_u32 (&r, &self->governor);
            break;
        case SQ_MSG_WAIT:
            mpr_field (&r, "mode");
            mpr_u32 (&r, &self->mode);
            if (mpr_ok (&r) && self->mode > SQ_WAIT_SOME)
                mpr_fail (&r, "unknown wait mode");
            mpr_field (&r, "ids");
            s_ids (&r, &self->ids, &self->n_ids);
            mpr_field (&r, "timeout_ms");
            mpr_int (&r, &self->timeout_ms);
            break;
        default:
            break;
    }
    mpr_field (&r, NULL);
    if (mpr_end (&r)) {
        sq_request_release (self);
        return s_error (&r, err, sq_msg_name (type));
    }
    return 0;
}

void
sq_request_release (sq_request_t *self)
{
    free (self->ids);
    self->ids = NULL;
    self->n_ids = 0;
}

static void
s_pack_ids (msgpack_packer *pk, const uint32_t *ids, uint32_t n)
{
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint32 (pk, ids [i]);
}

void
sq_request_encode (sq_wbuf_t *w, const sq_request_t *q)
{
    msgpack_packer *pk = &w->pk;
    uint32_t fields = 2;
    switch (q->type) {
        case SQ_MSG_SESSION_CLOSE: fields = 3; break;
        case SQ_MSG_KEEP: case SQ_MSG_UNKEEP: case SQ_MSG_CANCEL: case SQ_MSG_RESUME:
            fields = 4; break;
        case SQ_MSG_FETCH: fields = 5; break;
        case SQ_MSG_WAIT: case SQ_MSG_UPLOAD: fields = 6; break;
        default: break;
    }
    msgpack_pack_array (pk, fields);
    msgpack_pack_uint32 (pk, q->type);
    msgpack_pack_uint32 (pk, q->req);
    if (fields >= 3)
        msgpack_pack_uint32 (pk, q->session);
    switch (q->type) {
        case SQ_MSG_KEEP: case SQ_MSG_UNKEEP: case SQ_MSG_CANCEL:
            s_pack_ids (pk, q->ids, q->n_ids);
            break;
        case SQ_MSG_FETCH:
            msgpack_pack_uint32 (pk, q->id);
            msgpack_pack_int64 (pk, q->timeout_ms);
            break;
        case SQ_MSG_RESUME:
            msgpack_pack_bin (pk, q->token.len);
            msgpack_pack_bin_body (pk, q->token.ptr, q->token.len);
            break;
        case SQ_MSG_UPLOAD:
            msgpack_pack_uint32 (pk, q->id);
            msgpack_pack_uint64 (pk, q->size);
            msgpack_pack_uint32 (pk, q->governor);
            break;
        case SQ_MSG_WAIT:
            msgpack_pack_uint32 (pk, q->mode);
            s_pack_ids (pk, q->ids, q->n_ids);
            msgpack_pack_int64 (pk, q->timeout_ms);
            break;
        default:
            break;
    }
}

void
sq_pack_session_opened (msgpack_packer *pk, uint32_t session, const uint8_t *token)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, session);
    msgpack_pack_bin (pk, SQ_TOKEN_LEN);
    msgpack_pack_bin_body (pk, token, SQ_TOKEN_LEN);
}

int
sq_session_opened_decode (const uint8_t *body, size_t size, uint32_t *session,
                          uint8_t *token, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_str_t t = { NULL, 0 };
    mpr_init (&r, body, size);
    mpr_field (&r, "session");
    mpr_array_exact (&r, 2);
    mpr_u32 (&r, session);
    mpr_field (&r, "token");
    mpr_bin (&r, &t, SQ_TOKEN_LEN);
    if (mpr_ok (&r) && t.len != SQ_TOKEN_LEN)
        mpr_fail (&r, "wrong number of bytes");
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "SESSION_OPEN reply");
    memcpy (token, t.ptr, SQ_TOKEN_LEN);
    return 0;
}

void
sq_pack_where (msgpack_packer *pk, uint32_t governor, const char *endpoint,
               const uint8_t *key, const uint8_t *capability, size_t capability_size)
{
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, governor);
    sq_pack_cstr (pk, endpoint);
    s_pack_bin_or_nil (pk, key, 32);
    s_pack_bin_or_nil (pk, capability, capability_size);
}

int
sq_where_read (mpr_t *r, sq_where_t *where)
{
    memset (where, 0, sizeof *where);
    mpr_field (r, "where");
    mpr_array_exact (r, 4);
    mpr_field (r, "where.governor");
    mpr_u32 (r, &where->governor);
    mpr_field (r, "where.endpoint");
    mpr_str (r, &where->endpoint, SQ_MAX_NAME);
    mpr_field (r, "where.key");
    s_opt_bin (r, &where->key, 32);
    mpr_field (r, "where.capability");
    s_opt_bin_max (r, &where->capability, SQ_CAP_MAX);
    return mpr_ok (r)? 0: -1;
}

int
sq_where_decode (sq_where_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, body, size);
    sq_where_read (&r, self);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "UPLOAD reply");
    return 0;
}

int
sq_fetched_decode (sq_fetched_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_array_exact (&r, 3);
    mpr_field (&r, "size");
    mpr_uint (&r, &self->size);
    mpr_field (&r, "content_type");
    mpr_str (&r, &self->content_type, SQ_MAX_NAME);
    if (mpr_ok (&r) && !mpr_try_nil (&r)) {
        self->located = true;
        sq_where_read (&r, &self->where);
    }
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "FETCH reply");
    return 0;
}

//  --------------------------------------------------------------------------
//  KEYS

static int
s_keylist (mpr_t *r, const uint8_t ***keys, uint32_t *n_keys)
{
    uint32_t n;
    *keys = NULL;
    *n_keys = 0;
    if (mpr_array (r, &n))
        return -1;
    if (n > SQ_MAX_KEYS)
        return mpr_fail (r, "too many keys");
    if (n == 0)
        return 0;
    *keys = (const uint8_t **) malloc (n * sizeof (uint8_t *));
    if (!*keys)
        return mpr_fail (r, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        mpr_str_t key;
        if (mpr_bin (r, &key, 32))
            return -1;
        if (key.len != 32)
            return mpr_fail (r, "a key is not 32 bytes");
        (*keys) [i] = (const uint8_t *) key.ptr;
        *n_keys = i + 1;
    }
    return 0;
}

int
sq_keyset_decode (sq_keyset_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    s_begin (&r, data, size, SQ_MSG_KEYS, 3);
    mpr_field (&r, "governors");
    if (mpr_ok (&r))
        s_keylist (&r, &self->governors, &self->n_governors);
    mpr_field (&r, "clients");
    if (mpr_ok (&r))
        s_keylist (&r, &self->clients, &self->n_clients);
    mpr_field (&r, NULL);
    if (mpr_end (&r)) {
        sq_keyset_release (self);
        return s_error (&r, err, "KEYS");
    }
    return 0;
}

void
sq_keyset_release (sq_keyset_t *self)
{
    free (self->governors);
    free (self->clients);
    memset (self, 0, sizeof *self);
}

void
sq_keyset_encode (sq_wbuf_t *w, const uint8_t *const *governors, uint32_t n_governors,
                  const uint8_t *const *clients, uint32_t n_clients)
{
    msgpack_pack_array (&w->pk, 3);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_KEYS);
    for (int list = 0; list < 2; list++) {
        const uint8_t *const *keys = list? clients: governors;
        uint32_t n = list? n_clients: n_governors;
        msgpack_pack_array (&w->pk, n);
        for (uint32_t i = 0; i < n; i++) {
            msgpack_pack_bin (&w->pk, 32);
            msgpack_pack_bin_body (&w->pk, keys [i], 32);
        }
    }
}

//  --------------------------------------------------------------------------
//  SUBMIT

//  Counts the ids and resources of n tasks on a copy of the reader; leaves
//  the counts alone unless the whole list reads cleanly.
static void
s_submit_count (mpr_t r, uint32_t n_tasks, size_t *n_ids, size_t *n_res)
{
    size_t ids = 0, res = 0;
    for (uint32_t i = 0; i < n_tasks && mpr_ok (&r); i++) {
        uint32_t n;
        mpr_array_exact (&r, 10);
        mpr_skip (&r, NULL, NULL);                  //  id
        mpr_skip (&r, NULL, NULL);                  //  kind
        for (int list = 0; list < 2; list++) {      //  inputs, outputs
            if (mpr_array (&r, &n) == 0) {
                ids += n;
                for (uint32_t j = 0; j < n; j++)
                    mpr_skip (&r, NULL, NULL);
            }
        }
        mpr_skip (&r, NULL, NULL);                  //  config
        if (!mpr_try_nil (&r) && mpr_map (&r, &n) == 0) {
            res += n;
            for (uint32_t j = 0; j < 2 * n; j++)
                mpr_skip (&r, NULL, NULL);
        }
        for (int j = 0; j < 4; j++)                 //  priority .. name
            mpr_skip (&r, NULL, NULL);
    }
    if (mpr_ok (&r)) {
        *n_ids = ids;
        *n_res = res;
    }
}

int
sq_submit_decode (sq_submit_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    s_begin (&r, data, size, SQ_MSG_SUBMIT, 5);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "session");
    mpr_u32 (&r, &self->session);
    mpr_field (&r, "objects");
    uint32_t n_objects = 0;
    mpr_array (&r, &n_objects);
    if (!mpr_ok (&r))
        return s_error (&r, err, "SUBMIT");
    if (n_objects) {
        self->objects = (sq_object_spec_t *) calloc (n_objects, sizeof (sq_object_spec_t));
        if (!self->objects)
            mpr_fail (&r, "out of memory");
    }
    for (uint32_t i = 0; i < n_objects && mpr_ok (&r); i++) {
        sq_object_spec_t *o = &self->objects [i];
        int64_t frame;
        mpr_field (&r, "object");
        mpr_array_exact (&r, 5);
        mpr_field (&r, "object.id");
        mpr_u32 (&r, &o->id);
        mpr_field (&r, "object.flags");
        mpr_u32 (&r, &o->flags);
        mpr_field (&r, "object.content_type");
        mpr_str (&r, &o->content_type, SQ_MAX_NAME);
        mpr_field (&r, "object.frame");
        if (mpr_peek (&r) == MPR_ARRAY) {
            //  [governor, size]: a constant the client uploaded there.
            mpr_array_exact (&r, 2);
            mpr_field (&r, "object.frame.governor");
            mpr_u32 (&r, &o->governor);
            mpr_field (&r, "object.frame.size");
            mpr_uint (&r, &o->size);
            frame = SQ_FRAME_UPLOADED;
        }
        else {
            mpr_int (&r, &frame);
            if (mpr_ok (&r) && (frame < -1 || frame >= SQ_MAX_FRAMES))
                mpr_fail (&r, "frame index out of range");
        }
        o->frame = (int32_t) frame;
        mpr_field (&r, "object.name");
        mpr_str (&r, &o->name, SQ_MAX_NAME);
        self->n_objects = i + 1;
    }
    mpr_field (&r, "tasks");
    uint32_t n_tasks = 0;
    mpr_array (&r, &n_tasks);
    if (!mpr_ok (&r)) {
        sq_submit_release (self);
        return s_error (&r, err, "SUBMIT");
    }
    //  A first, counting pass sizes the id and resource pools exactly: a
    //  bound from the bytes left would reserve several times the message
    //  for the usual task with one output and no resources. If it stops
    //  early (malformed input), the bound is used and the real pass below
    //  reports the error: every id takes at least one byte, a resource two.
    size_t left = r.size - r.pos, n_ids = left + 1, n_res = left / 2 + 1;
    s_submit_count (r, n_tasks, &n_ids, &n_res);
    if (n_tasks) {
        self->tasks = (sq_task_spec_t *) calloc (n_tasks, sizeof (sq_task_spec_t));
        self->id_pool = (uint32_t *) malloc (sizeof (uint32_t) * (n_ids + 1));
        self->res_pool = (sq_resource_t *) malloc (sizeof (sq_resource_t) * (n_res + 1));
        if (!self->tasks || !self->id_pool || !self->res_pool)
            mpr_fail (&r, "out of memory");
    }
    size_t ids_used = 0, res_used = 0;
    for (uint32_t i = 0; i < n_tasks && mpr_ok (&r); i++) {
        sq_task_spec_t *t = &self->tasks [i];
        uint32_t n;
        int64_t priority;
        mpr_field (&r, "task");
        mpr_array_exact (&r, 10);
        mpr_field (&r, "task.id");
        mpr_u32 (&r, &t->id);
        mpr_field (&r, "task.kind");
        mpr_str (&r, &t->kind, SQ_MAX_NAME);
        mpr_field (&r, "task.inputs");
        if (mpr_array (&r, &n) == 0) {
            t->inputs = self->id_pool + ids_used;
            t->n_inputs = n;
            for (uint32_t j = 0; j < n; j++)
                mpr_u32 (&r, &self->id_pool [ids_used++]);
        }
        mpr_field (&r, "task.outputs");
        if (mpr_array (&r, &n) == 0) {
            t->outputs = self->id_pool + ids_used;
            t->n_outputs = n;
            for (uint32_t j = 0; j < n; j++)
                mpr_u32 (&r, &self->id_pool [ids_used++]);
        }
        mpr_field (&r, "task.config");
        mpr_skip (&r, &t->config, &t->config_size);
        if (mpr_ok (&r) && t->config_size > SQ_MAX_CONFIG)
            mpr_fail (&r, "config too large");
        mpr_field (&r, "task.resources");
        t->resources = self->res_pool + res_used;
        s_resources (&r, t->resources, &t->n_resources, SQ_MAX_RESOURCES);
        res_used += t->n_resources;
        mpr_field (&r, "task.priority");
        mpr_int (&r, &priority);
        if (mpr_ok (&r) && (priority < INT32_MIN || priority > INT32_MAX))
            mpr_fail (&r, "priority out of 32-bit range");
        t->priority = (int32_t) priority;
        mpr_field (&r, "task.max_retries");
        mpr_u32 (&r, &t->max_retries);
        mpr_field (&r, "task.timeout_ms");
        mpr_u32 (&r, &t->timeout_ms);
        mpr_field (&r, "task.name");
        mpr_str (&r, &t->name, SQ_MAX_NAME);
        self->n_tasks = i + 1;
    }
    mpr_field (&r, NULL);
    if (mpr_end (&r)) {
        sq_submit_release (self);
        return s_error (&r, err, "SUBMIT");
    }
    return 0;
}

void
sq_submit_release (sq_submit_t *self)
{
    free (self->objects);
    free (self->tasks);
    free (self->id_pool);
    free (self->res_pool);
    memset (self, 0, sizeof *self);
}

void
sq_pack_submit_begin (msgpack_packer *pk, uint32_t req, uint32_t session)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_MSG_SUBMIT);
    msgpack_pack_uint32 (pk, req);
    msgpack_pack_uint32 (pk, session);
}

void
sq_pack_object_spec (msgpack_packer *pk, uint32_t id, uint32_t flags,
                     const char *content_type, int32_t frame, const char *name)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint32 (pk, flags);
    sq_pack_cstr (pk, content_type);
    msgpack_pack_int32 (pk, frame);
    sq_pack_cstr (pk, name);
}

void
sq_pack_object_uploaded (msgpack_packer *pk, uint32_t id, uint32_t flags,
                         const char *content_type, uint32_t governor, uint64_t size,
                         const char *name)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint32 (pk, flags);
    sq_pack_cstr (pk, content_type);
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, governor);
    msgpack_pack_uint64 (pk, size);
    sq_pack_cstr (pk, name);
}

void
sq_pack_task_spec (msgpack_packer *pk, const sq_task_spec_t *t)
{
    msgpack_pack_array (pk, 10);
    msgpack_pack_uint32 (pk, t->id);
    sq_pack_mstr (pk, t->kind);
    s_pack_ids (pk, t->inputs, t->n_inputs);
    s_pack_ids (pk, t->outputs, t->n_outputs);
    if (t->config && t->config_size)
        msgpack_pack_str_body (pk, t->config, t->config_size);   //  raw bytes
    else
        msgpack_pack_nil (pk);
    s_pack_resources (pk, t->resources, t->n_resources);
    msgpack_pack_int32 (pk, t->priority);
    msgpack_pack_uint32 (pk, t->max_retries);
    msgpack_pack_uint32 (pk, t->timeout_ms);
    sq_pack_mstr (pk, t->name);
}

//  --------------------------------------------------------------------------
//  Iterating readers

static int
s_iter_begin (sq_iter_t *self, const void *data, size_t size, uint32_t type,
              sq_errbuf_t *err, const char *what)
{
    memset (self, 0, sizeof *self);
    self->err = err;
    s_begin (&self->r, data, size, type, 2);
    mpr_field (&self->r, "elements");
    mpr_array (&self->r, &self->left);
    if (!mpr_ok (&self->r))
        return s_error (&self->r, err, what);
    return 0;
}

//  0 at a clean end, 1 when an element follows, -1 on error.
static int
s_iter_more (sq_iter_t *self, const char *what)
{
    if (!mpr_ok (&self->r))
        return s_error (&self->r, self->err, what);
    if (self->left == 0) {
        mpr_field (&self->r, NULL);
        if (mpr_end (&self->r))
            return s_error (&self->r, self->err, what);
        return 0;
    }
    self->left--;
    return 1;
}

static void *
s_scratch (sq_iter_t *self, size_t bytes)
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

static int
s_frame_index (mpr_t *r, int32_t *frame)
{
    int64_t f;
    if (mpr_int (r, &f))
        return -1;
    if (f < -1 || f >= SQ_MAX_FRAMES)
        return mpr_fail (r, "frame index out of range");
    *frame = (int32_t) f;
    return 0;
}

//  UPDATE ---------------------------------------------------------------

int
sq_update_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return s_iter_begin (self, data, size, SQ_MSG_UPDATE, err, "UPDATE");
}

int
sq_update_next (sq_iter_t *self, sq_event_t *ev)
{
    int more = s_iter_more (self, "UPDATE");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    uint32_t n;
    memset (ev, 0, sizeof *ev);
    mpr_field (r, "event");
    mpr_array (r, &n);
    mpr_field (r, "event.type");
    mpr_u32 (r, &ev->type);
    if (!mpr_ok (r))
        return s_error (r, self->err, "UPDATE");
    uint32_t want = ev->type == SQ_EV_FINISHED? 5:
                    ev->type == SQ_EV_FAILED? 6:
                    ev->type == SQ_EV_STARTED? 3:
                    ev->type == SQ_EV_RETRACTED? 3:
                    ev->type == SQ_EV_LOCATED? 3:
                    ev->type == SQ_EV_UPLOADED? 3:
                    ev->type == SQ_EV_LOST? 2:
                    ev->type == SQ_EV_HELD? 4:
                    ev->type == SQ_EV_RUNNING? 3:
                    ev->type == SQ_EV_INVENTORY? 1: 0;
    if (want == 0)
        mpr_fail (r, "unknown event type");
    else
    if (n != want)
        mpr_fail (r, "wrong number of fields");
    if (ev->type != SQ_EV_INVENTORY) {
        mpr_field (r, "event.key");
        mpr_uint (r, &ev->key);
    }
    switch (ev->type) {
        case SQ_EV_FINISHED: {
            mpr_field (r, "event.attempt");
            mpr_u32 (r, &ev->attempt);
            mpr_field (r, "event.outputs");
            if (mpr_array (r, &n) == 0) {
                sq_output_ref_t *outs = (sq_output_ref_t *) s_scratch (self, sizeof (sq_output_ref_t) * (n + 1));
                for (uint32_t i = 0; outs && i < n; i++) {
                    mpr_array_exact (r, 3);
                    mpr_uint (r, &outs [i].key);
                    mpr_uint (r, &outs [i].size);
                    s_frame_index (r, &outs [i].frame);
                }
                ev->outputs = outs;
                ev->n_outputs = n;
            }
            mpr_field (r, "event.duration_us");
            mpr_uint (r, &ev->duration_us);
            break;
        }
        case SQ_EV_FAILED:
            mpr_field (r, "event.attempt");
            mpr_u32 (r, &ev->attempt);
            mpr_field (r, "event.message");
            mpr_str (r, &ev->message, SQ_MAX_MESSAGE);
            mpr_field (r, "event.duration_us");
            mpr_uint (r, &ev->duration_us);
            mpr_field (r, "event.reason");
            if (mpr_u32 (r, &ev->reason) == 0 && ev->reason > SQ_FAIL_MEMORY)
                mpr_fail (r, "unknown failure reason");
            break;
        case SQ_EV_STARTED:
        case SQ_EV_RETRACTED:
        case SQ_EV_RUNNING:
            mpr_field (r, "event.attempt");
            mpr_u32 (r, &ev->attempt);
            break;
        case SQ_EV_HELD:
            mpr_field (r, "event.version");
            mpr_u32 (r, &ev->attempt);
            mpr_field (r, "event.size");
            mpr_uint (r, &ev->size);
            break;
        case SQ_EV_LOCATED:
        case SQ_EV_UPLOADED:
            mpr_field (r, "event.size");
            mpr_uint (r, &ev->size);
            break;
        default:
            break;
    }
    if (!mpr_ok (r))
        return s_error (r, self->err, "UPDATE");
    return 1;
}

void
sq_pack_finished (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                  const sq_output_ref_t *outputs, uint32_t n, uint64_t duration_us)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_EV_FINISHED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++) {
        msgpack_pack_array (pk, 3);
        msgpack_pack_uint64 (pk, outputs [i].key);
        msgpack_pack_uint64 (pk, outputs [i].size);
        msgpack_pack_int32 (pk, outputs [i].frame);
    }
    msgpack_pack_uint64 (pk, duration_us);
}

void
sq_pack_failed_reason (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                       const char *message, uint64_t duration_us, uint32_t reason)
{
    msgpack_pack_array (pk, 6);
    msgpack_pack_uint32 (pk, SQ_EV_FAILED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
    sq_pack_cstr (pk, message);
    msgpack_pack_uint64 (pk, duration_us);
    msgpack_pack_uint32 (pk, reason);
}

void
sq_pack_failed (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                const char *message, uint64_t duration_us)
{
    sq_pack_failed_reason (pk, task, attempt, message, duration_us, SQ_FAIL_TASK);
}

void
sq_pack_started (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_EV_STARTED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
}

void
sq_pack_retracted (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_EV_RETRACTED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
}

void
sq_pack_held (msgpack_packer *pk, uint64_t object, uint32_t version, uint64_t size)
{
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, SQ_EV_HELD);
    msgpack_pack_uint64 (pk, object);
    msgpack_pack_uint32 (pk, version);
    msgpack_pack_uint64 (pk, size);
}

void
sq_pack_running (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_EV_RUNNING);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
}

void
sq_pack_inventory_end (msgpack_packer *pk)
{
    msgpack_pack_array (pk, 1);
    msgpack_pack_uint32 (pk, SQ_EV_INVENTORY);
}

void
sq_pack_located (msgpack_packer *pk, uint64_t object, uint64_t size)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_EV_LOCATED);
    msgpack_pack_uint64 (pk, object);
    msgpack_pack_uint64 (pk, size);
}

void
sq_pack_lost (msgpack_packer *pk, uint64_t object)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, SQ_EV_LOST);
    msgpack_pack_uint64 (pk, object);
}

void
sq_pack_uploaded (msgpack_packer *pk, uint64_t object, uint64_t size)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_EV_UPLOADED);
    msgpack_pack_uint64 (pk, object);
    msgpack_pack_uint64 (pk, size);
}

//  LOAD, HEARTBEAT, BYE -----------------------------------------------------

int
sq_load_decode (sq_load_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    s_begin (&r, data, size, SQ_MSG_LOAD, 7);
    mpr_field (&r, "running");
    mpr_uint (&r, &self->running);
    mpr_field (&r, "queued");
    mpr_uint (&r, &self->queued);
    mpr_field (&r, "memory");
    mpr_uint (&r, &self->memory);
    mpr_field (&r, "spilled");
    mpr_uint (&r, &self->spilled);
    mpr_field (&r, "objects");
    mpr_uint (&r, &self->objects);
    mpr_field (&r, "tasks");
    mpr_uint (&r, &self->tasks);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "LOAD");
    return 0;
}

void
sq_load_encode (sq_wbuf_t *w, const sq_load_t *load)
{
    msgpack_pack_array (&w->pk, 7);
    msgpack_pack_uint32 (&w->pk, SQ_MSG_LOAD);
    msgpack_pack_uint64 (&w->pk, load->running);
    msgpack_pack_uint64 (&w->pk, load->queued);
    msgpack_pack_uint64 (&w->pk, load->memory);
    msgpack_pack_uint64 (&w->pk, load->spilled);
    msgpack_pack_uint64 (&w->pk, load->objects);
    msgpack_pack_uint64 (&w->pk, load->tasks);
}

void
sq_bare_encode (sq_wbuf_t *w, uint32_t type)
{
    msgpack_pack_array (&w->pk, 1);
    msgpack_pack_uint32 (&w->pk, type);
}

int
sq_bare_decode (const void *data, size_t size, uint32_t type, sq_errbuf_t *err)
{
    mpr_t r;
    s_begin (&r, data, size, type, 1);
    if (mpr_end (&r))
        return s_error (&r, err, type == SQ_MSG_BYE? "BYE": "HEARTBEAT");
    return 0;
}

//  ASSIGN ---------------------------------------------------------------

int
sq_assign_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return s_iter_begin (self, data, size, SQ_MSG_ASSIGN, err, "ASSIGN");
}

int
sq_assign_next (sq_iter_t *self, sq_assign_t *t)
{
    int more = s_iter_more (self, "ASSIGN");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    uint32_t n_in = 0, n_out = 0;
    memset (t, 0, sizeof *t);
    mpr_field (r, "task");
    mpr_array_exact (r, 10);
    mpr_field (r, "task.key");
    mpr_uint (r, &t->key);
    mpr_field (r, "task.attempt");
    mpr_u32 (r, &t->attempt);
    mpr_field (r, "task.kind");
    mpr_str (r, &t->kind, SQ_MAX_NAME);
    mpr_field (r, "task.config");
    mpr_skip (r, &t->config, &t->config_size);
    //  Inputs and outputs share one scratch block: inputs first. The counts
    //  are bounded by the bytes left, so the block is too.
    mpr_field (r, "task.inputs");
    mpr_array (r, &n_in);
    size_t in_bytes = sizeof (sq_input_ref_t) * n_in;
    size_t out_max = r->size - r->pos;
    char *block = mpr_ok (r)? (char *) s_scratch (self, in_bytes + sizeof (sq_out_decl_t) * (out_max + 1)): NULL;
    if (!block)
        return s_error (r, self->err, "ASSIGN");
    t->inputs = (sq_input_ref_t *) block;
    for (uint32_t i = 0; i < n_in && mpr_ok (r); i++) {
        sq_input_ref_t *in = &t->inputs [i];
        mpr_array_exact (r, 4);
        mpr_uint (r, &in->key);
        mpr_uint (r, &in->size);
        s_frame_index (r, &in->frame);
        mpr_str (r, &in->content_type, SQ_MAX_NAME);
    }
    t->n_inputs = n_in;
    mpr_field (r, "task.outputs");
    mpr_array (r, &n_out);
    t->outputs = (sq_out_decl_t *) (block + in_bytes);
    for (uint32_t i = 0; i < n_out && mpr_ok (r); i++) {
        mpr_array_exact (r, 2);
        mpr_uint (r, &t->outputs [i].key);
        mpr_str (r, &t->outputs [i].content_type, SQ_MAX_NAME);
    }
    t->n_outputs = n_out;
    mpr_field (r, "task.cpus");
    mpr_u32 (r, &t->cpus);
    mpr_field (r, "task.timeout_ms");
    mpr_u32 (r, &t->timeout_ms);
    mpr_field (r, "task.name");
    mpr_str (r, &t->name, SQ_MAX_NAME);
    mpr_field (r, "task.resources");
    s_resources (r, t->resources, &t->n_resources, SQ_MAX_RESOURCES);
    if (!mpr_ok (r))
        return s_error (r, self->err, "ASSIGN");
    return 1;
}

void
sq_pack_assign (msgpack_packer *pk, const sq_assign_t *t)
{
    msgpack_pack_array (pk, 10);
    msgpack_pack_uint64 (pk, t->key);
    msgpack_pack_uint32 (pk, t->attempt);
    sq_pack_mstr (pk, t->kind);
    if (t->config && t->config_size)
        msgpack_pack_str_body (pk, t->config, t->config_size);
    else
        msgpack_pack_nil (pk);
    msgpack_pack_array (pk, t->n_inputs);
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        msgpack_pack_array (pk, 4);
        msgpack_pack_uint64 (pk, t->inputs [i].key);
        msgpack_pack_uint64 (pk, t->inputs [i].size);
        msgpack_pack_int32 (pk, t->inputs [i].frame);
        sq_pack_mstr (pk, t->inputs [i].content_type);
    }
    msgpack_pack_array (pk, t->n_outputs);
    for (uint32_t i = 0; i < t->n_outputs; i++) {
        msgpack_pack_array (pk, 2);
        msgpack_pack_uint64 (pk, t->outputs [i].key);
        sq_pack_mstr (pk, t->outputs [i].content_type);
    }
    msgpack_pack_uint32 (pk, t->cpus);
    msgpack_pack_uint32 (pk, t->timeout_ms);
    sq_pack_mstr (pk, t->name);
    s_pack_resources (pk, t->resources, t->n_resources);
}

//  SEND, DROP, STOP -------------------------------------------------------

int
sq_send_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return s_iter_begin (self, data, size, SQ_MSG_SEND, err, "SEND");
}

int
sq_send_next (sq_iter_t *self, sq_send_t *o)
{
    int more = s_iter_more (self, "SEND");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    mpr_field (r, "order");
    mpr_array_exact (r, 5);
    mpr_uint (r, &o->key);
    mpr_u32 (r, &o->version);
    mpr_u32 (r, &o->to);
    mpr_str (r, &o->endpoint, SQ_MAX_NAME);
    mpr_field (r, "order.to_key");
    s_opt_bin (r, &o->to_key, 32);
    if (!mpr_ok (r))
        return s_error (r, self->err, "SEND");
    return 1;
}

void
sq_pack_send (msgpack_packer *pk, uint64_t key, uint32_t version, uint32_t to,
              const char *endpoint, const uint8_t *to_key)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint64 (pk, key);
    msgpack_pack_uint32 (pk, version);
    msgpack_pack_uint32 (pk, to);
    sq_pack_cstr (pk, endpoint);
    s_pack_bin_or_nil (pk, to_key, 32);
}

int
sq_keys_begin (sq_iter_t *self, uint32_t type, const void *data, size_t size,
               sq_errbuf_t *err)
{
    return s_iter_begin (self, data, size, type, err, type == SQ_MSG_DROP? "DROP":
                         type == SQ_MSG_RETRACT? "RETRACT": "STOP");
}

int
sq_drop_next (sq_iter_t *self, uint64_t *key)
{
    int more = s_iter_more (self, "DROP");
    if (more <= 0)
        return more;
    mpr_field (&self->r, "object");
    if (mpr_uint (&self->r, key))
        return s_error (&self->r, self->err, "DROP");
    return 1;
}

int
sq_stop_next (sq_iter_t *self, uint64_t *key, uint32_t *attempt)
{
    int more = s_iter_more (self, "STOP");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    mpr_field (r, "task");
    mpr_array_exact (r, 2);
    mpr_uint (r, key);
    mpr_u32 (r, attempt);
    if (!mpr_ok (r))
        return s_error (r, self->err, "STOP");
    return 1;
}

void
sq_batch_header (sq_wbuf_t *w, uint32_t type, uint32_t count)
{
    msgpack_pack_array (&w->pk, 2);
    msgpack_pack_uint32 (&w->pk, type);
    msgpack_pack_array (&w->pk, count);
}

//  OBJECT, GFETCH -----------------------------------------------------------

int
sq_object_decode (sq_object_msg_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    s_begin (&r, data, size, SQ_MSG_OBJECT, 6);
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
        return s_error (&r, err, "OBJECT");
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
    s_begin (&r, data, size, SQ_MSG_GFETCH, 4);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "capability");
    s_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "GFETCH");
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
    s_pack_bin_or_nil (&w->pk, capability, capability_size);
}

//  --------------------------------------------------------------------------
//  Chunked copies and ranged reads

int
sq_chunk_decode (sq_chunk_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    s_begin (&r, data, size, SQ_MSG_CHUNK, 9);
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
        return s_error (&r, err, "CHUNK");
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
    s_begin (&r, data, size, SQ_MSG_CREDIT, 4);
    mpr_field (&r, "transfer");
    mpr_u32 (&r, &self->transfer);
    mpr_field (&r, "object");
    mpr_uint (&r, &self->key);
    mpr_field (&r, "credits");
    mpr_u32 (&r, &self->credits);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "CREDIT");
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

int
sq_gread_decode (sq_gread_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    s_begin (&r, data, size, SQ_MSG_GREAD, 6);
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
    s_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "GREAD");
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
    s_pack_bin_or_nil (&w->pk, (const uint8_t *) m->capability.ptr, m->capability.len);
}

int
sq_put_decode (sq_put_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    s_begin (&r, data, size, SQ_MSG_PUT, 7);
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
    s_opt_bin_max (&r, &self->capability, SQ_CAP_MAX);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "PUT");
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
    s_pack_bin_or_nil (&w->pk, (const uint8_t *) m->capability.ptr, m->capability.len);
}

//  --------------------------------------------------------------------------
//  Reply bodies of client requests and of the serve socket

void
sq_pack_wait_head (msgpack_packer *pk, uint32_t finished, uint32_t failed, uint32_t listed)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, finished);
    msgpack_pack_uint32 (pk, failed);
    msgpack_pack_array (pk, listed);
}

void
sq_pack_done (msgpack_packer *pk, uint32_t id, uint32_t state, uint32_t root, const char *message)
{
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint32 (pk, state);
    if (message) {
        msgpack_pack_uint32 (pk, root);
        sq_pack_cstr (pk, message);
    }
    else {
        msgpack_pack_nil (pk);
        msgpack_pack_nil (pk);
    }
}

int
sq_wait_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size, uint32_t max_listed,
                     uint64_t *finished, uint64_t *failed, sq_errbuf_t *err)
{
    memset (self, 0, sizeof *self);
    self->err = err;
    mpr_t *r = &self->r;
    mpr_init (r, body, size);
    mpr_field (r, "body");
    mpr_array_exact (r, 3);
    mpr_field (r, "n_finished");
    mpr_uint (r, finished);
    mpr_field (r, "n_failed");
    mpr_uint (r, failed);
    mpr_field (r, "states");
    mpr_array (r, &self->left);
    if (mpr_ok (r) && self->left > max_listed)
        mpr_fail (r, "more states than ids asked for");
    if (!mpr_ok (r))
        return s_error (r, err, "WAIT reply");
    return 0;
}

int
sq_wait_reply_next (sq_iter_t *self, sq_done_t *done)
{
    int more = s_iter_more (self, "WAIT reply");
    if (more <= 0)
        return more;
    mpr_t *r = &self->r;
    memset (done, 0, sizeof *done);
    mpr_field (r, "state entry");
    mpr_array_exact (r, 4);
    mpr_field (r, "id");
    mpr_u32 (r, &done->id);
    mpr_field (r, "state");
    mpr_u32 (r, &done->state);
    if (mpr_ok (r) && done->state > SQ_STATE_CANCELLED)
        mpr_fail (r, "unknown state");
    mpr_field (r, "root");
    if (!mpr_try_nil (r))
        mpr_u32 (r, &done->root);
    mpr_field (r, "message");
    if (!mpr_try_nil (r))
        mpr_str (r, &done->message, SQ_MAX_MESSAGE);
    if (!mpr_ok (r))
        return s_error (r, self->err, "WAIT reply");
    return 1;
}

void
sq_pack_fetched_inline (msgpack_packer *pk, uint64_t size, const char *content_type)
{
    sq_pack_fetched_head (pk, size, content_type);
    msgpack_pack_nil (pk);
}

void
sq_pack_fetched_head (msgpack_packer *pk, uint64_t size, const char *content_type)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint64 (pk, size);
    sq_pack_cstr (pk, content_type);
}

void
sq_pack_resumed (msgpack_packer *pk, uint32_t max_id)
{
    msgpack_pack_array (pk, 1);
    msgpack_pack_uint32 (pk, max_id);
}

int
sq_resumed_decode (const uint8_t *body, size_t size, uint32_t *max_id, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_array_exact (&r, 1);
    mpr_field (&r, "max_id");
    mpr_u32 (&r, max_id);
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "RESUME reply");
    return 0;
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
    mpr_field (&r, NULL);
    if (mpr_end (&r))
        return s_error (&r, err, "reply");
    return 0;
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

void
sq_pack_submit_objects (msgpack_packer *pk, uint32_t n_objects)
{
    msgpack_pack_array (pk, n_objects);
}

void
sq_pack_submit_tasks (msgpack_packer *pk, uint32_t n_tasks)
{
    msgpack_pack_array (pk, n_tasks);
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
        return s_error (&r, err, "GREAD reply");
    return 0;
}

void
sq_pack_drop (msgpack_packer *pk, uint64_t object)
{
    msgpack_pack_uint64 (pk, object);
}

void
sq_pack_stop (msgpack_packer *pk, uint64_t task, uint32_t attempt)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
}
