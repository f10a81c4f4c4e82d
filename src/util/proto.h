/* The client <-> daemon protocol: each message is a 4-byte big-endian length followed by that
 * many bytes of JSON. A request is {"v": PROTO_VERSION, "op": NAME, ...arguments}; a reply is
 * {"ok": true, ...} or {"ok": false, "error": "one line", "code": 2}. No raw structs cross the
 * socket. */
#ifndef DROVER_PROTO_H
#define DROVER_PROTO_H

#include <jansson.h>
#include <stddef.h>

#define PROTO_VERSION 1
#define PROTO_MAX_REQUEST (4u << 20)   /* requests larger than this are refused */
#define PROTO_MAX_REPLY (1u << 30)

/* Blocking helpers for the client. 0 on success, -1 on error (errno set; EPROTO for a bad
 * frame). proto_recv returns a new reference. */
int proto_send(int fd, const json_t *msg);
int proto_recv(int fd, json_t **msg, size_t max);

#endif
