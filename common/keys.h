/*  keys: CurveZMQ key pairs, their files, and the directory of keys a
    broker accepts (docs/security.md).

    A key file is a CZMQ certificate (the ZPL text zcert_save writes and
    zcert_load reads, so other ZeroMQ tools can use it): NAME.key holds the
    public and the secret key and is created with mode 0600, NAME.pub the
    public key only. Both carry metadata: `role` (client, governor, admin,
    broker) and `tenant`. Files are read by our own strict reader: bounded
    in size, no asserts, every malformed line a clear message (it is fuzzed,
    tests/fuzz).

    A keyring is the set of public keys a broker accepts, loaded from a
    directory of *.pub files; reloading replaces it whole and bumps its
    generation, so holders of an entry can tell it may be gone.

    Ownership: sq_cert_t is a plain value. The keyring owns its entries;
    an entry stays valid until the next reload or the keyring's destroy. */
#ifndef SQ_KEYS_H
#define SQ_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SQ_KEY_LEN 32
#define SQ_Z85_LEN 40           //  a key in Z85 text
#define SQ_MAX_TENANT 64        //  tenant and key names
#define SQ_CERT_MAX_FILE 65536  //  a key file is never bigger

typedef enum {
    SQ_ROLE_NONE = 0,
    SQ_ROLE_CLIENT,
    SQ_ROLE_GOVERNOR,
    SQ_ROLE_ADMIN,              //  a client that sees every tenant
    SQ_ROLE_BROKER
} sq_role_t;

typedef struct {
    uint8_t public_key [SQ_KEY_LEN];
    uint8_t secret_key [SQ_KEY_LEN];
    bool has_secret;
    char public_z85 [SQ_Z85_LEN + 1];
    sq_role_t role;             //  NONE when the file says none
    char tenant [SQ_MAX_TENANT + 1];    //  "" when the file says none
} sq_cert_t;

const char *sq_role_name (sq_role_t role);
//  SQ_ROLE_NONE for anything else.
sq_role_t sq_role_parse (const char *name);
//  Names of keys and tenants: 1 to 64 of [A-Za-z0-9._-], not starting
//  with '.' (they become file names and must survive ZPL unquoted).
bool sq_key_name_ok (const char *name);

//  Parses a certificate's text. 0, or -1 with a message in err.
int sq_cert_parse (sq_cert_t *cert, const char *text, size_t size, char *err, size_t err_size);
//  Reads and parses a certificate file. A secret key file that others may
//  read is refused (it should be 0600).
int sq_cert_load (sq_cert_t *cert, const char *path, char *err, size_t err_size);
//  What a client or a governor speaks CURVE with: its key pair, from its
//  secret key file (.key), and the broker's public key, from the broker's
//  file. 0, or -1 with a message in err that names the file at fault as
//  its caller does (secret_name, broker_name: "--secret-key" ...).
int sq_cert_load_pair (const char *secret_file, const char *broker_file,
                       const char *secret_name, const char *broker_name,
                       uint8_t *public_key, uint8_t *secret_key, uint8_t *broker_key,
                       char *err, size_t err_size);
//  Makes a key pair: DIR/NAME.key (secret, 0600, never overwritten) and
//  DIR/NAME.pub. role: "client", "governor", "admin" or "broker"; tenant
//  NULL: a client or admin key is its own tenant, named NAME. 0, or -1
//  with a message.
int sq_keys_generate (const char *name, const char *dir, const char *role, const char *tenant,
                      char *err, size_t err_size);

//  Z85 text of a key (41 bytes with the NUL) and back. -1 if malformed.
void sq_key_z85 (const uint8_t *key, char *text);
int sq_key_from_z85 (const char *text, size_t len, uint8_t *key);

//  --------------------------------------------------------------------------
//  Keyring

typedef struct {
    uint8_t key [SQ_KEY_LEN];
    char z85 [SQ_Z85_LEN + 1];
    sq_role_t role;
    char tenant [SQ_MAX_TENANT + 1];    //  clients and admins: never empty
    char name [SQ_MAX_TENANT + 1];      //  the file's name without .pub
} sq_keyentry_t;

typedef struct _sq_keyring_t sq_keyring_t;

sq_keyring_t *sq_keyring_new (void);
void sq_keyring_destroy (sq_keyring_t **self_p);
//  Replaces the ring with the *.pub files of dir (files that do not parse,
//  or have no usable role, are skipped with a warning). The number of keys
//  loaded, or -1 (ring unchanged) if the directory cannot be read.
int sq_keyring_load (sq_keyring_t *self, const char *dir, char *err, size_t err_size);
//  The entry of a key given as Z85 text (len bytes), or NULL.
const sq_keyentry_t *sq_keyring_find (sq_keyring_t *self, const char *z85, size_t len);
//  Bumped by every load.
uint64_t sq_keyring_generation (sq_keyring_t *self);
size_t sq_keyring_size (sq_keyring_t *self);
//  Entry i (0 .. size - 1), in no particular order; stable until a load.
const sq_keyentry_t *sq_keyring_at (sq_keyring_t *self, size_t i);

#endif
