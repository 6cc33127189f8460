/*  serve: the requests of a governor's serve socket, answered on the
    compute thread where the store is: GFETCH and GREAD (reads, sent
    zero-copy from the stored blob) and PUT (a client's upload, by way of
    transfer.c). The receive thread has already checked the client's key
    and capability (receiver.c); replies go back through the compute pipe
    to the receive thread, which owns the socket. */
#include "serve.h"
#include "route.h"
#include "wire.h"
#include "log.h"
#include <stdlib.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

//  An object's content type as the table's string (NULL: none, packed "")
static mpr_str_t
s_mstr (const char *s)
{
    return (mpr_str_t) { s, s? (uint32_t) strlen (s): 0 };
}

//  The reply to a request ([S][identity][...]) back through the compute
//  pipe: the route, the client's identity, the header and the payloads,
//  which are closed whatever happens (a payload holds its stored blob).
static void
s_reply (void *pipe, sq_msg_t *msg, sq_wbuf_t *reply, zmq_msg_t *payloads, size_t n_payloads,
         const char *what)
{
    const char route = GOV_ROUTE_SERVE;
    if (zmq_send (pipe, &route, 1, ZMQ_SNDMORE) < 0) {
        sq_warn ("cannot pass %s reply on: %s", what, zmq_strerror (errno));
        for (size_t i = 0; i < n_payloads; i++)
            zmq_msg_close (&payloads [i]);
    }
    else
    if (sq_send (pipe, sq_msg_data (msg, 1), sq_msg_size (msg, 1), reply, payloads, n_payloads, 0))
        sq_warn ("cannot pass %s reply on: %s", what, zmq_strerror (errno));
    sq_wbuf_release (reply);
}

//  Frame 2 of msg, a message of the table of `type`, decoded into `out`.
//  A bad one is warned of and dropped: -1.
static int
s_decode (uint32_t type, void *out, sq_msg_t *msg)
{
    sq_errbuf_t err;
    if (sq_msg_decode (type, out, sq_msg_data (msg, 2), sq_msg_size (msg, 2), &err) == 0)
        return 0;
    sq_warn ("bad %s: %s", sq_msg_name (type), err.text);
    return -1;
}

//  A reply with no body (code 0), or an error reply (PUT, PUTLOCAL, and
//  the reads' refusals).
static void
s_reply_code (void *pipe, sq_msg_t *msg, uint32_t req, int code, const char *why, uint32_t id,
              const char *name)
{
    sq_wbuf_t reply;
    sq_wbuf_init (&reply);
    if (code == 0)
        sq_reply_encode_nil (&reply, req);
    else
        sq_reply_encode_error (&reply, req, code, why, id, 0);
    s_reply (pipe, msg, &reply, NULL, 0, name);
}

//  The reply to a read of [offset, offset + length) of object `key`
//  (clipped to its end): SERVED and the bytes, sent zero-copy from the
//  stored blob, or why not.
static void
s_serve_range (store_t *store, void *pipe, sq_msg_t *msg, uint32_t req, uint64_t key,
               uint64_t offset, uint64_t length, const char *name)
{
    char why [512];
    sq_wbuf_t reply;
    sq_wbuf_init (&reply);
    const char *type = NULL;
    sq_blob_t *blob = store_get (store, key, &type);
    zmq_msg_t payload;
    size_t n_payloads = 0;
    uint64_t size = blob? sq_blob_size (blob): 0;
    if (blob && offset <= size) {
        uint64_t len = size - offset < length? size - offset: length;
        if (sq_blob_msg_range (blob, (size_t) offset, (size_t) len, &payload) == 0) {
            sq_reply_begin (&reply, req);
            sq_record_pack (&reply.pk, SQ_REC_SERVED, &(sq_served_t) { size, s_mstr (type) });
            n_payloads = 1;
        }
    }
    if (n_payloads == 0) {
        if (blob)
            snprintf (why, sizeof why, "offset %" PRIu64 " is past the end of object %u/%u",
                      offset, sq_key_session (key), sq_key_id (key));
        else
            snprintf (why, sizeof why, "object %u/%u is not held by this governor",
                      sq_key_session (key), sq_key_id (key));
        sq_reply_encode_error (&reply, req, blob? SQ_E_INVALID: SQ_E_UNKNOWN_ID, why,
                               sq_key_id (key), 0);
    }
    s_reply (pipe, msg, &reply, &payload, n_payloads, name);
}

//  msg: [S][identity][GFETCH]. A whole object.
void
serve_gfetch (store_t *store, void *pipe, sq_msg_t *msg)
{
    sq_gfetch_t fetch;
    if (msg->n != 3 || msg->truncated) {
        sq_warn ("GFETCH with %zu frames; discarded", msg->n);
        return;
    }
    if (s_decode (SQ_MSG_GFETCH, &fetch, msg) == 0)
        s_serve_range (store, pipe, msg, fetch.req, fetch.key, 0, UINT64_MAX, "GFETCH");
}

//  msg: [S][identity][GREAD]. One range of an object; the client keeps a
//  window of these outstanding.
void
serve_gread (store_t *store, void *pipe, sq_msg_t *msg)
{
    sq_gread_t gread;
    if (s_decode (SQ_MSG_GREAD, &gread, msg) == 0)
        s_serve_range (store, pipe, msg, gread.req, gread.key, gread.offset, gread.length,
                       "GREAD");
}

