/*  proto_internal: the helpers proto.c shares with proto_client.c,
    proto_governor.c and proto_data.c (the encoders and decoders of each
    plane). Not for use outside common/proto*.c. */
#ifndef SQ_PROTO_INTERNAL_H
#define SQ_PROTO_INTERNAL_H

#include "proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Records a decode error with the field it happened in; returns -1.
int sqp_error (mpr_t *r, sq_errbuf_t *err, const char *what);
int sqp_semantic (sq_errbuf_t *err, const char *text);
//  Opens frame 0: an array of exactly `fields` whose first element is `type`.
int sqp_begin (mpr_t *r, const void *data, size_t size, uint32_t type, uint32_t fields);
void sqp_pack_int_or_nil (msgpack_packer *pk, uint32_t value);
int sqp_opt_u32 (mpr_t *r, uint32_t *value);
int sqp_opt_bin (mpr_t *r, mpr_str_t *value, uint32_t len);
int sqp_opt_bin_max (mpr_t *r, mpr_str_t *value, uint32_t max);
void sqp_pack_bin_or_nil (msgpack_packer *pk, const uint8_t *bytes, size_t size);
int sqp_resources (mpr_t *r, sq_resource_t *out, uint32_t *n_out, uint32_t max);
void sqp_pack_resources (msgpack_packer *pk, const sq_resource_t *res, uint32_t n);
int sqp_ids (mpr_t *r, uint32_t **ids, uint32_t *n_ids);
void sqp_pack_ids (msgpack_packer *pk, const uint32_t *ids, uint32_t n);
//  Batched messages [type, [elements]]: begin, then more (1: an element
//  follows, 0: the validated end, -1: error) before reading each one.
int sqp_iter_begin (sq_iter_t *self, const void *data, size_t size, uint32_t type,
                    sq_errbuf_t *err, const char *what);
int sqp_iter_more (sq_iter_t *self, const char *what);
void *sqp_scratch (sq_iter_t *self, size_t bytes);
int sqp_frame_index (mpr_t *r, int32_t *frame);

#endif
