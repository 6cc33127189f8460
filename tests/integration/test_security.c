/*  test_security: closed to strangers (docs/security.md). Always runs with
    keys on (CURVE everywhere, ZAP on the broker and on every governor).

    - a plain ZeroMQ peer (no CURVE) gets nothing processed: its handshake
      fails and the broker sees no client;
    - a valid CURVE handshake with a key that is not in the authorized
      directory is refused (ZAP), for clients and governors alike; a
      governor's key cannot say HELLO as a client, nor a client's as a
      governor;
    - a peer that is not a governor cannot reach a governor's data socket;
    - a client reads (GREAD) and writes (PUT) on a governor only with the
      broker's capability for its own key and that object, until it
      expires;
    - tenant B can neither wait on, fetch, cancel, unkeep, delete, place,
      resume nor submit into tenant A's session, and sees none of it in INFO; an
      admin key sees it; to B, A's session answers exactly as a session that
      does not exist (no oracle of which sessions exist);
    - a key removed from the directory (SIGHUP) is refused from then on,
      on a live connection and on a new one.
*/
#include "harness.h"
#include "keys.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_TTL_MS 2000

static harness_t *s_h;
static sq_client_t *s_client;
//  Keys made before the broker starts (it reads its keys then; SIGHUP for
//  later ones).
static const char *s_bob, *s_alice, *s_mallory, *s_root, *s_temp;

//  The first handshake event of a socket (monitored before it connects),
//  or 0 if none came within timeout_ms.
static int
s_handshake (void *monitor, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    while (harness_now () < deadline) {
        zmq_pollitem_t item = { monitor, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll (&item, 1, 100) <= 0)
            continue;
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, monitor, 0) < 0)
            continue;
        uint16_t event = 0;
        if (zmq_msg_size (&frame) >= 2)
            memcpy (&event, zmq_msg_data (&frame), 2);
        while (zmq_msg_more (&frame)) {
            zmq_msg_close (&frame);
            zmq_msg_init (&frame);
            zmq_msg_recv (&frame, monitor, 0);
        }
        zmq_msg_close (&frame);
        if (event & (ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                   | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
            return event;
    }
    return 0;
}

//  A socket of `type` with CURVE keys (key_file NULL: plain), monitored,
//  connected to endpoint. *monitor receives the monitor's PAIR.
static void *
s_socket (void *ctx, int type, const char *endpoint, const char *key_file,
          const char *server_file, void **monitor)
{
    static int n;
    void *socket = zmq_socket (ctx, type);
    int zero = 0;
    zmq_setsockopt (socket, ZMQ_LINGER, &zero, sizeof zero);
    if (key_file) {
        sq_cert_t mine, server;
        char err [600];
        CHECK (sq_cert_load (&mine, key_file, err, sizeof err) == 0, "%s", err);
        CHECK (sq_cert_load (&server, server_file, err, sizeof err) == 0, "%s", err);
        zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, server.public_key, 32);
        zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY, mine.public_key, 32);
        zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, mine.secret_key, 32);
    }
    char monitor_ep [64];
    snprintf (monitor_ep, sizeof monitor_ep, "inproc://security-monitor-%d", n++);
    CHECK (zmq_socket_monitor (socket, monitor_ep, ZMQ_EVENT_ALL) == 0, "monitor");
    *monitor = zmq_socket (ctx, ZMQ_PAIR);
    zmq_setsockopt (*monitor, ZMQ_LINGER, &zero, sizeof zero);
    CHECK (zmq_connect (*monitor, monitor_ep) == 0, "monitor connect");
    CHECK (zmq_connect (socket, endpoint) == 0, "connect %s", endpoint);
    return socket;
}

static void
s_close (void *socket, void *monitor)
{
    zmq_socket_monitor (socket, NULL, 0);
    zmq_close (monitor);
    zmq_close (socket);
}

//  A key pair that no broker accepts: made outside the authorized directory.
static const char *
s_stranger (const char *name, const char *role)
{
    static char path [8][400];
    static int next;
    char err [600], *p = path [next++ % 8];
    CHECK (sq_keygen (name, harness_keys_dir (), role, NULL, err, sizeof err) == 0, "%s", err);
    snprintf (p, 400, "%s/%s.key", harness_keys_dir (), name);
    return p;
}

