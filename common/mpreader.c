/*  mpreader: strict msgpack cursor. See mpreader.h for why it exists. */
#include "mpreader.h"
#include <stdlib.h>
#include <string.h>

//  Deeper nesting than this in an opaque value is refused: our own messages
//  nest at most five levels, user configs a little more.
#define MPR_MAX_DEPTH 32

void
mpr_init (mpr_t *self, const void *data, size_t size)
{
    self->data = (const uint8_t *) data;
    self->size = size;
    self->pos = 0;
    self->error = NULL;
    self->field = NULL;
    self->scope = NULL;
}

bool
mpr_ok (const mpr_t *self)
{
    return self->error == NULL;
}

int
mpr_fail (mpr_t *self, const char *error)
{
    if (!self->error)
        self->error = error;
    return -1;
}

void
mpr_field (mpr_t *self, const char *field)
{
    if (!self->error)
        self->field = field;
}

static inline size_t
s_left (const mpr_t *self)
{
    return self->size - self->pos;
}

static int
s_need (mpr_t *self, size_t n)
{
    if (self->error)
        return -1;
    if (s_left (self) < n)
        return mpr_fail (self, "truncated message");
    return 0;
}

static uint64_t
s_be (const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p [i];
    return v;
}

//  Reads n big-endian bytes after the type byte.
static int
s_read_be (mpr_t *self, int n, uint64_t *value)
{
    if (s_need (self, (size_t) n))
        return -1;
    *value = s_be (self->data + self->pos, n);
    self->pos += n;
    return 0;
}

