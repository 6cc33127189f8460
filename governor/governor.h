/*  governor: a squall worker daemon. It owns the ZeroMQ context and three
    threads that talk over inproc PAIR sockets and share one mutable thing,
    the compute thread's load (a cell under a lock, balancer.h):
      receive  (the caller's thread): every network socket (broker ctrl,
               data PULL, serve ROUTER, peer PUSHes); see receiver.h
      compute: the object store and the tasks; see compute.h
      balance: LOAD, made from the load compute publishes; see balancer.h

    Messages between them are ZeroMQ multipart messages whose first frame
    says where they come from or go (route.h); the rest is the wire
    message itself, moved frame by frame without copying.

    Ownership: governor_new copies nothing it does not need after start; the
    config strings must outlive the governor. governor_destroy frees all. */
#ifndef GOV_GOVERNOR_H
#define GOV_GOVERNOR_H

#include <stdint.h>
#include "gov_config.h"

typedef struct _governor_t governor_t;

governor_t *governor_new (const gov_config_t *config);
void governor_destroy (governor_t **self_p);
//  Connects, says HELLO, runs until a signal or BYE. A lost broker (silent
//  for 5 heartbeats, or no longer knowing us) ends this incarnation: every
//  task and object goes (the broker has given them to others, or forgot
//  them), and the governor reconnects with back-off as a new governor
//  (a governor is known by its start time, so nothing of an earlier run is taken for this one). Returns the process exit code: 0 clean,
//  1 refused by the broker, 3 broker lost with reconnect off.
int governor_run (governor_t *self, int signal_fd);

#endif
