/*  gate: the data and serve sockets' connection accounting and ZAP
    handler. See gate.h. */
#include "gate.h"
#include "zap.h"
#include "wire.h"
#include "log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_BURST 256             //  events or handshakes per reactor turn
//  Refused handshakes logged: at most this many lines per window.
#define S_REFUSED_LINES 10
#define S_REFUSED_WINDOW_MS 10000

//  Keys that may reach a socket, sorted for bsearch (KEYS from the broker).
typedef struct {
    uint8_t (*keys) [32];
    size_t n;
} s_keyset_t;

struct _gate_t {
    void *ctx;
    void *zap;                      //  ZAP handler, with keys
    sq_msg_t msg;
    sq_ratelimit_t refused_log;
    int64_t now_ms;                 //  the latest time we were told
    struct {
        void *socket;               //  the receiver's
        void *monitor;
        conns_t *conns;
        s_keyset_t keys;            //  governors on data, clients on serve
    } watch [2];
};

gate_t *
gate_new (void *ctx, bool keys)
{
    gate_t *self = (gate_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->ctx = ctx;
    sq_msg_init (&self->msg);
    if (keys && !(self->zap = sq_zap_bind (ctx))) {
        gate_destroy (&self);
        return NULL;
    }
    return self;
}

void
gate_destroy (gate_t **self_p)
{
    gate_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < 2; i++) {
        if (self->watch [i].monitor)
            zmq_close (self->watch [i].monitor);
        conns_destroy (&self->watch [i].conns);
        free (self->watch [i].keys.keys);
    }
    if (self->zap)
        zmq_close (self->zap);
    sq_msg_release (&self->msg);
    free (self);
    *self_p = NULL;
}

