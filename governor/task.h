/*  task: one assigned task attempt as the compute thread keeps it.

    The ASSIGN frame it came from is released as soon as the batch is read,
    so a task copies what it needs: its config bytes (the decoded taskconf
    points into that copy), its name, its input keys and its outputs' keys
    and content types.

    Ownership: task_new returns a task the caller owns; task_destroy frees it
    with its results and its execute child (killed if still running). */
#ifndef GOV_TASK_H
#define GOV_TASK_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "proto.h"
#include "taskconf.h"
#include "blob.h"

typedef struct _execute_t execute_t;

typedef enum {
    TASK_WAITING,               //  some inputs are not in the store yet
    TASK_READY,                 //  in the FIFO of runnable tasks
    TASK_RUNNING                //  holds its cpus: sleeping or a child runs
                                //  (or piped: queued in a busy executor)
} task_state_t;

typedef struct _task_t task_t;
struct _task_t {
    uint64_t key;
    uint32_t attempt;
    sq_kind_t kind;
    sq_taskconf_t conf;
    uint8_t *config;            //  owned copy the conf points into
    char *name;
    char *tenant;               //  its session's ("" without keys): whose
                                //  identity it runs under (sandbox.h)
    uint32_t n_inputs;
    uint64_t *inputs;
    uint32_t n_outputs;
    uint64_t *outputs;
    char **out_types;
    uint32_t cpus;
    uint32_t timeout_ms;
    uint64_t memory;            //  bytes it asked for: killed above, 0: no limit
    uint32_t fail_reason;       //  SQ_FAIL_* reported if it fails
    bool has_exit_code;          //  an execute program ended: its status below
    int32_t exit_code;          //  negative: the signal that killed it
    uint32_t n_resources;       //  other named requests (names owned)
    sq_resource_t resources [SQ_MAX_RESOURCES];
    //  Devices (governor --gpus): what it asked for in thousandths, the
    //  devices it holds while it runs (gpus.h), and their names for its
    //  CUDA_VISIBLE_DEVICES ("" for none; NULL: the governor has no --gpus,
    //  the environment is left alone).
    uint64_t gpus;
    uint64_t gpu_mask;
    char *gpu_names;

    //  Streams (stream.c): the input read as a stream (execute: its stdin)
    //  and the producer attempt whose bytes to read; the output written as
    //  one (execute: its stdout) and how many consumers read it. -1: none.
    int32_t stream_in;
    uint32_t stream_in_version;
    int32_t stream_out;
    uint32_t stream_consumers;
    bool exited;                //  its program ended; its stream still drains
    bool stream_ended;          //  its stream output was written to its end
    uint64_t streamed;          //  bytes of its stream output

    //  Scheduling (owned by the compute thread)
    task_state_t state;
    uint32_t missing;           //  inputs not in the store yet
    uint32_t pins;              //  waiter-list entries still pointing here
    bool stopped;               //  STOPped while pinned: free when unpinned
    bool piped;                 //  written to a busy executor behind its
                                //  task (pyexec_pipe): holds no cpus yet
    bool announced;             //  its STARTED event went out
    bool seceded;               //  waits on tasks it submitted: its cpus are
                                //  given back meanwhile (squall.secede)
    bool credentialed;          //  its executor was given its client's key
    task_t *prev, *next;        //  ready FIFO or running list
    uint64_t start_ns;
    uint64_t deadline_ns;       //  0: none
    size_t heap_index;          //  in the deadline heap, SIZE_MAX if not
    size_t exec_slot;           //  in the running children array

    //  Results, filled by builtin_run / execute_finish
    sq_blob_t **results;        //  n_outputs
    //  Its execute child and the destructor its starter set with it
    //  (execute_destroy), run by task_destroy: task.c needs nothing else of
    //  execute.c, which includes task.h (no include cycle between them).
    execute_t *exec;
    void (*exec_destroy) (execute_t **exec_p);
};

//  Copies an ASSIGN entry. NULL with err filled if the kind is unknown or
//  its config is invalid (or out of memory); the caller reports FAILED.
task_t *task_new (const sq_assign_t *assign, sq_errbuf_t *err);
void task_destroy (task_t **self_p);

//  Monotonic clock in nanoseconds.
uint64_t task_now_ns (void);

#endif
