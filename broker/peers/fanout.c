/*  fanout: client requests sent to every governor and answered once each
    one did (RESTART, RUN; broker_internal.h). One wait list, deadline and
    timeout message for both; what differs (the order sent, what counts as
    an answer, the reply's body) is a switch on the kind. */
#include "broker_internal.h"
#include "grow.h"

//  Whether governor g answered: RESTART's REFRESHED count reached the
//  REFRESH it was sent; RUN's RAN came (bx_run_answered).
static bool
s_answered (const bx_fanout_t *f, const bx_fanout_gov_t *g, const gov_t *gov)
{
    return f->kind == BX_FANOUT_RESTART? gov->refreshed >= g->seq: g->answered;
}

//  The order to one governor, in self->out (encoded for each: a send takes
//  the buffer's bytes).
static void
s_encode (broker_t *self, bx_fanout_t *f, const sq_request_t *q, gov_t *gov,
          bx_fanout_gov_t *g)
{
    peer_t *peer = f->peer;
    sq_wbuf_reset (&self->out);
    if (f->kind == BX_FANOUT_RESTART) {
        sq_refresh_encode (&self->out, peer->tenant);
        g->seq = ++gov->refresh_sent;
    }
    else {
        sq_grun_t m = { f->id, { peer->tenant? peer->tenant: "",
                                 peer->tenant? (uint32_t) strlen (peer->tenant): 0 }, q->fn };
        sq_grun_encode (&self->out, &m);
    }
}

void
bx_fanout_start (broker_t *self, peer_t *peer, const sq_request_t *q, bx_fanout_kind_t kind)
{
    if (peer->outstanding >= self->config.max_requests) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_BUSY,
                        "too many requests waiting on this connection", 0);
        return;
    }
    bx_fanout_t f = { kind, peer, q->req,
                      bx_deadline (q->timeout_ms == 0? SQ_RESTART_DEFAULT_MS
                                   : q->timeout_ms < 0? 0: q->timeout_ms),
                      kind == BX_FANOUT_RUN? ++self->last_run: 0, 0, NULL };
    if (self->n_govs && !(f.govs = calloc (self->n_govs, sizeof *f.govs))) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                        "out of memory", 0);
        return;
    }
    if (self->n_fanouts == self->cap_fanouts
    &&  sq_grow ((void **) &self->fanouts, &self->cap_fanouts, self->n_fanouts + 1,
                 sizeof *self->fanouts, 4, SIZE_MAX)) {
        free (f.govs);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                        "out of memory", 0);
        return;
    }
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        bx_fanout_gov_t *g = &f.govs [f.n++];
        g->gov = gov->id;
        s_encode (self, &f, q, gov, g);
        bx_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
    }
    if (kind == BX_FANOUT_RESTART)
        sq_info ("client %u: fresh Python executors for tenant '%s' on %zu governors",
                 peer->id, peer->tenant? peer->tenant: "", self->n_govs);
    peer->outstanding++;
    self->fanouts [self->n_fanouts++] = f;
    bx_fanouts_check (self, bx_now ());
}

void
bx_run_answered (broker_t *self, gov_t *gov, uint64_t run, uint32_t answers, uint64_t size)
{
    for (size_t i = 0; i < self->n_fanouts; i++) {
        bx_fanout_t *f = &self->fanouts [i];
        if (f->kind != BX_FANOUT_RUN || f->id != run)
            continue;
        for (uint32_t k = 0; k < f->n; k++) {
            bx_fanout_gov_t *g = &f->govs [k];
            if (g->gov != gov->id || g->answered)
                continue;
            g->answers = answers;
            g->size = size;
            g->answered = true;
            sq_info ("run %" PRIu64 ": governor %u answered (%u executors, %" PRIu64
                     " bytes kept there)", run, gov->id, answers, size);
        }
        bx_fanouts_check (self, bx_now ());
        return;
    }
}

