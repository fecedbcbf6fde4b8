// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel ping (/sys/kernel/debug/mlx4_bf0/device/kping): krping's
 * loop between kernel ends, started by writing a command, ended by count, a
 * signal or unbind. Asserts on the write's result, the file's statistics
 * lines, the kernel log and what the adapter (the model's analyzer) executed.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "kselftest_harness.h"
#include "mlx4_bf_model.h"

#define KPING		DEBUGFS_DIR "/device/kping"
#define DEVICE_STATS	DEBUGFS_DIR "/device/stats"

/* Writes @cmd to the command file: 0, or the write's -errno. */
static int kping(const char *cmd)
{
	int fd = open(KPING, O_WRONLY);
	ssize_t n;
	int err;

	if (fd < 0)
		return -errno;
	n = write(fd, cmd, strlen(cmd));
	err = n < 0 ? -errno : 0;
	close(fd);
	if (!err && n != (ssize_t)strlen(cmd))
		return -EMSGSIZE;
	return err;
}

/* One statistics line of the file. */
struct line {
	int id;
	unsigned long long send_bytes, send_msgs, recv_bytes, recv_msgs;
	unsigned long long write_bytes, write_msgs, read_bytes, read_msgs;
	unsigned long long min, median, p99, max, write_post;
	char role[16], result[16];
};

/* The last line of thread @id (-1: any) in role @role (NULL: any); 0 if found. */
static int kping_line_of(int id, const char *role, struct line *out)
{
	char buf[256];
	int found = -1;
	FILE *f = fopen(KPING, "r");

	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f)) {
		struct line l;
		char dev[32];

		if (sscanf(buf, "%d-%31s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %15s %15s",
			   &l.id, dev, &l.send_bytes, &l.send_msgs, &l.recv_bytes, &l.recv_msgs,
			   &l.write_bytes, &l.write_msgs, &l.read_bytes, &l.read_msgs,
			   &l.min, &l.median, &l.p99, &l.max, &l.write_post, l.role, l.result) != 17)
			continue;
		if ((id < 0 || l.id == id) && (!role || !strcmp(role, l.role))) {
			*out = l;
			found = 0;
		}
	}
	fclose(f);
	return found;
}

static int kping_line(int id, struct line *out)
{
	return kping_line_of(id, NULL, out);
}

/* Lines of threads in @state: "running", or "listening" (a server with no client yet). */
static int threads_in(const char *state)
{
	char buf[256], *last;
	int n = 0;
	FILE *f = fopen(KPING, "r");

	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		last = strrchr(buf, ' ');
		n += last && !strcmp(last + 1, state);
	}
	fclose(f);
	return n;
}

/* The kernel log from now on (/dev/kmsg, positioned at its end). */
static int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Did a record since kmsg_open() contain @what? */
static int kmsg_has(int fd, const char *what)
{
	char rec[1024];
	ssize_t n;
	int found = 0;

	while ((n = read(fd, rec, sizeof(rec) - 1)) > 0 || (n < 0 && errno == EPIPE)) {
		if (n <= 0)
			continue;
		rec[n] = 0;
		if (strstr(rec, what))
			found = 1;
	}
	return found;
}

static long device_stat(const char *name)
{
	return debugfs_counter("device", name);
}

/* The adapter's counters a run moves. */
struct seen {
	uint64_t wqe_bf, wqe_dma, fallbacks, doorbells, reads, read_bytes, writes, write_bytes;
	uint64_t irqs;
};

static void seen(struct model *m, struct seen *s)
{
	s->wqe_bf = model_read(m, MODEL_WQE_BF);
	s->wqe_dma = model_read(m, MODEL_WQE_DMA);
	s->fallbacks = model_read(m, MODEL_BF_FALLBACKS);
	s->doorbells = model_read(m, MODEL_DOORBELLS);
	s->reads = model_read(m, MODEL_RDMA_READS);
	s->read_bytes = model_read(m, MODEL_RDMA_READ_BYTES);
	s->writes = model_read(m, MODEL_RDMA_WRITES);
	s->write_bytes = model_read(m, MODEL_RDMA_WRITE_BYTES);
	s->irqs = model_read(m, MODEL_IRQS);
}

