package consumers

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// newReplicaID names this replica to the others (the half-open probe's
// holder): host name and a random suffix.
func newReplicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// validateFlow checks a persona's flow control against the runtime's.
func validateFlow(cfg Config, p Persona) error {
	if p.Limiter != "" {
		if cfg.Limiter == nil {
			return fmt.Errorf("limiter: %q named but the runtime has no Limiter", p.Limiter)
		}
		if _, ok := cfg.Limiter.Limit(p.Limiter); !ok {
			return fmt.Errorf("limiter: unknown limiter %q (known: %s)", p.Limiter, strings.Join(cfg.Limiter.Names(), ", "))
		}
	}
	if err := p.Circuit.Validate(); err != nil {
		return err
	}
	if p.Circuit.On() && cfg.Circuits == nil {
		return errors.New("circuit: a circuit breaker needs the runtime's Circuits (Redis)")
	}
	return nil
}

// Consumer metadata keys for flow control (`persona ls` shows them).
const (
	metaLimiter = "personaq.limiter"
	metaCircuit = "personaq.circuit"
)

// addFlowMetadata writes the persona's limiter and circuit breaker into its
// consumer's metadata.
func addFlowMetadata(md map[string]string, p Persona) {
	if p.Limiter != "" {
		md[metaLimiter] = p.Limiter
	}
	if c := p.Circuit.WithDefaults(); c.On() {
		md[metaCircuit] = fmt.Sprintf("%d/%s", c.Failures, c.CoolDown)
	}
}

// FlowInfo is what a persona's consumer metadata says about its flow
// control: its limiter ("" none) and circuit breaker ("failures/cool-down",
// "" none).
func FlowInfo(md map[string]string) (limiter, circuit string) {
	return md[metaLimiter], md[metaCircuit]
}
