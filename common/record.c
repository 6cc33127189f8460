/*  record: journal records, framed and checksummed. */
#include "record.h"
#include "proto.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  CRC-32C (Castagnoli), table-driven: fast enough at a few bytes per task
//  and catches torn writes and flipped bits far better than a sum.
static uint32_t s_table [256];
static pthread_once_t s_table_once = PTHREAD_ONCE_INIT;

static void
s_table_init (void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1? (c >> 1) ^ 0x82F63B78u: c >> 1;
        s_table [i] = c;
    }
}

uint32_t
sq_crc32c (uint32_t crc, const void *data, size_t size)
{
    pthread_once (&s_table_once, s_table_init);
    const uint8_t *p = (const uint8_t *) data;
    crc = ~crc;
    for (size_t i = 0; i < size; i++)
        crc = s_table [(crc ^ p [i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void
s_put32 (uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p [i] = (uint8_t) (v >> (8 * i));
}

static uint32_t
s_get32 (const uint8_t *p)
{
    return (uint32_t) p [0] | (uint32_t) p [1] << 8 | (uint32_t) p [2] << 16
         | (uint32_t) p [3] << 24;
}

size_t
sq_rec_begin (msgpack_sbuffer *buf)
{
    static const char zero [SQ_REC_HEAD] = { 0 };
    size_t offset = buf->size;
    msgpack_sbuffer_write (buf, zero, SQ_REC_HEAD);
    return offset;
}

void
sq_rec_end (msgpack_sbuffer *buf, size_t offset)
{
    uint8_t *head = (uint8_t *) buf->data + offset;
    size_t body = buf->size - offset - SQ_REC_HEAD;
    s_put32 (head, (uint32_t) body);
    s_put32 (head + 4, sq_crc32c (0, head + SQ_REC_HEAD, body));
}

int
sq_rec_next (const uint8_t *data, size_t size, size_t *pos, const uint8_t **body,
             size_t *body_size, const char **why)
{
    if (*pos == size)
        return 0;
    if (size - *pos < SQ_REC_HEAD) {
        *why = "a record's head is cut short";
        return -2;
    }
    uint32_t length = s_get32 (data + *pos), crc = s_get32 (data + *pos + 4);
    if (length == 0 || length > SQ_REC_MAX) {
        *why = "a record's length is out of range";
        return -1;
    }
    if (size - *pos - SQ_REC_HEAD < length) {
        *why = "a record is cut short";
        return -2;
    }
    const uint8_t *b = data + *pos + SQ_REC_HEAD;
    if (sq_crc32c (0, b, length) != crc) {
        *why = "a record's checksum does not match";
        return -1;
    }
    *body = b;
    *body_size = length;
    *pos += SQ_REC_HEAD + length;
    return 1;
}

//  --------------------------------------------------------------------------
//  Bodies

static int
s_opt_str (mpr_t *r, mpr_str_t *value, uint32_t max)
{
    value->ptr = NULL;
    value->len = 0;
    if (mpr_try_nil (r))
        return 0;
    return mpr_str (r, value, max);
}

static int
s_ids (mpr_t *r, sq_rec_t *self)
{
    uint32_t n;
    if (mpr_array (r, &n))
        return -1;
    if (n == 0)
        return 0;
    self->ids = (uint32_t *) malloc (n * sizeof (uint32_t));
    if (!self->ids)
        return mpr_fail (r, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        if (mpr_u32 (r, &self->ids [i]))
            return -1;
        self->n_ids = i + 1;
    }
    return 0;
}

//  ELEMENT's and ENDED's last fields: exit|nil, governor, [attempts,]
//  started, ended.
static void
s_run_fields (mpr_t *r, sq_rec_t *self)
{
    mpr_field (r, "exit_code");
    if (!mpr_try_nil (r)) {
        int64_t code = 0;
        if (mpr_int (r, &code) == 0 && (code < INT32_MIN || code > INT32_MAX))
            mpr_fail (r, "not an i32");
        self->has_exit_code = true;
        self->exit_code = (int32_t) code;
    }
    mpr_field (r, "governor");
    mpr_u32 (r, &self->governor);
    if (self->type == SQ_REC_ELEMENT) {
        mpr_field (r, "attempts");
        mpr_u32 (r, &self->attempts);
    }
    mpr_field (r, "started_ms");
    mpr_uint (r, &self->started_ms);
    mpr_field (r, "ended_ms");
    mpr_uint (r, &self->ended_ms);
}

static void
s_pack_run_fields (msgpack_packer *pk, const sq_rec_t *rec)
{
    if (rec->has_exit_code)
        msgpack_pack_int32 (pk, rec->exit_code);
    else
        msgpack_pack_nil (pk);
    msgpack_pack_uint32 (pk, rec->governor);
    if (rec->type == SQ_REC_ELEMENT)
        msgpack_pack_uint32 (pk, rec->attempts);
    msgpack_pack_uint64 (pk, rec->started_ms);
    msgpack_pack_uint64 (pk, rec->ended_ms);
}

void
sq_rec_pack_job (msgpack_packer *pk, uint32_t session, const char *name, bool detached,
                 uint64_t created_ms, const uint32_t *after, uint32_t n_after)
{
    msgpack_pack_array (pk, n_after? 6: 5);
    msgpack_pack_uint32 (pk, SQ_REC_JOB);
    msgpack_pack_uint32 (pk, session);
    if (name) {
        size_t len = strlen (name);
        msgpack_pack_str (pk, len);
        msgpack_pack_str_body (pk, name, len);
    }
    else
        msgpack_pack_nil (pk);
    if (detached) msgpack_pack_true (pk); else msgpack_pack_false (pk);
    msgpack_pack_uint64 (pk, created_ms);
    if (n_after) {
        msgpack_pack_array (pk, n_after);
        for (uint32_t i = 0; i < n_after; i++)
            msgpack_pack_uint32 (pk, after [i]);
    }
}

void
sq_rec_pack_element (msgpack_packer *pk, const sq_rec_t *rec)
{
    msgpack_pack_array (pk, 10);
    msgpack_pack_uint32 (pk, SQ_REC_ELEMENT);
    msgpack_pack_uint32 (pk, rec->session);
    msgpack_pack_uint32 (pk, rec->id);
    msgpack_pack_uint64 (pk, rec->k);
    msgpack_pack_uint32 (pk, rec->state);
    s_pack_run_fields (pk, rec);
}

void
sq_rec_pack_ended (msgpack_packer *pk, const sq_rec_t *rec)
{
    msgpack_pack_array (pk, 6);
    msgpack_pack_uint32 (pk, SQ_REC_ENDED);
    msgpack_pack_uint64 (pk, rec->key);
    s_pack_run_fields (pk, rec);
}

int
sq_rec_decode (sq_rec_t *self, const uint8_t *body, size_t size, char *err, size_t err_size)
{
    static const uint32_t fields [SQ_REC_TYPES_] = {
        0, 4, 2, 5, 4, 3, 3, 3, 2, 4, 5, 6, 5, 2, 3, 3, 5, 10, 0, 3, 6
    };
    mpr_t r;
    uint32_t n, count;
    memset (self, 0, sizeof *self);
    mpr_init (&r, body, size);
    mpr_field (&r, "record");
    mpr_array (&r, &n);
    mpr_field (&r, "type");
    mpr_u32 (&r, &self->type);
    if (mpr_ok (&r) && (self->type == 0 || self->type >= SQ_REC_TYPES_))
        mpr_fail (&r, "unknown record type");
    if (mpr_ok (&r) && n != fields [self->type] && !(self->type == SQ_REC_JOB && n == 6))
        mpr_fail (&r, "wrong number of fields");
    if (!mpr_ok (&r))
        goto done;
    switch (self->type) {
        case SQ_REC_HEADER: {
            uint32_t format;
            mpr_field (&r, "format");
            if (mpr_u32 (&r, &format) == 0 && format != SQ_REC_FORMAT)
                mpr_fail (&r, "a journal format this broker does not know");
            mpr_field (&r, "cluster");
            mpr_str (&r, &self->cluster, SQ_MAX_NAME);
            if (mpr_ok (&r) && self->cluster.len != SQ_CLUSTER_ID_LEN)
                mpr_fail (&r, "not a cluster id");
            mpr_field (&r, "epoch");
            mpr_uint (&r, &self->epoch);
            break;
        }
        case SQ_REC_EPOCH:
            mpr_field (&r, "epoch");
            mpr_uint (&r, &self->epoch);
            break;
        case SQ_REC_SESSION:
            mpr_field (&r, "session");
            mpr_u32 (&r, &self->session);
            mpr_field (&r, "token");
            mpr_bin (&r, &self->token, SQ_TOKEN_LEN);
            if (mpr_ok (&r) && self->token.len != SQ_TOKEN_LEN)
                mpr_fail (&r, "wrong number of bytes");
            mpr_field (&r, "tenant");
            s_opt_str (&r, &self->tenant, SQ_MAX_NAME);
            mpr_field (&r, "owner");
            s_opt_str (&r, &self->owner, SQ_MAX_NAME);
            break;
        case SQ_REC_SUBMIT:
            mpr_field (&r, "session");
            mpr_u32 (&r, &self->session);
            mpr_field (&r, "frame0");
            mpr_bin (&r, &self->frame0, SQ_REC_MAX);
            mpr_field (&r, "payloads");
            if (mpr_array (&r, &count) == 0 && count > SQ_MAX_FRAMES)
                mpr_fail (&r, "too many payloads");
            if (mpr_ok (&r) && count) {
                self->payloads = (mpr_str_t *) calloc (count, sizeof (mpr_str_t));
                if (!self->payloads)
                    mpr_fail (&r, "out of memory");
            }
            for (uint32_t i = 0; mpr_ok (&r) && i < count; i++) {
                mpr_bin (&r, &self->payloads [i], SQ_REC_MAX);
                self->n_payloads = i + 1;
            }
            break;
        case SQ_REC_JOB:
            mpr_field (&r, "session");
            mpr_u32 (&r, &self->session);
            mpr_field (&r, "name");
            s_opt_str (&r, &self->name, 128);
            mpr_field (&r, "detached");
            mpr_bool (&r, &self->detached);
            mpr_field (&r, "created_ms");
            mpr_uint (&r, &self->created_ms);
            mpr_field (&r, "after");
            if (n == 6 && s_ids (&r, self) == 0 && self->n_ids > SQ_AFTER_MAX)
                mpr_fail (&r, "more than 64 jobs");
            break;
        case SQ_REC_ELEMENT:
            mpr_field (&r, "session");
            mpr_u32 (&r, &self->session);
            mpr_field (&r, "task");
            mpr_u32 (&r, &self->id);
            mpr_field (&r, "k");
            mpr_uint (&r, &self->k);
            mpr_field (&r, "state");
            if (mpr_u32 (&r, &self->state) == 0 && (self->state < 1 || self->state > 3))
                mpr_fail (&r, "not a final state");
            s_run_fields (&r, self);
            break;
        case SQ_REC_ENDED:
            mpr_field (&r, "task");
            mpr_uint (&r, &self->key);
            s_run_fields (&r, self);
            break;
        case SQ_REC_KEEP: case SQ_REC_UNKEEP: case SQ_REC_CANCEL: case SQ_REC_DELETE:
        case SQ_REC_RESUBMIT:
            mpr_field (&r, "session");
            mpr_u32 (&r, &self->session);
            mpr_field (&r, "ids");
            s_ids (&r, self);
            break;
        case SQ_REC_CLOSE:
            mpr_field (&r, "session");
            mpr_u32 (&r, &self->session);
            break;
        case SQ_REC_FINISHED:
            mpr_field (&r, "task");
            mpr_uint (&r, &self->key);
            mpr_field (&r, "attempt");
            mpr_u32 (&r, &self->attempt);
            mpr_field (&r, "outputs");
            mpr_array (&r, &count);
            if (mpr_ok (&r) && count) {
                self->outputs = (sq_rec_output_t *) calloc (count, sizeof (sq_rec_output_t));
                if (!self->outputs)
                    mpr_fail (&r, "out of memory");
            }
            for (uint32_t i = 0; mpr_ok (&r) && i < count; i++) {
                sq_rec_output_t *o = &self->outputs [i];
                mpr_array_exact (&r, 2);
                mpr_uint (&r, &o->size);
                if (mpr_ok (&r) && !mpr_try_nil (&r)) {
                    mpr_bin (&r, &o->data, SQ_REC_MAX);
                    if (mpr_ok (&r) && o->data.len != o->size)
                        mpr_fail (&r, "inline data of another size than the output");
                    if (!o->data.ptr)
                        o->data.ptr = "";
                }
                self->n_outputs = i + 1;
            }
            break;
        case SQ_REC_FAILED:
            mpr_field (&r, "task");
            mpr_uint (&r, &self->key);
            mpr_field (&r, "attempt");
            mpr_u32 (&r, &self->attempt);
            mpr_field (&r, "code");
            if (mpr_u32 (&r, &self->code) == 0 && (self->code == 0 || self->code >= SQ_E_COUNT_))
                mpr_fail (&r, "not an error code");
            mpr_field (&r, "message");
            mpr_str (&r, &self->message, SQ_MAX_MESSAGE);
            break;
        case SQ_REC_ATTEMPT:
            mpr_field (&r, "task");
            mpr_uint (&r, &self->key);
            mpr_field (&r, "attempt");
            mpr_u32 (&r, &self->attempt);
            mpr_field (&r, "retries");
            mpr_u32 (&r, &self->retries);
            mpr_field (&r, "crashes");
            mpr_u32 (&r, &self->crashes);
            mpr_field (&r, "memory");
            mpr_uint (&r, &self->memory);
            break;
        case SQ_REC_GOVERNOR:
            mpr_field (&r, "id");
            mpr_u32 (&r, &self->id);
            mpr_field (&r, "incarnation");
            mpr_uint (&r, &self->incarnation);
            mpr_field (&r, "name");
            mpr_str (&r, &self->name, SQ_MAX_NAME);
            mpr_field (&r, "key");
            s_opt_str (&r, &self->key_z85, SQ_MAX_NAME);
            break;
        case SQ_REC_GONE:
            mpr_field (&r, "id");
            mpr_u32 (&r, &self->id);
            break;
        case SQ_REC_IDS:
            mpr_field (&r, "next_session");
            mpr_u32 (&r, &self->session);
            mpr_field (&r, "next_peer");
            mpr_u32 (&r, &self->id);
            break;
        default:
            break;
    }
done:
    mpr_field (&r, NULL);
    if (mpr_end (&r)) {
        if (err && err_size)
            snprintf (err, err_size, "journal record%s%s: %s", r.field? " field ": "",
                      r.field? r.field: "", r.error? r.error: "invalid");
        sq_rec_release (self);
        return -1;
    }
    return 0;
}

void
sq_rec_release (sq_rec_t *self)
{
    free (self->payloads);
    free (self->ids);
    free (self->outputs);
    self->payloads = NULL;
    self->ids = NULL;
    self->outputs = NULL;
    self->n_payloads = self->n_ids = self->n_outputs = 0;
}

//  --------------------------------------------------------------------------
//  Packers

static void
s_str_or_nil (msgpack_packer *pk, const char *s)
{
    if (s)
        sq_pack_cstr (pk, s);
    else
        msgpack_pack_nil (pk);
}

static void
s_bin (msgpack_packer *pk, const void *data, size_t size)
{
    msgpack_pack_bin (pk, size);
    msgpack_pack_bin_body (pk, data, size);
}

void
sq_rec_pack_header (msgpack_packer *pk, const char *cluster, uint64_t epoch)
{
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, SQ_REC_HEADER);
    msgpack_pack_uint32 (pk, SQ_REC_FORMAT);
    sq_pack_cstr (pk, cluster);
    msgpack_pack_uint64 (pk, epoch);
}

void
sq_rec_pack_epoch (msgpack_packer *pk, uint64_t epoch)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, SQ_REC_EPOCH);
    msgpack_pack_uint64 (pk, epoch);
}

void
sq_rec_pack_session (msgpack_packer *pk, uint32_t session, const uint8_t *token,
                     const char *tenant, const char *owner)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_REC_SESSION);
    msgpack_pack_uint32 (pk, session);
    s_bin (pk, token, SQ_TOKEN_LEN);
    s_str_or_nil (pk, tenant);
    s_str_or_nil (pk, owner);
}

