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
//  Re-reads the keyring. 0, or -1 (keyring unchanged) with a logged reason.
int auth_reload (auth_t *self);
const sq_keyentry_t *auth_find (auth_t *self, const char *z85, size_t len);
uint64_t auth_generation (auth_t *self);
const sq_cert_t *auth_cert (auth_t *self);
//  The keys governors must accept on their data sockets (governor keys)
//  and serve sockets (client and admin keys); valid until the next reload.
void auth_keysets (auth_t *self, const uint8_t *const **governors, uint32_t *n_governors,
                   const uint8_t *const **clients, uint32_t *n_clients);

#endif
