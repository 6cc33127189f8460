/*  receiver: the receive thread, owner of every network socket.

      ctrl   DEALER connected to the broker (HELLO, then ASSIGN/SEND/DROP/
             STOP in, UPDATE/LOAD/HEARTBEAT/BYE out)
      data   PULL bound on listen-host: OBJECTs pushed by other governors
      serve  ROUTER bound on listen-host: GFETCH from clients
      peers  PUSH per peer data endpoint, made on first use and cached

    It passes what it receives to compute untouched (frames moved, with a
    GOV_ROUTE_* frame in front), and routes what compute and balance send by
    their first frame. It never blocks: when compute's pipe is full it stops
    reading the network until there is room, so the bounded network queues
    and TCP push back on senders.

    Ownership: the receiver owns its network sockets and closes them in
    receiver_destroy; the two pipes are given to receiver_run and stay the
    caller's. */
#ifndef GOV_RECEIVER_H
#define GOV_RECEIVER_H

#include <stdint.h>
#include "governor.h"

typedef struct _receiver_t receiver_t;

//  Binds data and serve, connects ctrl. NULL (logged) on failure.
receiver_t *receiver_new (void *ctx, const gov_config_t *config, int signal_fd);
void receiver_destroy (receiver_t **self_p);
//  Says HELLO and waits for the REPLY. 0 when accepted, otherwise the exit
//  code: 1 refused, 3 no answer in time, or -1 when a signal came first.
int receiver_hello (receiver_t *self, uint32_t *governor_id, uint64_t *inline_max);
//  The data endpoint announced in HELLO (where peers push chunks and
//  credits to us); valid as long as the receiver.
const char *receiver_data_endpoint (receiver_t *self);
//  Broker's heartbeat interval, after receiver_hello.
int receiver_heartbeat_ms (receiver_t *self);
//  Replaces the control connection after the broker was lost (the bound
//  data and serve sockets stay). 0 or -1.
int receiver_reconnect (receiver_t *self);
//  Runs until a signal, a BYE from the broker, or broker silence. Returns
//  the exit code (0, or 3 when the broker was lost).
int receiver_run (receiver_t *self, void *compute, void *balance);
//  Tells compute and balance to stop and routes their last messages until
//  both said GOV_DONE.
void receiver_stop (receiver_t *self);
//  Says BYE to the broker (unless the broker said it first).
void receiver_bye (receiver_t *self);

#endif