static char *
s_data_endpoint (const char *governor)
{
    char *json = harness_info (s_client);
    char needle [64];
    snprintf (needle, sizeof needle, "\"%s\"", governor);
    const char *g = strstr (json, needle);
    const char *ep = g? strstr (g, "\"data_endpoint\""): NULL;
    CHECK (ep, "data endpoint of %s", governor);
    ep = strstr (ep, "tcp://");
    char *endpoint = strndup (ep, strcspn (ep, "\""));
    free (json);
    return endpoint;
}

//  --------------------------------------------------------------------------

static void
s_strangers (void)
{
    void *ctx = zmq_ctx_new (), *monitor;
    long clients = harness_info_long (s_client, "clients");

    //  No CURVE at all: the handshake fails, nothing is read.
    void *plain = s_socket (ctx, ZMQ_DEALER, harness_endpoint (s_h), NULL, NULL, &monitor);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_hello_encode_client (&w, 1, "plain");
    sq_send (plain, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
    int event = s_handshake (monitor, 5000);
    CHECK (event && !(event & ZMQ_EVENT_HANDSHAKE_SUCCEEDED),
           "a plain peer's handshake fails (event 0x%x)", event);
    zmq_pollitem_t item = { plain, 0, ZMQ_POLLIN, 0 };
    CHECK (zmq_poll (&item, 1, 200) == 0, "a plain peer gets no answer");
    CHECK (harness_info_long (s_client, "clients") == clients, "and is no client");
    s_close (plain, monitor);
    harness_note ("a plain ZeroMQ peer fails its handshake (event 0x%x) and gets nothing", event);

    //  A valid CURVE handshake with an unlisted key: ZAP says no.
    const char *stranger = s_stranger ("stranger", "client");
    void *curve = s_socket (ctx, ZMQ_DEALER, harness_endpoint (s_h), stranger,
                            harness_key ("broker.pub"), &monitor);
    sq_hello_encode_client (&w, 1, "stranger");
    sq_send (curve, NULL, 0, &w, NULL, 0, ZMQ_DONTWAIT);
    event = s_handshake (monitor, 5000);
    CHECK (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH,
           "an unlisted key's handshake is refused (event 0x%x)", event);
    item.socket = curve;
    CHECK (zmq_poll (&item, 1, 200) == 0, "an unlisted key gets no answer");
    s_close (curve, monitor);
    sq_client_t *c = sq_client_new ();
    CHECK_RC (sq_client_set_keys (c, stranger, harness_key ("broker.pub")), SQ_OK, "keys");
    //  The handshake's refusal is said at once, whatever the timeout.
    CHECK_RC (sq_client_connect (c, harness_endpoint (s_h), 60000), SQ_E_DENIED,
              "the library with an unlisted key cannot connect");
    CHECK (strstr (sq_client_errmsg (c), "refused this client's key"),
           "and says why: %s", sq_client_errmsg (c));
    sq_client_destroy (&c);
    c = sq_client_new ();
    CHECK_RC (sq_client_connect (c, harness_endpoint (s_h), 60000), SQ_E_DENIED,
              "the library without keys cannot connect");
    CHECK (strstr (sq_client_errmsg (c), "requires keys"), "and says why: %s",
           sq_client_errmsg (c));
    sq_client_destroy (&c);
    CHECK (harness_info_long (s_client, "clients") == clients, "still no new client");
    harness_note ("an unlisted key is refused at the handshake (ZAP), by hand and by libsquall");

    //  Keys of the wrong role.
    raw_t *raw = raw_new_keyed (harness_endpoint (s_h), 0, harness_key ("governor.key"),
                                harness_key ("broker.pub"));
    CHECK (raw_hello (raw) == SQ_E_DENIED, "a governor's key cannot be a client");
    raw_destroy (&raw);
    raw = raw_new (harness_endpoint (s_h));
    sq_resource_t res [1] = { { { "cpus", 4 }, 1 } };
    sq_hello_encode_governor (&w, 1, "posing", 1, "tcp://127.0.0.1:9", "tcp://127.0.0.1:9",
                              res, 1, NULL, 0);
    CHECK (raw_send (raw, &w, NULL, 0) == 0 && raw_wait_reply (raw, 1, 5000) == 0
           && raw->reply.code == SQ_E_DENIED, "a client's key cannot be a governor");
    raw_destroy (&raw);
    harness_note ("a governor's key cannot say HELLO as a client, nor a client's as a governor");

    //  An unlisted governor never joins: no READY, it gives up.
    long governors = harness_info_long (s_client, "governors");
    const char *rogue = s_stranger ("rogue", "governor");
    fflush (stdout);
    pid_t pid = fork ();
    CHECK (pid >= 0, "fork");
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int null = open ("/dev/null", O_WRONLY);
        dup2 (null, STDOUT_FILENO);
        execl (getenv ("SQUALL_GOVERNOR_BIN"), "squall-governor", "--broker", harness_endpoint (s_h),
               "--secret-key", rogue, "--broker-key", harness_key ("broker.pub"),
               "--name", "rogue", "--heartbeat-ms", "200", "--no-reconnect",
               "--log-level", "error", (char *) NULL);
        _exit (127);
    }
    int status = 0;
    double deadline = harness_now () + 20;
    pid_t got = 0;
    while ((got = waitpid (pid, &status, WNOHANG)) == 0 && harness_now () < deadline)
        harness_pause (20);
    if (got == 0) {
        kill (pid, SIGKILL);
        waitpid (pid, &status, 0);
    }
    CHECK (got == pid && WIFEXITED (status) && WEXITSTATUS (status) == 3,
           "the unlisted governor gave up unanswered (status 0x%x)", status);
    CHECK (harness_info_long (s_client, "governors") == governors, "and never joined");
    harness_note ("an unlisted governor is never answered and gives up (exit 3)");
    sq_wbuf_release (&w);
    zmq_ctx_term (ctx);
}

