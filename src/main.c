/*
 * main.c - the yurthub binary: flags -> config -> the hub, or the
 * `yurthub cache` operator tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cache_cmd.h"
#include "config.h"
#include "hub.h"
#include "version.h"

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "cache"))
		return cache_cmd_main(argc - 1, argv + 1, stdout, stderr);

	struct config cfg;
	char *err = NULL;
	config_init(&cfg);
	if (config_parse(&cfg, argc - 1, argv + 1, &err) < 0) {
		fprintf(stderr, "yurthub: %s\n", err ? err : "out of memory");
		free(err);
		config_free(&cfg);
		return 2;
	}
	if (cfg.help) {
		config_print_help(stdout);
		config_free(&cfg);
		return 0;
	}
	if (cfg.version) {
		printf("yurthub %s\n", YURTHUB_VERSION);
		config_free(&cfg);
		return 0;
	}
	if (config_validate(&cfg, &err) < 0) {
		fprintf(stderr, "yurthub: %s\n", err ? err : "out of memory");
		free(err);
		config_free(&cfg);
		return 2;
	}
	int status = hub_run(&cfg);
	config_free(&cfg);
	return status;
}
