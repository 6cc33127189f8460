/*  A fake broker drives a real squall-governor process: HELLO, ASSIGN of
    concat / execute / failing tasks, garbage that must be ignored, GFETCH,
    SEND (answered with a CHUNK), OBJECT (discarded), DROP, STOP and a clean SIGTERM. Skips (exit 77,
    ctest's SKIP_RETURN_CODE) when the governor binary is not found. */
#include "proto.h"
#include "wire.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define CHECK(cond) do { if (!(cond)) s_fail (__LINE__, #cond); } while (0)

static pid_t s_pid;

static void
s_fail (int line, const char *what)
{
    fprintf (stderr, "test_governor_fake_broker.c:%d: check failed: %s\n", line, what);
    if (s_pid > 0)
        kill (s_pid, SIGKILL);
    exit (1);
}
static void *s_router;
static char s_identity [256];
static size_t s_identity_size;

static void
s_send_to_gov (sq_wbuf_t *w, zmq_msg_t *payloads, size_t n)
{
    CHECK (sq_send (s_router, s_identity, s_identity_size, w, payloads, n, 0) == 0);
}

//  Next message from the governor of one of the wanted types; frames
//  without the identity. Fails the test after timeout_ms.
static uint32_t
s_expect (sq_msg_t *msg, uint32_t want1, uint32_t want2, int timeout_ms)
{
    struct timespec start, now;
    clock_gettime (CLOCK_MONOTONIC, &start);
    while (1) {
        clock_gettime (CLOCK_MONOTONIC, &now);
        long left = timeout_ms - ((now.tv_sec - start.tv_sec) * 1000
                                  + (now.tv_nsec - start.tv_nsec) / 1000000);
        CHECK (left > 0);
        zmq_pollitem_t item = { s_router, 0, ZMQ_POLLIN, 0 };
        CHECK (zmq_poll (&item, 1, left) >= 0);
        if (!(item.revents & ZMQ_POLLIN))
            continue;
        CHECK (sq_msg_recv (msg, s_router, 0, 1000) == 0);
        CHECK (msg->n >= 2);
        s_identity_size = sq_msg_size (msg, 0);
        memcpy (s_identity, sq_msg_data (msg, 0), s_identity_size);
        uint32_t type, req;
        CHECK (sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req) == 0);
        if (type == want1 || type == want2)
            return type;
    }
}

static void
s_pack_str_array (msgpack_packer *pk, const char **items, int n)
{
    msgpack_pack_array (pk, (size_t) n);
    for (int i = 0; i < n; i++)
        sq_pack_cstr (pk, items [i]);
}

//  execute config {args, in_paths [""], out_paths [""], stdin 0, stdout 0}
static void
s_exec_config (sq_wbuf_t *w, const char *script)
{
    const char *args [] = { "sh", "-c", script };
    const char *empty [] = { "" };
    msgpack_pack_map (&w->pk, 5);
    sq_pack_cstr (&w->pk, "args");
    s_pack_str_array (&w->pk, args, 3);
    sq_pack_cstr (&w->pk, "in_paths");
    s_pack_str_array (&w->pk, empty, 1);
    sq_pack_cstr (&w->pk, "out_paths");
    s_pack_str_array (&w->pk, empty, 1);
    sq_pack_cstr (&w->pk, "stdin");
    msgpack_pack_int (&w->pk, 0);
    sq_pack_cstr (&w->pk, "stdout");
    msgpack_pack_int (&w->pk, 0);
}

static mpr_str_t
s_mstr (const char *s)
{
    return (mpr_str_t) { s, (uint32_t) strlen (s) };
}

static void
s_pack_task (msgpack_packer *pk, uint64_t key, const char *kind, sq_wbuf_t *config,
             sq_input_ref_t *inputs, uint32_t n_in, uint64_t out_key, uint32_t n_out,
             uint32_t timeout_ms)
{
    sq_out_decl_t out = { out_key, s_mstr ("text/plain"), false, 0 };
    uint8_t nil = 0xc0;
    sq_assign_t task = {
        .key = key, .attempt = 0, .kind = s_mstr (kind),
        .config = config? (const uint8_t *) config->buf.data: &nil,
        .config_size = config? config->buf.size: 1,
        .n_inputs = n_in, .inputs = inputs, .n_outputs = n_out, .outputs = &out,
        .cpus = 1, .timeout_ms = timeout_ms, .name = s_mstr (kind)
    };
    sq_pack_assign (pk, &task);
}