//  Only governors may reach a governor's data socket.
static void
s_data_socket (void)
{
    void *ctx = zmq_ctx_new (), *monitor;
    char *data = s_data_endpoint ("g0");
    void *push = s_socket (ctx, ZMQ_PUSH, data, harness_key ("client.key"),
                           harness_key ("governor.pub"), &monitor);
    int event = s_handshake (monitor, 5000);
    CHECK (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH,
           "a client's key on a data socket is refused (event 0x%x)", event);
    s_close (push, monitor);
    push = s_socket (ctx, ZMQ_PUSH, data, harness_key ("governor.key"),
                     harness_key ("governor.pub"), &monitor);
    event = s_handshake (monitor, 5000);
    CHECK (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED,
           "a governor's key on a data socket is accepted (event 0x%x)", event);
    s_close (push, monitor);
    free (data);
    zmq_ctx_term (ctx);
    harness_note ("a client cannot push into a governor's data socket; a governor can");
}

//  --------------------------------------------------------------------------
//  Capabilities

//  A raw client (key) with a session holding object 3: 20000 bytes made
//  by a concat on a governor (too big for the broker to hold), kept.
static raw_t *
s_owner (const char *key, uint8_t *bytes)
{
    raw_t *raw = raw_new_keyed (harness_endpoint (s_h), 0, key, harness_key ("broker.pub"));
    CHECK (raw_hello (raw) == 0, "hello");
    raw_session_open (raw);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (raw);
    sq_pack_submit_begin (&w.pk, req, raw->session);
    msgpack_pack_array (&w.pk, 2);
    sq_pack_object_spec (&w.pk, 1, 0, "", 1, "");
    sq_pack_object_spec (&w.pk, 3, SQ_OBJ_KEEP, "", -1, "");
    msgpack_pack_array (&w.pk, 1);
    uint32_t inputs [1] = { 1 }, outputs [1] = { 3 };
    sq_task_spec_t task = { .id = 2, .kind = { "concat", 6 }, .n_inputs = 1, .inputs = inputs,
                            .n_outputs = 1, .outputs = outputs };
    sq_pack_task_spec (&w.pk, &task);
    harness_pattern (bytes, 20000, 5);
    zmq_msg_t payload;
    zmq_msg_init_size (&payload, 20000);
    memcpy (zmq_msg_data (&payload), bytes, 20000);
    CHECK (raw_send (raw, &w, &payload, 1) == 0 && raw_wait_reply (raw, req, 10000) == 0
           && raw->reply.code == 0, "SUBMIT");
    sq_wbuf_release (&w);
    return raw;
}

