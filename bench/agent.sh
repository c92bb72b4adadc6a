#!/usr/bin/env bash
# bench/agent.sh - what `rbpeek agent` costs at 100 Hz with 1, 10 and 50
# busy Ruby processes (NS="1 10 50"), against `rbpeek record` of one of
# the same processes measured in the same run (the cost of one read, the
# reference).
#
# The busy processes (bench/targets.rb: one thread spinning 10 frames
# deep, nice 19 so that they take only what the machine leaves) carry an
# environment variable the agent is told to require (--require-env), so it
# profiles them and nothing else of the machine.  The server is the test suite's stand-in for Pyroscope
# (tests/e2e/fixtures/ingest_receiver.rb on loopback).  Per N: the agent's
# CPU time (utime + stime from /proc/PID/stat) over SECS seconds once it
# watches all N, as a share of one core, per sample (one read of one
# process's stacks), and that as a ratio to record's CPU per sample; its
# share of late (or skipped) ticks; its resident memory.  N=0 is the cost
# of looking for Ruby processes alone (a /proc scan a second).
#
# SAMPLER (default "bpf ptrace": both, one after the other for each N, in
# the same run) picks the agent's --sampler; with both, a last column gives
# the in-kernel sampler's CPU as a share of the ptrace sampler's for that N.
# The in-kernel sampler's eBPF program runs in the interrupted processes'
# context: its time is charged to them, not to the agent (bench/sampler_bpf.rb
# measures it per sample).  It samples a thread RATE times a second of CPU
# time, so with more busy processes than CPUs it takes fewer samples than
# ptrace, which samples every thread RATE times a second of wall time.
#
# TLS (default 1; needs openssl): then, with TLS_N (default 10) busy
# processes and the in-kernel sampler, the agent pushing every second
# (--interval 1, so that sending weighs as much as it can) over plain http
# and over https (a CA and a certificate made here with openssl, the
# receiver speaking TLS, the agent with --ca-file, basic auth and a
# tenant), one after the other: its CPU for each, and https / http.
#
# Wall-clock CPU on a shared machine is noisy: read the ratios, and run it
# on a quiet machine for absolute figures.
set -u
cd "$(dirname "$0")/.."
RBPEEK=${RBPEEK:-build/rbpeek}
SECS=${SECS:-10}
NS=${NS-0 1 10 50}   # NS="" skips these (TLS alone)
RATE=100
# PAUSE=1: the agent's --pause (the GVL's holder stopped for each read), and
# record's default; else both read without stopping (record --nonblocking)
PAUSE=${PAUSE:-0}
SAMPLER=${SAMPLER:-bpf ptrace}
TLS=${TLS:-1}
TLS_N=${TLS_N:-10}
pause_flags=() rec_flags=(--nonblocking)
[ "$PAUSE" = 1 ] && pause_flags=(--pause) rec_flags=()
for smp in $SAMPLER; do
	case $smp in bpf|ptrace) ;; *) echo "bench/agent.sh: SAMPLER is bpf, ptrace or both"; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "bench/agent.sh: needs root (the agent reads other processes)"; exit 0; }
work=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mark=RBPEEK_AGENT_BENCH_$$


ruby tests/e2e/fixtures/ingest_receiver.rb "$work" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")

ticks_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }   # utime + stime, clock ticks
hz=$(getconf CLK_TCK)
metric() { curl -s "http://127.0.0.1:$1/metrics" 2>/dev/null | awk -v m="rbpeek_agent_$2" '$1 == m { print $2 }'; }
command -v curl >/dev/null || metric() {
	ruby -rsocket -e 's = TCPSocket.new("127.0.0.1", ARGV[0].to_i); s.write("GET /metrics HTTP/1.0\r\n\r\n")
	  s.read.each_line { |l| k, v = l.split; puts v if k == "rbpeek_agent_#{ARGV[1]}" }' "$1" "$2"
}

