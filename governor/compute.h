/*  compute: the compute thread. It owns the object store and every task:
    queues ASSIGNed tasks until their inputs are stored, runs them in FIFO
    order within the governor's cpus, executes SEND/DROP/STOP orders, stores
    OBJECTs pushed by peers, answers GFETCH, and batches task events into
    UPDATE messages for the broker.

    Ownership: compute_new takes over the two inproc sockets (to receive, and
    to balance) when it succeeds; compute_destroy closes them. */
#ifndef GOV_COMPUTE_H
#define GOV_COMPUTE_H

#include <stdint.h>
#include "proto.h"
#include "stream.h"

typedef struct _compute_t compute_t;

typedef struct {
    void *pipe;                 //  PAIR to the receive thread
    struct _balancer_load_t *load;  //  where its load is published (balancer.h)
    uint32_t governor_id;
    uint32_t cpus;
    uint64_t inline_max;        //  outputs up to this ride in UPDATE
    const char *workdir;        //  also holds spill files
    uint32_t task_uid_first;    //  who tasks run as (sandbox.h)
    uint32_t task_uid_count;
    uint64_t memory_limit;      //  store limit in bytes, 0: none
    uint64_t box_memory;        //  the cgroup's memory limit, 0: none (store_set_box)
    const char *data_endpoint;  //  ours, where peers send CREDITs
    uint32_t n_resources;       //  named resources offered besides cpus
    const sq_resource_t *resources;
    const char *gpus;           //  devices offered ("0,1,3"), NULL: none
    //  The broker's public key, for the clients of tasks that submit
    //  tasks (squall.get_client()); NULL without keys.
    const uint8_t *broker_key;
    uint64_t log_limit;         //  kept of each task's stdout and stderr (0: tasklog's default)
    const stream_dir_t *stream_dir;  //  --stream-dir (stream.h), or NULL (borrowed)
} compute_args_t;

compute_t *compute_new (const compute_args_t *args);
void compute_destroy (compute_t **self_p);
//  Runs until GOV_TERM; sends its pending events, then GOV_DONE. 0 or -1.
int compute_run (compute_t *self);

#endif
