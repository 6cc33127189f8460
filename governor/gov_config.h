/*  gov_config: what a governor is started with (governor_new), and the
    exit codes the receive thread ends an incarnation with. Apart from
    governor.h so that receiver.h needs nothing of the governor's lifecycle
    (governor.c includes receiver.h: no include cycle between them). */
#ifndef GOV_CONFIG_H
#define GOV_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "proto.h"

typedef struct {
    const char *broker;         //  endpoint of the broker's governor socket
    uint32_t cpus;
    const char *name;
    const char *listen_host;
    const char *advertise;      //  host in the endpoints we announce
    const char *workdir;        //  exists; tasks make directories inside
    const char *stream_dir;     //  where governors of this host hand streams over, or NULL
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

//  Exit codes of receiver_run / receiver_hello: "reconnect as a new
//  governor", and "a broker welcomed us as a new governor already".
#define GOV_RECONNECT 4
#define GOV_AFRESH 5

#endif
