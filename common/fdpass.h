/*  fdpass: descriptors sent over a Unix socket (SCM_RIGHTS) beside bytes.

    Four senders hand descriptors to another process: a writer's governor
    its pipe to the reader's governor (streams), a client its memory file
    to its governor (PUTLOCAL), the governor a task's pipes, logs and
    segments to an executor (two frame writers). The control message is
    built here once; each caller keeps its own policy (blocking or not,
    what a partial write means, who closes what). And the plain write of
    all of a buffer that follows such a message or stands alone (a frame's
    rest, the broker's journal, a key file).

    Ownership: nothing is taken. The descriptors stay the caller's (the
    kernel gives the receiver copies); the bytes are only read. */
#ifndef SQ_FDPASS_H
#define SQ_FDPASS_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

//  At most this many descriptors in one message (the executor's frame:
//  two stream pipes, two log descriptors and up to 64 segments).
#define SQ_FDPASS_MAX 68

//  sendmsg of `size` bytes with `n_fds` descriptors (0: none, a plain
//  send), to `to` (NULL: a connected socket), with `flags` (MSG_NOSIGNAL
//  is always added), retried on EINTR. Returns what sendmsg returns: the
//  bytes sent, or -1 with errno (EINVAL for more than SQ_FDPASS_MAX
//  descriptors). The descriptors go with the first byte sent.
ssize_t sq_fdpass_send (int sock, const void *to, socklen_t to_len, const void *data,
                        size_t size, const int *fds, size_t n_fds, int flags);

//  Writes all of data to fd, a blocking descriptor (a file, a pipe, a
//  stream socket), retried on EINTR and short writes. 0, or -1 with errno
//  (a write of 0 bytes counts as a failure).
int sq_write_all (int fd, const void *data, size_t size);

#endif
