#!/usr/bin/env bash
# bench/run.sh: every benchmark of docs/benchmarks.md, one after the other (never in parallel:
# they share the machine). Needs Redis on 127.0.0.1:6379 (or PROXBUS_BENCH_REDIS_URL).
#   bash bench/run.sh [outdir]        # the full runs of docs/benchmarks.md (about 80 minutes: the fleet's eight drains take 67)
#   bash bench/run.sh --short         # CI smoke: each benchmark once, briefly
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--short" ]]; then
	go -C bench test -run '^$' -bench . -benchtime 1x ./pipeline ./startup ./peer
	go -C bench run ./throughput -short
	go -C bench run ./timeline -short
	go -C bench run ./latency -short
	go -C bench run ./slow -short
	go -C bench run ./taskpoll -short
	go -C bench run ./fleet -short
	go -C bench run ./console -short
	go -C bench run ./durability -short
	exit 0
fi
out="${1:-bench-results}"
mkdir -p "$out"
{ uname -a; nproc; grep -m1 'model name' /proc/cpuinfo || true; go version; uptime; } >"$out/machine.txt"
go -C bench run ./throughput -n 1500 -rounds 8 -c 1,8,64 | tee "$out/throughput.md"
go -C bench run ./timeline -n 1000 -rounds 4 | tee "$out/timeline.md"
go -C bench run ./latency -c 8 -d 20s -rounds 4 | tee "$out/latency.md"
go -C bench run ./slow | tee "$out/slow.md"
go -C bench run ./taskpoll | tee "$out/taskpoll.md"
go -C bench run ./fleet | tee "$out/fleet.md" # fleet scale: 2 backlogs × 2 loads × watch and poll, about 67 minutes
go -C bench run ./console | tee "$out/console.md"
go -C bench run ./durability | tee "$out/durability.md"
go -C bench test -run '^$' -bench Startup -benchtime 10x ./startup | tee "$out/startup.txt"
go test -run '^$' -bench 'Emit|Decode|Prepare|Fingerprint|Published' -benchmem -count 3 ./events ./internal/proxmox ./handlers ./internal/metrics | tee "$out/micro.txt"
go -C bench run ./throughput -n 3000 -rounds 1 -c 8 -only proxbus -cpuprofile "$out/cpu.pprof" -memprofile "$out/mem.pprof"
# Peer: 12 rounds, each running every implementation at c=1 and c=8 once, in alternating
# order, so that a drift of the machine's speed falls on all alike.
go -C bench test -c -o "$out/peer.test" ./peer
for round in $(seq 12); do
	impls=(proxbus watermill watermill-nodecode rawiterator rawconsume)
	((round % 2)) || impls=(rawconsume rawiterator watermill-nodecode watermill proxbus)
	for c in 1 8; do
		for impl in "${impls[@]}"; do
			"$out/peer.test" -test.run '^$' -test.bench "Peer/impl=$impl\$/c=$c\$" -test.benchtime 10000x | grep '^BenchmarkPeer'
		done
	done
done | tee "$out/peer.txt"
go run golang.org/x/perf/cmd/benchstat@latest -col /impl "$out/peer.txt" | tee "$out/peer-benchstat.txt"
rm -f "$out/peer.test"
uptime >>"$out/machine.txt"