/*
 * Maps the model's diagnostic block if the command file exists and the model
 * counts RDMA reads (version 8); else the reason to SKIP.
 */
static const char *kping_on_model(struct model *m)
{
	if (access(KPING, W_OK))
		return "no kping file: mlx4_bf not bound";
	if (model_open(m))
		return NO_ANALYZER;
	if (model_version(m) < 8) {
		model_close(m);
		return "the model has no RDMA read counters";
	}
	return NULL;
}

/*
 * A loop of @n round trips with @opts: the write succeeds, the line counts
 * krping's columns exactly, and the adapter executed n reads and n writes of
 * @size bytes, every SEND and WRITE by BlueFlame (path=bf) or doorbell.
 */
static void loop_run(struct __test_metadata *_metadata, int n, int size, const char *opts)
{
	const char *why;
	struct seen a, b;
	struct line l;
	struct model m;
	char cmd[160];
	int bf = strstr(opts, "path=db") == NULL;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	snprintf(cmd, sizeof(cmd), "loop,count=%d,size=%d,validate%s\n", n, size, opts);
	seen(&m, &a);
	ASSERT_EQ(0, kping(cmd)) TH_LOG("%s", cmd);
	seen(&m, &b);
	ASSERT_EQ(0, kping_line(-1, &l));
	EXPECT_STREQ("loop", l.role);
	EXPECT_STREQ("0", l.result);
	/* Per round trip: four SENDs of 24 bytes, each received; one of each RDMA. */
	EXPECT_EQ(4ull * n, l.send_msgs);
	EXPECT_EQ(96ull * n, l.send_bytes);
	EXPECT_EQ(4ull * n, l.recv_msgs);
	EXPECT_EQ((unsigned long long)n * size, l.read_bytes);
	EXPECT_EQ((unsigned long long)n, l.read_msgs);
	EXPECT_EQ((unsigned long long)n * size, l.write_bytes);
	EXPECT_EQ((unsigned long long)n, l.write_msgs);
	EXPECT_LT(0, l.min);
	EXPECT_LE(l.min, l.median);
	EXPECT_LE(l.median, l.p99);
	EXPECT_LE(l.p99, l.max);
	EXPECT_LT(0, l.write_post);
	EXPECT_LT(l.write_post, l.median) TH_LOG("a post is part of a round trip");
	/* What the adapter did, not what the driver says. */
	EXPECT_EQ((uint64_t)n, b.reads - a.reads);
	EXPECT_EQ((uint64_t)n * size, b.read_bytes - a.read_bytes);
	EXPECT_EQ((uint64_t)n, b.writes - a.writes);
	EXPECT_EQ((uint64_t)n * size, b.write_bytes - a.write_bytes);
	EXPECT_EQ(6ull * n, b.wqe_bf - a.wqe_bf + b.wqe_dma - a.wqe_dma) TH_LOG("WQEs executed");
	EXPECT_EQ(0, b.fallbacks - a.fallbacks) TH_LOG("no BlueFlame write refused");
	if (bf) {
		/*
		 * SENDs and WRITEs by BlueFlame, a READ (it has a data segment)
		 * by doorbell. The adapter may run a BlueFlame WQE from the send
		 * queue before its burst arrives (when it is there by the end of
		 * a scan the READ's doorbell started): most, not all, run from
		 * the burst.
		 */
		EXPECT_LT(5ull * n / 2, b.wqe_bf - a.wqe_bf);
		EXPECT_EQ((uint64_t)n, b.doorbells - a.doorbells);
	} else {
		EXPECT_EQ(0, b.wqe_bf - a.wqe_bf);
		EXPECT_EQ(6ull * n, b.doorbells - a.doorbells);
	}
	if (strstr(opts, "wait=event"))
		EXPECT_LT(0, b.irqs - a.irqs) TH_LOG("slept on completion events");
	EXPECT_EQ(0, device_stat("contexts")) TH_LOG("every end's context closed");
	EXPECT_EQ(0, device_stat("mrs")) TH_LOG("every region deregistered");
	model_close(&m);
}

