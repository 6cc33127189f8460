/*  mpreader: a strict, allocation-free msgpack cursor over one buffer.

    Why our own reader rather than msgpack-c's unpacker: msgpack_unpack builds
    an object tree and reserves container storage from the element count the
    input *declares*, so a five-byte frame can ask for gigabytes. This cursor
    checks every declared count and length against the bytes that are really
    left, never allocates, and never asserts on input. msgpack-c is still what
    we encode with (see proto.c).

    Ownership: the reader borrows the buffer; strings and bins it returns
    point into that buffer and live as long as it does.

    Every function returns 0 on success, -1 on error; after the first error the
    reader is "failed" (every later call returns -1) and mpr_error says why,
    so a decoder can chain calls and check once.
*/
#ifndef SQ_MPREADER_H
#define SQ_MPREADER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct {
    const uint8_t *data;
    size_t size;
    size_t pos;
    const char *error;          //  static string, NULL while ok
    const char *field;          //  name of the field being read (for messages)
    const char *scope;          //  a record's, its fields' names are within
                                //  (errors name "task.inputs"); NULL: none
} mpr_t;

typedef struct {
    const char *ptr;            //  not NUL-terminated
    uint32_t len;
} mpr_str_t;

typedef enum {
    MPR_NIL, MPR_BOOL, MPR_UINT, MPR_INT, MPR_FLOAT, MPR_STR, MPR_BIN,
    MPR_ARRAY, MPR_MAP, MPR_EXT, MPR_INVALID
} mpr_type_t;

void mpr_init (mpr_t *self, const void *data, size_t size);
//  Type of the next value, without consuming it (MPR_INVALID at end / error).
mpr_type_t mpr_peek (mpr_t *self);
bool mpr_ok (const mpr_t *self);
int mpr_fail (mpr_t *self, const char *error);
//  Names the field the next reads are for; error messages quote it.
void mpr_field (mpr_t *self, const char *field);

int mpr_array (mpr_t *self, uint32_t *count);
//  Reads an array header and requires exactly `count` elements.
int mpr_array_exact (mpr_t *self, uint32_t count);
int mpr_map (mpr_t *self, uint32_t *count);
int mpr_nil (mpr_t *self);
//  True (and consumed) if the next value is nil.
bool mpr_try_nil (mpr_t *self);
int mpr_bool (mpr_t *self, bool *value);
int mpr_uint (mpr_t *self, uint64_t *value);
int mpr_u32 (mpr_t *self, uint32_t *value);
int mpr_int (mpr_t *self, int64_t *value);
//  Accepts float32, float64 and integers.
int mpr_double (mpr_t *self, double *value);
//  A string of at most max_len bytes.
int mpr_str (mpr_t *self, mpr_str_t *value, uint32_t max_len);
int mpr_bin (mpr_t *self, mpr_str_t *value, uint32_t max_len);
//  Skips one whole value of any type (bounded nesting), returning its raw
//  bytes: how opaque values (task config) are passed through untouched.
int mpr_skip (mpr_t *self, const uint8_t **raw, size_t *raw_size);
//  Requires that the whole buffer was consumed (no trailing bytes).
int mpr_end (mpr_t *self);

//  Copies a string into a NUL-terminated heap string; caller frees.
char *mpr_strdup (mpr_str_t s);
bool mpr_str_eq (mpr_str_t s, const char *cstr);

#endif