busy=()
start_busy() {   # up to n processes
	while [ "${#busy[@]}" -lt "$1" ]; do
		env "$mark=1" nice -n 19 ruby bench/targets.rb 10 1 >"$work/busy.$(( ${#busy[@]} )).out" 2>&1 &
		busy+=($!)
		pids+=($!)
	done
	local f
	local i
	for i in $(seq 0 $(( $1 - 1 ))); do
		f=$work/busy.$i.out
		for _ in $(seq 400); do grep -qs ready "$f" && break; sleep 0.05; done
	done
}

# record one of the busy processes for SECS s: its CPU (the children's
# time of a shell that waited for it) per sampling tick
start_busy 1
rec_cpu=$(bash -c '"$@" 2>"'"$work"'/rec.err"; awk -v hz='"$hz"' "{ print (\$16 + \$17) / hz }" /proc/$$/stat' \
	_ "$RBPEEK" record "${rec_flags[@]}" --pid "${busy[0]}" -r $RATE -d "$SECS" -f collapsed -o "$work/rec.txt")
rec_ticks=$(sed -n 's/.*: \([0-9]*\) samples in .*/\1/p' "$work/rec.err" | head -1)

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; ptrace: $([ "$PAUSE" = 1 ] && echo "--pause" || echo "nothing stopped")"
printf '%-6s %-7s %10s %14s %12s %10s %8s %9s %12s\n' procs sampler "agent CPU" "per sample" "vs record" \
	"late" "RSS" "samples" "bpf/ptrace"
per_rec=""
if [ -n "$rec_ticks" ] && [ "$rec_ticks" -gt 0 ]; then
	per_rec=$(awk -v c="$rec_cpu" -v t="$rec_ticks" 'BEGIN { printf "%.1f", c / t * 1e6 }')
	printf '%-6s %-7s %9.2f%% %11s us %12s %10s %8s %9s %12s\n' "record" "ptrace" \
		"$(awk -v c="$rec_cpu" -v s="$SECS" 'BEGIN { print c / s * 100 }')" "$per_rec" "1.00" "-" "-" "$rec_ticks" "-"
fi

for n in $NS; do
	start_busy "$n"
	req=$mark
	[ "$n" = 0 ] && req=${mark}_NONE   # nothing carries it: the scans alone
	declare -A cpu_of=()
	for smp in $SAMPLER; do
		flags=(--sampler "$smp")
		[ "$smp" = ptrace ] && flags+=("${pause_flags[@]}")
		err=$work/agent.$n.$smp.err
		"$RBPEEK" agent --server "http://127.0.0.1:$port" --rate $RATE --interval 5 \
			"${flags[@]}" --require-env "$req" --metrics 127.0.0.1:0 2>"$err" &
		agent=$!
		pids+=($agent)
		mport=""
		for _ in $(seq 200); do
			mport=$(sed -n 's|.*metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$err" 2>/dev/null)
			[ -n "$mport" ] && break
			sleep 0.05
		done
		if grep -q "sampling with ptrace instead" "$err"; then
			echo "$n $smp: $(grep -o 'warning: .*' "$err")"
			kill -INT $agent; wait $agent 2>/dev/null
			continue
		fi
		for _ in $(seq 1200); do
			[ "$(metric "$mport" processes_watched)" = "$n" ] && break
			sleep 0.1
		done
		if [ "$(metric "$mport" processes_watched)" != "$n" ]; then
			echo "$n $smp: the agent did not watch all $n processes within 120 s (a loaded machine?)"
			kill -INT $agent; wait $agent 2>/dev/null
			continue
		fi
		t0=$(metric "$mport" ticks_total); l0=$(metric "$mport" ticks_late_total); c0=$(ticks_of $agent)
		s0=$(metric "$mport" samples_total)
		sleep "$SECS"
		t1=$(metric "$mport" ticks_total); l1=$(metric "$mport" ticks_late_total); c1=$(ticks_of $agent)
		s1=$(metric "$mport" samples_total)
		rss=$(metric "$mport" resident_memory_bytes)
		kill -INT $agent
		wait $agent 2>/dev/null
		cpu_of[$smp]=$(( c1 - c0 ))
		vs="-"
		[ "$smp" = ptrace ] && [ -n "${cpu_of[bpf]:-}" ] && vs=$(awk -v b="${cpu_of[bpf]}" -v p="$(( c1 - c0 ))" \
			'BEGIN { print (p > 0 ? sprintf("%.2f", b / p) : "-") }')
		awk -v c0="$c0" -v c1="$c1" -v hz="$hz" -v s="$SECS" -v n="$n" -v t0="$t0" -v t1="$t1" -v smp="$smp" \
		    -v l0="$l0" -v l1="$l1" -v s0="$s0" -v s1="$s1" -v rec="${per_rec:-0}" -v rss="$rss" -v vs="$vs" 'BEGIN {
			cpu = (c1 - c0) / hz; ticks = t1 - t0
			per = s1 > s0 ? cpu / (s1 - s0) * 1e6 : 0
			ratio = "-"
			if (rec > 0) ratio = sprintf("%.2f", per / rec)
			late = ticks > 0 ? (l1 - l0) / ticks * 100 : 0
			printf "%-6d %-7s %9.2f%% %11.1f us %12s %9.1f%% %6.1fM %9d %12s\n", n, smp, cpu / s * 100, per, ratio, late, rss / 1048576, s1 - s0, vs }'
	done
	unset cpu_of
