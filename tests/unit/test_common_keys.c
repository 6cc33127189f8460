/*  Unit test of common/keys' sq_cert_load_pair, which a client and a
    governor load their CURVE keys with: a pair and the broker's key read
    from files sq_keys_generate wrote; a public key file given as the secret
    one, and a missing file, refused with a message that names the file as
    the caller does, and no key written. */
#include "keys.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        s_failures++; \
    } \
} while (0)

int
main (void)
{
    char dir [] = "/tmp/test_common_keys_XXXXXX";
    if (!mkdtemp (dir)) {
        perror ("mkdtemp");
        return 1;
    }
    char err [700];
    CHECK (sq_keys_generate ("alice", dir, "client", NULL, err, sizeof err) == 0);
    CHECK (sq_keys_generate ("broker", dir, "broker", NULL, err, sizeof err) == 0);
    char secret [300], pub [300], broker [300], missing [300];
    snprintf (secret, sizeof secret, "%s/alice.key", dir);
    snprintf (pub, sizeof pub, "%s/alice.pub", dir);
    snprintf (broker, sizeof broker, "%s/broker.pub", dir);
    snprintf (missing, sizeof missing, "%s/nobody.pub", dir);

    uint8_t public_key [SQ_KEY_LEN], secret_key [SQ_KEY_LEN], broker_key [SQ_KEY_LEN];
    CHECK (sq_cert_load_pair (secret, broker, "--secret-key", "--broker-key",
                              public_key, secret_key, broker_key, err, sizeof err) == 0);
    sq_cert_t alice, brk;
    CHECK (sq_cert_load (&alice, pub, err, sizeof err) == 0);
    CHECK (sq_cert_load (&brk, broker, err, sizeof err) == 0);
    CHECK (memcmp (public_key, alice.public_key, SQ_KEY_LEN) == 0);
    CHECK (memcmp (broker_key, brk.public_key, SQ_KEY_LEN) == 0);
    sq_cert_t both;
    CHECK (sq_cert_load (&both, secret, err, sizeof err) == 0 && both.has_secret);
    CHECK (memcmp (secret_key, both.secret_key, SQ_KEY_LEN) == 0);

    //  Refusals: a message naming the file, and the caller's keys untouched
    uint8_t untouched [SQ_KEY_LEN];
    memset (public_key, 0xAA, sizeof public_key);
    memset (untouched, 0xAA, sizeof untouched);
    CHECK (sq_cert_load_pair (pub, broker, "secret key", "broker key",
                              public_key, secret_key, broker_key, err, sizeof err) == -1);
    CHECK (strstr (err, pub) && strstr (err, "holds no secret key"));
    CHECK (memcmp (public_key, untouched, SQ_KEY_LEN) == 0);
    CHECK (sq_cert_load_pair (secret, missing, "secret key", "broker key",
                              public_key, secret_key, broker_key, err, sizeof err) == -1);
    CHECK (strncmp (err, "broker key: ", 12) == 0);
    CHECK (memcmp (public_key, untouched, SQ_KEY_LEN) == 0);
    CHECK (sq_cert_load_pair (missing, broker, "--secret-key", "--broker-key",
                              public_key, secret_key, broker_key, err, sizeof err) == -1);
    CHECK (strncmp (err, "--secret-key: ", 14) == 0);

    unlink (secret);
    unlink (pub);
    snprintf (secret, sizeof secret, "%s/broker.key", dir);
    unlink (secret);
    unlink (broker);
    rmdir (dir);
    if (s_failures) {
        fprintf (stderr, "test_common_keys: %d failures\n", s_failures);
        return 1;
    }
    printf ("test_common_keys: ok\n");
    return 0;
}
