/* Every bound drover puts on what a client, a template or a task can make it hold, in one table.
 * docs/CLI.md ("Limits") documents each one; a violation is refused with a line that names the
 * limit (LIMIT_NAME and its value), never silently truncated.
 *
 * Why these values: a frame holds the largest request a person or a script legitimately sends
 * (a 100k-task array is a few hundred bytes; an experiment of thousands of trials a few MB); the
 * exec sizes stay well inside Linux's execve() bounds (MAX_ARG_STRLEN = 128 KiB per string, and
 * a quarter of the 8 MiB default stack for everything) after drover adds its own variables. */
#ifndef DROVER_LIMITS_H
#define DROVER_LIMITS_H

/* The socket protocol. */
#define LIMIT_FRAME (4u << 20)            /* bytes in one request frame */
#define LIMIT_CONN_BUFFER (LIMIT_FRAME + 4) /* bytes buffered from one connection */
#define LIMIT_UID_BUFFER (16u << 20)      /* bytes buffered from all of one uid's connections */
#define LIMIT_UID_BUFFER_EXEMPT (64u << 10) /* ... not counting each connection's first bytes,
                                             * so that small requests always get through */
#define LIMIT_CONNS_PER_UID 256           /* open connections of one uid */
#define LIMIT_CONNS 900                   /* open connections in all (socket + HTTP) */
#define LIMIT_PARTIAL_FRAME_S 30          /* seconds a frame may take to arrive */

/* HTTP: the API, the dashboard and /metrics (daemon/http.c). */
#define LIMIT_HTTP_HEADERS (16u << 10)    /* bytes of request line and headers */
#define LIMIT_HTTP_BODY (1u << 20)        /* bytes of a request body */
#define LIMIT_HTTP_BODIES (32u << 20)     /* bytes of request bodies being received at once,
                                           * all connections together */
#define LIMIT_HTTP_IDLE_S 30              /* seconds an HTTP connection may sit idle, and a
                                           * request may take to arrive whole */
#define LIMIT_HTTP_CONNS 256              /* open HTTP connections (of LIMIT_CONNS): HTTP can
                                           * never crowd out the socket */
#define LIMIT_HTTP_STREAM_BUFFER (1u << 20) /* bytes a streamed answer (events, a followed log)
                                             * may have unread before its client is dropped */
#define LIMIT_HTTP_STREAMS 128            /* event streams open at once (/api/v1/events): each
                                           * holds a connection and up to the buffer above */
#define LIMIT_EVENTS_BACKLOG 10000        /* events kept for Last-Event-ID resume: a client
                                           * away for a few minutes of a busy queue catches up;
                                           * one further behind gets `reset` (docs/API.md) */

/* What a task is started with. */
#define LIMIT_EXEC_STRING 131071u         /* bytes in one argument or NAME=VALUE (MAX_ARG_STRLEN-1) */
#define LIMIT_EXEC_TOTAL (1u << 20)       /* bytes of argv + environment, pointers included */

/* Templates. */
#define LIMIT_TEMPLATE_EXPANDED (8u << 20) /* bytes of a template after ${...} substitution */
#define LIMIT_TEMPLATE_TASKS 100000       /* tasks one experiment may create at once */

/* The daemon's own log: a message that repeats (e.g. accept() failing) is written at most once
 * per this many seconds, with a count of those suppressed. */
#define LIMIT_LOG_REPEAT_S 10

#include <jansson.h>

/* Whether a task with this command (array of strings) and environment (object of strings) fits
 * LIMIT_EXEC_STRING and LIMIT_EXEC_TOTAL. 0, or -1 with *why (caller frees) naming the limit. */
int limits_check_exec(json_t *command, json_t *env, char **why);

#endif