done

# ---- http against https ----------------------------------------------------
if [ "$TLS" = 1 ] && command -v openssl >/dev/null; then
	start_busy "$TLS_N"
	(cd "$work" && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
		-subj "/CN=bench CA" && openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr \
		-subj "/CN=localhost" && echo "subjectAltName=IP:127.0.0.1" >srv.ext && \
		openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
		-extfile srv.ext) >/dev/null 2>&1
	mkdir -p "$work/tls"
	ruby tests/e2e/fixtures/ingest_receiver.rb "$work/tls" --tls "$work/srv.pem" "$work/srv.key" >/dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 200); do [ -s "$work/tls/port" ] && break; sleep 0.05; done
	tport=$(cat "$work/tls/port")
	echo secret-bench >"$work/pw"; chmod 600 "$work/pw"
	echo
	echo "$TLS_N busy processes, in-kernel sampler, --interval 1: plain http against https (TLS 1.2+, verified, kept alive)"
	printf '%-6s %10s %10s %10s\n' transport "agent CPU" "profiles" "conns"
	declare -A tcpu=()
	for tr in http https; do
		err=$work/agent.tls.$tr.err
		if [ $tr = http ]; then
			targs=(--server "http://127.0.0.1:$port")
		else
			targs=(--server "https://127.0.0.1:$tport" --ca-file "$work/ca.pem" --basic-auth-user bench
			       --basic-auth-password-file "$work/pw" --tenant-id bench)
		fi
		"$RBPEEK" agent "${targs[@]}" --rate $RATE --interval 1 --require-env "$mark" \
			--metrics 127.0.0.1:0 2>"$err" &
		agent=$!
		pids+=($agent)
		mport=""
		for _ in $(seq 200); do
			mport=$(sed -n 's|.*metrics at http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$err" 2>/dev/null)
			[ -n "$mport" ] && break
			sleep 0.05
		done
		for _ in $(seq 1200); do
			[ "$(metric "$mport" processes_watched)" = "$TLS_N" ] && break
			sleep 0.1
		done
		p0=$(metric "$mport" profiles_sent_total); c0=$(ticks_of $agent)
		sleep "$SECS"
		p1=$(metric "$mport" profiles_sent_total); c1=$(ticks_of $agent)
		conns=$(metric "$mport" connections_total)
		kill -INT $agent
		wait $agent 2>/dev/null
		tcpu[$tr]=$(( c1 - c0 ))
		awk -v c="$(( c1 - c0 ))" -v hz="$hz" -v s="$SECS" -v tr="$tr" -v p="$(( ${p1%.*} - ${p0%.*} ))" -v k="$conns" \
			'BEGIN { printf "%-9s %9.2f%% %10d %10s\n", tr, c / hz / s * 100, p, k }'
	done
	awk -v a="${tcpu[http]}" -v b="${tcpu[https]}" 'BEGIN { if (a > 0) printf "https / http: %.2f\n", b / a }'
fi