int
gate_watch (gate_t *self, int which, void *socket, const conns_limits_t *limits,
            const char *what)
{
    char endpoint [64];
    snprintf (endpoint, sizeof endpoint, "inproc://squall-gate-%p-%d", (void *) self, which);
    self->watch [which].conns = conns_new (limits, what);
    if (!self->watch [which].conns || zmq_socket_monitor (socket, endpoint, CONNS_EVENTS))
        return -1;
    self->watch [which].socket = socket;
    //  libzmq's I/O thread blocks on a full monitor pipe: a deep one.
    int hwm = 100000, zero = 0;
    self->watch [which].monitor = zmq_socket (self->ctx, ZMQ_PAIR);
    if (!self->watch [which].monitor)
        return -1;
    zmq_setsockopt (self->watch [which].monitor, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (self->watch [which].monitor, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return zmq_connect (self->watch [which].monitor, endpoint);
}

void
gate_unwatch (gate_t *self)
{
    for (int i = 0; i < 2; i++) {
        if (!self->watch [i].socket)
            continue;
        if (self->watch [i].monitor)
            conns_drain (self->watch [i].conns, self->watch [i].monitor, SIZE_MAX, self->now_ms,
                         NULL, NULL);
        zmq_socket_monitor (self->watch [i].socket, NULL, 0);
        self->watch [i].socket = NULL;
    }
}

void *
gate_zap (gate_t *self)
{
    return self->zap;
}

void *
gate_monitor (gate_t *self, int which)
{
    return self->watch [which].monitor;
}

conns_t *
gate_conns (gate_t *self, int which)
{
    return self->watch [which].conns;
}

void
gate_events (gate_t *self, int which, int64_t now_ms)
{
    self->now_ms = now_ms;
    if (self->watch [which].monitor)
        conns_drain (self->watch [which].conns, self->watch [which].monitor, S_BURST, now_ms,
                     NULL, NULL);
}

void
gate_tick (gate_t *self, int64_t now_ms)
{
    self->now_ms = now_ms;
    for (int i = 0; i < 2; i++)
        if (self->watch [i].conns)
            conns_tick (self->watch [i].conns, now_ms);
}

void
gate_identified (gate_t *self, int which, int fd, int64_t now_ms)
{
    self->now_ms = now_ms;
    if (self->watch [which].conns)
        conns_active (self->watch [which].conns, fd, true, now_ms);
}

//  --------------------------------------------------------------------------
//  Keys

static int
s_key_cmp (const void *a, const void *b)
{
    return memcmp (a, b, 32);
}

static void
s_keyset_load (s_keyset_t *set, const sq_keylist_t *list)
{
    uint32_t n = list->n;
    uint8_t (*copy) [32] = n? (uint8_t (*) [32]) malloc ((size_t) n * 32): NULL;
    if (n && !copy) {
        sq_error ("out of memory: keys not updated");
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        memcpy (copy [i], list->keys [i], 32);
    if (n)                      //  qsort of NULL is undefined even for 0 keys
        qsort (copy, n, 32, s_key_cmp);
    free (set->keys);
    set->keys = copy;
    set->n = n;
}

void
gate_keys (gate_t *self, const sq_keyset_t *keys)
{
    s_keyset_load (&self->watch [GATE_DATA].keys, &keys->governors);
    s_keyset_load (&self->watch [GATE_SERVE].keys, &keys->clients);
    sq_info ("keys: %zu governors, %zu clients may reach this governor",
             self->watch [GATE_DATA].keys.n, self->watch [GATE_SERVE].keys.n);
}

bool
gate_admits (gate_t *self, int which, const uint8_t *key)
{
    const s_keyset_t *set = &self->watch [which].keys;
    return set->n && bsearch (key, set->keys, set->n, 32, s_key_cmp) != NULL;
}

//  --------------------------------------------------------------------------
//  ZAP: a governor's key on the data socket, a client's on the serve socket

void
gate_handle (gate_t *self, int64_t now_ms)
{
    self->now_ms = now_ms;
    if (!self->zap)
        return;
    unsigned withheld = sq_ratelimit_withheld (&self->refused_log, S_REFUSED_WINDOW_MS);
    if (withheld)
        sq_info ("%u more connections refused (not logged one by one: at most %d lines per "
                 "%d s)", withheld, S_REFUSED_LINES, S_REFUSED_WINDOW_MS / 1000);
    for (int i = 0; i < S_BURST; i++) {
        if (sq_msg_recv (&self->msg, self->zap, ZMQ_DONTWAIT, 8))
            break;
        sq_zap_request_t request;
        char err [200];
        int which = -1;         //  neither socket's: both are read below
        bool allow = false;
        if (sq_zap_decode_msg (&request, &self->msg, err, sizeof err) == 0) {
            which = strcmp (request.domain, "data") == 0? GATE_DATA
                  : strcmp (request.domain, "serve") == 0? GATE_SERVE: -1;
            allow = request.curve && which >= 0 && gate_admits (self, which, request.key);
        }
        else {
            //  A REP socket must answer every request, even one it cannot read.
            memset (&request, 0, sizeof request);
            if (self->msg.n > 1 && sq_msg_size (&self->msg, 1) <= sizeof request.request_id) {
                request.request_id_size = sq_msg_size (&self->msg, 1);
                memcpy (request.request_id, sq_msg_data (&self->msg, 1), request.request_id_size);
            }
        }
        if (!allow && sq_ratelimit_take (&self->refused_log, S_REFUSED_LINES, S_REFUSED_WINDOW_MS))
            sq_info ("connection to the %s socket refused: key %s not admitted by the broker",
                     request.domain [0]? request.domain: "?", request.curve? request.z85: "?");
        //  All of the connection's events so far, its ACCEPTED among them:
        //  one over a limit is closed before this answer lets it finish.
        for (int w = 0; w < 2; w++)
            if ((which < 0 || which == w) && self->watch [w].monitor)
                conns_drain (self->watch [w].conns, self->watch [w].monitor, SIZE_MAX, now_ms,
                             NULL, NULL);
        sq_zap_reply (self->zap, &request, allow, request.z85, "not admitted");
        sq_msg_close (&self->msg);
    }
}