typedef struct {
    char endpoint [256];
    uint8_t cap [SQ_CAP_MAX];
    size_t cap_len;
    const char *pub;            //  the governor's key file (harness)
} s_where_t;

static void
s_where (raw_t *raw, uint32_t id, s_where_t *where)
{
    sq_request_t q = { .type = SQ_MSG_FETCH, .req = raw_next_req (raw), .session = raw->session,
                       .id = id, .timeout_ms = 20000 };
    CHECK (raw_request (raw, &q, 25000) == 0, "FETCH");
    sq_fetched_t fetched;
    sq_errbuf_t err;
    CHECK (sq_fetched_decode (&fetched, raw->reply.body, raw->reply.body_size, &err) == 0
           && fetched.located, "FETCH reply names a governor");
    CHECK (fetched.where.key.len == 32 && fetched.where.capability.len > 0,
           "with keys, where has the governor's key and a capability");
    snprintf (where->endpoint, sizeof where->endpoint, "%.*s", (int) fetched.where.endpoint.len,
              fetched.where.endpoint.ptr);
    memcpy (where->cap, fetched.where.capability.ptr, fetched.where.capability.len);
    where->cap_len = fetched.where.capability.len;
    where->pub = harness_governor_pub ((const uint8_t *) fetched.where.key.ptr);
}

//  A GREAD of the whole of object `id` of `session` with this capability;
//  the reply code.
static int
s_gread (raw_t *serve, uint32_t session, uint32_t id, const uint8_t *cap, size_t cap_len)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_gread_t g = { .req = raw_next_req (serve), .key = sq_key (session, id), .offset = 0,
                     .length = 1 << 20, .capability = { (const char *) cap, (uint32_t) cap_len } };
    sq_gread_encode (&w, &g);
    CHECK (raw_send (serve, &w, NULL, 0) == 0 && raw_wait_reply (serve, g.req, 5000) == 0,
           "GREAD answered");
    sq_wbuf_release (&w);
    return (int) serve->reply.code;
}