static void
s_payload (zmq_msg_t *msg, const char *text)
{
    zmq_msg_init_size (msg, strlen (text));
    memcpy (zmq_msg_data (msg), text, strlen (text));
}

//  One CHUNK of copy `transfer` from "governor 9" to the data socket: bytes
//  [offset, offset + len) of `bytes`, an object of `size`.
static void
s_chunk (void *push, const char *reply_to, uint32_t transfer, uint64_t key,
         const uint8_t *bytes, uint64_t offset, size_t len, uint64_t size)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_chunk_t chunk = {
        .transfer = transfer, .key = key, .version = 0, .offset = offset, .size = size,
        .content_type = s_mstr ("x"), .from = 9, .reply_to = s_mstr (reply_to)
    };
    sq_chunk_encode (&w, &chunk);
    zmq_msg_t payload;
    zmq_msg_init_size (&payload, len);
    memcpy (zmq_msg_data (&payload), bytes + offset, len);
    CHECK (sq_send (push, NULL, 0, &w, &payload, 1, 0) == 0);
    sq_wbuf_release (&w);
}

//  The next LOCATED or LOST event of the governor (other events skipped);
//  s_copy_us is the duration the LOCATED reported (0: none).
static uint64_t s_copy_us;
static void
s_expect_copy (sq_msg_t *msg, uint64_t key, uint32_t type, uint64_t size)
{
    while (1) {
        s_expect (msg, SQ_MSG_UPDATE, 0, 5000);
        sq_iter_t it;
        sq_event_t ev;
        sq_errbuf_t err;
        CHECK (sq_update_begin (&it, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err) == 0);
        bool found = false;
        while (!found && sq_update_next (&it, &ev) == 1)
            if (ev.type == SQ_EV_LOCATED || ev.type == SQ_EV_LOST) {
                CHECK (ev.type == type && ev.key == key);
                CHECK (type != SQ_EV_LOCATED || ev.size == size);
                s_copy_us = ev.duration_us;
                found = true;
            }
        sq_iter_release (&it);
        if (found)
            return;
    }
}

//  GREAD of [offset, offset + len) from the serve socket equals `bytes`.
static void
s_gread_check (void *client, uint64_t key, const uint8_t *bytes, uint64_t offset, size_t len)
{
    static uint32_t req = 1000;
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_gread_t gread = { .req = ++req, .key = key, .offset = offset, .length = len };
    sq_gread_encode (&w, &gread);
    CHECK (sq_send (client, NULL, 0, &w, NULL, 0, 0) == 0);
    sq_wbuf_release (&w);
    zmq_pollitem_t item = { client, 0, ZMQ_POLLIN, 0 };
    CHECK (zmq_poll (&item, 1, 5000) == 1);
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (sq_msg_recv (&msg, client, 0, 10) == 0 && msg.n == 2);
    sq_reply_t reply;
    sq_errbuf_t err;
    CHECK (sq_reply_decode (&reply, sq_msg_data (&msg, 0), sq_msg_size (&msg, 0), &err) == 0);
    CHECK (reply.req == req && reply.code == 0 && sq_msg_size (&msg, 1) == len);
    CHECK (memcmp (sq_msg_data (&msg, 1), bytes + offset, len) == 0);
    sq_msg_release (&msg);
}

