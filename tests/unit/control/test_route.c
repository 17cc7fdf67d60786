// SPDX-License-Identifier: Apache-2.0
/*
 * test_route.c - the NameServer route table: RocketMQ's registration
 * semantics, the exact JSON clients parse, publish/no-publish, and readers
 * racing a writer that republishes (run it under ASan to see reclamation).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <urcu/urcu-memb.h>

#include "control/route.h"
#include "harness.h"

static struct route_tset *
topics(const char *prefix, int n, int perm)
{
	struct route_tset *ts = NULL;

	T_ASSERT_EQ(route_tset_create(0, &ts), 0);
	for (int i = 0; i < n; i++) {
		char name[32];
		struct route_topic_in t = {.read_q = 4, .write_q = 4, .perm = perm};

		snprintf(name, sizeof(name), "%s%d", prefix, i);
		t.name = name;
		t.name_len = strlen(name);
		T_ASSERT_EQ(route_tset_add(ts, &t), 0);
	}
	return ts;
}

static int
reg(struct route_db *db, const char *bname, const char *addr, int64_t id, int64_t counter,
    struct route_tset *ts, uint64_t conn, uint64_t now)
{
	struct route_reg r = {.cluster = "DefaultCluster",
			      .bname = bname,
			      .addr = addr,
			      .ha_addr = "10.0.0.5:10912",
			      .id = id,
			      .dv = {.timestamp = 1, .counter = counter},
			      .conn = conn,
			      .topics = ts};
	struct route_reg_out out;

	return route_db_register(db, &r, now, &out);
}

/* @out's @len bytes as a NUL-terminated string (frees @out; the caller frees the string). */
static char *
json_str(uint8_t *out, size_t len)
{
	char *s = malloc(len + 1);

	T_ASSERT(s != NULL);
	memcpy(s, out, len);
	s[len] = '\0';
	free(out);
	return s;
}

/* Route JSON for @topic as a NUL-terminated string (caller frees), NULL on miss. */
static char *
route(struct route_db *db, const char *topic)
{
	uint8_t *out = NULL;
	size_t len = 0;
	int rc = route_json_topic(route_db_current(db), topic, strlen(topic), NULL, &out, &len);

	if (rc == -ENOENT)
		return NULL;
	T_ASSERT_EQ(rc, 0);
	return json_str(out, len);
}

static void
test_route_json_exact(void)
{
	struct route_db *db = NULL;
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, topics("T", 2, 6), 1, 0), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.6:10911", 1, 1, NULL, 2, 0), 0);
	s = route(db, "T1");
	T_ASSERT_STREQ(s, "{\"brokerDatas\":[{\"brokerAddrs\":{\"0\":\"10.0.0.5:10911\",\"1\":"
			  "\"10.0.0.6:10911\"},\"brokerName\":\"broker-a\",\"cluster\":"
			  "\"DefaultCluster\"}],\"filterServerTable\":{},\"queueDatas\":[{"
			  "\"brokerName\":\"broker-a\",\"perm\":6,\"readQueueNums\":4,"
			  "\"topicSynFlag\":0,\"topicSysFlag\":0,\"writeQueueNums\":4}]}");
	free(s);
	T_ASSERT(route(db, "T2") == NULL);
	route_db_destroy(db);
}

static void
test_heartbeat_publishes_nothing(void)
{
	struct route_db *db = NULL;
	const struct route_table *t;
	struct route_dv dv = {.timestamp = 1, .counter = 1};

	T_ASSERT_EQ(route_db_create(&db), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, topics("T", 3, 6), 1, 0), 0);
	t = route_db_current(db);
	T_ASSERT(!route_db_wants_topics(db, "10.0.0.5:10911", 0, &dv));
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, NULL, 1, 10), 0);
	T_ASSERT(route_db_current(db) == t);
	dv.counter = 2;
	T_ASSERT(route_db_wants_topics(db, "10.0.0.5:10911", 0, &dv));
	T_ASSERT(!route_db_wants_topics(db, "10.0.0.6:10911", 1, &dv)); /* slaves never */
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 2, topics("U", 1, 6), 1, 20), 0);
	T_ASSERT(route_db_current(db) != t);
	T_ASSERT(route(db, "T0") == NULL);
	free(route(db, "U0"));
	route_db_destroy(db);
}