mpr_type_t
mpr_peek (mpr_t *self)
{
    if (self->error || s_left (self) == 0)
        return MPR_INVALID;
    uint8_t b = self->data [self->pos];
    if (b <= 0x7f || b == 0xcc || b == 0xcd || b == 0xce || b == 0xcf)
        return MPR_UINT;
    if (b >= 0xe0 || b == 0xd0 || b == 0xd1 || b == 0xd2 || b == 0xd3)
        return MPR_INT;
    if ((b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf)
        return MPR_MAP;
    if ((b >= 0x90 && b <= 0x9f) || b == 0xdc || b == 0xdd)
        return MPR_ARRAY;
    if ((b >= 0xa0 && b <= 0xbf) || b == 0xd9 || b == 0xda || b == 0xdb)
        return MPR_STR;
    if (b == 0xc0)
        return MPR_NIL;
    if (b == 0xc2 || b == 0xc3)
        return MPR_BOOL;
    if (b == 0xc4 || b == 0xc5 || b == 0xc6)
        return MPR_BIN;
    if (b == 0xca || b == 0xcb)
        return MPR_FLOAT;
    if (b == 0xd4 || b == 0xd5 || b == 0xd6 || b == 0xd7 || b == 0xd8
    ||  b == 0xc7 || b == 0xc8 || b == 0xc9)
        return MPR_EXT;
    return MPR_INVALID;         //  0xc1 is never used
}

static int
s_wrong_type (mpr_t *self, const char *expected)
{
    if (self->error)
        return -1;
    if (s_left (self) == 0)
        return mpr_fail (self, "truncated message");
    (void) expected;
    return mpr_fail (self, expected);
}

//  Container header: count, bounded by the bytes left (each element takes at
//  least one byte, each map entry two), so a declared count can never make a
//  caller loop or allocate beyond what the frame holds.
static int
s_container (mpr_t *self, bool map, uint32_t *count)
{
    if (s_need (self, 1))
        return -1;
    uint8_t b = self->data [self->pos];
    uint64_t n;
    if (!map && b >= 0x90 && b <= 0x9f) {
        n = b & 0x0f; self->pos++;
    }
    else
    if (map && b >= 0x80 && b <= 0x8f) {
        n = b & 0x0f; self->pos++;
    }
    else
    if (b == (map? 0xde: 0xdc)) {
        self->pos++;
        if (s_read_be (self, 2, &n)) return -1;
    }
    else
    if (b == (map? 0xdf: 0xdd)) {
        self->pos++;
        if (s_read_be (self, 4, &n)) return -1;
    }
    else
        return s_wrong_type (self, map? "expected a map": "expected an array");
    if (n * (map? 2: 1) > s_left (self))
        return mpr_fail (self, "container count exceeds message size");
    *count = (uint32_t) n;
    return 0;
}

int
mpr_array (mpr_t *self, uint32_t *count)
{
    return s_container (self, false, count);
}

int
mpr_array_exact (mpr_t *self, uint32_t count)
{
    uint32_t n = 0;
    if (s_container (self, false, &n))
        return -1;
    if (n != count)
        return mpr_fail (self, "wrong number of fields");
    return 0;
}

int
mpr_map (mpr_t *self, uint32_t *count)
{
    return s_container (self, true, count);
}

int
mpr_nil (mpr_t *self)
{
    if (s_need (self, 1))
        return -1;
    if (self->data [self->pos] != 0xc0)
        return s_wrong_type (self, "expected nil");
    self->pos++;
    return 0;
}

bool
mpr_try_nil (mpr_t *self)
{
    if (!self->error && s_left (self) > 0 && self->data [self->pos] == 0xc0) {
        self->pos++;
        return true;
    }
    return false;
}

int
mpr_bool (mpr_t *self, bool *value)
{
    if (s_need (self, 1))
        return -1;
    uint8_t b = self->data [self->pos];
    if (b != 0xc2 && b != 0xc3)
        return s_wrong_type (self, "expected a boolean");
    *value = b == 0xc3;
    self->pos++;
    return 0;
}

//  Reads any integer as a sign flag plus magnitude.
static int
s_integer (mpr_t *self, bool *negative, uint64_t *magnitude)
{
    if (s_need (self, 1))
        return -1;
    uint8_t b = self->data [self->pos];
    uint64_t v;
    *negative = false;
    if (b <= 0x7f) {
        self->pos++;
        *magnitude = b;
        return 0;
    }
    if (b >= 0xe0) {
        self->pos++;
        *negative = true;
        *magnitude = (uint64_t) (-(int64_t) (int8_t) b);
        return 0;
    }
    int width;
    bool is_signed;
    switch (b) {
        case 0xcc: width = 1; is_signed = false; break;
        case 0xcd: width = 2; is_signed = false; break;
        case 0xce: width = 4; is_signed = false; break;
        case 0xcf: width = 8; is_signed = false; break;
        case 0xd0: width = 1; is_signed = true; break;
        case 0xd1: width = 2; is_signed = true; break;
        case 0xd2: width = 4; is_signed = true; break;
        case 0xd3: width = 8; is_signed = true; break;
        default:
            return s_wrong_type (self, "expected an integer");
    }
    self->pos++;
    if (s_read_be (self, width, &v))
        return -1;
    if (is_signed) {
        int64_t sv;
        if (width == 1) sv = (int8_t) v;
        else
        if (width == 2) sv = (int16_t) v;
        else
        if (width == 4) sv = (int32_t) v;
        else            sv = (int64_t) v;
        if (sv < 0) {
            *negative = true;
            *magnitude = (uint64_t) 0 - (uint64_t) sv;
        }
        else
            *magnitude = (uint64_t) sv;
    }
    else
        *magnitude = v;
    return 0;
}

int
mpr_uint (mpr_t *self, uint64_t *value)
{
    bool negative = false;
    uint64_t m = 0;
    if (s_integer (self, &negative, &m))
        return -1;
    if (negative)
        return mpr_fail (self, "expected a non-negative integer");
    *value = m;
    return 0;
}

int
mpr_u32 (mpr_t *self, uint32_t *value)
{
    uint64_t v;
    if (mpr_uint (self, &v))
        return -1;
    if (v > UINT32_MAX)
        return mpr_fail (self, "integer out of 32-bit range");
    *value = (uint32_t) v;
    return 0;
}

int
mpr_int (mpr_t *self, int64_t *value)
{
    bool negative = false;
    uint64_t m = 0;
    if (s_integer (self, &negative, &m))
        return -1;
    if (negative) {
        if (m > (uint64_t) INT64_MAX + 1)
            return mpr_fail (self, "integer out of range");
        *value = m == (uint64_t) INT64_MAX + 1? INT64_MIN: -(int64_t) m;
    }
    else {
        if (m > (uint64_t) INT64_MAX)
            return mpr_fail (self, "integer out of range");
        *value = (int64_t) m;
    }
    return 0;
}

int
mpr_double (mpr_t *self, double *value)
{
    if (s_need (self, 1))
        return -1;
    uint8_t b = self->data [self->pos];
    uint64_t bits;
    if (b == 0xca) {
        self->pos++;
        if (s_read_be (self, 4, &bits)) return -1;
        uint32_t b32 = (uint32_t) bits;
        float f;
        memcpy (&f, &b32, sizeof f);
        *value = f;
        return 0;
    }
    if (b == 0xcb) {
        self->pos++;
        if (s_read_be (self, 8, &bits)) return -1;
        memcpy (value, &bits, sizeof *value);
        return 0;
    }
    int64_t i;
    if (mpr_peek (self) == MPR_UINT || mpr_peek (self) == MPR_INT) {
        if (mpr_int (self, &i))
            return -1;
        *value = (double) i;
        return 0;
    }
    return s_wrong_type (self, "expected a number");
}

static int
s_bytes (mpr_t *self, bool bin, mpr_str_t *value, uint32_t max_len)
{
    if (s_need (self, 1))
        return -1;
    uint8_t b = self->data [self->pos];
    uint64_t n;
    if (!bin && b >= 0xa0 && b <= 0xbf) {
        n = b & 0x1f; self->pos++;
    }
    else
    if (b == (bin? 0xc4: 0xd9)) {
        self->pos++;
        if (s_read_be (self, 1, &n)) return -1;
    }
    else
    if (b == (bin? 0xc5: 0xda)) {
        self->pos++;
        if (s_read_be (self, 2, &n)) return -1;
    }
    else
    if (b == (bin? 0xc6: 0xdb)) {
        self->pos++;
        if (s_read_be (self, 4, &n)) return -1;
    }
    else
        return s_wrong_type (self, bin? "expected binary data": "expected a string");
    if (n > max_len)
        return mpr_fail (self, "string or binary value too long");
    if (s_need (self, (size_t) n))
        return -1;
    value->ptr = (const char *) self->data + self->pos;
    value->len = (uint32_t) n;
    self->pos += (size_t) n;
    return 0;
}

int
mpr_str (mpr_t *self, mpr_str_t *value, uint32_t max_len)
{
    return s_bytes (self, false, value, max_len);
}

int
mpr_bin (mpr_t *self, mpr_str_t *value, uint32_t max_len)
{
    return s_bytes (self, true, value, max_len);
}

static int
s_skip (mpr_t *self, int depth)
{
    if (depth > MPR_MAX_DEPTH)
        return mpr_fail (self, "value nested too deeply");
    mpr_str_t s;
    uint32_t n;
    uint64_t len;
    switch (mpr_peek (self)) {
        case MPR_NIL: return mpr_nil (self);
        case MPR_BOOL: { bool b; return mpr_bool (self, &b); }
        case MPR_UINT: { uint64_t u; return mpr_uint (self, &u); }
        case MPR_INT: { int64_t i; return mpr_int (self, &i); }
        case MPR_FLOAT: { double d; return mpr_double (self, &d); }
        case MPR_STR: return mpr_str (self, &s, UINT32_MAX);
        case MPR_BIN: return mpr_bin (self, &s, UINT32_MAX);
        case MPR_ARRAY:
            if (mpr_array (self, &n)) return -1;
            for (uint32_t i = 0; i < n; i++)
                if (s_skip (self, depth + 1)) return -1;
            return 0;
        case MPR_MAP:
            if (mpr_map (self, &n)) return -1;
            for (uint32_t i = 0; i < 2 * n; i++)
                if (s_skip (self, depth + 1)) return -1;
            return 0;
        case MPR_EXT: {
            uint8_t b = self->data [self->pos++];
            if (b >= 0xd4 && b <= 0xd8)
                len = (uint64_t) 1 << (b - 0xd4);
            else
            if (s_read_be (self, b == 0xc7? 1: b == 0xc8? 2: 4, &len))
                return -1;
            if (s_need (self, 1 + (size_t) len))      //  type byte + data
                return -1;
            self->pos += 1 + (size_t) len;
            return 0;
        }
        default:
            if (s_need (self, 1))
                return -1;
            return mpr_fail (self, "invalid msgpack type byte");
    }
}

int
mpr_skip (mpr_t *self, const uint8_t **raw, size_t *raw_size)
{
    size_t start = self->pos;
    if (s_skip (self, 0))
        return -1;
    if (raw)
        *raw = self->data + start;
    if (raw_size)
        *raw_size = self->pos - start;
    return 0;
}

int
mpr_end (mpr_t *self)
{
    if (self->error)
        return -1;
    if (self->pos != self->size)
        return mpr_fail (self, "trailing bytes after message");
    return 0;
}

char *
mpr_strdup (mpr_str_t s)
{
    char *copy = (char *) malloc ((size_t) s.len + 1);
    if (copy) {
        if (s.len)
            memcpy (copy, s.ptr, s.len);
        copy [s.len] = 0;
    }
    return copy;
}

bool
mpr_str_eq (mpr_str_t s, const char *cstr)
{
    size_t n = strlen (cstr);
    return n == s.len && (n == 0 || memcmp (s.ptr, cstr, n) == 0);
}
