/*  conns: the accounting of a listening ZeroMQ socket's connections, so
    that nothing unauthenticated can exhaust the process's descriptors.

    libzmq accepts every connection it can; when descriptors run out its
    listener fails accept(2) and, the listening descriptor staying
    readable, spins at 100 % CPU while every new connection waits. So the
    owner of the socket feeds this module the socket monitor's events
    (ZMQ_EVENT_ACCEPTED and ZMQ_EVENT_DISCONNECTED, both carrying the
    descriptor) and says which connections proved who they are (a peer's
    first accepted message); the others are "unidentified" and:
      - at most `max_unidentified` of them in all, and `max_per_address`
        from one peer address (getpeername at ACCEPTED);
      - at most `max_total` connections of any kind;
      - one silent for `idle_ms` is closed.
    Over a limit, the least recently active unidentified connection goes
    (of the same address for the per-address limit) if it is older than a
    second; otherwise the newcomer does: a flood pushes out its own
    connections, not the peers already identified.

    Closing is shutdown(2) on the descriptor, from the owner's thread:
    libzmq's I/O thread sees the end and closes the connection the usual
    way (DISCONNECTED follows). A descriptor can be closed and reused
    before its events are read, so the peer address and port recorded at
    ACCEPTED are checked again first: a reused descriptor is left alone.

    Not thread-safe: one owner thread. */
#ifndef SQ_CONNS_H
#define SQ_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

typedef struct _conns_t conns_t;

#define CONNS_EVENTS (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED)

typedef struct {
    size_t max_total;
    size_t max_unidentified;
    size_t max_per_address;
    int idle_ms;
} conns_limits_t;

//  Raises the soft RLIMIT_NOFILE to the hard one (systemd's default soft
//  limit is 1024) and returns the limit then in force.
size_t conns_raise_nofile (void);
//  Limits below `nofile` descriptors, leaving `reserve` for everything else
//  the process opens.
void conns_limits_for (size_t nofile, size_t reserve, conns_limits_t *limits);

//  `what` names the socket in log lines ("broker", "data socket").
conns_t *conns_new (const conns_limits_t *limits, const char *what);
void conns_destroy (conns_t **self_p);

//  One socket monitor event (the first frame of its message): ACCEPTED
//  and DISCONNECTED are acted on, others ignored. (HANDSHAKE_SUCCEEDED
//  carries no descriptor: a connection is known by its messages.) Events
//  to watch: CONNS_EVENTS.
void conns_event (conns_t *self, const void *frame, size_t size, int64_t now_ms);
//  Reads the events waiting on `monitor` (the reading end of the socket's
//  monitor, watching CONNS_EVENTS) into conns: at most `max` (SIZE_MAX:
//  until none waits). `also`, if given, sees each event's type and value
//  too (the owner's own use of DISCONNECTED). The number of events read.
//  An owner answering handshakes (ZAP) drains first: libzmq reports a
//  connection's ACCEPTED before that connection asks ZAP, so one over a
//  limit is closed before its handshake can finish, never just after
//  (the peer's first message, sent on success, would be lost with it).
typedef void (conns_also_fn) (void *arg, uint16_t type, uint32_t value);
size_t conns_drain (conns_t *self, void *monitor, size_t max, int64_t now_ms,
                    conns_also_fn *also, void *arg);
//  A message came on descriptor `fd`: the connection is active and, if
//  `identified`, belongs to a peer that proved who it is (for good).
void conns_active (conns_t *self, int fd, bool identified, int64_t now_ms);
//  Closes unidentified connections silent for idle_ms; the next time it is
//  due (ms), or -1 if none.
int64_t conns_tick (conns_t *self, int64_t now_ms);

//  Connections open, and closed by this module (limits and idleness).
size_t conns_open (conns_t *self);
uint64_t conns_closed (conns_t *self);

#endif
