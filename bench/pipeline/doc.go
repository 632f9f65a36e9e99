// Package pipeline benchmarks proxbus's command throughput against the same machine's limit
// (issue #6, part 1): BenchmarkThroughput drains storage.pbs.create commands through proxbus
// (app.Serve in-process), through a framework-free baseline doing the same broker, Redis and
// HTTP operations per command, and through a raw JetStream fetch+ack loop, at concurrency 1, 8
// and 64. TestRequestParity checks that the baseline does per command what proxbus does.
//
//	go -C bench test -run '^$' -bench Throughput -benchtime 2000x -count 5 ./pipeline
package pipeline
