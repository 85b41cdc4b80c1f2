package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// PersonaInfo is what a served persona's durable consumer says about its
// retry policy: every replica writes it there at start, so a client that
// submits a step can compute the step budget (maximum attempts × attempt
// timeout + the backoffs + a buffer) without the replicas' configuration.
type PersonaInfo struct {
	Name           string
	Policy         string
	MaxAttempts    int
	AttemptTimeout time.Duration
	// Backoffs[i] is the longest wait before retry i+1.
	Backoffs []time.Duration
}

// Consumer metadata keys.
const (
	metaPolicy      = "personaq.policy"
	metaMaxAttempts = "personaq.max_attempts"
	metaTimeout     = "personaq.attempt_timeout_ms"
	metaBackoffs    = "personaq.backoffs_ms"
)

// PersonaInfoOf is what a replica serving persona name with policy p
// writes on its durable consumer (see Metadata).
func PersonaInfoOf(name string, p retry.Policy) PersonaInfo {
	b := retry.NewBudget(p)
	return PersonaInfo{Name: name, Policy: p.Name, MaxAttempts: p.MaxAttempts, AttemptTimeout: p.AttemptTimeout, Backoffs: b.Backoffs}
}

// Metadata is p as durable consumer metadata, which LookupPersona reads.
func (p PersonaInfo) Metadata() map[string]string {
	ms := make([]string, len(p.Backoffs))
	for i, d := range p.Backoffs {
		ms[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	return map[string]string{
		metaPolicy: p.Policy, metaMaxAttempts: strconv.Itoa(p.MaxAttempts),
		metaTimeout: strconv.FormatInt(p.AttemptTimeout.Milliseconds(), 10), metaBackoffs: strings.Join(ms, ","),
	}
}

func parsePersonaInfo(name string, md map[string]string) (PersonaInfo, error) {
	p := PersonaInfo{Name: name, Policy: md[metaPolicy]}
	var err error
	if p.MaxAttempts, err = strconv.Atoi(md[metaMaxAttempts]); err != nil || p.MaxAttempts < 1 {
		return p, fmt.Errorf("persona %s: consumer metadata %s: %q", name, metaMaxAttempts, md[metaMaxAttempts])
	}
	ms, err := strconv.ParseInt(md[metaTimeout], 10, 64)
	if err != nil || ms < 1 {
		return p, fmt.Errorf("persona %s: consumer metadata %s: %q", name, metaTimeout, md[metaTimeout])
	}
	p.AttemptTimeout = time.Duration(ms) * time.Millisecond
	for _, f := range strings.FieldsFunc(md[metaBackoffs], func(r rune) bool { return r == ',' }) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return p, fmt.Errorf("persona %s: consumer metadata %s: %q", name, metaBackoffs, md[metaBackoffs])
		}
		p.Backoffs = append(p.Backoffs, time.Duration(v)*time.Millisecond)
	}
	return p, nil
}

// policy is the persona's policy as far as its budget goes: its attempts,
// timeout and the upper bound of each backoff.
func (p PersonaInfo) policy() retry.Policy {
	return retry.Policy{Name: p.Policy, Persona: p.Name, MaxAttempts: p.MaxAttempts, AttemptTimeout: p.AttemptTimeout,
		Schedule: retry.List{Delays: slices.Clone(p.Backoffs)}}
}

// Budget is the step budget of req on this persona: the persona's policy,
// or the preset req names (keeping the persona's attempt timeout), with
// req's inline overrides, as the replicas will run it.
func (p PersonaInfo) Budget(req *schemas.PersonaRequest, presets func(string) (retry.Policy, error)) (retry.Budget, error) {
	if presets == nil {
		presets = retry.Preset
	}
	pol, err := RequestPolicy(p.policy(), req, presets)
	if err != nil {
		return retry.Budget{}, err
	}
	pol.Persona = p.Name
	return retry.NewBudget(pol), nil
}

// LookupPersona reads the persona's policy from its durable consumer. A
// persona no replica has provisioned is ErrUnknownPersona, naming the
// personas that are served.
func LookupPersona(ctx context.Context, js jetstream.JetStream, t Topology, persona string) (PersonaInfo, error) {
	t = t.WithDefaults()
	c, err := js.Consumer(ctx, t.RequestsStream, Durable(persona))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		known, lerr := servedPersonas(ctx, js, t)
		if lerr != nil {
			return PersonaInfo{}, fmt.Errorf("%w: %q (and listing the served ones failed: %w)", ErrUnknownPersona, persona, lerr)
		}
		return PersonaInfo{}, fmt.Errorf("%w: %q is served by no replica; served: %s", ErrUnknownPersona, persona, strings.Join(known, ", "))
	}
	if err != nil {
		return PersonaInfo{}, fmt.Errorf("persona %s: %w", persona, err)
	}
	return parsePersonaInfo(persona, c.CachedInfo().Config.Metadata)
}

// servedPersonas lists the personas that have a durable consumer, sorted.
func servedPersonas(ctx context.Context, js jetstream.JetStream, t Topology) ([]string, error) {
	t = t.WithDefaults()
	s, err := js.Stream(ctx, t.RequestsStream)
	if err != nil {
		return nil, fmt.Errorf("requests stream %s: %w", t.RequestsStream, err)
	}
	var out []string
	names := s.ConsumerNames(ctx)
	for n := range names.Name() {
		if p, ok := strings.CutPrefix(n, Durable("")); ok {
			out = append(out, p)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", t.RequestsStream, err)
	}
	slices.Sort(out)
	return out, nil
}
