#!/usr/bin/env bash
# build.sh builds the container images personaq's integration suite (and the
# compose cluster) uses on machines with a Docker engine but no image registry.
# Nothing is pulled: every image is `FROM scratch` plus files made on this host.
#
#   personaq/nats:local      nats-server compiled statically (CGO_ENABLED=0) from the
#                            Go module proxy, at the version go.mod requires.
#   personaq/redis:local     Debian's /usr/bin/redis-server with every library ldd
#                            lists and the dynamic loader.
#   personaq/personaq:local  personaq built statically from this repo, laid out
#                            exactly like the final stage of deployments/Dockerfile.
#
# Usage: build.sh [--force] [--no-verify] [nats|redis|personaq|all ...]   (default: all)
#
# An image whose tag exists and whose build key (nats-server version, redis-server
# binary hash, personaq source hash; stored as a label) still matches is left alone,
# so a second run takes about a second. --force rebuilds anyway. Every image built is
# smoke-tested (--no-verify skips that).
#
# Environment:
#   PERSONAQ_NATS_IMAGE   tag for the NATS image      (default personaq/nats:local)
#   PERSONAQ_REDIS_IMAGE  tag for the Redis image     (default personaq/redis:local)
#   PERSONAQ_IMAGE        tag for the personaq image  (default personaq/personaq:local)
#   PERSONAQ_SRC          module to build personaq from (default: this repo); it must
#                         have ./cmd/personaq. Mainly for testing this script.
# Only tags that look local (personaq/… or …:local) or that this script built before
# are ever written: set PERSONAQ_NATS_IMAGE=nats:2.12-alpine (a registry image) and
# the nats step is skipped, so an official tag is never shadowed by a local build.
set -euo pipefail

readonly LABEL_KEY=io.personaq.image.key
readonly LABEL_BUILDER=io.personaq.image.builder
readonly BUILDER_ID=integration/images/build.sh
readonly NATS_MODULE=github.com/nats-io/nats-server/v2
readonly UID_NONROOT=65532
readonly STD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
NATS_IMAGE=${PERSONAQ_NATS_IMAGE:-personaq/nats:local}
REDIS_IMAGE=${PERSONAQ_REDIS_IMAGE:-personaq/redis:local}
PERSONAQ_IMAGE=${PERSONAQ_IMAGE:-personaq/personaq:local}
PERSONAQ_SRC=${PERSONAQ_SRC:-$REPO_ROOT}
# Docker 20.10 on these machines has only the legacy builder; it is all a
# FROM scratch build needs, and newer engines still accept it.
export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

log() { printf 'build.sh: %s\n' "$*"; }
die() {
	printf 'build.sh: error: %s\n' "$*" >&2
	exit 1
}

FORCE=0
VERIFY=1
TARGETS=()
while (($#)); do
	case $1 in
	--force | -f) FORCE=1 ;;
	--no-verify) VERIFY=0 ;;
	-h | --help)
		usage
		exit 0
		;;
	nats | redis | personaq) TARGETS+=("$1") ;;
	all) TARGETS+=(nats redis personaq) ;;
	*)
		printf 'build.sh: unknown argument %q (want --force, --no-verify, nats, redis, personaq or all; see --help)\n' "$1" >&2
		exit 2
		;;
	esac
	shift