static void
s_capabilities (void)
{
    uint8_t bytes [20000];
    raw_t *alice = s_owner (harness_key ("client.key"), bytes);
    s_where_t where;
    double issued = harness_now ();
    s_where (alice, 3, &where);
    raw_t *serve = raw_new_keyed (where.endpoint, 0, harness_key ("client.key"), where.pub);
    CHECK (s_gread (serve, alice->session, 3, where.cap, where.cap_len) == 0
           && serve->msg.n == 2 && sq_msg_size (&serve->msg, 1) == 20000
           && memcmp (sq_msg_data (&serve->msg, 1), bytes, 20000) == 0,
           "GREAD with the capability reads the object");
    CHECK (s_gread (serve, alice->session, 3, NULL, 0) == SQ_E_DENIED, "GREAD without one is refused");
    uint8_t forged [SQ_CAP_MAX];
    memcpy (forged, where.cap, where.cap_len);
    forged [where.cap_len - 1] ^= 1;
    CHECK (s_gread (serve, alice->session, 3, forged, where.cap_len) == SQ_E_DENIED,
           "a forged capability is refused");
    CHECK (s_gread (serve, alice->session, 1, where.cap, where.cap_len) == SQ_E_DENIED,
           "a capability for another object is refused");
    //  A PUT with a read capability, or none.
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_put_t put = { .req = raw_next_req (serve), .key = sq_key (alice->session, 50), .offset = 0,
                     .size = 4, .content_type = { "", 0 },
                     .capability = { (const char *) where.cap, (uint32_t) where.cap_len } };
    sq_put_encode (&w, &put);
    zmq_msg_t payload;
    zmq_msg_init_size (&payload, 4);
    memcpy (zmq_msg_data (&payload), "abcd", 4);
    CHECK (raw_send (serve, &w, &payload, 1) == 0 && raw_wait_reply (serve, put.req, 5000) == 0
           && serve->reply.code == SQ_E_DENIED, "a PUT with a read capability is refused");
    raw_destroy (&serve);

    //  Another client (another key) with alice's capability.
    raw_t *bob = raw_new_keyed (where.endpoint, 0, s_bob, where.pub);
    CHECK (s_gread (bob, alice->session, 3, where.cap, where.cap_len) == SQ_E_DENIED,
           "another client's capability is refused");
    raw_destroy (&bob);
    harness_note ("GREAD needs the broker's capability: none, forged, for another object, "
                  "for another client or for writing are all refused");

    //  It expires (the broker runs with --capability-ttl-ms S_TTL_MS).
    serve = raw_new_keyed (where.endpoint, 0, harness_key ("client.key"), where.pub);
    int code = 0;
    while (code == 0 && harness_now () - issued < S_TTL_MS / 1000.0 + 5) {
        code = s_gread (serve, alice->session, 3, where.cap, where.cap_len);
        if (code == 0)
            harness_pause (50);
    }
    double age = harness_now () - issued;
    CHECK (code == SQ_E_DENIED && age >= S_TTL_MS / 1000.0 * 0.9,
           "the capability expired after %.2f s (code %d)", age, code);
    raw_destroy (&serve);
    harness_note ("a capability of %d ms was refused after %.2f s", S_TTL_MS, age);
    raw_destroy (&alice);
}

//  --------------------------------------------------------------------------
//  Tenants

