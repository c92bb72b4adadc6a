/*
 * trace_emit.c - the writer's output: event names (fixed ones, method and
 * block labels, syscalls, CPUs) and their encoding as Perfetto protobuf or
 * Chrome JSON (see trace_write.c for the tracks and trace_emit.h).
 *
 * Perfetto: one packet sequence (id 1).  The first packet clears the
 * incremental state, interns every event name used (InternedData) and sets
 * CLOCK_MONOTONIC as the timestamp clock (TracePacketDefaults); a
 * ClockSnapshot relates it to BOOTTIME.  Then TrackDescriptors (each before
 * its first event) and one TracePacket per TrackEvent.  Field numbers are
 * those of the .proto files under Perfetto's protos/perfetto/trace.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "syscall_names.h"
#include "trace_emit.h"
#include "util/json.h"

static const char *const fixed_names[NFIXED] = {
	"(unknown)", "GC", "GC mark", "GC sweep", "GC marking", "GC sweeping",
	"waiting for GVL", "running", "released GVL", "events lost (ring overflow)",
	"runnable", "sleeping", "blocked (uninterruptible)", "stopped", "exiting", "switched out",
};

/* --- names ------------------------------------------------------------ */

/* Name j of the numbered ranges: syscall j, or CPU j - NSYS. */
static const char *num_name(struct writer *wr, uint64_t j)
{
	const char *n;

	if (j >= NSYS + NCPU)
		return fixed_names[N_UNKNOWN];
	if (j < NSYS && (n = rbk_syscall_name((long)j)))
		return n;
	if (!wr->num_names[j] && (wr->num_names[j] = malloc(32)))
		snprintf(wr->num_names[j], 32, j < NSYS ? "syscall %u" : "running on CPU %u",
			 (unsigned)(j < NSYS ? j : j - NSYS));
	return wr->num_names[j] ? wr->num_names[j] : fixed_names[N_UNKNOWN];
}

static const char *name_of(struct writer *wr, uint64_t iid)
{
	uint64_t i = iid - 1;

	if (i < NFIXED)
		return fixed_names[i];
	i -= NFIXED;
	if (i < wr->tr->nlabels)
		return wr->tr->labels[i] ? wr->tr->labels[i] : fixed_names[N_UNKNOWN];
	i -= wr->tr->nlabels;
	if (i > wr->tr->nlabels)
		return num_name(wr, i - wr->tr->nlabels - 1);
	if (!wr->block_names[i]) {
		const char *l = i && i < wr->tr->nlabels && wr->tr->labels[i] ? wr->tr->labels[i] : NULL;
		size_t len = l ? strlen(l) + 10 : 8;
		if ((wr->block_names[i] = malloc(len)))
			snprintf(wr->block_names[i], len, l ? "block in %s" : "block", l);
	}
	return wr->block_names[i] ? wr->block_names[i] : "block";
}

/* --- output ------------------------------------------------------------- */

void rbt_out_flush(struct writer *wr, int force)
{
	if (wr->out.oom)
		wr->err = ENOMEM;
	if (wr->out.n && (force || wr->out.n > (1 << 20))) {
		if (fwrite(wr->out.b, 1, wr->out.n, wr->f) != wr->out.n && !wr->err)
			wr->err = errno ? errno : EIO;
		rbp_pb_reset(&wr->out);
	}
}

void rbt_out_str(struct writer *wr, const char *s)
{
	size_t n = strlen(s);

	if (!rbp_pb_reserve(&wr->out, n)) {
		memcpy(wr->out.b + wr->out.n, s, n);
		wr->out.n += n;
	}
}

/* The pk buffer as one Trace.packet (field 1) of the output. */
static void end_packet(struct writer *wr)
{
	rbp_pb_uint(&wr->pk, 10, 1);  /* trusted_packet_sequence_id */
	rbp_pb_bytes(&wr->out, 1, wr->pk.b, wr->pk.n);
	rbp_pb_reset(&wr->pk);
	rbt_out_flush(wr, 0);
}

static void json_escaped(struct writer *wr, const char *s)
{
	/* rbp_json_string writes to a FILE: flush ours first to keep order */
	rbt_out_flush(wr, 1);
	rbp_json_string(wr->f, s);
}

