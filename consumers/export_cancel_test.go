package consumers

import (
	"context"

	"github.com/personaq/personaq/schemas"
)

// CreateRecord is the create-once write every ending of a request makes.
func (s *Outcomes) CreateRecord(ctx context.Context, ev *schemas.OutcomeEvent) (*schemas.OutcomeEvent, bool, error) {
	return s.create(ctx, ev)
}