static void
s_tenants (void)
{
    const char *alice_key = s_alice, *mallory_key = s_mallory, *admin_key = s_root;
    uint8_t bytes [20000];
    raw_t *alice = s_owner (alice_key, bytes);
    //  Something of alice's that keeps running.
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (alice);
    sq_pack_submit_begin (&w.pk, req, alice->session);
    msgpack_pack_array (&w.pk, 1);
    sq_pack_object_spec (&w.pk, 5, SQ_OBJ_KEEP, "", -1, "");
    msgpack_pack_array (&w.pk, 1);
    uint32_t outputs [1] = { 5 };
    size_t size;
    void *config = sq_config_sleep (600, &size);
    sq_resource_t none [1] = { { { "cpus", 4 }, 0 } };
    sq_task_spec_t task = { .id = 4, .kind = { "sleep", 5 }, .n_outputs = 1, .outputs = outputs,
                            .config = config, .config_size = size, .n_resources = 1,
                            .resources = none };
    sq_pack_task_spec (&w.pk, &task);
    CHECK (raw_send (alice, &w, NULL, 0) == 0 && raw_wait_reply (alice, req, 5000) == 0
           && alice->reply.code == 0, "alice's long task");
    sq_free (config);
    sq_request_t wait3 = { .type = SQ_MSG_WAIT, .req = raw_next_req (alice), .session = alice->session,
                           .mode = SQ_WAIT_ALL, .ids = (uint32_t []) { 3 }, .n_ids = 1, .timeout_ms = 20000 };
    CHECK (raw_request (alice, &wait3, 25000) == 0, "alice's object is there");

    raw_t *mallory = raw_new_keyed (harness_endpoint (s_h), 0, mallory_key, harness_key ("broker.pub"));
    CHECK (raw_hello (mallory) == 0, "mallory says hello");
    raw_session_open (mallory);
    uint32_t ids [1] = { 3 };
    struct { const char *what; sq_request_t q; } tries [] = {
        { "WAIT", { .type = SQ_MSG_WAIT, .mode = SQ_WAIT_ALL, .ids = ids, .n_ids = 1, .timeout_ms = 1000 } },
        { "FETCH", { .type = SQ_MSG_FETCH, .id = 3, .timeout_ms = 1000 } },
        { "CANCEL", { .type = SQ_MSG_CANCEL, .ids = (uint32_t []) { 4 }, .n_ids = 1 } },
        { "CANCEL all", { .type = SQ_MSG_CANCEL } },
        { "UNKEEP", { .type = SQ_MSG_UNKEEP, .ids = ids, .n_ids = 1 } },
        { "KEEP", { .type = SQ_MSG_KEEP, .ids = ids, .n_ids = 1 } },
        { "SESSION_CLOSE", { .type = SQ_MSG_SESSION_CLOSE } },
        { "UPLOAD", { .type = SQ_MSG_UPLOAD, .id = 9, .size = 10 } },
        { "RESUME", { .type = SQ_MSG_RESUME, .token = { (const char *) mallory->token, SQ_TOKEN_LEN } } },
        { "DELETE", { .type = SQ_MSG_DELETE, .ids = ids, .n_ids = 1 } },
        { "PLACE", { .type = SQ_MSG_PLACE, .id = 3, .copies = 2, .timeout_ms = 1000 } },
        { "PLACE who has it", { .type = SQ_MSG_PLACE, .id = 3, .timeout_ms = 1000 } },
    };
    //  A session id nobody has, next to alice's: mallory must not tell them apart.
    uint32_t nowhere = alice->session + 1000;
    for (size_t i = 0; i < sizeof tries / sizeof tries [0]; i++) {
        char expected [200], *message;
        int codes [2];
        for (int k = 0; k < 2; k++) {
            tries [i].q.req = raw_next_req (mallory);
            tries [i].q.session = k? alice->session: nowhere;
            codes [k] = raw_request (mallory, &tries [i].q, 5000);
            message = raw_reply_message (mallory);
            //  The same words, but for the session's number.
            char id [16];
            snprintf (id, sizeof id, "%u", k? alice->session: nowhere);
            char *p = strstr (message, id);
            char normal [200];
            if (p)
                snprintf (normal, sizeof normal, "%.*sN%s", (int) (p - message), message, p + strlen (id));
            else
                snprintf (normal, sizeof normal, "%s", message);
            if (k == 0)
                snprintf (expected, sizeof expected, "%s", normal);
            else
                CHECK (strcmp (normal, expected) == 0, "mallory's %s on alice's session reads as "
                       "on no session: '%s' vs '%s'", tries [i].what, message, expected);
            if (k == 1)
                CHECK (!strstr (message, "alice"), "the refusal names nothing of alice's: %s", message);
            free (message);
        }
        CHECK (codes [1] == SQ_E_SESSION && codes [0] == SQ_E_SESSION,
               "mallory's %s on alice's session: code %d, as on no session (%d)",
               tries [i].what, codes [1], codes [0]);
    }
    //  SUBMIT into alice's session, and an input of alice's in mallory's own.
    req = raw_next_req (mallory);
    sq_pack_submit_begin (&w.pk, req, alice->session);
    msgpack_pack_array (&w.pk, 1);
    sq_pack_object_spec (&w.pk, 100, 0, "", -1, "");
    msgpack_pack_array (&w.pk, 1);
    uint32_t in [1] = { 3 }, out [1] = { 100 };
    sq_task_spec_t steal = { .id = 99, .kind = { "concat", 6 }, .n_inputs = 1, .inputs = in,
                             .n_outputs = 1, .outputs = out };
    sq_pack_task_spec (&w.pk, &steal);
    CHECK (raw_send (mallory, &w, NULL, 0) == 0 && raw_wait_reply (mallory, req, 5000) == 0
           && mallory->reply.code == SQ_E_SESSION, "SUBMIT into alice's session is refused as "
           "into no session (code %u)", mallory->reply.code);
    req = raw_next_req (mallory);
    sq_pack_submit_begin (&w.pk, req, mallory->session);
    msgpack_pack_array (&w.pk, 1);
    sq_pack_object_spec (&w.pk, 100, 0, "", -1, "");
    msgpack_pack_array (&w.pk, 1);
    sq_pack_task_spec (&w.pk, &steal);
    CHECK (raw_send (mallory, &w, NULL, 0) == 0 && raw_wait_reply (mallory, req, 5000) == 0
           && mallory->reply.code == SQ_E_UNKNOWN_ID,
           "alice's object is nothing in mallory's session (code %u)", mallory->reply.code);
    //  alice's object is still there, undeleted and unmoved.
    sq_request_t where3 = { .type = SQ_MSG_PLACE, .req = raw_next_req (alice), .session = alice->session,
                            .id = 3, .timeout_ms = 5000 };
    CHECK (raw_request (alice, &where3, 10000) == 0, "alice's object survived mallory's DELETE");
    harness_note ("tenant mallory cannot wait on, fetch, cancel, keep, unkeep, close, upload "
                  "into, resume, delete, place or submit into tenant alice's session, nor use "
                  "its objects");

    //  INFO: mallory sees only her own session; an admin sees both.
    sq_client_t *m = sq_client_new ();
    CHECK_RC (sq_client_set_keys (m, mallory_key, harness_key ("broker.pub")), SQ_OK, "keys");
    CHECK_RC (sq_client_connect (m, harness_endpoint (s_h), 5000), SQ_OK, "mallory's library client");
    char *json = harness_info (m);
    long sessions = harness_json_long (json, "sessions");
    long running = harness_json_long (json, "tasks.running") + harness_json_long (json, "tasks.assigned");
    CHECK (sessions == 1 && running == 0, "mallory's INFO: %ld sessions, %ld busy tasks: %s",
           sessions, running, json);
    sq_free (json);
    sq_client_destroy (&m);
    sq_client_t *root = sq_client_new ();
    CHECK_RC (sq_client_set_keys (root, admin_key, harness_key ("broker.pub")), SQ_OK, "keys");
    CHECK_RC (sq_client_connect (root, harness_endpoint (s_h), 5000), SQ_OK, "the admin client");
    json = harness_info (root);
    CHECK (harness_json_long (json, "sessions") >= 2
           && harness_json_long (json, "tasks.running") + harness_json_long (json, "tasks.assigned") >= 1,
           "the admin's INFO sees every tenant: %s", json);
    sq_free (json);
    sq_client_destroy (&root);
    harness_note ("INFO shows a client its own tenant's sessions and tasks; an admin sees all");
    sq_wbuf_release (&w);
    raw_destroy (&mallory);
    raw_destroy (&alice);
}

