/*  reattach: a governor that kept its store and tasks through a lost broker
    (or a broker restart on its journal) lists them after its HELLO, and
    the broker takes back what it still needs (docs/protocol.md, "Reattach").

      HELD [8, object, version, size]   an object it holds: a copy again if
                                        the broker knows it finished with
                                        that version and size;
      RUNNING [9, task, attempt]        a task running there: it becomes
                                        the task's assignment if the task
                                        still waits for a governor;
      INVENTORY [10]                    the list is complete.

    Objects of tasks the broker does not know as finished (they finished
    after the journal's last record) count too, if the governor holds all
    of that task's outputs at one version: the task is finished there.
    Anything else is dropped or stopped on the governor. Nothing it holds
    is recomputed; what nobody holds is recomputed from lineage once the
    governors had their chance (graph_recover_sweep).

    Ownership: an inventory belongs to its governor (gov->inventory) from
    the first event to INVENTORY, or until the governor goes. */
#ifndef SQ_REATTACH_H
#define SQ_REATTACH_H

#include "graph.h"
#include "gov.h"

typedef struct _inventory_t inventory_t;

//  Starts the inventory of a reattaching governor. -1 if out of memory.
int reattach_begin (gov_t *gov);
//  One HELD or RUNNING event.
void reattach_held (graph_t *graph, gov_t *gov, uint64_t key, uint32_t version, uint64_t size);
void reattach_running (gov_t *gov, uint64_t key, uint32_t attempt);
//  INVENTORY: settles everything listed; counts what was taken back.
typedef struct {
    size_t located;             //  objects that count as copies again
    size_t finished;            //  tasks found finished there
    size_t adopted;             //  running tasks that stay where they run
    size_t dropped;             //  objects the broker did not need
    size_t stopped;             //  tasks the broker had placed elsewhere, or did not know
} reattach_stats_t;
void reattach_end (graph_t *graph, gov_t *gov, reattach_stats_t *stats);
void inventory_destroy (inventory_t **self_p);

#endif
