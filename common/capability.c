/*  capability: mint and check with libsodium's HMAC-SHA256 (the library
    libzmq's CURVE already runs on; no cryptography of our own). */
#include "capability.h"
#include "keys.h"
#include "proto.h"
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
s_mac (const uint8_t *secret, const uint8_t *client_key, uint64_t object,
       const uint8_t *head, uint8_t *mac)
{
    static const char domain [] = "squall-capability-1";
    uint8_t object_be [8];
    for (int i = 0; i < 8; i++)
        object_be [i] = (uint8_t) (object >> (56 - 8 * i));
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init (&state, secret, SQ_SECRET_LEN);
    crypto_auth_hmacsha256_update (&state, (const uint8_t *) domain, sizeof domain);
    crypto_auth_hmacsha256_update (&state, client_key, SQ_KEY_LEN);
    crypto_auth_hmacsha256_update (&state, object_be, 8);
    crypto_auth_hmacsha256_update (&state, head, 9);
    crypto_auth_hmacsha256_final (&state, mac);
}

void
sq_cap_mint (const uint8_t *secret, const uint8_t *client_key, uint64_t object,
             uint64_t expiry_ms, uint8_t right, uint8_t *out)
{
    for (int i = 0; i < 8; i++)
        out [i] = (uint8_t) (expiry_ms >> (56 - 8 * i));
    out [8] = right;
    s_mac (secret, client_key, object, out, out + 9);
}

int
sq_cap_check (const uint8_t *secret, const uint8_t *client_key, uint64_t object,
              uint8_t right, uint64_t now_ms, const uint8_t *cap, size_t size,
              const char **why)
{
    if (!cap || size == 0) {
        *why = "no capability (ask the broker: FETCH, or UPLOAD)";
        return -1;
    }
    if (size != SQ_CAP_SIZE) {
        *why = "malformed capability";
        return -1;
    }
    uint8_t mac [crypto_auth_hmacsha256_BYTES];
    s_mac (secret, client_key, object, cap, mac);
    if (sodium_memcmp (mac, cap + 9, sizeof mac)) {
        *why = "the capability is not valid for this key and object";
        return -1;
    }
    if (cap [8] != right) {
        *why = "the capability does not allow this operation";
        return -1;
    }
    uint64_t expiry = 0;
    for (int i = 0; i < 8; i++)
        expiry = expiry << 8 | cap [i];
    if (now_ms > expiry) {
        *why = "the capability has expired (ask the broker again)";
        return -1;
    }
    return 0;
}

void
sq_random (void *buf, size_t size)
{
    //  Idempotent and thread-safe; picks the system's generator.
    if (sodium_init () < 0)
        abort ();
    randombytes_buf (buf, size);
}

uint64_t
sq_wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}
