// Package deploy holds the deployment files of proxbus: the container image (Dockerfile), a
// Compose stack with a three-node JetStream cluster (docker-compose.yml, compose/, nats/),
// Kubernetes manifests (k8s/), a hardened systemd unit (systemd/), NATS account permissions
// (nats/accounts.conf), the stream definitions for `nats stream add --config` (streams/), a
// Grafana dashboard (grafana/) and Prometheus alert rules (prometheus/), and the release build
// and Debian package (package/, a Go module of its own). It has no code; its tests check those
// files against the code and, where they can offline, against the tools that read them.
package deploy