void
sq_rec_pack_submit (msgpack_packer *pk, uint32_t session, const void *frame0,
                    size_t frame0_size, const void *const *payloads, const size_t *sizes,
                    size_t n_payloads)
{
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, SQ_REC_SUBMIT);
    msgpack_pack_uint32 (pk, session);
    s_bin (pk, frame0, frame0_size);
    msgpack_pack_array (pk, n_payloads);
    for (size_t i = 0; i < n_payloads; i++)
        s_bin (pk, payloads [i], sizes [i]);
}

void
sq_rec_pack_ids (msgpack_packer *pk, uint32_t type, uint32_t session, const uint32_t *ids,
                 uint32_t n)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, type);
    msgpack_pack_uint32 (pk, session);
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint32 (pk, ids [i]);
}

void
sq_rec_pack_close (msgpack_packer *pk, uint32_t session)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, SQ_REC_CLOSE);
    msgpack_pack_uint32 (pk, session);
}

void
sq_rec_pack_finished_begin (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                            uint32_t n_outputs)
{
    msgpack_pack_array (pk, 4);
    msgpack_pack_uint32 (pk, SQ_REC_FINISHED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
    msgpack_pack_array (pk, n_outputs);
}

void
sq_rec_pack_output (msgpack_packer *pk, uint64_t size, const void *data, size_t data_size)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint64 (pk, size);
    if (data)
        s_bin (pk, data, data_size);
    else
        msgpack_pack_nil (pk);
}

