// SPDX-License-Identifier: Apache-2.0
/*
 * bk_group_ctl.c - subscription groups (RocketMQ's SubscriptionGroupConfig,
 * docs/admin.md): the control thread's table, config/subscriptionGroup.json,
 * UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP,
 * GET_ALL_SUBSCRIPTIONGROUP_CONFIG and a slave's copy of its master's.
 *
 * What each setting does here: consumeEnable=false makes every PULL of the
 * group answer NO_PERMISSION (on the cores, so the dataplane too);
 * consumeBroadcastEnable=false refuses pulls of a group whose members
 * heartbeat BROADCASTING; retryMaxTimes is the SEND_BACK limit when the
 * request names none; retryQueueNums sizes the group's retry topic when its
 * first heartbeat creates it; notifyConsumerIdsChangedEnable=false stops the
 * NOTIFY_CONSUMER_IDS_CHANGED pushes. brokerId, whichBrokerWhenConsumeSlowly
 * and consumeFromMinEnable are kept and served (RocketMQ reads them only
 * with slaveReadEnable, which sprocket does not have).
 *
 * The cores see the table the control thread publishes with RCU
 * (struct bk_gtab: name, consumeEnable, retryMaxTimes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <urcu/urcu-qsbr.h>

#include "bk_ctl.h"
#include "bk_priv.h"
#include "remoting/bk_rmt.h"
#include "common/clock.h"
#include "common/jbuf.h"
#include "common/log.h"
#include "store/io.h"

#define GROUPS_FILE "subscriptionGroup.json"
#define GROUPS_FILE_MAX (64u << 20)

void
bk_subgroup_default(struct bk_subgroup *g, const char *name)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->consume_enable = true;
	g->consume_broadcast = true;
	g->consume_from_min = true;
	g->notify_ids_changed = true;
	g->retry_max = 16;
	g->retry_queues = 1;
	g->slow_broker = 1;
}

static bool
jbool(json_object *o, const char *k, bool def)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v))
		return def;
	if (json_object_is_type(v, json_type_string))
		return strcmp(json_object_get_string(v), "true") == 0;
	return json_object_get_boolean(v);
}

static int64_t
jint(json_object *o, const char *k, int64_t def)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v))
		return def;
	return json_object_get_int64(v);
}

/* One SubscriptionGroupConfig object. Return: 0, -EINVAL with the reason in @why. */
static int
group_parse(json_object *o, struct bk_subgroup *g, char *why, size_t why_len)
{
	json_object *n;
	const char *name;

	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "groupName", &n) ||
	    !json_object_is_type(n, json_type_string)) {
		snprintf(why, why_len, "a SubscriptionGroupConfig with a groupName is expected");
		return -EINVAL;
	}
	name = json_object_get_string(n);
	if (!name[0] || strlen(name) > META_GROUP_MAX || strchr(name, '@')) {
		snprintf(why, why_len, "groupName must be 1..%d bytes without '@'", META_GROUP_MAX);
		return -EINVAL;
	}
	bk_subgroup_default(g, name);
	g->broker_id = jint(o, "brokerId", 0);
	g->consume_broadcast = jbool(o, "consumeBroadcastEnable", true);
	g->consume_enable = jbool(o, "consumeEnable", true);
	g->consume_from_min = jbool(o, "consumeFromMinEnable", true);
	g->notify_ids_changed = jbool(o, "notifyConsumerIdsChangedEnable", true);
	g->retry_max = jint(o, "retryMaxTimes", 16);
	g->retry_queues = jint(o, "retryQueueNums", 1);
	g->slow_broker = jint(o, "whichBrokerWhenConsumeSlowly", 1);
	if (g->retry_max < 0 || g->retry_max > 1000 || g->retry_queues < 1 ||
	    g->retry_queues > 1024) {
		snprintf(why, why_len, "retryMaxTimes must be 0..1000 and retryQueueNums 1..1024");
		return -EINVAL;
	}
	return 0;
}

