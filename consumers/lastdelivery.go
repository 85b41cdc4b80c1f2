package consumers

import (
	"github.com/personaq/personaq/consumers/advisory"
	"github.com/personaq/personaq/retry"
	"github.com/personaq/personaq/schemas"
)

// defaultMaxDeliver is the consumer's MaxDeliver when a persona sets none
// (provisionConsumer applies the same default).
const defaultMaxDeliver = 50

// maxDeliver is the number of deliveries after which the server gives up
// on a message of this consumer; 0 when it never does (MaxDeliver < 0).
func maxDeliver(spec ConsumerSpec) uint64 {
	switch {
	case spec.MaxDeliver == 0:
		return defaultMaxDeliver
	case spec.MaxDeliver < 0:
		return 0
	}
	return uint64(spec.MaxDeliver)
}

// lastDelivery ends, unrun, the delivery the server makes for the last
// time: its delivery count reached the consumer's MaxDeliver, so whatever
// this delivery does short of settling (a crash, a hang, a release, a
// lease lost) would make the server give up on it and raise a
// MAX_DELIVERIES advisory that nothing guarantees is stored. On a
// limits-retention stream the trimmer would then purge it once the ack
// floor passes it, without a record. So the runtime quarantines it itself
// as max_deliveries, through the ordinary quarantine path (one record per
// message, keyed like the advisory listener's, a standing terminal record
// kept), and terms it. A crash-looping request is also caught here before
// it can crash this replica once more. The advisory listener stays the
// net for messages that never reach this stage.
func (r *Runtime) lastDelivery(st *attemptState) (ending, bool) {
	limit := maxDeliver(st.persona.spec)
	if limit == 0 || st.delivery.Delivered < limit {
		return ending{}, false
	}
	d := st.delivery
	st.log.Warn().Uint64("delivered", d.Delivered).Uint64("max_deliver", limit).
		Str("reason", string(schemas.ReasonMaxDeliveries)).
		Msg("last delivery the server makes (MaxDeliver reached); quarantined without running the handler")
	return quarantined(retry.Decision{
		Action: retry.ActionQuarantine, Reason: schemas.ReasonMaxDeliveries,
		Detail: advisory.LastDeliveryDetail(d.Delivered, d.Consumer, d.Stream, d.Sequence),
	}), true
}
