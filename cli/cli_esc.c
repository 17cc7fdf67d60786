// SPDX-License-Identifier: Apache-2.0
/*
 * cli_esc.c - what `sprocket` prints cannot drive a terminal.
 *
 * Group names, client ids, topics, remarks and bodies come from brokers and
 * NameServers, and through them from any client: a name with ESC or OSC
 * sequences printed raw can retitle, recolour or (with some terminals)
 * write to the user's terminal. As the daemons' logs do (common/log.c),
 * every control character but newline and tab becomes "\xNN" text; DEL and
 * a C1 control written in UTF-8 (U+0080..U+009F: CSI is U+009B), which json-c
 * leaves raw inside a string, become "\u007f" and "\u009b", valid JSON
 * escapes and plain text too, so --json output stays JSON.
 * Done once, on stdout and stderr themselves (a glibc cookie stream in front
 * of each), so no print site can forget; table cells escape newline and tab
 * too (cli_esc_dup()), so a name cannot forge a row. JSON output (--json) has
 * its C0 controls escaped by json-c already.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

struct esc {
	int fd;
	int held; /* a 0xC2 lead byte kept from the last write, or -1 */
};

static size_t
put_hex(char *o, unsigned char ch)
{
	static const char hx[] = "0123456789abcdef";

	o[0] = '\\';
	o[1] = 'x';
	o[2] = hx[ch >> 4];
	o[3] = hx[ch & 15];
	return 4;
}

/* "\u00NN" for DEL and the C1 controls. */
static size_t
put_u(char *o, unsigned char ch)
{
	static const char hx[] = "0123456789abcdef";

	memcpy(o, "\\u00", 4);
	o[4] = hx[ch >> 4];
	o[5] = hx[ch & 15];
	return 6;
}

static bool
plain(unsigned char ch, bool nl_ok)
{
	if (ch == '\n' || ch == '\t')
		return nl_ok;
	return ch >= 0x20 && ch != 0x7f;
}

/* Escape @n bytes of @s into @o (room for 8 per byte); @held carries a 0xC2 across calls. */
static size_t
esc_bytes(char *o, const unsigned char *s, size_t n, int *held, bool nl_ok)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = s[i];

		if (*held >= 0) {
			if (ch >= 0x80 && ch <= 0x9f) {
				k += put_u(o + k, ch);
				*held = -1;
				continue;
			}
			o[k++] = (char)0xc2;
			*held = -1;
		}
		if (ch == 0xc2) {
			*held = ch;
			continue;
		}
		if (plain(ch, nl_ok))
			o[k++] = (char)ch;
		else if (ch == 0x7f)
			k += put_u(o + k, ch);
		else
			k += put_hex(o + k, ch);
	}
	return k;
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static ssize_t
esc_write(void *cookie, const char *buf, size_t n)
{
	struct esc *e = cookie;
	char out[4096 * 8];
	size_t done = 0;

	while (done < n) {
		size_t chunk = n - done < 4096 ? n - done : 4096;
		size_t k = esc_bytes(out, (const unsigned char *)buf + done, chunk, &e->held, true);

		if (write_all(e->fd, out, k) != 0)
			return done ? (ssize_t)done : -1;
		done += chunk;
	}
	return (ssize_t)n;
}

static int
esc_close(void *cookie)
{
	struct esc *e = cookie;
	char c2 = (char)0xc2;
	int rc = e->held >= 0 ? write_all(e->fd, &c2, 1) : 0;

	free(e);
	return rc;
}

static FILE *
wrap(int fd, const char *mode, int buffering)
{
	struct esc *e = malloc(sizeof(*e));
	cookie_io_functions_t io = {.write = esc_write, .close = esc_close};
	FILE *f;

	if (e == NULL)
		return NULL;
	e->fd = fd;
	e->held = -1;
	f = fopencookie(e, mode, io);
	if (f == NULL) {
		free(e);
		return NULL;
	}
	setvbuf(f, NULL, buffering, 0);
	return f;
}

static FILE *real_out, *real_err;

/* At exit: flush and free the escaping streams, and give the real ones back. */
static void
unwrap(void)
{
	FILE *o = stdout, *e = stderr;

	if (real_out) {
		stdout = real_out;
		fclose(o);
	}
	if (real_err) {
		stderr = real_err;
		fclose(e);
	}
	real_out = real_err = NULL;
}

void
cli_esc_stdio(void)
{
	FILE *o = wrap(STDOUT_FILENO, "w", isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
	FILE *e = wrap(STDERR_FILENO, "w", _IONBF);

	/* the standard streams are unused so far: nothing buffered is lost */
	if (o) {
		real_out = stdout;
		stdout = o;
	}
	if (e) {
		real_err = stderr;
		stderr = e;
	}
	if (o || e)
		atexit(unwrap);
}

char *
cli_esc_dup(const char *s)
{
	size_t n = strlen(s);
	char *o = malloc(n * 8 + 1);
	int held = -1;
	size_t k;

	if (o == NULL)
		return NULL;
	k = esc_bytes(o, (const unsigned char *)s, n, &held, false);
	if (held >= 0)
		o[k++] = (char)0xc2;
	o[k] = '\0';
	return o;
}
