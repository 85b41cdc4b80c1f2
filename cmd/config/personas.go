package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/personaq/personaq/consumers"
	"github.com/personaq/personaq/handlers"
	"github.com/personaq/personaq/retry"
)

// Personas builds the runtime's personas, sorted by name: each invoker
// (handlers.NewHTTP, handlers.NewCommand or a handlers.DemoPersonas entry)
// and its resolved retry policy (preset plus inline changes, the persona's
// timeout as AttemptTimeout). It logs one line per persona on logger (nil:
// none), without secrets.
func (f *File) Personas(logger *zerolog.Logger) ([]consumers.Persona, error) {
	log := zerolog.Nop()
	if logger != nil {
		log = *logger
	}
	var probs problems
	out := make([]consumers.Persona, 0, len(f.PersonaConfigs))
	for _, name := range slices.Sorted(maps.Keys(f.PersonaConfigs)) {
		pc := f.PersonaConfigs[name]
		n := len(probs)
		pc.validate(name, &probs) // Load did, but f may have changed since
		if len(probs) > n {
			continue
		}
		pol := pc.policy(name, &probs)
		h := pc.Invoker.handler(join("personas."+name, "invoker"), &probs)
		if len(probs) > n {
			continue
		}
		out = append(out, consumers.Persona{
			Name: name, Handler: h, Policy: pol,
			Concurrency: pc.Concurrency, MaxReplicas: pc.MaxReplicas,
			AckWait: pc.AckWait.Std(), MaxDeliver: pc.MaxDeliver,
			Limiter: pc.RateLimit.Limiter, Circuit: pc.Circuit.circuit(),
		})
		log.Info().Str("persona", name).Str("invoker", pc.Invoker.Type).
			Dur("timeout", pol.AttemptTimeout).Str("timeout_source", pc.timeoutSource).
			Str("policy", pol.Name).Int("max_attempts", pol.MaxAttempts).Str("schedule", scheduleText(pol)).
			Int("concurrency", pc.Concurrency).Msg("persona configured")
	}
	if len(probs) > 0 {
		return nil, probs.err()
	}
	return out, nil
}

func scheduleText(p retry.Policy) string {
	if p.Schedule == nil {
		return ""
	}
	return p.Schedule.String()
}

// handler builds the invoker; problems are named below path.
func (iv InvokerConfig) handler(path string, probs *problems) handlers.Handler {
	switch iv.Type {
	case InvokerHTTP:
		h, err := handlers.NewHTTP(handlers.HTTPConfig{
			URL: iv.URL, Headers: maps.Clone(iv.Headers),
			MaxResponseBytes: iv.MaxResponseBytes, ValidationOn422: iv.ValidationOn422,
		})
		if err != nil {
			probs.addErr(path, err, func(s string) string { return redactIn(s, iv.URL) })
			return nil
		}
		return h
	case InvokerCommand:
		codes := make(map[int]retry.Class, len(iv.ExitCodes))
		for k, v := range iv.ExitCodes {
			n, err := exitCode(k, v)
			if err != nil {
				probs.add(join(path, "exit_codes."+k), "%v", err)
				continue
			}
			codes[n], _ = retry.ParseClass(v)
		}
		h, err := handlers.NewCommand(handlers.CommandConfig{
			Path: iv.Path, Args: slices.Clone(iv.Args), Env: envList(iv.Env), Dir: iv.Dir,
			ExitCodes: codes, StderrTail: iv.StderrTail, MaxOutputBytes: int(iv.MaxResponseBytes),
			KillGrace: iv.KillGrace.Std(),
		})
		if err != nil {
			probs.addErr(path, err, nil)
			return nil
		}
		return h
	case InvokerDemo:
		if h, ok := handlers.DemoPersonas()[iv.Demo]; ok {
			return h
		}
		probs.add(join(path, "demo"), "unknown demo persona %q", iv.Demo)
		return nil
	}
	probs.add(join(path, "type"), "unknown invoker type %q (want http, command or demo)", iv.Type)
	return nil
}

// envList turns env into sorted KEY=value entries.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// redactIn hides url's secrets in a message that quotes it.
func redactIn(msg, url string) string {
	if url == "" {
		return msg
	}
	return strings.ReplaceAll(msg, url, RedactURL(url))
}
