/* The client <-> daemon protocol: each message is a 4-byte big-endian length followed by that
 * many bytes of JSON. A request is {"v": PROTO_VERSION, "op": NAME, ...arguments}; a reply is
 * {"ok": true, ...} or {"ok": false, "error": "one line", "code": 2}. No raw structs cross the
 * socket. */
#ifndef DROVER_PROTO_H
#define DROVER_PROTO_H

#include <jansson.h>
#include <stddef.h>

#include "util/limits.h"

#define PROTO_VERSION 1
#define PROTO_MAX_REQUEST LIMIT_FRAME  /* requests larger than this are refused */
#define PROTO_MAX_REPLY (1u << 30)

/* Blocking helpers for the client, on a socket. 0 on success, -1 on error (errno set). A
 * message over PROTO_MAX_REQUEST is not sent (EMSGSIZE; *size, when not NULL, says how large it
 * was); a peer that has gone is EPIPE or ECONNRESET, never a SIGPIPE (the caller's own SIGPIPE
 * behaviour, e.g. on stdout, is left alone). proto_recv returns a new reference; EPROTO for a
 * bad frame. */
int proto_send(int fd, const json_t *msg, size_t *size);
int proto_recv(int fd, json_t **msg, size_t max);

#endif
