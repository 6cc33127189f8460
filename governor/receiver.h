/*  receiver: the receive thread, owner of every network socket.

      ctrl   DEALER connected to the broker (HELLO, then ASSIGN/SEND/DROP/
             STOP/KEYS in, UPDATE/LOAD/HEARTBEAT/BYE out)
      data   PULL bound on listen-host: CHUNKs and CREDITs from governors
      serve  ROUTER bound on listen-host: GREAD, GFETCH and PUT from clients
      peers  PUSH per peer data endpoint, made on first use and cached
      zap    with keys, the ZAP handler of the data and serve sockets: a
             governor's key on data, a client's on serve, as the broker's
             KEYS list them; every message is checked again by its key,
             and requests on serve by the broker's capability

    A lost broker (silent, or no longer knowing us) is waited for within
    --broker-grace with everything kept: compute runs on, messages for the
    broker are dropped, and a new control connection asks to reattach
    (HELLO naming our cluster and id). Taken back, compute lists what it
    holds and runs (GOV_REATTACH); refused, the incarnation ends.

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
#include "gov_config.h"
#include "route.h"

typedef struct _receiver_t receiver_t;

//  Binds data and serve, connects ctrl. NULL (logged) on failure.
receiver_t *receiver_new (void *ctx, const gov_config_t *config, int signal_fd);
void receiver_destroy (receiver_t **self_p);
//  Says HELLO (as a new governor) and waits for the REPLY. 0 when
//  accepted, otherwise the exit code: 1 refused, 3 no answer in time, or
//  -1 when a signal came first.
int receiver_hello (receiver_t *self, uint32_t *governor_id, uint64_t *inline_max);
//  What the broker's last welcome said (after receiver_run returned
//  GOV_AFRESH: the id to start the next incarnation with).
void receiver_welcome (receiver_t *self, uint32_t *governor_id, uint64_t *inline_max);
//  The data endpoint announced in HELLO (where peers push chunks and
//  credits to us); valid as long as the receiver.
const char *receiver_data_endpoint (receiver_t *self);
//  The serve endpoint we announce (clients are given it in WHERE).
const char *receiver_serve_endpoint (receiver_t *self);
//  Broker's heartbeat interval, after receiver_hello.
int receiver_heartbeat_ms (receiver_t *self);
//  Replaces the control connection after the broker was lost (the bound
//  data and serve sockets stay). 0 or -1.
int receiver_reconnect (receiver_t *self);
//  Runs until a signal, a BYE from the broker, or a lost broker that did
//  not take us back within --broker-grace. Returns the exit code: 0, 3
//  when the broker was lost (--no-reconnect), GOV_RECONNECT to start
//  afresh, GOV_AFRESH when a broker already welcomed us as a new governor.
int receiver_run (receiver_t *self, void *compute, void *balance);
//  Tells compute and balance to stop and routes their last messages until
//  both said GOV_DONE.
void receiver_stop (receiver_t *self);
//  Says BYE to the broker (unless the broker said it first) and reads
//  ctrl up to the broker's BYE in answer; stops waiting when the
//  connection drops, or after two heartbeats (1 s at most).
void receiver_bye (receiver_t *self);

#endif
