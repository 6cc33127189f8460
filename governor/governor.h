/*  governor: a squall worker daemon. It owns the ZeroMQ context and three
    threads that share no mutable state and talk only over inproc PAIR
    sockets:
      receive  (the caller's thread): every network socket (broker ctrl,
               data PULL, serve ROUTER, peer PUSHes); see receiver.h
      compute: the object store and the tasks; see compute.h
      balance: load reports to the broker; see balancer.h

    Messages between them are ZeroMQ multipart messages whose first frame
    says where they come from or go (route.h); the rest is the wire
    message itself, moved frame by frame without copying.

    Ownership: governor_new copies nothing it does not need after start; the
    config strings must outlive the governor. governor_destroy frees all. */
#ifndef GOV_GOVERNOR_H
#define GOV_GOVERNOR_H

#include <stdint.h>
#include "proto.h"

typedef struct {
    const char *broker;         //  endpoint of the broker's governor socket
    uint32_t cpus;
    const char *name;
    const char *listen_host;
    const char *advertise;      //  host in the endpoints we announce
    const char *workdir;        //  exists; tasks make directories inside
    //  Tasks run as uids task_uid_first .. + task_uid_count - 1, one per
    //  tenant (sandbox.h); count 0: as the governor.
    uint32_t task_uid_first;
    uint32_t task_uid_count;
    uint32_t n_resources;       //  custom resources besides cpus
    sq_resource_t resources [SQ_MAX_RESOURCES];
    const char *gpus;           //  devices (--gpus) named in tasks'
                                //  CUDA_VISIBLE_DEVICES, NULL: none
    int heartbeat_ms;           //  until the broker says otherwise
    uint64_t memory;            //  the governor's memory in bytes (0: none)
    uint64_t log_limit;         //  --log-limit (0: tasklog's default)
    uint64_t store_limit;       //  its store's part of it (store_budget; 0: none)
    uint64_t box_memory;        //  its cgroup's memory limit (0: none)
    bool reconnect;             //  on a lost broker: reconnect (else exit 3)
    //  Keys (docs/security.md): ours (public and secret) and the broker's
    //  public key; has_keys false without them.
    bool has_keys;
    uint8_t public_key [32];
    uint8_t secret_key [32];
    uint8_t broker_key [32];
    //  How long a lost broker is waited for with everything kept (tasks
    //  run on, objects stay) before starting afresh; 0: at once.
    int broker_grace_ms;
    //  After a first SIGTERM the governor drains (the broker takes its
    //  work elsewhere and says LEAVE); past this, it leaves anyway.
    int drain_timeout_ms;
} gov_config_t;

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

//  Exit codes of receiver_run / receiver_hello: "reconnect as a new
//  governor", and "a broker welcomed us as a new governor already".
#define GOV_RECONNECT 4
#define GOV_AFRESH 5

#endif
