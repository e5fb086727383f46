/*
 * cache_cmd.h - `yurthub cache`: the operator's tool for a cache directory.
 *
 *   yurthub cache ls DIR [COMPONENT [RESOURCE.VERSION.GROUP [NAMESPACE]]]
 *   yurthub cache get DIR COMPONENT RESOURCE.VERSION.GROUP [NAMESPACE] NAME
 *   yurthub cache views DIR COMPONENT RESOURCE.VERSION.GROUP
 *   yurthub cache verify DIR
 *   yurthub cache recover DIR
 *
 * Reads (ls, get, views, verify) never modify the directory and work while a
 * hub runs on it; recover takes the directory's lock like the hub does.
 */
#ifndef YURTHUB_CLI_CACHE_CMD_H
#define YURTHUB_CLI_CACHE_CMD_H

#include <stdio.h>

/* argv[0] is "cache".  Output to out, diagnostics to err.  Returns the exit
 * status: 0 ok, 1 problems found / not found, 2 usage error. */
int cache_cmd_main(int argc, char **argv, FILE *out, FILE *err);

#endif
