/*  zap: ZAP requests decoded and answered; CURVE socket options. */
#include "zap.h"
#include "log.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int
s_fail (char *err, size_t err_size, const char *why)
{
    snprintf (err, err_size, "ZAP request: %s", why);
    return -1;
}

static bool
s_frame_is (const void *data, size_t size, const char *text)
{
    return size == strlen (text) && memcmp (data, text, size) == 0;
}

int
sq_zap_decode (sq_zap_request_t *self, const void *const *frames, const size_t *sizes,
               size_t n, char *err, size_t err_size)
{
    memset (self, 0, sizeof *self);
    //  version, request id, domain, address, identity, mechanism, credentials...
    if (n < 6)
        return s_fail (err, err_size, "fewer than 6 frames");
    if (!s_frame_is (frames [0], sizes [0], "1.0"))
        return s_fail (err, err_size, "version is not 1.0");
    if (sizes [1] > sizeof self->request_id)
        return s_fail (err, err_size, "request id too long");
    memcpy (self->request_id, frames [1], sizes [1]);
    self->request_id_size = sizes [1];
    if (sizes [2] >= sizeof self->domain || memchr (frames [2], 0, sizes [2]))
        return s_fail (err, err_size, "bad domain");
    memcpy (self->domain, frames [2], sizes [2]);
    if (sizes [5] >= sizeof self->mechanism || memchr (frames [5], 0, sizes [5]))
        return s_fail (err, err_size, "bad mechanism");
    memcpy (self->mechanism, frames [5], sizes [5]);
    if (strcmp (self->mechanism, "CURVE") == 0) {
        if (n != 7 || sizes [6] != SQ_KEY_LEN)
            return s_fail (err, err_size, "CURVE credentials are not one 32-byte key");
        self->curve = true;
        memcpy (self->key, frames [6], SQ_KEY_LEN);
        sq_key_z85 (self->key, self->z85);
    }
    return 0;
}

int
sq_zap_decode_msg (sq_zap_request_t *self, sq_msg_t *msg, char *err, size_t err_size)
{
    const void *frames [8];
    size_t sizes [8];
    if (msg->truncated || msg->n > 8)
        return s_fail (err, err_size, "too many frames");
    for (size_t i = 0; i < msg->n; i++) {
        frames [i] = sq_msg_data (msg, i);
        sizes [i] = sq_msg_size (msg, i);
    }
    return sq_zap_decode (self, frames, sizes, msg->n, err, err_size);
}

int
sq_zap_reply (void *socket, const sq_zap_request_t *request, bool allow,
              const char *user_id, const char *reason)
{
    const char *code = allow? "200": "400";
    const char *text = allow? "OK": reason? reason: "denied";
    const char *user = allow && user_id? user_id: "";
    if (zmq_send (socket, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
    ||  zmq_send (socket, request->request_id, request->request_id_size,
                  ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
    ||  zmq_send (socket, code, 3, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
    ||  zmq_send (socket, text, strlen (text), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
    ||  zmq_send (socket, user, strlen (user), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
    ||  zmq_send (socket, "", 0, ZMQ_DONTWAIT) < 0)
        return -1;
    return 0;
}

void *
sq_zap_bind (void *ctx)
{
    void *socket = zmq_socket (ctx, ZMQ_REP);
    int zero = 0;
    if (!socket)
        return NULL;
    zmq_setsockopt (socket, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind (socket, SQ_ZAP_ENDPOINT)) {
        sq_error ("cannot bind the ZAP handler: %s", zmq_strerror (errno));
        zmq_close (socket);
        return NULL;
    }
    return socket;
}

int
sq_curve_server (void *socket, const uint8_t *secret_key, const char *domain)
{
    int one = 1;
    if (zmq_setsockopt (socket, ZMQ_CURVE_SERVER, &one, sizeof one)
    ||  zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, secret_key, SQ_KEY_LEN)
    ||  zmq_setsockopt (socket, ZMQ_ZAP_DOMAIN, domain, strlen (domain)))
        return -1;
    return 0;
}

int
sq_curve_client (void *socket, const uint8_t *public_key, const uint8_t *secret_key,
                 const uint8_t *server_key)
{
    if (zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, server_key, SQ_KEY_LEN)
    ||  zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY, public_key, SQ_KEY_LEN)
    ||  zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, secret_key, SQ_KEY_LEN))
        return -1;
    return 0;
}

const char *
sq_msg_user (zmq_msg_t *frame)
{
    const char *user = zmq_msg_gets (frame, "User-Id");
    return user && *user? user: NULL;
}