static void
test_liveness(void)
{
	struct route_db *db = NULL;
	uint32_t wiped = 0;
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, topics("A", 1, 6), 7, 1000), 0);
	T_ASSERT_EQ(reg(db, "broker-b", "10.0.0.7:10911", 0, 1, topics("B", 1, 6), 8, 5000), 0);
	T_ASSERT_EQ(route_db_live_count(db), 2);
	/* Silence: only the address older than the expiry goes. */
	T_ASSERT_EQ(route_db_expire(db, 5500, 1000), 1);
	T_ASSERT(route(db, "A0") == NULL);
	free(route(db, "B0"));
	/* Wipe, then the connection closes. */
	T_ASSERT_EQ(route_db_write_perm(db, "broker-b", false, &wiped), 0);
	T_ASSERT_EQ(wiped, 1);
	s = route(db, "B0");
	T_ASSERT(strstr(s, "\"perm\":4") != NULL);
	free(s);
	/* and back (ADD_WRITE_PERM_OF_BROKER) */
	T_ASSERT_EQ(route_db_write_perm(db, "broker-b", true, &wiped), 0);
	T_ASSERT_EQ(wiped, 1);
	s = route(db, "B0");
	T_ASSERT(strstr(s, "\"perm\":6") != NULL);
	free(s);
	T_ASSERT_EQ(route_db_write_perm(db, "broker-b", false, &wiped), 0);
	T_ASSERT_EQ(route_db_write_perm(db, "nope", false, &wiped), -ENOENT);
	T_ASSERT_EQ(route_db_write_perm(db, "nope", true, &wiped), -ENOENT);
	T_ASSERT_EQ(route_db_conn_closed(db, 9), 0);
	T_ASSERT_EQ(route_db_conn_closed(db, 8), 1);
	T_ASSERT(route(db, "B0") == NULL);
	T_ASSERT_EQ(route_db_live_count(db), 0);
	T_ASSERT_EQ(route_db_unregister(db, "broker-b", "10.0.0.7:10911", 0), -ENOENT);
	route_db_destroy(db);
}

static void
test_address_moves_and_limits(void)
{
	struct route_db *db = NULL;
	char addr[32];
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	/* A slave becomes master on the same address: its id 1 entry goes. */
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.6:10911", 1, 1, NULL, 1, 0), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.6:10911", 0, 1, topics("T", 1, 6), 1, 0), 0);
	s = route(db, "T0");
	T_ASSERT(strstr(s, "{\"0\":\"10.0.0.6:10911\"}") != NULL);
	free(s);
	T_ASSERT_EQ(route_db_live_count(db), 1);
	/* An address moving to another brokerName leaves the first one. */
	T_ASSERT_EQ(reg(db, "broker-b", "10.0.0.6:10911", 0, 1, topics("B", 1, 6), 1, 0), 0);
	T_ASSERT(route(db, "T0") == NULL);
	/* At most ROUTE_ADDRS_MAX addresses per brokerName, nothing changes on refusal. */
	for (int i = 1; i < ROUTE_ADDRS_MAX; i++) {
		snprintf(addr, sizeof(addr), "10.0.1.%d:10911", i);
		T_ASSERT_EQ(reg(db, "broker-b", addr, i, 1, NULL, 1, 0), 0);
	}
	T_ASSERT_EQ(reg(db, "broker-b", "10.0.2.1:10911", 99, 1, NULL, 1, 0), -ENOSPC);
	T_ASSERT_EQ(route_db_live_count(db), ROUTE_ADDRS_MAX);
	T_ASSERT_EQ(route_db_expire(db, 10, 1), ROUTE_ADDRS_MAX);
	T_ASSERT(route(db, "B0") == NULL);
	route_db_destroy(db);
}