//  --------------------------------------------------------------------------

static void
s_revoked (void)
{
    const char *temp = s_temp;
    sq_client_t *c = sq_client_new ();
    CHECK_RC (sq_client_set_keys (c, temp, harness_key ("broker.pub")), SQ_OK, "keys");
    sq_client_set_resume (c, 0);
    CHECK_RC (sq_client_connect (c, harness_endpoint (s_h), 5000), SQ_OK, "temp connects");
    char *json = NULL;
    CHECK_RC (sq_client_info (c, &json), SQ_OK, "temp works");
    sq_free (json);
    char pub [400];
    snprintf (pub, sizeof pub, "%.*s.pub", (int) (strlen (temp) - 4), temp);
    CHECK (unlink (pub) == 0, "remove %s", pub);
    CHECK (harness_reload_keys (s_h) == 0, "SIGHUP");
    //  SIGHUP is read at the broker's next turn: poll until it is refused.
    int rc = 0;
    double deadline = harness_now () + 10;
    while (rc == 0 && harness_now () < deadline) {
        rc = sq_client_info (c, &json);
        if (rc == 0) {
            sq_free (json);
            harness_pause (20);
        }
    }
    CHECK (rc == SQ_E_DENIED, "the connected client of a removed key is refused: %d (%s)",
           rc, sq_client_errmsg (c));
    //  Its peer ended with that refusal, its connection did not: what it
    //  sends next is refused too, not taken for a connection the broker
    //  forgot (SQ_E_HELLO, which a client answers by resuming).
    rc = sq_client_info (c, &json);
    CHECK (rc == SQ_E_DENIED, "and so is its next message: %d (%s)", rc, sq_client_errmsg (c));
    sq_client_destroy (&c);
    c = sq_client_new ();
    CHECK_RC (sq_client_set_keys (c, temp, harness_key ("broker.pub")), SQ_OK, "keys");
    CHECK_RC (sq_client_connect (c, harness_endpoint (s_h), 1000), SQ_E_DENIED,
              "a removed key cannot connect again");
    sq_client_destroy (&c);
    harness_note ("a key removed from the directory (SIGHUP) is refused on its live "
                  "connection and on new ones");
}

