// Package containers starts the real servers of personaq's integration
// suite as Docker containers through testcontainers-go, for this suite and
// for users who want the same setup in their own tests:
//
//   - StartNATS: nats-server with JetStream, file storage on a named Docker
//     volume and sync_interval always, so a container restart keeps every
//     acknowledged write.
//   - StartRedis: redis-server with an append-only file (fsync always) on a
//     named volume, so the attempt ledger survives a stop and start.
//   - StartReplica: `personaq serve --config FILE` in the personaq image on
//     a user-defined network, with Stop (SIGTERM, docker stop), Kill
//     (SIGKILL) and Start/Restart; Probes publishes its /metrics, /healthz
//     and /readyz.
//   - RunCLI: one personaq command in a one-shot container on the network
//     (the images have no shell, so `docker exec` cannot run it).
//
// Every container joins a user-defined bridge network (NewNetwork) under an
// alias, at a fixed address that survives a stop and start. Replicas find
// NATS and Redis through /etc/hosts entries, never through DNS, and NATS
// and Redis publish their ports on 127.0.0.1 only, at host ports fixed for
// the container's life, so clients on the host reconnect after a restart.
// A server the test runs on the host for the replicas (an HTTP persona)
// listens on Network.Gateway. Nothing is sent anywhere else.
//
// # Images
//
// ResolveImages picks the images, one rule for each:
//
//  1. the environment variable (PERSONAQ_NATS_IMAGE, PERSONAQ_REDIS_IMAGE,
//     PERSONAQ_IMAGE) when set;
//  2. else the local tag integration/images/build.sh builds
//     (personaq/nats:local, personaq/redis:local, personaq/personaq:local)
//     when the Docker engine has it;
//  3. else the official image (nats:2.12-alpine, redis:7), which Docker
//     pulls from its registry. personaq has no official image: without
//     personaq/personaq:local, build it (make images, or docker build -f
//     deployments/Dockerfile -t personaq/personaq:local .).
//
// # Environment
//
// Setup sets TESTCONTAINERS_RYUK_DISABLED=true and
// TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 when they are unset: there is no
// Ryuk image without a registry (every helper here removes what it
// started), and without the override testcontainers dials mapped ports on
// the default gateway when it runs inside a container. Call it before
// anything else, e.g. in TestMain.
//
// Containers, volumes and networks carry the label
// io.personaq.integration=true; after an interrupted run remove what is left
// with
//
//	docker rm -f $(docker ps -aq -f label=io.personaq.integration)
//	docker volume rm $(docker volume ls -q -f label=io.personaq.integration)
//	docker network rm $(docker network ls -q -f label=io.personaq.integration)
package containers