static void
group_json(struct jbuf *b, const struct bk_subgroup *g)
{
	/* fastjson's order: alphabetical */
	jbuf_lit(b, "{\"brokerId\":");
	jbuf_i64(b, g->broker_id);
	jbuf_lit(b, ",\"consumeBroadcastEnable\":");
	jbuf_bool(b, g->consume_broadcast);
	jbuf_lit(b, ",\"consumeEnable\":");
	jbuf_bool(b, g->consume_enable);
	jbuf_lit(b, ",\"consumeFromMinEnable\":");
	jbuf_bool(b, g->consume_from_min);
	jbuf_lit(b, ",\"groupName\":");
	jbuf_cstr(b, g->name);
	jbuf_lit(b, ",\"notifyConsumerIdsChangedEnable\":");
	jbuf_bool(b, g->notify_ids_changed);
	jbuf_lit(b, ",\"retryMaxTimes\":");
	jbuf_i64(b, g->retry_max);
	jbuf_lit(b, ",\"retryQueueNums\":");
	jbuf_i64(b, g->retry_queues);
	jbuf_lit(b, ",\"whichBrokerWhenConsumeSlowly\":");
	jbuf_i64(b, g->slow_broker);
	jbuf_lit(b, "}");
}

int
bk_ctl_groups_json(struct bk_ctl *x, char **out, size_t *len)
{
	struct jbuf b;

	jbuf_init(&b);
	jbuf_lit(&b, "{\"dataVersion\":{\"counter\":");
	jbuf_i64(&b, (int64_t)x->gdv_counter);
	jbuf_lit(&b, ",\"timestamp\":");
	jbuf_i64(&b, x->gdv_ts);
	jbuf_lit(&b, "},\"subscriptionGroupTable\":{");
	for (size_t i = 0; i < x->ngroups; i++) {
		jbuf_cstr(&b, x->groups[i].name);
		jbuf_lit(&b, ":");
		group_json(&b, &x->groups[i]);
		jbuf_lit(&b, ",");
	}
	jbuf_uncomma(&b);
	jbuf_lit(&b, "}}");
	if (b.err) {
		int err = b.err;

		jbuf_free(&b);
		return err;
	}
	jbuf_raw(&b, "", 1); /* NUL, not counted */
	*out = (char *)jbuf_take(&b, len);
	(*len)--;
	return 0;
}

/* Cores see consumeEnable and retryMaxTimes of every configured group. */
static int
publish(struct bk_ctl *x)
{
	struct bk_group *g = calloc(x->ngroups ? x->ngroups : 1, sizeof(*g));
	struct bk_gtab *nt = NULL, *old = x->bk.gtab;
	size_t n = 0;
	int err;

	if (g == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < x->ngroups; i++) {
		/* what the cores do anyway needs no entry */
		if (x->groups[i].consume_enable &&
		    x->groups[i].retry_max == (int64_t)x->bk.conf.max_reconsume)
			continue;
		g[n].name_len = (uint32_t)strlen(x->groups[i].name);
		memcpy(g[n].name, x->groups[i].name, g[n].name_len + 1);
		g[n].consume_enable = x->groups[i].consume_enable;
		g[n].retry_max = (uint32_t)x->groups[i].retry_max;
		n++;
	}
	err = n ? bk_gtab_build(g, n, &nt) : 0;
	free(g);
	if (err)
		return err;
	/* pairs with rcu_dereference() in bk_group_find() */
	rcu_assign_pointer(x->bk.gtab, nt);
	if (x->cores_running)
		urcu_qsbr_synchronize_rcu();
	bk_gtab_free(old);
	return 0;
}

static int
save(struct bk_ctl *x)
{
	x->groups_dirty = false;
	char *json;
	size_t len;
	int err = bk_ctl_groups_json(x, &json, &len);

	if (err)
		return err;
	err = store_io_write_atomic(&store_io_posix, x->groups_path, json, len);
	free(json);
	if (err)
		log_err(BK_TAG, "saving %s: %s", x->groups_path, strerror(-err));
	return err;
}

static struct bk_subgroup *
find(struct bk_ctl *x, const char *name)
{
	for (size_t i = 0; i < x->ngroups; i++)
		if (strcmp(x->groups[i].name, name) == 0)
			return &x->groups[i];
	return NULL;
}

const struct bk_subgroup *
bk_ctl_group_get(struct bk_ctl *x, const char *name)
{
	return find(x, name);
}