//  One governor, one key: a second HELLO as a governor with a key that is
//  connected as a live governor (a key stolen from it, say) is refused and
//  changes nothing; a governor that crashed and comes back at once with
//  its key is let in (its old connection is gone).
static void
s_one_key (void)
{
    long governors = harness_info_long (s_client, "governors");
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_resource_t res [1] = { { { "cpus", 4 }, 64 } };
    sq_hello_encode_governor (&w, 1, "rogue", 1, "tcp://127.0.0.1:9", "tcp://127.0.0.1:9",
                              res, 1, NULL, 0);
    raw_t *rogue = raw_new_keyed (harness_endpoint (s_h), 0, harness_key ("governor.key"),
                                  harness_key ("broker.pub"));
    CHECK (raw_send (rogue, &w, NULL, 0) == 0 && raw_wait_reply (rogue, 1, 5000) == 0,
           "the broker answers a second governor with a live key");
    CHECK (rogue->reply.code == SQ_E_DENIED, "a live governor's key is refused as a second "
           "governor (code %d)", (int) rogue->reply.code);
    char *message = raw_reply_message (rogue);
    CHECK (message && strstr (message, "already connected as governor"),
           "the refusal says why: %s", message? message: "(none)");
    free (message);
    raw_destroy (&rogue);
    CHECK (harness_info_long (s_client, "governors") == governors, "no governor was added");
    //  The governor whose key it was still runs tasks.
    sq_session_t *session = sq_session_new (s_client);
    CHECK (session, "session");
    uint32_t a = harness_blob_str (session, "still here");
    uint32_t copies [4];
    for (int i = 0; i < 4; i++) {
        copies [i] = harness_task1 (session, "concat", &a, 1, NULL, 0);
        CHECK_RC (sq_keep (session, copies [i]), SQ_OK, "keep");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    for (int i = 0; i < 4; i++)
        FETCH_EXPECT (session, copies [i], "still here", 10);
    sq_session_destroy (&session);
    harness_note ("a governor key already connected as a live governor is refused (SQ_E_DENIED, "
                  "\"already connected\"), and the live governor keeps working");

    //  Crashed, and back at once with the same key: its successor.
    harness_kill_governor (s_h, 1, SIGKILL);
    const char *again [] = { "--secret-key", harness_key ("gov-1.key"), NULL };
    harness_add_governor_args (s_h, "g1-again", 2, again);
    CHECK (harness_info_wait (s_client, "governors", governors, 20000) == governors,
           "the restarted governor joined with its key");
    harness_note ("a governor killed and started again at once with its key is let in");
}

int
main (void)
{
    setenv ("SQUALL_TEST_SECURE", "1", 1);
    char ttl [32];
    snprintf (ttl, sizeof ttl, "%d", S_TTL_MS);
    const char *args [] = { "--capability-ttl-ms", ttl, "--heartbeat-ms", "200", NULL };
    s_bob = strdup (harness_keygen ("bob", "client", "bob"));
    s_alice = strdup (harness_keygen ("alice", "client", "alice"));
    s_mallory = strdup (harness_keygen ("mallory", "client", "mallory"));
    s_root = strdup (harness_keygen ("root", "admin", NULL));
    s_temp = strdup (harness_keygen ("temp", "client", NULL));
    s_h = harness_new_args (2, 2, args);
    s_client = harness_client (s_h);
    s_strangers ();
    s_data_socket ();
    s_capabilities ();
    s_tenants ();
    s_revoked ();
    s_one_key ();
    harness_client_destroy (&s_client);
    CHECK (harness_destroy (&s_h) == 0, "processes exited cleanly");
    printf ("test_security: all checks passed\n");
    return 0;
}