int
main (void)
{
    const char *bin = getenv ("SQUALL_GOVERNOR_BIN");
    if (!bin)
        bin = "../../governor/squall-governor";
    if (access (bin, X_OK)) {
        printf ("skipped: no governor binary at %s (set SQUALL_GOVERNOR_BIN)\n", bin);
        return 77;
    }
    void *ctx = zmq_ctx_new ();
    s_router = zmq_socket (ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt (s_router, ZMQ_LINGER, &linger, sizeof linger);
    CHECK (zmq_bind (s_router, "tcp://127.0.0.1:*") == 0);
    char endpoint [256];
    size_t size = sizeof endpoint;
    zmq_getsockopt (s_router, ZMQ_LAST_ENDPOINT, endpoint, &size);

    int out [2];
    CHECK (pipe (out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init (&actions);
    posix_spawn_file_actions_adddup2 (&actions, out [1], 1);
    posix_spawn_file_actions_addclose (&actions, out [0]);
    char *argv [] = { (char *) bin, "--broker", endpoint, "--cpus", "2", "--name", "fake",
                      "--listen-host", "127.0.0.1", "--resource", "gpus=3",
                      "--log-level", "warn", NULL };
    CHECK (posix_spawn (&s_pid, bin, &actions, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy (&actions);
    close (out [1]);

    //  HELLO
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (s_expect (&msg, SQ_MSG_HELLO, 0, 5000) == SQ_MSG_HELLO);
    sq_hello_t hello;
    sq_errbuf_t err;
    int code;
    CHECK (sq_hello_decode (&hello, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &code, &err) == 0);
    CHECK (hello.governor && mpr_str_eq (hello.name, "fake") && hello.n_resources == 3);
    CHECK (mpr_str_eq (hello.resources [0].name, "cpus") && hello.resources [0].amount == 2);
    //  --resource gpus=3 is 3 devices on the wire, 3000 thousandths decoded.
    CHECK (mpr_str_eq (hello.resources [1].name, "gpus")
           && hello.resources [1].amount == 3 * SQ_GPU_MILLI);
    //  Its memory is offered too (the physical memory when --memory is not given).
    CHECK (mpr_str_eq (hello.resources [2].name, "memory") && hello.resources [2].amount > 0);
    char *serve = mpr_strdup (hello.serve_endpoint);
    char *data = mpr_strdup (hello.data_endpoint);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_welcome_encode_governor (&w, hello.req, 7, 1000, 4096, "0123456789abcdef0123456789abcdef",
                                1, false, NULL, 0);
    s_send_to_gov (&w, NULL, 0);

    char line [256] = "";
    struct pollfd pfd = { out [0], POLLIN, 0 };
    CHECK (poll (&pfd, 1, 5000) == 1);
    ssize_t n = read (out [0], line, sizeof line - 1);
    CHECK (n > 0);
    line [n] = 0;
    CHECK (strcmp (line, "READY 7 fake\n") == 0);

    //  Garbage: none of it may stop the governor.
    zmq_send (s_router, s_identity, s_identity_size, ZMQ_SNDMORE);
    zmq_send (s_router, "garbage", 7, 0);
    zmq_send (s_router, s_identity, s_identity_size, ZMQ_SNDMORE);
    zmq_send (s_router, "", 0, 0);
    const uint8_t bad_assign [] = { 0x92, 40, 0x91, 0x93, 1, 2, 3 };
    zmq_send (s_router, s_identity, s_identity_size, ZMQ_SNDMORE);
    zmq_send (s_router, bad_assign, sizeof bad_assign, 0);
    const uint8_t huge_array [] = { 0x92, 40, 0xdd, 0xff, 0xff, 0xff, 0xff };
    zmq_send (s_router, s_identity, s_identity_size, ZMQ_SNDMORE);
    zmq_send (s_router, huge_array, sizeof huge_array, 0);

    //  ASSIGN: concat of two inline inputs, execute tr, unknown kind, a
    //  failing program, a task with an out-of-range input frame.
    uint64_t a = sq_key (1, 1), b = sq_key (1, 2);
    sq_input_ref_t concat_in [2] = {
        { a, 6, 1, s_mstr ("") }, { b, 6, 2, s_mstr ("") }
    };
    sq_input_ref_t exec_in [1] = { { a, 6, -1, s_mstr ("") } };
    sq_input_ref_t bad_in [1] = { { sq_key (1, 3), 1, 9, s_mstr ("") } };
    sq_wbuf_t tr, fail, elements;
    sq_wbuf_init (&tr);
    sq_wbuf_init (&fail);
    sq_wbuf_init (&elements);
    s_exec_config (&tr, "tr a-z A-Z");
    s_exec_config (&fail, "echo oops >&2; exit 3");
    s_pack_task (&elements.pk, sq_key (1, 10), "concat", NULL, concat_in, 2, sq_key (1, 11), 1, 0);
    s_pack_task (&elements.pk, sq_key (1, 20), "execute", &tr, exec_in, 1, sq_key (1, 21), 1, 0);
    s_pack_task (&elements.pk, sq_key (1, 30), "bogus", NULL, NULL, 0, sq_key (1, 31), 1, 0);
    s_pack_task (&elements.pk, sq_key (1, 40), "execute", &fail, exec_in, 1, sq_key (1, 41), 1, 0);
    s_pack_task (&elements.pk, sq_key (1, 50), "noop", NULL, bad_in, 1, sq_key (1, 51), 1, 0);
    sq_batch_header (&w, SQ_MSG_ASSIGN, 5);
    msgpack_sbuffer_write (&w.buf, elements.buf.data, elements.buf.size);
    zmq_msg_t payloads [2];
    s_payload (&payloads [0], "hello ");
    s_payload (&payloads [1], "world!");
    s_send_to_gov (&w, payloads, 2);

    int seen = 0;
    while (seen != 0x1f) {
        s_expect (&msg, SQ_MSG_UPDATE, 0, 10000);
        sq_iter_t it;
        sq_event_t ev;
        CHECK (sq_update_begin (&it, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
        int rc;
        while ((rc = sq_update_next (&it, &ev)) == 1) {
            uint32_t id = sq_key_id (ev.key);
            if (ev.type == SQ_EV_STARTED)
                continue;       //  running tasks are announced; not checked here
            if (id == 10) {
                CHECK (ev.type == SQ_EV_FINISHED && ev.n_outputs == 1);
                CHECK (ev.outputs [0].key == sq_key (1, 11) && ev.outputs [0].size == 12);
                int f = ev.outputs [0].frame;
                CHECK (f >= 1 && (size_t) f + 1 < msg.n);
                CHECK (memcmp (sq_msg_data (&msg, 1 + f), "hello world!", 12) == 0);
                seen |= 1;
            }
            else
            if (id == 20) {
                CHECK (ev.type == SQ_EV_FINISHED && ev.n_outputs == 1);
                CHECK (ev.outputs [0].size == 6);
                int f = ev.outputs [0].frame;
                CHECK (f >= 1 && (size_t) f + 1 < msg.n);
                CHECK (memcmp (sq_msg_data (&msg, 1 + f), "HELLO ", 6) == 0);
                seen |= 2;
            }
            else
            if (id == 30) {
                CHECK (ev.type == SQ_EV_FAILED);
                char *text = mpr_strdup (ev.message);
                CHECK (strstr (text, "bogus"));
                free (text);
                seen |= 4;
            }
            else
            if (id == 40) {
                CHECK (ev.type == SQ_EV_FAILED);
                char *text = mpr_strdup (ev.message);
                CHECK (strstr (text, "exited with status 3") && strstr (text, "oops"));
                free (text);
                seen |= 8;
            }
            else
            if (id == 50) {
                CHECK (ev.type == SQ_EV_FAILED);
                seen |= 16;
            }
        }
        CHECK (rc == 0);
        sq_iter_release (&it);
    }

    //  GFETCH from the serve socket: present, then absent.
    void *client = zmq_socket (ctx, ZMQ_DEALER);
    zmq_setsockopt (client, ZMQ_LINGER, &linger, sizeof linger);
    CHECK (zmq_connect (client, serve) == 0);
    sq_gfetch_encode (&w, 5, sq_key (1, 11), NULL, 0);
    CHECK (sq_send (client, NULL, 0, &w, NULL, 0, 0) == 0);
    zmq_pollitem_t item = { client, 0, ZMQ_POLLIN, 0 };
    CHECK (zmq_poll (&item, 1, 5000) == 1);
    CHECK (sq_msg_recv (&msg, client, 0, 10) == 0 && msg.n == 2);
    sq_reply_t reply;
    CHECK (sq_reply_decode (&reply, sq_msg_data (&msg, 0), sq_msg_size (&msg, 0), &err) == 0);
    CHECK (reply.req == 5 && reply.code == 0);
    CHECK (sq_msg_size (&msg, 1) == 12 && memcmp (sq_msg_data (&msg, 1), "hello world!", 12) == 0);

    //  SEND the execute output to a fake peer.
    void *peer = zmq_socket (ctx, ZMQ_PULL);
    zmq_setsockopt (peer, ZMQ_LINGER, &linger, sizeof linger);
    CHECK (zmq_bind (peer, "tcp://127.0.0.1:*") == 0);
    char peer_ep [256];
    size = sizeof peer_ep;
    zmq_getsockopt (peer, ZMQ_LAST_ENDPOINT, peer_ep, &size);
    sq_wbuf_reset (&elements);
    sq_pack_send (&elements.pk, sq_key (1, 21), 0, 9, peer_ep, NULL);
    sq_batch_header (&w, SQ_MSG_SEND, 1);
    msgpack_sbuffer_write (&w.buf, elements.buf.data, elements.buf.size);
    s_send_to_gov (&w, NULL, 0);
    item = (zmq_pollitem_t) { peer, 0, ZMQ_POLLIN, 0 };
    CHECK (zmq_poll (&item, 1, 5000) == 1);
    CHECK (sq_msg_recv (&msg, peer, 0, 10) == 0 && msg.n == 2);
    //  Copies travel as CHUNKs (docs/protocol.md section 10): this one fits
    //  in one, so it is the whole copy.
    sq_chunk_t chunk;
    CHECK (sq_chunk_decode (&chunk, sq_msg_data (&msg, 0), sq_msg_size (&msg, 0), &err) == 0);
    CHECK (chunk.key == sq_key (1, 21) && chunk.size == 6 && chunk.from == 7 && chunk.offset == 0);
    CHECK (chunk.reply_to.len > 6 && memcmp (chunk.reply_to.ptr, "tcp://", 6) == 0);
    CHECK (memcmp (sq_msg_data (&msg, 1), "HELLO ", 6) == 0);
    sq_object_msg_t object;

    //  OBJECT (type 60, a whole object in one message, sent by no governor
    //  any more) is discarded, of the right size or not: the first LOCATED
    //  after them is the chunked copy's below (s_expect_copy).
    void *push = zmq_socket (ctx, ZMQ_PUSH);
    zmq_setsockopt (push, ZMQ_LINGER, &linger, sizeof linger);
    CHECK (zmq_connect (push, data) == 0);
    object = (sq_object_msg_t) { sq_key (1, 60), 0, 3, s_mstr ("x"), 2 };
    sq_object_encode (&w, &object);
    s_payload (&payloads [0], "abcd");          //  wrong size: discarded
    CHECK (sq_send (push, NULL, 0, &w, payloads, 1, 0) == 0);
    object.key = sq_key (1, 61);
    sq_object_encode (&w, &object);
    s_payload (&payloads [0], "abc");
    CHECK (sq_send (push, NULL, 0, &w, payloads, 1, 0) == 0);
    sq_iter_t it;
    sq_event_t ev;

    //  Copies in chunks. Chunks of at least TRANSFER_PART_MIN (256 KiB) are
    //  kept as received and joined; ranges are read back inside a part and
    //  across parts. Smaller ones are copied into one buffer. A chunk of
    //  another size than the first (but the last) ends the copy: LOST.
    size_t big = (512u << 10) + 5;
    uint8_t *bytes = (uint8_t *) malloc (big);
    for (size_t i = 0; i < big; i++)
        bytes [i] = (uint8_t) (i * 31 + i / 997);
    s_chunk (push, peer_ep, 1, sq_key (1, 62), bytes, 0, 256u << 10, big);
    s_chunk (push, peer_ep, 1, sq_key (1, 62), bytes, 256u << 10, 256u << 10, big);
    s_chunk (push, peer_ep, 1, sq_key (1, 62), bytes, 512u << 10, 5, big);
    s_expect_copy (&msg, sq_key (1, 62), SQ_EV_LOCATED, big);
    CHECK (s_copy_us > 0);              //  timed, for the broker's copy rate
    s_gread_check (client, sq_key (1, 62), bytes, 0, big);
    s_gread_check (client, sq_key (1, 62), bytes, 256u << 10, 256u << 10);
    s_gread_check (client, sq_key (1, 62), bytes, 1000, 300000);
    s_gread_check (client, sq_key (1, 62), bytes, big - 3, 3);
    size_t small = 3 * 4096 + 1;
    for (uint64_t offset = 0; offset < small; offset += 4096)
        s_chunk (push, peer_ep, 2, sq_key (1, 63), bytes, offset,
                 small - offset < 4096? small - offset: 4096, small);
    s_expect_copy (&msg, sq_key (1, 63), SQ_EV_LOCATED, small);
    s_gread_check (client, sq_key (1, 63), bytes, 0, small);
    s_chunk (push, peer_ep, 3, sq_key (1, 64), bytes, 0, 256u << 10, big);
    s_chunk (push, peer_ep, 3, sq_key (1, 64), bytes, 256u << 10, 100, big);
    s_expect_copy (&msg, sq_key (1, 64), SQ_EV_LOST, 0);
    s_chunk (push, peer_ep, 4, sq_key (1, 65), bytes, 0, 4096, small);
    s_chunk (push, peer_ep, 4, sq_key (1, 65), bytes, 4096, 100, small);
    s_expect_copy (&msg, sq_key (1, 65), SQ_EV_LOST, 0);
    free (bytes);

    //  DROP the concat output: GFETCH now fails.
    sq_wbuf_reset (&elements);
    msgpack_pack_uint64 (&elements.pk, sq_key (1, 11));
    sq_batch_header (&w, SQ_MSG_DROP, 1);
    msgpack_sbuffer_write (&w.buf, elements.buf.data, elements.buf.size);
    s_send_to_gov (&w, NULL, 0);
    for (int tries = 0; ; tries++) {
        sq_gfetch_encode (&w, 6, sq_key (1, 11), NULL, 0);
        CHECK (sq_send (client, NULL, 0, &w, NULL, 0, 0) == 0);
        item = (zmq_pollitem_t) { client, 0, ZMQ_POLLIN, 0 };
        CHECK (zmq_poll (&item, 1, 5000) == 1);
        CHECK (sq_msg_recv (&msg, client, 0, 10) == 0);
        CHECK (sq_reply_decode (&reply, sq_msg_data (&msg, 0), sq_msg_size (&msg, 0), &err) == 0);
        if (reply.code == SQ_E_UNKNOWN_ID)
            break;
        CHECK (tries < 100);     //  DROP and GFETCH travel different sockets
        usleep (10000);
    }

    //  A long sleep with a timeout fails in time; a STOPped one says nothing.
    sq_wbuf_t sleep_conf;
    sq_wbuf_init (&sleep_conf);
    msgpack_pack_map (&sleep_conf.pk, 1);
    sq_pack_cstr (&sleep_conf.pk, "seconds");
    msgpack_pack_double (&sleep_conf.pk, 100.0);
    sq_wbuf_reset (&elements);
    s_pack_task (&elements.pk, sq_key (1, 70), "sleep", &sleep_conf, NULL, 0, sq_key (1, 71), 1, 0);
    s_pack_task (&elements.pk, sq_key (1, 80), "sleep", &sleep_conf, NULL, 0, sq_key (1, 81), 1, 200);
    sq_batch_header (&w, SQ_MSG_ASSIGN, 2);
    msgpack_sbuffer_write (&w.buf, elements.buf.data, elements.buf.size);
    s_send_to_gov (&w, NULL, 0);
    sq_wbuf_reset (&elements);
    msgpack_pack_array (&elements.pk, 2);
    msgpack_pack_uint64 (&elements.pk, sq_key (1, 70));
    msgpack_pack_uint32 (&elements.pk, 0);
    sq_batch_header (&w, SQ_MSG_STOP, 1);
    msgpack_sbuffer_write (&w.buf, elements.buf.data, elements.buf.size);
    s_send_to_gov (&w, NULL, 0);
    //  Both sleeps are announced as started; the next other event must be
    //  the timeout of task 80 (task 70 was stopped and says nothing).
    bool failed = false;
    while (!failed) {
        s_expect (&msg, SQ_MSG_UPDATE, 0, 5000);
        CHECK (sq_update_begin (&it, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
        while (!failed && sq_update_next (&it, &ev) == 1) {
            if (ev.type == SQ_EV_STARTED)
                continue;
            CHECK (ev.type == SQ_EV_FAILED && ev.key == sq_key (1, 80));
            failed = true;
        }
        if (!failed)
            sq_iter_release (&it);
    }
    char *text = mpr_strdup (ev.message);
    CHECK (strstr (text, "timed out after 0.2 s"));
    free (text);
    sq_iter_release (&it);

    //  SIGTERM: BYE, then exit 0.
    kill (s_pid, SIGTERM);
    s_expect (&msg, SQ_MSG_BYE, 0, 5000);
    int status = 0;
    for (int i = 0; i < 500 && waitpid (s_pid, &status, WNOHANG) == 0; i++)
        usleep (10000);
    CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    s_pid = 0;

    sq_msg_close (&msg);
    free (msg.frames);
    sq_wbuf_release (&w);
    sq_wbuf_release (&tr);
    sq_wbuf_release (&fail);
    sq_wbuf_release (&elements);
    sq_wbuf_release (&sleep_conf);
    free (serve);
    free (data);
    zmq_close (client);
    zmq_close (peer);
    zmq_close (push);
    zmq_close (s_router);
    zmq_ctx_term (ctx);
    printf ("test_governor_fake_broker: OK\n");
    return 0;
}
