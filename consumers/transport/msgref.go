package transport

import (
	"github.com/nats-io/nats.go/jetstream"
)

// msgRef is what a subscription keeps of a fetched message once it is
// handed on: the reply subject its acks, naks and heartbeats go to, and its
// subject for error messages. Keeping the jetstream.Msg instead would keep
// nats.go's parsed header map (about 800 bytes for a persona request, more
// than the payload) for as long as the message's work runs.
type msgRef struct{ reply, subject string }

func refOf(m jetstream.Msg) msgRef { return msgRef{reply: m.Reply(), subject: m.Subject()} }

// Settle and heartbeat bodies, as the JetStream acknowledgement protocol
// (and nats.go's jetstream.Msg) sends them.
var (
	bodyAck      = []byte("+ACK")
	bodyNak      = []byte("-NAK")
	bodyProgress = []byte("+WPI")
)

// send publishes body to the message's reply subject without waiting for
// the server's reply, as jetstream.Msg's Ack, Nak and InProgress do.
func (s *subscription) send(r msgRef, body []byte) error {
	return s.cfg.JetStream.Conn().Publish(r.reply, body)
}
