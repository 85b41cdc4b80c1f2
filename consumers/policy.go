package consumers

import (
	"sync"

	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// policyFor resolves the policy a request runs under (RequestPolicy with
// the runtime's presets). A request that names no other preset and
// overrides nothing runs under its persona's policy as RequestPolicy
// resolves it: resolved once and shared (read only) by every such
// request, instead of a copy kept by each attempt while it runs.
func (r *Runtime) policyFor(p *personaRuntime, req *schemas.PersonaRequest) (*retry.Policy, error) {
	if (req.Policy == "" || req.Policy == p.policy.Name) && req.PolicyOverrides == nil && req.Budget == nil {
		pp := &p.plain
		pp.once.Do(func() { pp.policy, pp.err = wire.RequestPolicy(p.policy, &schemas.PersonaRequest{}, r.presets) })
		if pp.err != nil {
			return nil, pp.err
		}
		return &pp.policy, nil
	}
	pol, err := wire.RequestPolicy(p.policy, req, r.presets)
	if err != nil {
		return nil, err
	}
	return &pol, nil
}

// plainPolicy is a persona's policy as a request that overrides nothing
// runs under it, resolved on first use.
type plainPolicy struct {
	once   sync.Once
	policy retry.Policy
	err    error
}
