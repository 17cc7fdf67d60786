// SPDX-License-Identifier: Apache-2.0
/*
 * cli_main.c - `sprocket`: the command line for a sprocket (or RocketMQ)
 * cluster (docs/cli.md). Finds the command in the tables of the command
 * files, parses its options, and prints help at every level and a bash
 * completion script generated from the same tables.
 *
 *   sprocket [--namesrv=ADDR] [--json] [--timeout-ms=MS] GROUP VERB [ARGS] [--opt=value]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sp_config.h"

static const char *const GLOBAL_OPTS[] = {"namesrv", "json", "timeout-ms", "help", NULL};

struct table {
	const struct cli_cmd *cmds;
	size_t n;
};

static struct table tables[4];

static void
tables_init(void)
{
	tables[0] = (struct table){cli_admin_cmds, cli_admin_ncmds};
	tables[1] = (struct table){cli_group_cmds, cli_group_ncmds};
	tables[2] = (struct table){cli_msg_cmds, cli_msg_ncmds};
	tables[3] = (struct table){cli_failover_cmds, cli_failover_ncmds};
}

/* Number of words of @words (space-separated) that @argv starts with, or 0. */
static size_t
words_match(const char *words, int argc, char **argv)
{
	size_t k = 0;
	const char *p = words;

	while (*p) {
		const char *e = strchr(p, ' ');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if ((int)k >= argc || strlen(argv[k]) != l || strncmp(argv[k], p, l) != 0)
			return 0;
		k++;
		p = e ? e + 1 : p + l;
	}
	return k;
}

static void
usage_all(FILE *f, const char *prefix)
{
	fprintf(f,
		"usage: sprocket [--namesrv=ADDR;ADDR] [--json] [--timeout-ms=MS] COMMAND ...\n\n"
		"The NameServers come from --namesrv, else NAMESRV_ADDR, else 127.0.0.1:9876.\n"
		"Exit codes: 0 done, 1 the cluster said no or was not reached, 2 bad usage.\n\n"
		"commands:\n");
	for (size_t t = 0; t < 4; t++)
		for (size_t i = 0; i < tables[t].n; i++) {
			const struct cli_cmd *c = &tables[t].cmds[i];

			if (prefix && strncmp(c->words, prefix, strlen(prefix)) != 0)
				continue;
			fprintf(f, "  sprocket %-22s %s\n", c->words, c->help);
		}
	fprintf(f, "  sprocket %-22s %s\n", "completion bash", "print a bash completion script");
	fprintf(f, "\n`sprocket COMMAND --help` shows a command's arguments.\n");
}

static void
usage_cmd(const struct cli_cmd *c)
{
	printf("usage: sprocket %s %s\n\n%s\n", c->words, c->args, c->help);
	printf("\noptions:");
	for (size_t i = 0; c->opts[i]; i++)
		printf(" --%s", c->opts[i]);
	printf("\nglobal: --namesrv=ADDR --json --timeout-ms=MS --access-key=AK --secret-key=SK "
	       "(or SPROCKET_ACCESS_KEY, SPROCKET_SECRET_KEY: brokers and NameServers with ACL on) "
	       "--help\n");
}

static bool
allowed(const struct cli_cmd *c, const char *k)
{
	for (size_t i = 0; GLOBAL_OPTS[i]; i++)
		if (strcmp(k, GLOBAL_OPTS[i]) == 0)
			return true;
	for (size_t i = 0; c->opts[i]; i++)
		if (strcmp(k, c->opts[i]) == 0)
			return true;
	return false;
}

