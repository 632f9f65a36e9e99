// Package deploy holds the deployment files of proxbus: the container image (Dockerfile), a
// Compose stack with a three-node JetStream cluster (docker-compose.yml, compose/, nats/),
// Kubernetes manifests (k8s/), a hardened systemd unit (systemd/), NATS account permissions
// (nats/accounts.conf) and the stream definitions for `nats stream add --config` (streams/).
// It has no code; its tests check those files against the code and, where they can offline,
// against the tools that read them.
package deploy
