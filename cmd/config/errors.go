package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// ErrInvalid is wrapped by every configuration problem. Load returns all
// problems it finds at once (errors.Join of *FieldError), each naming its
// field by YAML path. It is schemas.ErrInvalidConfig, the configuration
// error of every personaq package: errors.Is matches either name.
var ErrInvalid = schemas.ErrInvalidConfig

// FieldError is one configuration problem.
type FieldError struct {
	// Field is the YAML path, e.g. "personas.planner.invoker.url", or the
	// environment variable for problems that have no YAML path.
	Field string
	// Line is the line in the YAML file, when known (0 otherwise).
	Line int
	// Message says what is wrong. It never contains a secret.
	Message string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// problems collects FieldErrors in the order they are found.
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *problems) addLine(field string, line int, format string, args ...any) {
	*p = append(*p, &FieldError{Field: field, Line: line, Message: fmt.Sprintf(format, args...)})
}

// addErr records err (from retry or handlers validation) under field: a
// *retry.FieldError's own field goes below it, so the message reads
// "invalid config: personas.p.policy.max_attempts: must be …". redact,
// when set, hides secrets the message quotes.
func (p *problems) addErr(field string, err error, redact func(string) string) {
	sub, msg := "", err.Error()
	if fe := (*retry.FieldError)(nil); errors.As(err, &fe) {
		sub, msg = fe.Field, fe.Message
	}
	if redact != nil {
		msg = redact(msg)
	}
	*p = append(*p, &FieldError{Field: join(field, sub), Message: msg})
}

func (p problems) err() error { return errors.Join(p...) }

// join appends a YAML path segment.
func join(path, key string) string {
	switch {
	case path == "":
		return key
	case key == "":
		return path
	}
	return path + "." + key
}
