package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every configuration problem. Load returns all
// problems it finds at once (errors.Join of *FieldError), each naming its
// field by YAML path.
var ErrInvalid = errors.New("invalid config")

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

// addErr records err (from retry or handlers validation) under field, with
// the prefix those packages put on it taken off, so the message reads
// "invalid config: personas.p.policy.max_attempts: must be …".
func (p *problems) addErr(field string, sentinel, err error) {
	sub, msg := splitField(strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
	*p = append(*p, &FieldError{Field: join(field, sub), Message: msg})
}

func (p problems) err() error { return errors.Join(p...) }

// splitField splits "field: message" as retry and handlers format them.
// A message with no field part comes back whole.
func splitField(s string) (field, msg string) {
	f, m, ok := strings.Cut(s, ": ")
	if !ok || strings.ContainsAny(f, " \t") {
		return "", s
	}
	return f, m
}

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