/*
 * The long runs: 10 000 round trips, and four pairs of 500, take seconds
 * under TCG and several times that on a loaded host or a KASAN kernel; the
 * harness's default of 30 s is for the short ones.
 */
FIXTURE(long_run) {};
FIXTURE_SETUP(long_run) {}
FIXTURE_TEARDOWN(long_run) {}

TEST_F_TIMEOUT(long_run, loop_bf_busy_10000_validated, 180)
{
	loop_run(_metadata, 10000, 64, "");
}

TEST(loop_bf_event_registered)
{
	loop_run(_metadata, 300, 200, ",wait=event,mem_mode=reg");
}

TEST(loop_db_busy_registered_4096)
{
	loop_run(_metadata, 300, 4096, ",path=db,mem_mode=reg");
}

TEST(loop_db_event_dma)
{
	loop_run(_metadata, 300, 1000, ",path=db,wait=event");
}

/* Runs @cmd in a child; returns its pid. The child exits with -errno. */
static pid_t kping_child(const char *cmd)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(-kping(cmd));
	return pid;
}

static int child_result(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1000;
	return -WEXITSTATUS(status);
}

/* Until @n threads are in @state, at most 5 s. */
static int wait_for(const char *state, int n)
{
	for (int i = 0; i < 500; i++) {
		if (threads_in(state) >= n)
			return 0;
		usleep(10000);
	}
	return -1;
}

TEST_F_TIMEOUT(long_run, server_and_client_on_both_paths_and_wait_modes, 180)
{
	const char *why;
	static const char *const opts[] = { "", ",path=db,wait=event", ",wait=event",
					    ",path=db,mem_mode=reg" };
	struct seen a, b;
	struct model m;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	for (int i = 0; i < 4; i++) {
		char server[96], client[96];
		struct line l;
		pid_t pid;

		snprintf(server, sizeof(server), "server,port=%d%s", 100 + i, opts[i]);
		snprintf(client, sizeof(client), "client,port=%d,count=500,validate%s", 100 + i,
			 opts[i]);
		seen(&m, &a);
		pid = kping_child(server);
		ASSERT_EQ(0, wait_for("listening", 1));
		EXPECT_EQ(0, kping(client)) TH_LOG("%s", client);
		EXPECT_EQ(0, child_result(pid)) TH_LOG("the server ends when its client is done");
		seen(&m, &b);
		EXPECT_EQ(500, b.reads - a.reads);
		EXPECT_EQ(500, b.writes - a.writes);
		ASSERT_EQ(0, kping_line_of(-1, "server", &l));
		EXPECT_STREQ("0", l.result);
		EXPECT_EQ(500, l.read_msgs);
		EXPECT_EQ(500, l.write_msgs);
		EXPECT_EQ(32000, l.write_bytes);
		ASSERT_EQ(0, kping_line_of(-1, "client", &l));
		EXPECT_STREQ("0", l.result);
		EXPECT_EQ(1000, l.send_msgs);
		EXPECT_EQ(1000, l.recv_msgs);
		EXPECT_EQ(0, l.read_msgs + l.write_msgs) TH_LOG("the server does the RDMA");
	}
	EXPECT_EQ(0, device_stat("contexts"));
	model_close(&m);
}

