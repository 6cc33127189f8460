/*  tenancy: what each tenant may use of a shared broker, and what it uses
    (docs/security.md, "Quotas and fair share").

    A tenant is the `tenant` of the key a client connects with; without
    keys every session belongs to one anonymous tenant (""). Each tenant
    has a share (graph.h share_t): its limits and weight, from
    --tenant-quota for that tenant or else from the one for `*` (every
    tenant not named), and its usage, which the graph keeps current. Limits
    come from the broker's options only, never from key files: the key
    file says who a client is, the broker's operator says how much a tenant
    gets (and one SIGHUP cannot grant a key more than its operator set).

    Ownership: tenancy_new returns a module the broker destroys; the shares
    it hands out live as long as it (sessions point at them). */
#ifndef SQ_TENANCY_H
#define SQ_TENANCY_H

#include "graph.h"
#include "keys.h"

//  The most --tenant-quota options a broker takes.
#define TENANCY_MAX_QUOTAS 256

typedef struct _tenancy_quota_t {
    char tenant [SQ_MAX_TENANT + 1];    //  "*": every tenant not named
    uint64_t cpus;              //  0: no limit
    uint64_t stored;
    uint64_t constants;
    uint64_t sessions;
    uint32_t weight;            //  >= 1
} tenancy_quota_t;

//  Parses "TENANT:cpus=N,stored=SIZE,constants=SIZE,sessions=N,weight=W"
//  (any subset of the fields, each at most once; TENANT a key name or
//  `*`). Fields not given mean no limit, weight 1. 0, or -1 with the
//  reason in err.
int tenancy_quota_parse (const char *spec, tenancy_quota_t *quota, char *err, size_t err_size);

typedef struct _tenancy_t tenancy_t;

//  The quotas are copied; a tenant named twice takes the last.
tenancy_t *tenancy_new (const tenancy_quota_t *quotas, size_t n_quotas);
void tenancy_destroy (tenancy_t **self_p);
//  The share of a tenant (NULL or "": the anonymous one), made on first
//  use. NULL if out of memory.
share_t *tenancy_share (tenancy_t *self, const char *tenant);
//  A refusal's message: "tenant alice: constants quota exceeded (limit
//  1.0 MiB, in use 900.0 KiB, this request 200.0 KiB, see --tenant-quota)".
//  asked 0: no "this request"; bytes: amounts are bytes.
void tenancy_refusal (const share_t *share, const char *what, uint64_t limit, uint64_t usage,
                      uint64_t asked, bool bytes, char *out, size_t size);

#endif