static void
test_topic_names(void)
{
	struct route_tset *ts = NULL;
	struct route_topic_in t = {.read_q = 1, .write_q = 1, .perm = 6};
	static const char *const bad[] = {"", "a b", "a.b", "t\xc3\xa9", "x/y"};
	char longname[ROUTE_TOPIC_MAX + 2];

	T_ASSERT(route_topic_name_ok("%RETRY%GID_x|y-1", 16));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		T_ASSERT(!route_topic_name_ok(bad[i], strlen(bad[i])));
	memset(longname, 'a', sizeof(longname));
	T_ASSERT(route_topic_name_ok(longname, ROUTE_TOPIC_MAX));
	T_ASSERT(!route_topic_name_ok(longname, ROUTE_TOPIC_MAX + 1));
	T_ASSERT_EQ(route_tset_create(0, &ts), 0);
	t.name = "T";
	t.name_len = 1;
	t.perm = 16;
	T_ASSERT_EQ(route_tset_add(ts, &t), -EINVAL);
	t.perm = 6;
	t.read_q = ROUTE_QUEUES_MAX + 1;
	T_ASSERT_EQ(route_tset_add(ts, &t), -EINVAL);
	t.read_q = 2;
	T_ASSERT_EQ(route_tset_add(ts, &t), 0);
	T_ASSERT_EQ(route_tset_add(ts, &t), 0); /* a duplicate replaces */
	T_ASSERT_EQ(route_tset_count(ts), 2);
	route_tset_put(ts);
}

/* Readers look up without locks while the writer republishes. */
static struct route_db *race_db;
static atomic_bool race_stop;
static atomic_ulong race_hits;

static void *
race_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	while (!atomic_load(&race_stop)) {
		uint8_t *out = NULL;
		size_t len;
		int rc;

		urcu_memb_read_lock();
		rc = route_json_topic(route_db_current(race_db), "T7", 2, NULL, &out, &len);
		urcu_memb_read_unlock();
		if (rc == 0) {
			/* Whatever snapshot it saw, the answer is whole. */
			T_ASSERT(len > 2 && out[0] == '{' && out[len - 1] == '}');
			atomic_fetch_add(&race_hits, 1);
		}
		free(out);
	}
	urcu_memb_unregister_thread();
	return NULL;
}

static void
test_readers_race_writer(void)
{
	pthread_t th[2];

	T_ASSERT_EQ(route_db_create(&race_db), 0);
	for (int i = 0; i < 2; i++)
		T_ASSERT_EQ(pthread_create(&th[i], NULL, race_reader, NULL), 0);
	/* At least 300 publishes, and on until the readers have overlapped them. */
	for (int i = 0; i < 300 || (atomic_load(&race_hits) < 1000 && i < 200000); i++) {
		T_ASSERT_EQ(reg(race_db, "broker-a", "10.0.0.5:10911", 0, i + 1, topics("T", 50, 6),
				1, (uint64_t)i),
			    0);
		T_ASSERT_EQ(reg(race_db, "broker-b", "10.0.0.7:10911", 0, i + 1, topics("T", 8, 6),
				2, (uint64_t)i),
			    0);
		if (i % 3 == 0)
			T_ASSERT_EQ(route_db_conn_closed(race_db, 2), 1);
	}
	atomic_store(&race_stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	T_ASSERT(atomic_load(&race_hits) > 0);
	route_db_destroy(race_db);
}

/* Two live masters of one group: the second is refused until the first is gone. */
static void
test_second_master_refused(void)
{
	struct route_db *db = NULL;
	struct route_reg r = {.cluster = "DefaultCluster",
			      .bname = "broker-a",
			      .addr = "10.0.0.9:10911",
			      .ha_addr = "",
			      .id = 0,
			      .conn = 9};
	struct route_reg_out out;
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, topics("T", 1, 6), 1, 0), 0);
	T_ASSERT_EQ(route_db_register(db, &r, 10, &out), -EEXIST);
	T_ASSERT_STREQ(out.holder, "10.0.0.5:10911");
	s = route(db, "T0");
	T_ASSERT(strstr(s, "10.0.0.5:10911") != NULL && strstr(s, "10.0.0.9") == NULL);
	free(s);
	/* a slave id is free, and the holder's own heartbeat goes on */
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.9:10911", 1, 1, NULL, 9, 20), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, NULL, 1, 30), 0);
	/* the holder's connection closes: the id is free for a new process */
	T_ASSERT_EQ(route_db_conn_closed(db, 1), 1);
	r.addr = "10.0.0.7:10911";
	r.conn = 7;
	T_ASSERT_EQ(route_db_register(db, &r, 40, &out), 0);
	route_db_destroy(db);
}

