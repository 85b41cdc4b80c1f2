package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/personaq/personaq/schemas"
)

var (
	// ErrUnavailable is wrapped by every error that means Redis could not
	// be reached or could not serve the call right now: connection refused
	// or reset, dial/read/write timeouts, a closed client, pool timeouts,
	// and the transient server replies LOADING, READONLY, MASTERDOWN,
	// CLUSTERDOWN, TRYAGAIN, NOREPLICAS, BUSY and "max number of clients".
	// Each store's own sentinel (ledger.ErrUnavailable,
	// flow.ErrUnavailable) wraps it.
	ErrUnavailable = errors.New("redis unavailable")

	// ErrWrongType is wrapped when a store's key holds another Redis type,
	// for a store whose Errors name no WrongType of its own.
	ErrWrongType = errors.New("redis: key holds another type")

	// ErrInvalidConfig is wrapped by NewClientURL for a URL it cannot use.
	// It is schemas.ErrInvalidConfig, the same error in every personaq
	// package.
	ErrInvalidConfig = schemas.ErrInvalidConfig
)

// Unavailable reports whether err means Redis could not be reached or
// serve the call: it wraps ErrUnavailable, or it is the caller's own
// per-call deadline running out (a stopped server can outlast it, and a
// call that never reached go-redis is not wrapped). A cancellation
// (shutdown) is not: it says nothing about Redis.
func Unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// Errors are the sentinels one store wraps its Redis errors with.
type Errors struct {
	// Store names the store in messages ("ledger"). Required.
	Store string
	// Unavailable is the store's sentinel for an unreachable Redis; it
	// must wrap ErrUnavailable. Required.
	Unavailable error
	// WrongType is the store's sentinel for a key of another type (data
	// it cannot read). Default: ErrWrongType.
	WrongType error
}

// Wrap translates the error of one Redis call of client into the store's
// sentinels, naming the operation, and keeps the original in the chain
// for messages. When a Cluster client could not reach a node it also asks
// go-redis to reload the slot map: go-redis otherwise keeps sending a dead
// master's slots to it until its periodic reload (60 s by default), long
// after a replica took over.
func (e Errors) Wrap(client redis.UniversalClient, op string, err error) error {
	if err == nil {
		return nil
	}
	switch classify(err) {
	case canceled:
		return fmt.Errorf("%s: %s: %w", e.Store, op, err)
	case unavailable:
		if cc, ok := client.(*redis.ClusterClient); ok {
			cc.ReloadState(context.Background())
		}
		return fmt.Errorf("%w: %s: %w", e.Unavailable, op, err)
	case wrongType:
		wt := e.WrongType
		if wt == nil {
			wt = ErrWrongType
		}
		return fmt.Errorf("%w: %s: %w", wt, op, err)
	}
	return fmt.Errorf("%s: %s: %w", e.Store, op, err)
}

// class is what an error of one Redis call says about Redis.
type class int

const (
	// refused: the server answered the call with an error of its own (a
	// script's error, a bad argument): the call is wrong, not Redis.
	refused class = iota
	// canceled: the caller gave up (shutdown).
	canceled
	// unavailable: not reached, or not serving right now.
	unavailable
	// wrongType: a key holds another type.
	wrongType
)

// transientReplies are server error prefixes that mean "not now" rather
// than "this call is wrong".
var transientReplies = []string{
	"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ",
	"NOREPLICAS ", "BUSY ", "ERR max number of clients",
}

func classify(err error) class {
	if errors.Is(err, context.Canceled) {
		return canceled
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		// Not a server reply: network, timeout, closed client, pool, EOF.
		return unavailable
	}
	msg := rerr.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return unavailable
		}
	}
	if strings.Contains(msg, "WRONGTYPE ") {
		// Inside a script the reply reads "ERR Error running script …:
		// WRONGTYPE …" on some servers: not a prefix.
		return wrongType
	}
	return refused
}
