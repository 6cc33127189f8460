/*  eventlog: what happened in the broker, for people. Every event (governor
    joined or left, submit, task assigned / started / finished / failed,
    object copied) goes to three places:

    * an optional file (--event-log), one JSON object per line, format in
      docs/eventlog.md; written through a large stdio buffer and flushed
      once per reactor turn (eventlog_flush), so a busy broker does not pay
      a system call per task;
    * a ring of the last EVENTLOG_RING task events (the dashboard's live
      task stream) and a ring of the last EVENTLOG_ERRORS failures;
    * counters for /metrics (bytes moved, scheduling latency histogram).

    Everything is called from the reactor thread only: no locks. Event
    times come from a clock the reactor reads once per turn and again
    before scheduling (eventlog_tick): three events per task would
    otherwise read the clock a dozen times per task.

    Ownership: eventlog_new returns a log the caller destroys. Strings passed
    in are copied (truncated to fixed sizes); nothing is retained. */
#ifndef SQ_EVENTLOG_H
#define SQ_EVENTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EVENTLOG_RING 1000
#define EVENTLOG_ERRORS 100
#define EVENTLOG_LATENCY_BUCKETS 12

typedef enum {
    EV_GOV_JOINED,
    EV_GOV_LEFT,
    EV_SUBMIT,
    EV_TASK_ASSIGNED,
    EV_TASK_STARTED,
    EV_TASK_FINISHED,
    EV_TASK_FAILED,
    EV_OBJECT_COPY,             //  a SEND order: copy from one governor to another
    EV_OBJECT_LOCATED,          //  a copy arrived
    EV_TYPE_COUNT_
} eventlog_type_t;

//  One event. Fields that do not apply to a type are 0 / "".
typedef struct {
    uint64_t seq;               //  set by eventlog_emit, from 1
    int64_t time_us;            //  wall clock, set by eventlog_emit
    uint8_t type;               //  eventlog_type_t
    uint32_t session;
    uint32_t id;                //  task or object id within the session
    uint32_t gov;               //  governor id (copies: the destination)
    uint32_t from_gov;          //  copies: the source
    uint32_t attempt;
    uint32_t count;             //  submit: tasks; governor joined: cpus
    uint32_t count2;            //  submit: objects
    uint64_t size;              //  objects: bytes
    int64_t wait_us;            //  assigned: time READY -> ASSIGNED
    int64_t run_us;             //  finished / failed: run time, as its governor measured it
    char gov_name [64];
    char kind [16];
    char name [64];             //  task name, or why a governor left
    char message [200];         //  failures
} eventlog_event_t;

typedef struct _eventlog_t eventlog_t;

//  path NULL: no file, only the rings and counters. NULL if the file cannot
//  be opened (with a logged reason).
eventlog_t *eventlog_new (const char *path);
void eventlog_destroy (eventlog_t **self_p);
//  Copies the event (stamping seq and time) into the file buffer, rings and
//  counters.
void eventlog_emit (eventlog_t *self, eventlog_event_t *event);
//  Helpers that fill an event from the broker's records (graph.h, gov.h),
//  so each hook in broker.c is one line. message may be NULL (len 0).
struct _task_t;
struct _gov_t;
struct _object_t;
//  A task became READY: remembers when, for the scheduling latency.
void eventlog_task_ready (eventlog_t *self, struct _task_t *task);
//  EV_TASK_ASSIGNED / STARTED / FINISHED / FAILED of a task on a governor.
void eventlog_task (eventlog_t *self, eventlog_type_t type, struct _task_t *task,
                    struct _gov_t *gov, const char *message, size_t message_len);
//  EV_TASK_FINISHED / FAILED with the run time the governor measured
//  (its UPDATE's duration_us): the events of one UPDATE are stamped alike,
//  so times of receipt would say 0 for a task that ran within one batch.
void eventlog_task_ended (eventlog_t *self, eventlog_type_t type, struct _task_t *task,
                          struct _gov_t *gov, const char *message, size_t message_len,
                          uint64_t run_us);
//  EV_GOV_JOINED / EV_GOV_LEFT.
void eventlog_governor (eventlog_t *self, eventlog_type_t type, struct _gov_t *gov,
                        const char *why);
//  EV_OBJECT_COPY (from -> to) / EV_OBJECT_LOCATED (to; from NULL).
void eventlog_object (eventlog_t *self, eventlog_type_t type, struct _object_t *object,
                      struct _gov_t *to, struct _gov_t *from);
void eventlog_submit (eventlog_t *self, uint32_t session, uint32_t tasks, uint32_t objects);

//  Writes buffered lines out; called once per reactor turn.
void eventlog_flush (eventlog_t *self);
//  Reads the clocks that events are stamped with until the next tick.
void eventlog_tick (eventlog_t *self);

//  Readers for http.c. Fill out[] (room for max) with pointers to the task
//  events (started, finished, failed) with seq > since, oldest first, and
//  return how many; the pointers are valid until the next emit.
size_t eventlog_task_events (eventlog_t *self, uint64_t since,
                             const eventlog_event_t **out, size_t max);
//  Same for the last EVENTLOG_ERRORS failures (tasks failed, governors lost).
size_t eventlog_errors (eventlog_t *self, const eventlog_event_t **out, size_t max);

typedef struct {
    uint64_t events [EV_TYPE_COUNT_];
    uint64_t bytes_moved;       //  sum of sizes of arrived copies
    uint64_t bytes_ordered;     //  sum of sizes of SEND orders
    //  scheduling latency (READY -> ASSIGNED) histogram, cumulative buckets
    //  with upper bounds eventlog_latency_bounds()[i] seconds
    uint64_t latency_buckets [EVENTLOG_LATENCY_BUCKETS];
    uint64_t latency_count;
    double latency_sum;         //  seconds
} eventlog_stats_t;

const eventlog_stats_t *eventlog_stats (eventlog_t *self);
const double *eventlog_latency_bounds (void);
const char *eventlog_type_name (eventlog_type_t type);
//  Writes one event as a JSON object (no newline) to out.
void eventlog_write_json (const eventlog_event_t *event, FILE *out);

#endif
