#!/usr/bin/env bash
# scale-demo.sh runs the compose cluster with N personaq replicas, publishes a
# workload, waits until every request has ended, and prints what happened:
# containers, streams, consumers, outcomes by kind, which replica ran what,
# and the drain throughput. README.md's "Scaling" section is its output.
#
#   deployments/compose/scale-demo.sh 3        # one run with 3 replicas
#   deployments/compose/scale-demo.sh 1 3      # same workload on 1, then 3 replicas
#
# Each run starts from nothing (down -v), brings up NATS x3, Redis, the demo
# persona and `init` with no replica, publishes the whole workload, then
# scales personaq to N and times the drain from the server's own timestamps
# (first and last outcome event stored). The cluster is torn down at the
# end unless KEEP=1.
#
# Environment (defaults in brackets):
#   ECHO [1200] FLAKY [60] REJECT [30]  requests per persona
#   WORK_MS [200]     how long the demo persona works on each echo attempt
#   PARALLEL [8]      concurrent publishers
#   KEEP [0]          1: leave the last cluster running
#   KILL_NODE [none]  leader: SIGKILL the NATS node leading PERSONAQ_REQUESTS
#                     KILL_AFTER [2] seconds into the drain, start it again
#                     KILL_FOR [10] seconds later (nats1 is never killed: it
#                     publishes the host's ports, so leadership is moved off
#                     it first); the report then counts requests lost and
#                     work run twice
#   COMPOSE_PROJECT_NAME [personaq], NATS_*_PASSWORD, PERSONAQ_NATS_PORT [4222],
#   PERSONAQ_NATS_MONITOR_PORT [8222], DEMO_PERSONA_PORT [8080]: as in docker-compose.yml
# Needs docker-compose, curl, jq, bc and go (to build loadgen/, which publishes
# the workload through personaq's own consumers.PublishRequest).
set -euo pipefail

DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$DIR/../.." && pwd)
PROJECT=${COMPOSE_PROJECT_NAME:-personaq}
COMPOSE=(docker-compose -p "$PROJECT" -f "$DIR/docker-compose.yml")
ECHO=${ECHO:-1200} FLAKY=${FLAKY:-60} REJECT=${REJECT:-30}
WORK_MS=${WORK_MS:-200} PARALLEL=${PARALLEL:-8} KEEP=${KEEP:-0}
KILL_NODE=${KILL_NODE:-} KILL_AFTER=${KILL_AFTER:-2} KILL_FOR=${KILL_FOR:-10}
[[ -z $KILL_NODE || $KILL_NODE == leader ]] || { echo "scale-demo.sh: KILL_NODE must be empty or 'leader', not '$KILL_NODE'" >&2; exit 2; }
NATS_PORT=${PERSONAQ_NATS_PORT:-4222}
MON="http://127.0.0.1:${PERSONAQ_NATS_MONITOR_PORT:-8222}"
DEMO="http://127.0.0.1:${DEMO_PERSONA_PORT:-8080}"
ADMIN_PW=${NATS_ADMIN_PASSWORD:-admin-demo}
PUB_URL="nats://publisher:${NATS_PUBLISHER_PASSWORD:-publisher-demo}@127.0.0.1:$NATS_PORT"
TOTAL=$((ECHO + FLAKY + REJECT))
(($#)) || set -- 3

say() { printf '\n== %s\n' "$*"; }
run() { # prints the command, then runs it
	printf '$ %s\n' "$*"
	"$@"
}
die() {
	printf 'scale-demo.sh: %s\n' "$*" >&2
	exit 1
}

# check_images names every image the cluster needs that is not on this
# host, and how to build it: nothing is pulled (compose would otherwise fail
# with "invalid container name or ID: value is empty").
check_images() {
	local missing=() spec img how
	docker info >/dev/null 2>&1 || die "the docker engine is not reachable (docker info failed)"
	for spec in \
		"${PERSONAQ_NATS_IMAGE:-personaq/nats:local}|bash integration/images/build.sh" \
		"${PERSONAQ_REDIS_IMAGE:-personaq/redis:local}|bash integration/images/build.sh" \
		"${PERSONAQ_IMAGE:-personaq/personaq:local}|bash integration/images/build.sh" \
		"${DEMO_PERSONA_IMAGE:-personaq/demo-persona:local}|bash deployments/demo-persona/build.sh"; do
		img=${spec%%|*} how=${spec#*|}
		docker image inspect "$img" >/dev/null 2>&1 || missing+=("  $img: build it with \`$how\` (from $REPO)")
	done
	((${#missing[@]} == 0)) || die "$(printf 'image(s) not on this host (nothing is pulled):\n%s' "$(printf '%s\n' "${missing[@]}")")"
}
check_images

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; ((KEEP)) || "${COMPOSE[@]}" down -v >/dev/null 2>&1 || true' EXIT

LOADGEN=$TMP/loadgen
(cd "$REPO" && go build -o "$LOADGEN" ./deployments/compose/loadgen) || die "go build ./deployments/compose/loadgen failed"

# js_api SUBJECT PAYLOAD: one JetStream API request as admin over the plain
# NATS protocol (no nats CLI needed); prints the JSON reply.
js_api() {
	local subject=$1 payload=$2 line reply=''
	exec 3<>"/dev/tcp/127.0.0.1/$NATS_PORT"
	IFS= read -r -t 5 line <&3 # INFO
	printf 'CONNECT {"user":"admin","pass":"%s","verbose":false,"pedantic":false}\r\nSUB _demo.reply 1\r\nPUB %s _demo.reply %d\r\n%s\r\n' \
		"$ADMIN_PW" "$subject" "${#payload}" "$payload" >&3
	while IFS= read -r -t 5 line <&3; do
		case ${line%$'\r'} in
		'MSG _demo.reply '*)
			IFS= read -r -t 5 reply <&3
			break
			;;
		PING) printf 'PONG\r\n' >&3 ;;
		-ERR*) printf '%s\n' "$line" >&2 && break ;;
		esac
	done
	exec 3>&-
	printf '%s\n' "${reply%$'\r'}"
}

jsz() { curl -fsS "$MON/jsz?acc=PERSONAQ&streams=true&consumers=true&config=true"; }
stream_msgs() { jsz | jq -r --arg s "$1" '[.account_details[0].stream_detail[]? | select(.name == $s) | .state.messages][0] // 0'; }
stream_leader() { jsz | jq -r --arg s "$1" '[.account_details[0].stream_detail[]? | select(.name == $s) | .cluster.leader][0] // ""'; }

# kill_leader waits KILL_AFTER seconds, SIGKILLs the node leading the
# requests stream (moving the leadership off nats1 first) and starts it
# again KILL_FOR seconds later, printing what it did.
kill_leader() {
	local leader tries=0 c
	sleep "$KILL_AFTER"
	leader=$(stream_leader PERSONAQ_REQUESTS)
	while [[ $leader == nats1 || -z $leader ]] && ((tries++ < 10)); do
		js_api '$JS.API.STREAM.LEADER.STEPDOWN.PERSONAQ_REQUESTS' '' >/dev/null
		sleep 1
		leader=$(stream_leader PERSONAQ_REQUESTS)
	done
	[[ $leader == nats2 || $leader == nats3 ]] || { echo "kill: the requests stream's leader is '$leader'; nothing killed" >&2; return 1; }
	c=$("${COMPOSE[@]}" ps -q "$leader")
	echo "kill: $(date -u +%T.%N | cut -c1-12) SIGKILL $leader (leader of PERSONAQ_REQUESTS) with $(stream_msgs PERSONAQ_OUTCOMES) of $TOTAL outcomes stored"
	docker kill -s KILL "$c" >/dev/null
	sleep "$KILL_FOR"
	docker start "$c" >/dev/null
	echo "kill: $(date -u +%T.%N | cut -c1-12) $leader started again; requests stream leader now $(stream_leader PERSONAQ_REQUESTS)"
}

one_run() {
	local n=$1 deadline left outs
	say "run with $n replica(s): $TOTAL requests (echo $ECHO with ${WORK_MS} ms of work, flaky $FLAKY, reject $REJECT)"
	"${COMPOSE[@]}" down -v >/dev/null 2>&1 || true
	run "${COMPOSE[@]}" up -d --scale personaq=0 2>&1 | grep -E '\.\.\. done' || true
	[[ $(docker wait "$("${COMPOSE[@]}" ps -q init)") == 0 ]] || die "init failed: $("${COMPOSE[@]}" logs init | tail -5)"
	curl -fsS -X DELETE "$DEMO/stats" >/dev/null

	local load=(-requests "echo=$ECHO,flaky=$FLAKY,reject=$REJECT" -input "{\"work_ms\":$WORK_MS}" -task-prefix "run$n")
	printf '$ go run ./deployments/compose/loadgen -nats-url nats://publisher:***@127.0.0.1:%s %s\n' "$NATS_PORT" "${load[*]}"
	"$LOADGEN" -nats-url "$PUB_URL" "${load[@]}"
	echo "PERSONAQ_REQUESTS holds $(stream_msgs PERSONAQ_REQUESTS) messages; no replica is running yet"

	run "${COMPOSE[@]}" up -d --scale "personaq=$n" 2>&1 | grep -E "^Creating ${PROJECT}_personaq.*\.\.\. done" || true
	local killer=''
	if [[ -n $KILL_NODE ]]; then
		kill_leader &
		killer=$!
	fi
	deadline=$((SECONDS + 600))
	while :; do
		left=$(stream_msgs PERSONAQ_REQUESTS)
		outs=$(stream_msgs PERSONAQ_OUTCOMES)
		[[ $left == 0 && $outs -ge $TOTAL ]] && break
		((SECONDS < deadline)) || die "not drained after 600 s: $left requests left, $outs outcomes"
		sleep 0.5
	done
	if [[ -n $killer ]]; then
		wait "$killer" || die "the node kill did not happen"
	fi

	say "docker-compose ps"
	"${COMPOSE[@]}" ps
	say "replicas ready (GET :9090/readyz of each, probed from inside the network)"
	local c
	for c in $("${COMPOSE[@]}" ps -q personaq); do
		name=$(docker inspect --format '{{.Name}}' "$c")
		name=${name#/}
		if docker run --rm --network "${PROJECT}_default" "${DEMO_PERSONA_IMAGE:-personaq/demo-persona:local}" \
			-probe -probe-timeout 5s "http://$name:9090/readyz" >/dev/null 2>&1; then
			echo "$name: ready"
		else
			echo "$name: NOT ready"
		fi
	done

	say "streams (R3, sync_interval: always) — GET $MON/jsz?acc=PERSONAQ&streams=true&consumers=true&config=true"
	jsz | jq -r '.account_details[0].stream_detail[] | "\(.name): \(.state.messages) messages, replicas \(.config.num_replicas), leader \(.cluster.leader)"' | sort
	say "consumers (one durable per persona, shared by all replicas)"
	jsz | jq -r '.account_details[0].stream_detail[] | select(.name == "PERSONAQ_REQUESTS") | .consumer_detail[] |
		"\(.name): delivered \(.delivered.stream_seq) (stream seq), redelivered \(.num_redelivered), pending \(.num_pending), ack pending \(.num_ack_pending)"' | sort
	say "outcome events and quarantine records by outcome or reason, and persona (\$JS.API.STREAM.INFO with subjects_filter)"
	for s in PERSONAQ_OUTCOMES PERSONAQ_QUARANTINE; do
		# Outcome subjects end with the request's key: counted per <prefix>.<kind>.<outcome>.<persona>.
		js_api "\$JS.API.STREAM.INFO.$s" '{"subjects_filter":">"}' |
			jq -r '.state.subjects | to_entries | group_by(.key | split(".")[0:4] | join(".")) | .[] |
				"\(.[0].key | split(".")[0:4] | join(".")): \(map(.value) | add)"' | sort
	done
	say "attempts seen by the demo persona, by caller (GET $DEMO/stats)"
	curl -fsS "$DEMO/stats" | jq -r '.personas | to_entries[] |
		"\(.key): \(.value.calls) calls; status \(.value.by_status | to_entries | map("\(.key)×\(.value)") | join(" ")); attempt \(.value.by_attempt | to_entries | map("\(.key)×\(.value)") | join(" "))\n  by replica: \(.value.by_caller | to_entries | sort_by(.key) | map("\(.key) \(.value)") | join(", "))"'

	if [[ -n $KILL_NODE ]]; then
		local records rerun
		records=$(js_api '$JS.API.STREAM.INFO.PERSONAQ_OUTCOMES' '{"subjects_filter":">"}' | jq '[.state.subjects[]] | add // 0')
		rerun=$(curl -fsS "$DEMO/stats" | jq '[.personas[] | .repeated_attempts + .after_success] | add // 0')
		say "node kill: $((TOTAL - records)) of $TOTAL requests without a terminal record (lost), $rerun calls of work already done (an attempt called again, or a call after a success)"
	fi

	local first last window rate
	read -r first last < <(jsz | jq -r '.account_details[0].stream_detail[] | select(.name == "PERSONAQ_OUTCOMES") | "\(.state.first_ts) \(.state.last_ts)"')
	window=$(echo "$(date -d "$last" +%s.%N) - $(date -d "$first" +%s.%N)" | bc)
	rate=$(echo "scale=1; $TOTAL / $window" | bc)
	say "drain: first outcome $first, last $last: $TOTAL requests in $(printf '%.2f' "$window") s = $rate requests/s with $n replica(s)"
	SUMMARY+=("$n $window $rate")
}

SUMMARY=()
for n in "$@"; do one_run "$n"; done

say "summary (same workload; throughput = requests / (last outcome - first outcome))"
printf '%-9s %-10s %-14s %s\n' replicas "drain (s)" "requests/s" "efficiency = rate(N) / (N x rate(1))"
base=''
for row in "${SUMMARY[@]}"; do
	read -r n window rate <<<"$row"
	[[ $n == 1 ]] && base=$rate
	eff='-'
	[[ -n $base ]] && eff=$(echo "scale=2; $rate / ($n * $base)" | bc)
	printf '%-9s %-10.2f %-14s %s\n' "$n" "$window" "$rate" "$eff"
done
if ((KEEP)); then
	say "cluster left running (KEEP=1); stop it with: ${COMPOSE[*]} down -v"
else
	say "tearing down: ${COMPOSE[*]} down -v"
fi
