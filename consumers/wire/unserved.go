package wire

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Unserved is a requests subject that no persona consumer reads.
type Unserved struct {
	Persona string
	Subject string
	Pending uint64
	// Oldest is when its oldest request was stored.
	Oldest time.Time
}

// UnservedRequests lists requests waiting on subjects that no persona
// consumer serves (a typo in a persona name, or a persona not deployed).
func UnservedRequests(ctx context.Context, js jetstream.JetStream, t Topology) ([]Unserved, error) {
	t = t.WithDefaults()
	s, err := js.Stream(ctx, t.RequestsStream)
	if err != nil {
		return nil, fmt.Errorf("requests stream %s: %w", t.RequestsStream, err)
	}
	served, err := servedPersonas(ctx, js, t)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(t.RequestsPrefix+".>"))
	if err != nil {
		return nil, fmt.Errorf("requests stream %s subjects: %w", t.RequestsStream, err)
	}
	var out []Unserved
	for subj, n := range info.State.Subjects {
		persona := strings.TrimPrefix(subj, t.RequestsPrefix+".")
		if contains(served, persona) || n == 0 {
			continue
		}
		u := Unserved{Persona: persona, Subject: subj, Pending: n}
		if raw, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj)); err == nil {
			u.Oldest = raw.Time
		}
		out = append(out, u)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
