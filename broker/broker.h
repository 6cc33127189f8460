/*  broker: the squall broker, one ROUTER socket for clients and governors,
    one reactor thread. It holds the graph (graph.c), parks client waits
    (watch.c), places tasks (scheduler.c) and batches what it tells each
    governor (gov.c). It never relays large payloads: objects above
    inline_max stay on governors and are copied between them directly.

    Ownership: broker_new returns a broker the caller destroys; everything
    else is owned by the broker. */
#ifndef SQ_BROKER_H
#define SQ_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *listen;         //  ZeroMQ endpoint to bind
    int heartbeat_ms;           //  governor heartbeat interval
    int liveness;               //  missed intervals before a governor is dead
    size_t inline_max;          //  objects up to this many bytes ride inline
    size_t max_message;         //  largest frame accepted
    uint32_t prefetch;          //  tasks queued per governor beyond its cpus
    uint32_t queue_us;          //  ... covering this much of its mean task duration
    uint32_t max_requests;      //  outstanding waits/fetches per client
    uint32_t allowed_failures;  //  governor deaths a running task may see
    int upload_timeout_ms;      //  an upload's SUBMIT and confirmation wait this long for each other
    const char *http;           //  dashboard "[HOST:]PORT", or NULL (http.c)
    const char *http_token;     //  file holding the dashboard's token, or NULL
    const char *event_log;      //  event log file, or NULL (eventlog.c)
    //  Security (docs/security.md): the broker's key pair and the directory
    //  of keys it accepts; both or neither. Without them only loopback
    //  endpoints may be bound, unless insecure.
    const char *secret_key;
    const char *authorized_keys;
    bool insecure;
    //  Several live governors may say HELLO with one governor key (else
    //  a second is refused while the first is connected: a stolen key
    //  must not make a second governor).
    bool shared_governor_keys;
    int capability_ttl_ms;      //  how long a FETCH or UPLOAD capability holds
    //  Durability (persist.h): the journal, how often it is synced, the
    //  size under which it is never compacted; how long a session waits
    //  for its client to come back, and a restarted broker for its
    //  governors to reattach.
    const char *journal;
    int journal_sync_ms;
    uint64_t journal_compact;
    int session_grace_ms;
    //  Jobs (jobs.c): how long a job that ended and that no client holds
    //  is kept (ms, 0 for ever), and how many such jobs at most.
    int64_t job_retention_ms;
    uint32_t job_limit;
    int reattach_wait_ms;
    int resource_wait_ms;       //  how long a task no connected governor fits waits for one (0: fails at once)
    //  Tenants' limits and fair-share weights (tenancy.h), --tenant-quota.
    const struct _tenancy_quota_t *tenant_quotas;
    size_t n_tenant_quotas;
} broker_config_t;

typedef struct _broker_t broker_t;

void broker_config_defaults (broker_config_t *config);
//  Binds the socket. NULL (with a logged reason) if that fails.
broker_t *broker_new (const broker_config_t *config);
void broker_destroy (broker_t **self_p);
//  The endpoint actually bound (with the real port for tcp://...:*).
const char *broker_endpoint (broker_t *self);
//  Runs the reactor until broker_stop or SIGINT/SIGTERM. 0 on a clean stop.
int broker_run (broker_t *self);
//  Async-signal-safe.
void broker_stop (broker_t *self);
//  Async-signal-safe: the keys are re-read at the next turn (SIGHUP).
void broker_reload (broker_t *self);
//  The dashboard's port (0 if not serving HTTP).
unsigned broker_http_port (broker_t *self);

//  Broker-internal, for the dashboard (http.c), reactor thread only: packs
//  the INFO map exactly as clients receive it, and the open sessions as an
//  array of maps (id, client, tasks by state).
struct msgpack_packer;
void broker_pack_info (broker_t *self, struct msgpack_packer *pk);
void broker_pack_sessions (broker_t *self, struct msgpack_packer *pk);

#endif
