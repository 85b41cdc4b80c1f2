#!/usr/bin/env bash
# build.sh builds the demo persona's container image offline: the program
# is compiled statically on this host (CGO_ENABLED=0, standard library only)
# and copied into a FROM scratch image. Nothing is pulled.
#
#   deployments/demo-persona/build.sh            # tag personaq/demo-persona:local
#   DEMO_PERSONA_IMAGE=me/demo:1 deployments/demo-persona/build.sh
#
# Image: /demo-persona, USER 65532:65532, EXPOSE 8080, ENTRYPOINT ["/demo-persona"],
# about 6 MB. The health check is the binary itself (`/demo-persona -probe
# http://127.0.0.1:8080/healthz`): the image has no shell. With a registry,
# `docker build -f deployments/demo-persona/Dockerfile .` gives the same image.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
IMAGE=${DEMO_PERSONA_IMAGE:-personaq/demo-persona:local}
export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} # docker 20.10 here: legacy builder

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

goos=$(docker version --format '{{.Server.Os}}' 2>/dev/null || echo linux)
goarch=$(docker version --format '{{.Server.Arch}}' 2>/dev/null || go env GOARCH)
echo "build.sh: CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build ./deployments/demo-persona"
(cd "$REPO_ROOT" && CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch \
	go build -trimpath -ldflags '-s -w' -o "$ctx/demo-persona" ./deployments/demo-persona)

cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY demo-persona /demo-persona
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/demo-persona"]
LABEL org.opencontainers.image.title="personaq demo persona" \
      org.opencontainers.image.source="https://github.com/personaq/personaq" \
      org.opencontainers.image.description="HTTP demo persona for personaq's deployment examples, static, FROM scratch, non-root"
DOCKERFILE
docker build -q -t "$IMAGE" "$ctx" >/dev/null
docker run --rm "$IMAGE" -probe -probe-timeout 1s tcp://127.0.0.1:1 >/dev/null 2>&1 && {
	echo "build.sh: $IMAGE: -probe of a closed port succeeded?" >&2
	exit 1
}
echo "build.sh: built $IMAGE ($(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.1f MB", $1/1e6}'))"
