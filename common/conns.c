/*  conns: connection accounting from a socket monitor. See conns.h. */
#include "conns.h"
#include "idmap.h"
#include "log.h"
#include <zmq.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define S_MIN_AGE_MS 1000       //  younger connections are not pushed out
#define S_LOG_LINES 10          //  refusals logged per window, the rest counted
#define S_LOG_WINDOW_MS 10000

typedef struct _conn_t conn_t;
struct _conn_t {
    int fd;
    struct sockaddr_storage addr;   //  the peer, as at ACCEPTED
    socklen_t addr_len;
    bool identified;
    int64_t accepted;
    int64_t active;                 //  last message (or accept), ms
    conn_t *prev, *next;            //  unidentified ones, least active first
};

struct _conns_t {
    conns_limits_t limits;
    char what [32];
    sq_idmap_t *by_fd;
    conn_t *head, *tail;            //  the unidentified
    size_t n_unidentified;
    uint64_t closed;
    sq_ratelimit_t log;
};

size_t
conns_raise_nofile (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit))
        return 1024;
    if (limit.rlim_cur < limit.rlim_max) {
        struct rlimit raised = { limit.rlim_max, limit.rlim_max };
        if (setrlimit (RLIMIT_NOFILE, &raised) == 0)
            limit = raised;
    }
    return limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > ((size_t) 1 << 30)?
        (size_t) 1 << 30: (size_t) limit.rlim_cur;
}

void
conns_limits_for (size_t nofile, size_t reserve, conns_limits_t *limits)
{
    size_t total = nofile > 2 * reserve? nofile - reserve: nofile / 2;
    limits->max_total = total? total: 1;
    //  Handshakes under way are few: peers that connect say who they are
    //  within milliseconds.
    limits->max_unidentified = total / 2 < 4096? total / 2: 4096;
    if (limits->max_unidentified < 8)
        limits->max_unidentified = 8;
    limits->max_per_address = limits->max_unidentified / 4 < 256? limits->max_unidentified / 4: 256;
    if (limits->max_per_address < 4)
        limits->max_per_address = 4;
    limits->idle_ms = 10000;
}