/*
 * Failover: a master of a later epoch replaces a live one of an earlier
 * epoch (which then cannot come back under id 0); equal or earlier epochs
 * are refused as before.
 */
static void
test_later_epoch_replaces(void)
{
	struct route_db *db = NULL;
	struct route_reg a = {.cluster = "DefaultCluster",
			      .bname = "broker-a",
			      .addr = "10.0.0.5:10911",
			      .ha_addr = "",
			      .id = 0,
			      .conn = 1,
			      .epoch = 3};
	struct route_reg b = a;
	struct route_reg_out out;
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	a.topics = topics("T", 1, 6);
	T_ASSERT_EQ(route_db_register(db, &a, 10, &out), 0);
	b.addr = "10.0.0.9:10911";
	b.conn = 2;
	b.epoch = 3;
	T_ASSERT_EQ(route_db_register(db, &b, 20, &out), -EEXIST);
	b.epoch = 4;
	T_ASSERT_EQ(route_db_register(db, &b, 30, &out), 0);
	T_ASSERT_STREQ(out.replaced, "10.0.0.5:10911");
	T_ASSERT_EQ_U64(out.replaced_epoch, 3);
	s = route(db, "T0");
	T_ASSERT(strstr(s, "10.0.0.9:10911") != NULL && strstr(s, "10.0.0.5") == NULL);
	free(s);
	/* the deposed master's next heartbeat under id 0 is refused */
	a.topics = NULL;
	T_ASSERT_EQ(route_db_register(db, &a, 40, &out), -EEXIST);
	/* as a slave it is welcome */
	a.id = 1;
	a.epoch = 0;
	T_ASSERT_EQ(route_db_register(db, &a, 50, &out), 0);
	T_ASSERT_STREQ(out.master_addr, "10.0.0.9:10911");
	s = route(db, "T0");
	T_ASSERT(strstr(s, "10.0.0.9:10911") != NULL && strstr(s, "10.0.0.5:10911") != NULL);
	free(s);
	route_db_destroy(db);
}

/* DELETE_TOPIC_IN_NAMESRV: everywhere, or only in the named cluster's brokers. */
static void
test_delete_topic(void)
{
	struct route_db *db;
	struct route_reg r = {.cluster = "C2",
			      .bname = "broker-c",
			      .addr = "10.0.0.9:10911",
			      .ha_addr = "10.0.0.9:10912",
			      .dv = {.timestamp = 1, .counter = 1},
			      .conn = 3,
			      .topics = topics("T", 2, 6)};
	struct route_reg_out out;
	uint32_t n = 0;
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, topics("T", 2, 6), 1, 1000), 0);
	T_ASSERT_EQ(route_db_register(db, &r, 1000, &out), 0);
	/* only C2 loses T0: broker-a (DefaultCluster) keeps its route */
	T_ASSERT_EQ(route_db_delete_topic(db, "T0", "C2", &n), 0);
	T_ASSERT_EQ(n, 1);
	s = route(db, "T0");
	T_ASSERT(s != NULL && strstr(s, "broker-a") != NULL && strstr(s, "broker-c") == NULL);
	free(s);
	/* no cluster: every broker name */
	T_ASSERT_EQ(route_db_delete_topic(db, "T1", NULL, &n), 0);
	T_ASSERT_EQ(n, 2);
	T_ASSERT(route(db, "T1") == NULL);
	T_ASSERT_EQ(route_db_delete_topic(db, "T1", NULL, &n), -ENOENT);
	T_ASSERT_EQ(route_db_delete_topic(db, "T0", "nope", &n), -ENOENT);
	route_db_destroy(db);
}

