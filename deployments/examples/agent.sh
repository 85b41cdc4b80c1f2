#!/bin/sh
# A stand-in agent CLI for personaq's command invoker (persona tester-qa in
# deployments/personaq.yaml). personaq writes the request envelope as JSON on
# stdin and describes the attempt in PERSONAQ_* variables; progress goes to
# stdout as JSON lines, and so does the usage of each model call
# ({"personaq_usage":{...}}, added up); the exit code is the outcome class:
#   0 success · 75 retryable (EX_TEMPFAIL) · 65 validation (EX_DATAERR)
#   69 network (EX_UNAVAILABLE) · anything else terminal.
req=$(cat)
case "$req" in
*'"mode":"broken"'*)
	echo "agent: the test plan is not valid YAML (line 3)" >&2
	exit 1 ;;
esac
echo '{"progress":{"completed":1,"total":2}}'
echo '{"personaq_usage":{"input_tokens":1800,"output_tokens":420,"cost_usd":0.0117}}'
if [ "${PERSONAQ_ATTEMPT:-1}" -lt 2 ]; then
	echo "agent ${PERSONAQ_AGENT:-?}: model overloaded, try again" >&2
	exit 75
fi
echo '{"progress":{"completed":2,"total":2}}'
echo '{"result":"all 12 tests pass"}'