static int
completion(void)
{
	printf("# bash completion for sprocket: eval \"$(sprocket completion bash)\"\n"
	       "_sprocket() {\n"
	       "  local cur=${COMP_WORDS[COMP_CWORD]} line=\"${COMP_WORDS[*]:1:COMP_CWORD-1}\"\n"
	       "  local words=\"\"\n"
	       "  case \"$line\" in\n");
	/* options of each full command */
	for (size_t t = 0; t < 4; t++)
		for (size_t i = 0; i < tables[t].n; i++) {
			const struct cli_cmd *c = &tables[t].cmds[i];

			printf("    \"%s\"*) words=\"", c->words);
			for (size_t k = 0; c->opts[k]; k++)
				printf("--%s ", c->opts[k]);
			printf("--json --namesrv= --help\" ;;\n");
		}
	/* the verbs of each group */
	printf("    \"\") words=\"");
	for (size_t t = 0; t < 4; t++)
		for (size_t i = 0; i < tables[t].n; i++) {
			const char *w = tables[t].cmds[i].words;
			size_t l = strcspn(w, " ");
			bool seen = false;

			for (size_t t2 = 0; t2 <= t && !seen; t2++)
				for (size_t j = 0; j < (t2 == t ? i : tables[t2].n) && !seen; j++)
					seen = strncmp(tables[t2].cmds[j].words, w, l) == 0 &&
					       (tables[t2].cmds[j].words[l] == ' ' ||
						tables[t2].cmds[j].words[l] == '\0');
			if (!seen)
				printf("%.*s ", (int)l, w);
		}
	printf("completion\" ;;\n");
	for (size_t t = 0; t < 4; t++)
		for (size_t i = 0; i < tables[t].n; i++) {
			const char *w = tables[t].cmds[i].words;
			size_t l = strcspn(w, " ");

			if (w[l] != ' ')
				continue;
			/* once per group: at its first verb */
			if (i > 0 && strncmp(tables[t].cmds[i - 1].words, w, l + 1) == 0)
				continue;
			printf("    \"%.*s\") words=\"", (int)l, w);
			for (size_t j = i;
			     j < tables[t].n && strncmp(tables[t].cmds[j].words, w, l + 1) == 0;
			     j++)
				printf("%s ", tables[t].cmds[j].words + l + 1);
			printf("\" ;;\n");
		}
	printf("    \"completion\") words=\"bash\" ;;\n"
	       "  esac\n"
	       "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
	       "}\n"
	       "complete -o nospace -F _sprocket sprocket\n");
	return CLI_OK;
}