/* The name of iid as a quoted JSON string, escaped once and cached. */
static void json_name(struct writer *wr, uint64_t iid)
{
	char *buf = NULL;
	size_t len = 0;

	if (iid <= wr->niids && !wr->json_names[iid]) {
		FILE *m = open_memstream(&buf, &len);
		if (m) {
			rbp_json_string(m, name_of(wr, iid));
			if (fclose(m))
				free(buf), buf = NULL;
		}
		wr->json_names[iid] = buf;
	}
	if (iid <= wr->niids && wr->json_names[iid])
		rbt_out_str(wr, wr->json_names[iid]);
	else
		json_escaped(wr, name_of(wr, iid));
}

static void json_begin(struct writer *wr)
{
	rbt_out_str(wr, wr->first_json ? "\n" : ",\n");
	wr->first_json = 0;
}

/* Metadata naming a JSON track. */
static void json_track_name(struct writer *wr, int64_t tid, const char *what, const char *name)
{
	char b[160];

	json_begin(wr);
	snprintf(b, sizeof(b), "{\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRId64 ",\"name\":\"%s\",\"args\":{\"name\":",
		 (int)wr->tr->pid, tid, what);
	rbt_out_str(wr, b);
	json_escaped(wr, name);
	rbt_out_str(wr, "}}");
}

/*
 * Describe a track before its first event.  thread_tid > 0: a thread track;
 * else a named child of parent (0: of the process track).
 */
void rbt_emit_track(struct writer *wr, struct track *t, uint64_t parent, pid_t thread_tid,
		       const char *name)
{
	t->written = 1;
	if (wr->fmt == RBT_JSON) {
		if (name)
			json_track_name(wr, t->jtid, "thread_name", name);
		return;
	}
	rbp_pb_reset(&wr->te);
	rbp_pb_uint(&wr->te, 1, t->uuid);
	if (thread_tid > 0) {
		rbp_pb_reset(&wr->da);
		rbp_pb_uint(&wr->da, 1, (uint64_t)wr->tr->pid);
		rbp_pb_uint(&wr->da, 2, (uint64_t)thread_tid);
		if (name)
			rbp_pb_bytes(&wr->da, 5, name, strlen(name));
		rbp_pb_bytes(&wr->te, 4, wr->da.b, wr->da.n);   /* TrackDescriptor.thread */
	} else {
		rbp_pb_uint(&wr->te, 5, parent);                /* parent_uuid */
		rbp_pb_bytes(&wr->te, 2, name, strlen(name));   /* name */
	}
	rbp_pb_bytes(&wr->pk, 60, wr->te.b, wr->te.n);          /* TracePacket.track_descriptor */
	end_packet(wr);
}

/* Decimal digits of v at p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}


/* One TrackEvent, with an optional argument (on an end: of the slice). */
void rbt_emit(struct writer *wr, const struct track *t, uint64_t ts, int type, uint64_t iid,
		 const struct ev_arg *arg)
{
	if (wr->fmt == RBT_JSON) {
		char b[160], *e;
		static const char *const ph[] = { "", "{\"ph\":\"B\",\"ts\":", "{\"ph\":\"E\",\"ts\":", "{\"ph\":\"i\",\"ts\":" };
		json_begin(wr);
		/* snprintf would be most of the time of a big save: digits by hand */
		e = stpcpy(b, ph[type]);
		e = put_u64(e, ts / 1000);
		*e++ = '.';
		*e++ = (char)('0' + ts / 100 % 10);
		*e++ = (char)('0' + ts / 10 % 10);
		*e++ = (char)('0' + ts % 10);
		e = stpcpy(e, ",\"pid\":");
		e = put_u64(e, (uint64_t)wr->tr->pid);
		e = stpcpy(e, ",\"tid\":");
		if (t->jtid < 0)
			*e++ = '-';
		e = put_u64(e, (uint64_t)(t->jtid < 0 ? -t->jtid : t->jtid));
		*e = 0;
		rbt_out_str(wr, b);
		if (type != EV_END) {
			rbt_out_str(wr, ",\"name\":");
			json_name(wr, iid);
		}
		if (type == EV_INSTANT)
			rbt_out_str(wr, ",\"s\":\"t\"");
		if (arg) {
			snprintf(b, sizeof(b), ",\"args\":{\"%s\":%" PRId64 "}", arg->name, arg->val);
			rbt_out_str(wr, b);
		}
		rbt_out_str(wr, "}");
		return;
	}
	rbp_pb_reset(&wr->te);
	rbp_pb_uint(&wr->te, 9, (uint64_t)type);       /* TrackEvent.type */
	rbp_pb_uint(&wr->te, 11, t->uuid);             /* track_uuid */
	if (type != EV_END)
		rbp_pb_uint(&wr->te, 10, iid);         /* name_iid */
	if (arg) {
		rbp_pb_reset(&wr->da);
		rbp_pb_bytes(&wr->da, 10, arg->name, strlen(arg->name)); /* DebugAnnotation.name */
		rbp_pb_tag(&wr->da, 4, RBP_PB_VARINT);                   /* int_value, even 0 */
		rbp_pb_raw_varint(&wr->da, (uint64_t)arg->val);
		rbp_pb_bytes(&wr->te, 4, wr->da.b, wr->da.n);           /* debug_annotations */
	}
	rbp_pb_uint(&wr->pk, 8, ts);                   /* TracePacket.timestamp */
	rbp_pb_bytes(&wr->pk, 11, wr->te.b, wr->te.n); /* track_event */
	rbp_pb_uint(&wr->pk, 13, 2);                   /* SEQ_NEEDS_INCREMENTAL_STATE */
	end_packet(wr);
}