conns_t *
conns_new (const conns_limits_t *limits, const char *what)
{
    conns_t *self = (conns_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->limits = *limits;
    snprintf (self->what, sizeof self->what, "%s", what);
    self->by_fd = sq_idmap_new ();
    if (!self->by_fd) {
        free (self);
        return NULL;
    }
    return self;
}

void
conns_destroy (conns_t **self_p)
{
    conns_t *self = *self_p;
    if (!self)
        return;
    size_t cursor = 0;
    conn_t *conn;
    while ((conn = (conn_t *) sq_idmap_next (self->by_fd, &cursor, NULL)))
        free (conn);
    sq_idmap_destroy (&self->by_fd);
    free (self);
    *self_p = NULL;
}

//  --------------------------------------------------------------------------
//  The list of unidentified connections, least recently active first

static void
s_unlink (conns_t *self, conn_t *conn)
{
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        self->head = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    else
        self->tail = conn->prev;
    conn->prev = conn->next = NULL;
    self->n_unidentified--;
}

static void
s_append (conns_t *self, conn_t *conn)
{
    conn->prev = self->tail;
    conn->next = NULL;
    if (self->tail)
        self->tail->next = conn;
    else
        self->head = conn;
    self->tail = conn;
    self->n_unidentified++;
}

static void
s_forget (conns_t *self, conn_t *conn)
{
    if (!conn->identified)
        s_unlink (self, conn);
    sq_idmap_remove (self->by_fd, (uint64_t) conn->fd);
    free (conn);
}

static bool
s_same_address (const conn_t *a, const conn_t *b)
{
    if (a->addr.ss_family != b->addr.ss_family)
        return false;
    if (a->addr.ss_family == AF_INET)
        return ((const struct sockaddr_in *) &a->addr)->sin_addr.s_addr
            == ((const struct sockaddr_in *) &b->addr)->sin_addr.s_addr;
    if (a->addr.ss_family == AF_INET6)
        return memcmp (&((const struct sockaddr_in6 *) &a->addr)->sin6_addr,
                       &((const struct sockaddr_in6 *) &b->addr)->sin6_addr,
                       sizeof (struct in6_addr)) == 0;
    return true;                //  ipc: one "address"
}

static void
s_address_text (const conn_t *conn, char *text, size_t size)
{
    if (conn->addr.ss_family == AF_INET)
        inet_ntop (AF_INET, &((const struct sockaddr_in *) &conn->addr)->sin_addr, text,
                   (socklen_t) size);
    else
    if (conn->addr.ss_family == AF_INET6)
        inet_ntop (AF_INET6, &((const struct sockaddr_in6 *) &conn->addr)->sin6_addr, text,
                   (socklen_t) size);
    else
        snprintf (text, size, "a local socket");
}

//  Shuts the connection down if its descriptor still is that connection
//  (the same peer address and port), and forgets it either way: a reused
//  descriptor's own ACCEPTED event comes after.
static void
s_close (conns_t *self, conn_t *conn, const char *why)
{
    struct sockaddr_storage now;
    socklen_t len = sizeof now;
    bool same = getpeername (conn->fd, (struct sockaddr *) &now, &len) == 0
             && len == conn->addr_len && memcmp (&now, &conn->addr, len) == 0;
    if (same && shutdown (conn->fd, SHUT_RDWR) == 0) {
        self->closed++;
        unsigned withheld = sq_ratelimit_withheld (&self->log, S_LOG_WINDOW_MS);
        if (withheld)
            sq_info ("%s: %u more connections closed (not logged one by one)", self->what,
                     withheld);
        if (sq_ratelimit_take (&self->log, S_LOG_LINES, S_LOG_WINDOW_MS)) {
            char address [INET6_ADDRSTRLEN];
            s_address_text (conn, address, sizeof address);
            sq_info ("%s: connection from %s closed: %s", self->what, address, why);
        }
    }
    s_forget (self, conn);
}

//  The least recently active unidentified connection (from the address of
//  `like`, if given), older than a second; NULL if none.
static conn_t *
s_victim (conns_t *self, const conn_t *like, int64_t now)
{
    for (conn_t *c = self->head; c; c = c->next)
        if (c != like && (!like || s_same_address (c, like)) && now - c->accepted >= S_MIN_AGE_MS)
            return c;
    return NULL;
}

static void
s_accepted (conns_t *self, int fd, int64_t now)
{
    conn_t *old = (conn_t *) sq_idmap_lookup (self->by_fd, (uint64_t) fd);
    if (old)                    //  its DISCONNECTED was not seen
        s_forget (self, old);
    conn_t *conn = (conn_t *) calloc (1, sizeof *conn);
    if (!conn)
        return;
    conn->fd = fd;
    conn->addr_len = sizeof conn->addr;
    if (getpeername (fd, (struct sockaddr *) &conn->addr, &conn->addr_len)
    ||  sq_idmap_insert (self->by_fd, (uint64_t) fd, conn)) {
        free (conn);            //  gone already (DISCONNECTED follows)
        return;
    }
    conn->accepted = conn->active = now;
    s_append (self, conn);
    size_t same = 0;
    for (conn_t *c = self->head; c; c = c->next)
        same += s_same_address (c, conn);
    const char *why = NULL;
    conn_t *victim = NULL;
    if (same > self->limits.max_per_address) {
        why = "too many connections from its address that said nothing yet";
        victim = s_victim (self, conn, now);
    }
    else
    if (self->n_unidentified > self->limits.max_unidentified
    ||  sq_idmap_size (self->by_fd) > self->limits.max_total) {
        why = self->n_unidentified > self->limits.max_unidentified
            ? "too many connections that said nothing yet"
            : "too many connections (the limit comes from the descriptor limit)";
        victim = s_victim (self, conn, now);
    }
    if (why)
        s_close (self, victim? victim: conn, why);
}

void
conns_event (conns_t *self, const void *frame, size_t size, int64_t now_ms)
{
    if (size < 6)
        return;
    uint16_t type;
    uint32_t value;
    memcpy (&type, frame, 2);
    memcpy (&value, (const uint8_t *) frame + 2, 4);
    if (type == ZMQ_EVENT_ACCEPTED)
        s_accepted (self, (int) value, now_ms);
    else
    if (type == ZMQ_EVENT_DISCONNECTED) {
        conn_t *conn = (conn_t *) sq_idmap_lookup (self->by_fd, value);
        if (conn)
            s_forget (self, conn);
    }
}

size_t
conns_drain (conns_t *self, void *monitor, size_t max, int64_t now_ms, conns_also_fn *also,
             void *arg)
{
    size_t n = 0;
    zmq_msg_t frame;
    zmq_msg_init (&frame);
    while (n < max && zmq_msg_recv (&frame, monitor, ZMQ_DONTWAIT) >= 0) {
        n++;
        size_t size = zmq_msg_size (&frame);
        conns_event (self, zmq_msg_data (&frame), size, now_ms);
        if (also && size >= 6) {
            uint16_t type;
            uint32_t value;
            memcpy (&type, zmq_msg_data (&frame), 2);
            memcpy (&value, (const uint8_t *) zmq_msg_data (&frame) + 2, 4);
            also (arg, type, value);
        }
        //  The event's other frames (its endpoint): a message comes whole.
        while (zmq_msg_more (&frame) && zmq_msg_recv (&frame, monitor, ZMQ_DONTWAIT) >= 0)
            ;
    }
    zmq_msg_close (&frame);
    return n;
}

void
conns_active (conns_t *self, int fd, bool identified, int64_t now_ms)
{
    conn_t *conn = fd >= 0? (conn_t *) sq_idmap_lookup (self->by_fd, (uint64_t) fd): NULL;
    if (!conn || conn->identified)
        return;
    s_unlink (self, conn);
    conn->active = now_ms;
    if (identified)
        conn->identified = true;
    else
        s_append (self, conn);
}

int64_t
conns_tick (conns_t *self, int64_t now_ms)
{
    while (self->head && now_ms - self->head->active >= self->limits.idle_ms)
        s_close (self, self->head, "it said nothing a peer would");
    return self->head? self->head->active + self->limits.idle_ms: -1;
}

size_t
conns_open (conns_t *self)
{
    return sq_idmap_size (self->by_fd);
}

uint64_t
conns_closed (conns_t *self)
{
    return self->closed;
}