int
main(int argc, char **argv)
{
	struct cli c = {.timeout_ms = 5000};
	const struct cli_cmd *cmd = NULL;
	char **rest = argv + 1;
	int nrest = argc - 1;
	size_t used = 0;
	const char *env = getenv("NAMESRV_ADDR");
	int64_t t = 5000;

	cli_esc_stdio();
	tables_init();
	/* global options before the command */
	while (nrest > 0 && strncmp(rest[0], "--", 2) == 0) {
		if (strcmp(rest[0], "--version") == 0) {
			printf("sprocket %s\n", SP_VERSION);
			return CLI_OK;
		}
		if (strcmp(rest[0], "--help") == 0 || strcmp(rest[0], "-h") == 0) {
			usage_all(stdout, NULL);
			return CLI_OK;
		}
		if (c.nopt == CLI_OPTS_MAX)
			break;
		c.opt_k[c.nopt] = rest[0] + 2;
		c.opt_v[c.nopt] = "";
		{
			char *eq = strchr(rest[0], '=');

			if (eq) {
				*eq = '\0';
				c.opt_v[c.nopt] = eq + 1;
			}
		}
		if (!(strcmp(c.opt_k[c.nopt], "namesrv") == 0 ||
		      strcmp(c.opt_k[c.nopt], "json") == 0 ||
		      strcmp(c.opt_k[c.nopt], "access-key") == 0 ||
		      strcmp(c.opt_k[c.nopt], "secret-key") == 0 ||
		      strcmp(c.opt_k[c.nopt], "timeout-ms") == 0)) {
			fprintf(stderr, "sprocket: unknown option --%s (sprocket --help)\n",
				c.opt_k[c.nopt]);
			return CLI_USAGE;
		}
		c.nopt++;
		rest++;
		nrest--;
	}
	if (nrest == 0) {
		usage_all(stderr, NULL);
		return CLI_USAGE;
	}
	if (strcmp(rest[0], "completion") == 0) {
		if (nrest < 2 || strcmp(rest[1], "bash") != 0) {
			fprintf(stderr, "sprocket: usage: sprocket completion bash\n");
			return CLI_USAGE;
		}
		return completion();
	}
	for (size_t k = 0; k < 4 && cmd == NULL; k++)
		for (size_t i = 0; i < tables[k].n && cmd == NULL; i++) {
			used = words_match(tables[k].cmds[i].words, nrest, rest);
			if (used)
				cmd = &tables[k].cmds[i];
		}
	if (cmd == NULL) {
		bool group = false;

		for (size_t k = 0; k < 4; k++)
			for (size_t i = 0; i < tables[k].n; i++)
				group |= strncmp(tables[k].cmds[i].words, rest[0],
						 strlen(rest[0])) == 0 &&
					 tables[k].cmds[i].words[strlen(rest[0])] == ' ';
		if (group) {
			bool help = nrest > 1 &&
				    (strcmp(rest[1], "--help") == 0 || strcmp(rest[1], "-h") == 0);

			if (!help)
				fprintf(stderr, "sprocket: %s: unknown or missing verb%s%s\n\n",
					rest[0], nrest > 1 ? " " : "", nrest > 1 ? rest[1] : "");
			usage_all(help ? stdout : stderr, rest[0]);
			return help ? CLI_OK : CLI_USAGE;
		}
		fprintf(stderr, "sprocket: unknown command '%s' (sprocket --help)\n", rest[0]);
		return CLI_USAGE;
	}
	c.cmd = cmd->words;
	for (int i = (int)used; i < nrest; i++) {
		char *a = rest[i];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage_cmd(cmd);
			return CLI_OK;
		}
		if (strcmp(a, "-n") == 0 && i + 1 < nrest && allowed(cmd, "n")) {
			if (c.nopt == CLI_OPTS_MAX)
				return cli_usage(&c, "too many options");
			c.opt_k[c.nopt] = "n";
			c.opt_v[c.nopt++] = rest[++i];
			continue;
		}
		if (strncmp(a, "--", 2) == 0) {
			char *eq = strchr(a, '=');
			const char *v = "";

			if (eq) {
				*eq = '\0';
				v = eq + 1;
			}
			if (!allowed(cmd, a + 2))
				return cli_usage(&c, "unknown option --%s", a + 2);
			if (strcmp(a + 2, "property") == 0) {
				if (c.nprops == CLI_PROPS_MAX || !strchr(v, '='))
					return cli_usage(&c, "--property=KEY=VALUE, at most %d",
							 CLI_PROPS_MAX);
				c.props[c.nprops++] = v;
				continue;
			}
			if (c.nopt == CLI_OPTS_MAX)
				return cli_usage(&c, "too many options");
			c.opt_k[c.nopt] = a + 2;
			c.opt_v[c.nopt++] = v;
			continue;
		}
		if (c.npos == CLI_POS_MAX)
			return cli_usage(&c, "too many arguments");
		c.pos[c.npos++] = a;
	}
	c.namesrv = cli_opt(&c, "namesrv");
	if (c.namesrv == NULL || !*c.namesrv)
		c.namesrv = env && *env ? env : "127.0.0.1:9876";
	c.json = cli_flag(&c, "json");
	if (cli_opt_i64(&c, "timeout-ms", &t) != 0 || t < 1 || t > 600000)
		return cli_usage(&c, "--timeout-ms must be 1..600000");
	c.timeout_ms = (uint32_t)t;
	c.ak = cli_opt(&c, "access-key");
	c.sk = cli_opt(&c, "secret-key");
	if (!c.ak || !*c.ak)
		c.ak = getenv("SPROCKET_ACCESS_KEY");
	if (!c.sk || !*c.sk)
		c.sk = getenv("SPROCKET_SECRET_KEY");
	if (c.ak && *c.ak && (!c.sk || !*c.sk))
		return cli_usage(&c, "--access-key needs --secret-key (or SPROCKET_SECRET_KEY)");
	if (!c.ak || !*c.ak)
		c.ak = c.sk = NULL;
	return cmd->run(&c);
}