done
((${#TARGETS[@]})) || TARGETS=(nats redis personaq)

# --- cleanup: temp dirs and every container this script starts -------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/personaq-images.XXXXXX")
CONTAINERS=()
cleanup() {
	local c
	for c in "${CONTAINERS[@]}"; do
		docker rm -f "$c" >/dev/null 2>&1 || true
	done
	chmod -R u+w "$WORK" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- docker -------------------------------------------------------------------------
command -v docker >/dev/null 2>&1 || die "docker CLI not found in PATH; install Docker to build the integration images"
if ! engine=$(docker version --format '{{.Server.Os}}/{{.Server.Arch}}' 2>&1); then
	die "docker engine not reachable (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}): ${engine##*$'\n'}"
fi
TARGET_OS=${engine%%/*}
TARGET_ARCH=${engine#*/}
[[ $TARGET_OS == linux ]] || die "docker engine runs $TARGET_OS containers; these images are linux only"
command -v go >/dev/null 2>&1 || die "go not found in PATH (needed to build nats-server and personaq)"

# inspect TAG: sets IMG_ID, IMG_OURS (1 if this script built it), IMG_KEY (its build
# key) and IMG_SIZE (bytes); IMG_ID is empty when there is no such image.
IMG_ID='' IMG_OURS=0 IMG_KEY='' IMG_SIZE=0
inspect() {
	local out
	IMG_ID='' IMG_OURS=0 IMG_KEY='' IMG_SIZE=0
	out=$(docker image inspect --format \
		"{{.Id}}|{{.Size}}|{{index .Config.Labels \"$LABEL_BUILDER\"}}|{{index .Config.Labels \"$LABEL_KEY\"}}" \
		"$1" 2>/dev/null) || return 0
	IFS='|' read -r IMG_ID IMG_SIZE IMG_OURS IMG_KEY <<<"$out"
	[[ $IMG_OURS == "$BUILDER_ID" ]] && IMG_OURS=1 || IMG_OURS=0
}
image_id() {
	inspect "$1"
	printf '%s\n' "$IMG_ID"
}

# should_build NAME TAG KEY: decides whether TAG needs (re)building for KEY.
should_build() {
	local name=$1 tag=$2 key=$3 have
	inspect "$tag"
	if [[ -n $IMG_ID ]] && ((!IMG_OURS)); then
		log "$name: $tag exists and was not built by this script; using it as is"
		return 1
	fi
	if [[ -z $IMG_ID && $tag != personaq/* && $tag != *:local ]]; then
		log "$name: $tag is not a local image name (want personaq/... or ...:local); skipping, it will be pulled from its registry"
		return 1
	fi
	have=$IMG_KEY
	if ((FORCE)); then
		log "$name: --force: building $tag ($key)"
	elif [[ -z $have ]]; then
		log "$name: building $tag ($key)"
	elif [[ $have != "$key" ]]; then
		log "$name: $tag is stale (built for: $have); rebuilding ($key)"
	else
		log "$name: $tag is up to date ($key); skipping (--force rebuilds)"
		return 1
	fi
	return 0
}

# docker_build TAG CONTEXT KEY: builds CONTEXT/Dockerfile as TAG with our labels,
# then removes the image TAG pointed to before, if nothing else uses it.
docker_build() {
	local tag=$1 ctx=$2 key=$3 old new out
	old=$(image_id "$tag")
	if ! out=$(docker build --pull=false --rm --force-rm \
		--label "$LABEL_BUILDER=$BUILDER_ID" --label "$LABEL_KEY=$key" \
		-t "$tag" "$ctx" 2>&1); then
		printf '%s\n' "$out" >&2
		die "docker build of $tag failed (output above)"
	fi
	new=$(image_id "$tag")
	if [[ -n $old && $old != "$new" ]]; then
		docker image rm "$old" >/dev/null 2>&1 || true
	fi
}

# --- smoke-test helpers -------------------------------------------------------------
# run_detached IMAGE "PORT..." ARGS...: starts IMAGE with each PORT published on
# 127.0.0.1 only and sets CID; the container is removed when the script exits.
CID=
run_detached() {
	local image=$1 p publish=()
	for p in $2; do publish+=(-p "127.0.0.1::$p"); done
	shift 2
	CID=$(docker run -d --rm "${publish[@]}" "$image" "$@")
	CONTAINERS+=("$CID")
}
host_port() { # CONTAINER PORT -> mapped port on 127.0.0.1
	local hp
	hp=$(docker port "$1" "$2/tcp" | head -n1)
	printf '%s\n' "${hp##*:}"
}
stop_container() { docker rm -f "$1" >/dev/null 2>&1 || true; }

# http_status PORT PATH: HTTP status code of GET http://127.0.0.1:PORT/PATH ("" if none).
http_status() {
	local port=$1 path=$2 line=""
	if command -v curl >/dev/null 2>&1; then
		curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port$path" 2>/dev/null || true
		return
	fi
	{
		exec 3<>"/dev/tcp/127.0.0.1/$port" &&
			printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3 &&
			IFS=' ' read -r -t 2 _ line _ <&3
	} 2>/dev/null || true
	exec 3>&- 2>/dev/null || true
	printf '%s' "$line"
}

# redis_ping PORT: prints PONG if redis answers on 127.0.0.1:PORT.
redis_ping() {
	local port=$1 line=""
	if command -v redis-cli >/dev/null 2>&1; then
		redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null || true
		return
	fi
	{
		exec 3<>"/dev/tcp/127.0.0.1/$port" &&
			printf 'PING\r\n' >&3 &&
			IFS= read -r -t 2 line <&3
	} 2>/dev/null || true
	exec 3>&- 2>/dev/null || true
	line=${line%$'\r'}
	printf '%s\n' "${line#+}"
}

nats_js_healthy() { [[ $(http_status "$1" "/healthz?js-enabled-only=true") == 200 ]]; }

# js_api_info PORT: speaks the NATS protocol on 127.0.0.1:PORT and prints the reply to
# a JetStream API request ($JS.API.INFO), or nothing if JetStream does not answer.
# (healthz?js-enabled-only=true also says 200 on a server without JetStream.)
js_api_info() {
	local port=$1 line payload='' deadline=$((SECONDS + 5))
	{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 0
	if IFS= read -r -t 2 line <&3; then # the server's INFO line
		# shellcheck disable=SC2016 # $JS is a NATS subject, not a shell variable
		printf 'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _verify.js 1\r\nPUB $JS.API.INFO _verify.js 0\r\n\r\n' >&3
		while ((SECONDS < deadline)) && IFS= read -r -t 2 line <&3; do
			case ${line%$'\r'} in
			'MSG _verify.js '*)
				IFS= read -r -t 2 payload <&3
				break
				;;
			PING) printf 'PONG\r\n' >&3 ;;
			esac
		done
	fi
	exec 3>&-
	printf '%s\n' "${payload%$'\r'}"
}
redis_pong() { [[ $(redis_ping "$1") == PONG ]]; }

# retry_until SECONDS CMD...: runs CMD every 0.2 s until it succeeds or time is up.
retry_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# --- nats ---------------------------------------------------------------------------
nats_version() {
	(cd "$REPO_ROOT" && GOWORK=off go list -m -f '{{.Version}}' "$NATS_MODULE") ||
		die "cannot read the $NATS_MODULE version from $REPO_ROOT/go.mod"
}

# go_install_static PKG@VERSION OUTDIR: installs a static binary for the engine's
# platform into OUTDIR (GOBIN cannot take cross-compiled binaries, hence the GOPATH case).
go_install_static() {
	local pkg=$1 out=$2 name
	name=$(basename "${pkg%@*}")
	[[ $name =~ ^v[0-9]+$ ]] && name=$(basename "$(dirname "${pkg%@*}")")
	if [[ $TARGET_OS/$TARGET_ARCH == "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" ]]; then
		(cd "$WORK" && GOWORK=off CGO_ENABLED=0 GOBIN="$out" go install -trimpath -ldflags='-s -w' "$pkg")
	else
		local gp="$WORK/gopath"
		(cd "$WORK" && GOWORK=off CGO_ENABLED=0 GOOS=$TARGET_OS GOARCH=$TARGET_ARCH GOBIN='' \
			GOPATH="$gp" GOMODCACHE="$(go env GOMODCACHE)" go install -trimpath -ldflags='-s -w' "$pkg")
		mv "$gp/bin/${TARGET_OS}_${TARGET_ARCH}/$name" "$out/$name"
	fi
	[[ -x $out/$name ]] || die "go install $pkg did not produce $out/$name"
}

verify_nats() {
	local tag=$1 version=$2 out cid port cport info
	out=$(docker run --rm "$tag" --version 2>&1) || die "nats: docker run --rm $tag --version failed: $out"
	[[ $out == *"$version"* ]] || die "nats: $tag --version printed '$out', want $version"
	log "nats: verify: docker run --rm $tag --version -> $out"
	run_detached "$tag" "4222 8222" -js -m 8222
	cid=$CID
	port=$(host_port "$cid" 8222)
	cport=$(host_port "$cid" 4222)
	if ! retry_until 15 nats_js_healthy "$port"; then
		docker logs "$cid" 2>&1 | tail -n 20 >&2
		die "nats: $tag -js not healthy on 127.0.0.1:$port/healthz?js-enabled-only=true within 15s"
	fi
	info=$(js_api_info "$cport")
	if [[ $info != *'"type":"io.nats.jetstream.api.v1.account_info_response"'* || $info == *'"error"'* ]]; then
		docker logs "$cid" 2>&1 | tail -n 20 >&2
		die "nats: $tag -js: \$JS.API.INFO on 127.0.0.1:$cport got '${info:0:200}', want an account_info_response"
	fi
	stop_container "$cid"
	log "nats: verify: -js -m 8222 -> GET 127.0.0.1:$port/healthz?js-enabled-only=true = 200; \$JS.API.INFO on 127.0.0.1:$cport -> account_info_response"
}

build_nats() {
	local tag=$NATS_IMAGE version key ctx
	version=$(nats_version)
	key="nats-server $version $TARGET_OS/$TARGET_ARCH"
	if ! should_build nats "$tag" "$key"; then
		return 0
	fi
	ctx="$WORK/nats"
	mkdir -p "$ctx/rootfs/tmp"
	chmod 1777 "$ctx/rootfs/tmp"
	log "nats: CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' $NATS_MODULE@$version"
	go_install_static "$NATS_MODULE@$version" "$ctx/rootfs"
	# JetStream's default store dir is $TMPDIR/nats/jetstream, hence /tmp.
	cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY rootfs/ /
EXPOSE 4222 6222 8222
ENTRYPOINT ["/nats-server"]
CMD ["-m", "8222"]
LABEL org.opencontainers.image.title="nats-server" \\
      org.opencontainers.image.version="$version" \\
      org.opencontainers.image.description="nats-server $version, static, FROM scratch (personaq offline build)"
EOF
	docker_build "$tag" "$ctx" "$key"
	if ((VERIFY)); then verify_nats "$tag" "$version"; fi
}

# --- redis --------------------------------------------------------------------------
ensure_redis_server() {
	if [[ ! -x /usr/bin/redis-server ]]; then
		if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
			log "redis: /usr/bin/redis-server missing; apt-get install -y redis-server"
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2 ||
				{ DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
					DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2; } ||
				die "redis: apt-get install redis-server failed"
		else
			die "redis: /usr/bin/redis-server not found; install Debian's redis-server package (apt-get install redis-server) and rerun"
		fi
	fi
}

verify_redis() {
	local tag=$1 out cid port
	out=$(docker run --rm "$tag" --version 2>&1) || die "redis: docker run --rm $tag --version failed: $out"
	log "redis: verify: docker run --rm $tag --version -> $out"
	run_detached "$tag" 6379
	cid=$CID
	port=$(host_port "$cid" 6379)
	if ! retry_until 15 redis_pong "$port"; then
		docker logs "$cid" 2>&1 | tail -n 20 >&2
		die "redis: $tag did not answer PING on 127.0.0.1:$port within 15s"
	fi
	stop_container "$cid"
	log "redis: verify: PING 127.0.0.1:$port -> PONG"
}

build_redis() {
	local tag=$REDIS_IMAGE bin real hostarch key ctx libs lib version
	inspect "$tag"
	if [[ -n $IMG_ID && $IMG_OURS == 1 && ! -x /usr/bin/redis-server && $FORCE == 0 ]]; then
		log "redis: $tag exists and this host has no redis-server to compare it with; skipping"
		return 0
	fi
	ensure_redis_server
	bin=/usr/bin/redis-server
	real=$(readlink -f "$bin")
	hostarch=$(uname -m)
	case $hostarch in x86_64) hostarch=amd64 ;; aarch64) hostarch=arm64 ;; esac
	[[ $hostarch == "$TARGET_ARCH" ]] ||
		die "redis: the engine runs $TARGET_ARCH but this host's redis-server is $hostarch; run on a host of the engine's architecture"
	version=$("$bin" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
	key="redis-server $version sha256:$(sha256sum "$real" | cut -c1-16) linux/$hostarch"
	should_build redis "$tag" "$key" || return 0

	ctx="$WORK/redis"
	mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/data" "$ctx/rootfs/tmp"
	chmod 1777 "$ctx/rootfs/tmp"
	# Copied under its own name: redis-server picks its mode from argv[0], and
	# Debian's /usr/bin/redis-server is a symlink to redis-check-rdb.
	cp -L "$bin" "$ctx/rootfs/usr/bin/redis-server"
	# Every library ldd lists, including the dynamic loader (the line with an
	# absolute path and no "=>"); linux-vdso has no file and is skipped.
	libs=$(ldd "$real" | awk '
		$2 == "=>" && $3 == "not" { print "MISSING " $1; next }
		$2 == "=>" && $3 ~ /^\//  { print $3; next }
		$1 ~ /^\//                { print $1 }')
	if grep -q '^MISSING' <<<"$libs"; then
		die "redis: ldd $real cannot resolve: $(grep '^MISSING' <<<"$libs" | cut -d' ' -f2 | tr '\n' ' ')"
	fi
	grep -q '/ld-linux' <<<"$libs" || die "redis: ldd $real listed no dynamic loader"
	while IFS= read -r lib; do
		cp --parents -L "$lib" "$ctx/rootfs/"
	done <<<"$libs"
	log "redis: $real ($version) + $(wc -l <<<"$libs") libraries from ldd"
	cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY rootfs/ /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--save", ""]
LABEL org.opencontainers.image.title="redis-server" \\
      org.opencontainers.image.version="$version" \\
      org.opencontainers.image.description="Debian's redis-server $version and its libraries, FROM scratch (personaq offline build)"
EOF
	docker_build "$tag" "$ctx" "$key"
	if ((VERIFY)); then verify_redis "$tag"; fi
}

# --- personaq -----------------------------------------------------------------------
# source_key: a hash of every file git would commit (or every file, outside git), so any
# change rebuilds; Go's build cache keeps that to seconds.
source_key() {
	local src=$1 h
	if git -C "$src" rev-parse --show-toplevel >/dev/null 2>&1; then
		h=$(cd "$src" && git ls-files -z --cached --others --exclude-standard |
			while IFS= read -r -d '' f; do [[ -f $f && ! -L $f ]] && printf '%s\0' "$f"; done |
			LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -c1-16)
	else
		h=$(cd "$src" && find . -path ./.git -prune -o -type f -print0 |
			LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -c1-16)
	fi
	printf 'src sha256:%s %s linux/%s\n' "$h" "$(go env GOVERSION)" "$TARGET_ARCH"
}

verify_personaq() {
	local tag=$1 user cid code
	user=$(docker image inspect --format '{{.Config.User}}' "$tag")
	[[ $user == "$UID_NONROOT:$UID_NONROOT" ]] || die "personaq: $tag runs as '$user', want $UID_NONROOT:$UID_NONROOT"
	cid=$(docker run -d "$tag" --help)
	CONTAINERS+=("$cid")
	if ! code=$(timeout 20 docker wait "$cid"); then
		stop_container "$cid"
		die "personaq: '$tag --help' still running after 20s"
	fi
	if [[ $code != 0 ]]; then
		docker logs "$cid" 2>&1 | tail -n 20 >&2
		stop_container "$cid"
		die "personaq: '$tag --help' exited $code"
	fi
	stop_container "$cid"
	log "personaq: verify: docker run $tag --help -> exit 0, user $user"
}

build_personaq() {
	local tag=$PERSONAQ_IMAGE src key ctx pkgname
	src=$(cd "$PERSONAQ_SRC" && pwd)
	if ! compgen -G "$src/cmd/personaq/*.go" >/dev/null; then
		die "personaq: $src/cmd/personaq has no Go files yet; cannot build $tag (build nats/redis only: build.sh nats redis)"
	fi
	key=$(source_key "$src")
	should_build personaq "$tag" "$key" || return 0

	# The Dockerfile below is the final stage of deployments/Dockerfile (the build for
	# users with a registry) with `COPY rootfs/` and `COPY home/` from this context in
	# place of its two `COPY --from=build` lines, so both give the same image shape:
	#   /usr/local/bin/personaq        static binary, ENTRYPOINT ["personaq"] via PATH
	#   /etc/passwd, /etc/group        root and nonroot (65532), like distroless :nonroot
	#   /etc/ssl/certs/ca-certificates.crt  (the host's CA bundle)
	#   /tmp (1777), /home/nonroot (owned by 65532; HOME and WORKDIR)
	#   USER 65532:65532
	# Keep the two in step; the labels may differ.
	ctx="$WORK/personaq"
	mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/home"
	chmod 1777 "$ctx/rootfs/tmp"
	pkgname=$(cd "$src" && GOWORK=off go list -f '{{.Name}}' ./cmd/personaq 2>&1) ||
		die "personaq: go list ./cmd/personaq failed in $src: $pkgname"
	[[ $pkgname == main ]] || die "personaq: $src/cmd/personaq is package $pkgname, not main"
	log "personaq: CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' ./cmd/personaq (in $src)"
	(cd "$src" && GOWORK=off CGO_ENABLED=0 GOOS=$TARGET_OS GOARCH=$TARGET_ARCH \
		go build -trimpath -ldflags '-s -w' -o "$ctx/rootfs/usr/local/bin/personaq" ./cmd/personaq) ||
		die "personaq: go build ./cmd/personaq failed in $src (output above)"
	[[ -f /etc/ssl/certs/ca-certificates.crt ]] ||
		die "personaq: /etc/ssl/certs/ca-certificates.crt not found on this host (apt-get install ca-certificates)"
	cp -L /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' \
		"$UID_NONROOT" "$UID_NONROOT" >"$ctx/rootfs/etc/passwd"
	printf 'root:x:0:\nnonroot:x:%s:\n' "$UID_NONROOT" >"$ctx/rootfs/etc/group"
	chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
	chmod 0755 "$ctx/rootfs/usr/local/bin/personaq"
	cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY rootfs/ /
COPY --chown=$UID_NONROOT:$UID_NONROOT home/ /home/nonroot/
ENV PATH=$STD_PATH
USER $UID_NONROOT:$UID_NONROOT
WORKDIR /home/nonroot
ENTRYPOINT ["personaq"]
LABEL org.opencontainers.image.title="personaq" \\
      org.opencontainers.image.source="https://github.com/personaq/personaq" \\
      org.opencontainers.image.description="personaq, static, FROM scratch, non-root (offline build of deployments/Dockerfile's final stage)"
EOF
	docker_build "$tag" "$ctx" "$key"
	if ((VERIFY)); then verify_personaq "$tag"; fi
}

# --- main ---------------------------------------------------------------------------
declare -A SEEN=()
SUMMARY=()
for t in "${TARGETS[@]}"; do
	[[ -n ${SEEN[$t]:-} ]] && continue
	SEEN[$t]=1
	start=$(date +%s%N)
	"build_$t"
	ms=$((($(date +%s%N) - start) / 1000000))
	case $t in nats) tag=$NATS_IMAGE ;; redis) tag=$REDIS_IMAGE ;; personaq) tag=$PERSONAQ_IMAGE ;; esac
	inspect "$tag"
	if [[ -n $IMG_ID ]]; then
		SUMMARY+=("$(printf '%-9s %-26s %s  %5.1f MB  %3d.%01ds' "$t" "$tag" "${IMG_ID:7:12}" \
			"$((IMG_SIZE / 100000))e-1" $((ms / 1000)) $((ms % 1000 / 100)))")
	else
		SUMMARY+=("$(printf '%-9s %-28s (not present locally)' "$t" "$tag")")
	fi
done
log "done:"
printf '  %s\n' "${SUMMARY[@]}"