//  msg: [S][identity][PUT][bytes]. One range of a client's upload.
void
serve_put (transfer_t *transfer, void *pipe, sq_msg_t *msg)
{
    char why [512];
    sq_put_t put;
    if (s_decode (SQ_MSG_PUT, &put, msg))
        return;
    int code = transfer_put (transfer, &put, &msg->frames [3], why, sizeof why);
    s_reply_code (pipe, msg, put.req, code, why, sq_key_id (put.key), "PUT");
}

//  msg: [S][identity][PUTLOCAL]. A whole upload in a memory file the
//  client handed to our socket just before (so it is there to be read):
//  the token, which came over the client's CURVE channel and passed its
//  capability check, names it. Refused (the client then PUTs the bytes)
//  when no file came with the token, or it is not a sealable memory file
//  of the size said that nobody maps writable any more.
void
serve_putlocal (transfer_t *transfer, stream_t *streams, void *pipe, sq_msg_t *msg)
{
    char why [512];
    sq_putlocal_t put;
    if (s_decode (SQ_MSG_PUTLOCAL, &put, msg))
        return;
    int fd = streams? stream_take_segment (streams, (const uint8_t *) put.token.ptr): -1;
    sq_blob_t *blob = NULL;
    int code = 0;
    if (fd < 0) {
        snprintf (why, sizeof why, "no memory file was handed over with this token");
        code = SQ_E_INVALID;
    }
    else
    if (put.size == 0 || put.size > SIZE_MAX || !(blob = sq_blob_shm_adopt (fd, (size_t) put.size))) {
        //  sq_blob_shm_adopt closed it.
        snprintf (why, sizeof why, "the file handed over is not a sealable memory file of "
                  "%" PRIu64 " bytes nobody maps writable", put.size);
        code = SQ_E_INVALID;
    }
    else
        code = transfer_put_local (transfer, put.key, &blob, put.content_type, why, sizeof why);
    sq_blob_unref (&blob);
    s_reply_code (pipe, msg, put.req, code, why, sq_key_id (put.key), "PUTLOCAL");
}

//  A read's part (LOGREAD, RUNREAD): LOGPART and the bytes, copied.
static void
s_reply_part (void *pipe, sq_msg_t *msg, uint32_t req, const uint8_t *data, size_t size,
              uint64_t next, uint64_t total, bool done, uint32_t id, const char *name)
{
    zmq_msg_t payload;
    if (zmq_msg_init_size (&payload, size)) {
        s_reply_code (pipe, msg, req, SQ_E_NOMEM, "out of memory on the governor", id, name);
        return;
    }
    if (size)
        memcpy (zmq_msg_data (&payload), data, size);
    sq_wbuf_t reply;
    sq_wbuf_init (&reply);
    sq_reply_begin (&reply, req);
    sq_pack_logpart (&reply.pk, next, total, done);
    s_reply (pipe, msg, &reply, &payload, 1, name);
}

//  msg: [S][identity][LOGREAD]. A range of a task's stdout or stderr.
void
serve_logread (tasklog_t *tasklog, void *pipe, sq_msg_t *msg)
{
    sq_logread_t q;
    if (s_decode (SQ_MSG_LOGREAD, &q, msg))
        return;
    uint8_t *data = NULL;
    size_t size = 0;
    uint64_t next = 0, total = 0;
    bool done = false;
    if (tasklog && tasklog_read (tasklog, q.key, q.attempt, q.stream, q.offset, q.length,
                                 &data, &size, &next, &total, &done) == 0)
        s_reply_part (pipe, msg, q.req, data, size, next, total, done, sq_key_id (q.key),
                      "LOGREAD");
    else {
        char why [512];
        snprintf (why, sizeof why, "no log of attempt %u of task %u/%u is kept by this governor",
                  q.attempt, sq_key_session (q.key), sq_key_id (q.key));
        s_reply_code (pipe, msg, q.req, SQ_E_UNKNOWN_ID, why, sq_key_id (q.key), "LOGREAD");
    }
    free (data);
}

//  msg: [S][identity][RUNREAD]. A range of a run's answers, kept since RAN.
void
serve_runread (pyexec_t *pyexec, void *pipe, sq_msg_t *msg)
{
    sq_runread_t q;
    if (s_decode (SQ_MSG_RUNREAD, &q, msg))
        return;
    uint8_t *data = NULL;
    size_t size = 0;
    uint64_t total = 0;
    if (pyexec && pyexec_ran_read (pyexec, q.run, q.offset, q.length, &data, &size, &total) == 0)
        s_reply_part (pipe, msg, q.req, data, size, q.offset + size, total,
                      q.offset + size == total, 0, "RUNREAD");
    else {
        char why [256];
        snprintf (why, sizeof why, "the answers to run %" PRIu64 " are not kept by this governor "
                  "(read already, or over a minute old)", q.run);
        s_reply_code (pipe, msg, q.req, SQ_E_UNKNOWN_ID, why, 0, "RUNREAD");
    }
    free (data);
}
