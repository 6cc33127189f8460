/*  Data-plane messages: CHUNK, CREDIT and GREAD encode and decode back,
    and malformed ones are refused with the field named, never asserted. */
#include "proto.h"
#include <stdio.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    return 1; } } while (0)

static mpr_str_t
s_str (const char *text)
{
    return (mpr_str_t) { text, (uint32_t) strlen (text) };
}

int
main (void)
{
    sq_wbuf_t w;
    sq_errbuf_t err;
    sq_wbuf_init (&w);

    sq_chunk_t chunk = {
        .transfer = 7, .key = sq_key (3, 9), .version = 2, .offset = 4u << 20,
        .size = (4u << 20) + 1, .content_type = s_str ("text/plain"), .from = 5,
        .reply_to = s_str ("tcp://127.0.0.1:4000")
    }, back;
    sq_chunk_encode (&w, &chunk);
    CHECK (sq_chunk_decode (&back, w.buf.data, w.buf.size, &err) == 0);
    CHECK (back.transfer == 7 && back.key == sq_key (3, 9) && back.version == 2
        && back.offset == chunk.offset && back.size == chunk.size && back.from == 5
        && back.content_type.len == 10 && back.reply_to.len == 20);
    uint32_t type, req;
    CHECK (sq_proto_peek (w.buf.data, w.buf.size, &type, &req) == 0 && type == SQ_MSG_CHUNK);
    //  Every truncation is refused; so is a trailing byte.
    for (size_t cut = 0; cut < w.buf.size; cut++)
        CHECK (sq_chunk_decode (&back, w.buf.data, cut, &err) == -1);
    char longer [256];
    memcpy (longer, w.buf.data, w.buf.size);
    longer [w.buf.size] = 0;
    CHECK (sq_chunk_decode (&back, longer, w.buf.size + 1, &err) == -1);
    //  An offset past the end of the object.
    sq_wbuf_reset (&w);
    chunk.offset = chunk.size + 1;
    sq_chunk_encode (&w, &chunk);
    CHECK (sq_chunk_decode (&back, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "offset"));

    sq_wbuf_reset (&w);
    sq_credit_t credit = { .transfer = 1u << 31, .key = 42, .credits = 0 }, cback;
    sq_credit_encode (&w, &credit);
    CHECK (sq_credit_decode (&cback, w.buf.data, w.buf.size, &err) == 0);
    CHECK (cback.transfer == 1u << 31 && cback.key == 42 && cback.credits == 0);
    //  A CREDIT is not a CHUNK, and the other way round.
    CHECK (sq_chunk_decode (&back, w.buf.data, w.buf.size, &err) == -1);

    sq_wbuf_reset (&w);
    sq_gread_t gread = { .req = 9, .key = sq_key (1, 3), .offset = 0, .length = 4u << 20 }, gback;
    sq_gread_encode (&w, &gread);
    const uint8_t doc [] = {    //  docs/protocol.md section 11
        0x96, 0x47, 0x07, 0xcf, 0, 0, 0, 1, 0, 0, 0, 3, 0x00, 0xce, 0x00, 0x40, 0, 0, 0xc0
    };
    (void) doc;
    CHECK (sq_gread_decode (&gback, w.buf.data, w.buf.size, &err) == 0);
    CHECK (gback.req == 9 && gback.key == sq_key (1, 3) && gback.length == 4u << 20);
    sq_wbuf_reset (&w);
    gread.req = 7;
    sq_gread_encode (&w, &gread);
    CHECK (w.buf.size == sizeof doc && memcmp (w.buf.data, doc, sizeof doc) == 0);
    sq_wbuf_reset (&w);
    gread.length = (uint64_t) SQ_CHUNK_MAX + 1;
    sq_gread_encode (&w, &gread);
    CHECK (sq_gread_decode (&gback, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "length"));

    //  LOGREAD and its reply: round trip; a stream other than 1 or 2, a
    //  length over SQ_LOGREAD_MAX, a GREAD or a missing field are refused.
    sq_wbuf_reset (&w);
    sq_logread_t lr = { .req = 3, .key = sq_key (2, 9), .attempt = 4, .stream = SQ_LOG_STDERR,
                        .offset = 1u << 20, .length = SQ_LOGREAD_MAX }, lback;
    sq_logread_encode (&w, &lr);
    CHECK (sq_logread_decode (&lback, w.buf.data, w.buf.size, &err) == 0);
    CHECK (lback.req == 3 && lback.key == sq_key (2, 9) && lback.attempt == 4
           && lback.stream == SQ_LOG_STDERR && lback.offset == 1u << 20
           && lback.length == SQ_LOGREAD_MAX && lback.capability.len == 0);
    for (size_t cut = 0; cut < w.buf.size; cut++)
        CHECK (sq_logread_decode (&lback, w.buf.data, cut, &err) == -1);
    CHECK (sq_gread_decode (&gback, w.buf.data, w.buf.size, &err) == -1);
    sq_wbuf_reset (&w);
    lr.stream = 3;
    sq_logread_encode (&w, &lr);
    CHECK (sq_logread_decode (&lback, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "stream"));
    sq_wbuf_reset (&w);
    lr.stream = SQ_LOG_STDOUT;
    lr.length = (uint64_t) SQ_LOGREAD_MAX + 1;
    sq_logread_encode (&w, &lr);
    CHECK (sq_logread_decode (&lback, w.buf.data, w.buf.size, &err) == -1);
    CHECK (strstr (err.text, "length"));
    sq_wbuf_reset (&w);
    sq_pack_logpart (&w.pk, 100, 200, true);
    uint64_t next = 0, total = 0;
    bool done = false;
    CHECK (sq_logpart_decode ((const uint8_t *) w.buf.data, w.buf.size, &next, &total, &done,
                              &err) == 0);
    CHECK (next == 100 && total == 200 && done);
    CHECK (sq_logpart_decode ((const uint8_t *) w.buf.data, w.buf.size - 1, &next, &total, &done,
                              &err) == -1);

    //  LOGTAIL (broker -> governor) and its answer, the UPDATE event 12
    sq_wbuf_reset (&w);
    sq_logtail_t lt = { 5, sq_key (3, 4), 1, SQ_LOG_STDERR }, ltback;
    sq_logtail_encode (&w, &lt);
    CHECK (sq_logtail_decode (&ltback, w.buf.data, w.buf.size, &err) == 0);
    CHECK (ltback.req == 5 && ltback.key == sq_key (3, 4) && ltback.attempt == 1
           && ltback.stream == SQ_LOG_STDERR);
    sq_wbuf_reset (&w);
    lt.stream = 0;
    sq_logtail_encode (&w, &lt);
    CHECK (sq_logtail_decode (&ltback, w.buf.data, w.buf.size, &err) == -1);
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_logtail_event (&w.pk, sq_key (3, 4), 1, 5, "tail\n", 5);
    sq_iter_t it;
    sq_event_t ev;
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == 1 && ev.type == SQ_EV_LOGTAIL && ev.key == sq_key (3, 4)
           && ev.attempt == 1 && ev.size == 5 && ev.message.len == 5
           && memcmp (ev.message.ptr, "tail\n", 5) == 0);
    CHECK (sq_update_next (&it, &ev) == 0);
    sq_iter_release (&it);
    //  more than SQ_LOGTAIL_MAX bytes is malformed
    static char big [SQ_LOGTAIL_MAX + 1];
    sq_wbuf_reset (&w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_logtail_event (&w.pk, sq_key (3, 4), 1, 5, big, sizeof big);
    CHECK (sq_update_begin (&it, w.buf.data, w.buf.size, &err) == 0);
    CHECK (sq_update_next (&it, &ev) == -1);
    sq_iter_release (&it);

    sq_wbuf_release (&w);
    printf ("test_dataplane_proto: OK\n");
    return 0;
}
