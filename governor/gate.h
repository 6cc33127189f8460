/*  gate: who may connect to a governor's data and serve sockets, on the
    receive thread (receiver.c owns the sockets; this module decides who
    gets through).

    Anyone who reaches these ports can connect. Each socket is watched by a
    socket monitor whose events feed its connection accounting (conns.h): a
    connection's first message identifies it (it passed the handshake, and
    with keys CURVE and ZAP are all the authentication these sockets have),
    the counts stay below the descriptor limit. With keys the gate is also
    the context's ZAP handler: a governor's key on the data socket (ZAP
    domain "data"), a client's on the serve socket ("serve"), as the
    broker's last KEYS lists them.

    A handshake is answered only after its socket's monitor events are read
    (conns_drain): libzmq reports a connection's ACCEPTED before that
    connection asks ZAP, so one over a limit is closed before its handshake
    can finish. The peer's first message, sent once its handshake succeeds,
    then goes out on its next connection instead of into one about to be
    closed (where it would be lost). The broker does the same (auth.h).

    Ownership: gate_new returns a gate the receiver destroys. The watched
    sockets stay the receiver's: it calls gate_unwatch before closing them
    and gate_destroy after (the ZAP handler goes last: a CURVE handshake
    that finds no handler is let in unchecked). */
#ifndef GOV_GATE_H
#define GOV_GATE_H

#include <stdbool.h>
#include <stdint.h>
#include "conns.h"
#include "proto.h"

#define GATE_DATA 0             //  the data socket (ZAP domain "data")
#define GATE_SERVE 1            //  the serve socket ("serve")

typedef struct _gate_t gate_t;

//  With keys, binds the ZAP handler in ctx (before any CURVE server socket
//  of ctx exists, so that no handshake comes unchecked). NULL (logged) on
//  failure.
gate_t *gate_new (void *ctx, bool keys);
//  Closes the monitors and the ZAP handler: after gate_unwatch and the
//  watched sockets' close.
void gate_destroy (gate_t **self_p);
//  Counts `socket`'s connections (GATE_DATA or GATE_SERVE) within limits;
//  `what` names it in log lines. 0 or -1.
int gate_watch (gate_t *self, int which, void *socket, const conns_limits_t *limits,
                const char *what);
//  Stops the monitors, reading what is pending first so that no event send
//  blocks libzmq's I/O thread while it holds the monitor's lock.
void gate_unwatch (gate_t *self);

//  For the reactor's poll: the ZAP socket (NULL without keys), and a
//  watched socket's monitor (NULL before gate_watch).
void *gate_zap (gate_t *self);
void *gate_monitor (gate_t *self, int which);
//  Reads a burst of a socket's monitor events.
void gate_events (gate_t *self, int which, int64_t now_ms);
//  Closes unidentified connections gone idle.
void gate_tick (gate_t *self, int64_t now_ms);
//  Answers a burst of ZAP requests, each after its socket's monitor events.
void gate_handle (gate_t *self, int64_t now_ms);
//  A message came on descriptor `fd` of the socket: its connection is a
//  peer's (for good).
void gate_identified (gate_t *self, int which, int fd, int64_t now_ms);
//  A watched socket's accounting (for its counts), or NULL.
conns_t *gate_conns (gate_t *self, int which);

//  Takes the key lists of a KEYS (copied). Out of memory, logged, the
//  lists before stay.
void gate_keys (gate_t *self, const sq_keyset_t *keys);
//  Whether `key` (32 bytes) may use the socket: its connections are checked
//  again at every message, since a key may go after its handshake.
bool gate_admits (gate_t *self, int which, const uint8_t *key);

#endif
