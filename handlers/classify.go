package handlers

import (
	"context"
	"errors"
	"net"
	"reflect"
	"syscall"
	"time"

	"github.com/personaq/personaq/retry"
)

// Classification is what Classify learned from an error.
type Classification struct {
	Class retry.Class
	// TypeNames are the simple type names in the error chain, outermost
	// meaningful first (wrappers from fmt and this package are skipped).
	// Only the first is matched against a policy's non-retryable list.
	TypeNames  []string
	RetryAfter time.Duration
	Feedback   string
}

// Typed lets an error name its type for non-retryable matching when the Go
// type name would not do (e.g. an HTTP 400 reported as "BadRequestError").
type Typed interface{ ErrorType() string }

// Classify maps err onto an outcome class. A nil error is ClassSucceeded.
func Classify(err error) Classification {
	if err == nil {
		return Classification{Class: retry.ClassSucceeded}
	}
	c := Classification{Class: classOf(err), TypeNames: TypeNames(err)}
	var e *Error
	if errors.As(err, &e) {
		c.RetryAfter, c.Feedback = e.RetryAfter, e.Feedback
	}
	return c
}

func classOf(err error) retry.Class {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Class
	case errors.Is(err, ErrPanic):
		return retry.ClassTerminal
	case errors.Is(err, context.DeadlineExceeded):
		return retry.ClassTimeout
	case isNetwork(err):
		return retry.ClassNetwork
	}
	return retry.ClassRetryable
}

// isNetwork reports connection refused/reset/aborted, unreachable hosts and
// DNS failures.
func isNetwork(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	for _, errno := range []syscall.Errno{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EPIPE,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// TypeNames lists the simple type names in err's chain (following Unwrap,
// including joined errors), skipping fmt's and this package's wrappers. An
// error implementing Typed contributes its ErrorType() name.
func TypeNames(err error) []string {
	var names []string
	walk(err, func(e error) {
		if n := typeName(e); n != "" {
			names = append(names, n)
		}
	})
	return names
}

func walk(err error, visit func(error)) {
	if err == nil {
		return
	}
	visit(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, visit)
		}
	}
}

func typeName(err error) string {
	if t, ok := err.(Typed); ok {
		return t.ErrorType()
	}
	if _, ok := err.(*Error); ok {
		return ""
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.PkgPath() + "." + t.Name() {
	case "fmt.wrapError", "fmt.wrapErrors", "errors.joinError", "errors.errorString", "fmt.errorString":
		return ""
	}
	return t.Name()
}
