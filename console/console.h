/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console.h - the web console's files (console/ HTML, JS and CSS), compiled
 * into the daemons by console/embed.py, so a console needs no files beside
 * the binary and no network (docs/observability.md).
 */
#ifndef SP_CONSOLE_H
#define SP_CONSOLE_H

#include <stddef.h>
#include <string.h>

struct console_file {
	const char *name;  /* "broker.html", "console.js" ... */
	const char *ctype; /* its Content-Type */
	const unsigned char *data;
	size_t len;
};

/* Ends with a row whose name is NULL. */
extern const struct console_file console_files[];

/* The file @name, or NULL. */
static inline const struct console_file *
console_find(const char *name)
{
	for (const struct console_file *f = console_files; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

/*
 * The console's file for the URL @path: "/" is @page (broker.html,
 * namesrv.html), "/console.js" and "/console.css" the shared ones; NULL for
 * any other path.
 */
static inline const struct console_file *
console_for_path(const char *path, const char *page)
{
	if (strcmp(path, "/") == 0)
		return console_find(page);
	if (strcmp(path, "/console.js") == 0 || strcmp(path, "/console.css") == 0)
		return console_find(path + 1);
	return NULL;
}

#endif /* SP_CONSOLE_H */
