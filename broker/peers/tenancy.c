/*  tenancy: tenants' quotas and shares. */
#include "tenancy.h"
#include "args.h"
#include "grow.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _tenancy_t {
    tenancy_quota_t *quotas;
    size_t n_quotas;
    share_t **shares;
    size_t n_shares;
    size_t cap_shares;
};

int
tenancy_quota_parse (const char *spec, tenancy_quota_t *quota, char *err, size_t err_size)
{
    memset (quota, 0, sizeof *quota);
    quota->weight = 1;
    const char *colon = strchr (spec, ':');
    size_t name_len = colon? (size_t) (colon - spec): strlen (spec);
    if (!colon || name_len == 0 || name_len > SQ_MAX_TENANT) {
        snprintf (err, err_size, "--tenant-quota %s: expected TENANT:field=value,... "
                  "(TENANT a tenant's name or *)", spec);
        return -1;
    }
    memcpy (quota->tenant, spec, name_len);
    quota->tenant [name_len] = 0;
    if (strcmp (quota->tenant, "*") && !sq_key_name_ok (quota->tenant)) {
        snprintf (err, err_size, "--tenant-quota: '%s' is not a tenant name "
                  "(1 to 64 of A-Z a-z 0-9 . _ -) nor *", quota->tenant);
        return -1;
    }
    const char *p = colon + 1;
    unsigned seen = 0;
    while (*p) {
        const char *end = strchr (p, ',');
        size_t len = end? (size_t) (end - p): strlen (p);
        char field [64];
        if (len == 0 || len >= sizeof field) {
            snprintf (err, err_size, "--tenant-quota %s: empty or overlong field", spec);
            return -1;
        }
        memcpy (field, p, len);
        field [len] = 0;
        char *eq = strchr (field, '=');
        if (eq)
            *eq++ = 0;
        static const char *names [] = { "cpus", "stored", "constants", "sessions", "weight" };
        unsigned which = 5;
        for (unsigned i = 0; i < 5 && eq; i++)
            if (strcmp (field, names [i]) == 0)
                which = i;
        uint64_t size = 0;
        int64_t n = 0;
        int rc = -1;
        if (which == 1 || which == 2)
            rc = sq_parse_size (eq, &size);
        else
        if (which == 0 || which == 3)
            rc = sq_parse_int (eq, 1, 1000000000, &n);
        else
        if (which == 4)
            rc = sq_parse_int (eq, 1, 1000000, &n);
        if (which < 5 && (seen & (1u << which))) {
            snprintf (err, err_size, "--tenant-quota %s: %s given twice", spec, field);
            return -1;
        }
        if (rc || ((which == 1 || which == 2) && size == 0)) {
            snprintf (err, err_size, "--tenant-quota %s: '%.*s' is not one of cpus=N, "
                      "stored=SIZE, constants=SIZE, sessions=N, weight=N (N >= 1)",
                      spec, (int) len, p);
            return -1;
        }
        seen |= 1u << which;
        switch (which) {
            case 0: quota->cpus = (uint64_t) n; break;
            case 1: quota->stored = size; break;
            case 2: quota->constants = size; break;
            case 3: quota->sessions = (uint64_t) n; break;
            default: quota->weight = (uint32_t) n; break;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

tenancy_t *
tenancy_new (const tenancy_quota_t *quotas, size_t n_quotas)
{
    tenancy_t *self = (tenancy_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->quotas = (tenancy_quota_t *) calloc (n_quotas + 1, sizeof *self->quotas);
    if (!self->quotas) {
        free (self);
        return NULL;
    }
    if (n_quotas)
        memcpy (self->quotas, quotas, n_quotas * sizeof *quotas);
    self->n_quotas = n_quotas;
    return self;
}

void
tenancy_destroy (tenancy_t **self_p)
{
    tenancy_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_shares; i++) {
        free (self->shares [i]->name);
        free (self->shares [i]);
    }
    free (self->shares);
    free (self->quotas);
    free (self);
    *self_p = NULL;
}

//  The last quota naming the tenant, else the last for `*`, else none.
static const tenancy_quota_t *
s_quota (tenancy_t *self, const char *tenant)
{
    const tenancy_quota_t *any = NULL, *named = NULL;
    for (size_t i = 0; i < self->n_quotas; i++) {
        if (strcmp (self->quotas [i].tenant, tenant) == 0)
            named = &self->quotas [i];
        if (strcmp (self->quotas [i].tenant, "*") == 0)
            any = &self->quotas [i];
    }
    return named? named: any;
}

share_t *
tenancy_share (tenancy_t *self, const char *tenant)
{
    if (!tenant)
        tenant = "";
    //  Tenants are the keyring's (and the journal's): a few, a linear walk.
    for (size_t i = 0; i < self->n_shares; i++)
        if (strcmp (self->shares [i]->name, tenant) == 0)
            return self->shares [i];
    if (self->n_shares == self->cap_shares
    &&  sq_grow ((void **) &self->shares, &self->cap_shares, self->n_shares + 1,
                 sizeof *self->shares, 8, SIZE_MAX))
        return NULL;
    share_t *share = (share_t *) calloc (1, sizeof *share);
    if (!share || !(share->name = strdup (tenant))) {
        free (share);
        return NULL;
    }
    share->index = (uint32_t) self->n_shares + 1;
    share->weight = 1;
    const tenancy_quota_t *quota = s_quota (self, tenant);
    if (quota) {
        share->weight = quota->weight;
        share->max_cpus = quota->cpus;
        share->max_stored = quota->stored;
        share->max_constants = quota->constants;
        share->max_sessions = quota->sessions;
    }
    self->shares [self->n_shares++] = share;
    return share;
}

static void
s_amount (uint64_t n, bool bytes, char *out, size_t size)
{
    if (!bytes)
        snprintf (out, size, "%llu", (unsigned long long) n);
    else
    if (n >= (1u << 30))
        snprintf (out, size, "%.1f GiB", n / (double) (1u << 30));
    else
    if (n >= (1u << 20))
        snprintf (out, size, "%.1f MiB", n / (double) (1u << 20));
    else
    if (n >= 1024)
        snprintf (out, size, "%.1f KiB", n / 1024.0);
    else
        snprintf (out, size, "%llu bytes", (unsigned long long) n);
}

void
tenancy_refusal (const share_t *share, const char *what, uint64_t limit, uint64_t usage,
                 uint64_t asked, bool bytes, char *out, size_t size)
{
    char l [32], u [32], a [64] = "";
    s_amount (limit, bytes, l, sizeof l);
    s_amount (usage, bytes, u, sizeof u);
    if (asked) {
        memcpy (a, ", this request ", 16);
        s_amount (asked, bytes, a + 15, sizeof a - 15);
    }
    snprintf (out, size, "tenant %s: %s quota exceeded (limit %s, in use %s%s; see --tenant-quota)",
              share->name [0]? share->name: "(keyless)", what, l, u, a);
}
