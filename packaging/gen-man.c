/*
 * gen-man.c - writes yurthub.8 at build time: the template yurthub.8.in with
 * its placeholder lines replaced by text generated from the program itself,
 * so that the man page lists exactly the flags the parser accepts.
 *
 *   gen-man TEMPLATE [KEY=VALUE...] > yurthub.8
 *
 * Placeholders (each alone on a line):
 *   @OPTIONS@      the flag table (config_print_man_options)
 *   @COMPAT@       the flags accepted only for YurtHub's manifests
 *   @CACHE_USAGE@  the usage text of `yurthub cache`, as a literal block
 * and, anywhere in a line, @VERSION@ and the @KEY@ of each KEY=VALUE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cache_cmd.h"
#include "config.h"
#include "version.h"

/* Plain text as roff: a literal block, with what roff would interpret
 * escaped (backslashes, hyphens, and control characters at line start). */
static void print_literal(FILE *out, const char *text)
{
	fputs(".PP\n.RS 4\n.nf\n", out);
	int bol = 1;
	for (const char *p = text; *p; p++) {
		if (bol && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '-')
			fputs("\\-", out);
		else
			fputc(*p, out);
		bol = *p == '\n';
	}
	if (!bol)
		fputc('\n', out);
	fputs(".fi\n.RE\n", out);
}

static int print_cache_usage(FILE *out)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem)
		return -1;
	char *argv[] = {"cache", "--help", NULL};
	int rc = cache_cmd_main(2, argv, mem, stderr);
	if (fclose(mem) != 0 || rc != 0) {
		free(text);
		return -1;
	}
	print_literal(out, text);
	free(text);
	return 0;
}

/* A template line with every @KEY@ of the KEY=VALUE arguments replaced. */
static void print_substituted(FILE *out, const char *line, char **defs, int ndefs)
{
	while (*line) {
		int done = 0;
		if (*line == '@') {
			for (int i = 0; i < ndefs && !done; i++) {
				const char *eq = strchr(defs[i], '=');
				size_t klen = (size_t)(eq - defs[i]);
				if (!strncmp(line + 1, defs[i], klen) && line[1 + klen] == '@') {
					fputs(eq + 1, out);
					line += klen + 2;
					done = 1;
				}
			}
		}
		if (!done)
			fputc(*line++, out);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: gen-man TEMPLATE [KEY=VALUE...] > yurthub.8\n");
		return 2;
	}
	char *defs[64];
	int ndefs = 0;
	static char version_def[] = "VERSION=" YURTHUB_VERSION;
	defs[ndefs++] = version_def;
	for (int i = 2; i < argc; i++) {
		if (!strchr(argv[i], '=') || ndefs == 64) {
			fprintf(stderr, "gen-man: bad substitution '%s'\n", argv[i]);
			return 2;
		}
		defs[ndefs++] = argv[i];
	}
	FILE *in = fopen(argv[1], "r");
	if (!in) {
		perror(argv[1]);
		return 1;
	}
	char *line = NULL;
	size_t cap = 0;
	int status = 0;
	while (getline(&line, &cap, in) > 0) {
		if (!strcmp(line, "@OPTIONS@\n"))
			config_print_man_options(stdout);
		else if (!strcmp(line, "@COMPAT@\n"))
			config_print_man_compat(stdout);
		else if (!strcmp(line, "@CACHE_USAGE@\n")) {
			if (print_cache_usage(stdout) < 0) {
				fprintf(stderr, "gen-man: yurthub cache --help failed\n");
				status = 1;
			}
		} else
			print_substituted(stdout, line, defs, ndefs);
	}
	free(line);
	if (ferror(in) || fclose(in) != 0 || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "gen-man: read or write error\n");
		status = 1;
	}
	return status;
}