void
sq_rec_pack_failed (msgpack_packer *pk, uint64_t task, uint32_t attempt, uint32_t code,
                    const char *message)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_REC_FAILED);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
    msgpack_pack_uint32 (pk, code);
    sq_pack_cstr (pk, message);
}

void
sq_rec_pack_attempt (msgpack_packer *pk, uint64_t task, uint32_t attempt, uint32_t retries,
                     uint32_t crashes, uint64_t memory)
{
    msgpack_pack_array (pk, 6);
    msgpack_pack_uint32 (pk, SQ_REC_ATTEMPT);
    msgpack_pack_uint64 (pk, task);
    msgpack_pack_uint32 (pk, attempt);
    msgpack_pack_uint32 (pk, retries);
    msgpack_pack_uint32 (pk, crashes);
    msgpack_pack_uint64 (pk, memory);
}

void
sq_rec_pack_governor (msgpack_packer *pk, uint32_t id, uint64_t incarnation, const char *name,
                      const char *key_z85)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_REC_GOVERNOR);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint64 (pk, incarnation);
    sq_pack_cstr (pk, name);
    s_str_or_nil (pk, key_z85);
}

void
sq_rec_pack_gone (msgpack_packer *pk, uint32_t id)
{
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, SQ_REC_GONE);
    msgpack_pack_uint32 (pk, id);
}

void
sq_rec_pack_ids_counters (msgpack_packer *pk, uint32_t next_session, uint32_t next_peer)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, SQ_REC_IDS);
    msgpack_pack_uint32 (pk, next_session);
    msgpack_pack_uint32 (pk, next_peer);
}
