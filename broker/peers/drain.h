/*  drain: governors that leave cleanly (docs/protocol.md, "Governors that
    leave").

    A governor drains when it says DRAIN (it got a first SIGTERM: an
    autoscaler, a Slurm allocation ending, Kubernetes scaling down) or a
    client RETIREs it. From then on it is out of the scheduler, so it gets
    no new task; its unstarted tasks are taken back (RETRACT) and placed
    elsewhere; its running ones finish; and every object still needed whose
    only copy it holds is copied to another governor. When nothing needed
    is left only there, the broker says LEAVE and the governor exits; its
    copies then go as a lost governor's would, with nothing recomputed.
    With no other governor up the copies have nowhere to go: it leaves once
    its tasks are done, and what it held is recomputed when needed, as
    after any loss.

    Ownership: none; the state is in gov_t (draining, leaving). */
#ifndef SQ_DRAIN_H
#define SQ_DRAIN_H

#include "broker_internal.h"

//  Starts draining gov (again: nothing). why is for the log.
void drain_start (broker_t *self, gov_t *gov, const char *why);
//  Moves every drain on: copies ordered, LEAVE said. Called by the timers;
//  returns when it wants to run next (-1: no drain under way).
int64_t drain_tick (broker_t *self, int64_t now);

#endif
