package schemas

// Hooks for the external tests: the fast paths alone and the full
// (schema-validating) paths alone.
var (
	FastDecodeRequest = fastDecodeRequest
	FastDecodeOutcome = fastDecodeOutcome
)

func FullDecodeRequest(data []byte) (*PersonaRequest, error) {
	return decode[PersonaRequest](requestSchema, data)
}

func FullDecodeOutcome(data []byte) (*OutcomeEvent, error) {
	return decode[OutcomeEvent](outcomeSchema, data)
}
