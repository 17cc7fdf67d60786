// SPDX-License-Identifier: Apache-2.0
/*
 * test_jbuf.c - the JSON writer: strings escaped, fastjson's doubles (the
 * shortest form that reads back, always with a fraction), keys, and a
 * trailing comma dropped.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/jbuf.h"
#include "harness.h"

static char *
text(struct jbuf *b)
{
	size_t len;
	uint8_t *p;

	jbuf_raw(b, "", 1);
	p = jbuf_take(b, &len);
	return (char *)p;
}

static void
expect_double(double v, const char *want)
{
	struct jbuf b;
	char *s;

	jbuf_init(&b);
	jbuf_double(&b, v);
	s = text(&b);
	if (strcmp(s, want) != 0)
		T_FAIL("%.17g written as %s, expected %s", v, s, want);
	free(s);
}

static void
test_doubles(void)
{
	expect_double(0.0, "0.0");
	expect_double(9.95, "9.95");
	expect_double(6.58, "6.58");
	expect_double(9.966666666666667, "9.966666666666667");
	expect_double(1.0 / 3.0, "0.3333333333333333");
	expect_double(40.0, "40.0");
	expect_double(-2.5, "-2.5");
	expect_double(1e20, "1.0E20");
	expect_double(1.5e-5, "1.5E-5");
	expect_double(0.001, "0.001");
	expect_double(NAN, "null");
	expect_double(INFINITY, "null");
}

static void
test_object(void)
{
	struct jbuf b;
	char *s;

	jbuf_init(&b);
	jbuf_lit(&b, "{");
	jbuf_key(&b, "a");
	jbuf_str(&b, "q\"\\\n", 4);
	jbuf_lit(&b, ",");
	jbuf_key(&b, "b");
	jbuf_bool(&b, true);
	jbuf_lit(&b, ",");
	jbuf_uncomma(&b);
	jbuf_lit(&b, "}");
	s = text(&b);
	T_ASSERT_STREQ(s, "{\"a\":\"q\\\"\\\\\\u000a\",\"b\":true}");
	free(s);
}

T_MAIN(T_CASE(test_doubles), T_CASE(test_object))