TEST(two_pairs_at_once)
{
	const char *why;
	struct seen a, b;
	struct model m;
	pid_t s1, s2, c1, c2;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	seen(&m, &a);
	s1 = kping_child("server,port=201");
	s2 = kping_child("server,port=202,path=db");
	ASSERT_EQ(0, wait_for("listening", 2));
	c1 = kping_child("client,port=201,count=400,validate");
	c2 = kping_child("client,port=202,count=400,validate,path=db,wait=event");
	EXPECT_EQ(0, child_result(c1));
	EXPECT_EQ(0, child_result(c2));
	EXPECT_EQ(0, child_result(s1));
	EXPECT_EQ(0, child_result(s2));
	seen(&m, &b);
	EXPECT_EQ(800, b.reads - a.reads);
	EXPECT_EQ(800, b.writes - a.writes);
	EXPECT_EQ(0, device_stat("contexts"));
	model_close(&m);
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* Runs @cmd in a child that catches SIGUSR1; the child exits with -errno. */
static pid_t kping_child_catching(const char *cmd)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct sigaction sa = { .sa_handler = on_usr1 };

		/* No SA_RESTART: the write returns -EINTR. */
		sigaction(SIGUSR1, &sa, NULL);
		_exit(-kping(cmd));
	}
	return pid;
}

TEST(a_signal_ends_a_loop_with_eintr_and_frees_everything)
{
	const char *why;
	struct model m;
	struct line l;
	uint64_t live;
	pid_t pid;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	live = model_read(&m, MODEL_LIVE);
	pid = kping_child_catching("loop,validate");
	ASSERT_EQ(0, wait_for("running", 1));
	usleep(300000);
	kill(pid, SIGUSR1);
	EXPECT_EQ(-EINTR, child_result(pid));
	ASSERT_EQ(0, kping_line(-1, &l));
	EXPECT_STREQ("-4", l.result);
	EXPECT_LT(0, l.read_msgs) TH_LOG("it ran before the signal");
	EXPECT_EQ(0, device_stat("contexts"));
	EXPECT_EQ(0, device_stat("mrs"));
	EXPECT_EQ(live, model_read(&m, MODEL_LIVE)) TH_LOG("every CQ and QP out of the adapter");
	model_close(&m);
}

TEST(an_interrupted_client_lets_its_server_end)
{
	const char *why;
	struct model m;
	struct line l;
	pid_t server, client;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	server = kping_child("server,port=300,wait=event");
	ASSERT_EQ(0, wait_for("listening", 1));
	client = kping_child_catching("client,port=300,validate");
	ASSERT_EQ(0, wait_for("running", 2)) TH_LOG("the server has its client");
	usleep(300000);
	kill(client, SIGUSR1);
	EXPECT_EQ(-EINTR, child_result(client));
	EXPECT_EQ(0, child_result(server)) TH_LOG("the client said goodbye");
	ASSERT_EQ(0, kping_line_of(-1, "server", &l));
	EXPECT_STREQ("0", l.result);
	ASSERT_EQ(0, kping_line_of(-1, "client", &l));
	EXPECT_STREQ("-4", l.result);
	EXPECT_EQ(0, device_stat("contexts"));
	model_close(&m);
}

TEST(bad_commands_are_einval_with_one_log_line)
{
	static const struct {
		const char *cmd, *log;
	} bad[] = {
		{ "loop,bogus\n", "unknown option 'bogus'" },
		{ "client,port", "port needs a value" },
		{ "loop,size=0", "size=0: out of range" },
		{ "loop,size=16385", "size=16385: out of range" },
		{ "loop,size=1000,path=bf", "BlueFlame carries at most" },
		{ "loop,count=0", "count=0: out of range" },
		{ "server", "server needs port=N" },
		{ "loop,mem_mode=fast", "mem_mode='fast': must be one of dma, reg" },
	};
	int log;

	if (access(KPING, W_OK))
		SKIP(return, "no kping file: mlx4_bf not bound");
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		log = kmsg_open();
		ASSERT_LE(0, log);
		EXPECT_EQ(-EINVAL, kping(bad[i].cmd)) TH_LOG("%s", bad[i].cmd);
		EXPECT_TRUE(kmsg_has(log, bad[i].log)) TH_LOG("no log line '%s'", bad[i].log);
		close(log);
	}
}

