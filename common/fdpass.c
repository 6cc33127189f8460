/*  fdpass: see fdpass.h. */
#include "fdpass.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>

ssize_t
sq_fdpass_send (int sock, const void *to, socklen_t to_len, const void *data, size_t size,
                const int *fds, size_t n_fds, int flags)
{
    if (n_fds > SQ_FDPASS_MAX) {
        errno = EINVAL;
        return -1;
    }
    union {
        char buf [CMSG_SPACE (SQ_FDPASS_MAX * sizeof (int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = { (void *) data, size };
    struct msghdr mh = {
        .msg_name = (void *) to, .msg_namelen = to? to_len: 0, .msg_iov = &iov, .msg_iovlen = 1
    };
    if (n_fds) {
        memset (control.buf, 0, CMSG_SPACE (n_fds * sizeof (int)));
        mh.msg_control = control.buf;
        mh.msg_controllen = CMSG_SPACE (n_fds * sizeof (int));
        struct cmsghdr *cm = CMSG_FIRSTHDR (&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN (n_fds * sizeof (int));
        memcpy (CMSG_DATA (cm), fds, n_fds * sizeof (int));
    }
    ssize_t n;
    while ((n = sendmsg (sock, &mh, flags | MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return n;
}

int
sq_write_all (int fd, const void *data, size_t size)
{
    const char *at = (const char *) data;
    while (size) {
        ssize_t n = write (fd, at, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        at += n;
        size -= (size_t) n;
    }
    return 0;
}
