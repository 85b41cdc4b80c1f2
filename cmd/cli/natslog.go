package cli

import (
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// connLogOptions log the connection's state changes: a replica that lost
// NATS cannot settle (settles are confirmed and repeated) or heartbeat, so
// an operator needs to see when it went and came back.
func connLogOptions(log zerolog.Logger) []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err == nil {
				return // our own Close at shutdown
			}
			log.Warn().Err(err).Str("server", nc.ConnectedUrlRedacted()).Msg("NATS disconnected; reconnecting")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", nc.ConnectedUrlRedacted()).Uint64("reconnects", nc.Reconnects).Msg("NATS reconnected")
		}),
	}
}
