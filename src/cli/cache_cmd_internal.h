/*
 * cache_cmd_internal.h - what the two halves of `yurthub cache` share: the
 * cache-directory commands (cache_cmd.c) and the etcd-store commands
 * (cache_etcd.c) print objects, keys and views the same way.
 */
#ifndef YURTHUB_CLI_CACHE_CMD_INTERNAL_H
#define YURTHUB_CLI_CACHE_CMD_INTERNAL_H

#include <stdio.h>

#include "storage/store.h"

enum { EXIT_OK = 0, EXIT_PROBLEMS = 1, EXIT_USAGE = 2 };

/* "yurthub cache CMD: ..." on err; exit status 2 and 1. */
int usage_error(FILE *err, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int failure(FILE *err, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A store error on `what`, with the exit status it means. */
int store_failure(FILE *err, const char *cmd, const char *what, enum store_err e);

/* The object keys of a component's resource, sorted (namespace NULL: all). */
int cache_ls_objects(struct store *s, const char *component, const char *resdir,
		     const char *namespace, FILE *out, FILE *err);
/* args: [anything], COMPONENT, RESOURCE.VERSION.GROUP, [NAMESPACE], NAME */
int cache_get_object(struct store *s, char **args, int n, FILE *out, FILE *err);
int cache_list_views(struct store *s, const char *component, const char *resdir, FILE *out,
		     FILE *err);

/* `yurthub cache --etcd-servers=... COMMAND`: argv from the first option. */
int cache_etcd_main(int argc, char **argv, FILE *out, FILE *err);

#endif
