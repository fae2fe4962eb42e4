// Package deploy holds the container deployment of seckill: the configs
// that docker-compose.yml (at the repository root) mounts — HAProxy,
// Prometheus, Grafana and the k6 entrypoint — and the test that checks the
// stack with the Compose specification's own loader, since no container
// engine runs in CI; and the Kubernetes manifests (kubernetes/), checked
// by decoding them into the Kubernetes API's types. See README.md in this
// directory to run the stack, docs/operations.md for a cluster.
package deploy
