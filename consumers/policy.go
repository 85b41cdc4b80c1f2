package consumers

import (
	"github.com/personaq/personaq/consumers/wire"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// policyFor resolves the policy a request runs under (RequestPolicy with
// the runtime's presets).
func (r *Runtime) policyFor(p *personaRuntime, req *schemas.PersonaRequest) (retry.Policy, error) {
	return wire.RequestPolicy(p.policy, req, r.presets)
}