/* Cluster info JSON as a NUL-terminated string (caller frees). */
static char *
cluster(struct route_db *db)
{
	uint8_t *out = NULL;
	size_t len = 0;

	T_ASSERT_EQ(route_json_cluster(route_db_current(db), &out, &len), 0);
	return json_str(out, len);
}

/* A group whose last broker went without unregistering is listed lost until it registers. */
static void
test_lost_groups(void)
{
	struct route_db *db = NULL;
	char *s;

	T_ASSERT_EQ(route_db_create(&db), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.5:10911", 0, 1, topics("A", 1, 6), 7, 1000), 0);
	T_ASSERT_EQ(reg(db, "broker-a", "10.0.0.6:10911", 1, 1, topics("A", 1, 6), 9, 1000), 0);
	T_ASSERT_EQ(reg(db, "broker-b", "10.0.0.7:10911", 0, 1, topics("B", 1, 6), 8, 1000), 0);
	T_ASSERT_EQ(reg(db, "broker-c", "10.0.0.8:10911", 0, 1, topics("C", 1, 6), 10, 1000), 0);
	s = cluster(db);
	T_ASSERT(strstr(s, "sprocketLostGroups") == NULL);
	free(s);
	/* broker-a's master dies: the group stays (its slave), nothing is lost */
	T_ASSERT_EQ(route_db_conn_closed(db, 7), 1);
	/* broker-b dies whole; broker-c stops cleanly */
	T_ASSERT_EQ(route_db_conn_closed(db, 8), 1);
	T_ASSERT_EQ(route_db_unregister(db, "broker-c", "10.0.0.8:10911", 0), 0);
	s = cluster(db);
	T_ASSERT(strstr(s, "\"sprocketLostGroups\":{\"broker-b\":{\"cluster\":\"DefaultCluster\","
			   "\"lastAddr\":\"10.0.0.7:10911\"") != NULL);
	T_ASSERT(strstr(s, "\"broker-a\":{\"cluster") == NULL && strstr(s, "broker-c") == NULL);
	free(s);
	/* its slave's registration expires too: broker-a is lost as well */
	T_ASSERT_EQ(route_db_expire(db, 10000, 1000), 1);
	s = cluster(db);
	T_ASSERT(strstr(s, "\"broker-a\":{\"cluster") != NULL);
	free(s);
	/* broker-b comes back: no longer lost */
	T_ASSERT_EQ(reg(db, "broker-b", "10.0.0.7:10911", 0, 2, topics("B", 1, 6), 11, 20000), 0);
	s = cluster(db);
	T_ASSERT(strstr(s, "\"broker-b\":{\"cluster") == NULL &&
		 strstr(s, "\"broker-a\":{\"cluster") != NULL);
	free(s);
	route_db_destroy(db);
}

T_MAIN(T_CASE(test_route_json_exact), T_CASE(test_delete_topic), T_CASE(test_lost_groups),
       T_CASE(test_heartbeat_publishes_nothing), T_CASE(test_liveness),
       T_CASE(test_address_moves_and_limits), T_CASE(test_topic_names),
       T_CASE(test_readers_race_writer), T_CASE(test_second_master_refused),
       T_CASE(test_later_epoch_replaces))