//  The reply once every governor still there answered: where each keeps
//  its answers (RUNREAD, with a capability for this client and this run).
//  A governor that answered and left since is still named: the client
//  learns its answers were lost with it when it reads.
static void
s_reply (broker_t *self, bx_fanout_t *f)
{
    peer_t *peer = f->peer;
    if (f->kind == BX_FANOUT_RESTART) {
        bx_reply_nil (self, peer, f->req);
        return;
    }
    sq_wbuf_reset (&self->out);
    sq_reply_begin_ran (&self->out, f->req, f->id, f->n);
    for (uint32_t k = 0; k < f->n; k++) {
        bx_fanout_gov_t *g = &f->govs [k];
        gov_t *gov = bx_gov_by_id (self, g->gov);
        uint8_t cap [SQ_CAP_SIZE];
        if (gov && self->auth)
            sq_cap_mint (gov->secret, peer->key_bin, f->id,
                         sq_wall_ms () + (uint64_t) self->config.capability_ttl_ms, SQ_CAP_RUN, cap);
        sq_pack_ran_where (&self->out.pk, g->gov, g->answers, g->size,
                           gov? gov->serve_endpoint: "", gov && gov->has_key? gov->key: NULL,
                           gov && self->auth? cap: NULL, SQ_CAP_SIZE);
    }
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  SQ_E_TIMEOUT naming the governors that did not answer (as many as fit).
static void
s_reply_timeout (broker_t *self, bx_fanout_t *f, uint32_t waiting)
{
    char message [512];
    uint32_t named = 0;
    int at = snprintf (message, sizeof message,
                       f->kind == BX_FANOUT_RESTART
                       ? "restart: %u governor(s) did not say their executors were fresh in time:"
                       : "run: %u governor(s) did not answer in time:", waiting);
    for (uint32_t k = 0; k < f->n && at > 0 && (size_t) at < sizeof message; k++) {
        if (f->govs [k].answered)
            continue;
        gov_t *gov = bx_gov_by_id (self, f->govs [k].gov);
        at += snprintf (message + at, sizeof message - (size_t) at, "%s %s (%u)",
                        named++? ",": "", gov && gov->name? gov->name: "?", f->govs [k].gov);
    }
    bx_reply_error (self, f->peer->identity, f->peer->identity_size, f->req, SQ_E_TIMEOUT,
                    message, 0);
}

static void
s_free (bx_fanout_t *f)
{
    free (f->govs);
}

void
bx_fanouts_check (broker_t *self, int64_t now)
{
    for (size_t i = 0; i < self->n_fanouts; ) {
        bx_fanout_t *f = &self->fanouts [i];
        uint32_t waiting = 0;
        for (uint32_t k = 0; k < f->n; ) {
            bx_fanout_gov_t *g = &f->govs [k];
            gov_t *gov = bx_gov_by_id (self, g->gov);
            //  One that left is left out (RESTART: its executors went with it).
            if (!g->answered && !gov) {
                f->govs [k] = f->govs [--f->n];
                continue;
            }
            if (!g->answered && s_answered (f, g, gov))
                g->answered = true;
            waiting += !g->answered;
            k++;
        }
        if (waiting == 0)
            s_reply (self, f);
        else
        if (f->deadline >= 0 && now >= f->deadline)
            s_reply_timeout (self, f, waiting);
        else {
            i++;
            continue;
        }
        f->peer->outstanding--;
        s_free (f);
        self->fanouts [i] = self->fanouts [--self->n_fanouts];
    }
}

void
bx_fanouts_drop_client (broker_t *self, peer_t *peer)
{
    for (size_t i = 0; i < self->n_fanouts; )
        if (self->fanouts [i].peer == peer) {
            s_free (&self->fanouts [i]);
            self->fanouts [i] = self->fanouts [--self->n_fanouts];
        }
        else
            i++;
}

void
bx_fanouts_destroy (broker_t *self)
{
    for (size_t i = 0; i < self->n_fanouts; i++)
        s_free (&self->fanouts [i]);
    free (self->fanouts);
    self->fanouts = NULL;
    self->n_fanouts = self->cap_fanouts = 0;
}
