/*  dirobj: directory objects (content type "dir"), a directory tree packed
    into one blob so that it is stored, copied and fetched like any object.

    Format (all integers little-endian), documented in docs/protocol.md:
      magic   8 bytes "SQDIR001"
      entries, parents before their children, each:
        type    u8  'd' directory, 'f' regular file, 'l' symbolic link
        mode    u32 permission bits (07777 mask; ignored for links)
        len     u32 then `len` bytes: the path relative to the root, '/'
                between components; no empty, "." or ".." component, no NUL
        'f':    u64 size, then `size` bytes of content
        'l':    u32 len, then the link target: relative, and staying inside
                the tree once resolved from the link's directory
    Empty directories are 'd' entries with nothing under them. Anything else
    (devices, sockets, fifos, absolute or escaping links) is refused when
    packing, and every entry is checked again when unpacking: a path that
    would escape the root (through "..", or through a link made earlier in
    the same archive: components are opened with O_NOFOLLOW) is refused.

    Ownership: dirobj_pack returns a new blob reference; nothing else is
    kept. */
#ifndef GOV_DIROBJ_H
#define GOV_DIROBJ_H

#include <stddef.h>
#include <stdbool.h>
#include "blob.h"

#define DIROBJ_CONTENT_TYPE "dir"

bool dirobj_is (const char *content_type);
//  Packs the tree under root (a directory). NULL with a message in err.
sq_blob_t *dirobj_pack (const char *root, char *err, size_t err_size);
//  Creates root (which must not exist; its parent must) and the tree in it.
//  0, or -1 with a message in err (what was made stays, for the caller to
//  remove with its task directory).
int dirobj_unpack (const void *data, size_t size, const char *root, char *err,
                   size_t err_size);

#endif
