/*  capability: the broker's permission for one client to read or write one
    object on one governor, until a time (docs/security.md).

    The broker gives each governor a secret of its own (in the HELLO reply,
    encrypted by CURVE) and mints capabilities with it: an HMAC-SHA256 over
    the client's public key, the object's key, the expiry and the right. The
    governor checks them with the same secret against the key the message
    came from (its User-Id, from the transport), so a capability is useless
    to any other client, for any other object, and after it expires; the
    governor needs no state and no round trip to the broker. Expiry is in
    the broker's wall clock; governors learn the offset from the HELLO reply.

    Layout (SQ_CAP_SIZE bytes): expiry ms u64 big-endian, right u8, MAC. */
#ifndef SQ_CAPABILITY_H
#define SQ_CAPABILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SQ_CAP_SIZE 41
#define SQ_CAP_READ 1           //  GREAD, GFETCH
#define SQ_CAP_WRITE 2          //  PUT
#define SQ_CAP_LOG 3            //  LOGREAD: a task's output (the key is the task's)
#define SQ_CAP_RUN 4            //  RUNREAD: a run's answers (the key is the run's id)

//  Fills out with a capability. secret: SQ_SECRET_LEN bytes.
void sq_cap_mint (const uint8_t *secret, const uint8_t *client_key, uint64_t object,
                  uint64_t expiry_ms, uint8_t right, uint8_t *out);
//  0 if cap allows client_key the right on object at now_ms; else -1 and
//  *why says what is wrong (never which part of the MAC).
int sq_cap_check (const uint8_t *secret, const uint8_t *client_key, uint64_t object,
                  uint8_t right, uint64_t now_ms, const uint8_t *cap, size_t size,
                  const char **why);
//  Random bytes from the system's generator (secrets, tokens, cluster ids).
void sq_random (void *buf, size_t size);
//  The wall clock in ms.
uint64_t sq_wall_ms (void);

#endif