TEST(a_client_without_server_times_out)
{
	int log;

	if (access(KPING, W_OK))
		SKIP(return, "no kping file: mlx4_bf not bound");
	log = kmsg_open();
	EXPECT_EQ(-ETIMEDOUT, kping("client,port=4242,count=1"));
	EXPECT_TRUE(kmsg_has(log, "no server on port 4242"));
	close(log);
	EXPECT_EQ(0, device_stat("contexts"));
}

TEST(a_second_server_on_a_port_is_refused)
{
	pid_t server;
	int log;

	if (access(KPING, W_OK))
		SKIP(return, "no kping file: mlx4_bf not bound");
	server = kping_child_catching("server,port=400");
	ASSERT_EQ(0, wait_for("listening", 1));
	log = kmsg_open();
	EXPECT_EQ(-EADDRINUSE, kping("server,port=400"));
	EXPECT_TRUE(kmsg_has(log, "port 400 has a server"));
	close(log);
	kill(server, SIGUSR1);
	EXPECT_EQ(-EINTR, child_result(server));
}

TEST(more_threads_than_four_are_ebusy)
{
	pid_t pids[4];
	int log;

	if (access(KPING, W_OK))
		SKIP(return, "no kping file: mlx4_bf not bound");
	for (int i = 0; i < 4; i++)
		pids[i] = kping_child_catching("loop,wait=event");
	ASSERT_EQ(0, wait_for("running", 4));
	log = kmsg_open();
	EXPECT_EQ(-EBUSY, kping("loop,count=1"));
	EXPECT_TRUE(kmsg_has(log, "4 commands run already"));
	close(log);
	for (int i = 0; i < 4; i++)
		kill(pids[i], SIGUSR1);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(-EINTR, child_result(pids[i]));
	EXPECT_EQ(0, device_stat("contexts"));
	EXPECT_EQ(0, kping("loop,count=1")) TH_LOG("a slot is free again");
}

TEST(validate_finds_a_corrupted_byte)
{
	const char *why;
	struct model m;
	struct line l;
	int log;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	if (model_version(&m) < 9) {
		model_close(&m);
		SKIP(return, "the model has no data fault injection");
	}
	/* Byte 5 of the next RDMA payload (the READ of round trip 0) inverted. */
	model_data_fault(&m, 5);
	log = kmsg_open();
	EXPECT_EQ(-EIO, kping("loop,count=10,validate"));
	EXPECT_TRUE(kmsg_has(log, "validate: round trip 0, byte 5:"));
	close(log);
	EXPECT_EQ(0, (uint32_t)model_read(&m, MODEL_DATA_FAULT)) TH_LOG("the fault fired");
	ASSERT_EQ(0, kping_line(-1, &l));
	EXPECT_STREQ("-5", l.result);
	EXPECT_EQ(0, device_stat("contexts"));
	model_close(&m);
}

TEST(unbind_ends_a_run_with_enodev_and_bind_brings_the_file_back)
{
	const char *why;
	char bdf[64];
	struct model m;
	pid_t pid;
	int fd;

	why = kping_on_model(&m);
	if (why)
		SKIP(return, "%s", why);
	model_close(&m);
	ASSERT_EQ(0, bound_device(bdf, sizeof(bdf)));
	pid = kping_child("loop,validate,wait=event");
	ASSERT_EQ(0, wait_for("running", 1));
	usleep(200000);
	fd = open(DRIVER_DIR "/unbind", O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)strlen(bdf), write(fd, bdf, strlen(bdf)));
	close(fd);
	EXPECT_EQ(-ENODEV, child_result(pid));
	EXPECT_NE(0, access(KPING, F_OK)) TH_LOG("the file went with the adapter");
	fd = open("/sys/bus/pci/drivers_probe", O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)strlen(bdf), write(fd, bdf, strlen(bdf)));
	close(fd);
	for (int i = 0; i < 100 && access(KPING, W_OK); i++)
		usleep(20000);
	EXPECT_EQ(0, kping("loop,count=10,validate")) TH_LOG("bound again, it runs again");
}

TEST_HARNESS_MAIN
