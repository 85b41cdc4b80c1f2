// Package config loads personaq's YAML configuration file (an annotated
// example is deployments/personaq.yaml) and builds what the runtime needs
// from it: personas with their invokers and retry policies, the stream
// topology, and NATS and Redis connection options.
//
// Load decodes strictly (an unknown or misspelled key is an error naming
// its line), applies environment overrides, then defaults, then
// validates. Every problem found is reported at once, each naming its
// field by YAML path:
//
//	invalid config: personas.planner.invoker.url: required for type http
//	invalid config: topology.replicas: must be 1, 3 or 5, got 2
//	invalid config: nats.nmae: line 3: unknown key "nmae"
//
// Secrets (passwords, tokens, passwords inside URLs, HTTP header and
// command environment values) never appear in errors, logs, or the output
// of WriteRedacted, which is what `personaq config check` prints.
//
// # Environment
//
// Every scalar field can be overridden by PERSONAQ_<PATH>, PATH being the
// field's YAML path upper-cased with dots as underscores. Lists are
// comma-separated; an empty value counts as unset. The variables:
//
//	PERSONAQ_NATS_URLS                          nats.urls (comma-separated)
//	PERSONAQ_NATS_CREDS_FILE                    nats.creds_file
//	PERSONAQ_NATS_NKEY_FILE                     nats.nkey_file
//	PERSONAQ_NATS_USER                          nats.user
//	PERSONAQ_NATS_PASSWORD                      nats.password
//	PERSONAQ_NATS_TOKEN                         nats.token
//	PERSONAQ_NATS_NAME                          nats.name
//	PERSONAQ_NATS_TLS_ENABLED                   nats.tls.enabled
//	PERSONAQ_NATS_TLS_CA_FILE                   nats.tls.ca_file
//	PERSONAQ_NATS_TLS_CERT_FILE                 nats.tls.cert_file
//	PERSONAQ_NATS_TLS_KEY_FILE                  nats.tls.key_file
//	PERSONAQ_NATS_TLS_INSECURE_SKIP_VERIFY      nats.tls.insecure_skip_verify
//	PERSONAQ_REDIS_URL                          redis.url
//	PERSONAQ_REDIS_ADDRS                        redis.addrs (comma-separated)
//	PERSONAQ_REDIS_SENTINEL_MASTER_NAME         redis.sentinel.master_name
//	PERSONAQ_REDIS_SENTINEL_ADDRS               redis.sentinel.addrs (comma-separated)
//	PERSONAQ_REDIS_USERNAME                     redis.username
//	PERSONAQ_REDIS_PASSWORD                     redis.password
//	PERSONAQ_REDIS_DB                           redis.db
//	PERSONAQ_REDIS_TLS_ENABLED                  redis.tls.enabled
//	PERSONAQ_REDIS_TLS_CA_FILE                  redis.tls.ca_file
//	PERSONAQ_REDIS_TLS_CERT_FILE                redis.tls.cert_file
//	PERSONAQ_REDIS_TLS_KEY_FILE                 redis.tls.key_file
//	PERSONAQ_REDIS_TLS_INSECURE_SKIP_VERIFY     redis.tls.insecure_skip_verify
//	PERSONAQ_REDIS_TTL                          redis.ttl
//	PERSONAQ_REDIS_PREFIX                       redis.prefix
//	PERSONAQ_TOPOLOGY_REQUESTS_STREAM           topology.requests_stream
//	PERSONAQ_TOPOLOGY_REQUESTS_PREFIX           topology.requests_prefix
//	PERSONAQ_TOPOLOGY_QUARANTINE_STREAM         topology.quarantine_stream
//	PERSONAQ_TOPOLOGY_QUARANTINE_PREFIX         topology.quarantine_prefix
//	PERSONAQ_TOPOLOGY_OUTCOMES_STREAM           topology.outcomes_stream
//	PERSONAQ_TOPOLOGY_OUTCOMES_PREFIX           topology.outcomes_prefix
//	PERSONAQ_TOPOLOGY_REPLICAS                  topology.replicas
//	PERSONAQ_TOPOLOGY_STORAGE                   topology.storage
//	PERSONAQ_TOPOLOGY_DUPLICATE_WINDOW          topology.duplicate_window
//	PERSONAQ_TOPOLOGY_OUTCOMES_MAX_AGE          topology.outcomes_max_age
//	PERSONAQ_TOPOLOGY_OUTPUTS_BUCKET            topology.outputs_bucket
//	PERSONAQ_TOPOLOGY_INLINE_OUTPUT_MAX         topology.inline_output_max
//	PERSONAQ_TOPOLOGY_ATTEMPTS_STREAM           topology.attempts_stream
//	PERSONAQ_TOPOLOGY_ATTEMPTS_PREFIX           topology.attempts_prefix
//	PERSONAQ_TOPOLOGY_ATTEMPTS_MAX_AGE          topology.attempts_max_age
//	PERSONAQ_TOPOLOGY_ATTEMPTS_MAX_BYTES        topology.attempts_max_bytes
//	PERSONAQ_TOPOLOGY_OUTPUT_STREAM             topology.output_stream
//	PERSONAQ_TOPOLOGY_OUTPUT_PREFIX             topology.output_prefix
//	PERSONAQ_TOPOLOGY_OUTPUT_MAX_AGE            topology.output_max_age
//	PERSONAQ_TOPOLOGY_OUTPUT_MAX_BYTES          topology.output_max_bytes
//	PERSONAQ_TOPOLOGY_OUTPUT_ATTEMPT_MAX        topology.output_attempt_max
//	PERSONAQ_RUNTIME_DRAIN_TIMEOUT              runtime.drain_timeout
//	PERSONAQ_RUNTIME_FETCH_MAX_WAIT             runtime.fetch_max_wait
//	PERSONAQ_RUNTIME_UNKNOWN_PERSONA_GRACE      runtime.unknown_persona_grace
//	PERSONAQ_RUNTIME_ATTEMPT_EVENTS             runtime.attempt_events
//	PERSONAQ_API_LISTEN                         api.listen
//	PERSONAQ_API_TLS_CERT                       api.tls_cert
//	PERSONAQ_API_TLS_KEY                        api.tls_key
//	PERSONAQ_API_INDEX_SIZE                     api.index_size
//	PERSONAQ_DEFAULTS_POLICY                    defaults.policy
//	PERSONAQ_DEFAULTS_CONCURRENCY               defaults.concurrency
//	PERSONAQ_DEFAULTS_MAX_REPLICAS              defaults.max_replicas
//	PERSONAQ_DEFAULTS_TIMEOUT                   defaults.timeout
//	PERSONAQ_DEFAULTS_CODING_TIMEOUT            defaults.coding_timeout
//	PERSONAQ_DEFAULTS_MAX_RETRIES               defaults.max_retries
//	PERSONAQ_DEFAULTS_CIRCUIT_FAILURES          defaults.circuit.failures
//	PERSONAQ_DEFAULTS_CIRCUIT_COOL_DOWN         defaults.circuit.cool_down
//
// For each persona in the file, NAME being its name upper-cased with '-'
// as '_' (tester-qa → TESTER_QA):
//
//	PERSONAQ_PERSONAS_<NAME>_TIMEOUT            personas.<name>.timeout (see below)
//	PERSONAQ_PERSONAS_<NAME>_POLICY             personas.<name>.policy.preset
//	PERSONAQ_PERSONAS_<NAME>_CONCURRENCY        personas.<name>.concurrency
//	PERSONAQ_PERSONAS_<NAME>_MAX_REPLICAS       personas.<name>.max_replicas
//	PERSONAQ_PERSONAS_<NAME>_ACK_WAIT           personas.<name>.ack_wait
//	PERSONAQ_PERSONAS_<NAME>_MAX_DELIVER        personas.<name>.max_deliver
//	PERSONAQ_PERSONAS_<NAME>_CODING             personas.<name>.coding
//	PERSONAQ_PERSONAS_<NAME>_RATE_LIMIT_LIMITER personas.<name>.rate_limit.limiter
//	PERSONAQ_PERSONAS_<NAME>_CIRCUIT_FAILURES   personas.<name>.circuit.failures
//	PERSONAQ_PERSONAS_<NAME>_CIRCUIT_COOL_DOWN  personas.<name>.circuit.cool_down
//	PERSONAQ_PERSONAS_<NAME>_CIRCUIT_DISABLED   personas.<name>.circuit.disabled
//	PERSONAQ_PERSONAS_<NAME>_INVOKER_URL        personas.<name>.invoker.url
//	PERSONAQ_PERSONAS_<NAME>_INVOKER_PATH       personas.<name>.invoker.path
//	PERSONAQ_PERSONAS_<NAME>_INVOKER_MAX_RESPONSE_BYTES personas.<name>.invoker.max_response_bytes
//
// and the step budget's PERSONA_TIMEOUTS_JSON, persona name to milliseconds:
//
//	PERSONA_TIMEOUTS_JSON='{"context":60000,"lead-engineer":90000}'
//
// Every variable wins over the file. PERSONAQ_API_TOKEN is not a field:
// `personaq api` and `personaq dev` take it as one more API token, named
// env, with every scope.
//
// # Persona timeouts
//
// This is the one place the precedence of a persona's attempt timeout is
// written down. Highest first, environment over file like every other
// setting:
//
//  1. PERSONAQ_PERSONAS_<NAME>_TIMEOUT;
//  2. the persona's PERSONA_TIMEOUTS_JSON entry;
//  3. its timeout in the file (or policy.attempt_timeout, another
//     spelling of it);
//  4. the built-in persona timeouts (planner 30s, context and tester-qa
//     60s, lead-engineer 90s);
//  5. defaults.coding_timeout, for a persona marked coding: true;
//  6. defaults.timeout.
//
// PersonaConfig.TimeoutSource says which one applied; `personaq config
// check` prints it. A request's policy_overrides.attempt_timeout_ms wins
// over all of them for that request.
//
// # Retries
//
// A persona's attempts come from its policy: max_attempts when written
// (1 to 1000; an explicit 0 is an error, not "the preset's"), else the
// preset's, except that the persona preset takes defaults.max_retries + 1
// (3 retries, 4 attempts, unless set).
package config