/* Replaces or adds @g in memory. Return: 0, -ENOMEM. */
static int
put_mem(struct bk_ctl *x, const struct bk_subgroup *g)
{
	struct bk_subgroup *e = find(x, g->name);

	if (e == NULL) {
		struct bk_subgroup *n = realloc(x->groups, (x->ngroups + 1) * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		x->groups = n;
		e = &x->groups[x->ngroups++];
	}
	*e = *g;
	x->gdv_counter++;
	x->gdv_ts = clk_wall_ms();
	return 0;
}

int
bk_ctl_group_put(struct bk_ctl *x, const struct bk_subgroup *g)
{
	int err = put_mem(x, g);

	if (err == 0)
		err = publish(x);
	if (err == 0)
		err = save(x);
	return err;
}

int
bk_ctl_group_put_json(struct bk_ctl *x, const char *body, size_t len, char *why, size_t why_len)
{
	struct json_tokener *tok = json_tokener_new();
	json_object *o;
	struct bk_subgroup g;
	int err;

	if (tok == NULL)
		return -ENOMEM;
	o = json_tokener_parse_ex(tok, body, (int)len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success) {
		json_tokener_free(tok);
		json_object_put(o);
		snprintf(why, why_len, "the body is not a SubscriptionGroupConfig (JSON)");
		return -EINVAL;
	}
	json_tokener_free(tok);
	err = group_parse(o, &g, why, why_len);
	json_object_put(o);
	if (err)
		return err;
	err = bk_ctl_group_put(x, &g);
	if (err)
		snprintf(why, why_len, "saving the group failed: %s", strerror(-err));
	else
		log_info(BK_TAG,
			 "subscription group %s: consumeEnable %d, consumeBroadcastEnable %d, "
			 "retryMaxTimes %lld, retryQueueNums %lld",
			 g.name, g.consume_enable, g.consume_broadcast, (long long)g.retry_max,
			 (long long)g.retry_queues);
	return err;
}

int
bk_ctl_group_delete(struct bk_ctl *x, const char *name)
{
	struct bk_subgroup *e = find(x, name);
	int err;

	if (e == NULL)
		return -ENOENT;
	*e = x->groups[--x->ngroups];
	x->gdv_counter++;
	x->gdv_ts = clk_wall_ms();
	err = publish(x);
	if (err == 0)
		err = save(x);
	return err;
}

void
bk_ctl_group_seen(struct bk_ctl *x, const char *name)
{
	struct bk_subgroup g;

	if (find(x, name) != NULL || x->bk.conf.role == BK_ROLE_SLAVE)
		return; /* a slave has its master's groups (bk_group_sync_apply()) */
	/*
	 * autoCreateSubscriptionGroup (RocketMQ's default): the group's first
	 * heartbeat. Defaults change nothing the cores apply, so no RCU grace
	 * period here, and the file is written by bk_group_tick() (a burst of new
	 * groups is one write, off the request that made them).
	 */
	bk_subgroup_default(&g, name);
	g.retry_max = x->bk.conf.max_reconsume; /* the broker's maxReconsumeTimes */
	if (put_mem(x, &g) == 0) {
		x->groups_dirty = true;
		log_info(BK_TAG, "subscription group %s created (defaults)", name);
	}
}

static bool
group_eq(const struct bk_subgroup *a, const struct bk_subgroup *b)
{
	return strcmp(a->name, b->name) == 0 && a->broker_id == b->broker_id &&
	       a->consume_broadcast == b->consume_broadcast &&
	       a->consume_enable == b->consume_enable &&
	       a->consume_from_min == b->consume_from_min &&
	       a->notify_ids_changed == b->notify_ids_changed && a->retry_max == b->retry_max &&
	       a->retry_queues == b->retry_queues && a->slow_broker == b->slow_broker;
}

/*
 * Replaces the table with the subscriptionGroupTable of @json; with @gone the
 * offsets of groups it no longer has are dropped (a slave following its
 * master). Return: 0, -EINVAL, -ENOMEM.
 */
static int
table_from_json(struct bk_ctl *x, const char *json, size_t len, bool *changed, bool gone)
{
	json_object *o = NULL, *tab, *dv;
	struct json_tokener *tok = json_tokener_new();
	struct bk_subgroup *gs = NULL;
	size_t n = 0;
	int err = 0;

	*changed = false;
	if (tok == NULL)
		return -ENOMEM;
	o = json_tokener_parse_ex(tok, json, (int)len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_object_get_ex(o, "subscriptionGroupTable", &tab) ||
	    !json_object_is_type(tab, json_type_object)) {
		err = -EINVAL;
		goto out;
	}
	gs = calloc(json_object_object_length(tab) + 1, sizeof(*gs));
	if (gs == NULL) {
		err = -ENOMEM;
		goto out;
	}
	json_object_object_foreach(tab, k, v)
	{
		char why[128];

		(void)k;
		if (group_parse(v, &gs[n], why, sizeof(why)) == 0)
			n++;
		else
			log_warn_ratelimited(BK_TAG, "subscription group %.64s skipped: %s", k,
					     why);
	}
	*changed = n != x->ngroups;
	for (size_t i = 0; i < n && !*changed; i++)
		*changed = !group_eq(&gs[i], &x->groups[i]);
	/* groups the master deleted: their offsets go too (a slave's sync only raises them) */
	for (size_t i = 0; gone && i < x->ngroups; i++) {
		bool kept = false;

		for (size_t m = 0; m < n && !kept; m++)
			kept = strcmp(gs[m].name, x->groups[i].name) == 0;
		if (!kept && x->rmt && bk_rmt_offsets_drop(x->rmt, 'G', x->groups[i].name) != 0)
			log_warn(BK_TAG, "group %s: some consumer offsets kept (a core was busy)",
				 x->groups[i].name);
	}
	free(x->groups);
	x->groups = gs;
	x->ngroups = n;
	gs = NULL;
	if (json_object_object_get_ex(o, "dataVersion", &dv)) {
		x->gdv_counter = (uint64_t)jint(dv, "counter", 0);
		x->gdv_ts = jint(dv, "timestamp", 0);
	}
out:
	free(gs);
	json_object_put(o);
	json_tokener_free(tok);
	return err;
}

int
bk_group_setup(struct bk_ctl *x)
{
	char *json = NULL;
	size_t len = 0;
	bool changed;
	int err;

	const char *slash = strrchr(x->topics_path, '/');

	/* beside topics.json */
	snprintf(x->groups_path, sizeof(x->groups_path), "%.*s/" GROUPS_FILE,
		 slash ? (int)(slash - x->topics_path) : 1, slash ? x->topics_path : ".");
	err = store_io_read_file(&store_io_posix, x->groups_path, GROUPS_FILE_MAX, &json, &len);
	if (err == -ENOENT)
		return publish(x);
	if (err) {
		log_err(BK_TAG, "%s: %s", x->groups_path, strerror(-err));
		return err;
	}
	err = table_from_json(x, json, len, &changed, false);
	free(json);
	if (err) {
		log_err(BK_TAG, "%s: not a subscription group table", x->groups_path);
		return err;
	}
	log_info(BK_TAG, "%zu subscription groups loaded from %s", x->ngroups, x->groups_path);
	return publish(x);
}

void
bk_group_sync_apply(struct bk_ctl *x, const char *json, size_t len)
{
	bool changed = false;

	if (table_from_json(x, json, len, &changed, true) != 0) {
		log_warn_ratelimited(BK_TAG, "the master's subscription groups do not parse");
		return;
	}
	if (!changed)
		return;
	if (publish(x) == 0 && save(x) == 0)
		log_info(BK_TAG, "%zu subscription groups as on the master", x->ngroups);
}

void
bk_group_tick(struct bk_ctl *x, uint64_t now_ms)
{
	if (!x->groups_dirty || now_ms < x->groups_save_ms)
		return;
	x->groups_save_ms = now_ms + 1000;
	if (save(x) == 0)
		x->groups_dirty = false;
}

void
bk_group_fini(struct bk_ctl *x)
{
	if (x->groups_dirty)
		(void)save(x);
	bk_gtab_free(x->bk.gtab);
	x->bk.gtab = NULL;
	free(x->groups);
	x->groups = NULL;
	x->ngroups = 0;
}
