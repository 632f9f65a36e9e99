// Package harness is the shared in-process setup of proxbus's benchmarks (bench/...): an
// embedded NATS JetStream server, the Proxmox and NetBox simulators behind request counters,
// the real Redis under a unique key prefix (optionally behind a command-counting proxy), and
// the three things a benchmark compares on it: proxbus itself (app.Serve), a framework-free
// baseline that performs the same broker, Redis and HTTP operations per command, and the raw
// JetStream fetch+ack loop. It also publishes load, collects result events with their
// arrival times, and can record when each request reaches the simulators, Redis and the
// broker (Timeline), for a command's time step by step.
//
// Nothing here is part of proxbus; it exists so that every benchmark measures the same thing
// the same way.
package harness