/* The first packets: clock snapshot, defaults, interned names, process. */
void rbt_emit_header(struct writer *wr)
{
	struct timespec m, b;

	if (wr->fmt == RBT_JSON) {
		rbt_out_str(wr, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
		wr->first_json = 1;
		json_track_name(wr, 0, "process_name", wr->tr->process_name ? wr->tr->process_name : "ruby");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_BOOTTIME, &b);
	/* ClockSnapshot (6): MONOTONIC (3) and BOOTTIME (6) now */
	rbp_pb_reset(&wr->te);
	rbp_pb_reset(&wr->da);
	rbp_pb_uint(&wr->da, 1, 3);
	rbp_pb_uint(&wr->da, 2, (uint64_t)m.tv_sec * 1000000000u + (uint64_t)m.tv_nsec);
	rbp_pb_bytes(&wr->te, 1, wr->da.b, wr->da.n);
	rbp_pb_reset(&wr->da);
	rbp_pb_uint(&wr->da, 1, 6);
	rbp_pb_uint(&wr->da, 2, (uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec);
	rbp_pb_bytes(&wr->te, 1, wr->da.b, wr->da.n);
	rbp_pb_bytes(&wr->pk, 6, wr->te.b, wr->te.n);
	end_packet(wr);

	/* SEQ_INCREMENTAL_STATE_CLEARED, defaults (clock), interned names */
	rbp_pb_uint(&wr->pk, 13, 1);
	rbp_pb_reset(&wr->te);
	rbp_pb_uint(&wr->te, 58, 3);                   /* TracePacketDefaults.timestamp_clock_id */
	rbp_pb_bytes(&wr->pk, 59, wr->te.b, wr->te.n);
	rbp_pb_reset(&wr->te);
	for (uint64_t iid = 1; iid <= wr->niids; iid++) {
		if (!wr->used[iid])
			continue;
		const char *s = name_of(wr, iid);
		rbp_pb_reset(&wr->da);
		rbp_pb_uint(&wr->da, 1, iid);                  /* EventName.iid */
		rbp_pb_bytes(&wr->da, 2, s, strlen(s));        /* EventName.name */
		rbp_pb_bytes(&wr->te, 2, wr->da.b, wr->da.n);  /* InternedData.event_names */
	}
	rbp_pb_bytes(&wr->pk, 12, wr->te.b, wr->te.n);         /* TracePacket.interned_data */
	end_packet(wr);

	/* the process track (uuid 1) */
	rbp_pb_reset(&wr->te);
	rbp_pb_reset(&wr->da);
	rbp_pb_uint(&wr->te, 1, 1);
	rbp_pb_uint(&wr->da, 1, (uint64_t)wr->tr->pid);
	if (wr->tr->process_name)
		rbp_pb_bytes(&wr->da, 6, wr->tr->process_name, strlen(wr->tr->process_name));
	rbp_pb_bytes(&wr->te, 3, wr->da.b, wr->da.n);
	rbp_pb_bytes(&wr->pk, 60, wr->te.b, wr->te.n);
	end_packet(wr);
}
