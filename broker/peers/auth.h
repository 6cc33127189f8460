/*  auth: who may talk to the broker (docs/security.md).

    With keys (--secret-key, --authorized-keys) the broker's ROUTER is a
    CURVE server and this module is its ZAP handler, on the reactor thread:
    a handshake from a key that is not in the keyring is refused before any
    message of the peer is read. The keyring (a directory of *.pub files,
    role and tenant in their metadata) is re-read on SIGHUP; its generation
    lets the broker notice that a peer's key may have been removed, and
    refuse that peer's next message.

    Ownership: auth_new returns a module the broker destroys; entries it
    hands out are valid until the next reload. */
#ifndef SQ_AUTH_H
#define SQ_AUTH_H

#include "keys.h"
#include <stdint.h>

typedef struct _auth_t auth_t;

//  Reads the broker's key pair and the keyring and binds the ZAP handler
//  in ctx. NULL (with a logged reason) on any problem.
auth_t *auth_new (void *ctx, const char *secret_key_file, const char *keys_dir);
void auth_destroy (auth_t **self_p);
//  The ZAP socket, for the reactor's poll; auth_handle answers what waits.
void *auth_socket (auth_t *self);
void auth_handle (auth_t *self);
//  Called with each ZAP request read, before it is answered. libzmq reports
//  a connection's ACCEPTED on the socket monitor before that connection can
//  ask ZAP, so the broker reads its monitor here and closes a connection
//  over the limits (conns.h) before its handshake can finish: a client's
//  first message then stays queued on its side for the next connection,
//  never sent into one already condemned (where it would be lost).
typedef void (auth_before_fn) (void *arg);
void auth_set_before_answer (auth_t *self, auth_before_fn *before, void *arg);
//  Re-reads the keyring. 0, or -1 (keyring unchanged) with a logged reason.
int auth_reload (auth_t *self);
//  The keyring's entry of a key, else its live task key's (role client).
const sq_keyentry_t *auth_find (auth_t *self, const char *z85, size_t len);
uint64_t auth_generation (auth_t *self);
const sq_cert_t *auth_cert (auth_t *self);
//  The keys governors must accept on their data sockets (governor keys)
//  and serve sockets (client and admin keys); valid until the next reload.
void auth_keysets (auth_t *self, const uint8_t *const **governors, uint32_t *n_governors,
                   const uint8_t *const **clients, uint32_t *n_clients);

//  Keys of tasks that submit tasks (docs/security.md, "Tasks that submit
//  tasks"): a governor registers the public half of a key pair it made for
//  one running task attempt (TASKKEY); the key is then a client's of the
//  tenant the broker recorded for that task's session, for as long as the
//  attempt runs on that governor (asked of `live`, at every look-up) and at
//  most until expires_ms (monotonic). Bounded (AUTH_TASK_KEYS_MAX); dead
//  entries go at look-up, and all at once when the table is full.
#define AUTH_TASK_KEYS_MAX 4096
typedef struct {
    uint64_t task;
    uint32_t attempt;
    uint32_t gov;
    int64_t expires_ms;
} auth_taskref_t;
typedef bool (auth_live_fn) (void *arg, const auth_taskref_t *ref);
void auth_set_live (auth_t *self, auth_live_fn *live, void *arg);
//  0, or -1 (table full of live keys, the key is known already, or out of
//  memory).
int auth_task_key_add (auth_t *self, const uint8_t *key, const char *tenant,
                       const auth_taskref_t *ref);
//  Whether z85 names a task's key (live or not: a peer that connected with
//  one is checked at every message, auth_find answering NULL once it died).
bool auth_is_task_key (auth_t *self, const char *z85, size_t len);
size_t auth_task_keys (auth_t *self);

#endif
